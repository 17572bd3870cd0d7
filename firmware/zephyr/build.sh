#!/usr/bin/env bash
# Build the card firmware as a Zephyr application for the node SoC: board litex_vexriscv plus a
# devicetree overlay generated from the SoC's csr.json (`numavia zephyr-overlay`).
# Needs a Zephyr tree: ZEPHYR_BASE, or a west workspace (see firmware/zephyr/README.md).
#
#   build.sh [--shell] [--out DIR] [-- extra cmake arguments]
#
#   --shell                  add the `numavia` shell (app/shell.conf)
#   --out DIR                build folder (default build/zephyr, or build/zephyr-shell with --shell)
#   NUMAVIA_CSR_JSON=<file>  the SoC's csr.json (default: the simulated node SoC, generated and cached)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

extra_conf=()
out=""
variant=zephyr
while [ $# -gt 0 ]; do
    case "$1" in
        --shell) extra_conf+=("$here/app/shell.conf"); variant=zephyr-shell; shift ;;
        --out) [ $# -ge 2 ] || { echo "numavia: --out needs a folder" >&2; exit 2; }; out=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "numavia: unknown option $1 (build.sh [--shell] [--out DIR] [-- cmake arguments])" >&2; exit 2 ;;
    esac
done

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
# The Python environment numavia runs in: the caller's (`numavia` sets it), else the checkout's.
python=${NUMAVIA_PYTHON:-$repo/.venv/bin/python}
numavia="$(dirname "$python")/numavia"
[ -x "$numavia" ] || { echo "numavia: $numavia not found: run make setup" >&2; exit 1; }

out=${out:-"${NUMAVIA_BUILD_DIR:-$repo/build}/$variant"}
mkdir -p "$out/generated"
# Everything generated comes from this checkout: C headers and microcode from gateware/, the
# overlay from the SoC's csr.json and the register map, for the board of this Zephyr tree.
"$python" -c "from numavia.base import codegen; codegen.write_all('$out/generated')"
"$numavia" zephyr-overlay ${NUMAVIA_CSR_JSON:+--csr-json "$NUMAVIA_CSR_JSON"} --zephyr-base "$ZEPHYR_BASE" \
    --out "$out/numavia_node.overlay" --conf "$out/numavia_node.conf"
extra_conf=("$out/numavia_node.conf" "${extra_conf[@]}")
version=$("$numavia" --version | awk '{print $NF}')

west build -p auto -b litex_vexriscv -d "$out/app" "$here/app" -- \
    -DNUMAVIA_GENERATED_DIR="$out/generated" \
    -DEXTRA_DTC_OVERLAY_FILE="$out/numavia_node.overlay" \
    -DEXTRA_CONF_FILE="$(IFS=';'; echo "${extra_conf[*]}")" \
    -DCONFIG_NUMAVIA_FW_VERSION=\""$version"\" "$@"
