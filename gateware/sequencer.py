"""The remote access controller's sequencer: runs the microcode of the control store.

It executes :mod:`microcode.isa` with the semantics of the instruction-set simulator
(:mod:`microcode.model`), on the card's real tag SRAM and memories. Its parts, each a component
with its own tests:

* :class:`SequencerDecoder` (``sequencer_decoder.py``): a fetched word into its fields;
* :class:`ContextScheduler` (``context_scheduler.py``): what starts next when no context runs, and
  the transaction entries' busy and waiting bits and timers;
* :class:`ContextStore` (``context_store.py``): the registers of suspended contexts and each
  entry's host byte enables;
* :class:`FastPath` (``fast_path.py``): the hard-wired steps of the commonest transactions;
* :class:`MessageBuffer` (``message_buffer.py``): the data block of the message being handled.

What stays here is execution: the running context's registers, fetch and issue, and the state
machine whose states carry out the instructions' operations (tag commands, line streams between
memory, line buffer, message and packet, the packet headers, suspension).

All together they behave so:

* **Contexts.** ``num_transactions`` transaction-buffer entries for local misses, plus a handler
  context for incoming requests. The active context's registers are flops; a suspended context
  is saved in a context memory. Per context: a line buffer; per transaction entry: the
  host's write data and byte enables.
* **Scheduling** (when no context runs): an incoming response resumes the context waiting for it;
  an incoming request starts the handler at its vector; a miss from the local access controller
  takes a free transaction entry; a context whose backoff timer expired resumes. A run takes
  ownership of the tags and memories and keeps it until ``WAIT``, ``BACKOFF`` or ``END``.
* **No blocking on the network.** ``SEND`` finds the outgoing queue full: the context suspends
  and retries the ``SEND`` later. Replies never wait long: the ring link accepts a request only
  with a slot reserved for its reply.
* **Issue.** The next instruction in sequence is fetched while one executes, so straight-line
  code and jumps run one micro-instruction per cycle; a taken branch or a dispatch costs one
  cycle more, a multi-cycle operation hands over to the next instruction in the cycle it finishes.
* **Data straight from memory.** ``SEND``/``REPLY`` with ``data=HOME``/``CACHE`` stream the line
  from the memory controller into the packet (no line-buffer copy); ``COMPLETE src=MSG`` hands
  the host its words from the message that resumed the context.
* **Fast path.** With ``fast_path`` high, plain read and write misses to other nodes' lines and
  MREAD/MWRITE/MUREAD at an unlocked home run hard-wired (:class:`FastPath`), without fetching
  micro-instructions; every other case falls back to the microcode at the transaction's vector,
  and the microcode alone can run everything (``RAC.CTRL.MICROCODE_ONLY``).
* **Not loaded.** Until the control store is loaded, requests are answered ``NOT_READY`` and
  local misses complete with an error, without any microcode.
"""

from amaranth import C, Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base import coherence as coh
from numavia.base.coherence import NODE_ID_BITS, CacheGeometry, CacheState
from numavia.base.microcode import isa
from numavia.base.microcode.isa import (
    Cond,
    DataSrc,
    Dest,
    Field,
    Flag,
    FlagSrc,
    LineSrc,
    Lock,
    Mem,
    MStateSrc,
    Ptr,
    StateSrc,
)
from numavia.base.sci_packet import ADDR_HOME_SHIFT, Command, PacketType, Status, carries_words_asked, range_in_line

from .context_scheduler import ContextScheduler, Start
from .context_store import ContextLayout, ContextStore, PointerLayout
from .fast_path import FastPath, FastStep, FastThen
from .local_access_controller import MissSignature
from .local_side import RemoteSideSignature
from .memory_controller import READ_LATENCY, MemSpace
from .message_buffer import MessageBuffer
from .sci_layouts import HeaderLayout, data_block_first
from .sequencer_decoder import SequencerDecoder
from .tag_store import TagOp, cache_data_index, home_owned, set_of_line, state_mask

EXTRA_COUNTERS = (
    "runs",
    "instructions",
    "requests",
    "responses",
    "dropped_responses",
    "send_stalls",
    "failed_sends",
    "not_ready_replies",
    "fast_path",
    "lookups_taken",
)


class SequencerEvents(wiring.Signature):
    """A pulse per counted event (the microcode's COUNT, then the sequencer's own), in the cycle it
    happens: the remote access controller counts them (its RAC counters)."""

    NAMES = tuple(c.name.lower() for c in isa.Counter) + EXTRA_COUNTERS

    def __init__(self):
        super().__init__({name: Out(1) for name in self.NAMES})


def _command_vector(cmd):
    """Amaranth version of isa.command_index."""
    expr = Const(isa.INVALID_COMMAND_SLOT, 4)
    for c in Command:
        expr = Mux(cmd == int(c), isa.command_index(c), expr)
    return expr


class Sequencer(wiring.Component):
    def __init__(
        self,
        *,
        geometry=CacheGeometry(),
        slice_lines,
        num_transactions=isa.NUM_TRANSACTIONS,
        retry_limit=255,
        backoff_base=16,
        backoff_max_shift=8,
        send_retry_delay=16,
    ):
        if not 1 <= num_transactions <= isa.NUM_TRANSACTIONS:
            raise ValueError(f"1..{isa.NUM_TRANSACTIONS} transaction entries")
        self.geometry = geometry
        self.slice_lines = slice_lines
        self.num_txn = num_transactions
        self.retry_limit = retry_limit
        self.backoff_base = backoff_base
        self.backoff_max_shift = backoff_max_shift
        self.send_retry_delay = send_retry_delay
        super().__init__(
            {
                "node_id": In(NODE_ID_BITS),
                "numa_mode": In(1),
                "cache_first_miss": In(1),  # no allocation filter: MREADs go without SECOND_MISS
                "loaded": In(1),
                "fast_path": In(1),  # the hard-wired fast path may take the transactions it knows
                "fetch_addr": Out(isa.TARGET_BITS),
                "fetch_data": In(isa.WORD_BITS),
                "miss": In(MissSignature()),
                "local": Out(RemoteSideSignature(geometry)),
                "send_header": Out(stream.Signature(HeaderLayout)),
                "send_data": Out(stream.Signature(32)),
                "recv_header": In(stream.Signature(HeaderLayout)),
                "recv_data": In(stream.Signature(32)),
                "failed": In(stream.Signature(HeaderLayout)),
                "busy_contexts": Out(range(isa.NUM_TRANSACTIONS + 2)),
                "events": Out(SequencerEvents()),
            }
        )

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        LINE_WORDS, wb = g.line_words, g.word_bits
        N = self.num_txn
        HANDLER = isa.HANDLER_CONTEXT
        tag = self.local

        def count(name, cond=None):
            stmt = getattr(self.events, name).eq(1)
            if cond is None:
                m.d.comb += stmt
            else:
                with m.If(cond):
                    m.d.comb += stmt

        # --- storage -----------------------------------------------------------------------------
        m.submodules.context_store = store = ContextStore(g.line_bytes)
        m.submodules.line_buffers = lb_mem = Memory(shape=32, depth=32 * LINE_WORDS, init=[])
        lb_rd, lb_wr = lb_mem.read_port(), lb_mem.write_port()
        m.submodules.host_data = hd_mem = Memory(shape=32, depth=isa.NUM_TRANSACTIONS * LINE_WORDS, init=[])
        hd_rd, hd_wr = hd_mem.read_port(), hd_mem.write_port()
        m.submodules.message = message = MessageBuffer(LINE_WORDS)
        wiring.connect(m, wiring.flipped(self.recv_data), message.data)

        m.submodules.skid = skid = fifo.SyncFIFO(width=32, depth=READ_LATENCY + 2)

        r = Signal(ContextLayout)  # the running context's registers

        def serves_read(context):
            """The context serves a host read: its answer is the words read."""
            return Cat(context.kind == kind for kind in isa.READ_KINDS).any()

        reading = Signal()
        m.d.comb += reading.eq(serves_read(r))
        ctx = Signal(5)  # its index
        msg = Signal(HeaderLayout)  # the packet that started or resumed the run
        hbe = Signal(g.line_bytes)  # its host byte enables (transaction contexts)

        m.submodules.scheduler = sched = ContextScheduler(
            num_transactions=N,
            backoff_base=self.backoff_base,
            backoff_max_shift=self.backoff_max_shift,
            send_retry_delay=self.send_retry_delay,
        )
        waiting, free_ctx = sched.waiting, sched.free
        m.d.comb += self.busy_contexts.eq(sched.busy_count)

        def save_byte_enables(entry, value):
            m.d.comb += [
                store.save_byte_enables.en.eq(1),
                store.save_byte_enables.entry.eq(entry),
                store.save_byte_enables.byte_enables.eq(value),
            ]

        def entry_command(command, entry):
            m.d.comb += [command.en.eq(1), command.entry.eq(entry)]

        # --- decoded instruction fields (of the word fetched, in EXEC) ----------------------------
        m.submodules.decoder = decoder = SequencerDecoder()
        fields = decoder.fields
        op, fa, fb, fc, fd, imm, target = fields.op, fields.a, fields.b, fields.c, fields.d, fields.imm, fields.target
        pc_next = r.pc + 1

        home_of_addr = r.addr[ADDR_HOME_SHIFT:]
        is_home = home_of_addr == self.node_id

        def pointer_source(sel):
            """(id, valid) of a Ptr source."""
            value = Signal(PointerLayout)
            with m.Switch(sel):
                with m.Case(Ptr.PTR):
                    m.d.comb += value.eq(r.ptr)
                with m.Case(Ptr.FWD):
                    m.d.comb += value.eq(r.fwd)
                with m.Case(Ptr.BWD):
                    m.d.comb += value.eq(r.bwd)
                with m.Case(Ptr.HEAD):
                    m.d.comb += value.eq(r.head)
                with m.Case(Ptr.M_SRC):
                    m.d.comb += [value.id.eq(msg.source), value.valid.eq(1)]
                with m.Case(Ptr.M_PTR):
                    m.d.comb += [value.id.eq(msg.ptr), value.valid.eq(msg.ptr_valid)]
                with m.Case(Ptr.SELF):
                    m.d.comb += [value.id.eq(self.node_id), value.valid.eq(1)]
            return value

        def flag_source(sel):
            flag = Signal()
            with m.Switch(sel):
                with m.Case(FlagSrc.ONE):
                    m.d.comb += flag.eq(1)
                with m.Case(FlagSrc.F_GONE):
                    m.d.comb += flag.eq(r.flags[Flag.GONE])
                with m.Case(FlagSrc.F_DIRTY):
                    m.d.comb += flag.eq(r.flags[Flag.DIRTY])
                with m.Case(FlagSrc.SECOND_MISS):
                    m.d.comb += flag.eq(~self.cache_first_miss)
            return flag

        # Conditions.
        cond = Signal()
        status = msg.status
        cond_values = {
            Cond.ALWAYS: C(1, 1),
            Cond.M_OK: status == Status.OK,
            Cond.M_NACK: status == Status.NACK,
            Cond.M_ERROR: (status == Status.ERROR) | (status == Status.NOT_READY),
            Cond.M_PTR_V: msg.ptr_valid,
            Cond.M_FLAG: msg.flag,
            Cond.M_HAS_DATA: msg.has_data,
            Cond.HIT: r.hit,
            Cond.VICTIM: r.victim,
            Cond.NO_WAY: r.no_way,
            Cond.LOCKED: r.locked,
            Cond.SRC_IS_HEAD: r.head.valid & (r.head.id == msg.source),
            Cond.SRC_IS_FWD: r.fwd.valid & (r.fwd.id == msg.source),
            Cond.SRC_IS_BWD: r.bwd.valid & (r.bwd.id == msg.source),
            Cond.FWD_V: r.fwd.valid,
            Cond.BWD_V: r.bwd.valid,
            Cond.RETRY_MAX: r.retries >= self.retry_limit,
            Cond.NUMA: self.numa_mode,
            Cond.IS_HOME: is_home,
            Cond.SCAN_DONE: r.scan_done,
            Cond.PTR_V: r.ptr.valid,
        }
        for flag, c in isa.FLAG_CONDS.items():
            cond_values[c] = r.flags[flag]
        with m.Switch(fa):
            for c, v in cond_values.items():
                with m.Case(c):
                    m.d.comb += cond.eq(v)

        dispatch_value = Signal(4)
        with m.Switch(fa):
            with m.Case(Field.STATE):
                m.d.comb += dispatch_value.eq(r.state)
            with m.Case(Field.MSTATE):
                m.d.comb += dispatch_value.eq(r.mstate)
            with m.Case(Field.M_MSTATE):
                m.d.comb += dispatch_value.eq(msg.mstate)
            with m.Case(Field.KIND):
                m.d.comb += dispatch_value.eq(r.kind)

        # Memory-side addresses of the current line.
        set_index = set_of_line(r.addr, g)
        line_offset_words = r.addr[g.offset_bits : ADDR_HOME_SHIFT] << wb  # home slice word index of word 0
        cache_word0 = cache_data_index(set_index, r.way, 0, g)

        has_fwd = state_mask(s for s in CacheState if coh.has_forward(s))
        has_bwd = state_mask(s for s in CacheState if coh.has_backward(s))
        stable = state_mask(coh.STABLE_VALID)

        # --- line-buffer engines ------------------------------------------------------------------
        i = Signal(5)  # issue counter
        j = Signal(5)  # completion counter
        lb_base = Cat(Const(0, wb), ctx)  # line buffer word 0 of the context
        pipe_valid = Signal()  # the LB read port holds the word at index i-1
        stream_start = Signal(4)
        stream_count = Signal(5)
        stream_dst = Signal(2)  # 0: memory write, 1: send_data, 2: done
        stream_from_msg = Signal()  # read the message buffer instead of the line buffer
        DST_MEM, DST_SEND, DST_DONE = 0, 1, 2
        mem_space = Signal(2)
        mem_index0 = Signal(24)
        done_error = Signal()

        # Default port controls.
        m.d.comb += [lb_rd.en.eq(0), hd_rd.en.eq(1), message.read_en.eq(1)]

        tcmd = Signal.like(tag.tag_cmd)  # the tag SRAM command of the instruction being executed
        after = Signal(isa.TARGET_BITS)  # pc to continue at after a multi-cycle op
        op_q, fa_q, fb_q, fc_q, fd_q = (Signal(6, name=f"{n}_q") for n in ("op", "a", "b", "c", "d"))
        imm_q = Signal(16)
        # A run owns the tags and memories from its first instruction to WAIT/BACKOFF/END.
        running = Signal()

        fast_step = Signal(FastStep)
        m.submodules.fast_path = fast = FastPath(g)
        m.d.comb += [
            fast.enable.eq(self.fast_path),
            fast.node_id.eq(self.node_id),
            fast.numa_mode.eq(self.numa_mode),
            fast.request.eq(self.recv_header.payload),
            fast.miss.eq(self.miss.miss.payload),
            fast.context.eq(r),
            fast.message.eq(msg),
            fast.resumed_pc.eq(store.context.pc),
            fast.resumed_flags.eq(store.context.flags),
        ]

        receiving = message.receiving  # a message's data block is coming in (beside the run)
        msg_word_in = message.holds
        m.d.comb += [
            sched.receiving.eq(receiving),
            sched.message.eq(self.recv_header.valid),
            sched.failed.eq(self.failed.valid),
            sched.miss.eq(self.miss.miss.valid),
            sched.loaded.eq(self.loaded),
        ]

        def finish(new_pc=None, *, step_now=False):
            """Continue at ``new_pc`` (fetched next cycle) or, when a multi-cycle operation ends,
            at ``after``, which is fetched in this cycle so that it executes in the next. A fast
            run's next step follows in FAST, or in this cycle with ``step_now``: only where the
            operation's end is a short path (a tag write's handshake); a stream's end runs through
            the memory controller, which with the step behind it missed 75 MHz on the ECPIX-5."""
            if new_pc is None:
                with m.If(fast_step != FastStep.NONE):  # (the pc keeps its fallback vector)
                    if step_now:
                        run_fast_step()
                    else:
                        m.next = "FAST"
                with m.Else():
                    m.d.sync += r.pc.eq(after)
                    m.d.comb += self.fetch_addr.eq(after)
                    m.next = "EXEC"
            else:
                m.d.sync += r.pc.eq(new_pc)
                m.next = "FETCH"

        def read_line_words(allowed=True, words=LINE_WORDS):
            """Read ``words`` of the line from memory (``mem_space`` from ``mem_index0``), a word a
            cycle while ``allowed``; ``i`` counts the reads issued."""
            with m.If((i != words) & allowed):
                m.d.comb += [
                    tag.mem.cmd.valid.eq(1),
                    tag.mem.cmd.payload.space.eq(mem_space),
                    tag.mem.cmd.payload.index.eq(mem_index0 + i),
                ]
                with m.If(tag.mem.cmd.ready):
                    m.d.sync += i.eq(i + 1)

        def step():
            """Continue with the next instruction in sequence: EXEC fetches it (``pc_next``) while
            it runs this one."""
            m.d.sync += r.pc.eq(pc_next)
            m.next = "EXEC"

        def complete(*, src, status, context=r):
            """COMPLETE: the host's words (from the line buffer or the message, ``src``), or an error
            (``context``: the registers of the context, or the one being read back)."""
            m.d.sync += [
                i.eq(0),
                pipe_valid.eq(0),
                done_error.eq(status != Status.OK),
                stream_from_msg.eq(src == LineSrc.MSG),
                stream_start.eq(context.lword),
                stream_dst.eq(DST_DONE),
                stream_count.eq(Mux(serves_read(context), context.lcount, 1)),
            ]
            m.next = "COMPLETE"

        def branch(taken, target):
            with m.If(taken):
                finish(target)
            with m.Else():
                step()

        # The miss waiting to be taken comes with the local access controller's lookup of its set,
        # made while that side owned the tags. Only a run of the sequencer can write a tag between
        # that lookup and the miss's take: if one did, the lookup is stale and the miss asks again.
        lookup_stale = Signal()
        with m.If(self.miss.miss.valid & tag.tag_cmd_valid & tag.tag_cmd_ready & (tag.tag_cmd.op == TagOp.WRITE_TAG)):
            m.d.sync += lookup_stale.eq(1)
        with m.If(self.miss.miss.valid & self.miss.miss.ready):
            m.d.sync += lookup_stale.eq(0)

        # A state that goes on to OWN asks for the tags already, so OWN finds them granted when
        # nobody else holds them (a grant comes the cycle after the request).
        own_next = Signal()

        def run_fast_step(context=r):
            """The fast path's step: what its instruction would load, and the state that runs it
            (``context``: the context's registers, or the one being read back)."""
            with m.If(fast.fallback):
                # the transaction's own vector (set when it started): the microcode takes it
                m.d.sync += fast_step.eq(FastStep.NONE)
                m.next = "FETCH"
            with m.Else():
                m.d.sync += fast_step.eq(fast.next_step)
                with m.If(fast.load_tag_cmd):
                    m.d.sync += tcmd.eq(fast.tag_cmd)
                    with m.If(fast.tag_cmd.op == TagOp.WRITE_TAG):
                        m.d.sync += r.state.eq(fast.tag_cmd.state)  # as C_WR does
                with m.If(fast.load_instruction):
                    loaded = fast.instruction
                    m.d.sync += Cat(op_q, fa_q, fb_q, fc_q, fd_q, imm_q).eq(
                        Cat(loaded.op, loaded.a, loaded.b, loaded.c, loaded.d, loaded.imm)
                    )
                with m.If(fast.load_pc):
                    # (and where a multi-cycle operation ending the fast run goes on)
                    m.d.sync += [r.pc.eq(fast.pc), after.eq(fast.pc)]
                with m.If(fast.load_ptr):  # as MOVP PTR, M_PTR
                    m.d.sync += r.ptr.eq(pointer_source(Ptr.M_PTR))
                with m.Switch(fast.then):
                    with m.Case(FastThen.TAG):
                        m.next = "TAG"
                    with m.Case(FastThen.HEADER):
                        m.next = "HEADER"
                    with m.Case(FastThen.SUSPEND):
                        count("fast_path")
                        entry_command(sched.suspend, ctx[:4])
                        m.next = "SAVE"
                    with m.Case(FastThen.COMPLETE):
                        complete(src=fast.instruction.a, status=fast.instruction.imm[:5], context=context)
                    with m.Case(FastThen.MICROCODE):
                        m.next = "FETCH"  # at the loaded pc
                    with m.Case(FastThen.END):
                        count("fast_path")
                        with m.If(ctx != HANDLER):
                            entry_command(sched.release, ctx[:4])
                        m.d.sync += running.eq(0)
                        m.next = "IDLE"

        def start_run(fast_run, context=r):
            """Go on to OWN, or start a fast run at once with its first step when the tags, asked
            for a cycle earlier, are granted already (a microcode run fetches its first
            instruction in OWN)."""
            m.d.comb += own_next.eq(1)
            with m.If(fast_run & tag.own_grant):
                count("runs")
                m.d.sync += running.eq(1)
                run_fast_step(context)
            with m.Else():
                m.next = "OWN"

        with m.FSM() as fsm:
            # ============================ scheduling ============================================
            with m.State("IDLE"):
                hdr = self.recv_header.payload
                m.d.sync += fast_step.eq(FastStep.NONE)  # unless a start below is a fast one
                with m.If(sched.start == Start.MESSAGE):
                    m.d.comb += [
                        self.recv_header.ready.eq(1),
                        message.start.eq(hdr.has_data),
                        message.first.eq(data_block_first(hdr)),
                    ]
                    m.d.sync += msg.eq(hdr)
                    with m.If(hdr.ptype == PacketType.RESPONSE):
                        count("responses")
                        resumable = (hdr.tid < N) & waiting.bit_select(hdr.tid[:4], 1) & self.loaded
                        # The context is read back while its message's data comes in.
                        m.d.comb += store.read.eq(hdr.tid)
                        with m.If(resumable):
                            m.d.comb += [message.keep.eq(1), own_next.eq(1)]
                            m.d.sync += ctx.eq(hdr.tid)
                            entry_command(sched.resume, hdr.tid[:4])
                            m.next = "ARRIVED"
                        with m.Else():
                            count("dropped_responses")  # its data block is drained
                    with m.Elif(hdr.ptype == PacketType.REQUEST):
                        count("requests")
                        with m.If(self.loaded):
                            m.d.comb += [message.keep.eq(1), own_next.eq(1)]
                            m.d.sync += ctx.eq(HANDLER)
                            with m.If(fast.request_fast):
                                m.d.sync += fast_step.eq(FastStep.HOME_DIR)
                            with m.Elif(fast.purge_fast):
                                m.d.sync += fast_step.eq(FastStep.PURGE_LOOKUP)
                            m.next = "ARRIVED"
                        with m.Else():
                            count("not_ready_replies")
                            m.next = "NOT_READY"
                with m.Elif(sched.start == Start.FAILED):
                    m.d.comb += self.failed.ready.eq(1)
                    f = self.failed.payload
                    count("failed_sends")
                    mine = (f.ptype == PacketType.REQUEST) & (f.tid < N) & waiting.bit_select(f.tid[:4], 1)
                    with m.If(mine):
                        # The request could not be delivered: its answer is an error.
                        m.d.sync += [
                            msg.eq(f),
                            msg.ptype.eq(PacketType.RESPONSE),
                            msg.status.eq(Status.ERROR),
                            msg.has_data.eq(0),
                            ctx.eq(f.tid),
                        ]
                        entry_command(sched.resume, f.tid[:4])
                        m.next = "RESTORE"
                with m.Elif(sched.start == Start.MISS):
                    mp = self.miss.miss.payload
                    m.d.comb += self.miss.miss.ready.eq(1)
                    m.d.sync += [
                        ctx.eq(free_ctx),
                        j.eq(0),
                        hbe.eq(0),
                        r.eq(0),
                        r.addr.eq(mp.addr),
                        r.kind.eq(mp.kind),
                        r.lword.eq(mp.word),
                        r.lcount.eq(mp.count),
                        r.pc.eq(isa.local_vector(0) + mp.kind),
                    ]
                    with m.If(~self.loaded):
                        m.d.sync += [done_error.eq(1)]
                        m.next = "REFUSE_MISS"
                    with m.Else():
                        m.d.comb += sched.take_free.eq(1)
                        with m.If(fast.once_fast):
                            m.d.sync += fast_step.eq(FastStep.ONCE_SEND)
                        with m.Elif(fast.miss_fast & mp.free & ~lookup_stale):
                            # The local access controller's lookup still holds (no tag written
                            # since): it is C_ALLOC's answer for a free way, without asking again.
                            m.d.sync += [fast_step.eq(FastStep.MISS_ATTACH), r.way.eq(mp.way)]
                            count("lookups_taken")
                        with m.Elif(fast.miss_fast):
                            m.d.sync += fast_step.eq(FastStep.MISS_ALLOC)
                        with m.If(mp.kind == isa.LocalKind.WRITE):
                            m.next = "HOST_DATA"
                        with m.Else():
                            # no write bytes: the saved byte enables are cleared in passing
                            save_byte_enables(free_ctx, 0)
                            m.d.comb += own_next.eq(1)
                            m.next = "OWN"
                with m.Elif(sched.start == Start.EXPIRED):
                    m.d.sync += ctx.eq(sched.expired)
                    m.d.comb += sched.take_expired.eq(1)
                    m.next = "RESTORE"

            # A message arrived: its run starts while its data block still comes into the message
            # buffer; the operations that read the buffer wait for the words they need. A
            # request's first fast step (the directory read, a purge's lookup) needs only the
            # message, so it runs here; an answer's needs the context read back first.
            with m.State("ARRIVED"):
                with m.If(ctx == HANDLER):
                    m.d.sync += [r.eq(0), r.addr.eq(msg.addr), r.pc.eq(_command_vector(msg.cmd)), hbe.eq(0)]
                    start_run(fast_step != FastStep.NONE)
                with m.Else():
                    m.d.sync += [r.eq(store.context), hbe.eq(store.byte_enables)]
                    m.d.sync += fast_step.eq(fast.response_step)
                    start_run(fast.response_step != FastStep.NONE, context=store.context)

            # Control store not loaded: answer NOT_READY without microcode.
            with m.State("NOT_READY"):
                with m.If(~receiving):  # its data block drained
                    h = self.send_header.payload
                    m.d.comb += [
                        self.send_header.valid.eq(1),
                        h.target.eq(msg.source),
                        h.ptype.eq(PacketType.RESPONSE),
                        h.cmd.eq(msg.cmd),
                        h.tid.eq(msg.tid),
                        h.status.eq(Status.NOT_READY),
                        h.addr.eq(msg.addr),
                    ]
                    with m.If(self.send_header.ready):
                        m.next = "IDLE"

            with m.State("REFUSE_MISS"):
                # drain the write data, then one error beat per word (reads) or one (writes)
                with m.If((r.kind == isa.LocalKind.WRITE) & (j != r.lcount)):
                    m.d.comb += self.miss.miss_data.ready.eq(1)
                    with m.If(self.miss.miss_data.valid):
                        m.d.sync += j.eq(j + 1)
                with m.Else():
                    last = ~reading | (i + 1 >= r.lcount)
                    m.d.comb += [
                        self.miss.done.valid.eq(1),
                        self.miss.done.payload.error.eq(1),
                        self.miss.done.payload.last.eq(last),
                    ]
                    with m.If(self.miss.done.ready):
                        m.d.sync += i.eq(i + 1)
                        with m.If(last):
                            m.d.sync += i.eq(0)
                            m.next = "IDLE"

            # A local write's data: its beats into the context's host buffer at their words (the
            # byte enables of the others stay 0).
            with m.State("HOST_DATA"):
                beat = self.miss.miss_data.payload
                word = (r.lword + j)[:wb]
                m.d.comb += [
                    self.miss.miss_data.ready.eq(1),
                    hd_wr.addr.eq(Cat(word, ctx[:4])),
                    hd_wr.data.eq(beat.data),
                    hd_wr.en.eq(self.miss.miss_data.valid),
                ]
                with m.If(self.miss.miss_data.valid):
                    m.d.sync += [hbe.word_select(word, 4).eq(beat.be), j.eq(j + 1)]
                    with m.If(j + 1 == r.lcount):
                        m.d.comb += own_next.eq(1)
                        m.next = "SAVE_HBE"
            with m.State("SAVE_HBE"):
                save_byte_enables(ctx[:4], hbe)
                start_run(fast_step != FastStep.NONE)

            with m.State("RESTORE"):
                m.d.comb += store.read.eq(ctx)
                m.next = "RESTORE2"
            with m.State("RESTORE2"):
                m.d.sync += [r.eq(store.context), hbe.eq(store.byte_enables)]
                m.d.comb += own_next.eq(1)
                m.next = "OWN"

            with m.State("OWN"):
                m.d.comb += [tag.own_req.eq(1), self.fetch_addr.eq(r.pc)]
                with m.If(tag.own_grant):
                    count("runs")
                    m.d.sync += running.eq(1)
                    with m.If(fast_step != FastStep.NONE):
                        run_fast_step()
                    with m.Else():
                        m.next = "EXEC"

            # ============================ execution ============================================
            with m.State("FETCH"):
                m.d.comb += self.fetch_addr.eq(r.pc)
                m.next = "EXEC"

            with m.State("EXEC"):
                m.d.comb += [decoder.word.eq(self.fetch_data), self.fetch_addr.eq(Mux(decoder.jump, target, pc_next))]
                m.d.sync += after.eq(pc_next)
                count("instructions")
                with m.Switch(op):
                    with m.Case(isa.OPS["NOP"].code):
                        step()
                    with m.Case(isa.OPS["JMP"].code):
                        m.d.sync += r.pc.eq(target)  # already being fetched
                    with m.Case(isa.OPS["BRT"].code):
                        branch(cond, target)
                    with m.Case(isa.OPS["BRF"].code):
                        branch(~cond, target)
                    with m.Case(isa.OPS["DISP"].code):
                        finish(target + dispatch_value)
                    with m.Case(isa.OPS["CALL"].code):
                        m.d.sync += r.ret.eq(pc_next)
                        finish(target)
                    with m.Case(isa.OPS["RET"].code):
                        finish(r.ret)
                    with m.Case(isa.OPS["WAIT"].code):
                        m.d.sync += r.pc.eq(pc_next)
                        entry_command(sched.suspend, ctx[:4])
                        m.next = "SAVE"
                    with m.Case(isa.OPS["WAIT_AT"].code):  # resume at a vector the fast path knows
                        m.d.sync += r.pc.eq(isa.resume_vector(0) + fa)
                        entry_command(sched.suspend, ctx[:4])
                        m.next = "SAVE"
                    with m.Case(isa.OPS["BACKOFF"].code):
                        entry_command(sched.backoff, ctx[:4])
                        m.d.comb += sched.backoff.retries.eq(r.retries)
                        m.d.sync += [r.pc.eq(pc_next), r.retries.eq(Mux(r.retries == 255, 255, r.retries + 1))]
                        m.next = "SAVE"
                    with m.Case(isa.OPS["END"].code):
                        with m.If(ctx != HANDLER):
                            entry_command(sched.release, ctx[:4])
                        m.d.sync += running.eq(0)
                        m.next = "IDLE"
                    with m.Case(isa.OPS["SETF"].code):
                        m.d.sync += r.flags.bit_select(fa[:3], 1).eq(1)
                        step()
                    with m.Case(isa.OPS["CLRF"].code):
                        m.d.sync += r.flags.bit_select(fa[:3], 1).eq(0)
                        step()
                    with m.Case(isa.OPS["MOVP"].code):
                        src = pointer_source(fb)
                        with m.Switch(fa):
                            for reg, name in ((Ptr.PTR, "ptr"), (Ptr.FWD, "fwd"), (Ptr.BWD, "bwd"), (Ptr.HEAD, "head")):
                                with m.Case(reg):
                                    m.d.sync += getattr(r, name).eq(src)
                        step()
                    with m.Case(isa.OPS["MOVS"].code):
                        m.d.sync += r.state.eq(imm[:4])
                        step()
                    with m.Case(isa.OPS["CLRRETRY"].code):
                        m.d.sync += r.retries.eq(0)
                        step()
                    with m.Case(isa.OPS["DIR_RD"].code, isa.OPS["C_LOOKUP"].code):
                        m.d.sync += [tcmd.op.eq(TagOp.LOOKUP), tcmd.addr.eq(r.addr)]
                        m.next = "TAG"
                    with m.Case(isa.OPS["C_ALLOC"].code):
                        m.d.sync += [tcmd.op.eq(TagOp.ALLOC), tcmd.addr.eq(r.addr)]
                        m.next = "TAG"
                    with m.Case(isa.OPS["DIR_WR"].code):
                        head = pointer_source(fc)
                        m.d.sync += [
                            tcmd.op.eq(TagOp.WRITE_DIR),
                            tcmd.addr.eq(r.addr),
                            tcmd.mstate.eq(Mux(fa == MStateSrc.IMM, imm[:2], r.mstate)),
                            tcmd.lock.eq(Mux(fb == Lock.SET, 1, Mux(fb == Lock.CLEAR, 0, r.locked))),
                            tcmd.head.eq(Mux(fc == Ptr.KEEP, r.head.id, head.id)),
                        ]
                        m.next = "TAG"
                    with m.Case(isa.OPS["C_WR"].code):
                        fwd_src, bwd_src = pointer_source(fb), pointer_source(fc)
                        new_state = Mux(fa == StateSrc.IMM, imm[:4], r.state)
                        m.d.sync += [
                            tcmd.op.eq(TagOp.WRITE_TAG),
                            tcmd.addr.eq(r.addr),
                            tcmd.way.eq(r.way),
                            tcmd.state.eq(new_state),
                            tcmd.fwd.eq(Mux(fb == Ptr.KEEP, r.fwd.id, fwd_src.id)),
                            tcmd.bwd.eq(Mux(fc == Ptr.KEEP, r.bwd.id, bwd_src.id)),
                            r.state.eq(new_state),
                        ]
                        m.next = "TAG"
                    with m.Case(isa.OPS["C_TOUCH"].code):
                        m.d.sync += [tcmd.op.eq(TagOp.TOUCH), tcmd.addr.eq(r.addr), tcmd.way.eq(r.way)]
                        m.next = "TAG"
                    with m.Case(isa.OPS["C_SCAN"].code):
                        m.next = "SCAN"
                    with m.Case(isa.OPS["SWAP_VICTIM"].code):
                        m.d.sync += [r.addr.eq(r.vaddr), r.vaddr.eq(r.addr)]
                        step()
                    with m.Case(isa.OPS["RD_LINE"].code):
                        m.d.sync += [
                            i.eq(0),
                            j.eq(0),
                            r.flags[Flag.DATA].eq(1),
                            mem_space.eq(Mux(fa == Mem.HOME, MemSpace.HOME, MemSpace.CACHE)),
                            mem_index0.eq(Mux(fa == Mem.HOME, line_offset_words, cache_word0)),
                        ]
                        m.next = "RD_LINE"
                    with m.Case(isa.OPS["WR_LINE"].code):
                        m.d.sync += [
                            i.eq(0),
                            pipe_valid.eq(0),
                            stream_from_msg.eq(fb == LineSrc.MSG),
                            stream_start.eq(0),
                            stream_count.eq(LINE_WORDS),
                            stream_dst.eq(DST_MEM),
                            mem_space.eq(Mux(fa == Mem.HOME, MemSpace.HOME, MemSpace.CACHE)),
                            mem_index0.eq(Mux(fa == Mem.HOME, line_offset_words, cache_word0)),
                        ]
                        m.next = "LB_STREAM"
                    with m.Case(isa.OPS["M_TO_BUF"].code, isa.OPS["MERGE_HOST"].code, isa.OPS["MERGE_MSG"].code):
                        m.d.sync += [i.eq(0), pipe_valid.eq(0)]
                        with m.If(op == isa.OPS["M_TO_BUF"].code):
                            m.d.sync += r.flags[Flag.DATA].eq(1)
                        m.next = "MERGE"
                    with m.Case(isa.OPS["SEND"].code, isa.OPS["REPLY"].code):
                        m.next = "HEADER"
                    with m.Case(isa.OPS["COMPLETE"].code):
                        complete(src=fa, status=imm[:5])
                    with m.Case(isa.OPS["COUNT"].code):
                        with m.Switch(fa):
                            for counter in isa.Counter:
                                with m.Case(counter):
                                    count(counter.name.lower())
                                    # The allocation filter learns of a purged copy, and of a
                                    # second miss its home declined to cache: both lines are dead.
                                    if counter in (isa.Counter.PURGE, isa.Counter.REWRITTEN_READ):
                                        m.d.comb += [tag.purged.valid.eq(1), tag.purged.payload.eq(r.addr)]
                        step()
                    with m.Default():
                        count("protocol_error")
                        m.d.sync += running.eq(0)
                        m.next = "IDLE"
                        with m.If(ctx != HANDLER):
                            entry_command(sched.release, ctx[:4])
                # Keep the instruction for the multi-cycle states.
                m.d.sync += Cat(op_q, fa_q, fb_q, fc_q, fd_q, imm_q).eq(Cat(op, fa, fb, fc, fd, imm))

            # --- the hard-wired fast path: the steps of the microcode it stands for, each handed to
            # the states an instruction would use (op_q and its operands say which) --------------
            with m.State("FAST"):
                run_fast_step()

            # --- tag SRAM commands -------------------------------------------------------------
            with m.State("TAG"):
                m.d.comb += [tag.tag_cmd_valid.eq(1), tag.tag_cmd.eq(tcmd)]
                with m.If(tag.tag_cmd_ready):
                    with m.If((tcmd.op == TagOp.WRITE_TAG) | (tcmd.op == TagOp.WRITE_DIR) | (tcmd.op == TagOp.TOUCH)):
                        finish(step_now=True)
                    with m.Else():
                        m.next = "TAG_WAIT"
            with m.State("TAG_WAIT"):
                resp = tag.tag_resp
                with m.If(tag.tag_resp_valid):
                    with m.If(op_q == isa.OPS["DIR_RD"].code):
                        m.d.sync += [
                            r.mstate.eq(resp.dir.mstate),
                            r.locked.eq(resp.dir.lock),
                            r.head.id.eq(resp.dir.head),
                            r.head.valid.eq(~home_owned(resp.dir.mstate)),
                        ]
                    with m.Elif(op_q == isa.OPS["C_LOOKUP"].code):
                        st = Mux(resp.hit, resp.tag.state, CacheState.INVALID)
                        m.d.sync += [
                            r.hit.eq(resp.hit),
                            r.state.eq(st),
                            r.fwd.id.eq(Mux(resp.hit, resp.tag.fwd, 0)),
                            r.fwd.valid.eq(resp.hit & has_fwd.bit_select(resp.tag.state, 1)),
                            r.bwd.id.eq(Mux(resp.hit, resp.tag.bwd, 0)),
                            r.bwd.valid.eq(resp.hit & has_bwd.bit_select(resp.tag.state, 1)),
                        ]
                        with m.If(resp.hit):
                            m.d.sync += r.way.eq(resp.way)
                    with m.Elif(op_q == isa.OPS["C_ALLOC"].code):
                        with m.If(~resp.hit):
                            m.d.sync += [r.state.eq(CacheState.INVALID), r.fwd.eq(0), r.bwd.eq(0)]
                        m.d.sync += [
                            r.hit.eq(resp.hit),
                            r.victim.eq(resp.victim),
                            r.no_way.eq(resp.no_way),
                            r.vaddr.eq(Cat(Const(0, g.offset_bits), resp.victim_line)),
                        ]
                        with m.If(~resp.no_way):
                            m.d.sync += r.way.eq(resp.way)
                    finish()

            # --- flush scan: next valid way -------------------------------------------------------
            with m.State("SCAN"):
                total = g.sets * g.ways
                with m.If(r.scan >= total):
                    m.d.sync += r.scan_done.eq(1)
                    finish()
                with m.Else():
                    m.d.comb += [
                        tag.tag_cmd_valid.eq(1),
                        tag.tag_cmd.op.eq(TagOp.READ_WAY),
                        tag.tag_cmd.set.eq(r.scan >> max(0, g.way_bits)),
                        tag.tag_cmd.way.eq(r.scan & (g.ways - 1)),
                    ]
                    with m.If(tag.tag_cmd_ready):
                        m.next = "SCAN_WAIT"
            with m.State("SCAN_WAIT"):
                resp = tag.tag_resp
                with m.If(tag.tag_resp_valid):
                    m.d.sync += r.scan.eq(r.scan + 1)
                    with m.If(stable.bit_select(resp.tag.state, 1)):
                        m.d.sync += [
                            r.addr.eq(Cat(Const(0, g.offset_bits), resp.tag.line)),
                            r.way.eq(r.scan & (g.ways - 1)),
                            r.scan_done.eq(0),
                        ]
                        finish()
                    with m.Else():
                        m.next = "SCAN"

            # --- memory -> line buffer ------------------------------------------------------------
            with m.State("RD_LINE"):
                mem = tag.mem
                read_line_words()
                m.d.comb += [lb_wr.addr.eq(lb_base | j[:wb]), lb_wr.data.eq(mem.rdata), lb_wr.en.eq(mem.rvalid)]
                with m.If(mem.rvalid):
                    m.d.sync += j.eq(j + 1)
                    with m.If(j == LINE_WORDS - 1):
                        finish()

            # --- memory -> send_data: a line straight into the packet ---------------------------
            # Reads are issued only while their words fit the skid buffer, since the memory's
            # answers cannot be held back; i counts words read, j words sent.
            with m.State("MEM_STREAM"):
                mem = tag.mem
                read_line_words(allowed=(i - j) < skid.depth, words=stream_count)
                m.d.comb += [
                    skid.w_data.eq(mem.rdata),
                    skid.w_en.eq(mem.rvalid),
                    self.send_data.valid.eq(skid.r_rdy),
                    self.send_data.payload.eq(skid.r_data),
                    skid.r_en.eq(self.send_data.ready),
                ]
                with m.If(self.send_data.valid & self.send_data.ready):
                    m.d.sync += j.eq(j + 1)
                    with m.If(j + 1 == stream_count):
                        finish()

            # --- line buffer -> memory / send_data / done, with back-pressure ----------------------
            with m.State("LB_STREAM"):
                sink_ready = Signal()
                with m.Switch(stream_dst):
                    with m.Case(DST_MEM):
                        mem = tag.mem
                        m.d.comb += [
                            mem.cmd.valid.eq(pipe_valid),
                            mem.cmd.payload.space.eq(mem_space),
                            mem.cmd.payload.index.eq(mem_index0 + i),
                            mem.cmd.payload.write.eq(1),
                            mem.cmd.payload.data.eq(Mux(stream_from_msg, message.read_data, lb_rd.data)),
                            mem.cmd.payload.be.eq(0xF),
                            sink_ready.eq(mem.cmd.ready),
                        ]
                    with m.Case(DST_SEND):
                        m.d.comb += [
                            self.send_data.valid.eq(pipe_valid),
                            self.send_data.payload.eq(lb_rd.data),
                            sink_ready.eq(self.send_data.ready),
                        ]
                    with m.Case(DST_DONE):
                        d = self.miss.done
                        m.d.comb += [
                            d.valid.eq(pipe_valid),
                            d.payload.data.eq(Mux(done_error, 0, Mux(stream_from_msg, message.read_data, lb_rd.data))),
                            d.payload.error.eq(done_error),
                            d.payload.last.eq(i + 1 == stream_count),
                            sink_ready.eq(d.ready),
                        ]
                # Read the next word when the port is empty or its word is being taken.
                advance = ~pipe_valid | sink_ready
                m.d.comb += message.read_en.eq(0)  # its word is held while the sink waits
                nxt = Mux(pipe_valid, i + 1, i)
                word = (stream_start + nxt)[:wb]
                readable = ~stream_from_msg | msg_word_in(word)
                with m.If(pipe_valid & sink_ready):
                    m.d.sync += i.eq(i + 1)
                with m.If(advance & readable):
                    m.d.comb += [
                        lb_rd.en.eq(1),
                        lb_rd.addr.eq(lb_base | word),
                        message.read_en.eq(1),
                        message.read_addr.eq(word),
                    ]
                    m.d.sync += pipe_valid.eq(nxt < stream_count)
                with m.Elif(advance):
                    m.d.sync += pipe_valid.eq(0)
                with m.If(pipe_valid & sink_ready & (i + 1 == stream_count)):
                    finish()

            # --- message data / host data merged into the line buffer ------------------------------
            with m.State("MERGE"):
                m.d.comb += [
                    lb_rd.en.eq(1),
                    lb_rd.addr.eq(lb_base | i[:wb]),
                    message.read_addr.eq(i[:wb]),
                    hd_rd.addr.eq(Cat(i[:wb], ctx[:4])),
                ]
                go = (i != LINE_WORDS) & (msg_word_in(i) | (op_q == isa.OPS["MERGE_HOST"].code))
                with m.If(go):
                    m.d.sync += i.eq(i + 1)
                m.d.sync += pipe_valid.eq(go)
                k = Signal(wb)
                m.d.sync += k.eq(i[:wb])
                mask = Signal(32)
                be = Mux(op_q == isa.OPS["MERGE_MSG"].code, msg.be, hbe).word_select(k, 4)
                m.d.comb += mask.eq(Cat(*[b.replicate(8) for b in be]))
                merged = Signal(32)
                with m.Switch(op_q):
                    with m.Case(isa.OPS["M_TO_BUF"].code):
                        m.d.comb += merged.eq(message.read_data)
                    with m.Case(isa.OPS["MERGE_HOST"].code):
                        m.d.comb += merged.eq((lb_rd.data & ~mask) | (hd_rd.data & mask))
                    with m.Case(isa.OPS["MERGE_MSG"].code):
                        m.d.comb += merged.eq((lb_rd.data & ~mask) | (message.read_data & mask))
                m.d.comb += [lb_wr.addr.eq(lb_base | k), lb_wr.data.eq(merged), lb_wr.en.eq(pipe_valid)]
                with m.If(pipe_valid & (k == LINE_WORDS - 1)):
                    finish()

            # --- packets ---------------------------------------------------------------------------
            with m.State("HEADER"):
                h = self.send_header.payload
                is_send = op_q == isa.OPS["SEND"].code
                dest = Signal(NODE_ID_BITS)
                with m.Switch(fa_q):
                    with m.Case(Dest.HOME):
                        m.d.comb += dest.eq(home_of_addr)
                    with m.Case(Dest.PTR):
                        m.d.comb += dest.eq(r.ptr.id)
                    with m.Case(Dest.FWD):
                        m.d.comb += dest.eq(r.fwd.id)
                    with m.Case(Dest.BWD):
                        m.d.comb += dest.eq(r.bwd.id)
                    with m.Case(Dest.HEAD):
                        m.d.comb += dest.eq(r.head.id)
                data_src = Signal(DataSrc)
                m.d.comb += data_src.eq(Mux(is_send, fd_q, fc_q))
                # The answer to an uncached read carries only the words asked for (the whole line
                # if they are not a range inside it): sci_packet.answered_words.
                words_asked = carries_words_asked(~is_send, msg.cmd)
                asked_ok = range_in_line(msg.word, msg.count, LINE_WORDS)
                block_word = Mux(words_asked & asked_ok, msg.word, 0)
                block_words = Mux(words_asked & asked_ok, msg.count, LINE_WORDS)
                send_ptr = pointer_source(fb_q)
                reply_ptr = pointer_source(fa_q)
                with m.If(is_send):
                    m.d.comb += [
                        h.target.eq(dest),
                        h.ptype.eq(PacketType.REQUEST),
                        h.cmd.eq(imm_q[:6]),
                        h.tid.eq(ctx),
                        h.addr.eq(r.addr),
                        h.ptr.eq(send_ptr.id),
                        h.ptr_valid.eq(send_ptr.valid),
                        h.flag.eq(flag_source(fc_q)),
                        h.has_data.eq(data_src != DataSrc.NONE),
                        h.word.eq(r.lword),
                        h.count.eq(r.lcount),
                        h.be.eq(hbe),
                    ]
                with m.Else():
                    m.d.comb += [
                        h.target.eq(msg.source),
                        h.ptype.eq(PacketType.RESPONSE),
                        h.cmd.eq(msg.cmd),
                        h.tid.eq(msg.tid),
                        h.status.eq(imm_q[:5]),
                        h.addr.eq(msg.addr),
                        h.ptr.eq(reply_ptr.id),
                        h.ptr_valid.eq(reply_ptr.valid),
                        h.flag.eq(flag_source(fb_q)),
                        h.mstate.eq(r.mstate),
                        h.has_data.eq(data_src != DataSrc.NONE),
                        h.word.eq(block_word),
                        h.count.eq(Mux(words_asked, block_words, 0)),
                    ]
                m.d.comb += self.send_header.valid.eq(1)
                with m.If(self.send_header.ready):
                    m.d.sync += [i.eq(0), j.eq(0), pipe_valid.eq(0)]
                    with m.Switch(data_src):
                        with m.Case(DataSrc.BUF):
                            m.d.sync += [
                                stream_from_msg.eq(0),
                                stream_start.eq(block_word),
                                stream_count.eq(block_words),
                                stream_dst.eq(DST_SEND),
                            ]
                            m.next = "LB_STREAM"
                        with m.Case(DataSrc.HOME, DataSrc.CACHE):
                            from_home = data_src == DataSrc.HOME
                            m.d.sync += [
                                mem_space.eq(Mux(from_home, MemSpace.HOME, MemSpace.CACHE)),
                                mem_index0.eq(Mux(from_home, line_offset_words, cache_word0) + block_word),
                                stream_count.eq(block_words),
                            ]
                            m.next = "MEM_STREAM"
                        with m.Default():
                            finish()
                with m.Elif(is_send):
                    # The outgoing queue has no room for a request: suspend and retry the SEND.
                    count("send_stalls")
                    entry_command(sched.retry_send, ctx[:4])
                    m.next = "SAVE"

            with m.State("COMPLETE"):
                m.next = "LB_STREAM"

            # --- suspend ---------------------------------------------------------------------------
            with m.State("SAVE"):
                m.d.comb += [store.save.en.eq(1), store.save.index.eq(ctx), store.save.context.eq(r)]
                m.d.sync += running.eq(0)
                m.next = "IDLE"

        m.d.comb += tag.own_req.eq(running | fsm.ongoing("OWN") | own_next)
        # An answer's first fast step runs as its context is read back (ARRIVED).
        answer_arrived = fsm.ongoing("ARRIVED") & (ctx != HANDLER)
        m.d.comb += fast.step.eq(Mux(answer_arrived, fast.response_step, fast_step))
        return m
