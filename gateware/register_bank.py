"""A Wishbone register bank built from a :class:`regmap.Block`, so decode never drifts from the map.

Each register becomes a port named after it (lower case):

* ``rw``: ``value`` (stored here, reset from the map) and ``w_stb`` (pulses on a bus write);
* ``ro``: ``value`` (driven by the block's logic) and ``r_stb`` (pulses on a bus read);
* ``wo``: ``w_data`` and ``w_stb`` (commands and doorbells; reads return 0).

Accesses to offsets with no register, and writes to ``ro`` registers, answer ``err``. ``ack``/``err`` are registered (one wait state).
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import wishbone
from .regmap import Access


def register_signature(reg):
    if reg.access is Access.RW:
        return wiring.Signature({"value": Out(reg.width), "w_stb": Out(1)})
    if reg.access is Access.RO:
        return wiring.Signature({"value": In(reg.width), "r_stb": Out(1)})
    return wiring.Signature({"w_data": Out(reg.width), "w_stb": Out(1)})


class RegisterBank(wiring.Component):
    def __init__(self, block):
        self.block = block
        members = {"bus": In(wishbone.Signature(addr_width=block.addr_width))}
        for reg in block.registers:
            members[reg.name.lower()] = Out(register_signature(reg))
        super().__init__(members)

    def port(self, name):
        return getattr(self, name.lower())

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        mask = wishbone.byte_mask(bus.sel)
        access = bus.cyc & bus.stb & ~bus.ack & ~bus.err

        storage = {}
        for reg in self.block.registers:
            port = self.port(reg.name)
            if reg.access is Access.RW:
                storage[reg.name] = Signal(reg.width, init=reg.reset, name=f"{reg.name.lower()}_q")
                m.d.comb += port.value.eq(storage[reg.name])
            m.d.sync += port.w_stb.eq(0) if reg.access is not Access.RO else port.r_stb.eq(0)

        m.d.sync += [bus.ack.eq(0), bus.err.eq(0)]
        with m.If(access):
            with m.Switch(bus.adr):
                for reg in self.block.registers:
                    port = self.port(reg.name)
                    with m.Case(reg.offset // 4):
                        if reg.access is not Access.RO:
                            m.d.sync += bus.ack.eq(1)
                        if reg.access is Access.RW:
                            q = storage[reg.name]
                            m.d.sync += bus.dat_r.eq(q)
                            with m.If(bus.we):
                                m.d.sync += [q.eq((q & ~mask) | (bus.dat_w & mask)), port.w_stb.eq(1)]
                        elif reg.access is Access.RO:
                            m.d.sync += bus.dat_r.eq(port.value)
                            with m.If(bus.we):
                                m.d.sync += bus.err.eq(1)   # a write to a read-only register is a bug
                            with m.Else():
                                m.d.sync += [bus.ack.eq(1), port.r_stb.eq(1)]
                        else:
                            m.d.sync += bus.dat_r.eq(0)
                            with m.If(bus.we):
                                m.d.sync += [port.w_data.eq(bus.dat_w & mask), port.w_stb.eq(1)]
                with m.Default():
                    m.d.sync += bus.err.eq(1)
        return m
