"""The node model's top: port parsing, the wrapper around one node, the C++ port table."""

import pytest

from numavia.soc import model_top

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

AMARANTH = """
module numavia_card(clk, rst, host__req__valid, rx);
  input clk;
  input rst;
  input host__req__valid;
  input [16:0] rx;
endmodule
"""


def test_parse_ports():
    ports = model_top.parse_ports(NODE, "numavia_node")
    assert model_top.Port("input", 30, "hostbridge_adr") in ports
    assert model_top.Port("output", 1, "hostbridge_ack") in ports
    assert len(ports) == 7
    card = model_top.parse_ports(AMARANTH, "numavia_card")
    assert model_top.Port("input", 17, "rx") in card and len(card) == 4


def test_parse_ports_of_missing_module():
    with pytest.raises(ValueError, match="not found"):
        model_top.parse_ports(NODE, "other")


def test_top_brings_out_the_strap_and_ties_sim_trace():
    ports = model_top.parse_ports(NODE, "numavia_node")
    text = model_top.model_verilog("numavia_node", ports, "numavia_node_model")
    assert text.count("numavia_node node (") == 1
    assert "input  wire [5:0] node_id_strap" in text and ".node_id_strap(node_id_strap)" in text
    assert ".sim_trace(1'b0)" in text and "wire sim_trace" not in text


def test_amaranth_names_lose_their_double_underscores():
    ports = model_top.parse_ports(AMARANTH, "numavia_card")
    text = model_top.model_verilog("numavia_card", ports, "numavia_card_model")
    assert "input  wire host_req_valid" in text and ".host__req__valid(host_req_valid)" in text


def test_ports_header_types_follow_widths():
    ports = model_top.parse_ports(NODE, "numavia_node")
    header = model_top.ports_header(ports, "numavia_node_model", {"sys_clk": 10_000}, 6)
    assert "IData *hostbridge_adr;" in header and "CData *hostbridge_ack;" in header
    assert "CData *sys_rst;" in header and "sys_clk;" not in header.split("struct NodePorts")[1].split("};")[0]
    assert "n->serial_source_data = &top->serial_source_data;" in header
    assert "#define NV_MAX_NODES 64" in header and "#define NV_ETHERNET 0" in header
    assert "#define NV_SYS_PERIOD_PS 10000ull" in header
    assert '{"sys", 10000, &top->sys_clk}' in header
    with pytest.raises(ValueError, match="no period"):
        model_top.ports_header(ports, "numavia_node_model", {}, 6)


def test_ports_header_with_ethernet():
    ports = model_top.parse_ports(
        NODE.replace("sys_rst\n", "sys_rst,\n    input  wire          eth_clk\n"), "numavia_node"
    )
    header = model_top.ports_header(ports, "numavia_node_model", {"sys_clk": 10_000, "eth_clk": 8000}, 6)
    assert "#define NV_ETHERNET 1" in header and "#define NV_ETH_PERIOD_PS 8000ull" in header
    assert header.index('{"sys", 10000') < header.index('{"eth", 8000')
