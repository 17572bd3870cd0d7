"""The Zephyr application built against a real Zephyr tree and run on the simulated ring.

NEEDS A ZEPHYR TREE: ZEPHYR_BASE and the toolchain settings of docs/zephyr.md. CI has none, so
this whole file is skipped there (with that reason); its runs are recorded in docs/zephyr.md. The
checks CI runs on the same sources without a tree are test_zephyr_build.py, test_zephyr_c_syntax.py,
test_zephyr_module.py and test_zephyr_overlay.py; the last test here keeps their stand-in headers
honest against the real ones.

What runs here is the real image on the real RTL: every node of a two-node ring boots Zephyr from
main RAM (the ROM only jumps there), the VIA protocol manager answers the host's mailbox within a
fraction of a kernel tick (it sleeps on the card's interrupt), a thread waiting for a completion
queue is woken by the card's interrupt, and the `numavia` shell on the node
console (from a socket, or from the simulator's standard input) does what it says, including
refusing a microcode image that fails its check while the running one stays live.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml
from support.ring_sim import as_from_a_terminal, kill_ring
from support.via_system import Pair, check_wake_cq_ping_pong

from numavia.base import regmap
from numavia.base.microcode.assembler import image_crc32
from numavia.base.paths import REPO_ROOT
from numavia.cluster_session import ClusterSession, free_port_range
from numavia.soc import firmware, sim

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("ZEPHYR_BASE"), reason="needs a Zephyr tree: set ZEPHYR_BASE (docs/zephyr.md)"
    ),
]

APP = REPO_ROOT / "firmware" / "zephyr" / "app"
STUBS = REPO_ROOT / "tests" / "zephyr_stubs"
NODES = 2
#: A kernel tick of the application (CONFIG_SYS_CLOCK_TICKS_PER_SEC=100) in card cycles at 100 MHz.
TICK_CYCLES = 1_000_000
#: What a build of this tree and toolchain prints that is not about the project's sources: Debian's
#: binutils on Zephyr v3.5's linker script (docs/zephyr.md).
TOOLCHAIN_WARNINGS = re.compile(r"has a LOAD segment with RWX permissions")


@pytest.fixture(scope="module")
def soc_dir():
    return sim.build_soc(sim.SimConfig(nodes=NODES), log=lambda m: None)


@pytest.fixture(scope="module", params=[firmware.ZEPHYR, firmware.ZEPHYR_SHELL])
def image(request, soc_dir):
    return firmware.build(request.param, soc_dir, log=lambda m: None)


@pytest.fixture(scope="module")
def shell_build():
    return sim.build_all(sim.SimConfig(nodes=NODES), log=lambda m: None, firmware=firmware.ZEPHYR_SHELL)


def test_application_and_module_build_warning_free(image, soc_dir):
    log = (image.path.parent / "build.log").read_text()
    warnings = [line for line in log.splitlines() if "warning:" in line.lower() and not TOOLCHAIN_WARNINGS.search(line)]
    assert warnings == []
    # CMake's: only the cross-compile toolchain's note that it found no sysroot (docs/zephyr.md).
    lines = log.splitlines()
    cmake = [lines[i + 1].strip() for i, line in enumerate(lines) if line.startswith("CMake Warning")]
    assert set(cmake) <= {"No sysroot found, build may not work."}, cmake
    ram = json.loads((soc_dir / "csr.json").read_text())["memories"]["main_ram"]
    assert image.region == firmware.MAIN_RAM and 0 < image.path.stat().st_size <= ram["size"]


def test_every_node_boots_the_zephyr_image_from_main_ram(tmp_path):
    build = sim.build_all(sim.SimConfig(nodes=NODES), log=lambda m: None, firmware=firmware.ZEPHYR)
    memories = json.loads((build.soc_dir / "csr.json").read_text())["memories"]
    code, summary = sim.run(build, tmp_path, quiet=True, max_cycles=20_000_000)
    assert code == 0 and all(c is not None for c in summary["marker_cycles"]), summary
    # The ROM holds a jump to main RAM, main RAM the image.
    rom = (tmp_path / "numavia_node_rom.init").read_text().split()
    assert [int(w, 16) for w in rom[:2]] == [
        int.from_bytes(firmware.jump_to(memories["main_ram"]["base"])[i : i + 4], "little") for i in (0, 4)
    ]
    harness = yaml.safe_load((APP / "sample.yaml").read_text())["common"]["harness_config"]
    for node in range(NODES):
        log = (tmp_path / f"node{node}.log").read_text()
        position = 0
        for pattern in harness["regex"]:  # the sample's console harness, in order
            match = re.compile(pattern).search(log, position)
            assert match, f"node {node}: {pattern!r} not found after {log[position : position + 200]!r}"
            position = match.end()
        assert f"node id set to {node} (read back {node})" in log


def test_the_via_manager_answers_the_mailbox_within_a_fraction_of_a_tick(shell_build, tmp_path):
    with ClusterSession(shell_build, tmp_path) as session:
        nic = session.nic(0)
        cycles = []
        for _ in range(5):
            before = _cycles(nic)
            nic.command("NOP")
            cycles.append(_cycles(nic) - before)
    # A thread polling on the kernel's 10 ms tick would answer after up to a tick; woken by the
    # card's interrupt it answers as soon as the host bridge's accesses let it.
    assert max(cycles) < TICK_CYCLES // 10, cycles


def test_a_wait_on_a_completion_queue_is_woken_by_the_card_s_interrupt(shell_build, tmp_path):
    """Zephyr's nv_platform_wait_cq returns only when the card's interrupt handler has given the
    queue's semaphore: the agents' ping-pong completes only if every receive's notification came
    as an interrupt (else each wait ends at its deadline, TIMEOUT)."""
    with ClusterSession(shell_build, tmp_path) as session:
        check_wake_cq_ping_pong(Pair(session), iterations=4)


def _cycles(nic):
    lo = nic.card_reg("ctrl", "CYCLES_LO")
    return nic.card_reg("ctrl", "CYCLES_HI") << 32 | lo


def test_the_numavia_shell_on_a_node_console(shell_build, tmp_path):
    program = firmware_program()
    with ClusterSession(shell_build, tmp_path, consoles=True) as session:
        bridge = session.bridges[1]
        card = session.nic(1)
        with session.console(1) as console:
            console.read_until("uart:~$ ", timeout=30)
            status = "\n".join(console.command("numavia status"))
            assert "node:      1 (strap 1), NCC-NUMA mode" in status
            assert re.search(r"sequencer: live, 0 busy context\(s\), control store \d+ words", status)
            assert "via:       " in status

            assert console.command("numavia ucode verify") == [
                f"microcode verified: {len(program.words)} words, crc 0x{program.crc32:08x}"
            ]
            assert console.command("numavia ucode load") == [
                f"microcode loaded and verified: {len(program.words)} words, crc 0x{program.crc32:08x}"
            ]

            # An image the host staged in host memory: refused when a word does not match its CRC
            # (and the running microcode stays live), loaded when it does.
            hostmem = json.loads((shell_build.soc_dir / "csr.json").read_text())["memories"]["hostmem"]
            staged = hostmem["base"] + hostmem["size"] - 8 * len(program.words)
            corrupted = list(program.words)
            corrupted[3] ^= 1 << 17
            _stage(bridge, staged, corrupted)
            out = console.command(f"numavia ucode load {staged:#x} {len(program.words)} {program.crc32:#x}")
            assert out == [
                f"microcode refused: its words do not have crc 0x{program.crc32:08x}; the running microcode stays live"
            ]
            assert card.card_reg("rac", "STATUS") & regmap.RAC.register("STATUS").field("LOADED").mask
            assert console.command("numavia ucode verify")[0].startswith("microcode verified:")
            _stage(bridge, staged, program.words)
            assert console.command(f"numavia ucode load {staged:#x} {len(program.words)} {program.crc32:#x}")[
                0
            ].startswith("microcode loaded and verified:")
            assert console.command("numavia ucode load 0x1 4 0") == [
                "4 words at 0x00000001 are not 8-byte aligned host memory"
            ]
            assert console.command("numavia ucode load 0x60000000 four 0") == ["WORDS: 'four' is not a number"]

            numa = regmap.CTRL.register("CTRL").field("NUMA_MODE").mask
            assert console.command("numavia mode numa") == ["mode: NUMA (the board switch says NCC-NUMA)"]
            assert card.card_reg("ctrl", "CTRL") & numa
            assert console.command("numavia mode ncc") == ["mode: NCC-NUMA (the board switch says NCC-NUMA)"]
            assert not card.card_reg("ctrl", "CTRL") & numa
            assert console.command("numavia mode sideways") == [
                "mode 'sideways': choose ncc (network cache on) or numa (off)"
            ]
            first = regmap.CTRL.register("CTRL").field("CACHE_FIRST_MISS").mask
            second = ["the network cache takes a remote line at its second read miss (the allocation filter)"]
            assert console.command("numavia cache") == second
            assert console.command("numavia cache first") == [
                "the network cache takes a remote line at its first read miss"
            ]
            assert card.card_reg("ctrl", "CTRL") & first
            assert console.command("numavia cache second") == second
            assert not card.card_reg("ctrl", "CTRL") & first
            assert console.command("numavia cache third") == [
                "cache 'third': choose first (every read miss caches) or second (the allocation filter)"
            ]
            assert "NCC-NUMA mode, lines cached at their second read miss" in console.command("numavia status")[1]

            counters = console.command("numavia counters via")
            assert [line.split()[1] for line in counters] == [name.lower() for name, _ in regmap.VIA_COUNTERS]
            values = dict((line.split()[1], int(line.split()[2])) for line in counters)
            assert values == {name.lower(): v for name, v in card.counters().items()}
            assert console.command("numavia counters disk") == ["no block 'disk' with counters"]
            assert console.command("numavia vi list")[0].split()[:3] == ["vi", "connection", "engine"]


def firmware_program():
    from numavia.base import codegen

    program = codegen.microcode_program()
    assert program.crc32 == image_crc32(program.words)
    return program


def _stage(bridge, address, words):
    for i, word in enumerate(words):
        bridge.write(address + 8 * i, [word & 0xFFFF_FFFF, word >> 32])


def test_stand_in_headers_declare_only_what_zephyr_declares(soc_dir):
    """Each name a stand-in header in tests/zephyr_stubs declares (its stub_ mechanics aside) is
    declared by the same header of this Zephyr tree alone, compiled with the real build's flags."""
    build_dir = firmware.build(firmware.ZEPHYR_SHELL, soc_dir, log=lambda m: None).path.parent / "app"
    commands = json.loads((build_dir / "compile_commands.json").read_text())
    (entry,) = [c for c in commands if c["file"].endswith("drivers/numavia/block.c")]
    # The build ran in the cache entry's temporary folder (.<key>.tmp), renamed once it was done.
    moved = lambda text: re.sub(r"/\.(\w+)\.tmp/", r"/\1/", text)
    compile_only = moved(entry["command"]).split(" -o ")[0].replace(f" -c {moved(entry['file'])}", "")
    failures = []
    for stub in sorted(STUBS.glob("zephyr/**/*.h")):
        header = stub.relative_to(STUBS).as_posix()
        checks = [f"#include <{header}>"]
        for i, (kind, name) in enumerate(stub_declarations(stub.read_text())):
            checks.append(
                {
                    "macro": f"#ifndef {name}\n#error {header} does not define {name}\n#endif",
                    "type": f"enum {{ check_{i} = sizeof({name}) }};",
                    "function": f"#ifndef {name}\nvoid *check_{i} = (void *)&{name};\n#endif",
                }[kind]
            )
        source = build_dir / "stub_check.c"
        source.write_text("\n".join(checks) + "\n")
        result = subprocess.run(
            f"{compile_only} -fdiagnostics-color=never -fsyntax-only {source}",
            shell=True,
            cwd=moved(entry["directory"]),
            capture_output=True,
            text=True,
        )
        if result.returncode:
            failures += [f"{header}: {line}" for line in result.stderr.splitlines() if "error" in line]
    assert failures == []


def stub_declarations(text):
    """``(kind, name)`` of what a stand-in header declares: macros, types, functions (and
    variables, which are checked the same way: their address exists)."""
    names = []
    for macro in re.findall(r"^#define (\w+)", text, flags=re.M):
        names.append(("macro", macro))
    for typedef in re.findall(r"^typedef [^;(]*?\b(\w+)\s*;", re.sub(r"\{[^{}]*\}", "", text), flags=re.M):
        names.append(("type", typedef))
    for typedef in re.findall(r"^typedef [^;(]*\(\*(\w+)\)", text, flags=re.M):
        names.append(("type", typedef))
    for struct in re.findall(r"^struct (\w+) \{", text, flags=re.M):
        names.append(("type", f"struct {struct}"))
    for function in re.findall(r"^(?!typedef|#|struct|enum|\s)[\w\s\*]+?\b(\w+)\(", text, flags=re.M):
        names.append(("function", function))
    for variable in re.findall(r"^extern [^;(]*?\b(\w+)(?:\[\])?;", text, flags=re.M):
        names.append(("function", variable))
    stub = re.compile(r"^(stub_|STUB_|struct stub_)|_H$")
    return [(kind, name) for kind, name in names if not stub.search(name)]


@pytest.mark.parametrize(
    "node, spread",
    [(0, ["--procs", "1"]), (1, ["--procs", "2"]), (1, ["--mpi", "--procs", "2"])],
    ids=["1-proc", "2-procs", "2-ranks"],
)
def test_what_the_terminal_types_reaches_one_nodes_shell(shell_build, tmp_path, node, spread):
    """`numavia sim --serve --console NODE`: the simulator's standard input goes to node NODE's
    UART, in whichever process or MPI rank runs it, and to no other node's."""
    env = {**os.environ, "NUMAVIA_SESSION": str(tmp_path / "session.json")}
    cmd = [
        sys.executable,
        "-m",
        "numavia.cli",
        "sim",
        "--nodes",
        str(NODES),
        "--serve",
        "--quiet",
        "--firmware",
        firmware.ZEPHYR_SHELL,
        "--console",
        str(node),
        "--out",
        str(tmp_path / "run"),
        "--bridge-port",
        str(free_port_range(NODES)),
        *spread,
    ]
    log = tmp_path / "run" / f"node{node}.log"
    with open(tmp_path / "sim.err", "w") as err:
        proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stderr=err, text=True, preexec_fn=as_from_a_terminal
        )
    try:
        assert _wait_for(lambda: log.exists() and sim.READY_MARKER in log.read_text(), proc)
        proc.stdin.write("numavia status\r")
        proc.stdin.flush()
        assert _wait_for(lambda: f"node:      {node}" in log.read_text(), proc)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the launcher stops every process (or mpirun)
        try:
            proc.wait(timeout=60)
        finally:
            kill_ring(proc, tmp_path / "run")
    other = tmp_path / "run" / f"node{1 - node}.log"
    assert "numavia status" not in other.read_text()


def _wait_for(done, proc, seconds=900):
    deadline = time.monotonic() + seconds
    while not done():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
