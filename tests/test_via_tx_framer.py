"""VIA transmit framer: the header then the payload (read by DMA from the walker's chunks, or the
firmware's words), the walk started with the header's first word, frames cut through once nothing
can spoil them (payload-less ones at once, small payloads during the header), a failed walk or DMA
read dropping the frame unannounced, back-pressure, raw management frames."""

import random

import pytest
from amaranth import Array, C, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator
from support.sim import run_simulation
from support.wishbone_sram import WishboneSRAM, load_words

from numavia.base import via_att, via_frame
from numavia.gateware.via_scatter_gather import OP_WALK
from numavia.gateware.via_tx_framer import HEADER_WORDS, PayloadSource, TxFramer

BASE = 0x6000_0000
SIZE = 4096
MGMT_WORDS = [0x1111_1111 * (i + 1) & 0xFFFF_FFFF for i in range(via_frame.MGMT_PAYLOAD_MAX // 4)]


class Top(wiring.Component):
    def __init__(self):
        self.framer = TxFramer()
        self.sram = WishboneSRAM(base=BASE, size=SIZE)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.framer = framer = self.framer
        m.submodules.sram = self.sram
        wiring.connect(m, framer.read_bus, self.sram.bus)
        # The management registers: a word per index, answered in the same cycle.
        words = Array(C(w, 32) for w in MGMT_WORDS)
        m.d.comb += framer.mgmt_data.record.word.eq(words[framer.mgmt_data.index])
        return m


def header(offset, length, seed):
    """A header (its bits) with random fields but `offset` and `payload_length`."""
    rng = random.Random(seed)
    values = {f.name: rng.getrandbits(f.width) for f in via_frame.HEADER.fields}
    return via_frame.HEADER.pack_value(**{**values, "OFFSET": offset, "PAYLOAD_LENGTH": length})


class Job:
    """A frame to send: `chunks` [(pa, length)] are what the walker answers its walk with (`fail`
    after them if set); `length` defaults to their total."""

    def __init__(self, *, chunks=(), length=None, offset=0, source=PayloadSource.HOST, raw=0, fail=0, seed=0):
        self.chunks = list(chunks)
        self.length = sum(n for _, n in self.chunks) if length is None else length
        self.bits = 0 if raw else header(offset, self.length, seed)
        self.offset, self.source, self.raw, self.fail = offset, source, raw, fail
        # What the bench saw.
        self.walks = []  # (cycle, offset, length) of the walk commands taken
        self.ended = None  # (cycle, error) of job.ready
        self.started = None
        self.announced_at = None  # the frame's word written with its announcement, until its end
        self.cut_at = None  # ... kept once the frame has ended
        self.gaps = 0


def run(jobs, *, ready_pattern=None, seed=3):
    """Send `jobs` one after another; returns (memory, frames [(bytes, error)], announcements
    [(cycle, words announced)], first-word cycles, DMA errors counted). Each job also keeps
    `announced_at` (the word of its frame written with the announcement) and `gaps` (cycles after
    its announcement, before its last word, without a word offered)."""
    top = Top()
    framer = top.framer
    sim = Simulator(top)
    sim.add_clock(1e-8)
    memory = bytes(random.Random(seed).randrange(256) for _ in range(SIZE))
    frames, announced, first_words, dma_errors = [], [], [], [0]

    async def bench(ctx):
        load_words(ctx, top.sram, BASE, memory)
        rng = random.Random(seed + 1)
        pending = list(jobs)
        walker = []  # what the walker still has to answer: ("chunk", pa, length) / ("result", fail)
        current, words, cycle, start = bytearray(), 0, 0, 0
        while pending and cycle < 20000:
            job = pending[0]
            if job.started is None:
                job.started = start = cycle
            ctx.set(framer.job.valid, 1)
            ctx.set(framer.job.payload.header.as_value(), job.bits)
            ctx.set(framer.job.payload.length, job.length)
            ctx.set(framer.job.payload.source, job.source)
            ctx.set(framer.job.payload.raw, job.raw)
            ctx.set(framer.walk.ready, not walker)
            ctx.set(framer.chunks.valid, bool(walker) and walker[0][0] == "chunk")
            if walker and walker[0][0] == "chunk":
                ctx.set(framer.chunks.payload, {"pa": walker[0][1], "length": walker[0][2]})
            ctx.set(framer.walk_result.valid, bool(walker) and walker[0][0] == "result")
            if walker and walker[0][0] == "result":
                ctx.set(framer.walk_result.payload, {"fail": walker[0][1], "total": job.length})
            ready = ready_pattern is None or rng.random() < ready_pattern
            ctx.set(framer.frames.ready, ready)
            ctx.set(framer.announce.ready, 1)

            if ctx.get(framer.walk.valid) and not walker:
                walk = ctx.get(framer.walk.payload)
                assert walk.op == OP_WALK
                job.walks.append((cycle - start, walk.offset, walk.length))
                walker = [("chunk", pa, n) for pa, n in job.chunks] + [("result", job.fail)]
            elif walker and walker[0][0] == "chunk" and ctx.get(framer.chunks.ready):
                walker.pop(0)
            elif walker and walker[0][0] == "result" and ctx.get(framer.walk_result.ready):
                walker.pop(0)
            if ctx.get(framer.announce.valid) and ready and ctx.get(framer.frames.valid):  # taken
                announced.append((cycle - start, ctx.get(framer.announce.payload.words)))
                job.announced_at = words
            elif job.announced_at is not None and not ctx.get(framer.frames.valid):
                job.gaps += 1
            if ready and ctx.get(framer.frames.valid):
                word = ctx.get(framer.frames.payload)
                if words == 0:
                    first_words.append(cycle - start)
                current += word.data.to_bytes(4, "little")[: word.nbytes]
                words += 1
                if word.last:
                    frames.append((bytes(current), word.error))
                    current, words = bytearray(), 0
                    if job.announced_at is not None:
                        job.announced_at, job.cut_at = None, job.announced_at
            dma_errors[0] += ctx.get(framer.dma_error)
            if ctx.get(framer.job.ready):
                job.ended = (cycle - start, ctx.get(framer.error))
                pending.pop(0)
                assert not walker, "the job ended before its walk was answered"
            await ctx.tick()
            cycle += 1
        ctx.set(framer.job.valid, 0)
        assert not pending, "the framer hung"

    sim.add_testbench(bench)
    run_simulation(sim)
    return memory, frames, announced, first_words, dma_errors[0]


def header_bytes(job):
    return job.bits.to_bytes(HEADER_WORDS * 4, "little")


def payload(memory, chunks):
    return b"".join(memory[pa - BASE : pa - BASE + n] for pa, n in chunks)


@pytest.mark.parametrize(
    "chunks",
    [
        [(BASE + 0x100, 4)],
        [(BASE + 0x203, 1)],
        [(BASE + 0x101, 7), (BASE + 0x802, 300), (BASE + 0x400, 2)],
        [(BASE + 0xFF0, 16), (BASE, 1000)],
    ],
)
@pytest.mark.parametrize("ready_pattern", [None, 0.4])
def test_a_frame_is_its_header_then_the_payload_read_from_the_walkers_chunks(chunks, ready_pattern):
    job = Job(chunks=chunks, offset=0x1234, seed=len(chunks))
    memory, frames, announced, _, dma_errors = run([job], ready_pattern=ready_pattern)
    assert frames == [(header_bytes(job) + payload(memory, chunks), 0)]
    assert job.ended[1] == 0 and dma_errors == 0
    assert [(offset, length) for _, offset, length in job.walks] == [(0x1234, job.length)]
    # A payload the DMA reader's buffer holds is all in during the header: the frame is cut through
    # there. A longer one is announced at most for its last words, or leaves the FIFO whole.
    words = -(-len(frames[0][0]) // 4)
    if job.length <= 8:
        assert announced == [(announced[0][0], words)] and job.cut_at < HEADER_WORDS
    else:
        assert announced == [] or (announced == [(announced[0][0], words)] and job.cut_at >= words - 4)
    assert job.gaps == 0


def test_the_walk_starts_with_the_header_and_the_payload_follows_it_without_a_gap():
    job = Job(chunks=[(BASE + 0x40, 4)])
    memory, frames, _, first_words, _ = run([job])
    ((walk_cycle, _, _),), (first_word,) = job.walks, first_words
    assert walk_cycle == 0 and first_word == 0  # both in the job's first cycle
    # Header and payload a word a cycle; the job ends the cycle after the last word.
    assert job.ended == (HEADER_WORDS + 1, 0)
    assert frames[0][0][via_frame.HEADER.size :] == payload(memory, job.chunks)


@pytest.mark.parametrize("length", [1, 4, 5, 8])
def test_a_small_payload_is_announced_during_its_header_and_follows_it_without_a_gap(length):
    job = Job(chunks=[(BASE + 0x41, length)], seed=length)
    memory, frames, announced, first_words, _ = run([job])
    words = HEADER_WORDS + (length + 3) // 4
    assert frames == [(header_bytes(job) + payload(memory, job.chunks), 0)]
    # Announced once, with its length, and with a header word: the MAC side starts before the payload
    # is written. From there a word a cycle to the end.
    ((cycle, announced_words),) = announced
    assert announced_words == words and 0 < job.cut_at < HEADER_WORDS and cycle == job.cut_at
    assert job.gaps == 0 and first_words == [0] and job.ended == (words, 0)


def test_a_walk_that_fails_after_its_last_chunk_is_never_announced():
    # Every payload byte is read and in the packer, but the walker's answer is a failure: the frame
    # must not start on the wire (it could not be recalled), and is dropped.
    bad = Job(chunks=[(BASE + 0x100, 4)], fail=via_att.FAIL_PTAG)
    good = Job(chunks=[(BASE + 0x200, 4)], seed=4)
    memory, frames, announced, _, _ = run([bad, good])
    assert [error for _, error in frames] == [1, 0] and bad.ended[1] == 1
    assert bad.cut_at is None and good.cut_at is not None and len(announced) == 1
    assert frames[1][0] == header_bytes(good) + payload(memory, good.chunks)


def test_a_frame_without_payload_is_announced_with_its_first_word_and_ends_with_its_header():
    job = Job(length=0, seed=5)
    _, frames, announced, first_words, _ = run([job])
    assert announced == [(0, HEADER_WORDS)] and first_words == [0]
    assert frames == [(header_bytes(job), 0)]
    assert job.walks == [] and job.ended == (HEADER_WORDS - 1, 0)


def test_a_failed_walk_drops_the_frame_and_the_next_frame_is_whole():
    bad = Job(chunks=[(BASE + 0x100, 64)], length=200, fail=via_att.FAIL_PTAG)
    good = Job(chunks=[(BASE + 0x300, 64)], seed=2)
    memory, frames, _, _, _ = run([bad, good], ready_pattern=0.7)
    (dropped, error), whole = frames
    assert error == 1 and dropped.startswith(header_bytes(bad)) and bad.ended[1] == 1
    assert bad.cut_at is None  # never announced: a dropped frame never reaches the wire
    assert whole == (header_bytes(good) + payload(memory, good.chunks), 0) and good.ended[1] == 0


def test_a_dma_read_error_marks_the_frame_and_is_reported():
    outside = BASE + SIZE  # no memory answers there
    bad = Job(chunks=[(BASE + 0x10, 8), (outside, 8)])
    good = Job(chunks=[(BASE + 0x20, 12)], seed=1)
    memory, frames, _, _, dma_errors = run([bad, good])
    assert [error for _, error in frames] == [1, 0] and bad.ended[1] == 1 and good.ended[1] == 0
    assert dma_errors >= 1 and bad.cut_at is None
    assert frames[1][0] == header_bytes(good) + payload(memory, good.chunks)


@pytest.mark.parametrize("length", [1, 6, 8, via_frame.MGMT_PAYLOAD_MAX])
def test_management_payload_follows_its_header_and_a_raw_frame_has_none(length):
    words = b"".join(w.to_bytes(4, "little") for w in MGMT_WORDS)[:length]
    headed = Job(length=length, source=PayloadSource.FIRMWARE, seed=9)
    raw = Job(length=length, source=PayloadSource.FIRMWARE, raw=1)
    empty_raw = Job(length=0, source=PayloadSource.FIRMWARE, raw=1)  # nothing to send
    _, frames, announced, _, _ = run([headed, raw, empty_raw], ready_pattern=0.5)
    assert frames == [(header_bytes(headed) + words, 0), (words, 0)]
    assert headed.walks == raw.walks == [] and announced == []
    assert empty_raw.ended == (0, 0)
