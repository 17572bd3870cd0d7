#!/usr/bin/env bash
# Build the Zephyr application for the card: needs a Zephyr tree (ZEPHYR_BASE) or a west workspace.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [ -z "${ZEPHYR_BASE:-}" ]; then
    if command -v west >/dev/null 2>&1 && topdir=$(west topdir 2>/dev/null); then
        export ZEPHYR_BASE="$topdir/zephyr"
    else
        echo "numavia: no Zephyr tree found: set ZEPHYR_BASE or run inside a west workspace (see firmware/zephyr/README.md)" >&2
        exit 1
    fi
fi
[ -d "$ZEPHYR_BASE" ] || { echo "numavia: ZEPHYR_BASE=$ZEPHYR_BASE is not a folder" >&2; exit 1; }
command -v west >/dev/null || { echo "numavia: west not found (pip install west)" >&2; exit 1; }

out="$repo/build/zephyr"
mkdir -p "$out/generated"
"$repo/.venv/bin/python" -c "from numavia import codegen; codegen.write_all('$out/generated')"
west build -p auto -b litex_vexriscv -d "$out/app" "$here/app" -- \
    -DNUMAVIA_GENERATED_DIR="$out/generated" "$@"
