"""The Zephyr devicetree overlay generated from the SoC's csr.json (numavia.soc.zephyr_overlay).

The overlay is checked against a csr.json the real node SoC generator writes (LiteX, cached under
build/soc; no Verilator), parsed with Zephyr's own devicetree library (dtlib/edtlib, PyPI
``devicetree``) where a parse is needed, and against the bindings of the Zephyr module.
"""

import json
import re

import pytest
from devicetree import dtlib, edtlib

from numavia import cli
from numavia.base import regmap
from numavia.base.paths import REPO_ROOT
from numavia.soc import zephyr_overlay

BINDINGS = REPO_ROOT / "firmware" / "zephyr" / "dts" / "bindings"

#: LiteX core (csr.json name) -> Zephyr litex_vexriscv board label, as litex_json2dts_zephyr names
#: them, for the cores the node SoC has.
NODE_SOC_CORES = {"ctrl": "ctrl0", "uart": "uart0", "timer0": "timer0"}


@pytest.fixture(scope="module")
def csr():
    from numavia.soc import sim

    soc_dir = sim.build_soc(sim.SimConfig(), log=lambda message: None)
    return json.loads((soc_dir / "csr.json").read_text())


def label_blocks(text):
    """``{label: body}`` of every ``&label { body };`` at the top level of an overlay."""
    return dict(re.findall(r"^&(\w+) \{\n(.*?)^\};", text, flags=re.M | re.S))


def cells(body, prop):
    """The numbers of property ``prop`` (all ``<...>`` groups) in a node body, or None."""
    m = re.search(rf"^\s*{prop} = (.*?);", body, flags=re.M | re.S)
    return None if m is None else [int(n, 0) for n in re.findall(r"0x[0-9a-f]+|\d+", m.group(1))]


def strings(body, prop):
    m = re.search(rf"^\s*{prop} = (.*?);", body, flags=re.M | re.S)
    return None if m is None else re.findall(r'"([^"]*)"', m.group(1))


def minimal_root(soc_nodes=""):
    """A root with the CPU, a soc bus and the VexRiscv interrupt controller, as the board's .dtsi
    has (the controller's compatible a stand-in, for which the bindings test gives a binding)."""
    return (
        "/dts-v1/;\n/ {\n\t#address-cells = <1>;\n\t#size-cells = <1>;\n"
        "\tcpus {\n\t\t#address-cells = <1>;\n\t\t#size-cells = <0>;\n\t\tcpu@0 {\n\t\t\treg = <0>;\n\t\t};\n\t};\n"
        "\tsoc {\n\t\t#address-cells = <1>;\n\t\t#size-cells = <1>;\n\t\tranges;\n"
        '\t\tintc0: interrupt-controller@bc0 {\n\t\t\tcompatible = "stand-in,intc";\n'
        "\t\t\treg = <0xbc0 4>;\n\t\t\tinterrupt-controller;\n"
        f"\t\t\t#interrupt-cells = <2>;\n\t\t}};\n{soc_nodes}\t}};\n}};\n"
    )


def card_tree(text):
    """The overlay's card section on a minimal root, to be parsed by dtlib (Zephyr's DTS parser)."""
    return minimal_root() + text[text.index("/ {") :]


def test_litex_peripherals_have_every_csr_address_and_interrupt_of_csr_json(csr):
    blocks = label_blocks(zephyr_overlay.overlay(csr))
    for core, label in NODE_SOC_CORES.items():
        expected = sorted(
            (name[len(core) + 1 :], p["addr"], 4 * p["size"])
            for name, p in csr["csr_registers"].items()
            if name.startswith(core + "_")
        )
        assert expected, f"the node SoC has no {core} CSRs"
        body = blocks[label]
        reg = cells(body, "reg")
        got = sorted(zip(strings(body, "reg-names"), reg[0::2], reg[1::2]))
        assert got == expected, label
        irq = csr["constants"].get(f"{core}_interrupt")
        assert cells(body, "interrupts") == (None if irq is None else [irq, 0]), label
        assert strings(body, "status") == ["okay"]


def test_interrupt_zero_is_kept(csr):
    # The node SoC's UART is interrupt 0, which litex_json2dts_zephyr drops (`if irq`); the board's
    # default for uart0 is another line, so dropping it would leave the console on the wrong IRQ.
    assert csr["constants"]["uart_interrupt"] == 0
    assert cells(label_blocks(zephyr_overlay.overlay(csr))["uart0"], "interrupts") == [0, 0]


def test_everything_in_csr_json_is_mapped_or_said_to_be_left_out(csr):
    text = zephyr_overlay.overlay(csr)
    (left_out,) = re.findall(r"Not given to Zephyr: CSR cores (.*?); memory regions (.*?)\. \*/", text)
    cores, regions = (set(part.split(", ")) for part in left_out)
    for core in csr["csr_bases"]:
        assert (core in NODE_SOC_CORES) != (core in cores), core
    for name, region in csr["memories"].items():
        mapped = f"<{region['base']:#x} {region['size']:#x}>" in text
        assert mapped != (name in regions), name
    assert {"rom", "csr"} <= regions  # the BIOS ROM and the CSR bus are not Zephyr's to use


def test_clock_and_ram_come_from_csr_json(csr):
    text = zephyr_overlay.overlay(csr)
    blocks = label_blocks(text)
    # The CPU by its path: Zephyr v3.5's board has no cpu0 label.
    (cpu,) = re.findall(r"^&\{/cpus/cpu@0\} \{\n(.*?)^\};", text, flags=re.M | re.S)
    assert cells(cpu, "clock-frequency") == [csr["constants"]["config_clock_frequency"]]
    ram = csr["memories"]["main_ram"]
    assert cells(blocks["ram0"], "reg") == [ram["base"], ram["size"]]
    # The clock, the CSR width, and no clock control or GPIO: the board turns them on for
    # peripherals the SoC lacks.
    assert (
        zephyr_overlay.kconfig_fragment(csr)
        == f"CONFIG_SYS_CLOCK_HW_CYCLES_PER_SEC={csr['constants']['config_clock_frequency']}\n"
        f"CONFIG_LITEX_CSR_DATA_WIDTH={csr['constants']['config_csr_data_width']}\n"
        "CONFIG_CLOCK_CONTROL=n\nCONFIG_GPIO=n\n"
    )


def fake_tree(root, board_dir, board, dtsi, kconfig=""):
    """A Zephyr tree holding only what :func:`zephyr_overlay.read_tree` reads: the board's .dts,
    the .dtsi it includes, the SoC's Kconfig."""
    folder = root / "boards" / board_dir / "litex_vexriscv"
    folder.mkdir(parents=True)
    (folder / "litex_vexriscv.dts").write_text(board)
    (root / "dts" / "riscv").mkdir(parents=True)
    (root / "dts" / "riscv" / "riscv32-litex-vexriscv.dtsi").write_text(dtsi)
    (root / "soc" / "litex").mkdir(parents=True)
    (root / "soc" / "litex" / "Kconfig").write_text(kconfig)
    return root


#: The labels of the two releases' litex_vexriscv devicetrees that matter here (v3.5.0: no cpu0,
#: no ctrl0; v4.0.0: both, and a board that enables ctrl0).
V35_DTSI = (
    "/ {\n\tcpus {\n\t\tcpu@0 {\n\t\t};\n\t};\n\tsoc {\n\t\tintc0: interrupt-controller@bc0 {\n\t\t};\n"
    "\t\tuart0: serial@e0001800 {\n\t\t};\n\t\ttimer0: timer@e0002800 {\n\t\t};\n"
    "\t\tgpio_out: gpio@e0005800 {\n\t\t};\n\t\tpwm0: pwm@e0007000 {\n\t\t};\n\t};\n};\n"
)
V40_DTSI = V35_DTSI.replace("\t\tcpu@0 {", "\t\tcpu0: cpu@0 {").replace(
    "\t\tuart0:", "\t\tctrl0: soc_controller@e0000000 {\n\t\t};\n\t\tuart0:"
)


def test_board_peripherals_the_soc_lacks_are_disabled(csr, tmp_path):
    board = (
        "#include <riscv32-litex-vexriscv.dtsi>\n/ {\n\tram0: memory@40000000 {\n\t};\n};\n"
        '&ctrl0 {\n\tstatus = "okay";\n};\n&uart0 {\n\tstatus = "okay";\n\tcurrent-speed = <115200>;\n};\n'
        '&gpio_out {\n\tstatus = "okay";\n};\n&pwm0 { status = "okay"; };\n&eth0 { status = "disabled"; };\n'
    )
    labels = zephyr_overlay.board_enabled_labels(board)
    assert labels == ["ctrl0", "gpio_out", "pwm0", "uart0"]
    tree = zephyr_overlay.read_tree(fake_tree(tmp_path, "enjoydigital", board, V40_DTSI))
    blocks = label_blocks(zephyr_overlay.overlay(csr, tree=tree))
    disabled = {label for label, body in blocks.items() if strings(body, "status") == ["disabled"]}
    assert disabled == {"gpio_out", "pwm0"}
    # Without the board's file, the peripherals LiteX's flow knows and the SoC lacks are disabled.
    blocks = label_blocks(zephyr_overlay.overlay(csr))
    disabled = {label for label, body in blocks.items() if strings(body, "status") == ["disabled"]}
    assert {"eth0", "spi0", "i2c0"} <= disabled
    assert not disabled & set(NODE_SOC_CORES.values())


def test_whole_overlay_is_valid_devicetree_source(csr, tmp_path):
    text = zephyr_overlay.overlay(csr)
    # Stand-ins for the board's nodes, one per label the overlay refers to (the real ones are in
    # the Zephyr tree), so that dtlib parses every line of the overlay.
    labels = sorted(set(re.findall(r"^&(\w+) \{", text, flags=re.M)))
    stand_ins = "".join(f"\t\t{label}: stand-in@{i:x} {{ }};\n" for i, label in enumerate(labels, 1))
    path = tmp_path / "board.dts"
    path.write_text(minimal_root(stand_ins) + text)
    dt = dtlib.DT(str(path))
    assert dt.label2node["uart0"].props["status"].to_string() == "okay"
    assert dt.label2node["uart0"].props["interrupts"].to_nums() == [0, 0]
    assert dt.label2node[zephyr_overlay.CARD_LABEL].props["compatible"].to_string() == zephyr_overlay.CARD_COMPATIBLE


def test_card_blocks_sit_at_the_window_from_csr_json_plus_the_regmap_offset(csr, tmp_path):
    path = tmp_path / "card.dts"
    path.write_text(card_tree(zephyr_overlay.overlay(csr)))
    card = dtlib.DT(str(path)).label2node[zephyr_overlay.CARD_LABEL]
    memories = csr["memories"]
    window = memories["card"]
    # The shared-memory window and host memory (cached, and uncached for the firmware's reads).
    regions = ["shared", "hostmem", "hostmem_uncached"]
    assert set(regions) <= set(memories), "the node SoC is expected to have these regions"
    assert card.props["reg-names"].to_strings() == ["registers", *regions]
    assert card.props["reg"].to_nums() == [window["base"], window["size"]] + [
        n for name in regions for n in (memories[name]["base"], memories[name]["size"])
    ]
    assert "interrupts" not in card.props  # the card's interrupt is the VIA engine's node's
    children = {node.props["compatible"].to_string(): node for node in card.nodes.values()}
    assert len(children) == len(regmap.CARD.blocks)
    for block in regmap.CARD.blocks:
        compatible = zephyr_overlay.BLOCK_NODES[block.name][0]
        node = children[compatible]
        assert node.props["reg"].to_nums() == [window["base"] + block.base, block.size], block.name
        assert node.unit_addr == f"{window['base'] + block.base:x}"


def test_event_counters_are_the_regmap_counter_registers(csr, tmp_path):
    path = tmp_path / "card.dts"
    path.write_text(card_tree(zephyr_overlay.overlay(csr)))
    card = dtlib.DT(str(path)).label2node[zephyr_overlay.CARD_LABEL]
    children = {node.props["compatible"].to_string(): node for node in card.nodes.values()}
    with_counters = 0
    for block in regmap.CARD.blocks:
        node = children[zephyr_overlay.BLOCK_NODES[block.name][0]]
        counters = getattr(regmap, f"{block.name.upper()}_COUNTERS", ())
        if not counters:
            assert "event-counters" not in node.props
            continue
        with_counters += 1
        names = node.props["event-counters"].to_strings()
        offset = node.props["event-counters-offset"].to_num()
        assert [n.upper() for n in names] == [name for name, _ in counters]
        for i, (name, _) in enumerate(counters):
            assert block.register(name).offset == offset + 4 * i
    assert with_counters >= 3


def test_card_nodes_satisfy_the_module_bindings(csr, tmp_path):
    # edtlib checks every node against its binding (required properties, types). Our bindings
    # include Zephyr's base.yaml, which lives in the Zephyr tree: a stand-in declares the standard
    # properties they use.
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "base.yaml").write_text(
        "properties:\n"
        + "".join(
            f"  {name}:\n    type: {kind}\n"
            for name, kind in (
                ("compatible", "string-array"),
                ("reg", "array"),
                ("reg-names", "string-array"),
                ("status", "string"),
                ("interrupts", "array"),
                ("interrupt-parent", "phandle"),
                ('"#address-cells"', "int"),
                ('"#size-cells"', "int"),
                ("interrupt-controller", "boolean"),
                ('"#interrupt-cells"', "int"),
            )
        )
    )
    # The VexRiscv interrupt controller's cells, as Zephyr's binding names them.
    (tmp_path / "base" / "stand-in,intc.yaml").write_text(
        'description: stand-in\ncompatible: "stand-in,intc"\ninclude: base.yaml\n'
        "interrupt-cells:\n  - irq\n  - priority\n"
    )
    path = tmp_path / "card.dts"
    path.write_text(card_tree(zephyr_overlay.overlay(csr)))
    edt = edtlib.EDT(str(path), [str(BINDINGS), str(tmp_path / "base")])
    compatibles = {compatible for compatible, *_ in zephyr_overlay.BLOCK_NODES.values()}
    blocks = [node for node in edt.nodes if node.matching_compat in compatibles]
    assert len(blocks) == len(regmap.CARD.blocks)
    for node in blocks:
        assert node.binding_path.startswith(str(BINDINGS)), node.path
        assert (
            node.regs[0].addr
            == node.parent.regs[0].addr
            + regmap.CARD.block(
                next(b for b, v in zephyr_overlay.BLOCK_NODES.items() if v[0] == node.matching_compat)
            ).base
        )
        if "event-counters" in node.props:
            assert isinstance(node.props["event-counters"].val, list)
            assert isinstance(node.props["event-counters-offset"].val, int)
    # The binding requires the VIA engine's interrupt, and Zephyr sees it as the SoC's line.
    (via,) = [node for node in blocks if node.matching_compat == "numavia,via-engine"]
    assert via.interrupts[0].data == {"irq": csr["constants"]["card_interrupt"], "priority": 0}


def test_the_card_interrupt_wakes_the_via_engine_and_without_it_the_via_blocks_are_off(csr, tmp_path):
    path = tmp_path / "card.dts"
    path.write_text(card_tree(zephyr_overlay.overlay(csr)))
    card = dtlib.DT(str(path)).label2node[zephyr_overlay.CARD_LABEL]
    nodes = {node.props["compatible"].to_string(): node for node in card.nodes.values()}
    via = nodes["numavia,via-engine"]
    assert via.props["interrupts"].to_nums() == [csr["constants"]["card_interrupt"], 0]
    assert via.props["interrupt-parent"].to_node().labels == ["intc0"]
    assert not any("status" in node.props for node in nodes.values())
    # A card built without the VIA engine (csr.json: no card interrupt): its VIA blocks are off.
    without = json.loads(json.dumps(csr))
    del without["constants"]["card_interrupt"]
    path.write_text(card_tree(zephyr_overlay.overlay(without)))
    card = dtlib.DT(str(path)).label2node[zephyr_overlay.CARD_LABEL]
    off = {
        node.props["compatible"].to_string()
        for node in card.nodes.values()
        if "status" in node.props and node.props["status"].to_string() == "disabled"
    }
    assert off == {"numavia,via-engine", "numavia,via-doorbells"}
    assert not any("interrupts" in node.props for node in card.nodes.values())


def test_zephyr_v3_5_and_v4_0_boards_get_only_labels_they_define(csr, tmp_path):
    board = (
        "#include <riscv32-litex-vexriscv.dtsi>\n/ {\n\tram0: memory@40000000 {\n\t};\n};\n"
        '&uart0 {\n\tstatus = "okay";\n};\n&timer0 {\n\tstatus = "okay";\n};\n&pwm0 {\n\tstatus = "okay";\n};\n'
    )
    v35 = zephyr_overlay.read_tree(
        fake_tree(tmp_path / "v3.5", "riscv", board, V35_DTSI, "config LITEX_CSR_DATA_WIDTH\n\tint\n")
    )
    v40 = zephyr_overlay.read_tree(
        fake_tree(tmp_path / "v4.0", "enjoydigital", board + '&ctrl0 {\n\tstatus = "okay";\n};\n', V40_DTSI)
    )
    assert v35.board_dts.parent.parent.name == "riscv" and v40.board_dts.parent.parent.name == "enjoydigital"
    assert "ctrl0" not in v35.labels and {"ctrl0", "cpu0"} <= v40.labels
    for tree, ctrl in ((v35, False), (v40, True)):
        text = zephyr_overlay.overlay(csr, tree=tree)
        blocks = label_blocks(text)
        assert set(blocks) <= tree.labels | {"ram0"}, "a label the tree does not define fails the build"
        assert ("ctrl0" in blocks) == ctrl
        assert ("ctrl" in re.search(r"Not given to Zephyr: CSR cores (.*?);", text).group(1)) != ctrl
        assert strings(blocks["pwm0"], "status") == ["disabled"]
    # v4.0 has no CSR width option (32-bit CSRs only): the fragment sets it only where it exists.
    clock = f"CONFIG_SYS_CLOCK_HW_CYCLES_PER_SEC={csr['constants']['config_clock_frequency']}\n"
    off = "CONFIG_CLOCK_CONTROL=n\nCONFIG_GPIO=n\n"
    assert zephyr_overlay.kconfig_fragment(csr, v35) == clock + "CONFIG_LITEX_CSR_DATA_WIDTH=32\n" + off
    assert zephyr_overlay.kconfig_fragment(csr, v40) == clock + off
    narrow = json.loads(json.dumps(csr))
    narrow["constants"]["config_csr_data_width"] = 8
    with pytest.raises(zephyr_overlay.OverlayError, match="supports 32 only"):
        zephyr_overlay.kconfig_fragment(narrow, v40)


def test_a_tree_without_the_board_or_its_dtsi_is_one_clear_error(tmp_path):
    with pytest.raises(zephyr_overlay.OverlayError, match="has no litex_vexriscv board"):
        zephyr_overlay.read_tree(tmp_path)
    board = tmp_path / "boards" / "riscv" / "litex_vexriscv"
    board.mkdir(parents=True)
    (board / "litex_vexriscv.dts").write_text("#include <riscv32-litex-vexriscv.dtsi>\n")
    with pytest.raises(zephyr_overlay.OverlayError, match="cannot find the included riscv32-litex-vexriscv.dtsi"):
        zephyr_overlay.read_tree(tmp_path)


@pytest.mark.parametrize("core, register", [("timer0", "uptime_latch"), ("timer0", "uptime_cycles"), ("uart", "rxtx")])
def test_a_soc_without_what_zephyrs_drivers_read_is_refused(csr, core, register):
    lacking = json.loads(json.dumps(csr))
    del lacking["csr_registers"][f"{core}_{register}"]
    with pytest.raises(zephyr_overlay.OverlayError, match=f"{core} lacks {register}"):
        zephyr_overlay.overlay(lacking)


def test_a_soc_without_the_card_or_with_another_window_size_is_refused(csr):
    no_card = json.loads(json.dumps(csr))
    del no_card["memories"]["card"]
    with pytest.raises(zephyr_overlay.OverlayError, match="no 'card' region"):
        zephyr_overlay.overlay(no_card)
    small = json.loads(json.dumps(csr))
    small["memories"]["card"]["size"] = 0x1000
    with pytest.raises(zephyr_overlay.OverlayError, match=f"needs {regmap.CARD.size:#x}"):
        zephyr_overlay.overlay(small)


def test_every_register_block_has_a_node_a_binding_and_a_driver():
    drivers = "\n".join(p.read_text() for p in (REPO_ROOT / "firmware/zephyr/drivers/numavia").glob("*.c"))
    for block in regmap.CARD.blocks:
        compatible, _, _ = zephyr_overlay.BLOCK_NODES[block.name]
        assert (BINDINGS / "numavia" / f"{compatible}.yaml").exists(), compatible
        assert f"#define DT_DRV_COMPAT {re.sub('[^a-z0-9]', '_', compatible)}\n" in drivers, compatible


def test_command_line_writes_the_overlay_and_the_kconfig_fragment(csr, tmp_path, capsys):
    csr_json = tmp_path / "csr.json"
    csr_json.write_text(json.dumps(csr))
    out, conf = tmp_path / "node.overlay", tmp_path / "node.conf"
    assert cli.main(["zephyr-overlay", "--csr-json", str(csr_json), "--out", str(out), "--conf", str(conf)]) == 0
    assert out.read_text() == zephyr_overlay.overlay(csr, source="csr.json")
    assert conf.read_text() == zephyr_overlay.kconfig_fragment(csr)
    assert cli.main(["zephyr-overlay", "--csr-json", str(tmp_path / "missing.json"), "--out", str(out)]) == 1
    assert "cannot read" in capsys.readouterr().err
