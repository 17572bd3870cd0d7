"""The Zephyr module (firmware/zephyr), checked without a Zephyr tree.

module.yml, the west manifest, the Kconfig tree (with kconfiglib, the library Zephyr's own
Kconfig tooling is built on), the devicetree bindings against the compatibles the C drivers use,
and the rule that the Zephyr build compiles the portable core from firmware/core and nowhere else.
"""

import re

import kconfiglib
import pytest
import yaml

from numavia.base import regmap
from numavia.base.paths import REPO_ROOT
from numavia.soc import zephyr_overlay

ZEPHYR = REPO_ROOT / "firmware" / "zephyr"
CORE = REPO_ROOT / "firmware" / "core"
BINDINGS = ZEPHYR / "dts" / "bindings"
DRIVERS = ZEPHYR / "drivers" / "numavia"
#: The core's port interface: the only nv_* functions a port defines.
PLATFORM_FUNCTIONS = set(
    re.findall(r"^\w[\w *]*?\b(nv_\w+)\(", (CORE / "include" / "numavia" / "platform.h").read_text(), flags=re.M)
)


def dt_token(compatible):
    """How Zephyr's devicetree macros spell a compatible: lower case, non-alphanumerics as '_'."""
    return re.sub(r"[^a-z0-9]", "_", compatible.lower())


def bindings():
    """{compatible: binding} of every binding with a compatible (include-only files have none)."""
    found = {}
    for path in BINDINGS.rglob("*.yaml"):
        binding = yaml.safe_load(path.read_text())
        if "compatible" in binding:
            assert path.name == f"{binding['compatible']}.yaml", path
            found[binding["compatible"]] = binding
    return found


def module_c_sources():
    return {p: p.read_text() for p in ZEPHYR.rglob("*.c")}


def test_module_yml_is_valid():
    module = yaml.safe_load((ZEPHYR / "zephyr" / "module.yml").read_text())
    assert module["name"] == "numavia"
    assert (ZEPHYR / module["build"]["cmake"] / "CMakeLists.txt").exists()
    assert (ZEPHYR / module["build"]["kconfig"]).is_file()
    assert (ZEPHYR / module["build"]["settings"]["dts_root"] / "dts" / "bindings").is_dir()


def test_west_manifest_pins_a_zephyr_release():
    manifest = yaml.safe_load((ZEPHYR / "west.yml").read_text())["manifest"]
    (zephyr,) = [p for p in manifest["projects"] if p["name"] == "zephyr"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", zephyr["revision"]), "pin a release tag, not a branch"
    assert zephyr["remote"] in {r["name"] for r in manifest["remotes"]}
    assert manifest["self"]["path"]


def test_bindings_name_exactly_the_compatibles_the_drivers_use():
    found = bindings()
    for compatible, binding in found.items():
        assert compatible == compatible.lower() and compatible.startswith("numavia,")
        assert binding["properties"]["reg"]["required"] is True
        assert binding["description"].strip()
    sources = "\n".join(module_c_sources().values())
    driven = set(re.findall(r"^#define DT_DRV_COMPAT (\w+)$", sources, flags=re.M))
    referenced = set(
        re.findall(
            r"(?:DEVICE_DT_GET_ONE|DT_COMPAT_GET_ANY_STATUS_OKAY|DT_NUM_INST_STATUS_OKAY)"
            r"\((numavia_\w+)\)",
            sources,
        )
    )
    tokens = {dt_token(c) for c in found}
    # Every block has a driver; the card node itself is the window the platform port reads.
    assert driven == tokens - {dt_token(zephyr_overlay.CARD_COMPATIBLE)}
    assert referenced <= tokens, referenced - tokens
    # ... and the overlay generator writes exactly these compatibles.
    generated = {c for c, _, _ in zephyr_overlay.BLOCK_NODES.values()} | {zephyr_overlay.CARD_COMPATIBLE}
    assert generated == set(found)


def test_included_bindings_exist():
    names = {p.name for p in BINDINGS.rglob("*.yaml")}
    for path in BINDINGS.rglob("*.yaml"):
        include = yaml.safe_load(path.read_text()).get("include", [])
        for name in [include] if isinstance(include, str) else include:
            assert name == "base.yaml" or name in names, f"{path.name} includes {name}"


def load_kconfig(tmp_path, dt_compatibles, shell, zephyr_intc=False):
    """The module's Kconfig as Zephyr would see it for a devicetree with ``dt_compatibles``.

    Zephyr generates DT_HAS_<compatible>_ENABLED from the devicetree; SHELL and
    VEXRISCV_LITEX_IRQ (its LiteX interrupt driver, which the application turns off) are Zephyr's.
    This wrapper defines them, then sources the module's Kconfig.
    """
    lines = [
        f"config DT_HAS_{dt_token(c).upper()}_ENABLED\n\tdef_bool {'y' if c in dt_compatibles else 'n'}\n"
        for c in bindings()
    ]
    lines.append(f"config SHELL\n\tdef_bool {'y' if shell else 'n'}\n")
    lines.append(f"config VEXRISCV_LITEX_IRQ\n\tdef_bool {'y' if zephyr_intc else 'n'}\n")
    lines.append(f'source "{ZEPHYR / "Kconfig"}"\n')
    wrapper = tmp_path / "Kconfig"
    wrapper.write_text("".join(lines))
    kconf = kconfiglib.Kconfig(str(wrapper), warn=True, warn_to_stderr=False)
    assert not kconf.warnings, kconf.warnings
    return kconf


def enabled(kconf, *names):
    return {name: kconf.syms[name].str_value for name in names}


DRIVER_SYMBOLS = (
    "NUMAVIA",
    "NUMAVIA_CARD_CONTROL",
    "NUMAVIA_RAC",
    "NUMAVIA_LAC",
    "NUMAVIA_RING_LINK",
    "NUMAVIA_VIA",
    "NUMAVIA_VIA_DOORBELLS",
    "NUMAVIA_SHELL",
    "NUMAVIA_LITEX_INTC",
)


def test_kconfig_turns_on_the_drivers_the_devicetree_has(tmp_path):
    everything = set(bindings())
    kconf = load_kconfig(tmp_path, everything, shell=True)
    assert set(enabled(kconf, *DRIVER_SYMBOLS).values()) == {"y"}
    assert kconf.syms["NUMAVIA_VIA_THREAD_STACK_SIZE"].str_value == "1536"
    # The VI table: as many as the ECPIX-5's full card by default, at most the register map's room.
    max_vis = kconf.syms["NUMAVIA_VIA_MAX_VIS"]
    assert max_vis.str_value == "64"
    assert [(int(lo.str_value), int(hi.str_value)) for lo, hi, *_ in max_vis.ranges] == [(1, regmap.VI_CAPACITY)]

    assert enabled(kconf, "NUMAVIA_LITEX_INTC") == {"NUMAVIA_LITEX_INTC": "y"}
    # With Zephyr's own LiteX interrupt driver left on, the module's stays out (two would clash).
    zephyr_intc = load_kconfig(tmp_path, everything, shell=False, zephyr_intc=True)
    assert enabled(zephyr_intc, "NUMAVIA_LITEX_INTC") == {"NUMAVIA_LITEX_INTC": "n"}

    no_via = load_kconfig(tmp_path, everything - {"numavia,via-engine"}, shell=False)
    assert enabled(no_via, "NUMAVIA_VIA", "NUMAVIA_VIA_DOORBELLS", "NUMAVIA_SHELL", "NUMAVIA_RAC") == {
        "NUMAVIA_VIA": "n",
        "NUMAVIA_VIA_DOORBELLS": "n",
        "NUMAVIA_SHELL": "n",
        "NUMAVIA_RAC": "y",
    }

    # A block driver needs the booted card: without card control, none of them builds.
    headless = load_kconfig(tmp_path, everything - {"numavia,card-control"}, shell=True)
    assert set(enabled(headless, *DRIVER_SYMBOLS[1:]).values()) == {"n"}

    no_card = load_kconfig(tmp_path, set(), shell=True)
    assert no_card.syms["NUMAVIA"].str_value == "n"


def test_kconfig_dt_symbols_are_the_binding_compatibles():
    text = "\n".join(p.read_text() for p in ZEPHYR.rglob("Kconfig*"))
    used = set(re.findall(r"DT_HAS_(\w+)_ENABLED", text))
    assert used == {dt_token(c).upper() for c in bindings()}


def test_application_config_names_existing_symbols(tmp_path):
    kconf = load_kconfig(tmp_path, set(bindings()), shell=True)
    for conf in (ZEPHYR / "app").glob("*.conf"):
        for name in re.findall(r"^CONFIG_(NUMAVIA\w*)=", conf.read_text(), flags=re.M):
            assert name in kconf.syms and kconf.syms[name].nodes, f"{conf.name}: CONFIG_{name}"
    assert "CONFIG_NUMAVIA=y" in (ZEPHYR / "app" / "prj.conf").read_text()


def test_driver_cmake_lists_every_driver_source():
    cmake = (DRIVERS / "CMakeLists.txt").read_text()
    listed = set(re.findall(r"(\w+\.c)\b", cmake))
    assert listed == {p.name for p in DRIVERS.glob("*.c")}
    for name in re.findall(r"CONFIG_(\w+)", cmake):
        assert re.search(rf"^\s*(menu)?config {name}$", (DRIVERS / "Kconfig").read_text(), flags=re.M), name


def core_source_list():
    (line,) = [l for l in (CORE / "sources.mk").read_text().splitlines() if l.startswith("NV_CORE_SOURCES")]
    return line.split(":=")[1].split()


def test_bare_metal_and_zephyr_build_the_same_core_sources():
    sources = core_source_list()
    assert sources and all((CORE / s).is_file() for s in sources)
    assert {f"src/{p.name}" for p in (CORE / "src").glob("*.c")} == set(sources)
    # Both builds take the list from sources.mk rather than writing it down again.
    zephyr_cmake = (ZEPHYR / "CMakeLists.txt").read_text()
    assert "sources.mk" in zephyr_cmake and "NV_CORE_SOURCES" in zephyr_cmake
    baremetal = (REPO_ROOT / "firmware" / "baremetal" / "Makefile").read_text()
    assert "sources.mk" in baremetal and "$(NV_CORE_SOURCES)" in baremetal


def defined_functions(text):
    """Names of the C functions defined (not just declared) in ``text``."""
    return set(re.findall(r"^[A-Za-z_][\w \*]*?\b(\w+)\([^;{]*\)\s*\{", text, flags=re.M))


def test_zephyr_sources_copy_no_core_logic():
    core = set()
    for source in core_source_list():
        core |= defined_functions((CORE / source).read_text())
    assert {"nv_boot", "nv_ucode_load", "nv_ucode_verify", "nv_via_poll"} <= core
    assert {"nv_reg_read", "nv_log", "nv_host_read32"} <= PLATFORM_FUNCTIONS
    for path, text in module_c_sources().items():
        mine = defined_functions(text)
        assert not mine & core, f"{path.name} redefines core functions {mine & core}"
        # A port implements the platform interface and nothing else under the core's prefix.
        assert {f for f in mine if f.startswith("nv_")} <= PLATFORM_FUNCTIONS, path.name
        assert not (CORE / "src" / path.name).exists(), f"{path.name} shadows a core source"
    # ... and the Zephyr port implements all of it: the accessors inline in the header the module
    # names as NV_PLATFORM_INLINE, the rest in platform.c.
    inline = defined_functions((ZEPHYR / "include" / "numavia" / "platform_zephyr.h").read_text())
    assert {f for f in inline if f.startswith("nv_")} <= PLATFORM_FUNCTIONS
    assert "NV_PLATFORM_INLINE=<numavia/platform_zephyr.h>" in (ZEPHYR / "CMakeLists.txt").read_text()
    assert PLATFORM_FUNCTIONS <= defined_functions((DRIVERS / "platform.c").read_text()) | inline


def test_zephyr_application_reports_like_the_bare_metal_main():
    # The simulation and the host tools wait for NV_READY_MARKER and read "boot failed: <reason>".
    for main in (ZEPHYR / "app" / "src" / "main.c", REPO_ROOT / "firmware" / "baremetal" / "main.c"):
        text = main.read_text()
        assert 'NV_READY_MARKER " (node %u)\\n"' in text, main
        assert '"numavia: boot failed: %s\\n"' in text, main


@pytest.mark.parametrize("path", sorted(BINDINGS.rglob("*.yaml")), ids=lambda p: p.name)
def test_binding_yaml_parses(path):
    binding = yaml.safe_load(path.read_text())
    assert isinstance(binding.get("properties"), dict)
    for name, spec in binding["properties"].items():
        assert set(spec) <= {"type", "required", "description", "default", "enum", "const"}, name
