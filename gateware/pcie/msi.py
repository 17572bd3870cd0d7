"""MSI: a completion-queue event becomes a memory write of the message data to the message address.

One vector. ``event`` pulses (the VIA engine's completion-queue interrupt); the event is kept
pending while MSI or bus mastering is disabled and sent once both are enabled, so an event that
happens before the driver set MSI up is not lost. Events that arrive while one is pending merge
into it, as interrupts do.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import tlp
from .config import ConfigState
from .tlp import Type


class MsiSender(wiring.Component):
    event: In(1)
    config: In(ConfigState)
    request: Out(tlp.tlp_beats())
    sent: Out(1)  # pulses when a message leaves

    def elaborate(self, platform):
        m = Module()
        cfg, req = self.config, self.request
        pending = Signal()
        with m.If(self.event):
            m.d.sync += pending.eq(1)

        wide = cfg.msi_address[32:] != 0  # a 3DW write when the upper address is zero
        h = req.payload.header
        m.d.comb += [
            h.fmt.eq(Cat(wide, Const(1, 1), Const(0, 1))),
            h.type.eq(Type.MEM),
            h.length.eq(1),
            h.first_be.eq(0xF),
            h.last_be.eq(0),
            h.requester_id.eq(cfg.completer_id),
            h.address.eq(cfg.msi_address),
            req.payload.data.eq(cfg.msi_data),
            req.payload.last.eq(1),
            req.valid.eq(pending & cfg.msi_enable & cfg.bus_master_enable),
        ]
        with m.If(req.valid & req.ready):
            m.d.comb += self.sent.eq(1)
            with m.If(~self.event):
                m.d.sync += pending.eq(0)
        return m
