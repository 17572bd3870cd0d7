"""The Amaranth card as a LiteX module: its Verilog, cached by inputs, behind a Wishbone slave."""

from migen import ClockSignal, ResetSignal, Instance, Signal

from litex.gen import LiteXModule
from litex.soc.interconnect import wishbone

from numavia.gateware import regmap
from numavia.gateware.build import TOP_NAME, card_verilog
from numavia.gateware.card import CardConfig


class CardCore(LiteXModule):
    """``bus`` is the card's register window (``regmap.CARD``); ``node_id_strap`` its strap input."""

    def __init__(self, platform, config=CardConfig(), *, log=None):
        self.config = config
        self.bus = wishbone.Interface(data_width=32, address_width=32, addressing="word")
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
        )
