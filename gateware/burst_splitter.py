"""Burst splitter: host bursts cut at cache-line boundaries, so that everything behind it handles
at most one line per access (the paper's PCI interface did this with delayed-write retries).

Write beats and read responses pass through in order with their byte enables. The host sees one
response stream per access: read beats concatenated (``last`` only on the very last one), and for
a write a single beat whose ``error`` is the OR of the pieces'. A malformed access (length 0, more
than ``MAX_BURST_WORDS`` words, unaligned address) is refused here with an error response after
its write beats have been drained, so the host port stays in step.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from numavia.base.coherence import LINE_BYTES

from .host_port import MAX_BURST_WORDS, HostPortSignature


class BurstSplitter(wiring.Component):
    host: In(HostPortSignature())
    line: Out(HostPortSignature())
    refused: Out(1)  # pulses when a malformed access is refused (for the error counter)

    def __init__(self, *, line_bytes=LINE_BYTES):
        if line_bytes < 4 or line_bytes & (line_bytes - 1):
            raise ValueError(f"line_bytes must be a power of two of at least 4, not {line_bytes}")
        self.line_words = line_bytes // 4
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        host, line = self.host, self.line
        LINE_WORDS = self.line_words

        def _min_line(words):
            """Words of the next piece once the address is line aligned."""
            return Mux(words < LINE_WORDS, words, LINE_WORDS)

        addr = Signal(32)
        remaining = Signal(8)
        write = Signal()
        piece = Signal(range(LINE_WORDS + 1))  # words in the current line piece
        moved = Signal(range(LINE_WORDS + 1))
        error = Signal()

        # Length of the next piece, kept in a register so the line side sees only flops.
        next_piece = Signal(range(LINE_WORDS + 1))

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += host.req.ready.eq(1)
                with m.If(host.req.valid):
                    req = host.req.payload
                    to_line_end = LINE_WORDS - req.addr[2 : 2 + (LINE_WORDS - 1).bit_length()]
                    m.d.sync += [
                        addr.eq(req.addr),
                        remaining.eq(req.count),
                        write.eq(req.write),
                        error.eq(0),
                        moved.eq(0),
                        next_piece.eq(Mux(req.count < to_line_end, req.count, to_line_end)),
                    ]
                    bad = (req.count == 0) | (req.count > MAX_BURST_WORDS) | (req.addr[:2] != 0)
                    with m.If(bad):
                        m.d.comb += self.refused.eq(1)
                        m.next = "REFUSE"
                    with m.Else():
                        m.next = "ISSUE"

            with m.State("ISSUE"):
                m.d.comb += [
                    line.req.valid.eq(1),
                    line.req.payload.addr.eq(addr),
                    line.req.payload.write.eq(write),
                    line.req.payload.count.eq(next_piece),
                ]
                with m.If(line.req.ready):
                    m.d.sync += [piece.eq(next_piece), moved.eq(0)]
                    m.next = "WRITE_BEATS"
                    with m.If(~write):
                        m.next = "READ_BEATS"

            with m.State("WRITE_BEATS"):
                m.d.comb += [
                    line.wdata.payload.eq(host.wdata.payload),
                    line.wdata.valid.eq(host.wdata.valid),
                    host.wdata.ready.eq(line.wdata.ready),
                ]
                with m.If(host.wdata.valid & line.wdata.ready):
                    m.d.sync += moved.eq(moved + 1)
                    with m.If(moved + 1 == piece):
                        m.next = "WRITE_RESP"

            with m.State("WRITE_RESP"):
                m.d.comb += line.resp.ready.eq(1)
                with m.If(line.resp.valid):
                    m.d.sync += [
                        error.eq(error | line.resp.payload.error),
                        remaining.eq(remaining - piece),
                        addr.eq(addr + (piece << 2)),
                        next_piece.eq(_min_line(remaining - piece)),
                    ]
                    with m.If(remaining == piece):
                        m.next = "WRITE_DONE"
                    with m.Else():
                        m.next = "ISSUE"

            with m.State("WRITE_DONE"):
                m.d.comb += [host.resp.valid.eq(1), host.resp.payload.error.eq(error), host.resp.payload.last.eq(1)]
                with m.If(host.resp.ready):
                    m.next = "IDLE"

            with m.State("READ_BEATS"):
                final = (remaining == piece) & (moved + 1 == piece)
                m.d.comb += [
                    host.resp.valid.eq(line.resp.valid),
                    host.resp.payload.data.eq(line.resp.payload.data),
                    host.resp.payload.error.eq(line.resp.payload.error),
                    host.resp.payload.last.eq(final),
                    line.resp.ready.eq(host.resp.ready),
                ]
                with m.If(line.resp.valid & host.resp.ready):
                    m.d.sync += moved.eq(moved + 1)
                    with m.If(moved + 1 == piece):
                        m.d.sync += [
                            remaining.eq(remaining - piece),
                            addr.eq(addr + (piece << 2)),
                            next_piece.eq(_min_line(remaining - piece)),
                        ]
                        m.next = "IDLE"
                        with m.If(remaining != piece):
                            m.next = "ISSUE"

            # A malformed access: drain its write beats, then answer with errors.
            with m.State("REFUSE"):
                with m.If(write & (remaining != 0)):
                    m.d.comb += host.wdata.ready.eq(1)
                    with m.If(host.wdata.valid):
                        m.d.sync += remaining.eq(remaining - 1)
                with m.Else():
                    m.d.comb += [host.resp.valid.eq(1), host.resp.payload.error.eq(1)]
                    # A read answers one beat per word asked for (at least one).
                    last = write | (remaining <= 1)
                    m.d.comb += host.resp.payload.last.eq(last)
                    with m.If(host.resp.ready):
                        with m.If(last):
                            m.next = "IDLE"
                        with m.Else():
                            m.d.sync += remaining.eq(remaining - 1)
        return m
