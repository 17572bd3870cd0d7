"""``numavia demo``, end to end on a two-node ring: boot, latency set, RDMA sweep, kernels, report;
and a failing step names the step and the node."""

import json
import subprocess
import sys

import pytest

from numavia.base import trace
from numavia.demo import Demo, DemoError

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "numavia.cli"]


def test_demo_on_two_nodes_reports_every_step(tmp_path):
    out = tmp_path / "report"
    proc = subprocess.run(CLI + ["demo", "--nodes", "2", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for step in ("[1/6 build]", "[2/6 boot]", "[3/6 latency]", "[4/6 rdma]", "[5/6 kernels]", "[6/6 report]"):
        assert step in proc.stderr
    for name in (
        "demo.md",
        "demo.json",
        "latency.md",
        "latency.png",
        "kernels.md",
        "kernels.csv",
        "kernels.png",
        "via_bench.md",
        "via_bench.csv",
        "via_bench.png",
    ):
        assert (out / name).stat().st_size > 0, name
    figures = json.loads((out / "demo.json").read_text())["figures"]
    assert [b["node"] for b in figures["boot"]] == [0, 1]
    lat = {r["name"]: r for r in figures["latency"]["rows"]}
    local, remote = lat["local shared read"], lat["remote read, miss, 1 hop"]
    hit = lat["remote read, hit in the network cache"]
    # The ring costs: a remote miss takes several times a local read, in both modes; a network
    # cache hit costs about a local read, and NUMA mode has no network cache to hit.
    assert remote["ncc_cycles"] > 3 * local["ncc_cycles"] and remote["numa_cycles"] > 3 * local["numa_cycles"]
    assert hit["ncc_cycles"] < remote["ncc_cycles"] / 3 and hit["numa_cycles"] > remote["numa_cycles"] / 2
    # Each row alone: a line's first miss, read uncached on the fast path, is not slower than NUMA
    # mode's read, which the microcode sends (it was, while the row before still recalled a copy
    # at the line's home).
    assert remote["ncc_cycles"] <= remote["numa_cycles"]
    rdma = {(r["op"], r["size"]): r for r in figures["rdma"]["rows"]}
    assert {op for op, _ in rdma} == {"send", "write", "read"}
    for op in ("send", "write", "read"):
        # Cycle-counted by the agents: small messages cost microseconds, and a 64 KiB message
        # takes at least its time on the wire (125 MB/s) and longer than a 4-byte one.
        assert 1 < rdma[op, 4]["latency_us"] < rdma[op, 65536]["latency_us"]
        assert 0 < rdma[op, 65536]["bandwidth_MBps"] < 125
    kernels = {(k["kernel"], k["workers"], k["mode"]): k for k in figures["kernels"]}
    assert set(kernels) == {(k, w, m) for k in ("jacobi", "matmul") for w, m in ((1, "ncc"), (2, "ncc"), (2, "numa"))}
    # Matrix multiply reuses remote rows of B: the network cache makes NCC-NUMA faster than NUMA.
    assert kernels[("matmul", 2, "ncc")]["cycles"] < kernels[("matmul", 2, "numa")]["cycles"]
    for k in kernels.values():
        assert k["compute"] > 0 and k["memory"] > 0 and k["cycles"] >= k["compute"] + k["memory"]
    text = (out / "demo.md").read_text()
    assert "Access latency" in text and "RDMA ping-pong" in text and "Matrix multiply" in text


def test_a_failing_run_names_the_step_and_the_node(tmp_path):
    demo = Demo(nodes=2, out=tmp_path / "report", log=lambda m: None, run_root=tmp_path / "runs")
    demo.build()
    amap = demo.card.address_map()
    traces = tmp_path / "traces"
    traces.mkdir()
    trace.write_trace(traces / "node0.trace", 0, [trace.read_access(0x40), trace.barrier(1)])
    beyond = amap.private_base + amap.private_bytes + 0x40  # in the window, in no memory
    trace.write_trace(traces / "node1.trace", 1, [trace.read_access(beyond), trace.barrier(1)])
    with pytest.raises(DemoError, match=r"bad-access .*node 1: 1 host-port access\(es\) answered with an error"):
        demo.simulate("bad-access", trace_dir=traces)


def test_the_demo_needs_a_ring():
    proc = subprocess.run(CLI + ["demo", "--nodes", "1"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("numavia demo: error: argument --nodes: '1' is not a ring size (2..64)")
