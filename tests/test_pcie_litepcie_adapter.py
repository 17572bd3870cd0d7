# amaranth: UnusedElaboratable=no
"""The LitePCIe PHY adapter: TLPs of every header format and payload length converted from a
LitePCIe PHY stream to the endpoint's and back, for 64- and 128-bit PHYs of both endiannesses,
with gaps and back-pressure; a known vector pins the byte order of a 7-series ("big") PHY.

The reference below is LitePCIe's PHY convention as its packetizer/depacketizer (litepcie 2024.12,
``tlp/packetizer.py``, ``tlp/depacketizer.py``) define it: header dwords are values, payload dwords
are byte-reversed on "big" PHYs, ``be`` has a nibble per dword, ``first`` marks a TLP's first beat.
"""

import random

import pytest
from cocotbext.pcie.core.tlp import Tlp
from support.sim import run_testbench

from numavia.gateware.pcie.litepcie_adapter import LitePcieAdapter
from numavia.pcie_model import (
    CARD_ID,
    HOST_ID,
    beat_dwords,
    config_write,
    dwords_to_beats,
    memory_read,
    memory_write,
    tlp_to_dwords,
)


def litepcie_beats(dwords, lanes, endianness):
    """[(dat, be, first, last)] of one TLP on a LitePCIe PHY stream."""
    header = 4 if dwords[0] >> 29 & 1 else 3
    wire = [
        d if i < header or endianness == "little" else int.from_bytes(d.to_bytes(4, "little"), "big")
        for i, d in enumerate(dwords)
    ]
    beats = []
    for i in range(0, len(wire), lanes):
        chunk = wire[i : i + lanes]
        beats.append(
            (
                sum(d << (32 * k) for k, d in enumerate(chunk)),
                (1 << (4 * len(chunk))) - 1,
                i == 0,
                i + lanes >= len(wire),
            )
        )
    return beats


def completion(length_bytes, seed):
    req = memory_read(0x1000, length_bytes, tag=3)
    req.requester_id = HOST_ID
    cpl = Tlp.create_completion_data_for_tlp(req, CARD_ID)
    cpl.set_data(bytes(random.Random(seed).randrange(256) for _ in range(length_bytes)))
    cpl.byte_count = length_bytes
    return cpl


def sample_tlps():
    rng = random.Random(1)
    tlps = [memory_read(0xF000_0010, 4), memory_read(0x1_2345_6780, 64), config_write(0x10, 0xFFFF_FFFF)]
    for n in (1, 2, 3, 4, 5, 8, 9):
        tlps.append(memory_write(0xE000_0100, bytes(rng.randrange(256) for _ in range(4 * n))))
        tlps.append(memory_write(0x2_0000_0100, bytes(rng.randrange(256) for _ in range(4 * n))))
        tlps.append(completion(4 * n, n))
    return tlps


def run(lanes, endianness, bench):
    dut = LitePcieAdapter(data_width=32 * lanes, endianness=endianness)
    run_testbench(dut, bench)


def set_beat(ctx, stream, beat):
    """Drive one beat's fields: LitePCIe streams have flat members, the endpoint's a payload."""
    for name, value in beat.items():
        ctx.set(
            getattr(stream, name)
            if name in ("dat", "be", "first", "last") and hasattr(stream, "dat")
            else stream.payload[name],
            value,
        )


async def drive_and_collect(ctx, rng, src, send_beats, dst, fields, tlps, limit=20_000):
    """Offer ``send_beats`` on ``src`` with gaps while taking ``dst`` with back-pressure; return
    the ``fields`` of every beat taken (the last of them is the beat's ``last``)."""
    pending = list(send_beats)
    got = []
    offered = None
    for _ in range(limit):
        if offered is None and pending and rng.random() < 0.7:
            offered = pending.pop(0)
        if offered is not None:
            set_beat(ctx, src, offered)
        ctx.set(src.valid, offered is not None)
        ready = rng.random() < 0.6
        ctx.set(dst.ready, ready)
        _, _, src_ready, dst_valid, *values = await ctx.tick().sample(src.ready, dst.valid, *fields)
        if dst_valid and ready:
            got.append(tuple(values))
        if offered is not None and src_ready:
            offered = None
        if sum(1 for g in got if g[-1]) == tlps:
            assert not pending and offered is None
            return got
    raise TimeoutError("conversion did not finish")


@pytest.mark.parametrize("lanes", [2, 4])
@pytest.mark.parametrize("endianness", ["big", "little"])
def test_phy_to_endpoint(lanes, endianness):
    tlps = sample_tlps()
    beats = [b for t in tlps for b in litepcie_beats(tlp_to_dwords(t), lanes, endianness)]

    async def bench(ctx, dut):
        sent = [{"dat": dat, "be": be, "first": first, "last": last} for dat, be, first, last in beats]
        rx = dut.tlp_rx.payload
        got = await drive_and_collect(
            ctx, random.Random(lanes), dut.phy_source, sent, dut.tlp_rx, [rx.data, rx.keep, rx.last], len(tlps)
        )
        dwords, tlp_dwords = [], []
        for data, keep, last in got:
            dwords += beat_dwords(data, keep, lanes)
            if last:
                tlp_dwords.append(dwords)
                dwords = []
        assert tlp_dwords == [tlp_to_dwords(t) for t in tlps]

    run(lanes, endianness, bench)


@pytest.mark.parametrize("lanes", [2, 4])
@pytest.mark.parametrize("endianness", ["big", "little"])
def test_endpoint_to_phy(lanes, endianness):
    tlps = sample_tlps()

    async def bench(ctx, dut):
        sent = [
            {"data": data, "keep": keep, "last": last}
            for t in tlps
            for data, keep, last in dwords_to_beats(tlp_to_dwords(t), lanes)
        ]
        phy = dut.phy_sink
        got = await drive_and_collect(
            ctx, random.Random(lanes + 1), dut.tlp_tx, sent, phy, [phy.dat, phy.be, phy.first, phy.last], len(tlps)
        )
        expected = [b for t in tlps for b in litepcie_beats(tlp_to_dwords(t), lanes, endianness)]
        assert [tuple(int(v) for v in g) for g in got] == [(d, be, int(f), int(la)) for d, be, f, la in expected]

    run(lanes, endianness, bench)


def test_a_7_series_phy_carries_payload_bytes_most_significant_first():
    """A 3DW memory write of bytes 01 02 03 04 05 06 07 08: dword 3 (the first payload dword) is
    0x01020304 on a "big" PHY, 0x04030201 on the endpoint's stream; the header is unchanged."""
    t = memory_write(0xE000_0100, bytes(range(1, 9)))
    ours = tlp_to_dwords(t)
    assert ours[3:] == [0x04030201, 0x08070605]
    phy = litepcie_beats(ours, 2, "big")
    assert phy[1][0] >> 32 == 0x01020304 and phy[2][0] & 0xFFFF_FFFF == 0x05060708
    assert phy[0][0] == ours[0] | ours[1] << 32

    async def bench(ctx, dut):
        got = await drive_and_collect(
            ctx,
            random.Random(3),
            dut.tlp_tx,
            [{"data": d, "keep": k, "last": la} for d, k, la in dwords_to_beats(ours, 2)],
            dut.phy_sink,
            [dut.phy_sink.dat, dut.phy_sink.last],
            1,
        )
        assert [int(d) for d, _ in got] == [b[0] for b in phy]

    run(2, "big", bench)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="endianness must be one of little, big"):
        LitePcieAdapter(endianness="middle")
    with pytest.raises(ValueError, match="data_width must be 64, 128, 256 or 512"):
        LitePcieAdapter(data_width=96)
