"""Round-robin choice alone, exhaustively for small counts (a power of two and not): every request
pattern and every last choice gives the first requester after the last one, cyclically."""

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


@pytest.mark.parametrize("count", [1, 2, 5, 8])
def test_the_choice_is_the_first_requester_after_the_last(count):
    dut = RoundRobin(count)
    sim = Simulator(dut)
    checked = []

    async def bench(ctx):
        for last in range(count):
            for requests in range(1 << count):
                ctx.set(dut.last, last)
                ctx.set(dut.requests, requests)
                want = expected(requests, last, count)
                assert ctx.get(dut.found) == (want is not None), (requests, last)
                if want is not None:
                    assert ctx.get(dut.choice) == want, (requests, last)
                checked.append((last, requests))

    sim.add_testbench(bench)
    run_simulation(sim)
    assert len(checked) == count << count
