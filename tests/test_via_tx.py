"""VIA transmit engine, its frames captured from the engine's Ethernet port: header fields,
segmentation by MTU, the window, go-back-N on timeout and on NAK, the retry limit, acknowledgements,
management and raw frames, and seeded random descriptors (tests/support/random_descriptors.py)."""

import pytest
from support.random_descriptors import descriptor_fuzz
from support.random_stimulus import scale, seed
from support.via_pair import HOST, PARAMS
from support.via_single import PEER, descriptor_reads, frame, header, run, wait_frames
from test_via_engine import PTAG, VA, status

from numavia.base import regmap, via_descriptor, via_frame
from numavia.base.via_descriptor import CONTROL_OP, encode_descriptor

OP = via_frame.OP
DESC = HOST + 0x100
VIA = regmap.VIA
STATUS_AT = via_descriptor.CONTROL_SEGMENT.field("STATUS").offset


async def setup(ctx, node, *, vi=1):
    await node.enable(ctx)
    await node.register(
        ctx,
        1,
        VA,
        0x4000,
        [HOST + 0x8040, HOST + 0x5000, HOST + 0x3000, HOST + 0x6000, HOST + 0x4000],
        PTAG,
        read=1,
        write_=1,
    )
    await node.connect(ctx, vi, PEER, 2, PTAG)


def pa(va):
    pages = [HOST + 0x8000, HOST + 0x5000, HOST + 0x3000, HOST + 0x6000, HOST + 0x4000]
    return pages[(va >> 12) - (VA >> 12)] + (va & 0xFFF)


def test_data_frame_carries_every_header_field_and_the_payload():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        node.load(ctx, pa(VA + 3), bytes(range(100)))
        await node.post(
            ctx, 1, "send", DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 3, 1, 100)], immediate=0xFEED)
        )
        (raw,) = await wait_frames(ctx, wire, 1)
        h = header(raw)
        assert h["DST_MAC"] == via_frame.mac_field(PEER) and h["SRC_MAC"] == via_frame.mac_field(0)
        assert h["ETHERTYPE"] == via_frame.ETHERTYPE_FIELD and h["OP"] == OP.SEND
        assert via_frame.HEADER.decode_bits("FLAGS", h["FLAGS"]) == {"FIRST": 1, "LAST": 1, "IMMEDIATE": 1}
        assert (h["SRC_VI"], h["DST_VI"], h["PSN"], h["ACK_PSN"]) == (1, 2, 0, 0)
        assert (h["MSG_LENGTH"], h["OFFSET"], h["PAYLOAD_LENGTH"], h["IMMEDIATE_DATA"]) == (100, 0, 100, 0xFEED)
        assert raw[via_frame.HEADER.size :] == bytes(range(100))
        await ctx.tick().repeat(4)  # the counter counts the MAC's last beat
        assert await node.counter(ctx, "TX_FRAMES") == 1

    run(bench)


def test_messages_are_cut_to_the_mtu():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.reg(ctx, "MTU", 200)  # 158 payload bytes per frame
        data = bytes((7 * i) & 0xFF for i in range(500))
        node.load(ctx, pa(VA), data)
        await node.post(ctx, 1, "send", DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 500)]))
        frames = await wait_frames(ctx, wire, 4)
        hs = [header(f) for f in frames]
        assert [h["OFFSET"] for h in hs] == [0, 158, 316, 474] and [h["PSN"] for h in hs] == [0, 1, 2, 3]
        assert [h["PAYLOAD_LENGTH"] for h in hs] == [158, 158, 158, 26]
        assert [via_frame.HEADER.decode_bits("FLAGS", h["FLAGS"])["FIRST"] for h in hs] == [1, 0, 0, 0]
        assert [via_frame.HEADER.decode_bits("FLAGS", h["FLAGS"])["LAST"] for h in hs] == [0, 0, 0, 1]
        assert b"".join(f[via_frame.HEADER.size :] for f in frames) == data

    run(bench)


def test_window_then_go_back_n_on_timeout_then_acks_complete():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.reg(ctx, "MTU", 200)
        await node.post(ctx, 1, "send", DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 158 * 12)]))
        await wait_frames(ctx, wire, PARAMS.window)
        await ctx.tick().repeat(1000)
        assert len(wire.sent) == PARAMS.window  # no acknowledgement: the window is full
        await wait_frames(ctx, wire, PARAMS.window + 1, timeout=6000)
        assert header(wire.sent[PARAMS.window])["PSN"] == 0  # the timer went back to the first frame
        assert await node.counter(ctx, "TX_TIMEOUTS") == 1
        # The peer acknowledges everything: the rest goes out and the descriptor completes.
        wire.send(frame(OP.ACK, ack=PARAMS.window))
        await wait_frames(ctx, wire, PARAMS.window + 1 + 4)
        wire.send(frame(OP.ACK, ack=12))
        st = await node.wait_done(ctx, DESC)
        assert st["STATUS"] == status(DONE=1) and st["LENGTH"] == 158 * 12
        assert await node.vi_reg(ctx, 1, "TX_PSN") == 12

    run(bench)


def test_vis_with_work_take_turns_one_frame_a_visit():
    """Three VIs rung while the engine is disabled, a five-frame message each: once enabled, the
    scheduler visits them in turn, one frame a visit; a VI whose visit left it work waits for the
    others' turns and is not forgotten (its work comes from its records at the visit's end, not
    from the registered choice, which leaves the visited VI out)."""
    frames_each, vis = 5, (1, 2, 3)

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.reg(ctx, "CTRL", 0)
        await node.reg(ctx, "MTU", 200)  # 158 payload bytes per frame
        for vi in vis[1:]:
            await node.connect(ctx, vi, PEER, 2, PTAG)
        for vi in vis:
            descriptor = encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 158 * frames_each)])
            await node.post(ctx, vi, "send", DESC + 0x100 * vi, descriptor)
        await ctx.tick().repeat(100)
        assert wire.sent == []
        await node.enable(ctx)
        frames = await wait_frames(ctx, wire, frames_each * len(vis))
        sent = [(header(f)["SRC_VI"], header(f)["PSN"]) for f in frames]
        # The round robin starts after the VI visited last (setup's connect visited VI 1).
        order = [vi for vi, _ in sent[: len(vis)]]
        assert order in [list(vis[i:] + vis[:i]) for i in range(len(vis))]
        assert sent == [(vi, psn) for psn in range(frames_each) for vi in order]

    run(bench)


def test_sequence_nak_resends_from_the_frame_asked_for():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.reg(ctx, "MTU", 200)
        await node.post(ctx, 1, "send", DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 158 * 4)]))
        await wait_frames(ctx, wire, 4)
        wire.send(frame(OP.NAK, psn=2, ack=2, nak=via_frame.NAK.SEQUENCE))
        frames = await wait_frames(ctx, wire, 6)
        assert [header(f)["PSN"] for f in frames[4:]] == [2, 3]
        assert header(frames[4])["OFFSET"] == 316
        assert await node.counter(ctx, "TX_NAK_SEQUENCE") == 1
        wire.send(frame(OP.ACK, ack=4))
        assert (await node.wait_done(ctx, DESC))["STATUS"] == status(DONE=1)

    run(bench)


def test_retry_limit_fails_the_vi_with_a_transport_error():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.post(ctx, 1, "send", DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 8)]))
        await node.post(ctx, 1, "send", DESC + 0x40, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 8)]))
        st = await node.wait_done(ctx, DESC, timeout=60000)
        assert st["STATUS"] == status(DONE=1, TRANSPORT_ERROR=1)
        assert (await node.wait_done(ctx, DESC + 0x40))["STATUS"] == status(DONE=1, FLUSHED=1)
        state = await node.vi_reg(ctx, 1, "STATE")
        assert state & 3 == 2 and state >> 8 == status(TRANSPORT_ERROR=1)
        assert await node.counter(ctx, "TX_TIMEOUTS") == 7  # RETRY_LIMIT 8: the 8th expiry fails
        assert await node.counter(ctx, "TX_ERRORS") == 1

    run(bench, rto_cycles=500)


def test_remote_error_nak_fails_the_vi():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.post(
            ctx,
            1,
            "send",
            DESC,
            encode_descriptor(CONTROL_OP.RDMA_WRITE, [(VA, 1, 8)], remote_va=0x123, remote_handle=7),
        )
        await wait_frames(ctx, wire, 1)
        wire.send(frame(OP.NAK, psn=0, ack=0, nak=via_frame.NAK.REMOTE_PROTECTION))
        st = await node.wait_done(ctx, DESC)
        assert st["STATUS"] == status(DONE=1, OP=2, RDMA_PROTECTION_ERROR=1)

    run(bench)


def test_management_and_raw_frames():
    async def bench(ctx, node, wire):
        await node.enable(ctx)
        ctrl = VIA.register("MGMT_TX_CTRL")
        for i, word in enumerate([0x04030201, 0x08070605, 0x0A09]):
            await node.mgmt_word(ctx, i, word)
        await node.reg(ctx, "MGMT_TX_CTRL", 3 << ctrl.field("DST_NODE").lsb | 10 << ctrl.field("LENGTH").lsb)
        (mgmt,) = await wait_frames(ctx, wire, 1)
        h = header(mgmt)
        assert h["OP"] == OP.MGMT and h["DST_MAC"] == via_frame.mac_field(3) and h["PAYLOAD_LENGTH"] == 10
        assert mgmt[via_frame.HEADER.size :] == bytes(range(1, 11))
        await node.reg(ctx, "MGMT_TX_CTRL", 10 << ctrl.field("LENGTH").lsb | ctrl.field("RAW").mask)
        await wait_frames(ctx, wire, 2)
        assert wire.sent[1] == bytes(range(1, 11))  # verbatim (the MAC pads it)
        assert await node.reg(ctx, "MGMT_TX_STATUS") == 0

    run(bench)


@pytest.mark.parametrize("doorbell", ["SQ_DOORBELL", "SQ_REPOST"])
@pytest.mark.parametrize("addr", [0x1000_0000, HOST + 0x108, HOST + 0xFFFF0])
def test_doorbells_outside_host_memory_or_misaligned_are_refused(addr, doorbell):
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.doorbell(ctx, 1, doorbell, addr)
        assert await node.counter(ctx, "DOORBELLS_REFUSED") == 1
        assert await node.vi_reg(ctx, 1, "QUEUE_STATUS") == 0
        await ctx.tick().repeat(200)
        assert wire.sent == []

    run(bench)


def test_random_descriptors_complete_by_the_engine_rules_and_touch_only_their_buffers():
    """Random-constrained stimulus (tests/support/random_descriptors.py): rounds of up to four seeded
    descriptors rung through the VI's doorbells, on its send queue (sends, RDMA writes and reads;
    the bench plays the peer, checks every frame against the descriptor and answers) or its receive
    queue (the bench sends a message for each): undefined operations, 0 to MAX_SEGMENTS + 2
    segments, segments inside, across, before and far from their region, of another protection tag
    or an empty handle, any length, undefined CONTROL and RESERVED bits, misaligned and outside
    doorbells. Every descriptor completes with the status the engine's rules give (a bad local
    send descriptor fails alone; a bad receive descriptor or a remote NAK fails the VI, flushing the
    rest), refused doorbells are counted, host memory changes only where legitimate data and
    completions go (byte for byte), and a failed VI is reset, reconnected and works again."""

    async def bench(ctx, node, wire):
        fuzz = await descriptor_fuzz(ctx, node, wire, seed=seed(31), rounds=40 * scale())
        assert all(fuzz.counts[name] for name in ("valid", "errors", "vi_errors", "refused")), fuzz.counts

    run(bench)


def test_a_message_fetches_its_descriptor_once_and_the_next_post_fetches_again():
    """A 500-byte send at MTU 200 (four frames) reads each word of its descriptor once. Posted
    again after its last frame, with a new length written at the same address (as a prebuilt
    descriptor is), the descriptor is read again and the new length goes out."""

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.reg(ctx, "MTU", 200)  # 158 payload bytes per frame
        reads, tick, _ = descriptor_reads(ctx, node, DESC, 12)

        async def frames_and_reads(count):
            for _ in range(20000):
                if len(wire.sent) >= count:
                    return [header(f) for f in wire.sent[:count]]
                await tick()
            raise TimeoutError(f"{len(wire.sent)} frames of {count}")

        await node.post(ctx, 1, "send", DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 500)]))
        hs = await frames_and_reads(4)
        assert [h["MSG_LENGTH"] for h in hs] == [500] * 4
        assert set(reads.values()) == {1}
        node.load(ctx, DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 100)]))
        await node.doorbell(ctx, 1, "SQ_DOORBELL", DESC)
        hs = await frames_and_reads(5)
        assert hs[4]["MSG_LENGTH"] == 100 and hs[4]["PAYLOAD_LENGTH"] == 100 and hs[4]["PSN"] == 4
        assert set(reads.values()) == {2}

    run(bench)


def test_a_repost_is_sent_from_the_cards_copy_until_the_att_is_written():
    """SQ_REPOST: a descriptor posted again, unchanged, on the VI that sent it last goes out from
    the card's copy: no word of it read and no ATT lookup (its payload is read again, with the new
    bytes). After an ATT write or FORGET_COPIES, on another VI, after another descriptor was
    fetched, or of an address the card holds no copy of, a repost is fetched and validated like any
    post."""

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        await node.connect(ctx, 2, PEER, 3, PTAG)
        other = DESC + 0x40
        node.load(ctx, DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 4)]))
        node.load(ctx, other, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 0x10, 1, 8)]))
        reads, tick, _ = descriptor_reads(ctx, node, DESC, (other + 48 - DESC) // 4)
        lookups = [0]

        def words_read():
            """Reads of the two descriptors' 12 words (not of the 4 words between them that the
            first burst reads past a send's descriptor and drops)."""
            return sum(reads[w // 4] for d in (DESC, other) for w in range(d, d + 48, 4))

        async def send(vi, doorbell, desc, payload, psn):
            """Ring `doorbell`; returns (descriptor words read, ATT lookups) until its frame is out
            and acknowledged, and its completion is written."""
            before_reads, before_lookups = words_read(), lookups[0]
            node.load(ctx, pa(VA), payload)
            count = len(wire.sent) + 1
            await node.doorbell(ctx, vi, doorbell, desc)
            for _ in range(20000):
                lookups[0] += ctx.get(node.engine.tx_att_lookup)
                if len(wire.sent) >= count:
                    break
                await tick()
            sent = wire.sent[count - 1]
            h = header(sent)
            assert (h["OP"], h["SRC_VI"], h["PSN"]) == (OP.SEND, vi, psn)
            wire.send(frame(OP.ACK, ack=psn + 1, src_vi=3 if vi == 2 else 2, dst_vi=vi))
            status_ = await node.wait_done(ctx, desc)
            assert status_["STATUS"] == status(DONE=1)
            node.load(ctx, desc + STATUS_AT, bytes(4))  # STATUS written 0 again, as the firmware does
            return sent[via_frame.HEADER.size :], words_read() - before_reads, lookups[0] - before_lookups

        first = await send(1, "SQ_DOORBELL", DESC, b"ping", 0)
        assert first[0] == b"ping" and first[1] == 12 and first[2] >= 1
        assert await send(1, "SQ_REPOST", DESC, b"pong", 1) == (b"pong", 0, 0)  # the card's copy
        assert await send(1, "SQ_REPOST", DESC, b"abcd", 2) == (b"abcd", 0, 0)
        await node.reg(ctx, "ATT_ADDR", 0x7F0)
        await node.reg(ctx, "ATT_WDATA", 0)  # any ATT write
        payload, words, looked_up = await send(1, "SQ_REPOST", DESC, b"efgh", 3)
        assert (payload, words) == (b"efgh", 12) and looked_up >= 1  # fetched and validated again
        assert await send(1, "SQ_REPOST", DESC, b"ijkl", 4) == (b"ijkl", 0, 0)
        await node.reg(ctx, "FORGET_COPIES", 1)  # as when the descriptor's memory is rewritten
        node.load(ctx, DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 8, 1, 4)]))
        node.load(ctx, pa(VA + 8), b"zzzz")
        payload, words, looked_up = await send(1, "SQ_REPOST", DESC, b"aaaa", 5)
        assert (payload, words) == (b"zzzz", 12) and looked_up >= 1  # fetched: the new segment's
        assert (await send(1, "SQ_REPOST", DESC, b"ijkl", 6))[1:] == (0, 0)
        node.load(ctx, DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 4)]))
        await node.reg(ctx, "FORGET_COPIES", 1)
        psn = 7
        # Another VI's repost of the same address: fetched and validated for that VI.
        payload, words, looked_up = await send(2, "SQ_REPOST", DESC, b"mnop", 0)
        assert (payload, words) == (b"mnop", 12) and looked_up >= 1
        payload, words, _ = await send(1, "SQ_REPOST", DESC, b"qrst", psn)  # the copy is VI 2's now
        assert (payload, words) == (b"qrst", 12)
        # A repost of an address the card holds no copy of: fetched, and its own fields go out.
        node.load(ctx, pa(VA + 0x10), b"12345678")
        payload, words, _ = await send(1, "SQ_REPOST", other, b"uvwx", psn + 1)
        assert (payload, words) == (b"12345678", 12)

    run(bench)
