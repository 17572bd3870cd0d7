"""Helpers for the VIA system tests: a two-node cluster session with connected VIs and buffers."""

import random

from numavia import vipl
from numavia.cluster_session import ClusterSession
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
