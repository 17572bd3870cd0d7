"""Register bank built from a block: register arrays (fewer elements than reserved), reset
overrides, hardware-writable registers, rw registers of an array kept in a table in memory (read
in the same cycle or a cycle ahead), a run of ro registers read by position."""

import gc
import warnings

import pytest
from amaranth import Array, Elaboratable, Module, Mux, Signal
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator
from support.sim import run_simulation, run_testbench

from numavia.base.regmap import Access, Block, Register, RegisterArray
from numavia.gateware.bfm import BusError, wishbone_read_cycles
from numavia.gateware.bfm import wishbone_read as read
from numavia.gateware.bfm import wishbone_write as write
from numavia.gateware.register_bank import RegisterBank

BLOCK = Block(
    "t",
    base=0,
    size=0x100,
    doc="test",
    registers=(
        Register("ADDR", 0x00, Access.RW, "address", width=8, reset=3),
        Register("DATA", 0x04, Access.WO, "data"),
        Register("LEVEL", 0x08, Access.RO, "level"),
    ),
    arrays=(
        RegisterArray(
            "Q",
            0x40,
            4,
            0x10,
            "queues",
            registers=(
                Register("BELL", 0x0, Access.WO, "doorbell"),
                Register("CONF", 0x4, Access.RW, "configuration", reset=0x77),
                Register("COUNT", 0x8, Access.RO, "count"),
            ),
        ),
    ),
)


def run(testbench, **kwargs):
    dut = RegisterBank(BLOCK, **kwargs)
    run_testbench(dut, testbench)


def test_array_elements_decode_at_their_stride():
    async def tb(ctx, dut):
        for i in range(3):
            ctx.set(dut.q[i].count.value, 100 + i)
        assert [await read(ctx, dut.bus, 0x48 + 0x10 * i) for i in range(3)] == [100, 101, 102]
        await write(ctx, dut.bus, 0x54, 0xAB)  # Q[1].CONF
        assert await read(ctx, dut.bus, 0x54) == 0xAB and await read(ctx, dut.bus, 0x44) == 0x77
        assert ctx.get(dut.q[1].conf.value) == 0xAB

    run(tb, counts={"Q": 3})


class AnsweringTable(Elaboratable):
    """The bank with `Q` as a table, its status port answered from `counts` (the block's logic):
    combinationally, or (``registered``) from a read registered in the cycle the bank names the
    element, as a block RAM answers."""

    def __init__(self, registered=False, **kwargs):
        self.registered = registered
        self.bank = RegisterBank(BLOCK, **{"tables": {"Q": 1}, **kwargs})
        self.counts = Array(Signal(32, name=f"count{i}") for i in range(self.bank.counts["Q"]))

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = self.bank
        status = self.bank.q_status
        domain = m.d.sync if self.registered else m.d.comb
        domain += status.record.count.eq(self.counts[status.index])
        return m


def test_a_tables_read_only_registers_are_answered_in_the_cycle_after_the_element_is_named():
    """The status port answers a cycle after the bank names the element, so the block may answer
    from a registered read: reads alternating between elements, back to back, each get their own
    element's value (answering in the naming cycle, the bank would take the element read before)."""
    top = AnsweringTable(registered=True)
    dut = top.bank

    async def tb(ctx, _):
        for i in range(4):
            ctx.set(top.counts[i], 0x100 + i)
        reads = [await read(ctx, dut.bus, 0x48 + 0x10 * i) for i in (0, 3, 1, 3, 2, 0)]
        assert reads == [0x100, 0x103, 0x101, 0x103, 0x102, 0x100]
        assert await read(ctx, dut.bus, 0x08) == 0  # a register's value still answers at once

    run_testbench(top, tb)


@pytest.mark.parametrize("table", [False, True], ids=["flip-flops", "table"])
def test_strobes_carry_the_element_and_data(table):
    """A write-only register's strobe and data at the element the bus named and no other, a
    read-only one's value from that element (with a read strobe, but in a table: from the status
    port); a write to a read-only register answers err. The same whether the array's element is
    decoded per register or, in a table, once."""
    strobes = []
    top = AnsweringTable() if table else None
    dut = top.bank if table else RegisterBank(BLOCK)
    sim = Simulator(top or dut)
    sim.add_clock(1e-8)

    async def monitor(ctx):
        while True:
            await ctx.tick()
            for i in range(4):
                if ctx.get(dut.q[i].bell.w_stb):
                    strobes.append(("bell", i, ctx.get(dut.q[i].bell.w_data)))
                if not table and ctx.get(dut.q[i].count.r_stb):
                    strobes.append(("count", i))

    async def bench(ctx):
        await write(ctx, dut.bus, 0x60, 0x1234)  # Q[2].BELL
        await write(ctx, dut.bus, 0x40, 0x99)  # Q[0].BELL
        await write(ctx, dut.bus, 0x70, 0xAB00_0000, sel=0b1000)  # Q[3].BELL, its top byte
        assert await read(ctx, dut.bus, 0x60) == 0  # write-only: reads 0
        for i in range(4):
            ctx.set(top.counts[i] if table else dut.q[i].count.value, 5 + i)
        assert await read(ctx, dut.bus, 0x58) == 6  # Q[1].COUNT
        assert await read(ctx, dut.bus, 0x78) == 8  # Q[3].COUNT
        with pytest.raises(BusError):
            await write(ctx, dut.bus, 0x58, 1)

    sim.add_testbench(monitor, background=True)
    sim.add_testbench(bench)
    run_simulation(sim)
    reads = [] if table else [("count", 1), ("count", 3)]
    assert strobes == [("bell", 2, 0x1234), ("bell", 0, 0x99), ("bell", 3, 0xAB00_0000), *reads]


def test_elements_past_the_count_answer_err():
    async def tb(ctx, dut):
        with pytest.raises(BusError):
            await read(ctx, dut.bus, 0x40 + 0x10 * 3 + 4)  # Q[3] not built
        assert await read(ctx, dut.bus, 0x00) == 3  # the bank still answers

    run(tb, counts={"Q": 3})


def test_counts_and_resets_are_checked():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)  # the refused banks are dropped
        with pytest.raises(ValueError, match="do not fit"):
            RegisterBank(BLOCK, counts={"Q": 5})
        with pytest.raises(ValueError, match="not valid"):
            RegisterBank(BLOCK, resets={"ADDR": 0x100})
        with pytest.raises(ValueError, match="not valid"):
            RegisterBank(BLOCK, resets={"LEVEL": 1})
        with pytest.raises(ValueError, match="only rw"):
            RegisterBank(BLOCK, hw_writable=("DATA",))
        gc.collect()


def test_reset_override():
    async def tb(ctx, dut):
        assert await read(ctx, dut.bus, 0x00) == 9

    run(tb, resets={"ADDR": 9})


def test_hardware_writable_register_and_bus_priority():
    async def tb(ctx, dut):
        ctx.set(dut.addr.hw_data, 42)
        ctx.set(dut.addr.hw_en, 1)
        await ctx.tick()
        ctx.set(dut.addr.hw_en, 0)
        assert await read(ctx, dut.bus, 0x00) == 42
        # The logic increments the address after each DATA write, the way ATT_ADDR works.
        ctx.set(dut.addr.hw_data, 43)
        await write(ctx, dut.bus, 0x00, 7)
        assert await read(ctx, dut.bus, 0x00) == 7

    run(tb, hw_writable=("ADDR",))


def test_a_table_holds_the_rw_registers_the_bus_and_the_lookups_see():
    top = AnsweringTable(counts={"Q": 3}, tables={"Q": 2})

    async def tb(ctx, _):
        dut = top.bank
        assert [await read(ctx, dut.bus, 0x44 + 0x10 * i) for i in range(3)] == [0x77] * 3  # resets
        await write(ctx, dut.bus, 0x54, 0x1122_3344)  # Q[1].CONF
        await write(ctx, dut.bus, 0x54, 0xAB00_0000, sel=0b1000)  # its top byte alone
        ctx.set(dut.q_lookup[0].index, 1)
        ctx.set(dut.q_lookup[1].index, 2)
        assert ctx.get(dut.q_lookup[0].record.conf) == 0xAB22_3344
        assert ctx.get(dut.q_lookup[1].record.conf) == 0x77
        assert await read(ctx, dut.bus, 0x54) == 0xAB22_3344
        for i in range(3):
            ctx.set(top.counts[i], 5 + i)  # the read-only registers: the block answers at the index
        assert await read(ctx, dut.bus, 0x68) == 7
        with pytest.raises(BusError):
            await read(ctx, dut.bus, 0x4C)  # a hole in an element
        with pytest.raises(BusError):
            await read(ctx, dut.bus, 0x44 + 0x10 * 3)  # Q[3] not built
        with pytest.raises(BusError):
            await write(ctx, dut.bus, 0x44 + 0x10 * 3, 1)
        assert await read(ctx, dut.bus, 0x00) == 3

    run_testbench(top, tb)


def test_a_lookup_ahead_reads_the_element_named_a_cycle_before_with_a_write_read_through():
    top = AnsweringTable(counts={"Q": 3}, tables={"Q": 1}, read_ahead={"Q": 1})
    lookup = top.bank.q_lookup_ahead[0]
    edges = []  # at each clock edge: the bus's ack and what the lookup shows

    async def watch(ctx):
        async for _, _, ack, conf in ctx.tick().sample(top.bank.bus.ack, lookup.record.conf):
            edges.append((ack, conf))

    async def tb(ctx):
        bus = top.bank.bus
        ctx.set(lookup.next_index, 2)
        await ctx.tick()
        assert ctx.get(lookup.record.conf) == 0x77  # Q[2]'s reset, named a cycle before
        ctx.set(lookup.index, 2)
        first = len(edges)
        await write(ctx, bus, 0x64, 0x1234_5678)  # Q[2].CONF, while the lookup stays there
        # The memory is written in the cycle before the bus's ack; in the ack's cycle the lookup
        # already shows the new value (read through), not the old one a cycle longer.
        acked = next(i for i in range(first, len(edges)) if edges[i][0])
        assert edges[acked][1] == 0x1234_5678
        await write(ctx, bus, 0x54, 0x0BAD_0BAD)  # Q[1].CONF: not what it shows
        assert ctx.get(lookup.record.conf) == 0x1234_5678
        ctx.set(lookup.next_index, 1)
        await ctx.tick()
        assert ctx.get(lookup.record.conf) == 0x0BAD_0BAD

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_process(watch)
    sim.add_testbench(tb)
    run_simulation(sim)


def test_only_a_tables_lookups_read_ahead():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="array Q: only a table's lookups can read ahead"):
            RegisterBank(BLOCK, read_ahead={"Q": 1})
        gc.collect()


def test_a_table_needs_a_power_of_two_stride():
    odd = Block(
        "odd",
        base=0,
        size=0x100,
        doc="test",
        arrays=(RegisterArray("R", 0x0, 4, 0xC, "odd stride", registers=(Register("X", 0x0, Access.RW, "x"),)),),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="power-of-two stride, not 0xc"):
            RegisterBank(odd, tables={"R": 1})
        gc.collect()


PAIRS = Block(
    "pairs",
    base=0,
    size=0x100,
    doc="test",
    registers=(Register("MODE", 0x00, Access.RW, "mode", width=8, reset=5),),
    arrays=(
        RegisterArray(
            "E",
            0x40,
            4,
            0x8,
            "elements",
            registers=(
                Register("LOW", 0x0, Access.RW, "low", reset=0x10),
                Register("HIGH", 0x4, Access.RW, "high", width=16, reset=0x20),
            ),
        ),
    ),
)


@pytest.mark.parametrize("ahead", [0, 1], ids=["lookups", "lookups-ahead"])
def test_a_tables_registers_answer_a_cycle_later_each_from_its_column(ahead):
    """A read of a table's rw register takes a wait state more than a register's (it is read from
    the column's memory at the bus's element, then answered); back to back reads of two columns and
    of elements written byte by byte each get their own value."""
    dut = RegisterBank(PAIRS, tables={"E": 1}, read_ahead={"E": ahead} if ahead else None)

    async def cycles_to_answer(ctx, byte_addr):
        ctx.set(dut.bus.adr, byte_addr // 4)
        ctx.set(dut.bus.we, 0)
        ctx.set(dut.bus.cyc, 1)
        ctx.set(dut.bus.stb, 1)
        for n in range(1, 10):
            _, _, ack, data = await ctx.tick().sample(dut.bus.ack, dut.bus.dat_r)
            if ack:
                ctx.set(dut.bus.cyc, 0)
                ctx.set(dut.bus.stb, 0)
                await ctx.tick()
                return n, data
        raise AssertionError("no ack")

    async def tb(ctx, _):
        assert await cycles_to_answer(ctx, 0x00) == (2, 5)
        assert await cycles_to_answer(ctx, 0x48) == (3, 0x10)  # E[1].LOW's reset
        assert await cycles_to_answer(ctx, 0x4C) == (3, 0x20)  # E[1].HIGH's reset
        for i in range(4):
            await write(ctx, dut.bus, 0x40 + 8 * i, 0x1000 + i)
            await write(ctx, dut.bus, 0x44 + 8 * i, 0xAA00 | i, sel=0b0001)
            await write(ctx, dut.bus, 0x44 + 8 * i, 0xBB00_0000, sel=0b1000)  # beyond HIGH: nothing
        await write(ctx, dut.bus, 0x54, 0x77 << 8, sel=0b0010)  # E[2].HIGH's upper byte
        reads = [await read(ctx, dut.bus, addr) for addr in (0x40, 0x44, 0x50, 0x54, 0x00, 0x58, 0x4C)]
        assert reads == [0x1000, 0x0000, 0x1002, 0x7702, 5, 0x1003, 0x0001]

    run_testbench(dut, tb)


def test_a_tables_rw_registers_are_whole_bytes():
    """A byte select is a table register's write enable, so its width is whole bytes."""
    narrow = Block(
        "narrow",
        base=0,
        size=0x100,
        doc="test",
        arrays=(RegisterArray("R", 0x0, 4, 0x4, "r", registers=(Register("X", 0x0, Access.RW, "x", width=12),)),),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="register R.X: a table's rw registers are whole bytes wide"):
            RegisterBank(narrow, tables={"R": 1})
        RegisterBank(narrow)  # in flip-flops any width will do
        gc.collect()


def test_an_array_without_rw_registers_is_decoded_by_element_without_memory():
    """Doorbell pages: write-only registers only, a table of no lookups (no memory), one page per
    element; a write reaches its element alone, the rest of a page and pages not built answer err.
    The table's written port names the same element with one strobe per register."""
    pages = Block(
        "pages",
        base=0,
        size=0x400,
        doc="test",
        arrays=(
            RegisterArray(
                "P",
                0x0,
                8,
                0x80,
                "pages",
                registers=(Register("A", 0x0, Access.WO, "a"), Register("B", 0x4, Access.WO, "b")),
            ),
        ),
    )
    strobes, named = [], []
    dut = RegisterBank(pages, counts={"P": 5}, tables={"P": 0})
    assert not hasattr(dut, "p_lookup")
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def monitor(ctx):
        while True:
            await ctx.tick()
            for i in range(5):
                for name in ("a", "b"):
                    port = getattr(dut.p[i], name)
                    if ctx.get(port.w_stb):
                        strobes.append((i, name, ctx.get(port.w_data)))
            for name in ("a", "b"):
                port = getattr(dut.p_written, name)
                if ctx.get(port.w_stb):
                    named.append((ctx.get(dut.p_written.index), name, ctx.get(port.w_data)))

    async def bench(ctx):
        await write(ctx, dut.bus, 0x4 * 0x80 + 0x4, 0x55)  # P[4].B
        await write(ctx, dut.bus, 0x1 * 0x80, 0x66)  # P[1].A
        for bad in (0x1 * 0x80 + 0x8, 0x5 * 0x80):  # a hole in a page, a page not built
            with pytest.raises(BusError):
                await write(ctx, dut.bus, bad, 1)

    sim.add_testbench(monitor, background=True)
    sim.add_testbench(bench)
    run_simulation(sim)
    assert strobes == named == [(4, "b", 0x55), (1, "a", 0x66)]


COUNTED = Block(
    "c",
    base=0,
    size=0x40,
    doc="counted",
    registers=(
        Register("CTRL", 0x00, Access.RW, "control", width=8),
        Register("HITS", 0x10, Access.RO, "hits"),
        Register("MISSES", 0x14, Access.RO, "misses"),
        Register("WAITS", 0x18, Access.RO, "waits"),
        Register("LEVEL", 0x20, Access.RO, "level"),
    ),
)


class AnsweringRun(Elaboratable):
    """The bank with HITS..WAITS read by position, answered from `values` (the block's memory) in
    the cycle the bank says it reads, with a value the bus must not take in any other."""

    def __init__(self):
        self.bank = RegisterBank(COUNTED, indexed={"counters": ("HITS", "MISSES", "WAITS")})
        self.values = Array(Signal(32, name=f"value{i}") for i in range(3))

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = self.bank
        port = self.bank.counters
        m.d.comb += port.value.eq(Mux(port.reading, self.values[port.index], 0xDEAD))
        return m


def test_an_indexed_run_is_read_through_one_port_by_position():
    """Each register of the run reads the value the block answers at its position; a write to one
    answers err and the registers around the run still decode as before."""
    top = AnsweringRun()
    bank = top.bank
    assert not hasattr(bank, "hits") and hasattr(bank, "level")

    async def bench(ctx, _):
        for i, value in enumerate((0x1111, 0x2222, 0x3333)):
            ctx.set(top.values[i], value)
        ctx.set(bank.level.value, 0x44)
        assert [await read(ctx, bank.bus, a) for a in (0x10, 0x14, 0x18, 0x20)] == [0x1111, 0x2222, 0x3333, 0x44]
        got = [await read(ctx, bank.bus, a, release=False) for a in (0x18, 0x10, 0x14)]  # back to back
        assert got == [0x3333, 0x1111, 0x2222]
        # The block reads a cycle after the bank decoded the address: one wait state more.
        assert await wishbone_read_cycles(ctx, bank.bus, 0x10) == await wishbone_read_cycles(ctx, bank.bus, 0x20) + 1
        for address in (0x14, 0x1C):  # a write to the run; the hole after it
            with pytest.raises(BusError):
                await write(ctx, bank.bus, address, 1)
        with pytest.raises(BusError):
            await read(ctx, bank.bus, 0x1C)
        await write(ctx, bank.bus, 0x00, 0x5A)
        assert await read(ctx, bank.bus, 0x00) == 0x5A

    run_testbench(top, bench)


def test_an_indexed_run_must_be_read_only_registers_at_consecutive_words():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="only ro registers"):
            RegisterBank(COUNTED, indexed={"counters": ("CTRL", "HITS")})
        with pytest.raises(ValueError, match="consecutive words"):
            RegisterBank(COUNTED, indexed={"counters": ("WAITS", "LEVEL")})
        with pytest.raises(ValueError, match="consecutive words"):
            RegisterBank(COUNTED, indexed={"counters": ("MISSES", "HITS")})
        gc.collect()
