"""Configuration space: identity, BAR sizing as enumeration does it, byte-enabled writes, the
capability chain, MPS/MRRS taken as programmed (within what we support), completer id capture."""

from cocotbext.pcie.core.tlp import CplStatus, TlpType
from support.pcie_helpers import harness

from numavia.gateware.pcie.config import MSI_CAP_OFFSET, PCIE_CAP_OFFSET, EndpointParams
from numavia.pcie_model import config_read, config_write

PARAMS = EndpointParams(
    vendor_id=0x1234,
    device_id=0x5678,
    class_code=0x020000,
    revision_id=3,
    bar0_bytes=8192,
    bar2_bytes=1 << 20,
    max_payload_bytes=256,
)


async def read(ctx, h, register):
    (cpl,) = await h.request(ctx, config_read(register, tag=register >> 2 & 31))
    assert cpl.fmt_type == TlpType.CPL_DATA and cpl.status == CplStatus.SC and cpl.byte_count == 4
    return int.from_bytes(cpl.get_data(), "little")


async def write(ctx, h, register, value, first_be=0xF):
    (cpl,) = await h.request(ctx, config_write(register, value, first_be, tag=register >> 2 & 31))
    assert cpl.fmt_type == TlpType.CPL and cpl.status == CplStatus.SC


def test_identity_bars_capabilities_and_device_control():
    h = harness(params=PARAMS)

    async def testbench(ctx, h):
        assert await read(ctx, h, 0x00) == 0x5678_1234
        assert await read(ctx, h, 0x08) == 0x0200_0003
        assert await read(ctx, h, 0x04) >> 16 & 0x10  # capability list present
        # BAR sizing: all ones in, size mask out; 32-bit non-prefetchable memory.
        for bar, size in ((0x10, 8192), (0x18, 1 << 20), (0x14, 0), (0x1C, 0), (0x20, 0)):
            await write(ctx, h, bar, 0xFFFF_FFFF)
            value = await read(ctx, h, bar)
            assert value == ((~(size - 1)) & 0xFFFF_FFF0 if size else 0), hex(bar)
        await write(ctx, h, 0x18, 0xC012_3456)
        assert await read(ctx, h, 0x18) == 0xC010_0000  # low bits below the size drop
        # Capability chain: MSI -> PCI Express -> end; extended space empty.
        assert await read(ctx, h, 0x34) & 0xFC == MSI_CAP_OFFSET
        msi = await read(ctx, h, MSI_CAP_OFFSET)
        assert msi & 0xFF == 0x05 and msi >> 8 & 0xFF == PCIE_CAP_OFFSET and msi >> 23 & 1
        pcie = await read(ctx, h, PCIE_CAP_OFFSET)
        assert pcie & 0xFF == 0x10 and pcie >> 8 & 0xFF == 0 and pcie >> 20 & 0xF == 0  # endpoint
        assert await read(ctx, h, PCIE_CAP_OFFSET + 4) & 7 == 1  # 256 B
        assert await read(ctx, h, 0x100) == 0
        # Command: a byte-enabled write touches only its bytes, and only writable bits.
        await write(ctx, h, 0x04, 0xFFFF_FFFF, first_be=0b0001)
        assert await read(ctx, h, 0x04) & 0xFFFF == 0x0046
        # Device control: MPS above what we support is clamped where it is used.
        await write(ctx, h, PCIE_CAP_OFFSET + 8, 5 << 5 | 1 << 12)
        assert (await read(ctx, h, PCIE_CAP_OFFSET + 8)) >> 5 & 7 == 5
        assert ctx.get(h.dut.config.max_payload_code) == 1
        assert ctx.get(h.dut.config.max_read_request_code) == 1
        # The bus and device number of config requests become the completer id.
        assert ctx.get(h.dut.config.completer_id) == 1 << 8

    h.run(testbench)
