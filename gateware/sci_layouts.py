"""Amaranth views of the SCI packet format, derived from :mod:`sci_packet` (never written twice)."""

from amaranth import Cat, Const, Mux
from amaranth.lib import data

from numavia.base.sci_packet import CRC_POLY, HEADER_BITS, HEADER_FIELDS, SYMBOL_BITS, PacketType, carries_words_asked

#: The packet header as a struct whose bit vector equals ``sci_packet.Packet.header_value()``:
#: fields are laid out from the last one on the wire (bit 0) to the first.
HeaderLayout = data.StructLayout({f.name: f.width for f in reversed(HEADER_FIELDS)})

#: What a ring link carries each cycle: one symbol, and ``frame`` high while a packet is sent.
SymbolLayout = data.StructLayout({"data": SYMBOL_BITS, "frame": 1})


def header_symbol(header_bits, index):
    """Symbol ``index`` of a header bit vector (symbol 0 holds the most significant bits)."""
    return header_bits[HEADER_BITS - SYMBOL_BITS * (index + 1) : HEADER_BITS - SYMBOL_BITS * index]


def data_block_words(header, line_words):
    """Words of the data block the packet of ``header`` (a :data:`HeaderLayout` view) carries on
    the wire: none, the words an uncached read's answer names, or the whole line."""
    words_asked = carries_words_asked(header.ptype == PacketType.RESPONSE, header.cmd)
    return Mux(header.has_data, Mux(words_asked, header.count, line_words), 0)


def data_block_first(header):
    """The word of the line a packet's data block starts with on the wire, and is handed over from
    (wrapping round the line): an uncached read's answer's first word asked for, else word 0."""
    words_asked = carries_words_asked(header.ptype == PacketType.RESPONSE, header.cmd)
    return Mux(header.has_data & words_asked, header.word, 0)


def _crc16_step_taps():
    """For each bit of the next CRC register, the sets of (CRC register bits, symbol bits) whose
    XOR it is: one step of the bitwise CRC-16/CCITT over a 16-bit symbol, most significant bit
    first (``sci_packet.crc16`` feeds the high byte, then the low one: the same order), worked out
    symbolically over GF(2)."""
    crc = [({i}, set()) for i in range(16)]  # bit i of the register, as (crc, symbol) taps
    for bit in reversed(range(SYMBOL_BITS)):
        feedback = (crc[15][0], crc[15][1] ^ {bit})
        shifted = [(set(), set())] + crc[:15]
        crc = [(c ^ feedback[0], d ^ feedback[1]) if CRC_POLY >> i & 1 else (c, d) for i, (c, d) in enumerate(shifted)]
    return [(sorted(c), sorted(d)) for c, d in crc]


_CRC16_STEP_TAPS = _crc16_step_taps()


def crc16_step(crc, symbol):
    """The CRC-16 register after one 16-bit symbol (a flat XOR per bit)."""
    bits = []
    for crc_taps, symbol_taps in _CRC16_STEP_TAPS:
        taps = [crc[i] for i in crc_taps] + [symbol[i] for i in symbol_taps]
        bits.append(Cat(*taps).xor() if taps else Const(0, 1))
    return Cat(*bits)
