"""The SCI ring under packet faults (RTL ring links in the Amaranth simulator): whole packets lost
and duplicated on the links (seeded, ring_bench.packet_faults), and nodes whose sequencers stall
for a while (one fixed window, or seeded random ones: ring_bench.stall_windows). Every packet must
still arrive exactly once, in order, intact; the counters show the recovery. (Bit flips:
tests/test_ring_link.py; coherence on top: tests/test_coherence_cluster.py.)"""

import random

from support.ring_bench import RingBench, Traffic, check_delivery, packet_faults, simulate, stall_windows
from test_ring_link import all_counters, random_plan, read, reg

DELAY = 48  # longer than the longest packet, so that copies fit into silence


def run(nodes, per_node, *, seed, drop=0.0, duplicate=0.0, stall=None, limit=200_000, in_depth=16):
    bench = RingBench(nodes, delay=DELAY, echo_timeout=1500, busy_delay=32, in_depth=in_depth)
    plan = random_plan(random.Random(seed), nodes, per_node)
    traffic = Traffic(bench, plan, gap=(0, 40), stall=stall or {}, seed=seed)
    counts = {}
    faults = (
        [
            packet_faults(bench, i, random.Random(f"{seed}-{i}"), drop=drop, duplicate=duplicate, counts=counts)
            for i in range(nodes)
        ]
        if (drop or duplicate)
        else []
    )
    result = {}

    async def main(ctx):
        await traffic.run_until_delivered(ctx, limit=limit, settle=4000)
        result["cycle"] = ctx.get(bench.cycle)
        result["counters"] = [await all_counters(ctx, link) for link in bench.links]
        result["status"] = [await read(ctx, link.bus, reg("STATUS")) for link in bench.links]
        result["errors"] = [await read(ctx, link.bus, reg("ERRORS")) for link in bench.links]

    simulate(bench, main, traffic=traffic, background=faults)
    return traffic, result, counts


def total(result, name):
    return sum(c[name] for c in result["counters"])


def arrivals(traffic, index):
    """Cycles at which packets reached node ``index``'s sequencer."""
    node = traffic.bench.node_ids[index]
    return [d.cycle for (_, target), ds in traffic.received.items() if target == node for d in ds]


def check(traffic, result):
    assert check_delivery(traffic) == traffic.expected()  # once each, in order, intact
    assert traffic.failed == {}  # nothing given up
    assert result["errors"] == [0] * len(result["errors"])
    assert result["status"] == [0] * len(result["status"])  # queues empty, nothing in flight


def test_lost_and_duplicated_packets_are_delivered_exactly_once():
    traffic, result, counts = run(4, 8, seed=3, drop=0.04, duplicate=0.06)
    check(traffic, result)
    assert counts["dropped"] > 0 and counts["duplicated"] > 0, counts
    assert total(result, "TIMEOUTS") > 0  # lost packets and lost echoes were resent
    assert total(result, "DUPLICATES") > 0  # copies (and resends after lost echoes) refused


def test_a_stalled_node_holds_traffic_back_and_everything_arrives_after():
    stall_end = 5000
    traffic, result, _ = run(3, 10, seed=7, stall={1: [(200, stall_end)]}, in_depth=2)
    check(traffic, result)
    assert total(result, "BUSY_SENT") > 0  # node 1's queue filled: senders were told to wait
    late = arrivals(traffic, 1)
    assert not [c for c in late if 200 <= c < stall_end] and max(late) >= stall_end  # none while stalled


def test_seeded_random_stalls_on_every_node_among_lost_and_duplicated_packets():
    """Every node's sequencer stalls now and then (seeded: one stall per 2000 cycles on average,
    300-1500 cycles each, incoming queues of 2) while packets are lost and duplicated."""
    stall = {
        i: stall_windows(random.Random(f"5-stall-{i}"), rate=1 / 2000, length=(300, 1500), horizon=30_000)
        for i in range(4)
    }
    traffic, result, counts = run(4, 8, seed=5, drop=0.02, duplicate=0.02, stall=stall, in_depth=2)
    check(traffic, result)
    assert all(stall.values()) and counts["dropped"] + counts["duplicated"] > 0, (stall, counts)
    assert total(result, "BUSY_SENT") > 0  # full queues told senders to wait
    for i, windows in stall.items():  # nothing reached a node while it was stalled
        assert not [c for c in arrivals(traffic, i) for begin, end in windows if begin <= c < end]
