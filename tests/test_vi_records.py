# amaranth: UnusedElaboratable=no
"""Per-VI records alone: a write changes only its fields and only its VI's record, peeks read other
VIs, `update` statements add up with the later one winning, records read as `renewed` until first
written, a clear (whole record or a group of fields) wins over a write to its VI in the same cycle
and not over a write to another VI, and a clear group must name fields the record has; with
`read_ahead` the owner's record, read a cycle ahead, is the same as read combinationally (a narrow
record in LUT RAM, its data registered and the write of the read's cycle forwarded, and a wide one
read through where synthesis puts it)."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.lib import data, wiring
from support.sim import run_testbench

from numavia.gateware.ram_style import LUT_RAM_MOST_BITS
from numavia.gateware.vi_records import ViRecords

VIS = 4
LAYOUT = data.StructLayout({"a": 8, "b": 16, "c": 4})
WIDE = data.StructLayout({**LAYOUT.members, "d": LUT_RAM_MOST_BITS // VIS})  # past LUT RAM's bits


def records():
    return ViRecords(LAYOUT, VIS, peeks=1, clears={"connect": None, "restart": ("c",)})


async def write(ctx, dut, vi, **fields):
    ctx.set(dut.owner.vi, vi)
    for name, value in fields.items():
        ctx.set(getattr(dut.new, name), value)
        ctx.set(getattr(dut.change, name), 1)
    await ctx.tick()
    for name in fields:
        ctx.set(getattr(dut.change, name), 0)


def peek(ctx, dut, vi):
    ctx.set(dut.peek[0].vi, vi)
    return record_of(ctx, dut.peek[0].record)


def record_of(ctx, record):
    return {name: ctx.get(getattr(record, name)) for name in record.shape().members}


def test_a_write_changes_only_its_fields_and_its_vi():
    async def bench(ctx, dut):
        await write(ctx, dut, 2, a=0x11, b=0x2222, c=3)
        await write(ctx, dut, 2, b=0x4444)  # a and c stay as read
        await write(ctx, dut, 1, a=0x55)
        ctx.set(dut.owner.vi, 2)
        assert record_of(ctx, dut.owner.record) == {"a": 0x11, "b": 0x4444, "c": 3}
        assert peek(ctx, dut, 2) == {"a": 0x11, "b": 0x4444, "c": 3}
        assert peek(ctx, dut, 1) == {"a": 0x55, "b": 0, "c": 0}
        assert peek(ctx, dut, 3) == {"a": 0, "b": 0, "c": 0}

    run_testbench(records(), bench)


def test_records_read_renewed_until_first_written_and_a_clear_brings_it_back():
    async def bench(ctx, dut):
        ctx.set(dut.owner.renewed.b, 0x1234)  # e.g. a position that depends on the VI
        ctx.set(dut.owner.vi, 0)
        assert record_of(ctx, dut.owner.record) == {"a": 0, "b": 0x1234, "c": 0}
        await write(ctx, dut, 0, a=7)  # the renewed fields are written as read
        ctx.set(dut.owner.renewed.b, 0)
        assert record_of(ctx, dut.owner.record) == {"a": 7, "b": 0x1234, "c": 0}
        ctx.set(dut.clear.connect, 0b0001)
        await ctx.tick()
        ctx.set(dut.clear.connect, 0)
        assert record_of(ctx, dut.owner.record) == {"a": 0, "b": 0, "c": 0}
        assert peek(ctx, dut, 0) == {"a": 0, "b": 0, "c": 0}

    run_testbench(records(), bench)


def test_a_clear_wins_over_a_write_to_its_vi_and_not_over_another_vis():
    async def bench(ctx, dut):
        for vi in (1, 3):
            await write(ctx, dut, vi, a=vi, b=vi, c=vi)
        ctx.set(dut.clear.connect, 0b1000)
        await write(ctx, dut, 3, a=0x99)
        ctx.set(dut.clear.connect, 0b0010)
        await write(ctx, dut, 3, a=0x77)  # the clear of VI 1 does not stop this write
        ctx.set(dut.clear.connect, 0)
        assert peek(ctx, dut, 3) == {"a": 0x77, "b": 0, "c": 0}
        assert peek(ctx, dut, 1) == {"a": 0, "b": 0, "c": 0}

    run_testbench(records(), bench)


def test_a_group_clears_only_its_fields():
    async def bench(ctx, dut):
        await write(ctx, dut, 2, a=1, b=2, c=3)
        ctx.set(dut.clear.restart, 0b0100)
        await ctx.tick()
        ctx.set(dut.clear.restart, 0)
        assert peek(ctx, dut, 2) == {"a": 1, "b": 2, "c": 0}
        await write(ctx, dut, 2, b=5)  # the write takes the cleared field as read: zero
        ctx.set(dut.peek[0].renewed.c, 9)  # so a renewed value no longer shows
        assert peek(ctx, dut, 2) == {"a": 1, "b": 5, "c": 0}

    run_testbench(records(), bench)


class UpdateHarness(wiring.Component):
    """Drives the records through `update`, as an engine does: two steps in one cycle."""

    def __init__(self):
        self.records = records()
        self.first, self.second = Signal(), Signal()
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.records = rec = self.records
        m.d.comb += rec.owner.vi.eq(1)
        with m.If(self.first):
            m.d.comb += rec.update(a=0x10, b=0x20)
        with m.If(self.second):
            m.d.comb += rec.update(b=0x30, c=4)
        return m


def test_updates_in_one_cycle_add_up_and_the_later_wins_a_field():
    async def bench(ctx, dut):
        ctx.set(dut.first, 1)
        ctx.set(dut.second, 1)
        await ctx.tick()
        ctx.set(dut.first, 0)
        assert record_of(ctx, dut.records.owner.record) == {"a": 0x10, "b": 0x30, "c": 4}
        await ctx.tick()  # the second step alone keeps `a`
        assert record_of(ctx, dut.records.owner.record) == {"a": 0x10, "b": 0x30, "c": 4}

    run_testbench(UpdateHarness(), bench)


def test_a_clear_group_must_name_the_records_fields():
    with pytest.raises(ValueError, match=r"clear group 'restart' names fields the record lacks: \['d'\]"):
        ViRecords(LAYOUT, VIS, clears={"restart": ("c", "d")})


@pytest.mark.parametrize("layout", [LAYOUT, WIDE], ids=["in_lut_ram", "wide"])
@pytest.mark.parametrize("write_late", [False, True], ids=["written_at_once", "written_late"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_owner_reading_ahead_reads_what_a_combinational_one_reads(seed, write_late, layout):
    """Random writes, clears and VI moves (a new VI most cycles, the same one, the VI just written)
    every cycle against a model of the records: the owner's record and a peek's, read from the
    registered memory at the VI named a cycle before, a peek read combinationally, and a peek
    answering in the next cycle (the record after that cycle's write and clears) always show the
    model's. The clear flags of the ports reading ahead are registered with their records. Written
    late (the memories a cycle after the owner's write), every port reads the same."""
    rng = random.Random(seed)
    dut = ViRecords(
        layout,
        VIS,
        peeks=1,
        peeks_ahead=1,
        peeks_next=1,
        clears={"connect": None, "restart": ("c",)},
        read_ahead=True,
        write_late=write_late,
    )
    groups = {"connect": tuple(layout.members), "restart": ("c",)}
    widths = {name: layout.members[name] for name in layout.members}

    async def bench(ctx, dut):
        stored = {vi: dict.fromkeys(widths, 0) for vi in range(VIS)}
        cleared = {group: [1] * VIS for group in groups}
        renewed = {"a": 0x5A, "b": 0x1234, "c": 0xC, "d": 0x5}
        renewed = {name: renewed[name] for name in widths}

        def model(vi):
            return {
                name: renewed[name] if any(cleared[g][vi] for g in groups if name in groups[g]) else value
                for name, value in stored[vi].items()
            }

        for name, value in renewed.items():
            ctx.set(getattr(dut.owner.renewed, name), value)
            ctx.set(getattr(dut.peek[0].renewed, name), value)
            ctx.set(getattr(dut.peek_ahead[0].renewed, name), value)
            ctx.set(getattr(dut.peek_next[0].renewed, name), value)
        vi = far_vi = 0
        named = None  # the VI the next-cycle peek named in the cycle before
        ctx.set(dut.owner.next_vi, vi)
        ctx.set(dut.peek_ahead[0].next_vi, far_vi)
        await ctx.tick()
        for _ in range(400):
            next_vi = rng.choice([vi, rng.randrange(VIS)])
            ctx.set(dut.owner.vi, vi)
            ctx.set(dut.owner.next_vi, next_vi)
            peek_vi, next_far_vi = rng.randrange(VIS), rng.choice([vi, next_vi, rng.randrange(VIS)])
            ctx.set(dut.peek[0].vi, peek_vi)
            ctx.set(dut.peek_ahead[0].vi, far_vi)
            ctx.set(dut.peek_ahead[0].next_vi, next_far_vi)
            changes = {name: rng.randrange(1 << widths[name]) for name in widths if rng.random() < 0.3}
            for name in widths:
                ctx.set(getattr(dut.change, name), name in changes)
                ctx.set(getattr(dut.new, name), changes.get(name, 0))
            clears = {group: rng.randrange(1 << VIS) if rng.random() < 0.1 else 0 for group in groups}
            for group, mask in clears.items():
                ctx.set(getattr(dut.clear, group), mask)
            assert record_of(ctx, dut.owner.record) == model(vi)
            assert record_of(ctx, dut.peek[0].record) == model(peek_vi)
            assert record_of(ctx, dut.peek_ahead[0].record) == model(far_vi)
            if named is not None:
                assert record_of(ctx, dut.peek_next[0].record) == model(named)
            named = rng.choice([vi, peek_vi, rng.randrange(VIS)])
            ctx.set(dut.peek_next[0].vi, named)
            await ctx.tick()
            if changes:
                stored[vi] = {**model(vi), **changes}
            for group, mask in clears.items():
                for v in range(VIS):
                    written = changes and v == vi
                    cleared[group][v] = (cleared[group][v] and not written) or (mask >> v) & 1
            vi, far_vi = next_vi, next_far_vi

    run_testbench(dut, bench)
