"""The Amaranth card as a LiteX module: its Verilog (cached by inputs), its register window and
SoC-bus window as Wishbone slaves, its DMA initiator, Ethernet streams and interrupt (VIA), and the
ring link and second host port for the target."""

from types import SimpleNamespace

from liteeth.common import eth_phy_description
from litex.gen import LiteXModule
from litex.soc.interconnect import stream, wishbone
from migen import Cat

from numavia.base import params, regmap
from numavia.gateware.build import TOP_NAME, card_verilog
from numavia.gateware.card import CardConfig, card_signature
from numavia.gateware.via_layouts import EthBeat

from .amaranth_instance import AmaranthInstance


def _eth_payload(endpoint):
    """A LiteEth endpoint's fields in the order of the card's Ethernet beat (``via_layouts.EthBeat``)."""
    fields = {"data": endpoint.data, "last": endpoint.last, "last_be": endpoint.last_be, "error": endpoint.error}
    if set(fields) != {name for name, _ in EthBeat}:
        raise AssertionError("EthBeat and the LiteEth endpoint disagree")
    return Cat(*(fields[name] for name, field in sorted(EthBeat, key=lambda item: item[1].offset)))


class CardCore(LiteXModule):
    """``regs``: the register window (``regmap.CARD``); ``window``: the host port seen from the
    SoC bus (shared window + private memory); ``dma``: the VIA engine's bursting initiator into the
    SoC (host memory); ``eth_tx``/``eth_rx``: 32-bit frame streams to and from the LiteEth MAC core
    (sys clock domain); ``ev.irq``: the card's interrupt, where LiteX's interrupt wiring looks for
    a module's (its pending and enable registers are the card's own, ``regmap.VIA`` ``IRQ_*``).
    ``ring_rx``/``ring_tx``, ``node_id_strap`` and ``host`` (the second host port's signals by
    name) are for the target to connect."""

    def __init__(self, platform, config=CardConfig(), *, log=None):
        self.config = config
        self.verilog = card_verilog(config, log=log)
        platform.add_source(str(self.verilog))
        card = AmaranthInstance(card_signature(config), TOP_NAME)
        self.specials += card.instance

        self.regs = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.window = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.comb += card.connect_wishbone("regs", self.regs, regmap.CARD.addr_width)
        self.comb += card.connect_wishbone("window", self.window, config.window_addr_width)
        self.node_id_strap, self.mode_strap = card["node_id_strap"], card["mode_strap"]
        self.ring_rx, self.ring_tx = card["rx"], card["tx"]
        self.host = card.group("host")

        if config.via:
            self.dma = wishbone.Interface(data_width=32, address_width=32, addressing="word", bursting=True)
            self.eth_tx = stream.Endpoint(eth_phy_description(32))
            self.eth_rx = stream.Endpoint(eth_phy_description(32))
            self.comb += card.connect_wishbone_initiator("dma", self.dma, params.BUS_ADDR_WIDTH)
            self.comb += card.connect_stream("eth_tx", self.eth_tx, _eth_payload(self.eth_tx))
            self.comb += card.connect_stream("eth_rx", self.eth_rx, _eth_payload(self.eth_rx))
            self.ev = SimpleNamespace(irq=card["irq"])
