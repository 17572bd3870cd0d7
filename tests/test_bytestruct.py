"""Byte-record definitions: checks, encoding, decoding, and the Amaranth layouts derived from them."""

import pytest
from amaranth.lib import data

from numavia.base.bytestruct import Bits, ByteStruct, Constants, Field
from numavia.gateware.via_layouts import layout

REC = ByteStruct(
    "REC",
    12,
    "test",
    (
        Field("A", 0, 4, "a"),
        Field("B", 4, 2, "b", bits=(Bits("X", 0, 3), Bits("Y", 8, 1))),
        Field("C", 8, 4, "c"),
    ),
)


def test_rejects_overlaps_and_fields_outside():
    with pytest.raises(ValueError, match="overlap"):
        ByteStruct("S", 8, "", (Field("A", 0, 4), Field("B", 3, 2)))
    with pytest.raises(ValueError, match="outside"):
        ByteStruct("S", 8, "", (Field("A", 6, 4),))
    with pytest.raises(ValueError, match="exceed"):
        Field("A", 0, 1, bits=(Bits("X", 6, 3),))
    with pytest.raises(ValueError, match="duplicate"):
        ByteStruct("S", 8, "", (Field("A", 0, 2), Field("A", 4, 2)))


def test_encode_decode_round_trip_little_endian():
    b = REC.encode_bits("B", X=5, Y=1)
    raw = REC.encode(A=0x11223344, B=b, C=7)
    assert raw[:4] == bytes([0x44, 0x33, 0x22, 0x11]) and len(raw) == 12
    assert REC.decode(raw) == {"A": 0x11223344, "B": b, "C": 7}
    assert REC.decode_bits("B", b) == {"X": 5, "Y": 1}
    with pytest.raises(ValueError, match="does not fit"):
        REC.encode(B=0x10000)
    with pytest.raises(ValueError, match="needs 12 bytes"):
        REC.decode(b"\0" * 4)


def test_amaranth_layout_places_each_field_at_its_bytes():
    lay = layout(REC)
    assert lay.size == 96
    assert lay["a"].offset == 0 and lay["b"].offset == 32 and lay["c"].offset == 64
    assert isinstance(lay["b"].shape, data.StructLayout) and lay["b"].shape["y"].offset == 8
    raw = REC.encode(A=1, B=REC.encode_bits("B", X=2, Y=1), C=2)
    view = lay.const({"a": 1, "b": {"x": 2, "y": 1}, "c": 2})
    assert view.as_value().value == int.from_bytes(raw, "little")


def test_constants():
    c = Constants("K", "k", (("ONE", 1, ""), ("TWO", 2, "")))
    assert c.TWO == 2 and c.name_of(1) == "ONE" and c.name_of(3) is None
    with pytest.raises(AttributeError):
        _ = c.THREE
    with pytest.raises(ValueError):
        Constants("K", "", (("A", 1, ""), ("A", 2, "")))
