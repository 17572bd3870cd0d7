"""The card's coherence engine without its ring link: the local side and the remote access
controller joined, with the packet streams the ring link would carry left as ports. Block tests
drive it among model cards, and the miss breakdown benchmark times the phases of a remote miss
on it."""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap
from numavia.base.coherence import NODE_ID_BITS

from . import wishbone
from .host_port import HostPortSignature
from .local_side import LocalSide
from .remote_access_controller import RemoteAccessController
from .sci_layouts import HeaderLayout


class CoherenceEngine(wiring.Component):
    """Local side + remote access controller of one card; ``local`` and ``rac`` are the two
    blocks (a testbench may watch their ports)."""

    def __init__(self, amap, geometry, program, *, counters_in_memory=False):
        self.amap, self.geometry = amap, geometry
        self.local = LocalSide(address_map=amap, geometry=geometry, counters_in_memory=counters_in_memory)
        self.rac = RemoteAccessController(
            geometry=geometry,
            slice_lines=amap.slice_bytes // geometry.line_bytes,
            ucode_init=program,
            counters_in_memory=counters_in_memory,
        )
        super().__init__(
            {
                "host": In(HostPortSignature()),
                "lac_bus": In(wishbone.Signature(addr_width=regmap.LAC.addr_width)),
                "rac_bus": In(wishbone.Signature(addr_width=regmap.RAC.addr_width)),
                "node_id": In(NODE_ID_BITS),
                "numa_mode": In(1),
                "cache_first_miss": In(1),
                "send_header": Out(stream.Signature(HeaderLayout)),
                "send_data": Out(stream.Signature(32)),
                "recv_header": In(stream.Signature(HeaderLayout)),
                "recv_data": In(stream.Signature(32)),
                "failed": In(stream.Signature(HeaderLayout)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.local = local = self.local
        m.submodules.rac = rac = self.rac
        wiring.connect(m, wiring.flipped(self.host), local.host)
        wiring.connect(m, wiring.flipped(self.lac_bus), local.bus)
        wiring.connect(m, wiring.flipped(self.rac_bus), rac.bus)
        wiring.connect(m, local.miss, rac.miss)
        wiring.connect(m, rac.local, local.remote)
        wiring.connect(m, rac.send_header, wiring.flipped(self.send_header))
        wiring.connect(m, rac.send_data, wiring.flipped(self.send_data))
        wiring.connect(m, wiring.flipped(self.recv_header), rac.recv_header)
        wiring.connect(m, wiring.flipped(self.recv_data), rac.recv_data)
        wiring.connect(m, wiring.flipped(self.failed), rac.failed)
        m.d.comb += [
            local.node_id.eq(self.node_id),
            local.node_ready.eq(1),
            local.numa_mode.eq(self.numa_mode),
            local.cache_first_miss.eq(self.cache_first_miss),
            rac.node_id.eq(self.node_id),
            rac.numa_mode.eq(self.numa_mode),
            rac.cache_first_miss.eq(self.cache_first_miss),
        ]
        return m
