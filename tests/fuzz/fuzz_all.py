"""`make fuzz`: every fuzz target for a while, each growing its corpus under build/fuzz/<target>.

    python tests/fuzz/fuzz_all.py [--seconds N] [--targets a,b] [--jobs 1]

Python targets run under atheris (tests/fuzz/run_atheris.py); ``firmware`` is the libFuzzer
target of the firmware core (firmware/tests/fuzz_firmware.c, built with clang). A crash is
reported with its input file and ends the run with status 1: fix it, then keep the input in
tests/fuzz/corpus/<target>/ (or firmware/tests/fuzz_corpus/) as a regression test.

``rtl`` is the random-constrained stimulus of the RTL receivers (tests/support/random_*.py: hostile
frames into the VIA receive engine, hostile symbols into a ring node, random descriptors): their
three tests under pytest with ``NUMAVIA_RTL_FUZZ_SCALE`` sized to ``--seconds`` and a fresh
``NUMAVIA_RTL_FUZZ_SEED``; a failure prints both, which replay it.
"""

import argparse
import hashlib
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import targets  # the script's own folder is on sys.path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def build_firmware_target(out):
    from numavia.base import codegen

    gen = out / "generated"
    codegen.write_all(gen)
    subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(REPO / "firmware/tests"),
            f"BUILD_DIR={out}",
            f"GEN_DIR={gen}",
            str(out / "fuzz_firmware"),
        ],
        check=True,
    )
    return out / "fuzz_firmware"


def command(name, seconds, corpus, artifacts, binary=None):
    options = [f"-max_total_time={seconds}", "-max_len=4096", f"-artifact_prefix={artifacts}/", str(corpus)]
    if name == "firmware":
        return [str(binary)] + options + [str(REPO / "firmware/tests/fuzz_corpus")]
    for data in targets.seeds(name):
        (corpus / f"seed-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
    stored = HERE / "corpus" / name  # only targets that once crashed have stored inputs
    return [sys.executable, str(HERE / "run_atheris.py"), name] + options + ([str(stored)] if stored.is_dir() else [])


#: The RTL stimulus tests (on tests/support/random_*.py) and their CPU seconds at scale 1, together.
RTL_TESTS = (
    "tests/test_via_rx.py::test_hostile_frames_among_legitimate_traffic_are_dropped_counted_and_harmless",
    "tests/test_ring_link.py::test_hostile_symbol_streams_among_legitimate_traffic",
    "tests/test_via_tx.py::test_random_descriptors_complete_by_the_engine_rules_and_touch_only_their_buffers",
)
RTL_SECONDS_AT_SCALE_1 = 50


def run_rtl(seconds):
    """The RTL stimulus scaled to about ``seconds``: ``(ok, summary line, output)``."""
    scale = max(1, seconds // RTL_SECONDS_AT_SCALE_1)
    seed = random.SystemRandom().randrange(1, 1 << 30)
    env = dict(os.environ, NUMAVIA_RTL_FUZZ_SCALE=str(scale), NUMAVIA_RTL_FUZZ_SEED=str(seed))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *RTL_TESTS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = result.stdout.strip().splitlines()
    summary = f"scale {scale}, seed {seed}: {lines[-1].strip('= ') if lines else 'no summary'}"
    if result.returncode:
        summary += (
            f"; replay: NUMAVIA_RTL_FUZZ_SCALE={scale} NUMAVIA_RTL_FUZZ_SEED={seed} "
            f".venv/bin/pytest {' '.join(RTL_TESTS)}"
        )
    return result.returncode == 0, summary, result.stdout + result.stderr


def main(argv=None):
    all_targets = sorted(targets.TARGETS) + ["firmware", "rtl"]
    p = argparse.ArgumentParser(description="Run every fuzz target for a bounded time (make fuzz).")
    p.add_argument("--seconds", type=int, default=60, help="wall time per target (default 60)")
    p.add_argument(
        "--targets",
        default=",".join(all_targets),
        help=f"comma-separated targets (default all: {','.join(all_targets)})",
    )
    p.add_argument("--out", default=str(REPO / "build" / "fuzz"), help="corpus and crash folder (default build/fuzz)")
    args = p.parse_args(argv)
    chosen = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in chosen if t not in all_targets]
    if unknown or args.seconds <= 0:
        p.error(f"unknown target(s) {', '.join(unknown)}" if unknown else "--seconds must be positive")
    out = Path(args.out).resolve()  # make -C runs elsewhere
    binary = build_firmware_target(out) if "firmware" in chosen else None
    crashed = []
    for name in chosen:
        if name == "rtl":
            print(f"fuzz: rtl for about {args.seconds} s", file=sys.stderr, flush=True)
            start = time.monotonic()
            ok, summary, output = run_rtl(args.seconds)
            print(f"  rtl: {summary}; {'ok' if ok else 'FAILED'} ({time.monotonic() - start:.0f} s)")
            if not ok:
                crashed.append(name)
                print(output[-4000:], file=sys.stderr)
            continue
        corpus, artifacts = out / name / "corpus", out / name / "crashes"
        corpus.mkdir(parents=True, exist_ok=True)
        artifacts.mkdir(parents=True, exist_ok=True)
        print(f"fuzz: {name} for {args.seconds} s", file=sys.stderr, flush=True)
        start = time.monotonic()
        result = subprocess.run(command(name, args.seconds, corpus, artifacts, binary), capture_output=True, text=True)
        runs = [line for line in result.stderr.splitlines() if line.startswith("Done ")]
        files = sorted(artifacts.glob("crash-*"))
        status = "CRASH " + ", ".join(map(str, files)) if (result.returncode or files) else "ok"
        print(f"  {name}: {runs[-1] if runs else 'no summary'}; {status} ({time.monotonic() - start:.0f} s)")
        if result.returncode or files:
            crashed.append(name)
            print(result.stderr[-4000:], file=sys.stderr)
    if crashed:
        print(f"fuzz: error: crashes in {', '.join(crashed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
