# amaranth: UnusedElaboratable=no
"""The VIA engine's Wishbone DMA port onto the PCIe requester (``WishboneToDma``), through the real
endpoint to the Python host of ``numavia.pcie_model``: burst and single reads data-checked with the
read-ahead cut at its boundaries, bursts given up half way, writes with partial byte enables,
write-then-read ordering, a failed read answered with ``err``, and ``idle``."""

import random

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from support.pcie_helpers import SHARED_BYTES, run

from numavia.gateware import wishbone, wishbone_burst
from numavia.gateware.bfm import wishbone_burst_read, wishbone_burst_write
from numavia.gateware.host_port import HostPortSignature
from numavia.gateware.pcie import tlp
from numavia.gateware.pcie.config import EndpointParams
from numavia.gateware.pcie.dma_bridge import WishboneToDma
from numavia.gateware.pcie.endpoint import PcieEndpoint
from numavia.pcie_model import EndpointHarness

HOST = 0x6000_0000
PARAMS = EndpointParams(bar2_bytes=SHARED_BYTES, completion_timeout_cycles=1500)


class BridgeTop(wiring.Component):
    """The endpoint with the bridge on its DMA port; the bridge's Wishbone side is the test's."""

    def __init__(self, params=PARAMS):
        self.params = params
        super().__init__(
            {
                "phy_rx": In(tlp.TlpStreamSignature(params.data_width)),
                "phy_tx": Out(tlp.TlpStreamSignature(params.data_width)),
                "csr": Out(wishbone.Signature(addr_width=(params.bar0_bytes // 4 - 1).bit_length())),
                "shared": Out(HostPortSignature()),
                "bus": In(wishbone_burst.Signature(addr_width=30)),
                "idle": Out(1),
                "flush": In(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.endpoint = ep = PcieEndpoint(self.params)
        m.submodules.bridge = bridge = WishboneToDma()
        wiring.connect(m, wiring.flipped(self.phy_rx), ep.phy_rx)
        wiring.connect(m, ep.phy_tx, wiring.flipped(self.phy_tx))
        wiring.connect(m, ep.csr, wiring.flipped(self.csr))
        wiring.connect(m, ep.shared, wiring.flipped(self.shared))
        wiring.connect(m, wiring.flipped(self.bus), bridge.bus)
        wiring.connect(m, bridge.dma, ep.dma)
        m.d.comb += [self.idle.eq(bridge.idle), bridge.flush.eq(self.flush)]
        return m


def harness(**kwargs):
    return EndpointHarness(BridgeTop(), shared_bytes=SHARED_BYTES, **kwargs)


def fill(h, base, length, seed):
    data = bytes(random.Random(seed).randrange(256) for _ in range(length))
    for i, b in enumerate(data):
        h.host_memory[base + i] = b
    return data


def host_word(h, addr):
    return int.from_bytes(bytes(h.host_memory.get(addr + i, 0) for i in range(4)), "little")


def reads_sent(h):
    return [t for _, t in h.from_card if t.fmt_type.name.startswith("MEM_READ")]


def writes_sent(h):
    return [t for _, t in h.from_card if t.fmt_type.name.startswith("MEM_WRITE")]


@pytest.mark.parametrize("order", ["fifo", "reverse"])
def test_burst_and_single_reads_return_host_memory(order):
    h = harness(order=order, completion_bytes=64, seed=2)
    data = fill(h, HOST, 0x1000, seed=1)

    async def body(ctx, h):
        bus = h.dut.bus
        for offset, words in ((0, 1), (4, 1), (0x3C, 3), (0x40, 16), (0x44, 40), (0x100, 100), (0xFC0, 16)):
            before = len(reads_sent(h))
            got = await wishbone_burst_read(ctx, bus, HOST + offset, words)
            assert [d for d, _ in got] == [
                int.from_bytes(data[offset + 4 * i : offset + 4 * i + 4], "little") for i in range(words)
            ], (offset, words)
            assert not any(e for _, e in got)
            reads = reads_sent(h)[before:]
            # Read-ahead pieces end at 64-byte boundaries; a classic cycle reads one dword.
            for t in reads:
                assert t.address // 64 == (t.address + 4 * t.length - 1) // 64
            if words == 1:
                assert [t.length for t in reads] == [1]
            covered = sum(t.length for t in reads)
            assert words <= covered <= words + 16 * 4  # at most reads_in_flight pieces ahead

    run(h, body)


def test_a_long_burst_keeps_several_reads_in_flight_and_stays_in_its_page():
    h = harness(seed=9, completion_delay=40)
    data = fill(h, HOST, 0x2000, seed=10)

    async def body(ctx, h):
        bus = h.dut.bus
        start = h.cycle
        got = await wishbone_burst_read(ctx, bus, HOST + 0x10, 300)
        assert [d for d, _ in got] == [int.from_bytes(data[0x10 + 4 * i : 0x14 + 4 * i], "little") for i in range(300)]
        # The host's 40-cycle turnaround overlaps the hand-out: several reads were out at once,
        # and 1200 bytes took far less than one turnaround per 64-byte piece.
        assert h.peak_pending_reads >= 3
        assert h.cycle - start < 19 * 40
        # A burst that ends at the page's end asks nothing of the next page.
        before = len(reads_sent(h))
        await wishbone_burst_read(ctx, bus, HOST + 0x1F00, 64)
        assert all(t.address < HOST + 0x2000 for t in reads_sent(h)[before:])
        got = await wishbone_burst_read(ctx, bus, HOST + 0x1FF8, 4)  # across the page: two reads, in order
        assert [d for d, _ in got] == [
            int.from_bytes(data[0x1FF8 + 4 * i : 0x1FFC + 4 * i], "little") if 0x1FF8 + 4 * i < 0x2000 else 0
            for i in range(4)
        ]

    run(h, body)


async def paused_burst_read(ctx, h, addr, words, pause_after, pause_cycles, during_pause=None):
    """A burst that lets go of the bus after ``pause_after`` words for ``pause_cycles`` and then
    continues (as the VIA engine's DMA reader does when its FIFO is full)."""
    first = await wishbone_burst_read(ctx, h.dut.bus, addr, words, give_up_after=pause_after)
    for _ in range(pause_cycles):
        if during_pause:
            during_pause()
            during_pause = None
            ctx.set(h.dut.flush, 1)
        await ctx.tick()
        ctx.set(h.dut.flush, 0)
    rest = await wishbone_burst_read(ctx, h.dut.bus, addr + 4 * pause_after, words - pause_after)
    return [d for d, _ in first + rest]


def test_a_short_pause_continues_the_burst_and_a_flush_or_a_long_pause_reads_again():
    h = harness(seed=11, completion_delay=20)
    data = fill(h, HOST, 0x400, seed=12)

    def words_at(offset, n, memory=data):
        return [int.from_bytes(memory[offset + 4 * i : offset + 4 * i + 4], "little") for i in range(n)]

    async def body(ctx, h):
        # A pause of a few cycles: the burst goes on from what was read ahead, no piece read twice.
        before = len(reads_sent(h))
        assert await paused_burst_read(ctx, h, HOST + 0x40, 32, 6, 5) == words_at(0x40, 32)
        addrs = [t.address for t in reads_sent(h)[before:]]
        assert len(addrs) == len(set(addrs)) and addrs[:2] == [HOST + 0x40, HOST + 0x80]
        # The host changes memory and rings a doorbell (flush) during the pause: the burst gets
        # the new words, read again.
        new = bytes(range(0x40))

        def host_writes():
            for i, b in enumerate(new):
                h.host_memory[HOST + 0x118 + i] = b

        before = len(reads_sent(h))
        got = await paused_burst_read(ctx, h, HOST + 0x100, 16, 6, 5, during_pause=host_writes)
        assert got[:6] == words_at(0x100, 6)
        assert got[6:] == [int.from_bytes(new[4 * i : 4 * i + 4], "little") for i in range(10)]
        assert HOST + 0x118 in [t.address for t in reads_sent(h)[before:]]
        # A long pause: what was read ahead is dropped and read again.
        before = len(reads_sent(h))
        assert await paused_burst_read(ctx, h, HOST + 0x200, 16, 4, 40) == words_at(0x200, 16)
        assert [t.address for t in reads_sent(h)[before:]][:2] == [HOST + 0x200, HOST + 0x210]

    run(h, body)


def test_a_burst_given_up_half_way_leaves_no_stale_words():
    h = harness(seed=4)
    data = fill(h, HOST, 0x400, seed=3)

    async def body(ctx, h):
        bus = h.dut.bus
        got = await wishbone_burst_read(ctx, bus, HOST + 0x40, 16, give_up_after=3)
        assert [d for d, _ in got] == [int.from_bytes(data[0x40 + 4 * i : 0x44 + 4 * i], "little") for i in range(3)]
        # The next access elsewhere gets its own words, not the rest of the abandoned read.
        got = await wishbone_burst_read(ctx, bus, HOST + 0x200, 5)
        assert [d for d, _ in got] == [int.from_bytes(data[0x200 + 4 * i : 0x204 + 4 * i], "little") for i in range(5)]
        got = await wishbone_burst_read(ctx, bus, HOST + 0x4C, 2)
        assert [d for d, _ in got] == [int.from_bytes(data[0x4C + 4 * i : 0x50 + 4 * i], "little") for i in range(2)]

    run(h, body)


def test_writes_become_memory_writes_with_byte_enables_and_are_seen_by_later_reads():
    h = harness(seed=5)

    async def body(ctx, h):
        bus = h.dut.bus
        words = [0x1111_1111 * (i + 1) & 0xFFFF_FFFF for i in range(9)]
        # Whole words: one write command, cut by the requester at the max payload size.
        await wishbone_burst_write(ctx, bus, HOST + 0x100, words)
        got = await wishbone_burst_read(ctx, bus, HOST + 0x100, 9)
        assert [d for d, _ in got] == words  # the read came after the write
        assert [(t.address, t.length) for t in writes_sent(h)] == [(HOST + 0x100, 9)]
        # Partial byte enables at the ends of a burst and in its middle.
        for a in range(HOST + 0x200, HOST + 0x220):
            h.host_memory[a] = 0xEE
        sels = [0b1100, 0xF, 0xF, 0b0011, 0xF, 0b0001]
        await wishbone_burst_write(ctx, bus, HOST + 0x200, [0xA0A1A2A3 + i for i in range(6)], sels)
        await h.wait(ctx, lambda: ctx.get(h.dut.idle), 200, "idle")
        expected = bytearray([0xEE] * 0x20)
        for i, sel in enumerate(sels):
            for b in range(4):
                if sel >> b & 1:
                    expected[4 * i + b] = (0xA0A1A2A3 + i) >> (8 * b) & 0xFF
        await ctx.tick().repeat(30)
        assert bytes(h.host_memory[a] for a in range(0x200 + HOST, 0x220 + HOST)) == bytes(expected)
        # A partial word ends a memory write; a partial first word is a write of its own.
        shapes = [(t.address - HOST, t.length, t.first_be, t.last_be) for t in writes_sent(h)[1:]]
        assert shapes == [(0x200, 1, 0b1100, 0), (0x204, 3, 0xF, 0b0011), (0x210, 2, 0xF, 0b0001)]

    run(h, body)


def test_idle_falls_while_a_written_word_has_not_reached_the_requester():
    h = harness(seed=6, tx_ready=0.3)

    async def body(ctx, h):
        bus = h.dut.bus
        assert ctx.get(h.dut.idle)
        await wishbone_burst_write(ctx, bus, HOST + 0x40, [1, 2, 3, 4])
        assert not ctx.get(h.dut.idle)  # acknowledged, not yet handed on
        await h.wait(ctx, lambda: ctx.get(h.dut.idle), 500, "idle")
        await h.wait(ctx, lambda: writes_sent(h), 500, "the memory write")
        assert [host_word(h, HOST + 0x40 + 4 * i) for i in range(4)] == [1, 2, 3, 4]

    run(h, body)


def test_a_read_that_times_out_answers_err_and_the_next_read_works():
    h = harness(seed=7, drop_tags=(0,))
    data = fill(h, HOST, 0x100, seed=8)

    async def body(ctx, h):
        bus = h.dut.bus
        got = await wishbone_burst_read(ctx, bus, HOST + 0x10, 2)
        assert [e for _, e in got] == [1, 1]
        got = await wishbone_burst_read(ctx, bus, HOST + 0x20, 2)
        assert got == [(int.from_bytes(data[0x20:0x24], "little"), 0), (int.from_bytes(data[0x24:0x28], "little"), 0)]

    run(h, body)


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="read_ahead_words must be a power of two"):
        WishboneToDma(read_ahead_words=12)
