"""The coherence checker itself, on hand-written histories and states."""

from numavia.base.coherence import CacheState as C
from numavia.base.coherence import MemoryState as M
from numavia.base.sci_packet import line_address
from numavia.gateware.microcode.coherence_check import Access, NodeView, check_history, check_quiescent

A = 0x100


def w(value, issued, completed, node=0):
    return Access(node, A, True, value, issued, completed)


def r(value, issued, completed, node=1):
    return Access(node, A, False, value, issued, completed)


def test_coherent_history_passes():
    assert check_history([w(1, 0, 10), r(1, 11, 12), w(2, 20, 30), r(2, 31, 40), r(1, 25, 29)]) == []


def test_stale_read_is_caught():
    assert check_history([w(1, 0, 10), w(2, 20, 30), r(1, 31, 40)])


def test_initial_value_after_a_completed_write_is_caught():
    assert check_history([w(1, 0, 10), r(0, 11, 12)])


def test_read_from_the_future_is_caught():
    assert check_history([r(1, 0, 5), w(1, 6, 10)])


def test_value_nobody_wrote_is_caught():
    assert check_history([w(1, 0, 10), r(7, 11, 12)])


def test_node_going_back_in_time_is_caught():
    h = [w(1, 0, 10), w(2, 20, 30), r(2, 31, 32, node=1), r(1, 33, 34, node=1)]
    assert any("goes back" in v or "stale" in v for v in check_history(h))


def test_overlapping_accesses_may_see_either_value():
    assert check_history([w(1, 0, 10), w(2, 5, 30), r(1, 12, 40), r(2, 12, 41, node=2)]) == []


LINE = line_address(1, 0x40)


def views(directory, caches, memory=None):
    memory = memory or [0] * 16
    out = [NodeView(1, {LINE: directory}, {LINE: memory}, {})]
    for node, entry in caches.items():
        out.append(NodeView(node, {}, {}, {LINE: entry}))
    ids = {v.node for v in out}
    return out + [NodeView(n, {}, {}, {}) for n in range(4) if n not in ids]


def test_consistent_list_passes():
    data = [5] + [0] * 15
    v = views((M.GONE, False, 2), {2: (C.HEAD_DIRTY, 3, 0, data), 3: (C.TAIL_VALID, 0, 2, data)})
    assert check_quiescent(v, {LINE: 5}) == []


def test_broken_backward_pointer_is_caught():
    v = views((M.FRESH, False, 2), {2: (C.HEAD_FRESH, 3, 0, [0] * 16), 3: (C.TAIL_VALID, 0, 0, [0] * 16)})
    assert any("backward" in x for x in check_quiescent(v, {}))


def test_copy_outside_the_list_is_caught():
    v = views((M.HOME, False, 0), {2: (C.ONLY_FRESH, 0, 0, [0] * 16)})
    assert any("outside" in x for x in check_quiescent(v, {}))


def test_transient_state_and_lock_are_caught():
    v = views((M.FRESH, True, 2), {2: (C.PENDING, 0, 0, [0] * 16)})
    found = check_quiescent(v, {})
    assert any("transient" in x for x in found) and any("locked" in x for x in found)


def test_lost_write_is_caught():
    v = views((M.HOME, False, 0), {}, memory=[1] + [0] * 15)
    assert any("last write" in x for x in check_quiescent(v, {LINE: 2}))
