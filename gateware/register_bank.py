"""A Wishbone register bank built from a :class:`regmap.Block`, so decode never drifts from the map.

Each register becomes a port named after it (lower case):

* ``rw``: ``value`` (stored here, reset from the map) and ``w_stb`` (pulses on a bus write);
* ``ro``: ``value`` (driven by the block's logic) and ``r_stb`` (pulses on a bus read);
* ``wo``: ``w_data`` and ``w_stb`` (commands and doorbells; reads return 0).

Accesses to offsets with no register, and writes to ``ro`` registers, answer ``err``. ``ack``/``err`` are registered (one wait state).

A :class:`regmap.RegisterArray` becomes an array port named after it: ``bank.vi[3].sq_doorbell``.
``counts`` builds fewer elements than the map reserves (a parameter of the card); ``resets``
overrides reset values of ``rw`` registers (parameters such as the default MTU); ``hw_writable``
names ``rw`` registers the block's logic may also load (``hw_en``/``hw_data``; a bus write in the
same cycle wins), such as an address register that increments after each data access.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from numavia.base.regmap import Access

from . import wishbone


def register_signature(reg, hw_writable=False):
    if reg.access is Access.RW:
        members = {"value": Out(reg.width), "w_stb": Out(1)}
        if hw_writable:
            members.update(hw_en=In(1), hw_data=In(reg.width))
        return wiring.Signature(members)
    if reg.access is Access.RO:
        return wiring.Signature({"value": In(reg.width), "r_stb": Out(1)})
    return wiring.Signature({"w_data": Out(reg.width), "w_stb": Out(1)})


def array_signature(array):
    return wiring.Signature({reg.name.lower(): Out(register_signature(reg)) for reg in array.registers})


class RegisterBank(wiring.Component):
    def __init__(self, block, *, counts=None, resets=None, hw_writable=()):
        self.block = block
        self.hw_writable = set(hw_writable)
        for name in self.hw_writable:
            if block.register(name).access is not Access.RW:
                raise ValueError(f"register {name}: only rw registers can be hardware-writable")
        self.counts = {a.name: a.count for a in block.arrays}
        for name, count in (counts or {}).items():
            if not 0 < count <= block.array(name).count:
                raise ValueError(
                    f"array {name}: {count} elements do not fit the {block.array(name).count} the map reserves"
                )
            self.counts[name] = count
        self.resets = dict(resets or {})
        for name, value in self.resets.items():
            reg = block.register(name)
            if reg.access is not Access.RW or value >> reg.width or value < 0:
                raise ValueError(f"register {name}: reset {value} is not valid for this register")
        members = {"bus": In(wishbone.Signature(addr_width=block.addr_width))}
        for reg in block.registers:
            members[reg.name.lower()] = Out(register_signature(reg, reg.name in self.hw_writable))
        for array in block.arrays:
            members[array.name.lower()] = Out(array_signature(array)).array(self.counts[array.name])
        super().__init__(members)

    def port(self, name):
        return getattr(self, name.lower())

    def _decoded(self):
        """``(word address, register, port, storage name, reset)`` of every register decoded."""
        for reg in self.block.registers:
            yield (reg.offset // 4, reg, self.port(reg.name), reg.name.lower(), self.resets.get(reg.name, reg.reset))
        for array in self.block.arrays:
            elements = getattr(self, array.name.lower())
            for i in range(self.counts[array.name]):
                for reg in array.registers:
                    yield (
                        (array.offset + i * array.stride + reg.offset) // 4,
                        reg,
                        getattr(elements[i], reg.name.lower()),
                        f"{array.name.lower()}{i}_{reg.name.lower()}",
                        reg.reset,
                    )

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        mask = wishbone.byte_mask(bus.sel)
        access = bus.cyc & bus.stb & ~bus.ack & ~bus.err

        decoded = list(self._decoded())
        storage = {}
        for _, reg, port, name, reset in decoded:
            if reg.access is Access.RW:
                storage[name] = Signal(reg.width, init=reset, name=f"{name}_q")
                m.d.comb += port.value.eq(storage[name])
                if hasattr(port, "hw_en"):
                    with m.If(port.hw_en):
                        m.d.sync += storage[name].eq(port.hw_data)
            m.d.sync += port.w_stb.eq(0) if reg.access is not Access.RO else port.r_stb.eq(0)

        m.d.sync += [bus.ack.eq(0), bus.err.eq(0)]
        with m.If(access):
            with m.Switch(bus.adr):
                for word, reg, port, name, _ in decoded:
                    with m.Case(word):
                        if reg.access is not Access.RO:
                            m.d.sync += bus.ack.eq(1)
                        if reg.access is Access.RW:
                            q = storage[name]
                            m.d.sync += bus.dat_r.eq(q)
                            with m.If(bus.we):
                                m.d.sync += [q.eq((q & ~mask) | (bus.dat_w & mask)), port.w_stb.eq(1)]
                        elif reg.access is Access.RO:
                            m.d.sync += bus.dat_r.eq(port.value)
                            with m.If(bus.we):
                                m.d.sync += bus.err.eq(1)  # a write to a read-only register is a bug
                            with m.Else():
                                m.d.sync += [bus.ack.eq(1), port.r_stb.eq(1)]
                        else:
                            m.d.sync += bus.dat_r.eq(0)
                            with m.If(bus.we):
                                m.d.sync += [port.w_data.eq(bus.dat_w & mask), port.w_stb.eq(1)]
                with m.Default():
                    m.d.sync += bus.err.eq(1)
        return m
