"""Round-robin choice alone, exhaustively for small counts (a power of two and not): every request
pattern and every last choice gives the first requester after the last one, cyclically."""

import random

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.gateware.round_robin import RoundRobin


def expected(requests, last, count):
    for distance in range(1, count + 1):
        candidate = (last + distance) % count
        if requests >> candidate & 1:
            return candidate
    return None


def check_all(cases, count):
    """Simulate a RoundRobin of ``count`` and check its answer to each ``(last, requests)``."""
    dut = RoundRobin(count)
    sim = Simulator(dut)
    checked = []

    async def bench(ctx):
        for last, requests in cases:
            ctx.set(dut.last, last)
            ctx.set(dut.requests, requests)
            want = expected(requests, last, count)
            assert ctx.get(dut.found) == (want is not None), (requests, last)
            if want is not None:
                assert ctx.get(dut.choice) == want, (requests, last)
            checked.append((last, requests))

    sim.add_testbench(bench)
    run_simulation(sim)
    return checked


@pytest.mark.parametrize("count", [1, 2, 5, 8])
def test_the_choice_is_the_first_requester_after_the_last(count):
    cases = [(last, requests) for last in range(count) for requests in range(1 << count)]
    assert len(check_all(cases, count)) == count << count


def test_64_requesters_the_scheduler_s_width():
    """The VIA scheduler's width, with random sparse and dense request patterns."""
    count, rng = 64, random.Random(64)
    cases = []
    for _ in range(2000):
        density = rng.choice((0.02, 0.2, 0.9))
        cases.append((rng.randrange(count), sum(1 << i for i in range(count) if rng.random() < density)))
    assert len(check_all(cases, count)) == len(cases)
