"""SCI ring packets: the one definition of their format.

The gateware derives its Amaranth layouts from :data:`HEADER_FIELDS`, ``numavia.base.codegen``
generates the firmware's C header from it, and the host, the tests and the protocol model use
:func:`encode`/:func:`decode` below. Nothing else writes a field position down.

On the ring a packet is a sequence of 16-bit symbols sent while the link's ``frame`` bit is high:

* request / response: the header, a line of data if ``has_data`` (32 symbols for the default
  64-byte line, ``line_bytes / 2`` in general: every card of a ring has the same line size), then
  a CRC-16 symbol. The answer to an uncached read (a ``MUREAD`` response) carries only the words
  asked for, ``count`` words from word ``word`` of the line (SCI's selected-word read): a host's
  one-word read does not wait for a whole line on the wire (:func:`data_range`,
  :func:`answered_words`). The header is 6 symbols (:data:`SHORT_HEADER_SYMBOLS`) except in an uncached
  write's request (``MUWRITE``), the only packet whose byte enables (symbols 6-9) mean something:
  10 symbols (:data:`HEADER_SYMBOLS`). A receiver learns which from symbols 0 and 1
  (:func:`header_symbols`); a short header's byte enables read as 0;
* echo (the receiver's acceptance or busy answer to a request/response): 2 header symbols + CRC.

Header fields are packed most significant first, symbol 0 first. Data word *i* (32 bits) goes
as symbols ``2i`` (bits 31..16) and ``2i+1`` (bits 15..0). The CRC is CRC-16/CCITT-FALSE
(polynomial 0x1021, initial value 0xFFFF) over every preceding symbol, high byte first.

A sender that starts a packet before all its data is there (cut-through) and finds a word missing
ends the packet at once with its CRC inverted (:func:`abort`): no receiver takes it, and a node that
forwards it tells it from a corrupted packet by its CRC residue, :data:`ABORT_RESIDUE` instead of 0.
"""

from dataclasses import dataclass, field
from dataclasses import fields as dc_fields
from enum import IntEnum

from numavia.base.coherence import LINE_BYTES, NODE_ID_BITS

SYMBOL_BITS = 16
DATA_WORDS = LINE_BYTES // 4  # 16 words of 32 bits for the default line
CRC_POLY = 0x1021
CRC_INIT = 0xFFFF


class PacketType(IntEnum):
    REQUEST = 0
    RESPONSE = 1
    ECHO = 2


class Command(IntEnum):
    """Request commands. Responses carry the request's command back, with a status."""

    # To the home (memory directory) of the line.
    MREAD = 1  # read attach: become head of the sharing list
    MWRITE = 2  # write attach: become head, memory goes GONE; purge the old list
    MHEAD_LOCK = 3  # head rollout, step 1: lock the line if the requester is still head
    MHEAD_UNLOCK = 4  # head rollout, last step: new head (ptr) or none (+ data write-back), unlock
    MONLY_OUT = 5  # only-entry rollout: if still head, line goes HOME (+ data write-back)
    MUREAD = 6  # uncached read (NUMA mode): words [word, word+count)
    MUWRITE = 7  # uncached write (NUMA mode): data with byte enables
    # To a cache holding the line.
    CPREPEND = 16  # the requester is the new head in front of you (flag: send the data)
    CPURGE = 17  # invalidate; answer your forward pointer (flag: and the data)
    CSET_FWD = 18  # your successor (the requester) leaves: forward pointer := ptr / none
    CSET_BWD = 19  # your predecessor (the requester) leaves: backward := ptr / none (head)
    CFETCH = 20  # send the line's data, stay in the list (home recall of a GONE line)


class Status(IntEnum):
    OK = 0
    NACK = 1  # the line is busy (transient): retry later
    ERROR = 2  # the request cannot be served (bad address, protocol violation)
    NOT_READY = 3  # the node's control store is not loaded


class EchoStatus(IntEnum):
    ACCEPTED = 0  # the packet is in the receiver's incoming queue (or was, if duplicate)
    BUSY = 1  # the incoming queue was full: send again


@dataclass(frozen=True)
class Field:
    name: str
    width: int
    doc: str = ""


#: Header fields in wire order (most significant bit of symbol 0 first).
HEADER_FIELDS = (
    # symbol 0: routing
    Field("target", NODE_ID_BITS, "node the packet is for"),
    Field("source", NODE_ID_BITS, "node that sent it"),
    Field("ptype", 2, "PacketType"),
    Field("seq", 1, "link-level alternating bit of the (source, target) pair"),
    Field("has_data", 1, "a line of data follows the header"),
    # symbol 1: transaction
    Field("cmd", 6, "Command"),
    Field("tid", 5, "requester's transaction id, returned in the response"),
    Field("status", 5, "Status in responses, EchoStatus in echoes"),
    # symbols 2-3: the line
    Field("addr", 32, "global line address: home node in bits 31..26, byte offset below"),
    # symbol 4: list pointer and flags
    Field("ptr", NODE_ID_BITS, "a node id: old head, forward pointer, new pointer value"),
    Field("ptr_valid", 1, "ptr holds a node id (else: none)"),
    Field("flag", 1, "command-specific: want data / dirty"),
    Field("mstate", 2, "memory state seen by the home (responses)"),
    Field("aux", 6, "reserved"),
    # symbol 5: uncached access range
    Field("word", 4, "first 32-bit word of an uncached access"),
    Field("count", 5, "number of words of an uncached access (1..16 for a 64-byte line)"),
    Field("reserved", 7, ""),
    # symbols 6-9: byte enables of an uncached write, one bit per byte of the line
    Field("be", 64, "byte enables, bit i = byte i of the line"),
)

HEADER_BITS = sum(f.width for f in HEADER_FIELDS)
HEADER_SYMBOLS = HEADER_BITS // SYMBOL_BITS
ECHO_HEADER_SYMBOLS = 2
assert HEADER_BITS % SYMBOL_BITS == 0
assert sum(f.width for f in HEADER_FIELDS[:8]) == ECHO_HEADER_SYMBOLS * SYMBOL_BITS
#: The header without its last field, the byte enables, which only an uncached write carries.
SHORT_HEADER_SYMBOLS = HEADER_SYMBOLS - HEADER_FIELDS[-1].width // SYMBOL_BITS
assert HEADER_FIELDS[-1].name == "be" and HEADER_FIELDS[-1].width % SYMBOL_BITS == 0
# Both header lengths are even, so a data word's two symbols have the same parity in either.
assert HEADER_SYMBOLS % 2 == SHORT_HEADER_SYMBOLS % 2 == 0

#: Line addresses: the home node in the top bits, the byte offset inside its slice below.
ADDR_HOME_SHIFT = 32 - NODE_ID_BITS


def field_positions():
    """``{name: (lsb, width)}`` of every header field within the header bit vector, where bit
    ``HEADER_BITS - 1`` is the first bit on the wire."""
    pos, lsb = {}, HEADER_BITS
    for f in HEADER_FIELDS:
        lsb -= f.width
        pos[f.name] = (lsb, f.width)
    return pos


_POSITIONS = field_positions()


def line_address(home, offset, line_bytes=LINE_BYTES):
    if not 0 <= home < (1 << NODE_ID_BITS):
        raise ValueError(f"home node {home} out of range")
    if not 0 <= offset < (1 << ADDR_HOME_SHIFT) or offset % line_bytes:
        raise ValueError(f"offset {offset:#x} is not a line offset")
    return home << ADDR_HOME_SHIFT | offset


def home_of(addr):
    return addr >> ADDR_HOME_SHIFT


def crc16(symbols, init=CRC_INIT):
    """The CRC register after ``symbols``: a packet's CRC symbol over the symbols before it, and
    over a whole packet its residue (0 when intact)."""
    crc = init
    for s in symbols:
        for byte in (s >> 8, s & 0xFF):
            crc ^= byte << 8
            for _ in range(8):
                crc = ((crc << 1) ^ CRC_POLY) if crc & 0x8000 else crc << 1
                crc &= 0xFFFF
    return crc


#: XORed onto the CRC symbol of an aborted packet.
ABORT_CRC_XOR = 0xFFFF
#: The CRC residue of an aborted packet (the CRC is linear: the residue of the XOR alone).
ABORT_RESIDUE = crc16([ABORT_CRC_XOR], init=0)


def abort(symbols):
    """The symbols of a packet its sender abandoned after ``symbols``: they and the inverted CRC."""
    return list(symbols) + [crc16(symbols) ^ ABORT_CRC_XOR]


def aborted(symbols):
    """Whether a symbol sequence is an aborted packet (see :func:`abort`)."""
    return crc16(symbols) == ABORT_RESIDUE


class PacketError(ValueError):
    """A symbol sequence that is not a well-formed packet."""


@dataclass
class Packet:
    target: int = 0
    source: int = 0
    ptype: int = PacketType.REQUEST
    seq: int = 0
    has_data: int = 0
    cmd: int = 0
    tid: int = 0
    status: int = 0
    addr: int = 0
    ptr: int = 0
    ptr_valid: int = 0
    flag: int = 0
    mstate: int = 0
    aux: int = 0
    word: int = 0
    count: int = 0
    reserved: int = 0
    be: int = 0
    data: list = field(default_factory=list)  # a line's words when has_data

    def header_value(self):
        value = 0
        for f in HEADER_FIELDS:
            v = getattr(self, f.name)
            if not 0 <= v < (1 << f.width):
                raise PacketError(f"field {f.name}={v} does not fit {f.width} bits")
            lsb, _ = _POSITIONS[f.name]
            value |= int(v) << lsb
        return value


def whole_header(is_request, cmd):
    """Whether a packet sends its whole header, byte enables included: an uncached write's
    request, the one packet that uses them. ``is_request``: whether it is a request. Works on
    numbers and on Amaranth values alike (both sides of the ring link call it)."""
    return is_request & (cmd == Command.MUWRITE)


def header_symbols(ptype, cmd):
    """Header symbols on the wire of a packet of type ``ptype`` carrying command ``cmd``."""
    if ptype == PacketType.ECHO:
        return ECHO_HEADER_SYMBOLS
    return HEADER_SYMBOLS if whole_header(ptype == PacketType.REQUEST, cmd) else SHORT_HEADER_SYMBOLS


def carries_words_asked(is_response, cmd):
    """Whether a packet's data block is only the words its header's ``word``/``count`` name: the
    answer to an uncached read. Works on numbers and on Amaranth values alike."""
    return is_response & (cmd == Command.MUREAD)


def range_in_line(word, count, line_words=DATA_WORDS):
    """Whether ``count`` words from word ``word`` are a non-empty range inside the line. Works on
    numbers and on Amaranth values alike."""
    return (count != 0) & (word + count <= line_words)


def answered_words(word, count, line_words=DATA_WORDS):
    """``(word, count)`` of the words the home answers an uncached read of ``count`` words from
    ``word`` with: those, or the whole line if they are not a range inside it (a malformed request
    still gets a well-formed answer; the requester takes its words from the line either way)."""
    return (word, count) if range_in_line(word, count, line_words) else (0, line_words)


def data_range(packet, line_bytes=LINE_BYTES):
    """``(first, number)`` of the line's words ``packet``'s data block carries on the wire."""
    line_words = line_bytes // 4
    if carries_words_asked(packet.ptype == PacketType.RESPONSE, packet.cmd):
        if not range_in_line(packet.word, packet.count, line_words):
            raise PacketError(f"an uncached read's answer of words {packet.word}+{packet.count} is not in the line")
        return packet.word, packet.count
    return 0, line_words


def line_of_block(packet, block, line_bytes=LINE_BYTES):
    """The line of a data packet whose data block (the words on the wire) is ``block``: its words
    in their places (:func:`data_range`), the others 0."""
    first, number = data_range(packet, line_bytes)
    if len(block) != number:
        raise PacketError(f"{len(block)} data words where {number} were expected")
    line = [0] * (line_bytes // 4)
    line[first : first + number] = block
    return line


def handover_order(packet, line_bytes=LINE_BYTES):
    """The words of a data packet's line in the order a ring link hands them to its sequencer:
    from the first word on the wire (:func:`data_range`) on, wrapping round the line, so an
    answer's word asked for comes first."""
    first = data_range(packet, line_bytes)[0]
    return packet.data[first:] + packet.data[:first]


def encode(packet, line_bytes=LINE_BYTES):
    """Symbols of ``packet`` on the wire, CRC included, on a ring of ``line_bytes`` lines. A data
    packet's ``data`` is always the whole line; only the words of :func:`data_range` go out."""
    n_header = header_symbols(packet.ptype, packet.cmd)
    value = packet.header_value()  # a short header leaves the byte enables off, as the link does
    symbols = [(value >> (HEADER_BITS - SYMBOL_BITS * (i + 1))) & 0xFFFF for i in range(n_header)]
    if packet.ptype != PacketType.ECHO and packet.has_data:
        if len(packet.data) != line_bytes // 4:
            raise PacketError(f"a data packet carries {line_bytes // 4} words, not {len(packet.data)}")
        first, number = data_range(packet, line_bytes)
        for word in packet.data[first : first + number]:
            symbols += [(word >> 16) & 0xFFFF, word & 0xFFFF]
    elif packet.data:
        raise PacketError("data given for a packet without has_data")
    return symbols + [crc16(symbols)]


def _symbol_field(symbols, index, name):
    """Field ``name``, which lies in header symbol ``index``, from that symbol."""
    lsb, width = _POSITIONS[name]
    symbol_lsb = HEADER_BITS - SYMBOL_BITS * (index + 1)
    assert symbol_lsb <= lsb and lsb + width <= symbol_lsb + SYMBOL_BITS
    return (symbols[index] >> (lsb - symbol_lsb)) & ((1 << width) - 1)


def decode(symbols, line_bytes=LINE_BYTES):
    """The :class:`Packet` of a symbol sequence on a ring of ``line_bytes`` lines (the words of a
    line not on the wire read as 0); raises :class:`PacketError` if malformed."""
    symbols = list(symbols)
    if len(symbols) < ECHO_HEADER_SYMBOLS + 1:
        raise PacketError(f"{len(symbols)} symbols is shorter than any packet")
    if any(not 0 <= s <= 0xFFFF for s in symbols):
        raise PacketError("symbols are 16-bit values")
    if crc16(symbols[:-1]) != symbols[-1]:
        raise PacketError("CRC mismatch")
    ptype = _symbol_field(symbols, 0, "ptype")
    if ptype not in tuple(PacketType):
        raise PacketError(f"unknown packet type {ptype}")
    cmd = _symbol_field(symbols, 1, "cmd")
    n_header = header_symbols(ptype, cmd)
    if len(symbols) < n_header + 1:
        raise PacketError("truncated header")
    value = 0
    for s in symbols[:n_header]:
        value = value << SYMBOL_BITS | s
    value <<= SYMBOL_BITS * (HEADER_SYMBOLS - n_header)
    kwargs = {f.name: (value >> _POSITIONS[f.name][0]) & ((1 << f.width) - 1) for f in HEADER_FIELDS}
    packet = Packet(**kwargs)
    body = symbols[n_header:-1]
    has_data = ptype != PacketType.ECHO and packet.has_data
    number = data_range(packet, line_bytes)[1] if has_data else 0
    if len(body) != 2 * number:
        raise PacketError(f"{len(body)} body symbols where {2 * number} were expected")
    if has_data:
        packet.data = line_of_block(packet, [body[2 * i] << 16 | body[2 * i + 1] for i in range(number)], line_bytes)
    return packet


def packet_symbols(ptype, cmd, has_data, line_bytes=LINE_BYTES, count=None):
    """Length on the wire, CRC included; ``count``: the words of an uncached read's answer (if
    not given, the whole line)."""
    body = 0
    if has_data and ptype != PacketType.ECHO:
        words_asked = count is not None and carries_words_asked(ptype == PacketType.RESPONSE, cmd)
        body = 2 * (count if words_asked else line_bytes // 4)
    return header_symbols(ptype, cmd) + body + 1


def max_packet_symbols(line_bytes=LINE_BYTES):
    """Length of the longest packet: an uncached write's request, with its line."""
    return packet_symbols(PacketType.REQUEST, Command.MUWRITE, True, line_bytes)


#: Longest packet on the wire, for the default line.
MAX_PACKET_SYMBOLS = max_packet_symbols()


HEADER_FIELD_NAMES = tuple(f.name for f in dc_fields(Packet) if f.name != "data")
assert HEADER_FIELD_NAMES == tuple(f.name for f in HEADER_FIELDS)
