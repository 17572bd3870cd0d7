"""SCI ring link: bypass, receive and transmit of ring packets, with the card's incoming and outgoing
queues (the paper's dual-port memory). Link-level reliability only: what the packets mean is the
sequencer's business.

Ring side
    ``rx``/``tx`` carry one :data:`SymbolLayout` per cycle; ``frame`` is high on every symbol of a
    packet and low for at least one cycle between packets (that low cycle is the only delimiter).
    ``tx`` is a register output. Packets whose ``target`` is not this node pass through a bypass FIFO
    unchanged (cut-through: ``rx`` to ``tx`` in :data:`BYPASS_LATENCY` cycles when the output is
    idle). Until ``enable`` is high the node bypasses everything and sends nothing.

Receive
    A packet for this node is checked (CRC, length, type). Bad: dropped and counted, no echo (the
    sender times out). An echo goes to the transmit side. A good packet is offered on ``recv_header``
    in the cycle of its verdict when the incoming queue is empty. A request/response is judged by the
    link-level alternating bit of its (source, this node) pair: same bit as the last packet accepted
    from that source means duplicate (echo ACCEPTED again, not stored); otherwise it is stored if the
    incoming queue had room when the packet began (echo ACCEPTED) or refused (echo BUSY). A packet
    whose source is this node and target is not has been round the ring untaken: it is removed.

Transmit
    The sequencer writes a header (``send_header``; the link fills in ``source`` and ``seq``) then,
    if ``has_data``, exactly one line of words (``send_data``) into one of ``out_depth`` slots.
    The packet is queued with its header (cut-through): it may go out while its words are still
    coming, each word checked to be written before it is sent. A word that is not (the producer fell
    behind) ends that copy at once with its CRC inverted (``sci_packet.abort``; counted in
    TX_UNDERRUNS): its target drops it as corrupt, and the packet goes again, whole, as soon as its
    last word is in. An aborted copy is not an attempt (it counts towards nothing below).
    Up to ``max_outstanding`` packets are in flight (sent, awaiting their echo), at most one per
    target, so packets to one target leave in the order they were queued and one alternating bit
    per target suffices. ACCEPTED: the slot is freed and the target's bit toggles. BUSY: resend after
    ``BUSY_DELAY`` cycles (BUSY proves the receiver alive, so it never counts as a failed attempt:
    full queues back-pressure, nothing is dropped). No echo within ``ECHO_TIMEOUT`` cycles: resend;
    after ``MAX_ATTEMPTS`` consecutive transmissions without any echo the packet is given up and
    its header appears on ``failed`` (an ACCEPTED echo arriving before the sequencer takes that
    report still completes it). A given-up packet does not toggle its target's alternating bit.

Output
    At packet boundaries the output chooses between the bypass FIFO and own traffic (echoes before
    queued packets). When both wait they alternate, so neither starves while the bypass FIFO is at
    or below its threshold; above it, bypass is forced. See ``RingLink.__init__`` for why the FIFO
    never overflows.

Scrubber
    Cut-through forwarding cannot take back a packet whose corruption is found at its end. Most
    corrupt packets are still removed (by their target, or by their source when they come back),
    but one whose target and source fields were both hit, or the debris of a flipped ``frame`` bit,
    could circle forever. Each node remembers the first symbol of the last corrupt packet it
    forwarded and removes the next packet starting with that symbol seen within
    ``ECHO_TIMEOUT / 2`` cycles: one ring revolution is much shorter than that, while a sender's
    resend of a corrupt packet comes at least ``ECHO_TIMEOUT`` later and is not mistaken for it.
    An aborted packet (its CRC residue is ``sci_packet.ABORT_RESIDUE``) is resent at once, so it
    is not remembered.

Alternating bits
    A sender's bit per target starts at 0; a receiver's last-accepted bit per source starts at 1,
    so the first packet of every pair is new. Both are cleared only by reset.

Known limits
    * One bit cannot resynchronise a pair. If a packet is given up although its receiver had
      accepted it (every echo lost ``MAX_ATTEMPTS`` times in a row), or if one node is reset while
      the others run, the next packet of that pair is taken for a duplicate: echoed ACCEPTED but
      not stored. Curing that needs a header change (for instance a "resync" bit the receiver
      obeys); ``sci_packet`` is left as it is.
    * The scrubber remembers one suspect per node: debris arriving faster than one per revolution
      may circle more than once before it goes. A corrupt packet whose CRC still checks (about one
      in 65536 of multi-bit errors) is not recognised by anyone, nor is debris whose residue happens
      to be that of an aborted packet (as rare).
    * While ``enable`` is low nothing is sent, but packets already awaiting an echo keep counting
      towards their timeout and may be given up.
    * A context stays occupied until the sequencer takes its ``failed`` report.
"""

from dataclasses import replace

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap
from numavia.base.coherence import LINE_BYTES, NODE_ID_BITS
from numavia.base.sci_packet import (
    ABORT_CRC_XOR,
    ABORT_RESIDUE,
    CRC_INIT,
    CRC_POLY,
    ECHO_HEADER_SYMBOLS,
    HEADER_BITS,
    HEADER_SYMBOLS,
    SYMBOL_BITS,
    EchoStatus,
    PacketType,
    packet_symbols,
)

from . import wishbone
from .register_bank import RegisterBank
from .sci_layouts import HeaderLayout, SymbolLayout

#: Cycles from a symbol on ``rx`` to the same symbol on ``tx`` through an idle node: ``rx`` is
#: registered (1), written into the bypass FIFO (2: readable the next cycle), then popped into the
#: ``tx`` register (3).
BYPASS_LATENCY = 3

#: Cycles from the last symbol of a packet on ``rx`` to the first symbol of its echo on ``tx``
#: through an idle node: ``rx`` register (1), the verdict in the idle cycle that ends the packet
#: (2), the echo queue readable (3), the ``tx`` register (4).
ECHO_TURNAROUND = 4

#: Packets each of the incoming and outgoing queues holds, and packets in flight awaiting their
#: echo, unless a card asks for others.
QUEUE_DEPTH = 16
MAX_OUTSTANDING = 4

#: Symbols of a request/response without its data block, header and CRC (with it, the longest
#: packet: ``RingLink.max_packet``).
_SHORT_PACKET = HEADER_SYMBOLS + 1
_ECHO_PACKET = ECHO_HEADER_SYMBOLS + 1

_RING = regmap.RING


def _crc16_step_taps():
    """For each bit of the next CRC register, the sets of (CRC register bits, symbol bits) whose
    XOR it is: one step of the bitwise CRC-16/CCITT over a 16-bit symbol, most significant bit
    first (``sci_packet.crc16`` feeds the high byte, then the low one: the same order), worked out
    symbolically over GF(2)."""
    crc = [({i}, set()) for i in range(16)]  # bit i of the register, as (crc, symbol) taps
    for bit in reversed(range(SYMBOL_BITS)):
        feedback = (crc[15][0], crc[15][1] ^ {bit})
        shifted = [(set(), set())] + crc[:15]
        crc = [(c ^ feedback[0], d ^ feedback[1]) if CRC_POLY >> i & 1 else (c, d) for i, (c, d) in enumerate(shifted)]
    return [(sorted(c), sorted(d)) for c, d in crc]


_CRC16_STEP_TAPS = _crc16_step_taps()


def crc16_step(crc, symbol):
    """The CRC-16 register after one 16-bit symbol (a flat XOR per bit)."""
    bits = []
    for crc_taps, symbol_taps in _CRC16_STEP_TAPS:
        taps = [crc[i] for i in crc_taps] + [symbol[i] for i in symbol_taps]
        bits.append(Cat(*taps).xor() if taps else Const(0, 1))
    return Cat(*bits)


def header_symbol(header_bits, index):
    """Symbol ``index`` of a header bit vector (symbol 0 holds the most significant bits)."""
    return header_bits[HEADER_BITS - SYMBOL_BITS * (index + 1) : HEADER_BITS - SYMBOL_BITS * index]


def _saturating_counter(m, counter, increment, clear):
    """``counter += increment`` that sticks at all-ones instead of wrapping."""
    total = Signal(len(counter) + 1)
    m.d.comb += total.eq(counter + increment)
    with m.If(clear):
        m.d.sync += counter.eq(0)
    with m.Elif(total[-1]):
        m.d.sync += counter.eq(~0)
    with m.Else():
        m.d.sync += counter.eq(total[: len(counter)])


def _first_set(m, name, bits):
    """(found, index) of the lowest set bit of a list of 1-bit values."""
    found = Signal(name=f"{name}_found")
    index = Signal(range(max(2, len(bits))), name=f"{name}_index")
    for i in reversed(range(len(bits))):
        with m.If(bits[i]):
            m.d.comb += index.eq(i)
    m.d.comb += found.eq(Cat(*bits).any())
    return found, index


class _Context(enum.Enum, shape=3):
    """State of a transmit context (one own packet in flight)."""

    FREE = 0
    READY = 1  # to be (re)sent when the output gives own traffic its turn
    SENDING = 2
    WAIT_ECHO = 3  # timer counts towards ECHO_TIMEOUT
    BACKOFF = 4  # BUSY received; timer counts towards BUSY_DELAY
    DONE = 5  # ACCEPTED: to be released (slot freed, alternating bit toggled)
    FAILED = 6  # given up: to be reported on ``failed``, then released


class _Output(enum.Enum, shape=2):
    IDLE = 0  # emits an idle symbol or starts the next packet (the arbitration point)
    BYPASS = 1  # popping the bypass FIFO up to the packet's end marker
    OWN = 2  # an echo or a queued packet, from the transmit header register
    GAP = 3  # the idle symbol after an own packet


#: An entry of the bypass FIFO: a symbol, or (``end`` set) the end of a packet.
_BypassEntry = data.StructLayout({"data": SYMBOL_BITS, "end": 1})
#: An echo waiting to be sent.
_EchoEntry = data.StructLayout({"target": NODE_ID_BITS, "seq": 1, "busy": 1})


class RingLink(wiring.Component):
    """One node's attachment to the SCI ring.

    Parameters
    ----------
    out_depth, in_depth : outgoing / incoming queue depths in packets (each a header and a 64-byte
        data block in :mod:`amaranth.lib.memory`).
    max_outstanding : own packets awaiting their echo at once.
    echo_depth : echoes waiting for the output. A packet that arrives with this queue full is
        dropped unechoed (counted in ECHO_OVERFLOWS) and comes again after the sender's timeout.
    bypass_depth : bypass FIFO entries (symbols plus one end marker per packet).
    echo_timeout, busy_delay, max_attempts : reset values of the registers of those names.

    The bypass FIFO never overflows. Its occupancy can only grow in cycles where the output does
    not pop it, i.e. while an own packet (at most ``max_packet`` symbols) and its idle gap
    go out; the input adds at most one entry per cycle. Own traffic starts only when the occupancy is
    at most ``bypass_threshold``, so the occupancy stays below ``bypass_threshold`` +
    ``max_packet`` + 2 (the packet, its gap, and the arbitration cycle after it, whose pop
    cancels that cycle's write). Above the threshold bypass is forced and pops one entry per cycle
    (the end marker is popped during the inter-packet gap), so the occupancy cannot grow.
    ``bypass_threshold`` is therefore ``bypass_depth - max_packet - 2``.

    line_bytes : the card's line size, the length of a packet's data block (every card of a ring
        has the same).
    """

    def __init__(
        self,
        *,
        out_depth=QUEUE_DEPTH,
        in_depth=QUEUE_DEPTH,
        max_outstanding=MAX_OUTSTANDING,
        echo_depth=8,
        bypass_depth=128,
        echo_timeout=_RING.register("ECHO_TIMEOUT").reset,
        busy_delay=_RING.register("BUSY_DELAY").reset,
        max_attempts=_RING.register("MAX_ATTEMPTS").reset,
        line_bytes=LINE_BYTES,
    ):
        for name, value in (
            ("out_depth", out_depth),
            ("in_depth", in_depth),
            ("max_outstanding", max_outstanding),
            ("echo_depth", echo_depth),
        ):
            if not 1 <= value <= 255:  # each is shown in an 8-bit field of a status register
                raise ValueError(f"{name} must be 1..255, not {value}")
        if max_outstanding > out_depth:
            raise ValueError("max_outstanding cannot exceed out_depth")
        self.out_depth = out_depth
        self.in_depth = in_depth
        self.max_outstanding = max_outstanding
        self.echo_depth = echo_depth
        self.bypass_depth = bypass_depth
        self.data_words = line_bytes // 4
        self.max_packet = packet_symbols(PacketType.REQUEST, True, line_bytes)
        self.bypass_threshold = bypass_depth - self.max_packet - 2
        if self.bypass_threshold < self.max_packet + 1 or bypass_depth >= 1 << 16:
            # Below one packet of headroom, own traffic would wait on every bypass packet.
            raise ValueError(f"bypass_depth must be {2 * self.max_packet + 3}..65535")
        # The configurable timings are registers; the constructor sets their reset values.
        resets = {"ECHO_TIMEOUT": echo_timeout, "BUSY_DELAY": busy_delay, "MAX_ATTEMPTS": max_attempts}
        self.register_block = replace(
            _RING, registers=tuple(replace(r, reset=resets[r.name]) if r.name in resets else r for r in _RING.registers)
        )
        self.echo_timeout = echo_timeout
        self.busy_delay = busy_delay
        self.max_attempts = max_attempts
        super().__init__(
            {
                "rx": In(SymbolLayout),
                "tx": Out(SymbolLayout),
                "node_id": In(NODE_ID_BITS),
                "enable": In(1),
                "send_header": In(stream.Signature(HeaderLayout)),
                "send_data": In(stream.Signature(32)),
                "recv_header": Out(stream.Signature(HeaderLayout)),
                "recv_data": Out(stream.Signature(32)),
                "failed": Out(stream.Signature(HeaderLayout)),
                "bus": In(wishbone.Signature(addr_width=_RING.addr_width)),
            }
        )

    def elaborate(self, platform):
        m = Module()

        m.submodules.bank = bank = RegisterBank(self.register_block)
        wiring.connect(m, wiring.flipped(self.bus), bank.bus)
        clear = bank.control.w_stb & bank.control.w_data[_RING.register("CONTROL").field("CLEAR").lsb]
        echo_timeout = bank.echo_timeout.value
        busy_delay = bank.busy_delay.value
        max_attempts = bank.max_attempts.value

        # Events counted this cycle, by counter name; each is a list of 1-bit values to add.
        events = {name: [] for name, _ in regmap.RING_COUNTERS}

        # Queue storage: headers in small asynchronous-read memories (LUT RAM) so a header is
        # readable in the cycle it is needed; data blocks in synchronous-read memories (block RAM),
        # one 32-bit word per slot and word index (address = slot * line words + word).
        DATA_WORDS, MAX_PACKET_SYMBOLS = self.data_words, self.max_packet
        DATA_SYMBOLS = 2 * DATA_WORDS
        _LONG_PACKET = MAX_PACKET_SYMBOLS  # a request/response with its data block
        word_bits = (DATA_WORDS - 1).bit_length()
        m.submodules.out_headers = out_headers = memory.Memory(shape=HeaderLayout, depth=self.out_depth, init=[])
        m.submodules.out_data = out_data = memory.Memory(shape=32, depth=self.out_depth * DATA_WORDS, init=[])
        m.submodules.in_headers = in_headers = memory.Memory(shape=HeaderLayout, depth=self.in_depth, init=[])
        m.submodules.in_data = in_data = memory.Memory(shape=32, depth=self.in_depth * DATA_WORDS, init=[])

        m.submodules.bypass = bypass = fifo.SyncFIFO(width=_BypassEntry.size, depth=self.bypass_depth)
        m.submodules.echoes = echoes = fifo.SyncFIFO(width=_EchoEntry.size, depth=self.echo_depth)
        bypass_head = _BypassEntry(bypass.r_data)
        echo_head = _EchoEntry(echoes.r_data)

        # --- Receive: framing, CRC, disposition ---------------------------------------------------
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

        # Routing fields of symbol 0, read through the header layout (never by bit position).
        first = HeaderLayout(Cat(Const(0, HEADER_BITS - SYMBOL_BITS), rx.data))
        first_q = Signal(SYMBOL_BITS)
        first_is_echo = first.ptype == PacketType.ECHO
        expected = Signal(range(MAX_PACKET_SYMBOLS + 1))
        m.d.comb += expected.eq(Mux(first_is_echo, _ECHO_PACKET, Mux(first.has_data, _LONG_PACKET, _SHORT_PACKET)))

        # Residue over every symbol including the CRC: zero for an intact packet.
        rx_crc = Signal(16)
        with m.If(start):
            m.d.sync += rx_crc.eq(crc16_step(Const(CRC_INIT, 16), rx.data))
        with m.Elif(rx.frame):
            m.d.sync += rx_crc.eq(crc16_step(rx_crc, rx.data))

        # Scrubber memory (see the module docstring).
        suspect = Signal(SYMBOL_BITS)
        suspect_valid = Signal()
        suspect_age = Signal(16)

        for_me = self.enable & (first.target == self.node_id)
        came_back = self.enable & (first.source == self.node_id) & ~for_me
        scrub = self.enable & suspect_valid & (rx.data == suspect) & ~for_me & ~came_back
        consume_q = Signal()  # packet for this node
        forward_q = Signal()  # packet in the bypass FIFO
        forward_now = Signal()
        m.d.comb += forward_now.eq(Mux(start, ~(for_me | came_back | scrub), forward_q))
        consume_now = Mux(start, for_me, consume_q)

        expected_q = Signal.like(expected)
        type_ok_q = Signal()  # ptype is one of REQUEST, RESPONSE, ECHO
        is_echo_q = Signal()
        duplicate_q = Signal()
        room_q = Signal()  # the incoming queue had a free slot when the packet began
        is_request_q = Signal()
        # Replies owed: requests stored in the incoming queue (or being handled) whose answer has
        # not been queued yet. Each has an outgoing slot reserved, so the sequencer can always
        # answer and the incoming queue always drains: requests cannot deadlock two nodes whose
        # queues are full of requests for each other.
        owed = Signal(range(self.in_depth + 2))
        free_count = Signal(range(self.out_depth + 1))
        rx_last_seq = Signal(1 << NODE_ID_BITS, init=~0)  # per source; all ones: "before seq 0"
        in_count = Signal(range(self.in_depth + 1))
        in_tail = Signal(range(self.in_depth))
        in_head = Signal(range(self.in_depth))

        with m.If(start):
            m.d.sync += [
                consume_q.eq(for_me),
                forward_q.eq(~(for_me | came_back | scrub)),
                first_q.eq(rx.data),
                expected_q.eq(expected),
                type_ok_q.eq(first.ptype.matches(*PacketType)),
                is_echo_q.eq(first_is_echo),
                duplicate_q.eq(rx_last_seq.bit_select(first.source, 1) == first.seq),
                room_q.eq((in_count != self.in_depth) & ((first.ptype != PacketType.REQUEST) | (free_count > owed))),
                is_request_q.eq(first.ptype == PacketType.REQUEST),
            ]

        events["BYPASSED"].append(start & ~(for_me | came_back | scrub))
        events["UNDELIVERABLE"].append(start & came_back)
        events["SCRUBBED"].append(start & scrub)

        with m.If(start & scrub):
            m.d.sync += suspect_valid.eq(0)
        with m.Elif(suspect_valid & (suspect_age >= echo_timeout[1:])):
            m.d.sync += suspect_valid.eq(0)
        with m.Else():
            m.d.sync += suspect_age.eq(Mux(suspect_age == 0xFFFF, suspect_age, suspect_age + 1))

        intact = (rx_crc == 0) & (rx_count == expected_q) & type_ok_q

        # Forwarded packets: their symbols, then an end marker in the first idle cycle.
        bypass_overflow = Signal()
        m.d.comb += [
            bypass.w_en.eq((rx.frame & forward_now) | (end & forward_q)),
            bypass.w_data.eq(Cat(Mux(end, 0, rx.data), end)),
        ]
        with m.If(bypass.w_en & ~bypass.w_rdy):
            m.d.sync += bypass_overflow.eq(1)
        # An aborted packet (its sender's data came too late) is resent at once: not debris.
        with m.If(end & forward_q & ~intact & (rx_crc != ABORT_RESIDUE) & self.enable):
            m.d.sync += [suspect.eq(first_q), suspect_valid.eq(1), suspect_age.eq(0)]

        # Packets for this node: header symbols into a register, data words into the tail slot of
        # the incoming queue as they arrive (committed only if the packet proves intact).
        rx_header = Signal(HeaderLayout)
        with m.If(rx.frame & consume_now):
            with m.Switch(index):
                for i in range(HEADER_SYMBOLS):
                    with m.Case(i):
                        m.d.sync += header_symbol(rx_header.as_value(), i).eq(rx.data)
        data_index = Signal(range(DATA_SYMBOLS))
        m.d.comb += data_index.eq(index - HEADER_SYMBOLS)
        high_half = Signal(16)
        in_data_w = in_data.write_port()
        in_data_in_range = (index >= HEADER_SYMBOLS) & (index < HEADER_SYMBOLS + DATA_SYMBOLS)
        with m.If(rx.frame & consume_q & in_data_in_range & ~data_index[0]):
            m.d.sync += high_half.eq(rx.data)
        m.d.comb += [
            in_data_w.addr.eq(Cat(data_index[1:], in_tail)),
            in_data_w.data.eq(Cat(rx.data, high_half)),
            # The tail slot is free whenever there was room, so writing it is harmless even if
            # the packet is later refused.
            in_data_w.en.eq(rx.frame & consume_q & room_q & in_data_in_range & data_index[0]),
        ]

        # End of a packet for this node: the verdict.
        verdict = end & consume_q
        good_echo = Signal()
        commit = Signal()
        echo_push = Signal()
        echo_busy = Signal()
        packet_verdict = verdict & intact & ~is_echo_q
        m.d.comb += [
            good_echo.eq(verdict & intact & is_echo_q),
            echo_push.eq(packet_verdict & echoes.w_rdy),
            commit.eq(echo_push & ~duplicate_q & room_q),
            echo_busy.eq(~duplicate_q & ~room_q),
        ]
        events["CRC_ERRORS"].append(verdict & ~intact)
        events["RX_ECHOES"].append(good_echo)
        events["ECHO_OVERFLOWS"].append(packet_verdict & ~echoes.w_rdy)
        events["DUPLICATES"].append(echo_push & duplicate_q)
        events["RX_PACKETS"].append(commit)
        events["BUSY_SENT"].append(echo_push & echo_busy)
        echo_in = Signal(_EchoEntry)
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

        # --- Incoming queue to the sequencer --------------------------------------------------------
        in_pop = Signal()
        in_word = Signal(word_bits)
        in_in_data = Signal()  # the head packet's header is taken; its data words go out now
        in_headers_r = in_headers.read_port(domain="comb")
        in_data_r = in_data.read_port()
        # An empty queue offers a packet in the cycle of its verdict, from the header register
        # (its data words are already in their slot).
        head_header = Signal(HeaderLayout)
        m.d.comb += [
            in_headers_r.addr.eq(in_head),
            head_header.eq(Mux(in_count == 0, rx_header, in_headers_r.data)),
            self.recv_header.payload.eq(head_header),
            self.recv_header.valid.eq(((in_count != 0) | commit) & ~in_in_data),
            self.recv_data.payload.eq(in_data_r.data),
            self.recv_data.valid.eq(in_in_data),
            # Synchronous read, addressed one cycle ahead: the word after an accepted one.
            in_data_r.addr.eq(
                Cat(Mux(self.recv_data.valid & self.recv_data.ready, in_word + 1, in_word)[:word_bits], in_head)
            ),
        ]
        with m.If(self.recv_header.valid & self.recv_header.ready):
            with m.If(head_header.has_data):
                m.d.sync += [in_in_data.eq(1), in_word.eq(0)]
            with m.Else():
                m.d.comb += in_pop.eq(1)
        with m.If(self.recv_data.valid & self.recv_data.ready):
            m.d.sync += in_word.eq(in_word + 1)
            with m.If(in_word == DATA_WORDS - 1):
                m.d.sync += in_in_data.eq(0)
                m.d.comb += in_pop.eq(1)
        with m.If(in_pop):
            m.d.sync += in_head.eq(Mux(in_head == self.in_depth - 1, 0, in_head + 1))
        m.d.sync += in_count.eq(in_count + commit - in_pop)

        # --- Outgoing queue: filling slots from the sequencer ------------------------------------
        slot_bits = max(1, (self.out_depth - 1).bit_length())
        free_slots = Signal(self.out_depth, init=~0)
        any_free, free_slot = _first_set(m, "free_slot", [free_slots[i] for i in range(self.out_depth)])
        filling = Signal()  # header taken, data words being written
        fill_slot = Signal(slot_bits)
        fill_word = Signal(word_bits)
        enqueue = Signal()
        enqueue_slot = Signal(slot_bits)
        enqueue_target = Signal(NODE_ID_BITS)
        allocated = Signal(self.out_depth)  # one-hot slot taken this cycle

        out_headers_w = out_headers.write_port()
        out_data_w = out_data.write_port()
        reply_queued = (
            self.send_header.valid & self.send_header.ready & (self.send_header.payload.ptype == PacketType.RESPONSE)
        )
        m.d.comb += free_count.eq(sum(free_slots[i] for i in range(self.out_depth)))
        m.d.sync += owed.eq(owed + (commit & is_request_q) - (reply_queued & (owed != 0)))
        # A reply may take any free slot; a request only one not reserved for owed replies (with
        # one more kept back for a request being received right now).
        may_queue = (self.send_header.payload.ptype == PacketType.RESPONSE) | (free_count > owed + 1)
        m.d.comb += [
            self.send_header.ready.eq(~filling & any_free & may_queue),
            self.send_data.ready.eq(filling),
            out_headers_w.addr.eq(free_slot),
            out_headers_w.data.eq(self.send_header.payload),
            out_headers_w.en.eq(self.send_header.valid & self.send_header.ready),
            out_data_w.addr.eq(Cat(fill_word, fill_slot)),
            out_data_w.data.eq(self.send_data.payload),
            out_data_w.en.eq(self.send_data.valid & self.send_data.ready),
        ]
        # A packet is queued with its header (cut-through): the output may start it while its data
        # words are still coming, and checks each word is written before sending it.
        with m.If(self.send_header.valid & self.send_header.ready):
            m.d.comb += [
                allocated.eq(Const(1, self.out_depth) << free_slot),
                enqueue.eq(1),
                enqueue_slot.eq(free_slot),
                enqueue_target.eq(self.send_header.payload.target),
            ]
            with m.If(self.send_header.payload.has_data):
                m.d.sync += [filling.eq(1), fill_slot.eq(free_slot), fill_word.eq(0)]
        with m.If(self.send_data.valid & self.send_data.ready):
            m.d.sync += fill_word.eq(fill_word + 1)
            with m.If(fill_word == DATA_WORDS - 1):
                m.d.sync += filling.eq(0)

        # Queued packets in arrival order (slot and target), a list that can lose any entry: the
        # dispatcher takes the oldest packet whose target has nothing in flight, so per-target order
        # holds while other targets overtake a blocked one.
        n_contexts = self.max_outstanding
        ctx_state = [Signal(_Context, name=f"ctx{c}_state") for c in range(n_contexts)]
        ctx_slot = [Signal(slot_bits, name=f"ctx{c}_slot") for c in range(n_contexts)]
        ctx_target = [Signal(NODE_ID_BITS, name=f"ctx{c}_target") for c in range(n_contexts)]
        ctx_seq = [Signal(name=f"ctx{c}_seq") for c in range(n_contexts)]
        ctx_attempts = [Signal(8, name=f"ctx{c}_attempts") for c in range(n_contexts)]
        ctx_timer = [Signal(16, name=f"ctx{c}_timer") for c in range(n_contexts)]
        ctx_accepted = [Signal(name=f"ctx{c}_accepted_while_sending") for c in range(n_contexts)]
        ctx_sent = [Signal(name=f"ctx{c}_sent") for c in range(n_contexts)]  # sent whole at least once
        # Aborted for want of data: resent only once its slot is complete, so it cannot underrun twice.
        ctx_underran = [Signal(name=f"ctx{c}_underran") for c in range(n_contexts)]
        ctx_in_use = [state != _Context.FREE for state in ctx_state]

        queue_slot = [Signal(slot_bits, name=f"queue{i}_slot") for i in range(self.out_depth)]
        queue_target = [Signal(NODE_ID_BITS, name=f"queue{i}_target") for i in range(self.out_depth)]
        queue_length = Signal(range(self.out_depth + 1))
        eligible = []
        for i in range(self.out_depth):
            target_busy = Cat(*[ctx_in_use[c] & (ctx_target[c] == queue_target[i]) for c in range(n_contexts)]).any()
            eligible.append((i < queue_length) & ~target_busy)
        any_eligible, take = _first_set(m, "dispatch", eligible)
        any_free_context, free_context = _first_set(m, "free_context", [~in_use for in_use in ctx_in_use])
        dispatch = Signal()
        m.d.comb += dispatch.eq(any_eligible & any_free_context)
        append_at = queue_length - dispatch
        for i in range(self.out_depth):
            next_slot = queue_slot[i + 1] if i + 1 < self.out_depth else 0
            next_target = queue_target[i + 1] if i + 1 < self.out_depth else 0
            with m.If(enqueue & (append_at == i)):
                m.d.sync += [queue_slot[i].eq(enqueue_slot), queue_target[i].eq(enqueue_target)]
            with m.Elif(dispatch & (i >= take)):
                m.d.sync += [queue_slot[i].eq(next_slot), queue_target[i].eq(next_target)]
        m.d.sync += queue_length.eq(queue_length + enqueue - dispatch)
        dispatch_slot = Signal(slot_bits)
        dispatch_target = Signal(NODE_ID_BITS)
        with m.Switch(take):
            for i in range(self.out_depth):
                with m.Case(i):
                    m.d.comb += [dispatch_slot.eq(queue_slot[i]), dispatch_target.eq(queue_target[i])]

        # Per-target alternating bit of own packets.
        tx_seq = Signal(1 << NODE_ID_BITS)

        # --- Echoes received: find the context they answer -------------------------------------------
        echo_accepted = good_echo & (rx_header.status == EchoStatus.ACCEPTED)
        echo_refused = good_echo & (rx_header.status == EchoStatus.BUSY)
        echo_match = [
            ctx_in_use[c] & (ctx_target[c] == rx_header.source) & (ctx_seq[c] == rx_header.seq)
            for c in range(n_contexts)
        ]

        # --- Output arbitration and serialiser ----------------------------------------------------------
        out_state = Signal(_Output)
        last_was_own = Signal()
        tx = Signal(SymbolLayout)  # the tx register
        m.d.comb += self.tx.eq(tx)
        tx_shift = Signal(HEADER_BITS)  # header symbols still to send, next one on top
        tx_index = Signal(range(MAX_PACKET_SYMBOLS))
        tx_length = Signal(range(MAX_PACKET_SYMBOLS + 1))
        tx_crc = Signal(16)
        tx_is_packet = Signal()  # an own queued packet (not an echo)
        tx_context = Signal(range(max(2, n_contexts)))
        tx_slot = Signal(slot_bits)

        ready_contexts = [
            (ctx_state[c] == _Context.READY) & ~(ctx_underran[c] & filling & (fill_slot == ctx_slot[c]))
            for c in range(n_contexts)
        ]
        # Round robin among contexts ready to send: the first after the last one sent, else the first.
        later_ready = [ready_contexts[c] & (tx_context < c) for c in range(n_contexts)]
        any_later, later_choice = _first_set(m, "later_ready", later_ready)
        any_ready, first_choice = _first_set(m, "first_ready", ready_contexts)
        send_context = Signal.like(tx_context)
        m.d.comb += send_context.eq(Mux(any_later, later_choice, first_choice))
        send_context_slot = Signal(slot_bits)
        send_context_seq = Signal()
        with m.Switch(send_context):
            for c in range(n_contexts):
                with m.Case(c):
                    m.d.comb += [send_context_slot.eq(ctx_slot[c]), send_context_seq.eq(ctx_seq[c])]

        out_headers_tx = out_headers.read_port(domain="comb")
        packet_header = Signal(HeaderLayout)
        m.d.comb += [
            out_headers_tx.addr.eq(send_context_slot),
            packet_header.eq(out_headers_tx.data),
            packet_header.source.eq(self.node_id),
            packet_header.seq.eq(send_context_seq),
        ]
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
            tx_word.eq((tx_index + 1 - HEADER_SYMBOLS)[1 : 1 + word_bits]),
            out_data_r.addr.eq(Cat(tx_word, tx_slot)),
        ]
        m.d.sync += tx_word_written.eq(~filling | (fill_slot != tx_slot) | (fill_word > tx_word))

        echo_pending = self.enable & echoes.r_rdy
        packet_pending = self.enable & any_ready
        bypass_pending = bypass.r_rdy & ~bypass_head.end
        force_bypass = bypass.level > self.bypass_threshold
        tx_start_packet = Signal()
        tx_start_echo = Signal()
        tx_end_packet = Signal()
        tx_underrun = Signal()  # a data word due is not written: the packet ends here, aborted
        bypass_underrun = Signal()

        def start_own(header, length):
            symbol0 = header_symbol(header.as_value(), 0)
            m.d.sync += [
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
                with m.If(bypass.r_rdy & bypass_head.end):
                    m.d.comb += bypass.r_en.eq(1)  # a stray end marker: nothing to send
                with m.Elif(bypass_pending & (force_bypass | last_was_own | ~(echo_pending | packet_pending))):
                    m.d.comb += bypass.r_en.eq(1)
                    m.d.sync += [
                        tx.data.eq(bypass_head.data),
                        tx.frame.eq(1),
                        last_was_own.eq(0),
                        out_state.eq(_Output.BYPASS),
                    ]
                with m.Elif(echo_pending):
                    m.d.comb += [echoes.r_en.eq(1), tx_start_echo.eq(1)]
                    start_own(echo_header, _ECHO_PACKET)
                    m.d.sync += tx_is_packet.eq(0)
                with m.Elif(packet_pending):
                    m.d.comb += tx_start_packet.eq(1)
                    start_own(packet_header, Mux(packet_header.has_data, _LONG_PACKET, _SHORT_PACKET))
                    m.d.sync += [tx_is_packet.eq(1), tx_context.eq(send_context), tx_slot.eq(send_context_slot)]
            with m.Case(_Output.BYPASS):
                m.d.comb += bypass.r_en.eq(1)
                with m.If(~bypass.r_rdy):
                    # Cannot happen: a forwarded packet arrives one symbol per cycle and its
                    # first symbol was in the FIFO before we began to send it.
                    m.d.sync += [bypass_underrun.eq(1), out_state.eq(_Output.IDLE)]
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
                with m.Elif(tx_index < HEADER_SYMBOLS):
                    m.d.comb += symbol.eq(header_symbol(tx_shift, 0))
                with m.Elif(~tx_word_written):
                    m.d.comb += [symbol.eq(tx_crc ^ ABORT_CRC_XOR), tx_underrun.eq(1)]
                    m.d.sync += out_state.eq(_Output.GAP)
                with m.Elif((tx_index - HEADER_SYMBOLS)[0]):
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
        events["TX_ECHOES"].append(tx_start_echo)
        events["TX_PACKETS"].append(tx_start_packet)
        events["TX_UNDERRUNS"].append(tx_underrun)

        # --- Transmit contexts --------------------------------------------------------------------
        releasing = [state == _Context.DONE for state in ctx_state]
        any_release, release_context = _first_set(m, "release", releasing)
        failing = [state == _Context.FAILED for state in ctx_state]
        any_failed, failed_context = _first_set(m, "failed", failing)
        freed = Signal(self.out_depth)  # slots released this cycle
        release_slot = Signal(slot_bits)
        release_target = Signal(NODE_ID_BITS)
        failed_slot = Signal(slot_bits)
        failed_seq = Signal()
        with m.Switch(release_context):
            for c in range(n_contexts):
                with m.Case(c):
                    m.d.comb += [release_slot.eq(ctx_slot[c]), release_target.eq(ctx_target[c])]
        with m.Switch(failed_context):
            for c in range(n_contexts):
                with m.Case(c):
                    m.d.comb += [failed_slot.eq(ctx_slot[c]), failed_seq.eq(ctx_seq[c])]

        out_headers_failed = out_headers.read_port(domain="comb")
        m.d.comb += [
            out_headers_failed.addr.eq(failed_slot),
            self.failed.valid.eq(any_failed),
            self.failed.payload.eq(out_headers_failed.data),
            self.failed.payload.source.eq(self.node_id),
            self.failed.payload.seq.eq(failed_seq),
        ]
        failed_taken = self.failed.valid & self.failed.ready
        with m.If(any_release):
            m.d.sync += tx_seq.eq(tx_seq ^ (Const(1, len(tx_seq)) << release_target))
        events["TX_ACCEPTED"].append(any_release)
        m.d.comb += freed.eq(
            Mux(any_release, Const(1, self.out_depth) << release_slot, 0)
            | Mux(failed_taken, Const(1, self.out_depth) << failed_slot, 0)
        )
        m.d.sync += free_slots.eq((free_slots & ~allocated) | freed)
        events["SEND_FAILURES"].append(failed_taken)

        for c in range(n_contexts):
            state, timer = ctx_state[c], ctx_timer[c]
            match = echo_match[c]
            timed_out = Signal(name=f"ctx{c}_timed_out")
            with m.Switch(state):
                with m.Case(_Context.FREE):
                    with m.If(dispatch & (free_context == c)):
                        m.d.sync += [
                            state.eq(_Context.READY),
                            ctx_slot[c].eq(dispatch_slot),
                            ctx_target[c].eq(dispatch_target),
                            ctx_seq[c].eq(tx_seq.bit_select(dispatch_target, 1)),
                            ctx_attempts[c].eq(0),
                            ctx_sent[c].eq(0),
                            ctx_underran[c].eq(0),
                        ]
                with m.Case(_Context.READY):
                    # A late echo of an earlier copy completes it; a packet never sent cannot
                    # have been answered (an echo with its target and seq is older than it).
                    with m.If(match & echo_accepted & ctx_sent[c]):
                        m.d.sync += state.eq(_Context.DONE)
                    with m.Elif(tx_start_packet & (send_context == c)):
                        m.d.sync += [
                            state.eq(_Context.SENDING),
                            ctx_accepted[c].eq(0),
                            ctx_attempts[c].eq(Mux(ctx_attempts[c] == 0xFF, 0xFF, ctx_attempts[c] + 1)),
                        ]
                with m.Case(_Context.SENDING):
                    # The slot is being read: an ACCEPTED echo (of an earlier copy) waits for the end.
                    earlier_accepted = match & echo_accepted & ctx_sent[c]
                    with m.If(earlier_accepted):
                        m.d.sync += ctx_accepted[c].eq(1)
                    with m.If(tx_end_packet & (tx_context == c)):
                        m.d.sync += [timer.eq(0), ctx_sent[c].eq(1)]
                        with m.If(ctx_accepted[c] | earlier_accepted):
                            m.d.sync += state.eq(_Context.DONE)
                        with m.Else():
                            m.d.sync += state.eq(_Context.WAIT_ECHO)
                    with m.Elif(tx_underrun & (tx_context == c)):
                        # Nobody takes an aborted copy: not an attempt; again as soon as the data is in.
                        m.d.sync += [
                            ctx_underran[c].eq(1),
                            ctx_attempts[c].eq(Mux(ctx_attempts[c] == 0, 0, ctx_attempts[c] - 1)),
                        ]
                        with m.If(ctx_accepted[c] | earlier_accepted):
                            m.d.sync += state.eq(_Context.DONE)
                        with m.Else():
                            m.d.sync += state.eq(_Context.READY)
                with m.Case(_Context.WAIT_ECHO):
                    with m.If(match & echo_accepted):
                        m.d.sync += state.eq(_Context.DONE)
                    with m.Elif(match & echo_refused):
                        m.d.sync += [state.eq(_Context.BACKOFF), timer.eq(0)]
                    with m.Elif(timer >= echo_timeout):
                        m.d.comb += timed_out.eq(1)
                        with m.If(ctx_attempts[c] >= max_attempts):
                            m.d.sync += state.eq(_Context.FAILED)
                        with m.Else():
                            m.d.sync += state.eq(_Context.READY)
                    with m.Else():
                        m.d.sync += timer.eq(timer + 1)
                with m.Case(_Context.BACKOFF):
                    with m.If(match & echo_accepted):
                        m.d.sync += state.eq(_Context.DONE)
                    with m.Elif(timer >= busy_delay):
                        m.d.sync += state.eq(_Context.READY)
                    with m.Else():
                        m.d.sync += timer.eq(timer + 1)
                with m.Case(_Context.DONE):
                    with m.If(any_release & (release_context == c)):
                        m.d.sync += state.eq(_Context.FREE)
                with m.Case(_Context.FAILED):
                    with m.If(failed_taken & (failed_context == c)):
                        m.d.sync += state.eq(_Context.FREE)  # reported: its slot is freed now
                    with m.Elif(match & echo_accepted):
                        m.d.sync += state.eq(_Context.DONE)  # delivered after all: no report
            # A BUSY answer proves the receiver alive: only consecutive silent transmissions count
            # towards MAX_ATTEMPTS.
            with m.If(match & echo_refused & (state != _Context.DONE) & (state != _Context.FAILED)):
                m.d.sync += ctx_attempts[c].eq(0)
            events["TIMEOUTS"].append(timed_out)
        events["BUSY_RECEIVED"].append(echo_refused)

        # --- Registers ------------------------------------------------------------------------------
        counters = {}
        for name, _ in regmap.RING_COUNTERS:
            counters[name] = counter = Signal(32, name=f"count_{name.lower()}")
            increment = sum(events[name]) if events[name] else 0
            _saturating_counter(m, counter, increment, clear)
            m.d.comb += bank.port(name).value.eq(counter)

        bypass_peak = Signal(16)
        with m.If(clear):
            m.d.sync += [bypass_peak.eq(0), bypass_overflow.eq(0), bypass_underrun.eq(0)]
        with m.Elif(bypass.level > bypass_peak):
            m.d.sync += bypass_peak.eq(bypass.level)

        def fields(register, **values):
            reg = _RING.register(register)
            return sum((value << reg.field(name).lsb for name, value in values.items()), Const(0, 32))

        outstanding = sum(ctx_in_use)
        out_queue = self.out_depth - sum(free_slots[i] for i in range(self.out_depth))
        m.d.comb += [
            bank.status.value.eq(
                fields(
                    "STATUS", OUT_QUEUE=out_queue, IN_QUEUE=in_count, OUTSTANDING=outstanding, ECHO_QUEUE=echoes.level
                )
            ),
            bank.bypass.value.eq(fields("BYPASS", LEVEL=bypass.level, PEAK=bypass_peak)),
            bank.errors.value.eq(fields("ERRORS", BYPASS_OVERFLOW=bypass_overflow, BYPASS_UNDERRUN=bypass_underrun)),
            bank.params.value.eq(
                fields(
                    "PARAMS",
                    OUT_DEPTH=self.out_depth,
                    IN_DEPTH=self.in_depth,
                    MAX_OUTSTANDING=self.max_outstanding,
                    ECHO_DEPTH=self.echo_depth,
                )
            ),
            bank.bypass_params.value.eq(
                fields("BYPASS_PARAMS", DEPTH=self.bypass_depth, THRESHOLD=self.bypass_threshold)
            ),
        ]
        return m
