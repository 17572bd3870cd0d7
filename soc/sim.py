"""Build and run the cycle-accurate cluster simulation (Verilator).

Three cached stages, each keyed by its inputs under ``build/``:

1. ``soc/<key>``: the node SoC's Verilog, software headers and csr.json (LiteX + the card);
2. ``verilated/<key>`` and ``simulator/<key>``: one node's model and the simulator around it
   (``node_main.cpp``; ``simulator_build``): the same binary runs every node of a ring of any size,
   spread over processes or MPI ranks (``ring_launch``); ``simulator-mpi/<key>`` is its MPI build,
   made when a run asks for MPI;
3. ``firmware/<key>`` (or ``zephyr-firmware/<key>``): the firmware for that SoC (``numavia.soc.firmware``).

A run happens in its own folder: the node memories' init files (the ROM holds the bare-metal
firmware, or a jump to the Zephyr image in main RAM), each node's console log and ``run.json``
with the cycle counts.
"""

import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any

from numavia.base import buildcache, codegen, params, paths, regmap, trace
from numavia.base.coherence import MAX_NODES
from numavia.base.errors import NumaviaError
from numavia.base.via_params import att_regions_for
from numavia.gateware import build as gateware_build
from numavia.gateware.card import CardConfig
from numavia.gateware.host_port import RequestLayout, ResponseLayout, WriteBeatLayout

from . import firmware as node_firmware
from . import model_top, ring_launch, simulator_build
from .card_soc import NumaviaSoC
from .firmware import memory_images
from .sim_target import build_node

HERE = Path(__file__).resolve().parent
HOST_MEM_PER_VI = 0x8000  # a VI's share of a simulated node's host memory (SimConfig.host_mem_size)
SOC_SOURCES = ("card_core.py", "card_soc.py", "sim_target.py")  # what the node's Verilog depends on
_SOC_SOURCES = buildcache.SourcesAsLoaded(lambda: [HERE / f for f in SOC_SOURCES], "SoC")  # all imported above


def _firmware_define(name: str, header: Path = paths.firmware_dir() / "core/include/numavia/core.h") -> str:
    """A string #define of the firmware core, so console protocol strings have one source."""
    m = re.search(rf'#define\s+{name}\s+"([^"]*)"', header.read_text())
    if not m:
        raise RuntimeError(f"{name} is not defined in {header}")
    return m.group(1)


READY_MARKER = _firmware_define("NV_READY_MARKER")


class SimError(NumaviaError):
    """A build or run step failed; the message says which and why, in one line."""


@dataclass(frozen=True)
class SimConfig:
    nodes: int = 2
    cpu_variant: str = "standard"
    sys_clk_freq: int = params.SYS_CLOCK_HZ
    eth_clk_freq: int = params.GMII_CLOCK_HZ
    # The node's "hostmem" RAM (VIA buffers and descriptors); None: HOST_MEM_SIZE, or room for
    # HOST_MEM_PER_VI a VI where the card has more VIs than that holds (VIPL's descriptor areas alone
    # take 12 KiB a VI: 3 MiB for 256).
    host_mem_size: int | None = None
    main_ram_size: int = 0x4_0000  # bare metal: data and stack; Zephyr: the whole image, shell included
    via: bool = True  # False: the card as small FPGAs build it (no VIA engine)
    via_vis: int = CardConfig.via_vis  # VIs of each card's VIA engine

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise SimError(f"--nodes must be 1..{MAX_NODES}, not {self.nodes}")
        if not 1 <= self.via_vis <= regmap.VI_CAPACITY:
            raise SimError(f"--vis must be 1..{regmap.VI_CAPACITY}, not {self.via_vis}")
        if self.host_mem_size is None:
            wanted = self.via_vis * HOST_MEM_PER_VI
            object.__setattr__(self, "host_mem_size", max(params.HOST_MEM_SIZE, 1 << (wanted - 1).bit_length()))

    def clock_periods_ps(self) -> dict[str, int]:
        """Period of every clock input of the node, sys first."""
        return {"sys_clk": round(1e12 / self.sys_clk_freq), "eth_clk": round(1e12 / self.eth_clk_freq)}

    def soc_params(self) -> dict[str, Any]:
        return {
            "cpu_variant": self.cpu_variant,
            "sys_clk_freq": self.sys_clk_freq,
            "host_mem_size": self.host_mem_size,
            "main_ram_size": self.main_ram_size,
            "via": self.via,
            "via_vis": self.via_vis,
        }

    def card_config(self) -> CardConfig:
        """The card every node carries (its address map is what host-port traces address)."""
        assert self.host_mem_size is not None  # __post_init__ sets it
        return CardConfig(
            clk_freq_hz=self.sys_clk_freq,
            host_mem_base=NumaviaSoC.mem_map["hostmem"],
            host_mem_size=self.host_mem_size,
            via=self.via,
            via_vis=self.via_vis,
            via_att_regions=att_regions_for(self.via_vis),
        )


def require_tool(name: str, hint: str) -> None:
    if shutil.which(name) is None:
        raise SimError(f"{name} not found: {hint}")


# --- Stage 1: the node SoC -----------------------------------------------------------------------


def soc_key(config: SimConfig) -> str:
    files = gateware_build.sources() + _SOC_SOURCES.files()
    return buildcache.digest(
        files,
        params={
            **config.soc_params(),
            **_package_versions("litex", "liteeth", "migen", "amaranth", "pythondata-cpu-vexriscv"),
        },
    )


def _package_versions(*names: str) -> dict[str, str]:
    return {name: version(name) for name in names}


def build_soc(config: SimConfig, log: Callable[[str], object] = print) -> Path:
    """Folder with ``gateware/numavia_node.v``, ``software/include/generated``, ``csr.json``."""

    def produce(folder: Path) -> None:
        soc_kwargs = dict(
            cpu_variant=config.cpu_variant,
            sys_clk_freq=config.sys_clk_freq,
            host_mem_size=config.host_mem_size,
            main_ram_size=config.main_ram_size,
            card_config=config.card_config(),
            log=log,
        )
        with _output_to(folder / "litex.log"):
            _, sources = build_node(folder, **soc_kwargs)
        # Sources inside the (temporary) build folder are recorded relative to it.
        sources = [os.path.relpath(f, folder) if Path(f).is_relative_to(folder) else f for f in sources]
        (folder / "sources.json").write_text(json.dumps(sources, indent=1))

    return buildcache.cached("soc", soc_key(config), produce, log=log)


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Send a LiteX build step's (long) output to a log file instead of the console."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "w") as log_file:
        os.dup2(log_file.fileno(), 1)
        os.dup2(log_file.fileno(), 2)
        try:
            yield
        except Exception as e:
            raise SimError(f"SoC generation failed: {e} (log: {path})") from e
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


# --- Stage 2: the node simulator -----------------------------------------------------------------

MODEL_TOP = "numavia_node_model"


def build_model(
    config: SimConfig, soc_dir: Path, log: Callable[[str], object] = print, jobs: int | None = None
) -> Path:
    """Path of the node simulator: one node of ``soc_dir``'s SoC, for any ring size and node id."""
    require_tool("verilator", "run `make setup` (Debian package verilator)")
    node_v = soc_dir / "gateware" / "numavia_node.v"
    ports = model_top.parse_ports(node_v.read_text(), "numavia_node")
    sources = [soc_dir / f for f in json.loads((soc_dir / "sources.json").read_text())]
    model = simulator_build.verilate_model(
        MODEL_TOP,
        sources,
        {"model_top.v": model_top.model_verilog("numavia_node", ports, MODEL_TOP)},
        log=log,
        jobs=jobs,
        note=" (the node: once for every ring size)",
    )
    headers = {
        "model_ports.h": model_top.ports_header(ports, MODEL_TOP, config.clock_periods_ps(), regmap.NODE_ID_BITS),
        "host_port_layout.h": layout_header(),
        "numavia_trace.h": trace.c_header(),
        "numavia_regs.h": codegen.c_header(),
    }
    return simulator_build.link_simulator(model, MODEL_TOP, "node_main.cpp", headers, log=log)


def build_mpi_variant(binary: Path, log: Callable[[str], object] = print) -> Path:
    """The MPI build of a simulator (its main compiled with mpicxx against the same model)."""
    ring_launch.require_mpi()
    return simulator_build.mpi_variant(binary, log=log)


build_seconds = simulator_build.build_seconds


# --- Runs ---------------------------------------------------------------------------------------


def init_text(data: bytes, size: int, region: str) -> str:
    """A memory's $readmemh file: one little-endian 32-bit word per line."""
    if len(data) > size:
        raise SimError(f"the firmware puts {len(data)} bytes in {region}, which holds {size}")
    data += b"\0" * (-len(data) % 4)
    return "".join(f"{int.from_bytes(data[i : i + 4], 'little'):08x}\n" for i in range(0, len(data), 4))


def prepare_run(run_dir: str | os.PathLike[str], soc_dir: Path, firmware: node_firmware.Image) -> Path:
    """Fill ``run_dir`` with the memory init files the model reads at time zero: the SoC's, then
    the memories ``firmware`` (a :class:`numavia.soc.firmware.Image`) occupies."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for init in (soc_dir / "gateware").glob("*.init"):
        shutil.copy(init, run_dir / init.name)
    memories = json.loads((soc_dir / "csr.json").read_text())["memories"]
    for region, data in memory_images(firmware, memories).items():
        text = init_text(data, memories[region]["size"], region)
        (run_dir / f"numavia_node_{region}.init").write_text(text)
    for stale in ("node*.log", "run.json", "eth_link.json"):  # a previous run's "ready" is not ours
        for path in run_dir.glob(stale):
            path.unlink()
    return run_dir


def layout_header() -> str:
    """Bit positions of the host port's stream payloads, for the C++ host driver."""
    lines = ["// Generated by numavia.soc.sim from gateware/host_port.py. Do not edit.", "#pragma once"]
    for prefix, layout, names in (
        ("REQ", RequestLayout, ("addr", "write", "count")),
        ("WDATA", WriteBeatLayout, ("data", "be")),
        ("RESP", ResponseLayout, ("data", "error", "last")),
    ):
        lines += [f"#define HP_{prefix}_{name.upper()}_LSB {layout[name].offset}" for name in names]
    return "\n".join(lines) + "\n"


#: Exit codes of a run and what they mean.
EXIT_REASONS = {
    0: "ok",
    1: "a simulator process failed",
    2: "bad simulator arguments",
    3: "cycle limit reached before every node was ready",
    4: "wall-time limit reached",
    130: "interrupted",
}


def simulator_args(
    *,
    max_cycles: int | None = None,
    stop_marker: str | None = READY_MARKER,
    bridge_port: int | None = None,
    serve: bool = False,
    until_disconnect: bool = False,
    quiet: bool = False,
    progress: int | None = None,
    wall_limit: float | None = None,
    trace_dir: str | os.PathLike[str] | None = None,
    ring_delay: int | None = None,
    access_log: str | os.PathLike[str] | None = None,
    numa: bool = False,
    cache_first_miss: bool = False,
    seed: int | None = None,
    eth_delay: int | None = None,
    eth_loss: float | None = None,
    eth_corrupt: float | None = None,
    eth_duplicate: float | None = None,
    eth_reorder: float | None = None,
    eth_seed: int | None = None,
    console_port: int | None = None,
    console_stdin: int | None = None,
) -> list[str]:
    """The node simulator's own options. ``eth_*`` set the Ethernet switch between the nodes
    (``soc/verilator/gmii_link.hpp``): PHY+cable delay in eth cycles, frame loss, corruption,
    duplication and reordering probabilities, and the seed of the fault generator.
    ``console_port``: node i's console is served on that port + i; ``console_stdin``: the node whose
    UART receives the simulator's standard input (``soc/verilator/console.hpp``)."""
    args = []
    if access_log:
        args += ["--access-log", str(Path(access_log).resolve())]
    if numa:
        args.append("--numa")
    if cache_first_miss:
        args.append("--cache-first-miss")
    if trace_dir:
        args += ["--trace-dir", str(Path(trace_dir).resolve())]
    for option, value in (
        ("--ring-delay", ring_delay),
        ("--seed", seed),
        ("--eth-delay", eth_delay),
        ("--eth-loss", eth_loss),
        ("--eth-corrupt", eth_corrupt),
        ("--eth-duplicate", eth_duplicate),
        ("--eth-reorder", eth_reorder),
        ("--eth-seed", eth_seed),
        ("--wall-limit", wall_limit),
        ("--max-cycles", max_cycles),
        ("--stop-marker", stop_marker),
        ("--bridge-port", bridge_port),
        ("--progress", progress),
        ("--console-port", console_port),
        ("--console-stdin", console_stdin),
    ):
        if value is not None and value != "":
            args += [option, str(value)]
    if serve:
        args.append("--serve")
    if until_disconnect:
        args.append("--until-disconnect")
    if quiet:
        args.append("--quiet")
    return args


@dataclass
class Build:
    config: SimConfig
    soc_dir: Path
    model: Path
    firmware: node_firmware.Image
    mpi_model: Path | None = None


def build_all(
    config: SimConfig,
    log: Callable[[str], object] = print,
    spread: ring_launch.Spread | None = None,
    firmware: str = "bare-metal",
) -> Build:
    """Every stage, cached: returns what a run needs (with ``spread.mpi``, the MPI build too).
    ``firmware``: what every node runs, as the ``--firmware`` option says
    (numavia.soc.firmware.parse_choice)."""
    log(f"SoC ({config.cpu_variant} VexRiscv @ {config.sys_clk_freq / 1e6:.0f} MHz + card)")
    soc_dir = build_soc(config, log=log)
    log(f"firmware ({firmware})")
    image = node_firmware.build(firmware, soc_dir, log=log)
    log("node model (Verilator)")
    model = build_model(config, soc_dir, log=log)
    mpi_model = build_mpi_variant(model, log=log) if spread is not None and spread.mpi else None
    return Build(config, soc_dir, model, image, mpi_model)


def start(
    build: Build,
    run_dir: str | os.PathLike[str],
    spread: ring_launch.Spread | None = None,
    *,
    stdout: IO[str] | int | None = None,
    echo_stderr: bool = True,
    **sim_kwargs: Any,
) -> ring_launch.RingRun:
    """Start the ring (``spread``: processes or MPI ranks, default one process per core) on a
    prepared run folder; returns the running :class:`ring_launch.RingRun`."""
    spread = (spread or ring_launch.Spread.default(build.config.nodes)).fitted(build.config.nodes)
    if spread.mpi and build.mpi_model is None:
        build.mpi_model = build_mpi_variant(build.model)
    prepare_run(run_dir, build.soc_dir, build.firmware)
    run = ring_launch.RingRun(
        build.model,
        run_dir,
        build.config.nodes,
        simulator_args(**sim_kwargs),
        spread,
        mpi_binary=build.mpi_model,
        stdout=stdout,
        echo_stderr=echo_stderr,
        stdin_node=sim_kwargs.get("console_stdin"),
    )
    return run.start()


def run(
    build: Build, run_dir: str | os.PathLike[str], spread: ring_launch.Spread | None = None, **sim_kwargs: Any
) -> tuple[int, dict[str, Any] | None]:
    """Run the ring to completion; returns ``(exit_code, run.json contents)``."""
    ring = start(build, run_dir, spread, **sim_kwargs)
    try:
        code = ring.wait()
    except KeyboardInterrupt:
        code = ring.terminate()
    summary = summarize(ring, access_log=sim_kwargs.get("access_log"))
    if ring.failure:
        raise SimError(ring.failure)
    return code, summary


def summarize(ring: ring_launch.RingRun, access_log: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """Merge what the nodes and the hub wrote into ``run.json``; returns its contents (None if
    the hub wrote nothing)."""
    hub, nodes = ring_launch.read_results(ring.run_dir, ring.nodes)
    if access_log:
        ring_launch.merge_logs(
            [Path(f"{access_log}.node{i}") for i in range(ring.nodes)],
            access_log,
            key=lambda line: (int(line.split()[5]), int(line.split()[0])),
        )
    if hub is None or any(n is None for n in nodes):
        return None
    wall = ring.wall_seconds
    cycles = max(n["cycles"] for n in nodes)
    summary = {
        "nodes": ring.nodes,
        "processes": hub["processes"],
        "mpi": hub["mpi"],
        "cycles": cycles,
        "wall_seconds": round(wall, 3),
        "sim_wall_seconds": hub["wall_seconds"],
        "cycles_per_second": round(cycles / max(wall, 1e-9)),
        "node_cycles_per_second": round(cycles * ring.nodes / max(wall, 1e-9)),
        "cpu_seconds": hub["cpu_seconds"],
        "reason": hub["reason"],
        "exit_code": hub["exit_code"],
        "marker_cycles": [n["marker_cycle"] for n in nodes],
        "ring_in": [n["ring_in"] for n in nodes],
    }
    if "trace" in nodes[0]:
        summary["trace_start"] = nodes[0]["trace_start"]
        summary["trace"] = [n["trace"] for n in nodes]
    if "bridge_accesses" in nodes[0]:
        summary["bridge_accesses"] = [n["bridge_accesses"] for n in nodes]
    (ring.run_dir / "run.json").write_text(json.dumps(summary, indent=1))
    return summary
