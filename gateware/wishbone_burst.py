"""Wishbone initiator port of the card's DMA engines: Wishbone B4 with incrementing bursts.

An initiator streaming consecutive words drives ``cti = INCREMENTING`` (linear, ``bte = 0``) and
holds ``stb``; a bursting target (LiteX's SRAM on a bus built with ``bus_bursting``) then
acknowledges a word every cycle instead of every other one, and a classic target ignores ``cti``.
The initiator ends a burst by dropping ``stb``: the target may still answer with one more
(registered) ``ack`` in the next cycle, which only counts together with ``stb``.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

CTI_CLASSIC = 0b000
CTI_INCREMENTING = 0b010
CTI_END = 0b111


class Signature(wiring.Signature):
    """Initiator's view; the members of :class:`numavia.gateware.wishbone.Signature` plus ``cti``
    and ``bte``."""

    def __init__(self, *, addr_width, data_width=32, granularity=8):
        if data_width % granularity:
            raise ValueError("data_width must be a multiple of granularity")
        self.addr_width = addr_width
        self.data_width = data_width
        self.granularity = granularity
        super().__init__({
            "cyc":   Out(1),
            "stb":   Out(1),
            "we":    Out(1),
            "adr":   Out(addr_width),
            "dat_w": Out(data_width),
            "sel":   Out(data_width // granularity),
            "cti":   Out(3),
            "bte":   Out(2),
            "dat_r": In(data_width),
            "ack":   In(1),
            "err":   In(1),
        })

    def __eq__(self, other):
        return (isinstance(other, Signature) and
                (self.addr_width, self.data_width, self.granularity) ==
                (other.addr_width, other.data_width, other.granularity))

    def __repr__(self):
        return f"wishbone_burst.Signature(addr_width={self.addr_width}, data_width={self.data_width})"
