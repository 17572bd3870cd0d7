"""The sequencer's hard-wired fast path alone: which transactions it takes, the instruction each
step stands for (checked against the instruction-set model's operands), and the cases it hands
back to the microcode."""

import itertools

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.base.coherence import HOME_OWNED, CacheState, MemoryState
from numavia.base.microcode import isa
from numavia.base.microcode.isa import DataSrc, Dest, FlagSrc, LocalKind, Ptr, Resume
from numavia.base.sci_packet import ADDR_HOME_SHIFT, Command, Status
from numavia.gateware.fast_path import FastPath, FastStep, FastThen
from numavia.gateware.tag_store import TagOp

NODE = 1
LINE_ADDR = 0x1C0  # an address inside a node's slice


def address(home):
    return home << ADDR_HOME_SHIFT | LINE_ADDR


def run(testbench):
    dut = FastPath()
    sim = Simulator(dut)  # combinational: no clock

    async def bench(ctx):
        ctx.set(dut.node_id, NODE)
        ctx.set(dut.enable, 1)
        await testbench(ctx, dut)

    sim.add_testbench(bench)
    run_simulation(sim)


def instruction(ctx, dut):
    """(op name, operands) of the instruction the step loads, as the model decodes it."""
    op, operands = isa.decode(ctx.get(dut.instruction.as_value()))
    return op.name, operands


def step(ctx, dut, fast_step):
    ctx.set(dut.step, fast_step)
    assert not ctx.get(dut.fallback), fast_step
    return ctx.get(dut.next_step), ctx.get(dut.then)


def test_fast_requests_are_mread_mwrite_and_muread_at_their_home():
    async def testbench(ctx, dut):
        for cmd in Command:
            for home in (NODE, NODE + 1):
                ctx.set(dut.request.cmd, cmd)
                ctx.set(dut.request.addr, address(home))
                expected = cmd in (Command.MREAD, Command.MWRITE, Command.MUREAD) and home == NODE
                assert ctx.get(dut.request_fast) == expected, (cmd, home)
        ctx.set(dut.request.cmd, Command.MREAD)
        ctx.set(dut.request.addr, address(NODE))
        ctx.set(dut.enable, 0)  # RAC.CTRL.MICROCODE_ONLY
        assert not ctx.get(dut.request_fast)

    run(testbench)


@pytest.mark.parametrize(
    "output, kinds",
    [
        # Caching reads and writes; a flush is the microcode's.
        ("miss_fast", (LocalKind.READ, LocalKind.WRITE)),
        # A read the allocation filter does not cache has steps of its own.
        ("once_fast", (LocalKind.READ_ONCE,)),
    ],
)
def test_fast_misses_are_to_other_nodes_lines_outside_numa_mode(output, kinds):
    async def testbench(ctx, dut):
        fast = getattr(dut, output)
        for numa in (0, 1):
            for kind in LocalKind:
                for home in (NODE, NODE + 2):
                    ctx.set(dut.numa_mode, numa)
                    ctx.set(dut.miss.kind, kind)
                    ctx.set(dut.miss.addr, address(home))
                    expected = not numa and kind in kinds and home != NODE
                    assert ctx.get(fast) == expected, (numa, kind, home)
        ctx.set(dut.numa_mode, 0)
        ctx.set(dut.miss.kind, kinds[0])
        ctx.set(dut.enable, 0)  # RAC.CTRL.MICROCODE_ONLY
        assert not ctx.get(fast)

    run(testbench)


def test_a_read_miss_not_cached_sends_its_uncached_read_and_waits_at_the_resume_point():
    async def testbench(ctx, dut):
        ctx.set(dut.context.kind, LocalKind.READ_ONCE)
        ctx.set(dut.context.addr, address(3))
        assert step(ctx, dut, FastStep.ONCE_SEND) == (FastStep.ONCE_WAIT, FastThen.HEADER)
        assert not ctx.get(dut.load_tag_cmd)
        # As l_read_once: the uncached read, flag "I cache at the second miss" (the home shows the line).
        fields = {"dest": Dest.HOME, "ptr": Ptr.NONE, "flag": FlagSrc.ONE, "data": DataSrc.NONE, "cmd": Command.MUREAD}
        assert instruction(ctx, dut) == ("SEND", fields)
        assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(Resume.READ_ONCE_SEND)
        assert step(ctx, dut, FastStep.ONCE_WAIT) == (FastStep.NONE, FastThen.SUSPEND)
        assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(Resume.READ_ONCE_SENT)

    run(testbench)


def response_step(point, status, has_data, flags):
    """The fast step an answer resuming a context at ``point`` (with ``flags``) starts with: only
    a good answer (with the words for a read; without data for a purge); a fill whose host has its
    words (flag A), a purge answer owed the data (GONE) and the others are the microcode's."""
    if status != Status.OK:
        return FastStep.NONE
    if point == Resume.WRITE_SENT:
        return FastStep.WRITE_ANSWER
    if point == Resume.WRITE_PURGE_SENT:
        gone = flags >> isa.Flag.GONE & 1
        return FastStep.NONE if has_data or gone else FastStep.WRITE_PURGE_ANSWER
    if point == Resume.READ_SENT and flags >> isa.Flag.A & 1:
        return FastStep.NONE
    steps = {Resume.READ_ONCE_SENT: FastStep.ONCE_ANSWER, Resume.READ_SENT: FastStep.READ_ANSWER}
    return steps.get(point, FastStep.NONE) if has_data else FastStep.NONE


def test_a_good_answer_with_words_to_a_read_gives_the_host_its_words_on_the_fast_path():
    """A read not cached (READ_ONCE_SENT) ends there; a caching read (READ_SENT) hands the rest
    to the microcode; a refusal, an answer without data (a GONE line attaches) and every resume
    point but a write's are the microcode's."""

    async def testbench(ctx, dut):
        sent = isa.resume_vector(Resume.READ_SENT)
        flag_sets = (0, 1 << isa.Flag.A, 1 << isa.Flag.GONE)
        for point, status, has_data, flags in itertools.product(Resume, Status, (0, 1), flag_sets):
            ctx.set(dut.resumed_pc, isa.resume_vector(point))
            ctx.set(dut.resumed_flags, flags)
            ctx.set(dut.message.status, status)
            ctx.set(dut.message.has_data, has_data)
            expected = response_step(point, status, has_data, flags)
            assert ctx.get(dut.response_step) == expected, (point, status, has_data, flags)
        ctx.set(dut.resumed_flags, 0)
        # An answer's first step reads none of the context's registers (the sequencer runs it
        # as the context is read back): the same with any flags there.
        ctx.set(dut.context.flags, 1 << isa.Flag.A)
        assert step(ctx, dut, FastStep.ONCE_ANSWER) == (FastStep.END, FastThen.COMPLETE)
        assert instruction(ctx, dut) == ("COMPLETE", {"src": isa.LineSrc.MSG, "status": Status.OK})
        assert step(ctx, dut, FastStep.READ_ANSWER) == (FastStep.NONE, FastThen.COMPLETE)
        assert instruction(ctx, dut) == ("COMPLETE", {"src": isa.LineSrc.MSG, "status": Status.OK})
        assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(Resume.READ_ANSWERED)
        ctx.set(dut.resumed_pc, sent)
        ctx.set(dut.message.status, Status.OK)
        ctx.set(dut.message.has_data, 1)
        assert ctx.get(dut.response_step) == FastStep.READ_ANSWER
        ctx.set(dut.enable, 0)  # RAC.CTRL.MICROCODE_ONLY
        assert ctx.get(dut.response_step) == FastStep.NONE

    run(testbench)


def test_a_miss_with_a_free_way_goes_pending_sends_and_waits_at_the_resume_point():
    async def testbench(ctx, dut):
        for kind, cmd, send_point, sent_point in (
            (LocalKind.READ, Command.MREAD, Resume.READ_SEND, Resume.READ_SENT),
            (LocalKind.WRITE, Command.MWRITE, Resume.WRITE_SEND, Resume.WRITE_SENT),
        ):
            ctx.set(dut.context.kind, kind)
            ctx.set(dut.context.addr, address(3))
            assert step(ctx, dut, FastStep.MISS_ALLOC) == (FastStep.MISS_ATTACH, FastThen.TAG)
            assert ctx.get(dut.load_tag_cmd) and ctx.get(dut.load_instruction) and not ctx.get(dut.load_pc)
            assert ctx.get(dut.tag_cmd.op) == TagOp.ALLOC and ctx.get(dut.tag_cmd.addr) == address(3)
            assert instruction(ctx, dut) == ("C_ALLOC", {})

            ctx.set(dut.context.way, 2)
            ctx.set(dut.context.fwd.id, 5)
            ctx.set(dut.context.bwd.id, 6)
            assert step(ctx, dut, FastStep.MISS_ATTACH) == (FastStep.MISS_SEND, FastThen.TAG)
            assert ctx.get(dut.load_tag_cmd) and not ctx.get(dut.load_instruction)
            tag = dut.tag_cmd
            assert ctx.get(tag.op) == TagOp.WRITE_TAG and ctx.get(tag.state) == CacheState.PENDING
            assert (ctx.get(tag.way), ctx.get(tag.fwd), ctx.get(tag.bwd)) == (2, 5, 6)

            assert step(ctx, dut, FastStep.MISS_SEND) == (FastStep.MISS_WAIT, FastThen.HEADER)
            assert not ctx.get(dut.load_tag_cmd)
            assert instruction(ctx, dut) == (
                "SEND",
                {
                    "dest": Dest.HOME,
                    "ptr": Ptr.NONE,
                    # A read asks the home to cache only an unwritten line (SHOWN), as read_send does.
                    "flag": FlagSrc.SECOND_MISS if cmd == Command.MREAD else FlagSrc.ZERO,
                    "data": DataSrc.NONE,
                    "cmd": cmd,
                },
            )
            assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(send_point)

            assert step(ctx, dut, FastStep.MISS_WAIT) == (FastStep.NONE, FastThen.SUSPEND)
            assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(sent_point)

    run(testbench)


def test_a_miss_the_fast_path_does_not_know_goes_to_the_microcode():
    async def testbench(ctx, dut):
        ctx.set(dut.step, FastStep.MISS_ATTACH)
        for case in ("hit", "no_way", "victim"):
            ctx.set(getattr(dut.context, case), 1)
            assert ctx.get(dut.fallback), case
            ctx.set(getattr(dut.context, case), 0)
        assert not ctx.get(dut.fallback)
        ctx.set(dut.step, FastStep.NONE)
        assert ctx.get(dut.fallback)

    run(testbench)


def test_a_home_request_reads_the_directory_answers_and_makes_the_requester_head():
    requester = 6

    async def testbench(ctx, dut):
        commands = (Command.MREAD, Command.MWRITE, Command.MUREAD)
        for cmd, mstate, flag in itertools.product(commands, MemoryState, (0, 1)):
            if cmd == Command.MUREAD and mstate == MemoryState.GONE and not flag:
                continue  # the microcode's (below)
            second_miss = flag
            ctx.set(dut.message.source, requester)
            ctx.set(dut.message.cmd, cmd)
            ctx.set(dut.message.source, requester)
            ctx.set(dut.message.flag, flag)
            ctx.set(dut.context.addr, address(NODE))
            ctx.set(dut.context.mstate, mstate)
            ctx.set(dut.context.head.id, 3)
            # A second miss of a line written since it was shown: answered uncached (flag). A
            # caching node's first miss (MUREAD, flag) shows a HOME line; other uncached reads
            # leave the directory alone.
            rewritten = cmd == Command.MREAD and second_miss and mstate == MemoryState.HOME
            shows = cmd == Command.MUREAD and flag and mstate == MemoryState.HOME
            ctx.set(dut.message.addr, address(NODE) + 64)  # the directory read takes the request's line
            assert step(ctx, dut, FastStep.HOME_DIR) == (FastStep.HOME_REPLY, FastThen.TAG)
            assert ctx.get(dut.tag_cmd.op) == TagOp.LOOKUP and instruction(ctx, dut) == ("DIR_RD", {})
            assert ctx.get(dut.tag_cmd.addr) == address(NODE) + 64

            next_step = FastStep.END if cmd == Command.MUREAD and not shows else FastStep.HOME_DIR_WRITE
            assert step(ctx, dut, FastStep.HOME_REPLY) == (next_step, FastThen.HEADER), (cmd, mstate, flag)
            fresh_read = cmd == Command.MUREAD or (cmd == Command.MREAD and mstate in HOME_OWNED)
            assert instruction(ctx, dut) == (
                "REPLY",
                {
                    "ptr": Ptr.NONE if fresh_read else Ptr.HEAD,  # the old head, if any
                    "flag": FlagSrc.ONE if rewritten else FlagSrc.ZERO,
                    "data": DataSrc.NONE if mstate == MemoryState.GONE else DataSrc.HOME,
                    "status": Status.OK,
                },
            ), (cmd, mstate)

            if next_step == FastStep.HOME_DIR_WRITE:
                assert step(ctx, dut, FastStep.HOME_DIR_WRITE) == (FastStep.END, FastThen.TAG)
                tag = dut.tag_cmd
                if cmd == Command.MWRITE:
                    new_state = MemoryState.GONE
                elif rewritten or shows:
                    new_state = MemoryState.SHOWN
                else:
                    new_state = MemoryState.FRESH if mstate in HOME_OWNED else mstate
                assert ctx.get(tag.op) == TagOp.WRITE_DIR and ctx.get(tag.mstate) == new_state, (cmd, mstate)
                assert ctx.get(tag.head) == (3 if rewritten or shows else requester) and ctx.get(tag.lock) == 0

            assert step(ctx, dut, FastStep.END) == (FastStep.NONE, FastThen.END)
            assert not (ctx.get(dut.load_tag_cmd) or ctx.get(dut.load_instruction) or ctx.get(dut.load_pc))

    run(testbench)


def test_a_locked_line_or_numa_mode_s_read_of_a_gone_line_goes_to_the_microcode():
    async def testbench(ctx, dut):
        ctx.set(dut.step, FastStep.HOME_REPLY)
        for cmd, mstate, flag in itertools.product((Command.MREAD, Command.MUREAD), MemoryState, (0, 1)):
            ctx.set(dut.message.cmd, cmd)
            ctx.set(dut.context.mstate, mstate)
            ctx.set(dut.message.flag, flag)
            ctx.set(dut.context.locked, 1)
            assert ctx.get(dut.fallback)  # the microcode NACKs it
            ctx.set(dut.context.locked, 0)
            # Only the list has a GONE line's data: muread_gone refuses NUMA mode's read (no flag).
            assert ctx.get(dut.fallback) == (cmd == Command.MUREAD and mstate == MemoryState.GONE and not flag)

    run(testbench)


def test_a_purge_of_a_copy_in_a_list_is_answered_on_the_fast_path():
    """A CPURGE without the data flag (the old head of a GONE line sends its data: microcode):
    the lookup, then, for a copy in a list or leaving it, the answer naming its successor and the
    microcode's invalidation from its resume point; no copy, or one attaching or writing (NACK),
    is the microcode's."""

    async def testbench(ctx, dut):
        for cmd, flag, home in itertools.product(Command, (0, 1), (NODE, NODE + 1)):
            ctx.set(dut.request.cmd, cmd)
            ctx.set(dut.request.flag, flag)
            ctx.set(dut.request.addr, address(home))
            assert ctx.get(dut.purge_fast) == (cmd == Command.CPURGE and not flag), (cmd, flag, home)
        # The request's line, while the context still holds the run before's (the sequencer runs
        # this step as the handler's context is set up).
        ctx.set(dut.message.addr, address(NODE + 1))
        ctx.set(dut.context.addr, address(NODE + 2))
        assert step(ctx, dut, FastStep.PURGE_LOOKUP) == (FastStep.PURGE_REPLY, FastThen.TAG)
        assert instruction(ctx, dut)[0] == "C_LOOKUP"
        assert ctx.get(dut.load_tag_cmd) and ctx.get(dut.tag_cmd.op) == TagOp.LOOKUP
        assert ctx.get(dut.tag_cmd.addr) == address(NODE + 1)
        for state in range(16):
            ctx.set(dut.context.state, state)
            ctx.set(dut.step, FastStep.PURGE_REPLY)
            refused = state in (CacheState.INVALID, CacheState.PENDING, CacheState.WRITING) or state > max(CacheState)
            assert ctx.get(dut.fallback) == refused, state
            if not refused:
                assert (ctx.get(dut.next_step), ctx.get(dut.then)) == (FastStep.NONE, FastThen.HEADER)
                assert instruction(ctx, dut) == (
                    "REPLY",
                    {"ptr": Ptr.FWD, "flag": FlagSrc.ZERO, "data": DataSrc.NONE, "status": Status.OK},
                )
                assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(Resume.PURGE_ANSWERED)
        ctx.set(dut.enable, 0)  # RAC.CTRL.MICROCODE_ONLY
        ctx.set(dut.request.cmd, Command.CPURGE)
        ctx.set(dut.request.flag, 0)
        assert not ctx.get(dut.purge_fast)

    run(testbench)


def test_a_write_miss_s_answer_and_purges_run_on_the_fast_path():
    """The answer to a write miss: with nobody to purge (HOME, SHOWN) the host's write done and
    the microcode's merge; with clean copies (FRESH) the first CPURGE to the old head, then the
    microcode keeps the line; a GONE list (its data comes with the purge answer) is the
    microcode's. A purge's answer: the next CPURGE and a wait at the resume point, or after the
    last the host's write done; one owed the data (GONE) is the microcode's. None of these steps
    reads the context's registers (the sequencer runs them as the context is read back)."""

    purge = {"dest": Dest.PTR, "ptr": Ptr.NONE, "flag": FlagSrc.F_GONE, "data": DataSrc.NONE, "cmd": Command.CPURGE}
    done = ("COMPLETE", {"src": isa.LineSrc.BUF, "status": Status.OK})

    async def testbench(ctx, dut):
        ctx.set(dut.message.status, Status.OK)
        ctx.set(dut.message.ptr, 2)
        ctx.set(dut.message.ptr_valid, 1)
        for mstate in MemoryState:
            ctx.set(dut.message.mstate, mstate)
            ctx.set(dut.step, FastStep.WRITE_ANSWER)
            assert ctx.get(dut.fallback) == (mstate == MemoryState.GONE), mstate
            if mstate == MemoryState.GONE:
                continue
            if mstate == MemoryState.FRESH:
                assert step(ctx, dut, FastStep.WRITE_ANSWER) == (FastStep.WRITE_KEEP, FastThen.HEADER)
                assert instruction(ctx, dut) == ("SEND", purge) and ctx.get(dut.load_ptr)
                assert ctx.get(dut.pc) == isa.resume_vector(Resume.WRITE_FIRST_PURGE_SEND)
                assert step(ctx, dut, FastStep.WRITE_KEEP) == (FastStep.NONE, FastThen.MICROCODE)
                assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(Resume.WRITE_FIRST_PURGED)
            else:
                assert step(ctx, dut, FastStep.WRITE_ANSWER) == (FastStep.NONE, FastThen.COMPLETE)
                assert instruction(ctx, dut) == done and not ctx.get(dut.load_ptr)
                assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(Resume.WRITE_ALONE)

        # A purge's answer naming the next copy, then the last one's.
        assert step(ctx, dut, FastStep.WRITE_PURGE_ANSWER) == (FastStep.WRITE_PURGE_WAIT, FastThen.HEADER)
        assert instruction(ctx, dut) == ("SEND", purge) and ctx.get(dut.load_ptr)
        assert ctx.get(dut.pc) == isa.resume_vector(Resume.WRITE_PURGE_SEND)
        assert step(ctx, dut, FastStep.WRITE_PURGE_WAIT) == (FastStep.NONE, FastThen.SUSPEND)
        assert ctx.get(dut.load_pc) and ctx.get(dut.pc) == isa.resume_vector(Resume.WRITE_PURGE_SENT)
        ctx.set(dut.message.ptr_valid, 0)
        assert step(ctx, dut, FastStep.WRITE_PURGE_ANSWER) == (FastStep.NONE, FastThen.COMPLETE)
        assert instruction(ctx, dut) == done and ctx.get(dut.load_ptr)  # PTR := none, as MOVP does
        assert ctx.get(dut.pc) == isa.resume_vector(Resume.WRITE_PURGED)
        ctx.set(dut.resumed_pc, isa.resume_vector(Resume.WRITE_PURGE_SENT))
        ctx.set(dut.resumed_flags, 1 << isa.Flag.GONE)  # the data was to come with this answer
        assert ctx.get(dut.response_step) == FastStep.NONE

        ctx.set(dut.enable, 0)  # RAC.CTRL.MICROCODE_ONLY
        for point in (Resume.WRITE_SENT, Resume.WRITE_PURGE_SENT):
            ctx.set(dut.resumed_pc, isa.resume_vector(point))
            assert ctx.get(dut.response_step) == FastStep.NONE

    run(testbench)
