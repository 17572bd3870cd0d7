"""The VI descriptor (paper's Fig. 4, VIA 1.0 layout) and the completion-queue entry.

A descriptor lives in host memory: a control segment, then an address segment for RDMA
operations, then ``SEG_COUNT`` data segments. The host writes it and rings the VI's doorbell with
its physical address; the card reads it by DMA and, when the work is done, writes ``LENGTH``,
``IMMEDIATE_DATA`` (receives) and last ``STATUS`` (whose ``DONE`` bit tells the host it is
complete). The ``NEXT_*`` fields link descriptors for the VIPL library; the card queues descriptors
in doorbell order and does not follow the link.

Pure Python (no Amaranth): the gateware layouts, the C header and the host encoders all come
from these definitions.
"""

from numavia.base.bytestruct import Bits, ByteStruct, Constants, Field

#: Descriptors must be aligned to this many bytes (doorbells with other addresses are refused).
DESCRIPTOR_ALIGN = 16

CONTROL_OP = Constants(
    "CONTROL_OP",
    "Operation of a descriptor (CONTROL.OP)",
    (
        ("SENDRECV", 0, "send (on a send queue) or receive (on a receive queue)"),
        ("RDMA_WRITE", 1, "RDMA write to the address segment's remote buffer"),
        ("RDMA_READ", 2, "RDMA read from the address segment's remote buffer"),
    ),
)

STATUS_OP = Constants(
    "STATUS_OP",
    "What completed (STATUS.OP), written by the card",
    (
        ("SEND", 0, "a send"),
        ("RECEIVE", 1, "a receive that consumed an incoming send"),
        ("RDMA_WRITE", 2, "a local RDMA write"),
        ("REMOTE_RDMA_WRITE", 3, "a receive consumed by an incoming RDMA write with immediate data"),
        ("RDMA_READ", 4, "a local RDMA read"),
    ),
)

#: Error bits of STATUS, in bit order (bit 1 upwards; bit 0 is DONE).
STATUS_ERRORS = (
    (
        "FORMAT_ERROR",
        "malformed descriptor: bad operation, segment count or alignment, or its segments "
        "run past the VI's descriptor area",
    ),
    ("PROTECTION_ERROR", "a local data segment failed address translation or protection"),
    ("LENGTH_ERROR", "the receive buffers are smaller than the incoming message"),
    ("FLUSHED", "the VI entered the error state or was disconnected before this completed"),
    ("TRANSPORT_ERROR", "the peer stopped answering (retry limit) or a DMA access failed"),
    ("RDMA_PROTECTION_ERROR", "the remote buffer failed translation, protection or RDMA rights"),
    ("REMOTE_DESCRIPTOR_ERROR", "the peer had no receive descriptor posted, or it was unusable"),
)

CONTROL_SEGMENT = ByteStruct(
    "DESC_CONTROL",
    32,
    "Control segment, first in every descriptor",
    (
        Field("NEXT_VA", 0, 8, "virtual address of the next descriptor (for the VIPL library)"),
        Field("NEXT_HANDLE", 8, 4, "memory handle of the next descriptor"),
        Field("SEG_COUNT", 12, 2, "number of data segments that follow"),
        Field(
            "CONTROL",
            14,
            2,
            "operation and flags, written by the host",
            bits=(
                Bits("OP", 0, 2, "CONTROL_OP"),
                Bits("IMMEDIATE", 2, 1, "IMMEDIATE_DATA is sent with the message"),
            ),
        ),
        Field("RESERVED", 16, 4, "zero"),
        Field("IMMEDIATE_DATA", 20, 4, "sent with IMMEDIATE; written on a receive that got one"),
        Field("LENGTH", 24, 4, "bytes transferred, written by the card on completion"),
        Field(
            "STATUS",
            28,
            4,
            "completion status, written last by the card",
            bits=(
                Bits("DONE", 0, 1, "the card has finished with this descriptor"),
                *(Bits(name, 1 + i, 1, doc) for i, (name, doc) in enumerate(STATUS_ERRORS)),
                Bits("OP", 16, 3, "STATUS_OP"),
                Bits("IMMEDIATE", 19, 1, "IMMEDIATE_DATA holds data that came with the message"),
            ),
        ),
    ),
)

STATUS_ERROR_MASK = sum(CONTROL_SEGMENT.field("STATUS").bit(name).mask for name, _ in STATUS_ERRORS)
#: CONTROL bits no version defines: a descriptor with any of them set is refused (by the host's
#: decoder and by the card, FORMAT_ERROR), so that they stay free for later use.
CONTROL_UNDEFINED_MASK = ((1 << 8 * CONTROL_SEGMENT.field("CONTROL").size) - 1) & ~sum(
    b.mask for b in CONTROL_SEGMENT.field("CONTROL").bits
)


def status_bits(**bits):
    """A STATUS value with the named bits set (``status_bits(DONE=1, FLUSHED=1)``)."""
    return CONTROL_SEGMENT.encode_bits("STATUS", **bits)


def status_op(op):
    """STATUS.OP = ``op`` (a STATUS_OP value or a signal), in place."""
    return op << CONTROL_SEGMENT.field("STATUS").bit("OP").lsb


ADDRESS_SEGMENT = ByteStruct(
    "DESC_ADDRESS",
    16,
    "Address segment: the remote buffer of an RDMA",
    (
        Field("REMOTE_VA", 0, 8, "virtual address in the peer's registered region"),
        Field("REMOTE_HANDLE", 8, 4, "the peer's memory handle for that region"),
        Field("RESERVED", 12, 4, "zero"),
    ),
)

DATA_SEGMENT = ByteStruct(
    "DESC_DATA",
    16,
    "Data segment: one piece of a local buffer",
    (
        Field("VA", 0, 8, "virtual address of the piece"),
        Field("HANDLE", 8, 4, "memory handle of the region that holds it"),
        Field("LENGTH", 12, 4, "bytes"),
    ),
)

CQ_ENTRY = ByteStruct(
    "CQ_ENTRY",
    8,
    "Completion-queue entry, written by the card",
    (
        Field("DESCRIPTOR", 0, 4, "physical address of the completed descriptor"),
        Field(
            "INFO",
            4,
            4,
            "which work queue; PHASE flips each time the ring wraps",
            bits=(
                Bits("VI", 0, 8, "VI number"),
                Bits("RECV", 8, 1, "1: receive queue, 0: send queue"),
                Bits("PHASE", 31, 1, "1 on the first pass over the ring, 0 on the second, ..."),
            ),
        ),
    ),
)


def descriptor_size(seg_count, rdma):
    """Bytes of a descriptor with ``seg_count`` data segments (and an address segment if ``rdma``)."""
    return CONTROL_SEGMENT.size + (ADDRESS_SEGMENT.size if rdma else 0) + seg_count * DATA_SEGMENT.size


def encode_descriptor(op, segments, *, immediate=None, remote_va=0, remote_handle=0, next_va=0, next_handle=0):
    """Bytes of a whole descriptor. ``segments`` is a list of ``(va, handle, length)``."""
    rdma = op in (CONTROL_OP.RDMA_WRITE, CONTROL_OP.RDMA_READ)
    control = CONTROL_SEGMENT.encode_bits("CONTROL", OP=op, IMMEDIATE=int(immediate is not None))
    data = CONTROL_SEGMENT.encode(
        NEXT_VA=next_va,
        NEXT_HANDLE=next_handle,
        SEG_COUNT=len(segments),
        CONTROL=control,
        IMMEDIATE_DATA=immediate or 0,
    )
    if rdma:
        data += ADDRESS_SEGMENT.encode(REMOTE_VA=remote_va, REMOTE_HANDLE=remote_handle)
    for va, handle, length in segments:
        data += DATA_SEGMENT.encode(VA=va, HANDLE=handle, LENGTH=length)
    return data


class DescriptorError(ValueError):
    """Bytes that are not a descriptor the card would execute."""


def decode_descriptor(data, max_segments=None):
    """The fields of the descriptor at the start of ``data``, or :class:`DescriptorError`.

    Returns a dict with ``op``, ``immediate`` (None or the value), ``segments`` (a list of
    ``(va, handle, length)``), ``remote_va``, ``remote_handle``, ``next_va``, ``next_handle``,
    ``length`` and ``status`` (the card's fields), so that ``encode_descriptor`` of the host's
    fields gives the same bytes back.
    """
    data = bytes(data)
    if len(data) < CONTROL_SEGMENT.size:
        raise DescriptorError(f"{len(data)} bytes is shorter than a control segment ({CONTROL_SEGMENT.size})")
    ctrl = CONTROL_SEGMENT.decode(data)
    bits = CONTROL_SEGMENT.decode_bits("CONTROL", ctrl["CONTROL"])
    if CONTROL_OP.name_of(bits["OP"]) is None:
        raise DescriptorError(f"unknown operation {bits['OP']}")
    unknown = ctrl["CONTROL"] & CONTROL_UNDEFINED_MASK
    if unknown:
        raise DescriptorError(f"CONTROL bits {unknown:#x} are not defined")
    count = ctrl["SEG_COUNT"]
    if max_segments is not None and count > max_segments:
        raise DescriptorError(f"{count} data segments; the card takes at most {max_segments}")
    rdma = bits["OP"] in (CONTROL_OP.RDMA_WRITE, CONTROL_OP.RDMA_READ)
    size = descriptor_size(count, rdma)
    if len(data) < size:
        raise DescriptorError(f"{count} data segments need {size} bytes, only {len(data)} given")
    result = {
        "op": bits["OP"],
        "immediate": ctrl["IMMEDIATE_DATA"] if bits["IMMEDIATE"] else None,
        "remote_va": 0,
        "remote_handle": 0,
        "next_va": ctrl["NEXT_VA"],
        "next_handle": ctrl["NEXT_HANDLE"],
        "length": ctrl["LENGTH"],
        "status": ctrl["STATUS"],
        "segments": [],
    }
    offset = CONTROL_SEGMENT.size
    if rdma:
        address = ADDRESS_SEGMENT.decode(data[offset:])
        result.update(remote_va=address["REMOTE_VA"], remote_handle=address["REMOTE_HANDLE"])
        offset += ADDRESS_SEGMENT.size
    for _ in range(count):
        seg = DATA_SEGMENT.decode(data[offset:])
        result["segments"].append((seg["VA"], seg["HANDLE"], seg["LENGTH"]))
        offset += DATA_SEGMENT.size
    return result
