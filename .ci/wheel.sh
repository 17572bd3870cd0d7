#!/usr/bin/env bash
# The package as a user installs it: build the wheel, install it with its pinned dependencies in a
# fresh virtual environment, and run `numavia --help` and a 2-node simulation from there, in an
# empty folder so nothing of the checkout can be imported or read. The build folder is the
# checkout's (NUMAVIA_BUILD_DIR, else build/): the installed package computes the same cache keys
# as the checkout, so the test run's SoC, firmware and node model are reused, and a rebuild fails.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
VENV=${VENV:-$repo/.venv}   # the checkout's environment (make setup): its pip builds the wheel
export NUMAVIA_BUILD_DIR=${NUMAVIA_BUILD_DIR:-$repo/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "wheel: $*" >&2; exit 1; }
started=$SECONDS

# From a copy of the checkout's files (tracked, or new and not ignored): the wheel cannot pick up
# stray files, and setuptools' own build/ stays out of the checkout's build cache.
mkdir "$work/src"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$repo" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$work/src"
echo "wheel: building the wheel"
"$VENV/bin/python" -m pip wheel --no-deps --quiet -w "$work/dist" "$work/src" >"$work/wheel.log" 2>&1 \
    || fail "building the wheel failed: $(tail -n1 "$work/wheel.log")"
wheel=$(echo "$work"/dist/numavia-*.whl)

echo "wheel: installing $(basename "$wheel") in a fresh virtual environment"
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet -c "$repo/requirements.lock" "$wheel" >"$work/install.log" 2>&1 \
    || fail "pip could not install the wheel: $(grep -m1 -E 'ERROR|error:' "$work/install.log" || tail -n1 "$work/install.log")"

mkdir "$work/run" && cd "$work/run"
"$work/venv/bin/numavia" --help >/dev/null || fail "numavia --help failed"
echo "wheel: numavia sim --nodes 2 from the installed package (build folder $NUMAVIA_BUILD_DIR)"
"$work/venv/bin/numavia" sim --nodes 2 --quiet --out "$work/run/sim" 2>&1 | tee "$work/sim.log" \
    || fail "numavia sim --nodes 2 failed"
if grep -q "building " "$work/sim.log"; then
    fail "the installed package rebuilt $(grep -m1 -o 'building .*' "$work/sim.log" | cut -d' ' -f2): its cache keys differ from the checkout's"
fi
echo "wheel: done in $((SECONDS - started)) s"
