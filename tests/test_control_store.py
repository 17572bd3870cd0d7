"""Control store loading over registers, read-back, refusal while loaded, and the sequencer's
behaviour before the store is loaded (requests answered NOT_READY, misses completed in error)."""

from pathlib import Path

from amaranth.sim import Simulator
from support.cosim import packet_fields
from support.sim import run_simulation

from numavia.base import regmap
from numavia.base.microcode import isa
from numavia.base.microcode.assembler import assemble
from numavia.base.sci_packet import Command, Packet, PacketType, Status
from numavia.gateware.bfm import recv, send
from numavia.gateware.bfm import wishbone_read as read
from numavia.gateware.bfm import wishbone_write as write
from numavia.gateware.coherence_engine import CoherenceEngine
from numavia.gateware.host_port import HostAddressMap
from numavia.gateware.local_side import CacheGeometry

PROGRAM = assemble(Path(isa.__file__).with_name("sci.uasm").read_text())
RAC = regmap.RAC


def reg(name):
    return RAC.register(name).offset


def simulate(testbench, program=()):
    amap = HostAddressMap(slice_bytes=4096, max_nodes=4, private_bytes=256)
    dut = CoherenceEngine(amap, CacheGeometry(2, 2), list(program))
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        ctx.set(dut.node_id, 1)
        await testbench(ctx, dut, amap)

    sim.add_testbench(bench)
    run_simulation(sim)


def test_image_loads_reads_back_and_is_locked_once_loaded():
    words = PROGRAM.words[:40]

    async def tb(ctx, dut, amap):
        bus = dut.rac_bus
        assert await read(ctx, bus, reg("UCODE_DEPTH")) == isa.CONTROL_STORE_DEPTH
        await write(ctx, bus, reg("UCODE_ADDR"), 0)
        for w in words:
            await write(ctx, bus, reg("UCODE_WDATA_LO"), w & 0xFFFFFFFF)
            await write(ctx, bus, reg("UCODE_WDATA_HI"), w >> 32)
        assert await read(ctx, bus, reg("UCODE_POS")) == len(words)
        back = []
        for a in range(len(words)):
            await write(ctx, bus, reg("UCODE_ADDR"), a)
            back.append(await read(ctx, bus, reg("UCODE_RDATA_LO")) | await read(ctx, bus, reg("UCODE_RDATA_HI")) << 32)
        assert back == words
        await write(ctx, bus, reg("CTRL"), 1)
        status = await read(ctx, bus, reg("STATUS"))
        assert status & 1 and not status & 2
        await write(ctx, bus, reg("UCODE_ADDR"), 0)
        await write(ctx, bus, reg("UCODE_WDATA_LO"), 0)
        await write(ctx, bus, reg("UCODE_WDATA_HI"), 0)  # refused: the store is in use
        assert await read(ctx, bus, reg("STATUS")) & 2
        assert await read(ctx, bus, reg("UCODE_RDATA_LO")) == words[0] & 0xFFFFFFFF

    simulate(tb)


def test_before_loading_requests_get_not_ready_and_misses_fail():
    async def tb(ctx, dut, amap):
        request = Packet(target=1, source=2, ptype=PacketType.REQUEST, cmd=Command.MREAD, tid=3, addr=1 << 26 | 0x40)
        await send(ctx, dut.recv_header, packet_fields(request))
        answer = await recv(ctx, dut.send_header)
        assert (answer.target, answer.ptype, answer.status, answer.tid) == (2, PacketType.RESPONSE, Status.NOT_READY, 3)
        # A read of another node's line misses and completes with an error, one beat per word.
        await send(ctx, dut.host.req, {"addr": 2 * amap.slice_bytes, "write": 0, "count": 2})
        beats = [await recv(ctx, dut.host.resp) for _ in range(2)]
        assert all(b.error for b in beats) and beats[1].last
        assert await read(ctx, dut.rac_bus, reg("NOT_READY_REPLIES")) == 1
        # Own lines in HOME state do not need the sequencer: they work before loading.
        await send(ctx, dut.host.req, {"addr": 1 * amap.slice_bytes, "write": 1, "count": 1})
        await send(ctx, dut.host.wdata, {"data": 0x55, "be": 0xF})
        beat = await recv(ctx, dut.host.resp)
        assert not beat.error

    simulate(tb, PROGRAM.words)
