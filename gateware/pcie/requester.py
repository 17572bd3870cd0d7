"""DMA requester: the card's reads and writes of host memory, for the VIA engine.

The DMA side (:class:`DmaSignature`, seen from the engine) works in dwords:

* ``read_cmd`` (host byte address, dword aligned; 1..1024 dwords) is answered on ``read_data``
  with that many dwords in address order, ``last`` on the command's final one. Commands are
  answered in the order given; a dword whose read failed (completion timeout, a completion with
  an error status or poisoned) arrives with ``error`` set, so the framing never breaks.
* ``write_cmd`` (address, dwords, byte enables of the first and last dword; for a one-dword
  command only ``first_be`` counts) takes the next ``dwords`` beats of ``write_data``.

A read command is cut into memory reads that end at naturally aligned multiples of the max read
request size (which also keeps each inside a 4 KiB page); up to ``outstanding`` of them are in
flight. Read *n* gets slot ``n mod outstanding`` of a reassembly buffer (one max-read-request
each) and tag ``n mod 32``: completions, which may interleave across tags, are written at their
place in the slot (from their byte count), and slots are handed out in order, which restores the
command order. The tag's spare high bits tell a late completion of a timed-out read from the
slot's next read, so it is dropped. The oldest read times out ``completion_timeout`` cycles after
it was sent; the younger ones are checked when they become the oldest.

A write command is cut into memory writes of at most the max payload size, at the same kind of
aligned boundaries. Once a write command's last data beat has been taken, its last memory write
is ahead of any later read request on the link (the transmitter keeps TLP order), so a read
issued after it sees the data, as PCIe ordering promises.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from . import tlp
from .config import ConfigState
from .tlp import CplStatus, Type

TAG_BITS = 5  # without the extended tag field, tags are 5 bits

ReadCommand = data.StructLayout({"addr": 64, "dwords": 11})
ReadData = data.StructLayout({"data": 32, "last": 1, "error": 1})
WriteCommand = data.StructLayout({"addr": 64, "dwords": 11, "first_be": 4, "last_be": 4})
WriteData = data.StructLayout({"data": 32})


class DmaSignature(wiring.Signature):
    """The DMA engine's (initiator's) view of the requester."""

    def __init__(self):
        super().__init__(
            {
                "read_cmd": Out(stream.Signature(ReadCommand)),
                "read_data": In(stream.Signature(ReadData)),
                "write_cmd": Out(stream.Signature(WriteCommand)),
                "write_data": Out(stream.Signature(WriteData)),
            }
        )


def _dwords_to_boundary(addr, size_code):
    """Dwords from ``addr`` to the next multiple of ``128 << size_code`` bytes."""
    boundary = (Const(128, 13) << size_code)[:13]
    return ((boundary - (addr[:13] & (boundary - 1))) >> 2)[:11]


def _min(a, b):
    return Mux(a < b, a, b)


class Requester(wiring.Component):
    def __init__(self, *, outstanding=8, max_read_request_bytes=512, completion_timeout=50_000):
        if outstanding & (outstanding - 1) or not 1 <= outstanding < 1 << TAG_BITS:
            raise ValueError("outstanding must be a power of two below 32 (a spare tag bit)")
        self.outstanding = outstanding
        self.slot_dwords = max_read_request_bytes // 4
        self.completion_timeout = completion_timeout
        super().__init__(
            {
                "dma": In(DmaSignature()),
                "completion": In(tlp.tlp_beats()),
                "read_request": Out(tlp.tlp_beats()),
                "write_request": Out(tlp.tlp_beats()),
                "config": In(ConfigState),
                "timed_out": Out(1),  # pulses when a read is given up
            }
        )

    def elaborate(self, platform):
        m = Module()
        self._reads(m)
        self._writes(m)
        return m

    def _request_header(self, m, header, *, addr, dwords, first_be, last_be, write, tag=0):
        wide = addr[32:] != 0
        m.d.comb += [
            header.fmt.eq(Cat(wide, write, Const(0, 1))),
            header.type.eq(Type.MEM),
            header.length.eq(dwords),
            header.first_be.eq(first_be),
            header.last_be.eq(last_be),
            header.tag.eq(tag),
            header.requester_id.eq(self.config.completer_id),
            header.address.eq(addr),
        ]

    def _reads(self, m):
        n = self.outstanding
        slot_bits = (n - 1).bit_length()
        cmd, out, cpl, cfg = self.dma.read_cmd, self.dma.read_data, self.completion, self.config

        m.submodules.buffer = buffer = Memory(shape=32, depth=n * self.slot_dwords, init=[])
        write_port = buffer.write_port()
        read_port = buffer.read_port()

        timer_bits = max(self.completion_timeout.bit_length() + 1, 8)
        now = Signal(timer_bits)
        m.d.sync += now.eq(now + 1)

        def slots(width, name):
            return Array(Signal(width, name=f"slot{i}_{name}") for i in range(n))

        slot_active = slots(1, "active")
        slot_tag = slots(TAG_BITS, "tag")
        slot_dwords = slots(11, "dwords")
        slot_received = slots(11, "received")
        slot_error = slots(1, "error")
        slot_final = slots(1, "final")  # the last read of its command
        slot_sent_at = slots(timer_bits, "sent_at")

        # --- issue --------------------------------------------------------------------
        issued = Signal(TAG_BITS)  # reads sent so far, mod 32: the next tag
        delivered = Signal(TAG_BITS)  # reads handed out so far
        active = Signal()
        addr = Signal(64)
        left = Signal(11)
        piece = Signal(11)
        m.d.comb += [
            cmd.ready.eq(~active),
            piece.eq(_min(left, _dwords_to_boundary(addr, cfg.max_read_request_code))),
        ]
        with m.If(cmd.valid & cmd.ready):
            m.d.sync += [active.eq(1), addr.eq(Cat(Const(0, 2), cmd.payload.addr[2:])), left.eq(cmd.payload.dwords)]

        room = (issued - delivered)[:TAG_BITS] < n
        req = self.read_request
        self._request_header(
            m,
            req.payload.header,
            addr=addr,
            dwords=piece,
            first_be=0xF,
            last_be=Mux(piece == 1, 0, 0xF),
            write=0,
            tag=issued,
        )
        m.d.comb += [req.valid.eq(active & room & cfg.bus_master_enable), req.payload.last.eq(1)]
        issue_slot = issued[:slot_bits]
        with m.If(req.valid & req.ready):
            m.d.sync += [
                slot_active[issue_slot].eq(1),
                slot_tag[issue_slot].eq(issued),
                slot_dwords[issue_slot].eq(piece),
                slot_received[issue_slot].eq(0),
                slot_error[issue_slot].eq(0),
                slot_final[issue_slot].eq(piece == left),
                slot_sent_at[issue_slot].eq(now),
                issued.eq(issued + 1),
                addr.eq(addr + (piece << 2)),
                left.eq(left - piece),
            ]
            with m.If(piece == left):
                m.d.sync += active.eq(0)

        # --- completions -------------------------------------------------------------------
        # Always ready: the receiver must never wait for the requester (completions have
        # infinite credits at an endpoint).
        h = cpl.payload.header
        cpl_slot = h.tag[:slot_bits]
        ours = slot_active[cpl_slot] & (slot_tag[cpl_slot] == h.tag[:TAG_BITS])
        index = Signal(11)  # payload dword of the completion
        remaining_dwords = Mux(h.byte_count == 0, 1024, h.byte_count[2:])
        place = (slot_dwords[cpl_slot] - remaining_dwords + index)[:11]
        failed = (h.status != CplStatus.SC) | h.ep
        m.d.comb += cpl.ready.eq(1)
        with m.If(cpl.valid):
            m.d.sync += index.eq(Mux(cpl.payload.last, 0, index + 1))
            with m.If(ours & failed):
                m.d.sync += slot_error[cpl_slot].eq(1)
            # (A completion that claims more data than the read asked for stays inside its slot.)
            with m.Elif(ours & tlp.has_data(h) & ~slot_error[cpl_slot] & (place < slot_dwords[cpl_slot])):
                m.d.comb += [
                    write_port.addr.eq(cpl_slot * self.slot_dwords + place),
                    write_port.data.eq(cpl.payload.data),
                    write_port.en.eq(1),
                ]
                m.d.sync += slot_received[cpl_slot].eq(slot_received[cpl_slot] + 1)

        # --- completion timeout of the oldest read ---------------------------------------------
        head = delivered[:slot_bits]
        head_done = slot_error[head] | (slot_received[head] == slot_dwords[head])
        waited = (now - slot_sent_at[head])[:timer_bits]
        with m.If(slot_active[head] & ~head_done & (waited >= self.completion_timeout)):
            m.d.sync += slot_error[head].eq(1)
            m.d.comb += self.timed_out.eq(1)

        # --- hand-out in order, through the buffer's read port ------------------------------------
        fetch = Signal(11)
        out_valid = Signal()
        out_error = Signal()
        out_last = Signal()
        advance = ~out_valid | out.ready
        ready_to_fetch = slot_active[head] & head_done
        m.d.comb += [
            out.valid.eq(out_valid),
            out.payload.data.eq(Mux(out_error, 0, read_port.data)),
            out.payload.error.eq(out_error),
            out.payload.last.eq(out_last),
            read_port.addr.eq(head * self.slot_dwords + fetch),
            read_port.en.eq(advance & ready_to_fetch),
        ]
        with m.If(advance):
            m.d.sync += out_valid.eq(ready_to_fetch)
            with m.If(ready_to_fetch):
                is_last = fetch == slot_dwords[head] - 1
                m.d.sync += [
                    out_error.eq(slot_error[head]),
                    out_last.eq(slot_final[head] & is_last),
                    fetch.eq(fetch + 1),
                ]
                with m.If(is_last):
                    m.d.sync += [fetch.eq(0), slot_active[head].eq(0), delivered.eq(delivered + 1)]

    def _writes(self, m):
        cmd, beats, cfg = self.dma.write_cmd, self.dma.write_data, self.config
        req = self.write_request

        active = Signal()
        addr = Signal(64)
        left = Signal(11)  # dwords of the command not yet in a memory write
        cmd_first_be = Signal(4)
        cmd_last_be = Signal(4)
        single_dword = Signal()
        first_write = Signal()
        with m.If(cmd.valid & cmd.ready):
            m.d.sync += [
                active.eq(1),
                addr.eq(Cat(Const(0, 2), cmd.payload.addr[2:])),
                left.eq(cmd.payload.dwords),
                first_write.eq(1),
                cmd_first_be.eq(cmd.payload.first_be),
                cmd_last_be.eq(cmd.payload.last_be),
                single_dword.eq(cmd.payload.dwords == 1),
            ]

        # The memory write in progress (its header must stay put while its payload streams).
        write_addr = Signal(64)
        write_length = Signal(11)
        write_left = Signal(11)
        first_be = Signal(4)
        last_be = Signal(4)
        m.d.comb += cmd.ready.eq(~active)

        piece = _min(left, _dwords_to_boundary(addr, cfg.max_payload_code))
        ends_command = piece == left
        with m.If(active & (write_left == 0) & (left != 0) & cfg.bus_master_enable):
            leading = Mux(first_write, cmd_first_be, 0xF)
            trailing = Mux(ends_command & ~single_dword, cmd_last_be, 0xF)
            m.d.sync += [
                write_addr.eq(addr),
                write_length.eq(piece),
                write_left.eq(piece),
                first_be.eq(Mux(piece == 1, leading & trailing, leading)),
                last_be.eq(Mux(piece == 1, 0, trailing)),
                addr.eq(addr + (piece << 2)),
                left.eq(left - piece),
                first_write.eq(0),
            ]

        self._request_header(
            m, req.payload.header, addr=write_addr, dwords=write_length, first_be=first_be, last_be=last_be, write=1
        )
        m.d.comb += [
            req.valid.eq((write_left != 0) & beats.valid),
            req.payload.data.eq(beats.payload.data),
            req.payload.last.eq(write_left == 1),
            beats.ready.eq((write_left != 0) & req.ready),
        ]
        with m.If(req.valid & req.ready):
            m.d.sync += write_left.eq(write_left - 1)
            with m.If((write_left == 1) & (left == 0)):
                m.d.sync += active.eq(0)
