"""Byte-level record definitions: the one place a memory or wire format writes its offsets down.

A :class:`ByteStruct` is a fixed-size record of little-endian fields at byte offsets, each field
optionally split into named bit ranges. From one definition come:

* the Amaranth layout of the record (``numavia.gateware.via_layouts``): byte ``i`` of the record is
  bits ``8*i .. 8*i+7`` of the flat value, so a field is one contiguous bit slice;
* the C header for the firmware and the standalone Python module (``numavia.base.codegen``);
* :meth:`ByteStruct.encode` / :meth:`ByteStruct.decode` for host tools and tests.

This module imports no Amaranth, so host tools use it without the HDL.
"""

from dataclasses import dataclass

from numavia.base.regmap import Field as Bits

__all__ = ["Bits", "ByteStruct", "Constants", "Field"]  # Bits: a named bit range inside a field


@dataclass(frozen=True)
class Field:
    name: str
    offset: int  # bytes from the start of the record
    size: int  # bytes
    doc: str = ""
    bits: tuple = ()

    def __post_init__(self):
        if self.size <= 0:
            raise ValueError(f"field {self.name}: size must be positive")
        used = 0
        for b in self.bits:
            if b.lsb < 0 or b.width <= 0 or b.lsb + b.width > 8 * self.size:
                raise ValueError(f"field {self.name}: bits {b.name} exceed the field")
            if used & b.mask:
                raise ValueError(f"field {self.name}: bits {b.name} overlap other bits")
            used |= b.mask

    @property
    def width(self):
        return 8 * self.size

    @property
    def lsb(self):
        """Bit offset of the field in the record's flat little-endian value."""
        return 8 * self.offset

    def bit(self, name):
        for b in self.bits:
            if b.name == name:
                return b
        raise KeyError(f"field {self.name} has no bits {name}")


@dataclass(frozen=True)
class ByteStruct:
    name: str
    size: int
    doc: str
    fields: tuple

    def __post_init__(self):
        owner = {}
        for f in self.fields:
            if f.offset < 0 or f.offset + f.size > self.size:
                raise ValueError(f"struct {self.name}: field {f.name} lies outside {self.size} bytes")
            for byte in range(f.offset, f.offset + f.size):
                if byte in owner:
                    raise ValueError(f"struct {self.name}: fields {owner[byte]} and {f.name} overlap")
                owner[byte] = f.name
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"struct {self.name}: duplicate field names")

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"struct {self.name} has no field {name}")

    @property
    def width(self):
        return 8 * self.size

    @property
    def words(self):
        """Size in 32-bit words, rounded up."""
        return (self.size + 3) // 4

    def ordered_fields(self):
        return sorted(self.fields, key=lambda f: f.offset)

    # --- host-side encoding -------------------------------------------------------------------

    def pack_value(self, **values):
        """The flat little-endian integer of a record with the given field values (others 0)."""
        flat = 0
        for name, value in values.items():
            f = self.field(name)
            value = int(value)
            if value < 0 or value >> f.width:
                raise ValueError(f"{self.name}.{name} = {value:#x} does not fit {f.size} byte(s)")
            flat |= value << f.lsb
        return flat

    def encode(self, **values):
        return self.pack_value(**values).to_bytes(self.size, "little")

    def decode(self, data):
        """Field values of a record as a dict; ``data`` is bytes (at least ``size``) or an int."""
        if isinstance(data, int):
            flat = data
        else:
            if len(data) < self.size:
                raise ValueError(f"{self.name} needs {self.size} bytes, got {len(data)}")
            flat = int.from_bytes(bytes(data[: self.size]), "little")
        return {f.name: (flat >> f.lsb) & ((1 << f.width) - 1) for f in self.fields}

    def encode_bits(self, field, **bits):
        """Value of ``field`` with the given named bit ranges set."""
        f = self.field(field)
        value = 0
        for name, v in bits.items():
            b = f.bit(name)
            v = int(v)
            if v < 0 or v >> b.width:
                raise ValueError(f"{self.name}.{field}.{name} = {v} does not fit {b.width} bit(s)")
            value |= v << b.lsb
        return value

    def decode_bits(self, field, value):
        f = self.field(field)
        return {b.name: (value >> b.lsb) & ((1 << b.width) - 1) for b in f.bits}


@dataclass(frozen=True)
class Constants:
    """A named group of integer constants (operation codes, status bits) shared with C and Python."""

    name: str
    doc: str
    values: tuple  # ((name, value, doc), ...)

    def __post_init__(self):
        names = [n for n, _, _ in self.values]
        if len(set(names)) != len(names):
            raise ValueError(f"constants {self.name}: duplicate names")

    def __getattr__(self, item):
        if item.startswith("_") or item == "values":
            raise AttributeError(item)
        for name, value, _ in self.values:
            if name == item:
                return value
        raise AttributeError(f"constants {self.name} have no {item}")

    def name_of(self, value):
        for name, v, _ in self.values:
            if v == value:
                return name
        return None

    def items(self):
        return [(n, v) for n, v, _ in self.values]
