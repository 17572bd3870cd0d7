"""The whole card with its PCIe endpoint (``CardConfig(pcie=True)``) in Amaranth's simulator, driven
by the Python host of ``numavia.pcie_model`` over the TLP stream: identity registers through BAR0,
the shared window and private memory through BAR2 (checked against the SoC's view of the same
memory), and a VIA send posted by a doorbell through BAR0 whose descriptor, data, status and
completion-queue entry travel by DMA over PCIe, followed by an MSI.
"""

import random

from support.pcie_helpers import completion_payload
from support.via_single import frame, header

from numavia.base import regmap, via_att, via_descriptor, via_frame
from numavia.base.via_descriptor import CONTROL_OP, encode_descriptor
from numavia.gateware.bfm import wishbone_read as wb_read
from numavia.gateware.bfm import wishbone_write as wb_write
from numavia.gateware.card import Card, CardConfig
from numavia.pcie_model import EndpointHarness, memory_read, memory_write

BAR0 = 0xF000_0000
BAR2 = 0xC000_0000
HOST = 0x6000_0000  # host memory as the VIA engine's parameters know it (bus addresses)
CONFIG = CardConfig(
    slice_bytes=4096,
    max_nodes=4,
    private_bytes=4096,
    cache_sets=4,
    cache_ways=2,
    via_vis=4,
    via_cqs=2,
    via_queue_depth=4,
    via_max_segments=4,
    via_window=8,
    via_max_mtu=1500,
    via_mtu=1500,
    via_att_regions=8,
    via_att_pages=64,
    via_tx_buffer_bytes=4096,
    via_rx_buffer_bytes=8192,
    host_mem_base=HOST,
    host_mem_size=0x1_0000,
    pcie=True,
    pcie_completion_timeout_cycles=5000,
)
AMAP = CONFIG.address_map()
VIA = regmap.VIA
DESC_CTRL = via_descriptor.CONTROL_SEGMENT
PEER = 1


def reg(block, name):
    return block.base + block.register(name).offset


def run(body):
    card = Card(CONFIG)
    h = EndpointHarness(
        card,
        phy_rx=card.pcie_rx,
        phy_tx=card.pcie_tx,
        data_width=CONFIG.pcie_data_width,
        card_side=False,
        completion_delay=8,
    )
    h.card = card
    h.frames_sent = []  # frames the card transmitted (bytes)
    h.frames_to_card = []

    async def ethernet(ctx):
        out = bytearray()
        beats = []
        while True:
            ctx.set(card.eth_tx.ready, 1)
            if ctx.get(card.eth_tx.valid):
                beat = ctx.get(card.eth_tx.payload)
                n = 4 if not beat.last else 1 + [1, 2, 4, 8].index(beat.last_be)
                out += beat.data.to_bytes(4, "little")[:n]
                if beat.last:
                    h.frames_sent.append(bytes(out))
                    out = bytearray()
            if not beats and h.frames_to_card:
                data = h.frames_to_card.pop(0).ljust(60, b"\0")
                words = [data[i : i + 4] for i in range(0, len(data), 4)]
                beats = [(w, i == len(words) - 1) for i, w in enumerate(words)]
            if beats:
                w, last = beats.pop(0)
                ctx.set(
                    card.eth_rx.payload,
                    {
                        "data": int.from_bytes(w.ljust(4, b"\0"), "little"),
                        "last": last,
                        "last_be": (1 << (len(w) - 1)) if last else 0,
                    },
                )
                ctx.set(card.eth_rx.valid, 1)
            else:
                ctx.set(card.eth_rx.valid, 0)
            await ctx.tick()

    async def testbench(ctx, h):
        await h.enumerate(ctx, bar0=BAR0, bar2=BAR2)
        await body(ctx, h)

    h.run(testbench, processes=[ethernet])


async def bar0_read(ctx, h, offset, tag=0):
    return int.from_bytes(completion_payload(await h.request(ctx, memory_read(BAR0 + offset, 4, tag=tag))), "little")


def bar0_write(h, offset, value):
    h.send(memory_write(BAR0 + offset, value.to_bytes(4, "little")))


async def bar2_read(ctx, h, addr, length, tag=0):
    return completion_payload(await h.request(ctx, memory_read(BAR2 + addr, length, tag=tag)))


def test_bar0_reaches_the_registers_next_to_the_soc_bus():
    async def body(ctx, h):
        card = h.card
        assert await bar0_read(ctx, h, reg(regmap.CTRL, "ID")) == regmap.CARD_ID
        major, minor, patch = regmap.HW_VERSION
        assert await bar0_read(ctx, h, reg(regmap.CTRL, "VERSION"), tag=1) == major << 16 | minor << 8 | patch
        assert await bar0_read(ctx, h, reg(VIA, "VI_COUNT"), tag=2) == CONFIG.via_vis
        # A PCIe write is seen by the SoC's CPU and the other way round.
        bar0_write(h, reg(regmap.CTRL, "SCRATCH"), 0x1234_5678)
        assert await bar0_read(ctx, h, reg(regmap.CTRL, "SCRATCH"), tag=3) == 0x1234_5678
        assert await wb_read(ctx, card.regs, reg(regmap.CTRL, "SCRATCH")) == 0x1234_5678
        await wb_write(ctx, card.regs, reg(regmap.CTRL, "SCRATCH"), 0xCAFE_F00D)
        assert await bar0_read(ctx, h, reg(regmap.CTRL, "SCRATCH"), tag=4) == 0xCAFE_F00D
        # A hole in the register map: the word reads as a poisoned / error completion, not a hang.
        (cpl,) = await h.request(ctx, memory_read(BAR0 + 0x0F00, 4, tag=5))
        assert cpl.ep or cpl.status != 0

    run(body)


def test_the_soc_bus_and_pcie_share_the_registers_and_the_window_at_the_same_time():
    """The SoC's CPU hammers the registers and the window while the PCIe host does too: every
    access of either side gets its own answer (the arbiters hand whole accesses over)."""
    soc_results = []

    async def body(ctx, h):
        card = h.card
        bar0_write(h, reg(regmap.CTRL, "CTRL"), regmap.CTRL.register("CTRL").field("NODE_ID_VALID").mask)
        await bar0_read(ctx, h, reg(regmap.CTRL, "STATUS"))
        pcie_words = {0x200 + 4 * i: 0xA000_0000 + i for i in range(8)}
        soc_words = {0x300 + 4 * i: 0x5000_0000 + i for i in range(8)}
        for addr, value in pcie_words.items():
            h.send(memory_write(BAR2 + addr, value.to_bytes(4, "little")))
        start = len(h.completions)
        for tag in range(8):
            h.send(memory_read(BAR0 + reg(regmap.CTRL, "VERSION"), 4, tag=tag))
            h.send(memory_read(BAR2 + 0x200 + 4 * tag, 4, tag=8 + tag))
        # Meanwhile, on the SoC bus:
        for addr, value in soc_words.items():
            await wb_write(ctx, card.window, addr, value)
            soc_results.append(await wb_read(ctx, card.regs, reg(regmap.CTRL, "ID")) == regmap.CARD_ID)
        await h.wait(ctx, lambda: len(h.completions) - start >= 16, what="completions")
        major, minor, patch = regmap.HW_VERSION
        answers = {c.tag: int.from_bytes(completion_payload([c]), "little") for _, c in h.completions[start:]}
        assert sorted(answers) == list(range(16))
        assert [answers[t] for t in range(8)] == [major << 16 | minor << 8 | patch] * 8
        assert [answers[8 + t] for t in range(8)] == [pcie_words[0x200 + 4 * t] for t in range(8)]
        assert all(soc_results) and len(soc_results) == 8
        for addr, value in {**pcie_words, **soc_words}.items():
            assert await wb_read(ctx, card.window, addr) == value
        for tag, (addr, value) in enumerate(soc_words.items()):
            assert await bar2_read(ctx, h, addr, 4, tag=tag) == value.to_bytes(4, "little")

    run(body)


def test_pcie_parameters_are_checked_with_their_card_names():
    import pytest

    with pytest.raises(ValueError, match="^pcie_dma_outstanding must be a power of two"):
        CardConfig(pcie=True, pcie_dma_outstanding=3)
    with pytest.raises(ValueError, match="^pcie_data_width must be a multiple of 32 bits"):
        CardConfig(pcie=True, pcie_data_width=48)


def test_bar2_reaches_the_local_side_and_the_soc_window_sees_the_same_memory():
    rng = random.Random(5)

    async def body(ctx, h):
        card = h.card
        bar0_write(h, reg(regmap.CTRL, "CTRL"), regmap.CTRL.register("CTRL").field("NODE_ID_VALID").mask)
        assert await bar0_read(ctx, h, reg(regmap.CTRL, "STATUS")) & 1
        # Node 0's own slice (shared window) and the private memory.
        for tag, (base, length) in enumerate(((0x100, 64), (0x203, 13), (AMAP.private_base + 0x40, 130))):
            data = bytes(rng.randrange(256) for _ in range(length))
            h.send(memory_write(BAR2 + base, data))
            assert await bar2_read(ctx, h, base, length, tag=tag) == data
            # The SoC's window reaches the same words.
            first, last = base & ~3, (base + length + 3) & ~3
            words = b""
            for a in range(first, last, 4):
                words += (await wb_read(ctx, card.window, a)).to_bytes(4, "little")
            assert words[base - first : base - first + length] == data
        await wb_write(ctx, card.window, 0x400, 0x0BAD_CAFE)
        assert await bar2_read(ctx, h, 0x400, 4, tag=7) == (0x0BAD_CAFE).to_bytes(4, "little")
        counted = await bar0_read(ctx, h, reg(regmap.LAC, "HOME_WRITE_HITS"), tag=8)
        assert counted >= 1

    run(body)


VA = 0x10_0000_0040
PTAG = 5
DESC = HOST + 0x100
CQ_BASE = HOST + 0x2000
DATA_PA = HOST + 0x8040


def vi_reg(vi, name):
    return VIA.base + VIA.array("VI").offset_of(vi, name)


def doorbell(vi, name):
    """Address in BAR0 of ``name`` in VI ``vi``'s doorbell page (what a driver maps for the VI)."""
    return regmap.CARD.element_address("doorbell", "VI", vi, name)


def cq_reg(cq, name):
    return VIA.base + VIA.array("CQ").offset_of(cq, name)


def test_via_doorbell_over_bar0_fetches_by_dma_and_completes_with_an_msi():
    payload = bytes(random.Random(9).randrange(256) for _ in range(100))

    async def body(ctx, h):
        # Host memory: the descriptor, the data (one page of a registered region), an empty CQ ring.
        for i, b in enumerate(encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, len(payload))])):
            h.host_memory[DESC + i] = b
        for i, b in enumerate(payload):
            h.host_memory[DATA_PA + i] = b
        for i in range(32):
            h.host_memory[CQ_BASE + i] = 0

        # The driver's set-up, all through BAR0.
        bar0_write(h, VIA.base + VIA.register("CTRL").offset, VIA.register("CTRL").field("ENABLE").mask)
        count, first = via_att.region_pages(VA, 0x1000 - 0x40)
        bar0_write(h, VIA.base + VIA.register("ATT_ADDR").offset, via_att.l2_word_base(CONFIG.via_att_regions) + 8)
        bar0_write(h, VIA.base + VIA.register("ATT_WDATA").offset, DATA_PA)
        attrs = via_att.L1_ENTRY.encode_bits("ATTRIBUTES", VALID=1, RDMA_READ=1, RDMA_WRITE=1)
        entry = via_att.L1_ENTRY.encode(
            START_VA=VA,
            LENGTH=0x1000 - 0x40,
            L2_INDEX=8,
            PAGE_COUNT=count,
            FIRST_PAGE_SIZE=first,
            PTAG=PTAG,
            ATTRIBUTES=attrs,
        )
        bar0_write(h, VIA.base + VIA.register("ATT_ADDR").offset, 1 * via_att.L1_STRIDE_WORDS)
        for i in range(0, len(entry), 4):
            bar0_write(h, VIA.base + VIA.register("ATT_WDATA").offset, int.from_bytes(entry[i : i + 4], "little"))
        peer = VIA.array("VI").register("PEER")
        bar0_write(h, vi_reg(1, "PEER"), PEER << peer.field("NODE").lsb | 2 << peer.field("VI").lsb)
        bar0_write(h, vi_reg(1, "PTAG"), PTAG)
        bar0_write(h, vi_reg(1, "DESC_BASE"), DESC)
        bar0_write(h, vi_reg(1, "DESC_SIZE"), 0x100)
        bar0_write(h, vi_reg(1, "CMD"), VIA.array("VI").register("CMD").field("CONNECT").mask)
        bind = VIA.array("VI").register("CQ_BIND")
        bar0_write(h, vi_reg(1, "CQ_BIND"), bind.field("SEND_EN").mask)
        bar0_write(h, cq_reg(0, "BASE"), CQ_BASE)
        bar0_write(h, cq_reg(0, "SIZE"), 4)
        state = VIA.array("VI").register("STATE").field("STATE")
        assert state.extract(await bar0_read(ctx, h, vi_reg(1, "STATE"))) == dict(regmap.VI_STATES)["CONNECTED"]

        # The doorbell: the engine reads the descriptor and the data over PCIe and sends a frame.
        reads_before = len([t for _, t in h.from_card if t.fmt_type.name.startswith("MEM_READ")])
        # A doorbell in the page of a VI this card does not have: refused and counted, nothing sent.
        bar0_write(h, doorbell(CONFIG.via_vis, "SQ_DOORBELL"), DESC)
        assert await bar0_read(ctx, h, VIA.base + VIA.register("DOORBELLS_REFUSED").offset) == 1
        assert h.frames_sent == []
        bar0_write(h, doorbell(1, "SQ_DOORBELL"), DESC)
        await h.wait(ctx, lambda: h.frames_sent, 20_000, "the send's frame")
        (raw,) = h.frames_sent
        hd = header(raw)
        assert (hd["OP"], hd["SRC_VI"], hd["DST_VI"], hd["MSG_LENGTH"]) == (via_frame.OP.SEND, 1, 2, 100)
        assert raw[via_frame.HEADER.size :] == payload
        card_reads = [t for _, t in h.from_card if t.fmt_type.name.startswith("MEM_READ")][reads_before:]
        read_addrs = {t.address for t in card_reads}
        assert any(DESC <= a < DESC + 64 for a in read_addrs), "no DMA read of the descriptor"
        assert any(DATA_PA <= a < DATA_PA + 100 for a in read_addrs), "no DMA read of the data"
        assert h.msi_writes == []

        # The peer acknowledges: STATUS, LENGTH and the CQ entry are written to host memory, then the MSI.
        h.frames_to_card.append(frame(via_frame.OP.ACK, ack=1, src_vi=2, dst_vi=1, src=PEER, dst=0))
        await h.wait(ctx, lambda: h.msi_writes, 20_000, "the MSI")

        def word(addr):
            return int.from_bytes(bytes(h.host_memory.get(addr + i, 0) for i in range(4)), "little")

        status = DESC_CTRL.decode(bytes(h.host_memory.get(DESC + i, 0) for i in range(DESC_CTRL.size)))
        assert status["STATUS"] == via_descriptor.status_bits(DONE=1)
        assert status["LENGTH"] == 100
        info = via_descriptor.CQ_ENTRY.field("INFO")
        assert word(CQ_BASE) == DESC
        assert word(CQ_BASE + 4) == 1 | info.bit("PHASE").mask
        assert await bar0_read(ctx, h, cq_reg(0, "TAIL")) == 1
        # The MSI is the last memory write: the entry was on the link before it.
        writes = [(c, t) for c, t in h.from_card if t.fmt_type.name.startswith("MEM_WRITE")]
        assert writes[-1][1].address == h.msi_address and writes[-1][1].get_data() == (0x42).to_bytes(4, "little")
        entry_write = max(c for c, t in writes[:-1] if t.address <= CQ_BASE + 4 < t.address + 4 * t.length)
        assert entry_write < writes[-1][0]
        assert len(h.msi_writes) == 1

    run(body)
