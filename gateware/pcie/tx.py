"""TLP transmitter: TLP beats from several sources, one whole TLP at a time, onto the PHY stream.

Sources are served round robin; a source keeps the grant until its last beat. The header dwords
are built from the first beat's header (the beat waits until they are out), then the payload
follows a dword a cycle and is packed into PHY beats, a TLP starting at dword 0 of a beat.
"""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import tlp
from .tlp import TlpStreamSignature


class TlpTransmitter(wiring.Component):
    def __init__(self, source_names, data_width=64):
        self.source_names = list(source_names)
        self.data_width = data_width
        members = {name: In(tlp.tlp_beats()) for name in self.source_names}
        members["phy"] = Out(TlpStreamSignature(data_width))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        sources = [getattr(self, name) for name in self.source_names]
        count = len(sources)

        # --- arbitration: round robin, one TLP at a time ------------------------------------
        grant = Signal(range(count))
        busy = Signal()
        with m.If(~busy):
            # Later assignments win: the nearest waiting source after the last grant is last.
            for distance in reversed(range(1, count + 1)):
                for i, source in enumerate(sources):
                    with m.If(source.valid & (grant == (i - distance) % count)):
                        m.d.sync += [grant.eq(i), busy.eq(1)]

        beat = tlp.TlpBeat(Signal(tlp.TlpBeat))
        beat_valid = Signal()
        beat_ready = Signal()
        for i, source in enumerate(sources):
            with m.If(busy & (grant == i)):
                m.d.comb += [beat.eq(source.payload), beat_valid.eq(source.valid), source.ready.eq(beat_ready)]
        with m.If(beat_valid & beat_ready & beat.last):
            m.d.sync += busy.eq(0)

        # --- header dwords, then payload dwords -------------------------------------------------
        header = beat.header
        header_dws = Array(tlp.build_header(header))
        index = Signal(2)
        in_payload = Signal()
        dword = Signal(32)
        dword_valid = Signal()
        dword_last = Signal()
        dword_ready = Signal()
        last_header_dword = index == tlp.header_dwords(header) - 1
        with m.If(~in_payload):
            m.d.comb += [
                dword.eq(header_dws[index]),
                dword_valid.eq(beat_valid),
                dword_last.eq(last_header_dword & ~tlp.has_data(header)),
            ]
            with m.If(dword_valid & dword_ready):
                m.d.sync += index.eq(index + 1)
                with m.If(last_header_dword):
                    m.d.sync += index.eq(0)
                    with m.If(tlp.has_data(header)):
                        m.d.sync += in_payload.eq(1)
                    with m.Else():
                        m.d.comb += beat_ready.eq(1)  # the single beat of a TLP without data
        with m.Else():
            m.d.comb += [
                dword.eq(beat.data),
                dword_valid.eq(beat_valid),
                dword_last.eq(beat.last),
                beat_ready.eq(dword_ready),
            ]
            with m.If(dword_valid & dword_ready & dword_last):
                m.d.sync += in_payload.eq(0)

        # --- packing into PHY beats -----------------------------------------------------------
        phy = self.phy
        lanes = self.data_width // 32
        fill = Signal(range(lanes))
        sent = phy.valid & phy.ready
        m.d.comb += dword_ready.eq(~phy.valid | phy.ready)
        with m.If(sent):
            m.d.sync += [phy.valid.eq(0), phy.payload.keep.eq(0)]
        with m.If(dword_valid & dword_ready):
            m.d.sync += [
                phy.payload.data.word_select(fill, 32).eq(dword),
                phy.payload.keep.eq(Mux(sent, 0, phy.payload.keep) | (1 << fill)),
                fill.eq(fill + 1),
            ]
            with m.If((fill == lanes - 1) | dword_last):
                m.d.sync += [phy.valid.eq(1), phy.payload.last.eq(dword_last), fill.eq(0)]
        return m
