"""Bus-functional models around :class:`RingLink` for simulator testbenches.

Everything about the packet format comes from ``sci_packet`` (``encode``/``decode``,
``Packet.header_value``, ``field_positions``): nothing here knows where a field sits.
"""

from numavia.base.sci_packet import HEADER_FIELD_NAMES, Packet, field_positions

_POSITIONS = field_positions()


def packet_from_header(value):
    """The header fields of a :data:`HeaderLayout` bit vector, as a :class:`Packet` without data."""
    return Packet(**{name: (value >> _POSITIONS[name][0]) & ((1 << _POSITIONS[name][1]) - 1)
                     for name in HEADER_FIELD_NAMES})


async def put(ctx, stream, value, *, limit=None):
    """One transfer into the DUT: hold ``valid`` until a clock edge at which ``ready`` was high.
    Returns the number of edges ``ready`` was low before that; raises after ``limit`` of them."""
    ctx.set(stream.payload, value)
    ctx.set(stream.valid, 1)
    waited = 0
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        if ready:
            break
        waited += 1
        if limit is not None and waited > limit:
            raise TimeoutError(f"no ready within {limit} cycles")
    ctx.set(stream.valid, 0)
    return waited


async def take(ctx, stream):
    """One transfer out of the DUT: the payload (a layout constant or an int)."""
    ctx.set(stream.ready, 1)
    while True:     # one-shot waits: a background testbench may be dropped at any of them
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        if valid:
            break
    ctx.set(stream.ready, 0)
    return payload


async def send(ctx, link, packet, *, limit=None):
    """Queue ``packet`` on ``link``'s outgoing queue: its header, then its data words. Returns the
    cycles ``send_header`` held it back."""
    waited = await put(ctx, link.send_header, link.send_header.payload.shape().from_bits(
        packet.header_value()), limit=limit)
    if packet.has_data:
        for word in packet.data:
            await put(ctx, link.send_data, word)
    return waited


async def receive(ctx, link):
    """Take one packet from ``link``'s incoming queue."""
    header = await take(ctx, link.recv_header)
    packet = packet_from_header(header.as_value().value)
    if packet.has_data:
        packet.data = [await take(ctx, link.recv_data) for _ in range(link.data_words)]
    return packet
