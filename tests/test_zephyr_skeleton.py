"""The Zephyr module and application, checked without a Zephyr tree."""

import os
import re
import subprocess

import kconfiglib
import yaml

from numavia.buildcache import REPO_ROOT

ZEPHYR = REPO_ROOT / "firmware" / "zephyr"


def test_entry_point_explains_missing_zephyr_tree():
    env = {k: v for k, v in os.environ.items() if k != "ZEPHYR_BASE"}
    env["PATH"] = "/usr/bin:/bin"   # no west
    result = subprocess.run(["bash", str(ZEPHYR / "build.sh")], env=env, capture_output=True, text=True)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Zephyr tree found" in lines[0]


def test_module_yml_is_valid():
    module = yaml.safe_load((ZEPHYR / "zephyr" / "module.yml").read_text())
    assert module["name"] == "numavia"
    assert (ZEPHYR / module["build"]["cmake"] / "CMakeLists.txt").exists()
    assert (ZEPHYR / module["build"]["kconfig"]).exists()


def test_kconfig_parses_and_defines_numavia(monkeypatch):
    monkeypatch.chdir(ZEPHYR)
    kconf = kconfiglib.Kconfig(str(ZEPHYR / "Kconfig"), warn=False)
    assert "NUMAVIA" in kconf.syms and "NUMAVIA_GENERATED_DIR" in kconf.syms


def test_binding_names_the_compatible_the_app_uses():
    binding = yaml.safe_load((ZEPHYR / "dts/bindings/numavia,card.yaml").read_text())
    platform = (ZEPHYR / "app/src/platform_zephyr.c").read_text()
    dt_token = re.sub(r"[^a-z0-9]", "_", binding["compatible"].lower())
    assert f"DT_INST(0, {dt_token})" in platform


def test_zephyr_build_uses_the_shared_core_source_list():
    cmake = (ZEPHYR / "CMakeLists.txt").read_text()
    assert "sources.mk" in cmake and "NV_CORE_SOURCES" in cmake
    # No core logic is compiled from anywhere but firmware/core.
    app_sources = {p.name for p in (ZEPHYR / "app" / "src").glob("*.c")}
    core_sources = {p.name for p in (REPO_ROOT / "firmware" / "core" / "src").glob("*.c")}
    assert not app_sources & core_sources
