"""Completion unit: writes finished descriptors' status back to host memory and fills the CQs.

The transmit and receive engines hand over completions in the order their work queues require.
For each, the unit writes the descriptor's ``IMMEDIATE_DATA`` (if the completion carries some),
``LENGTH`` and last ``STATUS`` (whose ``DONE`` bit releases the descriptor to the host), then, if
the work queue is bound to a completion queue, the entry ``(descriptor, VI, queue, phase)`` at the
ring's tail. An entry that finds the ring full is lost: the queue's ``OVERFLOW`` flag is set and
the overflow counter pulses, but the descriptor itself is still completed, so nothing waits on it.
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap, via_descriptor
from numavia.base.params import BUS_ADDR_WIDTH

from . import wishbone_burst
from .round_robin import RoundRobin
from .via_links import vi_lookup_signature

CompletionRequest = data.StructLayout(
    {
        "desc": 32,
        "status": 32,
        "length": 32,
        "imm": 32,
        "write_imm": 1,
        "vi": 8,
        "recv": 1,
    }
)

_BIND = regmap.VIA.array("VI").register("CQ_BIND")
_CTRL_OFFSETS = {
    f.name: via_descriptor.CONTROL_SEGMENT.field(f.name).offset for f in via_descriptor.CONTROL_SEGMENT.fields
}
_INFO = via_descriptor.CQ_ENTRY.field("INFO")


class CompletionUnit(wiring.Component):
    def __init__(self, *, vis, cqs, sources=2):
        self.vis = vis
        self.cqs = cqs
        self.sources = sources
        super().__init__(
            {
                "requests": In(stream.Signature(CompletionRequest)).array(sources),
                "bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "vi_config": Out(vi_lookup_signature(vis)),  # the completing VI's: its CQ_BIND
                "cq_base": In(32).array(cqs),
                "cq_size": In(17).array(cqs),
                "cq_head": In(32).array(cqs),
                "cq_reset": In(1).array(cqs),
                "cq_tail": Out(32).array(cqs),
                "cq_overflow": Out(1).array(cqs),
                "overflow": Out(1),
                "dma_error": Out(1),
                "busy": Out(1),
                # A receive descriptor's STATUS (its DONE) was written (the engine's latency stamp).
                "recv_status_written": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        req = Signal(CompletionRequest)
        source = Signal(range(self.sources))
        tails = Array(self.cq_tail)
        overflows = Array(self.cq_overflow)

        for i in range(self.cqs):
            with m.If(self.cq_reset[i]):
                m.d.sync += [self.cq_tail[i].eq(0), self.cq_overflow[i].eq(0)]

        # The queue's registers are looked up and its slot computed in states of their own, one
        # register stage each, so the bank's CQ registers and the adders stay off the path that
        # drives the DMA address into the bus (docs/boards.md: the ECPIX-5's timing).
        bind = self.vi_config.record.cq_bind
        m.d.comb += self.vi_config.index.eq(req.vi)
        field = lambda name: bind[_BIND.field(name).lsb : _BIND.field(name).lsb + _BIND.field(name).width]
        cq = Signal(4)
        enabled = Signal()
        size = Signal.like(self.cq_size[0])
        tail = Signal(32)
        head = Signal(32)
        base = Signal(32)
        slot = Signal(32)
        info = Signal(32)
        full = Signal()
        m.d.comb += full.eq((tail - head) >= size)
        done = bus.cyc & (bus.ack | bus.err)
        m.d.comb += [bus.sel.eq(0xF), bus.we.eq(1), self.dma_error.eq(bus.cyc & bus.err)]

        def write(state, addr, value, next_state):
            with m.State(state):
                m.d.comb += [bus.cyc.eq(1), bus.stb.eq(1), bus.adr.eq(addr[2:]), bus.dat_w.eq(value)]
                with m.If(done):
                    m.next = next_state

        m.submodules.next_source = next_source = RoundRobin(self.sources)
        m.d.comb += [next_source.requests.eq(Cat(r.valid for r in self.requests)), next_source.last.eq(source)]

        with m.FSM() as fsm:
            with m.State("IDLE"):
                # Round robin between the sources, one completion at a time.
                chosen = next_source.choice
                with m.If(next_source.found):
                    m.d.comb += Array(r.ready for r in self.requests)[chosen].eq(1)
                    m.d.sync += [req.eq(Array(r.payload.as_value() for r in self.requests)[chosen]), source.eq(chosen)]
                    m.next = "IMM"
            with m.State("IMM"):
                with m.If(req.write_imm):
                    m.d.comb += [
                        bus.cyc.eq(1),
                        bus.stb.eq(1),
                        bus.dat_w.eq(req.imm),
                        bus.adr.eq((req.desc + _CTRL_OFFSETS["IMMEDIATE_DATA"])[2:]),
                    ]
                    with m.If(done):
                        m.next = "LENGTH"
                with m.Else():
                    m.next = "LENGTH"
            write("LENGTH", req.desc + _CTRL_OFFSETS["LENGTH"], req.length, "STATUS")
            write("STATUS", req.desc + _CTRL_OFFSETS["STATUS"], req.status, "LOOKUP")
            with m.State("LOOKUP"):
                m.d.sync += [
                    cq.eq(Mux(req.recv, field("RECV_CQ"), field("SEND_CQ"))),
                    enabled.eq(Mux(req.recv, field("RECV_EN"), field("SEND_EN"))),
                ]
                m.next = "SELECT"
            with m.State("SELECT"):
                m.d.sync += [
                    size.eq(Array(self.cq_size)[cq]),
                    tail.eq(tails[cq]),
                    head.eq(Array(self.cq_head)[cq]),
                    base.eq(Array(self.cq_base)[cq]),
                ]
                m.next = "QUEUE"
            with m.State("QUEUE"):
                m.d.sync += [
                    slot.eq(base + ((tail & (size - 1)) << 3)),
                    info.eq(Cat(req.vi, req.recv) | (((tail & size) == 0) << _INFO.bit("PHASE").lsb)),
                ]
                with m.If(~enabled | (cq >= self.cqs) | (size == 0)):
                    m.next = "IDLE"
                with m.Elif(full):
                    m.d.sync += overflows[cq].eq(1)
                    m.d.comb += self.overflow.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "ENTRY0"
            write("ENTRY0", slot, req.desc, "ENTRY1")
            with m.State("ENTRY1"):
                # The INFO word (with the phase bit that marks the entry new) goes last.
                m.d.comb += [bus.cyc.eq(1), bus.stb.eq(1), bus.adr.eq((slot + 4)[2:]), bus.dat_w.eq(info)]
                with m.If(done):
                    m.d.sync += tails[cq].eq(tail + 1)
                    m.next = "IDLE"
        m.d.comb += [
            self.busy.eq(~fsm.ongoing("IDLE")),
            self.recv_status_written.eq(fsm.ongoing("STATUS") & done & req.recv),
        ]
        return m
