"""The card's co-simulation inputs for the CMake project in ``renode/cosim``.

The project verilates the *same* card Verilog the SoC build instantiates: its path and SHA-256
come from :func:`numavia.gateware.build.card_verilog` with the SoC's card configuration (the
cached build the SoC uses), are written to ``card.cmake``, and CMake refuses to build when the
file's hash no longer matches. Around the card, a generated wrapper gives Renode's Wishbone
model one bus: it decodes the absolute addresses of the card's two windows (from csr.json) to
the card's ``regs`` and ``window`` ports, and brings the ring link and straps out flat; with the
VIA engine, also its DMA initiator (byte addresses for Renode's system bus) and its Ethernet
frame streams. Every card port must be handled here, so a new one stops generation by name.
"""

import hashlib
from pathlib import Path

from numavia.base import paths, regmap
from numavia.base.params import BUS_ADDR_WIDTH
from numavia.gateware import build as gateware_build
from numavia.gateware.card import card_signature
from numavia.gateware.sci_layouts import SymbolLayout
from numavia.gateware.via_layouts import EthBeat
from numavia.soc import amaranth_instance

from .soc import CARD_REGIONS, RenodeError

WRAPPER_TOP = "numavia_card_cosim"
WRAPPER_FILE = f"{WRAPPER_TOP}.v"
CMAKE_INPUTS_FILE = "card.cmake"
HEADER_FILE = "numavia_cosim.h"
COSIM_PROJECT_DIR = paths.renode_dir() / "cosim"
CONNECTOR_SOURCE = paths.renode_dir() / "RingLink.cs"

#: Protocol actions the card model understands beyond Renode's own (ActionType stops at 100);
#: RingLink.cs declares the same numbers (a test compares them).
PROTOCOL_ACTIONS = {
    "STEP": 200,  # address: cycles | STEP_STOP_AT_BUS_END -> cycles run, symbols sent, flags
    "SET_CYCLE": 201,  # value: the ring's cycle count, for a card that joins a running ring
    "RING_TX_POP": 202,  # -> next symbol the card sent, with the cycle it left at and PRESENT_BIT
    "RING_RX_PUSH": 203,  # value: a symbol for the card's receiver, with the cycle it arrives at
    "SET_STRAPS": 204,  # value: node id | mode << 8; the card is reset, as at power-up
    "BUS_READ": 205,  # address: byte address; value: width << BUS_WIDTH_SHIFT
    "BUS_WRITE": 206,  # address: byte address; value: data | width << BUS_WIDTH_SHIFT
    "BUS_RESULT": 207,  # -> the access's data with PRESENT_BIT once the card acknowledged it
    "ETH_TX_POP": 208,  # -> next word of a frame the card sent (ETH_WORD_*), with PRESENT_BIT
    "ETH_RX_PUSH": 209,  # value: next word of a frame for the card's receiver (ETH_WORD_*)
    "MODEL_ID": 210,  # -> MODEL_ID_DIGITS hex digits of the card Verilog's SHA-256, as a number
}
#: How much of the card Verilog's SHA-256 names a built model (hex digits; 64 bits).
MODEL_ID_DIGITS = 16
#: Bit that marks "there was something" in a *_POP answer (above any payload bit).
PRESENT_BIT = 63
#: STEP's address field: bit asking the step to end on the cycle the CPU access completes.
STEP_STOP_AT_BUS_END_BIT = 32
#: STEP's answer: cycles run in bits 31:0, symbols sent from this shift (16 bits), then flags.
STEP_SENT_SHIFT = 32
STEP_LATE_BIT = 60  # a symbol reached the card after its cycle (never in lockstep)
STEP_ETH_SENT_BIT = 61  # frame words wait in ETH_TX_POP
STEP_BUS_DONE_BIT = 62  # the CPU access completed; BUS_RESULT has its data
BUS_WIDTH_SHIFT = 32
#: A frame travels as 32-bit words, first byte in bits 7:0; the word says how many of its bytes
#: are valid and whether it ends the frame.
ETH_WORD_BYTES_SHIFT = 32  # bytes - 1, two bits
ETH_WORD_LAST_BIT = 34
#: The card's interrupt output, as the co-simulation interrupt the model raises and lowers (the
#: number Renode's interrupt messages carry); the platform wires it to csr.json's card line.
IRQ_SIGNAL = 0

#: The constants above, as C++ and C# name them (NV_<name>, the CamelCase of <name>).
PROTOCOL_CONSTANTS = {
    name: globals()[name]
    for name in (
        "PRESENT_BIT",
        "STEP_STOP_AT_BUS_END_BIT",
        "STEP_SENT_SHIFT",
        "STEP_LATE_BIT",
        "STEP_ETH_SENT_BIT",
        "STEP_BUS_DONE_BIT",
        "BUS_WIDTH_SHIFT",
        "ETH_WORD_BYTES_SHIFT",
        "ETH_WORD_LAST_BIT",
        "IRQ_SIGNAL",
    )
}


def card_verilog(soc_config, log=None):
    """Path of the card Verilog the SoC of ``soc_config`` (a ``SimConfig``) instantiates: the
    same cache entry ``soc/card_core.py`` adds to the SoC's sources."""
    return gateware_build.card_verilog(soc_config.card_config(), log=log)


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def model_id(verilog_path):
    """What a model built from ``verilog_path`` answers to MODEL_ID, in hex."""
    return sha256(verilog_path)[:MODEL_ID_DIGITS]


def cmake_inputs(verilog_path, nodes):
    """``card.cmake``: where the card Verilog is, the hash it must still have, and how many
    copies of the model to make (one per node)."""
    path = Path(verilog_path).resolve()
    return (
        "\n".join(
            [
                "# Generated by `numavia renode`: the card Verilog the SoC build uses. Do not edit.",
                f'set(NUMAVIA_CARD_VERILOG "{path}")',
                f'set(NUMAVIA_CARD_VERILOG_SHA256 "{sha256(path)}")',
                f'set(NUMAVIA_COSIM_TOP "{WRAPPER_TOP}")',
                f"set(NUMAVIA_RING_NODES {nodes})",
            ]
        )
        + "\n"
    )


def header(soc, card_config):
    """C++ constants of the wrapper and protocol, from the same sources as everything else."""
    lines = ["// Generated by `numavia renode`. Do not edit.", "#pragma once", ""]
    lines += [f"#define NV_ACTION_{name} {value}" for name, value in PROTOCOL_ACTIONS.items()]
    lines += [f"#define NV_{name} {value}" for name, value in PROTOCOL_CONSTANTS.items()]
    lines += [
        f"#define NV_RING_SYMBOL_BITS {SymbolLayout.size}",
        f"#define NV_RING_FRAME_BIT {SymbolLayout['frame'].offset}",
        f"#define NV_CLOCK_HZ {soc.clock_hz}",
        f"#define NV_CARD_HAS_VIA {int(bool(card_config.via))}",
    ]
    if card_config.via:
        lines += [f"#define NV_ETH_BEAT_{name.upper()}_LSB {EthBeat[name].offset}" for name, _ in EthBeat]
    return "\n".join(lines) + "\n"


def _port_connections(ports, card_config):
    """``.port(expr)`` for every card port, or an error naming a port the wrapper cannot drive."""
    widths = {"regs": regmap.CARD.addr_width, "window": card_config.window_addr_width}
    connections = []
    for name, direction, width in ports:
        # No host drives the second host port in Renode: no requests, responses always taken.
        idle_host_inputs = {
            "req__valid": "1'b0",
            "req__payload": f"{width}'b0",
            "wdata__valid": "1'b0",
            "wdata__payload": f"{width}'b0",
            "resp__ready": "1'b1",
        }
        window, _, signal = name.partition("__")
        if window == "dma":
            # The VIA engine's initiator: byte addresses for Renode's system bus, classic cycles
            # (each beat acked on its own is a valid answer to a burst).
            expr = {
                "cyc": "dma_cyc",
                "stb": "dma_stb",
                "we": "dma_we",
                "adr": "dma_adr_word",
                "dat_w": "dma_dat_w",
                "sel": "dma_sel_card",
                "dat_r": "dma_dat_r",
                "ack": "dma_ack",
                "err": "1'b0",
                "cti": "",
                "bte": "",
            }.get(signal)
        elif window in ("eth_tx", "eth_rx"):
            expr = {"valid": f"{window}_valid", "ready": f"{window}_ready", "payload": f"{window}_payload"}.get(signal)
        elif window in widths:
            expr = {
                "cyc": f"{window}_sel_q & wb_cyc",
                "stb": f"{window}_sel_q & wb_stb",
                "we": "wb_we",
                "adr": f"{window}_adr[{widths[window] - 1}:0]",
                "dat_w": "wb_dat_w",
                "sel": "wb_sel",
                "dat_r": f"{window}_dat_r",
                "ack": f"{window}_ack",
                "err": f"{window}_err",
            }.get(signal)
        elif window == "host" and direction == "i":
            expr = idle_host_inputs.get(signal)
        elif window == "host":
            expr = ""  # the second host port is idle in Renode: its outputs are left open
        else:
            # irq: the card model reports its changes through Renode's co-simulation interrupts.
            expr = {
                "rx": "ring_rx",
                "tx": "ring_tx",
                "node_id_strap": "node_id_strap",
                "mode_strap": "mode_strap",
                "irq": "irq",
            }.get(name)
        if expr is None:
            raise RenodeError(f"card port {name} has no connection in the co-simulation wrapper (numavia.renode.cosim)")
        connections.append(f".{name}({expr})")
    return connections


def wrapper_verilog(soc, card_config):
    """The co-simulation top: one 32-bit Wishbone (word addresses) decoded to the card's windows."""
    ports = amaranth_instance.port_list(card_signature(card_config))
    width = dict((n, w) for n, _, w in ports)
    lines = [
        "// Generated by `numavia renode`: Renode's co-simulation top around the card. Do not edit.",
        "// wb_adr is the word address of the absolute bus address (useAbsoluteAddress in the .repl).",
        f"module {WRAPPER_TOP} (",
        "  input clk, input rst,",
        f"  input [{BUS_ADDR_WIDTH - 1}:0] wb_adr, input [31:0] wb_dat_w, output [31:0] wb_dat_r,",
        "  input [3:0] wb_sel, input wb_cyc, input wb_stb, input wb_we, output wb_ack,",
        f"  input [{width['rx'] - 1}:0] ring_rx, output [{width['tx'] - 1}:0] ring_tx,",
        f"  input [{regmap.NODE_ID_BITS - 1}:0] node_id_strap, input [{width['mode_strap'] - 1}:0] mode_strap"
        + ("," if card_config.via else ""),
    ]
    if card_config.via:
        lines += [
            "  // VIA: DMA initiator into the system bus (host memory; word addresses, as the integration",
            "  // library's Wishbone initiator takes them), Ethernet frame streams, the interrupt to the CPU.",
            "  output dma_cyc, output dma_stb, output dma_we, output [31:0] dma_adr, output [31:0] dma_dat_w,",
            "  input [31:0] dma_dat_r, output [7:0] dma_sel, input dma_ack,",
            f"  output eth_tx_valid, input eth_tx_ready, output [{width['eth_tx__payload'] - 1}:0] eth_tx_payload,",
            f"  input eth_rx_valid, output eth_rx_ready, input [{width['eth_rx__payload'] - 1}:0] eth_rx_payload,",
            "  output irq",
        ]
    lines.append(");")
    if card_config.via:
        dma_adr = width["dma__adr"]
        padding = 32 - dma_adr
        zeros = f"{padding}'b0, " if padding else ""  # Verilog has no zero-width replication
        lines += [
            f"  wire [{dma_adr - 1}:0] dma_adr_word; wire [3:0] dma_sel_card;",
            f"  assign dma_adr = {{{zeros}dma_adr_word}};",
            "  assign dma_sel = {4'b0, dma_sel_card};",
        ]
    regions = {r.name: r for r in soc.card}
    for window, region in zip(("regs", "window"), CARD_REGIONS):
        r = regions[region]
        lines += [
            f"  // {window}: csr.json region {region}, {r.base:#010x} + {r.size:#x}",
            f"  wire {window}_sel_q = wb_adr >= {BUS_ADDR_WIDTH}'h{r.base // 4:x} && wb_adr < {BUS_ADDR_WIDTH}'h{(r.base + r.size) // 4:x};",
            f"  wire [{BUS_ADDR_WIDTH - 1}:0] {window}_adr = wb_adr - {BUS_ADDR_WIDTH}'h{r.base // 4:x};",
            f"  wire [31:0] {window}_dat_r; wire {window}_ack, {window}_err;",
        ]
    lines += [
        "  // Outside both windows nothing answers on a board (bus error); here the access is acked",
        "  // with zero, so a stray access cannot hang the CPU that made it.",
        "  assign wb_ack = regs_sel_q ? (regs_ack | regs_err) : window_sel_q ? (window_ack | window_err)"
        " : (wb_cyc & wb_stb);",
        "  assign wb_dat_r = regs_sel_q ? regs_dat_r : window_sel_q ? window_dat_r : 32'b0;",
        "  numavia_card card (",
        "    .clk(clk), .rst(rst),",
    ]
    connections = _port_connections(ports, card_config)
    lines += [f"    {c}," for c in connections[:-1]] + [f"    {connections[-1]}", "  );", "endmodule"]
    return "\n".join(lines) + "\n"
