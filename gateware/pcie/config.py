"""The endpoint's parameters and its type-0 configuration space.

The configuration space is what a host's enumeration reads and programs: identity registers,
two 32-bit memory BARs (BAR0: control/status registers and doorbells; BAR2: the shared-memory
window), an MSI capability and a PCI Express capability (max payload and read request size).
Everything else, including the extended space from 0x100, reads as zero and ignores writes.

Config reads are answered with a one-dword completion, config writes with a completion without
data; the bus and device number of every type-0 request are captured as the completer id, as a
PCIe function must.
"""

from dataclasses import asdict, dataclass

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from . import tlp
from .tlp import CplStatus, Fmt, Type

MSI_CAP_OFFSET = 0x40
PCIE_CAP_OFFSET = 0x60


def _size_code(nbytes, what):
    """128 << code == nbytes; the encoding of payload and read request sizes."""
    if nbytes not in (128, 256, 512, 1024, 2048, 4096):
        raise ValueError(f"{what} must be 128..4096 bytes, a power of two, not {nbytes}")
    return nbytes.bit_length() - 8


@dataclass(frozen=True)
class EndpointParams:
    vendor_id: int = 0x1D50  # OpenMoko's open-hardware vendor id pool
    device_id: int = 0x6E56
    revision_id: int = 0x01
    class_code: int = 0x058000  # memory controller, other
    subsystem_vendor_id: int = 0x1D50
    subsystem_id: int = 0x0001
    bar0_bytes: int = 4096  # control/status registers and doorbells
    bar2_bytes: int = 1 << 23  # shared window + private memory (HostAddressMap.window_bytes)
    max_payload_bytes: int = 256  # the most we advertise (Device Capabilities); the RC may lower it
    max_read_request_bytes: int = 512  # the most our DMA asks for; the RC may lower it
    link_speed: int = 2  # 1: 2.5 GT/s, 2: 5 GT/s (reported in Link Capabilities)
    link_width: int = 1
    data_width: int = 64  # PHY TLP stream width
    dma_outstanding: int = 8  # DMA read requests in flight (tags)
    completion_timeout_cycles: int = 50_000  # 400 us at 125 MHz; the specification allows 50 us..50 ms

    def __post_init__(self):
        for name in ("bar0_bytes", "bar2_bytes"):
            v = getattr(self, name)
            if v & (v - 1) or not 4096 <= v <= 1 << 31:
                raise ValueError(f"{name} must be a power of two between 4 KiB and 2 GiB")
        if self.data_width % 32 or self.data_width < 64:
            raise ValueError(f"data_width must be a multiple of 32 bits, at least 64, not {self.data_width}")
        _size_code(self.max_payload_bytes, "max_payload_bytes")
        _size_code(self.max_read_request_bytes, "max_read_request_bytes")
        if not 1 <= self.dma_outstanding <= 16 or self.dma_outstanding & (self.dma_outstanding - 1):
            # 5-bit tags (no extended tags) and at least one spare generation bit per slot.
            raise ValueError("dma_outstanding must be a power of two, 1..16")

    @property
    def max_payload_code(self):
        return _size_code(self.max_payload_bytes, "max_payload_bytes")

    @property
    def max_read_request_code(self):
        return _size_code(self.max_read_request_bytes, "max_read_request_bytes")

    def as_dict(self):
        return asdict(self)


# What the rest of the endpoint needs to know of the configuration.
ConfigState = data.StructLayout(
    {
        "completer_id": 16,
        "memory_enable": 1,
        "bus_master_enable": 1,
        "bar0_base": 32,
        "bar2_base": 32,
        "max_payload_code": 3,  # effective: min(programmed, supported)
        "max_read_request_code": 3,  # effective: min(programmed, our maximum)
        "msi_enable": 1,
        "msi_address": 64,
        "msi_data": 16,
    }
)


def _min(a, b):
    return Mux(a < b, a, b)


class ConfigSpace(wiring.Component):
    def __init__(self, params=EndpointParams()):
        self.params = params
        super().__init__(
            {
                "request": In(tlp.tlp_beats()),
                "completion": Out(tlp.tlp_beats()),
                "state": Out(ConfigState),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.params
        req, cpl, state = self.request, self.completion, self.state
        header = req.payload.header

        command = Signal(16)  # bits 1 (memory), 2 (bus master), 6, 8, 10 are writable
        bar0 = Signal(32)
        bar2 = Signal(32)
        msi_control = Signal(16)  # bit 0: enable; bits 6:4 multiple message enable (ignored)
        msi_address = Signal(64)
        msi_data = Signal(16)
        device_control = Signal(16, init=(2 << 12) | (1 << 4))  # MRRS 512, relaxed ordering
        completer_id = Signal(16)

        # Values and writable masks, register by register (dword index -> (value, mask, target)).
        bar_mask = lambda size: (~(size - 1)) & 0xFFFF_FFF0
        registers = {
            0x00: Const(p.vendor_id | p.device_id << 16, 32),
            0x04: Cat(command, Const(1 << 4, 16)),  # status: capabilities list
            0x08: Const(p.revision_id | p.class_code << 8, 32),
            0x0C: Const(0, 32),  # header type 0, single function
            0x10: bar0,
            0x18: bar2,
            0x2C: Const(p.subsystem_vendor_id | p.subsystem_id << 16, 32),
            0x34: Const(MSI_CAP_OFFSET, 32),
            MSI_CAP_OFFSET + 0x0: Cat(
                Const(0x05, 8), Const(PCIE_CAP_OFFSET, 8), msi_control | (1 << 7)
            ),  # 64-bit capable, one vector
            MSI_CAP_OFFSET + 0x4: msi_address[:32],
            MSI_CAP_OFFSET + 0x8: msi_address[32:],
            MSI_CAP_OFFSET + 0xC: msi_data,
            PCIE_CAP_OFFSET + 0x0: Const(0x10 | 0x0002 << 16, 32),  # version 2, endpoint
            PCIE_CAP_OFFSET + 0x4: Const(p.max_payload_code | 1 << 15, 32),  # role-based errors
            PCIE_CAP_OFFSET + 0x8: Cat(device_control, Const(0, 16)),
            PCIE_CAP_OFFSET + 0xC: Const(p.link_speed | p.link_width << 4, 32),
            PCIE_CAP_OFFSET + 0x10: Const((p.link_speed | p.link_width << 4) << 16, 32),
        }
        # Writable registers: (storage, its lowest bit in the dword, writable bits of the dword).
        writable = {
            0x04: (command, 0, 0x0000_0546),
            0x10: (bar0, 0, bar_mask(p.bar0_bytes)),
            0x18: (bar2, 0, bar_mask(p.bar2_bytes)),
            MSI_CAP_OFFSET + 0x0: (msi_control, 16, 0x0071_0000),
            MSI_CAP_OFFSET + 0x4: (msi_address[:32], 0, 0xFFFF_FFFC),
            MSI_CAP_OFFSET + 0x8: (msi_address[32:], 0, 0xFFFF_FFFF),
            MSI_CAP_OFFSET + 0xC: (msi_data, 0, 0x0000_FFFF),
            PCIE_CAP_OFFSET + 0x8: (device_control, 0, 0x0000_FDFF),
        }

        register_number = tlp.ConfigDw2Layout(header.address[:32]).register
        read_value = Signal(32)
        with m.Switch(register_number):
            for offset, value in registers.items():
                with m.Case(offset // 4):
                    m.d.comb += read_value.eq(value)

        be_mask = Cat(*[b.replicate(8) for b in header.first_be])
        is_write = tlp.has_data(header)

        # A config request is one beat (no data, or one dword). Answer it, then take it.
        m.d.comb += [
            cpl.valid.eq(req.valid),
            req.ready.eq(cpl.ready),
            cpl.payload.last.eq(1),
            cpl.payload.data.eq(read_value),
        ]
        ch = cpl.payload.header
        m.d.comb += [
            ch.fmt.eq(Mux(is_write, Fmt.NO_DATA_3DW, Fmt.DATA_3DW)),
            ch.type.eq(Type.CPL),
            ch.length.eq(Mux(is_write, 0, 1)),
            ch.tc.eq(header.tc),
            ch.attr.eq(header.attr),
            ch.status.eq(CplStatus.SC),
            ch.byte_count.eq(4),
            ch.requester_id.eq(header.requester_id),
            ch.tag.eq(header.tag),
            ch.completer_id.eq(Cat(Const(0, 3), header.address[19:32])),
        ]
        with m.If(req.valid & req.ready):
            m.d.sync += completer_id.eq(Cat(Const(0, 3), header.address[19:32]))
            with m.If(is_write):
                with m.Switch(register_number):
                    for offset, (target, lsb, mask) in writable.items():
                        with m.Case(offset // 4):
                            enabled = be_mask & mask
                            merged = (registers[offset] & ~enabled) | (req.payload.data & enabled)
                            m.d.sync += target.eq(merged[lsb : lsb + len(target)])

        m.d.comb += [
            state.completer_id.eq(completer_id),
            state.memory_enable.eq(command[1]),
            state.bus_master_enable.eq(command[2]),
            state.bar0_base.eq(bar0),
            state.bar2_base.eq(bar2),
            state.max_payload_code.eq(_min(device_control[5:8], p.max_payload_code)),
            state.max_read_request_code.eq(_min(device_control[12:15], p.max_read_request_code)),
            state.msi_enable.eq(msi_control[0]),
            state.msi_address.eq(msi_address),
            state.msi_data.eq(msi_data),
        ]
        return m
