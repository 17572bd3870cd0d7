"""Burst splitter: every alignment and length, both directions, order and byte enables kept."""

import gc
import random
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.gateware.bfm import recv, send
from numavia.gateware.burst_splitter import BurstSplitter
from numavia.gateware.host_port import MAX_BURST_WORDS

BASE = 0x1000


def data_at(addr):
    return (addr * 0x9E3779B1) & 0xFFFFFFFF


LINE_SIZES = pytest.mark.parametrize("line_bytes", [64, 32])


def simulate(accesses, *, error_piece=None, line_bytes=64):
    """Run ``accesses`` [(write, addr, count, beats)] through the splitter against a responder.
    Returns (host responses per access, line requests seen, write beats seen)."""
    dut = BurstSplitter(line_bytes=line_bytes)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    pieces, beats_seen, responses = [], [], []

    async def host(ctx):
        for write, addr, count, beats in accesses:
            await send(ctx, dut.host.req, {"addr": addr, "write": write, "count": count})
            for beat in beats:
                await send(ctx, dut.host.wdata, beat)
            got = []
            while True:
                beat = await recv(ctx, dut.host.resp)
                got.append((beat.data, beat.error, beat.last))
                if beat.last:
                    break
            responses.append(got)

    async def responder(ctx):
        while True:
            req = await recv(ctx, dut.line.req)
            index = len(pieces)
            pieces.append((req.addr, req.write, req.count))
            bad = error_piece == index
            if req.write:
                for _ in range(req.count):
                    beat = await recv(ctx, dut.line.wdata)
                    beats_seen.append((beat.data, beat.be))
                await send(ctx, dut.line.resp, {"data": 0, "error": bad, "last": 1})
            else:
                for i in range(req.count):
                    await send(
                        ctx,
                        dut.line.resp,
                        {"data": data_at(req.addr + 4 * i), "error": bad, "last": i == req.count - 1},
                    )

    sim.add_testbench(host)
    sim.add_testbench(responder, background=True)
    run_simulation(sim)
    return responses, pieces, beats_seen


def expected_pieces(addr, count, write, line_words):
    out = []
    while count:
        n = min(count, line_words - (addr // 4) % line_words)
        out.append((addr, write, n))
        addr, count = addr + 4 * n, count - n
    return out


@LINE_SIZES
def test_reads_at_every_alignment_and_length(line_bytes):
    line_words = line_bytes // 4
    accesses = [
        (0, BASE + 4 * offset, count, []) for offset in range(line_words) for count in list(range(1, 34)) + [47, 63, 64]
    ]
    responses, pieces, _ = simulate(accesses, line_bytes=line_bytes)
    want_pieces = [p for _, a, c, _ in accesses for p in expected_pieces(a, c, 0, line_words)]
    assert pieces == want_pieces
    for (_, addr, count, _), got in zip(accesses, responses):
        assert [d for d, _, _ in got] == [data_at(addr + 4 * i) for i in range(count)]
        assert [last for _, _, last in got] == [0] * (count - 1) + [1]
        assert not any(e for _, e, _ in got)


@LINE_SIZES
def test_writes_at_every_alignment_and_length_keep_data_and_byte_enables(line_bytes):
    line_words = line_bytes // 4
    rng = random.Random(2)
    accesses = []
    for offset in range(line_words):
        for count in list(range(1, 34)) + [64]:
            beats = [{"data": rng.randrange(1 << 32), "be": rng.randrange(16)} for _ in range(count)]
            accesses.append((1, BASE + 4 * offset, count, beats))
    responses, pieces, beats_seen = simulate(accesses, line_bytes=line_bytes)
    assert pieces == [p for _, a, c, _ in accesses for p in expected_pieces(a, c, 1, line_words)]
    assert beats_seen == [(b["data"], b["be"]) for *_, beats in accesses for b in beats]
    assert all(got == [(0, 0, 1)] for got in responses)


def test_a_line_size_that_is_not_a_power_of_two_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)  # the refused splitter is dropped
        with pytest.raises(ValueError, match="power of two"):
            BurstSplitter(line_bytes=48)
        gc.collect()


def test_an_error_in_one_piece_fails_the_whole_write():
    beats = [{"data": i, "be": 0xF} for i in range(20)]
    responses, pieces, _ = simulate([(1, BASE + 8, 20, beats)], error_piece=1)
    assert len(pieces) == 2 and responses == [[(0, 1, 1)]]


@pytest.mark.parametrize(
    "write, addr, count, answer_beats",
    [
        (0, BASE, 0, 1),
        (0, BASE + 2, 3, 3),
        (0, BASE, MAX_BURST_WORDS + 1, MAX_BURST_WORDS + 1),
        (1, BASE + 1, 2, 1),
        (1, BASE, MAX_BURST_WORDS + 1, 1),
    ],
)
def test_malformed_accesses_are_refused_and_drained(write, addr, count, answer_beats):
    beats = [{"data": 0xAA, "be": 0xF}] * (count if write else 0)
    good = (0, BASE, 2, [])
    responses, pieces, beats_seen = simulate([(write, addr, count, beats), good])
    assert len(responses[0]) == answer_beats and all(e for _, e, _ in responses[0])
    assert responses[0][-1][2] == 1
    assert pieces == [(BASE, 0, 2)] and beats_seen == []  # nothing reached the line side
    assert [d for d, _, _ in responses[1]] == [data_at(BASE), data_at(BASE + 4)]
