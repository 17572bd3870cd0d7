"""numavia bench pcie: the endpoint's figures are measured, plausible and reported."""

import json

from numavia.bench import pcie


def test_pcie_figures_and_report(tmp_path):
    figures = pcie.measure()
    # One dword a cycle is the datapath's ceiling; headers and splitting cost a little.
    for name in ("dma_read_bytes_per_cycle", "dma_write_bytes_per_cycle", "bar2_write_bytes_per_cycle"):
        assert 2.5 < figures[name] <= 4.0, name
    assert figures["dma_write_bytes_per_cycle"] > figures["dma_read_bytes_per_cycle"]  # bigger TLPs
    # A longer read costs its extra dwords, and a BAR read is tens of cycles, not hundreds.
    assert (
        figures["bar2_read_4B_round_trip_cycles"]
        < figures["bar2_read_64B_round_trip_cycles"]
        < figures["bar2_read_256B_round_trip_cycles"]
        < 100
    )
    assert figures["dma_read_4B_command_to_data_cycles"] > figures["dma_read_host_turnaround_cycles"]
    # Through the whole card: BAR2 adds the local access controller and its memory to the
    # endpoint's round trip; the doorbell's descriptor read comes before its status write-back.
    assert figures["card_bar0_read_4B_round_trip_cycles"] >= figures["bar0_read_4B_round_trip_cycles"]
    for nbytes in (4, 64, 256):
        assert (
            figures[f"card_bar2_read_{nbytes}B_round_trip_cycles"] > figures[f"bar2_read_{nbytes}B_round_trip_cycles"]
        )
    assert (
        0 < figures["card_doorbell_to_descriptor_read_cycles"] < figures["card_doorbell_to_status_write_cycles"] < 1000
    )
    # A 1 KiB send reads its data over PCIe (at most a dword a cycle) and pays the host's turnaround.
    instant = figures["card_via_send_1KiB_doorbell_to_frame_end_cycles_host_0"]
    assert 1024 // 4 < instant < figures["card_via_send_1KiB_doorbell_to_frame_end_cycles_host_100"]
    for row in pcie.link_equivalents(figures):
        assert row["achieved_mb_s"] == min(row["endpoint_mb_s"], row["link_mb_s"])
    text = pcie.report(figures, tmp_path)
    assert "900" in text and (tmp_path / "pcie.png").stat().st_size > 0
    assert json.loads((tmp_path / "pcie.json").read_text())["figures"]["sim"] == figures
