"""Completion unit: status write-back, CQ entries with phase bits, overflow, unbound queues."""

from amaranth import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.sim import Simulator
from support.sim import run_simulation
from support.wishbone_sram import WishboneSRAM, dump

from numavia.base import regmap, via_descriptor
from numavia.gateware.bfm import send
from numavia.gateware.via_completion import CompletionUnit

BASE = 0x6000_0000
CTRL = via_descriptor.CONTROL_SEGMENT
ENTRY = via_descriptor.CQ_ENTRY
BIND = regmap.VIA.array("VI").register("CQ_BIND")
VIS = 4


class Top(wiring.Component):
    """The unit, memory on its bus, and the VIs' CQ_BIND registers it looks up (``binds``)."""

    def __init__(self):
        self.unit = CompletionUnit(vis=VIS, cqs=2)
        self.sram = WishboneSRAM(base=BASE, size=4096)
        self.binds = [Signal(16, name=f"bind{vi}") for vi in range(VIS)]
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = self.unit
        m.submodules.sram = self.sram
        wiring.connect(m, self.unit.bus, self.sram.bus)
        m.d.comb += self.unit.vi_config.record.cq_bind.eq(Array(self.binds)[self.unit.vi_config.index])
        return m


def bind(send_cq=None, recv_cq=None):
    value = 0
    if send_cq is not None:
        value |= send_cq << BIND.field("SEND_CQ").lsb | BIND.field("SEND_EN").mask
    if recv_cq is not None:
        value |= recv_cq << BIND.field("RECV_CQ").lsb | BIND.field("RECV_EN").mask
    return value


def run(requests, *, binds, cq_size=4, head=0, consume_at=None):
    """``requests``: [(source, dict)]. Returns (memory, tails, overflow flags, overflow pulses)."""
    top = Top()
    sim = Simulator(top)
    sim.add_clock(1e-8)
    out = {}

    async def bench(ctx):
        unit = top.unit
        for vi, b in enumerate(binds):
            ctx.set(top.binds[vi], b)
        ctx.set(unit.cq_base[0], BASE + 0x800)
        ctx.set(unit.cq_base[1], BASE + 0xC00)
        for i in range(2):
            ctx.set(unit.cq_size[i], cq_size)
            ctx.set(unit.cq_head[i], head)
        pulses = 0
        for n, (source, request) in enumerate(requests):
            if consume_at == n:
                ctx.set(unit.cq_head[0], head + cq_size)
            await send(ctx, unit.requests[source], request)
            for _ in range(40):
                pulses += ctx.get(unit.overflow)
                if not ctx.get(unit.busy):
                    break
                await ctx.tick()
        out["memory"] = dump(ctx, top.sram, BASE, 4096)
        out["tails"] = [ctx.get(unit.cq_tail[i]) for i in range(2)]
        out["overflow"] = [ctx.get(unit.cq_overflow[i]) for i in range(2)]
        out["pulses"] = pulses

    sim.add_testbench(bench)
    run_simulation(sim)
    return out


def request(desc, status, length=0, imm=None, vi=0, recv=0):
    return {
        "desc": desc,
        "status": status,
        "length": length,
        "imm": imm or 0,
        "write_imm": imm is not None,
        "vi": vi,
        "recv": recv,
    }


def test_status_length_and_immediate_are_written_back():
    done = CTRL.encode_bits("STATUS", DONE=1, OP=via_descriptor.STATUS_OP.RECEIVE, IMMEDIATE=1)
    out = run(
        [(1, request(BASE + 0x100, done, length=77, imm=0xABCD1234, recv=1)), (0, request(BASE + 0x200, 1, length=5))],
        binds=[0],
    )
    first = CTRL.decode(out["memory"][0x100:0x120])
    assert (first["STATUS"], first["LENGTH"], first["IMMEDIATE_DATA"]) == (done, 77, 0xABCD1234)
    second = CTRL.decode(out["memory"][0x200:0x220])
    assert (second["STATUS"], second["LENGTH"], second["IMMEDIATE_DATA"]) == (1, 5, 0)
    assert out["tails"] == [0, 0]  # no queue bound: no entries


def test_entries_go_to_the_bound_queue_with_phase():
    out = run(
        [(0, request(BASE + 0x100 + 0x20 * i, 1, vi=2)) for i in range(6)], binds=[0, 0, bind(send_cq=1)], cq_size=8
    )
    assert out["tails"] == [0, 6]
    for i in range(6):
        entry = ENTRY.decode(out["memory"][0xC00 + 8 * i : 0xC08 + 8 * i])
        info = ENTRY.decode_bits("INFO", entry["INFO"])
        assert entry["DESCRIPTOR"] == BASE + 0x100 + 0x20 * i
        assert (info["VI"], info["RECV"], info["PHASE"]) == (2, 0, 1)


def test_full_queue_loses_the_entry_but_completes_the_descriptor():
    out = run(
        [(0, request(BASE + 0x100 + 0x20 * i, 1, vi=0, recv=1)) for i in range(6)], binds=[bind(recv_cq=0)], cq_size=4
    )
    assert out["tails"][0] == 4 and out["overflow"] == [1, 0] and out["pulses"] == 2
    for i in range(6):
        assert CTRL.decode(out["memory"][0x100 + 0x20 * i :])["STATUS"] == 1


def test_ring_wraps_and_flips_the_phase_once_consumed():
    out = run(
        [(0, request(BASE + 0x100 + 0x20 * i, 1, vi=0)) for i in range(6)],
        binds=[bind(send_cq=0)],
        cq_size=4,
        consume_at=4,
    )
    assert out["tails"][0] == 6 and out["overflow"] == [0, 0]
    phases = [
        ENTRY.decode_bits("INFO", ENTRY.decode(out["memory"][0x800 + 8 * i :])["INFO"])["PHASE"] for i in range(4)
    ]
    assert phases == [0, 0, 1, 1]  # entries 4 and 5 overwrote slots 0 and 1 on the second pass
