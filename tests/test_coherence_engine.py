"""The card's coherence engine (local side + remote access controller) in Amaranth's simulator:
a plain miss hands the local access controller's tag lookup to the sequencer, which sends its
request without looking the set up again, unless a tag was written since that lookup; a read miss
the allocation filter does not cache runs its uncached read and its answer without microcode; a
write miss's answer acknowledges the host's write, or sends the first purge, before the line is
kept; the home answers an uncached read with the words asked for."""

import pytest
from amaranth.sim import Simulator

from numavia.base import regmap
from numavia.base.coherence import CacheState, MemoryState
from numavia.base.microcode.assembler import assemble
from numavia.base.paths import microcode_source
from numavia.base.sci_packet import (
    DATA_WORDS,
    Command,
    Packet,
    PacketType,
    Status,
    carries_words_asked,
    handover_order,
)
from numavia.gateware.bfm import recv, send, wishbone_read, wishbone_write
from numavia.gateware.card import CardConfig
from numavia.gateware.coherence_engine import CoherenceEngine
from numavia.gateware.remote_access_controller import live_ctrl
from numavia.gateware.tag_store import TagOp

PROGRAM = assemble(microcode_source().read_text(), microcode_source().name).words
CONFIG = CardConfig()
AMAP, GEOMETRY = CONFIG.address_map(), CONFIG.geometry()
REQUESTER, HOME, WRITER = 0, 1, 2
LINE_C = 3 * GEOMETRY.line_bytes  # two lines of HOME in the same set of the network cache
LINE_A = LINE_C + GEOMETRY.sets * GEOMETRY.line_bytes
LOOKUPS_TAKEN = regmap.RAC.register("LOOKUPS_TAKEN").offset
INSTRUCTIONS = regmap.RAC.register("INSTRUCTIONS").offset


class Watch:
    """What the sequencer did on the tag port, cycle by cycle: (cycle, op, way, state, miss
    waiting); and the cycles the miss was taken."""

    def __init__(self):
        self.tags, self.takes, self.cycle = [], [], 0

    def since(self, cycle):
        return [(op, way, state) for c, op, way, state, _ in self.tags if c >= cycle]


def simulate(testbench, *, cache_first_miss=True, node=REQUESTER, microcode_only=False):
    dut = CoherenceEngine(AMAP, GEOMETRY, PROGRAM)
    sim = Simulator(dut)
    sim.add_clock(1 / CONFIG.clk_freq_hz)
    watch = Watch()

    async def watcher(ctx):
        port, miss = dut.rac.local, dut.local.miss.miss
        async for _, _, valid, ready, cmd, miss_valid, miss_ready in ctx.tick().sample(
            port.tag_cmd_valid, port.tag_cmd_ready, port.tag_cmd, miss.valid, miss.ready
        ):
            if valid and ready:
                watch.tags.append((watch.cycle, TagOp(cmd.op), cmd.way, CacheState(cmd.state), bool(miss_valid)))
            if miss_valid and miss_ready:
                watch.takes.append(watch.cycle)
            watch.cycle += 1

    async def bench(ctx):
        ctx.set(dut.node_id, node)
        ctx.set(dut.cache_first_miss, cache_first_miss)  # (else the allocation filter decides)
        await wishbone_write(ctx, dut.rac_bus, regmap.RAC.register("CTRL").offset, live_ctrl(microcode_only))
        await testbench(ctx, dut, watch)

    sim.add_testbench(watcher, background=True)
    sim.add_testbench(bench)
    sim.run()


def host_read(offset):
    return {"addr": HOME * AMAP.slice_bytes + offset, "write": 0, "count": 1}


def host_write(offset, count=1):
    return {"addr": HOME * AMAP.slice_bytes + offset, "write": 1, "count": count}


def global_line(offset):
    return (HOME << 26) | offset


async def request_out(ctx, dut):
    """The next packet the engine sends (its header; its data block, if any, is taken too)."""
    header = await recv(ctx, dut.send_header, timeout=500)
    if header.has_data:
        for _ in range(GEOMETRY.line_words):
            await recv(ctx, dut.send_data, timeout=100)
    return header


async def answer_with_line(ctx, dut, request, words, *, mstate=MemoryState.HOME, flag=False, extra=None):
    """The response to `request`: the line (`words`, none: no data), the home's memory state and
    any `extra` header fields, handed over as the ring link does (an uncached read's answer from
    the word asked for)."""
    reply = {
        "ptype": PacketType.RESPONSE,
        "cmd": request.cmd,
        "tid": request.tid,
        "status": Status.OK,
        "source": HOME,
        "target": REQUESTER,
        "addr": request.addr,
        "mstate": mstate,
        "has_data": bool(words),
        "flag": flag,
        **(extra or {}),
    }
    if carries_words_asked(True, request.cmd):
        reply.update(word=request.word, count=request.count)
    await send(ctx, dut.recv_header, reply, timeout=100)
    for word in handover_order(Packet(**reply, data=list(words))) if words else []:
        await send(ctx, dut.recv_data, word, timeout=100)


async def cache_here(ctx, dut, offset):
    """The host reads HOME's line at `offset`: a caching miss, answered, the line filled."""
    await send(ctx, dut.host.req, host_read(offset))
    request = await request_out(ctx, dut)
    await answer_with_line(ctx, dut, request, range(GEOMETRY.line_words))
    await host_word(ctx, dut)
    await ctx.tick().repeat(100)  # the fill after the host's word


def purge_of(offset, flag=0):
    """WRITER's CPURGE of the copy here of HOME's line at `offset` (flag: send the data too)."""
    return {
        "ptype": PacketType.REQUEST,
        "cmd": Command.CPURGE,
        "tid": 3,
        "flag": flag,
        "source": WRITER,
        "target": REQUESTER,
        "addr": global_line(offset),
    }


async def host_word(ctx, dut):
    response = await recv(ctx, dut.host.resp, timeout=500)
    assert not response.error
    return response.data


def test_a_miss_takes_the_local_lookup_and_sends_its_request_without_a_second():
    async def bench(ctx, dut, watch):
        await send(ctx, dut.host.req, host_read(LINE_A))
        request = await request_out(ctx, dut)
        assert (request.cmd, request.addr, request.target) == (Command.MREAD, global_line(LINE_A), HOME)
        (take,) = watch.takes
        # From the take to the request: the entry made PENDING in the free way, nothing looked up.
        assert watch.since(take) == [(TagOp.WRITE_TAG, 0, CacheState.PENDING)]
        assert await wishbone_read(ctx, dut.rac_bus, LOOKUPS_TAKEN) == 1
        await answer_with_line(ctx, dut, request, range(100, 100 + GEOMETRY.line_words))
        assert await host_word(ctx, dut) == 100

    simulate(bench)


def test_a_tag_written_after_the_local_lookup_makes_the_miss_look_again():
    async def bench(ctx, dut, watch):
        await cache_here(ctx, dut, LINE_C)  # in way 0 of the set
        assert await wishbone_read(ctx, dut.rac_bus, LOOKUPS_TAKEN) == 1

        # The host misses on line A of the same set: the local lookup finds way 1 free. A writer's
        # purge of C arrives meanwhile and runs before the miss is taken (messages first): it
        # writes C's tag INVALID, so the lookup that offered way 1 is stale.
        start = watch.cycle
        purge = purge_of(LINE_C)
        ctx.set(dut.host.req.payload, host_read(LINE_A))
        ctx.set(dut.host.req.valid, 1)
        await ctx.tick()
        ctx.set(dut.host.req.valid, 0)
        await ctx.tick().repeat(3)  # the local access controller owns the tags and looks A up
        await send(ctx, dut.recv_header, purge, timeout=100)
        packets = [await request_out(ctx, dut), await request_out(ctx, dut)]
        reply, request = sorted(packets, key=lambda p: p.ptype != PacketType.RESPONSE)
        assert (reply.cmd, reply.target) == (Command.CPURGE, WRITER)
        assert (request.cmd, request.addr) == (Command.MREAD, global_line(LINE_A))

        purged = [
            c
            for c, op, _, state, miss_waiting in watch.tags
            if c >= start and op == TagOp.WRITE_TAG and state == CacheState.INVALID and miss_waiting
        ]
        assert purged, "the purge did not run between the lookup and the take"
        take = watch.takes[-1]
        assert take > purged[0]
        # The miss looked its set up again and took the way the purge freed, the lowest invalid.
        ops = watch.since(take)
        assert ops[0][0] == TagOp.ALLOC and ops[-1] == (TagOp.WRITE_TAG, 0, CacheState.PENDING)
        assert await wishbone_read(ctx, dut.rac_bus, LOOKUPS_TAKEN) == 1

    simulate(bench)


def test_a_read_miss_not_cached_reads_uncached_and_completes_without_microcode():
    async def bench(ctx, dut, watch):
        await send(ctx, dut.host.req, host_read(LINE_A + 4 * 2))  # the line's first miss: read once
        request = await request_out(ctx, dut)
        assert (request.cmd, request.flag, request.addr) == (Command.MUREAD, 1, global_line(LINE_A))
        await answer_with_line(ctx, dut, request, range(200, 200 + GEOMETRY.line_words))
        assert await host_word(ctx, dut) == 202
        await ctx.tick().repeat(20)
        assert watch.since(0) == []  # nothing cached, no tag touched
        assert await wishbone_read(ctx, dut.rac_bus, INSTRUCTIONS) == 0

    simulate(bench, cache_first_miss=False)


@pytest.mark.parametrize("rewritten", [False, True])
def test_a_caching_miss_answered_with_the_line_gives_the_host_its_word_before_any_microcode(rewritten):
    """The answer's COMPLETE is the fast path's: the microcode runs from the bookkeeping on, 4
    instructions fewer than with the microcode alone (BRF M_OK, BRF M_HAS_DATA, BRT F_A,
    COMPLETE), and ends the same way: the line cached, or (the home wrote it since the first
    miss: the answer's flag) not cached."""
    runs = {}

    def bench_for(microcode_only):
        async def bench(ctx, dut, watch):
            await send(ctx, dut.host.req, host_read(LINE_A + 4 * 3))
            request = await request_out(ctx, dut)
            assert request.cmd == Command.MREAD
            before = await wishbone_read(ctx, dut.rac_bus, INSTRUCTIONS)
            start = watch.cycle
            await answer_with_line(ctx, dut, request, range(300, 300 + GEOMETRY.line_words), flag=rewritten)
            assert await host_word(ctx, dut) == 303
            await ctx.tick().repeat(100)
            executed = await wishbone_read(ctx, dut.rac_bus, INSTRUCTIONS) - before
            written = [state for op, _, state in watch.since(start) if op == TagOp.WRITE_TAG]
            runs[microcode_only] = (executed, written)

        return bench

    simulate(bench_for(False), microcode_only=False)
    simulate(bench_for(True), microcode_only=True)
    (fast, fast_tags), (micro, micro_tags) = runs[False], runs[True]
    assert fast == micro - 4
    assert fast_tags == micro_tags
    assert fast_tags[-1] == (CacheState.INVALID if rewritten else CacheState.ONLY_FRESH)


async def write_miss(ctx, dut, watch, sharers):
    """A write of words 13-14 of the home's line (the second one's upper half only), answered with
    `sharers` clean copies to purge, one after another. Returns the cycles from each answer in to
    what it lets out: the next CPURGE, and after the last the host's write done."""
    line = range(500, 500 + GEOMETRY.line_words)
    await send(ctx, dut.host.req, host_write(LINE_A + 4 * 13, 2))
    await send(ctx, dut.host.wdata, {"data": 0xC0FFEE, "be": 0xF})
    await send(ctx, dut.host.wdata, {"data": 0xBEEF0000, "be": 0xC})
    request = await request_out(ctx, dut)
    assert request.cmd == Command.MWRITE
    start = watch.cycle
    if sharers:
        mstate, ptr = MemoryState.FRESH, {"ptr": WRITER, "ptr_valid": 1}
    else:
        mstate, ptr = MemoryState.HOME, {}
    await answer_with_line(ctx, dut, request, line, mstate=mstate, extra=ptr)
    answered, gaps = watch.cycle, []
    sharer = WRITER
    for n in range(sharers):
        purge = await request_out(ctx, dut)
        gaps.append(watch.cycle - answered)
        assert (purge.cmd, purge.target) == (Command.CPURGE, sharer)
        if n == 0:  # nothing kept or marked before it left
            assert watch.since(start) == []
        sharer = sharer + 1 if n + 1 < sharers else None
        forward = {"ptr": sharer, "ptr_valid": 1} if sharer is not None else {}
        await answer_with_line(ctx, dut, purge, [], extra={"source": purge.target, **forward})
        answered = watch.cycle
    response = await recv(ctx, dut.host.resp, timeout=500)
    done = watch.cycle
    gaps.append(done - answered)
    assert not response.error
    await ctx.tick().repeat(60)  # the line kept after the host's write
    written = [(c, state) for c, op, _, state, _ in watch.tags if c >= start and op == TagOp.WRITE_TAG]
    if sharers:
        assert [state for _, state in written] == [CacheState.WRITING, CacheState.ONLY_DIRTY]
    else:  # the host's write done before the entry is written at all
        assert [state for _, state in written] == [CacheState.ONLY_DIRTY]
        assert done <= written[0][0]
    # A hit on the home's line with the host's bytes merged, nothing else changed.
    await send(ctx, dut.host.req, {**host_read(LINE_A), "count": GEOMETRY.line_words})
    words = [await host_word(ctx, dut) for _ in line]
    assert words == [*line[:13], 0xC0FFEE, 0xBEEF0000 | (line[14] & 0xFFFF), line[15]]
    return gaps


@pytest.mark.parametrize("microcode_only", [False, True])
@pytest.mark.parametrize("sharers", [0, 2])
def test_a_write_miss_acknowledges_the_host_or_sends_its_first_purge_before_keeping_the_line(microcode_only, sharers):
    """The write's answer: with nobody to purge the host's write is done before the line is kept;
    with sharers the first purge leaves before the line is kept and the entry marked WRITING.
    Either way the line ends ONLY_DIRTY with the host's bytes (only its beats reach the sequencer,
    each put at its word) merged into the home's line."""

    async def bench(ctx, dut, watch):
        await write_miss(ctx, dut, watch, sharers)

    simulate(bench, microcode_only=microcode_only)


def test_a_write_miss_s_answers_and_purges_are_taken_on_the_fast_path():
    """The fast path takes the write's answer and each purge's answer: each lets out the next
    CPURGE, or the host's write done, sooner than the microcode alone (which dispatches on the
    memory state, moves the pointer and branches first), with the same packets and line."""
    gaps = {}
    for microcode_only in (False, True):

        async def bench(ctx, dut, watch, microcode_only=microcode_only):
            gaps[microcode_only] = await write_miss(ctx, dut, watch, 2)

        simulate(bench, microcode_only=microcode_only)
    fast, microcode = gaps[False], gaps[True]
    assert len(fast) == len(microcode) == 3
    assert all(f < m for f, m in zip(fast, microcode)), (fast, microcode)


@pytest.mark.parametrize("flag", [0, 1])
def test_a_purged_copy_answers_before_any_microcode(flag):
    """A writer's CPURGE of the copy here: the fast path looks the copy up and answers; the
    microcode only invalidates and counts it (fewer instructions executed than the microcode
    alone, which also looks up, dispatches on the state and answers). With the data flag (the old
    head of a GONE line sends its line) the microcode answers, the same with the fast path on or
    off. Either way the same answer, the same tag writes, and the copy is gone."""
    runs = {}

    def bench_for(microcode_only):
        async def bench(ctx, dut, watch):
            await cache_here(ctx, dut, LINE_A)
            before = await wishbone_read(ctx, dut.rac_bus, INSTRUCTIONS)
            start = watch.cycle
            await send(ctx, dut.recv_header, purge_of(LINE_A, flag), timeout=100)
            reply = await request_out(ctx, dut)
            await ctx.tick().repeat(50)
            executed = await wishbone_read(ctx, dut.rac_bus, INSTRUCTIONS) - before
            fields = ("ptype", "cmd", "tid", "status", "target", "ptr_valid", "has_data")
            runs[microcode_only] = (
                executed,
                [(op, way, state if op == TagOp.WRITE_TAG else None) for op, way, state in watch.since(start)],
                {name: int(getattr(reply, name)) for name in fields},
            )
            await send(ctx, dut.host.req, host_read(LINE_A))  # the copy is gone: a miss again
            assert (await request_out(ctx, dut)).cmd == Command.MREAD

        return bench

    simulate(bench_for(False), microcode_only=False)
    simulate(bench_for(True), microcode_only=True)
    (fast, fast_tags, fast_reply), (micro, micro_tags, micro_reply) = runs[False], runs[True]
    assert (fast == micro) if flag else (fast < micro)
    assert fast_tags == micro_tags and fast_tags[-1] == (TagOp.WRITE_TAG, 0, CacheState.INVALID)
    assert fast_reply == micro_reply
    assert fast_reply == {
        "ptype": PacketType.RESPONSE,
        "cmd": Command.CPURGE,
        "tid": 3,
        "status": Status.OK,
        "target": WRITER,
        "ptr_valid": 0,  # the only copy: no successor
        "has_data": flag,
    }


def test_a_message_s_fast_run_starts_as_soon_as_the_message_is_taken():
    """The sequencer asks for the tags as it takes a message, so with nobody else holding them a
    request's fast run starts in the next cycle with its first step, without a cycle in OWN: a
    purge's answer leaves 7 cycles after its header is taken (the run's start with the lookup's
    step, the tag command and its answer, the reply's step, the header); 8 with the lookup's step
    a cycle of its own, 9 when the tags were asked for only after the take."""

    async def bench(ctx, dut, watch):
        await cache_here(ctx, dut, LINE_A)
        await send(ctx, dut.recv_header, purge_of(LINE_A, 0), timeout=100)
        taken = watch.cycle
        reply = await request_out(ctx, dut)
        assert (reply.cmd, reply.status) == (Command.CPURGE, Status.OK)
        assert watch.cycle - taken <= 7

    simulate(bench)


def test_a_read_miss_not_cached_answered_without_words_attaches_in_microcode():
    async def bench(ctx, dut, watch):
        await send(ctx, dut.host.req, host_read(LINE_A))
        request = await request_out(ctx, dut)
        assert request.cmd == Command.MUREAD
        # A GONE line: only its list has the data, so the miss attaches (read_retry), microcode.
        await answer_with_line(ctx, dut, request, [], mstate=MemoryState.GONE)
        attach = await request_out(ctx, dut)
        assert (attach.cmd, attach.addr) == (Command.MREAD, global_line(LINE_A))
        assert await wishbone_read(ctx, dut.rac_bus, INSTRUCTIONS) > 0

    simulate(bench, cache_first_miss=False)


@pytest.mark.parametrize("microcode_only", [False, True])
@pytest.mark.parametrize("word, count, answered", [(5, 2, (5, 2)), (15, 2, (0, DATA_WORDS)), (3, 0, (0, DATA_WORDS))])
def test_the_home_answers_an_uncached_read_with_the_words_asked_for(microcode_only, word, count, answered):
    """Words the request names inside the line, or (a malformed range) the whole line: the answer
    header says which, and exactly those words follow it, from the home's memory."""
    line = [0x5000 + w for w in range(GEOMETRY.line_words)]

    async def bench(ctx, dut, watch):
        for w, value in enumerate(line):  # the host writes its own line
            await send(ctx, dut.host.req, host_write(LINE_C + 4 * w))
            await send(ctx, dut.host.wdata, {"data": value, "be": 0xF})
            assert not (await recv(ctx, dut.host.resp)).error
        request = {
            "ptype": PacketType.REQUEST,
            "cmd": Command.MUREAD,
            "source": REQUESTER,
            "target": HOME,
            "tid": 7,
            "addr": global_line(LINE_C),
            "word": word,
            "count": count,
        }
        await send(ctx, dut.recv_header, request, timeout=100)
        answer = await recv(ctx, dut.send_header, timeout=200)
        assert (answer.ptype, answer.status, answer.tid, answer.has_data) == (PacketType.RESPONSE, Status.OK, 7, 1)
        assert (answer.word, answer.count) == answered
        first, number = answered
        assert [await recv(ctx, dut.send_data, timeout=100) for _ in range(number)] == line[first : first + number]
        for _ in range(20):  # and nothing more
            assert not ctx.get(dut.send_data.valid)
            await ctx.tick()

    simulate(bench, node=HOME, microcode_only=microcode_only)


def test_a_write_miss_s_request_leaves_three_cycles_after_its_last_beat():
    """A write miss's fast run takes the local side's lookup, writes its entry PENDING and sends its
    request: the MWRITE leaves 3 cycles after the host's last data beat (the fast run's first step
    with the byte enables saved, the tag write with the send's step in its last cycle, the
    header; 4 while the step after a tag write waited a cycle)."""

    async def bench(ctx, dut, watch):
        await send(ctx, dut.host.req, host_write(LINE_A))
        await send(ctx, dut.host.wdata, {"data": 0xC0FFEE, "be": 0xF})
        beat = watch.cycle
        request = await request_out(ctx, dut)
        assert request.cmd == Command.MWRITE
        assert watch.cycle - beat <= 3

    simulate(bench)
