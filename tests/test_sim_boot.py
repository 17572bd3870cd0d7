"""End to end: SoC + card + firmware booting in rings of simulated nodes."""

import threading
import time

import pytest
from support.ring_sim import build, free_port_range, served_cli

from numavia.base import codegen, regmap
from numavia.bridge import BridgeError, HostBridge
from numavia.soc import sim

pytestmark = pytest.mark.slow


def logs(run_dir, nodes):
    return [(run_dir / f"node{i}.log").read_text() for i in range(nodes)]


def test_two_nodes_boot_with_identity_read_over_the_bus(tmp_path):
    code, summary = sim.run(build(2), tmp_path, quiet=True, max_cycles=2_000_000)
    assert code == 0 and summary["reason"] == "every node is ready"
    major, minor, patch = regmap.HW_VERSION
    for node, text in enumerate(logs(tmp_path, 2)):
        assert (
            f"card: id {regmap.CARD_ID:#010x} version {major}.{minor}.{patch} clock 100000000 Hz, with VIA engine"
        ) in text
        assert "card: scratch register ok" in text
        assert f"card: node id strap {node}, node id set to {node} (read back {node})" in text
        program = codegen.microcode_program()
        assert (f"card: microcode loaded and verified ({len(program.words)} words, crc {program.crc32:#010x})") in text
        assert f"{sim.READY_MARKER} (node {node})" in text
        assert summary["marker_cycles"][node] is not None


def test_firmware_boots_on_a_card_built_without_via(tmp_path):
    # The small-FPGA card (`numavia sim --no-via`, CardConfig(via=False)): the firmware, built for
    # it without the VIA manager, reads CTRL.FEATURES and reports the card without VIA;
    # `numavia status` shows the card's features and leaves out the VIA counters.
    build(1, via=False)  # cached model; the CLI below finds it
    with served_cli(tmp_path, 1, "--no-via") as numavia:
        status = numavia("status")
    assert status.returncode == 0, status.stderr
    assert "| numa | caches a line at | features |" in status.stdout
    assert "| off  | second miss      | -        |" in status.stdout  # the allocation filter is on
    without_via = [c for c in regmap.ERROR_COUNTERS if c[0] != "via"]
    assert f"error counters ({len(without_via) + 1} per node): all zero" in status.stdout
    text = (tmp_path / "run" / "node0.log").read_text()
    assert "clock 100000000 Hz, without VIA engine" in text
    assert "card: microcode loaded and verified" in text
    assert f"{sim.READY_MARKER} (node 0)" in text


def test_the_cache_at_switch_reaches_the_card(tmp_path):
    # `numavia sim --cache-at first` sets the board switch MODE_STRAP.CACHE_FIRST_MISS; the
    # firmware applies it at boot and `numavia status` reads it back from the card's CTRL.
    build(1, via=False)
    with served_cli(tmp_path, 1, "--no-via", "--cache-at", "first") as numavia:
        status = numavia("status")
    assert status.returncode == 0, status.stderr
    assert "| off  | first miss       | -        |" in status.stdout
    text = (tmp_path / "run" / "node0.log").read_text()
    assert "card: the network cache takes remote lines at their first miss, as the board switch says" in text
    assert "NUMA mode" not in text


def test_runs_are_deterministic(tmp_path):
    results = []
    for attempt in ("a", "b"):
        run_dir = tmp_path / attempt
        code, summary = sim.run(build(2), run_dir, quiet=True, max_cycles=2_000_000)
        assert code == 0
        results.append((summary["cycles"], summary["marker_cycles"], logs(run_dir, 2)))
    assert results[0] == results[1]


def test_cycle_limit_stops_the_run_and_says_so(tmp_path):
    code, summary = sim.run(build(2), tmp_path, quiet=True, max_cycles=2000)
    assert code == 3
    assert summary["reason"] == "cycle limit reached"
    assert summary["marker_cycles"] == [None, None]


def test_host_bridge_reaches_the_card_and_reports_bus_errors(tmp_path):
    b = build(2)
    port = free_port_range(2)
    ring = sim.start(b, tmp_path, bridge_port=port, serve=True, until_disconnect=True, quiet=True)
    try:
        card = regmap.CARD
        base = 0x8000_0000
        for _ in range(100):
            try:
                bridge = HostBridge(port + 1)
                break
            except BridgeError:
                time.sleep(0.1)
        with bridge:
            assert bridge.read(base + card.address("ctrl", "ID")) == regmap.CARD_ID
            scratch = base + card.address("ctrl", "SCRATCH")
            bridge.write(scratch, 0xC0FFEE01)
            assert bridge.read(scratch) == 0xC0FFEE01
            assert bridge.read(base + card.address("ctrl", "NODE_ID_STRAP")) == 1
            with pytest.raises(BridgeError, match="bus error reading"):
                bridge.read(base + 0xFF00)  # inside the card window, no register there
            with pytest.raises(BridgeError, match="bus error writing"):
                bridge.write(base + card.address("ctrl", "ID"), 0)  # read-only register
            assert bridge.read(scratch) == 0xC0FFEE01  # nothing lost, the bridge still works
            # Threads may share a bridge (a benchmark polls a node another thread waits on).
            values = {}

            def hammer(k):
                values[k] = [bridge.read(base + card.address("ctrl", "ID")) for _ in range(20)]
                bridge.write(scratch, k)

            threads = [threading.Thread(target=hammer, args=(k,)) for k in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert all(v == [regmap.CARD_ID] * 20 for v in values.values()) and bridge.read(scratch) in range(3)
        assert ring.wait(timeout=60) == 0
        assert sim.summarize(ring)["reason"] == "the host disconnected"
    finally:
        ring.kill()
