"""Reliable delivery on a faulty link: with frames lost, corrupted, duplicated and reordered by the
simulated switch, every message arrives exactly once, in order, byte for byte (real RTL +
firmware, two nodes)."""

import pytest
from support.ring_sim import build
from support.via_system import Pair, payload, session

from numavia import vipl
from numavia.base import params, regmap
from numavia.base.via_descriptor import CONTROL_OP
from numavia.cluster_session import ClusterSession
from numavia.gateware.card import CardConfig
from numavia.hostmem import PAGE_SIZE
from numavia.vipl import Descriptor, VipRecvDone, VipSendDone

pytestmark = pytest.mark.slow

MESSAGES = 48
SIZE = 6000  # 5 frames each at MTU 1500
BATCH = 8


def exchange(pair, tag):
    """MESSAGES sends, RDMA writes with immediate data and RDMA reads, checked as they land."""
    vi0, vi1 = pair.connect()
    b0, b1 = pair.buffers
    slot = lambda i: (i % BATCH) * (SIZE + 16)
    for start in range(0, MESSAGES, BATCH):
        batch = range(start, start + BATCH)
        recvs = [vi1.post_recv(Descriptor(segments=[(b1.va + slot(i), b1.handle, SIZE)])) for i in batch]
        for i in batch:
            b0.write(payload(SIZE, tag + i), slot(i))
            vi0.post_send(Descriptor(segments=[(b0.va + slot(i), b0.handle, SIZE)], immediate=i))
        for i, r in zip(batch, recvs):
            got = vi1.recv_wait()
            assert got is r and got.errors == [] and got.immediate_data == i, f"message {i}"
            assert b1.read(SIZE, slot(i)) == payload(SIZE, tag + i), f"message {i}"
        for _ in batch:
            assert vi0.send_wait().errors == []
    # RDMA writes, each announced by immediate data: in order, each once.
    base = 200_000
    recvs = [vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, 4)])) for _ in range(BATCH)]
    for i in range(BATCH):
        b0.write(payload(SIZE, tag + 1000 + i), 100_000 + slot(i))
        vi0.post_send(
            Descriptor(
                CONTROL_OP.RDMA_WRITE,
                [(b0.va + 100_000 + slot(i), b0.handle, SIZE)],
                remote_va=b1.va + base + slot(i),
                remote_handle=b1.handle,
                immediate=100 + i,
            )
        )
    for i, r in enumerate(recvs):
        got = vi1.recv_wait()
        assert got is r and got.immediate_data == 100 + i and got.completed_op == "REMOTE_RDMA_WRITE"
        assert b1.read(SIZE, base + slot(i)) == payload(SIZE, tag + 1000 + i)
    for _ in range(BATCH):
        assert vi0.send_wait().errors == []
    # RDMA reads of what was just written.
    for i in range(4):
        d = vi0.post_send(
            Descriptor(
                CONTROL_OP.RDMA_READ,
                [(b0.va + 50_000, b0.handle, SIZE)],
                remote_va=b1.va + base + slot(i),
                remote_handle=b1.handle,
            )
        )
        assert vi0.send_wait() is d and d.errors == []
        assert b0.read(SIZE, 50_000) == payload(SIZE, tag + 1000 + i)
    # No duplicate arrived late: a spare receive stays pending, the sequence numbers add up.
    spare = vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, 8)]))
    frames_per_message = -(-SIZE // 1458)
    assert pair.nics[1].vi_reg(vi1.number, "RX_PSN") == (MESSAGES + BATCH) * frames_per_message + 4
    assert VipRecvDone(vi1) is None and not spare.done
    return vi0, vi1


@pytest.mark.parametrize(
    "loss,corrupt,duplicate,reorder,seed", [(0.01, 0.001, 0.01, 0.01, 7), (0.02, 0.02, 0.02, 0.02, 11)]
)
def test_every_message_exactly_once_in_order(tmp_path_factory, loss, corrupt, duplicate, reorder, seed):
    with session(
        tmp_path_factory,
        f"faulty-{seed}",
        eth_loss=loss,
        eth_corrupt=corrupt,
        eth_duplicate=duplicate,
        eth_reorder=reorder,
        eth_seed=seed,
    ) as s:
        pair = Pair(s)
        exchange(pair, seed)
        c0, c1 = pair.counters(0), pair.counters(1)
    total = s.link_totals()
    assert total["lost"] > 0 and total["duplicated"] + total["reordered"] > 0, total  # the faults happened ...
    assert c0["TX_TIMEOUTS"] + c0["TX_NAK_SEQUENCE"] + c1["TX_TIMEOUTS"] + c1["TX_NAK_SEQUENCE"] > 0
    assert c0["RX_BAD_FCS"] + c1["RX_BAD_FCS"] == total["corrupted"]  # ... every corrupted frame was caught
    if corrupt >= 0.01:
        assert total["corrupted"] > 0
    assert c0["TX_ERRORS"] == c1["TX_ERRORS"] == 0


LOAD_SIZE = 3000  # 3 frames at MTU 1500
LOAD_ROUNDS = 2


def load_size(vis):
    """Bytes of each message: LOAD_SIZE, or less where the VIs' buffers would take more than a
    quarter of a node's host memory (256 VIs: 1 KiB messages, one frame each)."""
    return min(LOAD_SIZE, params.HOST_MEM_SIZE // 4 // vis // (2 * LOAD_ROUNDS))


@pytest.mark.parametrize("vis", [CardConfig.via_vis, regmap.VI_CAPACITY])
def test_every_vi_at_once_on_a_faulty_link_keeps_to_its_own_memory(tmp_path_factory, vis):
    """Every VI the card has (the default card's, and as many as the register map holds), connected
    between the two nodes at once and each streaming sends and RDMA writes with immediate data,
    under 1 % loss, 0.1 % corruption, duplication and reordering: every byte lands where its VI
    sent it, every completion comes once. The VI pairs are spread over protection tags, each with
    buffers of its own; then an RDMA write naming another tag's buffer fails its VI alone and
    touches nothing."""
    with ClusterSession(
        build(2, via_vis=vis),
        tmp_path_factory.mktemp(f"every-vi-{vis}"),
        eth_loss=0.01,
        eth_corrupt=0.001,
        eth_duplicate=0.01,
        eth_reorder=0.01,
        eth_seed=23,
    ) as s:
        nics = [s.nic(0), s.nic(1)]
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
            vipl.connect_pair(vi0, vi1, 500 + k)
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
            Descriptor(
                CONTROL_OP.RDMA_WRITE, [(src.va, src.handle, 64)], remote_va=other.va, remote_handle=other.handle
            )
        )
        assert bad0.send_wait().errors == ["RDMA_PROTECTION_ERROR"] and bad0.state == "ERROR"
        assert other.read(size) == before
        assert all(vi0.state == vi1.state == "CONNECTED" for vi0, vi1, *_ in pairs[1:])
        c0, c1 = nics[0].counters(), nics[1].counters()
    total = s.link_totals()
    assert total["lost"] > 0 and total["duplicated"] + total["reordered"] > 0, total
    assert c0["RX_BAD_FCS"] + c1["RX_BAD_FCS"] == total["corrupted"]
    assert c1["RX_PROTECTION"] >= 1 and c0["TX_ERRORS"] == 1 and c1["TX_ERRORS"] == 0  # the bad VI alone
