"""Hostile symbol streams among legitimate packets, into one ring node: the generator, its model
of the link's acceptance rules and the run that checks delivery and counters."""

import random
from dataclasses import replace

from amaranth.sim import Simulator

from numavia.base import regmap
from numavia.base.sci_packet import (
    HEADER_BITS,
    SYMBOL_BITS,
    EchoStatus,
    Packet,
    PacketError,
    PacketType,
    abort,
    aborted,
    crc16,
    decode,
    encode,
    field_positions,
)
from numavia.gateware.bfm import wishbone_read as read
from support.ring_bench import LinkBench, as_sent_by, random_packet, read_counters, tx_monitor
from support.ring_bfm import receive, send
from support.sim import run_simulation

RING_NODE, RING_PEER = 5, 7  # the node under test; the node its own packets go to
_RING_FIELDS = field_positions()
RING_COUNTER_NAMES = [name for name, _ in regmap.RING_COUNTERS]


def routing(symbol0):
    """The header fields of a packet's first symbol (``target``, ``source``, ``ptype``, ...)."""
    value = symbol0 << (HEADER_BITS - SYMBOL_BITS)
    out = {}
    for name, (lsb, width) in _RING_FIELDS.items():
        if lsb >= HEADER_BITS - SYMBOL_BITS:
            out[name] = (value >> lsb) & ((1 << width) - 1)
    return out


def with_routing(symbol0, **fields):
    value = symbol0 << (HEADER_BITS - SYMBOL_BITS)
    for name, v in fields.items():
        lsb, width = _RING_FIELDS[name]
        value = (value & ~(((1 << width) - 1) << lsb)) | (v << lsb)
    return value >> (HEADER_BITS - SYMBOL_BITS)


def intact(symbols):
    try:
        decode(symbols)
        return True
    except PacketError:
        return False


class RingFuzz:
    """Reference model of one ring node (``ring_link``'s docstring) fed by a seeded generator."""

    def __init__(self, rng, scrub_window):
        self.rng = rng
        self.scrub_window = scrub_window
        self.rx_last = {}  # source -> alternating bit of the last packet stored
        self.delivered = []  # packets the consumer must get, in order
        self.echoes = []  # (target, seq) of the echoes the node must send, in order
        self.forwarded = []  # symbol lists the node must pass on, in order
        self.counts = {name: 0 for name in RING_COUNTER_NAMES}
        self.suspect = None  # (first symbol, cycle armed) of the scrubber
        self.in_flight = None  # seq of the own packet sent and not yet answered
        self.last_seq = 1  # seq of the last own packet seen (the next one: 0)
        self.kinds = {}

    def suspect_active(self, now):
        return self.suspect is not None and now - self.suspect[1] < self.scrub_window

    def ambiguous(self, symbol0, now):
        """Too close to the scrubber's expiry to say what it does: wait a little."""
        return (
            self.suspect is not None
            and self.suspect[0] == symbol0
            and abs(now - self.suspect[1] - self.scrub_window) < 24
        )

    def judge(self, symbols, start, end):
        """Account one framed symbol sequence that entered at cycle ``start`` and ended at ``end``."""
        r = routing(symbols[0])
        for_me = r["target"] == RING_NODE
        came_back = r["source"] == RING_NODE and not for_me
        good = intact(symbols)
        if for_me:
            if not good:
                self.counts["CRC_ERRORS"] += 1
                return "crc"
            packet = decode(symbols)
            if packet.ptype == PacketType.ECHO:
                self.counts["RX_ECHOES"] += 1
                if packet.status == EchoStatus.BUSY:
                    self.counts["BUSY_RECEIVED"] += 1
                if packet.status == EchoStatus.ACCEPTED and packet.source == RING_PEER and self.in_flight == packet.seq:
                    self.counts["TX_ACCEPTED"] += 1
                    self.in_flight = None
                    return "own echo"
                return "echo"
            self.echoes.append((packet.source, packet.seq))
            self.counts["TX_ECHOES"] += 1
            if self.rx_last.get(packet.source, 1) == packet.seq:
                self.counts["DUPLICATES"] += 1
                return "duplicate"
            self.rx_last[packet.source] = packet.seq
            self.delivered.append(packet)
            self.counts["RX_PACKETS"] += 1
            return "delivered"
        if came_back:
            self.counts["UNDELIVERABLE"] += 1
            return "undeliverable"
        if self.suspect_active(start) and symbols[0] == self.suspect[0]:
            self.counts["SCRUBBED"] += 1
            self.suspect = None
            return "scrubbed"
        self.counts["BYPASSED"] += 1
        self.forwarded.append(list(symbols))
        if not good and not aborted(symbols):  # an aborted packet is resent at once, not debris
            self.suspect = (symbols[0], end)
        return "forwarded"

    # Generators.
    def legit_for_me(self):
        rng = self.rng
        source = rng.choice([1, 2, 3, RING_PEER, 60])
        packet = random_packet(rng, RING_NODE, data_ratio=0.5)
        return replace(packet, source=source, seq=self.rx_last.get(source, 1) ^ 1)

    def legit_for_others(self):
        rng = self.rng
        target = rng.choice([0, 1, 6, 9, 63])
        source = rng.choice([s for s in (0, 2, 8, 33) if s != target])
        ptype = rng.choice([PacketType.REQUEST, PacketType.RESPONSE, PacketType.ECHO])
        packet = replace(random_packet(rng, target, ptype=ptype), source=source, seq=rng.randrange(2))
        if ptype == PacketType.ECHO:
            packet = Packet(target=target, source=source, ptype=ptype, seq=packet.seq, status=rng.randrange(32))
        return encode(packet)

    def hostile_echo(self):
        """An echo for this node that answers nothing outstanding (or answers again)."""
        rng = self.rng
        source = rng.choice([RING_PEER, RING_PEER, 1, 2, 40])
        if source == RING_PEER:  # the other alternating bit, or the one just answered
            seq = self.last_seq ^ (1 if self.in_flight is not None else 0)
        else:
            seq = rng.randrange(2)
        status = rng.choice([EchoStatus.ACCEPTED, EchoStatus.BUSY, rng.randrange(32)])
        return encode(Packet(target=RING_NODE, source=source, ptype=PacketType.ECHO, seq=seq, status=status))

    def mutated(self):
        """Fragments (symbol lists, each framed on its own) of a damaged or invented packet."""
        rng = self.rng
        base = rng.choice([encode(self.legit_for_me()), self.legit_for_others(), self.hostile_echo()])
        m = rng.randrange(10)
        if m == 0:  # bit errors anywhere (the CRC catches them)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(base))
                base[i] ^= 1 << rng.randrange(16)
        elif m == 1:  # truncated
            base = base[: rng.randint(1, len(base) - 1)]
        elif m == 2:  # overlong
            base = base + [rng.randrange(1 << 16) for _ in range(rng.randint(1, 40))]
        elif m == 3:  # unknown packet type, CRC made good
            base[0] = with_routing(base[0], ptype=3)
            base[-1] = crc16(base[:-1])
        elif m == 4:  # has_data that the length contradicts, CRC made good
            base[0] = with_routing(base[0], has_data=routing(base[0])["has_data"] ^ 1)
            base[-1] = crc16(base[:-1])
        elif m == 5:  # garbage
            base = [rng.randrange(1 << 16) for _ in range(rng.randint(1, 60))]
            if rng.random() < 0.5:
                base[0] = with_routing(base[0], target=RING_NODE)
        elif m == 6:  # a packet cut in two by a glitch of the frame bit
            cut = rng.randint(1, len(base) - 1)
            return [base[:cut], base[cut:]]
        elif m == 7:  # from this node, not for it: must be removed
            base[0] = with_routing(base[0], source=RING_NODE)
            if routing(base[0])["target"] == RING_NODE:
                base[0] = with_routing(base[0], target=RING_PEER + 1)
        elif m == 8:  # a packet for a node that does not exist, corrupted
            base[0] = with_routing(base[0], target=62)
            base[rng.randrange(1, len(base))] ^= 0x8000
        else:  # aborted by its sender (data too late): dropped by its target, forwarded by others
            base = abort(base[: rng.randint(1, len(base) - 1)])
        return [base]


async def drive_symbols(ctx, link, symbols, gap, rng):
    """One framed symbol sequence on ``rx``, then ``gap`` idle cycles carrying random data (which
    the link must ignore)."""
    for symbol in symbols:
        ctx.set(link.rx.frame, 1)
        ctx.set(link.rx.data, symbol)
        await ctx.tick()
    ctx.set(link.rx.frame, 0)
    for _ in range(gap):
        ctx.set(link.rx.data, rng.randrange(1 << 16))
        await ctx.tick()


def ring_fuzz(*, seed, items, own_packets):
    """Simulate one node fed ``items`` seeded inputs; returns the model after checking the node."""
    rng = random.Random(seed)
    bench = LinkBench(RING_NODE)
    fuzz = RingFuzz(rng, scrub_window=bench.link.echo_timeout // 2)
    transmitted, received = [], []
    own = [random_packet(rng, RING_PEER) for _ in range(own_packets)]
    sim = Simulator(bench)
    sim.add_clock(1e-8)
    sim.add_testbench(tx_monitor(bench.cycle, bench.link, transmitted), background=True)

    async def consumer(ctx):
        while True:
            received.append(await receive(ctx, bench.link))

    def own_seen():
        return [
            decode(s)
            for _, s in transmitted
            if routing(s[0])["source"] == RING_NODE and routing(s[0])["ptype"] != PacketType.ECHO
        ]

    async def put(ctx, fragments):
        for symbols in fragments:
            while fuzz.ambiguous(symbols[0], ctx.get(bench.cycle)):
                await ctx.tick()
            start = ctx.get(bench.cycle)
            await drive_symbols(ctx, bench.link, symbols, rng.choice([1, 1, 1, 2, 3, 7]), rng)
            fuzz.judge(symbols, start, start + len(symbols))

    async def answer_own(ctx):
        """Echo ACCEPTED the own packet on the wire, as node RING_PEER would."""
        seen = own_seen()
        packet = seen[-1]
        await put(
            ctx,
            [
                encode(
                    Packet(
                        target=RING_NODE,
                        source=RING_PEER,
                        ptype=PacketType.ECHO,
                        seq=packet.seq,
                        status=EchoStatus.ACCEPTED,
                    )
                )
            ],
        )

    async def main(ctx):
        link = bench.link
        answered, queued = 0, 0
        for _step in range(items):
            if queued < len(own) and rng.random() < 2 * len(own) / items:  # spread over the run
                await send(ctx, link, own[queued])
                queued += 1
            seen = own_seen()
            if len(seen) > answered and fuzz.in_flight is None and seen[-1].seq != fuzz.last_seq:
                fuzz.in_flight = fuzz.last_seq = seen[-1].seq
            if fuzz.in_flight is not None and rng.random() < 0.3:
                await answer_own(ctx)
                answered += 1
                continue
            kind = rng.choices(
                ["for me", "duplicate", "others", "echo", "mutated", "scrub"], weights=[3, 1, 3, 2, 6, 1]
            )[0]
            fuzz.kinds[kind] = fuzz.kinds.get(kind, 0) + 1
            if kind == "for me":
                fragments = [encode(fuzz.legit_for_me())]
            elif kind == "duplicate" and fuzz.delivered:
                fragments = [encode(fuzz.delivered[-1])]
            elif kind == "echo":
                fragments = [fuzz.hostile_echo()]
            elif kind == "mutated":
                fragments = fuzz.mutated()
            elif kind == "scrub" and fuzz.suspect_active(ctx.get(bench.cycle) + 64):
                fragments = [fuzz.forwarded[-1]]  # the corrupt packet, round again
            else:
                fragments = [fuzz.legit_for_others()]
            await put(ctx, fragments)
        # Every own packet answered, then the link still works both ways.
        for packet in own[queued:]:
            await send(ctx, link, packet)
        while answered < len(own):
            for _ in range(2000):
                seen = own_seen()
                if len(seen) > answered:
                    break
                await ctx.tick()
            else:
                raise AssertionError(f"own packet {answered} never went out")
            fuzz.in_flight = fuzz.last_seq = seen[-1].seq
            await answer_own(ctx)
            answered += 1
        await put(ctx, [encode(fuzz.legit_for_me())])
        await put(ctx, [fuzz.legit_for_others()])
        for _ in range(300):
            await ctx.tick()

        assert received == fuzz.delivered, "the consumer got other packets than the legitimate ones"
        ours = [decode(s) for _, s in transmitted if routing(s[0])["source"] == RING_NODE]
        echoes = [(p.target, p.seq, p.status) for p in ours if p.ptype == PacketType.ECHO]
        assert echoes == [(t, s, EchoStatus.ACCEPTED) for t, s in fuzz.echoes]
        sent = [p for p in ours if p.ptype != PacketType.ECHO]
        assert sent == [replace(as_sent_by(p, RING_NODE), seq=i % 2) for i, p in enumerate(own)]
        passed = [s for _, s in transmitted if routing(s[0])["source"] != RING_NODE]
        assert passed == fuzz.forwarded, "forwarded packets differ from what came in"
        expected = dict(fuzz.counts, TX_PACKETS=len(own))
        counters = await read_counters(ctx, link, RING_COUNTER_NAMES)
        assert counters == expected
        status = await read(ctx, link.bus, regmap.RING.register("STATUS").offset)
        assert status == 0, f"queues not empty at the end: STATUS {status:#x}"
        errors = await read(ctx, link.bus, regmap.RING.register("ERRORS").offset)
        assert errors == 0, f"bypass FIFO overflow or underrun: ERRORS {errors:#x}"

    sim.add_testbench(consumer, background=True)
    sim.add_testbench(main)
    run_simulation(sim)
    return fuzz
