"""Every VI of a card at once between two nodes, each pair streaming sends and RDMA writes with
immediate data, then one RDMA write into another protection tag's buffer. The faulty-link test
runs it at the ECPIX-5's 64 VIs, test_soak at the default card's; `make soak` at the register map's 256
(28 to over 42 minutes on 2 cores, the 256-VI model's build included: too long for the test suite)."""

from numavia import vipl
from numavia.base import params
from numavia.base.via_descriptor import CONTROL_OP
from numavia.hostmem import PAGE_SIZE
from numavia.vipl import Descriptor, VipRecvDone, VipSendDone
from support.via_system import payload

LOAD_SIZE = 3000  # 3 frames at MTU 1500
LOAD_ROUNDS = 2
DISCRIMINATOR_BASE = 500


def load_size(vis):
    """Bytes of each message: LOAD_SIZE, or less where the VIs' buffers would take more than a
    quarter of a node's host memory (256 VIs: 1 KiB messages, one frame each)."""
    return min(LOAD_SIZE, params.HOST_MEM_SIZE // 4 // vis // (2 * LOAD_ROUNDS))


def every_vi_at_once(session, vis):
    """All ``vis`` VI pairs connected between nodes 0 and 1 of ``session``, spread over four
    protection tags a node with buffers of their own. Each pair sends and RDMA-writes (with
    immediate data) LOAD_ROUNDS times, everything posted before anything is waited for; every byte
    is checked where its own VI put it and every completion comes once. Then VI 0's RDMA write
    into VI 1's buffer (another tag) fails VI 0 alone and writes nothing. Raises AssertionError
    naming the VI that went wrong; returns both nodes' VIA counters."""
    nics = [session.nic(0), session.nic(1)]
    assert nics[0].via_reg("VI_COUNT") == nics[1].via_reg("VI_COUNT") == vis
    size = load_size(vis)
    tags = [[nic.create_ptag() for _ in range(min(vis, 4))] for nic in nics]
    pairs = []  # (vi0, vi1, send buffer on node 0, receive buffer on node 1)
    for k in range(vis):
        bufs = []
        for node, nic in enumerate(nics):
            buf = nic.alloc(2 * LOAD_ROUNDS * size, offset=0x40 * k % PAGE_SIZE)
            nic.register(buf, tags[node][k % len(tags[node])], rdma_write=True)
            bufs.append(buf)
        vi0 = nics[0].create_vi(tags[0][k % len(tags[0])])
        vi1 = nics[1].create_vi(tags[1][k % len(tags[1])])
        vipl.connect_pair(vi0, vi1, DISCRIMINATOR_BASE + k)
        pairs.append((vi0, vi1, *bufs))

    def data(k, r, kind):
        return payload(size, 10_000 * k + 10 * r + kind)

    for r in range(LOAD_ROUNDS):
        # Everything posted on every VI before anything is waited for.
        posted = []
        for k, (vi0, vi1, src, dst) in enumerate(pairs):
            send_at, write_at = 2 * r * size, (2 * r + 1) * size
            src.write(data(k, r, 0), send_at)
            src.write(data(k, r, 1), write_at)
            recvs = [vi1.post_recv(Descriptor(segments=[(dst.va + send_at, dst.handle, size)]))]
            recvs.append(vi1.post_recv(Descriptor(segments=[(dst.va + write_at, dst.handle, 4)])))
            vi0.post_send(Descriptor(segments=[(src.va + send_at, src.handle, size)]))
            write = Descriptor(
                CONTROL_OP.RDMA_WRITE,
                [(src.va + write_at, src.handle, size)],
                remote_va=dst.va + write_at,
                remote_handle=dst.handle,
                immediate=k,
            )
            vi0.post_send(write)
            posted.append(recvs)
        for k, ((vi0, vi1, *_), recvs) in enumerate(zip(pairs, posted)):
            sent = vi1.recv_wait()
            assert sent is recvs[0] and sent.errors == [] and sent.length == size, f"VI {k}"
            written = vi1.recv_wait()
            assert written is recvs[1] and written.immediate_data == k, f"VI {k}"
            assert written.completed_op == "REMOTE_RDMA_WRITE", f"VI {k}"
            assert vi0.send_wait().errors == [] and vi0.send_wait().errors == [], f"VI {k}"
    for k, (vi0, vi1, _, dst) in enumerate(pairs):  # every byte, where its own VI put it
        for r in range(LOAD_ROUNDS):
            assert dst.read(size, 2 * r * size) == data(k, r, 0), f"VI {k} round {r} send"
            assert dst.read(size, (2 * r + 1) * size) == data(k, r, 1), f"VI {k} round {r} write"
        assert VipRecvDone(vi1) is None and VipSendDone(vi0) is None, f"VI {k}: a completion twice"

    # A write into another tag's buffer: refused at the target, its VI alone fails.
    (bad0, _, src, _), (_, _, _, other) = pairs[0], pairs[1]
    before = other.read(size)
    bad0.post_send(
        Descriptor(CONTROL_OP.RDMA_WRITE, [(src.va, src.handle, 64)], remote_va=other.va, remote_handle=other.handle)
    )
    assert bad0.send_wait().errors == ["RDMA_PROTECTION_ERROR"] and bad0.state == "ERROR", "VI 0's bad write"
    assert other.read(size) == before, "the refused write changed VI 1's buffer"
    assert all(vi0.state == vi1.state == "CONNECTED" for vi0, vi1, *_ in pairs[1:]), "a VI besides VI 0 failed"
    return nics[0].counters(), nics[1].counters()


def only_vi0_refused(c0, c1):
    """Nodes 0 and 1's VIA counters after ``every_vi_at_once``: one send failed on node 0 (VI 0's
    write into another tag's buffer), refused by node 1's protection check, and nothing else."""
    return c0["TX_ERRORS"] == 1 and c1["TX_ERRORS"] == 0 and c1["RX_PROTECTION"] >= 1
