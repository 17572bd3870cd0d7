"""VIA receive engine, frames injected at the engine's Ethernet port: in-order data and its ACK,
duplicates, gaps and their single NAK, refused frames with their counters (nothing written), FCS
errors, buffer overflow, management frames, RDMA reads served with no CPU, and seeded hostile frames
among legitimate traffic (tests/support/random_via_frames.py)."""

import pytest
from support.random_stimulus import scale, seed
from support.random_via_frames import via_rx_fuzz
from support.via_pair import HOST
from support.via_single import descriptor_reads, frame, header, run, wait_frames
from test_via_engine import PTAG, VA, status
from test_via_tx import pa, setup

from numavia.base import regmap, via_frame
from numavia.base.via_descriptor import CONTROL_OP, STATUS_OP, encode_descriptor

OP = via_frame.OP
RDESC = HOST + 0x200


async def settle(ctx, cycles=300):
    await ctx.tick().repeat(cycles)


def test_in_order_send_is_written_completed_and_acknowledged():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.post(ctx, 1, "recv", RDESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 0x101, 1, 64)]))
        wire.send(
            frame(
                OP.SEND,
                psn=0,
                payload=b"hello, via!",
                immediate=5,
                flags=via_frame.HEADER.encode_bits("FLAGS", FIRST=1, LAST=1, IMMEDIATE=1),
            )
        )
        st = await node.wait_done(ctx, RDESC)
        assert st["STATUS"] == status(DONE=1, OP=1, IMMEDIATE=1) and st["LENGTH"] == 11
        assert st["IMMEDIATE_DATA"] == 5
        assert node.dump(ctx, pa(VA + 0x101), 11) == b"hello, via!"
        (ack,) = await wait_frames(ctx, wire, 1)
        h = header(ack)
        assert h["OP"] == OP.ACK and h["ACK_PSN"] == 1 and h["DST_VI"] == 2 and h["SRC_VI"] == 1
        assert await node.vi_reg(ctx, 1, "RX_PSN") == 1

    run(bench)


def test_duplicate_is_dropped_and_acknowledged_again():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        for i in range(2):
            await node.post(
                ctx, 1, "recv", RDESC + 0x40 * i, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 64 * i, 1, 64)])
            )
        wire.send(frame(OP.SEND, psn=0, payload=b"once"))
        await node.wait_done(ctx, RDESC)
        await wait_frames(ctx, wire, 1)
        wire.send(frame(OP.SEND, psn=0, payload=b"TWICE"))
        await wait_frames(ctx, wire, 2)
        assert header(wire.sent[1])["ACK_PSN"] == 1
        assert not node.status(ctx, RDESC + 0x40)["STATUS"]  # the second receive is still free
        assert node.dump(ctx, pa(VA), 4) == b"once"
        assert await node.counter(ctx, "RX_DUPLICATE") == 1

    run(bench)


def test_a_gap_gets_one_nak_for_the_missing_frame():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.post(ctx, 1, "recv", RDESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 64)]))
        for psn in (1, 2, 3):
            wire.send(frame(OP.SEND, psn=psn, payload=b"late"))
        (nak,) = await wait_frames(ctx, wire, 1)
        await settle(ctx, 600)
        assert len(wire.sent) == 1
        h = header(nak)
        assert h["OP"] == OP.NAK and h["NAK_CODE"] == via_frame.NAK.SEQUENCE and h["PSN"] == 0
        assert await node.counter(ctx, "RX_OUT_OF_ORDER") == 3
        assert not node.status(ctx, RDESC)["STATUS"]

    run(bench)


def test_refused_frames_are_counted_and_write_nothing():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.post(ctx, 1, "recv", RDESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 64)]))
        before = node.dump(ctx, pa(VA), 64)
        cases = [
            ("RX_NOT_FOR_US", frame(OP.SEND, payload=b"x" * 8, ethertype=0x0008)),
            ("RX_NOT_FOR_US", frame(OP.SEND, payload=b"x" * 8, dst=5)),
            ("RX_MALFORMED", frame(9, payload=b"x" * 8)),
            ("RX_MALFORMED", frame(OP.SEND, payload=b"x" * 8, msg_length=4)),
            ("RX_MALFORMED", frame(OP.SEND, payload=b"x" * 8)[:-4] + b""),  # shorter than it says
            ("RX_MALFORMED", frame(OP.SEND)[: via_frame.ETH_HEADER_SIZE]),  # a runt (padded)
            ("RX_NO_VI", frame(OP.SEND, payload=b"x" * 8, dst_vi=9)),
            ("RX_NO_VI", frame(OP.SEND, payload=b"x" * 8, dst_vi=3)),  # not connected
            ("RX_NO_VI", frame(OP.SEND, payload=b"x" * 8, src_vi=3)),  # not its peer
            ("RX_NO_VI", frame(OP.SEND, payload=b"x" * 8, src=4)),  # not its peer node
        ]
        for counter, raw in cases:
            before_count = await node.counter(ctx, counter)
            wire.send(raw)
            await settle(ctx, 150)
            assert await node.counter(ctx, counter) == before_count + 1, counter
        assert node.dump(ctx, pa(VA), 64) == before
        assert not node.status(ctx, RDESC)["STATUS"] and await node.vi_reg(ctx, 1, "RX_PSN") == 0
        assert await node.counter(ctx, "RX_FRAMES") == len(cases)

    run(bench)


def test_a_frame_with_bad_fcs_is_read_ahead_but_never_acted_on():
    """The engine reads a frame's header as it comes in; this one's FCS is bad, so the FIFO drops it
    and the engine forgets what it read: nothing written, completed or answered, and the good frame
    behind it (the same sequence number) is taken as the first."""

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.post(ctx, 1, "recv", RDESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 64)]))
        wire.send(frame(OP.SEND, payload=b"corrupted" * 20), fcs_error=True)
        await settle(ctx)
        assert await node.counter(ctx, "RX_BAD_FCS") == 1 and await node.counter(ctx, "RX_FRAMES") == 0
        assert not node.status(ctx, RDESC)["STATUS"] and wire.sent == []
        assert node.dump(ctx, pa(VA), 9) != b"corrupted"
        wire.send(frame(OP.SEND, payload=b"the good one"))
        st = await node.wait_done(ctx, RDESC)
        assert st["STATUS"] == status(DONE=1, OP=1) and st["LENGTH"] == 12
        assert node.dump(ctx, pa(VA), 12) == b"the good one"
        (ack,) = await wait_frames(ctx, wire, 1)
        assert header(ack)["OP"] == OP.ACK and header(ack)["ACK_PSN"] == 1
        assert await node.counter(ctx, "RX_FRAMES") == 1

    run(bench)


def test_receive_buffer_overflow_drops_whole_frames():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        frames = 16
        for psn in range(frames):  # back to back, a word a cycle: faster than this memory takes them
            wire.send(
                frame(OP.RDMA_WRITE, psn=psn, payload=bytes([psn]) * 1458, remote_va=VA + 8 * psn, remote_handle=1)
            )
        await settle(ctx, 14000)
        dropped = await node.counter(ctx, "RX_OVERFLOW")
        taken = await node.vi_reg(ctx, 1, "RX_PSN")
        assert dropped > 0 and taken + dropped + await node.counter(ctx, "RX_OUT_OF_ORDER") == frames
        assert node.dump(ctx, pa(VA + 8 * (taken - 1)), 1458) == bytes([taken - 1]) * 1458  # intact

    run(bench, bursting=False)  # host memory at a word every other cycle


def test_management_frames_come_only_from_cards_and_wait_for_the_firmware():
    async def bench(ctx, node, wire):
        await node.enable(ctx)
        mgmt = regmap.VIA.register("MGMT_RX_STATUS")
        # From a MAC outside the cards' prefix (node 3's low byte): not a card, dropped and counted.
        foreign = bytearray(frame(OP.MGMT, payload=b"spoof", src=3, dst_vi=0))
        src_mac = via_frame.HEADER.field("SRC_MAC")
        foreign[src_mac.offset : src_mac.offset + 5] = bytes(5)
        wire.send(bytes(foreign))
        await settle(ctx)
        assert not await node.reg(ctx, "MGMT_RX_STATUS") & mgmt.field("VALID").mask
        assert await node.counter(ctx, "RX_NOT_FOR_US") == 1
        wire.send(frame(OP.MGMT, payload=bytes(range(10)), src=3, dst_vi=0))
        wire.send(frame(OP.MGMT, payload=b"second", src=3, dst_vi=0))
        await settle(ctx)
        st = await node.reg(ctx, "MGMT_RX_STATUS")
        assert st & mgmt.field("VALID").mask and (st >> mgmt.field("SRC_NODE").lsb) & 0x3F == 3
        assert (st >> mgmt.field("LENGTH").lsb) & 0x7F == 10
        words = [await node.reg_array(ctx, "MGMT_RX_DATA", i) for i in range(3)]
        assert b"".join(w.to_bytes(4, "little") for w in words)[:10] == bytes(range(10))
        assert await node.counter(ctx, "RX_MGMT_DROPPED") == 1  # the second found the slot taken
        await node.reg(ctx, "MGMT_RX_POP", 1)
        assert not await node.reg(ctx, "MGMT_RX_STATUS") & mgmt.field("VALID").mask

    run(bench)


def test_read_request_is_served_with_no_cpu():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        data = bytes((3 * i + 1) & 0xFF for i in range(300))
        node.load(ctx, pa(VA + 0x7FF), data)
        await node.reg(ctx, "MTU", 200)
        wire.send(frame(OP.READ_REQUEST, psn=0, msg_length=300, remote_va=VA + 0x7FF, remote_handle=1))
        frames = await wait_frames(ctx, wire, 2)
        hs = [header(f) for f in frames]
        assert [h["OP"] for h in hs] == [OP.READ_RESPONSE] * 2 and [h["PSN"] for h in hs] == [0, 0]
        assert [h["OFFSET"] for h in hs] == [0, 158]
        assert b"".join(f[via_frame.HEADER.size :] for f in frames) == data
        # Without the read right, the request is refused with a NAK.
        await node.register(ctx, 2, VA + 0x10000, 64, [HOST + 0x9000], PTAG, read=0, write_=1)
        wire.send(frame(OP.READ_REQUEST, psn=1, msg_length=8, remote_va=VA + 0x10000, remote_handle=2))
        nak = (await wait_frames(ctx, wire, 3))[2]
        assert header(nak)["OP"] == OP.NAK and header(nak)["NAK_CODE"] == via_frame.NAK.REMOTE_PROTECTION
        assert await node.counter(ctx, "RX_PROTECTION") == 1

    run(bench)


def test_hostile_frames_among_legitimate_traffic_are_dropped_counted_and_harmless():
    """Random-constrained stimulus (tests/support/random_via_frames.py): seeded groups of frames, half of
    them mutated (bad FCS, other EtherType/MAC/VI/source, unknown operations, lengths that disagree,
    truncation at every layer, trailing bytes, old/ahead/far sequence numbers, RDMA targets outside,
    across, before their region or in regions of another tag or without the right, oversized frames),
    among sends, RDMA writes (with and without immediate data), read requests, acknowledgements and
    management frames. Every hostile frame is counted under the counter the reference model names
    and nothing else moves; every legitimate message lands exactly once, intact, in order (host
    memory equals the model's byte for byte, completions and read responses included); the receive
    FIFO drains and a final send still completes. NUMAVIA_RTL_FUZZ_SCALE multiplies the groups."""

    async def bench(ctx, node, wire):
        fuzz = await via_rx_fuzz(ctx, node, wire, seed=seed(11), groups=24 * scale())
        assert all(
            fuzz.counts[name]
            for name in (
                "RX_BAD_FCS",
                "RX_NOT_FOR_US",
                "RX_MALFORMED",
                "RX_NO_VI",
                "RX_DUPLICATE",
                "RX_OUT_OF_ORDER",
                "RX_PROTECTION",
                "RX_STALE_RESPONSE",
            )
        ), fuzz.counts

    run(bench)


def test_a_receive_posted_ahead_is_loaded_before_its_send_and_read_again_when_posted_again():
    """The engine, idle, loads the receive queue's head when it is rung: the send that arrives
    later reads no descriptor word, and neither do the later frames of its message. Posted again
    after it completed, with other segments at the same address, the descriptor is read again
    and the next message lands where the new segments say."""

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.reg(ctx, "MTU", 200)  # 158 payload bytes a frame
        reads, tick, until_done = descriptor_reads(ctx, node, RDESC, 12)
        first = bytes((7 * i + 3) & 0xFF for i in range(400))
        await node.post(ctx, 1, "recv", RDESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 0x101, 1, 400)]))
        await tick(300)
        assert set(reads.values()) == {1}  # loaded while nothing arrived
        for offset in range(0, 400, 158):
            part = first[offset : offset + 158]
            wire.send(frame(OP.SEND, psn=offset // 158, payload=part, msg_length=400, offset=offset))
        st = await until_done(RDESC)
        assert st["STATUS"] == status(DONE=1, OP=1) and st["LENGTH"] == 400
        assert node.dump(ctx, pa(VA + 0x101), 400) == first
        assert set(reads.values()) == {1}  # the three frames read none

        second = b"posted again"
        await node.post(ctx, 1, "recv", RDESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 0x901, 1, 64)]))
        await tick(300)
        wire.send(frame(OP.SEND, psn=3, payload=second))
        st = await until_done(RDESC)
        assert st["STATUS"] == status(DONE=1, OP=1) and st["LENGTH"] == len(second)
        assert node.dump(ctx, pa(VA + 0x901), len(second)) == second
        assert node.dump(ctx, pa(VA + 0x101), 400) == first  # the old segments are left alone
        assert set(reads.values()) == {2}

    run(bench)


def test_a_bad_receive_loaded_ahead_is_reported_only_when_a_send_needs_it():
    """A receive descriptor of the wrong kind, loaded while the engine is idle, completes nothing
    and fails nothing by itself; the send that needs it finds it bad, as one fetched then would."""

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        bad = encode_descriptor(CONTROL_OP.RDMA_WRITE, [(VA, 1, 64)], remote_va=VA, remote_handle=1)
        await node.post(ctx, 1, "recv", RDESC, bad)
        await settle(ctx)
        assert not node.status(ctx, RDESC)["STATUS"]
        assert await node.vi_reg(ctx, 1, "STATE") & 3 == dict(regmap.VI_STATES)["CONNECTED"]
        assert wire.sent == []
        wire.send(frame(OP.SEND, psn=0, payload=b"data"))
        st = await node.wait_done(ctx, RDESC)
        assert st["STATUS"] == status(DONE=1, OP=1, FORMAT_ERROR=1) and st["LENGTH"] == 0
        assert await node.vi_reg(ctx, 1, "STATE") & 3 == dict(regmap.VI_STATES)["ERROR"]
        assert await node.counter(ctx, "RX_DESCRIPTOR_ERROR") == 1

    run(bench)


@pytest.mark.parametrize("behind", [1, 3])
def test_receives_behind_a_failed_one_are_flushed_once_each(behind):
    """A send fails the VI on a bad receive descriptor: the receives posted behind it complete as
    FLUSHED, each once (the flush's choice of VI is a cycle stale, so the last one's flush must not
    run again), and the receive queue ends empty."""

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        bad = encode_descriptor(CONTROL_OP.RDMA_WRITE, [(VA, 1, 64)], remote_va=VA, remote_handle=1)
        await node.post(ctx, 1, "recv", RDESC, bad)
        for i in range(1, behind + 1):
            good = encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 64 * i, 1, 64)])
            await node.post(ctx, 1, "recv", RDESC + 0x40 * i, good)
        wire.send(frame(OP.SEND, psn=0, payload=b"data"))
        st = await node.wait_done(ctx, RDESC)
        assert st["STATUS"] == status(DONE=1, OP=1, FORMAT_ERROR=1)
        for i in range(1, behind + 1):
            st = await node.wait_done(ctx, RDESC + 0x40 * i)
            assert st["STATUS"] == status(DONE=1, OP=1, FLUSHED=1) and st["LENGTH"] == 0
        await settle(ctx)
        queued = regmap.VIA.array("VI").register("QUEUE_STATUS").field("RQ")
        assert queued.extract(await node.vi_reg(ctx, 1, "QUEUE_STATUS")) == 0
        assert await node.counter(ctx, "RX_DESCRIPTOR_ERROR") == 1

    run(bench)


def test_an_rdma_read_response_lands_without_reading_its_descriptor_again():
    """The engine loads an RDMA read's descriptor while its request is out: the response is written
    into the read's segments without another descriptor read, and the read completes."""

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        reads, tick, until_done = descriptor_reads(ctx, node, RDESC, 12)
        segs = [(VA + 0x40, 1, 5), (VA + 0x1002, 1, 7)]
        desc = encode_descriptor(CONTROL_OP.RDMA_READ, segs, remote_va=0x1234_0000, remote_handle=9)
        await node.post(ctx, 1, "send", RDESC, desc)
        for _ in range(2000):
            if wire.sent:
                break
            await tick()
        assert header(wire.sent[0])["OP"] == OP.READ_REQUEST
        await tick(300)
        before = dict(reads)
        assert max(before.values()) == 2  # the segments: the transmit engine's fetch and the receive side's load
        data = b"twelve bytes"
        wire.send(frame(OP.READ_RESPONSE, psn=0, payload=data, msg_length=12))
        st = await until_done(RDESC)
        assert st["STATUS"] == status(DONE=1, OP=STATUS_OP.RDMA_READ) and st["LENGTH"] == 12
        assert node.dump(ctx, pa(VA + 0x40), 5) + node.dump(ctx, pa(VA + 0x1002), 7) == data
        # Its completion writes the control segment; nothing reads the descriptor again.
        assert reads == before

    run(bench)


def test_an_rdma_write_to_the_last_ones_window_takes_its_validation_until_the_att_is_written():
    """A ping-pong's RDMA writes land in the same window: the first is validated through the ATT,
    the next to the same window (VI, address, length, right) are written with no lookup. Another
    window is validated; after any ATT write (or FORGET_COPIES) the same window is validated again, so
    a region made read-only refuses the next write into it, and nothing is written."""

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        target = VA + 0x40

        async def write(psn, data, va=target):
            """Deliver an RDMA write; returns the receive engine's ATT lookups while it lands."""
            wire.send(frame(OP.RDMA_WRITE, psn=psn, payload=data, remote_va=va, remote_handle=1))
            lookups = 0
            for _ in range(300):
                lookups += ctx.get(node.engine.rx_att_lookup)
                await ctx.tick()
            return lookups

        assert await write(0, b"abcd") >= 1
        assert await write(1, b"efgh") == 0 and node.dump(ctx, pa(target), 4) == b"efgh"
        assert await write(2, b"ijkl", va=target + 0x40) >= 1  # another window
        assert await write(3, b"mnop") >= 1  # the first window again: the walker holds the other
        assert await write(4, b"qrst") == 0 and node.dump(ctx, pa(target), 4) == b"qrst"
        await node.reg(ctx, "ATT_ADDR", 0x7F0)
        await node.reg(ctx, "ATT_WDATA", 0)  # any ATT write
        assert await write(5, b"uvwx") >= 1 and node.dump(ctx, pa(target), 4) == b"uvwx"
        assert await write(6, b"uvwx") == 0
        await node.reg(ctx, "FORGET_COPIES", 1)
        assert await write(7, b"uvwx") >= 1
        # The region made read-only (an ATT write): the next write into the same window is refused.
        pages = [HOST + 0x8040, HOST + 0x5000, HOST + 0x3000, HOST + 0x6000, HOST + 0x4000]
        await node.register(ctx, 1, VA, 0x4000, pages, PTAG, read=1, write_=0)
        assert await write(8, b"XXXX") >= 1
        assert node.dump(ctx, pa(target), 4) == b"uvwx" and await node.counter(ctx, "RX_PROTECTION") == 1
        assert await node.vi_reg(ctx, 1, "RX_PSN") == 8

    run(bench)
