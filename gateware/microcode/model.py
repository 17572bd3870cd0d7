"""Executable model of a card's coherence engine, running the real microcode image.

:class:`CardModel` holds what the gateware holds (home directory and memory, network-cache tags
and data, LRU state, the sequencer's contexts) and executes control-store words with the same
semantics as the Amaranth sequencer (this is the instruction-set simulator). Its local access
controller applies the same hit rules as the gateware. Packets leave through ``outbox`` and
arrive through :meth:`CardModel.deliver`; :mod:`numavia.gateware.microcode.cluster_model` joins
several cards with a network and drives them.

Runs are atomic: a context runs until WAIT, BACKOFF or END while nothing else touches the card,
as the gateware's local/remote arbitration guarantees.
"""

import functools
import random
from dataclasses import dataclass, field, fields
from typing import NamedTuple

from numavia.base import coherence as coh
from numavia.base.coherence import LINE_BYTES, CacheGeometry, CacheState, MemoryState
from numavia.base.microcode import isa
from numavia.base.microcode.isa import (
    Cond,
    DataSrc,
    Dest,
    Field,
    Flag,
    FlagSrc,
    LineSrc,
    LocalKind,
    Lock,
    Mem,
    MStateSrc,
    Ptr,
    StateSrc,
)
from numavia.base.sci_packet import (
    ADDR_HOME_SHIFT,
    Command,
    Packet,
    PacketType,
    Status,
    answered_words,
    carries_words_asked,
    home_of,
)

# Decoded once per distinct word (the operand dicts are only read).
_decode = functools.lru_cache(maxsize=None)(isa.decode)


class ModelError(RuntimeError):
    """The microcode did something the hardware would treat as a fault."""


@dataclass
class Tag:
    addr: int = 0
    state: int = CacheState.INVALID
    fwd: int = 0
    bwd: int = 0


@dataclass
class LocalRequest:
    kind: LocalKind
    addr: int  # line address (home << 26 | line offset)
    word: int = 0  # first word inside the line
    count: int = 1
    data: list = None  # write data, line positions (None: a line of zeros, filled in by the card)
    be: int = 0  # write byte enables, bit i = byte i of the line
    tag: object = None  # caller's handle, returned with the completion


@dataclass
class Context:
    index: int
    busy: bool = False
    waiting: bool = False
    wake_at: int = None
    pc: int = 0
    ret: int = 0
    request: LocalRequest = None
    addr: int = 0
    vaddr: int = 0
    state: int = 0
    mstate: int = 0
    locked: bool = False
    regs: dict = field(default_factory=dict)  # Ptr -> (node, valid)
    flags: int = 0
    retries: int = 0
    way: int = 0
    hit: bool = False
    victim: bool = False
    no_way: bool = False
    scan: int = 0
    scan_done: bool = False
    line_words: int = LINE_BYTES // 4
    line: list = None  # the line buffer: line_words words
    msg: Packet = None

    def __post_init__(self):
        if self.line is None:
            self.line = [0] * self.line_words

    def reset(self):
        self.__init__(self.index, line_words=self.line_words)
        self.busy = True
        self.regs = {Ptr.PTR: (0, False), Ptr.FWD: (0, False), Ptr.BWD: (0, False), Ptr.HEAD: (0, False)}


class CardModel:
    def __init__(
        self,
        node_id,
        program_words,
        *,
        sets=16,
        ways=4,
        slice_bytes=None,
        line_bytes=LINE_BYTES,
        numa=False,
        cache_first_miss=False,
        filter_lines=CacheGeometry.filter_lines,
        retry_limit=255,
        backoff_base=16,
        backoff_cap=4096,
        seed=0,
    ):
        """``slice_bytes``: the home slice (default 64 lines); ``line_bytes``: one of
        ``coherence.LINE_SIZES``, the same on every card of a ring; ``retry_limit``: backoffs
        before a local request gives up (None: never); ``cache_first_miss``: no allocation
        filter (``filter_lines`` entries, as the local access controller's)."""
        if sets & (sets - 1):
            raise ValueError("sets must be a power of two")
        if line_bytes not in coh.LINE_SIZES:
            raise ValueError(f"line_bytes must be one of {coh.LINE_SIZES}, not {line_bytes}")
        self.node_id = node_id
        self.words = list(program_words)
        self.sets, self.ways = sets, ways
        self.line_bytes = line_bytes
        self.line_words = line_bytes // 4
        self.slice_lines = 64 if slice_bytes is None else slice_bytes // line_bytes
        self.numa = numa
        self.cache_first_miss = cache_first_miss
        self.filter_lines = filter_lines
        self.seen = {}  # the allocation filter: index -> (line address, hit, dead)
        self.retry_limit = retry_limit
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.rng = random.Random((seed << 8) ^ node_id)
        self.directory = [[MemoryState.HOME, False, 0] for _ in range(self.slice_lines)]
        self.home = [[0] * self.line_words for _ in range(self.slice_lines)]
        self.tags = [[Tag() for _ in range(ways)] for _ in range(sets)]
        self.cdata = [[[0] * self.line_words for _ in range(ways)] for _ in range(sets)]
        self.lru = [list(range(ways)) for _ in range(sets)]  # least recently used first
        self.contexts = [Context(i, line_words=self.line_words) for i in range(isa.NUM_TRANSACTIONS + 1)]
        self.counters = [0] * isa.NUM_COUNTERS
        self.stats = {"read_hits": 0, "write_hits": 0, "misses": 0, "read_once": 0, "instructions": 0}
        self.incoming = []  # packets delivered, in arrival order
        self.outbox = []  # packets sent, taken by the network
        self.local_queue = []  # misses waiting for a free context
        self.completions = []  # (LocalRequest, Status, words)

    # --- addressing ------------------------------------------------------------------------------

    def line_index(self, addr):
        return (addr & ((1 << ADDR_HOME_SHIFT) - 1)) // self.line_bytes

    def set_of(self, addr, entries=None):
        """The line's cache set; with ``entries``, its index in the allocation filter."""
        return coh.cache_set(self.line_index(addr), home_of(addr), entries or self.sets)

    def _find(self, addr):
        s = self.set_of(addr)
        for w, tag in enumerate(self.tags[s]):
            if tag.state != CacheState.INVALID and tag.addr == addr:
                return s, w
        return s, None

    def _touch(self, s, w):
        self.lru[s].remove(w)
        self.lru[s].append(w)

    # --- local access controller ----------------------------------------------------------------

    def local_access(self, request):
        """Serve ``request`` if it hits (returns the words read, [] for a write), else hand it to
        the sequencer (returns None; the completion appears in ``completions``)."""
        self._check_request(request)
        write = request.kind == LocalKind.WRITE
        home = home_of(request.addr)
        if home == self.node_id:
            entry = self.directory[self.line_index(request.addr)]
            line = self.home[self.line_index(request.addr)]
            if not write and entry[0] in (*coh.HOME_OWNED, MemoryState.FRESH):
                self.stats["read_hits"] += 1
                return line[request.word : request.word + request.count]
            if write and entry[0] in coh.HOME_OWNED and not entry[1]:
                _merge(line, request.data, request.be)
                entry[0] = MemoryState.HOME  # written: no longer SHOWN
                self.stats["write_hits"] += 1
                return []
        elif not self.numa:
            s, w = self._find(request.addr)
            if w is not None:
                state = self.tags[s][w].state
                if not write and state in coh.READ_HIT:
                    self._touch(s, w)
                    self._filter_update(request.addr, hit=True)
                    self.stats["read_hits"] += 1
                    return self.cdata[s][w][request.word : request.word + request.count]
                if write and state in coh.WRITE_HIT:
                    _merge(self.cdata[s][w], request.data, request.be)
                    self._touch(s, w)
                    self._filter_update(request.addr, hit=True)
                    self.stats["write_hits"] += 1
                    return []
        self.stats["misses"] += 1
        if not write and home != self.node_id and not (self.numa or self.cache_first_miss):
            entry = self._filter_entry(request.addr)
            if self._find(request.addr)[1] is None and (entry is None or entry[2]):
                if entry is None:  # its first miss: remember it
                    self.filter_remembers(request.addr, True)
                request.kind = LocalKind.READ_ONCE  # read it without caching it
                self.stats["read_once"] += 1
        self.local_queue.append(request)
        return None

    # --- the allocation filter (gateware/allocation_filter.py) ----------------------------------

    def _filter_entry(self, addr):
        """(addr, hit, dead) if the filter remembers line ``addr``, else None."""
        entry = self.seen.get(self.set_of(addr, self.filter_lines))
        return entry if entry is not None and entry[0] == addr else None

    def _filter_update(self, addr, hit=False, dead=False):
        if self._filter_entry(addr) is not None:
            self.seen[self.set_of(addr, self.filter_lines)] = (addr, hit, dead)

    def _filter_purged(self, addr):
        """A copy of ``addr`` here was purged: dead unless the host hit it (a hit is used up)."""
        entry = self._filter_entry(addr)
        if entry is not None:
            self._filter_update(addr, dead=not entry[1])

    def filter_remembers(self, addr, seen):
        """Set whether the allocation filter remembers line ``addr`` (alive, not yet hit), or has
        forgotten it (an explorer's choice: the filter may have forgotten any line, so both are
        possible at every read)."""
        if seen:
            self.seen[self.set_of(addr, self.filter_lines)] = (addr, False, False)
        else:
            self.seen.pop(self.set_of(addr, self.filter_lines), None)

    def filter_forget(self):
        """The allocation filter forgets every line."""
        self.seen.clear()

    def flush(self, tag=None):
        self.local_queue.append(LocalRequest(LocalKind.FLUSH, 0, data=[0] * self.line_words, tag=tag))

    def _check_request(self, request):
        if request.data is None:
            request.data = [0] * self.line_words
        # A request shaped for another line size would be merged into the wrong words.
        if len(request.data) != self.line_words or request.be >> self.line_bytes:
            raise ValueError(
                f"node {self.node_id}: a request for {len(request.data)}-word lines "
                f"on a card of {self.line_words}-word lines"
            )
        if request.word + request.count > self.line_words:
            raise ValueError(
                f"node {self.node_id}: words {request.word}..{request.word + request.count - 1} "
                f"are not inside a {self.line_words}-word line"
            )

    # --- network side ----------------------------------------------------------------------------

    def deliver(self, packet):
        self.incoming.append(packet)

    # --- scheduling ------------------------------------------------------------------------------

    def has_work(self, now):
        return bool(
            self.incoming or self._free_context() is not None and self.local_queue or self._expired(now) is not None
        )

    def next_wake(self):
        times = [c.wake_at for c in self.contexts if c.busy and c.wake_at is not None]
        return min(times) if times else None

    def _free_context(self):
        for c in self.contexts[: isa.NUM_TRANSACTIONS]:
            if not c.busy:
                return c
        return None

    def _expired(self, now):
        ready = [c for c in self.contexts if c.busy and c.wake_at is not None and c.wake_at <= now]
        return min(ready, key=lambda c: (c.wake_at, c.index)) if ready else None

    def step(self, now):
        """Run one context (the gateware's priorities: responses, requests, local, retries).
        Returns the cycles the run took, or 0 if there was nothing to do."""
        if self.incoming:
            return self.handle_packet(self.incoming.pop(0), now)
        if self.can_start_local():
            return self.start_local(now)
        ctx = self._expired(now)
        if ctx is not None:
            return self.wake(ctx.index, now)
        return 0

    # The three kinds of run, one event each: ``step`` chooses among them by the gateware's
    # priorities and time; a model checker (protocol_explorer) calls them in any order.

    def handle_packet(self, packet, now=0):
        """Run the context ``packet`` is for (a response's transaction, or the handler)."""
        if packet.ptype == PacketType.RESPONSE:
            ctx = self.contexts[packet.tid] if packet.tid < isa.NUM_TRANSACTIONS else None
            if ctx is None or not ctx.busy or not ctx.waiting:
                self.counters[isa.Counter.PROTOCOL_ERROR] += 1
                return 1
            ctx.waiting = False
            ctx.msg = packet
            return self._run(ctx, now)
        ctx = self.contexts[isa.HANDLER_CONTEXT]
        ctx.reset()
        ctx.msg = packet
        ctx.addr = packet.addr
        ctx.pc = isa.request_vector(packet.cmd)
        return self._run(ctx, now)

    def can_start_local(self):
        return bool(self.local_queue) and self._free_context() is not None

    def start_local(self, now=0):
        """Start the oldest queued local request in a free transaction context."""
        ctx = self._free_context()
        request = self.local_queue.pop(0)
        ctx.reset()
        ctx.request = request
        ctx.addr = request.addr
        ctx.pc = isa.local_vector(request.kind)
        return self._run(ctx, now)

    def wake(self, index, now=0):
        """Resume context ``index`` after its BACKOFF."""
        ctx = self.contexts[index]
        ctx.wake_at = None
        return self._run(ctx, now)

    # --- the instruction-set simulator -----------------------------------------------------------

    def _ptr(self, ctx, src):
        src = Ptr(src)
        if src == Ptr.NONE:
            return (0, False)
        if src == Ptr.M_SRC:
            return (ctx.msg.source, True)
        if src == Ptr.M_PTR:
            return (ctx.msg.ptr, bool(ctx.msg.ptr_valid))
        if src == Ptr.SELF:
            return (self.node_id, True)
        if src == Ptr.KEEP:
            raise ModelError("KEEP is not a pointer source")
        return ctx.regs[src]

    def _cond(self, ctx, cond):
        m = ctx.msg
        c = Cond(cond)
        if c == Cond.ALWAYS:
            return True
        if (
            c
            in (
                Cond.M_OK,
                Cond.M_NACK,
                Cond.M_ERROR,
                Cond.M_PTR_V,
                Cond.M_FLAG,
                Cond.M_HAS_DATA,
                Cond.SRC_IS_HEAD,
                Cond.SRC_IS_FWD,
                Cond.SRC_IS_BWD,
            )
            and m is None
        ):
            raise ModelError(f"{c.name} tested with no message")
        if c == Cond.M_OK:
            return m.status == Status.OK
        if c == Cond.M_NACK:
            return m.status == Status.NACK
        if c == Cond.M_ERROR:
            return m.status in (Status.ERROR, Status.NOT_READY)
        if c == Cond.M_PTR_V:
            return bool(m.ptr_valid)
        if c == Cond.M_FLAG:
            return bool(m.flag)
        if c == Cond.M_HAS_DATA:
            return bool(m.has_data)
        if c == Cond.HIT:
            return ctx.hit
        if c == Cond.VICTIM:
            return ctx.victim
        if c == Cond.NO_WAY:
            return ctx.no_way
        if c == Cond.LOCKED:
            return ctx.locked
        if c == Cond.SRC_IS_HEAD:
            node, valid = ctx.regs[Ptr.HEAD]
            return valid and node == m.source
        if c == Cond.SRC_IS_FWD:
            node, valid = ctx.regs[Ptr.FWD]
            return valid and node == m.source
        if c == Cond.SRC_IS_BWD:
            node, valid = ctx.regs[Ptr.BWD]
            return valid and node == m.source
        if c == Cond.FWD_V:
            return ctx.regs[Ptr.FWD][1]
        if c == Cond.BWD_V:
            return ctx.regs[Ptr.BWD][1]
        if c == Cond.PTR_V:
            return ctx.regs[Ptr.PTR][1]
        if c == Cond.RETRY_MAX:
            return self.retry_limit is not None and ctx.retries >= self.retry_limit
        if c == Cond.NUMA:
            return self.numa
        if c == Cond.IS_HOME:
            return home_of(ctx.addr) == self.node_id
        if c == Cond.SCAN_DONE:
            return ctx.scan_done
        for flag, fc in isa.FLAG_CONDS.items():
            if c == fc:
                return bool(ctx.flags >> flag & 1)
        raise ModelError(f"condition {c.name} not modelled")

    def _dispatch_value(self, ctx, fld):
        fld = Field(fld)
        if fld == Field.STATE:
            return ctx.state
        if fld == Field.MSTATE:
            return ctx.mstate
        if fld == Field.M_MSTATE:
            return ctx.msg.mstate
        return int(ctx.request.kind)

    def _home_line(self, ctx):
        if home_of(ctx.addr) != self.node_id:
            raise ModelError(f"node {self.node_id}: home access to a line of node {home_of(ctx.addr)}")
        index = self.line_index(ctx.addr)
        if index >= self.slice_lines:
            raise ModelError(f"line {index} beyond the {self.slice_lines}-line slice")
        return index

    def _run(self, ctx, now):
        cycles = 0
        while True:
            if not 0 <= ctx.pc < len(self.words):
                raise ModelError(f"node {self.node_id}: pc {ctx.pc} outside the control store")
            op, v = _decode(self.words[ctx.pc])
            ctx.pc += 1
            cycles += 1
            self.stats["instructions"] += 1
            name = op.name
            if name == "NOP":
                pass
            elif name == "JMP":
                ctx.pc = v["target"]
            elif name in ("BRT", "BRF"):
                if self._cond(ctx, v["cond"]) == (name == "BRT"):
                    ctx.pc = v["target"]
            elif name == "DISP":
                ctx.pc = v["target"] + self._dispatch_value(ctx, v["field"])
            elif name == "CALL":
                ctx.ret, ctx.pc = ctx.pc, v["target"]
            elif name == "RET":
                ctx.pc = ctx.ret
            elif name in ("WAIT", "WAIT_AT"):
                if name == "WAIT_AT":
                    ctx.pc = isa.resume_vector(v["point"])
                ctx.waiting = True
                return cycles
            elif name == "BACKOFF":
                delay = min(self.backoff_base << min(ctx.retries, 16), self.backoff_cap)
                ctx.wake_at = now + cycles + delay + self.rng.randrange(self.backoff_base)
                ctx.retries = min(ctx.retries + 1, 255)
                return cycles
            elif name == "END":
                ctx.busy = False
                return cycles
            elif name == "SETF":
                ctx.flags |= 1 << v["flag"]
            elif name == "CLRF":
                ctx.flags &= ~(1 << v["flag"])
            elif name == "MOVP":
                dst = Ptr(v["dst"])
                if dst not in (Ptr.PTR, Ptr.FWD, Ptr.BWD, Ptr.HEAD):
                    raise ModelError(f"MOVP to {dst.name}")
                ctx.regs[dst] = self._ptr(ctx, v["src"])
            elif name == "MOVS":
                ctx.state = v["state"]
            elif name == "CLRRETRY":
                ctx.retries = 0
            elif name == "DIR_RD":
                mstate, locked, head = self.directory[self._home_line(ctx)]
                ctx.mstate, ctx.locked = mstate, locked
                ctx.regs[Ptr.HEAD] = (head, mstate not in coh.HOME_OWNED)
            elif name == "DIR_WR":
                entry = self.directory[self._home_line(ctx)]
                if v["mstate_src"] == MStateSrc.IMM:
                    entry[0] = MemoryState(v["mstate"])
                if v["lock"] == Lock.SET:
                    entry[1] = True
                elif v["lock"] == Lock.CLEAR:
                    entry[1] = False
                if v["head"] != Ptr.KEEP:
                    entry[2] = self._ptr(ctx, v["head"])[0]
            elif name == "C_LOOKUP":
                s, w = self._find(ctx.addr)
                ctx.hit = w is not None
                if ctx.hit:
                    tag = self.tags[s][w]
                    ctx.way, ctx.state = w, tag.state
                    ctx.regs[Ptr.FWD] = (tag.fwd, coh.has_forward(tag.state))
                    ctx.regs[Ptr.BWD] = (tag.bwd, coh.has_backward(tag.state))
                else:
                    ctx.state = CacheState.INVALID
                    ctx.regs[Ptr.FWD] = ctx.regs[Ptr.BWD] = (0, False)
            elif name == "C_ALLOC":
                s, w = self._find(ctx.addr)
                ctx.hit = w is not None
                if not ctx.hit:
                    ctx.state = CacheState.INVALID
                    ctx.regs[Ptr.FWD] = ctx.regs[Ptr.BWD] = (0, False)
                ctx.victim = ctx.no_way = False
                invalid = [w for w in range(self.ways) if self.tags[s][w].state == CacheState.INVALID]
                stable = [w for w in self.lru[s] if self.tags[s][w].state in coh.STABLE_VALID]
                if invalid:
                    ctx.way = invalid[0]
                elif stable:
                    ctx.way = stable[0]
                    ctx.victim = True
                    ctx.vaddr = self.tags[s][ctx.way].addr
                else:
                    ctx.no_way = True
            elif name == "C_WR":
                s = self.set_of(ctx.addr)
                tag = self.tags[s][ctx.way]
                if tag.state != CacheState.INVALID and tag.addr != ctx.addr:
                    raise ModelError(f"node {self.node_id}: C_WR over way {ctx.way} of another line")
                if v["state_src"] == StateSrc.IMM:
                    tag.state = CacheState(v["state"])
                elif v["state_src"] == StateSrc.REG:
                    tag.state = CacheState(ctx.state)
                if v["fwd"] != Ptr.KEEP:
                    tag.fwd = self._ptr(ctx, v["fwd"])[0]
                if v["bwd"] != Ptr.KEEP:
                    tag.bwd = self._ptr(ctx, v["bwd"])[0]
                tag.addr = ctx.addr
                ctx.state = tag.state
            elif name == "C_TOUCH":
                self._touch(self.set_of(ctx.addr), ctx.way)
            elif name == "C_SCAN":
                total = self.sets * self.ways
                ctx.scan_done = True
                while ctx.scan < total:
                    s, w = divmod(ctx.scan, self.ways)
                    ctx.scan += 1
                    if self.tags[s][w].state in coh.STABLE_VALID:
                        ctx.addr, ctx.way, ctx.scan_done = self.tags[s][w].addr, w, False
                        break
            elif name == "SWAP_VICTIM":
                ctx.addr, ctx.vaddr = ctx.vaddr, ctx.addr
            elif name == "RD_LINE":
                cycles += self.line_words
                ctx.line = list(self._line(ctx, v["mem"]))
                ctx.flags |= 1 << Flag.DATA
            elif name == "WR_LINE":
                cycles += self.line_words
                from_msg = LineSrc(v["src"]) == LineSrc.MSG
                if from_msg and not ctx.msg.has_data:
                    raise ModelError("WR_LINE src=MSG on a message without data")
                self._line(ctx, v["mem"])[:] = self._msg_data(ctx) if from_msg else ctx.line
            elif name == "M_TO_BUF":
                cycles += self.line_words
                if not ctx.msg.has_data:
                    raise ModelError("M_TO_BUF on a message without data")
                ctx.line = list(self._msg_data(ctx))
                ctx.flags |= 1 << Flag.DATA
            elif name == "MERGE_HOST":
                cycles += self.line_words
                _merge(ctx.line, ctx.request.data, ctx.request.be)
            elif name == "MERGE_MSG":
                cycles += self.line_words
                _merge(ctx.line, self._msg_data(ctx), ctx.msg.be)
            elif name == "SEND":
                cycles += self.line_words if v["data"] else 0
                self._send(ctx, v)
            elif name == "REPLY":
                cycles += self.line_words if v["data"] else 0
                self._reply(ctx, v)
            elif name == "COMPLETE":
                req = ctx.request
                status = Status(v["status"])
                line = self._msg_data(ctx) if LineSrc(v["src"]) == LineSrc.MSG else ctx.line
                words = (
                    line[req.word : req.word + req.count]
                    if (status == Status.OK and req.kind in isa.READ_KINDS)
                    else []
                )
                self.completions.append((req, status, words))
            elif name == "COUNT":
                self.counters[v["counter"]] += 1
                if v["counter"] in (isa.Counter.PURGE, isa.Counter.REWRITTEN_READ):
                    self._filter_purged(ctx.addr)
            else:
                raise ModelError(f"operation {name} not modelled")

    def _msg_data(self, ctx):
        # Every card of a ring has the same line size: another block length is a fault.
        if len(ctx.msg.data) != self.line_words:
            raise ModelError(
                f"node {self.node_id}: a data block of {len(ctx.msg.data)} words "
                f"on a ring of {self.line_words}-word lines"
            )
        return ctx.msg.data

    def _packet_data(self, ctx, src):
        src = DataSrc(src)
        if src == DataSrc.NONE:
            return []
        if src == DataSrc.BUF:
            return list(ctx.line)
        return list(self._line(ctx, Mem.HOME if src == DataSrc.HOME else Mem.CACHE))

    def _line(self, ctx, mem):
        if Mem(mem) == Mem.HOME:
            return self.home[self._home_line(ctx)]
        s = self.set_of(ctx.addr)
        return self.cdata[s][ctx.way]

    def _flag(self, ctx, src):
        src = FlagSrc(src)
        if src == FlagSrc.F_GONE:
            return ctx.flags >> Flag.GONE & 1
        if src == FlagSrc.F_DIRTY:
            return ctx.flags >> Flag.DIRTY & 1
        if src == FlagSrc.SECOND_MISS:
            return int(not self.cache_first_miss)
        return int(src == FlagSrc.ONE)

    def _send(self, ctx, v):
        dest = Dest(v["dest"])
        if dest == Dest.HOME:
            target, valid = home_of(ctx.addr), True
        else:
            target, valid = ctx.regs[
                {Dest.PTR: Ptr.PTR, Dest.FWD: Ptr.FWD, Dest.BWD: Ptr.BWD, Dest.HEAD: Ptr.HEAD}[dest]
            ]
        if not valid:
            raise ModelError(f"node {self.node_id}: SEND {Command(v['cmd']).name} to an invalid {dest.name}")
        ptr, ptr_valid = self._ptr(ctx, v["ptr"])
        req = ctx.request
        self.outbox.append(
            Packet(
                target=target,
                source=self.node_id,
                ptype=PacketType.REQUEST,
                cmd=v["cmd"],
                tid=ctx.index,
                addr=ctx.addr,
                ptr=ptr,
                ptr_valid=int(ptr_valid),
                flag=self._flag(ctx, v["flag"]),
                has_data=int(bool(v["data"])),
                data=self._packet_data(ctx, v["data"]),
                word=req.word if req else 0,
                count=req.count if req else 0,
                be=req.be if req else 0,
            )
        )

    def _reply(self, ctx, v):
        m = ctx.msg
        ptr, ptr_valid = self._ptr(ctx, v["ptr"])
        # An uncached read's answer names the words it carries (on the wire, only those).
        word, count = answered_words(m.word, m.count, self.line_words) if carries_words_asked(True, m.cmd) else (0, 0)
        self.outbox.append(
            Packet(
                target=m.source,
                source=self.node_id,
                ptype=PacketType.RESPONSE,
                cmd=m.cmd,
                tid=m.tid,
                status=v["status"],
                addr=m.addr,
                ptr=ptr,
                ptr_valid=int(ptr_valid),
                flag=self._flag(ctx, v["flag"]),
                mstate=ctx.mstate,
                has_data=int(bool(v["data"])),
                data=self._packet_data(ctx, v["data"]),
                word=word,
                count=count,
            )
        )

    # --- state -----------------------------------------------------------------------------------

    def snapshot(self, with_retries=True):
        """Everything that decides the card's future behaviour, as a hashable value that
        :meth:`restore` brings back: directory, memory, tags, data, LRU, queues and the busy
        contexts (a free context is reset before use). Not in it: counters and statistics, the
        backoff jitter generator and a backed-off context's wake-up time (only *that* it waits).
        ``with_retries=False`` leaves the retry counts out, for a card that never gives up
        (``retry_limit=None``), where they no longer change what the microcode does."""
        if not with_retries and self.retry_limit is not None:
            raise ValueError("retry counts decide when a card with a retry limit gives up")
        return CardSnapshot(
            tuple(tuple(entry) for entry in self.directory),
            tuple(tuple(line) for line in self.home),
            tuple(tuple((t.addr, t.state, t.fwd, t.bwd) for t in ways) for ways in self.tags),
            tuple(tuple(tuple(line) for line in ways) for ways in self.cdata),
            tuple(tuple(order) for order in self.lru),
            tuple(_context_key(c, with_retries) for c in self.contexts if c.busy),
            tuple(packet_key(p) for p in self.incoming),
            tuple(_request_key(r) for r in self.local_queue),
            tuple(sorted(self.seen.items())),
        )

    def restore(self, snapshot):
        """Bring the card back to a :meth:`snapshot` (outbox and completions emptied; a
        backed-off context may wake at any time)."""
        directory, home, tags, cdata, lru, contexts, incoming, local_queue, seen = snapshot
        self.directory = [list(entry) for entry in directory]
        self.home = [list(line) for line in home]
        self.tags = [[Tag(*t) for t in ways] for ways in tags]
        self.cdata = [[list(line) for line in ways] for ways in cdata]
        self.lru = [list(order) for order in lru]
        for c in self.contexts:
            c.busy = False
        for key in contexts:
            _restore_context(self.contexts[key.index], key)
        self.incoming = [packet_from_key(k) for k in incoming]
        self.local_queue = [_request_from_key(k) for k in local_queue]
        self.seen = dict(seen)
        self.outbox, self.completions = [], []

    # --- inspection ------------------------------------------------------------------------------

    def busy(self):
        return any(c.busy for c in self.contexts) or bool(self.local_queue or self.incoming)


def _merge(line, data, be):
    for word in range(len(line)):
        mask = 0
        for byte in range(4):
            if be >> (4 * word + byte) & 1:
                mask |= 0xFF << (8 * byte)
        if mask:
            line[word] = (line[word] & ~mask) | (data[word] & mask)


# --- snapshots: model objects as hashable values and back ----------------------------------------


class CardSnapshot(NamedTuple):
    directory: tuple  # (mstate, locked, head) per home line
    home: tuple  # the home lines' words
    tags: tuple  # per set, per way: (addr, state, fwd, bwd)
    cdata: tuple  # per set, per way: the line's words
    lru: tuple
    contexts: tuple  # ContextSnapshot of each busy context
    incoming: tuple  # packet keys
    local_queue: tuple  # request keys: (kind, addr, word, count, data, be, tag)
    seen: tuple  # the allocation filter: (index, (line address, hit, dead)) entries


class ContextSnapshot(NamedTuple):
    values: tuple  # _CONTEXT_FIELDS, index first
    backed_off: bool
    retries: int
    regs: tuple
    request: tuple
    line: tuple
    msg: tuple

    @property
    def index(self):
        return self.values[0]


# The context's scalar fields (the rest: busy, wake-up, retries, registers, request, line, message).
_CONTEXT_FIELDS = ("index", "waiting", "pc", "ret", "addr", "vaddr", "state", "mstate", "locked", "flags")
_CONTEXT_FIELDS += ("way", "hit", "victim", "no_way", "scan", "scan_done")
_PACKET_HEADER = tuple(f.name for f in fields(Packet) if f.name != "data")


def packet_key(packet):
    """A packet as a hashable tuple (header fields, then the data as a tuple)."""
    return tuple(getattr(packet, f) for f in _PACKET_HEADER) + (tuple(packet.data),)


def packet_field(key, name):
    """A header field of a packet key."""
    return key[_PACKET_HEADER.index(name)]


def packet_from_key(key):
    return Packet(**dict(zip(_PACKET_HEADER, key)), data=list(key[-1]))


def _request_key(request):
    return (int(request.kind), request.addr, request.word, request.count, tuple(request.data), request.be, request.tag)


def _request_from_key(key):
    kind, addr, word, count, data, be, tag = key
    return LocalRequest(LocalKind(kind), addr, word, count, list(data), be, tag)


def _context_key(ctx, with_retries):
    return ContextSnapshot(
        tuple(getattr(ctx, f) for f in _CONTEXT_FIELDS),
        ctx.wake_at is not None,
        ctx.retries if with_retries else None,
        tuple(sorted((int(r), v) for r, v in ctx.regs.items())),
        None if ctx.request is None else _request_key(ctx.request),
        tuple(ctx.line),
        None if ctx.msg is None else packet_key(ctx.msg),
    )


def _restore_context(ctx, key):
    values, backed_off, retries, regs, request, line, msg = key
    for name, value in zip(_CONTEXT_FIELDS, values):
        setattr(ctx, name, value)
    ctx.busy = True
    ctx.wake_at = 0 if backed_off else None
    ctx.retries = retries or 0
    ctx.regs = {Ptr(r): v for r, v in regs}
    ctx.request = None if request is None else _request_from_key(request)
    ctx.line = list(line)
    ctx.msg = None if msg is None else packet_from_key(msg)
