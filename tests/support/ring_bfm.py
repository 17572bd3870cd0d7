"""Bus-functional models around :class:`RingLink` for simulator testbenches.

Everything about the packet format comes from ``sci_packet`` (``encode``/``decode``,
``Packet.header_value``, ``field_positions``): nothing here knows where a field sits.
"""

from numavia.base.sci_packet import HEADER_FIELD_NAMES, Packet, data_range, field_positions, line_of_block
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
    waited = await send_header(ctx, link, packet, limit=limit)
    await send_data(ctx, link, wire_words(packet))
    return waited


def wire_words(packet):
    """The words of ``packet``'s line that its data block carries (``sci_packet.data_range``)."""
    if not packet.has_data:
        return []
    first, number = data_range(packet, 4 * len(packet.data))
    return packet.data[first : first + number]


async def send_header(ctx, link, packet, *, limit=None):
    """The header of ``packet`` into ``link``'s outgoing queue (the packet is queued from here on)."""
    return await send_beat(
        ctx, link.send_header, link.send_header.payload.shape().from_bits(packet.header_value()), timeout=limit
    )


async def send_data(ctx, link, words):
    """Data words into the slot of the header sent last, one per cycle."""
    for word in words:
        await send_beat(ctx, link.send_data, word)


async def receive(ctx, link):
    """Take one packet from ``link``'s incoming queue (its line handed over in
    ``sci_packet.handover_order``); the words of its line not on the wire read as 0, as
    ``sci_packet.decode`` has them."""
    header = await recv(ctx, link.recv_header)
    packet = packet_from_header(header.as_value().value)
    if packet.has_data:
        handed = [await recv(ctx, link.recv_data) for _ in range(link.data_words)]
        number = data_range(packet, 4 * link.data_words)[1]
        packet.data = line_of_block(packet, handed[:number], 4 * link.data_words)  # its block comes first
    return packet
