"""Defaults more than one layer needs, defined once: the node's bus and its clocks.

The node's bus is the LiteX SoC's (``numavia.soc.card_soc``): 32-bit byte addresses, which the
Wishbone buses carry as word addresses. The card's parameters that are its own (cache, ring,
VIA engine) stay with the card (``numavia.gateware.card.CardConfig``,
``numavia.base.via_params.ViaParams``) and take the bus's values from here.
"""

#: Word-address bits of the node's 32-bit bus (byte address >> 2): every bus master the card has.
BUS_ADDR_WIDTH = 30

# Where things sit on a node's bus.
HOST_MEM_BASE = 0x6000_0000  # RAM standing for host memory: the VIA engine DMAs here
HOST_MEM_SIZE = 0x40_0000
CARD_BASE = 0x8000_0000  # the card's register window
SHARED_BASE = 0x9000_0000  # the host port: every node's shared slice, then private memory
HOST_MEM_UNCACHED_BASE = 0xA000_0000  # the same RAM as HOST_MEM_BASE, uncached for the CPU

#: The node's system clock in simulation, which the card runs on too.
SYS_CLOCK_HZ = 100_000_000
#: The Ethernet PHY's GMII clock (8 bits a cycle: 1 Gbit/s).
GMII_CLOCK_HZ = 125_000_000
