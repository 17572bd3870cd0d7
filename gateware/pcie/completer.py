"""Completer: the host's memory requests to the card's BARs, and their completions.

* BAR0 (control/status registers, doorbells) and BAR2 (shared window + private memory) are both
  reached as host-port accesses (BAR0 through :class:`~.csr_bridge.HostPortToWishbone`); the
  offset inside the BAR is the host-port address.
* A read is served in pieces that end at naturally aligned boundaries of the completion size
  (the programmed max payload size, at most 256 bytes = one host-port burst); each piece is one
  host-port read and one completion, so completions split only at RCB-aligned addresses, as the
  specification requires. A piece whose first response beat is refused (host-port ``error``, which
  the local side sets on every beat of an access it refuses) goes out poisoned (EP).
* A write is passed on in host-port bursts of at most 64 words, with the TLP's first/last byte
  enables on the first/last word; it is posted, so the host-port responses are only drained.
* Requests the card does not serve (I/O, locked reads, atomics, config type 1, memory outside the
  BARs or with memory space disabled) are dropped if posted and answered with an Unsupported
  Request completion otherwise. Messages are posted: they are dropped.

One request is served at a time, so completions leave in request order.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..host_port import MAX_BURST_WORDS, HostPortSignature
from . import tlp
from .config import ConfigState
from .tlp import CplStatus, Fmt, Type

BURST_BYTES = MAX_BURST_WORDS * 4


def _bar_hit(address, base, size_bytes):
    bits = size_bytes.bit_length() - 1
    return (address[32:] == 0) & (address[bits:32] == base[bits:32])


def _dwords_to_boundary(offset, boundary_bytes):
    """Dwords from ``offset`` to the next multiple of ``boundary_bytes`` (a power of two)."""
    return ((boundary_bytes - (offset & (boundary_bytes - 1))) >> 2)[:8]


class Completer(wiring.Component):
    def __init__(self, *, bar0_bytes, bar2_bytes):
        self.bar0_bytes = bar0_bytes
        self.bar2_bytes = bar2_bytes
        super().__init__(
            {
                "request": In(tlp.tlp_beats()),
                "completion": Out(tlp.tlp_beats()),
                "bar0": Out(HostPortSignature()),
                "bar2": Out(HostPortSignature()),
                "config": In(ConfigState),
                "unsupported": Out(1),  # pulses for every request answered UR or dropped
            }
        )

    def elaborate(self, platform):
        m = Module()
        req, cpl, cfg = self.request, self.completion, self.config
        h = req.payload.header

        # --- what the request is ------------------------------------------------------------
        hit_bar0 = _bar_hit(h.address, cfg.bar0_base, self.bar0_bytes)
        hit_bar2 = _bar_hit(h.address, cfg.bar2_base, self.bar2_bytes)
        served = tlp.is_memory_request(h) & cfg.memory_enable & (hit_bar0 | hit_bar2)
        offset_in_bar = Mux(
            hit_bar2, h.address[: self.bar2_bytes.bit_length() - 1], h.address[: self.bar0_bytes.bit_length() - 1]
        )

        # --- the request being served -------------------------------------------------------------
        use_bar2 = Signal()
        offset = Signal(32)  # byte offset of the next dword inside the BAR
        dwords_left = Signal(11)
        bytes_left = Signal(13)  # the byte count of the next completion
        first = Signal()  # the next dword is the request's first
        first_be = Signal(4)
        last_be = Signal(4)
        requester_id = Signal(16)
        tag = Signal(8)
        tc = Signal(3)
        attr = Signal(2)
        piece_dwords = Signal(8)
        piece_left = Signal(8)
        answer_unsupported = Signal()

        host = HostPortSignature().create(path=("host",))
        for name, port in (("bar0", self.bar0), ("bar2", self.bar2)):
            selected = use_bar2 if name == "bar2" else ~use_bar2
            m.d.comb += [
                port.req.payload.eq(host.req.payload),
                port.req.valid.eq(host.req.valid & selected),
                port.wdata.payload.eq(host.wdata.payload),
                port.wdata.valid.eq(host.wdata.valid & selected),
                port.resp.ready.eq(host.resp.ready & selected),
            ]
            with m.If(selected):
                m.d.comb += [
                    host.req.ready.eq(port.req.ready),
                    host.wdata.ready.eq(port.wdata.ready),
                    host.resp.payload.eq(port.resp.payload),
                    host.resp.valid.eq(port.resp.valid),
                ]

        # The completion header for the piece being served (or the UR answer).
        ch = cpl.payload.header
        m.d.comb += [
            ch.type.eq(Type.CPL),
            ch.tc.eq(tc),
            ch.attr.eq(attr),
            ch.requester_id.eq(requester_id),
            ch.tag.eq(tag),
            ch.completer_id.eq(cfg.completer_id),
        ]

        # Reads are cut at the completion size, writes at the host port's longest burst.
        completion_bytes = Mux(cfg.max_payload_code == 0, 128, min(256, BURST_BYTES))
        read_piece = Signal(8)
        write_piece = Signal(8)
        m.d.comb += [
            read_piece.eq(
                Mux(
                    dwords_left < _dwords_to_boundary(offset, completion_bytes),
                    dwords_left,
                    _dwords_to_boundary(offset, completion_bytes),
                )
            ),
            write_piece.eq(
                Mux(
                    dwords_left < _dwords_to_boundary(offset, BURST_BYTES),
                    dwords_left,
                    _dwords_to_boundary(offset, BURST_BYTES),
                )
            ),
        ]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(req.valid):
                    m.d.sync += [
                        use_bar2.eq(hit_bar2),
                        offset.eq(Cat(Const(0, 2), offset_in_bar[2:])),
                        dwords_left.eq(tlp.payload_dwords(h)),
                        first.eq(1),
                        bytes_left.eq(tlp.request_byte_count(tlp.payload_dwords(h), h.first_be, h.last_be)),
                        first_be.eq(h.first_be),
                        last_be.eq(h.last_be),
                        requester_id.eq(h.requester_id),
                        tag.eq(h.tag),
                        tc.eq(h.tc),
                        attr.eq(h.attr),
                    ]
                    with m.If(served & ~tlp.has_data(h)):
                        m.d.comb += req.ready.eq(1)  # a read is a single beat
                        m.next = "READ_REQUEST"
                    with m.Elif(served):
                        m.next = "WRITE_REQUEST"
                    with m.Else():
                        m.d.comb += self.unsupported.eq(1)
                        m.d.sync += answer_unsupported.eq(~tlp.is_posted(h))
                        m.next = "DRAIN"

            with m.State("READ_REQUEST"):
                m.d.comb += [
                    host.req.valid.eq(1),
                    host.req.payload.addr.eq(offset),
                    host.req.payload.count.eq(read_piece),
                ]
                with m.If(host.req.ready):
                    m.d.sync += [piece_dwords.eq(read_piece), piece_left.eq(read_piece)]
                    m.next = "READ_DATA"

            with m.State("READ_DATA"):
                lead = Mux(first, tlp.first_enabled_byte(first_be), 0)
                m.d.comb += [
                    ch.fmt.eq(Fmt.DATA_3DW),
                    ch.length.eq(piece_dwords),
                    ch.status.eq(CplStatus.SC),
                    ch.byte_count.eq(bytes_left),
                    ch.lower_address.eq(offset[:7] | lead),
                    ch.ep.eq(host.resp.payload.error),  # only the first beat's header is sent
                    cpl.payload.data.eq(host.resp.payload.data),
                    cpl.payload.last.eq(piece_left == 1),
                    cpl.valid.eq(host.resp.valid),
                    host.resp.ready.eq(cpl.ready),
                ]
                with m.If(cpl.valid & cpl.ready):
                    m.d.sync += [offset.eq(offset + 4), dwords_left.eq(dwords_left - 1), piece_left.eq(piece_left - 1)]
                    with m.If(piece_left == 1):
                        m.d.sync += [first.eq(0), bytes_left.eq(bytes_left - (piece_dwords * 4 - lead))]
                        m.next = "READ_REQUEST"
                        with m.If(dwords_left == 1):
                            m.next = "IDLE"

            with m.State("WRITE_REQUEST"):
                m.d.comb += [
                    host.req.valid.eq(1),
                    host.req.payload.addr.eq(offset),
                    host.req.payload.write.eq(1),
                    host.req.payload.count.eq(write_piece),
                ]
                with m.If(host.req.ready):
                    m.d.sync += piece_left.eq(write_piece)
                    m.next = "WRITE_DATA"

            with m.State("WRITE_DATA"):
                m.d.comb += [
                    host.wdata.valid.eq(req.valid),
                    host.wdata.payload.data.eq(req.payload.data),
                    host.wdata.payload.be.eq(Mux(first, first_be, Mux(dwords_left == 1, last_be, 0xF))),
                    req.ready.eq(host.wdata.ready),
                ]
                with m.If(req.valid & req.ready):
                    m.d.sync += [
                        first.eq(0),
                        offset.eq(offset + 4),
                        dwords_left.eq(dwords_left - 1),
                        piece_left.eq(piece_left - 1),
                    ]
                    with m.If(piece_left == 1):
                        m.next = "WRITE_RESPONSE"

            with m.State("WRITE_RESPONSE"):
                # Posted: nobody hears of a refused write but the local side's error counter.
                m.d.comb += host.resp.ready.eq(1)
                with m.If(host.resp.valid):
                    m.next = "WRITE_REQUEST"
                    with m.If(dwords_left == 0):
                        m.next = "IDLE"

            with m.State("DRAIN"):
                m.d.comb += req.ready.eq(1)
                with m.If(req.valid & req.payload.last):
                    m.next = "UNSUPPORTED"
                    with m.If(~answer_unsupported):
                        m.next = "IDLE"

            with m.State("UNSUPPORTED"):
                m.d.comb += [
                    ch.fmt.eq(Fmt.NO_DATA_3DW),
                    ch.length.eq(0),
                    ch.status.eq(CplStatus.UR),
                    ch.byte_count.eq(4),
                    cpl.payload.last.eq(1),
                    cpl.valid.eq(1),
                ]
                with m.If(cpl.ready):
                    m.next = "IDLE"
        return m
