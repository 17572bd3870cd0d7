"""Two VIA engines back to back in the Amaranth simulator, each with a host RAM, for engine tests.

The testbench plays firmware and host: it writes registers through the Wishbone BFM, builds
descriptors in the RAMs and polls their status. The link between the engines is direct (a frame
moves 4 bytes a cycle) and can drop chosen frames in either direction.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring

from numavia.base import regmap, via_att, via_descriptor
from numavia.base.via_params import ViaParams
from numavia.gateware.bfm import wishbone_read as read
from numavia.gateware.bfm import wishbone_write as write
from numavia.gateware.via_engine import ViaEngine
from support.wishbone_sram import WishboneSRAM, dump, load

HOST = 0x6000_0000
HOST_SIZE = 0x1_0000
PARAMS = ViaParams(
    vis=4,
    cqs=2,
    queue_depth=4,
    max_segments=4,
    window=8,
    max_mtu=1500,
    att_regions=8,
    att_pages=64,
    host_base=HOST,
    host_size=HOST_SIZE,
    tx_buffer_bytes=4096,
    rx_buffer_bytes=8192,
    read_jobs=2,
)
VIA = regmap.VIA
DOORBELLS = regmap.DOORBELL.array("VI")
CTRL = via_descriptor.CONTROL_SEGMENT


class Link(wiring.Component):
    """Passes frames from one engine to the other, dropping the frames whose index is in ``drop``."""

    def __init__(self, engine_from, engine_to, drop=()):
        self.src, self.dst, self.drop = engine_from, engine_to, tuple(drop)
        super().__init__({"frames": wiring.Out(16)})

    def elaborate(self, platform):
        m = Module()
        src, dst = self.src.eth_tx, self.dst.eth_rx
        index = self.frames
        drop_now = Signal()
        for d in self.drop:
            with m.If(index == d):
                m.d.comb += drop_now.eq(1)
        m.d.comb += [
            src.ready.eq(1),
            dst.valid.eq(src.valid & ~drop_now),
            dst.payload.eq(src.payload),
        ]
        with m.If(src.valid & src.payload.last):
            m.d.sync += index.eq(index + 1)
        return m


class Pair(wiring.Component):
    """``direct=False`` leaves the engines' Ethernet ports unconnected for a testbench wire
    (``via_faults.FaultyWire``) to carry the frames."""

    def __init__(self, *, drop_ab=(), drop_ba=(), params=PARAMS, rto_cycles=3000, direct=True):
        self.a = ViaEngine(params, rto_cycles=rto_cycles, retry_limit=8)
        self.b = ViaEngine(params, rto_cycles=rto_cycles, retry_limit=8)
        self.ram_a = WishboneSRAM(base=HOST, size=HOST_SIZE)
        self.ram_b = WishboneSRAM(base=HOST, size=HOST_SIZE)
        self.direct = direct
        if direct:
            self.ab = Link(self.a, self.b, drop_ab)
            self.ba = Link(self.b, self.a, drop_ba)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.a, m.submodules.b = self.a, self.b
        m.submodules.ram_a, m.submodules.ram_b = self.ram_a, self.ram_b
        if self.direct:
            m.submodules.ab, m.submodules.ba = self.ab, self.ba
        wiring.connect(m, self.a.dma, self.ram_a.bus)
        wiring.connect(m, self.b.dma, self.ram_b.bus)
        m.d.comb += [self.a.node_id.eq(0), self.b.node_id.eq(1)]
        # One cycle counter for both, as the nodes of a cluster share one clock and reset.
        cycles = Signal(32)
        m.d.sync += cycles.eq(cycles + 1)
        m.d.comb += [self.a.cycles.eq(cycles), self.b.cycles.eq(cycles)]
        return m


class Node:
    """Firmware/host helpers for one engine of the pair."""

    def __init__(self, engine, ram, node_id):
        self.engine, self.ram, self.node_id = engine, ram, node_id

    async def reg(self, ctx, name, value=None):
        addr = VIA.register(name).offset
        if value is None:
            return await read(ctx, self.engine.regs, addr)
        await write(ctx, self.engine.regs, addr, value)

    async def vi_reg(self, ctx, vi, name, value=None):
        addr = VIA.array("VI").offset_of(vi, name)
        if value is None:
            return await read(ctx, self.engine.regs, addr)
        await write(ctx, self.engine.regs, addr, value)

    async def doorbell(self, ctx, vi, name, value):
        """Ring ``name`` (SQ_DOORBELL or RQ_DOORBELL) through VI ``vi``'s doorbell page."""
        await write(ctx, self.engine.doorbells, DOORBELLS.offset_of(vi, name), value)

    async def cq_reg(self, ctx, cq, name, value=None):
        addr = VIA.array("CQ").offset_of(cq, name)
        if value is None:
            return await read(ctx, self.engine.regs, addr)
        await write(ctx, self.engine.regs, addr, value)

    async def reg_array(self, ctx, array, index, value=None):
        addr = VIA.array(array).offset_of(index, "WORD")
        if value is None:
            return await read(ctx, self.engine.regs, addr)
        await write(ctx, self.engine.regs, addr, value)

    async def mgmt_word(self, ctx, index, value):
        await write(ctx, self.engine.regs, VIA.array("MGMT_TX_DATA").offset_of(index, "WORD"), value)

    async def enable(self, ctx):
        await self.reg(ctx, "CTRL", VIA.register("CTRL").field("ENABLE").mask)

    async def register(self, ctx, handle, va, length, pages, ptag, read=0, write_=0, l2_index=None):
        """Register [va, va+length) backed by physical ``pages`` (first: the region's first byte)."""
        l2_index = handle * 8 if l2_index is None else l2_index
        count, first = via_att.region_pages(va, length)
        assert len(pages) == count
        await self.reg(ctx, "ATT_ADDR", via_att.l2_word_base(PARAMS.att_regions) + l2_index)
        for pa in pages:
            await self.reg(ctx, "ATT_WDATA", pa)
        attrs = via_att.L1_ENTRY.encode_bits("ATTRIBUTES", VALID=1, RDMA_READ=read, RDMA_WRITE=write_)
        data = via_att.L1_ENTRY.encode(
            START_VA=va,
            LENGTH=length,
            L2_INDEX=l2_index,
            PAGE_COUNT=count,
            FIRST_PAGE_SIZE=first,
            PTAG=ptag,
            ATTRIBUTES=attrs,
        )
        await self.reg(ctx, "ATT_ADDR", handle * via_att.L1_STRIDE_WORDS)
        for i in range(0, len(data), 4):
            await self.reg(ctx, "ATT_WDATA", int.from_bytes(data[i : i + 4], "little"))

    async def connect(self, ctx, vi, peer_node, peer_vi, ptag, *, desc_area=(HOST, HOST_SIZE)):
        """Set a VI up as a driver does: its peer, protection tag and descriptor area (by default
        the whole host RAM, so tests may put descriptors anywhere), then CONNECT."""
        peer = VIA.array("VI").register("PEER")
        await self.vi_reg(ctx, vi, "DESC_BASE", desc_area[0])
        await self.vi_reg(ctx, vi, "DESC_SIZE", desc_area[1])
        await self.vi_reg(ctx, vi, "PEER", peer_node << peer.field("NODE").lsb | peer_vi << peer.field("VI").lsb)
        await self.vi_reg(ctx, vi, "PTAG", ptag)
        await self.vi_reg(ctx, vi, "CMD", VIA.array("VI").register("CMD").field("CONNECT").mask)

    def load(self, ctx, addr, data):
        load(ctx, self.ram, addr, data)

    def dump(self, ctx, addr, length):
        return dump(ctx, self.ram, addr, length)

    def status(self, ctx, desc):
        return CTRL.decode(self.dump(ctx, desc, CTRL.size))

    async def post(self, ctx, vi, queue, desc, data):
        self.load(ctx, desc, data)
        await self.doorbell(ctx, vi, "SQ_DOORBELL" if queue == "send" else "RQ_DOORBELL", desc)

    async def wait_done(self, ctx, desc, timeout=20000):
        for _ in range(timeout // 16):
            st = self.status(ctx, desc)
            if st["STATUS"] & 1:
                return st
            await ctx.tick().repeat(16)
        raise TimeoutError(f"descriptor {desc:#x} never completed")

    async def counter(self, ctx, name):
        return await self.reg(ctx, name)
