"""Doorbell pages (gap 1 of docs/reliability.md): the VIA engine takes a doorbell for VI k only
through VI k's own page of ``regmap.DOORBELL``; pages of VIs the card does not build, and every
other word of a page, answer ``err``, are counted (``DOORBELLS_REFUSED``) and change nothing.
Descriptor areas (gap 2): a VI's doorbells may name only descriptors inside the area its driver
gave it (VI ``DESC_BASE``/``DESC_SIZE``), so a process cannot point its own doorbell at another's
memory.

Driven on the real engine (``ViaEngine``) in the Amaranth simulator with ``via_single``."""

import pytest
from support.via_pair import HOST, PARAMS
from support.via_single import PEER, header, run, wait_frames
from test_via_engine import PTAG, VA, status

from numavia.base import regmap
from numavia.base.via_descriptor import CONTROL_OP, encode_descriptor
from numavia.gateware.bfm import BusError
from numavia.gateware.bfm import wishbone_read as read
from numavia.gateware.bfm import wishbone_write as write

PAGES = regmap.DOORBELL.array("VI")
VI_REGS = regmap.VIA.array("VI")
DESC = HOST + 0x100


async def setup(ctx, node):
    await node.enable(ctx)
    await node.register(ctx, 1, VA, 0x400, [HOST + 0x8000], PTAG, read=1, write_=1)
    for vi in range(PARAMS.vis):
        await node.connect(ctx, vi, PEER, vi, PTAG)


async def queue_status(ctx, node):
    """``[(send, receive)]`` descriptors posted and not completed, per VI."""
    words = [await node.vi_reg(ctx, vi, "QUEUE_STATUS") for vi in range(PARAMS.vis)]
    return [(w & 0xFFFF, w >> 16) for w in words]


def test_pages_are_one_per_vi_and_4_kib_apart():
    assert regmap.DOORBELL_PAGE_BYTES == 0x1000 == PAGES.stride
    assert [PAGES.offset_of(vi, "SQ_DOORBELL") for vi in range(3)] == [0x0000, 0x1000, 0x2000]
    assert [PAGES.offset_of(vi, "RQ_DOORBELL") for vi in range(3)] == [0x0004, 0x1004, 0x2004]


def test_a_doorbell_in_vi_k_page_posts_on_vi_k_only():
    async def bench(ctx, node, wire):
        await setup(ctx, node)
        expected = [(0, 0)] * PARAMS.vis
        for vi in range(PARAMS.vis):
            desc = DESC + 0x100 * vi
            await node.post(ctx, vi, "send", desc, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 4 + vi)]))
            frames = await wait_frames(ctx, wire, vi + 1)
            h = header(frames[vi])
            assert (h["SRC_VI"], h["DST_VI"], h["MSG_LENGTH"]) == (vi, vi, 4 + vi)
            expected[vi] = (1, 0)  # unacknowledged: it stays on VI vi's send queue
            assert await queue_status(ctx, node) == expected
        for vi in range(PARAMS.vis):
            await node.post(
                ctx, vi, "recv", DESC + 0x800 + 0x100 * vi, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 16)])
            )
            expected[vi] = (1, 1)
            assert await queue_status(ctx, node) == expected
        assert await node.counter(ctx, "DOORBELLS_REFUSED") == 0

    run(bench)


def test_pages_of_missing_vis_and_other_words_of_a_page_are_refused_counted_and_change_nothing():
    missing = [PARAMS.vis, PAGES.count - 1]  # pages the map reserves, the card lacks
    doorbells = {r.offset for r in PAGES.registers}
    other_words = {r.offset for r in VI_REGS.registers} | {max(doorbells) + 4, PAGES.stride - 4}
    other_words -= doorbells

    async def bench(ctx, node, wire):
        await setup(ctx, node)
        node.load(ctx, DESC, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 16)]))
        bad = [PAGES.offset_of(vi, r.name) for vi in missing for r in PAGES.registers]
        # No VI register is reachable through a doorbell page, at its own offset or any other.
        bad += [PAGES.element_offset(1) + offset for offset in sorted(set(other_words))]
        cmd_fail = VI_REGS.register("CMD").field("FAIL").mask
        for n, address in enumerate(bad, start=1):
            with pytest.raises(BusError):
                await write(ctx, node.engine.doorbells, address, DESC | cmd_fail)
            assert await node.counter(ctx, "DOORBELLS_REFUSED") == n
        for address in bad[len(missing) * len(PAGES.registers) :]:
            with pytest.raises(BusError):  # not readable either (reads are not counted)
                await read(ctx, node.engine.doorbells, address)
        assert await node.counter(ctx, "DOORBELLS_REFUSED") == len(bad)
        await ctx.tick().repeat(300)
        assert wire.sent == []
        assert await queue_status(ctx, node) == [(0, 0)] * PARAMS.vis
        state, connected = VI_REGS.register("STATE").field("STATE"), dict(regmap.VI_STATES)["CONNECTED"]
        for vi in range(PARAMS.vis):  # the CMD-offset writes carried FAIL: no VI failed
            assert state.extract(await node.vi_reg(ctx, vi, "STATE")) == connected
        # The doorbells left the privileged VI array: their old offsets there are holes now.
        for offset in (0x0, 0x4):
            with pytest.raises(BusError):
                await write(ctx, node.engine.regs, VI_REGS.element_offset(1) + offset, DESC)
        assert await queue_status(ctx, node) == [(0, 0)] * PARAMS.vis
        # The VI's own page still works after all that.
        await node.doorbell(ctx, 1, "SQ_DOORBELL", DESC)
        await wait_frames(ctx, wire, 1)
        assert header(wire.sent[0])["SRC_VI"] == 1

    run(bench)


def test_a_vi_posts_only_descriptors_inside_its_own_descriptor_area():
    area = {1: (HOST + 0x1000, 0x200), 2: (HOST + 0x1200, 0x200), 3: (0, 0)}  # VI 3: as at reset
    send = encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 16)])

    async def bench(ctx, node, wire):
        await node.enable(ctx)
        await node.register(ctx, 1, VA, 0x400, [HOST + 0x8000], PTAG, read=1, write_=1)
        for vi, desc_area in area.items():
            await node.connect(ctx, vi, PEER, vi, PTAG, desc_area=desc_area)
        base, size = area[1]
        end = base + size
        # Refused, each counted, nothing queued: another VI's area, unaligned, just before the area,
        # a control segment straddling its end, outside host memory; and any address on VI 3,
        # whose driver gave it no area.
        bad = [
            (1, "SQ_DOORBELL", area[2][0]),
            (1, "RQ_DOORBELL", area[2][0] + 0x40),
            (1, "SQ_DOORBELL", base + 8),
            (1, "SQ_DOORBELL", base - 0x20),
            (1, "RQ_DOORBELL", end - 0x10),
            (1, "SQ_DOORBELL", 0x1000),
            (3, "SQ_DOORBELL", base),
            (3, "RQ_DOORBELL", HOST),
        ]
        for _vi, _name, address in bad:
            if address >= HOST:
                node.load(ctx, address & ~0xF, send)
        for n, (vi, name, address) in enumerate(bad, start=1):
            await node.doorbell(ctx, vi, name, address)
            assert await node.counter(ctx, "DOORBELLS_REFUSED") == n
        await ctx.tick().repeat(300)
        assert wire.sent == [] and await queue_status(ctx, node) == [(0, 0)] * PARAMS.vis
        # The area's own descriptors go, to its last whole one.
        node.load(ctx, base, send)
        node.load(ctx, end - len(send), send)
        await node.post(ctx, 1, "send", base, send)
        await node.post(ctx, 1, "recv", end - len(send), send)
        await wait_frames(ctx, wire, 1)
        assert await queue_status(ctx, node) == [(0, 0), (1, 1)] + [(0, 0)] * (PARAMS.vis - 2)
        # A control segment inside whose segments run past the end: posted, then refused as a
        # format error once its length is known; what follows the area is never read as segments.
        end2 = area[2][0] + area[2][1]
        node.load(ctx, end2, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 99)])[-16:])
        long = encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 16), (VA, 1, 16)])
        await node.post(ctx, 2, "send", end2 - 0x20, long)
        done = await node.wait_done(ctx, end2 - 0x20)
        assert done["STATUS"] & status(FORMAT_ERROR=1)
        assert {(header(f)["SRC_VI"], header(f)["MSG_LENGTH"]) for f in wire.sent} == {(1, 16)}
        assert await node.counter(ctx, "DOORBELLS_REFUSED") == len(bad)

    run(bench)
