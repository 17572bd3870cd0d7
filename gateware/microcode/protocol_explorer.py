"""Exhaustive exploration of the SCI microcode: every interleaving of a few model cards sharing one
line, each state checked.

The cards (:class:`~.model.CardModel`) run the real control-store image. A global state is the
cards' snapshots, the packets in flight and each host's progress. From a state, every enabled
event is a successor:

* a host issues its next operation (read, write or flush of the line; one at a time per host);
* a card starts a queued local request in a free transaction context;
* a packet in flight is delivered and its context runs (any packet: the network reorders, unless
  ``ordered``, which keeps per (source, target) order);
* a context waiting out a BACKOFF retries (backoff is a choice, not a timer).

A run of the sequencer is atomic, as in the gateware. The cards never give up retrying
(``retry_limit=None``), so retry counts leave the state and a NACK loop closes a cycle.

Checked in every state: no model fault, no protocol error counted, every completion OK; reads
return a value the word held while the read was in flight; the hosts' hits (the local access
controller's rules) see the last written value, and a node that may write without the sequencer
is the only one that may read so; the home's head walks forward pointers to holders without a
loop, each step from a non-leaving entry matched by the successor's backward pointer; memory HOME
has no stable copy, memory FRESH no stable dirty one. In every quiescent state (nothing in flight):
:func:`~.coherence_check.check_quiescent`, the full list and data check. At the end: no state
without a successor but the final ones (every operation completed, nothing in flight), and from
every state a final state is still reachable (no livelock).
"""

import time
from array import array
from collections import deque
from dataclasses import dataclass, field

from numavia.base import coherence as coh
from numavia.base.coherence import CacheState, MemoryState
from numavia.base.microcode import isa
from numavia.base.microcode.isa import LocalKind
from numavia.base.sci_packet import Command, PacketType, Status, line_address

from .cluster_model import card_views
from .coherence_check import check_quiescent, walk_list
from .model import CardModel, LocalRequest, ModelError, packet_field, packet_from_key, packet_key

KINDS = ("read", "write", "flush")
_LOCAL_KIND = {"read": LocalKind.READ, "write": LocalKind.WRITE}
# Counters that say which protocol paths a transition took (the report's events).
_EVENT_COUNTERS = (isa.Counter.NACK_SENT, isa.Counter.ROLLOUT, isa.Counter.PURGE, isa.Counter.REWRITTEN_READ)


@dataclass(frozen=True)
class ExploreConfig:
    nodes: int = 3
    home: int = 0  # the node whose slice holds the line
    ops: tuple = (1, 1, 1)  # host operations per node (0: the node only answers)
    kinds: tuple = KINDS  # what each operation may be: every choice is explored
    line_bytes: int = coh.MIN_LINE_BYTES  # the smallest line: the protocol is the same
    ordered: bool = False  # keep per (source, target) order (the protocol must not need it)
    max_states: int = None  # stop (truncated) beyond this many states
    cache_first_miss: bool = False  # the cards' allocation filter off: every read miss caches

    def __post_init__(self):
        if self.nodes < 2:
            raise ValueError("at least 2 nodes share a line")
        if not 0 <= self.home < self.nodes:
            raise ValueError(f"the home must be one of the nodes 0..{self.nodes - 1}, not {self.home}")
        if len(self.ops) != self.nodes or any(n < 0 for n in self.ops):
            raise ValueError(f"ops gives each of the {self.nodes} nodes a count of operations, not {self.ops}")
        if not self.kinds or set(self.kinds) - set(KINDS):
            raise ValueError(f"kinds are among {', '.join(KINDS)}, not {self.kinds}")
        # Write values are (node + 1) << 8 | operation number: unique, never the initial 0.
        if max(self.ops) > 255:
            raise ValueError("at most 255 operations per node")


@dataclass
class Exploration:
    config: ExploreConfig
    states: int = 0
    transitions: int = 0
    depth: int = 0
    final_states: int = 0
    seconds: float = 0.0
    truncated: bool = False
    violations: list = field(default_factory=list)  # (message, trace lines)
    deadlocks: list = field(default_factory=list)  # (message, trace lines)
    cache_states: dict = field(default_factory=dict)  # node -> set of CacheState of the line
    memory_states: set = field(default_factory=set)  # (MemoryState, locked) at the home
    commands: set = field(default_factory=set)  # Command names delivered
    events: dict = field(default_factory=dict)  # counter name -> transitions that counted it

    @property
    def ok(self):
        return not (self.violations or self.deadlocks or self.truncated)


class _Violation(Exception):
    pass


class _Lines(list):
    """The readable lines of an event, kept only when asked for (the search does not need them)."""

    def __init__(self, keep):
        super().__init__()
        self.keep = keep

    def add(self, make):
        if self.keep:
            self.append(make())


class ProtocolExplorer:
    def __init__(self, program_words, config=ExploreConfig(), log=None, progress_every=50_000):
        self.cfg = config
        self.log = log
        self.progress_every = progress_every
        self.line = line_address(config.home, 0, config.line_bytes)
        self.cards = [
            CardModel(
                n,
                program_words,
                sets=1,
                ways=1,
                slice_bytes=config.line_bytes,
                line_bytes=config.line_bytes,
                retry_limit=None,
                cache_first_miss=config.cache_first_miss,
            )
            for n in range(config.nodes)
        ]
        self._snaps, self._snap_ids = [], {}
        self._interned = {}

    # --- state encoding ----------------------------------------------------------------------------
    # state = (card snapshot ids, packets in flight, hosts, last written value)
    # host = (operations done, pending) with pending None, ("read", values the word held meanwhile),
    # ("write", value) or ("flush",)

    def _card_id(self, card):
        snap = card.snapshot(with_retries=False)
        got = self._snap_ids.get(snap)
        if got is None:
            got = self._snap_ids[snap] = len(self._snaps)
            self._snaps.append(snap)
        return got

    def _intern(self, key):
        return self._interned.setdefault(key, key)

    def _network(self, packets):
        """Packets in flight, canonical: sorted, or with ``ordered`` grouped by (source, target)
        in sending order within each group."""
        return tuple(sorted(packets, key=_pair if self.cfg.ordered else None))

    def initial(self):
        cards = tuple(self._card_id(c) for c in self.cards)
        return (cards, (), tuple((0, None) for _ in self.cards), 0)

    def _line_of(self, snap):
        """(state, fwd, bwd, data) of the line in a card snapshot's network cache, or None."""
        for s, ways in enumerate(snap.tags):
            for w, (addr, state, fwd, bwd) in enumerate(ways):
                if state and addr == self.line:
                    return state, fwd, bwd, snap.cdata[s][w]
        return None

    # --- events ------------------------------------------------------------------------------------

    def events(self, state):
        cards, network, hosts, _ = state
        out = []
        for n, (done, pending) in enumerate(hosts):
            if pending is None and done < self.cfg.ops[n]:
                for kind in self.cfg.kinds:
                    # A read misses as its line's first (read without caching) or its second miss
                    # (cached): the allocation filter may have forgotten the line at any time.
                    remembered = (True, False) if kind == "read" and not self.cfg.cache_first_miss else (True,)
                    out += [("issue", n, kind, r) for r in remembered]
        for n, card_id in enumerate(cards):
            snap = self._snaps[card_id]
            busy = {c.index for c in snap.contexts}
            if snap.local_queue and any(i not in busy for i in range(isa.NUM_TRANSACTIONS)):
                out.append(("start", n))
            out += [("wake", n, c.index) for c in snap.contexts if c.backed_off]
        seen = set()
        for p in network:
            pair = _pair(p)
            if self.cfg.ordered and pair in seen:
                continue  # an older packet of the same source and target goes first
            seen.add(pair)
            if p not in seen:
                seen.add(p)
                out.append(("deliver", pair[1], p))
        return out

    def apply(self, state, event, describe=False):
        """(next state, the event's readable lines if ``describe``, {counter: count}); raises
        _Violation (message, lines)."""
        cards, network, hosts, last = state
        hosts, network = list(hosts), list(network)
        kind, n = event[:2]
        card = self.cards[n]
        card.restore(self._snaps[cards[n]])
        card.counters = [0] * isa.NUM_COUNTERS
        lines = _Lines(describe)
        try:
            if kind == "issue":
                last = self._issue(card, hosts, last, event[2], event[3], lines)
            elif kind == "start":
                starting = card.local_queue[0].kind.name.lower()
                lines.add(lambda: f"node {n} starts its {starting}")
                card.start_local()
            elif kind == "wake":
                lines.add(lambda: f"node {n} retries (context {event[2]})")
                card.wake(event[2])
            else:
                network.remove(event[2])
                packet = packet_from_key(event[2])
                lines.add(lambda: f"node {n} gets {describe_packet(packet)}")
                card.handle_packet(packet)
        except ModelError as e:
            raise _Violation(f"model fault: {e}", lines) from None
        card.filter_forget()  # canonical: every read chooses afresh what the filter remembers
        for packet in card.outbox:
            if not 0 <= packet.target < self.cfg.nodes:
                raise _Violation(f"node {n} sent a packet to node {packet.target}", lines)
            lines.add(lambda p=packet: f"  sends {describe_packet(p)}")
            network.append(self._intern(packet_key(packet)))
        for request, status, words in card.completions:
            last = self._complete(n, hosts, last, request, status, words, lines)
        if card.counters[isa.Counter.PROTOCOL_ERROR]:
            raise _Violation(f"node {n} counted a protocol error", lines)
        cards = cards[:n] + (self._card_id(card),) + cards[n + 1 :]
        counted = {c: card.counters[c] for c in _EVENT_COUNTERS if card.counters[c]}
        return (cards, self._network(network), tuple(hosts), last), lines, counted

    def _issue(self, card, hosts, last, kind, remembered, lines):
        n = card.node_id
        done, _ = hosts[n]
        if kind == "flush":
            card.flush()
            hosts[n] = (done, ("flush",))
            lines.add(lambda: f"host {n} flushes")
            return last
        value = (n + 1) << 8 | (done + 1) if kind == "write" else 0
        data = [value] + [0] * (self.cfg.line_bytes // 4 - 1)
        request = LocalRequest(_LOCAL_KIND[kind], self.line, 0, 1, data, 0xF if kind == "write" else 0)
        card.filter_remembers(self.line, remembered)
        served = card.local_access(request)
        what = f"host {n} {kind}s" + (f" {value:#x}" if kind == "write" else "")
        if served is None:
            once = ", its first: not cached" if request.kind == LocalKind.READ_ONCE else ""
            lines.add(lambda: f"{what}: miss{once}, to the sequencer")
            hosts[n] = (done, (kind, value) if kind == "write" else (kind, (last,)))
            return last
        lines.add(lambda: f"{what}: hit" + (f", reads {served[0]:#x}" if kind == "read" else ""))
        hosts[n] = (done + 1, None)
        if kind == "read":
            if served[0] != last:
                raise _Violation(f"node {n} read {served[0]:#x} from its hit, the last write was {last:#x}", lines)
            return last
        return self._written(hosts, value)

    def _complete(self, n, hosts, last, request, status, words, lines):
        done, pending = hosts[n]
        if pending is None:
            raise _Violation(f"node {n} completed a {request.kind.name.lower()} its host never issued", lines)
        kind = pending[0]
        lines.add(lambda: f"  completes the {kind} ({Status(status).name})" + (f": {words[0]:#x}" if words else ""))
        if status != Status.OK:
            raise _Violation(f"node {n}'s {kind} failed ({Status(status).name})", lines)
        hosts[n] = (done + 1, None)
        if kind == "read" and words[0] not in pending[1]:
            held = ", ".join(f"{v:#x}" for v in pending[1])
            raise _Violation(f"node {n} read {words[0]:#x}, but the word held only {held} meanwhile", lines)
        return self._written(hosts, pending[1]) if kind == "write" else last

    @staticmethod
    def _written(hosts, value):
        """A write performed: pending reads may now return ``value`` too."""
        for i, (done, pending) in enumerate(hosts):
            if pending is not None and pending[0] == "read" and value not in pending[1]:
                hosts[i] = (done, ("read", pending[1] + (value,)))
        return value

    # --- invariants --------------------------------------------------------------------------------

    def quiescent(self, state):
        cards, network, hosts, _ = state
        return not network and all(p is None for _, p in hosts) and all(not self._snaps[c].contexts for c in cards)

    def final(self, state):
        return self.quiescent(state) and all(done == ops for (done, _), ops in zip(state[2], self.cfg.ops))

    def check(self, state):
        """Violations of the invariants in ``state`` (strings)."""
        cards, _, _, last = state
        home = self.cfg.home
        snaps = [self._snaps[c] for c in cards]
        mstate, locked, head = snaps[home].directory[0]
        memory = snaps[home].home[0]
        lines = {n: self._line_of(s) for n, s in enumerate(snaps)}
        found = []
        # What the hosts' hits would see (the local access controller's rules).
        readers = [n for n, h in lines.items() if h and h[0] in coh.READ_HIT]
        writers = [n for n, h in lines.items() if h and h[0] in coh.WRITE_HIT]
        values = {n: lines[n][3][0] for n in readers}
        if mstate in (*coh.HOME_OWNED, MemoryState.FRESH):
            readers.append(home)
            values[home] = memory[0]
        if mstate in coh.HOME_OWNED and not locked:
            writers.append(home)
        for n in sorted(values):
            if values[n] != last:
                found.append(f"node {n} would read {values[n]:#x} on a hit, the last write was {last:#x}")
        for w in writers:
            others = sorted(set(readers) - {w})
            if others:
                found.append(f"node {w} may write without the sequencer while node(s) {others} may read")
        # The list as the home sees it.
        holders = {n: h for n, h in lines.items() if h}
        if mstate in coh.HOME_OWNED:
            stable = sorted(n for n, h in holders.items() if h[0] in coh.STABLE_VALID)
            if stable:
                found.append(f"memory {MemoryState(mstate).name}, but node(s) {stable} hold the line")
        elif not (locked and self._recalling(snaps[home])):  # a recall purges from the head on
            walked, broken = walk_list(head, holders)
            if broken:
                found.append(f"the list from the home's head {broken}")
            for node, nxt in zip(walked, walked[1:]):
                state_, bwd = holders[nxt][0], holders[nxt][2]
                if holders[node][0] not in coh.LEAVING and not (coh.has_backward(state_) and bwd == node):
                    found.append(f"node {node} points forward to node {nxt}, which does not point back")
        if mstate == MemoryState.FRESH:
            # (A leaver the home has already let go may still be LEAVE_*_DIRTY.)
            dirty = sorted(n for n, h in holders.items() if h[0] in coh.DIRTY - coh.LEAVING)
            if dirty:
                found.append(f"memory FRESH, but node(s) {dirty} hold the line dirty")
        if self.quiescent(state):
            last_values = {self.line: last} if last else {}
            cards_ = []
            for card, snap in zip(self.cards, snaps):
                card.restore(snap)
                cards_.append(card)
            found += check_quiescent(card_views(cards_), last_values, line_bytes=self.cfg.line_bytes)
        return found

    def _recalling(self, home_snap):
        """The home's own write is purging the list (the directory's head is stale meanwhile)."""
        return any(
            c.index < isa.NUM_TRANSACTIONS and c.request and c.request[0] == LocalKind.WRITE for c in home_snap.contexts
        )

    def summary(self, state):
        """One line: the directory entry and every copy of the line."""
        cards, network, _, last = state
        mstate, locked, head = self._snaps[cards[self.cfg.home]].directory[0]
        parts = [f"home {MemoryState(mstate).name}" + (" locked" if locked else "") + f" head {head}"]
        for n, c in enumerate(cards):
            h = self._line_of(self._snaps[c])
            if h:
                ptrs = (f" fwd {h[1]}" if coh.has_forward(h[0]) else "") + (
                    f" bwd {h[2]}" if coh.has_backward(h[0]) else ""
                )
                parts.append(f"node {n} {CacheState(h[0]).name}{ptrs}")
        parts.append(f"{len(network)} in flight, last write {last:#x}")
        return "; ".join(parts)

    # --- the search --------------------------------------------------------------------------------

    def run(self):
        cfg = self.cfg
        result = Exploration(cfg)
        result.cache_states = {n: set() for n in range(cfg.nodes)}
        started = time.monotonic()
        initial = self.initial()
        index = {initial: 0}
        parent, via, depth = array("l", [-1]), [None], array("l", [0])
        states = [initial]
        edges_from, edges_to = array("l"), array("l")
        final = []
        queue = deque([0])
        next_report = self.progress_every

        def trace(i, last_lines=()):
            """Readable lines from the initial state to state ``i`` (then ``last_lines``)."""
            path = []
            while i > 0:
                path.append(i)
                i = parent[i]
            steps = [(states[parent[j]], via[j], states[j]) for j in reversed(path)]
            out = [f"    {self.summary(initial)}"] + self._describe(steps)
            if last_lines:
                out += [f"{len(path) + 1:3}. {last_lines[0]}"] + [f"     {x}" for x in last_lines[1:]]
            return out

        def note(i, state):
            snaps = [self._snaps[c] for c in state[0]]
            for n, s in enumerate(snaps):
                h = self._line_of(s)
                result.cache_states[n].add(CacheState(h[0] if h else CacheState.INVALID))
            mstate, locked, _ = snaps[cfg.home].directory[0]
            result.memory_states.add((MemoryState(mstate), bool(locked)))
            problems = self.check(state)
            if problems:
                result.violations.append(("; ".join(problems), trace(i)))

        note(0, initial)
        while queue and not result.violations:
            i = queue.popleft()
            state = states[i]
            events = self.events(state)
            if self.final(state):
                final.append(i)
            elif not events:
                result.deadlocks.append((f"no event possible: {self.summary(state)}", trace(i)))
                break
            for event in events:
                try:
                    nxt, _, counted = self.apply(state, event)
                except _Violation:
                    try:
                        self.apply(state, event, describe=True)  # again, for its lines
                    except _Violation as v:
                        message, lines = v.args
                        result.violations.append((message, trace(i, lines)))
                    break
                if event[0] == "deliver":
                    result.commands.add(Command(packet_field(event[2], "cmd")).name)
                for counter in counted:
                    result.events[counter.name] = result.events.get(counter.name, 0) + 1
                result.transitions += 1
                j = index.get(nxt)
                if j is None:
                    j = index[nxt] = len(states)
                    states.append(nxt)
                    parent.append(i)
                    via.append(event)
                    depth.append(depth[i] + 1)
                    note(j, nxt)
                    if result.violations:
                        break
                    queue.append(j)
                edges_from.append(i)
                edges_to.append(j)
            if cfg.max_states is not None and len(states) > cfg.max_states and queue:
                result.truncated = True
                break
            if self.log and len(states) >= next_report:
                next_report += self.progress_every
                self.log(
                    f"{len(states)} states, {result.transitions} transitions, {len(queue)} to expand, "
                    f"depth {depth[i]}, {time.monotonic() - started:.0f} s"
                )
        result.states = len(states)
        result.depth = max(depth)
        result.final_states = len(final)
        if result.ok:
            reaches = self._reaching_final(len(states), final, edges_from, edges_to)
            doomed = reaches.find(0)
            if doomed >= 0:
                loop = self._stuck_loop(states, doomed, reaches, index)
                result.deadlocks.append(
                    (
                        f"no final state is reachable any more: {self.summary(states[doomed])}",
                        trace(doomed) + ["  then, for ever:"] + self._describe(loop, depth[doomed] + 1),
                    )
                )
        result.seconds = time.monotonic() - started
        return result

    @staticmethod
    def _reaching_final(count, final, edges_from, edges_to):
        """1 for each state from which a final state is reachable, else 0."""
        incoming = [[] for _ in range(count)]
        for a, b in zip(edges_from, edges_to):
            incoming[b].append(a)
        reaches = bytearray(count)
        stack = list(final)
        for f in final:
            reaches[f] = 1
        while stack:
            for a in incoming[stack.pop()]:
                if not reaches[a]:
                    reaches[a] = 1
                    stack.append(a)
        return reaches

    def _stuck_loop(self, states, start, reaches, index, limit=40):
        """Steps from ``start`` round a cycle of states none of which can finish (all of a
        stuck state's successors are stuck): what the cards do for ever."""
        path, steps = [start], []
        while len(steps) < limit:
            state = states[path[-1]]
            successors = [(e, index[self.apply(state, e)[0]]) for e in self.events(state)]
            back = [(e, j) for e, j in successors if j in path]
            event, j = (back or [(e, j) for e, j in successors if not reaches[j]])[0]
            steps.append((state, event, states[j]))
            if back:
                break
            path.append(j)
        return steps

    def _describe(self, steps, first=1):
        """Readable lines of (state, event, next state) steps."""
        out = []
        for number, (before, event, after) in enumerate(steps, first):
            _, lines, _ = self.apply(before, event, describe=True)
            out += [f"{number:3}. {lines[0]}"] + [f"     {x}" for x in lines[1:]]
            out.append(f"     -> {self.summary(after)}")
        return out


def _pair(key):
    return packet_field(key, "source"), packet_field(key, "target")


def describe_packet(p):
    """A packet as a readable phrase."""
    name = Command(p.cmd).name
    extra = (f" ptr {p.ptr}" if p.ptr_valid else "") + (" flag" if p.flag else "") + (" +data" if p.has_data else "")
    if p.ptype == PacketType.RESPONSE:
        if name.startswith("M") and p.status == Status.OK:
            extra = f" memory was {MemoryState(p.mstate).name}" + extra
        return f"{name} answer {Status(p.status).name} from {p.source} to {p.target}{extra}"
    return f"{name} from {p.source} to {p.target}{extra}"


def format_counterexample(message, lines):
    return "\n".join([f"VIOLATION: {message}", *lines])
