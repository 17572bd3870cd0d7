"""The Numavia card: every block of the card behind one register window.

This is the top of the gateware; ``numavia.soc`` instantiates its Verilog inside the LiteX SoC.
"""

from dataclasses import dataclass, asdict

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from . import regmap, via_frame, wishbone, wishbone_burst
from .card_control import CardControl
from .via_engine import ViaEngine
from .via_layouts import EthBeat
from .via_params import ViaParams


@dataclass(frozen=True)
class CardConfig:
    """Every parameter of the card. The Verilog cache is keyed by these values."""
    clk_freq_hz: int = 100_000_000
    # VIA engine (docs/via.md)
    via_vis: int = 8
    via_cqs: int = 4
    via_queue_depth: int = 16
    via_max_segments: int = 8
    via_window: int = 32
    via_max_mtu: int = via_frame.MTU_JUMBO
    via_mtu: int = via_frame.MTU_DEFAULT
    via_att_regions: int = 64
    via_att_pages: int = 2048
    via_tx_buffer_bytes: int = 32 * 1024
    via_rx_buffer_bytes: int = 64 * 1024
    via_rto_cycles: int = 25_000
    via_retry_limit: int = 64
    host_mem_base: int = 0x6000_0000
    host_mem_size: int = 0x40_0000

    def __post_init__(self):
        self.via_params()   # checks the VIA parameters
        if not via_frame.MTU_MIN <= self.via_mtu <= self.via_max_mtu:
            raise ValueError(f"via_mtu must be {via_frame.MTU_MIN}..{self.via_max_mtu}")

    def via_params(self):
        return ViaParams(vis=self.via_vis, cqs=self.via_cqs, queue_depth=self.via_queue_depth,
                         max_segments=self.via_max_segments, window=self.via_window, max_mtu=self.via_max_mtu,
                         att_regions=self.via_att_regions, att_pages=self.via_att_pages,
                         host_base=self.host_mem_base, host_size=self.host_mem_size,
                         tx_buffer_bytes=self.via_tx_buffer_bytes, rx_buffer_bytes=self.via_rx_buffer_bytes)

    def as_dict(self):
        return asdict(self)


class Card(wiring.Component):
    def __init__(self, config=CardConfig()):
        self.config = config
        super().__init__({
            "regs":          In(wishbone.Signature(addr_width=regmap.CARD.addr_width)),
            "node_id_strap": In(regmap.NODE_ID_BITS),
            "dma":           Out(wishbone_burst.Signature(addr_width=30)),   # into the SoC: host memory
            "eth_tx":        Out(stream.Signature(EthBeat)),          # to the LiteEth MAC core
            "eth_rx":        In(stream.Signature(EthBeat)),
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

        m.submodules.via = via = ViaEngine(cfg.via_params(), mtu=cfg.via_mtu, rto_cycles=cfg.via_rto_cycles,
                                           retry_limit=cfg.via_retry_limit)
        wiring.connect(m, decoder.via, via.regs)
        wiring.connect(m, via.dma, wiring.flipped(self.dma))
        wiring.connect(m, via.eth_tx, wiring.flipped(self.eth_tx))
        wiring.connect(m, wiring.flipped(self.eth_rx), via.eth_rx)
        m.d.comb += via.node_id.eq(ctrl.node_id)
        assert set(blocks) == {"ctrl", "via"}, "every block of the register map must be instantiated"
        return m
