"""Receive side of the SCI ring link: deframing, CRC check, the alternating bit per source, the
incoming queue, and the echoes owed (the protocol: ``ring_link``'s docstring, "Receive").

Every symbol of ``rx`` is registered first (board I/O timing). A packet whose target is this node
is judged at its end; an own packet come back round the ring is removed; every other packet goes
out on ``passing`` (with its end, and whether it proved corrupt) for the bypass to forward.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base.coherence import NODE_ID_BITS
from numavia.base.sci_packet import (
    ABORT_RESIDUE,
    CRC_INIT,
    ECHO_HEADER_SYMBOLS,
    HEADER_SYMBOLS,
    SHORT_HEADER_SYMBOLS,
    SYMBOL_BITS,
    PacketType,
    carries_words_asked,
    max_packet_symbols,
    range_in_line,
    whole_header,
)

from .sci_layouts import HeaderLayout, SymbolLayout, crc16_step, data_block_first, header_symbol

#: A symbol of a packet that is not this node's, or (``end`` set) the end of one: whether it
#: ``corrupt`` (not intact, and not aborted by its sender) is known there.
PassingLayout = data.StructLayout({"data": SYMBOL_BITS, "first": 1, "end": 1, "corrupt": 1})
#: An echo owed to the sender of a packet received.
EchoLayout = data.StructLayout({"target": NODE_ID_BITS, "seq": 1, "busy": 1})
#: An intact echo received for this node.
ReceivedEchoLayout = data.StructLayout({"source": NODE_ID_BITS, "seq": 1, "status": HeaderLayout["status"].shape})

#: Events the receive side counts (ring counter names), each at most once a cycle.
RECEIVE_EVENTS = ("RX_PACKETS", "RX_ECHOES", "CRC_ERRORS", "DUPLICATES", "BUSY_SENT", "ECHO_OVERFLOWS", "UNDELIVERABLE")


def admission_signature(in_depth, out_depth):
    """Between receive and transmit: replies owed for requests taken in (each has an outgoing slot
    reserved), the free outgoing slots, and a reply being queued."""
    return wiring.Signature({"owed": Out(range(in_depth + 2)), "free": In(range(out_depth + 1)), "reply_queued": In(1)})


class RingReceive(wiring.Component):
    """Parameters: ``in_depth`` packets of the incoming queue (a header and a line each, in
    :mod:`amaranth.lib.memory`), ``out_depth`` of the outgoing one (for the admission of requests),
    ``echo_depth`` echoes waiting for the output, ``line_bytes`` of a packet's data block."""

    def __init__(self, *, in_depth, out_depth, echo_depth, line_bytes):
        self.in_depth = in_depth
        self.echo_depth = echo_depth
        self.data_words = line_bytes // 4
        self.max_packet = max_packet_symbols(line_bytes)
        super().__init__(
            {
                "rx": In(SymbolLayout),
                "node_id": In(NODE_ID_BITS),
                "enable": In(1),
                "recv_header": Out(stream.Signature(HeaderLayout)),
                "recv_data": Out(stream.Signature(32)),
                "passing": Out(stream.Signature(PassingLayout, always_ready=True)),
                "echo": Out(stream.Signature(EchoLayout)),
                "echo_received": Out(stream.Signature(ReceivedEchoLayout, always_ready=True)),
                "admission": Out(admission_signature(in_depth, out_depth)),
                "in_count": Out(range(in_depth + 1)),
                "echo_level": Out(range(echo_depth + 1)),
                "events": Out(data.StructLayout({name: 1 for name in RECEIVE_EVENTS})),
            }
        )

    def elaborate(self, platform):
        m = Module()
        DATA_WORDS, MAX_PACKET_SYMBOLS = self.data_words, self.max_packet
        DATA_SYMBOLS = 2 * DATA_WORDS
        short_packet = SHORT_HEADER_SYMBOLS + 1
        echo_packet = ECHO_HEADER_SYMBOLS + 1
        long_extra = HEADER_SYMBOLS - SHORT_HEADER_SYMBOLS  # an uncached write's byte enables
        word_bits = (DATA_WORDS - 1).bit_length()
        events = self.events

        # Headers in an asynchronous-read memory (LUT RAM) so the head is readable at once; data
        # blocks in a synchronous-read one (block RAM), address = slot * line words + word.
        m.submodules.headers = in_headers = memory.Memory(shape=HeaderLayout, depth=self.in_depth, init=[])
        m.submodules.data = in_data = memory.Memory(shape=32, depth=self.in_depth * DATA_WORDS, init=[])
        m.submodules.echoes = echoes = fifo.SyncFIFO(width=EchoLayout.size, depth=self.echo_depth)
        m.d.comb += [
            self.echo.valid.eq(echoes.r_rdy),
            self.echo.payload.eq(echoes.r_data),
            echoes.r_en.eq(self.echo.ready),
            self.echo_level.eq(echoes.level),
        ]

        # --- Framing and CRC -----------------------------------------------------------------------
        rx = Signal(SymbolLayout)
        m.d.sync += rx.eq(self.rx)  # register the ring input (board I/O timing)
        in_packet = Signal()
        m.d.sync += in_packet.eq(rx.frame)
        start = rx.frame & ~in_packet
        end = ~rx.frame & in_packet

        # Symbol index within the packet; saturates one past the longest packet so an over-long
        # frame still reads as "wrong length".
        count_limit = MAX_PACKET_SYMBOLS + 1
        rx_count = Signal(range(count_limit + 1))
        index = Signal.like(rx_count)
        m.d.comb += index.eq(Mux(start, 0, rx_count))
        with m.If(rx.frame):
            m.d.sync += rx_count.eq(Mux(index == count_limit, count_limit, index + 1))

        # Routing fields of symbol 0 and the command of symbol 1, read through the header layout
        # (never by bit position).
        first = HeaderLayout(Cat(Const(0, HeaderLayout.size - SYMBOL_BITS), rx.data))
        second = HeaderLayout(Cat(Const(0, HeaderLayout.size - 2 * SYMBOL_BITS), rx.data, Const(0, SYMBOL_BITS)))
        sixth = HeaderLayout(Cat(Const(0, HeaderLayout.size - 6 * SYMBOL_BITS), rx.data, Const(0, 5 * SYMBOL_BITS)))
        first_is_echo = first.ptype == PacketType.ECHO
        expected = Signal(range(MAX_PACKET_SYMBOLS + 1))  # with a short header, from symbol 0
        m.d.comb += expected.eq(
            Mux(first_is_echo, echo_packet, Mux(first.has_data, short_packet + DATA_SYMBOLS, short_packet))
        )
        expected_q = Signal.like(expected)  # for the rest of the packet; symbol 1 may lengthen it
        long_header = Signal()  # symbols 6-9 are byte enables (sci_packet.header_symbols)
        header_length = Mux(long_header, HEADER_SYMBOLS, SHORT_HEADER_SYMBOLS)
        # An uncached read's answer carries only the words asked for (symbol 5 names them), which
        # go to their places in the slot's line; a range outside the line makes it malformed.
        words_asked_q = Signal()
        first_word = Signal(word_bits)
        range_ok_q = Signal()

        # Residue over every symbol including the CRC: zero for an intact packet. Whether it is zero
        # (or an aborted packet's), and whether the length is the one symbol 0 announced, are
        # registered with each symbol, so the verdict in the cycle after the last symbol starts
        # from flip-flops, not from a 16-bit compare.
        rx_crc = Signal(16)
        crc_next = Signal(16)
        crc_zero = Signal()
        crc_aborted = Signal()
        length_ok = Signal()
        m.d.comb += crc_next.eq(crc16_step(Mux(start, CRC_INIT, rx_crc), rx.data))
        with m.If(rx.frame):
            m.d.sync += [
                rx_crc.eq(crc_next),
                crc_zero.eq(crc_next == 0),
                crc_aborted.eq(crc_next == ABORT_RESIDUE),
                length_ok.eq(index + 1 == Mux(start, expected, expected_q)),
            ]

        # --- Disposition, decided by symbol 0 -------------------------------------------------------
        for_me = self.enable & (first.target == self.node_id)
        came_back = self.enable & (first.source == self.node_id) & ~for_me
        consume_q = Signal()  # packet for this node
        pass_q = Signal()  # packet for the bypass
        consume_now = Mux(start, for_me, consume_q)
        pass_now = Mux(start, ~(for_me | came_back), pass_q)

        type_ok_q = Signal()  # ptype is one of REQUEST, RESPONSE, ECHO
        is_echo_q = Signal()
        duplicate_q = Signal()
        room_q = Signal()  # the incoming queue had a free slot when the packet began
        is_request_q = Signal()
        has_data_q = Signal()
        # Replies owed: requests stored in the incoming queue (or being handled) whose answer has
        # not been queued yet. Each has an outgoing slot reserved, so the sequencer can always
        # answer and the incoming queue always drains: requests cannot deadlock two nodes whose
        # queues are full of requests for each other.
        owed = self.admission.owed
        rx_last_seq = Signal(1 << NODE_ID_BITS, init=~0)  # per source; all ones: "before seq 0"
        in_count = self.in_count
        in_tail = Signal(range(self.in_depth))
        in_head = Signal(range(self.in_depth))

        with m.If(start):
            m.d.sync += [
                consume_q.eq(for_me),
                pass_q.eq(~(for_me | came_back)),
                expected_q.eq(expected),
                type_ok_q.eq(first.ptype.matches(*PacketType)),
                is_echo_q.eq(first_is_echo),
                duplicate_q.eq(rx_last_seq.bit_select(first.source, 1) == first.seq),
                room_q.eq(
                    (in_count != self.in_depth) & ((first.ptype != PacketType.REQUEST) | (self.admission.free > owed))
                ),
                is_request_q.eq(first.ptype == PacketType.REQUEST),
                has_data_q.eq(first.has_data),
                long_header.eq(0),
                words_asked_q.eq(0),
                first_word.eq(0),
            ]
        with m.Elif(rx.frame & (index == 1)):
            with m.If(whole_header(is_request_q, second.cmd)):
                m.d.sync += [long_header.eq(1), expected_q.eq(expected_q + long_extra)]
            m.d.sync += words_asked_q.eq(carries_words_asked(~is_request_q & ~is_echo_q, second.cmd) & has_data_q)
        with m.Elif(rx.frame & (index == SHORT_HEADER_SYMBOLS - 1) & words_asked_q):
            m.d.sync += [
                expected_q.eq(short_packet + 2 * sixth.count),
                first_word.eq(sixth.word),
                range_ok_q.eq(range_in_line(sixth.word, sixth.count, DATA_WORDS)),
            ]
        m.d.comb += events.UNDELIVERABLE.eq(start & came_back)

        intact = crc_zero & length_ok & type_ok_q & (range_ok_q | ~words_asked_q)
        m.d.comb += [
            self.passing.valid.eq((rx.frame & pass_now) | (end & pass_q)),
            self.passing.payload.data.eq(Mux(end, 0, rx.data)),
            self.passing.payload.first.eq(start),
            self.passing.payload.end.eq(end),
            # An aborted packet (its sender's data came too late) is resent at once: not debris.
            self.passing.payload.corrupt.eq(end & ~intact & ~crc_aborted),
        ]

        # --- Packets for this node ----------------------------------------------------------------
        # Header symbols into a register, data words into the tail slot of the incoming queue as
        # they arrive (committed only if the packet proves intact).
        # A short header's byte enables read as 0.
        rx_header = Signal(HeaderLayout)
        with m.If(rx.frame & consume_now):
            with m.Switch(index):
                for i in range(HEADER_SYMBOLS):
                    with m.Case(i):
                        if i == 0:
                            m.d.sync += rx_header.be.eq(0)
                        if i < SHORT_HEADER_SYMBOLS:
                            m.d.sync += header_symbol(rx_header.as_value(), i).eq(rx.data)
                        else:
                            with m.If(long_header):
                                m.d.sync += header_symbol(rx_header.as_value(), i).eq(rx.data)
        data_index = Signal(range(DATA_SYMBOLS))
        m.d.comb += data_index.eq(index - header_length)
        high_half = Signal(16)
        in_data_w = in_data.write_port()
        in_data_in_range = (index >= header_length) & (index < header_length + DATA_SYMBOLS)
        with m.If(rx.frame & consume_q & in_data_in_range & ~data_index[0]):
            m.d.sync += high_half.eq(rx.data)
        m.d.comb += [
            in_data_w.addr.eq(Cat((data_index[1:] + first_word)[:word_bits], in_tail)),
            in_data_w.data.eq(Cat(rx.data, high_half)),
            # The tail slot is free whenever there was room, so writing it is harmless even if
            # the packet is later refused.
            in_data_w.en.eq(rx.frame & consume_q & room_q & in_data_in_range & data_index[0]),
        ]

        # End of a packet for this node: the verdict.
        verdict = end & consume_q
        commit = Signal()
        echo_push = Signal()
        echo_busy = Signal()
        packet_verdict = verdict & intact & ~is_echo_q
        m.d.comb += [
            self.echo_received.valid.eq(verdict & intact & is_echo_q),
            self.echo_received.payload.source.eq(rx_header.source),
            self.echo_received.payload.seq.eq(rx_header.seq),
            self.echo_received.payload.status.eq(rx_header.status),
            echo_push.eq(packet_verdict & echoes.w_rdy),
            commit.eq(echo_push & ~duplicate_q & room_q),
            echo_busy.eq(~duplicate_q & ~room_q),
            events.CRC_ERRORS.eq(verdict & ~intact),
            events.RX_ECHOES.eq(self.echo_received.valid),
            events.ECHO_OVERFLOWS.eq(packet_verdict & ~echoes.w_rdy),
            events.DUPLICATES.eq(echo_push & duplicate_q),
            events.RX_PACKETS.eq(commit),
            events.BUSY_SENT.eq(echo_push & echo_busy),
        ]
        echo_in = Signal(EchoLayout)
        m.d.comb += [
            echo_in.target.eq(rx_header.source),
            echo_in.seq.eq(rx_header.seq),
            echo_in.busy.eq(echo_busy),
            echoes.w_data.eq(echo_in),
            echoes.w_en.eq(echo_push),
        ]

        in_headers_w = in_headers.write_port()
        m.d.comb += [
            in_headers_w.addr.eq(in_tail),
            in_headers_w.data.eq(rx_header),
            in_headers_w.en.eq(commit),
        ]
        with m.If(commit):
            m.d.sync += [
                rx_last_seq.bit_select(rx_header.source, 1).eq(rx_header.seq),
                in_tail.eq(Mux(in_tail == self.in_depth - 1, 0, in_tail + 1)),
            ]
        reply_queued = self.admission.reply_queued
        m.d.sync += owed.eq(owed + (commit & is_request_q) - (reply_queued & (owed != 0)))

        # --- Incoming queue to the sequencer --------------------------------------------------------
        # A data block is handed over from its first word on the wire, wrapping round the line: an
        # uncached read's answer from the word asked for (sci_layouts.data_block_first).
        in_pop = Signal()
        in_word = Signal(word_bits)
        in_last = Signal(word_bits)  # the word handed over last
        in_in_data = Signal()  # the head packet's header is taken; its data words go out now
        in_headers_r = in_headers.read_port(domain="comb")
        in_data_r = in_data.read_port()
        # A packet is offered from the cycle after its verdict, from the queue: the verdict (the
        # CRC, the length, the room) does not reach the sequencer's decisions in its own cycle.
        head_header = Signal(HeaderLayout)
        m.d.comb += [
            in_headers_r.addr.eq(in_head),
            head_header.eq(in_headers_r.data),
            self.recv_header.payload.eq(head_header),
            self.recv_header.valid.eq((in_count != 0) & ~in_in_data),
            self.recv_data.payload.eq(in_data_r.data),
            self.recv_data.valid.eq(in_in_data),
        ]
        # Synchronous read, addressed one cycle ahead: the head packet's first word while its header
        # waits, then the word after an accepted one.
        in_read_word = Signal(word_bits)
        head_first_word = data_block_first(head_header)
        with m.If(~in_in_data):
            m.d.comb += in_read_word.eq(head_first_word)
        with m.Elif(self.recv_data.ready):
            m.d.comb += in_read_word.eq(in_word + 1)
        with m.Else():
            m.d.comb += in_read_word.eq(in_word)
        m.d.comb += in_data_r.addr.eq(Cat(in_read_word, in_head))
        with m.If(self.recv_header.valid & self.recv_header.ready):
            with m.If(head_header.has_data):
                m.d.sync += [in_in_data.eq(1), in_word.eq(head_first_word), in_last.eq(head_first_word - 1)]
            with m.Else():
                m.d.comb += in_pop.eq(1)
        with m.If(self.recv_data.valid & self.recv_data.ready):
            m.d.sync += in_word.eq(in_word + 1)
            with m.If(in_word == in_last):
                m.d.sync += in_in_data.eq(0)
                m.d.comb += in_pop.eq(1)
        with m.If(in_pop):
            m.d.sync += in_head.eq(Mux(in_head == self.in_depth - 1, 0, in_head + 1))
        m.d.sync += in_count.eq(in_count + commit - in_pop)
        return m
