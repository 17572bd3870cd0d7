"""RDMA ping between two nodes, driven from one thread over any pair of host bridges.

Node A writes a payload into node B's buffer by RDMA write with immediate data; B's receive
completes with the immediate, B checks the bytes and writes them back the same way; A checks
them. Only VIPL calls are used, so the same procedure runs over the Verilator ring's host
bridges and over Renode's monitor (``numavia.renode.robot_host``), which is how the Renode ring's
RDMA ping test and the Verilator path share one tested core.
"""

import random
from dataclasses import dataclass

from numavia import vipl
from numavia.base import regmap
from numavia.base.errors import NumaviaError
from numavia.base.via_descriptor import CONTROL_OP

#: Connection discriminator of the ping (any value both sides agree on).
PING_DISCRIMINATOR = 0x9196
_CYCLES = regmap.CARD.address("ctrl", "CYCLES_LO")


class PingError(NumaviaError):
    pass


@dataclass
class PingResult:
    size: int
    rounds: int
    round_trip_cycles: list  # card A's cycle counter around each round, as the host saw it


def _expect(ok, what):
    if not ok:
        raise PingError(what)


def _check_arrival(vi, recv, buffer, offset, data, immediate, who):
    got = vi.recv_wait()
    _expect(got is recv and got.errors == [], f"{who}: receive failed: {got.errors}")
    _expect(
        got.completed_op == "REMOTE_RDMA_WRITE" and got.immediate_data == immediate,
        f"{who}: expected an RDMA write with immediate {immediate:#x}, got {got.completed_op} "
        f"with {got.immediate_data:#x}",
    )
    _expect(buffer.read(len(data), offset) == data, f"{who}: the {len(data)} bytes written differ")


def _rdma_write(vi, buffer, size, remote_offset, immediate):
    remote = vi.remote_buffer
    sent = vi.post_send(
        vipl.Descriptor(
            CONTROL_OP.RDMA_WRITE,
            [(buffer.va, buffer.handle, size)],
            remote_va=remote.va + remote_offset,
            remote_handle=remote.handle,
            immediate=immediate,
        )
    )
    done = vi.send_wait()
    _expect(
        done is sent and done.errors == [] and done.length == size,
        f"VI {vi.number}: RDMA write failed: {done.errors or f'{done.length} of {size} bytes'}",
    )


def rdma_ping(nic_a, nic_b, *, size=64, rounds=2, seed=1, log=lambda message: None):
    """Connect a VI pair between ``nic_a`` and ``nic_b`` and ping ``rounds`` times with ``size``
    bytes each way, data checked on both sides; everything set up is released afterwards."""
    if not 1 <= size <= 64 * 1024:
        raise PingError(f"ping size {size} is not within 1..65536 bytes")
    if rounds < 1:
        raise PingError(f"at least one round is needed, not {rounds}")
    rng = random.Random(seed)
    nics = (nic_a, nic_b)
    ptags = [nic.create_ptag() for nic in nics]
    # Each side's buffer holds its outgoing payload at 0 and what arrives at ``size``.
    buffers = [nic.alloc(2 * size) for nic in nics]
    for nic, ptag, buf in zip(nics, ptags, buffers):
        nic.register(buf, ptag, rdma_write=True)
    vis = [nic.create_vi(ptag) for nic, ptag in zip(nics, ptags)]
    try:
        log(f"connecting node {nic_a.node_id} to node {nic_b.node_id}")
        vipl.connect_pair(vis[0], vis[1], PING_DISCRIMINATOR, client_buffer=buffers[0], server_buffer=buffers[1])
        result = PingResult(size, rounds, [])
        for n in range(rounds):
            data = bytes(rng.randrange(256) for _ in range(size))
            immediate = 0x9100_0000 | n
            recvs = [vi.post_recv(vipl.Descriptor(segments=[])) for vi in vis]
            start = nic_a.bridge.read(nic_a.card_base + _CYCLES)
            buffers[0].write(data)
            _rdma_write(vis[0], buffers[0], size, size, immediate)
            _check_arrival(vis[1], recvs[1], buffers[1], size, data, immediate, f"node {nic_b.node_id}")
            buffers[1].write(data)
            _rdma_write(vis[1], buffers[1], size, size, immediate)
            _check_arrival(vis[0], recvs[0], buffers[0], size, data, immediate, f"node {nic_a.node_id}")
            cycles = (nic_a.bridge.read(nic_a.card_base + _CYCLES) - start) & 0xFFFF_FFFF
            result.round_trip_cycles.append(cycles)
            log(f"round {n + 1}/{rounds}: {size} bytes there and back, {cycles} cycles")
        return result
    finally:
        for vi in vis:
            if vi.peer is not None:
                vi.disconnect()
        for vi in vis:
            vipl.VipDestroyVi(vi)
        for nic, buf, ptag in zip(nics, buffers, ptags):
            vipl.VipDeregisterMem(nic, buf.handle)
            nic.space.free(buf)
            vipl.VipDestroyPtag(nic, ptag)
