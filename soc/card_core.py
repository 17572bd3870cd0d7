"""The Amaranth card as a LiteX module: its Verilog, cached by inputs, behind a Wishbone slave."""

from migen import ClockSignal, ResetSignal, Instance, Signal, Cat

from litex.gen import LiteXModule
from litex.soc.interconnect import stream, wishbone

from liteeth.common import eth_phy_description

from numavia.gateware import regmap
from numavia.gateware.build import TOP_NAME, card_verilog
from numavia.gateware.card import CardConfig
from numavia.gateware.via_layouts import EthBeat


def _eth_payload(endpoint):
    """The card's Ethernet beat (``via_layouts.EthBeat``) as the fields of a LiteEth endpoint."""
    fields = {"data": endpoint.data, "last": endpoint.last, "last_be": endpoint.last_be, "error": endpoint.error}
    if set(fields) != {name for name, _ in EthBeat}:
        raise AssertionError("EthBeat and the LiteEth endpoint disagree")
    return Cat(*(fields[name] for name, field in sorted(EthBeat, key=lambda item: item[1].offset)))


class CardCore(LiteXModule):
    """``bus`` is the card's register window (``regmap.CARD``); ``node_id_strap`` its strap input;
    ``dma`` its Wishbone initiator into the SoC (host memory); ``eth_tx``/``eth_rx`` its 32-bit frame
    streams to and from the LiteEth MAC core (sys clock domain)."""

    def __init__(self, platform, config=CardConfig(), *, log=None):
        self.config = config
        self.bus = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.dma = wishbone.Interface(data_width=32, address_width=32, addressing="word", bursting=True)
        self.eth_tx = stream.Endpoint(eth_phy_description(32))
        self.eth_rx = stream.Endpoint(eth_phy_description(32))
        self.node_id_strap = Signal(regmap.NODE_ID_BITS)
        self.verilog = card_verilog(config, log=log)
        platform.add_source(str(self.verilog))

        aw = regmap.CARD.addr_width
        self.specials += Instance(TOP_NAME,
            i_clk           = ClockSignal("sys"),
            i_rst           = ResetSignal("sys"),
            i_node_id_strap = self.node_id_strap,
            i_regs__cyc     = self.bus.cyc,
            i_regs__stb     = self.bus.stb,
            i_regs__we      = self.bus.we,
            i_regs__adr     = self.bus.adr[:aw],
            i_regs__dat_w   = self.bus.dat_w,
            i_regs__sel     = self.bus.sel,
            o_regs__dat_r   = self.bus.dat_r,
            o_regs__ack     = self.bus.ack,
            o_regs__err     = self.bus.err,
            o_dma__cyc      = self.dma.cyc,
            o_dma__stb      = self.dma.stb,
            o_dma__we       = self.dma.we,
            o_dma__adr      = self.dma.adr[:30],
            o_dma__dat_w    = self.dma.dat_w,
            o_dma__sel      = self.dma.sel,
            o_dma__cti      = self.dma.cti,
            o_dma__bte      = self.dma.bte,
            i_dma__dat_r    = self.dma.dat_r,
            i_dma__ack      = self.dma.ack,
            i_dma__err      = self.dma.err,
            o_eth_tx__valid   = self.eth_tx.valid,
            i_eth_tx__ready   = self.eth_tx.ready,
            o_eth_tx__payload = _eth_payload(self.eth_tx),
            i_eth_rx__valid   = self.eth_rx.valid,
            o_eth_rx__ready   = self.eth_rx.ready,
            i_eth_rx__payload = _eth_payload(self.eth_rx),
        )
