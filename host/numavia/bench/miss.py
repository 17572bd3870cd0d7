"""Where the cycles of one remote read miss go.

The card's whole miss (host-port request to data, ``LAC.LAST_LATENCY``) comes from the RTL ring
of ``bench latency``. Its phases inside the card come from the card's coherence engine (local
side + remote access controller, :class:`~numavia.gateware.coherence_engine.CoherenceEngine`)
in Amaranth's simulator, cycle by cycle: the requester's local access controller and sequencer
until the request header leaves, the home until its reply header and its last data word leave,
and the requester from the reply header to the host's word (the reply's data offered a word per
cycle behind its header, as the ring link hands it over). What is left of the whole miss is the
ring link and the ring: queueing, framing, the wire, forwarding, CRC checks, both ways.

The miss is the ring row's: a line's first read miss, which the allocation filter reads uncached
(``MUREAD``, the home shows the line). The reuse figure is a caching miss's (the line's second):
the host reads the next word of the line as the miss's word arrives."""

import json
from pathlib import Path

from amaranth.sim import Simulator
from matplotlib.figure import Figure

from numavia.base import regmap
from numavia.base.coherence import MemoryState
from numavia.base.errors import NumaviaError
from numavia.base.microcode.assembler import assemble
from numavia.base.paths import microcode_source
from numavia.base.sci_packet import (
    HEADER_FIELDS,
    Command,
    Packet,
    PacketType,
    Status,
    carries_words_asked,
    data_range,
)
from numavia.bench import latency, results
from numavia.gateware.bfm import recv, send, wishbone_write
from numavia.gateware.card import CardConfig
from numavia.gateware.coherence_engine import CoherenceEngine
from numavia.gateware.remote_access_controller import live_ctrl

MISS_ROW = "remote read, miss, 1 hop"
REQUESTER, HOME = 0, 1
WORD = 5  # the word the host reads: mid-line, so the reply's data is waited for, not first

#: (key, label) of each phase, in the order they happen.
PHASES = (
    ("lac", "requester: host port and local access controller to the miss hand-off"),
    ("request", "requester: sequencer until the request header leaves"),
    ("home_reply", "home: request header in to reply header out"),
    ("home_data", "home: the data into the reply (header to last data word)"),
    ("ring", "ring link and ring, both ways (the rest)"),
    ("complete", "requester: reply header in to the host's word"),
)


def engine_phases(config, microcode_only=False):
    """Cycles of each engine phase of a remote read miss (all but ``ring``), from the RTL; with
    ``microcode_only``, the sequencers' hard-wired fast path off."""
    program = assemble(microcode_source().read_text(), microcode_source().name).words
    amap, geometry = config.address_map(), config.geometry()
    line = 3 * geometry.line_bytes
    phases = {}
    after = {}  # figures after the miss, not part of it

    def simulate(node_id, testbench, *, caching=False):
        dut = CoherenceEngine(amap, geometry, program)
        sim = Simulator(dut)
        sim.add_clock(1 / config.clk_freq_hz)

        async def run(ctx):
            ctx.set(dut.node_id, node_id)
            # The allocation filter reads a line's first miss uncached; `caching`: it caches it.
            ctx.set(dut.cache_first_miss, caching)
            await wishbone_write(ctx, dut.rac_bus, regmap.RAC.register("CTRL").offset, live_ctrl(microcode_only))
            await testbench(ctx, dut)

        sim.add_testbench(run)
        sim.run()

    async def cycles_until(ctx, condition):
        n = 0
        while not condition():
            await ctx.tick()
            n += 1
        return n

    def read(word):
        return {"addr": HOME * amap.slice_bytes + line + 4 * word, "write": 0, "count": 1}

    async def requester(ctx, dut, caching=False):
        """The miss's phases; `caching`: the reuse of a caching miss's line instead."""
        await send(ctx, dut.host.req, read(WORD))
        lac = 1 + await cycles_until(ctx, lambda: ctx.get(dut.local.miss.miss.valid))
        request = await cycles_until(ctx, lambda: ctx.get(dut.send_header.valid))
        header = await recv(ctx, dut.send_header)
        reply = {
            "ptype": PacketType.RESPONSE,
            "cmd": header.cmd,
            "tid": header.tid,
            "status": Status.OK,
            "source": HOME,
            "target": REQUESTER,
            "addr": header.addr,
            "mstate": MemoryState.HOME,
            "has_data": 1,
        }
        if carries_words_asked(True, header.cmd):  # the words asked for, as the home answers them
            reply.update(word=header.word, count=header.count)
        first = data_range(Packet(**reply), geometry.line_bytes)[0]
        ctx.set(dut.recv_header.payload, reply)
        ctx.set(dut.recv_header.valid, 1)
        ctx.set(dut.host.resp.ready, 1)
        # The reply's data block follows its header, a word per cycle. After a caching miss, as the
        # host's word arrives it reads the next word of the same line (the fill first, then a hit).
        cycles = words = 0
        answers = []
        while len(answers) < (2 if caching else 1):
            header_taken = ctx.get(dut.recv_header.valid) and ctx.get(dut.recv_header.ready)
            word_taken = ctx.get(dut.recv_data.valid) and ctx.get(dut.recv_data.ready)
            reuse_taken = len(answers) == 1 and ctx.get(dut.host.req.valid) and ctx.get(dut.host.req.ready)
            if ctx.get(dut.host.resp.valid):
                answers.append((cycles + 1, ctx.get(dut.host.resp.payload.data)))
                if len(answers) == 1 and caching:
                    ctx.set(dut.host.req.payload, read(WORD + 1))
                    ctx.set(dut.host.req.valid, 1)
            await ctx.tick()
            cycles += 1
            if reuse_taken:
                ctx.set(dut.host.req.valid, 0)
            if header_taken:
                ctx.set(dut.recv_header.valid, 0)
                ctx.set(dut.recv_data.valid, 1)
            if word_taken:
                words += 1
                ctx.set(dut.recv_data.valid, words < geometry.line_words)
            ctx.set(dut.recv_data.payload, (first + words) % geometry.line_words)  # handover order
            if cycles > 1000:
                raise RuntimeError("the host's reads were not answered within 1000 cycles")
        expected = [WORD, WORD + 1][: len(answers)]
        if [data for _, data in answers] != expected:
            raise RuntimeError(f"the host read words {[data for _, data in answers]}, not {expected}")
        if caching:
            after["reuse"] = answers[1][0] - answers[0][0]
        else:
            phases.update(lac=lac, request=request, complete=answers[0][0])

    async def home(ctx, dut):
        request = {  # a caching node's first miss: read uncached, the line shown
            "ptype": PacketType.REQUEST,
            "cmd": Command.MUREAD,
            "flag": 1,
            "source": REQUESTER,
            "target": HOME,
            "addr": (HOME << 26) | line,
            "word": WORD,
            "count": 1,
        }
        await send(ctx, dut.recv_header, request)
        phases["home_reply"] = 1 + await cycles_until(ctx, lambda: ctx.get(dut.send_header.valid))
        answer = await recv(ctx, dut.send_header)
        # The answer carries the words asked for (sci_packet.data_range), here the host's one.
        packet = Packet(**{f.name: int(getattr(answer, f.name)) for f in HEADER_FIELDS})
        n = 0
        for _ in range(data_range(packet, geometry.line_bytes)[1]):
            while not ctx.get(dut.send_data.valid):
                await ctx.tick()
                n += 1
            await recv(ctx, dut.send_data)
            n += 1
        phases["home_data"] = n

    simulate(REQUESTER, requester)
    simulate(REQUESTER, lambda ctx, dut: requester(ctx, dut, caching=True), caching=True)
    simulate(HOME, home)
    return phases, after


def run(nodes=(2, 4), *, config=None, log=print, spread=None, microcode_only=False):
    """The phases of one remote read miss (NCC-NUMA) on rings of ``nodes`` cards."""
    config = config or CardConfig(max_nodes=16, via=False)
    results.progress(log, 1, len(nodes) + 1, "the coherence engine's phases, in Amaranth's simulator")
    engine, after = engine_phases(config, microcode_only)
    rings = []
    for done, n in enumerate(nodes, 2):
        results.progress(log, done, len(nodes) + 1, f"{n}-node ring: the whole miss, from the card's counter")
        rows = latency.run(n, config=config, log=lambda message: None, spread=spread, microcode_only=microcode_only)[
            "rows"
        ]
        total = next(r["ncc_cycles"] for r in rows if r["name"] == MISS_ROW)
        ring = total - sum(engine.values())
        if ring < 0:
            raise RuntimeError(f"{n}-node ring: the engine's phases ({sum(engine.values())}) exceed the miss ({total})")
        rings.append({"nodes": n, "total": total, "phases": dict(engine, ring=ring)})
    return {
        "rings": rings,
        "clock_mhz": config.clk_freq_hz / 1e6,
        "config": config.as_dict(),
        "word": WORD,
        "reuse": after["reuse"],
        "microcode_only": microcode_only,
    }


def load_baseline(baseline_json):
    """The rings of an earlier run (its miss.json), to tabulate and plot beside a new one."""
    try:
        baseline = json.loads(Path(baseline_json).read_text())["figures"]
        rings = baseline["rings"]
        if not all({"nodes", "total", "phases"} <= set(r) for r in rings):
            raise KeyError("rings")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NumaviaError(f"{baseline_json}: not the miss.json of numavia bench miss ({e})") from None
    return rings


def _columns(figures):
    """(title, ring) of every column: the baseline's rings first."""
    columns = [(f"{r['nodes']} nodes, baseline", r) for r in figures.get("baseline", ())]
    return columns + [(f"{r['nodes']} nodes", r) for r in figures["rings"]]


def report(figures, out):
    columns = _columns(figures)
    headers = ["phase", *(f"{title} (cycles)" for title, _ in columns)]
    rows = [[label, *(r["phases"][key] for _, r in columns)] for key, label in PHASES]
    rows.append(["whole miss", *(r["total"] for _, r in columns)])
    ns = 1000 / figures["clock_mhz"]
    return results.write(
        out,
        "miss",
        title="Where the cycles of a remote read miss go (NCC-NUMA"
        + (", microcode only)" if figures["microcode_only"] else ", fast path on)"),
        headers=headers,
        rows=rows,
        figures=figures,
        config=figures["config"],
        notes=[
            f"Card clock {figures['clock_mhz']:.0f} MHz ({ns:.0f} ns a cycle); the host reads word "
            f"{figures['word']} of a line whose home holds it alone (memory HOME).",
            "Whole miss: the card's LAC.LAST_LATENCY on the RTL ring (numavia bench latency). "
            "Engine phases: the card's coherence engine in Amaranth's simulator; the ring is the rest.",
            f"Reuse: the host reads word {figures['word'] + 1} of the same line as word {figures['word']} "
            f"arrives; its word comes {figures['reuse']} cycles later (the line fill runs first, then a hit).",
        ],
        plot=lambda path: plot(figures, path),
    )


def plot(figures, path: Path):
    columns = _columns(figures)
    fig = Figure(figsize=(9, 2.2 + 0.5 * len(columns)))
    ax = fig.subplots()
    for i, (_, ring) in enumerate(columns):
        left = 0
        for j, (key, label) in enumerate(PHASES):
            width = ring["phases"][key]
            ax.barh(i, width, left=left, color=f"C{j}", label=label if i == 0 else None)
            left += width
        ax.text(left + 2, i, str(left), va="center", fontsize=8)
    ax.set_yticks(range(len(columns)), [title for title, _ in columns])
    ax.invert_yaxis()
    ax.set_xlabel("cycles (card clock)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
