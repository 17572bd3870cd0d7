"""`make soak`: the full-size reliability soaks (CI runs the same code at small sizes in tests/).

    python tests/soak.py [--parts coherence,via-pushpull,via-system,via-wire,via-every-vi]
                         [--coherence-ops N] [--via-messages N] [--chunk N] [--jobs N] [--host-messages N]
                         [--wire-messages N] [--every-vis N]
                         [--eth-loss 0.01] [--eth-corrupt 0.001] [--eth-duplicate 0.01] [--eth-reorder 0.01]
                         [--seed N] [--out results/soak]

* coherence: random loads and stores from every card of an 8-card ring of RTL cards (Verilator
  card bench), ring symbols hit by bit errors at 1e-4 each; checked by the coherence checker:
  no violation, no lost or corrupted write, no deadlock (the run finishes).
* via-pushpull: two full nodes (RTL + firmware), the Ethernet switch losing 1 %, corrupting 0.1 %,
  duplicating 1 % and reordering 1 % of the frames; a one-way stream of push-pull messages between
  the nodes' firmware agents (sends, RDMA reads and acks on the engine), in runs that rotate
  through a mix of schemes and sizes (PUSHPULL_MIX), on --jobs pairs of nodes in parallel. Every
  message carries a pattern of its own index, checked byte for byte by the receiving firmware: a
  lost, repeated, reordered or damaged message shows as bad bytes. Throughput from the
  initiators' cycle counters.
* via-system: the same switch, driven by the host's VIPL over the bridges (slow: every byte crosses
  the simulated host bridge): RDMA writes with immediate data, each checked by the host on arrival.
* via-wire: two VIA engines (RTL, Amaranth simulator) on a wire with the same faults.
* via-every-vi: two full nodes with --every-vis VIs each (default the register map's 256), every
  VI pair connected at once and streaming sends and RDMA writes through the same switch, every
  byte checked where its VI put it; then an RDMA write into another tag's buffer fails its VI
  alone (tests/support/via_every_vi.py, which the test suite runs at 8 and 64 VIs).

Writes soak.json and soak.md to --out; exits 1 with one line if any check fails.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from numavia.base import regmap
from numavia.base.errors import NumaviaError


def log(message):
    print(f"soak: {message}", file=sys.stderr, flush=True)


def coherence_soak(ops_per_card, seed, out):
    from numavia.bench import coherence

    f = coherence.run(8, ops_per_card, seed=seed, flip_rate=1e-4, log=log, run_dir=out / "coherence")
    ok = f["violation_count"] == 0 and f["protocol_errors"] == 0
    return {
        "part": "coherence (8 cards, ring bit errors 1e-4/symbol)",
        "ok": ok,
        "operations": 8 * ops_per_card,
        "faults injected": f"{f['ring_flips']} bit flips",
        "detected/recovered": f"{f['ring_crc_errors']} CRC drops, {f['ring_timeouts']} resends",
        "violations": f["violation_count"] + f["protocol_errors"],
        "figures": f,
    }


#: The push-pull soak's traffic, run after run: (scheme, message size, run length as a share of
#: --chunk). Mostly the advanced scheme's register path and pushed-only messages, with pulls (RDMA
#: reads) in one frame and over three frames (MTU 1500), and the original scheme's gathered pushes
#: and pulls. The library's CPU work costs thousands of cycles a message, so mostly small messages
#: keep 10^5 of them to about an hour of simulation on two cores.
PUSHPULL_THRESHOLD = 64
PUSHPULL_MIX = (
    ("advanced", 4, 1.0),
    ("advanced", 48, 1.0),
    ("advanced", 160, 0.25),
    ("advanced", 3000, 0.01),
    ("original", 48, 0.1),
    ("original", 3000, 0.01),
)


def link_faults(total):
    return (
        f"{total['lost']} frames lost, {total['corrupted']} corrupted, {total['duplicated']} duplicated, "
        f"{total['reordered']} reordered"
    )


def via_recovery(c0, c1):
    both = lambda name: c0[name] + c1[name]
    return (
        f"{both('RX_BAD_FCS')} bad FCS, {both('TX_TIMEOUTS')} timeouts, {both('TX_NAK_SEQUENCE')} sequence "
        f"NAKs, {both('RX_DUPLICATE')} duplicates dropped"
    )


def engines_recovered(c0, c1, total):
    """Every corrupted frame was caught by an FCS check, and no VI gave up."""
    return c0["RX_BAD_FCS"] + c1["RX_BAD_FCS"] == total["corrupted"] and c0["TX_ERRORS"] == c1["TX_ERRORS"] == 0


def pushpull_stream(job, messages, seed, out, faults, chunk):
    """One pair of nodes: ``messages`` push-pull messages, run by run through the classes."""
    from support.ring_sim import build

    from numavia.bench.pushpull import PushPullPair
    from numavia.cluster_session import ClusterSession

    rotation = [(scheme, size, max(1, round(chunk * share))) for scheme, size, share in PUSHPULL_MIX]
    runs, done = [], 0
    with ClusterSession(build(2), out / f"via-pushpull-{job}", eth_seed=seed, **faults) as s:
        pair = PushPullPair(s, max_size=max(size for _, size, _ in PUSHPULL_MIX), timeout=3600)
        clock_hz = pair.freq
        while done < messages:
            scheme, size, length = rotation[len(runs) % len(rotation)]
            n = min(length, messages - done)
            sender, receiver = pair.run(scheme, size, PUSHPULL_THRESHOLD, n, verify=True, burst=True)
            runs.append(
                {
                    "scheme": scheme,
                    "size": size,
                    "messages": n,
                    "cycles": sender["cycles"],
                    "bad_bytes": receiver["bad_bytes"],
                    "received": receiver["received"],
                }
            )
            done += n
            if len(runs) % len(rotation) == 0 or done == messages:
                log(f"via-pushpull[{job}]: {done:,}/{messages:,} messages")
        counters = [pair.nics[0].counters(), pair.nics[1].counters()]
        # Each engine took every frame the other sent exactly once: its next expected sequence
        # number is the other's next one to send (both ways: pushes one way, acks and reads back).
        psn = lambda node, name: pair.nics[node].vi_reg(pair.vis[node].number, name)
        in_step = psn(0, "TX_PSN") == psn(1, "RX_PSN") and psn(1, "TX_PSN") == psn(0, "RX_PSN")
    return {"runs": runs, "counters": counters, "link": s.link_totals(), "clock_hz": clock_hz, "in_step": in_step}


def summed(counts):
    """Key by key sum of dicts of counts (the pairs' counters and switch totals)."""
    counts = list(counts)
    return {k: sum(c[k] for c in counts) for k in counts[0]}


def via_pushpull_soak(messages, seed, out, faults, chunk, jobs):
    """``jobs`` pairs of nodes in parallel (one simulator process each), seeds seed, seed+1, ..."""
    from concurrent.futures import ThreadPoolExecutor

    shares = [messages // jobs + (j < messages % jobs) for j in range(jobs)]
    with ThreadPoolExecutor(jobs) as pool:
        streams = list(pool.map(lambda j: pushpull_stream(j, shares[j], seed + j, out, faults, chunk), range(jobs)))
    runs = [r for stream in streams for r in stream["runs"]]
    damaged = sum(r["bad_bytes"] for r in runs)
    missing = sum(r["messages"] - r["received"] for r in runs)
    cycles = sum(r["cycles"] for r in runs)  # of one pair at a time: throughput is a pair's
    payload_bytes = sum(r["messages"] * r["size"] for r in runs)
    total = summed(stream["link"] for stream in streams)
    c0, c1 = (summed(stream["counters"][node] for stream in streams) for node in (0, 1))
    out_of_step = sum(not stream["in_step"] for stream in streams)
    ok = damaged == missing == out_of_step == 0 and engines_recovered(c0, c1, total)
    mbps = payload_bytes / (cycles / streams[0]["clock_hz"]) / 1e6 if cycles else 0.0
    return {
        "part": f"VIA push-pull between firmware agents ({fault_title(faults)})",
        "ok": ok,
        "operations": messages,
        "faults injected": link_faults(total),
        "detected/recovered": via_recovery(c0, c1),
        "violations": damaged + missing + out_of_step,
        "figures": {
            "counters": [c0, c1],
            "link": total,
            "runs": runs,
            "pairs": jobs,
            "bad_bytes": damaged,
            "missing_messages": missing,
            "pairs_out_of_step": out_of_step,
            "payload_bytes": payload_bytes,
            "card_cycles": cycles,
            "throughput_MB_per_s": mbps,
            "mean_cycles_per_message": cycles / messages,
        },
    }


#: The switch's faults in the VIA parts: (option, default share of frames, noun, what happens).
ETH_FAULTS = (
    ("loss", 0.01, "loss", "lost"),
    ("corrupt", 0.001, "corruption", "corrupted"),
    ("duplicate", 0.01, "duplication", "duplicated"),
    ("reorder", 0.01, "reordering", "reordered"),
)


def fault_title(faults):
    return ", ".join(f"{faults['eth_' + kind] * 100:g} % {noun}" for kind, _, noun, _ in ETH_FAULTS)


def via_system_soak(messages, seed, out, faults):
    from support.ring_sim import build
    from support.via_system import Pair, payload

    from numavia.base.via_descriptor import CONTROL_OP
    from numavia.cluster_session import ClusterSession
    from numavia.errorlog import read_cycles
    from numavia.vipl import Descriptor

    size, batch, base = 4096, 8, 64 * 1024
    slot = lambda i: (i % batch) * size
    start = time.monotonic()
    damaged = 0
    with ClusterSession(build(2), out / "via-system", eth_seed=seed, **faults) as s:
        pair = Pair(s)
        vi0, vi1 = pair.connect()
        b0, b1 = pair.buffers
        first_cycle = read_cycles(pair.nics[0].card_reg)
        done = 0
        while done < messages:
            n = min(batch, messages - done)
            recvs = [vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, 4)])) for _ in range(n)]
            for i in range(n):
                b0.write(payload(size, seed + done + i), slot(i))
                vi0.post_send(
                    Descriptor(
                        CONTROL_OP.RDMA_WRITE,
                        [(b0.va + slot(i), b0.handle, size)],
                        remote_va=b1.va + base + slot(i),
                        remote_handle=b1.handle,
                        immediate=(done + i) & 0xFFFFFFFF,
                    )
                )
            for i, r in enumerate(recvs):
                got = vi1.recv_wait()
                if not (
                    got is r
                    and got.immediate_data == (done + i) & 0xFFFFFFFF
                    and not got.errors
                    and b1.read(size, base + slot(i)) == payload(size, seed + done + i)
                ):
                    damaged += 1
            for _ in range(n):
                if vi0.send_wait().errors:
                    damaged += 1
            done += n
            if done % 512 == 0 or done == messages:
                log(f"via-system: {done}/{messages} messages")
        cycles = read_cycles(pair.nics[0].card_reg) - first_cycle
        clock_hz = pair.nics[0].card_reg("ctrl", "CLK_FREQ_HZ")
        c0, c1 = pair.counters(0), pair.counters(1)
    total = s.link_totals()
    ok = damaged == 0 and engines_recovered(c0, c1, total)
    wall = time.monotonic() - start
    mbps = messages * size / (cycles / clock_hz) / 1e6
    return {
        "part": f"VIA through the host's VIPL ({fault_title(faults)})",
        "ok": ok,
        "operations": messages,
        "faults injected": link_faults(total),
        "detected/recovered": via_recovery(c0, c1),
        "violations": damaged,
        "figures": {
            "counters": [c0, c1],
            "link": total,
            "wall_seconds": wall,
            "payload_bytes": messages * size,
            "card_cycles": cycles,
            "throughput_MB_per_s": mbps,
        },
    }


def via_wire_soak(messages, seed, faults):
    from test_via_faults import run_messages

    r = run_messages(
        messages, seed=seed, **{kind[4:]: rate for kind, rate in faults.items()}, log=lambda m: log(f"via-wire: {m}")
    )
    bad = sum(1 for _, status, intact, length_ok in r["delivered"] if not (intact and length_ok))
    bad += messages - len(r["delivered"]) + r["a.TX_ERRORS"]
    f = r["faults"]
    mbps = r["bytes"] / (r["cycles"] / 100e6) / 1e6 if r["cycles"] else 0
    return {
        "part": f"VIA engines on a wire ({fault_title(faults)})",
        "ok": bad == 0,
        "operations": messages,
        "faults injected": f"{f['lost']} lost, {f['corrupted']} corrupted, {f['duplicated']} duplicated, "
        f"{f['reordered']} reordered (of {f['frames']} frames)",
        "detected/recovered": f"{r['b.RX_DUPLICATE']} duplicates dropped, {r['b.RX_OUT_OF_ORDER']} out of "
        f"order NAKed, {r['a.TX_TIMEOUTS']} timeouts",
        "violations": bad,
        "figures": {**{k: v for k, v in r.items() if k != "delivered"}, "throughput_MB_per_s_at_100MHz": mbps},
    }


def via_every_vi_soak(vis, seed, out, faults):
    from support.ring_sim import build
    from support.via_every_vi import LOAD_ROUNDS, every_vi_at_once, only_vi0_refused

    from numavia.cluster_session import ClusterSession

    try:
        with ClusterSession(build(2, via_vis=vis), out / "via-every-vi", eth_seed=seed, **faults) as s:
            c0, c1 = every_vi_at_once(s, vis)
    except AssertionError as e:  # the check names the VI that went wrong
        raise NumaviaError(f"every VI at once: {e}") from None
    total = s.link_totals()
    ok = c0["RX_BAD_FCS"] + c1["RX_BAD_FCS"] == total["corrupted"] and only_vi0_refused(c0, c1)
    return {
        "part": f"VIA on every one of {vis} VIs at once ({fault_title(faults)})",
        "ok": ok,
        "operations": 2 * LOAD_ROUNDS * vis,
        "faults injected": link_faults(total),
        "detected/recovered": via_recovery(c0, c1),
        "violations": 0 if ok else 1,
        "figures": {"counters": [c0, c1], "link": total, "vis": vis},
    }


PARTS = ("coherence", "via-pushpull", "via-system", "via-wire", "via-every-vi")


def main(argv=None):
    p = argparse.ArgumentParser(description="Full-size reliability soaks (make soak).")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of: {', '.join(PARTS)} (default all)")
    p.add_argument("--coherence-ops", type=int, default=125_000, help="accesses per card (default 125000: 10^6 in all)")
    p.add_argument(
        "--via-messages",
        type=int,
        default=100_000,
        help="push-pull messages between the firmware agents (default 10^5)",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=500,
        help="push-pull messages per run of the agents before the next scheme and size (default 500)",
    )
    p.add_argument(
        "--jobs", type=int, default=2, help="pairs of nodes sharing the push-pull messages, in parallel (default 2)"
    )
    p.add_argument(
        "--host-messages",
        type=int,
        default=1000,
        help="RDMA writes driven by the host's VIPL (default 1000; about 0.6 s of wall time each)",
    )
    p.add_argument("--wire-messages", type=int, default=200, help="messages over the reordering wire (default 200)")
    p.add_argument(
        "--every-vis",
        type=int,
        default=regmap.VI_CAPACITY,
        help=f"VIs of each card in via-every-vi (default {regmap.VI_CAPACITY}, the register map's room)",
    )
    for kind, rate, _, happens in ETH_FAULTS:
        p.add_argument(
            f"--eth-{kind}", type=float, default=rate, help=f"share of Ethernet frames {happens} (default {rate})"
        )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="results/soak")
    args = p.parse_args(argv)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        p.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    for name in ("chunk", "jobs"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if not 1 <= args.every_vis <= regmap.VI_CAPACITY:
        p.error(f"--every-vis must be 1..{regmap.VI_CAPACITY}, not {args.every_vis}")
    faults = {f"eth_{kind}": getattr(args, f"eth_{kind}") for kind, *_ in ETH_FAULTS}
    for name, rate in faults.items():
        if not 0 <= rate < 1:
            p.error(f"--{name.replace('_', '-')} must be in [0, 1), not {rate:g}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runners = {
            "coherence": lambda: coherence_soak(args.coherence_ops, args.seed, out),
            "via-pushpull": lambda: via_pushpull_soak(
                args.via_messages, args.seed, Path(tmp), faults, args.chunk, args.jobs
            ),
            "via-system": lambda: via_system_soak(args.host_messages, args.seed, Path(tmp), faults),
            "via-wire": lambda: via_wire_soak(args.wire_messages, args.seed, faults),
            "via-every-vi": lambda: via_every_vi_soak(args.every_vis, args.seed, Path(tmp), faults),
        }
        for part in parts:
            log(f"{part} ...")
            start = time.monotonic()
            try:
                row = runners[part]()
            except NumaviaError as e:  # a VI failed, a node stopped answering, a build failed ...
                row = {
                    "part": part,
                    "ok": False,
                    "error": str(e),
                    "operations": "-",
                    "faults injected": "-",
                    "detected/recovered": "-",
                    "violations": "-",
                }
            row["wall_seconds"] = round(time.monotonic() - start, 1)
            rows.append(row)
            log(
                f"{part}: {'ok' if row['ok'] else 'FAILED'} ({row.get('error') or str(row['violations']) + ' violations'})"
            )
    (out / "soak.json").write_text(json.dumps(rows, indent=1, default=str))
    cols = ["part", "operations", "faults injected", "detected/recovered", "violations", "wall_seconds"]
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    (out / "soak.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    failed = [r["part"] + (f" ({r['error']})" if "error" in r else "") for r in rows if not r["ok"]]
    if failed:
        print(f"soak: error: {'; '.join(failed)} failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
