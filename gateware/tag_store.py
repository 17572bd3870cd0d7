"""The tag SRAM: the home directory of this node's shared slice, the network cache's tags, and
the cache's LRU state.

One command port serves whoever owns the card's tags (the local access controller or the
sequencer; :mod:`ownership` makes them take turns). Lookups are pipelined in three stages: the
command is registered, its address reads every memory, the compared result is registered, so
``resp`` is valid three cycles after the command (:data:`LOOKUP_LATENCY`). Read-only commands may follow each other every cycle; a command that
updates the LRU order (``TOUCH``) takes the port for one extra cycle.

A directory entry: memory state, ``lock``, head node. A tag: line address (``addr`` without its
offset in the line), SCI
cache state, forward and backward node pointers. LRU: per set, the ways in order, least
recently used first.
"""

from enum import IntEnum

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base import coherence as coh
from numavia.base.coherence import CACHE_STATE_BITS, MEMORY_STATE_BITS, NODE_ID_BITS, CacheGeometry

from .ram_style import block_ram_attrs
from .round_robin import lowest_set, one_hot_index

LOOKUP_LATENCY = 3


class TagOp(IntEnum):
    LOOKUP = 0  # cache tags of addr's set + directory entry of addr's line
    ALLOC = 1  # choose a way for addr: invalid, else least recently used stable
    WRITE_TAG = 2  # tag of (addr's set, way) := addr, state, fwd, bwd
    WRITE_DIR = 3  # directory entry of addr's line := mstate, lock, head
    TOUCH = 4  # (addr's set, way) becomes most recently used
    READ_WAY = 5  # tag of (set, way), for the flush scan


def tag_layout(geometry):
    return data.StructLayout(
        {"line": geometry.line_addr_bits, "state": CACHE_STATE_BITS, "fwd": NODE_ID_BITS, "bwd": NODE_ID_BITS}
    )


DirLayout = data.StructLayout({"mstate": MEMORY_STATE_BITS, "lock": 1, "head": NODE_ID_BITS})


def home_owned(mstate):
    """Whether a directory entry's memory state is one of :data:`~numavia.base.coherence.HOME_OWNED`
    (memory is the line, no copy anywhere)."""
    return mstate.matches(*coh.HOME_OWNED)


def state_mask(states):
    """A constant with bit ``s`` set for each cache state ``s`` of ``states``: whether a state is
    one of them is ``state_mask(...).bit_select(state, 1)``."""
    return Const(sum(1 << int(s) for s in set(states)), 1 << CACHE_STATE_BITS)


def command_layout(geometry):
    return data.StructLayout(
        {
            "op": 3,
            "addr": 32,
            "set": max(1, geometry.set_bits),
            "way": max(1, geometry.way_bits),
            "state": CACHE_STATE_BITS,
            "fwd": NODE_ID_BITS,
            "bwd": NODE_ID_BITS,
            "mstate": MEMORY_STATE_BITS,
            "lock": 1,
            "head": NODE_ID_BITS,
        }
    )


def response_layout(geometry):
    return data.StructLayout(
        {
            "hit": 1,
            "way": max(1, geometry.way_bits),
            "tag": tag_layout(geometry),
            "dir": DirLayout,
            "victim": 1,
            "victim_line": geometry.line_addr_bits,
            "no_way": 1,
            # Every lookup: whether a way of the set is invalid, and the lowest such way. A local
            # miss hands this on to the sequencer, which then need not look the set up again.
            "free": 1,
            "free_way": max(1, geometry.way_bits),
        }
    )


def line_index(addr, geometry):
    """Index of a global line address's line within its home's slice (an Amaranth value)."""
    return addr[geometry.offset_bits : 26]


def set_of_line(addr, geometry, entries=None):
    """Cache set of a global line address (an Amaranth value); with ``entries``, its index in
    another direct-mapped table hashed alike (the allocation filter)."""
    entries = geometry.sets if entries is None else entries
    if entries == 1:
        return Const(0, 1)
    return coh.cache_set(line_index(addr, geometry), addr[26:32], entries)[: (entries - 1).bit_length()]


def cache_data_index(set_index, way, word, geometry):
    """Word index in the network-cache data memory of (set, way, word)."""
    return ((set_index * geometry.ways + way) << geometry.word_bits) | word


def _states_mask(states):
    mask = 0
    for s in states:
        mask |= 1 << int(s)
    return mask


class TagStore(wiring.Component):
    def __init__(self, *, geometry=CacheGeometry(), slice_lines, block_ram=False):
        """``block_ram``: the tags in block RAM where the sets are many (``ram_style``), not in
        LUT RAM: logic for block RAMs, and a block RAM's output delay on the tag compare."""
        if slice_lines < 1 or slice_lines & (slice_lines - 1):
            raise ValueError(f"slice_lines must be a power of two, not {slice_lines}")
        if geometry.ways > 8:
            raise ValueError("at most 8 ways")
        self.geometry, self.slice_lines, self.block_ram = geometry, slice_lines, block_ram
        self.sets, self.ways = geometry.sets, geometry.ways
        self.set_bits, self.way_bits = geometry.set_bits, geometry.way_bits
        super().__init__(
            {
                "cmd_valid": In(1),
                "cmd_ready": Out(1),
                "cmd": In(command_layout(geometry)),
                "resp_valid": Out(1),
                "resp": Out(response_layout(geometry)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        W = self.ways
        cmd = self.cmd
        sb = max(1, self.set_bits)

        tags = []
        g = self.geometry
        TagLayout = tag_layout(g)
        for w in range(W):
            attrs = block_ram_attrs(self.sets) if self.block_ram else {}
            mem = Memory(shape=TagLayout, depth=self.sets, init=[], attrs=attrs)
            m.submodules[f"tag{w}"] = mem
            tags.append((mem.read_port(), mem.write_port()))
        dir_mem = Memory(shape=DirLayout, depth=self.slice_lines, init=[])
        m.submodules.directory = dir_mem
        dir_rd, dir_wr = dir_mem.read_port(), dir_mem.write_port()
        lru_bits = W * max(1, self.way_bits)
        lru_init = 0
        for position, way in enumerate(range(W)):
            lru_init |= way << (position * max(1, self.way_bits))
        lru_mem = Memory(shape=unsigned(lru_bits), depth=self.sets, init=[lru_init] * self.sets)
        m.submodules.lru = lru_mem
        lru_rd, lru_wr = lru_mem.read_port(), lru_mem.write_port()

        # --- stage 0: the command is registered (the memories' address comes from flops) -------
        busy = Signal()  # an LRU read-modify-write (TOUCH) is in flight
        accept = self.cmd_valid & ~busy
        m.d.comb += self.cmd_ready.eq(~busy)
        c0_valid = Signal()
        c0 = Signal.like(cmd)
        c0_set = Signal(sb)
        m.d.sync += c0_valid.eq(accept)
        with m.If(accept):
            m.d.sync += [c0.eq(cmd), c0_set.eq(Mux(cmd.op == TagOp.READ_WAY, cmd.set, set_of_line(cmd.addr, g)))]
        for rd, _ in tags:
            m.d.comb += rd.addr.eq(c0_set)
        dir_index = line_index(c0.addr, g)
        m.d.comb += [dir_rd.addr.eq(dir_index), lru_rd.addr.eq(c0_set)]

        # Writes of tags and directory.
        with m.If(c0_valid & (c0.op == TagOp.WRITE_TAG)):
            for w, (_, wr) in enumerate(tags):
                m.d.comb += [
                    wr.addr.eq(c0_set),
                    wr.data.line.eq(c0.addr[g.offset_bits :]),
                    wr.data.state.eq(c0.state),
                    wr.data.fwd.eq(c0.fwd),
                    wr.data.bwd.eq(c0.bwd),
                    wr.en.eq(c0.way == w if W > 1 else 1),
                ]
        with m.If(c0_valid & (c0.op == TagOp.WRITE_DIR)):
            m.d.comb += [
                dir_wr.addr.eq(dir_index),
                dir_wr.data.mstate.eq(c0.mstate),
                dir_wr.data.lock.eq(c0.lock),
                dir_wr.data.head.eq(c0.head),
                dir_wr.en.eq(1),
            ]

        # --- stage 1: memories answer; compare and choose ---------------------------------------
        s1_valid = Signal()
        s1_op = Signal(3)
        s1_line = Signal(g.line_addr_bits)
        s1_way = Signal(max(1, self.way_bits))
        s1_set = Signal(sb)
        m.d.sync += [
            s1_valid.eq(c0_valid & (c0.op != TagOp.WRITE_TAG) & (c0.op != TagOp.WRITE_DIR)),
            s1_op.eq(c0.op),
            s1_line.eq(c0.addr[g.offset_bits :]),
            s1_way.eq(c0.way),
            s1_set.eq(c0_set),
        ]

        entries = [rd.data for rd, _ in tags]
        stable = _states_mask(coh.STABLE_VALID)
        hits = Cat(*[(e.line == s1_line) & (e.state != coh.CacheState.INVALID) for e in entries])
        invalids = Cat(*[e.state == coh.CacheState.INVALID for e in entries])
        lru_order = [lru_rd.data.word_select(i, max(1, self.way_bits)) if W > 1 else Const(0) for i in range(W)]
        # ALLOC prefers an invalid way (the lowest), else the least recently used stable way. Both
        # are chosen one-hot, the lowest set bit isolated as `bits & -bits`: a priority chain
        # over the ways, encoded and decoded again, was the card's longest path into `resp`.
        stable_ways = Cat(*[Const(stable, 16).bit_select(e.state, 1) for e in entries])
        stable_at = Signal(W)  # the LRU positions holding a stable way
        m.d.comb += stable_at.eq(Cat(*[stable_ways.bit_select(lru_order[i], 1) for i in range(W)]))
        lowest_invalid = lowest_set(m, "invalid", list(invalids))
        first_stable = lowest_set(m, "stable", list(stable_at))
        victim_onehot = Signal(W)
        for w in range(W):
            m.d.comb += victim_onehot[w].eq(Cat(*[first_stable[i] & (lru_order[i] == w) for i in range(W)]).any())
        any_invalid, victim, no_way = Signal(), Signal(), Signal()
        m.d.comb += [
            any_invalid.eq(invalids.any()),
            victim.eq(~any_invalid & stable_at.any()),
            no_way.eq(~any_invalid & ~stable_at.any()),
        ]
        free_way = one_hot_index(m, "free_way", lowest_invalid)

        # The way the response is about, one-hot: AND-OR selection keeps the path to the
        # response register shallow (a priority encoder feeding a wide mux does not).
        alloc_onehot = Signal(W)
        m.d.comb += alloc_onehot.eq(Mux(any_invalid, lowest_invalid, victim_onehot))
        way_onehot = Signal(W)
        for w in range(W):
            m.d.comb += way_onehot[w].eq(s1_way == w)
        onehot = Signal(W)
        with m.Switch(s1_op):
            with m.Case(TagOp.LOOKUP):
                m.d.comb += onehot.eq(hits)  # at most one way holds a line
            with m.Case(TagOp.ALLOC):
                m.d.comb += onehot.eq(alloc_onehot)
            with m.Default():
                m.d.comb += onehot.eq(way_onehot)
        chosen = Signal(TagLayout)
        selected = Signal(max(1, self.way_bits))
        chosen_bits = 0
        selected_bits = 0
        for w in range(W):
            chosen_bits = chosen_bits | (entries[w].as_value() & onehot[w].replicate(TagLayout.size))
            selected_bits = selected_bits | Mux(onehot[w], w, 0)
        m.d.comb += [chosen.eq(chosen_bits), selected.eq(selected_bits)]

        # --- stage 2: registered response --------------------------------------------------------
        resp = self.resp
        m.d.sync += self.resp_valid.eq(s1_valid)
        with m.If(s1_valid):
            m.d.sync += [
                resp.hit.eq(hits.any()),
                resp.way.eq(selected),
                resp.tag.eq(chosen),
                resp.dir.eq(dir_rd.data),
                resp.victim.eq((s1_op == TagOp.ALLOC) & victim),
                resp.victim_line.eq(chosen.line),
                resp.no_way.eq((s1_op == TagOp.ALLOC) & no_way),
                resp.free.eq(invalids.any()),
                resp.free_way.eq(free_way),
            ]

        # TOUCH: move the way to the most recently used end, in stage 1.
        if W > 1:
            touch = s1_valid & (s1_op == TagOp.TOUCH)
            m.d.comb += busy.eq(touch | (c0_valid & (c0.op == TagOp.TOUCH)))
            wb = self.way_bits
            position = Signal(range(W))
            for i in reversed(range(W)):
                with m.If(lru_order[i] == s1_way):
                    m.d.comb += position.eq(i)
            new_order = []
            for i in range(W - 1):
                new_order.append(Mux(i < position, lru_order[i], lru_order[i + 1]))
            new_order.append(s1_way)
            m.d.comb += [lru_wr.addr.eq(s1_set), lru_wr.data.eq(Cat(*[o[:wb] for o in new_order])), lru_wr.en.eq(touch)]
        return m
