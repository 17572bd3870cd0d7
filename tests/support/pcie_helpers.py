"""Shared set-up of the PCIe endpoint tests (Amaranth simulator, Python host; see numavia.pcie_model)."""

from numavia.gateware.pcie.config import EndpointParams
from numavia.gateware.pcie.endpoint import PcieEndpoint
from numavia.pcie_model import EndpointHarness

BAR0 = 0xF000_0000
BAR2 = 0xE000_0000
SHARED_BYTES = 1 << 16


def harness(params=None, **kwargs):
    params = params or EndpointParams(bar2_bytes=SHARED_BYTES, completion_timeout_cycles=2000)
    return EndpointHarness(PcieEndpoint(params), shared_bytes=SHARED_BYTES, **kwargs)


def run(h, body, **enumerate_kwargs):
    """Enumerate like a host, then run ``body(ctx, h)``."""

    async def testbench(ctx, h):
        await h.enumerate(ctx, bar0=BAR0, bar2=BAR2, **enumerate_kwargs)
        await body(ctx, h)

    h.run(testbench)


def completion_payload(completions):
    """The bytes a read asked for, from its completions (lower address marks the first byte)."""
    data = bytearray()
    for c in completions:
        data += c.get_data()[c.lower_address & 3 :][: c.byte_count]
    return bytes(data)
