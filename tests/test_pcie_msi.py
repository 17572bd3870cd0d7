"""MSI: an event becomes one memory write of the message data to the message address; events
before MSI is enabled are kept and sent once it is, bursts of events merge."""

import struct

from support.pcie_helpers import harness, run

from numavia.gateware.pcie.config import MSI_CAP_OFFSET
from numavia.pcie_model import config_write


async def pulse(ctx, signal):
    ctx.set(signal, 1)
    await ctx.tick()
    ctx.set(signal, 0)


def test_event_sends_the_programmed_message():
    h = harness()

    async def body(ctx, h):
        await pulse(ctx, h.dut.msi_event)
        await h.wait(ctx, lambda: h.msi_writes, what="MSI")
        ((_, t),) = h.msi_writes
        assert t.address == 0xFEE0_0000 and t.length == 1 and t.first_be == 0xF
        assert struct.unpack("<L", t.get_data())[0] == 0x0042
        # A 64-bit message address gives a 4DW write.
        h.msi_address = 0x1_0000_1000
        await h.request(ctx, config_write(MSI_CAP_OFFSET + 4, 0x1000, tag=20))
        await h.request(ctx, config_write(MSI_CAP_OFFSET + 8, 0x1, tag=21))
        await pulse(ctx, h.dut.msi_event)
        await h.wait(ctx, lambda: len(h.msi_writes) == 2, what="second MSI")
        assert h.msi_writes[1][1].address == 0x1_0000_1000

    run(h, body)


def test_events_while_disabled_are_kept_and_merged():
    h = harness()

    async def testbench(ctx, h):
        for _ in range(3):
            await pulse(ctx, h.dut.msi_event)  # no MSI, no bus mastering yet
        for _ in range(100):
            await ctx.tick()
        assert not [t for _, t in h.from_card if t.fmt_type.name.startswith("MEM_WRITE")]
        await h.enumerate(ctx)
        await h.wait(ctx, lambda: h.msi_writes, what="MSI after enabling")
        for _ in range(100):
            await ctx.tick()
        assert len(h.msi_writes) == 1

    h.run(testbench)
