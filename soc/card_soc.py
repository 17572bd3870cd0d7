"""The Numavia node SoC: VexRiscv, ROM, SRAM, main RAM, UART, timer and the card.

The bare-metal firmware runs from the ROM; a Zephyr image is linked into main RAM, which the ROM
then only jumps to (``numavia.soc.firmware``). The timer has LiteX's uptime counter, Zephyr's clock.

Targets (simulation, boards) derive from :class:`NumaviaSoC` and add their clocking, UART and
host access. The card sits in VexRiscv's uncached I/O region, as the paper's card sat on PCI.
``hostmem`` is RAM standing for the host's memory: the host (the CPU, or the host bridge) puts VIA
descriptors and buffers there and the card reaches it through its DMA initiator, joined to that
RAM alone. The same RAM is visible again at ``hostmem_uncached``, in the CPU's uncached I/O space:
VexRiscv's data cache is not coherent with DMA, and a host CPU polling a descriptor should cost a
memory read, not a whole-cache invalidation. Targets attach an Ethernet PHY with
:meth:`NumaviaSoC.add_via_ethernet`; the card's VIA engine owns the MAC.
"""

from liteeth.common import eth_phy_description
from liteeth.mac.core import LiteEthMACCore
from litex.gen import LiteXModule
from litex.soc.integration.soc import SoCRegion
from litex.soc.integration.soc_core import SoCCore
from litex.soc.interconnect import stream, wishbone

from numavia.base import params, regmap
from numavia.gateware.card import CardConfig

from .card_core import CardCore

VIA_VIS_CONSTANT = "NUMAVIA_VIA_VIS"  # the card's VIs, for the firmware (csr.json lowercases it)


class _MarkLastByte(LiteXModule):
    """An 8-bit PHY whose received frames carry ``last_be`` as well as ``last``.

    LiteEth's FCS checker only compares the CRC on a beat with ``last_be`` set, and for 8-bit PHYs
    LiteEth 2024.12 derives ``last_be`` only after that checker: without this, frames with a bad
    FCS would pass as good ones.
    """

    def __init__(self, phy):
        self.dw = phy.dw
        for name in ("tx_clk_freq", "rx_clk_freq", "integrated_ifg_inserter"):
            if hasattr(phy, name):
                setattr(self, name, getattr(phy, name))
        self.sink = phy.sink
        self.source = stream.Endpoint(eth_phy_description(phy.dw))
        self.comb += [
            phy.source.connect(self.source, omit={"last_be"}),
            self.source.last_be.eq(phy.source.last),
        ]


class NumaviaSoC(SoCCore):
    mem_map = {
        **SoCCore.mem_map,
        "hostmem": params.HOST_MEM_BASE,
        "card": params.CARD_BASE,
        "shared": params.SHARED_BASE,
        "hostmem_uncached": params.HOST_MEM_UNCACHED_BASE,
    }

    def __init__(
        self,
        platform,
        *,
        sys_clk_freq=params.SYS_CLOCK_HZ,
        card_config=None,
        cpu_variant="standard",
        rom_size=0x1_0000,
        sram_size=0x2000,
        main_ram_size=0x1_0000,
        host_mem_size=params.HOST_MEM_SIZE,
        uart_name="serial",
        log=None,
        **kwargs,
    ):
        card_config = card_config or CardConfig(
            clk_freq_hz=int(sys_clk_freq), host_mem_base=self.mem_map["hostmem"], host_mem_size=host_mem_size
        )
        if card_config.clk_freq_hz != int(sys_clk_freq):
            raise ValueError("the card's clk_freq_hz must equal the SoC's sys_clk_freq")
        if (card_config.host_mem_base, card_config.host_mem_size) != (self.mem_map["hostmem"], host_mem_size):
            raise ValueError("the card's host memory window must be the SoC's hostmem region")
        SoCCore.__init__(
            self,
            platform,
            sys_clk_freq,
            ident="Numavia node",
            cpu_type="vexriscv",
            cpu_variant=cpu_variant,
            integrated_rom_size=rom_size,
            integrated_rom_init=[],  # the firmware image is loaded at run time
            integrated_sram_size=sram_size,
            integrated_main_ram_size=main_ram_size,
            uart_name=uart_name,
            timer_uptime=True,  # Zephyr's LiteX timer driver reads its cycles there
            bus_bursting=True,  # the card's DMA (and cache refills) stream a word a cycle
            **kwargs,
        )

        self.card = CardCore(platform, card_config, log=log)
        self._add_host_memory(host_mem_size, dma=self.card.dma if card_config.via else None)
        self.bus.add_slave(
            "card", self.card.regs, SoCRegion(origin=self.mem_map["card"], size=regmap.CARD.size, cached=False)
        )
        # Uncached, as the paper's PCI shared memory was: every access reaches the card.
        self.bus.add_slave(
            "shared",
            self.card.window,
            SoCRegion(origin=self.mem_map["shared"], size=card_config.address_map().window_bytes, cached=False),
        )
        # soc.h and csr.json: the firmware sizes its VI table to the card (NV_VIA_MAX_VIS), 0: no VIA.
        self.add_constant(VIA_VIS_CONSTANT, card_config.via_vis if card_config.via else 0)
        if card_config.via:
            self.irq.add("card", use_loc_if_exists=True)  # the VIA protocol manager's wake-up

    def _add_host_memory(self, size, *, dma=None):
        """One RAM, two windows: cached at ``hostmem`` and uncached at ``hostmem_uncached``; and the
        card's DMA initiator (``dma``; none without the VIA engine), which reaches this RAM alone.

        The DMA is not a master of the SoC bus: as a PCIe card's DMA reaches the host's memory
        and nothing else, it never waits for the CPU's accesses to the card, ROM or RAM, nor they
        for its bursts, and its address does not run through the SoC bus's decoder into every
        target (the card's own registers among them: docs/boards.md). The card answers err for
        an address outside host memory (``gateware/host_window.py``)."""
        self.hostmem = wishbone.SRAM(
            size,
            name="hostmem",
            bus=wishbone.Interface(data_width=32, address_width=32, addressing="word", bursting=True),
        )
        windows = []
        for name, cached in (("hostmem", True), ("hostmem_uncached", False)):
            bus = wishbone.Interface(data_width=32, address_width=32, addressing="word", bursting=True)
            self.bus.add_slave(name, bus, SoCRegion(origin=self.mem_map[name], size=size, mode="rw", cached=cached))
            windows.append(bus)
        # The SoC bus serves one initiator at a time, so its two windows never compete; the DMA
        # takes turns with them.
        self.hostmem_windows = wishbone.Arbiter(windows + ([dma] if dma is not None else []), self.hostmem.bus)

    def add_via_ethernet(self, phy):
        """The LiteEth MAC core (preamble, FCS, padding, clock-domain crossing) between ``phy`` and
        the card's 32-bit frame streams."""
        if phy.dw == 8:
            phy = self.via_phy_last_byte = _MarkLastByte(phy)
        self.via_mac = LiteEthMACCore(phy, dw=32, with_preamble_crc=True, with_padding=True)
        self.comb += [
            self.card.eth_tx.connect(self.via_mac.sink),
            self.via_mac.source.connect(self.card.eth_rx),
        ]
