"""The remote access controller's RTL (sequencer + control store) running the SCI microcode,
co-simulated as one card among model cards under random sharing traffic."""

from pathlib import Path

import pytest
from support.cosim import CoSim, CoSimConfig

from numavia.base.microcode import isa
from numavia.base.microcode.assembler import assemble
from numavia.gateware.microcode.coherence_check import check_history

PROGRAM = assemble(Path(isa.__file__).with_name("sci.uasm").read_text(), "sci.uasm")


def run(**kwargs):
    cosim = CoSim(PROGRAM.words, CoSimConfig(**kwargs))
    result = cosim.run()
    return cosim, result


@pytest.mark.parametrize("nodes, rtl_node, seed", [(2, 0, 1), (3, 1, 2), (4, 3, 3)])
def test_rtl_card_keeps_the_cluster_coherent(nodes, rtl_node, seed):
    cosim, result = run(nodes=nodes, rtl_node=rtl_node, seed=seed, operations=60)
    assert check_history(result.accesses) == []
    assert result.rtl_counters["PROTOCOL_ERRORS"] == 0
    assert all(c[isa.Counter.PROTOCOL_ERROR] == 0 for c in result.model_counters)
    assert len(result.accesses) == nodes * 60
    # The RTL card really took part: it answered requests and ran transactions, the commonest
    # through its hard-wired fast path.
    assert result.rtl_counters["REQUESTS"] > 0 and result.rtl_counters["RUNS"] > 0
    assert result.rtl_counters["FAST_PATH"] > 0
    # ... and its misses took the local access controller's lookup instead of a second one.
    assert result.rtl_counters["LOOKUPS_TAKEN"] > 0


def test_counters_in_memory_count_what_counters_in_flip_flops_count():
    """The same run (same seed: the same cycles) with the card's counters in memory
    (CardConfig.counters_in_memory) reads the same figures as with them in flip-flops."""
    results = [run(nodes=3, rtl_node=1, seed=8, operations=40, counters_in_memory=m)[1] for m in (False, True)]
    assert results[0].cycles == results[1].cycles
    assert results[1].rtl_counters == results[0].rtl_counters
    assert sum(1 for value in results[0].rtl_counters.values() if value) >= 5


def test_microcode_alone_keeps_the_cluster_coherent():
    cosim, result = run(nodes=3, rtl_node=1, seed=7, operations=60, microcode_only=True)
    assert check_history(result.accesses) == []
    assert result.rtl_counters["PROTOCOL_ERRORS"] == 0
    assert len(result.accesses) == 3 * 60
    assert result.rtl_counters["FAST_PATH"] == 0 and result.rtl_counters["INSTRUCTIONS"] > 0


def test_rtl_card_with_32_byte_lines_keeps_the_cluster_coherent():
    # Every card on 8-word lines, all 8 words of each hot line in use; six hot lines per home,
    # among them neighbours sharing a 64-byte block, which a 64-byte address split would merge.
    cosim, result = run(nodes=4, rtl_node=2, seed=6, operations=60, line_bytes=32, words_per_line=8, lines_per_home=6)
    assert cosim.geometry.line_bytes == 32
    assert check_history(result.accesses) == []
    assert result.rtl_counters["PROTOCOL_ERRORS"] == 0
    assert all(c[isa.Counter.PROTOCOL_ERROR] == 0 for c in result.model_counters)
    assert len(result.accesses) == 4 * 60
    assert {a.addr % 32 for a in result.accesses if a.node == 2} == set(range(0, 32, 4))
    assert result.rtl_counters["REQUESTS"] > 0 and result.rtl_counters["RUNS"] > 0


def test_numa_mode_rtl_card_is_coherent_and_uncached():
    cosim, result = run(nodes=3, rtl_node=1, seed=4, operations=60, numa=True)
    assert check_history(result.accesses) == []
    assert result.rtl_counters["PROTOCOL_ERRORS"] == 0
    assert result.rtl_counters["ROLLOUTS"] == 0 and result.rtl_counters["PURGES"] == 0


def test_full_outgoing_queue_suspends_sends_and_loses_nothing():
    cosim, result = run(nodes=3, rtl_node=2, seed=5, operations=60, egress_stalls=True)
    assert check_history(result.accesses) == []
    assert result.rtl_counters["SEND_STALLS"] > 0
    assert result.rtl_counters["PROTOCOL_ERRORS"] == 0
