"""Build the bare-metal firmware for a generated SoC (cached by sources, SoC and toolchain)."""

import json
import shutil
import subprocess
from pathlib import Path

import litex

from numavia import __version__, buildcache, codegen
from numavia.errors import NumaviaError
from numavia.gateware import regmap

FIRMWARE_DIR = buildcache.REPO_ROOT / "firmware"
CROSS_GCC = "riscv64-unknown-elf-gcc"
MAIN_RAM = "main_ram"   # .data, .bss and the stack live here; code runs from the ROM


class FirmwareError(NumaviaError):
    pass


def litex_include_dirs(cpu_type="vexriscv"):
    """LiteX's software headers: hw/common.h, and the CPU's system.h that csr.h includes."""
    soc = Path(litex.__file__).parent / "soc"
    return [soc / "software" / "include", soc / "cores" / "cpu" / cpu_type]


def _gcc_version():
    out = subprocess.run([CROSS_GCC, "--version"], capture_output=True, text=True)
    return out.stdout.splitlines()[0] if out.returncode == 0 else None


def build_firmware(soc_dir, log=print):
    """Path of ``firmware.bin`` for the SoC generated in ``soc_dir``."""
    if shutil.which(CROSS_GCC) is None:
        raise FirmwareError(f"{CROSS_GCC} not found: run `make setup` (Debian gcc-riscv64-unknown-elf)")
    sources = (buildcache.source_files(FIRMWARE_DIR / "core", ("*.c", "*.h", "*.mk")) +
               buildcache.source_files(FIRMWARE_DIR / "baremetal", ("*.c", "*.h", "*.S", "Makefile")) +
               [Path(regmap.__file__), *codegen.SOURCES] +
               buildcache.source_files(Path(regmap.__file__).parent / "microcode", ("*.py", "*.uasm")))
    key = buildcache.digest(sources, params={"soc": Path(soc_dir).name, "version": __version__,
                                             "gcc": _gcc_version()})

    def produce(folder):
        generated = folder / "generated"
        codegen.write_all(generated)
        mems = json.loads((Path(soc_dir) / "csr.json").read_text())["memories"]
        cmd = ["make", "-C", str(FIRMWARE_DIR / "baremetal"), "--no-print-directory",
               f"BUILD_DIR={folder}", f"SOC_DIR={soc_dir}", f"GEN_DIR={generated}",
               f"LITEX_INC={' '.join(map(str, litex_include_dirs()))}", f"FW_VERSION={__version__}",
               f"ROM_BASE={mems['rom']['base']:#x}", f"ROM_SIZE={mems['rom']['size']:#x}",
               f"RAM_BASE={mems[MAIN_RAM]['base']:#x}", f"RAM_SIZE={mems[MAIN_RAM]['size']:#x}"]
        result = subprocess.run(cmd, capture_output=True, text=True)
        (folder / "build.log").write_text(result.stdout + result.stderr)
        if result.returncode:
            errors = [l for l in result.stderr.splitlines() if "error" in l] or result.stderr.splitlines()
            raise FirmwareError(f"firmware build failed: {errors[0] if errors else 'make failed'}")

    return buildcache.cached("firmware", key, produce, log=log) / "firmware.bin"
