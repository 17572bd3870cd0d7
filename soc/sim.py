"""Build and run the cycle-accurate cluster simulation (Verilator).

Three cached stages, each keyed by its inputs under ``build/``:

1. ``soc/<key>``: the node SoC's Verilog, software headers and csr.json (LiteX + the card);
2. ``verilator/<key>``: the N-node cluster top, compiled with the C++ harness;
3. ``firmware/<key>`` (or ``zephyr-firmware/<key>``): the firmware for that SoC (``numavia.firmware``).

A run happens in its own folder: the node memories' init files (the ROM holds the bare-metal
firmware, or a jump to the Zephyr image in main RAM), each node's console log and ``run.json``
with the cycle counts.
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, asdict
from pathlib import Path

from numavia import buildcache, trace
from numavia.errors import NumaviaError
from numavia.gateware import regmap

from . import cluster

HERE = Path(__file__).resolve().parent
HARNESS_DIR = HERE / "verilator"
SOC_SOURCES = ("card_core.py", "card_soc.py", "sim_target.py")   # what the node's Verilog depends on


def _firmware_define(name, header=buildcache.REPO_ROOT / "firmware/core/include/numavia/core.h"):
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
    sys_clk_freq: int = 100_000_000
    eth_clk_freq: int = 125_000_000     # GMII
    host_mem_size: int = 0x40_0000      # the node's "hostmem" RAM (VIA buffers and descriptors)
    main_ram_size: int = 0x4_0000       # bare metal: data and stack; Zephyr: the whole image, shell included
    via: bool = True                    # False: the card as small FPGAs build it (no VIA engine)

    def __post_init__(self):
        if not 1 <= self.nodes <= (1 << regmap.NODE_ID_BITS):
            raise SimError(f"--nodes must be 1..{1 << regmap.NODE_ID_BITS}, not {self.nodes}")

    def clock_periods_ps(self):
        """Period of every clock input of the node, sys first."""
        return {"sys_clk": round(1e12 / self.sys_clk_freq), "eth_clk": round(1e12 / self.eth_clk_freq)}

    def soc_params(self):
        return {"cpu_variant": self.cpu_variant, "sys_clk_freq": self.sys_clk_freq,
                "host_mem_size": self.host_mem_size, "main_ram_size": self.main_ram_size, "via": self.via}

    def card_config(self):
        """The card every node carries (its address map is what host-port traces address)."""
        from numavia.gateware.card import CardConfig
        from .card_soc import NumaviaSoC
        return CardConfig(clk_freq_hz=self.sys_clk_freq, host_mem_base=NumaviaSoC.mem_map["hostmem"],
                          host_mem_size=self.host_mem_size, via=self.via)


def _tool_version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def require_tool(name, hint):
    if shutil.which(name) is None:
        raise SimError(f"{name} not found: {hint}")


# --- Stage 1: the node SoC -----------------------------------------------------------------------

def soc_key(config):
    gateware_dir = Path(regmap.__file__).parent
    files = buildcache.source_files(gateware_dir) + [HERE / f for f in SOC_SOURCES]
    return buildcache.digest(files, params={**config.soc_params(), **_package_versions(
        "litex", "liteeth", "migen", "amaranth", "pythondata-cpu-vexriscv")})


def _package_versions(*names):
    from importlib.metadata import version
    return {name: version(name) for name in names}


def build_soc(config, log=print):
    """Folder with ``gateware/numavia_node.v``, ``software/include/generated``, ``csr.json``."""
    def produce(folder):
        from .sim_target import build_node
        soc_kwargs = dict(cpu_variant=config.cpu_variant, sys_clk_freq=config.sys_clk_freq,
                          host_mem_size=config.host_mem_size, main_ram_size=config.main_ram_size,
                          card_config=config.card_config(), log=log)
        with _output_to(folder / "litex.log"):
            _, sources = build_node(folder, **soc_kwargs)
        # Sources inside the (temporary) build folder are recorded relative to it.
        sources = [os.path.relpath(f, folder) if Path(f).is_relative_to(folder) else f for f in sources]
        (folder / "sources.json").write_text(json.dumps(sources, indent=1))

    return buildcache.cached("soc", soc_key(config), produce, log=log)


@contextlib.contextmanager
def _output_to(path):
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


# --- Stage 2: the Verilator model ----------------------------------------------------------------

VERILATOR_FLAGS = [
    "--cc", "--exe", "--build", "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
    "-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-UNOPTFLAT", "-Wno-MULTIDRIVEN",
]


def build_model(config, soc_dir, log=print, jobs=None):
    """Path of the compiled cluster simulator for ``config.nodes`` nodes of ``soc_dir``'s SoC."""
    require_tool("verilator", "run `make setup` (Debian package verilator)")
    harness = buildcache.source_files(HARNESS_DIR, ("*.cpp", "*.hpp", "*.h"))
    key = buildcache.digest(harness, params={
        "soc": soc_dir.name, "nodes": config.nodes,
        "verilator": _tool_version(["verilator", "--version"]), "flags": VERILATOR_FLAGS})
    binary = f"V{cluster.CLUSTER_TOP}"

    def produce(folder):
        node_v = soc_dir / "gateware" / "numavia_node.v"
        ports = cluster.parse_ports(node_v.read_text(), "numavia_node")
        (folder / "cluster.v").write_text(
            cluster.cluster_verilog("numavia_node", ports, config.nodes, regmap.NODE_ID_BITS))
        (folder / "cluster_ports.h").write_text(
            cluster.ports_header(ports, config.nodes, config.clock_periods_ps()))
        (folder / "host_port_layout.h").write_text(layout_header())
        (folder / "numavia_trace.h").write_text(trace.c_header())
        sources = [str(soc_dir / f) for f in json.loads((soc_dir / "sources.json").read_text())]
        log(f"verilating {config.nodes} node(s) (a few minutes on 2 cores)")
        verilate(folder, cluster.CLUSTER_TOP, [folder / "cluster.v", *sources], HARNESS_DIR / "sim_main.cpp",
                 jobs=jobs)

    folder = buildcache.cached("verilator", key, produce, log=log)
    return folder / "obj_dir" / binary


def verilate(folder, top, verilog, main_cpp, jobs=None):
    """Compile ``verilog`` with the C++ harness ``main_cpp`` into ``folder/obj_dir/V<top>``; the
    generated headers the harness includes are expected in ``folder``."""
    cmd = ["verilator", *VERILATOR_FLAGS, "-j", str(jobs or os.cpu_count() or 2), "--top-module", top,
           "--Mdir", str(folder / "obj_dir"), "-o", f"V{top}",
           "-CFLAGS", f"-O2 -I{folder} -I{HARNESS_DIR}", *map(str, verilog), str(main_cpp)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    (folder / "verilator.log").write_text(result.stdout + result.stderr)
    if result.returncode:
        errors = [l for l in (result.stderr + result.stdout).splitlines() if "error" in l.lower()]
        raise SimError(f"Verilator build of {top} failed: {errors[0] if errors else 'see the log'} "
                       f"(log: {folder / 'verilator.log'})")


# --- Runs ---------------------------------------------------------------------------------------

def init_text(data, size, region):
    """A memory's $readmemh file: one little-endian 32-bit word per line."""
    if len(data) > size:
        raise SimError(f"the firmware puts {len(data)} bytes in {region}, which holds {size}")
    data += b"\0" * (-len(data) % 4)
    return "".join(f"{int.from_bytes(data[i:i + 4], 'little'):08x}\n" for i in range(0, len(data), 4))


def prepare_run(run_dir, soc_dir, firmware):
    """Fill ``run_dir`` with the memory init files the model reads at time zero: the SoC's, then
    the memories ``firmware`` (a :class:`numavia.firmware.Image`) occupies."""
    from numavia.firmware import memory_images
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for init in (soc_dir / "gateware").glob("*.init"):
        shutil.copy(init, run_dir / init.name)
    memories = json.loads((soc_dir / "csr.json").read_text())["memories"]
    for region, data in memory_images(firmware, memories).items():
        text = init_text(data, memories[region]["size"], region)
        (run_dir / f"numavia_node_{region}.init").write_text(text)
    return run_dir


def layout_header():
    """Bit positions of the host port's stream payloads, for the C++ host driver."""
    from numavia.gateware.host_port import RequestLayout, ResponseLayout, WriteBeatLayout
    lines = ["// Generated by numavia.soc.sim from gateware/host_port.py. Do not edit.", "#pragma once"]
    for prefix, layout, names in (("REQ", RequestLayout, ("addr", "write", "count")),
                                  ("WDATA", WriteBeatLayout, ("data", "be")),
                                  ("RESP", ResponseLayout, ("data", "error", "last"))):
        lines += [f"#define HP_{prefix}_{name.upper()}_LSB {layout[name].offset}" for name in names]
    return "\n".join(lines) + "\n"


#: Harness exit codes and what they mean.
EXIT_REASONS = {0: "ok", 2: "bad harness arguments", 3: "cycle limit reached before every node was ready",
                4: "wall-time limit reached", 130: "interrupted"}


def harness_command(model, run_dir, *, max_cycles=None, stop_marker=READY_MARKER, bridge_port=None,
                    serve=False, until_disconnect=False, quiet=False, progress=None, wall_limit=None,
                    trace_dir=None, ring_delay=None, access_log=None, numa=False, eth_delay=None, eth_loss=None,
                    eth_corrupt=None, eth_duplicate=None, eth_reorder=None, eth_seed=None, console_port=None,
                    console_stdin=None):
    """The simulator's command line. ``eth_*`` set the Ethernet switch between the nodes
    (``soc/verilator/gmii_link.hpp``): PHY+cable delay in eth cycles, frame loss, corruption,
    duplication and reordering probabilities, and the seed of the fault generator.
    ``console_port``: node i's console is served on that port + i; ``console_stdin``: the node whose
    UART receives the simulator's standard input (``soc/verilator/console.hpp``)."""
    # The harness runs inside the run folder: every path it gets is absolute.
    cmd = [str(model), "--out-dir", str(Path(run_dir).resolve())]
    if access_log:
        cmd += ["--access-log", str(Path(access_log).resolve())]
    if numa:
        cmd.append("--numa")
    if trace_dir:
        cmd += ["--trace-dir", str(Path(trace_dir).resolve())]
    if ring_delay:
        cmd += ["--ring-delay", str(ring_delay)]
    for option, value in (("--eth-delay", eth_delay), ("--eth-loss", eth_loss), ("--eth-corrupt", eth_corrupt),
                          ("--eth-duplicate", eth_duplicate), ("--eth-reorder", eth_reorder),
                          ("--eth-seed", eth_seed)):
        if value is not None:
            cmd += [option, str(value)]
    if wall_limit:
        cmd += ["--wall-limit", str(wall_limit)]
    if max_cycles:
        cmd += ["--max-cycles", str(max_cycles)]
    if stop_marker:
        cmd += ["--stop-marker", stop_marker]
    if bridge_port:
        cmd += ["--bridge-port", str(bridge_port)]
    if console_port:
        cmd += ["--console-port", str(console_port)]
    if console_stdin is not None:
        cmd += ["--console-stdin", str(console_stdin)]
    if serve:
        cmd.append("--serve")
    if until_disconnect:
        cmd.append("--until-disconnect")
    if quiet:
        cmd.append("--quiet")
    if progress:
        cmd += ["--progress", str(progress)]
    return cmd


@dataclass
class Build:
    config: SimConfig
    soc_dir: Path
    model: Path
    firmware: object    # numavia.firmware.Image


def build_all(config, log=print, firmware="bare-metal"):
    """Every stage, cached: returns what a run needs. ``firmware``: what every node runs, as the
    ``--firmware`` option says (numavia.firmware.parse_choice)."""
    from numavia import firmware as node_firmware
    log(f"SoC ({config.cpu_variant} VexRiscv @ {config.sys_clk_freq / 1e6:.0f} MHz + card)")
    soc_dir = build_soc(config, log=log)
    log(f"firmware ({firmware})")
    image = node_firmware.build(firmware, soc_dir, log=log)
    log(f"cluster model ({config.nodes} node(s), Verilator)")
    model = build_model(config, soc_dir, log=log)
    return Build(config, soc_dir, model, image)


def run(build, run_dir, **harness_kwargs):
    """Run the harness to completion; returns ``(exit_code, run.json contents)``."""
    prepare_run(run_dir, build.soc_dir, build.firmware)
    proc = subprocess.run(harness_command(build.model, run_dir, **harness_kwargs), cwd=run_dir)
    summary_path = Path(run_dir) / "run.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    return proc.returncode, summary
