"""The PCIe endpoint at the transaction layer, in Amaranth's simulator: BAR read round trips,
DMA read latency and DMA throughput in cycles, turned into x1 Gen1/Gen2 equivalents.

The host side is the Python model of ``numavia.pcie_model`` answering at once (no link, no root
complex), and the BARs' targets answer at once too, so every cycle counted is the endpoint's own.
A cycle is one beat of the 64-bit TLP stream; the endpoint's datapath moves one dword a cycle.
"""

from cocotbext.pcie.core.tlp import TlpType

from numavia.gateware.pcie.config import EndpointParams
from numavia.gateware.pcie.endpoint import PcieEndpoint
from numavia.pcie_model import EndpointHarness, memory_read, memory_write

BAR0, BAR2 = 0xF000_0000, 0xE000_0000
HOST = 0x1_0000_0000
PAPER_LOCAL_SHARED_READ_US = 0.9       # the paper's local shared read over PCI

# Payload bandwidth of one lane after 8b/10b (bytes/s), and the per-TLP link overhead in bytes:
# framing (2) + sequence number (2) + LCRC (4); the header (12 or 16) is counted from the TLPs.
LINKS = {"x1 Gen1": 250e6, "x1 Gen2": 500e6}
LINK_OVERHEAD_BYTES = 8
# The equivalent clock of each link: the one at which the endpoint's dword-a-cycle datapath
# matches the lane's payload rate (4 bytes a cycle), so bytes/cycle x clock is the MB/s it sustains.
USER_CLOCK_HZ = {link: rate / 4 for link, rate in LINKS.items()}


def _harness(**kwargs):
    params = EndpointParams(bar2_bytes=1 << 16, completion_timeout_cycles=100_000)
    return EndpointHarness(PcieEndpoint(params), registers={0: 0x1234_5678}, shared_bytes=1 << 16,
                           completion_delay=0, **kwargs)


def _round_trip(h, request):
    (start, _), = [(c, t) for c, t in h.sent if t is request]
    ends = [c for c, t in h.completions if t.tag == request.tag and c >= start]
    return max(ends) - start


def measure():
    figures = {}
    h = _harness(completion_bytes=64)

    async def bench(ctx, h):
        await h.enumerate(ctx, bar0=BAR0, bar2=BAR2, mps_code=1, mrrs_code=2)
        for name, addr, nbytes, tag in (("bar0_read_4B", BAR0, 4, 1), ("bar2_read_4B", BAR2, 4, 2),
                                        ("bar2_read_64B", BAR2, 64, 3), ("bar2_read_256B", BAR2, 256, 4)):
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
    figures["dma_read_tlp_payload_bytes"] = 64          # completions split at the host's 64-byte RCB
    figures["dma_write_tlp_payload_bytes"] = 256        # max payload size 256
    return figures


def link_equivalents(figures):
    """DMA throughput in MB/s per link: the smaller of what the endpoint moves at the link's
    64-bit user clock and what the link carries after TLP overheads."""
    rows = []
    for link, rate in LINKS.items():
        clock = USER_CLOCK_HZ[link]
        for direction, payload, header in (("read", figures["dma_read_tlp_payload_bytes"], 12),
                                           ("write", figures["dma_write_tlp_payload_bytes"], 16)):
            endpoint = figures[f"dma_{direction}_bytes_per_cycle"] * clock
            link_limit = rate * payload / (payload + header + LINK_OVERHEAD_BYTES)
            rows.append({"link": link, "direction": direction, "user_clock_mhz": clock / 1e6,
                         "endpoint_mb_s": round(endpoint / 1e6, 1), "link_mb_s": round(link_limit / 1e6, 1),
                         "achieved_mb_s": round(min(endpoint, link_limit) / 1e6, 1)})
    return rows


def report(figures, out):
    from numavia import results
    from numavia.bench import local_side
    from numavia.gateware.card import CardConfig
    links = link_equivalents(figures)
    clock = USER_CLOCK_HZ["x1 Gen2"]
    bar2 = figures["bar2_read_4B_round_trip_cycles"]
    # The card's part of a local shared read: the endpoint's round trip plus a hit in the local
    # side behind the host port (its own benchmark, at the card's clock).
    hit_cycles = local_side.measure()["own_read_hit_cycles"]
    card_ns = bar2 / clock * 1e9 + hit_cycles / CardConfig().clk_freq_hz * 1e9
    figures["local_side_read_hit_cycles"] = hit_cycles
    rows = [[name.replace("_", " "), value] for name, value in figures.items()]
    rows += [[f"DMA {r['direction']} {r['link']} (MB/s: endpoint {r['endpoint_mb_s']}, link {r['link_mb_s']})",
              r["achieved_mb_s"]] for r in links]
    rows.append([f"BAR2 4-byte read round trip at {clock / 1e6:.0f} MHz (ns), endpoint only",
                 round(bar2 / clock * 1e9, 1)])
    rows.append([f"card's part of a local shared read: endpoint + local-side hit ({hit_cycles} cycles at "
                 f"{CardConfig().clk_freq_hz / 1e6:.0f} MHz) (ns)", round(card_ns, 1)])
    rows.append(["paper: local shared read over PCI, host CPU to card and back (ns)",
                 PAPER_LOCAL_SHARED_READ_US * 1000])
    text = results.write(
        out, "pcie", title="PCIe endpoint: round trips, DMA latency and throughput (transaction layer)",
        headers=["figure", "value"], rows=rows, figures={"sim": figures, "links": links},
        config={"tlp_stream_bits": 64, "max_payload": 256, "max_read_request": 512, "host_rcb": 64},
        notes=["Amaranth simulation of PcieEndpoint; host, registers and shared memory modelled in Python "
               "and answering at once, so the cycles are the endpoint's own (from the request's first beat "
               "on the TLP stream to the completion's last).",
               "Not included: PHY, data link layer, the root complex and the host CPU; the paper's 0.9 us is "
               "the whole path from the host CPU. The card's part adds the local side's read hit from its own "
               "simulation (as `numavia bench local-side` measures it) to the endpoint's round trip.",
               "Link MB/s: 8b/10b payload rate x payload / (payload + header + 8 bytes framing, sequence, LCRC). "
               "Endpoint MB/s: its bytes/cycle at the clock where 4 bytes a cycle equal the lane's rate "
               "(62.5 MHz for Gen1, 125 MHz for Gen2); reads are in 64-byte completions (the host's RCB).",
               "Cycles are exact in this simulation; no figure here depends on wall-clock time."])
    plot(links, out)
    return text


def plot(links, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['link']}\n{r['direction']}" for r in links]
    x = range(len(links))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar([i - 0.2 for i in x], [r["endpoint_mb_s"] for r in links], width=0.4,
           label="endpoint (bytes/cycle x link-equivalent clock)")
    ax.bar([i + 0.2 for i in x], [r["link_mb_s"] for r in links], width=0.4, label="link after TLP overhead")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("MB/s")
    ax.set_title("DMA throughput, 64-bit TLP stream")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{out}/pcie.png", dpi=110)
    plt.close(fig)
