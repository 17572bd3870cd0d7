"""One record per VI in memory: the VI count costs memory, not logic.

An engine keeps a VI's state that only one VI at a time needs in a record: its ``owner`` port
(the VI the engine is at: ``vi``) reads the record combinationally (``record``) and writes it back
whole with some fields changed (``update(**fields)`` gives the statements; several in a cycle add
up, a later one winning a field). ``peek`` ports read the records at other VIs (where another
engine is).

A clear (``clear.<group>``, a mask of VIs) makes a group of fields (or the whole record) read as
``renewed`` (zero unless driven; a port's ``renewed`` may depend on its VI) until the VI's record
is next written, instead of writing it: a connect never competes with the owner for the write port,
and in the same cycle as a write to that VI the clear wins. One flip-flop per VI and group (and two
per group and read-ahead port: whether its next VI is cleared, and whether a write there would drop
that, registered like the record, so the 64-way choice of a flag is off the paths from the record).
A write drops its VI's flags a cycle later, from registers, the ports reading them as dropped
meanwhile, so the engine's decision to write reaches neither the 64 flags nor the ports' choices:
it ends at one flip-flop (``wrote``).

Each field is a memory of its own, written together: a port whose reader never uses a field costs
no copy of it (a peek for one register's value reads one field's memory, not the record's).

With ``read_ahead`` the owner's copy is instead the whole record in one memory with a registered
read: the owner names the VI it will be at in the next cycle (``owner.next_vi``, its ``vi`` a
cycle later) and the record is there when it gets there, with that cycle's write read through;
``peeks_ahead`` ports read another engine's VI the same way (``peek_ahead``). A record of at most
``LUT_RAM_MOST_BITS`` in all stays in LUT RAM with its read data registered, the write of the
read's cycle forwarded from registers (a transparent read there would be the address registered
and the read in series with the reader).
Synthesis can then put it in block RAM: a 64-entry record read combinationally costs four 16x4
LUT RAMs and a 4:1 multiplexer per 4 bits, in block RAM one DP16KD per 36 bits (at 8 entries it
stays LUT RAM, with a register after it). Other peeks stay combinational, on the fields' own
memories, except:

``peeks_next`` ports (``peek_next``) read the record at their ``vi`` and answer in the next cycle,
as it stands after that cycle's write and clears (the register bank's status port answers so):
each field they read has a copy of its own, written with the others, which synthesis puts in block
RAM for more than 16 VIs (``ram_style``), so such a reader costs no LUT RAM and no multiplexer.

With ``write_late`` the memories are written a cycle after the owner's write, from registers (its
VI, the record, whether to write), and every port reading that VI meanwhile takes the registered
record: the engine's decision to write and the record's new fields then end at flip-flops, not at
the write ports of block RAMs spread over the device (the routed card's longest path:
docs/boards.md). It costs a register per bit of the record and a multiplexer per bit a port reads.
"""

from amaranth import C, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .ram_style import LUT_RAM_ATTRS, LUT_RAM_MOST_BITS, block_ram_attrs


def read_signature(layout, vis, *, ahead=False):
    members = {"vi": In(range(vis)), "renewed": In(layout), "record": Out(layout)}
    if ahead:
        members["next_vi"] = In(range(vis))  # where `vi` will be in the next cycle
    return wiring.Signature(members)


class ViRecords(wiring.Component):
    def __init__(
        self, layout, vis, *, peeks=0, peeks_ahead=0, peeks_next=0, clears=None, read_ahead=False, write_late=False
    ):
        """`clears` maps a group's name to the fields it clears (``None``: the whole record);
        `read_ahead` reads the owner's record a cycle ahead, at ``owner.next_vi``; `write_late`
        writes the memories a cycle after the owner's write, from registers."""
        self.layout, self.vis, self.read_ahead, self.write_late = layout, vis, read_ahead, write_late
        self.groups = {name: tuple(fields or layout.members) for name, fields in (clears or {}).items()}
        for name, fields in self.groups.items():
            unknown = set(fields) - set(layout.members)
            if unknown:
                raise ValueError(f"clear group {name!r} names fields the record lacks: {sorted(unknown)}")
        members = {
            "owner": Out(read_signature(layout, vis, ahead=read_ahead)),
            "new": In(layout),  # the values of the fields a write changes...
            "change": In(data.StructLayout({name: 1 for name in layout.members})),  # ... which those are
        }
        if peeks:
            members["peek"] = Out(read_signature(layout, vis)).array(peeks)
        if peeks_ahead:
            members["peek_ahead"] = Out(read_signature(layout, vis, ahead=True)).array(peeks_ahead)
        if peeks_next:
            members["peek_next"] = Out(read_signature(layout, vis)).array(peeks_next)
        if self.groups:
            members["clear"] = In(data.StructLayout({name: vis for name in self.groups}))
        super().__init__(members)

    def update(self, **fields):
        """Statements writing the owner's record with `fields` changed."""
        return [
            statement
            for name, value in fields.items()
            for statement in (getattr(self.new, name).eq(value), getattr(self.change, name).eq(1))
        ]

    def elaborate(self, platform):
        m = Module()
        vis = self.vis
        peeks = getattr(self, "peek", [])
        ahead = [*([self.owner] if self.read_ahead else []), *getattr(self, "peek_ahead", [])]
        combinational = [*([] if self.read_ahead else [self.owner]), *peeks]
        memories = {}
        if combinational:
            for name, field in self.layout:
                memories[name] = m.submodules[f"memory_{name}"] = Memory(shape=field.shape, depth=vis, init=[])
        # Every VI starts cleared, so a group reads as `renewed` before its first write.
        cleared = {name: Signal(vis, init=(1 << vis) - 1, name=f"cleared_{name}") for name in self.groups}

        def renew(port, is_cleared):
            """The port's record reads its groups' renewed values where ``is_cleared(name)``."""
            for name, fields in self.groups.items():
                with m.If(is_cleared(name)):
                    m.d.comb += [getattr(port.record, field).eq(getattr(port.renewed, field)) for field in fields]

        # A write drops its VI's flags a cycle later, from registers (the engine's decision to
        # write and the 64 flags were one path, the routed card's longest: docs/boards.md); until
        # then every port reads them as dropped. A clear of that VI in the write's cycle keeps its
        # group's flag (the clear wins).
        write_en = self.change.as_value().any()
        written_vi, dropping = Signal(range(vis), name="written_vi"), {}
        m.d.sync += written_vi.eq(self.owner.vi)
        # Whether the owner wrote in the cycle before: the ports reading a cycle ahead combine it
        # with a VI comparison registered beside it, so that the engine's decision to write ends at
        # this one flip-flop, not at every port's choices. With `write_late` the memories take the
        # write a cycle later, from these registers.
        wrote, late_record = Signal(name="wrote"), Signal(self.layout, name="late_record")
        m.d.sync += wrote.eq(write_en)
        for name in self.groups:
            dropping[name] = Signal(name=f"dropping_{name}")
            m.d.sync += dropping[name].eq(write_en & ~getattr(self.clear, name).bit_select(self.owner.vi, 1))

        def cleared_at(vi):
            return lambda name: cleared[name].bit_select(vi, 1) & ~(dropping[name] & (written_vi == vi))

        def forwarded(data, taken, name=None):
            """``data`` as read from a memory, or the late write's record (its field ``name``)
            where ``taken``: the write the memories have not taken yet."""
            if not self.write_late:
                return data
            late = late_record if name is None else getattr(late_record, name)
            return Mux(taken, late, data)

        def forwarded_next(vi, name):
            """A registered read's forwarding choice: whether the owner wrote ``vi`` in the cycle
            before (its data then arrives with the late write, in this one), from `wrote` and a
            comparison registered beside it."""
            if not self.write_late:
                return None
            same_vi = Signal(name=f"{name}_same_vi")
            m.d.sync += same_vi.eq(self.owner.vi == vi)
            return wrote & same_vi

        for port in combinational:
            late_here = wrote & (written_vi == port.vi)
            for name, memory in memories.items():
                memory_port = memory.read_port(domain="comb")
                m.d.comb += [
                    memory_port.addr.eq(port.vi),
                    getattr(port.record, name).eq(forwarded(memory_port.data, late_here, name)),
                ]

        # The record is written whole: the fields not changed keep their value (or take their
        # renewed one, so a cleared group stays cleared once its flag drops).
        written_record = Signal(self.layout)
        for name in self.layout.members:
            m.d.comb += getattr(written_record, name).eq(
                Mux(getattr(self.change, name), getattr(self.new, name), getattr(self.owner.record, name))
            )

        if self.write_late:
            m.d.sync += late_record.eq(written_record)

        def owner_write(memory, name=None):
            """A write port of ``memory`` taking the written record (its field ``name``) at the
            owner's VI as the record is written (or a cycle later, from registers)."""
            write = memory.write_port()
            if self.write_late:
                vi, data, en = written_vi, late_record, wrote
            else:
                vi, data, en = self.owner.vi, written_record, write_en
            m.d.comb += [
                write.addr.eq(vi),
                write.data.eq(data if name is None else getattr(data, name)),
                write.en.eq(en),
            ]
            return write

        for name, memory in memories.items():
            owner_write(memory, name)
        if ahead:
            # A narrow record stays in LUT RAM and its reads are not transparent, the memory's
            # write of the read's cycle taken from registers where it wrote the VI read: a
            # transparent read of LUT RAM is its address registered and the read after it, in
            # series with the reader (the routed card's longest path, docs/boards.md), this one its
            # data registered. A wider one is read through where synthesis puts it (block RAM,
            # whose port registers the data).
            in_lut_ram = self.layout.size * vis <= LUT_RAM_MOST_BITS
            m.submodules.record_memory = record_memory = Memory(
                shape=self.layout, depth=vis, init=[], attrs=LUT_RAM_ATTRS if in_lut_ram else {}
            )
            write = owner_write(record_memory)
            if in_lut_ram:
                write_data = Signal(self.layout, name="write_data")
                m.d.sync += write_data.eq(write.data)
            for i, port in enumerate(ahead):
                read = record_memory.read_port(transparent_for=() if in_lut_ram else (write,))
                data = read.data
                if in_lut_ram:
                    through = Signal(name=f"ahead{i}_through")
                    m.d.sync += through.eq(write.en & (write.addr == port.next_vi))
                    data = Mux(through, write_data, read.data)
                taken = forwarded_next(port.next_vi, f"ahead{i}")
                m.d.comb += [read.addr.eq(port.next_vi), port.record.eq(forwarded(data, taken))]

        for i, port in enumerate(getattr(self, "peek_next", ())):
            # The VI read in the cycle before, whose flags now stand as its data does.
            read_vi = Signal(range(vis), name=f"peek_next{i}_vi")
            m.d.sync += read_vi.eq(port.vi)
            taken = forwarded_next(port.vi, f"peek_next{i}")
            for name, field in self.layout:
                copy = Memory(shape=field.shape, depth=vis, init=[], attrs=block_ram_attrs(vis))
                m.submodules[f"peek_next{i}_{name}"] = copy
                write = owner_write(copy, name)
                read = copy.read_port(transparent_for=(write,))
                m.d.comb += [read.addr.eq(port.vi), getattr(port.record, name).eq(forwarded(read.data, taken, name))]
            renew(port, cleared_at(read_vi))

        # A port reading ahead learns whether the VI it reads will be cleared when it gets there
        # a cycle ahead too, registered like its record: the 64-way choice of a flag is then off
        # every path from the record (its `next_vi` must settle early enough for that choice).
        # The owner's write to that VI in the same cycle drops the flag unless a clear comes with
        # it; the write's decision is taken from `wrote` a cycle later, not into the registers.
        for port in combinational:
            renew(port, cleared_at(port.vi))
        for port in ahead:
            here = {}
            for name in self.groups:
                clearing = getattr(self.clear, name).bit_select(port.next_vi, 1)
                kept = Signal(init=1, name=f"cleared_{name}_ahead")  # cleared, or being cleared
                droppable = Signal(name=f"cleared_{name}_ahead_droppable")  # by a write there
                m.d.sync += [
                    kept.eq(cleared_at(port.next_vi)(name) | clearing),
                    droppable.eq((self.owner.vi == port.next_vi) & ~clearing),
                ]
                here[name] = kept & ~(wrote & droppable)
            renew(port, here.__getitem__)

        for name in self.groups:
            dropped = Mux(dropping[name], C(1, vis) << written_vi, 0)
            m.d.sync += cleared[name].eq((cleared[name] & ~dropped) | getattr(self.clear, name))
        return m
