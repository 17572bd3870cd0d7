"""Firmware image size and boot time: for each firmware a node can run (bare metal, Zephyr,
Zephyr with the shell), the image's bytes (code and read-only data, initialised data, zeroed data,
as the toolchain's ``size`` counts its ELF) and the cycles from reset to the ready line on a ring,
from the harness's cycle count at the line."""

import subprocess

from numavia.base.errors import NumaviaError
from numavia.bench import results
from numavia.soc import sim

MAX_CYCLES = 20_000_000  # a node that is not ready by then is reported, not waited for
SIZE = "riscv64-unknown-elf-size"


def elf_sizes(elf):
    """``{"text", "data", "bss"}`` bytes of an ELF (Berkeley format of binutils' size)."""
    out = subprocess.run([SIZE, str(elf)], capture_output=True, text=True)
    if out.returncode:
        raise NumaviaError(f"{SIZE} {elf}: {out.stderr.strip() or 'failed'}")
    text, data, bss = (int(v) for v in out.stdout.splitlines()[1].split()[:3])
    return {"text": text, "data": data, "bss": bss}


def measure(choices, *, nodes=2, log=print, run_root, spread=None):
    rows = []
    for done, choice in enumerate(choices, 1):
        build = sim.build_all(sim.SimConfig(nodes=nodes), log=log, firmware=choice)
        image = build.firmware
        results.progress(log, done, len(choices), f"{choice}: booting {nodes} nodes")
        code, summary = sim.run(
            build, run_root / choice.replace("=", "-").replace("/", "_"), spread, quiet=True, max_cycles=MAX_CYCLES
        )
        ready = summary["marker_cycles"] if summary else [None] * nodes
        if code or None in ready:
            raise NumaviaError(f"{choice}: not every node was ready after {MAX_CYCLES:,} cycles (logs in {run_root})")
        rows.append(
            {
                "firmware": choice,
                "image": image.name,
                "runs_from": image.region,
                "image_bytes": image.path.stat().st_size,
                **elf_sizes(image.path.with_suffix(".elf")),
                "ready_cycles": max(ready),
                "ready_cycles_per_node": ready,
            }
        )
    return {"nodes": nodes, "clock_mhz": build.config.sys_clk_freq / 1e6, "rows": rows}


def report(figures, out):
    mhz = figures["clock_mhz"]
    rows = [
        [
            r["firmware"],
            r["runs_from"],
            f"{r['image_bytes']:,}",
            f"{r['text']:,}",
            f"{r['data']:,}",
            f"{r['bss']:,}",
            f"{r['ready_cycles']:,}",
            f"{r['ready_cycles'] / mhz:,.0f}",
        ]
        for r in figures["rows"]
    ]
    return results.write(
        out,
        "boot",
        title=f"Firmware image size and boot time ({figures['nodes']}-node ring)",
        headers=["firmware", "runs from", "image bytes", "text", "data", "bss", "ready at cycle", "us"],
        rows=rows,
        figures=figures,
        config={"nodes": figures["nodes"], "clock_mhz": mhz},
        notes=[
            "Image bytes: the raw image loaded at reset (the ROM's, or main RAM's for Zephyr, whose "
            "ROM holds only a jump to it); text, data, bss: the ELF's, as `size` counts them.",
            "Ready: the cycle at which the last node printed its ready line, counted from reset by the "
            "simulation harness (every node boots at once).",
        ],
    )
