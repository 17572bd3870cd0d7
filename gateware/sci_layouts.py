"""Amaranth views of the SCI packet format, derived from :mod:`sci_packet` (never written twice)."""

from amaranth.lib import data

from numavia.base.sci_packet import HEADER_FIELDS, SYMBOL_BITS

#: The packet header as a struct whose bit vector equals ``sci_packet.Packet.header_value()``:
#: fields are laid out from the last one on the wire (bit 0) to the first.
HeaderLayout = data.StructLayout({f.name: f.width for f in reversed(HEADER_FIELDS)})

#: What a ring link carries each cycle: one symbol, and ``frame`` high while a packet is sent.
SymbolLayout = data.StructLayout({"data": SYMBOL_BITS, "frame": 1})
