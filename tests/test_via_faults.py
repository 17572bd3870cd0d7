"""VIA over a faulty Ethernet: two engines (the RTL, in the Amaranth simulator) joined by wires that
lose, corrupt, duplicate and reorder frames in both directions (seeded, tests/via_faults.py).
Every message must arrive once, in order, byte for byte; the engines' counters show what they
recovered from. tests/soak.py (`make soak`) runs the same with many more messages."""

import random

from amaranth.sim import Simulator
from support.sim import run_simulation
from support.via_faults import FaultyWire
from support.via_pair import Node, Pair
from test_via_engine import DESC_A, DESC_B, VA, read_va, setup, write_va

from numavia.base.via_descriptor import CONTROL_OP, CONTROL_SEGMENT, STATUS_OP, encode_descriptor

DEPTH = 4  # descriptors per work queue (via_pair.PARAMS)
MAX_SIZE = 2000  # 4 send + 4 receive buffers fit the 16 KiB region
RECV_VA = VA + DEPTH * MAX_SIZE
STATUS = CONTROL_SEGMENT.field("STATUS")


def run_messages(messages, *, seed, loss=0.0, corrupt=0.0, duplicate=0.0, reorder=0.0, log=None):
    """Send ``messages`` messages of random sizes a->b over faulty wires, four at a time; returns
    what arrived (index, status, intact, length), the engines' counters, the faults and the cycles."""
    pair = Pair(direct=False, rto_cycles=3000)
    sim = Simulator(pair)
    sim.add_clock(1e-8)
    a, b = Node(pair.a, pair.ram_a, 0), Node(pair.b, pair.ram_b, 1)
    faults = dict(loss=loss, corrupt=corrupt, duplicate=duplicate, reorder=reorder)
    wires = [
        FaultyWire(pair.a.eth_tx, pair.b.eth_rx, seed=seed, **faults),
        FaultyWire(pair.b.eth_tx, pair.a.eth_rx, seed=seed + 1, **faults),
    ]
    for wire in wires:
        sim.add_testbench(wire.process, background=True)
    rng = random.Random(seed)
    result = {"delivered": [], "bytes": 0}

    async def bench(ctx):
        await setup(ctx, a, b)
        sent = 0
        while sent < messages:
            batch = min(DEPTH, messages - sent)
            payloads = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, MAX_SIZE + 1))) for _ in range(batch)]
            for i, payload in enumerate(payloads):
                write_va(ctx, a, VA + i * MAX_SIZE, payload)
                await b.post(
                    ctx,
                    1,
                    "recv",
                    DESC_B + 0x40 * i,
                    encode_descriptor(CONTROL_OP.SENDRECV, [(RECV_VA + i * MAX_SIZE, 1, MAX_SIZE)]),
                )
            for i, payload in enumerate(payloads):
                await a.post(
                    ctx,
                    1,
                    "send",
                    DESC_A + 0x40 * i,
                    encode_descriptor(CONTROL_OP.SENDRECV, [(VA + i * MAX_SIZE, 1, len(payload))]),
                )
            for i, payload in enumerate(payloads):
                st = await b.wait_done(ctx, DESC_B + 0x40 * i, timeout=2_000_000)
                got = read_va(ctx, b, RECV_VA + i * MAX_SIZE, st["LENGTH"])
                result["delivered"].append((sent + i, st["STATUS"], got == payload, st["LENGTH"] == len(payload)))
                await a.wait_done(ctx, DESC_A + 0x40 * i, timeout=2_000_000)
                result["bytes"] += len(payload)
            sent += batch
            if log:
                log(f"{sent}/{messages} messages")
        result["rx_psn"] = await b.vi_reg(ctx, 1, "RX_PSN")
        for node, name in (
            (b, "RX_DUPLICATE"),
            (b, "RX_OUT_OF_ORDER"),
            (b, "RX_BAD_FCS"),
            (a, "TX_TIMEOUTS"),
            (a, "TX_NAK_SEQUENCE"),
            (a, "TX_ERRORS"),
            (a, "RX_BAD_FCS"),
            (a, "RX_DUPLICATE"),
            (a, "TX_FRAMES"),
        ):
            result[f"{'ab'[node.node_id]}.{name}"] = await node.counter(ctx, name)

    sim.add_testbench(bench)
    run_simulation(sim)
    result["cycles"] = wires[0].cycle
    result["faults"] = {k: sum(w.counts[k] for w in wires) for k in wires[0].counts}
    return result


def check_every_message_once_in_order(result, messages):
    done = STATUS.bit("DONE").mask
    op = STATUS_OP.RECEIVE << STATUS.bit("OP").lsb
    assert [d[0] for d in result["delivered"]] == list(range(messages))
    for index, status, intact, length_ok in result["delivered"]:
        assert status == done | op, f"message {index}: status {status:#x}"
        assert intact and length_ok, f"message {index} arrived damaged"
    assert result["a.TX_ERRORS"] == 0


def test_messages_survive_loss_corruption_duplication_and_reordering():
    messages = 8
    r = run_messages(messages, seed=11, loss=0.06, corrupt=0.04, duplicate=0.1, reorder=0.1)
    check_every_message_once_in_order(r, messages)
    f = r["faults"]
    assert f["lost"] and f["corrupted"] and f["duplicated"] and f["reordered"], f
    # The receiver saw the faults and recovered: duplicates dropped, gaps NAKed, bad FCS dropped.
    assert r["b.RX_DUPLICATE"] + r["a.RX_DUPLICATE"] >= 1
    assert r["b.RX_OUT_OF_ORDER"] >= 1
    assert r["b.RX_BAD_FCS"] + r["a.RX_BAD_FCS"] == f["corrupted"]


def test_duplicated_frames_alone_are_taken_once():
    messages = 2
    r = run_messages(messages, seed=5, duplicate=1.0)
    check_every_message_once_in_order(r, messages)
    assert r["faults"]["duplicated"] == r["faults"]["frames"]
    assert r["b.RX_DUPLICATE"] >= 1  # (acknowledgements are not counted: they carry no data)
