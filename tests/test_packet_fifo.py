"""Packet FIFO: whole frames only, FCS-error frames discarded, overflow drops whole frames, skip."""

import random

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.gateware.packet_fifo import PacketFifo


def frame_words(data):
    return [data[i : i + 4] for i in range(0, len(data), 4)]


def word_writes(frames):
    """The write side's words of ``frames`` [(bytes, error)]: (frame index, its FifoWord fields)
    each, ``error`` on the last word of a frame flagged so."""
    writes = []
    for index, (data, error) in enumerate(frames):
        words = frame_words(data)
        for i, w in enumerate(words):
            last = i == len(words) - 1
            fields = {"data": int.from_bytes(w.ljust(4, b"\0"), "little"), "nbytes": len(w)}
            writes.append((index, {**fields, "last": last, "error": error and last}))
    return writes


class Frames:
    """The read side: words gathered into frames. ``take`` returns a frame's bytes with its last
    word (None before); ``current`` holds the bytes of the frame under way."""

    def __init__(self):
        self.current = bytearray()

    def take(self, word):
        self.current += word.data.to_bytes(4, "little")[: word.nbytes]
        if not word.last:
            return None
        frame, self.current = bytes(self.current), bytearray()
        return frame


def run(frames, *, drop_when_full, depth=64, read_after=0, ready_pattern=None, skip_frames=(), seed=7):
    """Write ``frames`` [(bytes, error)] then read frames; returns (frames read, counters)."""
    dut = PacketFifo(depth_words=depth, max_frames=8, drop_when_full=drop_when_full)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got, counters = [], {"full": 0, "error": 0, "committed": 0}

    async def bench(ctx):
        rng = random.Random(seed)
        writes = [fields for _, fields in word_writes(frames)]
        reader, index, cycle, idle = Frames(), 0, 0, 0
        while idle < 200:
            cycle += 1
            reading = cycle > read_after
            ready = reading and (ready_pattern is None or rng.random() < ready_pattern)
            skip = reading and ctx.get(dut.head_valid) and not reader.current and index in skip_frames
            ctx.set(dut.skip, skip)
            ctx.set(dut.r.ready, ready)
            word = ctx.get(dut.r.payload) if ready and ctx.get(dut.r.valid) and not skip else None
            length = ctx.get(dut.head_length)
            if writes:
                ctx.set(dut.w.payload, writes[0])
                ctx.set(dut.w.valid, 1)
                taken = ctx.get(dut.w.ready)
            else:
                ctx.set(dut.w.valid, 0)
                taken = False
            for name, sig in (("full", dut.dropped_full), ("error", dut.dropped_error), ("committed", dut.committed)):
                counters[name] += ctx.get(sig)
            await ctx.tick()
            idle = 0 if writes or word is not None or not reading else idle + 1
            if taken:
                writes.pop(0)
            if skip:
                got.append(("skipped", length))
                index += 1
            if word is not None and (frame := reader.take(word)) is not None:
                got.append((frame, length))
                index += 1

    sim.add_testbench(bench)
    run_simulation(sim)
    return got, counters


def test_frames_come_out_whole_with_their_lengths():
    rng = random.Random(1)
    frames = [(bytes(rng.randrange(256) for _ in range(n)), False) for n in (1, 4, 5, 60, 13, 8)]
    got, counters = run(frames, drop_when_full=False, ready_pattern=0.5)
    assert got == [(d, len(d)) for d, _ in frames]
    assert counters["committed"] == 6


def test_frame_with_error_is_discarded():
    frames = [(b"good-one", False), (b"bad-frame-with-fcs-error", True), (b"next", False)]
    got, counters = run(frames, drop_when_full=True)
    assert got == [(b"good-one", 8), (b"next", 4)]
    assert counters["error"] == 1 and counters["full"] == 0


def test_receive_side_drops_whole_frames_when_full_and_never_stalls():
    frames = [(bytes([i]) * 100, False) for i in range(5)]  # 25 words each, 64 words of room
    got, counters = run(frames, drop_when_full=True, read_after=400)
    assert [g[0][0] for g in got] == [0, 1]  # the rest did not fit: dropped
    assert counters["full"] == 3
    assert all(g[0] == bytes([g[0][0]]) * 100 for g in got)


def test_transmit_side_waits_for_room():
    frames = [(bytes([i]) * 100, False) for i in range(5)]
    got, counters = run(frames, drop_when_full=False, read_after=400)
    assert [g[0] for g in got] == [d for d, _ in frames] and counters["full"] == 0


def test_transmit_side_takes_no_word_of_a_frame_its_length_queue_has_no_room_for():
    """With every length slot taken, the transmit side takes no word of the next frame, not only
    not its last (its ready does not follow the word's `last`); once a frame is read it goes on."""
    frames = [(bytes([i]) * 8, False) for i in range(10)]  # two words each, 8 length slots
    dut = PacketFifo(depth_words=64, max_frames=8, drop_when_full=False)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    out = {}

    async def bench(ctx):
        writes = [fields for _, fields in word_writes(frames)]
        taken = 0
        for _ in range(100):  # nothing read yet
            ctx.set(dut.w.payload, writes[taken])
            ctx.set(dut.w.valid, 1)
            ready = ctx.get(dut.w.ready)
            await ctx.tick()
            taken += ready
        out["taken_while_full"] = taken
        got, reader = [], Frames()
        ctx.set(dut.r.ready, 1)
        for _ in range(200):
            if taken < len(writes):
                ctx.set(dut.w.payload, writes[taken])
            ctx.set(dut.w.valid, taken < len(writes))
            ready = taken < len(writes) and ctx.get(dut.w.ready)
            word = ctx.get(dut.r.payload) if ctx.get(dut.r.valid) else None
            await ctx.tick()
            taken += ready
            if word is not None and (frame := reader.take(word)) is not None:
                got.append(frame)
        out["got"] = got

    sim.add_testbench(bench)
    run_simulation(sim)
    assert out["taken_while_full"] == 8 * 2
    assert out["got"] == [d for d, _ in frames]


def test_level_counts_the_words_written_and_not_yet_read():
    """What the transmit engine measures its backlog by: a word written adds one, a word read
    takes one, a frame half written counts already."""
    dut = PacketFifo(depth_words=64, max_frames=8, drop_when_full=False)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    writes = [fields for _, fields in word_writes([(bytes(range(100)), False), (b"tail", False)])]

    async def bench(ctx):
        assert ctx.get(dut.level) == 0
        for n, fields in enumerate(writes, 1):
            ctx.set(dut.w.payload, fields)
            ctx.set(dut.w.valid, 1)
            await ctx.tick()
            assert ctx.get(dut.level) == n
        ctx.set(dut.w.valid, 0)
        ctx.set(dut.r.ready, 1)
        read = 0
        while read < len(writes):
            read += ctx.get(dut.r.valid)
            await ctx.tick()
            assert ctx.get(dut.level) == len(writes) - read
        assert ctx.get(dut.level) == 0

    sim.add_testbench(bench)
    run_simulation(sim)


def test_skip_discards_the_rest_of_the_head_frame():
    frames = [(b"a" * 9, False), (b"b" * 30, False), (b"c" * 3, False)]
    got, _ = run(frames, drop_when_full=True, skip_frames=(1,), read_after=50)
    assert got == [(b"a" * 9, 9), ("skipped", 30), (b"c" * 3, 3)]


@pytest.mark.parametrize("announced_with", [0, 5])
def test_an_announced_frame_is_read_while_it_is_written(announced_with):
    """Cut-through: a frame announced with its first word, or with a later one (the transmit
    framer's frame whose payload is all fetched), is read as its words come in (its first word out
    before its last is in); the whole frames around it still wait for their last word, and all
    three come out intact and in order."""
    dut = PacketFifo(depth_words=64, max_frames=8, drop_when_full=False)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    # (data, the word announced with, if any)
    frames = [(b"whole-one-17bytes", None), (bytes(range(40)), announced_with), (b"tail-frame", None)]
    written_last, read_first, got = {}, {}, []

    async def bench(ctx):
        writes = word_writes([(data, False) for data, _ in frames])
        ctx.set(dut.r.ready, 1)
        reader, cycle, written = Frames(), 0, {}
        while len(got) < len(frames) and cycle < 500:
            cycle += 1
            if writes:
                index, fields = writes[0]
                words = frame_words(frames[index][0])
                now = written.get(index, 0) == frames[index][1]
                announce = {"words": len(words), "nbytes": len(words[-1])} if now else None
                ctx.set(dut.w.payload, fields)
                ctx.set(dut.w.valid, 1)
                ctx.set(dut.announce.valid, announce is not None)
                if announce is not None:
                    ctx.set(dut.announce.payload, announce)
                taken = ctx.get(dut.w.ready) and (announce is None or ctx.get(dut.announce.ready))
            else:
                ctx.set(dut.w.valid, 0)
                ctx.set(dut.announce.valid, 0)
                taken = False
            word = ctx.get(dut.r.payload) if ctx.get(dut.r.valid) else None
            await ctx.tick()
            if taken:
                index, fields = writes.pop(0)
                written[index] = written.get(index, 0) + 1
                if fields["last"]:
                    written_last[index] = cycle
            if word is not None:
                read_first.setdefault(len(got), cycle)
                if (frame := reader.take(word)) is not None:
                    got.append(frame)

    sim.add_testbench(bench)
    run_simulation(sim)
    assert got == [data for data, _ in frames]
    assert read_first[1] < written_last[1]  # cut through
    assert read_first[0] > written_last[0] and read_first[2] > written_last[2]  # whole


def test_the_receive_side_passes_on_a_frame_as_it_comes_and_takes_back_a_dropped_one():
    """Receive-side cut-through: a frame written a word every third cycle is read as it comes, up
    to its newest word; its last word comes only once it is committed. A frame with a bad FCS, read
    in part, is taken back (``early_dropped``; the reader starts over where the next frame starts),
    and the frame after it comes out whole."""
    dut = PacketFifo(depth_words=64, max_frames=8, drop_when_full=True, cut_through=True)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    frames = [(bytes(range(1, 41)), False), (bytes(range(100, 137)), True), (b"after the bad one", False)]
    written_last, read_first, read_last, got, taken_back = {}, {}, {}, [], []

    async def bench(ctx):
        writes = word_writes(frames)
        ctx.set(dut.r.ready, 1)
        reader, cycle = Frames(), 0
        while len(got) < 2 and cycle < 1000:
            cycle += 1
            writing = bool(writes) and cycle % 3 == 0
            if writing:
                ctx.set(dut.w.payload, writes[0][1])
            ctx.set(dut.w.valid, writing)
            word = ctx.get(dut.r.payload) if ctx.get(dut.r.valid) else None
            if ctx.get(dut.early_dropped):
                taken_back.append(bytes(reader.current))
                reader.current = bytearray()
                word = None
            frame_index = len(got) + len(taken_back)
            await ctx.tick()
            if writing:
                index, fields = writes.pop(0)
                if fields["last"]:
                    written_last[index] = cycle
            if word is not None:
                read_first.setdefault(frame_index, cycle)
                if (frame := reader.take(word)) is not None:
                    read_last[frame_index] = cycle
                    got.append(frame)

    sim.add_testbench(bench)
    run_simulation(sim)
    assert got == [frames[0][0], frames[2][0]]
    assert len(taken_back) == 1 and frames[1][0].startswith(taken_back[0]) and taken_back[0]
    for index in (0, 2):
        assert read_first[index] < written_last[index] < read_last[index]
