"""Co-simulation: one RTL card (local side + remote access controller, in Amaranth's simulator)
among model cards running the same microcode, joined by an order-preserving network, with random
host loads and stores on every node. Deviations of the RTL from the protocol show up as
coherence violations, protocol-error counts, or a stuck access."""

import heapq
import random
from dataclasses import dataclass, field

from amaranth.sim import Simulator

from numavia.base import regmap
from numavia.base.coherence import LINE_BYTES
from numavia.base.microcode.isa import LocalKind
from numavia.base.sci_packet import (
    HEADER_FIELDS,
    Packet,
    Status,
    data_range,
    decode,
    encode,
    handover_order,
    line_of_block,
)
from numavia.gateware.bfm import recv, send
from numavia.gateware.bfm import wishbone_read as wb_read
from numavia.gateware.bfm import wishbone_write as wb_write
from numavia.gateware.coherence_engine import CoherenceEngine
from numavia.gateware.host_port import HostAddressMap
from numavia.gateware.local_side import CacheGeometry
from numavia.gateware.microcode.cluster_model import card_views
from numavia.gateware.microcode.coherence_check import Access
from numavia.gateware.microcode.model import CardModel, LocalRequest
from numavia.gateware.remote_access_controller import live_ctrl
from support.sim import run_simulation


def packet_fields(packet):
    return {f.name: getattr(packet, f.name) for f in HEADER_FIELDS}


@dataclass
class CoSimConfig:
    nodes: int = 3
    rtl_node: int = 1
    operations: int = 60  # per node
    lines_per_home: int = 2
    words_per_line: int = 2
    write_fraction: float = 0.45
    sets: int = 2
    ways: int = 2
    line_bytes: int = LINE_BYTES  # every card's line size, the RTL card's too
    numa: bool = False
    cache_first_miss: bool = False  # no allocation filter (CTRL.CTRL.CACHE_FIRST_MISS)
    filter_lines: int = 4  # a small filter forgets often: first and second misses both come often
    min_latency: int = 4
    max_latency: int = 40
    max_gap: int = 30
    watchdog: int = 60_000
    egress_stalls: bool = False  # the outgoing queue is sometimes full for a while
    microcode_only: bool = False  # the RTL card's hard-wired fast path off (RAC.CTRL.MICROCODE_ONLY)
    counters_in_memory: bool = False  # the RTL card's event counters (CardConfig.counters_in_memory)
    seed: int = 1


@dataclass
class CoSimResult:
    accesses: list = field(default_factory=list)
    cycles: int = 0
    rtl_counters: dict = field(default_factory=dict)
    model_counters: list = field(default_factory=list)
    views: list = field(default_factory=list)


class CoSim:
    def __init__(self, program_words, config):
        self.cfg = config
        self.rng = random.Random(config.seed)
        self.line_bytes = line_bytes = config.line_bytes
        self.amap = HostAddressMap(
            slice_bytes=max(64, config.lines_per_home * 8) * line_bytes, max_nodes=4, private_bytes=line_bytes * 4
        )
        self.geometry = CacheGeometry(config.sets, config.ways, line_bytes, config.filter_lines)
        self.words = list(program_words)
        self.models = {
            n: CardModel(
                n,
                program_words,
                sets=config.sets,
                ways=config.ways,
                slice_bytes=self.amap.slice_bytes,
                line_bytes=line_bytes,
                numa=config.numa,
                cache_first_miss=config.cache_first_miss,
                filter_lines=config.filter_lines,
                seed=config.seed,
            )
            for n in range(config.nodes)
            if n != config.rtl_node
        }
        self.dut = CoherenceEngine(self.amap, self.geometry, self.words, counters_in_memory=config.counters_in_memory)
        self.now = 0
        self.events = []  # (time, seq, kind, payload) for the model nodes
        self.seq = 0
        self.to_rtl = []  # (arrival, seq, packet)
        self.last_delivery = {}
        self.busy_until = {n: 0 for n in self.models}
        self.pending = {}  # node -> (request, Access, started)
        self.result = CoSimResult()
        self.write_counter = {n: 0 for n in range(config.nodes)}
        self.remaining = {n: config.operations for n in range(config.nodes)}
        self.scripted = False
        self.hot = []
        for home in range(config.nodes):
            for line in range(config.lines_per_home):
                base = (home << 26) | ((line * 5 % 8) * line_bytes)
                self.hot += [base + (4 * 7 * w) % line_bytes for w in range(config.words_per_line)]

    # --- shared helpers -------------------------------------------------------------------------

    def _push(self, time, kind, *payload):
        self.seq += 1
        heapq.heappush(self.events, (time, self.seq, kind, payload))

    def route(self, source, packet, time):
        # Through the wire format at this line size: a data block of the wrong length fails here.
        packet = decode(encode(packet, line_bytes=self.line_bytes), line_bytes=self.line_bytes)
        key = (source, packet.target)
        arrival = max(
            time + self.rng.randint(self.cfg.min_latency, self.cfg.max_latency), self.last_delivery.get(key, 0) + 1
        )
        self.last_delivery[key] = arrival
        if packet.target == self.cfg.rtl_node:
            self.seq += 1
            heapq.heappush(self.to_rtl, (arrival, self.seq, packet))
        elif packet.target in self.models:
            self._push(arrival, "deliver", packet.target, packet)
        else:
            raise AssertionError(f"node {source} sent a packet to node {packet.target}")

    def next_access(self, node):
        if self.remaining[node] == 0:
            return None
        self.remaining[node] -= 1
        addr = self.rng.choice(self.hot)
        write = self.rng.random() < self.cfg.write_fraction
        value = 0
        if write:
            self.write_counter[node] += 1
            value = (node + 1) << 24 | self.write_counter[node]
        return addr, write, value

    # --- model nodes ----------------------------------------------------------------------------

    def model_issue(self, node):
        nxt = self.next_access(node)
        if nxt is None:
            return
        addr, write, value = nxt
        line_bytes = self.line_bytes
        line, word = addr - addr % line_bytes, (addr % line_bytes) // 4
        data = [0] * (line_bytes // 4)
        data[word] = value
        request = LocalRequest(
            LocalKind.WRITE if write else LocalKind.READ, line, word, 1, data, (0xF << 4 * word) if write else 0
        )
        access = Access(node, addr, write, value, self.now, None)
        served = self.models[node].local_access(request)
        if served is not None:
            access.completed = self.now
            if not write:
                access.value = served[0]
            self.result.accesses.append(access)
            self._push(self.now + 2 + self.rng.randrange(self.cfg.max_gap), "host", node)
        else:
            self.pending[node] = (request, access, self.now)
            self._push(self.now, "card", node)

    def advance_models(self):
        while self.events and self.events[0][0] <= self.now:
            _, _, kind, payload = heapq.heappop(self.events)
            node = payload[0]
            if kind == "host":
                if node not in self.pending:
                    self.model_issue(node)
                continue
            if kind == "deliver":
                self.models[node].deliver(payload[1])
            card = self.models[node]
            if self.now < self.busy_until[node]:
                self._push(self.busy_until[node], "card", node)
                continue
            cycles = card.step(self.now)
            if cycles:
                self.busy_until[node] = self.now + cycles
                self._push(self.busy_until[node], "card", node)
                for packet in card.outbox:
                    self.route(node, packet, self.now + cycles)
                card.outbox.clear()
                if self.scripted:  # the script collects its own completions
                    continue
                for request, status, words in card.completions:
                    req, access, _ = self.pending.pop(node)
                    assert request is req and status == Status.OK, f"node {node}: access failed"
                    access.completed = self.now + cycles
                    if not access.write:
                        access.value = words[0]
                    self.result.accesses.append(access)
                    self._push(self.now + cycles + 1 + self.rng.randrange(self.cfg.max_gap), "host", node)
                card.completions.clear()
            else:
                wake = card.next_wake()
                if wake is not None and wake > self.now:
                    self._push(wake, "card", node)

    # --- the RTL card ---------------------------------------------------------------------------

    def host_address(self, global_addr):
        return (global_addr >> 26) * self.amap.slice_bytes + (global_addr & 0x3FFFFFF)

    def run(self):
        cfg, dut = self.cfg, self.dut
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        rtl = cfg.rtl_node
        state = {"rtl_done": False, "models_done": False}

        async def clock(ctx):
            for n in self.models:
                self._push(self.rng.randrange(cfg.max_gap), "host", n)
            while True:
                await ctx.tick()
                self.now += 1
                self.advance_models()
                stuck = [n for n, (_, _, t) in self.pending.items() if self.now - t > cfg.watchdog]
                if stuck:
                    raise AssertionError(f"node(s) {stuck} waited {cfg.watchdog} cycles: deadlock?")
                if state["rtl_done"] and not self.pending and not any(self.remaining[n] for n in self.models):
                    if not self.to_rtl and not any(m.busy() for m in self.models.values()):
                        return

        async def rtl_host(ctx):
            ctx.set(dut.node_id, rtl)
            ctx.set(dut.numa_mode, cfg.numa)
            ctx.set(dut.cache_first_miss, cfg.cache_first_miss)
            await wb_write(ctx, dut.rac_bus, regmap.RAC.register("CTRL").offset, live_ctrl(cfg.microcode_only))
            while True:
                nxt = self.next_access(rtl)
                if nxt is None:
                    break
                addr, write, value = nxt
                issued = self.now
                await send(ctx, dut.host.req, {"addr": self.host_address(addr), "write": write, "count": 1})
                if write:
                    await send(ctx, dut.host.wdata, {"data": value, "be": 0xF})
                beat = await recv(ctx, dut.host.resp)
                assert not beat.error, f"RTL access at {addr:#x} failed"
                access = Access(rtl, addr, write, value if write else int(beat.data), issued, self.now)
                self.result.accesses.append(access)
                for _ in range(self.rng.randrange(cfg.max_gap)):
                    await ctx.tick()
            self.result.rtl_counters = {
                name: await wb_read(ctx, dut.rac_bus, regmap.RAC.register(name).offset)
                for name, _ in regmap.RAC_COUNTERS
            }
            state["rtl_done"] = True

        sim.add_testbench(clock)
        sim.add_testbench(self._ingress, background=True)
        sim.add_testbench(self._egress, background=True)
        sim.add_testbench(rtl_host)
        run_simulation(sim)
        self.result.cycles = self.now
        self.result.model_counters = [list(m.counters) for m in self.models.values()]
        return self.result

    def model_views(self):
        return card_views(self.models.values())

    # --- packets to and from the RTL card (testbench processes) --------------------------------

    async def _ingress(self, ctx):
        dut = self.dut
        while True:
            if self.to_rtl and self.to_rtl[0][0] <= self.now:
                _, _, packet = heapq.heappop(self.to_rtl)
                await send(ctx, dut.recv_header, packet_fields(packet))
                for word in handover_order(packet, self.line_bytes) if packet.has_data else []:
                    await send(ctx, dut.recv_data, word)
            else:
                await ctx.tick()

    async def _egress(self, ctx):
        dut, cfg = self.dut, self.cfg
        while True:
            if cfg.egress_stalls and self.rng.random() < 0.3:
                for _ in range(self.rng.randrange(5, 80)):  # a full outgoing queue
                    await ctx.tick()
            header = await recv(ctx, dut.send_header)
            packet = Packet(**{f.name: int(getattr(header, f.name)) for f in HEADER_FIELDS})
            packet.source = cfg.rtl_node
            if packet.has_data:
                number = data_range(packet, self.line_bytes)[1]
                block = [int(await recv(ctx, dut.send_data)) for _ in range(number)]
                packet.data = line_of_block(packet, block, self.line_bytes)
            self.route(cfg.rtl_node, packet, self.now)


class ScriptedCoSim(CoSim):
    """The co-simulation driven by a script: one access at a time, each run to quiescence, then
    a snapshot of every node's view of one line (the RTL node's through its debug registers).

    ``steps``: ``(node, "read"|"write"|"flush", global_addr, value)``. Returns one snapshot per step:
    ``{"value": read value, "cycles": the RTL card's host access from request to response (None
    for the other nodes' steps), "dir": (mstate, locked, head), "nodes": {node: (state, fwd, bwd)}}``
    where absent nodes hold the line INVALID.
    """

    def run_script(self, steps, line):
        cfg, dut = self.cfg, self.dut
        rtl = cfg.rtl_node
        self.scripted = True
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        snapshots = []
        sets, ways, line_bytes = cfg.sets, cfg.ways, self.line_bytes

        def quiet():
            return not self.to_rtl and not self.events_pending() and not any(m.busy() for m in self.models.values())

        async def clock(ctx):
            while True:
                await ctx.tick()
                self.now += 1
                self.advance_models()

        async def debug(ctx, what, addr):
            await wb_write(ctx, dut.lac_bus, regmap.LAC.register("DEBUG_ADDR").offset, addr)
            await wb_write(ctx, dut.lac_bus, regmap.LAC.register("DEBUG_CMD").offset, what)
            while await wb_read(ctx, dut.lac_bus, regmap.LAC.register("STATUS").offset) & 2:
                pass

        async def rtl_line_state(ctx):
            from numavia.base.coherence import cache_set

            s = cache_set((line & 0x3FFFFFF) // line_bytes, line >> 26, sets)
            for way in range(ways):
                await debug(ctx, 1, s * ways + way)
                tag = await wb_read(ctx, dut.lac_bus, regmap.LAC.register("DEBUG_TAG").offset)
                tline = await wb_read(ctx, dut.lac_bus, regmap.LAC.register("DEBUG_TAG_LINE").offset)
                if tag & 0xF and tline == line:
                    return (tag & 0xF, tag >> 8 & 63, tag >> 16 & 63)
            return None

        async def rtl_dir(ctx):
            await debug(ctx, 0, line)
            d = await wb_read(ctx, dut.lac_bus, regmap.LAC.register("DEBUG_DIR").offset)
            return (d & 3, bool(d >> 2 & 1), d >> 8 & 63)

        async def orchestrate(ctx):
            ctx.set(dut.node_id, rtl)
            ctx.set(dut.numa_mode, cfg.numa)
            ctx.set(dut.cache_first_miss, cfg.cache_first_miss)
            await wb_write(ctx, dut.rac_bus, regmap.RAC.register("CTRL").offset, live_ctrl(cfg.microcode_only))
            for node, op, addr, value in steps:
                result, cycles = None, None
                if node == rtl:
                    if op == "flush":
                        await wb_write(ctx, dut.lac_bus, regmap.LAC.register("COMMAND").offset, 1)
                        while await wb_read(ctx, dut.lac_bus, regmap.LAC.register("STATUS").offset) & 1:
                            pass
                    else:
                        write = op == "write"
                        start = self.now
                        await send(ctx, dut.host.req, {"addr": self.host_address(addr), "write": write, "count": 1})
                        if write:
                            await send(ctx, dut.host.wdata, {"data": value, "be": 0xF})
                        beat = await recv(ctx, dut.host.resp)
                        assert not beat.error, f"step {node} {op} {addr:#x} failed"
                        result, cycles = int(beat.data), self.now - start
                else:
                    card = self.models[node]
                    if op == "flush":
                        card.flush()
                        self._push(self.now, "card", node)
                    else:
                        word = (addr % line_bytes) // 4
                        data = [0] * (line_bytes // 4)
                        data[word] = value
                        request = LocalRequest(
                            LocalKind.WRITE if op == "write" else LocalKind.READ,
                            addr - addr % line_bytes,
                            word,
                            1,
                            data,
                            (0xF << 4 * word) if op == "write" else 0,
                        )
                        served = card.local_access(request)
                        if served is None:
                            self._push(self.now, "card", node)
                            while not card.completions:
                                await ctx.tick()
                            request_done, status, words = card.completions.pop()
                            assert status == Status.OK, f"step {node} {op} {addr:#x} failed"
                            served = words
                        result = served[0] if served else None
                    if op == "flush":
                        while not card.completions:
                            await ctx.tick()
                        card.completions.clear()
                for _ in range(200):  # let rollouts and echoes finish
                    await ctx.tick()
                while not quiet():
                    await ctx.tick()
                snapshot = {"value": result, "cycles": cycles, "nodes": {}}
                home = line >> 26
                for n, card in self.models.items():
                    for s_ways in card.tags:
                        for tag in s_ways:
                            if tag.state and tag.addr == line:
                                snapshot["nodes"][n] = (tag.state, tag.fwd, tag.bwd)
                    if n == home:
                        mstate, locked, head = card.directory[(line & 0x3FFFFFF) // line_bytes]
                        snapshot["dir"] = (mstate, locked, head)
                state = await rtl_line_state(ctx)
                if state is not None:
                    snapshot["nodes"][rtl] = state
                if home == rtl:
                    snapshot["dir"] = await rtl_dir(ctx)
                snapshots.append(snapshot)

        sim.add_testbench(clock, background=True)
        sim.add_testbench(self._ingress, background=True)
        sim.add_testbench(self._egress, background=True)
        sim.add_testbench(orchestrate)
        run_simulation(sim)
        return snapshots

    def events_pending(self):
        return any(kind != "host" for _, _, kind, _ in self.events)
