"""The top the cocotb endpoint test simulates: the PCIe endpoint with a small register bank behind
BAR0 and a memory behind the shared-window host port (BAR2), its DMA and MSI pins left to the test.

The register bank is the card's own :class:`RegisterBank` (built from a test block of the register
map); the memory serves host-port bursts with byte enables and refuses accesses beyond its end,
as the local side does.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base import regmap
from numavia.gateware.host_port import HostPortSignature
from numavia.gateware.pcie import tlp
from numavia.gateware.pcie.endpoint import PcieEndpoint
from numavia.gateware.pcie.requester import DmaSignature
from numavia.gateware.register_bank import RegisterBank

Access = regmap.Access
TEST_BLOCK = regmap.Block(
    "test",
    base=0,
    size=0x1000,
    doc="registers of the endpoint test top",
    registers=(
        regmap.Register("SCRATCH", 0x00, Access.RW, "read/write storage", reset=0x5A5A_0000),
        regmap.Register("MAGIC", 0x04, Access.RO, "a constant the test knows"),
        regmap.Register("DOORBELL", 0x08, Access.WO, "a doorbell: each write counts and is kept"),
        regmap.Register("DOORBELL_COUNT", 0x0C, Access.RO, "doorbell writes so far"),
        regmap.Register("DOORBELL_LAST", 0x10, Access.RO, "the last doorbell value"),
    ),
)
MAGIC = 0x4E55_4D41  # "NUMA"


class HostPortMemory(wiring.Component):
    """``words`` 32-bit words behind a host port; an access past the end is refused (``error``)."""

    def __init__(self, words):
        self.words = words
        super().__init__({"host": In(HostPortSignature())})

    def elaborate(self, platform):
        m = Module()
        host = self.host
        m.submodules.mem = mem = Memory(shape=32, depth=self.words, init=[])
        wr = mem.write_port(granularity=8)
        rd = mem.read_port()
        word = Signal(30)
        remaining = Signal(7)
        refused = Signal()
        m.d.comb += rd.en.eq(0)  # (a read port's enable is 1 unless driven): hold the data
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += host.req.ready.eq(1)
                with m.If(host.req.valid):
                    end = host.req.payload.addr[2:] + host.req.payload.count
                    m.d.sync += [
                        word.eq(host.req.payload.addr[2:]),
                        remaining.eq(host.req.payload.count),
                        refused.eq(end > self.words),
                    ]
                    m.next = "READ_ADDRESS"
                    with m.If(host.req.payload.write):
                        m.next = "WRITE"
            with m.State("READ_ADDRESS"):
                m.d.comb += [rd.addr.eq(word), rd.en.eq(1)]
                m.next = "READ_DATA"
            with m.State("READ_DATA"):
                m.d.comb += [
                    host.resp.valid.eq(1),
                    host.resp.payload.data.eq(rd.data),
                    host.resp.payload.error.eq(refused),
                    host.resp.payload.last.eq(remaining == 1),
                ]
                with m.If(host.resp.ready):
                    m.d.sync += [word.eq(word + 1), remaining.eq(remaining - 1)]
                    m.next = "READ_ADDRESS"
                    with m.If(remaining == 1):
                        m.next = "IDLE"
            with m.State("WRITE"):
                m.d.comb += [host.wdata.ready.eq(1), wr.addr.eq(word), wr.data.eq(host.wdata.payload.data)]
                with m.If(host.wdata.valid):
                    m.d.comb += wr.en.eq(host.wdata.payload.be & ~refused.replicate(4))
                    m.d.sync += [word.eq(word + 1), remaining.eq(remaining - 1)]
                    with m.If(remaining == 1):
                        m.next = "WRITE_RESPONSE"
            with m.State("WRITE_RESPONSE"):
                m.d.comb += [host.resp.valid.eq(1), host.resp.payload.error.eq(refused), host.resp.payload.last.eq(1)]
                with m.If(host.resp.ready):
                    m.next = "IDLE"
        return m


class PcieTestTop(wiring.Component):
    def __init__(self, params):
        self.params = params
        super().__init__(
            {
                "phy_rx": In(tlp.TlpStreamSignature(params.data_width)),
                "phy_tx": Out(tlp.TlpStreamSignature(params.data_width)),
                "dma": In(DmaSignature()),
                "msi_event": In(1),
                "completion_timeout": Out(1),
                "unsupported": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.endpoint = ep = PcieEndpoint(p)
        m.submodules.registers = regs = RegisterBank(TEST_BLOCK)
        # The window the test memory fills is the lower half of BAR2; the upper half is refused.
        m.submodules.memory = memory = HostPortMemory(p.bar2_bytes // 8)
        wiring.connect(m, wiring.flipped(self.phy_rx), ep.phy_rx)
        wiring.connect(m, ep.phy_tx, wiring.flipped(self.phy_tx))
        wiring.connect(m, wiring.flipped(self.dma), ep.dma)
        m.d.comb += [
            ep.msi_event.eq(self.msi_event),
            self.completion_timeout.eq(ep.completion_timeout),
            self.unsupported.eq(ep.unsupported),
        ]
        wiring.connect(m, ep.csr, regs.bus)
        wiring.connect(m, ep.shared, memory.host)

        count = Signal(32)
        last = Signal(32)
        with m.If(regs.port("DOORBELL").w_stb):
            m.d.sync += [count.eq(count + 1), last.eq(regs.port("DOORBELL").w_data)]
        m.d.comb += [
            regs.port("MAGIC").value.eq(MAGIC),
            regs.port("DOORBELL_COUNT").value.eq(count),
            regs.port("DOORBELL_LAST").value.eq(last),
        ]
        return m
