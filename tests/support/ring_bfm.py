"""Bus-functional models around :class:`RingLink` for simulator testbenches.

Everything about the packet format comes from ``sci_packet`` (``encode``/``decode``,
``Packet.header_value``, ``field_positions``): nothing here knows where a field sits.
"""

from numavia.base.sci_packet import HEADER_FIELD_NAMES, Packet, field_positions
from numavia.gateware.bfm import recv
from numavia.gateware.bfm import send as send_beat

_POSITIONS = field_positions()


def packet_from_header(value):
    """The header fields of a :data:`HeaderLayout` bit vector, as a :class:`Packet` without data."""
    return Packet(
        **{name: (value >> _POSITIONS[name][0]) & ((1 << _POSITIONS[name][1]) - 1) for name in HEADER_FIELD_NAMES}
    )


async def send(ctx, link, packet, *, limit=None):
    """Queue ``packet`` on ``link``'s outgoing queue: its header, then its data words. Returns the
    cycles ``send_header`` held it back."""
    waited = await send_beat(
        ctx, link.send_header, link.send_header.payload.shape().from_bits(packet.header_value()), timeout=limit
    )
    if packet.has_data:
        for word in packet.data:
            await send_beat(ctx, link.send_data, word)
    return waited


async def receive(ctx, link):
    """Take one packet from ``link``'s incoming queue."""
    header = await recv(ctx, link.recv_header)
    packet = packet_from_header(header.as_value().value)
    if packet.has_data:
        packet.data = [await recv(ctx, link.recv_data) for _ in range(link.data_words)]
    return packet
