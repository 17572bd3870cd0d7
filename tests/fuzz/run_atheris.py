"""Run one fuzz target of ``targets.py`` under atheris (libFuzzer for Python).

    python tests/fuzz/run_atheris.py TARGET [libFuzzer options...] [CORPUS_DIR...]

The target's modules are imported under atheris' instrumentation so the search is guided by
coverage of the decoders. libFuzzer's options pass through, e.g. ``-runs=20000``,
``-max_total_time=60``, ``-seed=1``, ``-artifact_prefix=DIR/``. A crash (any exception the
target does not expect) stops the run with exit status 1 and writes the input as
``crash-<sha1>``: add it to ``tests/fuzz/corpus/<target>/`` once fixed, as a regression test.
"""

import sys

import atheris

with atheris.instrument_imports(include=["numavia", "targets"]):
    import targets


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in targets.TARGETS:
        sys.exit(f"run_atheris: give a target: {', '.join(targets.TARGETS)}")
    target = targets.TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0]] + sys.argv[2:], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
