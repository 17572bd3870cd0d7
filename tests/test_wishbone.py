"""Wishbone decoder (routing by address window, unmapped addresses answered with err) and request
register (a target sees each access once, a cycle later)."""

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator
from support.amaranth_helpers import rejected
from support.sim import CLOCK_PERIOD, run_simulation, run_testbench

from numavia.base import regmap
from numavia.gateware import wishbone
from numavia.gateware.bfm import BusError, wishbone_read_cycles, wishbone_release
from numavia.gateware.bfm import wishbone_read as read
from numavia.gateware.bfm import wishbone_write as write
from numavia.gateware.register_bank import RegisterBank
from numavia.gateware.wishbone import Decoder, RequestRegister


class TwoBanks(wiring.Component):
    """Two copies of the ctrl block at word bases 0x000 and 0x100, in a 4 KiB window."""

    def __init__(self):
        self.decoder = Decoder(addr_width=10, windows=[("a", 0x000, 6), ("b", 0x100, 6)])
        super().__init__({"bus": wiring.In(wishbone.Signature(addr_width=10))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.decoder = self.decoder
        m.submodules.a = a = RegisterBank(regmap.CTRL)
        m.submodules.b = b = RegisterBank(regmap.CTRL)
        wiring.connect(m, wiring.flipped(self.bus), self.decoder.bus)
        wiring.connect(m, self.decoder.a, a.bus)
        wiring.connect(m, self.decoder.b, b.bus)
        return m


def run(testbench):
    dut = TwoBanks()
    run_testbench(dut, testbench)


SCRATCH = regmap.CTRL.register("SCRATCH").offset


def test_windows_are_independent():
    async def tb(ctx, dut):
        await write(ctx, dut.bus, SCRATCH, 0xAAAA0000)
        await write(ctx, dut.bus, 0x400 + SCRATCH, 0xBBBB0000)
        assert await read(ctx, dut.bus, SCRATCH) == 0xAAAA0000
        assert await read(ctx, dut.bus, 0x400 + SCRATCH) == 0xBBBB0000

    run(tb)


def test_unmapped_window_answers_error_and_bus_recovers():
    async def tb(ctx, dut):
        with pytest.raises(BusError):
            await read(ctx, dut.bus, 0x800)
        with pytest.raises(BusError):
            await write(ctx, dut.bus, 0xFFC, 1)
        assert await read(ctx, dut.bus, SCRATCH) == regmap.CTRL.register("SCRATCH").reset

    run(tb)


async def back_to_back(ctx, bus, accesses):
    """Accesses ``[(byte address, value or None for a read)]`` with ``cyc`` held throughout: each
    one's address is on the bus in the cycle after the last one's answer. The reads' values."""
    got = []
    for address, value in accesses:
        if value is None:
            got.append(await read(ctx, bus, address, release=False))
        else:
            await write(ctx, bus, address, value, release=False)
    await wishbone_release(ctx, bus)
    return got


def test_back_to_back_accesses_across_windows_get_their_own_window_s_answer():
    # The answer is routed by the window of the cycle before: with no idle cycle between accesses,
    # each must still come from the window it addressed, not the next one's.
    b = 0x400

    async def tb(ctx, dut):
        writes = [(SCRATCH, 0x11111111), (b + SCRATCH, 0x22222222)]
        reads = [(SCRATCH, None), (b + SCRATCH, None), (SCRATCH, None), (b + SCRATCH, None)]
        got = await back_to_back(ctx, dut.bus, writes + reads)
        assert got == [0x11111111, 0x22222222, 0x11111111, 0x22222222]
        got = await back_to_back(ctx, dut.bus, [(b + SCRATCH, 0x33333333), (SCRATCH, None), (b + SCRATCH, None)])
        assert got == [0x11111111, 0x33333333]

    run(tb)


def test_misaligned_window_is_rejected():
    with rejected(ValueError, "aligned"):
        Decoder(addr_width=10, windows=[("a", 0x010, 6)])


class RegisteredBank(wiring.Component):
    """The ctrl block behind a request register; counts the bank's write strobes of SCRATCH."""

    def __init__(self):
        super().__init__({"bus": wiring.In(wishbone.Signature(addr_width=regmap.CTRL.addr_width))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.request = request = RequestRegister(addr_width=regmap.CTRL.addr_width)
        m.submodules.bank = self.bank = RegisterBank(regmap.CTRL)
        wiring.connect(m, wiring.flipped(self.bus), request.bus)
        wiring.connect(m, request.target, self.bank.bus)
        return m


def test_request_register_delays_each_access_a_cycle_and_the_target_sees_it_once():
    dut, strobes, direct_cycles = RegisteredBank(), [], None

    async def direct(ctx, bank):
        nonlocal direct_cycles
        direct_cycles = await wishbone_read_cycles(ctx, bank.bus, SCRATCH)

    run_testbench(RegisterBank(regmap.CTRL), direct)

    async def count_strobes(ctx):
        async for _, _, w_stb in ctx.tick().sample(dut.bank.scratch.w_stb):
            strobes.append(w_stb)

    async def tb(ctx):
        values = [0x01020304, 0xA5A5A5A5, 0x5A5A5A5A]
        got = await back_to_back(
            ctx, dut.bus, [(SCRATCH, values[0]), (SCRATCH, None), (SCRATCH, values[1]), (SCRATCH, values[2])]
        )
        assert got == [values[0]]
        assert await read(ctx, dut.bus, SCRATCH) == values[2]
        assert sum(strobes) == 3  # three writes, each strobed once though stb stayed up to its ack
        with pytest.raises(BusError):  # a write to a read-only register: err passes back
            await write(ctx, dut.bus, regmap.CTRL.register("ID").offset, 0)
        assert await wishbone_read_cycles(ctx, dut.bus, SCRATCH) == direct_cycles + 1

    sim = Simulator(dut)
    sim.add_clock(CLOCK_PERIOD)
    sim.add_process(count_strobes)
    sim.add_testbench(tb)
    run_simulation(sim)
