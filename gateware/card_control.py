"""The card's control/status block: identity, version, node id, scratch, control bits, cycle counter."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap

from . import wishbone
from .register_bank import RegisterBank


class CardControl(wiring.Component):
    """Registers of :data:`regmap.CTRL` and the card-wide state they hold.

    ``cycles`` is the free-running counter every latency figure of the card is measured with.
    Reading ``CYCLES_LO`` latches the high word so a 64-bit read is consistent. ``FEATURES`` tells
    software which optional blocks (``via``, ``pcie``) the card was built with.
    """

    def __init__(self, *, clk_freq_hz, via=True, pcie=False):
        self.clk_freq_hz = int(clk_freq_hz)
        features = regmap.CTRL.register("FEATURES")
        self.features = (bool(via) << features.field("VIA").lsb) | (bool(pcie) << features.field("PCIE").lsb)
        super().__init__(
            {
                "bus": In(wishbone.Signature(addr_width=regmap.CTRL.addr_width)),
                "node_id_strap": In(regmap.NODE_ID_BITS),
                "mode_strap": In(8),
                "node_id": Out(regmap.NODE_ID_BITS),
                "ready": Out(1),
                "numa_mode": Out(1),
                "cache_first_miss": Out(1),
                "cycles": Out(64),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = bank = RegisterBank(regmap.CTRL)
        wiring.connect(m, wiring.flipped(self.bus), bank.bus)

        ctrl_reg = regmap.CTRL.register("CTRL")
        node_id_valid = bank.ctrl.value[ctrl_reg.field("NODE_ID_VALID").lsb]

        m.d.sync += self.cycles.eq(self.cycles + 1)
        cycles_hi_latch = Signal(32)
        with m.If(bank.cycles_lo.r_stb):
            m.d.sync += cycles_hi_latch.eq(self.cycles[32:])

        m.d.comb += [
            bank.id.value.eq(regmap.CARD_ID),
            bank.version.value.eq(regmap.CTRL.register("VERSION").reset),
            bank.node_id_strap.value.eq(self.node_id_strap),
            bank.status.value.eq(node_id_valid << regmap.CTRL.register("STATUS").field("READY").lsb),
            bank.cycles_lo.value.eq(self.cycles[:32]),
            bank.cycles_hi.value.eq(cycles_hi_latch),
            bank.clk_freq_hz.value.eq(self.clk_freq_hz),
            bank.mode_strap.value.eq(self.mode_strap),
            bank.features.value.eq(self.features),
            self.node_id.eq(bank.node_id.value),
            self.ready.eq(node_id_valid),
            self.numa_mode.eq(bank.ctrl.value[ctrl_reg.field("NUMA_MODE").lsb]),
            self.cache_first_miss.eq(bank.ctrl.value[ctrl_reg.field("CACHE_FIRST_MISS").lsb]),
        ]
        return m
