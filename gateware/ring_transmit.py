"""Transmit side of the SCI ring link: the outgoing slots the sequencer fills, the output
arbitration between forwarded packets, echoes and own packets, and the framing of own packets
with their CRC (the protocol: ``ring_link``'s docstring, "Transmit" and "Output").

A packet is queued with its header (cut-through): the retry side may have it sent while its data
words are still being written. The sequencer writes a slot's data block as it goes on the wire:
the whole line, or the words an uncached read's answer carries (``sci_packet.data_range``). Each
word is checked to be written before it is sent; one that is not ends the copy at once with its
CRC inverted (``sci_packet.abort``), reported on ``sent`` as aborted.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base.coherence import NODE_ID_BITS
from numavia.base.sci_packet import (
    ABORT_CRC_XOR,
    CRC_INIT,
    ECHO_HEADER_SYMBOLS,
    HEADER_SYMBOLS,
    SHORT_HEADER_SYMBOLS,
    SYMBOL_BITS,
    EchoStatus,
    PacketType,
    max_packet_symbols,
    whole_header,
)

from .ring_bypass import BypassEntry
from .ring_receive import EchoLayout, admission_signature
from .round_robin import first_set
from .sci_layouts import HeaderLayout, SymbolLayout, crc16_step, data_block_words, header_symbol

#: Events the transmit side counts (ring counter names and ERRORS fields), each at most once a cycle.
TRANSMIT_EVENTS = ("TX_PACKETS", "TX_ECHOES", "TX_UNDERRUNS", "BYPASS_UNDERRUN")


def index_bits(count):
    """Bits of an index into ``count`` things (at least one)."""
    return max(1, (count - 1).bit_length())


def queued_layout(out_depth):
    """A packet queued in a slot, for its target."""
    return data.StructLayout({"slot": index_bits(out_depth), "target": NODE_ID_BITS})


def send_layout(out_depth, contexts):
    """The packet of a retry context to send (again), with the alternating bit it carries."""
    return data.StructLayout({"context": index_bits(contexts), "slot": index_bits(out_depth), "seq": 1})


def sent_layout(contexts):
    """A context's packet has gone out whole, or (``aborted``) was cut short for want of data."""
    return data.StructLayout({"context": index_bits(contexts), "aborted": 1})


def slots_signature(out_depth):
    """The outgoing slots as the retry side sees them: slots it frees, the slot being filled
    (``filling``), and the header of a slot (``lookup``) for a packet given up."""
    slot = index_bits(out_depth)
    return wiring.Signature(
        {
            "freed": Out(out_depth),
            "filling": In(1),
            "fill_slot": In(slot),
            "lookup": Out(slot),
            "header": In(HeaderLayout),
        }
    )


class _Output(enum.Enum, shape=2):
    IDLE = 0  # emits an idle symbol or starts the next packet (the arbitration point)
    BYPASS = 1  # popping the bypass FIFO up to the packet's end marker
    OWN = 2  # an echo or a queued packet, from the transmit header register
    GAP = 3  # the idle symbol after an own packet


class RingTransmit(wiring.Component):
    """Parameters: ``out_depth`` slots (a header and a line each, in :mod:`amaranth.lib.memory`),
    ``in_depth`` of the incoming queue (for the admission of requests), ``contexts`` of the retry
    side, ``line_bytes`` of a packet's data block, and ``bypass_threshold``: above that many
    entries in the bypass FIFO the output forwards only (``RingLink`` explains the bound)."""

    def __init__(self, *, out_depth, in_depth, contexts, line_bytes, bypass_threshold, bypass_depth):
        self.out_depth = out_depth
        self.contexts = contexts
        self.data_words = line_bytes // 4
        self.max_packet = max_packet_symbols(line_bytes)
        self.bypass_threshold = bypass_threshold
        super().__init__(
            {
                "tx": Out(SymbolLayout),
                "node_id": In(NODE_ID_BITS),
                "enable": In(1),
                "send_header": In(stream.Signature(HeaderLayout)),
                "send_data": In(stream.Signature(32)),
                "bypass": In(stream.Signature(BypassEntry)),
                "bypass_level": In(range(bypass_depth + 1)),
                "echo": In(stream.Signature(EchoLayout)),
                "admission": In(admission_signature(in_depth, out_depth)),
                "queued": Out(stream.Signature(queued_layout(out_depth), always_ready=True)),
                "send": In(stream.Signature(send_layout(out_depth, contexts))),
                "sent": Out(stream.Signature(sent_layout(contexts), always_ready=True)),
                "slots": In(slots_signature(out_depth)),
                "events": Out(data.StructLayout({name: 1 for name in TRANSMIT_EVENTS})),
            }
        )

    def elaborate(self, platform):
        m = Module()
        DATA_WORDS, MAX_PACKET_SYMBOLS = self.data_words, self.max_packet
        word_bits = (DATA_WORDS - 1).bit_length()
        slot_bits = index_bits(self.out_depth)
        events = self.events

        # Headers in an asynchronous-read memory (LUT RAM) so a header is readable in the cycle it
        # is needed; data blocks in a synchronous-read one (block RAM), address = slot * words + word.
        m.submodules.headers = out_headers = memory.Memory(shape=HeaderLayout, depth=self.out_depth, init=[])
        m.submodules.data = out_data = memory.Memory(shape=32, depth=self.out_depth * DATA_WORDS, init=[])

        # --- Filling slots from the sequencer -------------------------------------------------------
        free_slots = Signal(self.out_depth, init=~0)
        any_free, free_slot = first_set(m, "free_slot", [free_slots[i] for i in range(self.out_depth)])
        filling = self.slots.filling  # header taken, data words being written
        fill_slot = self.slots.fill_slot
        fill_word = Signal(word_bits)
        fill_last = Signal(word_bits)  # the last word of the data block being written
        allocated = Signal(self.out_depth)  # one-hot slot taken this cycle
        free_count = self.admission.free

        out_headers_w = out_headers.write_port()
        out_data_w = out_data.write_port()
        header_taken = self.send_header.valid & self.send_header.ready
        is_reply = self.send_header.payload.ptype == PacketType.RESPONSE
        # The count is a register kept beside the mask (not the mask's popcount): the request
        # admission compares it on the path from the ring's verdict into the sequencer.
        free_count_q = Signal(range(self.out_depth + 1), init=self.out_depth)
        freed_count = sum(self.slots.freed[i] for i in range(self.out_depth))
        m.d.sync += free_count_q.eq(free_count_q - header_taken + freed_count)
        m.d.comb += [
            free_count.eq(free_count_q),
            self.admission.reply_queued.eq(header_taken & is_reply),
        ]
        # A reply may take any free slot; a request only one not reserved for owed replies (with
        # one more kept back for a request being received right now).
        may_queue = is_reply | (free_count > self.admission.owed + 1)
        m.d.comb += [
            self.send_header.ready.eq(~filling & any_free & may_queue),
            self.send_data.ready.eq(filling),
            out_headers_w.addr.eq(free_slot),
            out_headers_w.data.eq(self.send_header.payload),
            out_headers_w.en.eq(header_taken),
            out_data_w.addr.eq(Cat(fill_word, fill_slot)),
            out_data_w.data.eq(self.send_data.payload),
            out_data_w.en.eq(self.send_data.valid & self.send_data.ready),
        ]
        # Queued with its header: the data words follow while it may already be going out.
        m.d.comb += [
            self.queued.valid.eq(header_taken),
            self.queued.payload.slot.eq(free_slot),
            self.queued.payload.target.eq(self.send_header.payload.target),
        ]
        with m.If(header_taken):
            m.d.comb += allocated.eq(Const(1, self.out_depth) << free_slot)
            with m.If(self.send_header.payload.has_data):
                m.d.sync += [
                    filling.eq(1),
                    fill_slot.eq(free_slot),
                    fill_word.eq(0),
                    fill_last.eq(data_block_words(self.send_header.payload, DATA_WORDS) - 1),
                ]
        with m.If(self.send_data.valid & self.send_data.ready):
            m.d.sync += fill_word.eq(fill_word + 1)
            with m.If(fill_word == fill_last):
                m.d.sync += filling.eq(0)
        m.d.sync += free_slots.eq((free_slots & ~allocated) | self.slots.freed)

        out_headers_lookup = out_headers.read_port(domain="comb")
        m.d.comb += [out_headers_lookup.addr.eq(self.slots.lookup), self.slots.header.eq(out_headers_lookup.data)]

        # --- Output arbitration and serialiser ----------------------------------------------------------
        out_state = Signal(_Output)
        last_was_own = Signal()
        tx = Signal(SymbolLayout)  # the tx register
        m.d.comb += self.tx.eq(tx)
        tx_shift = Signal(HeaderLayout.size)  # header symbols still to send, next one on top
        tx_index = Signal(range(MAX_PACKET_SYMBOLS))
        tx_length = Signal(range(MAX_PACKET_SYMBOLS + 1))
        tx_crc = Signal(16)
        tx_long = Signal()  # the whole header, byte enables included (sci_packet.header_symbols)
        tx_header_length = Mux(tx_long, HEADER_SYMBOLS, SHORT_HEADER_SYMBOLS)
        tx_is_packet = Signal()  # an own queued packet (not an echo)
        tx_context = Signal.like(self.send.payload.context)
        tx_slot = Signal(slot_bits)

        out_headers_tx = out_headers.read_port(domain="comb")
        packet_header = Signal(HeaderLayout)
        m.d.comb += [
            out_headers_tx.addr.eq(self.send.payload.slot),
            packet_header.eq(out_headers_tx.data),
            packet_header.source.eq(self.node_id),
            packet_header.seq.eq(self.send.payload.seq),
        ]
        echo_head = self.echo.payload
        echo_header = Signal(HeaderLayout)
        m.d.comb += [
            echo_header.target.eq(echo_head.target),
            echo_header.source.eq(self.node_id),
            echo_header.ptype.eq(PacketType.ECHO),
            echo_header.seq.eq(echo_head.seq),
            echo_header.status.eq(Mux(echo_head.busy, EchoStatus.BUSY, EchoStatus.ACCEPTED)),
        ]

        out_data_r = out_data.read_port()
        # Synchronous read addressed for the next symbol: valid when a data symbol is due, if its
        # word had been written when it was addressed (a write is not seen by a read in its cycle).
        tx_word = Signal(word_bits)
        tx_word_written = Signal()
        m.d.comb += [
            tx_word.eq((tx_index + 1 - tx_header_length)[1 : 1 + word_bits]),
            out_data_r.addr.eq(Cat(tx_word, tx_slot)),
        ]
        m.d.sync += tx_word_written.eq(~filling | (fill_slot != tx_slot) | (fill_word > tx_word))

        bypass_head = self.bypass.payload
        echo_pending = self.enable & self.echo.valid
        packet_pending = self.enable & self.send.valid
        bypass_pending = self.bypass.valid & ~bypass_head.end
        force_bypass = self.bypass_level > self.bypass_threshold
        tx_start_packet = Signal()
        tx_start_echo = Signal()
        tx_end_packet = Signal()
        tx_underrun = Signal()  # a data word due is not written: the packet ends here, aborted

        def start_own(header, length, long=0):
            symbol0 = header_symbol(header.as_value(), 0)
            m.d.sync += [
                tx_long.eq(long),
                tx.data.eq(symbol0),
                tx.frame.eq(1),
                tx_shift.eq(header.as_value() << SYMBOL_BITS),
                tx_index.eq(1),
                tx_length.eq(length),
                tx_crc.eq(crc16_step(Const(CRC_INIT, 16), symbol0)),
                last_was_own.eq(1),
                out_state.eq(_Output.OWN),
            ]

        m.d.sync += [tx.frame.eq(0), tx.data.eq(0)]
        with m.Switch(out_state):
            with m.Case(_Output.IDLE):
                with m.If(self.bypass.valid & bypass_head.end):
                    m.d.comb += self.bypass.ready.eq(1)  # a stray end marker: nothing to send
                with m.Elif(bypass_pending & (force_bypass | last_was_own | ~(echo_pending | packet_pending))):
                    m.d.comb += self.bypass.ready.eq(1)
                    m.d.sync += [
                        tx.data.eq(bypass_head.data),
                        tx.frame.eq(1),
                        last_was_own.eq(0),
                        out_state.eq(_Output.BYPASS),
                    ]
                with m.Elif(echo_pending):
                    m.d.comb += [self.echo.ready.eq(1), tx_start_echo.eq(1)]
                    start_own(echo_header, ECHO_HEADER_SYMBOLS + 1)
                    m.d.sync += tx_is_packet.eq(0)
                with m.Elif(packet_pending):
                    m.d.comb += [self.send.ready.eq(1), tx_start_packet.eq(1)]
                    long = whole_header(packet_header.ptype == PacketType.REQUEST, packet_header.cmd)
                    header_length = Mux(long, HEADER_SYMBOLS, SHORT_HEADER_SYMBOLS)
                    start_own(packet_header, header_length + 2 * data_block_words(packet_header, DATA_WORDS) + 1, long)
                    m.d.sync += [
                        tx_is_packet.eq(1),
                        tx_context.eq(self.send.payload.context),
                        tx_slot.eq(self.send.payload.slot),
                    ]
            with m.Case(_Output.BYPASS):
                m.d.comb += self.bypass.ready.eq(1)
                with m.If(~self.bypass.valid):
                    # Cannot happen: a forwarded packet arrives one symbol per cycle and its
                    # first symbol was in the FIFO before we began to send it.
                    m.d.comb += events.BYPASS_UNDERRUN.eq(1)
                    m.d.sync += out_state.eq(_Output.IDLE)
                with m.Elif(bypass_head.end):
                    m.d.sync += out_state.eq(_Output.IDLE)  # this idle cycle is the gap
                with m.Else():
                    m.d.sync += [tx.data.eq(bypass_head.data), tx.frame.eq(1)]
            with m.Case(_Output.OWN):
                symbol = Signal(SYMBOL_BITS)
                with m.If(tx_index == tx_length - 1):
                    m.d.comb += symbol.eq(tx_crc)
                    m.d.sync += out_state.eq(_Output.GAP)
                    m.d.comb += tx_end_packet.eq(tx_is_packet)
                with m.Elif(tx_index < tx_header_length):
                    m.d.comb += symbol.eq(header_symbol(tx_shift, 0))
                with m.Elif(~tx_word_written):
                    m.d.comb += [symbol.eq(tx_crc ^ ABORT_CRC_XOR), tx_underrun.eq(1)]
                    m.d.sync += out_state.eq(_Output.GAP)
                with m.Elif(tx_index[0]):  # both header lengths are even: odd symbols are low halves
                    m.d.comb += symbol.eq(out_data_r.data[:16])
                with m.Else():
                    m.d.comb += symbol.eq(out_data_r.data[16:])
                m.d.sync += [
                    tx.data.eq(symbol),
                    tx.frame.eq(1),
                    tx_shift.eq(tx_shift << SYMBOL_BITS),
                    tx_index.eq(tx_index + 1),
                    tx_crc.eq(crc16_step(tx_crc, symbol)),
                ]
            with m.Case(_Output.GAP):
                m.d.sync += out_state.eq(_Output.IDLE)
        m.d.comb += [
            self.sent.valid.eq(tx_end_packet | tx_underrun),
            self.sent.payload.context.eq(tx_context),
            self.sent.payload.aborted.eq(tx_underrun),
            events.TX_PACKETS.eq(tx_start_packet),
            events.TX_ECHOES.eq(tx_start_echo),
            events.TX_UNDERRUNS.eq(tx_underrun),
        ]
        return m
