"""Byte packer: beats of any size become dense words, frame by frame; errors reach the last word."""

import random

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.gateware.byte_packer import BytePacker


def run(frames, *, ready_pattern=None, seed=5, whole=None):
    """``frames``: list of lists of (bytes, error) beats. Returns [(bytes, [nbytes], error)];
    ``whole``, if a list, gets (beats taken, words taken, ``whole``) of every cycle.

    One process drives both sides, deciding the sink's ready before looking at the source's, as
    the hardware sees them at a clock edge.
    """
    dut = BytePacker()
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    out = []

    async def bench(ctx):
        rng = random.Random(seed)
        items = []
        for beats in frames:
            items.append(("length", sum(len(b) for b, _ in beats)))
            items += [
                ("beats", {"data": int.from_bytes(c.ljust(4, b"\xee"), "little"), "nbytes": len(c), "error": e})
                for c, e in beats
            ]
        expected = [sum(len(b) for b, _ in beats) for beats in frames]
        data, sizes = bytearray(), []
        beats_taken = words_taken = 0
        for _ in range(20000):
            while expected and expected[0] == 0:
                out.append((b"", [], 0))
                expected.pop(0)
            if not expected:
                break
            ready = 1 if ready_pattern is None else int(rng.random() < ready_pattern)
            ctx.set(dut.words.ready, ready)
            word = ctx.get(dut.words.payload) if ready and ctx.get(dut.words.valid) else None
            for name in ("length", "beats"):
                ctx.set(getattr(dut, name).valid, 0)
            sent = False
            if items:
                name, payload = items[0]
                stream = getattr(dut, name)
                ctx.set(stream.payload, payload)
                ctx.set(stream.valid, 1)
                sent = ctx.get(stream.ready)
            if whole is not None:
                whole.append((beats_taken, words_taken, ctx.get(dut.whole)))
            await ctx.tick()
            if sent:
                beats_taken += items[0][0] == "beats"
                items.pop(0)
            if word is not None:
                words_taken += 1
                data += word.data.to_bytes(4, "little")[: word.nbytes]
                sizes.append(word.nbytes)
                if word.last:
                    out.append((bytes(data), sizes, word.error))
                    data, sizes = bytearray(), []
                    expected.pop(0)

    sim.add_testbench(bench)
    run_simulation(sim)
    return out


def split(data, sizes):
    beats, pos = [], 0
    for s in sizes:
        beats.append((data[pos : pos + s], 0))
        pos += s
    return beats


@pytest.mark.parametrize("sizes", [[4, 4], [1, 2, 3, 4, 1], [3], [0, 2, 0, 1], [2, 2, 2, 2, 2, 2, 2]])
def test_packs_dense_words(sizes):
    data = bytes(range(100, 100 + sum(sizes)))
    ((got, words, err),) = run([split(data, sizes)])
    assert got == data and err == 0
    assert all(n == 4 for n in words[:-1]) and 1 <= words[-1] <= 4


def test_frames_stay_apart_under_back_pressure():
    rng = random.Random(2)
    frames, payloads = [], []
    for _ in range(6):
        sizes = [rng.randrange(0, 5) for _ in range(rng.randrange(1, 12))]
        sizes[-1] = max(sizes[-1], 1)
        data = bytes(rng.randrange(256) for _ in range(sum(sizes)))
        frames.append(split(data, sizes))
        payloads.append(data)
    out = run(frames, ready_pattern=0.4)
    assert [o[0] for o in out] == payloads


def test_error_beat_marks_the_last_word():
    frames = [[(b"abcd", 0), (b"ef", 1), (b"ghij", 0)], [(b"kl", 0)]]
    out = run(frames)
    assert out[0][0] == b"abcdefghij" and out[0][2] == 1
    assert out[1] == (b"kl", [2], 0)


@pytest.mark.parametrize("ready_pattern", [None, 0.3])
def test_whole_holds_from_the_last_byte_in_until_the_last_word_out(ready_pattern):
    sizes = [3, 4, 1]  # 8 bytes: two words
    seen = []
    ((got, words, err),) = run([split(bytes(range(8)), sizes)], ready_pattern=ready_pattern, whole=seen)
    assert err == 0 and len(words) == 2
    # Low while a byte is still to come, high from the cycle after the last beat is taken to the
    # cycle the last word is taken (the framer may announce the frame with any word in between).
    assert all(not w for beats, _, w in seen if beats < len(sizes))
    assert all(w for beats, words_out, w in seen if beats == len(sizes) and words_out < 2)
    assert not seen[-1][2] or seen[-1][1] < 2


def test_whole_never_holds_for_a_payload_with_an_error():
    seen = []
    beats = [(b"\x01\x02", 0), (b"\x03\x04\x05", 1), (b"\x06", 0)]
    ((_, _, err),) = run([beats], ready_pattern=0.3, whole=seen)
    assert err == 1 and not any(w for _, _, w in seen)
