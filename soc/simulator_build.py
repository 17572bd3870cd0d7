"""Building a ring simulator in two cached stages, so that each is rebuilt only when its own
inputs change:

1. ``verilated/<key>``: the model, Verilog turned into C++ and compiled into ``obj_dir``
   (``V<top>__ALL.a`` and Verilator's runtime objects). Keyed by the Verilog and the tools: minutes
   on 2 cores, and only when the gateware or the SoC changes.
2. ``simulator/<key>``: a harness main (``soc/verilator/*_main.cpp``) with its generated headers,
   compiled and linked against a model: seconds, whenever the harness changes. The MPI build of a
   simulator is the same main compiled with ``mpicxx`` (``simulator-mpi/<key>``).
"""

import json
import os
import subprocess
from pathlib import Path

from numavia.base import buildcache, paths
from numavia.base.errors import NumaviaError

HARNESS_DIR = paths.verilator_dir()
VERILATOR_FLAGS = [
    "--cc",
    "-O3",
    "--x-assign",
    "fast",
    "--x-initial",
    "fast",
    "--noassert",
    "-Wno-fatal",
    "-Wno-lint",
    "-Wno-style",
    "-Wno-UNOPTFLAT",
    "-Wno-MULTIDRIVEN",
]
CXX_FLAGS = ["-O2", "-std=gnu++17"]
RUNTIME_OBJECTS = ("verilated.o", "verilated_threads.o")


class BuildError(NumaviaError):
    """A simulator build step failed; the message has the first error and the log's path."""


def tool_version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def verilator_include():
    root = tool_version(["verilator", "--getenv", "VERILATOR_ROOT"]) or "/usr/share/verilator"
    return Path(root) / "include"


def harness_sources():
    return buildcache.source_files(HARNESS_DIR, ("*.cpp", "*.hpp", "*.h"))


def _run(cmd, log_path, what, cwd=None):
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    Path(log_path).write_text(" ".join(map(str, cmd)) + "\n" + result.stdout + result.stderr)
    if result.returncode:
        lines = (result.stderr + result.stdout).splitlines()
        errors = [l for l in lines if "error:" in l] or [l for l in lines if l.startswith("%Error")]
        raise BuildError(f"{what} failed: {errors[0] if errors else 'see the log'} (log: {log_path})")


def verilate_model(top, verilog, generated, *, log=print, jobs=None, note=""):
    """The folder of the compiled model ``top`` of the Verilog files ``verilog`` and the
    ``generated`` ones ({name: text}, e.g. the top module's own)."""
    key = buildcache.digest(
        verilog,
        params={
            "top": top,
            "generated": generated,
            "flags": VERILATOR_FLAGS,
            "verilator": tool_version(["verilator", "--version"]),
            "cxx": CXX_FLAGS,
        },
    )

    def produce(folder):
        for name, text in generated.items():
            (folder / name).write_text(text)
        obj_dir = folder / "obj_dir"
        log(f"verilating {top}{note} (a few minutes on 2 cores)")
        _run(
            [
                "verilator",
                *VERILATOR_FLAGS,
                "--top-module",
                top,
                "--Mdir",
                str(obj_dir),
                "-CFLAGS",
                " ".join(CXX_FLAGS),
                *[str(folder / n) for n in generated],
                *map(str, verilog),
            ],
            folder / "verilator.log",
            f"Verilator on {top}",
        )
        _run(
            ["make", "-j", str(jobs or os.cpu_count() or 2), "-f", f"V{top}.mk", f"V{top}__ALL.a", *RUNTIME_OBJECTS],
            folder / "make.log",
            f"compiling the model {top}",
            cwd=obj_dir,
        )

    return buildcache.cached("verilated", key, produce, log=log)


def link_simulator(model, top, main, headers, *, mpi=False, log=print):
    """Path of the simulator: harness ``main`` (a file in soc/verilator) with the generated
    ``headers`` ({name: text}), linked against the model folder ``model`` of ``top``."""
    compiler = "mpicxx" if mpi else "g++"
    key = buildcache.digest(
        harness_sources(),
        params={
            "model": model.name,
            "top": top,
            "main": main,
            "headers": headers,
            "mpi": mpi,
            "cxx": CXX_FLAGS,
            "compiler": tool_version([compiler, "--version"]),
        },
    )

    def produce(folder):
        for name, text in headers.items():
            (folder / name).write_text(text)
        obj_dir = model / "obj_dir"
        include = [
            f"-I{p}" for p in (folder, HARNESS_DIR, obj_dir, verilator_include(), verilator_include() / "vltstd")
        ]
        defines = ["-DVM_COVERAGE=0", "-DVM_SC=0", "-DVM_TRACE=0", "-DVM_TRACE_FST=0", "-DVM_TRACE_VCD=0"]
        if mpi:
            defines.append("-DNV_WITH_MPI")
        objects = [str(obj_dir / o) for o in RUNTIME_OBJECTS] + [str(obj_dir / f"V{top}__ALL.a")]
        log(f"compiling the simulator ({main}{', MPI' if mpi else ''})")
        _run(
            [
                compiler,
                *CXX_FLAGS,
                *defines,
                *include,
                str(HARNESS_DIR / main),
                *objects,
                "-o",
                str(folder / f"V{top}"),
                "-pthread",
                "-latomic",
            ],
            folder / "build.log",
            f"compiling {main}",
        )
        (folder / "simulator.json").write_text(json.dumps({"model": str(model), "top": top, "main": main}))

    return buildcache.cached("simulator-mpi" if mpi else "simulator", key, produce, log=log) / f"V{top}"


def mpi_variant(binary, log=print):
    """The MPI build of the simulator ``binary`` (same main, headers and model)."""
    folder = Path(binary).parent
    meta = json.loads((folder / "simulator.json").read_text())
    headers = {p.name: p.read_text() for p in folder.glob("*.h")}
    return link_simulator(Path(meta["model"]), meta["top"], meta["main"], headers, mpi=True, log=log)


def build_seconds(binary):
    """How long the model behind the simulator ``binary`` took to build, or None."""
    meta = json.loads((Path(binary).parent / "simulator.json").read_text())
    return buildcache.build_seconds(meta["model"])
