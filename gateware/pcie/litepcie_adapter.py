"""Between a LitePCIe PHY's TLP streams and the endpoint's (:class:`.tlp.TlpStreamSignature`).

LitePCIe's PHYs (``litepcie.phy.*``: 7-series, UltraScale(+), Cyclone V wrappers around the hard
block) carry TLPs on streams of ``phy_layout(data_width)``: ``dat`` (64..512 bits, TLP dword *i*
of a beat in bits ``32i+31..32i``), ``be`` (a byte enable per byte of ``dat``), and LiteX's
``valid``/``ready``/``first``/``last``. The TLP starts at dword 0 of its first beat, as ours does.

Header dwords are the specification's values on every LitePCIe PHY (its depacketizer decodes the
header straight from ``dat``; its packetizer swaps the header once and the whole beat again).
Payload dwords are in the PHY's ``endianness``: ``"little"`` PHYs (UltraScale, Cyclone V) put the
byte at the lowest address in bits 7..0, as the endpoint does, so everything passes unchanged;
``"big"`` PHYs (7-series) put it in bits 31..24, so payload dwords have their bytes reversed
here, in both directions. The header length comes from ``fmt`` (bit 29 of dword 0: 4 dwords,
else 3). ``be`` becomes ``keep`` a nibble per dword (TLPs are whole dwords) and back; ``first``
is made for the PHY from the beat after a ``last``.

Ports: ``phy_source`` (from the PHY's ``source``: TLPs from the link), ``phy_sink`` (to the
PHY's ``sink``), ``tlp_rx`` (to ``PcieEndpoint.phy_rx``), ``tlp_tx`` (from ``PcieEndpoint.phy_tx``).
The PHY's clock domain must be the endpoint's ``sync`` domain (or cross with asynchronous FIFOs).
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import tlp

ENDIANNESSES = ("little", "big")


class LitePciePhyStream(wiring.Signature):
    """A LitePCIe ``stream.Endpoint(phy_layout(data_width))``, seen from the side that sends."""

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__(
            {
                "valid": Out(1),
                "ready": In(1),
                "first": Out(1),
                "last": Out(1),
                "dat": Out(data_width),
                "be": Out(data_width // 8),
            }
        )


def _reverse_bytes(word):
    return Cat(word[24:32], word[16:24], word[8:16], word[0:8])


class _Converter:
    """Which dwords of the current beat are header: counts beats since the TLP's first."""

    def __init__(self, m, name, lanes, first_dword, handshake, last):
        self.beat = Signal(range(4 + 1), name=f"{name}_beat")  # saturates: headers are <= 4 dwords
        latched_4dw = Signal(name=f"{name}_header_4dw")
        four = Mux(self.beat == 0, first_dword[29], latched_4dw)
        self.header_dwords = Mux(four, 4, 3)
        with m.If(handshake):
            with m.If(self.beat == 0):
                m.d.sync += latched_4dw.eq(first_dword[29])
            with m.If(last):
                m.d.sync += self.beat.eq(0)
            with m.Elif(self.beat != 4):
                m.d.sync += self.beat.eq(self.beat + 1)
        self.lanes = lanes

    def is_payload(self, lane):
        return self.beat * self.lanes + lane >= self.header_dwords


class LitePcieAdapter(wiring.Component):
    def __init__(self, *, data_width=64, endianness="big"):
        if endianness not in ENDIANNESSES:
            raise ValueError(f"endianness must be one of {', '.join(ENDIANNESSES)}, not {endianness!r}")
        if data_width % 64 or not 64 <= data_width <= 512:
            raise ValueError("data_width must be 64, 128, 256 or 512 (LitePCIe's PHY widths)")
        self.data_width = data_width
        self.endianness = endianness
        super().__init__(
            {
                "phy_source": In(LitePciePhyStream(data_width)),
                "phy_sink": Out(LitePciePhyStream(data_width)),
                "tlp_rx": Out(tlp.TlpStreamSignature(data_width)),
                "tlp_tx": In(tlp.TlpStreamSignature(data_width)),
            }
        )

    def _dwords(self, m, converter, src, dst):
        for lane in range(self.data_width // 32):
            word = src[32 * lane : 32 * lane + 32]
            if self.endianness == "big":
                word = Mux(converter.is_payload(lane), _reverse_bytes(word), word)
            m.d.comb += dst[32 * lane : 32 * lane + 32].eq(word)

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 32

        # PHY -> endpoint.
        src, dst = self.phy_source, self.tlp_rx
        rx = _Converter(m, "rx", lanes, src.dat[:32], src.valid & src.ready, src.last)
        self._dwords(m, rx, src.dat, dst.payload.data)
        m.d.comb += [
            dst.valid.eq(src.valid),
            src.ready.eq(dst.ready),
            dst.payload.last.eq(src.last),
            dst.payload.keep.eq(Cat(src.be[4 * lane] for lane in range(lanes))),
        ]

        # Endpoint -> PHY.
        src, dst = self.tlp_tx, self.phy_sink
        tx = _Converter(m, "tx", lanes, src.payload.data[:32], src.valid & src.ready, src.payload.last)
        self._dwords(m, tx, src.payload.data, dst.dat)
        m.d.comb += [
            dst.valid.eq(src.valid),
            src.ready.eq(dst.ready),
            dst.first.eq(tx.beat == 0),
            dst.last.eq(src.payload.last),
            dst.be.eq(Cat(src.payload.keep[lane].replicate(4) for lane in range(lanes))),
        ]
        return m
