"""Renode files generated from csr.json: content, syntax, determinism, golden files, the card
co-simulation's link to the SoC's card Verilog, and the entry points when Renode is missing.

Regenerate the golden files after an intended change with
``.venv/bin/pytest tests/test_renode.py --update-golden`` and review the diff.
"""

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from numavia.base.errors import NumaviaError
from numavia.renode import (
    RING_DELAY_CYCLES,
    ROBOT_FILE,
    cosim,
    firmware_images,
    generate,
    memory_images,
    render,
    script,
)
from numavia.renode.platform import CARD_NAME, CARD_TYPE
from numavia.renode.soc import CSR_PAGE_BYTES, RenodeError
from numavia.renode.syntax import SyntaxProblem, parse_repl, parse_resc
from numavia.soc.firmware import jump_to
from numavia.soc.sim import READY_MARKER, SimConfig

HERE = Path(__file__).parent
FIXTURE = HERE / "fixtures" / "renode" / "csr.json"
GOLDEN = HERE / "golden" / "renode"
NODES = 4
CARD_CONFIG = SimConfig().card_config()
REPL, RESC = script.REPL_FILE, script.RESC_FILE
#: What a model of the fixture's card Verilog would answer (any 16 hex digits do here).
MODEL_ID = "0123456789abcdef"


def fixture_csr():
    return json.loads(FIXTURE.read_text())


def without_ethernet(csr):
    csr = copy.deepcopy(csr)
    del csr["csr_bases"]["via_mac"]
    return csr


def with_litex_ethmac(csr):
    """The fixture's SoC with a LiteEth MAC of its own (CSRs, packet buffer, PHY CSRs, interrupt)
    instead of the VIA engine's MAC core: what a LiteX SoC with `add_ethernet` puts in csr.json."""
    csr = without_ethernet(csr)
    csr["csr_bases"].update(ethmac=0xF0002000, ethphy=0xF0002800)
    csr["memories"]["ethmac"] = {"base": 0xB0000000, "size": 0x2000, "type": "io"}
    csr["constants"].update(ethmac_interrupt=2, ethmac_rx_slots=2, ethmac_tx_slots=2, ethmac_slot_size=2048)
    return csr


def files_for(csr, nodes=NODES, **kwargs):
    return render(
        csr, nodes=nodes, card_config=CARD_CONFIG, ready_marker=READY_MARKER, card_model_id=MODEL_ID, **kwargs
    )


@pytest.fixture(scope="module")
def files():
    return files_for(fixture_csr())


@pytest.fixture(scope="module")
def platform(files):
    return parse_repl(files[REPL])


# --- The platform follows csr.json ----------------------------------------------------------------


def placed_addresses(platform):
    """Every address the platform registers a peripheral at or silences."""
    registered = {r.base for e in platform.values() for r in e.registrations}
    silenced = {int(m, 16) for e in platform.values() for line in e.init for m in re.findall(r"<(0x[0-9a-f]+) ", line)}
    return registered | silenced


def test_every_csr_peripheral_is_at_its_csr_json_address(platform):
    csr = fixture_csr()
    for name, base in csr["csr_bases"].items():
        assert base in placed_addresses(platform), f"{name} at {base:#x} is not in the platform"
    for name in ("ctrl", "uart", "timer0"):
        assert platform[name].registrations[0].base == csr["csr_bases"][name]
    assert {"identifier_mem", "via_mac"} <= set(csr["csr_bases"])  # the two silenced blocks


def test_every_interrupt_goes_to_its_csr_json_line(platform):
    constants = fixture_csr()["constants"]
    irqs = {
        name[: -len("_interrupt")]: line
        for name, line in constants.items()
        if name.endswith("_interrupt") and not name.startswith("config_")
    }
    assert set(irqs) == {"uart", "timer0", CARD_NAME}  # the card's: the VIA engine's wake-up
    for name, line in irqs.items():
        assert platform[name].irqs == [("cpu", line)], name
    connected = sorted(line for e in platform.values() for _, line in e.irqs)
    assert connected == sorted(irqs.values())


def test_timer_registers_where_renodes_model_decodes_them():
    """Zephyr's timer driver reads the uptime registers: csr.json's timer must be laid out as
    Renode's LiteX_Timer_CSR32 decodes it, or generation stops naming the register."""
    from numavia.renode.platform import TIMER_CSR32_OFFSETS

    csr = fixture_csr()
    base = csr["csr_bases"]["timer0"]
    assert {
        name[len("timer0_") :]: r["addr"] - base
        for name, r in csr["csr_registers"].items()
        if name.startswith("timer0_")
    } == TIMER_CSR32_OFFSETS
    csr["csr_registers"]["timer0_uptime_cycles"]["addr"] += 4
    with pytest.raises(RenodeError, match="timer0 in csr.json has uptime_cycles at 0x28, where Renode's"):
        files_for(csr)
    csr["csr_registers"]["timer0_uptime_cycles"]["addr"] -= 4
    csr["csr_registers"]["timer0_spare"] = {"addr": base + 0x2C, "size": 1, "type": "rw"}
    with pytest.raises(RenodeError, match="spare at 0x2c"):
        files_for(csr)


def test_card_interrupt_follows_csr_json():
    """The card's line is csr.json's, whatever it is; a card without one (no VIA engine) has none."""
    csr = fixture_csr()
    csr["constants"]["card_interrupt"] = 5
    assert parse_repl(files_for(csr)[REPL])[CARD_NAME].irqs == [("cpu", 5)]
    del csr["constants"]["card_interrupt"]
    assert parse_repl(files_for(csr)[REPL])[CARD_NAME].irqs == []


def test_memories_cpu_and_models(platform):
    csr = fixture_csr()
    for name in ("rom", "sram", "main_ram", "hostmem"):
        region = csr["memories"][name]
        assert platform[name].type == "Memory.MappedMemory"
        assert platform[name].registrations[0].base == region["base"]
        assert int(platform[name].properties["size"], 0) == region["size"]
    # One host memory, seen again uncached: the same Renode memory at both addresses.
    assert [r.base for r in platform["hostmem"].registrations] == [
        csr["memories"]["hostmem"]["base"],
        csr["memories"]["hostmem_uncached"]["base"],
    ]
    assert platform["cpu"].type == "CPU.VexRiscv"
    assert platform["cpu"].properties["cpuType"] == '"rv32im_zicsr_zifencei"'  # variant standard
    assert platform["timer0"].type == "Timers.LiteX_Timer_CSR32"  # 32-bit CSRs
    assert int(platform["timer0"].properties["frequency"]) == csr["constants"]["config_clock_frequency"]
    assert platform["uart"].type == "UART.LiteX_UART"
    assert platform["uart"].properties["txFifoCapacity"] == "0"  # each character leaves when written
    assert platform["ctrl"].type == "Miscellaneous.LiteX_SoC_Controller_CSR32"


def test_card_is_cosimulated_at_both_windows(platform):
    memories = fixture_csr()["memories"]
    card = platform[CARD_NAME]
    assert card.type == CARD_TYPE
    assert [(r.base, r.size) for r in card.registrations] == [
        (memories["card"]["base"], memories["card"]["size"]),
        (memories["shared"]["base"], memories["shared"]["size"]),
    ]
    # The ring clocks the card at the SoC's clock (RingLink.cs).
    assert int(card.properties["frequency"]) == fixture_csr()["constants"]["config_clock_frequency"]


def test_ethmac_in_csr_json_yields_the_litex_ethernet_model():
    csr = with_litex_ethmac(fixture_csr())
    files = files_for(csr)
    platform = parse_repl(files[REPL])
    mac = platform["ethmac"]
    assert mac.type == "Network.LiteX_Ethernet_CSR32"
    buffer = csr["memories"]["ethmac"]
    assert [(r.base, r.size, r.region) for r in mac.registrations] == [
        (csr["csr_bases"]["ethmac"], CSR_PAGE_BYTES, None),
        (buffer["base"], buffer["size"], "buffer"),
        (csr["csr_bases"]["ethphy"], CSR_PAGE_BYTES, "phy"),
    ]
    assert mac.irqs == [("cpu", 2)]
    assert platform["ethphy"].registrations[0].parent == "ethmac"
    ring = parse_resc(files[RESC])
    assert script.SWITCH_NAME in ring.externals
    for machine in ring.machines:
        assert ["connector", "Connect", "sysbus.ethmac", script.SWITCH_NAME] in ring.machine_commands(machine)


def test_via_mac_gives_every_card_its_mac(files):
    """The VIA engine owns the MAC (via_mac CSRs): frames enter and leave through the card, and
    the ring switches them by the MAC each card is given."""
    from numavia.base.via_frame import mac_address

    ring = parse_resc(files[RESC])
    assert ring.externals == [script.RING_NAME]
    for node, machine in enumerate(ring.machines):
        commands = ring.machine_commands(machine)
        mac = ":".join(f"{b:02x}" for b in mac_address(node))
        assert [f"sysbus.{CARD_NAME}", "MacAddress", f'"{mac}"'] in commands
    assert "ethmac" not in parse_repl(files[REPL])


def test_no_ethmac_no_ethernet():
    files = files_for(without_ethernet(fixture_csr()))
    assert "ethmac" not in parse_repl(files[REPL])
    ring = parse_resc(files[RESC])
    assert script.SWITCH_NAME not in ring.externals
    assert not any("MacAddress" in c.words for c in ring.commands)
    assert re.search(r"RDMA Ping Both Ways\n    Skip    this SoC has no Ethernet MAC", files[ROBOT_FILE])


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["csr_bases"].update(spi=0xF0003000), "spi"),
        (lambda c: c["memories"].update(hyperram={"base": 0x20000000, "size": 0x1000, "type": "cached"}), "hyperram"),
        (lambda c: c["memories"].pop("shared"), "shared"),
        (lambda c: c.update(with_litex_ethmac(c)) or c["csr_bases"].pop("ethphy"), "part of a LiteEth MAC"),
        (lambda c: c["memories"]["hostmem_uncached"].update(size=0x1000), "sizes differ"),
        (lambda c: c["memories"].pop("hostmem"), "without the region it is a window onto"),
        (lambda c: c["constants"].update(config_csr_data_width=16), "csr_data_width 16"),
    ],
)
def test_what_renode_cannot_model_stops_generation(change, message):
    csr = fixture_csr()
    change(csr)
    with pytest.raises(RenodeError, match=message):
        files_for(csr)


# --- The ring script and the Robot tests ---------------------------------------------------------------


def test_ring_script_builds_every_node(files):
    ring = parse_resc(files[RESC])
    assert ring.machines == [f"node{i}" for i in range(NODES)]
    assert ring.externals[0] == script.RING_NAME
    global_commands = [c.words for c in ring.commands if c.machine is None]
    assert ["emulation", "SetGlobalSerialExecution", "true"] in global_commands
    assert ["emulation", "SetGlobalQuantum", '"0.00001"'] in global_commands  # 1000 cycles at 100 MHz
    assert ["emulation", "CreateNumaviaRing", f'"{script.RING_NAME}"', str(RING_DELAY_CYCLES)] in global_commands
    assert ring.variables["card_model_id"] == f'"{MODEL_ID}"'
    rom = fixture_csr()["memories"]["rom"]["base"]
    for i, machine in enumerate(ring.machines):
        commands = ring.machine_commands(machine)
        assert commands[0] == ["machine", "LoadPlatformDescription", "$platform"]
        assert [f"sysbus.{CARD_NAME}", "NodeId", str(i)] in commands
        assert ["connector", "Connect", f"sysbus.{CARD_NAME}", script.RING_NAME] in commands
        assert ["sysbus", "LoadBinary", f"$firmware_{machine}", f"{rom:#x}"] in commands
        # Per-node image and card model, overridable; every node loads a model file of its own.
        assert ring.variables[f"firmware_{machine}"] == f"$ORIGIN/{script.FIRMWARE_FILE}"
        assert ring.variables[f"card_model_{machine}"] == f"$ORIGIN/cosim/build/{machine}/libVnumavia_card.so"
        # The model is loaded and checked before the strap is set (setting it talks to the model)
        # and before the card joins the ring.
        load = commands.index([f"sysbus.{CARD_NAME}", "SimulationFilePathLinux", f"$card_model_{machine}"])
        assert (
            load
            < commands.index([f"sysbus.{CARD_NAME}", "ExpectModel", "$card_model_id"])
            < commands.index([f"sysbus.{CARD_NAME}", "NodeId", str(i)])
            < commands.index(["connector", "Connect", f"sysbus.{CARD_NAME}", script.RING_NAME])
        )
    # The co-simulation plugin's assembly is loaded before the connector is compiled against it.
    words = [c.words for c in ring.commands]
    assert words.index(["python", f"\"import clr; clr.AddReference('{script.COSIMULATION_ASSEMBLY}')\""]) < words.index(
        ["include", f"$ORIGIN/{script.CONNECTOR_FILE}"]
    )


def test_quantum_and_ring_delay_reach_the_script():
    files = files_for(fixture_csr(), quantum_cycles=250, ring_delay=9)
    assert 'emulation SetGlobalQuantum "0.0000025"' in files[RESC]
    assert f'emulation CreateNumaviaRing "{script.RING_NAME}" 9' in files[RESC]


def test_a_node_can_run_an_image_of_its_own(tmp_path):
    image = tmp_path / "zephyr.bin"
    image.write_bytes(b"\x13\x00\x00\x00")
    every, per_node = firmware_images([f"2={image}"])
    assert every is None and per_node == {2: image}
    ring = parse_resc(files_for(fixture_csr(), node_images=per_node)[RESC])
    assert ring.variables["firmware_node2"] == "$ORIGIN/firmware_node2.bin"
    assert ring.variables["firmware_node1"] == "$ORIGIN/firmware.bin"
    with pytest.raises(RenodeError, match="node 7, but the ring's nodes are 0..3"):
        files_for(fixture_csr(), node_images={7: image})
    with pytest.raises(RenodeError, match="is not a file"):
        firmware_images([str(tmp_path / "missing.bin")])
    with pytest.raises(RenodeError, match="'x' is not a node number"):
        firmware_images([f"x={image}"])
    with pytest.raises(RenodeError, match="given already"):
        firmware_images([str(image), str(image)])


def test_a_zephyr_image_goes_to_main_ram_behind_the_roms_jump(tmp_path):
    """A resolved image fills more than the ROM: each memory's file is loaded at its csr.json base."""
    memories = fixture_csr()["memories"]
    zephyr = {"rom": jump_to(memories["main_ram"]["base"]), "main_ram": b"\x13\x00\x00\x00"}
    ring = parse_resc(files_for(fixture_csr(), node_images={1: zephyr})[RESC])
    assert ring.variables["firmware_node1"] == "$ORIGIN/firmware_node1.bin"
    assert ring.variables["firmware_main_ram_node1"] == "$ORIGIN/firmware_node1_main_ram.bin"
    assert "firmware_main_ram_node0" not in ring.variables
    commands = ring.machine_commands("node1")
    assert ["sysbus", "LoadBinary", "$firmware_node1", f"{memories['rom']['base']:#x}"] in commands
    assert ["sysbus", "LoadBinary", "$firmware_main_ram_node1", f"{memories['main_ram']['base']:#x}"] in commands
    # Every node's image the same way, and the files written are the images' bytes.
    ring = parse_resc(files_for(fixture_csr(), every_image=zephyr)[RESC])
    assert all(ring.variables[f"firmware_main_ram_node{n}"] == "$ORIGIN/firmware_main_ram.bin" for n in range(NODES))
    card_verilog = tmp_path / "card.v"
    card_verilog.write_text("module numavia_card; endmodule\n")
    generate(
        FIXTURE,
        tmp_path / "out",
        nodes=NODES,
        card_config=CARD_CONFIG,
        card_verilog=card_verilog,
        ready_marker=READY_MARKER,
        firmware=zephyr,
        node_images={1: zephyr},
    )
    for name, region in (
        ("firmware", "rom"),
        ("firmware_main_ram", "main_ram"),
        ("firmware_node1", "rom"),
        ("firmware_node1_main_ram", "main_ram"),
    ):
        assert (tmp_path / "out" / f"{name}.bin").read_bytes() == zephyr[region], name


def test_firmware_choices_are_those_of_numavia_sim(tmp_path):
    image = tmp_path / "zephyr.elf"
    image.write_bytes(b"\x7fELF")
    assert firmware_images(["zephyr"]) == ("zephyr", {})
    assert firmware_images([f"zephyr={image}", "1=bare-metal", "0=zephyr-shell"]) == (
        f"zephyr={image}",
        {1: "bare-metal", 0: "zephyr-shell"},
    )
    assert firmware_images([f"1=zephyr={image}"]) == (None, {1: f"zephyr={image}"})
    with pytest.raises(NumaviaError, match="choose bare-metal, zephyr, zephyr-shell or zephyr=PATH"):
        firmware_images([f"bare-metal={image}"])
    with pytest.raises(RenodeError, match="given already"):
        firmware_images(["zephyr", "bare-metal"])
    raw = tmp_path / "rom.bin"
    raw.write_bytes(b"\x13\x00\x00\x00")
    assert memory_images(firmware_images([str(raw)])[0], tmp_path) == {"rom": raw.read_bytes()}


ROBOT_CASES = (
    "Every Node Boots",
    "Remote Write Is Read Back On Every Other Node",
    "Write Purges Two Sharers",
    "RDMA Ping Both Ways",
    "Access Latencies From The Card Counter",
    "A Missing Card Model Is Named",
    "A Card Model Built From Other Verilog Is Refused",
    "A Node Whose Firmware Does Not Boot Is Named",
)


def robot_case(text, name):
    """The lines of test case ``name`` in a Robot file."""
    body = text.split(f"\n{name}\n", 1)[1]
    return re.split(r"\n(?=\S)", body, maxsplit=1)[0].splitlines()


def test_robot_tests_boot_every_node_and_probe_other_slices(files):
    text = files[ROBOT_FILE]
    assert [
        line for line in text.split("*** Test Cases ***")[1].splitlines() if line and not line[0].isspace()
    ] == list(ROBOT_CASES)
    assert f"${{READY}}          {READY_MARKER}\n" in text
    for i in range(NODES):
        assert f"Create Terminal Tester    sysbus.uart    machine=node{i}    timeout=${{timeout}}" in text
        assert f"Node Should Boot    node{i}    ${{uart{i}}}" in text
    probe = int(re.search(r"\$\{PROBE\}\s+(0x[0-9a-f]+)", text)[1], 16)
    shared = fixture_csr()["memories"]["shared"]["base"]
    slice_bytes = CARD_CONFIG.address_map().slice_bytes
    assert (probe - shared) // slice_bytes == 1  # node 1's slice, written from node 0
    remote = robot_case(text, "Remote Write Is Read Back On Every Other Node")
    # The writer reads its write back first (it has landed), then every other node reads it.
    assert [line.split()[3] for line in remote if "Word Should Be" in line] == [f"node{n}" for n in range(NODES)]
    purge = robot_case(text, "Write Purges Two Sharers")
    steps = [line.split("    ")[1:] for line in purge if "Word" in line]
    line = steps[0][2]
    assert (int(line, 16) - shared) // slice_bytes == 1 and all(step[2] == line for step in steps)
    first, second = steps[0][3], steps[3][3]
    assert [s[:2] for s in steps] == [
        ["Write Word On", "node1"],
        ["Word Should Be", "node0"],
        ["Word Should Be", "node2"],
        ["Write Word On", "node1"],
        ["Word Should Be", "node0"],
        ["Word Should Be", "node2"],
    ]
    assert first != second and [s[3] for s in steps] == [first, first, first, second, second, second]


def test_robot_bad_input_cases_name_what_is_wrong(files):
    text = files[ROBOT_FILE]
    missing = robot_case(text, "A Missing Card Model Is Named")
    assert "$card_model_node3=@${CURDIR}/cosim/build/no-such-model.so" in missing[0]
    assert "*card model *no-such-model.so does not exist*" in missing[1]
    other = robot_case(text, "A Card Model Built From Other Verilog Is Refused")
    assert '$card_model_id="0000000000000000"' in other[0] and "built from other card Verilog" in other[1]
    no_boot = robot_case(text, "A Node Whose Firmware Does Not Boot Is Named")
    assert "$firmware_node3=@" in no_boot[0] and "node3 did not print*    Boot Ring" in no_boot[1]


def test_small_rings_skip_what_they_cannot_hold():
    text = files_for(fixture_csr(), nodes=2)[ROBOT_FILE]
    assert robot_case(text, "Write Purges Two Sharers") == [
        "    Skip    two sharers and a home need a ring of three nodes"
    ]
    assert "RDMA Ping    node0    node1" in "\n".join(robot_case(text, "RDMA Ping Both Ways"))


# --- Syntax readers reject broken files ------------------------------------------------------------

GOOD_REPL_LINES = [
    "cpu: CPU.VexRiscv @ sysbus",
    '    cpuType: "rv32im_zicsr_zifencei"',
    "",
    "uart: UART.LiteX_UART @ sysbus 0xf0001800",
    "    -> cpu@0",
    "",
    "card: CoSimulated.NumaviaCard @ { sysbus <0x80000000, +0x10000>; sysbus <0x90000000, +0x2000000> }",
    "    useAbsoluteAddress: true",
]


def test_repl_reader_accepts_the_good_sample():
    entries = parse_repl("\n".join(GOOD_REPL_LINES) + "\n")
    assert entries["uart"].irqs == [("cpu", 0)]
    assert len(entries["card"].registrations) == 2


@pytest.mark.parametrize(
    "lineno, replacement, problem",
    [
        (4, '\tcpuType: "rv32im"', "tab"),
        (2, '      cpuType: "rv32im"', "indentation"),
        (4, "uart UART.LiteX_UART @ sysbus 0xf0001800", "expected `name: Type"),
        (4, "uart: @ sysbus 0xf0001800", "needs a type"),
        (4, "uart: UART.LiteX_UART @ sysbus 0xzz", "not a registration"),
        (5, "    -> plic@0", "unknown plic"),
        (5, "    -> cpu", "expected `key: value`"),
        (
            7,
            "card: CoSimulated.NumaviaCard @ { sysbus <0x80000000, +0x10000>; sysbus <0x90000000 }",
            "not a registration",
        ),
        (7, "card: CoSimulated.NumaviaCard @ { sysbus <0x80000000, +0x10000>", "registration list"),
        (7, "uart: UART.LiteX_UART @ sysbus 0xf0002000", "defined twice"),
        (8, "    useAbsoluteAddress true", "expected `key: value`"),
        (1, "    frequency: 100", "outside an entry"),
    ],
)
def test_repl_reader_rejects_broken_input(lineno, replacement, problem):
    lines = list(GOOD_REPL_LINES)
    lines[lineno - 1] = replacement
    with pytest.raises(SyntaxProblem, match=problem) as e:
        parse_repl("\n".join(lines) + "\n")
    assert e.value.lineno == lineno or problem.startswith("unknown")


GOOD_RESC_LINES = [
    ":name: ring",
    "$platform?=$ORIGIN/numavia_node.repl",
    'emulation CreateNumaviaRing "ring" 4',
    'mach create "node0"',
    "machine LoadPlatformDescription $platform",
    "connector Connect sysbus.card ring",
    "cpu PC 0x0",
    "mach clear",
]


def test_resc_reader_accepts_the_good_sample():
    ring = parse_resc("\n".join(GOOD_RESC_LINES) + "\n")
    assert ring.machines == ["node0"] and ring.externals == ["ring"]
    assert ring.variables["platform"] == "$ORIGIN/numavia_node.repl"


@pytest.mark.parametrize(
    "lineno, replacement, problem",
    [
        (2, "$platform?=numavia_node.repl", "not a path"),
        # Forms Renode itself refused: a variable inside an @ path is not expanded, and a variable on
        # the right of ?= is kept unexpanded.
        (2, "$platform?=@$ORIGIN/numavia_node.repl", "does not expand a variable inside an @ path"),
        (3, "$other?=$platform", "keeps a variable on the right"),
        (3, "include @$ORIGIN/RingLink.cs", "does not expand a variable inside an @ path"),
        (3, 'python "import os"', "only Python line"),
        (5, "machine LoadPlatformDescription $nowhere", "used before it is set"),
        (6, "connector Connect sysbus.card switch", "created external"),
        (7, "cpu PC", "cpu PC <address>"),
        (7, 'mach set "node9"', "unknown mach command"),
        (5, 'mach create "node0"', "created twice"),
        (4, 'mach create "node0', "unbalanced quotes"),
        (8, "start", "unknown command"),
        (
            4,
            'emulation SetGlobalQuantum "0.1"\nmach create "node0"\nemulation SetGlobalQuantum "0.1"',
            "before the machines",
        ),
        (3, ":description: late", "headers"),
        (4, '  mach create "node0"', "whitespace"),
    ],
)
def test_resc_reader_rejects_broken_input(lineno, replacement, problem):
    lines = list(GOOD_RESC_LINES)
    lines[lineno - 1] = replacement
    with pytest.raises(SyntaxProblem, match=problem):
        parse_resc("\n".join(lines) + "\n")


def test_machine_commands_need_a_machine():
    with pytest.raises(SyntaxProblem, match="needs a current machine"):
        parse_resc("sysbus LoadBinary @fw.bin 0x0\n")


# --- Determinism and golden files -----------------------------------------------------------------------


def _generate(out, card_verilog):
    firmware = card_verilog.parent / "firmware.bin"
    firmware.write_bytes(b"\x6f\x00\x00\x00")  # j . (any bytes do)
    return generate(
        FIXTURE,
        out,
        nodes=NODES,
        card_config=CARD_CONFIG,
        card_verilog=card_verilog,
        ready_marker=READY_MARKER,
        firmware=firmware,
    )


def test_same_inputs_same_bytes(tmp_path):
    verilog = tmp_path / "card.v"
    verilog.write_text("module numavia_card; endmodule\n")
    first = _generate(tmp_path / "a", verilog)
    second = _generate(tmp_path / "b", verilog)
    assert [p.relative_to(tmp_path / "a") for p in first] == [p.relative_to(tmp_path / "b") for p in second]
    assert len(first) == 9
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert (tmp_path / "a" / script.CONNECTOR_FILE).read_bytes() == cosim.CONNECTOR_SOURCE.read_bytes()
    assert (tmp_path / "a" / script.FIRMWARE_FILE).read_bytes() == (tmp_path / "firmware.bin").read_bytes()
    # The script checks the models against the card Verilog given here.
    assert f'$card_model_id?="{cosim.model_id(verilog)}"' in (tmp_path / "a" / RESC).read_text()
    assert f"set(NUMAVIA_RING_NODES {NODES})" in (tmp_path / "a" / "cosim" / cosim.CMAKE_INPUTS_FILE).read_text()


def test_generating_again_keeps_unchanged_files_untouched(tmp_path):
    """The card model's build goes by file times: an unchanged input must not look new."""
    verilog = tmp_path / "card.v"
    verilog.write_text("module numavia_card; endmodule\n")
    paths = _generate(tmp_path / "out", verilog)
    for path in paths:
        os.utime(path, ns=(1, 1))
    _generate(tmp_path / "out", verilog)
    assert all(path.stat().st_mtime_ns == 1 for path in paths)
    verilog.write_text("module numavia_card; wire changed; endmodule\n")
    _generate(tmp_path / "out", verilog)
    changed = {p.name for p in paths if p.stat().st_mtime_ns != 1}
    assert changed == {cosim.CMAKE_INPUTS_FILE, RESC}  # the Verilog's hash is in both


def test_output_changes_with_its_inputs(files):
    other = fixture_csr()
    other["csr_bases"]["uart"] += CSR_PAGE_BYTES * 8
    changed = files_for(other)
    assert changed[REPL] != files[REPL]
    assert files_for(fixture_csr(), nodes=NODES + 1)[RESC] != files[RESC]


def test_golden_files(files, request):
    """The generated text, byte for byte, against tests/golden/renode (from the fixture, 4 nodes)."""
    if request.config.getoption("--update-golden"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        for name, text in files.items():
            (GOLDEN / name).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / name).write_text(text)
    golden = sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*") if p.is_file())
    assert golden == sorted(files), "golden files and generated files differ in names (--update-golden)"
    for name, text in files.items():
        assert (GOLDEN / name).read_text() == text, f"{name} differs from its golden file (--update-golden)"


# --- The co-simulated card is the SoC's card ------------------------------------------------------------------


def _camel(name):
    return "".join(w.capitalize() for w in name.lower().split("_"))


def test_connector_uses_the_generated_protocol_numbers():
    """RingLink.cs is written by hand: its protocol constants must be the generator's."""
    from numavia.gateware.sci_layouts import SymbolLayout

    source = cosim.CONNECTOR_SOURCE.read_text()
    declared = {m[1]: int(m[2]) for m in re.finditer(r"public const int (\w+)Action = (\d+);", source)}
    assert declared == {_camel(name): value for name, value in cosim.PROTOCOL_ACTIONS.items()}
    for name, value in cosim.PROTOCOL_CONSTANTS.items():
        assert f"public const int {_camel(name)} = {value};" in source, name
    assert f"public const int RingSymbolBits = {SymbolLayout.size};" in source
    # The card model reads every protocol number from the generated header.
    model = (cosim.COSIM_PROJECT_DIR / "card_main.cpp").read_text()
    for name in [*(f"ACTION_{a}" for a in cosim.PROTOCOL_ACTIONS), *cosim.PROTOCOL_CONSTANTS]:
        assert f"NV_{name}" in model, name


def test_wrapper_connects_every_card_port(files):
    from numavia.gateware.card import card_signature
    from numavia.soc.amaranth_instance import port_list

    wrapper = files[f"cosim/{cosim.WRAPPER_FILE}"]
    for name, _, _ in port_list(card_signature(CARD_CONFIG)):
        assert f".{name}(" in wrapper
    memories = fixture_csr()["memories"]
    assert f"30'h{memories['card']['base'] // 4:x}" in wrapper
    assert f"30'h{memories['shared']['base'] // 4:x}" in wrapper
    # The integration library's Wishbone initiator takes word addresses (it multiplies by 4).
    assert "assign dma_adr = {2'b0, dma_adr_word};" in wrapper  # 30-bit word address
    header = files[f"cosim/{cosim.HEADER_FILE}"]
    assert "#define NV_CARD_HAS_VIA 1" in header and "#define NV_ETH_BEAT_LAST_BE_LSB 33" in header


def test_wrapper_refuses_a_card_port_it_does_not_know(monkeypatch):
    from numavia.soc import amaranth_instance

    real = amaranth_instance.port_list
    monkeypatch.setattr(amaranth_instance, "port_list", lambda sig: real(sig) + [("mac__tx", "o", 8)])
    with pytest.raises(RenodeError, match="mac__tx"):
        files_for(fixture_csr())


@pytest.fixture(scope="module")
def soc_dir():
    from numavia.soc import sim

    return sim.build_soc(SimConfig(), log=lambda message: None)  # cached after the first build


def test_cosim_card_verilog_is_the_socs_card_verilog(soc_dir, tmp_path):
    """Same file (the cache entry the SoC build lists as a source) and the hash CMake checks."""
    card_verilog = cosim.card_verilog(SimConfig())
    soc_sources = [Path(s) for s in json.loads((soc_dir / "sources.json").read_text())]
    soc_card = [s for s in soc_sources if s.name == card_verilog.name]
    assert soc_card == [card_verilog]
    firmware = tmp_path / "image.bin"
    firmware.write_bytes(b"\x6f\x00\x00\x00")
    files = generate(
        soc_dir / "csr.json",
        tmp_path / "out",
        nodes=2,
        card_config=CARD_CONFIG,
        card_verilog=card_verilog,
        ready_marker=READY_MARKER,
        firmware=firmware,
    )
    inputs = (tmp_path / "out" / "cosim" / cosim.CMAKE_INPUTS_FILE).read_text()
    assert f'set(NUMAVIA_CARD_VERILOG "{soc_card[0]}")' in inputs
    assert f'set(NUMAVIA_CARD_VERILOG_SHA256 "{hashlib.sha256(soc_card[0].read_bytes()).hexdigest()}")' in inputs
    assert len(files) == 9


def test_generator_reads_the_real_csr_json(soc_dir):
    real = json.loads((soc_dir / "csr.json").read_text())
    files = files_for(real, nodes=2)
    platform = parse_repl(files[REPL])
    for name, base in real["csr_bases"].items():
        assert base in placed_addresses(platform), name
    for name, region in real["memories"].items():
        if name != "csr":
            assert region["base"] in placed_addresses(platform), name
    assert ("ethmac" in platform) == ("ethmac" in real["csr_bases"])
    ring = parse_resc(files[RESC])
    assert (script.SWITCH_NAME in ring.externals) == ("ethmac" in real["csr_bases"])


def _cmake_configure(tmp_path, cosim_dir, *extra):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed (make setup installs it)")
    result = subprocess.run(
        [
            "cmake",
            "-S",
            str(cosim.COSIM_PROJECT_DIR),
            "-B",
            str(tmp_path / "build"),
            f"-DNUMAVIA_COSIM_DIR={cosim_dir}",
            *extra,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "RENODE_ROOT": ""},
    )
    return result.returncode, " ".join((result.stdout + result.stderr).split())


def test_cmake_refuses_a_card_verilog_that_changed(tmp_path):
    verilog = tmp_path / "card.v"
    verilog.write_text("module numavia_card; endmodule\n")
    _generate(tmp_path / "out", verilog)
    verilog.write_text("module numavia_card; wire changed; endmodule\n")
    code, output = _cmake_configure(tmp_path, tmp_path / "out" / "cosim", f"-DUSER_RENODE_DIR={tmp_path}")
    assert code != 0 and "changed since `numavia renode` recorded it" in output


def test_cmake_needs_the_integration_library(tmp_path):
    verilog = tmp_path / "card.v"
    verilog.write_text("module numavia_card; endmodule\n")
    _generate(tmp_path / "out", verilog)
    code, output = _cmake_configure(tmp_path, tmp_path / "out" / "cosim")
    assert code != 0 and "-DUSER_RENODE_DIR" in output
    code, output = _cmake_configure(tmp_path, tmp_path / "out" / "cosim", f"-DUSER_RENODE_DIR={tmp_path / 'out'}")
    assert code != 0 and "found 0 Renode integration libraries" in output


def test_cmake_needs_the_generated_inputs(tmp_path):
    code, output = _cmake_configure(tmp_path, tmp_path / "nothing")
    assert code != 0 and "has no card.cmake" in output


# --- Entry points without Renode ------------------------------------------------------------------------------


def numavia(*args, path):
    env = {**os.environ, "PATH": str(path), "RENODE_ROOT": ""}
    return subprocess.run([sys.executable, "-m", "numavia.cli", *args], capture_output=True, text=True, env=env)


def _tool_stub(folder, name):
    stub = folder / name
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)


def test_run_without_renode_says_so_in_one_line(tmp_path):
    result = numavia("renode", "--run", "--out", str(tmp_path / "out"), path=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "numavia: error: renode-test not found on PATH: it is Renode's test runner "
        "(install Renode from https://renode.io)"
    ]
    assert not (tmp_path / "out").exists()  # nothing was built or written


def test_run_without_the_integration_library_says_so_in_one_line(tmp_path):
    for tool in ("renode", "renode-test", "cmake", "verilator"):
        _tool_stub(tmp_path, tool)
    result = numavia("renode", "--run", "--out", str(tmp_path / "out"), path=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "integration library" in lines[0] and "--renode-dir" in lines[0]
    result = numavia("renode", "--run", "--renode-dir", str(tmp_path), path=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "holds 0 Renode integration libraries" in lines[0]


def test_renode_command_help_and_bad_arguments(tmp_path):
    assert "usage: numavia renode" in numavia("renode", "--help", path=os.environ["PATH"]).stdout
    result = numavia("renode", "--nodes", "0", path=os.environ["PATH"])
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_each_node_gets_its_own_file_of_the_card_model(tmp_path, monkeypatch):
    """The dynamic loader would give a second load of one file (or of a link to it) the first
    one's state: every node's model must be a file of its own. The model itself comes from the
    build cache (here an entry made beforehand, so no build runs)."""
    from numavia.base import buildcache
    from numavia.renode import run

    monkeypatch.setenv("NUMAVIA_BUILD_DIR", str(tmp_path / "cache"))
    renode_dir = tmp_path / "renode" / "plugins" / "IntegrationLibrary"
    renode_dir.mkdir(parents=True)
    (renode_dir / run.INTEGRATION_MARKER).write_text("")
    verilog = tmp_path / "card.v"
    verilog.write_text("module numavia_card; endmodule\n")
    _generate(tmp_path / "out", verilog)
    made = []
    monkeypatch.setattr(buildcache, "cached", lambda kind, key, produce, log=None: made.append(kind) or entry)
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / run.MODEL_LIBRARY).write_bytes(b"\x7fELF model")
    run.build_card_model(tmp_path / "out", tmp_path / "renode", verilog, NODES, log=lambda message: None)
    copies = [tmp_path / "out" / script.CARD_MODEL_FILE.format(node=n) for n in range(NODES)]
    assert made == ["renode-card"]
    assert all(c.read_bytes() == b"\x7fELF model" for c in copies)
    assert len({c.stat().st_ino for c in copies} | {(entry / run.MODEL_LIBRARY).stat().st_ino}) == NODES + 1


def test_firmware_option_errors_are_one_line_and_come_first(tmp_path):
    image = tmp_path / "zephyr.bin"
    image.write_bytes(b"\x13\x00\x00\x00")
    for args, message in (
        (["--firmware", str(tmp_path / "missing.bin")], "is not a file"),
        (["--nodes", "2", "--firmware", f"2={image}"], "the ring's nodes are 0..1"),
        (["--firmware", f"1=bare-metal={image}"], "choose bare-metal, zephyr, zephyr-shell"),
    ):
        result = numavia("renode", *args, "--out", str(tmp_path / "out"), path=os.environ["PATH"])
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and message in lines[0]  # a bad argument
        assert lines[0].startswith("numavia renode: error:")
        assert not (tmp_path / "out").exists()  # nothing was built or written
