"""The PCIe endpoint at the transaction layer, in Amaranth's simulator: BAR read round trips,
DMA read latency and DMA throughput in cycles, turned into x1 Gen1/Gen2 equivalents.

The host side is the Python model of ``numavia.pcie_model`` answering at once (no link, no root
complex), and the BARs' targets answer at once too, so every cycle counted is the endpoint's own.
A cycle is one beat of the 64-bit TLP stream; the endpoint's datapath moves one dword a cycle.

The ``card_*`` figures come from the whole card with its endpoint (``CardConfig(pcie=True)``), so
BAR0 goes through the register arbiter and decoder to the real registers, BAR2 through the host
port arbiter to the local access controller and its memory, and a VIA doorbell through the engine
to its DMA over PCIe; the host still answers at once.
"""

from cocotbext.pcie.core.tlp import TlpType
from matplotlib.figure import Figure

from numavia.base import regmap, via_att, via_descriptor
from numavia.base.params import HOST_MEM_BASE
from numavia.base.via_descriptor import CONTROL_OP, encode_descriptor
from numavia.bench import results
from numavia.gateware.card import Card, CardConfig
from numavia.gateware.pcie.config import EndpointParams
from numavia.gateware.pcie.endpoint import PcieEndpoint
from numavia.pcie_model import EndpointHarness, memory_read, memory_write

BAR0, BAR2 = 0xF000_0000, 0xE000_0000
HOST = 0x1_0000_0000
CARD_HOST = HOST_MEM_BASE  # the VIA engine's host memory: its DMA addresses are 32-bit
PAPER_LOCAL_SHARED_READ_US = 0.9  # the paper's local shared read over PCI

# Payload bandwidth of one lane after 8b/10b (bytes/s), and the per-TLP link overhead in bytes:
# framing (2) + sequence number (2) + LCRC (4); the header (12 or 16) is counted from the TLPs.
LINKS = {"x1 Gen1": 250e6, "x1 Gen2": 500e6}
LINK_OVERHEAD_BYTES = 8
# The equivalent clock of each link: the one at which the endpoint's dword-a-cycle datapath
# matches the lane's payload rate (4 bytes a cycle), so bytes/cycle x clock is the MB/s it sustains.
USER_CLOCK_HZ = {link: rate / 4 for link, rate in LINKS.items()}


def _harness(**kwargs):
    params = EndpointParams(bar2_bytes=1 << 16, completion_timeout_cycles=100_000)
    return EndpointHarness(
        PcieEndpoint(params), registers={0: 0x1234_5678}, shared_bytes=1 << 16, completion_delay=0, **kwargs
    )


def _round_trip(h, request):
    ((start, _),) = [(c, t) for c, t in h.sent if t is request]
    ends = [c for c, t in h.completions if t.tag == request.tag and c >= start]
    return max(ends) - start


def measure():
    figures = {}
    h = _harness(completion_bytes=64)

    async def bench(ctx, h):
        await h.enumerate(ctx, bar0=BAR0, bar2=BAR2, mps_code=1, mrrs_code=2)
        for name, addr, nbytes, tag in (
            ("bar0_read_4B", BAR0, 4, 1),
            ("bar2_read_4B", BAR2, 4, 2),
            ("bar2_read_64B", BAR2, 64, 3),
            ("bar2_read_256B", BAR2, 256, 4),
        ):
            request = memory_read(addr, nbytes, tag=tag)
            await h.request(ctx, request)
            figures[f"{name}_round_trip_cycles"] = _round_trip(h, request)

        # DMA read latency: command to first data, with the host answering at once.
        for i in range(64):
            h.host_memory[HOST + i] = i
        h.pending_reads.clear()
        _, cycles = await h.dma_read(ctx, HOST, 1)
        figures["dma_read_4B_command_to_data_cycles"] = cycles
        read = [t for _, t in h.from_card if t.fmt_type == TlpType.MEM_READ_64][-1]
        (sent_at,) = [c for c, t in h.from_card if t is read]
        (answered_at,) = [c for c, t in h.sent if t.fmt_type == TlpType.CPL_DATA and t.tag == read.tag][-1:]
        figures["dma_read_host_turnaround_cycles"] = answered_at - sent_at

        # Throughput: one largest command (4 KiB) each way, the host never the bottleneck.
        nbytes = 4096
        start = h.cycle
        await h.dma_read(ctx, HOST, nbytes // 4)
        figures["dma_read_bytes_per_cycle"] = round(nbytes / (h.cycle - start), 3)
        start = h.cycle
        await h.dma_write(ctx, HOST + 0x10000, list(range(nbytes // 4)))
        await h.wait(ctx, lambda: len(h.host_memory) >= 64 + nbytes, limit=100_000, what="writes landed")
        figures["dma_write_bytes_per_cycle"] = round(nbytes / (h.cycle - start), 3)

        # The host writing and reading the shared window (BAR2) in max-payload TLPs.
        start = h.cycle
        for offset in range(0, 8192, 256):
            h.send(memory_write(BAR2 + offset, bytes(256)))
        await h.wait(ctx, lambda: sum(1 for a, w, _ in h.shared_requests if w) >= 32, what="BAR2 writes")
        figures["bar2_write_bytes_per_cycle"] = round(8192 / (h.cycle - start), 3)

    h.run(bench)
    figures["dma_read_tlp_payload_bytes"] = 64  # completions split at the host's 64-byte RCB
    figures["dma_write_tlp_payload_bytes"] = 256  # max payload size 256
    figures.update(measure_card())
    return figures


CARD_BENCH_CONFIG = dict(
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
    host_mem_base=CARD_HOST,
    host_mem_size=0x1_0000,
    pcie=True,
    pcie_completion_timeout_cycles=100_000,
)


def measure_card():
    """Round trips through the whole card, and a VIA doorbell's way to its DMA on the link."""
    config = CardConfig(**CARD_BENCH_CONFIG)
    card = Card(config)
    h = EndpointHarness(
        card,
        phy_rx=card.pcie_rx,
        phy_tx=card.pcie_tx,
        data_width=config.pcie_data_width,
        card_side=False,
        completion_delay=0,
    )
    ctrl, via, vi = regmap.CTRL, regmap.VIA, regmap.VIA.array("VI")
    sq_doorbell = regmap.CARD.element_address("doorbell", "VI", 1, "SQ_DOORBELL")  # VI 1's page
    figures = {}

    def write_register(offset, value):
        h.send(memory_write(BAR0 + offset, value.to_bytes(4, "little")))

    async def bench(ctx, h):
        await h.enumerate(ctx, bar0=BAR0, bar2=BAR2, mps_code=1, mrrs_code=2)
        write_register(ctrl.base + ctrl.register("CTRL").offset, ctrl.register("CTRL").field("NODE_ID_VALID").mask)
        request = memory_read(BAR0 + ctrl.base + ctrl.register("ID").offset, 4, tag=1)
        await h.request(ctx, request)
        figures["card_bar0_read_4B_round_trip_cycles"] = _round_trip(h, request)
        h.send(memory_write(BAR2 + 0x100, bytes(range(256))))  # this node's slice: a home access
        for tag, nbytes in ((2, 4), (3, 64), (4, 256)):
            request = memory_read(BAR2 + 0x100, nbytes, tag=tag)
            await h.request(ctx, request)
            figures[f"card_bar2_read_{nbytes}B_round_trip_cycles"] = _round_trip(h, request)

        # A send whose buffer is not registered: the engine fetches the descriptor, finds the
        # protection error and writes the status back, all by DMA over PCIe.
        desc = CARD_HOST + 0x100
        for i, b in enumerate(encode_descriptor(CONTROL_OP.SENDRECV, [(0x1000, 1, 4)])):
            h.host_memory[desc + i] = b
        write_register(via.base + via.register("CTRL").offset, via.register("CTRL").field("ENABLE").mask)
        write_register(via.base + vi.offset_of(1, "PEER"), 1 << vi.register("PEER").field("NODE").lsb)
        write_register(via.base + vi.offset_of(1, "DESC_BASE"), desc)
        write_register(via.base + vi.offset_of(1, "DESC_SIZE"), via_att.PAGE_SIZE)
        write_register(via.base + vi.offset_of(1, "CMD"), vi.register("CMD").field("CONNECT").mask)
        await h.wait(ctx, lambda: not h.to_card, what="set-up written")
        await ctx.tick().repeat(20)
        doorbell = memory_write(BAR0 + sq_doorbell, desc.to_bytes(4, "little"))
        h.send(doorbell)
        status_at = desc + via_descriptor.CONTROL_SEGMENT.field("STATUS").offset

        def status_written():
            return [
                c
                for c, t in h.from_card
                if t.fmt_type in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
                and t.address <= status_at < t.address + 4 * t.length
            ]

        await h.wait(ctx, status_written, what="the descriptor's status written back")
        (rung,) = [c for c, t in h.sent if t is doorbell]
        fetch = min(c for c, t in h.from_card if c > rung and t.fmt_type in (TlpType.MEM_READ, TlpType.MEM_READ_64))
        figures["card_doorbell_to_descriptor_read_cycles"] = fetch - rung
        figures["card_doorbell_to_status_write_cycles"] = status_written()[0] - rung

        # A 1 KiB send from a registered buffer: descriptor and data fetched over PCIe, the frame
        # out on the Ethernet side; with the host answering at once and after 100 cycles (0.8 us
        # at 125 MHz, a root complex's round trip).
        va, handle, page = 0x10_0000_0000, 1, CARD_HOST + 0x4000
        count, first = via_att.region_pages(va, 0x1000)
        write_register(via.base + via.register("ATT_ADDR").offset, via_att.l2_word_base(config.via_att_regions) + 8)
        write_register(via.base + via.register("ATT_WDATA").offset, page)
        entry = via_att.L1_ENTRY.encode(
            START_VA=va,
            LENGTH=0x1000,
            L2_INDEX=8,
            PAGE_COUNT=count,
            FIRST_PAGE_SIZE=first,
            PTAG=0,
            ATTRIBUTES=via_att.L1_ENTRY.encode_bits("ATTRIBUTES", VALID=1),
        )
        write_register(via.base + via.register("ATT_ADDR").offset, handle * via_att.L1_STRIDE_WORDS)
        for i in range(0, len(entry), 4):
            write_register(via.base + via.register("ATT_WDATA").offset, int.from_bytes(entry[i : i + 4], "little"))
        for n, delay in enumerate((0, 100)):
            h.completion_delay = delay
            desc = CARD_HOST + 0x200 + 0x40 * n
            for i, b in enumerate(encode_descriptor(CONTROL_OP.SENDRECV, [(va, handle, 1024)])):
                h.host_memory[desc + i] = b
            await h.wait(ctx, lambda: not h.to_card, what="set-up written")
            frames = len(frame_ends)
            doorbell = memory_write(BAR0 + sq_doorbell, desc.to_bytes(4, "little"))
            h.send(doorbell)
            await h.wait(ctx, lambda frames=frames: len(frame_ends) > frames, what="the 1 KiB frame")
            (rung,) = [c for c, t in h.sent if t is doorbell]
            figures[f"card_via_send_1KiB_doorbell_to_frame_end_cycles_host_{delay}"] = frame_ends[-1] - rung

    frame_ends = []

    async def ethernet(ctx):
        while True:
            ctx.set(card.eth_tx.ready, 1)
            _, _, valid, last = await ctx.tick().sample(card.eth_tx.valid, card.eth_tx.payload.last)
            if valid and last:
                frame_ends.append(h.cycle)

    h.run(bench, processes=[ethernet])
    return figures


def link_equivalents(figures):
    """DMA throughput in MB/s per link: the smaller of what the endpoint moves at the link's
    64-bit user clock and what the link carries after TLP overheads."""
    rows = []
    for link, rate in LINKS.items():
        clock = USER_CLOCK_HZ[link]
        for direction, payload, header in (
            ("read", figures["dma_read_tlp_payload_bytes"], 12),
            ("write", figures["dma_write_tlp_payload_bytes"], 16),
        ):
            endpoint = figures[f"dma_{direction}_bytes_per_cycle"] * clock
            link_limit = rate * payload / (payload + header + LINK_OVERHEAD_BYTES)
            rows.append(
                {
                    "link": link,
                    "direction": direction,
                    "user_clock_mhz": clock / 1e6,
                    "endpoint_mb_s": round(endpoint / 1e6, 1),
                    "link_mb_s": round(link_limit / 1e6, 1),
                    "achieved_mb_s": round(min(endpoint, link_limit) / 1e6, 1),
                }
            )
    return rows


def report(figures, out):
    links = link_equivalents(figures)
    clock = USER_CLOCK_HZ["x1 Gen2"]
    bar2 = figures["bar2_read_4B_round_trip_cycles"]
    # The card's part of a local shared read: BAR2 through the whole card (endpoint, host port
    # arbiter, local access controller, its memory), the card clocked by the x1 Gen2 user clock.
    card_ns = figures["card_bar2_read_4B_round_trip_cycles"] / clock * 1e9
    rows = [[name.replace("_", " "), value] for name, value in figures.items()]
    rows += [
        [
            f"DMA {r['direction']} {r['link']} (MB/s: endpoint {r['endpoint_mb_s']}, link {r['link_mb_s']})",
            r["achieved_mb_s"],
        ]
        for r in links
    ]
    rows.append(
        [f"BAR2 4-byte read round trip at {clock / 1e6:.0f} MHz (ns), endpoint only", round(bar2 / clock * 1e9, 1)]
    )
    rows.append(
        [
            f"card's part of a local shared read: BAR2 4-byte read through the whole card at "
            f"{clock / 1e6:.0f} MHz (ns)",
            round(card_ns, 1),
        ]
    )
    rows.append(
        ["paper: local shared read over PCI, host CPU to card and back (ns)", PAPER_LOCAL_SHARED_READ_US * 1000]
    )
    text = results.write(
        out,
        "pcie",
        title="PCIe endpoint: round trips, DMA latency and throughput (transaction layer)",
        headers=["figure", "value"],
        rows=rows,
        figures={"sim": figures, "links": links},
        config={"tlp_stream_bits": 64, "max_payload": 256, "max_read_request": 512, "host_rcb": 64},
        notes=[
            "Amaranth simulation of PcieEndpoint; host, registers and shared memory modelled in Python "
            "and answering at once, so the cycles are the endpoint's own (from the request's first beat "
            "on the TLP stream to the completion's last).",
            "Not included: PHY, data link layer, the root complex and the host CPU; the paper's 0.9 us is "
            "the whole path from the host CPU. The card_* figures are the whole card with its endpoint "
            "(CardConfig(pcie=True)): BAR0 through the register arbiter to the registers, BAR2 through "
            "the local access controller to its memory (a home access of this node's slice), and a VIA "
            "doorbell to the engine's descriptor fetch and status write-back by DMA over PCIe; a 1 KiB VIA "
            "send from doorbell to its frame's last beat, the host answering reads at once or after 100 "
            "cycles.",
            "Link MB/s: 8b/10b payload rate x payload / (payload + header + 8 bytes framing, sequence, LCRC). "
            "Endpoint MB/s: its bytes/cycle at the clock where 4 bytes a cycle equal the lane's rate "
            "(62.5 MHz for Gen1, 125 MHz for Gen2); reads are in 64-byte completions (the host's RCB).",
            "Cycles are exact in this simulation; no figure here depends on wall-clock time.",
        ],
        plot=lambda path: plot(links, path),
    )
    return text


def plot(links, path):
    labels = [f"{r['link']}\n{r['direction']}" for r in links]
    x = range(len(links))
    fig = Figure(figsize=(7, 3.5))
    ax = fig.subplots()
    ax.bar(
        [i - 0.2 for i in x],
        [r["endpoint_mb_s"] for r in links],
        width=0.4,
        label="endpoint (bytes/cycle x link-equivalent clock)",
    )
    ax.bar([i + 0.2 for i in x], [r["link_mb_s"] for r in links], width=0.4, label="link after TLP overhead")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("MB/s")
    ax.set_title("DMA throughput, 64-bit TLP stream")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
