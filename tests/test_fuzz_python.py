"""Hostile input to the host-side decoders: SCI packets, VIA frames, descriptors, microcode
(source and images), trace files, command-line arguments (targets in tests/fuzz/targets.py).

Each target must accept an input or refuse it with its format's own one-line error. CI runs
every target coverage-guided (atheris) for a bounded number of inputs from a fixed seed, and
replays the stored corpus (seeds, and inputs that once crashed a decoder); `make fuzz` runs
them for longer."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from fuzz import targets

FUZZ_DIR = Path(__file__).parent / "fuzz"

#: Inputs per target in CI: a few seconds each on one core (the CLI parser is slow to build).
CI_RUNS = {
    "sci_packet": 4000,
    "via_frame": 30000,
    "via_descriptor": 20000,
    "microcode_assemble": 30000,
    "microcode_words": 15000,
    "trace": 15000,
    "cli": 400,
}


def corpus(name):
    return sorted((FUZZ_DIR / "corpus" / name).glob("*"))


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_corpus_and_seeds_are_accepted_or_refused_cleanly(name):
    inputs = targets.seeds(name) + [p.read_bytes() for p in corpus(name)]
    assert inputs
    for data in inputs:
        targets.TARGETS[name](data)


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_coverage_guided_fuzzing_finds_no_crash(name, tmp_path):
    work = tmp_path / "corpus"
    work.mkdir()
    for data in targets.seeds(name):
        (work / hashlib.sha1(data).hexdigest()).write_bytes(data)
    cmd = [
        sys.executable,
        str(FUZZ_DIR / "run_atheris.py"),
        name,
        f"-runs={CI_RUNS[name]}",
        "-seed=1",
        "-max_len=4096",
        "-max_total_time=120",
        f"-artifact_prefix={tmp_path}/",
        str(work),
    ]
    stored = FUZZ_DIR / "corpus" / name
    if stored.is_dir():  # only targets that once crashed have stored inputs (git keeps no empty folder)
        cmd.append(str(stored))
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    crashes = sorted(p.name for p in tmp_path.glob("crash-*"))
    assert result.returncode == 0 and not crashes, (
        f"{name}: {crashes} (keep it in tests/fuzz/corpus/{name}/ once fixed)\n{result.stderr[-3000:]}"
    )
    assert "Done" in result.stderr  # libFuzzer ran to its input budget


def test_trace_with_a_zero_word_access_is_refused():
    """Found by the trace fuzzer: the reader let through accesses the writer (and the C++ player's
    contract) refuse."""
    from numavia.base import trace

    with pytest.raises(trace.TraceError, match="record 0 is an access of 0 words"):
        trace.read_trace(FUZZ_DIR / "corpus" / "trace" / "crash-words-zero")


def test_runner_replays_single_inputs_and_refuses_unknown_targets(tmp_path):
    """`run_atheris.py TARGET FILE` replays one input (how a stored crash is reproduced)."""
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"NVTR")  # refused cleanly by the reader: not a crash
    ok = subprocess.run(
        [sys.executable, str(FUZZ_DIR / "run_atheris.py"), "trace", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    nope = subprocess.run(
        [sys.executable, str(FUZZ_DIR / "run_atheris.py"), "no-such-target"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nope.returncode != 0 and "give a target" in nope.stderr
