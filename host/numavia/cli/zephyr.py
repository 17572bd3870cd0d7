"""``numavia firmware`` and ``numavia zephyr-overlay``: the node firmware and what Zephyr needs to
build for the node SoC."""

from pathlib import Path

from numavia.soc import firmware, sim, zephyr_overlay

from .common import add_cpu_variant_option, add_firmware_option, command, log


def cmd_firmware(args):
    config = sim.SimConfig(cpu_variant=args.cpu_variant)
    soc_dir = sim.build_soc(config, log=log)
    image = firmware.build(args.firmware, soc_dir, log=log)
    print(f"{image.path} ({image.path.stat().st_size} bytes, runs from {image.region})")
    return 0


def cmd_zephyr_overlay(args):
    if args.csr_json:
        csr_json = Path(args.csr_json)
    else:
        csr_json = sim.build_soc(sim.SimConfig(cpu_variant=args.cpu_variant), log=log) / "csr.json"
    zephyr_overlay.write(csr_json, args.out, conf=args.conf, zephyr_base=args.zephyr_base)
    log(f"{args.out}: devicetree overlay for litex_vexriscv from {csr_json}")
    return 0


def register(sub):
    p = command(
        sub,
        "firmware",
        cmd_firmware,
        help="build the node firmware for the simulated SoC",
        description="Generate the SoC headers if needed and build the firmware image: "
        "firmware.bin (bare metal, the default) or zephyr.bin (--firmware zephyr).",
    )
    add_cpu_variant_option(p)
    add_firmware_option(p)

    p = command(
        sub,
        "zephyr-overlay",
        cmd_zephyr_overlay,
        help="devicetree overlay for Zephyr's litex_vexriscv board, from csr.json",
        description="Write the devicetree overlay (LiteX peripherals and the card's blocks) "
        "for a node SoC, from its csr.json and the register map.",
    )
    p.add_argument("--csr-json", help="the SoC's csr.json (default: generate the simulated node SoC, cached)")
    add_cpu_variant_option(p, help="VexRiscv variant of the generated SoC when --csr-json is not given")
    p.add_argument("--out", required=True, help="overlay file to write (.overlay)")
    p.add_argument("--conf", help="also write the Kconfig fragment the SoC needs (.conf)")
    p.add_argument(
        "--zephyr-base",
        metavar="DIR",
        help="the Zephyr tree to build with: use only the labels its litex_vexriscv board "
        "defines and disable every peripheral it enables that the SoC lacks "
        "(default: the labels LiteX's flow knows)",
    )
