"""``numavia demo``: the main job, from building a ring to the report."""

from numavia.demo import DEFAULT_NODES, Demo

from .common import (
    add_cache_at_option,
    add_firmware_option,
    add_nodes_option,
    add_out_option,
    add_spread_options,
    command,
    log,
    results_folder,
    spread,
)


def cmd_demo(args):
    run_spread = spread(args, args.nodes)
    Demo(
        nodes=args.nodes,
        out=results_folder(args.out),
        log=log,
        spread=run_spread,
        firmware=args.firmware,
        cache_at=args.cache_at,
    ).run()
    return 0


def register(sub):
    p = command(
        sub,
        "demo",
        cmd_demo,
        help="the main job: build and boot a ring, measure latency and kernels, report",
        description="Build (cached) and boot a ring of full nodes (cycle-accurate, one process per "
        "node by default), then measure the Table 1 latency set and shared-memory "
        "kernels in NCC-NUMA and NUMA mode; write a report with tables and PNG plots.",
    )
    add_nodes_option(p, DEFAULT_NODES, minimum=2)
    add_out_option(p, "results/demo", "report folder")
    add_firmware_option(p)
    add_cache_at_option(p, "kernels' NCC-NUMA runs (the latency set measures both misses)")
    add_spread_options(p)
