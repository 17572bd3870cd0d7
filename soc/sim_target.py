"""Simulation target: one node as a Verilog module whose I/O a Verilator harness drives.

The node's pads are plain ports (no PHYs): the UART is a byte stream, the host bridge is a Wishbone
master into the SoC bus (what ``litex_server`` reaches on a board), the node id strap is an input.
Several nodes are instantiated side by side by :mod:`numavia.soc.cluster`.
"""

import os

from liteeth.phy.gmii import LiteEthPHYGMIIRX, LiteEthPHYGMIITX
from litex.build.generic_platform import Pins, Subsignal
from litex.build.io import CRG
from litex.build.sim import SimPlatform as LiteXSimPlatform
from litex.gen import LiteXModule
from litex.soc.integration.builder import Builder
from litex.soc.interconnect import wishbone
from migen import ClockDomain, ClockDomainsRenamer, Record, ResetSignal
from migen.genlib.resetsync import AsyncResetSynchronizer

from numavia.base import params, regmap
from numavia.gateware.host_port import RequestLayout, ResponseLayout, WriteBeatLayout
from numavia.gateware.sci_layouts import SymbolLayout

from .card_soc import NumaviaSoC

NODE_TOP = "numavia_node"

_io = [
    ("sys_clk", 0, Pins(1)),
    ("sys_rst", 0, Pins(1)),
    ("node_id_strap", 0, Pins(regmap.NODE_ID_BITS)),
    ("mode_strap", 0, Pins(8)),
    ("eth_clk", 0, Pins(1)),  # 125 MHz GMII clock, shared by every node of the cluster
    (
        "eth",
        0,  # GMII, joined to the other nodes by the harness (gmii_link.hpp)
        Subsignal("tx_en", Pins(1)),
        Subsignal("tx_data", Pins(8)),
        Subsignal("rx_dv", Pins(1)),
        Subsignal("rx_data", Pins(8)),
    ),
    (
        "serial",
        0,
        Subsignal("source_valid", Pins(1)),
        Subsignal("source_ready", Pins(1)),
        Subsignal("source_data", Pins(8)),
        Subsignal("sink_valid", Pins(1)),
        Subsignal("sink_ready", Pins(1)),
        Subsignal("sink_data", Pins(8)),
    ),
    # The SCI ring link: one symbol + frame bit per cycle each way.
    (
        "ring",
        0,
        Subsignal("rx", Pins(SymbolLayout.size)),
        Subsignal("tx", Pins(SymbolLayout.size)),
    ),
    # The card's second host port (what a PCIe endpoint drives on a board): trace replay.
    (
        "hostport",
        0,
        Subsignal("req_valid", Pins(1)),
        Subsignal("req_ready", Pins(1)),
        Subsignal("req_payload", Pins(RequestLayout.size)),
        Subsignal("wdata_valid", Pins(1)),
        Subsignal("wdata_ready", Pins(1)),
        Subsignal("wdata_payload", Pins(WriteBeatLayout.size)),
        Subsignal("resp_valid", Pins(1)),
        Subsignal("resp_ready", Pins(1)),
        Subsignal("resp_payload", Pins(ResponseLayout.size)),
    ),
    (
        "hostbridge",
        0,
        Subsignal("adr", Pins(params.BUS_ADDR_WIDTH)),
        Subsignal("dat_w", Pins(32)),
        Subsignal("dat_r", Pins(32)),
        Subsignal("sel", Pins(4)),
        Subsignal("cyc", Pins(1)),
        Subsignal("stb", Pins(1)),
        Subsignal("we", Pins(1)),
        Subsignal("ack", Pins(1)),
        Subsignal("err", Pins(1)),
    ),
]


class SimPlatform(LiteXSimPlatform):
    """LiteX's simulation platform, but ``build`` only writes Verilog: our harness compiles it."""

    def __init__(self):
        super().__init__("SIM", list(_io))

    def build(self, fragment, build_dir, build_name=NODE_TOP, **kwargs):
        os.makedirs(build_dir, exist_ok=True)
        if not hasattr(fragment, "clock_domains"):
            fragment = fragment.get_fragment()
        self.finalize(fragment)
        v_output = self.get_verilog(fragment, name=build_name)
        with open(os.path.join(build_dir, build_name + ".v"), "w") as f:
            f.write(v_output.main_source)
        for name, content in v_output.data_files.items():  # memory init files, next to the .v
            with open(os.path.join(build_dir, name), "w") as f:
                f.write(content)
        self.add_source(os.path.join(build_dir, build_name + ".v"))
        return v_output.ns


class SimGMIIPHY(LiteXModule):
    """LiteEth's GMII transmitter and receiver on the simulation's eth_clk (no clock buffers)."""

    dw = 8
    tx_clk_freq = rx_clk_freq = params.GMII_CLOCK_HZ

    def __init__(self, clock, pads):
        self.cd_eth_tx = ClockDomain()
        self.cd_eth_rx = ClockDomain()
        self.comb += [self.cd_eth_tx.clk.eq(clock), self.cd_eth_rx.clk.eq(clock)]
        self.specials += [
            AsyncResetSynchronizer(self.cd_eth_tx, ResetSignal("sys")),
            AsyncResetSynchronizer(self.cd_eth_rx, ResetSignal("sys")),
        ]
        # The transmitter registers its outputs; the node's ports stay plain wires (the cluster
        # generator wires `wire` ports), so it drives a copy of the pads.
        tx_pads = Record([("tx_en", 1), ("tx_data", 8)])
        self.comb += [pads.tx_en.eq(tx_pads.tx_en), pads.tx_data.eq(tx_pads.tx_data)]
        self.tx = ClockDomainsRenamer("eth_tx")(LiteEthPHYGMIITX(tx_pads))
        self.rx = ClockDomainsRenamer("eth_rx")(LiteEthPHYGMIIRX(pads))
        self.sink, self.source = self.tx.sink, self.rx.source


class SimNodeSoC(NumaviaSoC):
    def __init__(self, **kwargs):
        platform = SimPlatform()
        super().__init__(platform, uart_name="sim", **kwargs)
        self.crg = CRG(platform.request("sys_clk"), rst=platform.request("sys_rst"))
        eth_clk, eth = platform.request("eth_clk"), platform.request("eth")
        if self.card.config.via:
            self.eth_phy = SimGMIIPHY(eth_clk, eth)
            self.add_via_ethernet(self.eth_phy)
        else:  # the harness's switch still joins every node's port: a card without VIA stays silent
            self.comb += [eth.tx_en.eq(0), eth.tx_data.eq(0)]

        self.comb += [
            self.card.node_id_strap.eq(platform.request("node_id_strap")),
            self.card.mode_strap.eq(platform.request("mode_strap")),
        ]

        ring = platform.request("ring")
        self.comb += [self.card.ring_rx.eq(ring.rx), ring.tx.eq(self.card.ring_tx)]

        hp, host = platform.request("hostport"), self.card.host
        self.comb += [
            host["req__valid"].eq(hp.req_valid),
            hp.req_ready.eq(host["req__ready"]),
            host["req__payload"].eq(hp.req_payload),
            host["wdata__valid"].eq(hp.wdata_valid),
            hp.wdata_ready.eq(host["wdata__ready"]),
            host["wdata__payload"].eq(hp.wdata_payload),
            hp.resp_valid.eq(host["resp__valid"]),
            host["resp__ready"].eq(hp.resp_ready),
            hp.resp_payload.eq(host["resp__payload"]),
        ]

        pads = platform.request("hostbridge")
        bridge = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.comb += [
            bridge.adr.eq(pads.adr),
            bridge.dat_w.eq(pads.dat_w),
            bridge.sel.eq(pads.sel),
            bridge.cyc.eq(pads.cyc),
            bridge.stb.eq(pads.stb),
            bridge.we.eq(pads.we),
            pads.dat_r.eq(bridge.dat_r),
            pads.ack.eq(bridge.ack),
            pads.err.eq(bridge.err),
        ]
        self.bus.add_master("hostbridge", bridge)


def build_node(output_dir, **soc_kwargs):
    """Generate the node's Verilog, software headers and ``csr.json`` into ``output_dir``.

    Returns ``(soc, verilog_sources)``.
    """
    soc = SimNodeSoC(**soc_kwargs)
    builder = Builder(
        soc,
        output_dir=str(output_dir),
        compile_software=False,
        compile_gateware=False,
        csr_json=os.path.join(output_dir, "csr.json"),
        csr_csv=os.path.join(output_dir, "csr.csv"),
    )
    builder.build(build_name=NODE_TOP)
    sources = [f for f, *_ in soc.platform.sources]
    return soc, sources
