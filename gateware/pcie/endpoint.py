"""The card's PCIe endpoint at the transaction layer.

    PHY TLP stream -> TlpReceiver -+-> ConfigSpace  (type-0 config requests)  -+
                                   +-> Requester    (completions for our reads) +-> TlpTransmitter -> PHY
                                   +-> Completer    (everything else)          -+
                                                         |  BAR0 -> HostPortToWishbone -> ``csr``
                                                         |  BAR2 -> ``shared`` (host port)
                                   MsiSender (``msi_event``) ---------------------^

Ports: ``phy_rx``/``phy_tx`` (TLP streams, :class:`~.tlp.TlpStreamSignature`), ``csr`` (Wishbone
initiator onto the card's register window), ``shared`` (host-port initiator onto the shared
window and private memory), ``dma`` (the VIA engine's :class:`~.requester.DmaSignature`),
``msi_event`` and a few status pulses. See docs/pcie.md.
"""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .. import wishbone
from ..host_port import HostPortSignature
from . import tlp
from .completer import Completer
from .config import ConfigSpace, ConfigState, EndpointParams
from .csr_bridge import HostPortToWishbone
from .msi import MsiSender
from .requester import DmaSignature, Requester
from .rx import TlpReceiver
from .tx import TlpTransmitter


class PcieEndpoint(wiring.Component):
    def __init__(self, params=EndpointParams()):
        self.params = params
        super().__init__(
            {
                "phy_rx": In(tlp.TlpStreamSignature(params.data_width)),
                "phy_tx": Out(tlp.TlpStreamSignature(params.data_width)),
                "csr": Out(wishbone.Signature(addr_width=(params.bar0_bytes // 4 - 1).bit_length())),
                "shared": Out(HostPortSignature()),
                "dma": In(DmaSignature()),
                "msi_event": In(1),
                "config": Out(ConfigState),  # for status registers (link up, BARs, MPS)
                "unsupported": Out(1),
                "completion_timeout": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.rx = rx = TlpReceiver(p.data_width)
        m.submodules.tx = tx = TlpTransmitter(["config", "completer", "msi", "dma_write", "dma_read"], p.data_width)
        m.submodules.config_space = config = ConfigSpace(p)
        m.submodules.completer = completer = Completer(bar0_bytes=p.bar0_bytes, bar2_bytes=p.bar2_bytes)
        m.submodules.csr_bridge = csr_bridge = HostPortToWishbone(addr_width=len(self.csr.adr))
        m.submodules.requester = requester = Requester(
            outstanding=p.dma_outstanding,
            max_read_request_bytes=p.max_read_request_bytes,
            completion_timeout=p.completion_timeout_cycles,
        )
        m.submodules.msi = msi = MsiSender()

        wiring.connect(m, wiring.flipped(self.phy_rx), rx.phy)
        wiring.connect(m, tx.phy, wiring.flipped(self.phy_tx))

        # Route each received TLP by its header (the same on all of its beats).
        header = rx.tlp.payload.header
        for port in (config.request, requester.completion, completer.request):
            m.d.comb += port.payload.eq(rx.tlp.payload)
        with m.If(tlp.is_config_type0(header)):
            m.d.comb += [config.request.valid.eq(rx.tlp.valid), rx.tlp.ready.eq(config.request.ready)]
        with m.Elif(tlp.is_completion(header)):
            m.d.comb += [requester.completion.valid.eq(rx.tlp.valid), rx.tlp.ready.eq(requester.completion.ready)]
        with m.Else():
            m.d.comb += [completer.request.valid.eq(rx.tlp.valid), rx.tlp.ready.eq(completer.request.ready)]

        wiring.connect(m, config.completion, tx.config)
        wiring.connect(m, completer.completion, tx.completer)
        wiring.connect(m, msi.request, tx.msi)
        wiring.connect(m, requester.write_request, tx.dma_write)
        wiring.connect(m, requester.read_request, tx.dma_read)

        wiring.connect(m, completer.bar0, csr_bridge.host)
        wiring.connect(m, csr_bridge.bus, wiring.flipped(self.csr))
        wiring.connect(m, completer.bar2, wiring.flipped(self.shared))
        wiring.connect(m, wiring.flipped(self.dma), requester.dma)

        for block in (completer, requester, msi):
            m.d.comb += block.config.eq(config.state)
        m.d.comb += [
            self.config.eq(config.state),
            msi.event.eq(self.msi_event),
            self.unsupported.eq(completer.unsupported),
            self.completion_timeout.eq(requester.timed_out),
        ]
        return m
