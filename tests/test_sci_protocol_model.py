"""The SCI microcode, run by the instruction-set simulator on a ring of model cards under random
loads and stores: no deadlock, no protocol error, coherent histories, consistent lists.

The RTL runs the same control-store image (tests/test_remote_access_controller*.py)."""

from pathlib import Path

import pytest

from numavia.base.microcode import isa
from numavia.base.microcode.assembler import assemble
from numavia.gateware.microcode.cluster_model import ClusterModel, Deadlock, StressConfig
from numavia.gateware.microcode.coherence_check import check_history, check_quiescent

SOURCE = Path(isa.__file__).with_name("sci.uasm").read_text()
PROGRAM = assemble(SOURCE, "sci.uasm")


def stress(words=PROGRAM.words, **kwargs):
    model = ClusterModel(words, StressConfig(**kwargs))
    result = model.run()
    last = {}
    for a in sorted(result.accesses, key=lambda a: a.completed):
        if a.write:
            last[a.addr] = a.value
    violations = check_history(result.accesses) + check_quiescent(model.views(), last, line_bytes=model.cfg.line_bytes)
    return result, violations


# On 2 nodes each home rewrites nearly every line between two reads of the other node, so with
# the allocation filter hardly anything is cached there: that ring runs without it.
@pytest.mark.parametrize("nodes, seed, cache_first_miss", [(2, 1, True), (4, 2, False), (8, 3, False)])
def test_random_sharing_stays_coherent(nodes, seed, cache_first_miss):
    result, violations = stress(nodes=nodes, operations=1500, seed=seed, cache_first_miss=cache_first_miss)
    assert violations == []
    assert sum(c[isa.Counter.PROTOCOL_ERROR] for c in result.counters) == 0
    # The stimulus really exercised the protocol: conflicts, evictions and purges happened.
    assert sum(c[isa.Counter.NACK_SENT] for c in result.counters) > 0
    assert sum(c[isa.Counter.ROLLOUT] for c in result.counters) > 50
    assert sum(c[isa.Counter.PURGE] for c in result.counters) > 50
    if not cache_first_miss:
        assert sum(s["read_once"] for s in result.stats) > 50  # first misses (and dead lines) uncached
        # ... and second misses of lines their home wrote since the first (the home's SHOWN state).
        assert sum(c[isa.Counter.REWRITTEN_READ] for c in result.counters) > 50
    assert len(result.accesses) == nodes * 1500


@pytest.mark.parametrize("cache_first_miss, filter_lines", [(True, 4), (False, 512)], ids=["no_filter", "big_filter"])
def test_random_sharing_stays_coherent_with_any_allocation_policy(cache_first_miss, filter_lines):
    """Without the filter every read miss caches; a filter that never forgets the hot lines
    leaves the first misses and the dead lines as its only uncached reads."""
    result, violations = stress(
        nodes=4, operations=1500, seed=5, cache_first_miss=cache_first_miss, filter_lines=filter_lines
    )
    assert violations == []
    assert sum(c[isa.Counter.PROTOCOL_ERROR] for c in result.counters) == 0
    once = sum(s["read_once"] for s in result.stats)
    assert once == 0 if cache_first_miss else once > 0
    rewritten = sum(c[isa.Counter.REWRITTEN_READ] for c in result.counters)
    assert rewritten == 0 if cache_first_miss else rewritten > 0


def test_random_sharing_with_32_byte_lines_stays_coherent():
    # 8-word lines with all 8 words in use: requests, data blocks and merges at the smaller size.
    result, violations = stress(nodes=4, operations=1500, seed=7, line_bytes=32, words_per_line=8)
    assert violations == []
    assert sum(c[isa.Counter.PROTOCOL_ERROR] for c in result.counters) == 0
    assert sum(c[isa.Counter.NACK_SENT] for c in result.counters) > 0
    assert sum(c[isa.Counter.ROLLOUT] for c in result.counters) > 50
    assert sum(c[isa.Counter.PURGE] for c in result.counters) > 50
    assert {a.addr % 32 for a in result.accesses} == set(range(0, 32, 4))
    assert len(result.accesses) == 4 * 1500


def test_numa_mode_stays_coherent_and_never_caches():
    model = ClusterModel(PROGRAM.words, StressConfig(nodes=4, operations=1000, seed=4, numa=True))
    result = model.run()
    assert check_history(result.accesses) == []
    assert all(not view.cache for view in model.views())


def test_a_dropped_write_back_is_caught():
    broken = SOURCE.replace("SEND cmd=MONLY_OUT, dest=HOME, data=BUF", "SEND cmd=MONLY_OUT, dest=HOME, data=NONE")
    assert broken != SOURCE
    _, violations = stress(assemble(broken).words, nodes=4, operations=800, seed=5)
    assert violations


def test_a_purge_that_stops_early_is_caught():
    broken = SOURCE.replace("        BRT PTR_V, write_purge\n", "        NOP\n")
    assert broken != SOURCE
    with pytest.raises(Deadlock):
        stress(assemble(broken).words, nodes=4, operations=800, seed=5, watchdog=200_000)
