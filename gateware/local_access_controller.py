"""Local access controller: the hard-wired path every host access takes (the paper's LAC).

Per line access (the burst splitter guarantees at most one cache line): decode the address
(private memory, this node's slice, another node's slice), take ownership of tags and memories,
look the line up, and either serve it from memory (a hit) or hand it to the sequencer over the
*miss interface* and pass the sequencer's answer back to the host.

Hits: a read of this node's line in memory state HOME/SHOWN/FRESH, a write to one in HOME or
SHOWN (which makes it HOME: a tag write beside the data's); a read of
another node's line held by the network cache in a stable state, a write to one held
ONLY_DIRTY; any private access. In NUMA mode the network cache is bypassed: every access to
another node's slice is a miss (the sequencer makes it an uncached access at its home).

A read miss of another node's line that the network cache does not hold in any state, and that
the allocation filter has not seen miss lately or knows as dead, goes to the sequencer as
``READ_ONCE``: read without caching it (``allocation_filter``). ``cache_first_miss`` turns the
filter off; ``purged`` (from the sequencer) tells it of copies purged here.

Miss interface: a ``miss`` header (kind, line address, first word, word count); for writes
the host's ``count`` beats follow on ``miss_data``, the first word's first; the sequencer answers
on ``done`` with the host response beats themselves.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import coherence as coh
from numavia.base import regmap
from numavia.base.coherence import NODE_ID_BITS, CacheGeometry, MemoryState
from numavia.base.microcode.isa import LocalKind

from .allocation_filter import AllocationFilter
from .host_port import HostAddressMap, HostPortSignature, ResponseLayout, WriteBeatLayout
from .memory_controller import MemoryPortSignature, MemSpace
from .tag_store import (
    DirLayout,
    TagOp,
    cache_data_index,
    command_layout,
    home_owned,
    response_layout,
    set_of_line,
    state_mask,
    tag_layout,
)

#: Word and count are sized for the largest line (coherence.MAX_LINE_BYTES). ``free``: the local
#: access controller's tag lookup found no copy of the line and way ``way`` of its set invalid
#: (the tag store has at most 8 ways), so the sequencer need not look the set up again.
MissLayout = data.StructLayout({"kind": 2, "addr": 32, "word": 4, "count": 5, "free": 1, "way": 3})


class MissSignature(wiring.Signature):
    """The local side's view of the miss interface."""

    def __init__(self):
        super().__init__(
            {
                "miss": Out(stream.Signature(MissLayout)),
                "miss_data": Out(stream.Signature(WriteBeatLayout)),
                "done": In(stream.Signature(ResponseLayout)),
            }
        )


_COUNTER_NAMES = tuple(name for name, _ in regmap.LAC_COUNTERS)
#: The counters of events: a run of consecutive registers, which the local side counts
#: (event_counters) from the controller's pulses. The others are values it keeps.
EVENT_COUNTERS = _COUNTER_NAMES[: _COUNTER_NAMES.index("ACCESS_CYCLES")]


class LacEvents(wiring.Signature):
    """A pulse per ``EVENT_COUNTERS`` entry (lower-case names), in the cycle the event happens."""

    NAMES = tuple(name.lower() for name in EVENT_COUNTERS)

    def __init__(self):
        super().__init__({name: Out(1) for name in self.NAMES})


class LacCounters(wiring.Signature):
    """The other ``regmap.LAC_COUNTERS`` (lower-case names), 32-bit values the controller keeps:
    the sum of the latencies, the last two, and the count of reads not cached."""

    NAMES = tuple(name.lower() for name in _COUNTER_NAMES if name not in EVENT_COUNTERS)

    def __init__(self):
        super().__init__({name: Out(32) for name in self.NAMES})


class LocalAccessController(wiring.Component):
    def __init__(self, *, address_map=HostAddressMap(), geometry=CacheGeometry()):
        self.amap, self.geometry = address_map, geometry
        super().__init__(
            {
                "line": In(HostPortSignature()),
                "tag_cmd_valid": Out(1),
                "tag_cmd_ready": In(1),
                "tag_cmd": Out(command_layout(geometry)),
                "tag_resp_valid": In(1),
                "tag_resp": In(response_layout(geometry)),
                "mem": Out(MemoryPortSignature()),
                "own_req": Out(1),
                "own_grant": In(1),
                "remote": Out(MissSignature()),
                "node_id": In(NODE_ID_BITS),
                "node_ready": In(1),
                "numa_mode": In(1),
                "cache_first_miss": In(1),  # cache a remote line at its first read miss (no filter)
                "purged": In(stream.Signature(32, always_ready=True)),  # a copy here was purged
                "flush": In(1),  # pulse: roll every line of the network cache out
                "flush_busy": Out(1),
                "clear_counters": In(1),
                "debug_start": In(1),  # pulse: read debug_what at debug_addr (see regmap.LAC)
                "debug_what": In(3),
                "debug_addr": In(32),
                "debug_busy": Out(1),
                "debug_tag": Out(tag_layout(geometry)),
                "debug_dir": Out(DirLayout),
                "debug_data": Out(32),
                "refused_upstream": In(1),  # the burst splitter refused a malformed access
                "events": Out(LacEvents()),
                "counters": Out(LacCounters()),
            }
        )

    def elaborate(self, platform):
        m = Module()
        amap, g = self.amap, self.geometry
        line, mem, remote, ctr = self.line, self.mem, self.remote, self.counters

        def event(name):
            """A counted event happens in this cycle (the local side counts it)."""
            m.d.comb += getattr(self.events, name).eq(1)

        LINE_WORDS = g.line_words

        m.submodules.read_fifo = read_fifo = fifo.SyncFIFOBuffered(width=32, depth=LINE_WORDS)
        m.submodules.allocation_filter = allocation_filter = AllocationFilter(g)

        # The access being served.
        addr = Signal(32)
        write = Signal()
        count = Signal(range(LINE_WORDS + 1))
        word = Signal(range(LINE_WORDS))
        shared = Signal()
        home = Signal(NODE_ID_BITS)
        offset = Signal(32)
        is_home = Signal()
        cache_way = Signal.like(self.tag_resp.way)
        kind_cache = Signal()  # served from the network cache (touch the LRU after)
        unshow = Signal()  # a home write to a SHOWN line: make it HOME after
        read_once = Signal()  # a miss the sequencer reads without caching the line
        miss_free = Signal()  # the miss's lookup: no copy of the line, and way `miss_way` invalid
        miss_way = Signal.like(self.tag_resp.free_way)
        issued = Signal(range(LINE_WORDS + 1))
        moved = Signal(range(LINE_WORDS + 1))
        start = Signal(32)
        now = Signal(32)
        m.d.sync += now.eq(now + 1)

        line_addr = Cat(Const(0, g.offset_bits), offset[g.offset_bits : 26], home)  # global line address
        set_index = set_of_line(line_addr, g)
        m.d.comb += allocation_filter.line.eq(line_addr)  # steady from OWN to DECIDE
        wiring.connect(m, wiring.flipped(self.purged), allocation_filter.purged)
        word_index = Signal(24)

        req = line.req.payload
        in_shared = req.addr < amap.shared_bytes
        in_private = (req.addr >= amap.private_base) & (req.addr < amap.private_base + amap.private_bytes)

        def finish_access():
            event("accesses")
            m.d.sync += [
                ctr.last_latency.eq(now - start),
                ctr.access_cycles.eq(ctr.access_cycles + (now - start)),
            ]

        def answer_reads():
            """Pass read data from the FIFO to the host; true on the last beat."""
            m.d.comb += [
                line.resp.valid.eq(read_fifo.r_rdy),
                line.resp.payload.data.eq(read_fifo.r_data),
                line.resp.payload.last.eq(moved + 1 == count),
                read_fifo.r_en.eq(line.resp.ready),
            ]
            last = read_fifo.r_rdy & line.resp.ready & (moved + 1 == count)
            with m.If(read_fifo.r_rdy & line.resp.ready):
                m.d.sync += moved.eq(moved + 1)
            return last

        def unshow_line():
            """A home write to a SHOWN line: the line is HOME again."""
            m.d.comb += [
                self.tag_cmd_valid.eq(1),
                self.tag_cmd.op.eq(TagOp.WRITE_DIR),
                self.tag_cmd.addr.eq(line_addr),
                self.tag_cmd.mstate.eq(MemoryState.HOME),
            ]
            with m.If(self.tag_cmd_ready):
                m.d.sync += unshow.eq(0)

        read_hit_states = state_mask(coh.READ_HIT)
        write_hit_states = state_mask(coh.WRITE_HIT)
        resp = self.tag_resp

        # A flush command waits for the access in progress; it is remembered until it starts.
        flush_pending = Signal()
        with m.If(self.flush):
            m.d.sync += flush_pending.eq(1)
        # So is a debug read.
        debug_pending = Signal()
        debug_what = Signal(3)
        debug_addr = Signal(32)
        with m.If(self.debug_start):
            m.d.sync += [debug_pending.eq(1), debug_what.eq(self.debug_what), debug_addr.eq(self.debug_addr)]

        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(flush_pending):
                    m.d.sync += flush_pending.eq(0)
                    m.next = "FLUSH"
                with m.Elif(debug_pending):
                    m.d.sync += debug_pending.eq(0)
                    m.next = "DEBUG"
                with m.Else():
                    m.d.comb += line.req.ready.eq(1)
                with m.If(~flush_pending & ~debug_pending & line.req.valid):
                    m.d.sync += [
                        addr.eq(req.addr),
                        write.eq(req.write),
                        count.eq(req.count),
                        word.eq(req.addr[2 : g.offset_bits]),
                        start.eq(now),
                        issued.eq(0),
                        moved.eq(0),
                        shared.eq(in_shared),
                        home.eq(req.addr >> amap.slice_bits),
                        offset.eq(req.addr & (amap.slice_bytes - 1)),
                        is_home.eq((req.addr >> amap.slice_bits) == self.node_id),
                        kind_cache.eq(0),
                    ]
                    bad = (
                        (req.count == 0)
                        | (req.count > LINE_WORDS)
                        | (req.addr[2 : g.offset_bits] + req.count > LINE_WORDS)
                        | ~(in_shared | in_private)
                        | (in_shared & ~self.node_ready)
                    )
                    with m.If(bad):
                        m.next = "REFUSE"
                    with m.Elif(in_private):
                        m.d.sync += word_index.eq((req.addr - amap.private_base) >> 2)
                        m.next = "OWN_PRIVATE"
                    with m.Else():
                        m.d.sync += word_index.eq((req.addr & (amap.slice_bytes - 1)) >> 2)
                        m.next = "OWN"

            with m.State("OWN_PRIVATE"):
                m.d.comb += self.own_req.eq(1)
                with m.If(self.own_grant):
                    event("private_accesses")
                    with m.If(write):
                        m.next = "WRITE_PRIVATE"
                    with m.Else():
                        m.next = "READ_PRIVATE"
                with m.Else():
                    event("stall_cycles")

            with m.State("OWN"):
                m.d.comb += self.own_req.eq(1)
                with m.If(self.own_grant):
                    m.next = "LOOKUP"
                with m.Else():
                    event("stall_cycles")

            with m.State("LOOKUP"):
                m.d.comb += [
                    self.own_req.eq(1),
                    self.tag_cmd_valid.eq(1),
                    self.tag_cmd.op.eq(TagOp.LOOKUP),
                    self.tag_cmd.addr.eq(line_addr),
                ]
                with m.If(self.tag_cmd_ready):
                    m.next = "DECIDE"

            with m.State("DECIDE"):
                m.d.comb += self.own_req.eq(1)
                with m.If(self.tag_resp_valid):
                    mstate = resp.dir.mstate
                    shown = mstate == MemoryState.SHOWN
                    owned = home_owned(mstate)
                    home_read = is_home & ~write & (owned | (mstate == MemoryState.FRESH))
                    home_write = is_home & write & owned & ~resp.dir.lock
                    cache_ok = ~is_home & ~self.numa_mode & resp.hit
                    cache_read = cache_ok & ~write & read_hit_states.bit_select(resp.tag.state, 1)
                    cache_write = cache_ok & write & write_hit_states.bit_select(resp.tag.state, 1)
                    m.d.sync += cache_way.eq(resp.way)
                    # A hit on a line the filter remembers is a copy that paid for itself.
                    m.d.comb += allocation_filter.referenced.eq((cache_read | cache_write) & allocation_filter.seen)
                    with m.If(home_read):
                        event("home_read_hits")
                        m.next = "READ_HOME"
                    with m.Elif(home_write):
                        event("home_write_hits")
                        m.d.sync += unshow.eq(shown)
                        m.next = "WRITE_HOME"
                    with m.Elif(cache_read):
                        event("cache_read_hits")
                        m.d.sync += [
                            kind_cache.eq(1),
                            word_index.eq(cache_data_index(set_index, resp.way, word, g)),
                        ]
                        m.next = "READ_CACHE"
                    with m.Elif(cache_write):
                        event("cache_write_hits")
                        m.d.sync += [
                            kind_cache.eq(1),
                            word_index.eq(cache_data_index(set_index, resp.way, word, g)),
                        ]
                        m.next = "WRITE_CACHE"
                    with m.Else():
                        # Not cached in any state, and not seen missing lately (remember it) or
                        # dead: read it without caching it.
                        uncached = ~is_home & ~self.numa_mode & ~self.cache_first_miss & ~resp.hit
                        seen, dead = allocation_filter.seen, allocation_filter.dead
                        once = uncached & ~write & (~seen | dead)
                        m.d.sync += [
                            read_once.eq(once),
                            miss_free.eq(~resp.hit & resp.free),
                            miss_way.eq(resp.free_way),
                        ]
                        m.d.comb += allocation_filter.remember.eq(once & ~seen)
                        with m.If(write):
                            event("write_misses")
                        with m.Else():
                            event("read_misses")
                        with m.If(once):
                            m.d.sync += ctr.read_once.eq(ctr.read_once + 1)
                        m.next = "MISS"

            # --- hits: memory reads into the FIFO, memory writes from the host's beats -----------
            for state, space in (
                ("READ_HOME", MemSpace.HOME),
                ("READ_CACHE", MemSpace.CACHE),
                ("READ_PRIVATE", MemSpace.PRIVATE),
            ):
                with m.State(state):
                    m.d.comb += self.own_req.eq(1)
                    answer_reads()  # words already read go out while the rest are read
                    with m.If(issued != count):
                        m.d.comb += [
                            mem.cmd.valid.eq(1),
                            mem.cmd.payload.space.eq(space),
                            mem.cmd.payload.index.eq(word_index),
                        ]
                        with m.If(mem.cmd.ready):
                            m.d.sync += [issued.eq(issued + 1), word_index.eq(word_index + 1)]
                    with m.Else():
                        m.next = "HIT_DONE"
            for state, space in (
                ("WRITE_HOME", MemSpace.HOME),
                ("WRITE_CACHE", MemSpace.CACHE),
                ("WRITE_PRIVATE", MemSpace.PRIVATE),
            ):
                with m.State(state):
                    m.d.comb += self.own_req.eq(1)
                    if space == MemSpace.HOME:
                        with m.If(unshow):  # beside the write: the tag SRAM is idle meanwhile
                            unshow_line()
                    with m.If(issued != count):
                        m.d.comb += [
                            mem.cmd.valid.eq(line.wdata.valid),
                            mem.cmd.payload.space.eq(space),
                            mem.cmd.payload.index.eq(word_index),
                            mem.cmd.payload.write.eq(1),
                            mem.cmd.payload.data.eq(line.wdata.payload.data),
                            mem.cmd.payload.be.eq(line.wdata.payload.be),
                            line.wdata.ready.eq(mem.cmd.ready),
                        ]
                        with m.If(line.wdata.valid & mem.cmd.ready):
                            m.d.sync += [issued.eq(issued + 1), word_index.eq(word_index + 1)]
                    with m.Else():
                        m.next = "HIT_DONE"

            with m.State("HIT_DONE"):
                # Update the LRU of a cache hit, or make a written SHOWN line HOME again (the
                # next remote read caches it only if nobody writes it meanwhile); then let the
                # sequencer have the card.
                m.d.comb += self.own_req.eq(kind_cache | unshow)
                with m.If(unshow):  # (if the write was too short to do it beside)
                    unshow_line()
                with m.Elif(kind_cache):
                    m.d.comb += [
                        self.tag_cmd_valid.eq(1),
                        self.tag_cmd.op.eq(TagOp.TOUCH),
                        self.tag_cmd.addr.eq(line_addr),
                        self.tag_cmd.way.eq(cache_way),
                    ]
                    with m.If(self.tag_cmd_ready):
                        m.d.sync += kind_cache.eq(0)
                with m.Else():
                    m.next = "ANSWER"

            with m.State("ANSWER"):
                with m.If(write):
                    m.d.comb += [line.resp.valid.eq(1), line.resp.payload.last.eq(1)]
                    with m.If(line.resp.ready):
                        finish_access()
                        m.next = "IDLE"
                with m.Else():
                    with m.If(answer_reads()):
                        finish_access()
                        m.next = "IDLE"

            # --- misses: hand over to the sequencer, pass its answer back ------------------------
            with m.State("MISS"):
                m.d.comb += [
                    remote.miss.valid.eq(1),
                    remote.miss.payload.kind.eq(
                        Mux(write, LocalKind.WRITE, Mux(read_once, LocalKind.READ_ONCE, LocalKind.READ))
                    ),
                    remote.miss.payload.addr.eq(line_addr),
                    remote.miss.payload.word.eq(word),
                    remote.miss.payload.count.eq(count),
                    remote.miss.payload.free.eq(miss_free),
                    remote.miss.payload.way.eq(miss_way),
                ]
                with m.If(remote.miss.ready):
                    m.d.sync += [ctr.last_handoff.eq(now - start), moved.eq(0)]
                    with m.If(write):
                        m.next = "MISS_DATA"
                    with m.Else():
                        m.next = "MISS_WAIT"
            with m.State("MISS_DATA"):
                # The host's beats, as they come (the sequencer puts them at their words).
                m.d.comb += [
                    remote.miss_data.valid.eq(line.wdata.valid),
                    remote.miss_data.payload.eq(line.wdata.payload),
                    line.wdata.ready.eq(remote.miss_data.ready),
                ]
                with m.If(remote.miss_data.valid & remote.miss_data.ready):
                    m.d.sync += moved.eq(moved + 1)
                    with m.If(moved + 1 == count):
                        m.next = "MISS_WAIT"
            with m.State("MISS_WAIT"):
                m.d.comb += [
                    line.resp.payload.eq(remote.done.payload),
                    line.resp.valid.eq(remote.done.valid),
                    remote.done.ready.eq(line.resp.ready),
                ]
                with m.If(remote.done.valid & line.resp.ready & remote.done.payload.last):
                    with m.If(remote.done.payload.error):
                        event("errors")
                    finish_access()
                    m.next = "IDLE"

            # --- refused: drain the write beats, answer errors -------------------------------------
            with m.State("REFUSE"):
                with m.If(write & (moved != count)):
                    m.d.comb += line.wdata.ready.eq(1)
                    with m.If(line.wdata.valid):
                        m.d.sync += moved.eq(moved + 1)
                with m.Else():
                    last = write | (issued + 1 >= count)
                    m.d.comb += [line.resp.valid.eq(1), line.resp.payload.error.eq(1), line.resp.payload.last.eq(last)]
                    with m.If(line.resp.ready):
                        m.d.sync += issued.eq(issued + 1)
                        with m.If(last):
                            event("errors")
                            m.next = "IDLE"

            # --- flush: the sequencer rolls every valid line out ------------------------------------
            with m.State("FLUSH"):
                m.d.comb += [remote.miss.valid.eq(1), remote.miss.payload.kind.eq(LocalKind.FLUSH)]
                with m.If(remote.miss.ready):
                    m.next = "FLUSH_WAIT"
            with m.State("FLUSH_WAIT"):
                m.d.comb += remote.done.ready.eq(1)
                with m.If(remote.done.valid & remote.done.payload.last):
                    m.next = "IDLE"
            # --- debug reads of the tag SRAM and memories ------------------------------------------
            with m.State("DEBUG"):
                m.d.comb += self.own_req.eq(1)
                with m.If(self.own_grant):
                    with m.If(debug_what < 2):
                        m.next = "DEBUG_TAG"
                    with m.Else():
                        m.next = "DEBUG_MEM"
            with m.State("DEBUG_TAG"):
                m.d.comb += [
                    self.own_req.eq(1),
                    self.tag_cmd_valid.eq(1),
                    self.tag_cmd.addr.eq(debug_addr),
                    self.tag_cmd.op.eq(Mux(debug_what == 0, TagOp.LOOKUP, TagOp.READ_WAY)),
                    self.tag_cmd.set.eq(debug_addr >> g.way_bits),
                    self.tag_cmd.way.eq(debug_addr & (g.ways - 1)),
                ]
                with m.If(self.tag_cmd_ready):
                    m.next = "DEBUG_TAG_WAIT"
            with m.State("DEBUG_TAG_WAIT"):
                m.d.comb += self.own_req.eq(1)
                with m.If(self.tag_resp_valid):
                    m.d.sync += [self.debug_tag.eq(resp.tag), self.debug_dir.eq(resp.dir)]
                    m.next = "IDLE"
            with m.State("DEBUG_MEM"):
                m.d.comb += [
                    self.own_req.eq(1),
                    mem.cmd.valid.eq(1),
                    mem.cmd.payload.index.eq(debug_addr),
                    mem.cmd.payload.space.eq(debug_what - 2),
                ]
                with m.If(mem.cmd.ready):
                    m.next = "DEBUG_MEM_WAIT"
            with m.State("DEBUG_MEM_WAIT"):
                m.d.comb += self.own_req.eq(1)
                with m.If(mem.rvalid):
                    m.d.sync += self.debug_data.eq(mem.rdata)
                    m.next = "IDLE"

        m.d.comb += self.flush_busy.eq(flush_pending | fsm.ongoing("FLUSH") | fsm.ongoing("FLUSH_WAIT"))
        m.d.comb += self.debug_busy.eq(
            debug_pending
            | fsm.ongoing("DEBUG")
            | fsm.ongoing("DEBUG_TAG")
            | fsm.ongoing("DEBUG_TAG_WAIT")
            | fsm.ongoing("DEBUG_MEM")
            | fsm.ongoing("DEBUG_MEM_WAIT")
        )

        with m.If(self.refused_upstream):
            event("errors")
        with m.If(self.clear_counters):  # last assignment wins over the increments above
            m.d.sync += [getattr(ctr, name).eq(0) for name in LacCounters.NAMES]

        # Read data of hits: memory -> FIFO (the FIFO holds a whole line, so reads never stall).
        m.d.comb += [read_fifo.w_data.eq(mem.rdata), read_fifo.w_en.eq(mem.rvalid & ~fsm.ongoing("DEBUG_MEM_WAIT"))]
        return m
