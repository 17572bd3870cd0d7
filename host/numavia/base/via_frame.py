"""The VIA wire format: Ethernet frames with an IEEE local-experimental EtherType.

A frame is the Ethernet header, the VIA header, then ``PAYLOAD_LENGTH`` bytes of payload (the MAC
pads short frames to 60 bytes and appends the FCS). ``HEADER`` below covers both headers, so the
payload starts word aligned at byte 56. VIA fields are little-endian; the Ethernet fields keep
network byte order, so their constants are given as the little-endian value of their wire bytes.

Every frame of a connection carries the sender's cumulative acknowledgement (``ACK_PSN``: the
next sequence number it expects), so acknowledgements ride on data when there is any.

Pure Python (no Amaranth).
"""

from numavia.base.bytestruct import Bits, ByteStruct, Constants, Field

#: IEEE 802 "Local Experimental Ethertype 1".
ETHERTYPE = 0x88B5
#: ETHERTYPE as the HEADER field reads it (wire bytes 0x88, 0xB5 taken little-endian).
ETHERTYPE_FIELD = int.from_bytes(ETHERTYPE.to_bytes(2, "big"), "little")

#: Locally administered unicast MAC prefix; the sixth byte is the node id.
MAC_PREFIX = bytes([0x02, 0x4E, 0x56, 0x00, 0x00])


def mac_address(node):
    return MAC_PREFIX + bytes([node])


def mac_field(node):
    """A node's MAC as the HEADER's DST_MAC/SRC_MAC fields read it."""
    return int.from_bytes(mac_address(node), "little")


#: The prefix as the low 40 bits of a MAC field; bits 40..47 hold the node id.
MAC_PREFIX_FIELD = int.from_bytes(MAC_PREFIX, "little")

OP = Constants(
    "FRAME_OP",
    "Frame operation (HEADER.OP)",
    (
        ("ACK", 1, "acknowledgement only: ACK_PSN"),
        ("NAK", 2, "negative acknowledgement: NAK_CODE about PSN"),
        ("SEND", 3, "a piece of a send message"),
        ("RDMA_WRITE", 4, "a piece of an RDMA write to REMOTE_VA/REMOTE_HANDLE"),
        ("READ_REQUEST", 5, "RDMA read request: MSG_LENGTH bytes from REMOTE_VA, from OFFSET on"),
        ("READ_RESPONSE", 6, "a piece of the data of read request PSN, at OFFSET"),
        ("MGMT", 7, "management message between the nodes' firmware (not part of a connection)"),
    ),
)

NAK = Constants(
    "NAK_CODE",
    "Why a frame was refused (HEADER.NAK_CODE of a NAK)",
    (
        ("SEQUENCE", 1, "out of order: resend from PSN"),
        ("RECEIVE_QUEUE_EMPTY", 2, "no receive descriptor posted for the message at PSN"),
        ("REMOTE_PROTECTION", 3, "the RDMA target failed translation, protection or rights"),
        ("REMOTE_DESCRIPTOR", 4, "the receive descriptor was unusable (length or protection)"),
    ),
)

FLAGS = ("FIRST", "LAST", "IMMEDIATE")

ETH_HEADER_SIZE = 14

HEADER = ByteStruct(
    "FRAME_HEADER",
    56,
    "Ethernet header + VIA header",
    (
        Field("DST_MAC", 0, 6, "destination node's MAC"),
        Field("SRC_MAC", 6, 6, "source node's MAC"),
        Field("ETHERTYPE", 12, 2, "ETHERTYPE_FIELD"),
        Field("OP", 14, 1, "FRAME_OP"),
        Field(
            "FLAGS",
            15,
            1,
            "message flags",
            bits=(
                Bits("FIRST", 0, 1, "first frame of a message"),
                Bits("LAST", 1, 1, "last frame of a message"),
                Bits("IMMEDIATE", 2, 1, "IMMEDIATE_DATA is valid"),
            ),
        ),
        Field("SRC_VI", 16, 2, "sending VI"),
        Field("DST_VI", 18, 2, "receiving VI"),
        Field("PSN", 20, 4, "frame sequence number of the sending VI (read request's for responses)"),
        Field("ACK_PSN", 24, 4, "next sequence number the sender expects from the receiver"),
        Field("MSG_LENGTH", 28, 4, "bytes in the whole message"),
        Field("OFFSET", 32, 4, "byte offset of this frame's payload in the message"),
        Field("PAYLOAD_LENGTH", 36, 2, "payload bytes in this frame"),
        Field("NAK_CODE", 38, 2, "NAK_CODE of a NAK"),
        Field("REMOTE_VA", 40, 8, "RDMA: the message's first byte in the receiver's region"),
        Field("REMOTE_HANDLE", 48, 4, "RDMA: memory handle of that region"),
        Field("IMMEDIATE_DATA", 52, 4, "immediate data (with IMMEDIATE)"),
    ),
)

#: Bytes of VIA header inside the Ethernet payload.
VIA_HEADER_SIZE = HEADER.size - ETH_HEADER_SIZE

#: Payload bytes of a management frame (and bytes of a raw test frame).
MGMT_PAYLOAD_MAX = 64

MTU_DEFAULT = 1500
MTU_JUMBO = 9000
#: The smallest MTU the card accepts: a header and 64 bytes of payload.
MTU_MIN = VIA_HEADER_SIZE + 64


def payload_per_frame(mtu):
    return mtu - VIA_HEADER_SIZE


def wire_limit_bytes_per_s(mtu, header=True, line_rate=125e6):
    """Payload throughput of back-to-back full frames on Gigabit Ethernet.

    With ``header`` the VIA header counts as overhead (what this card can reach); without it, the
    Ethernet-only limit the papers quote (121.9 MB/s at MTU 1500).
    """
    frame_on_wire = 8 + ETH_HEADER_SIZE + mtu + 4 + 12  # preamble/SFD, header, payload, FCS, gap
    payload = payload_per_frame(mtu) if header else mtu
    return line_rate * payload / frame_on_wire


def wire_messages_per_s(size, mtu, line_rate=125e6):
    """Messages of ``size`` bytes a second that Gigabit Ethernet carries back to back with this card's
    header: each in frames of at most ``payload_per_frame(mtu)`` bytes, each frame padded to the
    64-byte minimum, with preamble, FCS and gap (0.868 M 64-byte messages a second)."""
    per_frame = payload_per_frame(mtu)
    frames = max(1, -(-size // per_frame))
    last = size - (frames - 1) * per_frame
    frame_bytes = [per_frame] * (frames - 1) + [last]
    wire = sum(8 + max(ETH_HEADER_SIZE + VIA_HEADER_SIZE + payload + 4, 64) + 12 for payload in frame_bytes)
    return line_rate / wire


class FrameError(ValueError):
    """Bytes that the card's receiver would drop as not a well-formed VIA frame."""


#: Operations whose payload is a piece of a message at OFFSET (so it must fit MSG_LENGTH).
DATA_OPS = (OP.SEND, OP.RDMA_WRITE, OP.READ_RESPONSE)


def decode_frame(frame, max_payload=payload_per_frame(MTU_JUMBO)):
    """``(header fields, payload)`` of a received frame (FCS already removed), or :class:`FrameError`.

    Makes the receiver's acceptance checks (``via_rx``: length, EtherType, operation, lengths)
    on the host, for tools and tests that read frames; the destination MAC is not checked
    (the caller knows whose frame it is).
    """
    frame = bytes(frame)
    if len(frame) < HEADER.size:
        raise FrameError(f"{len(frame)} bytes is shorter than the {HEADER.size}-byte VIA header")
    h = HEADER.decode(frame)
    if h["ETHERTYPE"] != ETHERTYPE_FIELD:
        ethertype = int.from_bytes(frame[12:14], "big")
        raise FrameError(f"EtherType {ethertype:#06x} is not VIA's {ETHERTYPE:#06x}")
    if OP.name_of(h["OP"]) is None:
        raise FrameError(f"unknown operation {h['OP']}")
    body = len(frame) - HEADER.size
    length = h["PAYLOAD_LENGTH"]
    if length > body:
        raise FrameError(f"PAYLOAD_LENGTH {length} but only {body} bytes follow the header")
    if length > max_payload:
        raise FrameError(f"PAYLOAD_LENGTH {length} exceeds the largest payload {max_payload}")
    if h["OP"] == OP.MGMT and length > MGMT_PAYLOAD_MAX:
        raise FrameError(f"a management frame carries at most {MGMT_PAYLOAD_MAX} bytes, not {length}")
    if h["OP"] in DATA_OPS and h["OFFSET"] + length > h["MSG_LENGTH"]:
        raise FrameError(f"bytes {h['OFFSET']}..{h['OFFSET'] + length} lie outside the {h['MSG_LENGTH']}-byte message")
    return h, frame[HEADER.size : HEADER.size + length]
