"""What the VIA engine's transmit and receive sides tell each other, what they both read of their
VIs, and what they take from and give to the register bank (doorbells, the bus's view of a VI,
management payloads): signatures, so the engine joins them with ``wiring.connect`` rather than by
port names.

Every member with a VI dimension is an array of ``vis`` elements, one per VI.
"""

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap, via_frame

from .register_bank import lookup_signature, status_signature

_VI = regmap.VIA.array("VI")
_PEER = _VI.register("PEER")
_MGMT_WORDS = via_frame.MGMT_PAYLOAD_MAX // 4


def vi_config_signature(vis):
    """Every VI's state, as the engine top holds it (the scheduler and the receive check read all)."""
    return wiring.Signature(
        {
            "state": Out(2).array(vis),
            # The cycle of a CONNECT command: sequence numbers restart.
            "connect": Out(1).array(vis),
        }
    )


def doorbell_signature(vis):
    """A work queue's doorbell, as the engine decoded it from the doorbell pages: the VI whose page
    was written and the descriptor's address, already checked against that VI's descriptor area
    (``postable``). The pages are written over one bus, so there is at most one a cycle, and it is
    never stalled: the bus write has completed, and a full queue refuses the doorbell (a counter).
    ``again``: the send queue's ``SQ_REPOST`` (the descriptor is unchanged since the VI last posted
    it); always 0 on the receive queue."""
    return stream.Signature(data.StructLayout({"vi": range(vis), "addr": 32, "again": 1}), always_ready=True)


def queue_status_signature(vis):
    """What the bus reads of one VI from a side's own state, at the VI the bus names (``vi``): the
    descriptors in its work queue (QUEUE_STATUS) and its sequence number (TX_PSN / RX_PSN),
    answered in the next cycle (the register bank's status port), from copies in block RAM."""
    return wiring.Signature({"vi": Out(range(vis)), "queued": In(16), "psn": In(32)})


def vi_lookup_signature(vis, *, ahead=False):
    """One VI's configuration registers (peer, protection tag, descriptor area, CQ binding), read
    from the register bank's table at ``index`` in the same cycle: they cost memory, not logic.
    `ahead`: the reader names the VI of the next cycle too (``next_index``), so the copy it reads
    can be block RAM."""
    return lookup_signature(_VI, vis, ahead=ahead)


def mgmt_tx_payload_signature():
    """The management frame to send, read a word at a time (``index``, then ``record.word``) from
    the register bank's MGMT_TX_DATA table."""
    return lookup_signature(regmap.VIA.array("MGMT_TX_DATA"), _MGMT_WORDS)


def mgmt_rx_payload_signature():
    """The management frame received, as the bus reads it from the receive side's memory
    (MGMT_RX_DATA): the bank's side, which names the word (``index``) and takes ``record.word``."""
    return status_signature(regmap.VIA.array("MGMT_RX_DATA"), _MGMT_WORDS)


def peer_node(record):
    """The peer's node, of a VI's configuration (``vi_lookup_signature``'s record)."""
    f = _PEER.field("NODE")
    return record.peer[f.lsb : f.lsb + f.width]


def peer_vi(record):
    f = _PEER.field("VI")
    return record.peer[f.lsb : f.lsb + f.width]


def rx_to_tx_signature(vis):
    """The receive side to the transmit side: acknowledgements owed and received, RDMA read progress.

    The flags are per VI, bit ``v`` VI ``v``'s (the transmit side's scheduler reads them all); the
    sequence numbers and codes are those of the VI the transmit side is at (``tx_to_rx_signature``'s
    ``vi``).
    """
    return wiring.Signature(
        {
            "rcv_nxt": Out(32),  # the next sequence number expected: what an ACK says
            "ack_pending": Out(vis),
            "nak_pending": Out(vis),
            "nak_code": Out(4),
            "nak_psn": Out(32),
            "peer_ack": Out(32),  # what the peer acknowledged last
            "ack_advanced": Out(1),  # peer_ack of ack_advanced_vi has moved on, or does at the next edge
            "ack_advanced_vi": Out(range(vis)),
            "rx_nak": Out(vis),  # the peer refused a frame: retransmit from rx_nak_psn
            "rx_nak_code": Out(4),
            "rx_nak_psn": Out(32),
            "read_offset": Out(32),  # bytes of the outstanding read's response received
            "vi": Out(range(vis)),  # the VI the receive side is at (tx_to_rx's read record is read there)
            "next_vi": Out(range(vis)),  # ... and will be at in the next cycle (where it is read ahead)
            "read_progress": Out(1),  # a read response frame arrived (its timer restarts)
            "read_progress_vi": Out(range(vis)),
        }
    )


def tx_to_rx_signature(vis):
    """The transmit side to the receive side: acknowledgements sent, RDMA reads started.

    Every event is about the VI the transmit side is at, ``vi``.
    """
    return wiring.Signature(
        {
            "vi": Out(range(vis)),
            "next_vi": Out(range(vis)),  # where it will be in the next cycle (rx_to_tx's fields are read ahead)
            "ack_sent": Out(1),
            "ack_sent_psn": Out(32),
            "nak_sent": Out(1),
            "rx_nak_taken": Out(1),  # the retransmission a received NAK asked for has begun
            "read_start": Out(1),
            # The VI's outstanding RDMA read: whether there is one (a bit per VI), and its sequence
            # number, descriptor and length at the receive side's VI (rx_to_tx's ``vi``).
            "read_active": Out(vis),
            "read_psn": Out(32),
            "read_desc": Out(32),
            "read_len": Out(32),
        }
    )
