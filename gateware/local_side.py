"""The card's local side: everything a host access touches before it needs another node.

Host port -> burst splitter -> local access controller, with the tag SRAM, the memory controller
and the ownership arbiter shared with the sequencer (the remote access controller), whose ports
come out of this component: the miss interface, a second tag command port, the memory
controller's remote port and its ownership request. Registers: ``regmap.LAC``.
"""

from amaranth import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap
from numavia.base.coherence import NODE_ID_BITS, CacheGeometry

from . import wishbone
from .burst_splitter import BurstSplitter
from .event_counters import EventCounters
from .host_port import HostAddressMap, HostPortSignature
from .local_access_controller import EVENT_COUNTERS, LacCounters, LacEvents, LocalAccessController, MissSignature
from .memory_controller import MemoryController, MemoryPortSignature
from .ownership import Ownership
from .register_bank import RegisterBank
from .tag_store import LOOKUP_LATENCY, TagStore, command_layout, response_layout

__all__ = ["CacheGeometry", "LocalSide", "RemoteSideSignature"]


class RemoteSideSignature(wiring.Signature):
    """What the sequencer uses of the local side (the sequencer's view)."""

    def __init__(self, geometry):
        super().__init__(
            {
                "tag_cmd_valid": Out(1),
                "tag_cmd_ready": In(1),
                "tag_cmd": Out(command_layout(geometry)),
                "tag_resp_valid": In(1),
                "tag_resp": In(response_layout(geometry)),
                "mem": Out(MemoryPortSignature()),
                "own_req": Out(1),
                "own_grant": In(1),
                "purged": Out(stream.Signature(32, always_ready=True)),  # COUNT PURGE, REWRITTEN_READ: the line
            }
        )


class LocalSide(wiring.Component):
    def __init__(
        self,
        *,
        address_map=HostAddressMap(),
        geometry=CacheGeometry(),
        tags_in_block_ram=False,
        counters_in_memory=False,
    ):
        self.amap, self.geometry = address_map, geometry
        self.tags_in_block_ram, self.counters_in_memory = tags_in_block_ram, counters_in_memory
        super().__init__(
            {
                "host": In(HostPortSignature()),
                "miss": Out(MissSignature()),
                "remote": In(RemoteSideSignature(geometry)),
                "bus": In(wishbone.Signature(addr_width=regmap.LAC.addr_width)),
                "node_id": In(NODE_ID_BITS),
                "node_ready": In(1),
                "numa_mode": In(1),
                "cache_first_miss": In(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        g, amap = self.geometry, self.amap
        slice_lines = amap.slice_bytes // g.line_bytes
        m.submodules.splitter = splitter = BurstSplitter(line_bytes=g.line_bytes)
        m.submodules.lac = lac = LocalAccessController(address_map=amap, geometry=g)
        m.submodules.tags = tags = TagStore(geometry=g, slice_lines=slice_lines, block_ram=self.tags_in_block_ram)
        m.submodules.memory = memory = MemoryController(
            home_words=amap.slice_bytes // 4, cache_words=g.lines * g.line_words, private_words=amap.private_bytes // 4
        )
        m.submodules.ownership = own = Ownership()
        m.submodules.bank = bank = RegisterBank(regmap.LAC, indexed={"counters": EVENT_COUNTERS})

        wiring.connect(m, wiring.flipped(self.host), splitter.host)
        wiring.connect(m, splitter.line, lac.line)
        wiring.connect(m, lac.remote, wiring.flipped(self.miss))
        wiring.connect(m, lac.mem, memory.local)
        wiring.connect(m, wiring.flipped(self.remote.mem), memory.remote)
        wiring.connect(m, wiring.flipped(self.remote.purged), lac.purged)
        wiring.connect(m, wiring.flipped(self.bus), bank.bus)
        m.d.comb += [
            lac.node_id.eq(self.node_id),
            lac.node_ready.eq(self.node_ready),
            lac.numa_mode.eq(self.numa_mode),
            lac.cache_first_miss.eq(self.cache_first_miss),
            lac.refused_upstream.eq(splitter.refused),
            own.local_req.eq(lac.own_req),
            lac.own_grant.eq(own.local_grant),
            own.remote_req.eq(self.remote.own_req),
            self.remote.own_grant.eq(own.remote_grant),
        ]
        # The tag SRAM's command port belongs to whoever owns the card.
        remote_owns = own.remote_grant
        m.d.comb += [
            tags.cmd_valid.eq(Mux(remote_owns, self.remote.tag_cmd_valid, lac.tag_cmd_valid)),
            tags.cmd.eq(Mux(remote_owns, self.remote.tag_cmd, lac.tag_cmd)),
            lac.tag_cmd_ready.eq(tags.cmd_ready & ~remote_owns),
            self.remote.tag_cmd_ready.eq(tags.cmd_ready & remote_owns),
            lac.tag_resp_valid.eq(tags.resp_valid),
            lac.tag_resp.eq(tags.resp),
            self.remote.tag_resp_valid.eq(tags.resp_valid),
            self.remote.tag_resp.eq(tags.resp),
        ]

        # Registers.
        command = regmap.LAC.register("COMMAND")
        geometry = regmap.LAC.register("GEOMETRY")
        clear_counters = bank.command.w_stb & bank.command.w_data[command.field("CLEAR_COUNTERS").lsb]
        m.d.comb += [
            lac.flush.eq(bank.command.w_stb & bank.command.w_data[command.field("FLUSH").lsb]),
            lac.clear_counters.eq(clear_counters),
            bank.status.value.eq(lac.flush_busy | lac.debug_busy << 1),
            lac.debug_start.eq(bank.debug_cmd.w_stb),
            lac.debug_what.eq(bank.debug_cmd.w_data),
            lac.debug_addr.eq(bank.debug_addr.value),
            bank.debug_tag.value.eq(lac.debug_tag.state | lac.debug_tag.fwd << 8 | lac.debug_tag.bwd << 16),
            bank.debug_tag_line.value.eq(lac.debug_tag.line << g.offset_bits),
            bank.debug_dir.value.eq(lac.debug_dir.mstate | lac.debug_dir.lock << 2 | lac.debug_dir.head << 8),
            bank.debug_data.value.eq(lac.debug_data),
            bank.geometry.value.eq(
                g.ways << geometry.field("WAYS").lsb
                | g.set_bits << geometry.field("SET_BITS").lsb
                | amap.slice_bits << geometry.field("SLICE_BITS").lsb
                | LOOKUP_LATENCY << geometry.field("LOOKUP_LATENCY").lsb
                | g.offset_bits << geometry.field("LINE_BITS").lsb
            ),
        ]
        m.d.comb += [bank.port(name).value.eq(getattr(lac.counters, name)) for name in LacCounters.NAMES]
        # The controller's events, counted a cycle late (off its decisions' paths) by an
        # EventCounters: in memory where the card asks (counters_in_memory), else in flip-flops.
        m.submodules.counters = counters = EventCounters(
            len(EVENT_COUNTERS), in_memory=self.counters_in_memory, late=True
        )
        wiring.connect(m, bank.counters, counters.read)
        m.d.comb += counters.clear.eq(clear_counters)
        for i, name in enumerate(LacEvents.NAMES):
            m.d.comb += counters.increments[i].eq(getattr(lac.events, name))
        return m
