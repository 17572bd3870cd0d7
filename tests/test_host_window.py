"""Host window: the card's DMA reaches host memory, bursts at full rate; anything else answers err."""

import pytest
from amaranth import Module
from amaranth.lib import wiring
from support.amaranth_helpers import rejected
from support.sim import run_testbench
from support.wishbone_sram import WishboneSRAM, dump, load_words

from numavia.gateware import wishbone_burst
from numavia.gateware.bfm import BusError, wishbone_burst_read, wishbone_burst_write, wishbone_read, wishbone_write
from numavia.gateware.host_window import HostWindow

BASE = 0x6000_0000
SIZE = 0x400


class OnHostMemory(wiring.Component):
    """An initiator port through the window onto host memory; ``reached``: the memory has seen a
    request since the start."""

    def __init__(self):
        self.window = HostWindow(addr_width=30, base=BASE, size=SIZE)
        self.memory = WishboneSRAM(base=BASE, size=SIZE)
        super().__init__({"bus": wiring.In(wishbone_burst.Signature(addr_width=30)), "reached": wiring.Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = self.window
        m.submodules.memory = self.memory
        wiring.connect(m, wiring.flipped(self.bus), self.window.initiator)
        wiring.connect(m, self.window.bus, self.memory.bus)
        m.d.sync += self.reached.eq(self.reached | self.memory.bus.cyc | self.memory.bus.stb)
        return m


def run(testbench):
    run_testbench(OnHostMemory(), testbench)


def test_bursts_inside_go_through_a_word_a_cycle():
    async def tb(ctx, dut):
        words = [0x1000_0000 + 17 * i for i in range(8)]
        await wishbone_burst_write(ctx, dut.bus, BASE + 0x40, words)
        assert dump(ctx, dut.memory, BASE + 0x40, 32) == b"".join(w.to_bytes(4, "little") for w in words)
        got = await wishbone_burst_read(ctx, dut.bus, BASE + 0x40, 8)
        assert got == [(w, 0) for w in words]
        # The first and last words of host memory, single accesses.
        await wishbone_write(ctx, dut.bus, BASE, 0xA5A5_0001)
        await wishbone_write(ctx, dut.bus, BASE + SIZE - 4, 0x5A5A_0002)
        assert await wishbone_read(ctx, dut.bus, BASE) == 0xA5A5_0001
        assert await wishbone_read(ctx, dut.bus, BASE + SIZE - 4) == 0x5A5A_0002

    run(tb)


def test_a_burst_through_the_window_takes_the_cycles_it_takes_without_it():
    cycles = {}

    def timed(name, top, memory):
        async def tb(ctx, dut):
            load_words(ctx, memory, BASE, bytes(range(64)))
            port = dut.bus
            ctx.set(port.sel, 0xF)
            ctx.set(port.cyc, 1)
            ctx.set(port.stb, 1)
            acked, n = 0, 0
            while acked < 16:
                ctx.set(port.adr, BASE // 4 + acked)
                ctx.set(port.cti, wishbone_burst.CTI_END if acked == 15 else wishbone_burst.CTI_INCREMENTING)
                _, _, ack = await ctx.tick().sample(port.ack)
                n += 1
                acked += ack
            ctx.set(port.cyc, 0)
            ctx.set(port.stb, 0)
            cycles[name] = n

        run_testbench(top, tb)

    through = OnHostMemory()
    timed("through the window", through, through.memory)
    alone = WishboneSRAM(base=BASE, size=SIZE)
    timed("memory alone", alone, alone)
    assert cycles["through the window"] == cycles["memory alone"] == 17  # the first word's wait, then a word a cycle


def test_addresses_outside_host_memory_answer_err_and_reach_nothing():
    outside = [
        BASE + SIZE,  # the first word past it: host memory's alias of BASE
        BASE - 4,
        BASE - SIZE,  # an alias below
        BASE + 0x1000_0040,  # far above: the alias of BASE + 0x40
        0x0000_0040,  # the SoC's ROM
    ]

    async def tb(ctx, dut):
        load_words(ctx, dut.memory, BASE, bytes(SIZE))
        for address in outside:
            with pytest.raises(BusError):
                await wishbone_write(ctx, dut.bus, address, 0xDEAD_BEEF)
            with pytest.raises(BusError):
                await wishbone_read(ctx, dut.bus, address)
            got = await wishbone_burst_read(ctx, dut.bus, address, 4, give_up_after=1)
            assert [err for _, err in got] == [1], f"a burst at {address:#x}: {got}"
        assert not ctx.get(dut.reached), "a refused access reached host memory"
        assert dump(ctx, dut.memory, BASE, SIZE) == bytes(SIZE), "a refused write landed in host memory"
        # The window still serves host memory afterwards.
        await wishbone_write(ctx, dut.bus, BASE + 0x40, 0x0123_4567)
        assert await wishbone_read(ctx, dut.bus, BASE + 0x40) == 0x0123_4567

    run(tb)


def test_a_burst_running_past_the_end_stops_at_it():
    async def tb(ctx, dut):
        load_words(ctx, dut.memory, BASE, bytes(SIZE))
        got = await wishbone_burst_read(ctx, dut.bus, BASE + SIZE - 8, 4, give_up_after=3)
        assert [err for _, err in got] == [0, 0, 1]
        assert dump(ctx, dut.memory, BASE, SIZE) == bytes(SIZE)

    run(tb)


def test_a_window_host_memory_cannot_have_is_refused():
    with rejected(ValueError, "power of two"):
        HostWindow(addr_width=30, base=BASE, size=0x300)
    with rejected(ValueError, "not aligned"):
        HostWindow(addr_width=30, base=BASE + 0x200, size=0x400)
    with rejected(ValueError, "past 30 word address bits"):
        HostWindow(addr_width=30, base=0x1_0000_0000, size=0x400)
