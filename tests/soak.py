"""`make soak`: the full-size reliability soaks (CI runs the same code at small sizes in tests/).

    python tests/soak.py [--parts coherence,via-system,via-wire] [--coherence-ops N] [--via-messages N]
                         [--wire-messages N] [--seed N] [--out results/soak]

* coherence: random loads and stores from every card of an 8-card ring of RTL cards (Verilator
  card bench), ring symbols hit by bit errors at 1e-4 each; checked by the coherence checker:
  no violation, no lost or corrupted write, no deadlock (the run finishes).
* via-system: two full nodes (RTL + firmware, host VIPL over the bridges), Ethernet switch losing
  1 %, corrupting 0.1 %, duplicating 1 % and reordering 1 % of the frames; RDMA writes with
  immediate data, each checked on arrival (once, in order, intact); throughput from node 0's
  cycle counter.
* via-wire: two VIA engines (RTL, Amaranth simulator) on a wire that also duplicates and reorders
  frames (1 % loss, 0.1 % corruption, 1 % duplication, 1 % reordering).

Writes soak.json and soak.md to --out; exits 1 with one line if any check fails.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def log(message):
    print(f"soak: {message}", file=sys.stderr, flush=True)


def coherence_soak(ops_per_card, seed, out):
    from numavia.bench import coherence
    f = coherence.run(8, ops_per_card, seed=seed, flip_rate=1e-4, log=log, run_dir=out / "coherence")
    ok = f["violation_count"] == 0 and f["protocol_errors"] == 0
    return {"part": "coherence (8 cards, ring bit errors 1e-4/symbol)", "ok": ok,
            "operations": 8 * ops_per_card, "faults injected": f"{f['ring_flips']} bit flips",
            "detected/recovered": f"{f['ring_crc_errors']} CRC drops, {f['ring_timeouts']} resends",
            "violations": f["violation_count"] + f["protocol_errors"], "figures": f}


def via_system_soak(messages, seed, out):
    from numavia.cluster_session import ClusterSession
    from numavia.errorlog import read_cycles
    from numavia.gateware.via_descriptor import CONTROL_OP
    from numavia.vipl import Descriptor
    from simulation import build
    from via_system import Pair, payload
    size, batch, base = 4096, 8, 64 * 1024
    slot = lambda i: (i % batch) * size
    start = time.monotonic()
    damaged = 0
    with ClusterSession(build(2), out / "via-system", eth_loss=0.01, eth_corrupt=0.001, eth_duplicate=0.01,
                        eth_reorder=0.01, eth_seed=seed) as s:
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
                vi0.post_send(Descriptor(CONTROL_OP.RDMA_WRITE, [(b0.va + slot(i), b0.handle, size)],
                                         remote_va=b1.va + base + slot(i), remote_handle=b1.handle,
                                         immediate=(done + i) & 0xFFFFFFFF))
            for i, r in enumerate(recvs):
                got = vi1.recv_wait()
                if not (got is r and got.immediate_data == (done + i) & 0xFFFFFFFF and not got.errors
                        and b1.read(size, base + slot(i)) == payload(size, seed + done + i)):
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
    lost, corrupted = total["lost"], total["corrupted"]
    recovered = c0["RX_BAD_FCS"] + c1["RX_BAD_FCS"]
    ok = damaged == 0 and recovered == corrupted and c0["TX_ERRORS"] == c1["TX_ERRORS"] == 0
    wall = time.monotonic() - start
    mbps = messages * size / (cycles / clock_hz) / 1e6
    return {"part": "VIA full system (1 % loss, 0.1 % corruption, 1 % duplication, 1 % reordering)", "ok": ok,
            "operations": messages,
            "faults injected": f"{lost} frames lost, {corrupted} corrupted, {total['duplicated']} duplicated, "
                               f"{total['reordered']} reordered",
            "detected/recovered": f"{recovered} bad FCS, {c0['TX_TIMEOUTS'] + c1['TX_TIMEOUTS']} timeouts, "
                                  f"{c0['TX_NAK_SEQUENCE'] + c1['TX_NAK_SEQUENCE']} sequence NAKs",
            "violations": damaged, "figures": {"counters": [c0, c1], "link": stats, "wall_seconds": wall,
                                               "payload_bytes": messages * size, "card_cycles": cycles,
                                               "throughput_MB_per_s": mbps}}


def via_wire_soak(messages, seed):
    from test_via_faults import run_messages
    r = run_messages(messages, seed=seed, loss=0.01, corrupt=0.001, duplicate=0.01, reorder=0.01,
                     log=lambda m: log(f"via-wire: {m}"))
    bad = sum(1 for _, status, intact, length_ok in r["delivered"] if not (intact and length_ok))
    bad += messages - len(r["delivered"]) + r["a.TX_ERRORS"]
    f = r["faults"]
    mbps = r["bytes"] / (r["cycles"] / 100e6) / 1e6 if r["cycles"] else 0
    return {"part": "VIA engines, wire also duplicating and reordering", "ok": bad == 0, "operations": messages,
            "faults injected": f"{f['lost']} lost, {f['corrupted']} corrupted, {f['duplicated']} duplicated, "
                               f"{f['reordered']} reordered (of {f['frames']} frames)",
            "detected/recovered": f"{r['b.RX_DUPLICATE']} duplicates dropped, {r['b.RX_OUT_OF_ORDER']} out of "
                                  f"order NAKed, {r['a.TX_TIMEOUTS']} timeouts",
            "violations": bad, "figures": {**{k: v for k, v in r.items() if k != 'delivered'},
                                           "throughput_MB_per_s_at_100MHz": mbps}}


def main(argv=None):
    p = argparse.ArgumentParser(description="Full-size reliability soaks (make soak).")
    p.add_argument("--parts", default="coherence,via-system,via-wire")
    p.add_argument("--coherence-ops", type=int, default=125_000, help="accesses per card (default 125000: 10^6 in all)")
    p.add_argument("--via-messages", type=int, default=100_000, help="full-system RDMA messages (default 10^5)")
    p.add_argument("--wire-messages", type=int, default=200, help="messages over the reordering wire (default 200)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="results/soak")
    args = p.parse_args(argv)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = set(parts) - {"coherence", "via-system", "via-wire"}
    if unknown:
        p.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for part in parts:
            log(f"{part} ...")
            start = time.monotonic()
            if part == "coherence":
                row = coherence_soak(args.coherence_ops, args.seed, out)
            elif part == "via-system":
                row = via_system_soak(args.via_messages, args.seed, Path(tmp))
            else:
                row = via_wire_soak(args.wire_messages, args.seed)
            row["wall_seconds"] = round(time.monotonic() - start, 1)
            rows.append(row)
            log(f"{part}: {'ok' if row['ok'] else 'FAILED'} ({row['violations']} violations)")
    (out / "soak.json").write_text(json.dumps(rows, indent=1, default=str))
    cols = ["part", "operations", "faults injected", "detected/recovered", "violations", "wall_seconds"]
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    (out / "soak.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    failed = [r["part"] for r in rows if not r["ok"]]
    if failed:
        print(f"soak: error: {', '.join(failed)} failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
