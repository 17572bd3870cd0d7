"""The node firmware: the bare-metal build (cached by sources, SoC and toolchain), the Zephyr
application (built against the user's Zephyr tree, cached likewise, or given as a file), and what
each puts in the node's memories at reset."""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import litex

from numavia.base import buildcache, codegen, paths, regmap
from numavia.base.errors import NumaviaError
from numavia.base.version import __version__

from . import zephyr_overlay
from .card_soc import VIA_VIS_CONSTANT

FIRMWARE_DIR = paths.firmware_dir()
CROSS_GCC = "riscv64-unknown-elf-gcc"
MAIN_RAM = "main_ram"  # .data, .bss and the stack live here; code runs from the ROM


class FirmwareError(NumaviaError):
    pass


def litex_include_dirs(cpu_type: str = "vexriscv") -> list[Path]:
    """LiteX's software headers: hw/common.h, and the CPU's system.h that csr.h includes."""
    soc = Path(litex.__file__).parent / "soc"
    return [soc / "software" / "include", soc / "cores" / "cpu" / cpu_type]


def _gcc_version() -> str | None:
    out = subprocess.run([CROSS_GCC, "--version"], capture_output=True, text=True)
    return out.stdout.splitlines()[0] if out.returncode == 0 else None


def bare_metal_sources() -> list[Path]:
    """The files the bare-metal firmware is made from (its cache key's inputs)."""
    return (
        buildcache.source_files(FIRMWARE_DIR / "core", ("*.c", "*.h", "*.mk"))
        + buildcache.source_files(FIRMWARE_DIR / "baremetal", ("*.c", "*.h", "*.S", "Makefile"))
        + [Path(regmap.__file__), *codegen.SOURCES]
        + buildcache.source_files(Path(regmap.__file__).parent / "microcode", ("*.py", "*.uasm"))
    )


def build_firmware(soc_dir: str | os.PathLike[str], log: Callable[[str], object] = print) -> Path:
    """Path of ``firmware.bin`` for the SoC generated in ``soc_dir``."""
    if shutil.which(CROSS_GCC) is None:
        raise FirmwareError(f"{CROSS_GCC} not found: run `make setup` (Debian gcc-riscv64-unknown-elf)")
    key = buildcache.digest(
        bare_metal_sources(), params={"soc": Path(soc_dir).name, "version": __version__, "gcc": _gcc_version()}
    )

    def produce(folder: Path) -> None:
        generated = folder / "generated"
        codegen.write_all(generated)
        csr = json.loads((Path(soc_dir) / "csr.json").read_text())
        mems = csr["memories"]
        cmd = [
            "make",
            "-C",
            str(FIRMWARE_DIR / "baremetal"),
            "--no-print-directory",
            f"BUILD_DIR={folder}",
            f"SOC_DIR={soc_dir}",
            f"GEN_DIR={generated}",
            f"LITEX_INC={' '.join(map(str, litex_include_dirs()))}",
            f"FW_VERSION={__version__}",
            f"ROM_BASE={mems['rom']['base']:#x}",
            f"ROM_SIZE={mems['rom']['size']:#x}",
            f"RAM_BASE={mems[MAIN_RAM]['base']:#x}",
            f"RAM_SIZE={mems[MAIN_RAM]['size']:#x}",
        ]
        via_vis = csr["constants"].get(VIA_VIS_CONSTANT.lower())
        if via_vis is not None:  # an SoC from before the constant: the firmware's default table
            cmd.append(f"VIA_VIS={via_vis}")
        result = subprocess.run(cmd, capture_output=True, text=True)
        (folder / "build.log").write_text(result.stdout + result.stderr)
        if result.returncode:
            raise FirmwareError(f"firmware build failed: {_build_error(result.stderr)}")

    return buildcache.cached("firmware", key, produce, log=log) / "firmware.bin"


# --- Which firmware a node runs ------------------------------------------------------------------

BARE_METAL = "bare-metal"
ZEPHYR = "zephyr"  # the Zephyr application without the shell
ZEPHYR_SHELL = "zephyr-shell"  # ... with the `numavia` shell on the console
CHOICES = (BARE_METAL, ZEPHYR, ZEPHYR_SHELL)
ZEPHYR_DIR = FIRMWARE_DIR / "zephyr"
ROM = "rom"


@dataclass(frozen=True)
class Image:
    """A firmware image and the memory it runs from: the bare-metal build from the ROM, a Zephyr
    image (linked for ``litex_vexriscv``) from main RAM, which the ROM then only jumps to."""

    kind: str
    path: Path  # the raw binary
    region: str  # ROM or MAIN_RAM

    @property
    def name(self) -> str:
        """What built it, for reports: the cache entry, or the file given."""
        return self.path.parent.name


def parse_choice(text: str) -> tuple[str, Path | None]:
    """``(kind, path or None)`` from the ``--firmware`` option: bare-metal, zephyr, zephyr-shell or
    zephyr=PATH (a zephyr.elf or zephyr.bin built for this SoC)."""
    kind, equals, path = text.partition("=")
    if kind not in CHOICES or (path and kind == BARE_METAL) or (equals and not path):
        raise FirmwareError(f"--firmware {text!r}: choose {', '.join(CHOICES)} or zephyr=PATH")
    return kind, (Path(path) if path else None)


def build(choice: str, soc_dir: str | os.PathLike[str], log: Callable[[str], object] = print) -> Image:
    """The :class:`Image` ``choice`` (see :func:`parse_choice`) names, built (cached) for the SoC in
    ``soc_dir`` or, for zephyr=PATH, checked against it."""
    kind, path = parse_choice(choice)
    if kind == BARE_METAL:
        return Image(BARE_METAL, build_firmware(soc_dir, log=log), ROM)
    memories = json.loads((Path(soc_dir) / "csr.json").read_text())["memories"]
    if path is None:
        return Image(kind, build_zephyr(soc_dir, shell=kind == ZEPHYR_SHELL, log=log), MAIN_RAM)
    return Image(ZEPHYR, zephyr_binary(path, memories[MAIN_RAM]), MAIN_RAM)


def memory_images(image: Image, memories: dict[str, dict[str, int]]) -> dict[str, bytes]:
    """``{region: bytes}``: what each memory of the node holds at reset for ``image``."""
    data = image.path.read_bytes()
    if image.region == ROM:
        return {ROM: data}
    return {ROM: jump_to(memories[image.region]["base"]), image.region: data}


def jump_to(address: int) -> bytes:
    """RISC-V code for the reset address: ``lui t0, %hi(address); jr t0`` (address 4 KiB aligned)."""
    if address & 0xFFF:
        raise FirmwareError(f"cannot jump to {address:#x}: not 4 KiB aligned")
    lui_t0 = (address & 0xFFFFF000) | (5 << 7) | 0x37
    jalr_zero_t0 = (5 << 15) | 0x67
    return lui_t0.to_bytes(4, "little") + jalr_zero_t0.to_bytes(4, "little")


def _elf_segments(data: bytes) -> tuple[int, list[tuple[int, int, int]]] | None:
    """``(entry, [(address, file bytes, memory bytes)])`` of a 32-bit little-endian RISC-V ELF."""
    if data[:4] != b"\x7fELF" or data[4] != 1 or data[5] != 1 or struct.unpack_from("<H", data, 18)[0] != 243:
        return None
    entry, phoff = struct.unpack_from("<II", data, 24)
    phentsize, phnum = struct.unpack_from("<HH", data, 42)
    loads = []
    for i in range(phnum):
        p_type, _, _, p_paddr, p_filesz, p_memsz = struct.unpack_from("<IIIIII", data, phoff + i * phentsize)
        if p_type == 1 and p_memsz:  # PT_LOAD
            loads.append((p_paddr, p_filesz, p_memsz))
    return entry, loads


def zephyr_binary(path: str | os.PathLike[str], ram: dict[str, int]) -> Path:
    """The raw binary of a Zephyr image given by the user (zephyr.elf, or zephyr.bin next to it or
    alone), after checking it was linked for this SoC's main RAM ``ram`` (csr.json entry)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FirmwareError(f"cannot read the Zephyr image {path}: {e.strerror}") from None
    end = ram["base"] + ram["size"]
    elf = _elf_segments(data)
    if elf is None:
        if path.suffix != ".bin":
            raise FirmwareError(f"{path} is neither a RISC-V 32-bit ELF nor a .bin image")
        if len(data) > ram["size"]:
            raise FirmwareError(f"{path} is {len(data)} bytes, main RAM holds {ram['size']}")
        return path
    entry, loads = elf
    if entry != ram["base"]:
        raise FirmwareError(
            f"{path} starts at {entry:#x}, not at main RAM ({ram['base']:#x}): not a litex_vexriscv image for this SoC"
        )
    for address, _, size in loads:
        if not (ram["base"] <= address and address + size <= end):
            raise FirmwareError(f"{path} has {size} bytes at {address:#x}, outside main RAM {ram['base']:#x}..{end:#x}")
    binary = path.with_suffix(".bin")
    if not binary.exists() or binary.stat().st_mtime < path.stat().st_mtime:
        raise FirmwareError(f"{binary} is missing or older than {path}: the Zephyr build writes both")
    return binary


def _zephyr_tree_version(base: Path) -> dict[str, Any]:
    """What identifies the Zephyr tree: its VERSION file and, in a git checkout, the commit."""
    version = (base / "VERSION").read_text() if (base / "VERSION").exists() else ""
    commit = subprocess.run(
        ["git", "-C", str(base), "describe", "--always", "--dirty", "--tags"], capture_output=True, text=True
    )
    return {"version": version, "commit": commit.stdout.strip() if commit.returncode == 0 else None}


def build_zephyr(soc_dir: str | os.PathLike[str], *, shell: bool = False, log: Callable[[str], object] = print) -> Path:
    """Path of ``zephyr.bin`` of the Zephyr application for the SoC in ``soc_dir`` (cached by
    sources, SoC, Zephyr tree and toolchain), built by ``firmware/zephyr/build.sh``."""
    base_env = os.environ.get("ZEPHYR_BASE")
    if not base_env:
        raise FirmwareError(
            "no Zephyr tree: set ZEPHYR_BASE (docs/zephyr.md), or give a built image with --firmware zephyr=PATH"
        )
    base = Path(base_env)
    if not base.is_dir():
        raise FirmwareError(f"ZEPHYR_BASE={base} is not a folder")
    sources = (
        buildcache.source_files(FIRMWARE_DIR / "core", ("*.c", "*.h", "*.mk"))
        + buildcache.source_files(ZEPHYR_DIR, ("*.c", "*.h", "*.txt", "*.conf", "Kconfig*", "*.yaml", "*.yml", "*.sh"))
        + [Path(regmap.__file__), Path(zephyr_overlay.__file__), *codegen.SOURCES]
        + buildcache.source_files(Path(regmap.__file__).parent / "microcode", ("*.py", "*.uasm"))
    )
    toolchain = {
        name: os.environ.get(name) for name in ("ZEPHYR_TOOLCHAIN_VARIANT", "CROSS_COMPILE", "ZEPHYR_SDK_INSTALL_DIR")
    }
    key = buildcache.digest(
        sources,
        params={
            "soc": Path(soc_dir).name,
            "version": __version__,
            "shell": shell,
            "zephyr": {"base": str(base), **_zephyr_tree_version(base)},
            "toolchain": toolchain,
        },
    )

    def produce(folder: Path) -> None:
        cmd = ["bash", str(ZEPHYR_DIR / "build.sh"), *(["--shell"] if shell else []), "--out", str(folder)]
        env = {**os.environ, "NUMAVIA_CSR_JSON": str(Path(soc_dir) / "csr.json"), "NUMAVIA_PYTHON": sys.executable}
        log(f"west build ({'with' if shell else 'without'} the shell) against {base}")
        result = subprocess.run(cmd, capture_output=True, text=True, env=env)
        (folder / "build.log").write_text(result.stdout + result.stderr)
        if result.returncode:
            lines = (result.stderr + result.stdout).splitlines()
            errors = [l for l in lines if "error:" in l.lower()] or lines[-1:]
            raise FirmwareError(
                f"Zephyr build failed: {errors[0].strip() if errors else 'build.sh failed'} "
                f"(log: {folder / 'build.log'})"
            )
        for name in ("zephyr.elf", "zephyr.bin", "zephyr.map"):
            shutil.copyfile(folder / "app" / "zephyr" / name, folder / name)

    return buildcache.cached("zephyr-firmware", key, produce, log=log) / "zephyr.bin"


def _build_error(stderr: str) -> str:
    """The line of a failed firmware build that says why: the linker's own reason (an image too big
    for its memory) before its summary ("ld returned 1"), then the compiler's first error."""
    lines = stderr.splitlines()
    reasons = (
        [l for l in lines if "overflowed" in l]
        or [l for l in lines if "error" in l and "ld returned" not in l]
        or [l for l in lines if "error" in l]
        or lines
    )
    return re.sub(r"^\S*/ld: ", "", reasons[0]) if reasons else "make failed"
