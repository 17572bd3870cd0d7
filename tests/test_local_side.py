"""The assembled local side (splitter, local access controller, tag SRAM, memory controller)
under random host traffic, against a reference memory, with a test-bench stand-in for the
sequencer on the miss interface: it fills and evicts network-cache lines through the tag SRAM
and memory ports exactly as the sequencer does, serves reads from a model of the other nodes'
memory and checks every write that reaches it."""

import random
from dataclasses import replace

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.base import regmap
from numavia.base.coherence import LINE_BYTES, cache_set
from numavia.base.coherence import CacheState as C
from numavia.base.coherence import MemoryState as M
from numavia.base.microcode.isa import LocalKind
from numavia.gateware.bfm import recv, send
from numavia.gateware.bfm import wishbone_read as wb_read
from numavia.gateware.bfm import wishbone_write as wb_write
from numavia.gateware.host_port import HostAddressMap
from numavia.gateware.local_side import CacheGeometry, LocalSide
from numavia.gateware.memory_controller import MemSpace
from numavia.gateware.tag_store import TagOp

NODE = 1
AMAP = HostAddressMap(slice_bytes=4096, max_nodes=4, private_bytes=1024)
GEOMETRY = CacheGeometry(sets=4, ways=2)
WORDS = LINE_BYTES // 4


def line_address(addr):
    kind, home, offset = AMAP.decode(addr)
    return home << 26 | (offset & ~(LINE_BYTES - 1))


class World:
    """The reference: every byte of every node's slice and of the private memory."""

    def __init__(self, rng):
        self.words = {}
        self.rng = rng

    def get(self, addr):
        return self.words.get(addr, 0)

    def put(self, addr, data, be):
        old = self.get(addr)
        mask = sum(0xFF << (8 * b) for b in range(4) if be >> b & 1)
        self.words[addr] = (old & ~mask) | (data & mask)


class Bench:
    def __init__(
        self,
        *,
        numa=False,
        cache_first_miss=False,
        seed=1,
        slow_sequencer=0,
        dirty_home_lines=(),
        shown_home_lines=(),
        geometry=GEOMETRY,
        counters_in_memory=False,
    ):
        self.geometry = geometry
        self.line_bytes, self.words = geometry.line_bytes, geometry.line_words
        self.rng = random.Random(seed)
        self.world = World(self.rng)
        self.numa = numa
        self.cache_first_miss = cache_first_miss
        self.slow = slow_sequencer
        self.dirty_home_lines = set(dirty_home_lines)  # own lines the bench marks GONE/FRESH
        self.shown_home_lines = set(shown_home_lines)  # own lines the bench marks SHOWN
        self.dut = LocalSide(address_map=AMAP, geometry=geometry, counters_in_memory=counters_in_memory)
        self.results = []  # (op, observed)
        self.fills = 0
        self.evictions = 0
        self.write_misses_checked = 0
        self.cache = {}  # bench's view: line -> (set, way, state)
        self.misses_seen = 0
        self.kinds = []  # the kind of every miss, in order

    # --- the host ------------------------------------------------------------------------------

    async def access(self, ctx, write, addr, count, datas=None, bes=None):
        dut = self.dut
        await send(ctx, dut.host.req, {"addr": addr, "write": write, "count": count})
        if write:
            for i in range(count):
                await send(ctx, dut.host.wdata, {"data": datas[i], "be": bes[i]})
        beats = []
        while True:
            beat = await recv(ctx, dut.host.resp)
            beats.append((beat.data, beat.error))
            if beat.last:
                return beats

    # --- the stand-in sequencer -----------------------------------------------------------------

    async def own(self, ctx, take):
        r = self.dut.remote
        ctx.set(r.own_req, take)
        if take:
            while True:
                _, _, granted = await ctx.tick().sample(r.own_grant)
                if granted:
                    return
        else:
            await ctx.tick()

    async def tag(self, ctx, op, **fields):
        r = self.dut.remote
        ctx.set(r.tag_cmd, {"op": op, **fields})
        ctx.set(r.tag_cmd_valid, 1)
        while True:
            _, _, ready = await ctx.tick().sample(r.tag_cmd_ready)
            if ready:
                break
        ctx.set(r.tag_cmd_valid, 0)
        if op in (TagOp.WRITE_TAG, TagOp.WRITE_DIR, TagOp.TOUCH):
            await ctx.tick()
            return None
        while True:
            _, _, valid, resp = await ctx.tick().sample(r.tag_resp_valid, r.tag_resp)
            if valid:
                return resp

    async def mem(self, ctx, space, index, write=0, data=0, be=0xF):
        r = self.dut.remote
        ctx.set(r.mem.cmd.payload, {"space": space, "index": index, "write": write, "data": data, "be": be})
        ctx.set(r.mem.cmd.valid, 1)
        while True:
            _, _, ready = await ctx.tick().sample(r.mem.cmd.ready)
            if ready:
                break
        ctx.set(r.mem.cmd.valid, 0)
        if not write:
            while True:
                _, _, valid, value = await ctx.tick().sample(r.mem.rvalid, r.mem.rdata)
                if valid:
                    return value

    def cache_index(self, line, way, word):
        g = self.geometry
        s = cache_set((line & 0x3FFFFFF) // g.line_bytes, line >> 26, g.sets)
        return (s * g.ways + way) * g.line_words + word

    def line_bytes_addr(self, line):
        return (line >> 26) * AMAP.slice_bytes + (line & 0x3FFFFFF)

    async def fill(self, ctx, line, dirty):
        """Allocate a way for ``line`` (evicting, with write-back) and load it from the world."""
        resp = await self.tag(ctx, TagOp.ALLOC, addr=line)
        assert not resp.no_way
        way = resp.way
        if resp.victim:
            victim = resp.victim_line * self.line_bytes
            state = self.cache.pop(victim)[2]
            if state == C.ONLY_DIRTY:
                base = self.line_bytes_addr(victim)
                for w in range(self.words):
                    self.world.words[base + 4 * w] = await self.mem(
                        ctx, MemSpace.CACHE, self.cache_index(victim, way, w)
                    )
            self.evictions += 1
        base = self.line_bytes_addr(line)
        for w in range(self.words):
            await self.mem(
                ctx, MemSpace.CACHE, self.cache_index(line, way, w), write=1, data=self.world.get(base + 4 * w)
            )
        state = C.ONLY_DIRTY if dirty else C.ONLY_FRESH
        await self.tag(ctx, TagOp.WRITE_TAG, addr=line, way=way, state=state)
        await self.tag(ctx, TagOp.TOUCH, addr=line, way=way)
        self.cache[line] = (None, way, state)
        self.fills += 1
        return way

    async def sequencer(self, ctx):
        dut = self.dut
        while True:
            for _ in range(self.slow):  # a busy sequencer: the miss waits
                await ctx.tick()
            miss = await recv(ctx, dut.miss.miss)
            self.misses_seen += 1
            self.kinds.append(LocalKind(miss.kind))
            kind, line, word, count = miss.kind, miss.addr, miss.word, miss.count
            beats = []
            if kind == LocalKind.WRITE:
                # The host's beats only, its first word's first: the model puts them in their places.
                beats = [(0, 0)] * self.words
                for i in range(count):
                    b = await recv(ctx, dut.miss.miss_data)
                    beats[word + i] = (b.data, b.be)
                for _ in range(4):  # and no more beats than the access has
                    assert not ctx.get(dut.miss.miss_data.valid)
                    await ctx.tick()
                self.write_misses_checked += 1
            await self.own(ctx, True)
            home = line >> 26
            base = self.line_bytes_addr(line)
            if home == NODE:
                # Our own line made FRESH/GONE by the bench: serve it and bring it back HOME.
                assert line in self.dirty_home_lines
                for i, (data, be) in enumerate(beats):
                    if be:
                        self.world.put(base + 4 * i, data, be)
                for w in range(self.words):
                    await self.mem(
                        ctx, MemSpace.HOME, (line & 0x3FFFFFF) // 4 + w, write=1, data=self.world.get(base + 4 * w)
                    )
                await self.tag(ctx, TagOp.WRITE_DIR, addr=line, mstate=M.HOME, lock=0, head=0)
                self.dirty_home_lines.discard(line)
            elif self.numa or kind == LocalKind.READ_ONCE:  # read or written at the home, not cached
                assert kind != LocalKind.READ_ONCE or not (self.numa or self.cache_first_miss)
                assert line not in self.cache  # the controller asks only for lines not held
                for i, (data, be) in enumerate(beats):
                    if be:
                        self.world.put(base + 4 * i, data, be)
            else:
                present = self.cache.get(line)
                if present is None:
                    way = await self.fill(ctx, line, dirty=kind == LocalKind.WRITE)
                else:
                    way = present[1]
                    await self.tag(ctx, TagOp.WRITE_TAG, addr=line, way=way, state=C.ONLY_DIRTY)
                    self.cache[line] = (None, way, C.ONLY_DIRTY)
                for i, (data, be) in enumerate(beats):
                    if be:
                        self.world.put(base + 4 * i, data, be)
                        await self.mem(ctx, MemSpace.CACHE, self.cache_index(line, way, i), write=1, data=data, be=be)
            await self.own(ctx, False)
            if kind == LocalKind.WRITE:
                await send(ctx, dut.miss.done, {"data": 0, "error": 0, "last": 1})
            else:
                for i in range(count):
                    await send(
                        ctx,
                        dut.miss.done,
                        {"data": self.world.get(base + 4 * (word + i)), "error": 0, "last": i == count - 1},
                    )

    # --- random traffic -------------------------------------------------------------------------

    def random_access(self):
        rng = self.rng
        region = rng.random()
        if region < 0.25:  # own slice
            base = NODE * AMAP.slice_bytes + rng.choice([0, 1, 2, 5]) * LINE_BYTES
        elif region < 0.85:  # other nodes' slices: a small hot set
            home = rng.choice([0, 2, 3])
            base = home * AMAP.slice_bytes + rng.choice([0, 4, 8, 13, 21]) * LINE_BYTES
        else:
            base = AMAP.private_base + rng.choice([0, 3]) * LINE_BYTES
        # Offsets in 64-byte blocks: with smaller lines an access also starts in a block's later
        # lines and a burst of 16 or 20 words spans several lines.
        addr = base + 4 * rng.randrange(LINE_BYTES // 4)
        count = rng.choice([1, 1, 1, 2, 5, 16, 20])
        write = rng.random() < 0.45
        datas = [rng.randrange(1 << 32) for _ in range(count)]
        bes = [rng.choice([0xF, 0xF, 0x1, 0x6, 0x8]) for _ in range(count)]
        return write, addr, count, datas, bes

    async def mark_home_lines(self, ctx):
        marks = [(line, M.GONE) for line in self.dirty_home_lines] + [(line, M.SHOWN) for line in self.shown_home_lines]
        for line, mstate in marks:
            await self.own(ctx, True)
            await self.tag(ctx, TagOp.WRITE_DIR, addr=line, mstate=mstate, lock=0, head=2)
            await self.own(ctx, False)

    def run(self, accesses, checks):
        sim = Simulator(self.dut)
        sim.add_clock(1e-8)
        dut = self.dut

        async def host(ctx):
            ctx.set(dut.node_id, NODE)
            ctx.set(dut.node_ready, 1)
            ctx.set(dut.numa_mode, self.numa)
            ctx.set(dut.cache_first_miss, self.cache_first_miss)
            await self.mark_home_lines(ctx)
            for write, addr, count, datas, bes in accesses:
                beats = await self.access(ctx, write, addr, count, datas, bes)
                self.results.append(((write, addr, count, datas, bes), beats))
                if AMAP.decode(addr) is None or AMAP.decode(addr + 4 * count - 4) is None:
                    continue
                if write:
                    for i in range(count):
                        self.world.put(addr + 4 * i, datas[i], bes[i])
            await checks(ctx, self)

        sim.add_testbench(host)
        sim.add_testbench(self.sequencer, background=True)
        run_simulation(sim)


def expect_reads(bench, reference_reads):
    for ((_write, addr, count, _, _), beats), expected in zip(bench.results, reference_reads):
        if expected is not None:
            assert [d for d, _ in beats] == expected, f"read {count} at {addr:#x}"


def run_random(bench, n):
    accesses = [bench.random_access() for _ in range(n)]
    # The reference values of each read, computed in program order against a shadow world.
    shadow = World(None)
    expected = []
    for write, addr, count, datas, bes in accesses:
        if write:
            for i in range(count):
                shadow.put(addr + 4 * i, datas[i], bes[i])
            expected.append(None)
        else:
            expected.append([shadow.get(addr + 4 * i) for i in range(count)])

    async def checks(ctx, b):
        pass

    bench.run(accesses, checks)
    for (write, _addr, count, _, _), beats in bench.results:
        assert not any(e for _, e in beats)
        assert len(beats) == (1 if write else count)
    expect_reads(bench, expected)
    return accesses


@pytest.mark.parametrize("line_bytes", [64, 32])
def test_random_traffic_fills_evicts_and_hits(line_bytes):
    bench = Bench(seed=3, geometry=replace(GEOMETRY, line_bytes=line_bytes))
    run_random(bench, 300)
    assert bench.fills > 10 and bench.evictions > 5 and bench.write_misses_checked > 5


@pytest.mark.parametrize(
    "line_bytes, counters_in_memory", [(64, False), (32, False), (64, True)], ids=["64", "32", "64-in-memory"]
)
def test_counters_match_the_traffic(line_bytes, counters_in_memory):
    bench = Bench(seed=9, geometry=replace(GEOMETRY, line_bytes=line_bytes), counters_in_memory=counters_in_memory)
    accesses = [bench.random_access() for _ in range(200)]

    async def checks(ctx, b):
        async def read(name):
            return await wb_read(ctx, b.dut.bus, regmap.LAC.register(name).offset)

        hits = [
            await read(n)
            for n in ("HOME_READ_HITS", "HOME_WRITE_HITS", "CACHE_READ_HITS", "CACHE_WRITE_HITS", "PRIVATE_ACCESSES")
        ]
        misses = await read("READ_MISSES") + await read("WRITE_MISSES")
        assert misses == b.misses_seen > 0
        assert all(h > 0 for h in hits), hits  # every hit path was taken
        line_accesses = sum(len(expected_pieces(a, c, b.words)) for _, a, c, _, _ in accesses)
        assert sum(hits) + misses == await read("ACCESSES") == line_accesses
        assert await read("ACCESS_CYCLES") >= 2 * line_accesses
        assert await read("ERRORS") == 0
        geometry = regmap.LAC.register("GEOMETRY")
        value = await read("GEOMETRY")
        assert geometry.field("WAYS").extract(value) == GEOMETRY.ways
        assert 1 << geometry.field("LINE_BITS").extract(value) == line_bytes
        await wb_write(
            ctx,
            b.dut.bus,
            regmap.LAC.register("COMMAND").offset,
            regmap.LAC.register("COMMAND").field("CLEAR_COUNTERS").mask,
        )
        assert await read("ACCESSES") == 0

    bench.run(accesses, checks)


def expected_pieces(addr, count, words=WORDS):
    pieces = []
    while count:
        n = min(count, words - (addr // 4) % words)
        pieces.append((addr, n))
        addr, count = addr + 4 * n, count - n
    return pieces


@pytest.mark.parametrize("numa", [False, True])
def test_numa_mode_never_allocates(numa):
    bench = Bench(numa=numa, seed=4)
    run_random(bench, 150)
    if numa:
        assert bench.fills == 0 and not bench.cache
    else:
        assert bench.fills > 0


@pytest.mark.parametrize("cache_first_miss", [False, True])
def test_a_remote_line_is_cached_at_its_second_read_miss(cache_first_miss):
    """The allocation filter: the first read miss of a line is a READ_ONCE (not cached), the next
    a READ (cached), then hits; writes and own lines are never READ_ONCE; CACHE_FIRST_MISS
    turns it off."""
    bench = Bench(seed=6, cache_first_miss=cache_first_miss)
    remote, other = (2 * AMAP.slice_bytes + k * LINE_BYTES for k in (3, 7))
    own = NODE * AMAP.slice_bytes
    read = (False, remote + 8, 1, [0], [0])
    accesses = [read, read, read, (True, other, 1, [5], [0xF]), (False, other, 1, [0], [0]), (False, own, 1, [0], [0])]

    async def checks(ctx, b):
        once = await wb_read(ctx, b.dut.bus, regmap.LAC.register("READ_ONCE").offset)
        hits = await wb_read(ctx, b.dut.bus, regmap.LAC.register("CACHE_READ_HITS").offset)
        assert (once, hits) == ((0, 3) if cache_first_miss else (1, 2))  # the first miss costs a hit

    bench.run(accesses, checks)
    first = [LocalKind.READ] if cache_first_miss else [LocalKind.READ_ONCE, LocalKind.READ]
    assert bench.kinds == first + [LocalKind.WRITE]  # the write caches its line: its read hits
    assert [beats for _, beats in bench.results][4] == [(5, 0)]


def test_own_lines_that_are_shared_elsewhere_go_to_the_sequencer():
    line = NODE << 26 | 2 * LINE_BYTES
    bench = Bench(seed=5, dirty_home_lines={line})
    addr = NODE * AMAP.slice_bytes + 2 * LINE_BYTES + 8
    accesses = [(0, addr, 1, [0], [0]), (0, addr, 1, [0], [0])]

    async def checks(ctx, b):
        hits = await wb_read(ctx, b.dut.bus, regmap.LAC.register("HOME_READ_HITS").offset)
        misses = await wb_read(ctx, b.dut.bus, regmap.LAC.register("READ_MISSES").offset)
        assert (misses, hits) == (1, 1)  # GONE: a miss; back HOME: a hit

    bench.run(accesses, checks)
    assert not bench.dirty_home_lines


@pytest.mark.parametrize("write", [False, True], ids=["read", "write"])
def test_own_lines_shown_uncached_are_hits_and_a_write_makes_them_home(write):
    """A SHOWN line (read uncached by another node since the home's last write) is the home's
    alone: the host's reads and writes hit; a write makes it HOME again, so that the reader's next
    miss is answered uncached."""
    line = NODE << 26 | 3 * LINE_BYTES
    bench = Bench(seed=6, shown_home_lines={line})
    addr = NODE * AMAP.slice_bytes + 3 * LINE_BYTES + 4
    accesses = [(0, addr, 2, [0, 0], [0, 0]), (int(write), addr, 1, [0x5EE], [0xF])]
    lac = regmap.LAC

    async def checks(ctx, b):
        bus = b.dut.bus
        counters = [
            await wb_read(ctx, bus, lac.register(name).offset)
            for name in ("HOME_READ_HITS", "HOME_WRITE_HITS", "READ_MISSES", "WRITE_MISSES")
        ]
        assert counters == [1, 1, 0, 0] if write else [2, 0, 0, 0]
        await wb_write(ctx, bus, lac.register("DEBUG_ADDR").offset, line)
        await wb_write(ctx, bus, lac.register("DEBUG_CMD").offset, 0)  # the directory
        while await wb_read(ctx, bus, lac.register("STATUS").offset) & 2:
            pass
        d = await wb_read(ctx, bus, lac.register("DEBUG_DIR").offset)
        assert d & 3 == (M.HOME if write else M.SHOWN)

    bench.run(accesses, checks)
    assert not any(e for _, beats in bench.results for _, e in beats)


@pytest.mark.parametrize(
    "write, addr, count",
    [
        (0, AMAP.private_base + AMAP.private_bytes, 1),  # past the private memory
        (1, AMAP.private_base + AMAP.private_bytes + 64, 2),
        (0, AMAP.window_bytes - 4, 1),
        (1, 0x10 + 2, 1),  # unaligned
        (0, 0, 0),  # no words
    ],
)
def test_accesses_outside_every_region_are_errors_and_change_nothing(write, addr, count):
    bench = Bench(seed=6)
    probe = AMAP.private_base + 4
    accesses = [
        (1, probe, 1, [0x1234], [0xF]),
        (write, addr, count, [0xDEAD] * max(count, 0), [0xF] * max(count, 0)),
        (0, probe, 1, [0], [0]),
    ]

    async def checks(ctx, b):
        errors = await wb_read(ctx, b.dut.bus, regmap.LAC.register("ERRORS").offset)
        assert errors == 1

    bench.run(accesses, checks)
    bad = bench.results[1][1]
    assert all(e for _, e in bad) and len(bad) == (1 if write else max(count, 1))
    assert bench.results[2][1] == [(0x1234, 0)]
    assert bench.fills == 0


def test_a_slow_sequencer_back_pressures_the_host_without_losing_accesses():
    bench = Bench(seed=7, slow_sequencer=40)
    run_random(bench, 60)


def test_node_not_ready_refuses_shared_accesses():
    bench = Bench(seed=8)
    dut = bench.dut
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    out = []

    async def host(ctx):
        ctx.set(dut.node_id, NODE)
        ctx.set(dut.node_ready, 0)
        out.append(await bench.access(ctx, 0, 0, 1))
        out.append(await bench.access(ctx, 0, AMAP.private_base, 1))

    sim.add_testbench(host)
    sim.add_testbench(bench.sequencer, background=True)
    run_simulation(sim)
    assert out[0] == [(0, 1)] and out[1] == [(0, 0)]


def test_debug_reads_show_tags_directory_and_memory():
    line = NODE << 26 | 5 * LINE_BYTES
    bench = Bench(seed=10, dirty_home_lines={line})
    remote = 2 * AMAP.slice_bytes + 4 * LINE_BYTES
    accesses = [
        (1, remote + 8, 1, [0xABCD0123], [0xF]),  # a write miss: ONLY_DIRTY fill
        (1, AMAP.private_base + 12, 1, [0x600D], [0xF]),
    ]
    lac = regmap.LAC

    async def checks(ctx, b):
        bus = b.dut.bus

        async def debug(what, addr):
            await wb_write(ctx, bus, lac.register("DEBUG_ADDR").offset, addr)
            await wb_write(ctx, bus, lac.register("DEBUG_CMD").offset, what)
            while await wb_read(ctx, bus, lac.register("STATUS").offset) & 2:
                pass

        await debug(0, line)  # our own line, marked GONE by the bench
        d = await wb_read(ctx, bus, lac.register("DEBUG_DIR").offset)
        assert (d & 3, d >> 8 & 63) == (M.GONE, 2)
        remote_line = line_address(remote)
        _, way, _ = b.cache[remote_line]
        s = cache_set((remote_line & 0x3FFFFFF) // LINE_BYTES, 2, GEOMETRY.sets)
        await debug(1, s * GEOMETRY.ways + way)
        t = await wb_read(ctx, bus, lac.register("DEBUG_TAG").offset)
        assert t & 0xF == C.ONLY_DIRTY
        assert await wb_read(ctx, bus, lac.register("DEBUG_TAG_LINE").offset) == remote_line
        await debug(3, b.cache_index(remote_line, way, 2))
        assert await wb_read(ctx, bus, lac.register("DEBUG_DATA").offset) == 0xABCD0123
        await debug(4, 3)
        assert await wb_read(ctx, bus, lac.register("DEBUG_DATA").offset) == 0x600D

    bench.run(accesses, checks)
