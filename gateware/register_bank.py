"""A Wishbone register bank built from a :class:`regmap.Block`, so decode never drifts from the map.

Each register becomes a port named after it (lower case):

* ``rw``: ``value`` (stored here, reset from the map) and ``w_stb`` (pulses on a bus write);
* ``ro``: ``value`` (driven by the block's logic) and ``r_stb`` (pulses on a bus read);
* ``wo``: ``w_data`` and ``w_stb`` (commands and doorbells; reads return 0).

Accesses to offsets with no register, and writes to ``ro`` registers, answer ``err``.
``ack``/``err`` are registered: one wait state, two for a read of a table's ``rw`` or ``ro`` register (below).

A :class:`regmap.RegisterArray` becomes an array port named after it: ``bank.vi[3].sq_doorbell``.
``counts`` builds fewer elements than the map reserves (a parameter of the card); ``resets``
overrides reset values of ``rw`` registers (parameters such as the default MTU); ``hw_writable``
names ``rw`` registers the block's logic may also load (``hw_en``/``hw_data``; a bus write in the
same cycle wins), such as an address register that increments after each data access.

``tables`` keeps the ``rw`` registers of arrays in memory instead of flip-flops, so an array of many
elements (the VIs) costs memory, not logic: ``tables={"VI": 5}`` holds the ``rw`` registers of
every element (``table_layout``), a memory per register, and gives the block's logic 5 lookups
(``bank.vi_lookup[i]``: it sets ``index`` and reads ``record`` in the same cycle; a register a
lookup's reader never uses costs that lookup no read port; an array with no ``rw`` registers,
such as the doorbell pages, takes ``tables={"VI": 0}`` and needs no memory). ``read_ahead={"VI": 2}``
adds lookups that read a cycle ahead (``bank.vi_lookup_ahead[i]``): the reader names the element
it will read in the next cycle (``next_index``, its ``index`` a cycle later) and the registered
read, a bus write of that cycle read through, puts the copy in block RAM (``ram_style``, from
17 elements).
Those registers have no per-element ports; the bus writes them (whole bytes: a table's ``rw``
registers are whole bytes wide, so a byte select is a write enable and nothing is read to merge)
and reads them a cycle later than other registers, through a registered read port: of the
column's memory where the block's logic has no lookups, else of one copy of every column (element
``e``'s column ``c`` at word ``e * slots + c``: one block RAM for 64 elements of up to 8 columns),
so no column keeps a copy, in LUT RAM or a block RAM of its own, for the bus alone. A table's
``ro`` registers have none either: the bank names the element the bus reads on its status port
(``bank.vi_status``: ``index``) and the block's logic answers with that element's values
(``record``) in the next cycle, the bus still naming the element, so it may answer from a
registered read of its own memories (no read strobe); a table's register of either kind is read
with two wait states. Its ``wo``
registers share one ``w_data`` flip-flop per register, with a strobe per element, and the table's
written port (``bank.vi_written``) names the element written with one strobe per register, for
logic that serves every element with one circuit (the strobes nobody reads cost nothing). A table
array's element is decoded from the address once, by a subtraction and a shift (its stride must
be a power of two), not by a comparison per register.

``indexed`` answers a run of ``ro`` registers at consecutive words through one port instead of a
port each: ``indexed={"counters": names}`` gives ``bank.counters`` (``index``: the named register's
position in ``names``, registered; ``reading``: the bus reads it in this cycle; ``value``: answered
in the same cycle), for a block that keeps those registers in a memory (``event_counters``). They
are decoded by one subtraction and read with two wait states, the bank's decode and the block's
read a cycle apart.
"""

from typing import NamedTuple

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base.regmap import Access

from . import wishbone
from .ram_style import block_ram_attrs


def register_signature(reg, hw_writable=False):
    if reg.access is Access.RW:
        members = {"value": Out(reg.width), "w_stb": Out(1)}
        if hw_writable:
            members.update(hw_en=In(1), hw_data=In(reg.width))
        return wiring.Signature(members)
    if reg.access is Access.RO:
        return wiring.Signature({"value": In(reg.width), "r_stb": Out(1)})
    return wiring.Signature({"w_data": Out(reg.width), "w_stb": Out(1)})


def array_signature(array, table=False):
    """An element's ports: in a table, its ``wo`` registers' only (``rw`` ones are in memory, ``ro``
    ones read through the status port)."""
    return wiring.Signature(
        {
            reg.name.lower(): Out(register_signature(reg))
            for reg in array.registers
            if not table or reg.access is Access.WO
        }
    )


def _layout(array, access):
    return data.StructLayout({reg.name.lower(): reg.width for reg in array.registers if reg.access is access})


def table_layout(array):
    """One element's ``rw`` registers, as a table in memory holds them."""
    return _layout(array, Access.RW)


def status_layout(array):
    """One element's ``ro`` registers, as the block's logic answers a table's status port."""
    return _layout(array, Access.RO)


def status_signature(array, count):
    """A table's ``ro`` registers (the bank's side): it names the element the bus reads (``index``,
    held for two cycles), the block's logic answers with that element's values in the second
    (``record``): combinationally, or from a read registered in the first."""
    return wiring.Signature({"index": Out(range(count)), "record": In(status_layout(array))})


def lookup_signature(array, count, *, ahead=False):
    """Reading one element's ``rw`` registers from its table (the reader's side); `ahead`: the
    reader names the element of the next cycle too (``next_index``)."""
    members = {"index": Out(range(count)), "record": In(table_layout(array))}
    if ahead:
        members["next_index"] = Out(range(count))
    return wiring.Signature(members)


def written_signature(array, count):
    """A table's ``wo`` registers as one port (the bank's side): the element the bus wrote last
    (``index``) and a strobe and the data of each register, for logic that serves every element
    with one circuit (the element's number instead of a strobe per element, decoded and encoded
    again)."""
    members = {"index": Out(range(count))}
    members.update(
        {reg.name.lower(): Out(register_signature(reg)) for reg in array.registers if reg.access is Access.WO}
    )
    return wiring.Signature(members)


def indexed_signature(count, width):
    """Reading one of ``count`` registers by its position (the bank's side): the bank names the
    register a cycle after the bus did, ``reading`` high for one cycle (at most every third), in
    which it takes ``value``."""
    return wiring.Signature({"index": Out(range(count)), "reading": Out(1), "value": In(width)})


def _written(old, new, mask):
    """A register after a bus write of ``new``: the byte lanes of ``mask`` from it, the rest kept."""
    return (old & ~mask) | (new & mask)


class _Column(NamedTuple):
    bus_read: object  # registered read port at the element the bus addresses (None: the table's copy)
    write: object  # write port there, a byte lane an enable
    reading: Signal  # the bus reads this register: its answer is the next cycle's


class _BusCopy(NamedTuple):
    read: object  # registered read port at the element and column the bus addresses
    write: object  # write port there, a byte lane an enable
    reading: Signal  # the bus reads one of the table's rw registers: its answer is the next cycle's


class _Answer(NamedTuple):
    reading: Signal  # the bus reads a table's register: it answers in the next cycle ...
    data: object  # ... with this


class _Table(NamedTuple):
    hit: Signal  # the bus addresses one of the table's elements ...
    element: Signal  # ... this one ...
    word: Signal  # ... at this word of it
    columns: dict  # the rw registers' memories' ports (_Column), by field name
    w_data: dict  # the wo registers' shared data, by register name
    status: object  # the status port (None without ro registers)
    status_reading: dict  # the ro registers' answers due in the next cycle, by field name
    bus_copy: object  # the bus's copy of every rw column (_BusCopy), or None


class _Run(NamedTuple):
    hit: Signal  # the bus addresses one of the run's registers
    port: object  # the indexed port


class RegisterBank(wiring.Component):
    def __init__(self, block, *, counts=None, resets=None, hw_writable=(), tables=None, read_ahead=None, indexed=None):
        self.block = block
        self.hw_writable = set(hw_writable)
        for name in self.hw_writable:
            if block.register(name).access is not Access.RW:
                raise ValueError(f"register {name}: only rw registers can be hardware-writable")
        self.tables = dict(tables or {})
        for name in self.tables:
            stride = block.array(name).stride
            if stride & (stride - 1):
                raise ValueError(f"array {name}: a table needs a power-of-two stride, not {stride:#x}")
        for name in self.tables:
            for reg in block.array(name).registers:
                if reg.access is Access.RW and reg.width % 8:
                    raise ValueError(f"register {name}.{reg.name}: a table's rw registers are whole bytes wide")
        self.read_ahead = dict(read_ahead or {})
        for name in self.read_ahead:
            if name not in self.tables:
                raise ValueError(f"array {name}: only a table's lookups can read ahead")
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
        self.indexed = {port: tuple(names) for port, names in (indexed or {}).items()}
        for port, names in self.indexed.items():
            regs = [block.register(name) for name in names]
            if any(reg.access is not Access.RO for reg in regs):
                raise ValueError(f"indexed {port}: only ro registers can be read by index")
            if [reg.offset for reg in regs] != [regs[0].offset + 4 * i for i in range(len(regs))]:
                raise ValueError(f"indexed {port}: the registers must be at consecutive words, in order")
        self.by_index = {name for names in self.indexed.values() for name in names}
        members = {"bus": In(wishbone.Signature(addr_width=block.addr_width))}
        for port, names in self.indexed.items():
            width = max(block.register(name).width for name in names)
            members[port] = Out(indexed_signature(len(names), width))
        for reg in block.registers:
            if reg.name in self.by_index:
                continue
            members[reg.name.lower()] = Out(register_signature(reg, reg.name in self.hw_writable))
        for array in block.arrays:
            table = array.name in self.tables
            members[array.name.lower()] = Out(array_signature(array, table)).array(self.counts[array.name])
            if table and self.tables[array.name]:
                lookup = lookup_signature(array, self.counts[array.name])
                members[f"{array.name.lower()}_lookup"] = In(lookup).array(self.tables[array.name])
            if self.read_ahead.get(array.name):
                lookup = lookup_signature(array, self.counts[array.name], ahead=True)
                members[f"{array.name.lower()}_lookup_ahead"] = In(lookup).array(self.read_ahead[array.name])
            if table and status_layout(array).members:
                members[f"{array.name.lower()}_status"] = Out(status_signature(array, self.counts[array.name]))
            if table and any(reg.access is Access.WO for reg in array.registers):
                members[f"{array.name.lower()}_written"] = Out(written_signature(array, self.counts[array.name]))
        super().__init__(members)

    def port(self, name):
        return getattr(self, name.lower())

    def _decoded(self):
        """``(word address, register, port, storage name, reset)`` of every register decoded."""
        for reg in self.block.registers:
            if reg.name in self.by_index:
                continue  # decoded by position (_indexed_access)
            yield (reg.offset // 4, reg, self.port(reg.name), reg.name.lower(), self.resets.get(reg.name, reg.reset))
        for array in self.block.arrays:
            elements = getattr(self, array.name.lower())
            if array.name in self.tables:
                continue  # decoded by element (_table_access)
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
        decoded = list(self._decoded())
        tables = self._tables(m)
        answers = []
        for t in tables.values():
            if t.bus_copy is not None:  # every column answers from it, with one reading flag
                answers += [_Answer(t.bus_copy.reading, t.bus_copy.read.data)]
            else:
                answers += [_Answer(column.reading, column.bus_read.data) for column in t.columns.values()]
        answers += [
            _Answer(reading, getattr(t.status.record, field))
            for t in tables.values()
            for field, reading in t.status_reading.items()
        ]
        runs = self._runs(m)
        answers += [_Answer(run.port.reading, run.port.value) for run in runs]
        answering = Signal()  # a table's or run's register is read: the bus waits for its answer
        m.d.comb += answering.eq(Cat(answer.reading for answer in answers).any())
        access = bus.cyc & bus.stb & ~bus.ack & ~bus.err & ~answering
        storage = {}
        for _, reg, port, name, reset in decoded:
            if reg.access is Access.RW:
                storage[name] = Signal(reg.width, init=reset, name=f"{name}_q")
                m.d.comb += port.value.eq(storage[name])
                if hasattr(port, "hw_en"):
                    with m.If(port.hw_en):
                        m.d.sync += storage[name].eq(port.hw_data)
            m.d.sync += port.w_stb.eq(0) if reg.access is not Access.RO else port.r_stb.eq(0)

        m.d.sync += [bus.ack.eq(0), bus.err.eq(0), *(answer.reading.eq(0) for answer in answers)]
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
                                m.d.sync += [q.eq(_written(q, bus.dat_w, mask)), port.w_stb.eq(1)]
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
                    self._table_access(m, mask, tables)
                    self._indexed_access(m, runs)
        answered = 0
        for answer in answers:
            answered |= Mux(answer.reading, answer.data, 0)
        with m.If(answering):
            m.d.sync += [bus.ack.eq(1), bus.dat_r.eq(answered)]
        return m

    def _runs(self, m):
        """``[_Run]``: each indexed run's port told the position the bus addresses, a cycle later
        (registered, so the bus's address decode and the block's read are not one path)."""
        runs = []
        for port_name, names in self.indexed.items():
            port = getattr(self, port_name)
            hit, relative = self._span(m, port_name, self.block.register(names[0]).offset // 4, len(names))
            m.d.sync += port.index.eq(relative)
            runs.append(_Run(hit, port))
        return runs

    def _span(self, m, name, first, words):
        """Whether the bus addresses one of ``words`` words from word ``first``, and which (its
        distance from ``first``): one subtraction for a table or run, not a comparison a register."""
        bus = self.bus
        hit = Signal(name=f"{name}_hit")
        relative = Signal(len(bus.adr), name=f"{name}_relative")
        m.d.comb += [hit.eq((bus.adr >= first) & (bus.adr < first + words)), relative.eq(bus.adr - first)]
        return hit, relative

    def _indexed_access(self, m, runs):
        """An access to a register of an indexed run: its value, or err for a write."""
        bus = self.bus
        for run in runs:
            with m.If(run.hit):
                m.d.sync += [bus.err.eq(bus.we), run.port.reading.eq(~bus.we)]  # answered with its value

    def _tables(self, m):
        """``{array: _Table}``: each table's element decoded, its memories with their lookups served,
        its status port told the element, its ``wo`` registers' data shared and strobes cleared."""
        tables = {}
        for name in self.tables:
            array = self.block.array(name)
            count = self.counts[name]
            first = array.offset // 4
            stride_words = array.stride // 4
            hit, relative = self._span(m, name.lower(), first, count * stride_words)
            element = Signal(range(count), name=f"{name.lower()}_element")
            word = Signal(range(stride_words), name=f"{name.lower()}_word")
            m.d.comb += [element.eq(relative >> (stride_words.bit_length() - 1)), word.eq(relative)]
            status = getattr(self, f"{name.lower()}_status", None)
            if status is not None:
                m.d.comb += status.index.eq(element)
            # A memory per rw register (a column; an array without them, such as the doorbell
            # pages, needs none), so a lookup's reader that never uses a register costs no copy of it.
            columns = {}
            rw = [reg for reg in array.registers if reg.access is Access.RW]
            lookups = getattr(self, f"{name.lower()}_lookup", ())
            ahead = getattr(self, f"{name.lower()}_lookup_ahead", ())
            bus_copy = None
            if (lookups or ahead) and len(rw) > 1:
                # The columns' copies serve the lookups; the bus reads one copy of them all, a
                # column a word of an element's slot, so the bus costs one memory (one block RAM
                # for 64 elements of up to 8 columns), not a read port (a copy) in each column.
                bus_copy = self._bus_copy(m, name, rw, count, element, word)
            for reg in rw:
                field = reg.name.lower()
                memory = Memory(shape=reg.width, depth=count, init=[reg.reset] * count)
                m.submodules[f"{name.lower()}_{field}"] = memory
                write_port = memory.write_port(granularity=8)
                bus_memory = memory
                for lookup in lookups:
                    port = memory.read_port(domain="comb")
                    m.d.comb += [port.addr.eq(lookup.index), getattr(lookup.record, field).eq(port.data)]
                if ahead:
                    # A copy with registered reads only, written as the bus writes the register:
                    # in block RAM (ram_style), which a memory with a combinational read port
                    # cannot be.
                    bus_memory = Memory(
                        shape=reg.width, depth=count, init=[reg.reset] * count, attrs=block_ram_attrs(count)
                    )
                    m.submodules[f"{name.lower()}_{field}_ahead"] = bus_memory
                    copy_write = bus_memory.write_port(granularity=8)
                    m.d.comb += [
                        copy_write.addr.eq(write_port.addr),
                        copy_write.data.eq(write_port.data),
                        copy_write.en.eq(write_port.en),
                    ]
                    for lookup in ahead:
                        port = bus_memory.read_port(transparent_for=(copy_write,))
                        m.d.comb += [port.addr.eq(lookup.next_index), getattr(lookup.record, field).eq(port.data)]
                m.d.comb += write_port.addr.eq(element)
                if bus_copy is not None:
                    columns[field] = _Column(None, write_port, bus_copy.reading)
                    continue
                bus_read = bus_memory.read_port()
                m.d.comb += bus_read.addr.eq(element)
                columns[field] = _Column(bus_read, write_port, Signal(name=f"{name.lower()}_{field}_reading"))
            w_data = {}
            written = getattr(self, f"{name.lower()}_written", None)
            for reg in array.registers:
                if reg.access is Access.WO:
                    field = reg.name.lower()
                    ports = [getattr(e, field) for e in getattr(self, name.lower())] + [getattr(written, field)]
                    w_data[reg.name] = Signal(reg.width, name=f"{name.lower()}_{field}_w_data")
                    m.d.comb += [port.w_data.eq(w_data[reg.name]) for port in ports]
                    m.d.sync += [port.w_stb.eq(0) for port in ports]
            status_reading = {
                reg.name.lower(): Signal(name=f"{name.lower()}_{reg.name.lower()}_reading")
                for reg in array.registers
                if reg.access is Access.RO
            }
            tables[name] = _Table(hit, element, word, columns, w_data, status, status_reading, bus_copy)
        return tables

    def _bus_copy(self, m, name, rw, count, element, word):
        """The bus's copy of a table's ``rw`` columns: element ``e``'s column ``c`` at word
        ``e * slots + c``, its ports addressed at the register the bus names (a ``_BusCopy``)."""
        slots = 1 << (len(rw) - 1).bit_length()
        depth = count * slots
        init = [rw[i % slots].reset if i % slots < len(rw) else 0 for i in range(depth)]
        copy = Memory(shape=max(reg.width for reg in rw), depth=depth, init=init, attrs=block_ram_attrs(depth))
        m.submodules[f"{name.lower()}_bus_copy"] = copy
        read, write = copy.read_port(), copy.write_port(granularity=8)
        column = Signal(range(slots), name=f"{name.lower()}_column")
        with m.Switch(word):
            for index, reg in enumerate(rw):
                with m.Case(reg.offset // 4):
                    m.d.comb += column.eq(index)
        m.d.comb += [read.addr.eq(element * slots + column), write.addr.eq(read.addr), write.data.eq(self.bus.dat_w)]
        return _BusCopy(read, write, Signal(name=f"{name.lower()}_reading"))

    def _table_access(self, m, mask, tables):
        """An access no register decoded: a register of a table's element, else an error."""
        bus = self.bus
        m.d.sync += bus.err.eq(1)  # unless a table's register answers (a later assignment wins)
        for name, table in tables.items():
            elements = getattr(self, name.lower())
            with m.If(table.hit):
                for reg in self.block.array(name).registers:
                    field = reg.name.lower()
                    with m.If(table.word == reg.offset // 4):
                        m.d.sync += bus.err.eq(0)
                        if reg.access is Access.WO:
                            m.d.sync += bus.ack.eq(1)
                        if reg.access is Access.RW:
                            column = table.columns[field]
                            with m.If(bus.we):
                                m.d.sync += bus.ack.eq(1)
                                m.d.comb += [
                                    column.write.en.eq(bus.sel[: len(column.write.en)]),
                                    column.write.data.eq(bus.dat_w),
                                ]
                                if table.bus_copy is not None:
                                    m.d.comb += table.bus_copy.write.en.eq(bus.sel[: len(column.write.en)])
                            with m.Else():
                                m.d.sync += column.reading.eq(1)  # answered with the read's data
                        elif reg.access is Access.RO:
                            with m.If(bus.we):
                                m.d.sync += bus.err.eq(1)  # a write to a read-only register is a bug
                            with m.Else():
                                m.d.sync += table.status_reading[field].eq(1)  # answered by the status port
                        else:
                            m.d.sync += bus.dat_r.eq(0)
                            with m.If(bus.we):
                                m.d.sync += table.w_data[reg.name].eq(bus.dat_w & mask)
                                # A comparison per element: an Array written at the element would
                                # give each element's strobe a case per element.
                                m.d.sync += [
                                    getattr(e, field).w_stb.eq(table.element == i) for i, e in enumerate(elements)
                                ]
                                written = getattr(self, f"{name.lower()}_written")
                                m.d.sync += [getattr(written, field).w_stb.eq(1), written.index.eq(table.element)]
