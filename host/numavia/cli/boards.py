"""``numavia build``, ``numavia paths`` and ``numavia flash``: the boards on the open ECP5 flow."""

import json
from pathlib import Path

from numavia.base import regmap
from numavia.base.errors import NumaviaError
from numavia.base.via_params import ViaParams, att_regions_for
from numavia.boards import flow, logic_paths

from .common import add_out_option, command, integer_in, log, positive, results_folder

BOARDS = ("ecpix5", "colorlight_i5")


def _add_board_options(p):
    p.add_argument("--board", required=True, choices=BOARDS)
    p.add_argument("--config", help="card configuration of the board (default: the board's own)")
    p.add_argument("--nodes-max", type=positive, help="largest ring the card addresses (CardConfig.max_nodes)")
    p.add_argument(
        "--vis",
        type=integer_in(1, regmap.VI_CAPACITY),
        metavar="N",
        help=f"VIs of the card's VIA engine, 1..{regmap.VI_CAPACITY} (default: the configuration's)",
    )
    p.add_argument(
        "--seed",
        type=positive,
        default=flow.DEFAULT_SEED,
        help=f"nextpnr's placement seed (default {flow.DEFAULT_SEED}); the Fmax of one netlist moves by several "
        "MHz from seed to seed, each seed's place and route is cached apart",
    )


def _card_params(args):
    """The card parameters the command line replaces in the board's configuration (more VIs than
    the default memory handles bring a handle each)."""
    params = {"max_nodes": args.nodes_max, "via_vis": args.vis}
    if args.vis is not None and att_regions_for(args.vis) != ViaParams.att_regions:
        params["via_att_regions"] = att_regions_for(args.vis)
    return {k: v for k, v in params.items() if v is not None}


def cmd_build(args):
    if args.bare and args.compare_bare:
        args.parser.error("--bare and --compare-bare exclude each other")
    if args.synth_only and args.compare_bare:
        args.parser.error("--synth-only builds one SoC; leave out --compare-bare")
    board = flow.load_board(args.board)
    out = results_folder(args.out) if args.out else None
    if args.synth_only:
        return _synth_only(board, args, out)
    report = flow.build(
        board,
        args.config,
        with_card=not args.bare,
        card_params=_card_params(args),
        bitstream=not args.no_bitstream,
        seed=args.seed,
        log=log,
    )
    print(flow.format_report(report))
    reports = [report]
    if args.compare_bare:
        bare = flow.build(board, args.config, with_card=False, bitstream=not args.no_bitstream, seed=args.seed, log=log)
        print(flow.format_report(bare))
        reports.append(bare)
    if out:
        for path in flow.write_results(reports, out):
            log(f"wrote {path}")
    for r in reports:
        flow.check_timing(r)
    return 0


def _synth_only(board, args, out):
    """Synthesis, the estimated slowest paths, and what the netlist takes of the device once packed:
    a design that cannot fit fails here, in minutes, not at placement."""
    netlist = flow.synthesise(board, args.config, with_card=not args.bare, card_params=_card_params(args), log=log)
    _print_paths(netlist / f"{flow.TOP}.json", count=args.paths)
    utilization = flow.pack(board, netlist, log=log)
    print(flow.format_utilization(board, utilization))
    if out:
        config = args.config or board.default_config
        path = out / f"{board.name}-{config}-packed.json"
        figures = {"board": board.name, "config": config, "card_params": _card_params(args), "utilization": utilization}
        path.write_text(json.dumps(figures, indent=1) + "\n")
        log(f"wrote {path}")
    flow.check_fits(board, utilization)
    return 0


def _print_paths(netlist, *, count, clocks=None, top=None):
    log(f"estimating paths of {netlist}")
    paths = logic_paths.worst_paths(logic_paths.load(netlist, top), count)
    if not paths:
        raise NumaviaError(f"{netlist}: no register-to-register paths")
    known = dict.fromkeys(p.clock for p in paths)
    unknown = [c for c in clocks or () if c not in known]
    if unknown:
        raise NumaviaError(f"{netlist}: no clock {', '.join(unknown)} (its clocks: {', '.join(known)})")
    print(logic_paths.format_paths(paths, clocks))
    return 0


def cmd_paths(args):
    return _print_paths(args.netlist, count=args.count, clocks=args.clock, top=args.top)


def cmd_flash(args):
    board = flow.load_board(args.board)
    bitstream = args.bitstream
    if bitstream is None:
        report = flow.build(board, args.config, card_params=_card_params(args), seed=args.seed, log=log)
        flow.check_timing(report)
        bitstream = report["bitstream"]
    flow.flash(board, bitstream, cable=args.cable, to_flash=args.flash, log=log)
    return 0


def register(sub):
    p = command(
        sub,
        "build",
        cmd_build,
        help="build a board's bitstream with the open ECP5 flow (yosys, nextpnr, ecppack)",
        description="Generate the node SoC for a board, synthesise, place and route it and pack "
        "the bitstream (cached by inputs); print resources and Fmax per clock domain; "
        "fail if a clock misses its target (from nextpnr's report).",
    )
    _add_board_options(p)
    p.add_argument("--bare", action="store_true", help="the LiteX SoC without the card, for comparison")
    p.add_argument(
        "--compare-bare",
        action="store_true",
        help="also build the bare LiteX SoC on the same board and report the card's cost",
    )
    p.add_argument("--no-bitstream", action="store_true", help="stop after place and route (no ecppack)")
    p.add_argument(
        "--synth-only",
        action="store_true",
        help="stop after yosys: print the estimated slowest paths per clock (numavia paths) and what "
        "the netlist takes of the device once packed by nextpnr; fail if it does not fit",
    )
    p.add_argument(
        "--paths",
        type=positive,
        default=5,
        metavar="N",
        help="with --synth-only: paths per clock, to different registers (default 5)",
    )
    add_out_option(
        p, None, "write the figures to this folder (JSON, CSV, Markdown; with --synth-only the packed netlist's, JSON)"
    )

    p = command(
        sub,
        "paths",
        cmd_paths,
        help="estimated slowest register-to-register paths of an ECP5 netlist",
        description="Read a yosys JSON netlist (after synth_ecp5) and print, per clock, the "
        "slowest paths in nominal ECP5 delays and the signals they pass: what "
        "limits Fmax, without place and route (nextpnr names critical paths only "
        "for a routed design). An estimate of logic depth, not sign-off.",
    )
    p.add_argument("netlist", help="yosys JSON netlist, e.g. build/netlists/<board>-.../numavia_board.json")
    p.add_argument("--top", help="module to analyse (default: the netlist's top)")
    p.add_argument("--count", type=positive, default=5, help="paths per clock, to different registers (default 5)")
    p.add_argument("--clock", action="append", help="only this clock (its net name); repeatable")

    p = command(
        sub,
        "flash",
        cmd_flash,
        help="load a board's bitstream with openFPGALoader",
        description="Load the bitstream into the FPGA (or, with --flash, write it to the "
        "configuration flash) with openFPGALoader; builds it first if needed.",
    )
    _add_board_options(p)
    p.add_argument("--bitstream", type=Path, help="a .bit file (default: build it)")
    p.add_argument("--cable", help="openFPGALoader cable name (-c), e.g. ft2232, dirtyJtag; default: the board's")
    p.add_argument("--flash", action="store_true", help="write the configuration flash instead of the FPGA's SRAM")
