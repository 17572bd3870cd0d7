"""VIA receive engine: everything the card does with a frame that arrived.

Frames come out of the receive packet FIFO, which checks their FCS. The engine reads a frame's
header as it comes in (cut-through) but acts on it only once the FIFO has the whole frame and its
FCS is good: a bad frame is forgotten, header and all. It checks the header (ours, well formed,
for a connected VI from its peer), takes the piggybacked acknowledgement, and then by operation:

* SEND: in sequence order, into the receive queue's head descriptor (validated through the ATT
  before a byte is written); the last frame completes the descriptor;
* RDMA_WRITE: into the registered region named by the header, after a protection check of the
  whole message range (kept for the next frame to the same window until the ATT is written); with
  immediate data, the last frame completes a receive descriptor;
* READ_REQUEST: checked like a write (with the read right) and queued for the transmit engine;
* READ_RESPONSE: into the local segments of the VI's outstanding RDMA read descriptor;
* ACK / NAK: handed to the transmit engine; MGMT: to the firmware's management registers.

Out-of-order data is dropped with one NAK per gap, duplicates are dropped and acknowledged again,
and every refusal has a counter. The engine asks the transmit engine for ACK/NAK frames through
per-VI pending flags, so acknowledgements coalesce when frames arrive faster than acks leave.
The receive queues (doorbells, flush on error) live here too.
"""

from amaranth import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base import regmap, via_att, via_descriptor, via_frame
from numavia.base.params import BUS_ADDR_WIDTH
from numavia.base.via_descriptor import status_bits, status_op

from . import wishbone_burst
from .packet_fifo import FifoOut
from .round_robin import first_set
from .vi_records import ViRecords
from .via_completion import CompletionRequest
from .via_descriptor_fetch import FETCH_OK, DescriptorFetcher
from .via_kept_copy import KeptCopy
from .via_layouts import FrameHeader
from .via_links import (
    doorbell_signature,
    mgmt_rx_payload_signature,
    peer_node,
    peer_vi,
    queue_status_signature,
    rx_to_tx_signature,
    tx_to_rx_signature,
    vi_config_signature,
    vi_lookup_signature,
)
from .via_payload_writer import PayloadWriter
from .via_queue_pointers import QueuePointers
from .via_scatter_gather import OP_VALIDATE, ScatterGather, lend
from .via_translate import lookup_signature

ReadJob = data.StructLayout({"vi": 8, "psn": 32, "va": 64, "handle": 32, "length": 32, "offset": 32})

#: Pulses of the receive engine, counted by the engine top (names of regmap.VIA_COUNTERS).
RX_EVENTS = (
    "RX_NOT_FOR_US",
    "RX_MALFORMED",
    "RX_NO_VI",
    "RX_DUPLICATE",
    "RX_OUT_OF_ORDER",
    "RX_RQ_EMPTY",
    "RX_PROTECTION",
    "RX_DESCRIPTOR_ERROR",
    "RX_STALE_RESPONSE",
    "RX_MGMT_DROPPED",
    "READ_REQUESTS_DROPPED",
    "DOORBELLS_REFUSED",
    "DMA_ERRORS",
)

_STATUS = via_descriptor.CONTROL_SEGMENT.field("STATUS")
_OP = via_frame.OP
_NAK = via_frame.NAK
_HEADER_WORDS = via_frame.HEADER.size // 4
_CONNECTED = dict(regmap.VI_STATES)["CONNECTED"]
_ERROR = dict(regmap.VI_STATES)["ERROR"]


#: A VI's sequence state on the receive side, one record per VI in memory.
SequenceRecord = data.StructLayout(
    {
        "rcv_nxt": 32,  # the next PSN expected
        "peer_ack": 32,  # what the peer acknowledged last
        "nak_code": 4,  # the NAK owed to the peer...
        "nak_psn": 32,
        "rx_nak_code": 4,  # ... and the last the peer sent
        "rx_nak_psn": 32,
        "read_offset": 32,  # bytes of the outstanding RDMA read's response received
    }
)


class RxEngine(wiring.Component):
    def __init__(self, params):
        self.p = p = params
        vis = p.vis
        super().__init__(
            {
                "frames": In(stream.Signature(FifoOut)),
                "frame_valid": In(1),  # a whole frame, its FCS checked, is at the FIFO's head...
                "frame_length": In(16),
                "frame_skip": Out(1),
                "frame_early": In(1),  # ... or the words of one still coming in can be read
                "frame_dropped": In(1),  # ... and it was dropped after all
                "fetch_bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "write_bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "att": Out(lookup_signature()),
                "enable": In(1),
                "forget": In(1),  # the ATT or FORGET_COPIES was written: the kept remote target is not good
                "node_id": In(regmap.NODE_ID_BITS),
                "vi": In(vi_config_signature(vis)),
                "config": Out(vi_lookup_signature(vis, ahead=True)),  # the configuration of this engine's VI...
                "frame_config": Out(vi_lookup_signature(vis)),  # ... and of the arriving frame's
                "fail": Out(1),
                "fail_vi": Out(range(vis)),
                "fail_bits": Out(16),
                # Receive queues.
                "rq_doorbell": In(doorbell_signature(vis)),
                "status": In(queue_status_signature(vis)),  # psn: the VI's rcv_nxt
                "to_tx": Out(rx_to_tx_signature(vis)),
                "from_tx": In(tx_to_rx_signature(vis)),
                "jobs": Out(stream.Signature(ReadJob)),  # RDMA reads for the transmit engine to answer
                "completions": Out(stream.Signature(CompletionRequest)),
                # A data frame's payload is all in host memory (the engine's latency stamp).
                "payload_written": Out(1),
                # Management frames for the firmware.
                "mgmt_valid": Out(1),
                "mgmt_src": Out(regmap.NODE_ID_BITS),
                "mgmt_length": Out(7),
                "mgmt_data": In(mgmt_rx_payload_signature()),
                "mgmt_pop": In(1),
                "events": Out(data.StructLayout({name.lower(): 1 for name in RX_EVENTS})),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.p
        vis, qd = p.vis, p.queue_depth
        ev = self.events

        m.submodules.fetcher = fetcher = DescriptorFetcher(max_segments=p.max_segments)
        m.submodules.sg = sg = ScatterGather(max_segments=p.max_segments)
        m.submodules.payload = payload = PayloadWriter()
        wiring.connect(m, fetcher.bus, wiring.flipped(self.fetch_bus))
        wiring.connect(m, payload.bus, wiring.flipped(self.write_bus))
        wiring.connect(m, sg.chunks, payload.chunks)
        wiring.connect(m, sg.att, wiring.flipped(self.att))
        m.d.comb += ev.dma_errors.eq(payload.dma_error)

        # --- receive queues: doorbells append, the engine consumes the head ---------------------
        rq_mem = Memory(shape=32, depth=vis * qd, init=[])
        m.submodules.rq_mem = rq_mem
        rq_w = rq_mem.write_port()
        # Block RAM: answers a cycle after its address (the engine's VI's head).
        rq_r = rq_mem.read_port(transparent_for=(rq_w,))
        # The queues' heads and tails: this engine moves the head at its VI, the doorbells the
        # tail; the flush looks at which VIs' queues hold descriptors (`posted`).
        vi = Signal(range(vis))  # the VI of the frame being handled, or of the flush
        vi_next = Signal(range(vis))  # where it will be in the next cycle: the record read ahead
        m.d.comb += vi_next.eq(vi)
        m.d.sync += vi.eq(vi_next)
        connects = Signal(vis)  # the VIs the manager connects in this cycle, a bit each
        m.d.comb += connects.eq(Cat(*self.vi.connect))
        m.submodules.pointers = pointers = QueuePointers(vis, qd)
        wiring.connect(m, wiring.flipped(self.rq_doorbell), pointers.doorbell)
        rq_head, rq_tail, posted = pointers.head, pointers.tail, pointers.posted  # at this engine's VI
        consumed = pointers.advance  # the head descriptor is done with: the head moves on
        m.d.comb += [
            pointers.vi.eq(vi),
            pointers.next_vi.eq(vi_next),
            pointers.status_vi.eq(self.status.vi),
            self.status.queued.eq(pointers.queued),
            rq_w.en.eq(pointers.taken),
            rq_w.addr.eq(pointers.slot),
            rq_w.data.eq(self.rq_doorbell.payload.addr),
            ev.doorbells_refused.eq(pointers.refused),
        ]

        # --- per-VI flags: a bit per VI, written at a VI through `bit_select` ----------------------
        # (one case per VI; an Array of one-bit signals written at a variable VI gives every bit
        # a case per VI, and at 256 VIs more Verilog than Verilator builds in 24 GiB)
        ack_pending, nak_pending, rx_nak = self.to_tx.ack_pending, self.to_tx.nak_pending, self.to_tx.rx_nak
        gap_nakked = Signal(vis)
        read_complete = Signal(vis)

        # --- the frame being handled ---------------------------------------------------------
        hdr_bits = Signal(FrameHeader.size)
        h = FrameHeader(hdr_bits)
        words = Signal(range(_HEADER_WORDS + 1))
        frame_done = Signal()  # its last word has been read (nothing left to skip)
        length = Signal(16)
        op = Signal(4)
        desc = Signal(32)
        error_bits = Signal(16)
        last = Signal()
        payload_words = Signal(16)
        mgmt_words = Signal(range(via_frame.MGMT_PAYLOAD_MAX // 4 + 1))
        # The management frame's payload, in memory; the bus reads it (MGMT_RX_DATA) through here.
        m.submodules.mgmt_payload = mgmt_payload = Memory(shape=32, depth=via_frame.MGMT_PAYLOAD_MAX // 4, init=[])
        mgmt_write, mgmt_read = mgmt_payload.write_port(), mgmt_payload.read_port(domain="comb")
        m.d.comb += [mgmt_read.addr.eq(self.mgmt_data.index), self.mgmt_data.record.word.eq(mgmt_read.data)]

        # --- per-VI sequence state: one record per VI in memory -----------------------------------
        # Read where this engine is (its frame's VI) and where the transmit engine is
        # (`from_tx.vi`: the acknowledgement it builds, the NAK it answers), both a cycle ahead
        # from block RAM, and where the bus reads RX_PSN; written whole, at this engine's VI, by
        # this engine only (the memories a cycle later, from registers). A connect clears the
        # record (it reads as zeros), and a read request's start clears the read's offset: neither
        # needs the write port.
        m.submodules.sequence = sequence = ViRecords(
            SequenceRecord,
            vis,
            peeks_next=1,
            peeks_ahead=1,
            clears={"connect": None, "read_start": ("read_offset",)},
            read_ahead=True,
            write_late=True,  # the frame decisions end at registers, not at the block RAMs
        )
        seq, seq_tx = sequence.owner.record, sequence.peek_ahead[0].record
        m.d.comb += [
            sequence.owner.vi.eq(vi),
            sequence.owner.next_vi.eq(vi_next),
            sequence.peek_ahead[0].vi.eq(self.from_tx.vi),
            sequence.peek_ahead[0].next_vi.eq(self.from_tx.next_vi),
            sequence.peek_next[0].vi.eq(self.status.vi),
            self.status.psn.eq(sequence.peek_next[0].record.rcv_nxt),
            sequence.clear.connect.eq(connects),
            sequence.clear.read_start.eq(Mux(self.from_tx.read_start, C(1, vis) << self.from_tx.vi, 0)),
            self.to_tx.vi.eq(vi),  # where TX reads its read record for us
            self.to_tx.next_vi.eq(vi_next),
            # Every event of this engine is its VI's, named whether or not there is one: a VI
            # driven only with its event would put the event's decision in front of every choice
            # made at that VI downstream.
            self.to_tx.ack_advanced_vi.eq(vi),
            self.to_tx.read_progress_vi.eq(vi),
            self.fail_vi.eq(vi),
            self.completions.payload.vi.eq(vi),
        ]
        m.d.comb += [getattr(self.to_tx, name).eq(getattr(seq_tx, name)) for name in SequenceRecord.members]

        def update(**fields):
            """Write this engine's VI's record with `fields` changed (several calls in a cycle add up)."""
            m.d.comb += sequence.update(**fields)

        # Clears from the transmit engine first: this engine's own updates below override them.
        tx_vi = self.from_tx.vi
        with m.If(self.from_tx.ack_sent & (seq_tx.rcv_nxt == self.from_tx.ack_sent_psn)):
            m.d.sync += ack_pending.bit_select(tx_vi, 1).eq(0)
        with m.If(self.from_tx.nak_sent):
            m.d.sync += nak_pending.bit_select(tx_vi, 1).eq(0)
        with m.If(self.from_tx.rx_nak_taken):
            m.d.sync += rx_nak.bit_select(tx_vi, 1).eq(0)
        with m.If(self.from_tx.read_start):
            m.d.sync += read_complete.bit_select(tx_vi, 1).eq(0)
        for v in range(vis):
            with m.If(self.vi.connect[v]):
                m.d.sync += [flags[v].eq(0) for flags in (ack_pending, nak_pending, rx_nak, gap_nakked, read_complete)]

        my_mac = C(via_frame.MAC_PREFIX_FIELD, 48) | (self.node_id << 40)
        src_node = h.src_mac[40:48]
        frame_vi = h.dst_vi
        in_vis = frame_vi < vis
        m.d.comb += [
            self.config.index.eq(vi),
            self.config.next_index.eq(vi_next),
            self.frame_config.index.eq(frame_vi[: len(vi)]),
        ]
        vi_ok = Signal()
        m.d.comb += vi_ok.eq(
            in_vis
            & (Array(self.vi.state)[frame_vi[: len(vi)]] == _CONNECTED)
            & (h.src_mac[:40] == via_frame.MAC_PREFIX_FIELD)
            & (src_node == peer_node(self.frame_config.record))
            & (h.src_vi == peer_vi(self.frame_config.record))
        )
        body = Signal(17)
        m.d.comb += body.eq(length - via_frame.HEADER.size)
        data_op = (h.op == _OP.SEND) | (h.op == _OP.RDMA_WRITE) | (h.op == _OP.READ_RESPONSE)
        fits_message = (h.offset + h.payload_length) <= h.msg_length
        known_op = (h.op >= _OP.ACK) & (h.op <= _OP.MGMT)
        psn_diff = Signal(32)
        m.d.comb += psn_diff.eq(h.psn - seq.rcv_nxt)
        # Whether the frame was in order, as ACK found it: a read request's job, steps later,
        # advances the record from this register (not from the comparison, late in its cycle).
        # A connect of the VI meanwhile starts it afresh: then it was not.
        in_order = Signal()
        with m.If(connects.bit_select(vi, 1)):
            m.d.sync += in_order.eq(0)
        rq_empty = rq_head == rq_tail
        # Whether this frame's gap is the first since the VI's last frame in order (a NAK is
        # owed), taken in ACK, the step before GAP: GAP's decision then starts at a flip-flop, not
        # at a 64-way selection by the VI (the routed card's longest path at 629ee8e). Between the
        # two steps only a connect changes the VI's flag.
        gap_first = Signal()
        read_waiting = Signal()  # this engine's VI has an RDMA read out whose response is not all in
        m.d.comb += read_waiting.eq(self.from_tx.read_active.bit_select(vi, 1) & ~read_complete.bit_select(vi, 1))
        m.d.comb += rq_r.addr.eq(vi * qd + rq_head[: len(rq_head) - 1])
        is_last = (h.offset + h.payload_length) == h.msg_length
        ptag = self.config.record.ptag

        # Flush work: receive descriptors of VIs in the error state complete as FLUSHED. The VI
        # to flush is chosen a cycle ahead, from registers: the engine's next VI then settles
        # early in its cycle (its records' clear flags are chosen from it), and FLUSH checks the
        # VI again, as the choice may be a cycle stale.
        flush_found, flush_index = first_set(m, "flush", [(self.vi.state[v] == _ERROR) & posted[v] for v in range(vis)])
        flush_any = Signal()
        flush_vi = Signal(range(vis))
        m.d.sync += [flush_any.eq(flush_found), flush_vi.eq(flush_index)]

        # Scatter/gather inputs: the fetcher loads descriptor segments; remote targets are one segment.
        single = Signal()
        remote_need = Signal(2)
        # The remote target the walker holds, validated with no ATT write since (`remote_kept`): the
        # next RDMA write or read request of the same VI to the same window with the same right
        # takes it without loading and validating it again (a ping-pong's every message). A local
        # descriptor's fetch or a failed walk drops it too.
        target_layout = data.StructLayout({"vi": range(vis), "need": 2, "va": 64, "handle": 32, "length": 32})
        target = Signal(target_layout)  # this frame's
        m.submodules.remote_kept = remote_kept = KeptCopy(target_layout)
        m.d.comb += [
            remote_kept.forget.eq(self.forget),
            remote_kept.connect.eq(connects.any()),
            remote_kept.key.eq(target),
            remote_kept.probe.eq(target),
            target.vi.eq(vi),
            target.need.eq(Mux(op == _OP.RDMA_WRITE, via_att.NEED_RDMA_WRITE, via_att.NEED_RDMA_READ)),
            target.va.eq(h.remote_va),
            target.handle.eq(h.remote_handle),
            target.length.eq(h.msg_length),
        ]
        m.d.comb += [
            sg.seg_index.eq(Mux(single, 0, fetcher.seg_index)),
            sg.seg_data.va.eq(Mux(single, h.remote_va, fetcher.seg_data.va)),
            sg.seg_data.handle.eq(Mux(single, h.remote_handle, fetcher.seg_data.handle)),
            sg.seg_data.length.eq(Mux(single, h.msg_length, fetcher.seg_data.length)),
            sg.seg_write.eq(fetcher.seg_write),
            sg.count.eq(Mux(single, 1, fetcher.seg_count)),
            sg.ptag.eq(ptag),
            sg.need.eq(Mux(single, remote_need, via_att.NEED_LOCAL)),
        ]

        # --- a local descriptor loaded ahead of its frame -----------------------------------------
        # The fetcher and the walker keep the last local descriptor they fetched and validated
        # (`loaded`: its VI, its address and its segments' total). A frame for that descriptor
        # skips the fetch and the validation: every frame of a message after its first, and the
        # first too when the engine loaded it while idle. What it loads then is what the next
        # frame will most likely want: the descriptor of the RDMA read just started, or the head
        # of the receive queue just rung. A posted descriptor is the card's until it completes, so
        # the copy stays good until then; anything else that uses the fetcher or the segment table,
        # a completion or a connect forgets it.
        loaded = Signal()
        loaded_vi = Signal(range(vis))
        loaded_desc = Signal(32)
        loaded_total = Signal(32)
        preload_pending = Signal()
        preload_vi = Signal(range(vis))
        preload_read = Signal()  # the read's descriptor, not the receive queue's head
        preloading = Signal()  # the fetch and validation under way are a preload: no frame waits on them
        expected_op = Mux(op == _OP.SEND, via_descriptor.CONTROL_OP.SENDRECV, via_descriptor.CONTROL_OP.RDMA_READ)

        def leave_for(state):
            """A bad descriptor: `state` reports it, but a preload reports nothing (the frame that
            wants the descriptor will)."""
            with m.If(preloading):
                m.next = "IDLE"
            with m.Else():
                m.next = state

        def take_descriptor(total):
            """A good descriptor of `total` bytes: on to the payload, if the message fits in it."""
            with m.If(total < h.msg_length):
                m.d.sync += error_bits.eq(status_bits(LENGTH_ERROR=1))
                m.next = "DESC_ERROR"
            with m.Else():
                m.next = "PAYLOAD"

        def is_loaded(address):
            """Whether the fetcher and the walker hold this engine's VI's descriptor at `address`."""
            return loaded & (loaded_vi == vi) & (loaded_desc == address)

        def fetch_or_loaded(address):
            """Go on with the local descriptor at `address`: DESCRIPTOR fetches it, unless it is
            loaded (the address comes from block RAM late in the cycle, so it is compared with
            the loaded one's in the next)."""
            m.d.sync += desc.eq(address)
            m.next = "DESCRIPTOR"

        # The payload writer takes the frame's words after its header into the walker's chunks; it
        # drives the walker while it has a payload (the VALIDATEs are the engine's, before it).
        m.d.comb += [
            payload.job.payload.offset.eq(h.offset),
            payload.job.payload.length.eq(h.payload_length),
            payload.words.valid.eq(self.frames.valid),
            payload.words.payload.eq(self.frames.payload),
            self.payload_written.eq(payload.written),
        ]
        lend(m, sg, payload.walk, payload.walk_result, payload.job.valid)

        def nak(code):
            """Owe the peer a NAK with `code` for this frame."""
            m.d.sync += nak_pending.bit_select(vi, 1).eq(1)
            update(nak_code=code, nak_psn=h.psn)

        def complete(status, length_, imm=None):
            """Drive a completion of `desc` (hold until taken)."""
            c = self.completions.payload
            return [
                self.completions.valid.eq(1),
                c.desc.eq(desc),
                c.status.eq(status),
                c.length.eq(length_),
                c.imm.eq(0 if imm is None else imm),
                c.write_imm.eq(0 if imm is None else 1),
                c.recv.eq(1),
            ]

        def verdict():
            """The header is in: on to its checks once the frame is whole and good."""
            with m.If(self.frame_valid):
                m.d.sync += length.eq(self.frame_length)
                with m.If(self.frame_length < via_frame.HEADER.size):
                    m.d.comb += ev.rx_malformed.eq(1)
                    m.next = "DROP"
                with m.Else():
                    m.next = "CHECK"
            with m.Else():
                m.next = "VERDICT"

        recv_status = status_bits(DONE=1) | status_op(via_descriptor.STATUS_OP.RECEIVE)

        # The piggybacked acknowledgement ACK takes is written a cycle later, from registers: its
        # comparisons do not run on into the record's write, and the transmit engine hears that it
        # moved (`to_tx.ack_advanced`, in the cycle of the write) from a register too.
        ack_write = Signal()
        ack_value = Signal(32)
        ack_moved = Signal()
        m.d.sync += [ack_write.eq(0), ack_moved.eq(0)]
        m.d.comb += self.to_tx.ack_advanced.eq(ack_moved)
        with m.If(ack_write):
            update(peer_ack=ack_value)
        imm_bit = _STATUS.bit("IMMEDIATE").mask

        with m.FSM():
            with m.State("IDLE"):
                # To the VI of the flush or preload the engine may start next, whether or not a
                # frame comes first (nothing reads the VI before CHECK): the next VI, and with it
                # the records' clear flags read ahead, settles early in the cycle.
                with m.If(flush_any):
                    m.d.comb += vi_next.eq(flush_vi)
                with m.Elif(preload_pending):
                    m.d.comb += vi_next.eq(preload_vi)
                m.d.sync += [
                    words.eq(0),
                    frame_done.eq(0),
                    length.eq(self.frame_length),
                    error_bits.eq(0),
                    preloading.eq(0),
                ]
                with m.If(self.frame_valid & ~self.enable):
                    m.next = "DROP"
                with m.Elif(self.frame_valid):
                    with m.If(self.frame_length < via_frame.HEADER.size):
                        m.d.comb += ev.rx_malformed.eq(1)
                        m.next = "DROP"
                    with m.Else():
                        m.next = "HEADER"
                with m.Elif(self.frame_early & self.enable):
                    m.next = "HEADER"  # read as it comes in; nothing is done before its verdict
                with m.Elif(flush_any):
                    m.next = "FLUSH"
                with m.Elif(preload_pending & self.enable):
                    m.d.sync += preload_pending.eq(0)
                    m.next = "PRELOAD_READ"

            with m.State("HEADER"):
                m.d.comb += self.frames.ready.eq(1)
                with m.If(self.frame_dropped):
                    m.next = "IDLE"
                with m.Elif(self.frames.valid):
                    m.d.sync += [
                        hdr_bits.eq(Cat(hdr_bits[32:], self.frames.payload.data)),
                        words.eq(words + 1),
                        frame_done.eq(self.frames.payload.last),
                    ]
                    with m.If((words == _HEADER_WORDS - 1) | self.frames.payload.last):
                        verdict()
            with m.State("VERDICT"):  # the header came in ahead of the frame's end
                with m.If(self.frame_dropped):
                    m.next = "IDLE"
                with m.Elif(self.frame_valid):
                    verdict()

            with m.State("CHECK"):
                m.d.comb += vi_next.eq(frame_vi[: len(vi)])
                m.d.sync += [
                    op.eq(h.op),
                    single.eq(0),
                    payload_words.eq((h.payload_length + 3) >> 2),
                    last.eq(is_last),
                ]
                with m.If((h.ethertype != via_frame.ETHERTYPE_FIELD) | (h.dst_mac != my_mac)):
                    m.d.comb += ev.rx_not_for_us.eq(1)
                    m.next = "DROP"
                with m.Elif(
                    ~known_op
                    | (h.payload_length > body)
                    | (h.payload_length > p.max_payload)
                    | (data_op & ~fits_message)
                    | ((h.op == _OP.MGMT) & (h.payload_length > via_frame.MGMT_PAYLOAD_MAX))
                ):
                    m.d.comb += ev.rx_malformed.eq(1)
                    m.next = "DROP"
                with m.Elif(h.op == _OP.MGMT):
                    # Only cards manage cards: the firmware sees SRC_NODE alone, so a frame from
                    # a MAC outside the cards' prefix would pass for one of them.
                    with m.If(h.src_mac[:40] != via_frame.MAC_PREFIX_FIELD):
                        m.d.comb += ev.rx_not_for_us.eq(1)
                        m.next = "DROP"
                    with m.Elif(self.mgmt_valid):
                        m.d.comb += ev.rx_mgmt_dropped.eq(1)
                        m.next = "DROP"
                    with m.Else():
                        m.d.sync += [
                            mgmt_words.eq(0),
                            self.mgmt_src.eq(src_node),
                            self.mgmt_length.eq(h.payload_length),
                        ]
                        m.next = "MGMT"
                with m.Elif(~vi_ok):
                    m.d.comb += ev.rx_no_vi.eq(1)
                    m.next = "DROP"
                with m.Else():
                    m.next = "ACK"

            with m.State("ACK"):
                # The piggybacked acknowledgement; an outstanding RDMA read holds it at the read's
                # sequence number until the response is complete (the read request is only
                # acknowledged by its data).
                # Both candidates are compared with the record at once and the choice comes after.
                read_psn = self.from_tx.read_psn
                m.d.sync += gap_first.eq(~gap_nakked.bit_select(vi, 1) | connects.bit_select(vi, 1))
                hold = read_waiting & ~(h.ack_psn - read_psn)[31]
                not_behind = Mux(hold, ~(read_psn - seq.peer_ack)[31], ~(h.ack_psn - seq.peer_ack)[31])
                moved = Mux(hold, read_psn != seq.peer_ack, h.ack_psn != seq.peer_ack)
                with m.If(not_behind):
                    m.d.sync += [ack_write.eq(1), ack_value.eq(Mux(hold, read_psn, h.ack_psn)), ack_moved.eq(moved)]
                with m.Switch(op):
                    with m.Case(_OP.ACK):
                        m.next = "DROP"
                    with m.Case(_OP.NAK):
                        m.d.sync += rx_nak.bit_select(vi, 1).eq(1)
                        update(rx_nak_code=h.nak_code, rx_nak_psn=h.psn)
                        m.next = "DROP"
                    with m.Case(_OP.READ_RESPONSE):
                        with m.If(
                            read_waiting
                            & (h.psn == self.from_tx.read_psn)
                            & (h.offset == seq.read_offset)
                            & (h.msg_length == self.from_tx.read_len)
                        ):
                            fetch_or_loaded(self.from_tx.read_desc)
                        with m.Else():
                            m.d.comb += ev.rx_stale_response.eq(1)
                            m.next = "DROP"
                    with m.Default():
                        m.d.sync += in_order.eq(psn_diff == 0)
                        with m.If(psn_diff == 0):
                            m.next = "IN_ORDER"
                        with m.Elif(psn_diff[31]):
                            m.d.comb += ev.rx_duplicate.eq(1)
                            m.d.sync += ack_pending.bit_select(vi, 1).eq(1)
                            with m.If(op == _OP.READ_REQUEST):
                                m.next = "REMOTE"  # served again: the response was lost
                            with m.Else():
                                m.next = "DROP"
                        with m.Else():
                            m.next = "GAP"

            with m.State("GAP"):
                # Out of order: one NAK per gap. A step of its own, so the PSN's comparison with
                # the record does not run on into the record's write.
                m.d.comb += ev.rx_out_of_order.eq(1)
                with m.If(gap_first):
                    m.d.sync += [gap_nakked.bit_select(vi, 1).eq(1), nak_pending.bit_select(vi, 1).eq(1)]
                    update(nak_code=_NAK.SEQUENCE, nak_psn=seq.rcv_nxt)
                m.next = "DROP"

            with m.State("IN_ORDER"):
                with m.If(op == _OP.SEND):
                    with m.If(rq_empty):
                        m.d.comb += ev.rx_rq_empty.eq(1)
                        nak(_NAK.RECEIVE_QUEUE_EMPTY)
                        m.next = "DROP"
                    with m.Else():
                        fetch_or_loaded(rq_r.data)
                with m.Else():
                    m.next = "REMOTE"

            # --- RDMA write / read request: the remote side of the message, one segment -------
            def remote_valid():
                """The remote target is validated: on to the read job, or to the payload."""
                with m.If(op == _OP.READ_REQUEST):
                    m.next = "READ_JOB"
                with m.Elif(h.flags.immediate & (h.offset == 0) & rq_empty):
                    m.d.comb += ev.rx_rq_empty.eq(1)
                    nak(_NAK.RECEIVE_QUEUE_EMPTY)
                    m.next = "DROP"
                with m.Else():
                    m.d.sync += desc.eq(rq_r.data)
                    m.next = "PAYLOAD"

            with m.State("REMOTE"):
                m.d.sync += [single.eq(1), remote_need.eq(target.need)]
                with m.If(remote_kept.hit):
                    remote_valid()
                with m.Else():
                    m.next = "REMOTE_LOAD"
            with m.State("REMOTE_LOAD"):
                m.d.comb += sg.seg_write.eq(1)
                m.d.sync += loaded.eq(0)
                m.d.comb += remote_kept.drop.eq(1)
                m.next = "REMOTE_VALIDATE"
            with m.State("REMOTE_VALIDATE"):
                m.d.comb += [sg.cmd.valid.eq(1), sg.cmd.payload.op.eq(OP_VALIDATE)]
                with m.If(sg.cmd.ready):
                    m.d.comb += remote_kept.start.eq(1)
                    m.next = "REMOTE_CHECKED"
            with m.State("REMOTE_CHECKED"):
                m.d.comb += sg.result.ready.eq(1)
                with m.If(sg.result.valid):
                    with m.If(sg.result.payload.fail != via_att.FAIL_NONE):
                        m.d.comb += ev.rx_protection.eq(1)
                        nak(_NAK.REMOTE_PROTECTION)
                        m.next = "DROP"
                    with m.Else():
                        m.d.comb += remote_kept.keep.eq(1)
                        remote_valid()
            with m.State("READ_JOB"):
                j = self.jobs.payload
                m.d.comb += [
                    self.jobs.valid.eq(1),
                    j.vi.eq(vi),
                    j.psn.eq(h.psn),
                    j.va.eq(h.remote_va),
                    j.handle.eq(h.remote_handle),
                    j.length.eq(h.msg_length),
                    j.offset.eq(h.offset),
                ]
                with m.If(self.jobs.ready):
                    with m.If(in_order):
                        m.d.sync += gap_nakked.bit_select(vi, 1).eq(0)
                        update(rcv_nxt=seq.rcv_nxt + 1)
                    m.next = "DROP"
                with m.Else():
                    # The responses still queued will answer it; a retry comes if they do not.
                    m.d.comb += ev.read_requests_dropped.eq(1)
                    m.next = "DROP"

            # --- a local descriptor: receive queue head (send) or the RDMA read's own ----------
            with m.State("PRELOAD_READ"):  # the queue's head is read at the VI just chosen
                m.next = "PRELOAD_ADDRESS"
            with m.State("PRELOAD_ADDRESS"):  # and taken from block RAM: compared in PRELOAD
                m.d.sync += desc.eq(Mux(preload_read, self.from_tx.read_desc, rq_r.data))
                m.next = "PRELOAD"
            with m.State("PRELOAD"):
                wanted = Mux(preload_read, read_waiting, ~rq_empty)
                with m.If(wanted & (Array(self.vi.state)[vi] == _CONNECTED) & ~is_loaded(desc)):
                    m.d.sync += [
                        op.eq(Mux(preload_read, _OP.READ_RESPONSE, _OP.SEND)),
                        single.eq(0),  # the walker takes the fetched segments, not a header's
                        preloading.eq(1),
                    ]
                    m.next = "FETCH"
                with m.Else():
                    m.next = "IDLE"
            with m.State("DESCRIPTOR"):
                with m.If(~is_loaded(desc)):
                    m.next = "FETCH"
                with m.Elif(fetcher.control.control.op != expected_op):
                    m.d.sync += error_bits.eq(status_bits(FORMAT_ERROR=1))
                    m.next = "DESC_ERROR"
                with m.Else():
                    take_descriptor(loaded_total)
            with m.State("FETCH"):
                m.d.comb += [
                    fetcher.cmd.valid.eq(1),
                    fetcher.cmd.payload.addr.eq(desc),
                    fetcher.cmd.payload.area_end.eq(self.config.record.desc_base + self.config.record.desc_size),
                ]
                with m.If(fetcher.cmd.ready):
                    m.d.sync += loaded.eq(0)
                    m.d.comb += remote_kept.drop.eq(1)
                    m.next = "FETCHED"
            with m.State("FETCHED"):
                m.d.comb += fetcher.result.ready.eq(1)
                with m.If(fetcher.result.valid):
                    with m.If((fetcher.result.payload != FETCH_OK) | (fetcher.control.control.op != expected_op)):
                        m.d.sync += error_bits.eq(status_bits(FORMAT_ERROR=1))
                        leave_for("DESC_ERROR")
                    with m.Else():
                        m.next = "VALIDATE"
            with m.State("VALIDATE"):
                m.d.comb += [sg.cmd.valid.eq(1), sg.cmd.payload.op.eq(OP_VALIDATE)]
                with m.If(sg.cmd.ready):
                    m.next = "VALIDATED"
            with m.State("VALIDATED"):
                m.d.comb += sg.result.ready.eq(1)
                with m.If(sg.result.valid):
                    with m.If(sg.result.payload.fail != via_att.FAIL_NONE):
                        m.d.sync += error_bits.eq(status_bits(PROTECTION_ERROR=1))
                        leave_for("DESC_ERROR")
                    with m.Else():
                        m.d.sync += [
                            loaded.eq(1),
                            loaded_vi.eq(vi),
                            loaded_desc.eq(desc),
                            loaded_total.eq(sg.result.payload.total),
                        ]
                        with m.If(preloading):
                            m.next = "IDLE"
                        with m.Else():
                            take_descriptor(sg.result.payload.total)
            with m.State("DESC_ERROR"):
                # The VI fails first, from registers; a receive descriptor then completes in
                # error (the failure waiting on the completion's `ready` was a path across both).
                m.d.sync += loaded.eq(0)
                m.d.comb += [self.fail.eq(1), self.fail_bits.eq(error_bits)]
                with m.If(op == _OP.READ_RESPONSE):
                    # The read's own descriptor went bad after it was checked.
                    m.next = "DROP"
                with m.Else():
                    m.next = "DESC_ERROR_COMPLETE"
            with m.State("DESC_ERROR_COMPLETE"):
                m.d.comb += complete(recv_status | error_bits, 0)
                with m.If(self.completions.ready):
                    m.d.comb += [ev.rx_descriptor_error.eq(1), consumed.eq(1)]
                    nak(_NAK.REMOTE_DESCRIPTOR)
                    m.next = "DROP"

            # --- the payload, through the walker into host memory ---------------------------------
            with m.State("PAYLOAD"):
                m.d.comb += [payload.job.valid.eq(1), self.frames.ready.eq(payload.words.ready)]
                with m.If(self.frames.valid & self.frames.ready & self.frames.payload.last):
                    m.d.sync += frame_done.eq(1)
                with m.If(payload.job.ready):
                    with m.If(payload.error):
                        # The ATT changed under a checked message: give the frame up.
                        m.d.sync += loaded.eq(0)
                        m.d.comb += [remote_kept.drop.eq(1), ev.rx_protection.eq(1)]
                        m.next = "DROP"
                    with m.Else():
                        m.next = "AFTER"

            with m.State("AFTER"):
                with m.Switch(op):
                    with m.Case(_OP.SEND):
                        with m.If(last):
                            status = recv_status | Mux(h.flags.immediate, imm_bit, 0)
                            m.d.comb += complete(status, h.msg_length, h.immediate_data)
                            m.d.comb += self.completions.payload.write_imm.eq(h.flags.immediate)
                            with m.If(self.completions.ready):
                                m.d.comb += consumed.eq(1)
                                m.next = "ADVANCE"
                        with m.Else():
                            m.next = "ADVANCE"
                    with m.Case(_OP.RDMA_WRITE):
                        with m.If(last & h.flags.immediate):
                            status = status_bits(DONE=1, IMMEDIATE=1) | status_op(
                                via_descriptor.STATUS_OP.REMOTE_RDMA_WRITE
                            )
                            m.d.comb += complete(status, 0, h.immediate_data)
                            with m.If(self.completions.ready):
                                m.d.comb += consumed.eq(1)
                                m.next = "ADVANCE"
                        with m.Else():
                            m.next = "ADVANCE"
                    with m.Default():  # READ_RESPONSE
                        done = (h.offset + h.payload_length) == h.msg_length
                        update(read_offset=h.offset + h.payload_length)
                        m.d.comb += self.to_tx.read_progress.eq(1)
                        with m.If(done):
                            m.d.sync += [read_complete.bit_select(vi, 1).eq(1), loaded.eq(0)]
                            update(peer_ack=h.psn + 1)
                            m.d.sync += ack_moved.eq(1)  # heard a cycle later, like ACK's
                        m.next = "DROP"
            with m.State("ADVANCE"):
                m.d.sync += [gap_nakked.bit_select(vi, 1).eq(0), ack_pending.bit_select(vi, 1).eq(1)]
                update(rcv_nxt=seq.rcv_nxt + 1)
                m.next = "DROP"

            with m.State("MGMT"):
                m.d.comb += self.frames.ready.eq(mgmt_words != payload_words)  # not the next frame's
                with m.If(mgmt_words == payload_words):
                    m.d.sync += self.mgmt_valid.eq(1)
                    m.next = "DROP"
                with m.Elif(self.frames.valid):
                    m.d.comb += [
                        mgmt_write.en.eq(1),
                        mgmt_write.addr.eq(mgmt_words),
                        mgmt_write.data.eq(self.frames.payload.data),
                    ]
                    m.d.sync += [
                        mgmt_words.eq(mgmt_words + 1),
                        frame_done.eq(self.frames.payload.last),
                    ]

            with m.State("DROP"):
                with m.If(~frame_done):
                    m.d.comb += self.frame_skip.eq(1)
                m.next = "IDLE"

            with m.State("FLUSH"):  # the queue's head is read at the VI just chosen
                with m.If((Array(self.vi.state)[vi] == _ERROR) & ~rq_empty):
                    m.next = "FLUSH_READ"
                with m.Else():
                    m.next = "IDLE"
            with m.State("FLUSH_READ"):
                m.d.sync += desc.eq(rq_r.data)
                m.next = "FLUSH_COMPLETE"
            with m.State("FLUSH_COMPLETE"):
                m.d.comb += complete(recv_status | status_bits(FLUSHED=1), 0)
                with m.If(self.completions.ready):
                    m.d.comb += consumed.eq(1)
                    m.next = "IDLE"

        # After the engine's own steps: a request to preload is not lost to IDLE taking the last
        # one, and a completion or a connect forgets the loaded descriptor whatever the step.
        with m.If(self.from_tx.read_start):
            m.d.sync += [preload_pending.eq(1), preload_vi.eq(tx_vi), preload_read.eq(1)]
        with m.Elif(pointers.taken):
            m.d.sync += [preload_pending.eq(1), preload_vi.eq(self.rq_doorbell.payload.vi), preload_read.eq(0)]
        with m.If(consumed | connects.any()):
            m.d.sync += loaded.eq(0)
        with m.If(self.mgmt_pop):
            m.d.sync += self.mgmt_valid.eq(0)
        return m
