"""Helpers for the VIA system tests: a two-node cluster session with connected VIs and buffers."""

import random
import threading
import time

from numavia import vipl
from numavia.base import via_mailbox
from numavia.cluster_session import ClusterSession
from numavia.vipl import ViplError
from support.ring_sim import build


class Pair:
    """Two nodes, each with a protection tag and a registered buffer; `connect` makes VI pairs."""

    def __init__(self, session, *, buffer_size=256 * 1024):
        self.session = session
        self.nics = [session.nic(0), session.nic(1)]
        self.ptags = [n.create_ptag() for n in self.nics]
        self.buffers = []
        for i, (nic, ptag) in enumerate(zip(self.nics, self.ptags)):
            buf = nic.alloc(buffer_size, offset=0x123 + 0x40 * i)
            nic.register(buf, ptag, rdma_write=True, rdma_read=True)
            self.buffers.append(buf)
        self._discriminator = 100

    def connect(self, *, send_cq=(None, None), recv_cq=(None, None), offer=True):
        """A connected VI on each node (client on node 0); returns (vi0, vi1)."""
        vi0 = self.nics[0].create_vi(self.ptags[0], send_cq=send_cq[0], recv_cq=recv_cq[0])
        vi1 = self.nics[1].create_vi(self.ptags[1], send_cq=send_cq[1], recv_cq=recv_cq[1])
        self._discriminator += 1
        vipl.connect_pair(
            vi0,
            vi1,
            self._discriminator,
            client_buffer=self.buffers[0] if offer else None,
            server_buffer=self.buffers[1] if offer else None,
        )
        return vi0, vi1

    def counters(self, node):
        return self.nics[node].counters()


def session(tmp_path_factory, name, **harness_kwargs):
    return ClusterSession(build(2), tmp_path_factory.mktemp(name), **harness_kwargs)


def payload(size, seed):
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(size))


def split(offset, size, parts, seed):
    """``size`` bytes from ``offset`` as ``parts`` (offset, length) pieces with gaps between them."""
    rng = random.Random(seed)
    if size < parts:
        parts = max(1, size)
    cuts = sorted(rng.sample(range(1, size), parts - 1)) if parts > 1 else []
    bounds = [0, *cuts, size]
    return [(offset + lo + 7 * i, hi - lo) for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]


def segments(buffer, pieces):
    return [(buffer.va + off, buffer.handle, n) for off, n in pieces]


def write_pieces(buffer, pieces, data):
    pos = 0
    for off, n in pieces:
        buffer.write(data[pos : pos + n], off)
        pos += n


def read_pieces(buffer, pieces):
    return b"".join(buffer.read(n, off) for off, n in pieces)


def release(pair, *vis):
    """Disconnect and free VIs so later tests have some."""
    for vi in vis:
        vi.disconnect()
    for vi in vis:
        for _ in range(100):
            try:
                vipl.VipDestroyVi(vi)
                break
            except ViplError as e:
                if e.result != "INVALID_STATE":
                    raise


def check_wake_cq_ping_pong(pair, *, iterations):
    """Run the benchmark agents' send/receive ping-pong on a fresh VI pair whose receives complete
    into a completion queue on each node, each agent sleeping on its queue (BENCH's WAKE_CQ), and
    check what the firmware and the card did; the VIs and queues are freed afterwards."""
    cqs = [nic.create_cq(16) for nic in pair.nics]
    vi0, vi1 = pair.connect(recv_cq=tuple(cqs))
    descs = [nic.memory.pages(1)[0] for nic in pair.nics]

    def bench(node, vi, wake_cq, allow=("SUCCESS",)):
        buf = pair.buffers[node]
        return pair.nics[node].command(
            "BENCH",
            allow=allow,
            extra_words={via_mailbox.BENCH_ARG_WAKE_CQ: wake_cq},
            role=1 if node == 0 else 0,
            op=via_mailbox.BENCH_OP.SEND_RECV,
            vi=vi.number,
            size=4,
            iterations=iterations,
            buf_va_lo=buf.va,
            buf_va_hi=buf.va >> 32,
            buf_handle=buf.handle,
            buf_pa=buf.pa(0),
            desc=descs[node],
            timeout_us=5_000_000,
        )

    # A queue that does not take the VI's receives is refused before anything is posted.
    other = pair.nics[1].create_cq(4)
    assert bench(1, vi1, other.id + 1, allow=("INVALID_PARAMETER",))[0] == "INVALID_PARAMETER"
    assert vi1.nic.vi_reg(vi1.number, "QUEUE_STATUS") == 0
    results = {}
    responder = threading.Thread(target=lambda: results.update({1: bench(1, vi1, cqs[1].id + 1)}))
    responder.start()
    deadline = time.monotonic() + 120
    while vi1.nic.vi_reg(vi1.number, "QUEUE_STATUS") >> 16 < 1:  # its first receive is posted
        assert time.monotonic() < deadline and responder.is_alive(), results
        time.sleep(0.01)
    results[0] = bench(0, vi0, cqs[0].id + 1)
    responder.join()
    for node, nic in enumerate(pair.nics):
        result, r = results[node]
        assert result == "SUCCESS" and r["cycles_lo"] > 0
        # Every receive put one entry into the node's queue, and the agent took them all.
        tail = nic.cq_reg(cqs[node].id, "TAIL")
        assert tail == iterations and nic.cq_reg(cqs[node].id, "HEAD") == tail
        assert nic.via_reg("CQ_NOTIFIED") == 0  # every notification taken
    # The responder waited for every message: it slept at least once per message (POLLS: sleeps).
    assert results[1][1]["polls"] >= iterations
    vipl.VipDestroyCQ(other)
    release(pair, vi0, vi1)
    for cq in cqs:
        vipl.VipDestroyCQ(cq)
