"""The Numavia node SoC: VexRiscv, ROM (firmware), SRAM, main RAM, UART, timer and the card.

Targets (simulation, boards) derive from :class:`NumaviaSoC` and add their clocking, UART and
host access. The card sits in VexRiscv's uncached I/O region, as the paper's card sat on PCI.
"""

from litex.soc.integration.soc import SoCRegion
from litex.soc.integration.soc_core import SoCCore

from numavia.gateware import regmap
from numavia.gateware.card import CardConfig

from .card_core import CardCore


class NumaviaSoC(SoCCore):
    mem_map = {
        **SoCCore.mem_map,
        "card":   0x8000_0000,     # the card's registers
        "shared": 0x9000_0000,     # the host port: every node's shared slice, then private memory
    }

    def __init__(self, platform, *, sys_clk_freq=100e6, card_config=None, cpu_variant="standard",
                 rom_size=0x1_0000, sram_size=0x2000, main_ram_size=0x1_0000, uart_name="serial",
                 log=None, **kwargs):
        card_config = card_config or CardConfig(clk_freq_hz=int(sys_clk_freq))
        if card_config.clk_freq_hz != int(sys_clk_freq):
            raise ValueError("the card's clk_freq_hz must equal the SoC's sys_clk_freq")
        SoCCore.__init__(self, platform, sys_clk_freq,
            ident                    = "Numavia node",
            cpu_type                 = "vexriscv",
            cpu_variant              = cpu_variant,
            integrated_rom_size      = rom_size,
            integrated_rom_init      = [],   # the firmware image is loaded at run time
            integrated_sram_size     = sram_size,
            integrated_main_ram_size = main_ram_size,
            uart_name                = uart_name,
            **kwargs)

        self.card = CardCore(platform, card_config, log=log)
        self.bus.add_slave("card", self.card.regs,
                           SoCRegion(origin=self.mem_map["card"], size=regmap.CARD.size, cached=False))
        # Uncached, as the paper's PCI shared memory was: every access reaches the card.
        self.bus.add_slave("shared", self.card.window,
                           SoCRegion(origin=self.mem_map["shared"],
                                     size=card_config.address_map().window_bytes, cached=False))
