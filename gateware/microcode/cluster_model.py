"""A ring of model cards (:class:`~.model.CardModel`) with a network and hosts issuing random
loads and stores: the fast, Python-level stress of the microcode, before it meets the RTL.

The network keeps per (source, target) order, as the ring link does, with random latencies.
Every host access is recorded for :func:`numavia.gateware.microcode.coherence_check.check_history`; at the end the
cards are inspected with :func:`numavia.gateware.microcode.coherence_check.check_quiescent`.
"""

import heapq
import random
from dataclasses import dataclass, field

from numavia.base.coherence import LINE_BYTES
from numavia.base.microcode.isa import LocalKind
from numavia.base.sci_packet import Status, line_address

from .coherence_check import Access, NodeView
from .model import CardModel, LocalRequest


class Deadlock(RuntimeError):
    pass


@dataclass
class StressConfig:
    nodes: int = 4
    operations: int = 2000  # per node
    lines_per_home: int = 3  # the hot set: this many lines in each node's slice
    words_per_line: int = 2  # words used in each hot line
    write_fraction: float = 0.4
    sets: int = 2  # tiny cache: forces evictions
    ways: int = 2
    line_bytes: int = LINE_BYTES  # every card's line size (coherence.LINE_SIZES)
    numa: bool = False
    cache_first_miss: bool = False  # no allocation filter
    filter_lines: int = 4  # a small filter forgets often: first and second misses both come often
    min_latency: int = 4
    max_latency: int = 60
    max_gap: int = 40  # host think time between accesses
    watchdog: int = 2_000_000  # cycles an access may take before we call it a deadlock
    seed: int = 1


@dataclass
class StressResult:
    accesses: list = field(default_factory=list)
    cycles: int = 0
    packets: int = 0
    counters: list = field(default_factory=list)
    stats: list = field(default_factory=list)


class ClusterModel:
    def __init__(self, program_words, config):
        self.cfg = config
        self.rng = random.Random(config.seed)
        slice_bytes = max(64, config.lines_per_home * 4) * config.line_bytes
        self.cards = [
            CardModel(
                n,
                program_words,
                sets=config.sets,
                ways=config.ways,
                slice_bytes=slice_bytes,
                line_bytes=config.line_bytes,
                numa=config.numa,
                cache_first_miss=config.cache_first_miss,
                filter_lines=config.filter_lines,
                seed=config.seed,
            )
            for n in range(config.nodes)
        ]
        self.events = []
        self.seq = 0
        self.now = 0
        self.busy_until = [0] * config.nodes
        self.last_delivery = {}
        self.packets = 0

    def _push(self, time, kind, *payload):
        self.seq += 1
        heapq.heappush(self.events, (time, self.seq, kind, payload))

    def _hot_words(self):
        words, line_bytes = [], self.cfg.line_bytes
        for home in range(self.cfg.nodes):
            for line in range(self.cfg.lines_per_home):
                base = line_address(home, (line * 5 % 64) * line_bytes, line_bytes)
                words += [base + 4 * w * 7 % line_bytes for w in range(self.cfg.words_per_line)]
        return words

    def run(self):
        cfg = self.cfg
        line_bytes = cfg.line_bytes
        result = StressResult()
        hot = self._hot_words()
        remaining = [cfg.operations] * cfg.nodes
        pending = [None] * cfg.nodes  # (request, Access) in flight per host
        write_counter = [0] * cfg.nodes

        def issue(node):
            if remaining[node] == 0:
                return
            remaining[node] -= 1
            addr = self.rng.choice(hot)
            line, word = addr - addr % line_bytes, (addr % line_bytes) // 4
            write = self.rng.random() < cfg.write_fraction
            value = 0
            if write:
                write_counter[node] += 1
                value = (node + 1) << 24 | write_counter[node]
            data = [0] * (line_bytes // 4)
            data[word] = value
            request = LocalRequest(
                LocalKind.WRITE if write else LocalKind.READ, line, word, 1, data, (0xF << (4 * word)) if write else 0
            )
            access = Access(node, addr, write, value, self.seq, None)
            card = self.cards[node]
            served = card.local_access(request)
            if served is not None:
                self.seq += 1
                access.completed = self.seq
                if not write:
                    access.value = served[0]
                result.accesses.append(access)
                self._push(self.now + 2 + self.rng.randrange(cfg.max_gap), "host", node)
            else:
                pending[node] = (request, access, self.now)
                self._push(self.now, "card", node)

        for node in range(cfg.nodes):
            self._push(self.rng.randrange(cfg.max_gap), "host", node)

        while self.events:
            time, _, kind, payload = heapq.heappop(self.events)
            self.now = max(self.now, time)
            node = payload[0]
            if kind == "host":
                if pending[node] is None:
                    issue(node)
                continue
            if kind == "deliver":
                self.cards[node].deliver(payload[1])
                kind = "card"
            if kind == "card":
                if self.now < self.busy_until[node]:
                    self._push(self.busy_until[node], "card", node)
                    continue
                card = self.cards[node]
                cycles = card.step(self.now)
                if cycles:
                    self.busy_until[node] = self.now + cycles
                    self._push(self.busy_until[node], "card", node)
                    for packet in card.outbox:
                        self._route(node, packet, self.now + cycles)
                    card.outbox.clear()
                    for request, status, words in card.completions:
                        req, access, started = pending[node]
                        if request is not req:
                            raise RuntimeError(f"node {node}: completion for a request not in flight")
                        if status != Status.OK:
                            raise RuntimeError(
                                f"node {node}: access at {access.addr:#x} failed ({Status(status).name})"
                            )
                        self.seq += 1
                        access.completed = self.seq
                        if not access.write:
                            access.value = words[0]
                        result.accesses.append(access)
                        pending[node] = None
                        self._push(self.now + cycles + 1 + self.rng.randrange(cfg.max_gap), "host", node)
                    card.completions.clear()
                else:
                    wake = card.next_wake()
                    if wake is not None and wake > self.now:
                        self._push(wake, "card", node)
            for n, p in enumerate(pending):
                if p is not None and self.now - p[2] > cfg.watchdog:
                    raise Deadlock(
                        f"node {n}: access at {p[1].addr:#x} ({'write' if p[1].write else 'read'}) "
                        f"pending for {self.now - p[2]} cycles"
                    )
        stuck = [n for n, p in enumerate(pending) if p is not None]
        if stuck or any(remaining):
            raise Deadlock(f"the simulation ran dry with node(s) {stuck} waiting")
        result.cycles = self.now
        result.packets = self.packets
        result.counters = [list(c.counters) for c in self.cards]
        result.stats = [dict(c.stats) for c in self.cards]
        return result

    def _route(self, source, packet, time):
        self.packets += 1
        if not 0 <= packet.target < self.cfg.nodes:
            raise RuntimeError(f"node {source} sent a packet to node {packet.target}")
        key = (source, packet.target)
        arrival = max(
            time + self.rng.randint(self.cfg.min_latency, self.cfg.max_latency), self.last_delivery.get(key, 0) + 1
        )
        self.last_delivery[key] = arrival
        self._push(arrival, "deliver", packet.target, packet)

    def views(self):
        """NodeViews of every card, for check_quiescent."""
        return card_views(self.cards)


def card_views(cards):
    """NodeViews of model cards (numavia.gateware.microcode.coherence_check)."""
    out = []
    for card in cards:
        directory, memory, cache = {}, {}, {}
        for index, (mstate, locked, head) in enumerate(card.directory):
            addr = line_address(card.node_id, index * card.line_bytes, card.line_bytes)
            if mstate or locked:
                directory[addr] = (mstate, locked, head)
            memory[addr] = list(card.home[index])
        for s, ways in enumerate(card.tags):
            for w, tag in enumerate(ways):
                if tag.state:
                    cache[tag.addr] = (tag.state, tag.fwd, tag.bwd, list(card.cdata[s][w]))
        out.append(NodeView(card.node_id, directory, memory, cache))
    return out
