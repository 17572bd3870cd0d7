"""Receive side of the ring link (RingReceive) alone: symbols driven on ``rx``, its streams watched.
The packet format comes only from ``sci_packet``."""

import random
from dataclasses import replace

from amaranth.sim import Simulator
from support.ring_bench import drive, random_packet, wait_cycles
from support.ring_bfm import receive
from support.sim import run_simulation

from numavia.base.sci_packet import Command, EchoStatus, Packet, PacketType, abort, encode
from numavia.gateware.bfm import recv
from numavia.gateware.ring_receive import RECEIVE_EVENTS, RingReceive

NODE = 5


def run(testbench, **params):
    """Simulate a RingReceive of node 5; ``testbench(ctx, dut, seen)`` where ``seen`` fills with
    what the receive side produced: ``passing`` entries, ``echo_received`` payloads and the count
    of each event, cycle by cycle."""
    dut = RingReceive(**{"in_depth": 4, "out_depth": 4, "echo_depth": 4, "line_bytes": 64, **params})
    seen = {"passing": [], "echo_received": [], "events": dict.fromkeys(RECEIVE_EVENTS, 0)}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def monitor(ctx):
        passing, echo = dut.passing, dut.echo_received
        async for _, _, passing_valid, p, echo_valid, e, events in ctx.tick().sample(
            passing.valid, passing.payload, echo.valid, echo.payload, dut.events
        ):
            if passing_valid:
                seen["passing"].append((p.data, p.first, p.end, p.corrupt))
            if echo_valid:
                seen["echo_received"].append((e.source, e.seq, e.status))
            for name in RECEIVE_EVENTS:
                seen["events"][name] += getattr(events, name)

    async def main(ctx):
        ctx.set(dut.node_id, NODE)
        ctx.set(dut.enable, 1)
        ctx.set(dut.admission.free, 4)
        await testbench(ctx, dut, seen)

    sim.add_testbench(monitor, background=True)
    sim.add_testbench(main)
    run_simulation(sim)


async def echoes_owed(ctx, dut, count):
    return [await recv(ctx, dut.echo, timeout=20) for _ in range(count)]


def counted(seen):
    return {name: n for name, n in seen["events"].items() if n}


def test_an_intact_packet_is_offered_the_cycle_after_its_verdict_and_echoed():
    """The last symbol is registered, judged in the idle cycle after it, and the header is offered
    from the queue in the cycle after that, not in the verdict's own cycle (its CRC and length
    checks stay off the sequencer's paths): three cycles after the last symbol was on ``rx``."""
    packet = replace(random_packet(random.Random(1), NODE, data_ratio=1), source=2)

    async def tb(ctx, dut, seen):
        symbols = encode(packet)
        for symbol in symbols:
            ctx.set(dut.rx.frame, 1)
            ctx.set(dut.rx.data, symbol)
            await ctx.tick()
        ctx.set(dut.rx.frame, 0)
        offered = []
        for _ in range(4):
            offered.append(ctx.get(dut.recv_header.valid))
            await ctx.tick()
        assert offered == [0, 0, 1, 1]  # the verdict's cycle, then valid
        assert await receive(ctx, dut) == packet
        [echo] = await echoes_owed(ctx, dut, 1)
        assert (echo.target, echo.seq, echo.busy) == (2, 0, 0)
        assert counted(seen) == {"RX_PACKETS": 1}
        assert seen["passing"] == []

    run(tb)


def test_an_uncached_reads_answer_puts_its_words_in_their_places_and_hands_them_over_first():
    """A whole line first fills the slot; the answer after it (the same slot: there is one) carries
    words 5-6 only: they land at words 5-6 (the rest of the line is the slot's old words), and the
    line is handed over from word 5 on."""
    line = list(range(100, 116))
    whole = Packet(target=NODE, source=2, ptype=PacketType.RESPONSE, cmd=Command.MREAD, has_data=1, data=line)
    asked = [0] * 16
    asked[5:7] = [0xDEAD0005, 0xBEEF0006]
    answer = Packet(
        target=NODE, source=3, ptype=PacketType.RESPONSE, cmd=Command.MUREAD, has_data=1, word=5, count=2, data=asked
    )

    async def tb(ctx, dut, seen):
        await drive(ctx, dut, encode(whole))
        assert await receive(ctx, dut) == whole
        await drive(ctx, dut, encode(answer))
        header = await recv(ctx, dut.recv_header)
        assert (header.word, header.count) == (5, 2)
        words = [await recv(ctx, dut.recv_data) for _ in range(16)]
        assert words == asked[5:7] + line[7:] + line[:5]  # handed over from the word asked for
        assert counted(seen) == {"RX_PACKETS": 2}

    run(tb, in_depth=1)


def test_corrupt_packets_are_not_offered_and_owe_no_echo():
    rng = random.Random(2)
    good = replace(random_packet(rng, NODE, data_ratio=1), source=3)
    flipped = encode(good)
    flipped[12] ^= 0x0010
    bad = [flipped, encode(good)[:-1], abort(encode(good)[:20])]

    async def tb(ctx, dut, seen):
        for symbols in bad:
            await drive(ctx, dut, symbols)
        await wait_cycles(ctx, 4)
        assert ctx.get(dut.recv_header.valid) == 0
        assert ctx.get(dut.echo.valid) == 0
        assert counted(seen) == {"CRC_ERRORS": 3}
        await drive(ctx, dut, encode(good))
        assert await receive(ctx, dut) == good

    run(tb)


def test_duplicates_and_a_full_queue_are_echoed_but_not_stored():
    rng = random.Random(3)
    first = replace(random_packet(rng, NODE), source=1, seq=0)
    others = [replace(random_packet(rng, NODE), source=s, seq=0) for s in (2, 3)]

    async def tb(ctx, dut, seen):
        for packet in (first, first, *others):
            await drive(ctx, dut, encode(packet))
        echoes = await echoes_owed(ctx, dut, 4)
        assert [(e.target, e.seq, e.busy) for e in echoes] == [(1, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 1)]
        assert ctx.get(dut.in_count) == 2
        assert [await receive(ctx, dut) for _ in range(2)] == [first, others[0]]
        assert counted(seen) == {"RX_PACKETS": 2, "DUPLICATES": 1, "BUSY_SENT": 1}

    run(tb, in_depth=2)


def test_a_request_needs_an_outgoing_slot_for_its_reply():
    """Requests owe replies; with as many owed as free outgoing slots the next is refused BUSY,
    and a reply queued releases one."""
    rng = random.Random(4)
    requests = [replace(random_packet(rng, NODE, ptype=PacketType.REQUEST), source=s) for s in (1, 2, 3)]

    async def tb(ctx, dut, seen):
        ctx.set(dut.admission.free, 2)
        for packet in requests:
            await drive(ctx, dut, encode(packet))
        echoes = await echoes_owed(ctx, dut, 3)
        assert [e.busy for e in echoes] == [0, 0, 1]
        assert ctx.get(dut.admission.owed) == 2
        ctx.set(dut.admission.reply_queued, 1)
        await ctx.tick()
        ctx.set(dut.admission.reply_queued, 0)
        await ctx.tick()
        assert ctx.get(dut.admission.owed) == 1
        await drive(ctx, dut, encode(requests[2]))  # its sender's retry
        [echo] = await echoes_owed(ctx, dut, 1)
        assert echo.busy == 0

    run(tb)


def test_other_packets_pass_with_their_end_and_verdict_and_own_ones_come_back_removed():
    """Packets for others go to ``passing`` symbol by symbol, then their end, marked corrupt unless
    intact or aborted by their sender; a packet this node sent that came round is removed; an intact
    echo for this node goes to ``echo_received``."""
    rng = random.Random(5)
    other = encode(replace(random_packet(rng, 9), source=1))
    corrupt = list(other)
    corrupt[4] ^= 0x0400
    cut = abort(other[:14])
    came_back = encode(replace(random_packet(rng, 9), source=NODE))
    echo = encode(Packet(target=NODE, source=7, ptype=PacketType.ECHO, seq=1, status=EchoStatus.BUSY))

    async def tb(ctx, dut, seen):
        for symbols in (other, corrupt, cut, came_back, echo):
            await drive(ctx, dut, symbols)
        await wait_cycles(ctx, 3)
        expected = []
        for symbols, is_corrupt in ((other, 0), (corrupt, 1), (cut, 0)):
            expected += [(s, int(i == 0), 0, 0) for i, s in enumerate(symbols)] + [(0, 0, 1, is_corrupt)]
        assert seen["passing"] == expected
        assert seen["echo_received"] == [(7, 1, EchoStatus.BUSY)]
        assert counted(seen) == {"UNDELIVERABLE": 1, "RX_ECHOES": 1}
        assert ctx.get(dut.echo.valid) == 0

    run(tb)


def test_a_disabled_node_passes_everything_on():
    packet = replace(random_packet(random.Random(6), NODE), source=2)

    async def tb(ctx, dut, seen):
        ctx.set(dut.enable, 0)
        await drive(ctx, dut, encode(packet))
        await wait_cycles(ctx, 3)
        assert [data for data, _, end, _ in seen["passing"] if not end] == encode(packet)
        assert ctx.get(dut.recv_header.valid) == 0

    run(tb)
