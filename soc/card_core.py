"""The Amaranth card as a LiteX module: its Verilog (cached by inputs), its register window and
SoC-bus window as Wishbone slaves, and the ring link and second host port for the target."""

from litex.gen import LiteXModule
from litex.soc.interconnect import wishbone

from numavia.gateware import regmap
from numavia.gateware.build import TOP_NAME, card_verilog
from numavia.gateware.card import CardConfig, card_signature

from .amaranth_instance import AmaranthInstance


class CardCore(LiteXModule):
    """``regs``: the register window (``regmap.CARD``); ``window``: the host port seen from the
    SoC bus (shared window + private memory). ``ring_rx``/``ring_tx``, ``node_id_strap`` and
    ``host`` (the second host port's signals by name) are for the target to connect."""

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
