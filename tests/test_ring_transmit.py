"""Transmit side of the ring link (RingTransmit) alone: the testbench fills slots as the sequencer
does, offers packets to send as the retry side does, and echoes and forwarded packets as the
receive side and the bypass do; ``tx`` is decoded with ``sci_packet``."""

import random
from dataclasses import replace

from amaranth.sim import Simulator
from support.ring_bench import as_sent_by, random_packet, wait_cycles
from support.ring_bfm import send_data, send_header, wire_words
from support.sim import run_simulation

from numavia.base.sci_packet import (
    MAX_PACKET_SYMBOLS,
    SHORT_HEADER_SYMBOLS,
    Command,
    EchoStatus,
    Packet,
    PacketType,
    abort,
    decode,
    encode,
    header_symbols,
)
from numavia.gateware.ring_transmit import TRANSMIT_EVENTS, RingTransmit

NODE = 1
BYPASS_DEPTH = 128
THRESHOLD = BYPASS_DEPTH - MAX_PACKET_SYMBOLS - 2


def run(testbench, *, out_depth=4):
    """Simulate a RingTransmit of node 1; ``testbench(ctx, dut, seen)`` where ``seen`` fills with
    ``(first_cycle, symbols)`` of each packet on ``tx``, the ``queued`` and ``sent`` payloads, and
    the count of each event; ``seen["cycle"]`` is the current cycle."""
    dut = RingTransmit(
        out_depth=out_depth,
        in_depth=4,
        contexts=4,
        line_bytes=64,
        bypass_threshold=THRESHOLD,
        bypass_depth=BYPASS_DEPTH,
    )
    seen = {"tx": [], "queued": [], "sent": [], "events": dict.fromkeys(TRANSMIT_EVENTS, 0), "cycle": 0}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def monitor(ctx):
        current = None
        queued, sent = dut.queued, dut.sent
        async for _, _, frame, symbol, queued_valid, q, sent_valid, s, send_taken, events in ctx.tick().sample(
            dut.tx.frame,
            dut.tx.data,
            queued.valid,
            queued.payload,
            sent.valid,
            sent.payload,
            dut.send.valid & dut.send.ready,
            dut.events,
        ):
            seen["cycle"] += 1
            if send_taken:  # an offer stands until taken (see ``offer``)
                ctx.set(dut.send.valid, 0)
            if frame:
                current = current or (seen["cycle"], [])
                current[1].append(symbol)
            elif current:
                seen["tx"].append(current)
                current = None
            if queued_valid:
                seen["queued"].append((q.slot, q.target))
            if sent_valid:
                seen["sent"].append((s.context, s.aborted))
            for name in TRANSMIT_EVENTS:
                seen["events"][name] += getattr(events, name)

    async def main(ctx):
        ctx.set(dut.node_id, NODE)
        ctx.set(dut.enable, 1)
        await testbench(ctx, dut, seen)

    sim.add_testbench(monitor, background=True)
    sim.add_testbench(main)
    run_simulation(sim)


def offer(ctx, dut, *, context, slot, seq):
    """Offer a packet to send, as the retry side does, until the transmit side takes it."""
    ctx.set(dut.send.payload, {"context": context, "slot": slot, "seq": seq})
    ctx.set(dut.send.valid, 1)


async def until_taken(ctx, dut, stream):
    """Wait for the clock edge at which ``stream`` transfers, then stop offering."""
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        if ready:
            break
    ctx.set(stream.valid, 0)


def counted(seen):
    return {name: n for name, n in seen["events"].items() if n}


def test_a_packet_goes_out_framed_while_its_words_are_still_written():
    packet = random_packet(random.Random(1), 4, data_ratio=1)

    async def tb(ctx, dut, seen):
        await send_header(ctx, dut, packet)
        [(slot, target)] = seen["queued"]
        assert target == 4
        offer(ctx, dut, context=2, slot=slot, seq=1)
        await send_data(ctx, dut, wire_words(packet)[:10])
        assert seen["tx"] == [] and ctx.get(dut.tx.frame)  # on the wire, six words still to come
        await send_data(ctx, dut, wire_words(packet)[10:])
        await wait_cycles(ctx, 40)
        [(_, symbols)] = seen["tx"]
        assert decode(symbols) == replace(as_sent_by(packet, NODE), seq=1)
        assert seen["sent"] == [(2, 0)]
        assert counted(seen) == {"TX_PACKETS": 1}

    run(tb)


def test_an_uncached_reads_answer_goes_out_with_the_words_asked_for_only():
    """Its slot takes the two words asked for and is complete; the packet carries those two."""
    line = [0] * 16
    line[14:16] = [0xAAAA5555, 0x12345678]
    answer = Packet(target=4, ptype=PacketType.RESPONSE, cmd=Command.MUREAD, has_data=1, word=14, count=2, data=line)

    async def tb(ctx, dut, seen):
        await send_header(ctx, dut, answer)
        await send_data(ctx, dut, wire_words(answer))
        assert not ctx.get(dut.slots.filling)
        [(slot, _)] = seen["queued"]
        offer(ctx, dut, context=1, slot=slot, seq=0)
        await wait_cycles(ctx, 20)
        [(_, symbols)] = seen["tx"]
        assert len(symbols) == SHORT_HEADER_SYMBOLS + 2 * 2 + 1
        assert decode(symbols) == as_sent_by(answer, NODE)
        assert seen["sent"] == [(1, 0)]

    run(tb)


def test_a_word_not_written_in_time_aborts_the_copy():
    """The producer stops after two words: the copy ends where the third was due, with the CRC of
    what went out inverted, and is reported aborted; offered again once the slot is complete, the
    packet goes out whole."""
    packet = random_packet(random.Random(2), 6, data_ratio=1)
    whole = encode(replace(as_sent_by(packet, NODE), seq=0))

    async def tb(ctx, dut, seen):
        await send_header(ctx, dut, packet)
        [(slot, _)] = seen["queued"]
        offer(ctx, dut, context=0, slot=slot, seq=0)
        await send_data(ctx, dut, wire_words(packet)[:2])
        await wait_cycles(ctx, 30)
        assert [symbols for _, symbols in seen["tx"]] == [abort(whole[: header_symbols(packet.ptype, packet.cmd) + 4])]
        assert seen["sent"] == [(0, 1)]
        assert ctx.get(dut.slots.filling) and ctx.get(dut.slots.fill_slot) == slot
        await send_data(ctx, dut, wire_words(packet)[2:])
        assert not ctx.get(dut.slots.filling)
        offer(ctx, dut, context=0, slot=slot, seq=0)
        await wait_cycles(ctx, 50)
        assert seen["tx"][1][1] == whole
        assert seen["sent"] == [(0, 1), (0, 0)]
        assert counted(seen) == {"TX_PACKETS": 2, "TX_UNDERRUNS": 1}

    run(tb)


def test_echoes_go_before_queued_packets():
    packet = random_packet(random.Random(3), 4, data_ratio=0)

    async def tb(ctx, dut, seen):
        ctx.set(dut.enable, 0)
        await send_header(ctx, dut, packet)
        [(slot, _)] = seen["queued"]
        offer(ctx, dut, context=1, slot=slot, seq=0)
        ctx.set(dut.echo.payload, {"target": 9, "seq": 1, "busy": 1})
        ctx.set(dut.echo.valid, 1)
        ctx.set(dut.enable, 1)
        await until_taken(ctx, dut, dut.echo)
        await wait_cycles(ctx, 20)
        assert [decode(symbols) for _, symbols in seen["tx"]] == [
            Packet(target=9, source=NODE, ptype=PacketType.ECHO, seq=1, status=EchoStatus.BUSY),
            as_sent_by(packet, NODE),
        ]
        assert counted(seen) == {"TX_ECHOES": 1, "TX_PACKETS": 1}
        assert seen["sent"] == [(1, 0)]  # echoes are nobody's context

    run(tb)


def test_forwarded_and_own_packets_alternate_unless_the_bypass_fifo_is_above_its_threshold():
    """Forwarded packets are popped from ``bypass`` up to their end marker; own traffic and bypass
    take turns at packet boundaries, while above the threshold only forwarding goes."""
    forwarded = [[0x2000 + i, 1, 2] for i in range(3)]
    own = random_packet(random.Random(4), 4, data_ratio=0)

    async def feed_bypass(ctx, dut, packets):
        for entry in [e for symbols in packets for e in [(s, 0) for s in symbols] + [(0, 1)]]:
            ctx.set(dut.bypass.payload, {"data": entry[0], "end": entry[1]})
            ctx.set(dut.bypass.valid, 1)
            await until_taken(ctx, dut, dut.bypass)
            ctx.set(dut.bypass.valid, 1)
        ctx.set(dut.bypass.valid, 0)

    async def tb(ctx, dut, seen):
        await send_header(ctx, dut, own)
        [(slot, _)] = seen["queued"]
        offer(ctx, dut, context=0, slot=slot, seq=0)
        ctx.set(dut.bypass_level, THRESHOLD + 1)
        await feed_bypass(ctx, dut, forwarded[:2])  # forced: both before the own packet
        ctx.set(dut.bypass_level, 0)
        await feed_bypass(ctx, dut, forwarded[2:])
        await wait_cycles(ctx, 20)
        sent = [symbols for _, symbols in seen["tx"]]
        assert sent[:2] == forwarded[:2]
        assert decode(sent[2]) == as_sent_by(own, NODE)  # own traffic's turn
        assert sent[3] == forwarded[2]
        assert counted(seen) == {"TX_PACKETS": 1}

    run(tb)


def test_slots_are_taken_freed_and_reserved_for_owed_replies():
    rng = random.Random(5)
    request = random_packet(rng, 4, ptype=PacketType.REQUEST)
    reply = random_packet(rng, 4, ptype=PacketType.RESPONSE)

    async def tb(ctx, dut, seen):
        ctx.set(dut.admission.owed, 1)  # one reply owed: of 3 free slots, requests may take 1
        await send_header(ctx, dut, request)
        assert ctx.get(dut.admission.free) == 2
        ctx.set(dut.send_header.payload, dut.send_header.payload.shape().from_bits(request.header_value()))
        ctx.set(dut.send_header.valid, 1)
        assert not ctx.get(dut.send_header.ready)
        await send_header(ctx, dut, reply)  # a reply takes any free slot
        await send_header(ctx, dut, reply)
        assert not ctx.get(dut.send_header.ready)
        assert ctx.get(dut.admission.free) == 0
        slots = [slot for slot, _ in seen["queued"]]
        assert sorted(slots) == [0, 1, 2]
        ctx.set(dut.slots.lookup, slots[0])
        assert ctx.get(dut.slots.header).as_value().value == request.header_value()
        ctx.set(dut.slots.freed, 1 << slots[1])
        await ctx.tick()
        ctx.set(dut.slots.freed, 0)
        assert ctx.get(dut.admission.free) == 1

    run(tb, out_depth=3)


def test_the_free_count_follows_slots_taken_and_freed_in_the_same_cycle():
    # The count is kept as a register beside the slot mask: two slots freed at once (one accepted,
    # one given up) and a slot taken in the cycle another is freed must all be counted.
    reply = random_packet(random.Random(6), 4, data_ratio=0)

    async def tb(ctx, dut, seen):
        for _ in range(4):
            await send_header(ctx, dut, reply)
        assert ctx.get(dut.admission.free) == 0
        slots = [slot for slot, _ in seen["queued"]]
        ctx.set(dut.slots.freed, (1 << slots[0]) | (1 << slots[2]))
        await ctx.tick()
        ctx.set(dut.slots.freed, 0)
        assert ctx.get(dut.admission.free) == 2
        ctx.set(dut.slots.freed, 1 << slots[1])
        await send_header(ctx, dut, reply)  # takes a slot in the cycle slots[1] is freed
        ctx.set(dut.slots.freed, 0)
        assert ctx.get(dut.admission.free) == 2
        taken = {slot for slot, _ in seen["queued"][4:]}
        assert len(taken) == 1 and taken <= {slots[0], slots[2]}

    run(tb)
