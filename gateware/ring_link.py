"""SCI ring link: bypass, receive and transmit of ring packets, with the card's incoming and outgoing
queues (the paper's dual-port memory). Link-level reliability only: what the packets mean is the
sequencer's business.

Four components with one job each, joined here with ``wiring.connect`` (this module keeps the
registers and counters): :class:`~.ring_receive.RingReceive` (deframing, CRC check, alternating
bit, incoming queue, echoes owed), :class:`~.ring_bypass.RingBypass` (forwarding FIFO, scrubber),
:class:`~.ring_transmit.RingTransmit` (outgoing slots, output arbitration, framing, CRC) and
:class:`~.ring_retry.RingRetry` (packets in flight, echo matching, timeouts, back-off, give-up).

Ring side
    ``rx``/``tx`` carry one :data:`SymbolLayout` per cycle; ``frame`` is high on every symbol of a
    packet and low for at least one cycle between packets (that low cycle is the only delimiter).
    ``tx`` is a register output. Packets whose ``target`` is not this node pass through a bypass FIFO
    unchanged (cut-through: ``rx`` to ``tx`` in :data:`BYPASS_LATENCY` cycles when the output is
    idle). Until ``enable`` is high the node bypasses everything and sends nothing.

Receive
    A packet for this node is checked (CRC, length, type, an answer's word range). Bad: dropped and
    counted, no echo (the sender times out). An echo goes to the transmit side. A good packet is
    offered on ``recv_header`` from the incoming queue, in the cycle after its verdict (the verdict
    stays off the sequencer's paths); its data block follows on ``recv_data`` as a whole line,
    from its first word on the wire on (``sci_packet.handover_order``). A request/response is
    judged by the link-level alternating bit of its (source, this node) pair: same bit as the
    last packet accepted from that source means duplicate (echo ACCEPTED again, not stored);
    otherwise it is stored if the incoming queue had room when the packet began (echo ACCEPTED) or
    refused (echo BUSY). A packet whose source is this node and target is not has been round the
    ring untaken: it is removed.

Transmit
    The sequencer writes a header (``send_header``; the link fills in ``source`` and ``seq``) then,
    if ``has_data``, its data block (``send_data``: a line, or the words an uncached read's answer
    carries, ``sci_packet.data_range``) into one of ``out_depth`` slots.
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

from amaranth import Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap
from numavia.base.coherence import LINE_BYTES, NODE_ID_BITS
from numavia.base.sci_packet import max_packet_symbols

from . import wishbone
from .event_counters import EventCounters
from .register_bank import RegisterBank
from .ring_bypass import RingBypass
from .ring_receive import RingReceive
from .ring_retry import RingRetry
from .ring_transmit import RingTransmit
from .sci_layouts import HeaderLayout, SymbolLayout

#: Cycles from a symbol on ``rx`` to the same symbol on ``tx`` through an idle node: ``rx`` is
#: registered (1), then passes the empty bypass FIFO into the ``tx`` register (2).
BYPASS_LATENCY = 2

#: Cycles from the last symbol of a packet on ``rx`` to the first symbol of its echo on ``tx``
#: through an idle node: ``rx`` register (1), the verdict in the idle cycle that ends the packet
#: (2), the echo queue readable (3), the ``tx`` register (4).
ECHO_TURNAROUND = 4

#: Packets each of the incoming and outgoing queues holds, and packets in flight awaiting their
#: echo, unless a card asks for others.
QUEUE_DEPTH = 16
MAX_OUTSTANDING = 4

_RING = regmap.RING


_COUNTERS = tuple(name for name, _ in regmap.RING_COUNTERS)


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
        counters_in_memory=False,
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
        self.line_bytes = line_bytes
        self.counters_in_memory = counters_in_memory
        self.data_words = line_bytes // 4
        self.max_packet = max_packet_symbols(line_bytes)
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

        m.submodules.bank = bank = RegisterBank(self.register_block, indexed={"counters": _COUNTERS})
        wiring.connect(m, wiring.flipped(self.bus), bank.bus)
        clear = bank.control.w_stb & bank.control.w_data[_RING.register("CONTROL").field("CLEAR").lsb]

        m.submodules.receive = receive = RingReceive(
            in_depth=self.in_depth, out_depth=self.out_depth, echo_depth=self.echo_depth, line_bytes=self.line_bytes
        )
        m.submodules.bypass = bypass = RingBypass(depth=self.bypass_depth)
        m.submodules.transmit = transmit = RingTransmit(
            out_depth=self.out_depth,
            in_depth=self.in_depth,
            contexts=self.max_outstanding,
            line_bytes=self.line_bytes,
            bypass_threshold=self.bypass_threshold,
            bypass_depth=self.bypass_depth,
        )
        m.submodules.retry = retry = RingRetry(out_depth=self.out_depth, contexts=self.max_outstanding)

        wiring.connect(m, receive.passing, bypass.passing)
        wiring.connect(m, bypass.out, transmit.bypass)
        wiring.connect(m, receive.echo, transmit.echo)
        wiring.connect(m, receive.admission, transmit.admission)
        wiring.connect(m, receive.echo_received, retry.echo_received)
        wiring.connect(m, transmit.queued, retry.queued)
        wiring.connect(m, retry.send, transmit.send)
        wiring.connect(m, transmit.sent, retry.sent)
        wiring.connect(m, retry.slots, transmit.slots)
        wiring.connect(m, wiring.flipped(self.send_header), transmit.send_header)
        wiring.connect(m, wiring.flipped(self.send_data), transmit.send_data)
        wiring.connect(m, receive.recv_header, wiring.flipped(self.recv_header))
        wiring.connect(m, receive.recv_data, wiring.flipped(self.recv_data))
        wiring.connect(m, retry.failed, wiring.flipped(self.failed))
        m.d.comb += [
            receive.rx.eq(self.rx),
            self.tx.eq(transmit.tx),
            transmit.bypass_level.eq(bypass.level),
            bypass.scrub_window.eq(bank.echo_timeout.value[1:]),  # ECHO_TIMEOUT / 2: see "Scrubber"
            retry.echo_timeout.eq(bank.echo_timeout.value),
            retry.busy_delay.eq(bank.busy_delay.value),
            retry.max_attempts.eq(bank.max_attempts.value),
        ]
        m.d.comb += [part.node_id.eq(self.node_id) for part in (receive, transmit, retry)]
        m.d.comb += [part.enable.eq(self.enable) for part in (receive, bypass, transmit)]

        # --- Registers ------------------------------------------------------------------------------
        parts = (receive, bypass, transmit, retry)

        def event(name):
            return sum(getattr(p.events, name) for p in parts if name in p.events.shape().members)

        # Events are counted a cycle late: they come out of the link's decisions (the verdict, the
        # output's arbitration), and the counters' adder must not lengthen those paths. An
        # EventCounters counts them (in memory where the card asks: counters_in_memory), held at
        # all ones rather than wrapping.
        m.submodules.counters = counters = EventCounters(
            len(_COUNTERS), most=len(parts), saturate=True, in_memory=self.counters_in_memory, late=True
        )
        wiring.connect(m, bank.counters, counters.read)
        m.d.comb += counters.clear.eq(clear)
        for i, name in enumerate(_COUNTERS):
            m.d.comb += counters.increments[i].eq(event(name))

        errors = {name: Signal(name=name.lower()) for name in ("BYPASS_OVERFLOW", "BYPASS_UNDERRUN")}
        bypass_peak = Signal(16)
        with m.If(clear):
            m.d.sync += [bypass_peak.eq(0), *(flag.eq(0) for flag in errors.values())]
        with m.Else():
            m.d.sync += [flag.eq(flag | event(name)) for name, flag in errors.items()]
            with m.If(bypass.level > bypass_peak):
                m.d.sync += bypass_peak.eq(bypass.level)

        def fields(register, **values):
            reg = _RING.register(register)
            return sum((value << reg.field(name).lsb for name, value in values.items()), Const(0, 32))

        m.d.comb += [
            bank.status.value.eq(
                fields(
                    "STATUS",
                    OUT_QUEUE=self.out_depth - transmit.admission.free,
                    IN_QUEUE=receive.in_count,
                    OUTSTANDING=retry.outstanding,
                    ECHO_QUEUE=receive.echo_level,
                )
            ),
            bank.bypass.value.eq(fields("BYPASS", LEVEL=bypass.level, PEAK=bypass_peak)),
            bank.errors.value.eq(fields("ERRORS", **errors)),
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
