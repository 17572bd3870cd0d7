"""TLP receiver: the PHY's TLP stream parsed into TLP beats, one payload dword a cycle.

The receiver reads one dword a cycle (a 64-bit PHY at the x1 Gen2 clock of 62.5 MHz delivers one
dword every other cycle, so a dword a cycle keeps up; see docs/pcie.md for wider links). It
collects the three or four header dwords, then emits the payload with the parsed header alongside,
or a single beat for a TLP without payload. A TLP that ends inside its header (malformed) is
dropped. TLP prefixes are not supported: the endpoint advertises no capability that uses them.
"""

from amaranth import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import tlp
from .tlp import TlpStreamSignature


class TlpReceiver(wiring.Component):
    def __init__(self, data_width=64):
        self.data_width = data_width
        super().__init__(
            {
                "phy": In(TlpStreamSignature(data_width)),
                "tlp": Out(tlp.tlp_beats()),
            }
        )

    def elaborate(self, platform):
        m = Module()
        phy, out = self.phy, self.tlp
        lanes = self.data_width // 32

        # --- one dword at a time out of the PHY beat -------------------------------------
        lane = Signal(range(lanes))
        dword = Signal(32)
        dword_valid = Signal()
        dword_last = Signal()
        dword_ready = Signal()
        keep_above = Signal(lanes)
        m.d.comb += [
            dword.eq(phy.payload.data.word_select(lane, 32)),
            dword_valid.eq(phy.valid & phy.payload.keep.bit_select(lane, 1)),
            keep_above.eq(phy.payload.keep >> (lane + 1)),
        ]
        beat_done = Signal()
        m.d.comb += [
            beat_done.eq((lane == lanes - 1) | ~keep_above[0]),
            dword_last.eq(phy.payload.last & beat_done),
        ]
        with m.If(phy.valid & ~phy.payload.keep.bit_select(lane, 1)):
            # An empty beat (no dword kept) carries nothing: take it.
            m.d.comb += phy.ready.eq(1)
            m.d.sync += lane.eq(0)
        with m.Elif(dword_valid & dword_ready):
            m.d.comb += phy.ready.eq(beat_done)
            m.d.sync += lane.eq(0 if lanes == 1 else lane + 1)
            with m.If(beat_done):
                m.d.sync += lane.eq(0)

        # --- header collection and payload ---------------------------------------------
        dws = Array(Signal(32, name=f"header_dw{i}") for i in range(4))
        index = Signal(2)
        tlp.parse_header(m, dws, out.payload.header)
        fmt = tlp.Dw0Layout(dws[0]).fmt
        header_length = Signal(3)
        # fmt comes from dws[0], which holds DW0 from the second header dword on: the header's end
        # is only looked for from then (index != 0).
        m.d.comb += header_length.eq(3 + fmt[0])

        with m.FSM():
            with m.State("HEADER"):
                m.d.comb += dword_ready.eq(1)
                with m.If(dword_valid):
                    m.d.sync += [dws[index].eq(dword), index.eq(index + 1)]
                    with m.If(dword_last):
                        # The TLP ended: complete only if it had exactly its header and no data.
                        m.d.sync += index.eq(0)
                        with m.If((index != 0) & (index + 1 == header_length) & ~fmt[1]):
                            m.next = "NO_PAYLOAD"
                    with m.Elif((index != 0) & (index + 1 == header_length)):
                        m.d.sync += index.eq(0)
                        with m.If(fmt[1]):
                            m.next = "PAYLOAD"
                        with m.Else():
                            m.next = "DROP"  # a payload the header does not announce
            with m.State("PAYLOAD"):
                m.d.comb += [
                    out.valid.eq(dword_valid),
                    out.payload.data.eq(dword),
                    out.payload.last.eq(dword_last),
                    dword_ready.eq(out.ready),
                ]
                with m.If(dword_valid & out.ready & dword_last):
                    m.next = "HEADER"
            with m.State("NO_PAYLOAD"):
                m.d.comb += [out.valid.eq(1), out.payload.last.eq(1)]
                with m.If(out.ready):
                    m.next = "HEADER"
            with m.State("DROP"):
                m.d.comb += dword_ready.eq(1)
                with m.If(dword_valid & dword_last):
                    m.next = "HEADER"
        return m
