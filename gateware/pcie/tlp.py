"""Transaction layer packets: header layouts, the PHY-side TLP stream and the internal TLP beats.

Every header field position is written down once, here, as a :class:`data.StructLayout` over one
header dword; the receiver parses and the transmitter builds headers through these layouts only.

Two stream formats:

* the **PHY TLP stream** (:class:`TlpStreamSignature`): ``data_width`` bits a beat, ``keep`` one
  bit per dword, ``last`` on a TLP's final beat. A TLP starts at dword 0 of a beat and fills the
  beats dword by dword, header first. Header dwords are the specification's values (DW0's ``fmt``
  in bits 31:29); payload dwords carry the byte at the lowest address in bits 7:0, the order of
  the host's memory and of the card's 32-bit buses. This is what a PHY wrapper (LitePCIe's, a hard
  IP's, the cocotb shim) has to produce and accept.
* the **TLP beats** between the endpoint's blocks (:data:`TlpBeat`): one payload dword a beat with
  the parsed :data:`Header` alongside, ``last`` on the final beat. A TLP without payload is a
  single beat whose ``data`` means nothing. Blocks decide on the first beat and never re-parse.
"""

from amaranth import Cat, Const, Mux, Value
from amaranth.lib import data, enum, stream, wiring

MAX_PAYLOAD_DWORDS = 1024  # the 10-bit length field; 0 encodes 1024


class Fmt(enum.Enum, shape=3):
    NO_DATA_3DW = 0b000
    NO_DATA_4DW = 0b001
    DATA_3DW = 0b010
    DATA_4DW = 0b011
    PREFIX = 0b100


class Type(enum.Enum, shape=5):
    """The type field's values the endpoint tells apart (messages are ``0b10rrr``)."""

    MEM = 0b00000
    MEM_LOCKED = 0b00001
    IO = 0b00010
    CFG0 = 0b00100
    CFG1 = 0b00101
    CPL = 0b01010
    CPL_LOCKED = 0b01011


class CplStatus(enum.Enum, shape=3):
    SC = 0b000  # successful completion
    UR = 0b001  # unsupported request
    CRS = 0b010  # configuration request retry
    CA = 0b100  # completer abort


# --- header dwords, as the specification numbers their bits ------------------------------------
# (StructLayout fields are listed from bit 0 upwards.)

Dw0Layout = data.StructLayout(
    {
        "length": 10,
        "at": 2,
        "attr": 2,
        "ep": 1,
        "td": 1,
        "th": 1,
        "_r0": 1,
        "attr2": 1,
        "_r1": 1,
        "tc": 3,
        "_r2": 1,
        "type": 5,
        "fmt": 3,
    }
)
RequestDw1Layout = data.StructLayout({"first_be": 4, "last_be": 4, "tag": 8, "requester_id": 16})
CompletionDw1Layout = data.StructLayout({"byte_count": 12, "bcm": 1, "status": 3, "completer_id": 16})
CompletionDw2Layout = data.StructLayout({"lower_address": 7, "_r": 1, "tag": 8, "requester_id": 16})
# Config requests carry the target's id and register number in the 3DW address position:
ConfigDw2Layout = data.StructLayout({"_r0": 2, "register": 10, "_r1": 4, "function": 3, "device": 5, "bus": 8})

# --- the parsed header that travels with every internal beat ------------------------------------

Header = data.StructLayout(
    {
        "fmt": 3,
        "type": 5,
        "tc": 3,
        "attr": 2,
        "ep": 1,
        "length": 10,  # dwords; 0 is 1024 for TLPs with data
        "requester_id": 16,
        "tag": 8,
        "first_be": 4,
        "last_be": 4,
        "address": 64,  # requests: byte address (bits 1:0 zero); config: DW2 as is
        "completer_id": 16,
        "status": 3,
        "byte_count": 12,
        "lower_address": 7,
    }
)

TlpBeat = data.StructLayout({"header": Header, "data": 32, "last": 1})
Dword = data.StructLayout({"data": 32, "last": 1})


class TlpStreamSignature(wiring.Signature):
    """The PHY-side TLP stream, from the sender's view (see the module docstring)."""

    def __init__(self, data_width=64):
        if data_width % 32 or data_width < 64:
            raise ValueError("the TLP stream is a whole number of dwords wide, at least two")
        self.data_width = data_width
        layout = data.StructLayout({"data": data_width, "keep": data_width // 32, "last": 1})
        super().__init__(stream.Signature(layout).members)

    def __eq__(self, other):
        return isinstance(other, TlpStreamSignature) and other.data_width == self.data_width

    def __repr__(self):
        return f"TlpStreamSignature({self.data_width})"


def tlp_beats():
    """The internal TLP beat stream, sender's view."""
    return stream.Signature(TlpBeat)


# --- classification of a parsed header -------------------------------------------------------


def has_data(header):
    return header.fmt[1]


def is_4dw(header):
    return header.fmt[0]


def is_completion(header):
    return header.type[1:] == Type.CPL.value >> 1


def is_memory_request(header):
    return (header.type == Type.MEM) & ~header.fmt[2]


def is_config_type0(header):
    return (header.type == Type.CFG0) & ~header.fmt[0] & ~header.fmt[2]


def is_posted(header):
    """Memory writes and messages (with or without data) need no completion."""
    memory_write = (header.type == Type.MEM) & header.fmt[1]
    message = header.type[3:] == 0b10
    return memory_write | message


def payload_dwords(header):
    """The length field as a count (0 means 1024)."""
    return Mux(header.length == 0, MAX_PAYLOAD_DWORDS, header.length)


def header_dwords(header):
    """Number of header dwords of a TLP (3 or 4)."""
    return Mux(is_4dw(header), 4, 3)


# --- header <-> dwords -------------------------------------------------------------------


def parse_header(m, dws, header):
    """Drive ``header`` (a :data:`Header` view) from the received dwords ``dws[0..3]``."""
    dw0 = Dw0Layout(dws[0])
    req1 = RequestDw1Layout(dws[1])
    cpl1 = CompletionDw1Layout(dws[1])
    cpl2 = CompletionDw2Layout(dws[2])
    m.d.comb += [
        header.fmt.eq(dw0.fmt),
        header.type.eq(dw0.type),
        header.tc.eq(dw0.tc),
        header.attr.eq(dw0.attr),
        header.ep.eq(dw0.ep),
        header.length.eq(dw0.length),
    ]
    with m.If(is_completion(header)):
        m.d.comb += [
            header.completer_id.eq(cpl1.completer_id),
            header.status.eq(cpl1.status),
            header.byte_count.eq(cpl1.byte_count),
            header.lower_address.eq(cpl2.lower_address),
            header.requester_id.eq(cpl2.requester_id),
            header.tag.eq(cpl2.tag),
        ]
    with m.Else():
        m.d.comb += [
            header.requester_id.eq(req1.requester_id),
            header.tag.eq(req1.tag),
            header.first_be.eq(req1.first_be),
            header.last_be.eq(req1.last_be),
            header.address.eq(Mux(is_4dw(header), Cat(dws[3], dws[2]), dws[2])),
        ]


def pack(layout, **values):
    """A dword built through ``layout`` from named field ``values``; other fields are zero."""
    parts = []
    for name, field in sorted(layout, key=lambda item: item[1].offset):
        value = values.pop(name, None)
        parts.append(Const(0, field.width) if value is None else Value.cast(value)[: field.width])
    if values:
        raise KeyError(f"no field(s) {sorted(values)} in {layout!r}")
    return Cat(*parts)


def build_header(header):
    """The four header dwords of ``header`` (the fourth is unused for 3DW headers)."""
    dw0 = pack(
        Dw0Layout, length=header.length, attr=header.attr, ep=header.ep, tc=header.tc, type=header.type, fmt=header.fmt
    )
    request = pack(
        RequestDw1Layout,
        first_be=header.first_be,
        last_be=header.last_be,
        tag=header.tag,
        requester_id=header.requester_id,
    )
    cpl1 = pack(
        CompletionDw1Layout, byte_count=header.byte_count, status=header.status, completer_id=header.completer_id
    )
    cpl2 = pack(
        CompletionDw2Layout, lower_address=header.lower_address, tag=header.tag, requester_id=header.requester_id
    )
    address_hi, address_lo = header.address[32:], header.address[:32]
    completion = is_completion(header)
    return [
        dw0,
        Mux(completion, cpl1, request),
        Mux(completion, cpl2, Mux(is_4dw(header), address_hi, address_lo)),
        address_lo,
    ]


# --- byte enables -----------------------------------------------------------------------


def first_enabled_byte(be):
    """Index of the lowest enabled byte of a dword (0 when none is)."""
    be = Value.cast(be)
    return Mux(be[0], 0, Mux(be[1], 1, Mux(be[2], 2, Mux(be[3], 3, 0))))


def unused_tail_bytes(be):
    """Bytes above the highest enabled byte of a dword (0 when none is enabled)."""
    be = Value.cast(be)
    return Mux(be[3], 0, Mux(be[2], 1, Mux(be[1], 2, Mux(be[0], 3, 0))))


def request_byte_count(dwords, first_be, last_be):
    """Bytes a memory read asks for (the specification's byte count rule for its completion).

    A one-dword read with ``first_be == 0`` asks for one byte (a flush read)."""
    one_dword = dwords == 1
    tail = Mux(one_dword, unused_tail_bytes(first_be), unused_tail_bytes(last_be))
    count = (dwords * 4 - first_enabled_byte(first_be) - tail)[:13]
    return Mux(one_dword & (first_be == 0), 1, count)
