"""The Zephyr module's C, checked by the host gcc against stand-in Zephyr headers.

A SYNTAX AND CONSTANT CHECK, NOT A ZEPHYR BUILD: no Zephyr tree can be installed here, so
``gcc -fsyntax-only`` reads the drivers, the shell and the application with tests/zephyr_stubs
(Zephyr's names and argument lists, nothing that runs) and devicetree values taken from the overlay
`numavia zephyr-overlay` generates for the real node SoC. What it does catch: C errors, names
missing from the generated numavia_regs.h, wrong types against the core's API, and the drivers'
BUILD_ASSERTs that the devicetree and numavia_regs.h agree on every block's address.
"""

import json
import re
import shutil
import subprocess

import pytest
from devicetree import dtlib

from numavia.base import codegen
from numavia.base.paths import REPO_ROOT
from numavia.soc import zephyr_overlay

ZEPHYR = REPO_ROOT / "firmware" / "zephyr"
STUBS = REPO_ROOT / "tests" / "zephyr_stubs"
#: What the module's CMakeLists.txt defines for every source (numavia/platform.h).
PLATFORM_INLINE = re.search(r"NV_PLATFORM_INLINE=(<[^>]+>)", (ZEPHYR / "CMakeLists.txt").read_text()).group(1)
#: ... and the size of the VIA manager's VI table, from its Kconfig symbol (the macro autoconf.h defines).
MAX_VIS = re.search(r"NV_VIA_MAX_VIS=\$\{(CONFIG_\w+)\}", (ZEPHYR / "CMakeLists.txt").read_text()).group(1)

#: Kconfig values of a build with every driver and the shell (what autoconf.h holds in Zephyr).
AUTOCONF = {
    "CONFIG_NUMAVIA": 1,
    "CONFIG_NUMAVIA_FW_VERSION": '"test"',
    "CONFIG_NUMAVIA_CARD_CONTROL": 1,
    "CONFIG_NUMAVIA_CARD_CONTROL_INIT_PRIORITY": 60,
    "CONFIG_NUMAVIA_BLOCK_INIT_PRIORITY": 61,
    "CONFIG_NUMAVIA_RAC": 1,
    "CONFIG_NUMAVIA_LAC": 1,
    "CONFIG_NUMAVIA_RING_LINK": 1,
    "CONFIG_SHELL": 1,
    "CONFIG_NUMAVIA_SHELL": 1,
    "CONFIG_NUMAVIA_VIA": 1,
    "CONFIG_NUMAVIA_VIA_DOORBELLS": 1,
    "CONFIG_NUMAVIA_VIA_INIT_PRIORITY": 62,
    "CONFIG_NUMAVIA_VIA_MAX_VIS": 64,
    "CONFIG_NUMAVIA_VIA_THREAD_STACK_SIZE": 1536,
    "CONFIG_NUMAVIA_VIA_THREAD_PRIORITY": 7,
    "CONFIG_NUMAVIA_LITEX_INTC": 1,
    "CONFIG_INTC_INIT_PRIORITY": 40,
}

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="host gcc not installed")


def token(compatible):
    return re.sub(r"[^a-z0-9]", "_", compatible)


def stub_devicetree(csr, tmp_path, move=None):
    """numavia_stub_devicetree.h: the overlay's card nodes as STUB_* macros (see zephyr_stubs).

    ``move``: ``(compatible, delta)`` to misplace one block, as a stale overlay would.
    """
    text = zephyr_overlay.overlay(csr)
    dts = tmp_path / "card.dts"
    dts.write_text(
        "/dts-v1/;\n/ { #address-cells = <1>; #size-cells = <1>; soc { #address-cells = <1>; "
        "#size-cells = <1>; ranges; intc0: intc@bc0 { reg = <0xbc0 4>; }; }; };\n" + text[text.index("/ {") :]
    )
    card = dtlib.DT(str(dts)).label2node[zephyr_overlay.CARD_LABEL]
    lines = ["/* Written by tests/test_zephyr_c_syntax.py from the generated overlay. */"]
    card_tok = token(zephyr_overlay.CARD_COMPATIBLE)
    regs = card.props["reg"].to_nums()
    for i, name in enumerate(card.props["reg-names"].to_strings()):
        lines += [
            f"#define STUB_ADDR_{card_tok}_{name} {regs[2 * i]:#x}u",
            f"#define STUB_SIZE_{card_tok}_{name} {regs[2 * i + 1]:#x}u",
        ]
    lines.append(f"#define STUB_COUNT_{card_tok} 1")
    # The board's interrupt controller: its two CSR numbers (riscv32-litex-vexriscv.dtsi).
    lines += ["#define STUB_ADDR_intc0_irq_mask 0xbc0", "#define STUB_ADDR_intc0_irq_pending 0xfc0"]
    for node in card.nodes.values():
        tok = token(node.props["compatible"].to_string())
        addr = node.props["reg"].to_nums()[0] + (move[1] if move and move[0] == tok else 0)
        lines += [
            f"#define STUB_COUNT_{tok} 1",
            f"#define STUB_ADDR_{tok} {addr:#x}u",
            f"extern const struct device stub_device_{tok};",
        ]
        if "interrupts" in node.props:
            irq, priority = node.props["interrupts"].to_nums()
            lines += [f"#define STUB_IRQN_{tok} {irq}", f"#define STUB_IRQ_{tok}_priority {priority}"]
        if "event-counters" in node.props:
            names = node.props["event-counters"].to_strings()
            lines += [
                f"#define STUB_HAS_{tok}_event_counters 1",
                f"#define STUB_HAS_{tok}_event_counters_offset 1",
                f"#define STUB_PROP_{tok}_event_counters {{{', '.join(json.dumps(n) for n in names)}}}",
                f"#define STUB_LEN_{tok}_event_counters {len(names)}",
                f"#define STUB_PROP_{tok}_event_counters_offset {node.props['event-counters-offset'].to_num()}",
            ]
        else:
            lines += [f"#define STUB_HAS_{tok}_event_counters 0", f"#define STUB_HAS_{tok}_event_counters_offset 0"]
    (tmp_path / "numavia_stub_devicetree.h").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def csr():
    from numavia.soc import sim

    return json.loads((sim.build_soc(sim.SimConfig(), log=lambda m: None) / "csr.json").read_text())


@pytest.fixture
def compile_c(tmp_path):
    generated = tmp_path / "generated"
    codegen.write_all(generated)

    def run(source, without=()):
        (tmp_path / "autoconf.h").write_text(
            "".join(f"#define {k} {v}\n" for k, v in AUTOCONF.items() if k not in without)
        )
        cmd = [
            "gcc",
            "-fsyntax-only",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-unused-parameter",
            "-include",
            str(tmp_path / "autoconf.h"),
            f"-DNV_PLATFORM_INLINE={PLATFORM_INLINE}",
            f"-DNV_VIA_MAX_VIS={MAX_VIS}",
            f"-I{STUBS}",
            f"-I{tmp_path}",
            f"-I{ZEPHYR / 'include'}",
            f"-I{REPO_ROOT / 'firmware/core/include'}",
            f"-I{generated}",
            f"-I{ZEPHYR / 'drivers/numavia'}",
            str(source),
        ]
        return subprocess.run(cmd, capture_output=True, text=True)

    return run


def module_sources():
    """The drivers, the application, and the portable core as the module builds it (with the
    port's inline accessors)."""
    core = REPO_ROOT / "firmware" / "core"
    names = re.search(r"^NV_CORE_SOURCES\s*:=\s*(.*)$", (core / "sources.mk").read_text(), re.M).group(1).split()
    return (
        sorted((ZEPHYR / "drivers" / "numavia").glob("*.c"))
        + [ZEPHYR / "app" / "src" / "main.c"]
        + [core / name for name in names]
    )


@pytest.mark.parametrize("source", module_sources(), ids=lambda p: p.name)
def test_module_c_compiles_against_the_stand_in_headers(source, csr, compile_c, tmp_path):
    stub_devicetree(csr, tmp_path)
    result = compile_c(source)
    assert result.returncode == 0, result.stderr


def test_a_block_the_devicetree_misplaces_does_not_build(csr, compile_c, tmp_path):
    stub_devicetree(csr, tmp_path, move=("numavia_remote_access_controller", 0x100))
    result = compile_c(ZEPHYR / "drivers" / "numavia" / "remote_access_controller.c")
    assert result.returncode != 0
    assert "static assertion failed" in result.stderr and "disagree on a Numavia block" in result.stderr


def test_the_via_driver_does_not_build_without_an_interrupt_driver_that_serves_the_card(csr, compile_c, tmp_path):
    stub_devicetree(csr, tmp_path)
    result = compile_c(ZEPHYR / "drivers" / "numavia" / "via_engine.c", without={"CONFIG_NUMAVIA_LITEX_INTC"})
    assert result.returncode != 0 and "CONFIG_NUMAVIA_LITEX_INTC" in result.stderr
