"""The VIA engine: the card's hardware VIA over Gigabit Ethernet.

It joins the register block (``regmap.VIA``: VI state, completion queues, ATT access, mailbox,
management frames, counters), the doorbell pages (``regmap.DOORBELL``, port ``doorbells``: one page
per VI, so that a driver can map a process its own VI's doorbells and no other's), the transmit and
receive engines, the address translator, the completion unit, the two store-and-forward frame
buffers and the DMA arbiter. Its ports go to the card top: the register window, one Wishbone DMA
initiator into the SoC (host memory), the 32-bit frame streams of the LiteEth MAC core, and
``irq``, the interrupt to the node's CPU when the firmware has work or an armed completion queue
an entry (``IRQ_*`` registers, ``via_cq_notify``). With
``cq_event`` it also has an output of that name that pulses when a completion-queue entry has been
written (the card's PCIe MSI; without PCIe the firmware polls the queues, and the port is not there
at all).
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap, via_frame
from numavia.base.params import BUS_ADDR_WIDTH, GMII_CLOCK_HZ, SYS_CLOCK_HZ
from numavia.base.via_params import ViaParams

from . import wishbone, wishbone_burst
from .event_counters import EventCounters
from .packet_fifo import PacketFifo
from .register_bank import RegisterBank
from .vi_records import ViRecords
from .via_completion import CompletionUnit
from .via_cq_notify import CqNotifier
from .via_descriptor_fetch import postable
from .via_layouts import EthBeat
from .via_links import vi_config_signature
from .via_rx import RX_EVENTS, RxEngine
from .via_translate import AddressTranslator
from .via_tx import TX_EVENTS, TxEngine
from .wishbone_arbiter import WishboneArbiter

_STATES = dict(regmap.VI_STATES)
_VI = regmap.VIA.array("VI")
_CMD = _VI.register("CMD")
#: Where the VIs' configuration table is read (one lookup each), in the cycle the VI is named ...
_VI_READERS = ("rx_frame", "completion")
#: ... or a cycle ahead (the rung doorbell's VI and the engines' own, whose next value is known).
_VI_READERS_AHEAD = ("doorbell", "tx", "rx")
_COUNTERS = tuple(name for name, _ in regmap.VIA_COUNTERS)


def _field(value, reg, name):
    f = reg.field(name)
    return value[f.lsb : f.lsb + f.width]


class ViaEngine(wiring.Component):
    """``clk_freq_hz`` is the clock it runs on: it measures how long its transmit buffer takes to
    drain onto the wire (a byte a GMII cycle)."""

    def __init__(
        self,
        params=ViaParams(),
        *,
        mtu=via_frame.MTU_DEFAULT,
        rto_cycles=None,
        retry_limit=None,
        cq_event=False,
        clk_freq_hz=SYS_CLOCK_HZ,
    ):
        self.p = params
        self.has_cq_event = cq_event
        # Cycles of this clock a 4-byte word of a frame takes on the wire, rounded up.
        self.cycles_per_word = -(-4 * clk_freq_hz // GMII_CLOCK_HZ)
        self.resets = {"MTU": mtu}
        if rto_cycles is not None:
            self.resets["RTO_CYCLES"] = rto_cycles
        if retry_limit is not None:
            self.resets["RETRY_LIMIT"] = retry_limit
        super().__init__(
            {
                "regs": In(wishbone.Signature(addr_width=regmap.VIA.addr_width)),
                "doorbells": In(wishbone.Signature(addr_width=regmap.DOORBELL.addr_width)),
                "dma": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "eth_tx": Out(stream.Signature(EthBeat)),
                "eth_rx": In(stream.Signature(EthBeat)),
                "node_id": In(regmap.NODE_ID_BITS),
                # The card's cycle counter (``CTRL.CYCLES``, low word), for the latency stamps.
                "cycles": In(32),
                "irq": Out(1),
                **({"cq_event": Out(1)} if cq_event else {}),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.p
        vis, cqs = p.vis, p.cqs

        # Arrays kept in memory: the VIs' configuration registers, read where the doorbell check,
        # the engines and the completion unit are (`_VI_READERS`); the mailbox's data, which only
        # the bus reads; the management frames' payloads, a word at a time. The event counters
        # are a memory too, read by position.
        m.submodules.bank = bank = RegisterBank(
            regmap.VIA,
            counts={"VI": vis, "CQ": cqs},
            resets=self.resets,
            hw_writable=("ATT_ADDR",),
            tables={"VI": len(_VI_READERS), "MBOX_DATA": 0, "MGMT_TX_DATA": 1, "MGMT_RX_DATA": 0},
            read_ahead={"VI": len(_VI_READERS_AHEAD)},
            indexed={"counters": _COUNTERS},
        )
        vi_lookup = dict(zip(_VI_READERS, bank.vi_lookup)) | dict(zip(_VI_READERS_AHEAD, bank.vi_lookup_ahead))
        wiring.connect(m, wiring.flipped(self.regs), bank.bus)
        # The doorbell pages: page i decodes VI i's two doorbells and nothing else, so a doorbell
        # for VI i can only come through page i. Pages of VIs this card does not build, and the
        # rest of every page, answer err like any hole of the window.
        m.submodules.doorbell_bank = doorbell_bank = RegisterBank(
            regmap.DOORBELL,
            counts={"VI": vis},
            tables={"VI": 0},  # one decode and one data register for all pages
        )
        wiring.connect(m, wiring.flipped(self.doorbells), doorbell_bank.bus)
        doorbell_refused = Signal()
        m.d.comb += doorbell_refused.eq(doorbell_bank.bus.err & self.doorbells.we)
        # Doorbells come one at a time (one bus), so a single check serves every VI: the address
        # must name a descriptor in the ringing VI's descriptor area (``postable``). The doorbell
        # is registered first and checked in the next cycle, so the bank's decoding and the
        # check's adders and comparators are not one path (docs/boards.md: the ECPIX-5's timing).
        # The pages share one data register per doorbell (a table of the bank) and the bank names
        # the page written (``vi_written``), so no page has strobes of its own to be encoded again.
        written = doorbell_bank.vi_written
        repost_written = written.sq_repost.w_stb
        sq_written = written.sq_doorbell.w_stb | repost_written
        page_written, written_vi = Signal(), written.index
        m.d.comb += page_written.eq(sq_written | written.rq_doorbell.w_stb)
        rung_vi, rung_addr, sq_rung, rq_rung = Signal(range(vis)), Signal(32), Signal(), Signal()
        rung_again = Signal()
        m.d.sync += [sq_rung.eq(sq_written), rq_rung.eq(page_written & ~sq_written)]
        with m.If(page_written):
            m.d.sync += [
                rung_vi.eq(written_vi),
                rung_again.eq(repost_written),
                rung_addr.eq(
                    Mux(
                        repost_written,
                        written.sq_repost.w_data,
                        Mux(sq_written, written.sq_doorbell.w_data, written.rq_doorbell.w_data),
                    )
                ),
            ]
        rung = sq_rung | rq_rung
        m.d.comb += [
            vi_lookup["doorbell"].index.eq(rung_vi),
            vi_lookup["doorbell"].next_index.eq(Mux(page_written, written_vi, rung_vi)),
        ]
        area_base, area_size = vi_lookup["doorbell"].record.desc_base, vi_lookup["doorbell"].record.desc_size
        postable_doorbell, area_refused = Signal(), Signal()
        m.d.comb += [
            postable_doorbell.eq(postable(p, rung_addr, area_base, area_size)),
            area_refused.eq(rung & ~postable_doorbell),
        ]
        # A doorbell that passed the check reaches its queue a cycle later, from registers: the
        # area's block RAM, the check's adders and the queue's tail update were one path (the
        # routed card's longest once the receive engine's record write was off it: docs/boards.md).
        queued_vi, queued_addr, queued_again = Signal(range(vis)), Signal(32), Signal()
        sq_queued, rq_queued = Signal(), Signal()
        m.d.sync += [
            sq_queued.eq(sq_rung & postable_doorbell),
            rq_queued.eq(rq_rung & postable_doorbell),
            queued_vi.eq(rung_vi),
            queued_addr.eq(rung_addr),
            queued_again.eq(rung_again),
        ]
        m.submodules.tx = tx = TxEngine(p)
        m.submodules.rx = rx = RxEngine(p)
        m.submodules.att = att = AddressTranslator(regions=p.att_regions, pages=p.att_pages, ports=2)
        m.submodules.completion = completion = CompletionUnit(vis=vis, cqs=cqs, sources=2)
        m.submodules.cq_notify = cq_notify = CqNotifier(cqs)
        m.submodules.tx_fifo = tx_fifo = PacketFifo(depth_words=p.tx_buffer_bytes // 4, drop_when_full=False)
        m.submodules.rx_fifo = rx_fifo = PacketFifo(
            depth_words=p.rx_buffer_bytes // 4, drop_when_full=True, cut_through=True
        )
        m.submodules.dma = arbiter = WishboneArbiter(count=5, addr_width=BUS_ADDR_WIDTH)

        # --- DMA: five initiators share the card's port into the SoC --------------------------
        for i, bus in enumerate((tx.fetch_bus, tx.read_bus, rx.fetch_bus, rx.write_bus, completion.bus)):
            wiring.connect(m, bus, arbiter.initiators[i])
        wiring.connect(m, arbiter.bus, wiring.flipped(self.dma))

        wiring.connect(m, tx.att, att.lookups[0])
        wiring.connect(m, rx.att, att.lookups[1])
        wiring.connect(m, tx.completions, completion.requests[0])
        wiring.connect(m, rx.completions, completion.requests[1])
        wiring.connect(m, rx.jobs, tx.jobs)

        # --- frames: engine -> transmit buffer -> MAC; MAC -> receive buffer -> engine ---------
        wiring.connect(m, tx.frames, tx_fifo.w)
        wiring.connect(m, tx.announce, tx_fifo.announce)
        out = self.eth_tx.payload
        nb = tx_fifo.r.payload.nbytes
        m.d.comb += [
            self.eth_tx.valid.eq(tx_fifo.r.valid),
            tx_fifo.r.ready.eq(self.eth_tx.ready),
            out.data.eq(tx_fifo.r.payload.data),
            out.last.eq(tx_fifo.r.payload.last),
            out.last_be.eq(Mux(tx_fifo.r.payload.last, 1 << (nb - 1)[:2], 0)),
            out.error.eq(0),
        ]
        beat = self.eth_rx.payload
        be = beat.last_be
        m.d.comb += [
            self.eth_rx.ready.eq(rx_fifo.w.ready),
            rx_fifo.w.valid.eq(self.eth_rx.valid),
            rx_fifo.w.payload.data.eq(beat.data),
            rx_fifo.w.payload.last.eq(beat.last),
            rx_fifo.w.payload.nbytes.eq(Mux(~beat.last | be[3], 4, Mux(be[2], 3, Mux(be[1], 2, 1)))),
            rx_fifo.w.payload.error.eq(beat.error != 0),
        ]
        m.d.comb += [
            rx.frames.valid.eq(rx_fifo.r.valid),
            rx.frames.payload.eq(rx_fifo.r.payload),
            rx_fifo.r.ready.eq(rx.frames.ready),
            rx.frame_valid.eq(rx_fifo.head_valid),
            rx.frame_length.eq(rx_fifo.head_length),
            rx_fifo.skip.eq(rx.frame_skip),
            rx.frame_early.eq(rx_fifo.head_early),
            rx.frame_dropped.eq(rx_fifo.early_dropped),
        ]

        # A retransmission deadline set now counts from when the buffered frames will have left
        # (via_retransmit.py). Registered: it is a slow measure, and kept off the timers' adders.
        m.d.sync += tx.backlog.eq(tx_fifo.level * self.cycles_per_word)

        # --- global registers ----------------------------------------------------------------
        enable = bank.ctrl.value[regmap.VIA.register("CTRL").field("ENABLE").lsb]
        for engine in (tx, rx):
            m.d.comb += [engine.enable.eq(enable), engine.node_id.eq(self.node_id)]
        m.d.comb += [
            tx.mtu.eq(bank.mtu.value),
            tx.rto.eq(bank.rto_cycles.value),
            tx.retry_limit.eq(bank.retry_limit.value),
            bank.vi_count.value.eq(vis),
            bank.cq_count.value.eq(cqs),
            bank.queue_depth.value.eq(p.queue_depth),
            bank.max_segments.value.eq(p.max_segments),
            bank.max_mtu.value.eq(p.max_mtu),
            bank.att_regions.value.eq(p.att_regions),
            bank.att_pages.value.eq(p.att_pages),
            bank.host_mem_base.value.eq(p.host_base),
            bank.host_mem_size.value.eq(p.host_size),
            bank.window.value.eq(p.window),
        ]

        # ATT access: ATT_WDATA writes the word at ATT_ADDR and moves ATT_ADDR on.
        forget = Signal()
        m.d.comb += [
            att.write_addr.eq(bank.att_addr.value),
            att.write_data.eq(bank.att_wdata.w_data),
            att.write_en.eq(bank.att_wdata.w_stb),
            # The engines' copies of a validated descriptor or remote target must be validated again.
            forget.eq(bank.att_wdata.w_stb | bank.forget_copies.w_stb),
            tx.forget.eq(forget),
            rx.forget.eq(forget),
            bank.att_addr.hw_en.eq(bank.att_wdata.w_stb),
            bank.att_addr.hw_data.eq(bank.att_addr.value + 1),
        ]

        # Management frames.
        mgmt_rx = regmap.VIA.register("MGMT_RX_STATUS")
        m.d.comb += [
            tx.mgmt_request.eq(bank.mgmt_tx_ctrl.w_stb),
            tx.mgmt_ctrl.eq(bank.mgmt_tx_ctrl.w_data),
            bank.mgmt_tx_status.value.eq(tx.mgmt_busy),
            bank.mgmt_rx_status.value.eq(
                (rx.mgmt_valid << mgmt_rx.field("VALID").lsb)
                | (rx.mgmt_src << mgmt_rx.field("SRC_NODE").lsb)
                | (rx.mgmt_length << mgmt_rx.field("LENGTH").lsb)
            ),
            rx.mgmt_pop.eq(bank.mgmt_rx_pop.w_stb),
        ]
        wiring.connect(m, tx.mgmt_data, bank.mgmt_tx_data_lookup[0])
        wiring.connect(m, bank.mgmt_rx_data_status, rx.mgmt_data)

        # The firmware's interrupt: a mailbox command (an event, held until acknowledged), a
        # management frame waiting (a level, until popped) or an armed completion queue's
        # notification (until the queue's CTRL.ACK).
        irq_reg = regmap.VIA.register("IRQ_PENDING")
        mbox_bit, mgmt_bit, cq_bit = (irq_reg.field(name).lsb for name in ("MBOX", "MGMT_RX", "CQ"))
        mbox_pending = Signal()
        with m.If(bank.mbox_cmd.w_stb):
            m.d.sync += mbox_pending.eq(1)
        with m.Elif(bank.irq_ack.w_stb & bank.irq_ack.w_data[mbox_bit]):
            m.d.sync += mbox_pending.eq(0)
        pending = Signal(irq_reg.width)
        m.d.comb += [
            pending.eq((mbox_pending << mbox_bit) | (rx.mgmt_valid << mgmt_bit) | (cq_notify.pending << cq_bit)),
            bank.irq_pending.value.eq(pending),
            self.irq.eq((pending & bank.irq_enable.value).any()),
        ]

        # --- VIs: state machine, configuration, doorbells --------------------------------------
        state_reg = _VI.register("STATE")
        vi_config = vi_config_signature(vis).create()
        wiring.connect(m, vi_config, tx.vi, rx.vi)
        readers = {"tx": tx.config, "rx": rx.config, "rx_frame": rx.frame_config, "completion": completion.vi_config}
        for name, reader in readers.items():
            wiring.connect(m, reader, vi_lookup[name])
        states = Array(vi_config.state)
        sides = {"tx": tx, "rx": rx}
        # A Signal each, so that the per-VI logic below shares the state's multiplexer (an
        # expression would be one per VI).
        failing = {name: Signal(name=f"{name}_failing") for name in sides}
        m.d.comb += [
            failing[name].eq(side.fail & (states[side.fail_vi] != _STATES["IDLE"])) for name, side in sides.items()
        ]
        # The VIs' CMD registers share one data register (a table's write-only register), so the
        # command is decoded once; each VI has its strobe.
        command = {name: _field(bank.vi[0].cmd.w_data, _CMD, name) for name in ("CONNECT", "FAIL", "RESET")}
        restarted = Signal(vis)  # a CONNECT or RESET command: the VI's error bits start again
        for v in range(vis):
            state, written = Signal(2, name=f"vi{v}_state"), bank.vi[v].cmd.w_stb
            with m.If(Cat(failing[name] & (side.fail_vi == v) for name, side in sides.items()).any()):
                m.d.sync += state.eq(_STATES["ERROR"])
            with m.If(written):
                with m.If(command["CONNECT"]):
                    m.d.comb += vi_config.connect[v].eq(1)
                    m.d.sync += state.eq(_STATES["CONNECTED"])
                with m.Elif(command["FAIL"]):
                    m.d.sync += state.eq(_STATES["ERROR"])
                with m.Elif(command["RESET"]):
                    m.d.sync += state.eq(_STATES["IDLE"])
            m.d.comb += [
                vi_config.state[v].eq(state),
                restarted[v].eq(written & (command["CONNECT"] | command["RESET"])),
            ]
        # The error bits TX and RX failed a VI with: a record per VI and side, in memory (one
        # writer each, so two failures in a cycle need no arbiter). The bus reads their union; a
        # restart clears both, winning over a failure in the same cycle as the command does.
        # A failure's bits are added to the record a cycle later, from registers: the engines'
        # decision to fail and the record's read-modify-write were one path, the card's longest
        # (docs/boards.md). Until then the bus reads them from those registers.
        errors = []
        for name, side in sides.items():
            records = ViRecords(data.StructLayout({"bits": 16}), vis, peeks_next=1, clears={"restart": None})
            m.submodules[f"{name}_errors"] = records
            adding, adding_vi, adding_bits = Signal(name=f"{name}_adding"), Signal(range(vis)), Signal(16)
            m.d.sync += [
                adding.eq(failing[name] & ~restarted.bit_select(side.fail_vi, 1)),
                adding_vi.eq(side.fail_vi),
                adding_bits.eq(side.fail_bits),
            ]
            m.d.comb += [
                records.owner.vi.eq(adding_vi),
                records.peek_next[0].vi.eq(bank.vi_status.index),
                records.clear.restart.eq(restarted),
            ]
            with m.If(adding):
                m.d.comb += records.update(bits=records.owner.record.bits | adding_bits)
            being_added = adding & (adding_vi == bank.vi_status.index) & ~restarted.bit_select(adding_vi, 1)
            errors.append(records.peek_next[0].record.bits | Mux(being_added, adding_bits, 0))
        for queue, queued in ((tx.sq_doorbell, sq_queued), (rx.rq_doorbell, rq_queued)):
            m.d.comb += [queue.valid.eq(queued), queue.payload.vi.eq(queued_vi), queue.payload.addr.eq(queued_addr)]
        m.d.comb += tx.sq_doorbell.payload.again.eq(queued_again)

        # The VI array's read-only registers, at the VI the bus reads (one multiplexer each, not a
        # decoder per VI and register); the queues and sequence numbers from TX's and RX's state.
        status = bank.vi_status
        m.d.comb += [
            status.record.state.eq(
                (states[status.index] << state_reg.field("STATE").lsb)
                | ((errors[0] | errors[1]) << state_reg.field("ERROR").lsb)
            ),
            tx.status.vi.eq(status.index),
            rx.status.vi.eq(status.index),
            status.record.queue_status.eq(Cat(tx.status.queued, rx.status.queued)),
            status.record.tx_psn.eq(tx.status.psn),
            status.record.rx_psn.eq(rx.status.psn),
        ]

        # --- receive <-> transmit ------------------------------------------------------------
        wiring.connect(m, rx.to_tx, tx.from_rx)
        wiring.connect(m, tx.to_rx, rx.from_tx)

        # --- completion queues ------------------------------------------------------------------
        cq_ctrl = regmap.VIA.array("CQ").register("CTRL")
        cq_status = regmap.VIA.array("CQ").register("STATUS")
        for i in range(cqs):
            regs = bank.cq[i]
            command = {
                name: regs.ctrl.w_stb & _field(regs.ctrl.w_data, cq_ctrl, name) for name in ("RESET", "ARM", "ACK")
            }
            m.d.comb += [
                completion.cq_base[i].eq(regs.base.value),
                completion.cq_size[i].eq(regs.size.value),
                completion.cq_head[i].eq(regs.head.value),
                completion.cq_reset[i].eq(command["RESET"]),
                cq_notify.tail[i].eq(completion.cq_tail[i]),
                cq_notify.head[i].eq(regs.head.value),
                cq_notify.reset[i].eq(command["RESET"]),
                cq_notify.arm[i].eq(command["ARM"]),
                cq_notify.ack[i].eq(command["ACK"]),
                regs.tail.value.eq(completion.cq_tail[i]),
                regs.status.value.eq(
                    (completion.cq_overflow[i] << cq_status.field("OVERFLOW").lsb)
                    | (cq_notify.armed[i] << cq_status.field("ARMED").lsb)
                ),
            ]
        m.d.comb += bank.cq_notified.value.eq(cq_notify.notified)

        if self.has_cq_event:
            # An entry is written when its queue's tail moves on by one (a reset moves it to 0).
            written = []
            for i in range(cqs):
                previous = Signal(32, name=f"cq{i}_previous_tail")
                m.d.sync += previous.eq(completion.cq_tail[i])
                written.append(completion.cq_tail[i] == (previous + 1)[:32])
            m.d.comb += self.cq_event.eq(Cat(*written).any())

        # --- counters -----------------------------------------------------------------------------
        events = {name: [] for name in _COUNTERS}
        for name in TX_EVENTS:
            events[name].append(getattr(tx.events, name.lower()))
        for name in RX_EVENTS:
            events[name].append(getattr(rx.events, name.lower()))
        events["DOORBELLS_REFUSED"] += [doorbell_refused, area_refused]
        events["DMA_ERRORS"].append(completion.dma_error)
        events["CQ_OVERFLOWS"].append(completion.overflow)
        events["TX_FRAMES"].append(self.eth_tx.valid & self.eth_tx.ready & self.eth_tx.payload.last)
        events["RX_FRAMES"].append(rx_fifo.committed)
        events["RX_BAD_FCS"].append(rx_fifo.dropped_error)
        events["RX_OVERFLOW"].append(rx_fifo.dropped_full)
        # Counted a cycle late: the engines' events come out of their frame decisions (a VI's
        # records, 64-way selections), which the counters' pending adders lengthened into the
        # routed card's longest path (docs/boards.md).
        m.submodules.counters = counters = EventCounters(len(_COUNTERS), most=max(map(len, events.values())), late=True)
        wiring.connect(m, bank.counters, counters.read)
        for i, (name, pulses) in enumerate(events.items()):
            if not pulses:
                raise AssertionError(f"counter {name} has no source")
            m.d.comb += counters.increments[i].eq(sum(pulses))

        # --- latency stamps: CYCLES at the last time each step of a message happened -------------
        tx_first, tx_op_beat, _ = _watch_frames(m, "tx", self.eth_tx, self.cycles)
        _, _, rx_data_frame = _watch_frames(m, "rx", self.eth_rx, self.cycles)
        rx_beat = self.eth_rx.valid & self.eth_rx.ready
        moments = {
            "STAMP_SQ_DOORBELL": tx.sq_doorbell.valid,
            "STAMP_TX_DATA": tx_op_beat,
            "STAMP_RX_DATA": rx_beat & self.eth_rx.payload.last & rx_data_frame,
            "STAMP_RX_WRITTEN": rx.payload_written,
            "STAMP_RX_COMPLETION": completion.recv_status_written,
        }
        for name, _ in regmap.VIA_STAMPS:
            stamp = Signal(32, name=name.lower())
            # A frame's first word left a few words before its operation said it was a data frame.
            with m.If(moments[name]):
                m.d.sync += stamp.eq(tx_first if name == "STAMP_TX_DATA" else self.cycles)
            m.d.comb += bank.port(name).value.eq(stamp)
        return m


_OP_WORD, _OP_SHIFT = divmod(8 * via_frame.HEADER.field("OP").offset, 32)
_DATA_FRAME_OPS = (via_frame.OP.SEND, via_frame.OP.RDMA_WRITE, via_frame.OP.READ_REQUEST, via_frame.OP.READ_RESPONSE)


def _watch_frames(m, name, port, cycles):
    """Follow the frames of an Ethernet stream ``port``. Returns ``cycles`` at the current frame's
    first word, a pulse on the word that carries a data frame's operation, and whether the current
    frame is a data frame (from the word after that one to its last word)."""
    beat = port.valid & port.ready
    word = Signal(range(_OP_WORD + 2), name=f"{name}_frame_word")  # saturates past the operation
    first = Signal(32, name=f"{name}_frame_first")
    data_frame = Signal(name=f"{name}_data_frame")
    op = port.payload.data[_OP_SHIFT : _OP_SHIFT + 8]
    is_data_op = Cat(op == code for code in _DATA_FRAME_OPS).any()
    op_beat = beat & (word == _OP_WORD) & is_data_op
    with m.If(beat):
        with m.If(word == 0):
            m.d.sync += first.eq(cycles)
        with m.If(word == _OP_WORD):
            m.d.sync += data_frame.eq(is_data_op)
        m.d.sync += word.eq(Mux(port.payload.last, 0, Mux(word == _OP_WORD + 1, word, word + 1)))
    return first, op_beat, data_frame
