"""The sequencer's hard-wired fast path: the commonest transactions without fetching
micro-instructions.

Five kinds of transaction qualify (while ``enable`` is high):

* a read or write miss to another node's line, outside NUMA mode, that is to be cached (a
  ``READ`` or ``WRITE``; ``miss_fast``): one tag lookup for a way (none when the local access
  controller's lookup is handed on: the sequencer starts at ``MISS_ATTACH``); with a free way and
  no copy here the entry becomes PENDING and the MREAD/MWRITE goes to the home; the context then
  waits at the microcode's ``.vector resume`` point, which handles the answer;
* a read miss to another node's line that the allocation filter does not cache (``READ_ONCE``,
  outside NUMA mode; ``once_fast``): the uncached MUREAD to the home, a wait at its resume point,
  and, when the answer brings the words (``response_step``), the host's words from the message;
  a refusal or an answer without data (a GONE line attaches) is the microcode's;
* the answer with the line to a caching read miss (``response_step``): the host's words from the
  message, then the microcode's bookkeeping from its ``READ_ANSWERED`` resume point (the line
  into the cache, the list); an answer to a fill whose host already has its words (flag A) is
  the microcode's;
* a writer's CPURGE of a copy here, without the flag that asks for dirty data (``purge_fast``):
  the tag lookup and, for a copy in a list (or leaving it), the answer naming its successor; the
  microcode invalidates the copy and counts the purge from its ``PURGE_ANSWERED`` resume point;
* a write miss's answer (waited for at ``WRITE_SENT``): with nobody to purge the host's write
  done, with a list of clean copies (``FRESH``) the first ``CPURGE``; each purge's answer (at
  ``WRITE_PURGE_SENT``) the next ``CPURGE``, or after the last the host's write done. The line
  is kept, marked ``WRITING`` and merged by the microcode after each of these, off the writer's
  path; a list whose head holds the data (``GONE``) is the microcode's;
* an MREAD/MWRITE/MUREAD at this node, its home (``request_fast``): the directory read; when the
  line is unlocked, the answer with the line streamed from memory, then the directory write (a
  second miss's MREAD of a line written since it was SHOWN is answered so too, uncached; an
  MUREAD writes the directory only to show a HOME line, and leaves NUMA mode's read of a GONE
  line, an error, to the microcode).

Each step stands for an instruction of the microcode: the fast path says what that instruction
would load (a tag command, the instruction's fields for the packet states, the context's pc) and
which of the sequencer's operations runs it (``then``); the sequencer's execute states do the
rest. A case the fast path does not know (a hit, a victim to roll out, no way, a locked line...)
raises ``fallback``: the microcode takes the transaction at its own vector.
"""

from amaranth import Module, Mux
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import coherence as coh
from numavia.base.coherence import NODE_ID_BITS, CacheGeometry, CacheState, MemoryState
from numavia.base.microcode import isa
from numavia.base.microcode.isa import DataSrc, Dest, Flag, FlagSrc, LineSrc, Ptr, Resume
from numavia.base.sci_packet import ADDR_HOME_SHIFT, Command, Status

from .context_store import ContextLayout
from .local_access_controller import MissLayout
from .sci_layouts import HeaderLayout
from .sequencer_decoder import InstructionLayout
from .tag_store import TagOp, command_layout, home_owned, state_mask


class FastStep(enum.Enum, shape=5):
    """Steps of the hard-wired fast path (``NONE``: the microcode runs)."""

    NONE = 0
    MISS_ALLOC = 1  # a plain miss: one tag lookup for a way
    MISS_ATTACH = 2  # a free way and no copy here: the entry becomes PENDING
    MISS_SEND = 3  # the attach request to the home
    MISS_WAIT = 4  # suspended where the microcode waits for the answer
    HOME_DIR = 5  # MREAD/MWRITE/MUREAD at the home: read the directory
    HOME_REPLY = 6  # unlocked, a known memory state: answer
    HOME_DIR_WRITE = 7  # the requester is the new head
    END = 8  # the end of a fast run (at the home, or after a miss's answer)
    ONCE_SEND = 9  # a read miss not cached: the uncached read to the home
    ONCE_WAIT = 10  # suspended where the microcode waits for its answer
    ONCE_ANSWER = 11  # the answer with the words: the host's words from the message
    READ_ANSWER = 12  # a caching read's answer with the line: the host's words, then the microcode
    PURGE_LOOKUP = 13  # CPURGE of a copy here: look it up
    PURGE_REPLY = 14  # a copy in a list: answer with its successor, then the microcode
    WRITE_ANSWER = 15  # a write miss's answer: the host's write done, or the first CPURGE
    WRITE_PURGE_ANSWER = 16  # a purge's answer: the next CPURGE, or the host's write done
    WRITE_KEEP = 17  # the first CPURGE sent: the microcode keeps the line, marks it WRITING
    WRITE_PURGE_WAIT = 18  # the next CPURGE sent: wait for its answer


class FastThen(enum.Enum, shape=3):
    """The sequencer operation that runs a fast step."""

    TAG = 0  # the tag command loaded
    HEADER = 1  # the packet of the instruction loaded
    SUSPEND = 2  # wait for the answer
    END = 3  # the transaction is done
    COMPLETE = 4  # the host's words, as the COMPLETE instruction loaded
    MICROCODE = 5  # the microcode goes on at the loaded pc


def _op(name):
    return isa.OPS[name].code


#: The states a purge invalidates at once (sci.uasm's purge_tab): a copy in a list or leaving it.
_PURGEABLE = state_mask(coh.STABLE_VALID | coh.LEAVING)


class FastPath(wiring.Component):
    """Members:

    * ``enable``, ``node_id``, ``numa_mode``: the card's settings.
    * ``request`` -> ``request_fast``, ``purge_fast``, ``miss`` -> ``miss_fast``, ``once_fast``:
      a transaction the fast path starts with (``FastStep.HOME_DIR``, ``FastStep.PURGE_LOOKUP``,
      ``FastStep.MISS_ALLOC``, ``FastStep.ONCE_SEND``);
      ``message``, ``resumed_pc`` and ``resumed_flags`` (a response, and the pc and flags of the
      context it resumes) ->
      ``response_step``: the step an answer starts with on the fast path (``FastStep.ONCE_ANSWER``,
      ``FastStep.READ_ANSWER``, ``FastStep.WRITE_ANSWER``, ``FastStep.WRITE_PURGE_ANSWER``;
      ``FastStep.NONE``: the microcode's).
    * ``step``, ``context`` (the running context's registers; an answer's first step reads none
      of them, so the sequencer runs it as the context is read back), ``message`` (the packet that
      started the run) -> ``fallback``, or ``next_step`` and ``then``, with what to load:
      ``tag_cmd`` (``load_tag_cmd``; a ``WRITE_TAG`` sets the context's state too, as ``C_WR``
      does), ``instruction`` (``load_instruction``), ``pc`` (``load_pc``), and ``load_ptr``
      (the context's PTR := the message's pointer, as ``MOVP PTR, M_PTR``). A request's first
      step (``HOME_DIR``, ``PURGE_LOOKUP``) reads only ``message``: the sequencer runs it while
      the handler's context is still being set up.
    """

    def __init__(self, geometry=CacheGeometry()):
        super().__init__(
            {
                "enable": In(1),
                "node_id": In(NODE_ID_BITS),
                "numa_mode": In(1),
                "request": In(HeaderLayout),
                "request_fast": Out(1),
                "purge_fast": Out(1),
                "miss": In(MissLayout),
                "miss_fast": Out(1),
                "once_fast": Out(1),
                "resumed_pc": In(isa.TARGET_BITS),  # the pc of the context a response resumes
                "resumed_flags": In(ContextLayout.members["flags"]),  # and its flags
                "response_step": Out(FastStep),
                "step": In(FastStep),
                "context": In(ContextLayout),
                "message": In(HeaderLayout),
                "fallback": Out(1),
                "next_step": Out(FastStep),
                "then": Out(FastThen),
                "tag_cmd": Out(command_layout(geometry)),
                "load_tag_cmd": Out(1),
                "instruction": Out(InstructionLayout),
                "load_instruction": Out(1),
                "pc": Out(isa.TARGET_BITS),
                "load_pc": Out(1),
                "load_ptr": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        r, msg, cmd, ins = self.context, self.message, self.tag_cmd, self.instruction

        req = self.request
        home_request = (req.cmd == Command.MREAD) | (req.cmd == Command.MWRITE) | (req.cmd == Command.MUREAD)
        mp = self.miss
        attach = (mp.kind == isa.LocalKind.READ) | (mp.kind == isa.LocalKind.WRITE)  # READ_ONCE caches nothing
        remote = mp.addr[ADDR_HOME_SHIFT:] != self.node_id
        plain = attach & remote
        # A read miss the allocation filter does not cache (NUMA mode's are the microcode's).
        once = (mp.kind == isa.LocalKind.READ_ONCE) & remote
        # An answer with the words resumes a read at its wait: the host's words first (after a
        # read not cached there is nothing else to do; after a caching one, the microcode's rest).
        # A write's answer, and a purge's answer without data (a clean copy's), resume its
        # write: the host's write done, or the next purge out (the line's bookkeeping after it).
        # A fill whose host has its words already (flag A) and a purge answer that was to bring
        # the data (GONE) are the microcode's.
        ok = self.message.status == Status.OK
        answered = ok & self.message.has_data
        resumed = self.resumed_flags
        with m.If(self.enable & answered):
            with m.If(self.resumed_pc == isa.resume_vector(Resume.READ_ONCE_SENT)):
                m.d.comb += self.response_step.eq(FastStep.ONCE_ANSWER)
            with m.Elif((self.resumed_pc == isa.resume_vector(Resume.READ_SENT)) & ~resumed[Flag.A]):
                m.d.comb += self.response_step.eq(FastStep.READ_ANSWER)
        with m.If(self.enable & ok):
            with m.If(self.resumed_pc == isa.resume_vector(Resume.WRITE_SENT)):
                m.d.comb += self.response_step.eq(FastStep.WRITE_ANSWER)
            with m.Elif(
                (self.resumed_pc == isa.resume_vector(Resume.WRITE_PURGE_SENT))
                & ~self.message.has_data
                & ~resumed[Flag.GONE]
            ):
                m.d.comb += self.response_step.eq(FastStep.WRITE_PURGE_ANSWER)
        m.d.comb += [
            self.request_fast.eq(self.enable & home_request & (req.addr[ADDR_HOME_SHIFT:] == self.node_id)),
            self.purge_fast.eq(self.enable & (req.cmd == Command.CPURGE) & ~req.flag),
            self.miss_fast.eq(self.enable & plain & ~self.numa_mode),
            self.once_fast.eq(self.enable & once & ~self.numa_mode),
        ]

        write = r.kind == isa.LocalKind.WRITE
        owned = home_owned(r.mstate)
        # At the home: a second miss (flag) of a line written since it was shown (HOME) is
        # answered uncached and the line SHOWN again (the microcode's mread_rewritten).
        read = msg.cmd == Command.MREAD
        rewritten = read & msg.flag & (r.mstate == MemoryState.HOME)
        # An uncached read (NUMA mode; a first miss, flag "I cache", which makes a HOME line SHOWN).
        uncached = msg.cmd == Command.MUREAD
        shows = uncached & msg.flag & (r.mstate == MemoryState.HOME)

        def resume(read_point, write_point):
            """The microcode's resume point of this miss (a read's or a write's)."""
            return Mux(write, isa.resume_vector(write_point), isa.resume_vector(read_point))

        def go(next_step, then):
            m.d.comb += [self.next_step.eq(next_step), self.then.eq(then)]

        def tag_command(op, addr=r.addr, **fields):
            m.d.comb += [self.load_tag_cmd.eq(1), cmd.op.eq(op), cmd.addr.eq(addr)]
            m.d.comb += [getattr(cmd, name).eq(value) for name, value in fields.items()]

        def instruction(op, **operands):
            m.d.comb += [self.load_instruction.eq(1), ins.op.eq(_op(op))]
            m.d.comb += [getattr(ins, field).eq(value) for field, value in operands.items()]

        def pc(value):
            m.d.comb += [self.load_pc.eq(1), self.pc.eq(value)]

        def purge(send_point, next_step):
            """MOVP PTR, M_PTR; SEND cmd=CPURGE, dest=PTR, flag=F_GONE (the microcode's at send_point
            when the outgoing queue is full)."""
            m.d.comb += self.load_ptr.eq(1)
            instruction("SEND", a=Dest.PTR, b=Ptr.NONE, c=FlagSrc.F_GONE, d=DataSrc.NONE, imm=Command.CPURGE)
            pc(isa.resume_vector(send_point))
            go(next_step, FastThen.HEADER)

        def write_done(then_point):
            """COMPLETE status=OK: the host's write is done; the microcode keeps the line."""
            instruction("COMPLETE", a=LineSrc.BUF, imm=Status.OK)
            pc(isa.resume_vector(then_point))
            go(FastStep.NONE, FastThen.COMPLETE)

        with m.Switch(self.step):
            with m.Case(FastStep.MISS_ALLOC):  # C_ALLOC
                instruction("C_ALLOC")
                tag_command(TagOp.ALLOC)
                go(FastStep.MISS_ATTACH, FastThen.TAG)
            with m.Case(FastStep.MISS_ATTACH):  # BRT HIT/NO_WAY/VICTIM fall through; C_WR PENDING
                with m.If(r.hit | r.no_way | r.victim):
                    m.d.comb += self.fallback.eq(1)
                with m.Else():
                    tag_command(TagOp.WRITE_TAG, way=r.way, state=CacheState.PENDING, fwd=r.fwd.id, bwd=r.bwd.id)
                    go(FastStep.MISS_SEND, FastThen.TAG)
            with m.Case(FastStep.MISS_SEND):  # SEND cmd=MREAD|MWRITE, dest=HOME
                instruction(
                    "SEND",
                    a=Dest.HOME,
                    b=Ptr.NONE,
                    c=Mux(write, FlagSrc.ZERO, FlagSrc.SECOND_MISS),
                    d=DataSrc.NONE,
                    imm=Mux(write, Command.MWRITE, Command.MREAD),
                )
                pc(resume(Resume.READ_SEND, Resume.WRITE_SEND))  # a full outgoing queue suspends it there
                go(FastStep.MISS_WAIT, FastThen.HEADER)
            with m.Case(FastStep.MISS_WAIT):  # WAIT, at the microcode's resume point
                pc(resume(Resume.READ_SENT, Resume.WRITE_SENT))
                go(FastStep.NONE, FastThen.SUSPEND)
            with m.Case(FastStep.HOME_DIR):  # DIR_RD (of the request's line: the context may be loading)
                instruction("DIR_RD")
                tag_command(TagOp.LOOKUP, addr=msg.addr)
                go(FastStep.HOME_REPLY, FastThen.TAG)
            with m.Case(FastStep.HOME_REPLY):  # mread_*/mwrite_*/muread_*: REPLY first
                # A locked line NACKs; NUMA mode's uncached read of a GONE line (only its list
                # has the data) is refused: both are the microcode's. A caching node's (flag) is
                # answered without data, and attaches then (muread_gone).
                with m.If(r.locked | (uncached & ~msg.flag & (r.mstate == MemoryState.GONE))):
                    m.d.comb += self.fallback.eq(1)
                with m.Else():
                    instruction(
                        "REPLY",
                        a=Mux(uncached | (read & owned), Ptr.NONE, Ptr.HEAD),
                        b=Mux(rewritten, FlagSrc.ONE, FlagSrc.ZERO),  # mread_rewritten: not attached
                        c=Mux(r.mstate == MemoryState.GONE, DataSrc.NONE, DataSrc.HOME),
                        imm=Status.OK,
                    )
                    # An uncached read changes the directory only when it shows a HOME line.
                    go(Mux(uncached & ~shows, FastStep.END, FastStep.HOME_DIR_WRITE), FastThen.HEADER)
            with m.Case(FastStep.HOME_DIR_WRITE):  # DIR_WR FRESH|GONE|KEEP, head=M_SRC; or SHOWN
                fresh = read & owned & ~rewritten
                mstate = Mux(
                    msg.cmd == Command.MWRITE,
                    MemoryState.GONE,
                    Mux(rewritten | shows, MemoryState.SHOWN, Mux(fresh, MemoryState.FRESH, r.mstate)),
                )
                head = Mux(rewritten | shows, r.head.id, msg.source)
                tag_command(TagOp.WRITE_DIR, mstate=mstate, lock=r.locked, head=head)
                go(FastStep.END, FastThen.TAG)
            with m.Case(FastStep.END):  # END
                go(FastStep.NONE, FastThen.END)
            with m.Case(FastStep.ONCE_SEND):  # l_read_once: SEND cmd=MUREAD, dest=HOME, flag=ONE
                instruction("SEND", a=Dest.HOME, b=Ptr.NONE, c=FlagSrc.ONE, d=DataSrc.NONE, imm=Command.MUREAD)
                pc(isa.resume_vector(Resume.READ_ONCE_SEND))  # a full outgoing queue suspends it there
                go(FastStep.ONCE_WAIT, FastThen.HEADER)
            with m.Case(FastStep.ONCE_WAIT):  # WAIT, at the microcode's resume point
                pc(isa.resume_vector(Resume.READ_ONCE_SENT))
                go(FastStep.NONE, FastThen.SUSPEND)
            with m.Case(FastStep.ONCE_ANSWER):  # (M_OK, M_HAS_DATA) COMPLETE status=OK, src=MSG
                instruction("COMPLETE", a=LineSrc.MSG, imm=Status.OK)
                go(FastStep.END, FastThen.COMPLETE)
            with m.Case(FastStep.READ_ANSWER):  # (M_OK, M_HAS_DATA, not F_A) COMPLETE src=MSG
                instruction("COMPLETE", a=LineSrc.MSG, imm=Status.OK)
                pc(isa.resume_vector(Resume.READ_ANSWERED))  # the bookkeeping, in microcode
                go(FastStep.NONE, FastThen.COMPLETE)
            with m.Case(FastStep.PURGE_LOOKUP):  # h_cpurge: C_LOOKUP (likewise)
                instruction("C_LOOKUP")
                tag_command(TagOp.LOOKUP, addr=msg.addr)
                go(FastStep.PURGE_REPLY, FastThen.TAG)
            with m.Case(FastStep.PURGE_REPLY):  # (HIT, DISP STATE) purge: REPLY status=OK, ptr=FWD
                # No copy, or one attaching or writing (NACK): the microcode's.
                with m.If(~_PURGEABLE.bit_select(r.state, 1)):
                    m.d.comb += self.fallback.eq(1)
                with m.Else():
                    instruction("REPLY", a=Ptr.FWD, b=FlagSrc.ZERO, c=DataSrc.NONE, imm=Status.OK)
                    pc(isa.resume_vector(Resume.PURGE_ANSWERED))  # invalidate and count, in microcode
                    go(FastStep.NONE, FastThen.HEADER)
            with m.Case(FastStep.WRITE_ANSWER):  # write_sent: (M_OK) DISP M_MSTATE
                with m.Switch(msg.mstate):
                    with m.Case(MemoryState.HOME, MemoryState.SHOWN):  # write_alone
                        write_done(Resume.WRITE_ALONE)
                    with m.Case(MemoryState.FRESH):  # write_purge_first
                        purge(Resume.WRITE_FIRST_PURGE_SEND, FastStep.WRITE_KEEP)
                    with m.Default():  # GONE: the old head's data comes with its purge answer
                        m.d.comb += self.fallback.eq(1)
            with m.Case(FastStep.WRITE_PURGE_ANSWER):  # write_purge_sent: (M_OK, not F_GONE) ...
                with m.If(msg.ptr_valid):  # MOVP PTR, M_PTR; BRT PTR_V, write_purge
                    purge(Resume.WRITE_PURGE_SEND, FastStep.WRITE_PURGE_WAIT)
                with m.Else():  # write_purged
                    m.d.comb += self.load_ptr.eq(1)
                    write_done(Resume.WRITE_PURGED)
            with m.Case(FastStep.WRITE_KEEP):  # write_first_purged: C_WR WRITING ..., in microcode
                pc(isa.resume_vector(Resume.WRITE_FIRST_PURGED))
                go(FastStep.NONE, FastThen.MICROCODE)
            with m.Case(FastStep.WRITE_PURGE_WAIT):  # WAIT_AT WRITE_PURGE_SENT
                pc(isa.resume_vector(Resume.WRITE_PURGE_SENT))
                go(FastStep.NONE, FastThen.SUSPEND)
            with m.Default():  # not a fast step: the microcode runs
                m.d.comb += self.fallback.eq(1)
        return m
