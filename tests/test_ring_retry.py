"""Retry side of the ring link (RingRetry) alone: the testbench queues packets and takes the ones
offered to send as the transmit side does, reports them sent (or aborted), and answers with echoes
as the receive side passes them on."""

import random

from amaranth.sim import Simulator
from support.ring_bench import wait_cycles
from support.sim import run_simulation

from numavia.base.sci_packet import EchoStatus, Packet
from numavia.gateware.ring_retry import RETRY_EVENTS, RingRetry

NODE = 1
TIMEOUT, BUSY_DELAY = 40, 12


def run(testbench, *, out_depth=4, contexts=2, max_attempts=3):
    """Simulate a RingRetry of node 1; ``testbench(ctx, dut, seen)`` where ``seen`` fills with the
    slots freed and the count of each event, cycle by cycle."""
    dut = RingRetry(out_depth=out_depth, contexts=contexts)
    seen = {"freed": [], "events": dict.fromkeys((*RETRY_EVENTS, "TIMEOUTS"), 0)}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def monitor(ctx):
        async for _, _, freed, events in ctx.tick().sample(dut.slots.freed, dut.events):
            seen["freed"] += [slot for slot in range(out_depth) if freed >> slot & 1]
            for name in seen["events"]:
                seen["events"][name] += getattr(events, name)

    async def main(ctx):
        ctx.set(dut.node_id, NODE)
        ctx.set(dut.echo_timeout, TIMEOUT)
        ctx.set(dut.busy_delay, BUSY_DELAY)
        ctx.set(dut.max_attempts, max_attempts)
        await testbench(ctx, dut, seen)

    sim.add_testbench(monitor, background=True)
    sim.add_testbench(main)
    run_simulation(sim)


async def queue(ctx, dut, slot, target):
    ctx.set(dut.queued.payload, {"slot": slot, "target": target})
    ctx.set(dut.queued.valid, 1)
    await ctx.tick()
    ctx.set(dut.queued.valid, 0)


async def take(ctx, dut, *, limit=500):
    """Take the packet offered to send: ``(cycles waited, context, slot, seq)``."""
    for waited in range(limit):
        if ctx.get(dut.send.valid):
            offer = ctx.get(dut.send.payload)
            ctx.set(dut.send.ready, 1)
            await ctx.tick()
            ctx.set(dut.send.ready, 0)
            await ctx.tick()  # (as on the ring: a packet is never sent in the cycle after its take)
            return waited, offer.context, offer.slot, offer.seq
        await ctx.tick()
    raise AssertionError("nothing offered to send")


async def pulse(ctx, stream, payload):
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    await ctx.tick()
    ctx.set(stream.valid, 0)


async def sent(ctx, dut, context, *, aborted=False):
    await pulse(ctx, dut.sent, {"context": context, "aborted": aborted})


async def echo(ctx, dut, source, seq, status=EchoStatus.ACCEPTED):
    await pulse(ctx, dut.echo_received, {"source": source, "seq": seq, "status": status})


def counted(seen):
    return {name: n for name, n in seen["events"].items() if n}


def test_one_packet_per_target_in_flight_and_its_echo_frees_the_slot():
    """Slots 0 and 1 go to target 4, slot 2 to target 6: slot 1 waits for slot 0's echo, which
    frees slot 0 and toggles the pair's alternating bit."""

    async def tb(ctx, dut, seen):
        for slot, target in ((0, 4), (1, 4), (2, 6)):
            await queue(ctx, dut, slot, target)
        _, c0, slot, seq = await take(ctx, dut)
        assert (slot, seq) == (0, 0)
        await sent(ctx, dut, c0)
        _, c2, slot, seq = await take(ctx, dut)
        assert (slot, seq) == (2, 0)
        await sent(ctx, dut, c2)
        await wait_cycles(ctx, 5)
        assert not ctx.get(dut.send.valid)  # slot 1's target is busy
        assert ctx.get(dut.outstanding) == 2
        await echo(ctx, dut, 4, 1)  # the other alternating bit: answers nothing
        await echo(ctx, dut, 4, 0)
        _, _, slot, seq = await take(ctx, dut)
        assert (slot, seq) == (1, 1)
        assert seen["freed"] == [0]
        assert counted(seen) == {"TX_ACCEPTED": 1}

    run(tb)


def test_random_traffic_goes_out_once_per_packet_in_order_per_target():
    """Packets queued whenever a slot is free, to a few targets, each answered ACCEPTED a random
    while after it went out: every packet is offered once and its slot freed once, each target's
    packets leave in the order queued with alternating bits, and at most one per target is in
    flight."""
    rng = random.Random(32)
    out_depth, contexts, count = 8, 3, 60
    targets = (2, 3, 5, 7)

    async def tb(ctx, dut, seen):
        to_queue = [rng.choice(targets) for _ in range(count)]
        free_slots = list(range(out_depth))
        packet_in_slot = {}
        queued = {t: [] for t in targets}  # packet numbers, in queue order
        offered = {t: [] for t in targets}
        bits = {t: [] for t in targets}
        in_flight = {}  # target -> packet
        echoes = []  # [cycle due, target, seq]
        freed_seen = 0
        step, offer = "idle", None
        for cycle in range(20 * count):
            if len(seen["freed"]) == count:
                break
            for slot in seen["freed"][freed_seen:]:
                target, packet = packet_in_slot.pop(slot)
                assert in_flight.pop(target) == packet
                free_slots.append(slot)
            freed_seen = len(seen["freed"])
            # the transmit side: take, a cycle's gap, report it sent
            ctx.set(dut.send.ready, 0)
            ctx.set(dut.sent.valid, 0)
            if step == "idle" and ctx.get(dut.send.valid):
                offer = ctx.get(dut.send.payload)
                target, packet = packet_in_slot[offer.slot]
                assert in_flight.setdefault(target, packet) == packet, "two packets of a target in flight"
                offered[target].append(packet)
                bits[target].append(offer.seq)
                ctx.set(dut.send.ready, 1)
                step = "gap"
            elif step == "gap":
                step = "sent"
            elif step == "sent":
                ctx.set(dut.sent.payload, {"context": offer.context, "aborted": 0})
                ctx.set(dut.sent.valid, 1)
                echoes.append([cycle + rng.randrange(2, 12), packet_in_slot[offer.slot][0], offer.seq])
                step = "idle"
            # the receive side: one echo a cycle
            ctx.set(dut.echo_received.valid, 0)
            due = [e for e in echoes if e[0] <= cycle]
            if due:
                echoes.remove(due[0])
                ctx.set(dut.echo_received.payload, {"source": due[0][1], "seq": due[0][2], "status": 0})
                ctx.set(dut.echo_received.valid, 1)
            # the transmit side queues a packet now and then
            ctx.set(dut.queued.valid, 0)
            if to_queue and free_slots and rng.random() < 0.5:
                slot, target = free_slots.pop(0), to_queue.pop(0)
                packet = count - len(to_queue)
                packet_in_slot[slot] = (target, packet)
                queued[target].append(packet)
                ctx.set(dut.queued.payload, {"slot": slot, "target": target})
                ctx.set(dut.queued.valid, 1)
            await ctx.tick()
        assert len(seen["freed"]) == count
        assert offered == queued
        assert all(b == [n % 2 for n in range(len(b))] for b in bits.values())
        assert counted(seen) == {"TX_ACCEPTED": count}

    run(tb, out_depth=out_depth, contexts=contexts)


def test_silence_resends_after_the_timeout_and_busy_after_the_delay_until_given_up():
    """No echo: offered again ECHO_TIMEOUT cycles after it went out; BUSY: again after BUSY_DELAY
    and the count of silent attempts starts afresh; after MAX_ATTEMPTS silent ones the header
    (from its slot) is reported on ``failed``, and the slot freed once the report is taken."""
    header = Packet(target=4, cmd=5, addr=0x1234)

    async def tb(ctx, dut, seen):
        await queue(ctx, dut, 3, 4)
        _, context, _, _ = await take(ctx, dut)
        await sent(ctx, dut, context)
        waited, *_ = await take(ctx, dut)
        assert TIMEOUT <= waited <= TIMEOUT + 2
        await sent(ctx, dut, context)
        await echo(ctx, dut, 4, 0, EchoStatus.BUSY)
        waited, *_ = await take(ctx, dut)
        assert BUSY_DELAY <= waited <= BUSY_DELAY + 2
        for _ in range(2):
            await sent(ctx, dut, context)
            await take(ctx, dut)
        await sent(ctx, dut, context)  # the third silent transmission since the BUSY
        while not ctx.get(dut.failed.valid):
            await ctx.tick()
        assert ctx.get(dut.slots.lookup) == 3
        ctx.set(dut.slots.header, dut.slots.header.shape().from_bits(header.header_value()))
        reported = ctx.get(dut.failed.payload)
        assert (reported.target, reported.cmd, reported.addr, reported.source) == (4, 5, 0x1234, NODE)
        ctx.set(dut.failed.ready, 1)
        await ctx.tick()
        ctx.set(dut.failed.ready, 0)
        await ctx.tick()
        assert seen["freed"] == [3]
        assert ctx.get(dut.outstanding) == 0
        assert counted(seen) == {"TIMEOUTS": 4, "BUSY_RECEIVED": 1, "SEND_FAILURES": 1}

    run(tb)


def test_an_aborted_copy_waits_for_its_slot_and_is_not_an_attempt():
    """Aborted while its slot is still being filled: not offered until the slot is complete, then
    at once; with MAX_ATTEMPTS 2 the packet still gets two whole silent transmissions."""

    async def tb(ctx, dut, seen):
        ctx.set(dut.slots.filling, 1)
        ctx.set(dut.slots.fill_slot, 2)
        await queue(ctx, dut, 2, 4)
        _, context, _, _ = await take(ctx, dut)  # cut-through: offered while filling
        await sent(ctx, dut, context, aborted=True)
        await wait_cycles(ctx, 10)
        assert not ctx.get(dut.send.valid)
        ctx.set(dut.slots.filling, 0)
        waited, *_ = await take(ctx, dut)
        assert waited <= 1
        whole = 0
        while not ctx.get(dut.failed.valid):
            await sent(ctx, dut, context)
            whole += 1
            for _ in range(TIMEOUT + 5):
                if ctx.get(dut.send.valid) or ctx.get(dut.failed.valid):
                    break
                await ctx.tick()
            if ctx.get(dut.send.valid):
                await take(ctx, dut)
        assert whole == 2
        assert counted(seen) == {"TIMEOUTS": 2}

    run(tb, max_attempts=2)


def test_an_echo_after_the_give_up_still_completes_the_packet():
    async def tb(ctx, dut, seen):
        await queue(ctx, dut, 0, 4)
        _, context, _, _ = await take(ctx, dut)
        await sent(ctx, dut, context)
        while not ctx.get(dut.failed.valid):
            await ctx.tick()
        await echo(ctx, dut, 4, 0)
        await ctx.tick()
        assert not ctx.get(dut.failed.valid)
        await ctx.tick()  # the slot is freed in the cycle after the release
        assert seen["freed"] == [0]
        assert counted(seen) == {"TIMEOUTS": 1, "TX_ACCEPTED": 1}

    run(tb, max_attempts=1)
