"""Amaranth layouts of the VIA formats, derived from their one definition (``via_*`` modules).

Byte ``i`` of a record is bits ``8*i .. 8*i+7`` of its layout, as the record sits in little-endian
memory or on the wire (byte 0 first), so a 32-bit word ``k`` of a record is bits ``32*k ..``.
Field and bit names are lower-cased.
"""

from amaranth.lib import data

from numavia.base import via_att, via_descriptor, via_frame, via_mailbox
from numavia.base.bytestruct import ByteStruct, Field


def _field_shape(field: Field):
    if not field.bits:
        return field.width
    members, pos = {}, 0
    for b in sorted(field.bits, key=lambda b: b.lsb):
        if b.lsb > pos:
            members[f"_pad{pos}"] = b.lsb - pos
        members[b.name.lower()] = b.width
        pos = b.lsb + b.width
    if pos < field.width:
        members[f"_pad{pos}"] = field.width - pos
    return data.StructLayout(members)


def layout(struct: ByteStruct):
    """The :class:`amaranth.lib.data.StructLayout` of ``struct`` (gaps become ``_rsvd<offset>``)."""
    members, pos = {}, 0
    for f in struct.ordered_fields():
        if f.offset > pos:
            members[f"_rsvd{pos}"] = 8 * (f.offset - pos)
        members[f.name.lower()] = _field_shape(f)
        pos = f.offset + f.size
    if pos < struct.size:
        members[f"_rsvd{pos}"] = 8 * (struct.size - pos)
    return data.StructLayout(members)


DescControl = layout(via_descriptor.CONTROL_SEGMENT)
DescAddress = layout(via_descriptor.ADDRESS_SEGMENT)
DescData = layout(via_descriptor.DATA_SEGMENT)
CqEntry = layout(via_descriptor.CQ_ENTRY)
AttL1 = layout(via_att.L1_ENTRY)
AttL2 = layout(via_att.L2_ENTRY)
FrameHeader = layout(via_frame.HEADER)
MgmtMessage = layout(via_mailbox.MGMT_MESSAGE)

#: One 32-bit beat of an Ethernet frame between the card and the LiteEth MAC (sys clock domain).
#: ``last_be`` is one-hot: the byte lane of the frame's last byte, on the last beat only; ``error``
#: (receive only) is set on the last beat of a frame whose FCS was wrong.
EthBeat = data.StructLayout(
    {
        "data": 32,
        "last": 1,
        "last_be": 4,
        "error": 4,
    }
)
