"""Descriptor fetcher: control, address and data segments from host memory; format and bus errors;
descriptors that run past their VI's descriptor area; a small descriptor read in one burst, no word
read twice and none past the area."""

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation
from support.wishbone_sram import OnSram, load

from numavia.base.via_descriptor import (
    CONTROL_OP,
    CONTROL_SEGMENT,
    CONTROL_UNDEFINED_MASK,
    DescriptorError,
    decode_descriptor,
    descriptor_size,
    encode_descriptor,
)
from numavia.gateware.bfm import send
from numavia.gateware.via_descriptor_fetch import FETCH_DMA, FETCH_FORMAT, FETCH_OK, DescriptorFetcher

BASE = 0x6000_0000
SIZE = 2048


def run(descriptors, fetch_addrs, *, area_end=BASE + SIZE, reads=None):
    """Fetch each of ``fetch_addrs``; ``reads``, if given, gets the byte address of every word the
    bus delivered and, as ``None``, each start of a bus cycle."""
    top = OnSram(DescriptorFetcher(max_segments=4), base=BASE, size=SIZE)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    out = []

    async def monitor(ctx):
        bus = top.dut.bus
        cyc = 0
        async for _, _, was_cyc, stb, ack, adr in ctx.tick().sample(bus.cyc, bus.stb, bus.ack, bus.adr):
            if was_cyc and not cyc:
                reads.append(None)
            if was_cyc and stb and ack:
                reads.append(adr * 4)
            cyc = was_cyc

    async def bench(ctx):
        for addr, data in descriptors:
            load(ctx, top.sram, addr, data)
        f = top.dut
        for addr in fetch_addrs:
            segments = {}
            await send(ctx, f.cmd, {"addr": addr, "area_end": area_end})
            ctx.set(f.result.ready, 1)
            for _ in range(500):
                if ctx.get(f.seg_write):
                    seg = ctx.get(f.seg_data)
                    segments[ctx.get(f.seg_index)] = (seg.va, seg.handle, seg.length)
                if ctx.get(f.result.valid):
                    status = ctx.get(f.result.payload)
                    await ctx.tick()
                    break
                await ctx.tick()
            ctx.set(f.result.ready, 0)
            control = ctx.get(f.control)
            address = ctx.get(f.address)
            out.append((status, control, address, ctx.get(f.seg_count), [segments[i] for i in sorted(segments)]))

    sim.add_testbench(bench)
    if reads is not None:
        sim.add_process(monitor)
    run_simulation(sim)
    return out


SEGS = [(0x7F00_0000_1003, 5, 100), (0x2000, 6, 0), (0x1234_5678_9ABC, 7, 65536)]


def test_send_descriptor_with_segments():
    d = encode_descriptor(CONTROL_OP.SENDRECV, SEGS, immediate=0xCAFE, next_va=0x1111_2222_3333)
    ((status, control, _, count, segs),) = run([(BASE + 0x40, d)], [BASE + 0x40])
    assert status == FETCH_OK and count == 3 and segs == SEGS
    assert control.seg_count == 3 and control.control.immediate == 1 and control.immediate_data == 0xCAFE
    assert control.next_va == 0x1111_2222_3333


def test_rdma_descriptor_reads_the_address_segment():
    d = encode_descriptor(CONTROL_OP.RDMA_READ, SEGS[:1], remote_va=0xABCD_0000_0010, remote_handle=9)
    ((status, control, address, count, segs),) = run([(BASE, d)], [BASE])
    assert status == FETCH_OK and control.control.op == CONTROL_OP.RDMA_READ
    assert (address.remote_va, address.remote_handle) == (0xABCD_0000_0010, 9)
    assert count == 1 and segs == SEGS[:1]


def test_too_many_segments_or_bad_op_is_a_format_error():
    many = encode_descriptor(CONTROL_OP.SENDRECV, SEGS * 2)
    bad_op = bytearray(encode_descriptor(CONTROL_OP.SENDRECV, []))
    bad_op[14] = 3
    out = run([(BASE, many), (BASE + 0x200, bytes(bad_op))], [BASE, BASE + 0x200])
    assert [o[0] for o in out] == [FETCH_FORMAT, FETCH_FORMAT]


def test_control_bits_no_version_defines_are_a_format_error():
    """Each undefined CONTROL bit alone is refused, as the host's decoder refuses it; the defined
    ones (OP, IMMEDIATE) pass."""
    field = CONTROL_SEGMENT.field("CONTROL")
    undefined = [1 << b for b in range(8 * field.size) if CONTROL_UNDEFINED_MASK >> b & 1]
    assert undefined and not CONTROL_UNDEFINED_MASK & (field.bit("OP").mask | field.bit("IMMEDIATE").mask)
    descriptors = []
    for i, bit in enumerate([0, *undefined]):
        d = bytearray(encode_descriptor(CONTROL_OP.RDMA_WRITE, SEGS[:1], immediate=7, remote_va=0x40, remote_handle=1))
        control = int.from_bytes(d[field.offset : field.offset + field.size], "little") | bit
        d[field.offset : field.offset + field.size] = control.to_bytes(field.size, "little")
        descriptors.append((BASE + 0x80 * i, bytes(d)))
        if bit:
            with pytest.raises(DescriptorError, match="not defined"):
                decode_descriptor(bytes(d))
    out = run(descriptors, [addr for addr, _ in descriptors])
    assert [o[0] for o in out] == [FETCH_OK] + [FETCH_FORMAT] * len(undefined)


def test_address_outside_memory_is_a_dma_error_and_the_fetcher_recovers():
    ok = encode_descriptor(CONTROL_OP.SENDRECV, SEGS[:1])
    out = run([(BASE, ok)], [BASE + 0x4000, BASE])
    assert out[0][0] == FETCH_DMA and out[1][0] == FETCH_OK and out[1][4] == SEGS[:1]


def test_a_descriptor_must_end_inside_its_vis_area():
    """The area's end is checked against the descriptor's real length (address segment and data
    segments counted) once the control segment has said it: exactly fitting is fine, a byte short
    is a format error, and nothing past the area is read."""
    sendrecv = encode_descriptor(CONTROL_OP.SENDRECV, SEGS)
    read = encode_descriptor(CONTROL_OP.RDMA_READ, SEGS[:1], remote_va=0x10, remote_handle=9)
    assert len(sendrecv) == descriptor_size(3, rdma=False) and len(read) == descriptor_size(1, rdma=True)
    for desc in (sendrecv, read):
        at = BASE + 0x100
        (fits,) = run([(at, desc)], [at], area_end=at + len(desc))
        (short,) = run([(at, desc)], [at], area_end=at + len(desc) - 1)
        assert fits[0] == FETCH_OK and fits[3] == len(fits[4])
        assert short[0] == FETCH_FORMAT and short[3] == 0 and short[4] == []
        reads = []
        run([(at, desc)], [at], area_end=at + len(desc) - 1, reads=reads)
        assert max(r for r in reads if r is not None) < at + len(desc) - 1


def test_a_small_descriptor_is_one_burst_and_no_word_is_read_twice():
    """An RDMA write with one data segment (64 bytes): one bus cycle, every word once. A send with
    three segments (80 bytes): the first burst, then only the words past it. A send with one segment
    (48 bytes) at the end of its area: the first burst stops at the area's end."""
    write = encode_descriptor(CONTROL_OP.RDMA_WRITE, SEGS[:1], remote_va=0x10, remote_handle=9)
    send3 = encode_descriptor(CONTROL_OP.SENDRECV, SEGS)
    send1 = encode_descriptor(CONTROL_OP.SENDRECV, SEGS[:1])
    at = BASE + 0x100
    for desc, area_end, bursts in ((write, BASE + SIZE, 1), (send3, BASE + SIZE, 2), (send1, at + len(send1), 1)):
        reads = []
        ((status, _, _, count, segs),) = run([(at, desc)], [at], area_end=area_end, reads=reads)
        words = [r for r in reads if r is not None]
        assert status == FETCH_OK and segs == decode_descriptor(desc)["segments"] and count == len(segs)
        assert words == list(range(at, at + 4 * len(words), 4)) and len(words) * 4 >= len(desc)
        assert words[-1] < area_end
        assert reads.count(None) == bursts
