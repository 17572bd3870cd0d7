"""``numavia renode``: the Renode ring (platform, script, Robot tests) for the node SoC."""

from numavia import renode
from numavia.renode import DEFAULT_QUANTUM_CYCLES, RING_DELAY_CYCLES, cosim, run
from numavia.soc import sim
from numavia.soc.firmware import build_firmware

from .common import (
    add_cpu_variant_option,
    add_nodes_option,
    add_out_option,
    checking,
    command,
    log,
    positive,
    results_folder,
)


def cmd_renode(args):
    with checking(args):
        config = sim.SimConfig(nodes=args.nodes, cpu_variant=args.cpu_variant)
        firmware, node_images = renode.firmware_images(args.firmware)
        renode.firmware_files(args.nodes, node_images)  # a node outside the ring: say so now
    # A run needs Renode, its integration library, CMake and Verilator: say which is missing
    # before spending minutes on builds.
    renode_root = run.require_tools(args.renode_dir) if args.run else None
    out = results_folder(args.out)
    log(f"SoC ({config.cpu_variant} VexRiscv + card) and firmware, cached under build/")
    soc_dir = sim.build_soc(config, log=log)
    card_verilog = cosim.card_verilog(config, log=log)
    images = {node: renode.memory_images(image, soc_dir, log=log) for node, image in node_images.items()}
    every = renode.memory_images(firmware, soc_dir, log=log) if firmware else build_firmware(soc_dir, log=log)
    files = renode.generate(
        soc_dir / "csr.json",
        out,
        nodes=config.nodes,
        card_config=config.card_config(),
        card_verilog=card_verilog,
        ready_marker=sim.READY_MARKER,
        firmware=every,
        node_images=images,
        quantum_cycles=args.quantum,
        ring_delay=args.ring_delay,
    )
    for path in files:
        print(path)
    if args.run:
        run.build_card_model(out, renode_root, card_verilog, config.nodes, log)
        run.run_tests(out, log)
    return 0


def register(sub):
    p = command(
        sub,
        "renode",
        cmd_renode,
        help="write the Renode ring (platform, script, Robot tests) for the SoC",
        description="Generate, from the SoC's csr.json (built and cached as for `numavia sim`), "
        "a Renode node platform (.repl), an N-node ring script (.resc) with the card "
        "co-simulated from its Verilog, Robot tests and the card's co-simulation "
        "inputs (renode/cosim builds them with CMake). --run also builds the card "
        "model and runs the tests: it needs Renode (renode, renode-test) and its "
        "integration library.",
    )
    add_nodes_option(p, 2, "machines in the ring")
    add_out_option(p, "build/renode", "output folder")
    add_cpu_variant_option(p)
    p.add_argument(
        "--firmware",
        action="append",
        default=[],
        metavar="[NODE=]IMAGE",
        help="firmware of every node, or with NODE= of one node; repeatable: bare-metal (the "
        "default), zephyr, zephyr-shell or zephyr=PATH as for `numavia sim` (a Zephyr "
        "image runs from main RAM behind the ROM's jump), or a raw image for the ROM",
    )
    p.add_argument(
        "--quantum",
        type=positive,
        default=DEFAULT_QUANTUM_CYCLES,
        metavar="CYCLES",
        help=f"global quantum in card clock cycles (default {DEFAULT_QUANTUM_CYCLES})",
    )
    p.add_argument(
        "--ring-delay",
        type=positive,
        default=RING_DELAY_CYCLES,
        metavar="CYCLES",
        help=f"card cycles per ring hop (default {RING_DELAY_CYCLES}, as in the Verilator ring)",
    )
    p.add_argument(
        "--run",
        action="store_true",
        help="then build the co-simulated card (CMake + Verilator) and run the Robot tests",
    )
    p.add_argument(
        "--renode-dir",
        metavar="DIR",
        help="Renode's root folder, holding its co-simulation integration library (default $RENODE_ROOT)",
    )
