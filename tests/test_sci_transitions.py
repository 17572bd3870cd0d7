"""Directed tests of the SCI state transitions on the real RTL.

Each script runs on four nodes, one access at a time, each to quiescence; after every step the
test checks the line's directory entry at its home and the state and list pointers of every copy.
Each script runs with the RTL card in every role (home, and each list position), the other
nodes being model cards running the same microcode.

Transitions covered (cache side / home side):
  read attach: HOME -> FRESH (ONLY_FRESH), FRESH -> FRESH (HEAD_FRESH; old head ONLY_FRESH -> TAIL,
  HEAD_FRESH -> MID), GONE -> GONE (HEAD_DIRTY; old head ONLY_DIRTY -> TAIL, HEAD_DIRTY -> MID);
  write: tail writer, mid writer and head writers roll out first; write attach on FRESH (purge of
  a 2-entry list) and GONE (data from the old head, purge); home read of a GONE line (CFETCH, list
  unchanged); home write of FRESH and GONE lines (recall purge, line HOME);
  rollouts: mid, tail, head fresh, head dirty (home lock, successor made head), only fresh,
  only dirty (write-back); NUMA mode: uncached reads and writes, nothing cached;
  a read miss into a full set: the word read uncached from the home, then the victim rolled out
  and the line attached (a GONE line attaches behind its victim's rollout, as before);
  the allocation filter: a line's first read miss is read uncached (nothing cached, the home's
  write then needs no recall), its second is cached, and a GONE line attaches at its first; a
  line whose copy is purged before the host hit it is dead (read uncached) until a write miss
  caches it and the host hits it.

The list scripts run with the allocation filter off (CTRL.CACHE_FIRST_MISS), so that every read
miss attaches; FIRST_READS runs with it on.
"""

from pathlib import Path

import pytest
from support.cosim import CoSimConfig, ScriptedCoSim

from numavia.base.coherence import HOME_OWNED, has_backward, has_forward
from numavia.base.coherence import CacheState as C
from numavia.base.coherence import MemoryState as M
from numavia.base.microcode import isa
from numavia.base.microcode.assembler import assemble

PROGRAM = assemble(Path(isa.__file__).with_name("sci.uasm").read_text())
L = 0 << 26 | 0x40  # a line of node 0
V1, V2, V3, V4 = 0x11111111, 0x22222222, 0x33333333, 0x44444444


def run(script, rtl_node, numa=False, microcode_only=False, line=L, cache_first_miss=True):
    steps = [s[0] for s in script]
    config = CoSimConfig(
        nodes=4,
        rtl_node=rtl_node,
        numa=numa,
        seed=rtl_node,
        microcode_only=microcode_only,
        cache_first_miss=cache_first_miss,
    )
    cosim = ScriptedCoSim(PROGRAM.words, config)
    snapshots = cosim.run_script(steps, line)
    for i, ((step, expected), snap) in enumerate(zip(script, snapshots)):
        where = f"step {i} {step} (RTL is node {rtl_node})"
        if "value" in expected:
            assert snap["value"] == expected["value"], where
        assert snap["dir"][:2] == (expected["dir"][0], False), f"{where}: directory {snap['dir']}"
        if expected["dir"][0] not in HOME_OWNED:  # (the head is meaningless there)
            assert snap["dir"][2] == expected["dir"][1], f"{where}: head {snap['dir']}"
        got = {}
        for node, (state, fwd, bwd) in snap["nodes"].items():
            got[node] = (C(state), fwd if has_forward(state) else None, bwd if has_backward(state) else None)
        assert got == expected["nodes"], where


def copy(state, fwd=None, bwd=None):
    return (state, fwd, bwd)


LIST_LIFECYCLE = [
    ((1, "read", L + 4, 0), {"value": 0, "dir": (M.FRESH, 1), "nodes": {1: copy(C.ONLY_FRESH)}}),
    ((2, "read", L, 0), {"dir": (M.FRESH, 2), "nodes": {2: copy(C.HEAD_FRESH, fwd=1), 1: copy(C.TAIL_VALID, bwd=2)}}),
    (
        (3, "read", L, 0),
        {
            "dir": (M.FRESH, 3),
            "nodes": {3: copy(C.HEAD_FRESH, fwd=2), 2: copy(C.MID_VALID, fwd=1, bwd=3), 1: copy(C.TAIL_VALID, bwd=2)},
        },
    ),
    ((1, "write", L, V1), {"dir": (M.GONE, 1), "nodes": {1: copy(C.ONLY_DIRTY)}}),  # tail writer
    (
        (2, "read", L, 0),
        {"value": V1, "dir": (M.GONE, 2), "nodes": {2: copy(C.HEAD_DIRTY, fwd=1), 1: copy(C.TAIL_VALID, bwd=2)}},
    ),
    (
        (3, "read", L, 0),
        {
            "value": V1,
            "dir": (M.GONE, 3),
            "nodes": {3: copy(C.HEAD_DIRTY, fwd=2), 2: copy(C.MID_VALID, fwd=1, bwd=3), 1: copy(C.TAIL_VALID, bwd=2)},
        },
    ),
    ((2, "write", L, V2), {"dir": (M.GONE, 2), "nodes": {2: copy(C.ONLY_DIRTY)}}),  # mid writer
    ((0, "read", L, 0), {"value": V2, "dir": (M.GONE, 2), "nodes": {2: copy(C.ONLY_DIRTY)}}),  # CFETCH
    (
        (3, "read", L, 0),
        {"value": V2, "dir": (M.GONE, 3), "nodes": {3: copy(C.HEAD_DIRTY, fwd=2), 2: copy(C.TAIL_VALID, bwd=3)}},
    ),
    ((3, "write", L, V3), {"dir": (M.GONE, 3), "nodes": {3: copy(C.ONLY_DIRTY)}}),  # head writer
    (
        (1, "read", L, 0),
        {"value": V3, "dir": (M.GONE, 1), "nodes": {1: copy(C.HEAD_DIRTY, fwd=3), 3: copy(C.TAIL_VALID, bwd=1)}},
    ),
    ((0, "write", L, V4), {"dir": (M.HOME, 0), "nodes": {}}),  # recall GONE
    ((2, "read", L, 0), {"value": V4, "dir": (M.FRESH, 2), "nodes": {2: copy(C.ONLY_FRESH)}}),
    ((0, "write", L + 8, V1), {"dir": (M.HOME, 0), "nodes": {}}),  # recall FRESH
    ((3, "read", L + 8, 0), {"value": V1, "dir": (M.FRESH, 3), "nodes": {3: copy(C.ONLY_FRESH)}}),
]

ROLLOUTS = [
    ((1, "read", L, 0), {"dir": (M.FRESH, 1), "nodes": {1: copy(C.ONLY_FRESH)}}),
    ((2, "read", L, 0), {"dir": (M.FRESH, 2), "nodes": {2: copy(C.HEAD_FRESH, fwd=1), 1: copy(C.TAIL_VALID, bwd=2)}}),
    (
        (3, "read", L, 0),
        {
            "dir": (M.FRESH, 3),
            "nodes": {3: copy(C.HEAD_FRESH, fwd=2), 2: copy(C.MID_VALID, fwd=1, bwd=3), 1: copy(C.TAIL_VALID, bwd=2)},
        },
    ),
    (
        (2, "flush", 0, 0),
        {
            "dir": (M.FRESH, 3),
            "nodes": {
                3: copy(C.HEAD_FRESH, fwd=1),  # mid leaves
                1: copy(C.TAIL_VALID, bwd=3),
            },
        },
    ),
    ((3, "flush", 0, 0), {"dir": (M.FRESH, 1), "nodes": {1: copy(C.ONLY_FRESH)}}),  # head leaves
    ((1, "flush", 0, 0), {"dir": (M.HOME, 0), "nodes": {}}),  # only fresh
    ((2, "write", L, V1), {"dir": (M.GONE, 2), "nodes": {2: copy(C.ONLY_DIRTY)}}),
    (
        (3, "read", L, 0),
        {"value": V1, "dir": (M.GONE, 3), "nodes": {3: copy(C.HEAD_DIRTY, fwd=2), 2: copy(C.TAIL_VALID, bwd=3)}},
    ),
    ((2, "flush", 0, 0), {"dir": (M.GONE, 3), "nodes": {3: copy(C.ONLY_DIRTY)}}),  # tail leaves
    (
        (1, "read", L, 0),
        {"value": V1, "dir": (M.GONE, 1), "nodes": {1: copy(C.HEAD_DIRTY, fwd=3), 3: copy(C.TAIL_VALID, bwd=1)}},
    ),
    ((1, "flush", 0, 0), {"dir": (M.GONE, 3), "nodes": {3: copy(C.ONLY_DIRTY)}}),  # head dirty leaves
    ((3, "flush", 0, 0), {"dir": (M.HOME, 0), "nodes": {}}),  # only dirty: write-back
    ((0, "read", L, 0), {"value": V1, "dir": (M.HOME, 0), "nodes": {}}),
]

NUMA = [
    ((1, "write", L, V1), {"dir": (M.HOME, 0), "nodes": {}}),
    ((2, "read", L, 0), {"value": V1, "dir": (M.HOME, 0), "nodes": {}}),
    ((0, "write", L + 4, V2), {"dir": (M.HOME, 0), "nodes": {}}),
    ((3, "read", L + 4, 0), {"value": V2, "dir": (M.HOME, 0), "nodes": {}}),
]

# Three lines of node 0 in the same set of the co-simulation's 2-set, 2-way caches.
LA, LB, LC = L, L + 0x80, L + 0x100
UNCACHED = {"dir": (M.HOME, 0), "nodes": {}}
LA_CACHED = {"dir": (M.FRESH, 1), "nodes": {1: copy(C.ONLY_FRESH)}}
LC_CACHED = {"dir": (M.FRESH, 1), "nodes": {1: copy(C.ONLY_FRESH)}}
LC_DIRTY = {"dir": (M.GONE, 2), "nodes": {2: copy(C.ONLY_DIRTY)}}

# Node 1 fills the set with LA and LB, then misses on LC: a line in memory (written by its home)
# or dirty in node 2's cache. Each step's expected view of LC and of the victim LA.
FULL_SET = {
    "memory": [
        ((0, "write", LC, V1), UNCACHED, UNCACHED),
        ((1, "read", LA, 0), UNCACHED, LA_CACHED),
        ((1, "read", LB, 0), UNCACHED, LA_CACHED),
        ((1, "read", LC, 0), {**LC_CACHED, "value": V1}, UNCACHED),  # LA left, LC filled after
        ((1, "read", LC, 0), {**LC_CACHED, "value": V1}, UNCACHED),  # a hit
    ],
    "dirty": [
        ((2, "write", LC, V2), LC_DIRTY, UNCACHED),
        ((1, "read", LA, 0), LC_DIRTY, LA_CACHED),
        ((1, "read", LB, 0), LC_DIRTY, LA_CACHED),
        (  # the home has no data to give: LA leaves first, then LC attaches as ever
            (1, "read", LC, 0),
            {"value": V2, "dir": (M.GONE, 1), "nodes": {1: copy(C.HEAD_DIRTY, fwd=2), 2: copy(C.TAIL_VALID, bwd=1)}},
            UNCACHED,
        ),
    ],
}


# The allocation filter on: node 1 reads the line once, its home writes it, node 1 reads it twice;
# node 2 writes it (dirty), node 3 reads it twice: GONE attaches at the first.
FIRST_READS = [
    ((1, "read", L, 0), {"value": 0, "dir": (M.SHOWN, 0), "nodes": {}}),  # read, not cached: SHOWN
    # The second miss, with no write since the first: cached.
    ((1, "read", L, 0), {"value": 0, "dir": (M.FRESH, 1), "nodes": {1: copy(C.ONLY_FRESH)}}),
    ((1, "read", L, 0), {"value": 0, "dir": (M.FRESH, 1), "nodes": {1: copy(C.ONLY_FRESH)}}),  # a hit
    ((2, "write", L, V2), {"dir": (M.GONE, 2), "nodes": {2: copy(C.ONLY_DIRTY)}}),  # writes attach at once
    (  # a first read of a GONE line: only the list has the data, so it attaches
        (3, "read", L, 0),
        {"value": V2, "dir": (M.GONE, 3), "nodes": {3: copy(C.HEAD_DIRTY, fwd=2), 2: copy(C.TAIL_VALID, bwd=3)}},
    ),
    (  # node 1's copy was purged, but the filter still remembers the line: cached again
        (1, "read", L + 4, 0),
        {
            "value": 0,
            "dir": (M.GONE, 1),
            "nodes": {1: copy(C.HEAD_DIRTY, fwd=3), 3: copy(C.MID_VALID, fwd=2, bwd=1), 2: copy(C.TAIL_VALID, bwd=3)},
        },
    ),
]


SHOWN = {"dir": (M.SHOWN, 0), "nodes": {}}
NOT_CACHED = {"dir": (M.HOME, 0), "nodes": {}}
# The allocation filter on: node 1's copy dies unused (its home's write purges it before any
# hit), so its next reads are not cached; a write miss caches the line again, the host hits it,
# and that copy's purge leaves the line alive; but the home wrote the line with that purge, so
# the next read miss is answered uncached (SHOWN), and the line is dead again.
DEAD_COPIES = [
    ((1, "read", L, 0), SHOWN),
    ((1, "read", L, 0), {"dir": (M.FRESH, 1), "nodes": {1: copy(C.ONLY_FRESH)}}),
    ((0, "write", L, V1), NOT_CACHED),  # the recall purges node 1's unused copy: dead
    ((1, "read", L, 0), {**SHOWN, "value": V1}),
    ((1, "read", L, 0), {**SHOWN, "value": V1}),  # still dead
    ((1, "write", L, V2), {"dir": (M.GONE, 1), "nodes": {1: copy(C.ONLY_DIRTY)}}),
    ((1, "read", L, 0), {"value": V2, "dir": (M.GONE, 1), "nodes": {1: copy(C.ONLY_DIRTY)}}),  # a hit
    ((0, "write", L + 4, V3), NOT_CACHED),  # this copy was hit: the line stays alive
    ((1, "read", L, 0), {**SHOWN, "value": V2}),  # a second miss after the home's write: declined
    ((1, "read", L, 0), {**SHOWN, "value": V2}),  # dead: read once
]

# A second miss of a line its home wrote since the first is answered uncached, and the line is
# dead (as a copy purged unused would have been): its later misses are read once, even with no
# write between; a write miss caches it again, and a hit keeps it alive.
REWRITTEN = [
    ((1, "read", L, 0), SHOWN),
    ((0, "write", L, V1), NOT_CACHED),  # unshown
    ((1, "read", L, 0), {**SHOWN, "value": V1}),  # a second miss, declined: dead
    ((1, "read", L, 0), {**SHOWN, "value": V1}),  # read once
    ((1, "write", L + 4, V2), {"dir": (M.GONE, 1), "nodes": {1: copy(C.ONLY_DIRTY)}}),
    ((1, "read", L, 0), {"value": V1, "dir": (M.GONE, 1), "nodes": {1: copy(C.ONLY_DIRTY)}}),  # a hit
]


@pytest.mark.parametrize("rtl_node", [0, 1])
def test_a_line_whose_copies_die_unused_is_not_cached(rtl_node):
    run(DEAD_COPIES, rtl_node, cache_first_miss=False)


@pytest.mark.parametrize("microcode_only", [False, True], ids=["fast_path", "microcode_only"])
@pytest.mark.parametrize("rtl_node", [0, 1])
def test_a_line_its_home_writes_between_two_reads_is_not_cached(rtl_node, microcode_only):
    run(REWRITTEN, rtl_node, microcode_only=microcode_only, cache_first_miss=False)


@pytest.mark.parametrize("microcode_only", [False, True], ids=["fast_path", "microcode_only"])
@pytest.mark.parametrize("rtl_node", [0, 1, 2, 3])
def test_first_read_misses_are_not_cached_and_second_ones_are(rtl_node, microcode_only):
    run(FIRST_READS, rtl_node, microcode_only=microcode_only, cache_first_miss=False)


@pytest.mark.parametrize("microcode_only", [False, True], ids=["fast_path", "microcode_only"])
@pytest.mark.parametrize("rtl_node", [0, 1, 2, 3])
def test_list_lifecycle(rtl_node, microcode_only):
    run(LIST_LIFECYCLE, rtl_node, microcode_only=microcode_only)


@pytest.mark.parametrize("rtl_node", [0, 1, 2, 3])
def test_rollouts_from_every_position(rtl_node):
    run(ROLLOUTS, rtl_node)


@pytest.mark.parametrize("rtl_node", [0, 2])
def test_numa_mode_accesses_are_uncached(rtl_node):
    run(NUMA, rtl_node, numa=True)


@pytest.mark.parametrize("line", [LC, LA], ids=["missed_line", "victim"])
@pytest.mark.parametrize("case, rtl_node", [("memory", 0), ("memory", 1), ("dirty", 0), ("dirty", 1), ("dirty", 2)])
def test_a_read_miss_into_a_full_set_ends_with_the_victim_out_and_the_line_cached(case, rtl_node, line):
    column = 1 if line == LC else 2
    run([(step[0], step[column]) for step in FULL_SET[case]], rtl_node, line=line)


def test_a_read_miss_into_a_full_set_does_not_wait_for_its_victim():
    """The RTL card as requester, every packet ``wire`` cycles on the way: the miss into the full
    set takes less than a round trip more than the first miss into the empty set (its victim's
    rollout, a round trip to the victim's home, comes after the host's word)."""
    wire = 20
    steps = [step for step, _, _ in FULL_SET["memory"]]
    config = CoSimConfig(nodes=4, rtl_node=1, min_latency=wire, max_latency=wire, cache_first_miss=True)
    snapshots = ScriptedCoSim(PROGRAM.words, config).run_script(steps, LC)
    first_miss, full_set_miss, hit = (snapshots[i]["cycles"] for i in (1, 3, 4))
    assert full_set_miss < first_miss + 2 * wire
    assert hit < first_miss / 4
