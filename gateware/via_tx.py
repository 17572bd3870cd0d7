"""VIA transmit engine: every frame the card sends, and the reliability of its VIs' send queues.

A scheduler visits the VIs that have work (round robin; idle VIs cost nothing) and, between
them, the firmware's management frames and the RDMA read responses the receive engine queued.
A visit to a VI:

1. takes a NAK the peer sent (sequence: go back; an error code: the VI fails),
2. takes the peer's cumulative acknowledgement (restarting the retransmission timer),
3. completes acknowledged descriptors in queue order (or flushes them if the VI failed),
4. checks the retransmission timer (``via_retransmit``; go back N to the oldest unacknowledged
   frame; after RETRY_LIMIT expiries without progress the VI fails with a transport error),
5. sends at most one frame: an ACK/NAK the VI owes, or the next frame of its send queue while
   fewer than ``window`` frames are unacknowledged.

A visit with nothing to do in steps 1-4 goes from its first step straight to step 5.

A data frame is built from the descriptor (frames of a message carry their offset, so going back
needs no saved state). The descriptor is fetched for a message's first frame and kept while the
message's frames follow; anything else that uses the fetcher or the segment table (another message,
a read response), the last frame, a flush or a new connection makes the next frame fetch it again,
but for a repost (``SQ_REPOST``: the descriptor unchanged since the VI posted it), which is sent
from the copy if the last frame is all that came between, with no ATT write or FORGET_COPIES since
its validation.
Every frame validates the descriptor's segments through the ATT (a failure completes the descriptor
in error, nothing is sent); then the framer (``via_tx_framer``) puts the header into the transmit
FIFO and the payload, walked and read by DMA from the header's first word on, behind it.
An RDMA read sends one READ_REQUEST and holds the queue until the response has arrived.
"""

from amaranth import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base import regmap, via_att, via_descriptor, via_frame
from numavia.base.params import BUS_ADDR_WIDTH
from numavia.base.via_descriptor import status_bits, status_op

from . import wishbone_burst
from .packet_fifo import Announced, FifoWord
from .round_robin import RoundRobin
from .vi_records import ViRecords
from .via_completion import CompletionRequest
from .via_descriptor_fetch import FETCH_OK, DescriptorFetcher
from .via_kept_copy import KeptCopy
from .via_layouts import FrameHeader
from .via_links import (
    doorbell_signature,
    mgmt_tx_payload_signature,
    peer_node,
    peer_vi,
    queue_status_signature,
    rx_to_tx_signature,
    tx_to_rx_signature,
    vi_config_signature,
    vi_lookup_signature,
)
from .via_queue_pointers import QueuePointers
from .via_retransmit import RetransmitTimers
from .via_rx import ReadJob
from .via_scatter_gather import OP_VALIDATE, ScatterGather, lend
from .via_translate import lookup_signature
from .via_tx_framer import PayloadSource, TxFramer

#: Pulses of the transmit engine, counted by the engine top (names of regmap.VIA_COUNTERS).
TX_EVENTS = ("TX_TIMEOUTS", "TX_NAK_SEQUENCE", "TX_ERRORS", "DOORBELLS_REFUSED", "DMA_ERRORS")

_OP = via_frame.OP
_NAK = via_frame.NAK
_CTL = via_descriptor.CONTROL_OP
_SOP = via_descriptor.STATUS_OP
_CONNECTED = dict(regmap.VI_STATES)["CONNECTED"]
_ERROR = dict(regmap.VI_STATES)["ERROR"]
_MGMT = regmap.VIA.register("MGMT_TX_CTRL")

SlotInfo = data.StructLayout({"end_psn": 32, "length": 32, "op": 3, "error": 16})

#: A send-queue slot: the descriptor's address, and whether it was posted again unchanged (SQ_REPOST).
SqEntry = data.StructLayout({"addr": 32, "again": 1})

#: A VI's outstanding RDMA read: the request's PSN, its descriptor and the length asked for.
ReadRecord = data.StructLayout({"psn": 32, "desc": 32, "length": 32})


def visit_context(queue_depth):
    """A VI's state that only its visits read and write, kept in memory (see ``visit context``)."""
    slot = range(2 * queue_depth)  # send-queue positions count twice round, so full != empty
    return data.StructLayout(
        {
            # Going back N moves `cur` (and snd_nxt) back; `cur_max` (and snd_max) keep how far the
            # VI has ever sent: slots head..cur_max-1 have been sent whole and know their last PSN.
            "cur": slot,  # the slot whose frames are being sent
            "cur_max": slot,
            "una": 32,  # the oldest PSN not acknowledged
            "snd_max": 32,
            "head_end": 32,  # the PSN after the oldest uncompleted message's last frame, once sent
            "head_psn": 32,  # ... and of its first frame
            "cur_offset": 32,  # byte offset in the message being sent of its next frame
            "err_pending": 16,  # status bits the VI failed with, for its flush
            "rewind": 1,  # go back to the oldest unacknowledged frame at the visit's rewind step
        }
    )


class TxEngine(wiring.Component):
    def __init__(self, params):
        self.p = p = params
        vis = p.vis
        super().__init__(
            {
                "frames": Out(stream.Signature(FifoWord)),
                "announce": Out(stream.Signature(Announced)),  # a frame cut through (see via_tx_framer)
                "fetch_bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "read_bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "att": Out(lookup_signature()),
                "enable": In(1),
                "forget": In(1),  # the ATT or FORGET_COPIES was written: the kept copy is not good any more
                "node_id": In(regmap.NODE_ID_BITS),
                "mtu": In(16),
                "rto": In(32),
                "backlog": In(32),  # cycles the frames in the transmit buffer take to reach the wire
                "retry_limit": In(16),
                "vi": In(vi_config_signature(vis)),
                "config": Out(vi_lookup_signature(vis, ahead=True)),  # the visited VI's
                "fail": Out(1),
                "fail_vi": Out(range(vis)),
                "fail_bits": Out(16),
                "sq_doorbell": In(doorbell_signature(vis)),
                "status": In(queue_status_signature(vis)),  # psn: the VI's next sequence number
                "from_rx": In(rx_to_tx_signature(vis)),
                "to_rx": Out(tx_to_rx_signature(vis)),
                "jobs": In(stream.Signature(ReadJob)),  # RDMA reads to answer, from the receive engine
                "completions": Out(stream.Signature(CompletionRequest)),
                # Management frames from the firmware.
                "mgmt_request": In(1),
                "mgmt_ctrl": In(32),
                "mgmt_data": Out(mgmt_tx_payload_signature()),
                "mgmt_busy": Out(1),
                "events": Out(data.StructLayout({name.lower(): 1 for name in TX_EVENTS})),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.p
        vis, qd = p.vis, p.queue_depth
        ev = self.events

        m.submodules.fetcher = fetcher = DescriptorFetcher(max_segments=p.max_segments)
        m.submodules.sg = sg = ScatterGather(max_segments=p.max_segments)
        m.submodules.framer = framer = TxFramer()
        m.submodules.jobs = jobs = SyncFIFOBuffered(width=ReadJob.size, depth=p.read_jobs)
        wiring.connect(m, fetcher.bus, wiring.flipped(self.fetch_bus))
        wiring.connect(m, framer.read_bus, wiring.flipped(self.read_bus))
        wiring.connect(m, framer.frames, wiring.flipped(self.frames))
        wiring.connect(m, framer.announce, wiring.flipped(self.announce))
        wiring.connect(m, framer.mgmt_data, wiring.flipped(self.mgmt_data))
        wiring.connect(m, sg.chunks, framer.chunks)
        wiring.connect(m, sg.att, wiring.flipped(self.att))
        m.d.comb += [
            jobs.w_data.eq(self.jobs.payload.as_value()),
            jobs.w_en.eq(self.jobs.valid),
            self.jobs.ready.eq(jobs.w_rdy),
        ]

        connects = Signal(vis)  # the VIs the manager connects in this cycle, a bit each
        m.d.comb += connects.eq(Cat(*self.vi.connect))
        m.submodules.timers = timers = RetransmitTimers(vis)
        m.d.comb += [
            timers.rto.eq(self.rto),
            timers.backlog.eq(self.backlog),
            timers.retry_limit.eq(self.retry_limit),
            # A long read response keeps the read's timer from expiring while it streams in.
            timers.keepalive.eq(self.from_rx.read_progress),
            timers.keepalive_vi.eq(self.from_rx.read_progress_vi),
            timers.clear.eq(connects),
        ]

        # --- send queues: doorbells append descriptor addresses ------------------------------
        sq_mem = Memory(shape=SqEntry, depth=vis * qd, init=[])
        info_mem = Memory(shape=SlotInfo, depth=vis * qd, init=[])
        m.submodules.sq_mem = sq_mem
        m.submodules.info_mem = info_mem
        # Block RAM: the read ports answer a cycle after their address, so they are addressed
        # with the send position and head the visit will have in the next cycle (below).
        sq_w = sq_mem.write_port()
        sq_r = sq_mem.read_port(transparent_for=(sq_w,))  # the slot being sent
        sq_head_r = sq_mem.read_port(transparent_for=(sq_w,))  # the slot being completed
        info_w = info_mem.write_port()
        info_r = info_mem.read_port(transparent_for=(info_w,))

        # The queues' heads and tails: the visit moves the head, the doorbells the tail.
        ptr = range(2 * qd)
        vi = Signal(range(vis))  # the VI being visited
        vi_next = Signal(range(vis))  # where it will be in the next cycle: the records read ahead
        m.d.comb += vi_next.eq(vi)
        m.d.sync += vi.eq(vi_next)
        status = self.status
        m.submodules.pointers = pointers = QueuePointers(vis, qd)
        wiring.connect(m, wiring.flipped(self.sq_doorbell), pointers.doorbell)
        head, tail = pointers.head, pointers.tail  # the visited VI's
        rung = Signal(vis)  # a doorbell was taken
        m.d.comb += [
            pointers.vi.eq(vi),
            pointers.next_vi.eq(vi_next),
            pointers.status_vi.eq(status.vi),
            status.queued.eq(pointers.queued),
            sq_w.en.eq(pointers.taken),
            sq_w.addr.eq(pointers.slot),
            sq_w.data.addr.eq(self.sq_doorbell.payload.addr),
            sq_w.data.again.eq(self.sq_doorbell.payload.again),
            rung.eq(Mux(pointers.taken, C(1, vis) << self.sq_doorbell.payload.vi, 0)),
            ev.doorbells_refused.eq(pointers.refused),
        ]

        read_active = self.to_rx.read_active

        # Each VI's next sequence number: a record per VI (a connect restarts it at 0), read where
        # the visit is and where the bus reads TX_PSN.
        m.submodules.sequence = sequence = ViRecords(
            data.StructLayout({"snd_nxt": 32}), vis, peeks_next=1, clears={"connect": None}, read_ahead=True
        )
        snd_nxt = sequence.owner.record.snd_nxt
        m.d.comb += [
            sequence.owner.vi.eq(vi),
            sequence.owner.next_vi.eq(vi_next),
            sequence.peek_next[0].vi.eq(status.vi),
            status.psn.eq(sequence.peek_next[0].record.snd_nxt),
            sequence.clear.connect.eq(connects),
        ]

        # --- visit context: per-VI state only a visit uses, in memory ------------------------
        # Read where the visit is; a step changes some of its fields (`update`) and the record is
        # written back whole. A connect clears the VI's record (it reads as a new connection's:
        # zeros, its send position at the queue's head) instead of writing it. The memories take
        # the write a cycle later, from registers: a step's decisions (the rewind's multiply, the
        # acknowledgement's comparisons) end at flip-flops, not at block RAMs across the device.
        m.submodules.context = context = ViRecords(
            visit_context(qd), vis, clears={"connect": None}, read_ahead=True, write_late=True
        )
        ctx = context.owner.record
        m.d.comb += [
            context.owner.vi.eq(vi),
            context.owner.next_vi.eq(vi_next),
            context.owner.renewed.cur.eq(head),
            context.owner.renewed.cur_max.eq(head),
            context.clear.connect.eq(connects),
        ]

        def update(**fields):
            """Write the visited VI's context with `fields` changed (several calls in a cycle add up)."""
            m.d.comb += context.update(**fields)

        # The VI's outstanding RDMA read (its PSN, descriptor, length) is a record per VI in
        # memory too: written by the visit that sends the read request, read where the visit is
        # (the queue waits behind the read) and where RX is (the response it matches).
        m.submodules.reads = reads = ViRecords(ReadRecord, vis, peeks_ahead=1, read_ahead=True)
        read_here, read_at_rx = reads.owner.record, reads.peek_ahead[0].record
        m.d.comb += [
            reads.owner.vi.eq(vi),
            reads.owner.next_vi.eq(vi_next),
            reads.peek_ahead[0].vi.eq(self.from_rx.vi),
            reads.peek_ahead[0].next_vi.eq(self.from_rx.next_vi),
            self.to_rx.read_psn.eq(read_at_rx.psn),
            self.to_rx.read_desc.eq(read_at_rx.desc),
            self.to_rx.read_len.eq(read_at_rx.length),
        ]

        # --- which VIs have work --------------------------------------------------------------
        # Flags, not comparisons of every VI's state (which would cost logic per VI): a VI's queue
        # and sequence state changes only in its visits, and the end of a visit sets its `owed`
        # flag to whether work is left (completions, a flush, a frame the window allows); outside
        # its visits only a doorbell, a change of its state or a connect can give it work, and they
        # set the flag. The peer's acknowledgements (`acked`, from the receive side's event), its
        # NAKs, the acknowledgements owed to it and the timers are flags already.
        visiting = Signal()  # a VI's visit is under way or, in SCAN, has just ended
        visit_ended = Signal()
        owed, acked = Signal(vis), Signal(vis)
        state_seen = [Signal(2, name=f"state_seen{v}") for v in range(vis)]
        m.d.sync += [state_seen[v].eq(self.vi.state[v]) for v in range(vis)]
        state_changed = Cat(self.vi.state[v] != state_seen[v] for v in range(vis))

        state = Array(self.vi.state)[vi]
        window_open = Signal()
        m.d.comb += window_open.eq((snd_nxt - ctx.una)[:32] < p.window)
        fenced = read_active.bit_select(vi, 1) & (snd_nxt != read_here.psn)
        sendable = Signal()
        to_complete = Signal()  # the head message is acknowledged (or was never sent: failed)
        to_flush = Signal()  # the VI failed with descriptors still queued
        work_left = Signal()
        m.d.comb += [
            sendable.eq((state == _CONNECTED) & (ctx.cur != tail) & window_open & ~fenced),
            to_complete.eq((head != ctx.cur_max) & ~(ctx.una - ctx.head_end)[31]),
            to_flush.eq((state == _ERROR) & (head != tail)),
            work_left.eq(to_complete | to_flush | sendable),
        ]
        this_vi = C(1, vis) << vi
        owed_now = Signal(vis)  # `owed`, with the visit that has just ended counted
        m.d.comb += owed_now.eq(Mux(visit_ended, (owed & ~this_vi) | Mux(work_left, this_vi, 0), owed))
        m.d.sync += owed.eq(owed_now | rung | state_changed | connects)
        m.d.sync += acked.eq(acked & ~connects)  # before the bits set or cleared below

        connected = Cat(state_v == _CONNECTED for state_v in self.vi.state)
        # Whether the visited VI owes its peer an ACK or a NAK (and which), chosen a cycle ahead
        # at the VI of the next cycle: VISIT_CONTROL's decision then starts at flip-flops, not at
        # 64-way selections by the VI (the routed card's longest path at 629ee8e, seed 3). Only
        # this engine's frames clear the flags, steps before a visit's VISIT_CONTROL, and a
        # connect, masked here; a flag set in the cycle before is seen at the VI's next visit
        # (set, it brings the VI back), as if it had been set a cycle later.
        control_owed, nak_owed = Signal(), Signal()
        m.d.sync += [
            control_owed.eq(
                (connected & (self.from_rx.nak_pending | self.from_rx.ack_pending) & ~connects).bit_select(vi_next, 1)
            ),
            nak_owed.eq(self.from_rx.nak_pending.bit_select(vi_next, 1)),
        ]
        flags = Signal(vis)  # work other than `owed`: the peer's NAKs and acknowledgements, timers
        m.d.comb += flags.eq(
            self.from_rx.rx_nak
            | acked
            | (connected & (timers.due | self.from_rx.ack_pending | self.from_rx.nak_pending))
        )
        # The scheduler's choice is registered: the 64-wide choice (a carry chain across the
        # requests) and the VI's records' read-ahead addresses, far across the die, do not fit one
        # cycle together. It chooses from flags only (a doorbell counts a cycle after it is taken,
        # once it has set `owed`) and leaves the visited VI out while it is visited: whether its
        # visit left it work comes, at the visit's end, from its records and flags (`again`).
        work = Signal(vis)
        m.d.comb += work.eq(self.enable.replicate(vis) & ~Mux(visiting, this_vi, 0) & (owed | flags))

        m.submodules.scheduler = scheduler = RoundRobin(vis)
        last_vi = Signal(range(vis))
        found, choice = Signal(), Signal(range(vis))
        m.d.sync += [found.eq(scheduler.found), choice.eq(scheduler.choice)]
        # The round robin starts after the VI of the last visit, so that VI comes last: it is
        # chosen again, for the work its visit left, only when no other VI has any. Whether it has
        # any is registered in the cycle its visit ends and counts in the next: its records' and
        # flags' reads (64-way selections by the VI) and the scan's decision do not fit one cycle
        # together (the routed card's longest path at 7dce12a).
        again = Signal()
        m.d.sync += again.eq(self.enable & visit_ended & (work_left | flags.bit_select(vi, 1)))
        next_vi, any_work = Mux(found, choice, vi), (self.enable & found) | again
        m.d.comb += [scheduler.requests.eq(work), scheduler.last.eq(last_vi)]

        # --- the frame being built ------------------------------------------------------------
        hdr_bits = Signal(FrameHeader.size)
        hdr = FrameHeader(hdr_bits)
        payload_len = Signal(16)
        frame_error = Signal()  # the frame just sent was dropped (the framer's error)
        desc = Signal(32)
        total = Signal(32)
        last = Signal()
        slot = Signal(range(vis * qd))
        job = Signal(ReadJob)
        job_active = Signal()
        prefer_job = Signal()
        mgmt_pending = Signal()
        mgmt_ctrl = Signal(32)
        is_read = Signal()
        retransmit = Signal()
        last_retry = Signal()  # the expired timer's retry was its last allowed one
        # The send-queue slot (and descriptor address) whose descriptor the fetcher and the walker
        # hold, if `loaded`: its next frame needs no fetch.
        loaded = Signal()
        loaded_slot = Signal.like(slot)
        loaded_desc = Signal(32)
        # The copy outlives its message if `kept` holds it: validated for its VI with no ATT write
        # since, so a repost of that descriptor (SQ_REPOST: unchanged since the VI posted it) is
        # sent from it, with neither the fetch nor the validation. Its address is `loaded_desc`
        # (every fetch drops the kept copy first), so only the VI is kept beside it. Anything that
        # forgets `loaded` but a message's end drops it too.
        m.submodules.kept = kept = KeptCopy(range(vis))
        m.d.comb += [
            kept.forget.eq(self.forget),
            kept.connect.eq(connects.any()),
            kept.key.eq(vi),
            kept.probe.eq(vi),
        ]

        mtu = Signal(16)
        m.d.comb += mtu.eq(
            Mux(self.mtu < via_frame.MTU_MIN, via_frame.MTU_MIN, Mux(self.mtu > p.max_mtu, p.max_mtu, self.mtu))
        )
        per_frame = Signal(16)
        m.d.comb += per_frame.eq(mtu - via_frame.VIA_HEADER_SIZE)
        # The frames a rewind goes back, taken from the record in the cycle before the rewind (the
        # timer's or the expiry's, neither of which writes a PSN): the multiply then starts at a
        # register, not at the record's block RAM (the routed card's longest path at 1620654).
        frames_back = Signal(24)
        m.d.sync += frames_back.eq((ctx.una - ctx.head_psn)[:24])

        config = self.config.record  # the visited VI's configuration registers
        m.d.comb += [self.config.index.eq(vi), self.config.next_index.eq(vi_next)]
        my_mac = C(via_frame.MAC_PREFIX_FIELD, 48) | (self.node_id << 40)

        def base_header(op_, psn, *, node=peer_node(config), dst_vi=peer_vi(config)):
            """A frame of the visited VI (to its peer unless told)."""
            return [
                hdr_bits.eq(0),
                hdr.dst_mac.eq(C(via_frame.MAC_PREFIX_FIELD, 48) | (node << 40)),
                hdr.src_mac.eq(my_mac),
                hdr.ethertype.eq(via_frame.ETHERTYPE_FIELD),
                hdr.op.eq(op_),
                hdr.src_vi.eq(vi),
                hdr.dst_vi.eq(dst_vi),
                hdr.psn.eq(psn),
                hdr.ack_psn.eq(self.from_rx.rcv_nxt),
            ]

        # What both read and are told is about it. A failure or a completion is always the
        # visited VI's, named whether or not there is one: a VI driven only with its event would
        # put the event's decision in front of every choice made at that VI downstream.
        m.d.comb += [
            timers.vi.eq(vi),
            self.to_rx.vi.eq(vi),
            self.to_rx.next_vi.eq(vi_next),
            self.fail_vi.eq(vi),
            self.completions.payload.vi.eq(vi),
        ]

        def fail(bits):
            """The visited VI fails: the engine reports it, its queue is flushed with `bits`."""
            m.d.comb += [
                self.fail.eq(1),
                self.fail_bits.eq(bits),
                ev.tx_errors.eq(1),
                timers.stop.eq(1),
            ]
            update(err_pending=bits)

        # Frames go out through the framer: the header built here, the payload walked by the
        # scatter/gather walker, which the framer drives while it has a frame (VALIDATE is the
        # engine's, before the frame).
        m.d.comb += [
            framer.job.payload.header.eq(hdr_bits),
            framer.job.payload.length.eq(payload_len),
            ev.dma_errors.eq(framer.dma_error),
        ]
        lend(m, sg, framer.walk, framer.walk_result, framer.job.valid)

        def send_frame(state, done, *, source=PayloadSource.HOST, raw=0):
            """State `state`: the framer sends the frame built (header in `hdr`, `payload_len` bytes of
            payload from `source`); then `done`, with `frame_error` telling whether it was dropped."""
            with m.State(state):
                m.d.comb += [
                    framer.job.valid.eq(1),
                    framer.job.payload.source.eq(source),
                    framer.job.payload.raw.eq(raw),
                ]
                with m.If(framer.job.ready):
                    m.d.sync += frame_error.eq(framer.error)
                    m.next = done

        # Scatter/gather: descriptor segments from the fetcher, or one segment for a read response.
        single = Signal()
        m.d.comb += [
            sg.seg_index.eq(Mux(single, 0, fetcher.seg_index)),
            sg.seg_data.va.eq(Mux(single, job.va, fetcher.seg_data.va)),
            sg.seg_data.handle.eq(Mux(single, job.handle, fetcher.seg_data.handle)),
            sg.seg_data.length.eq(Mux(single, job.length, fetcher.seg_data.length)),
            sg.seg_write.eq(fetcher.seg_write),
            sg.count.eq(Mux(single, 1, fetcher.seg_count)),
            sg.ptag.eq(config.ptag),
            sg.need.eq(Mux(single, via_att.NEED_RDMA_READ, via_att.NEED_LOCAL)),
        ]

        # The send position and head of the next cycle: as now, but where a state moves them and
        # the next one reads their slot (a completion, a rewind).
        cur_next, head_next = Signal(ptr), Signal(ptr)
        m.d.comb += [
            cur_next.eq(ctx.cur),
            head_next.eq(head),
            sq_r.addr.eq(vi * qd + cur_next[: len(cur_next) - 1]),
            sq_head_r.addr.eq(vi * qd + head_next[: len(head_next) - 1]),
            info_r.addr.eq(vi * qd + head_next[: len(head_next) - 1]),
            self.mgmt_busy.eq(mgmt_pending),
        ]
        slot_info = info_r.data

        with m.If(self.mgmt_request):
            m.d.sync += [mgmt_pending.eq(1), mgmt_ctrl.eq(self.mgmt_ctrl)]

        def forget_copy():
            """The fetcher's and the walker's copy is no longer a descriptor's (for any slot)."""
            m.d.sync += loaded.eq(0)
            m.d.comb += kept.drop.eq(1)

        with m.If(connects.any()):
            forget_copy()
        for v in range(vis):
            with m.If(self.vi.connect[v]):
                m.d.sync += self.to_rx.read_active[v].eq(0)

        mgmt_len = mgmt_ctrl[_MGMT.field("LENGTH").lsb :][: _MGMT.field("LENGTH").width]
        mgmt_raw = mgmt_ctrl[_MGMT.field("RAW").lsb]
        mgmt_node = mgmt_ctrl[_MGMT.field("DST_NODE").lsb :][: _MGMT.field("DST_NODE").width]

        def slot_error(bits):
            op_status = Mux(
                fetcher.control.control.op == _CTL.RDMA_WRITE,
                _SOP.RDMA_WRITE,
                Mux(fetcher.control.control.op == _CTL.RDMA_READ, _SOP.RDMA_READ, _SOP.SEND),
            )
            m.d.comb += [
                info_w.en.eq(1),
                info_w.addr.eq(slot),
                info_w.data.end_psn.eq(snd_nxt),
                info_w.data.length.eq(0),
                info_w.data.op.eq(op_status),
                info_w.data.error.eq(bits),
            ]
            forget_copy()
            update(cur=ctx.cur + 1, cur_offset=0)
            with m.If(ctx.cur == ctx.cur_max):
                update(cur_max=ctx.cur + 1)
            with m.If(ctx.cur == head):
                update(head_end=snd_nxt)

        with m.FSM():
            with m.State("SCAN"):
                m.d.comb += visit_ended.eq(visiting)
                # The records are read ahead for the VI a visit would take, whatever this cycle
                # decides: the decision (a management frame, a read response, a visit) waits on the
                # records of the visit just ended and must not run on into their addresses. A
                # response reads its own VI's and a management frame reads none.
                m.d.comb += vi_next.eq(next_vi)
                m.d.sync += [single.eq(0), visiting.eq(0)]
                have_job = job_active | jobs.r_rdy
                with m.If(mgmt_pending & self.enable):
                    m.next = "MGMT"
                # A visit sets `prefer_job`, so where one has just ended a waiting job goes first
                # whatever the visit left: the job's turn needs only the other VIs' work, not that
                # visit's record (`again`), its comparisons and the choice in series.
                with m.Elif(have_job & self.enable & (prefer_job | ~found)):
                    m.d.sync += prefer_job.eq(0)
                    with m.If(~job_active):
                        m.d.comb += jobs.r_en.eq(1)
                        m.d.sync += [job.eq(jobs.r_data), job_active.eq(1)]
                    m.next = "RESPONSE"
                with m.Elif(any_work):
                    m.d.sync += [last_vi.eq(next_vi), prefer_job.eq(1), visiting.eq(1)]
                    m.next = "VISIT_NAK"

            # --- 1. a NAK from the peer -----------------------------------------------------
            with m.State("VISIT_NAK"):
                # A visit with nothing to take, complete, time out or resend goes straight to its
                # frame: the steps between would each look and do nothing.
                settled = (
                    ~self.from_rx.rx_nak.bit_select(vi, 1)
                    & (self.from_rx.peer_ack == ctx.una)
                    & ~to_flush
                    & ~to_complete
                    & ~timers.expired
                    & ~ctx.rewind
                )
                with m.If(self.from_rx.rx_nak.bit_select(vi, 1)):
                    m.d.comb += self.to_rx.rx_nak_taken.eq(1)
                    code = self.from_rx.rx_nak_code
                    psn = self.from_rx.rx_nak_psn
                    in_flight = (psn - ctx.una)[:32] <= (ctx.snd_max - ctx.una)[:32]
                    with m.If(code == _NAK.SEQUENCE):
                        with m.If(in_flight):
                            # Everything before `psn` arrived; resend from there.
                            m.d.comb += ev.tx_nak_sequence.eq(1)
                            update(una=psn)
                            update(rewind=1)
                    with m.Elif(state == _CONNECTED):
                        bits = Mux(
                            code == _NAK.REMOTE_PROTECTION,
                            status_bits(RDMA_PROTECTION_ERROR=1),
                            status_bits(REMOTE_DESCRIPTOR_ERROR=1),
                        )
                        fail(bits)
                # The visit takes the VI's acknowledgement flag whatever it decides (VISIT_ACK, if
                # it comes, again: an acknowledgement of this cycle sets the flag after the clear),
                # so the flag's clear does not wait on the decision (a placement's critical path).
                m.d.sync += acked.bit_select(vi, 1).eq(0)
                with m.If(settled):
                    m.next = "VISIT_CONTROL"
                with m.Else():
                    m.next = "VISIT_ACK"

            # --- 2. the peer's cumulative acknowledgement ------------------------------------
            with m.State("VISIT_ACK"):
                m.d.sync += acked.bit_select(vi, 1).eq(0)
                ack = self.from_rx.peer_ack
                progress = (ack - ctx.una)[:32]
                with m.If((progress != 0) & (progress <= (ctx.snd_max - ctx.una)[:32])):
                    m.d.comb += [timers.acked.eq(1), timers.acked_all.eq(ack == ctx.snd_max)]
                    update(una=ack)
                    with m.If(progress > (snd_nxt - ctx.una)[:32]):
                        # Acknowledged past what we were about to resend: skip ahead to it.
                        update(rewind=1)
                m.next = "VISIT_COMPLETE"

            # --- 3. completions in queue order ------------------------------------------------
            with m.State("VISIT_COMPLETE"):
                with m.If(to_flush):
                    m.next = "FLUSH"
                with m.Elif(to_complete):
                    m.next = "COMPLETE"
                with m.Else():
                    m.next = "VISIT_TIMER"
            with m.State("COMPLETE"):
                c = self.completions.payload
                error = slot_info.error
                m.d.comb += [
                    self.completions.valid.eq(1),
                    c.desc.eq(sq_head_r.data.addr),
                    c.status.eq(status_bits(DONE=1) | error | status_op(slot_info.op)),
                    c.length.eq(Mux(error != 0, 0, slot_info.length)),
                    c.recv.eq(0),
                ]
                with m.If(self.completions.ready):
                    m.d.comb += [head_next.eq(head + 1), pointers.advance.eq(1)]
                    update(head_psn=ctx.head_end)
                    with m.If(slot_info.op == _SOP.RDMA_READ):
                        m.d.sync += read_active.bit_select(vi, 1).eq(0)
                    m.next = "COMPLETE_NEXT"
            with m.State("COMPLETE_NEXT"):
                # The new head's end, if its message has been sent.
                with m.If(head != ctx.cur_max):
                    update(head_end=slot_info.end_psn)
                m.next = "VISIT_COMPLETE"
            with m.State("FLUSH"):
                c = self.completions.payload
                sent = head != ctx.cur_max
                bits = Mux(
                    sent & (slot_info.error != 0),
                    slot_info.error,
                    Mux(ctx.err_pending != 0, ctx.err_pending, status_bits(FLUSHED=1)),
                )
                m.d.comb += [
                    self.completions.valid.eq(1),
                    c.desc.eq(sq_head_r.data.addr),
                    c.status.eq(status_bits(DONE=1) | bits | status_op(Mux(sent, slot_info.op, 0))),
                    c.length.eq(0),
                    c.recv.eq(0),
                ]
                with m.If(self.completions.ready):
                    m.d.comb += [timers.stop.eq(1), head_next.eq(head + 1), pointers.advance.eq(1)]
                    m.d.sync += read_active.bit_select(vi, 1).eq(0)
                    forget_copy()
                    update(err_pending=0)
                    with m.If(head == ctx.cur):
                        update(cur=head + 1)
                        update(cur_offset=0)
                    with m.If(~sent):
                        update(cur_max=head + 1)
                    m.next = "VISIT_COMPLETE"

            # --- 4. the retransmission timer -------------------------------------------------
            with m.State("VISIT_TIMER"):
                with m.If(timers.expired & (state == _CONNECTED)):
                    m.d.sync += last_retry.eq(timers.out_of_retries)
                    m.next = "VISIT_EXPIRED"
                with m.Else():
                    m.next = "VISIT_REWIND"
            with m.State("VISIT_EXPIRED"):
                # The expiry acted on a cycle later, from a register: the retry count's read, its
                # increment and the limit's compare are not in series with the record's write.
                with m.If(last_retry):
                    fail(status_bits(TRANSPORT_ERROR=1))
                with m.Else():
                    m.d.comb += [ev.tx_timeouts.eq(1), timers.retry.eq(1)]
                    update(rewind=1)
                m.next = "VISIT_REWIND"
            with m.State("VISIT_REWIND"):
                with m.If(ctx.rewind):
                    m.d.comb += [timers.stop.eq(1), cur_next.eq(head)]
                    m.d.comb += sequence.update(snd_nxt=ctx.una)
                    update(rewind=0, cur=head, cur_offset=frames_back * per_frame)
                m.next = "VISIT_CONTROL"

            # --- 5. one frame: an acknowledgement owed, or data -------------------------------
            with m.State("VISIT_CONTROL"):
                with m.If(control_owed):
                    with m.If(nak_owed):
                        m.d.sync += [
                            *base_header(_OP.NAK, self.from_rx.nak_psn),
                            hdr.nak_code.eq(self.from_rx.nak_code),
                        ]
                    with m.Else():
                        m.d.sync += base_header(_OP.ACK, snd_nxt)
                    m.d.sync += payload_len.eq(0)
                    m.next = "CONTROL_FRAME"
                with m.Elif(sendable):
                    this_slot = vi * qd + ctx.cur[: len(ctx.cur) - 1]
                    entry = sq_r.data
                    same_desc = loaded_desc == entry.addr  # the loaded one, and the kept one if kept
                    m.d.sync += [desc.eq(entry.addr), slot.eq(this_slot)]
                    with m.If(loaded & (loaded_slot == this_slot) & same_desc):
                        m.next = "VALIDATE"
                    with m.Elif(kept.hit & entry.again & same_desc):
                        m.d.sync += [loaded.eq(1), loaded_slot.eq(this_slot)]
                        m.next = "PLAN"
                    with m.Else():
                        m.next = "FETCH"
                with m.Else():
                    m.next = "SCAN"
            send_frame("CONTROL_FRAME", "CONTROL_SENT")
            with m.State("CONTROL_SENT"):
                m.d.comb += [
                    self.to_rx.ack_sent.eq(1),
                    self.to_rx.ack_sent_psn.eq(hdr.ack_psn),
                ]
                with m.If(hdr.op == _OP.NAK):
                    m.d.comb += self.to_rx.nak_sent.eq(1)
                m.next = "SCAN"

            # --- a data frame -----------------------------------------------------------------
            with m.State("FETCH"):
                m.d.comb += [
                    fetcher.cmd.valid.eq(1),
                    fetcher.cmd.payload.addr.eq(desc),
                    fetcher.cmd.payload.area_end.eq(config.desc_base + config.desc_size),
                ]
                with m.If(fetcher.cmd.ready):
                    m.next = "FETCHED"
            with m.State("FETCHED"):
                m.d.comb += fetcher.result.ready.eq(1)
                with m.If(fetcher.result.valid):
                    m.d.sync += [
                        loaded.eq(fetcher.result.payload == FETCH_OK),
                        loaded_slot.eq(slot),
                        loaded_desc.eq(desc),
                    ]
                    m.d.comb += kept.drop.eq(1)  # until this one is validated
                    with m.If(fetcher.result.payload != FETCH_OK):
                        m.next = "SLOT_FORMAT"
                    with m.Else():
                        m.next = "VALIDATE"
            with m.State("VALIDATE"):
                m.d.comb += [sg.cmd.valid.eq(1), sg.cmd.payload.op.eq(OP_VALIDATE)]
                with m.If(sg.cmd.ready):
                    m.d.comb += kept.start.eq(1)
                    m.next = "VALIDATED"
            with m.State("VALIDATED"):
                m.d.comb += sg.result.ready.eq(1)
                with m.If(sg.result.valid):
                    with m.If(sg.result.payload.fail != via_att.FAIL_NONE):
                        m.next = "SLOT_PROTECTION"
                    with m.Else():
                        m.d.sync += total.eq(sg.result.payload.total)
                        m.d.comb += kept.keep.eq(1)
                        m.next = "PLAN"
            with m.State("SLOT_FORMAT"):
                slot_error(status_bits(FORMAT_ERROR=1))
                m.next = "SCAN"
            with m.State("SLOT_PROTECTION"):
                slot_error(status_bits(PROTECTION_ERROR=1))
                m.next = "SCAN"
            with m.State("PLAN"):
                ctl = fetcher.control
                left = Signal(32)
                m.d.comb += left.eq(total - ctx.cur_offset)
                length = Mux(left < per_frame, left, per_frame)
                op_map = Mux(
                    ctl.control.op == _CTL.RDMA_WRITE,
                    _OP.RDMA_WRITE,
                    Mux(ctl.control.op == _CTL.RDMA_READ, _OP.READ_REQUEST, _OP.SEND),
                )
                read = ctl.control.op == _CTL.RDMA_READ
                m.d.sync += [
                    *base_header(op_map, snd_nxt),
                    hdr.flags.first.eq(read | (ctx.cur_offset == 0)),
                    hdr.flags.last.eq(read | (left <= per_frame)),
                    hdr.flags.immediate.eq(ctl.control.immediate),
                    hdr.msg_length.eq(total),
                    hdr.offset.eq(
                        Mux(read, Mux(read_active.bit_select(vi, 1), self.from_rx.read_offset, 0), ctx.cur_offset)
                    ),
                    hdr.payload_length.eq(Mux(read, 0, length)),
                    hdr.remote_va.eq(fetcher.address.remote_va),
                    hdr.remote_handle.eq(fetcher.address.remote_handle),
                    hdr.immediate_data.eq(ctl.immediate_data),
                    payload_len.eq(Mux(read, 0, length)),
                    is_read.eq(read),
                    last.eq(read | (left <= per_frame)),
                    retransmit.eq(read_active.bit_select(vi, 1)),
                ]
                m.next = "DATA_FRAME"
            send_frame("DATA_FRAME", "DATA_SENT")
            with m.State("DATA_SENT"):
                with m.If(frame_error):
                    fail(status_bits(TRANSPORT_ERROR=1))
                    m.next = "SCAN"
                with m.Else():
                    m.d.comb += [
                        self.to_rx.ack_sent.eq(1),
                        self.to_rx.ack_sent_psn.eq(hdr.ack_psn),
                    ]
                    m.d.comb += sequence.update(snd_nxt=snd_nxt + 1)
                    with m.If(snd_nxt == ctx.snd_max):
                        update(snd_max=snd_nxt + 1)
                    m.d.comb += timers.start.eq(1)  # the oldest frame in flight keeps its deadline
                    with m.If(is_read):
                        m.d.sync += read_active.bit_select(vi, 1).eq(1)
                        m.d.comb += reads.update(psn=snd_nxt, desc=desc, length=total)
                        with m.If(~retransmit):
                            m.d.comb += self.to_rx.read_start.eq(1)
                    with m.If(last):
                        op_status = Mux(
                            is_read, _SOP.RDMA_READ, Mux(hdr.op == _OP.RDMA_WRITE, _SOP.RDMA_WRITE, _SOP.SEND)
                        )
                        m.d.comb += [
                            info_w.en.eq(1),
                            info_w.addr.eq(slot),
                            info_w.data.end_psn.eq(snd_nxt + 1),
                            info_w.data.length.eq(total),
                            info_w.data.op.eq(op_status),
                            info_w.data.error.eq(0),
                        ]
                        m.d.sync += loaded.eq(0)
                        update(cur=ctx.cur + 1, cur_offset=0)
                        with m.If(ctx.cur == ctx.cur_max):
                            update(cur_max=ctx.cur + 1)
                        with m.If(ctx.cur == head):
                            update(head_end=snd_nxt + 1)
                    with m.Else():
                        update(cur_offset=ctx.cur_offset + payload_len)
                    m.next = "SCAN"

            # --- RDMA read responses ----------------------------------------------------------
            with m.State("RESPONSE"):
                m.d.comb += vi_next.eq(job.vi)
                m.next = "RESPONSE_PLAN"
            with m.State("RESPONSE_PLAN"):
                left = Signal(32)
                m.d.comb += left.eq(job.length - job.offset)
                length = Mux(left < per_frame, left, per_frame)
                with m.If(state != _CONNECTED):
                    m.d.sync += job_active.eq(0)
                    m.next = "SCAN"
                with m.Else():
                    m.d.sync += [
                        *base_header(_OP.READ_RESPONSE, job.psn),
                        hdr.flags.first.eq(job.offset == 0),
                        hdr.flags.last.eq(left <= per_frame),
                        hdr.msg_length.eq(job.length),
                        hdr.offset.eq(job.offset),
                        hdr.payload_length.eq(length),
                        payload_len.eq(length),
                        single.eq(1),
                    ]
                    m.next = "RESPONSE_LOAD"
            with m.State("RESPONSE_LOAD"):
                m.d.comb += sg.seg_write.eq(1)
                forget_copy()
                m.next = "RESPONSE_FRAME"
            send_frame("RESPONSE_FRAME", "RESPONSE_SENT")
            with m.State("RESPONSE_SENT"):
                m.d.comb += [
                    self.to_rx.ack_sent.eq(1),
                    self.to_rx.ack_sent_psn.eq(hdr.ack_psn),
                ]
                m.d.sync += job.offset.eq(job.offset + payload_len)
                with m.If(frame_error | hdr.flags.last):
                    m.d.sync += job_active.eq(0)
                m.next = "SCAN"

            # --- management frames ------------------------------------------------------------
            with m.State("MGMT"):
                m.d.sync += payload_len.eq(mgmt_len)
                with m.If(mgmt_raw):
                    m.next = "MGMT_RAW_FRAME"  # (an empty one the framer ends at once, sending nothing)
                with m.Else():
                    m.d.sync += [
                        *base_header(_OP.MGMT, 0, node=mgmt_node, dst_vi=0),
                        hdr.src_vi.eq(0),
                        hdr.ack_psn.eq(0),
                        hdr.payload_length.eq(mgmt_len),
                    ]
                    m.next = "MGMT_FRAME"
            send_frame("MGMT_FRAME", "MGMT_SENT", source=PayloadSource.FIRMWARE)
            send_frame("MGMT_RAW_FRAME", "MGMT_SENT", source=PayloadSource.FIRMWARE, raw=1)
            with m.State("MGMT_SENT"):
                m.d.sync += mgmt_pending.eq(0)
                m.next = "SCAN"

        # After the visit's clear: an acknowledgement arriving in its cycle is a new one.
        with m.If(self.from_rx.ack_advanced):
            m.d.sync += acked.bit_select(self.from_rx.ack_advanced_vi, 1).eq(1)
        return m
