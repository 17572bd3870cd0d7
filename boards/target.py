"""What every board target shares: the node SoC on a LiteX ECP5 platform, built with the open flow.

A board file (``ecpix5.py``, ``colorlight_i5.py``) describes one board as a :class:`Board`: its
LiteX platform, clock, the card configurations that fit it, the pads of the ring link and the
LEDs. :class:`BoardSoC` puts the Numavia node on it:

* a PLL from the board oscillator makes ``sys`` (the card's clock);
* the RGMII Ethernet PHY feeds the card's VIA engine through the LiteEth MAC core;
* the ring link runs over board I/O (:mod:`numavia.boards.ring_phy`);
* the host reaches the SoC bus over the USB UART (UARTBone: ``litex_server
  --uart``), and the firmware's console is the crossover UART behind it;
* LEDs, as many as the board has, in this order: heartbeat, ring receive activity, Ethernet
  traffic, ring transmit;
* the ROM holds the bare-metal firmware, built from the same sources as in simulation against
  this SoC's generated headers.

With ``with_card=False`` the same SoC is built without the card, host memory or Ethernet: the bare
LiteX SoC the card's cost is measured against.
"""

import struct
from dataclasses import dataclass, field

from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII
from litex.gen import LiteXModule
from litex.soc.cores.clock import ECP5PLL
from litex.soc.integration.soc_core import SoCCore
from migen import ClockDomain, If, Instance, Signal
from migen.genlib.resetsync import AsyncResetSynchronizer

from numavia.gateware.card import CardConfig
from numavia.soc.card_soc import NumaviaSoC

from .ring_phy import RingPins


@dataclass(frozen=True)
class Board:
    name: str
    platform: type  # the LiteX platform class (litex_boards)
    platform_args: dict
    openfpgaloader_board: str  # openFPGALoader's -b name
    nextpnr_device: str  # synth.DEVICES key
    package: str
    speed: str
    clk_name: str
    clk_freq: float
    sys_clk_freq: float
    configs: dict  # name -> {"card": CardConfig kwargs, "soc": NumaviaSoC kwargs,
    #          optionally "sys_clk_freq": its own sys clock}
    default_config: str
    ring_pads: object  # platform -> (tx_pads, rx_pads), or None: ring looped back inside
    leds: object  # platform -> list of LED signals (active high)
    reset: object = None  # platform -> reset signal (active high), or None
    node_id_pads: object = None  # platform -> the node id strap's pads (jumpers), or None: node 0
    notes: dict = field(default_factory=dict)
    nextpnr_router: str = "router1"  # nextpnr's router (router2 stalled on the ECPIX-5 card: docs/boards.md)

    def sys_clk_freq_of(self, config_name):
        """The ``sys`` clock of one configuration: its own where it sets one, else the board's."""
        return self.configs[config_name].get("sys_clk_freq", self.sys_clk_freq)


class _CRG(LiteXModule):
    """``sys`` from the PLL, held in reset until the PLL locks.

    The synchronised reset reaches the card's flip-flops through a ``DCCA``: nextpnr-ecp5 promotes
    only clocks to the global network by itself, and in the fabric this one net (over 13,000 loads
    on the ECPIX-5) kept the router from getting through the card with its VIA engine
    (docs/boards.md)."""

    def __init__(self, platform, board, sys_clk_freq):
        self.cd_sys = ClockDomain()
        self.cd_sys_reset = ClockDomain()  # only the reset synchroniser runs in it
        self.pll = pll = ECP5PLL()
        reset = board.reset(platform) if board.reset else 0
        self.comb += pll.reset.eq(reset)
        pll.register_clkin(platform.request(board.clk_name), board.clk_freq)
        pll.create_clkout(self.cd_sys, sys_clk_freq, with_reset=False)
        self.comb += self.cd_sys_reset.clk.eq(self.cd_sys.clk)
        self.specials += [
            AsyncResetSynchronizer(self.cd_sys_reset, ~pll.locked),
            Instance("DCCA", i_CLKI=self.cd_sys_reset.rst, i_CE=1, o_CLKO=self.cd_sys.rst),
        ]


class _Heartbeat(LiteXModule):
    def __init__(self, sys_clk_freq):
        self.out = Signal()
        counter = Signal(max=int(sys_clk_freq // 2) + 1)
        self.sync += If(counter == 0, counter.eq(int(sys_clk_freq // 2)), self.out.eq(~self.out)).Else(
            counter.eq(counter - 1)
        )


def _rom_words(image):
    image = image + b"\0" * (-len(image) % 4)
    return list(struct.unpack(f"<{len(image) // 4}I", image))


class BoardSoC(NumaviaSoC):
    def __init__(self, board, config_name=None, *, with_card=True, firmware=None):
        config_name = config_name or board.default_config
        if config_name not in board.configs:
            raise ValueError(f"{board.name} has no configuration {config_name!r} (one of {', '.join(board.configs)})")
        self.board, self.config_name, self.with_card = board, config_name, with_card
        self._firmware = firmware
        platform = board.platform(**board.platform_args)
        sys_clk_freq = board.sys_clk_freq_of(config_name)
        chosen = board.configs[config_name]
        soc_kwargs = dict(chosen["soc"])
        if with_card:
            card_config = CardConfig(
                clk_freq_hz=int(sys_clk_freq),
                host_mem_base=self.mem_map["hostmem"],
                host_mem_size=soc_kwargs["host_mem_size"],
                **chosen["card"],
            )
            NumaviaSoC.__init__(
                self,
                platform,
                sys_clk_freq=sys_clk_freq,
                card_config=card_config,
                uart_name="crossover",
                with_uartbone=True,
                **soc_kwargs,
            )
        else:
            soc_kwargs.pop("host_mem_size")
            SoCCore.__init__(
                self,
                platform,
                sys_clk_freq,
                ident="Numavia bare SoC",
                cpu_type="vexriscv",
                cpu_variant="standard",
                integrated_rom_size=soc_kwargs["rom_size"],
                integrated_rom_init=[],
                integrated_sram_size=soc_kwargs["sram_size"],
                integrated_main_ram_size=soc_kwargs["main_ram_size"],
                uart_name="crossover",
                with_uartbone=True,
                bus_bursting=True,
            )
        self.crg = _CRG(platform, board, sys_clk_freq)
        self.heartbeat = _Heartbeat(sys_clk_freq)
        leds = board.leds(platform)
        activity = [self.heartbeat.out]
        via = with_card and card_config.via
        if via:
            self.ethphy = LiteEthPHYRGMII(platform.request("eth_clocks", 0), platform.request("eth", 0), rx_delay=0e-9)
            self.add_via_ethernet(self.ethphy)
        if with_card:
            if board.ring_pads is not None:
                tx_pads, rx_pads = board.ring_pads(platform)
                self.ring_pins = RingPins(self.card, tx_pads, rx_pads)
                platform.add_period_constraint(rx_pads.clk, 1e9 / sys_clk_freq)  # the neighbour's sys
                ring_active = self.ring_pins.rx_active
            else:  # no pins for the ring on this board: a one-node ring inside the FPGA
                self.comb += self.card.ring_rx.eq(self.card.ring_tx)
                ring_active = self.card.ring_tx[-1]
            # The node id comes from jumpers where the board has pins for them (the firmware copies
            # the strap into NODE_ID at boot); the mode switches stay at their defaults.
            node_id = board.node_id_pads(platform) if board.node_id_pads else 0
            self.comb += [self.card.node_id_strap.eq(node_id), self.card.mode_strap.eq(0)]
            # The second host port (a PCIe endpoint or the trace player elsewhere) is idle here.
            host = self.card.host
            self.comb += [host["req__valid"].eq(0), host["wdata__valid"].eq(0), host["resp__ready"].eq(1)]
            eth_seen = Signal()
            if via:
                self.sync += eth_seen.eq(self.card.eth_rx.valid | self.card.eth_tx.valid)
            activity = [self.heartbeat.out, ring_active, eth_seen, self.card.ring_tx[-1]]
        for led, source in zip(leds, activity):
            self.comb += led.eq(source)

    def init_mems(self, **kwargs):
        """Called by LiteX's Builder once csr.json exists: the firmware for this SoC into the ROM."""
        if self._firmware is not None:
            self.init_rom("rom", _rom_words(self._firmware(self)), auto_size=False)
