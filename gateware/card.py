"""The Numavia card: every block of the card behind one register window.

This is the top of the gateware; ``numavia.soc`` instantiates its Verilog inside the LiteX SoC.
"""

from dataclasses import dataclass, asdict

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import regmap, wishbone
from .card_control import CardControl


@dataclass(frozen=True)
class CardConfig:
    """Every parameter of the card. The Verilog cache is keyed by these values."""
    clk_freq_hz: int = 100_000_000

    def as_dict(self):
        return asdict(self)


class Card(wiring.Component):
    def __init__(self, config=CardConfig()):
        self.config = config
        super().__init__({
            "regs":          In(wishbone.Signature(addr_width=regmap.CARD.addr_width)),
            "node_id_strap": In(regmap.NODE_ID_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        blocks = {b.name: b for b in regmap.CARD.blocks}
        m.submodules.decoder = decoder = wishbone.Decoder(
            addr_width=regmap.CARD.addr_width,
            windows=[(b.name, b.base // 4, b.addr_width) for b in regmap.CARD.blocks])
        wiring.connect(m, wiring.flipped(self.regs), decoder.bus)

        m.submodules.ctrl = ctrl = CardControl(clk_freq_hz=cfg.clk_freq_hz)
        wiring.connect(m, decoder.ctrl, ctrl.bus)
        m.d.comb += ctrl.node_id_strap.eq(self.node_id_strap)
        assert set(blocks) == {"ctrl"}, "every block of the register map must be instantiated"
        return m
