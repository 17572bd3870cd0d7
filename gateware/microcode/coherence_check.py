"""Checks of the SPEC's coherence invariants, for the protocol model and for the RTL cluster.

* :func:`check_history`: every read returns a value a linearisable memory could return for that
  word (per-location coherence), judged only on orders that are certain from issue and completion
  times. Write values must be unique per word (the stimulus makes them so).
* :func:`check_quiescent`: at quiescence, per line: no transient states, the sharing list
  reachable from the home's head pointer is consistent in both directions, every valid copy is on
  it, the memory state matches the list (HOME: empty, FRESH: clean copies equal to memory,
  GONE: a dirty head), copies agree, and the line's data equals the last write of each word.
"""

from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass

from numavia.base import coherence as coh
from numavia.base.coherence import LINE_BYTES, CacheState, MemoryState


@dataclass
class Access:
    node: int
    addr: int  # global byte address of the word: line address + 4 * word
    write: bool
    value: int
    issued: int  # a global order stamp (cycle or event number) when issued
    completed: int  # ... and when the host saw it complete


def check_history(accesses, initial=0):
    """List of violation strings (empty if the history is coherent).

    Each access took effect at some unknown instant between ``issued`` and ``completed``
    (a write performs at its home, in its owner's cache...). Only orders that are certain are
    used, so a correct memory never fails the check:

    * a read cannot return a write issued after the read completed;
    * a read is stale if some other write certainly came after the one it returned and
      certainly before the read (completed before the read was issued);
    * a read of the initial value is stale if any write completed before the read was issued;
    * a node's later read cannot return a write that certainly precedes the one its earlier
      read returned.
    """
    violations = []
    writes = defaultdict(list)
    for a in accesses:
        if a.write:
            writes[a.addr].append(a)
    by_value, by_completion = {}, {}
    for addr, ws in writes.items():
        values = [w.value for w in ws]
        if len(set(values)) != len(values) or initial in values:
            violations.append(f"{addr:#x}: write values must be unique and differ from the initial value")
        by_value[addr] = {w.value: w for w in ws}
        ws = sorted(ws, key=lambda w: w.completed)
        completions = [w.completed for w in ws]
        latest_issue, running = [], None
        for w in ws:
            running = w.issued if running is None else max(running, w.issued)
            latest_issue.append(running)
        by_completion[addr] = (completions, latest_issue)

    def where(a):
        return f"node {a.node} read {a.value:#x} at {a.addr:#x} (issued {a.issued}, completed {a.completed})"

    last_seen = {}
    for a in sorted((a for a in accesses if not a.write), key=lambda a: a.issued):
        completions, latest_issue = by_completion.get(a.addr, ([], []))
        before = bisect_left(completions, a.issued)  # writes completed before the read began
        if a.value == initial:
            if before:
                violations.append(f"{where(a)}: stale, a write completed at {completions[before - 1]}")
            continue
        w = by_value.get(a.addr, {}).get(a.value)
        if w is None:
            violations.append(f"{where(a)}: no write wrote it")
            continue
        if w.issued > a.completed:
            violations.append(f"{where(a)}: the write was issued later, at {w.issued}")
        if before and latest_issue[before - 1] > w.completed:
            violations.append(
                f"{where(a)}: stale, a newer write was issued after {w.completed} and completed before the read"
            )
        previous = last_seen.get((a.node, a.addr))
        if previous is not None and w is not previous and w.completed < previous.issued:
            violations.append(f"{where(a)}: goes back before the value node {a.node} read earlier")
        last_seen[(a.node, a.addr)] = w
    return violations


@dataclass
class NodeView:
    """What a checker needs of one card at quiescence."""

    node: int
    directory: dict  # line address -> (mstate, locked, head)   (this node's home lines)
    memory: dict  # line address -> list of the line's words   (this node's home lines)
    cache: dict  # line address -> (state, fwd, bwd, words)  (valid or transient ways)


def check_quiescent(views, last_values, initial=0, line_bytes=LINE_BYTES):
    """``views``: NodeView per node; ``last_values``: {word byte address: last written value};
    ``line_bytes``: the cards' line size."""
    violations = []
    nodes = {v.node: v for v in views}
    lines = set()
    for v in views:
        lines.update(v.cache)
        lines.update(a - a % line_bytes for a in last_values)
    for v in views:
        for addr, (state, *_rest) in v.cache.items():
            if state in coh.TRANSIENT:
                violations.append(f"node {v.node} line {addr:#x}: transient state {CacheState(state).name}")
    for line in sorted(lines):
        home = line >> 26
        if home not in nodes:
            violations.append(f"line {line:#x}: home {home} is not in the cluster")
            continue
        mstate, locked, head = nodes[home].directory.get(line, (MemoryState.HOME, False, 0))
        memory = nodes[home].memory.get(line, [initial] * (line_bytes // 4))
        holders = {n: v.cache[line] for n, v in nodes.items() if line in v.cache}
        where = f"line {line:#x}"
        if locked:
            violations.append(f"{where}: still locked at its home")
        members = []
        if mstate not in coh.HOME_OWNED:
            members, broken = walk_list(head, holders)
            for prev, node in zip([None] + members, members):
                state, _, bwd, _ = holders[node]
                if prev is None and not coh.is_head(state):
                    violations.append(f"{where}: head node {node} is {CacheState(state).name}")
                if prev is not None and (not coh.has_backward(state) or bwd != prev):
                    violations.append(f"{where}: node {node}'s backward pointer does not lead to {prev}")
            if broken:
                violations.append(f"{where}: sharing list {broken}")
        stray = sorted(set(holders) - set(members))
        if stray:
            violations.append(f"{where}: node(s) {stray} hold the line outside its sharing list")
        if mstate in coh.HOME_OWNED and members:
            violations.append(f"{where}: memory is {MemoryState(mstate).name} but a list exists")
        if members:
            head_state = holders[members[0]][0]
            dirty = head_state in coh.DIRTY
            if mstate == MemoryState.FRESH and dirty:
                violations.append(f"{where}: memory FRESH but the head is {CacheState(head_state).name}")
            if mstate == MemoryState.GONE and not dirty:
                violations.append(f"{where}: memory GONE but the head is {CacheState(head_state).name}")
            datas = {tuple(holders[n][3]) for n in members}
            if len(datas) > 1:
                violations.append(f"{where}: the copies of the list differ")
            current = list(holders[members[0]][3]) if dirty else memory
            if mstate == MemoryState.FRESH and any(tuple(memory) != d for d in datas):
                violations.append(f"{where}: a clean copy differs from memory")
        else:
            current = memory
        for word in range(line_bytes // 4):
            addr = line + 4 * word
            if addr in last_values and current[word] != last_values[addr]:
                violations.append(
                    f"{where} word {word}: holds {current[word]:#x}, last write was {last_values[addr]:#x}"
                )
    return violations


def walk_list(head, holders):
    """The nodes of a sharing list, from the home's ``head`` along forward pointers, and what cut
    the walk short (a loop, a node not holding the line) or None. ``holders``: node -> (state,
    fwd, bwd, ...) of the nodes holding the line."""
    members, node = [], head
    while True:
        if node in members:
            return members, f"loops at node {node}"
        if node not in holders:
            return members, f"reaches node {node}, which does not hold the line"
        members.append(node)
        state, fwd = holders[node][:2]
        if not coh.has_forward(state):
            return members, None
        node = fwd
