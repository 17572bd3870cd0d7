"""Coherence stress on the RTL: N Numavia cards in a ring (Verilator), random loads and stores
on a small hot set of lines from every node (sharing, conflicts and evictions), checked with
numavia.gateware.microcode.coherence_check: a coherent history, consistent sharing lists at quiescence, no
protocol error, and no access stuck beyond the watchdog (no deadlock, no livelock)."""

import pytest

from numavia.base import paths
from numavia.base.microcode.assembler import assemble
from numavia.gateware.microcode.coherence_check import check_history, check_quiescent
from numavia.soc import card_bench as cb

pytestmark = pytest.mark.slow

CONFIG = cb.bench_card_config()
_built = {}


def bench(config=CONFIG):
    if config not in _built:
        _built[config] = cb.build_bench(config, log=lambda m: None)
    return _built[config]


def stress(tmp_path, nodes, ops, config=CONFIG, **kwargs):
    run = cb.run_bench(bench(config), tmp_path, nodes=nodes, ops=ops, **kwargs)
    assert run.returncode == 0, run.stderr
    assert len(run.accesses) == nodes * ops
    for a in run.accesses:
        a.addr = cb.global_address(a.addr, config)
    assert check_history(run.accesses) == []
    last = {}
    for a in sorted(run.accesses, key=lambda a: a.completed):
        if a.write:
            last[a.addr] = a.value
    views = cb.node_views(run.state, config, kwargs.get("hot_lines", 2))
    assert check_quiescent(views, last, line_bytes=config.line_bytes) == []
    counters = [n["counters"] for n in run.state["nodes"]]
    assert all(c["RAC_PROTOCOL_ERRORS"] == 0 and c["RAC_RETRY_LIMITS"] == 0 for c in counters)
    return run, counters


def total(counters, name):
    return sum(c[name] for c in counters)


# On 2 nodes each home rewrites nearly every hot line between two reads of the other node, so the
# allocation filter (and the home's SHOWN state) leave almost nothing cached: that ring caches
# at the first miss, so that lists, conflicts and rollouts happen; 4 nodes run the filter.
@pytest.mark.parametrize("nodes, ops, seed, cache_first_miss", [(2, 5000, 1, True), (4, 5000, 2, False)])
def test_random_sharing_is_coherent(tmp_path, nodes, ops, seed, cache_first_miss):
    run, counters = stress(tmp_path, nodes, ops, seed=seed, cache_first_miss=cache_first_miss)
    assert total(counters, "RAC_NACKS_SENT") > 0 and total(counters, "RAC_ROLLOUTS") > 0
    assert total(counters, "RAC_PURGES") > 0
    if not cache_first_miss:  # first misses read once, second misses of rewritten lines declined
        assert total(counters, "LAC_READ_ONCE") > 0 and total(counters, "RAC_REWRITTEN_READS") > 0


def test_random_sharing_with_32_byte_lines_is_coherent(tmp_path):
    """The paper's other line size (its Table 3): a card built with 32-byte lines (tags,
    directory, memories, line buffers and SCI data blocks of 8 words), every word of a line used."""
    config = cb.bench_card_config(line_bytes=32)
    run, counters = stress(tmp_path, 4, 4000, config, seed=7, words=8)
    assert total(counters, "RAC_NACKS_SENT") > 0 and total(counters, "RAC_ROLLOUTS") > 0
    assert total(counters, "RAC_PURGES") > 0 and total(counters, "LAC_CACHE_READ_HITS") > 0
    assert {a.addr % 32 for a in run.accesses} == set(range(0, 32, 4))  # every word of the lines
    assert {len(words) for n in cb.node_views(run.state, config, 2) for words in n.memory.values()} == {8}


def test_hundred_thousand_operations_on_eight_nodes(tmp_path):
    run, counters = stress(tmp_path, 8, 12_500, seed=3)
    assert len(run.accesses) == 100_000
    assert total(counters, "LAC_CACHE_READ_HITS") > 0 and total(counters, "LAC_READ_MISSES") > 0


def test_ring_bit_errors_are_survived(tmp_path):
    run, counters = stress(tmp_path, 4, 2000, seed=4, flip_rate=2e-4)
    assert run.state["ring_flips"] > 0
    assert total(counters, "RING_CRC_ERRORS") > 0 and total(counters, "RING_TIMEOUTS") > 0


def test_lost_and_duplicated_ring_packets_are_survived(tmp_path):
    # Each hop long enough to hold a packet's copy (ring_link.hpp writes copies over idle symbols).
    run, counters = stress(
        tmp_path, 4, 2000, seed=6, ring_drop=0.01, ring_duplicate=0.01, ring_delay=cb.duplicating_ring_delay()
    )
    assert run.state["ring_dropped"] > 0 and run.state["ring_duplicated"] > 0
    assert total(counters, "RING_TIMEOUTS") > 0  # losses (of packets or echoes) resent
    assert total(counters, "RING_DUPLICATES") > 0  # copies recognised by their alternating bit


def test_numa_mode_caches_nothing(tmp_path):
    run, counters = stress(tmp_path, 4, 1000, seed=5, numa=True)
    assert total(counters, "RAC_ROLLOUTS") == 0 and total(counters, "LAC_CACHE_READ_HITS") == 0
    assert all(not any(t & 0xF for t in n["tag"]) for n in run.state["nodes"])


def test_the_state_is_dumped_only_when_every_card_is_quiet(tmp_path):
    """A full-set read miss answers the host from an uncached read; the victim's rollout and the
    line's fill follow. A card reports its traffic done only when no transaction entry is in use:
    with seed 12 a node's last access leaves such a fill in flight, and a dump taken at the host's
    last answer showed that node holding the line outside its sharing list."""
    config = cb.bench_card_config(cache_sets=2, cache_ways=1)
    run, counters = stress(tmp_path, 2, 30, config, seed=12, hot_lines=4, write_fraction=0.0)
    assert total(counters, "RAC_ROLLOUTS") > 0


def test_an_access_stuck_past_the_watchdog_fails_the_run(tmp_path):
    """No remote miss is answered within 20 cycles: the run stops with the access it waited for."""
    run = cb.run_bench(bench(), tmp_path, nodes=2, ops=10, seed=1, write_fraction=0.0, watchdog=20)
    assert run.returncode != 0
    assert "pending for" in run.stderr and "deadlock?" in run.stderr, run.stderr


def test_a_transaction_left_running_after_the_last_access_fails_the_run(tmp_path):
    """A microcode whose uncached read waits again after answering the host never frees its
    transaction entry: every host access completes, and the card's drain names the leftover.
    (The microcode alone runs: the fast path would answer the uncached read itself.)"""
    source = paths.microcode_source().read_text()
    original = "        COMPLETE status=OK, src=MSG\n        END\nread_once_refused:"
    assert original in source
    broken = source.replace(original, original.replace("END", "WAIT"))
    run = cb.run_bench(
        bench(),
        tmp_path,
        nodes=2,
        ops=4,
        seed=1,
        write_fraction=0.0,
        microcode=assemble(broken).words,
        watchdog=5_000,
        microcode_only=True,
    )
    assert run.returncode != 0
    assert "transactions still in progress" in run.stderr, run.stderr
    assert len(run.accesses) == 2 * 4  # every access was answered before the drain gave up
