"""A ring of :class:`RingLink` nodes in one simulation, and the sequencer-side traffic around it.

:class:`RingBench` wires node *i*'s ``tx`` through a delay line to node *i+1*'s ``rx``; each link
has a ``flip`` mask XORed onto the symbol (data bits, then ``frame``) where it enters the next
node, for fault injection. :class:`Traffic` runs a sender, a receiver and a ``failed`` watcher per
node and records what went where, so tests can check delivery against what was sent.
"""

import random
from dataclasses import dataclass, field

from amaranth import Elaboratable, Module, Signal
from amaranth.sim import Simulator

from numavia.base import regmap
from numavia.base.sci_packet import (
    DATA_WORDS,
    SHORT_HEADER_SYMBOLS,
    Command,
    Packet,
    PacketType,
    carries_words_asked,
    header_symbols,
    line_of_block,
)
from numavia.gateware.bfm import recv
from numavia.gateware.bfm import wishbone_read as read
from numavia.gateware.ring_link import RingLink
from numavia.gateware.sci_layouts import SymbolLayout
from support.ring_bfm import packet_from_header, receive, send
from support.sim import run_simulation


async def wait_cycles(ctx, count):
    """``count`` clock edges, as one-shot waits: a background testbench may be dropped at any of
    them when the simulation ends (an abandoned ``repeat()`` complains on garbage collection)."""
    for _ in range(count):
        await ctx.tick()


class RingBench(Elaboratable):
    def __init__(self, nodes, *, delay=4, node_ids=None, **link_params):
        self.node_ids = list(node_ids if node_ids is not None else range(nodes))
        self.links = [RingLink(**link_params) for _ in range(nodes)]
        self.delay = delay
        #: XOR mask on the symbol entering node i (from node i-1): bits 0-15 data, bit 16 frame.
        self.flip = [Signal(SymbolLayout.size, name=f"flip_into_{i}") for i in range(nodes)]
        self.enable = [Signal(init=1, name=f"enable_{i}") for i in range(nodes)]
        self.cycle = Signal(32)
        #: The delay line into node i, oldest last: ``lines[i][-1]`` enters node i this cycle (before
        #: ``flip``), ``lines[i][-2]`` next cycle, and so on (for fault injectors that look ahead).
        self.lines = [
            [Signal(SymbolLayout.size, name=f"line{(i - 1) % nodes}_{k}") for k in range(delay)] for i in range(nodes)
        ]

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.cycle.eq(self.cycle + 1)
        n = len(self.links)
        for i, link in enumerate(self.links):
            m.submodules[f"node{i}"] = link
            m.d.comb += [link.node_id.eq(self.node_ids[i]), link.enable.eq(self.enable[i])]
            nxt = (i + 1) % n
            line = [link.tx.as_value()]
            for stage in self.lines[nxt]:
                m.d.sync += stage.eq(line[-1])
                line.append(stage)
            m.d.comb += self.links[nxt].rx.as_value().eq(line[-1] ^ self.flip[nxt])
        return m


class LinkBench(Elaboratable):
    """One :class:`RingLink` whose ``rx`` the testbench drives, with a cycle counter."""

    def __init__(self, node_id, **link_params):
        self.node_id = node_id
        self.link = RingLink(**link_params)
        self.enable = Signal(init=1)
        self.cycle = Signal(32)

    def elaborate(self, platform):
        m = Module()
        m.submodules.link = self.link
        m.d.sync += self.cycle.eq(self.cycle + 1)
        m.d.comb += [self.link.node_id.eq(self.node_id), self.link.enable.eq(self.enable)]
        return m


async def drive(ctx, link, symbols, *, gap=1):
    """Put one packet's symbols on ``link.rx``, one per cycle with ``frame`` high, then ``gap``
    idle cycles."""
    for symbol in symbols:
        ctx.set(link.rx.frame, 1)
        ctx.set(link.rx.data, symbol)
        await ctx.tick()
    ctx.set(link.rx.frame, 0)
    ctx.set(link.rx.data, 0)
    for _ in range(gap):
        await ctx.tick()


def random_packet(rng, target, *, data_ratio=0.5, ptype=PacketType.RESPONSE, data_words=DATA_WORDS):
    """A packet with every header field random (the link must carry them all); ``source`` and
    ``seq`` are left 0: the link fills them in. Responses by default: a request obliges its
    receiver to answer it (the link reserves an outgoing slot for that answer), which raw link
    traffic does not model; test_requests_are_admitted_only_with_a_reply_slot does."""
    has_data = int(rng.random() < data_ratio)
    rng.choice([PacketType.REQUEST, PacketType.RESPONSE])  # keeps every seeded scenario as it was
    packet = Packet(
        target=target,
        ptype=ptype,
        has_data=has_data,
        cmd=rng.choice(list(Command)),
        tid=rng.randrange(32),
        status=rng.randrange(32),
        addr=rng.randrange(1 << 32),
        ptr=rng.randrange(64),
        ptr_valid=rng.randrange(2),
        flag=rng.randrange(2),
        mstate=rng.randrange(4),
        aux=rng.randrange(64),
        word=rng.randrange(16),
        count=rng.randrange(32),
        reserved=rng.randrange(128),
        be=rng.randrange(1 << 64),
        data=[rng.randrange(1 << 32) for _ in range(data_words)] if has_data else [],
    )
    if header_symbols(packet.ptype, packet.cmd) == SHORT_HEADER_SYMBOLS:
        packet.be = 0  # not on the wire: only an uncached write's request carries byte enables
    if has_data and carries_words_asked(ptype == PacketType.RESPONSE, packet.cmd):
        # An uncached read's answer carries a range of the line (drawn from the random fields,
        # so every seeded scenario draws as before); the words off the wire read as 0.
        packet.word %= data_words
        packet.count = 1 + packet.count % (data_words - packet.word)
        packet.data = line_of_block(packet, packet.data[packet.word : packet.word + packet.count], 4 * data_words)
    return packet


def as_sent_by(packet, source):
    """``packet`` as its receiver should see it (seq aside): with the sender's id as source."""
    copy = Packet(**{**packet.__dict__, "source": source, "data": list(packet.data)})
    return copy


@dataclass
class Delivery:
    cycle: int
    packet: Packet


@dataclass
class Traffic:
    """Sequencer-side traffic of a :class:`RingBench` run.

    ``plan[i]`` is the list of packets node i sends, in order. ``stall[i]`` is a list of
    ``(from_cycle, to_cycle)`` windows during which node i's sequencer does not take from its
    incoming queue.
    """

    bench: RingBench
    plan: dict
    gap: tuple = (0, 0)  # random idle cycles between a node's sends
    stall: dict = field(default_factory=dict)
    seed: int = 0
    sent: dict = field(default_factory=dict)  # (source, target) -> [Packet as sent]
    received: dict = field(default_factory=dict)  # (source, target) -> [Delivery]
    failed: dict = field(default_factory=dict)  # node index -> [header Packet]
    send_waits: dict = field(default_factory=dict)  # node index -> [cycles send_header held back]

    def expected(self):
        return sum(len(p) for p in self.plan.values())

    def delivered(self):
        return sum(len(d) for d in self.received.values())

    def add_to(self, sim):
        bench = self.bench
        for i, link in enumerate(bench.links):
            sim.add_testbench(self._sender(i, link), background=True)
            sim.add_testbench(self._receiver(i, link), background=True)
            sim.add_testbench(self._failure_watcher(i, link), background=True)

    def _sender(self, i, link):
        rng = random.Random(f"{self.seed}-send-{i}")
        source = self.bench.node_ids[i]

        async def process(ctx):
            for packet in self.plan.get(i, []):
                for _ in range(rng.randint(*self.gap)):
                    await ctx.tick()
                self.sent.setdefault((source, packet.target), []).append(as_sent_by(packet, source))
                waited = await send(ctx, link, packet)
                self.send_waits.setdefault(i, []).append(waited)

        return process

    def _receiver(self, i, link):
        windows = self.stall.get(i, [])

        async def process(ctx):
            while True:
                # Take only when a header is already offered, so that a stall window that begins
                # meanwhile really leaves the queue alone.
                now = ctx.get(self.bench.cycle)
                stalled = [end for begin, end in windows if begin <= now < end]
                if stalled:
                    await wait_cycles(ctx, max(stalled) - now)
                    continue
                if not ctx.get(link.recv_header.valid):
                    await ctx.tick()
                    continue
                arrived = ctx.get(self.bench.cycle)  # the header is taken now; a line of words follows
                packet = await receive(ctx, link)
                key = (packet.source, packet.target)
                self.received.setdefault(key, []).append(Delivery(arrived, packet))

        return process

    def _failure_watcher(self, i, link):
        async def process(ctx):
            while True:
                header = await recv(ctx, link.failed)
                self.failed.setdefault(i, []).append(packet_from_header(header.as_value().value))

        return process

    async def run_until_delivered(self, ctx, *, limit, settle=0, poll=64):
        """Wait until every planned packet is delivered (or ``limit`` cycles), then ``settle``."""
        start = ctx.get(self.bench.cycle)
        while self.delivered() < self.expected():
            await ctx.tick().repeat(poll)
            if ctx.get(self.bench.cycle) - start > limit:
                break
        if settle:
            await ctx.tick().repeat(settle)


def check_delivery(traffic):
    """Every sent packet arrived exactly once, in order per (source, target), intact, with the
    pair's alternating bit toggling from 0. Returns the number of packets checked."""
    checked = 0
    assert set(traffic.received) <= set(traffic.sent), "a packet arrived that nobody sent"
    for pair, sent in traffic.sent.items():
        got = [d.packet for d in traffic.received.get(pair, [])]
        assert len(got) == len(sent), f"{pair}: {len(sent)} sent, {len(got)} delivered"
        for k, (want, have) in enumerate(zip(sent, got)):
            assert have.seq == k % 2, f"{pair} packet {k}: seq {have.seq}"
            have_without_seq = Packet(**{**have.__dict__, "seq": 0})
            assert have_without_seq == want, f"{pair} packet {k} differs:\n{want}\n{have}"
            checked += 1
    return checked


def tx_monitor(cycle_counter, link, packets):
    """A background testbench appending ``(first_cycle, symbols)`` for every packet ``link``
    transmits (its own and the ones it forwards), once the packet is complete."""

    async def process(ctx):
        current = None
        while True:
            _, _, cycle, frame, symbol = await ctx.tick().sample(cycle_counter, link.tx.frame, link.tx.data)
            if frame:
                if current is None:
                    current = (cycle, [])
                current[1].append(symbol)
            elif current is not None:
                packets.append(current)
                current = None

    return process


def flip_schedule(rng, *, links, cycles, rate, bits):
    """Seeded single-bit flips: ``[(cycle, link, bit)]``, each link-cycle hit with probability
    ``rate`` (gaps drawn geometrically), ``bit`` chosen from ``bits``."""
    events = []
    for link in range(links):
        cycle = 0
        while True:
            cycle += 1 + int(rng.expovariate(rate))
            if cycle >= cycles:
                break
            events.append((cycle, link, rng.choice(bits)))
    return sorted(events)


def flipper(bench, schedule):
    """A background testbench that applies ``schedule`` to ``bench.flip`` (one cycle per flip)."""

    async def process(ctx):
        for cycle, link, bit in schedule:
            now = ctx.get(bench.cycle)
            await wait_cycles(ctx, cycle - now)
            ctx.set(bench.flip[link], 1 << bit)
            await ctx.tick()
            ctx.set(bench.flip[link], 0)

    return process


def stall_windows(rng, *, rate, length, horizon):
    """Seeded stalls of a node's sequencer, as ``Traffic.stall`` windows: from any cycle before
    ``horizon`` a stall begins with probability ``rate`` (one at a time) and lasts a number of
    cycles drawn from the range ``length``."""
    windows, cycle = [], 0
    while rate:
        cycle += int(rng.expovariate(rate)) + 1
        if cycle >= horizon:
            break
        end = cycle + rng.randint(*length)
        windows.append((cycle, end))
        cycle = end
    return windows


def packet_faults(bench, node, rng, *, drop=0.0, duplicate=0.0, counts=None):
    """A background testbench that, on the link into ``node``, loses whole packets (probability
    ``drop`` each: their symbols become idle) and duplicates them (probability ``duplicate``: a
    copy follows after one idle symbol, written over idle symbols only, so nothing else is
    disturbed; needs a delay line longer than the longest packet). Echoes are packets too, so a
    lost echo makes the sender resend a packet its target already has. ``counts`` (a dict)
    receives the numbers of packets seen, dropped and duplicated."""
    from numavia.base.sci_packet import MAX_PACKET_SYMBOLS

    counts = counts if counts is not None else {}
    for key in ("packets", "dropped", "duplicated"):
        counts.setdefault(key, 0)
    frame_bit = 1 << 16
    if duplicate and len(bench.lines[node]) < MAX_PACKET_SYMBOLS + 2:
        raise ValueError(f"duplicating needs a delay of at least {MAX_PACKET_SYMBOLS + 2}")

    async def process(ctx):
        line, flip = bench.lines[node], bench.flip[node]
        in_packet = dropping = False
        symbols, inject = [], []
        while True:
            current = ctx.get(line[-1])
            if inject:
                ctx.set(flip, inject.pop(0) ^ current)  # over an idle symbol (checked below)
            elif current & frame_bit:
                if not in_packet:
                    in_packet, symbols = True, []
                    dropping = rng.random() < drop
                    counts["packets"] += 1
                    counts["dropped"] += dropping
                symbols.append(current)
                ctx.set(flip, current if dropping else 0)
            else:
                ctx.set(flip, 0)
                if in_packet:
                    in_packet = False
                    # The next len+1 symbols are in the line already: copy only into silence.
                    ahead = [ctx.get(s) for s in line[-1 - len(symbols) - 1 : -1]]
                    if not dropping and rng.random() < duplicate and not any(a & frame_bit for a in ahead):
                        inject = list(symbols)
                        counts["duplicated"] += 1
            await ctx.tick()

    return process


async def read_counters(ctx, link, names):
    return {name: await read(ctx, link.bus, regmap.RING.register(name).offset) for name in names}


def simulate(bench, *testbenches, traffic=None, background=()):
    sim = Simulator(bench)
    sim.add_clock(1e-8)
    if traffic is not None:
        traffic.add_to(sim)
    for process in background:
        sim.add_testbench(process, background=True)
    for tb in testbenches:
        sim.add_testbench(tb)
    run_simulation(sim)
