"""Cluster top generation: port parsing, per-node wiring, the C++ port table."""

import pytest

from numavia.soc import cluster

NODE = """
module numavia_node (
    output wire          hostbridge_ack,
    input  wire   [29:0] hostbridge_adr,
    input  wire    [5:0] node_id_strap,
    output wire    [7:0] serial_source_data,
    input  wire          sim_trace,
    input  wire          sys_clk,
    input  wire          sys_rst
);
endmodule
"""


def test_parse_ports():
    ports = cluster.parse_ports(NODE, "numavia_node")
    assert cluster.Port("input", 30, "hostbridge_adr") in ports
    assert cluster.Port("output", 1, "hostbridge_ack") in ports
    assert len(ports) == 7


def test_parse_ports_of_missing_module():
    with pytest.raises(ValueError, match="not found"):
        cluster.parse_ports(NODE, "other")


def test_cluster_ties_straps_and_shares_clock():
    ports = cluster.parse_ports(NODE, "numavia_node")
    text = cluster.cluster_verilog("numavia_node", ports, 3, 6)
    assert text.count("numavia_node node") == 3
    for i in range(3):
        assert f".node_id_strap(6'd{i})" in text
        assert f"input  wire [29:0] n{i}_hostbridge_adr" in text
        assert f"output wire [7:0] n{i}_serial_source_data" in text
    assert "n0_sys_clk" not in text and "n0_node_id_strap" not in text


def test_too_many_nodes_for_the_strap_width():
    ports = cluster.parse_ports(NODE, "numavia_node")
    with pytest.raises(ValueError, match="do not fit"):
        cluster.cluster_verilog("numavia_node", ports, 65, 6)


def test_ports_header_types_follow_widths():
    ports = cluster.parse_ports(NODE, "numavia_node")
    header = cluster.ports_header(ports, 2, {"sys_clk": 10_000})
    assert "IData *hostbridge_adr;" in header and "CData *hostbridge_ack;" in header
    assert "n[1].serial_source_data = &top->n1_serial_source_data;" in header
    assert "#define NV_NODES 2" in header
    assert '{"sys", 10000, &top->sys_clk}' in header
    with pytest.raises(ValueError, match="no period"):
        cluster.ports_header(ports, 2, {})
