#!/usr/bin/env bash
# One-command set-up: Debian packages + a pinned Python virtual environment.
# Idempotent: a second run checks, finds everything in place, and changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
DEBIAN_PACKAGES=(
    build-essential cmake ninja-build git
    verilator iverilog
    gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf
    libevent-dev libjson-c-dev zlib1g-dev
    openfpgaloader
    clang libclang-rt-14-dev clang-format
    openmpi-bin libopenmpi-dev
)

fail() { echo "setup: $*" >&2; exit 1; }

# --- Debian packages --------------------------------------------------------
missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null || fail "apt-get update failed (no network or no Debian mirror?)"
    for p in "${missing[@]}"; do
        apt-cache show "$p" >/dev/null 2>&1 || fail "Debian package '$p' is not available from the configured mirrors"
    done
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || fail "apt-get install failed for: ${missing[*]}"
else
    echo "setup: Debian packages present"
fi

# --- Python virtual environment ----------------------------------------------
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
    || fail "Python 3.11 is required ($PYTHON is $("$PYTHON" -V 2>&1))"
[ -x "$VENV/bin/python" ] || { echo "setup: creating $VENV"; "$PYTHON" -m venv "$VENV" || fail "python3 -m venv failed (install python3-venv)"; }

stamp="$VENV/.numavia-setup"
want=$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing pinned Python packages into $VENV"
    log="$VENV/setup-pip.log"
    "$VENV/bin/pip" install --disable-pip-version-check -c requirements.lock -e '.[dev]' >"$log" 2>&1 \
        || fail "pip could not install the pinned packages: $(grep -m1 -E 'ERROR|error:' "$log" || tail -n1 "$log") (log: $log)"
    echo "$want" > "$stamp"
else
    echo "setup: Python environment up to date"
fi

# --- Toolchain sanity ----------------------------------------------------------
for tool in verilator riscv64-unknown-elf-gcc iverilog clang clang-format; do
    command -v "$tool" >/dev/null || fail "$tool not found after installation"
done
"$VENV/bin/numavia" --version >/dev/null || fail "the numavia command does not run"
echo "setup: done ($VENV/bin/numavia is ready)"
