"""Wishbone initiator port of the card's DMA engines: Wishbone B4 with incrementing bursts.

An initiator streaming consecutive words drives ``cti = INCREMENTING`` (linear, ``bte = 0``) and
holds ``stb``; a bursting target (LiteX's SRAM on a bus built with ``bus_bursting``) then
acknowledges a word every cycle instead of every other one, and a classic target ignores ``cti``.
The initiator ends a burst by dropping ``stb``: the target may still answer with one more
(registered) ``ack`` in the next cycle, which only counts together with ``stb``.
"""

from amaranth.lib.wiring import Out

from . import wishbone

CTI_CLASSIC = 0b000
CTI_INCREMENTING = 0b010
CTI_END = 0b111


class Signature(wishbone.Signature):
    """Initiator's view; the members of :class:`numavia.gateware.wishbone.Signature` plus ``cti``
    and ``bte``."""

    def __init__(self, *, addr_width, data_width=32, granularity=8):
        super().__init__(
            addr_width=addr_width, data_width=data_width, granularity=granularity, extra={"cti": Out(3), "bte": Out(2)}
        )
