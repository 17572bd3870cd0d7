"""Estimated register-to-register paths of an ECP5 netlist (yosys's JSON after ``synth_ecp5``).

nextpnr names critical paths only for a routed design. For a design that does not route (the
ECPIX-5's full card), or before waiting an hour for it, this names the logic that limits a clock:
the longest paths from a register (or block-RAM output) to a register (or memory input) of the
same clock, in nominal delays per cell and per net (:data:`DELAYS`, ECP5 speed grade 8).

It is an estimate of logic depth, not timing sign-off: placement makes nets longer or shorter, so
trust the ranking and the logic a path crosses more than its nanoseconds. Paths between clocks are
left out (they cross through synchronisers, or are not timed). Names along a path are yosys's:
where synthesis merged a signal into LUTs, yosys names the wire after a signal it feeds.
"""

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from numavia.base.errors import NumaviaError

# Nominal delays in ns. A cell's delay includes the net into it, except along a carry chain
# (dedicated wiring). Calibrated loosely on nextpnr's placed estimate of the ECPIX-5 build.
DELAYS = {
    "net": 0.7,
    "lut": 0.4,  # LUT4
    "wide_mux": 0.25,  # PFUMX / L6MUX21: LUT5 / LUT6 muxes
    "carry_sum": 0.45,  # CCU2C: A/B/C/D to S or COUT
    "carry_in": 0.06,  # CCU2C: CIN to COUT, per two bits
    "carry_in_sum": 0.3,  # CCU2C: CIN to S
    "ff_clock_to_q": 0.4,
    "bram_clock_to_out": 4.3,  # DP16KD without its output register
    "dram_read": 0.6,  # TRELLIS_DPR16X4: read address to data
    "multiplier": 4.5,  # MULT18X18D, combinational
    "setup": 0.1,
}

_COMBINATIONAL = {"LUT4": "lut", "PFUMX": "wide_mux", "L6MUX21": "wide_mux", "MULT18X18D": "multiplier"}
_MANGLED = re.compile(r"_(?:TRELLIS_FF|TRELLIS_DPR16X4|LUT4|CCU2C|PFUMX|L6MUX21|DP16KD|MULT18X18D)_")


class NetlistError(NumaviaError):
    pass


@dataclass
class TimingPath:
    delay_ns: float
    clock: str
    clock_source: str  # what drives the clock: "EHXPLLL.CLKOP", "port clk"
    end: str  # the register or memory input the path ends at
    hops: list = field(default_factory=list)  # (arrival ns, signal name), launch first

    @property
    def start(self):
        return self.hops[0][1] if self.hops else "?"

    @property
    def mhz(self):
        return 1000 / self.delay_ns

    def segments(self):
        """The path as the distinct signals it passes, each with its arrival time."""
        out = []
        for arrival, name in self.hops:
            if not out or out[-1][1] != name:
                out.append((arrival, name))
        return out


def load(path, top=None):
    """The top module of a yosys JSON netlist (or the module named ``top``)."""
    try:
        modules = json.loads(Path(path).read_text())["modules"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NetlistError(f"{path}: not a yosys JSON netlist ({e.__class__.__name__}: {e})") from None
    if top is None:
        tops = [n for n, m in modules.items() if m.get("attributes", {}).get("top")]
        if len(tops) != 1:
            raise NetlistError(f"{path}: {len(tops)} top modules; name one")
        top = tops[0]
    if top not in modules:
        raise NetlistError(f"{path}: no module {top!r}")
    return modules[top]


def _clock_drivers(module, clocks):
    """Clock bit -> what drives it (an input port or a cell's output)."""
    drivers = {}
    for name, port in module.get("ports", {}).items():
        if port.get("direction") == "input":
            drivers.update((b, f"port {name}") for b in port["bits"] if b in clocks)
    for cell in module.get("cells", {}).values():
        for port, direction in cell.get("port_directions", {}).items():
            if direction == "output":
                drivers.update((b, f"{cell['type']}.{port}") for b in cell["connections"].get(port, []) if b in clocks)
    return drivers


class _Graph:
    """Bits of the module as nodes; combinational cells as edges, sequential cells as the
    sources and sinks of paths, each tagged with its clock bit."""

    def __init__(self, module):
        self.fanin = defaultdict(list)  # bit -> [(driving bit, delay)]
        self.launch = {}  # bit -> (clock bit, time after the clock)
        self.capture = []  # (bit, clock bit, cell name)
        for name, cell in module.get("cells", {}).items():
            self._add(name, cell)
        self.drivers = _clock_drivers(
            module, {clk for clk, _ in self.launch.values()} | {clk for _, clk, _ in self.capture}
        )
        self.names = _names(module, lambda name: (len(name),))
        # A clock goes by its least nested name, not by some block's port.
        self.clock_names = _names(module, lambda name: (name.count("."), len(name)))

    def _add(self, name, cell):
        kind, conns = cell["type"], cell.get("connections", {})

        def bits(port):
            return [b for b in conns.get(port, []) if isinstance(b, int)]

        def edges(outs, ins, delay):
            for o in outs:
                for p in ins:
                    self.fanin[o].extend((b, delay) for b in bits(p))

        def clock(port):
            found = bits(port)
            return found[0] if found else None

        net = DELAYS["net"]
        if kind == "TRELLIS_FF":
            clk = clock("CLK")
            self.launch.update((b, (clk, DELAYS["ff_clock_to_q"])) for b in bits("Q"))
            self.capture.extend((b, clk, name) for p in ("DI", "M", "CE", "LSR") for b in bits(p))
        elif kind == "DP16KD":
            for port, direction in cell.get("port_directions", {}).items():
                if port.startswith("CLK"):
                    continue
                side = re.sub(r"\d+$", "", port)[-1]  # DOA0, ADB3, CEA, WEB: port A or B
                clk = clock(f"CLK{side}")
                if direction == "output":
                    self.launch.update((b, (clk, DELAYS["bram_clock_to_out"])) for b in bits(port))
                else:
                    self.capture.extend((b, clk, name) for b in bits(port))
        elif kind == "TRELLIS_DPR16X4":
            clk = clock("WCK")
            # The read port is combinational; what it reads was written under WCK.
            self.launch.update((b, (clk, DELAYS["dram_read"])) for b in bits("DO"))
            edges(bits("DO"), ["RAD"], DELAYS["dram_read"] + net)
            self.capture.extend((b, clk, name) for p in ("DI", "WAD", "WRE") for b in bits(p))
        elif kind == "CCU2C":
            ins = [f"{p}{i}" for i in "01" for p in "ABCD"]
            edges(bits("S0"), ins[:4], DELAYS["carry_sum"] + net)
            edges(bits("S1") + bits("COUT"), ins, DELAYS["carry_sum"] + net)
            edges(bits("S0") + bits("S1"), ["CIN"], DELAYS["carry_in_sum"])
            edges(bits("COUT"), ["CIN"], DELAYS["carry_in"])
        elif kind in _COMBINATIONAL:
            dirs = cell.get("port_directions", {})
            outs = [b for p, d in dirs.items() if d == "output" for b in bits(p)]
            edges(outs, [p for p, d in dirs.items() if d == "input"], DELAYS[_COMBINATIONAL[kind]] + net)
        # Anything else (I/O buffers, PLLs, DDR registers, delay lines) starts no timed path.

    def arrivals(self, clk):
        """Latest arrival at every bit for paths launched by ``clk``, with the bit it came from."""
        arrival, came_from = {}, {}
        for start in self.fanin.keys() | self.launch.keys():
            if start in arrival:
                continue
            # Iterative depth-first evaluation: the fan-in of a large netlist is too deep to recurse.
            stack = [start]
            while stack:
                bit = stack[-1]
                pending = [b for b, _ in self.fanin.get(bit, ()) if b not in arrival]
                if pending and bit not in came_from:
                    came_from[bit] = None  # on the stack: a loop back here stops
                    stack.extend(pending)
                    continue
                stack.pop()
                if bit in arrival:
                    continue
                launched = self.launch.get(bit)
                best, via = (launched[1] if launched and launched[0] == clk else float("-inf")), None
                for b, delay in self.fanin.get(bit, ()):
                    t = arrival.get(b, float("-inf")) + delay
                    if t > best:
                        best, via = t, b
                arrival[bit], came_from[bit] = best, via
        return arrival, came_from


def _names(module, rank):
    """A readable name per bit: the signal's own name where yosys kept one (the best by ``rank``),
    otherwise the part of yosys's made-up name before its cell suffixes (the signal the logic
    feeds)."""
    ranked = {}
    for name, net in module.get("netnames", {}).items():
        if net.get("hide_name"):
            continue
        key = (bool(_MANGLED.search(name)), *rank(name))
        for bit in net["bits"]:
            if isinstance(bit, int) and (bit not in ranked or key < ranked[bit][0]):
                ranked[bit] = (key, _MANGLED.split(name)[0])
    return {bit: stem for bit, (_, stem) in ranked.items()}


def worst_paths(module, count=10):
    """The ``count`` slowest paths per clock, each to a different register or memory (worst
    first), as :class:`TimingPath` objects."""
    graph = _Graph(module)
    by_clock = defaultdict(list)
    for bit, clk, cell in graph.capture:
        if clk is not None:
            by_clock[clk].append((bit, cell))
    result = []
    for clk, endpoints in by_clock.items():
        arrival, came_from = graph.arrivals(clk)
        ends = {}
        for bit, cell in endpoints:
            t = arrival.get(bit, float("-inf"))
            end = graph.names.get(bit, cell) if cell.startswith("$") else _MANGLED.split(cell)[0]
            if t > float("-inf") and (end not in ends or t > ends[end][0]):
                ends[end] = (t, bit)
        for end, (t, bit) in sorted(ends.items(), key=lambda e: -e[1][0])[:count]:
            hops, b = [], bit
            while b is not None:
                hops.append((round(arrival[b], 2), graph.names.get(b, f"net {b}")))
                b = came_from.get(b)
            result.append(
                TimingPath(
                    round(t + DELAYS["net"] + DELAYS["setup"], 2),
                    graph.clock_names.get(clk, f"net {clk}"),
                    graph.drivers.get(clk, "?"),
                    end,
                    hops[::-1],
                )
            )
    return sorted(result, key=lambda p: -p.delay_ns)


def format_paths(paths, clocks=None):
    """Text report: per clock, its estimated Fmax and its worst paths as the signals they pass."""
    lines = []
    for clock in dict.fromkeys(p.clock for p in paths):
        if clocks and clock not in clocks:
            continue
        mine = [p for p in paths if p.clock == clock]
        lines.append(
            f"clock {clock} ({mine[0].clock_source}): worst path {mine[0].delay_ns:.1f} ns estimated ({mine[0].mhz:.1f} MHz)"
        )
        for p in mine:
            lines.append(f"  {p.delay_ns:5.1f} ns  {p.start} -> {p.end}  ({len(p.hops)} cells)")
            lines.append("           " + " > ".join(f"{name} @{t:.1f}" for t, name in p.segments()))
    return "\n".join(lines)
