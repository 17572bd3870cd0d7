"""The node console from the host (numavia.console, `numavia console`), for the Zephyr shell.

The simulator's side (soc/verilator/console.hpp) is tests/cpp/test_console.cpp; the shell itself,
driven through the simulator, is tests/test_zephyr_image.py (needs a Zephyr tree). Here a stand-in
server plays a node that answers like Zephyr's shell, control sequences included.
"""

import io
import json
import os
import socket
import threading

import pytest

from numavia import cli
from numavia.console import ConsoleError, NodeConsole

PROMPT = "\x1b[1;32muart:~$ \x1b[m"


class FakeShell(threading.Thread):
    """Accepts one client; echoes each line it receives with terminal control sequences, answers
    ``answers[line]`` and prints the prompt again, as Zephyr's shell does."""

    def __init__(self, answers):
        super().__init__(daemon=True)
        self.answers = answers
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received = []

    def run(self):
        conn, _ = self.server.accept()
        conn.sendall(f"numavia: ready (node 0)\r\n{PROMPT}".encode())
        buffer = b""
        while True:
            data = conn.recv(1024)
            if not data:
                break
            buffer += data
            while b"\r" in buffer:
                line, buffer = buffer.split(b"\r", 1)
                line = line.decode()
                self.received.append(line)
                if line == "exit":  # the simulator stops: the connection closes
                    conn.close()
                    return
                answer = self.answers.get(line, [f"{line}: command not found"])
                conn.sendall(
                    (f"\x1b[1D\x1b[J{PROMPT}{line}\r\n" + "".join(f"{a}\r\n" for a in answer) + PROMPT).encode()
                )
        conn.close()


def test_a_command_returns_its_output_without_echo_prompt_or_colours():
    shell = FakeShell(
        {
            "numavia mode": ["mode: NCC-NUMA (the board switch says NCC-NUMA)"],
            "numavia counters via": ["via   tx_frames                         3", ""],
        }
    )
    shell.start()
    with NodeConsole(shell.port) as console:
        assert "ready (node 0)" in console.read_until("uart:~$ ", timeout=10)
        assert console.command("numavia mode") == ["mode: NCC-NUMA (the board switch says NCC-NUMA)"]
        assert console.command("numavia counters via") == ["via   tx_frames                         3"]
        assert console.command("bogus") == ["bogus: command not found"]
    assert shell.received == ["numavia mode", "numavia counters via", "bogus"]


def test_a_silent_node_or_a_closed_console_is_an_error_not_a_hang():
    shell = FakeShell({})
    shell.start()
    with NodeConsole(shell.port) as console:
        with pytest.raises(ConsoleError, match="did not print 'never' within 0.2 s"):
            console.read_until("never", timeout=0.2)
        with pytest.raises(ConsoleError, match="the simulator closed the console"):
            console.command("exit", timeout=10)
    shell.server.close()
    with pytest.raises(ConsoleError, match="cannot reach the node console"):
        NodeConsole(shell.port)


def test_interactive_mode_passes_lines_both_ways():
    shell = FakeShell({"numavia status": ["node:      0"]})
    shell.start()
    out = io.StringIO()
    read, write = os.pipe()
    os.write(write, b"numavia status\n")
    os.close(write)
    with NodeConsole(shell.port) as console, os.fdopen(read) as stdin:
        console.interact(stdin=stdin, stdout=out)
    assert shell.received == ["numavia status"]
    assert "node:      0" in out.getvalue()


def test_the_command_needs_a_running_simulation_with_consoles(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NUMAVIA_SESSION", str(tmp_path / "session.json"))
    assert cli.main(["console", "0", "--command", "numavia status"]) == 1
    assert "no simulation is running" in capsys.readouterr().err
    # A session without consoles (written by an older `numavia sim --serve`), and a node it lacks.
    (tmp_path / "session.json").write_text(
        json.dumps({"pid": os.getpid(), "nodes": 2, "bridge_port": 1, "regions": []})
    )
    assert cli.main(["console", "0", "--command", "x"]) == 1
    assert "serves no consoles" in capsys.readouterr().err
    assert cli.main(["console", "5"]) == 1
    assert "node 5 is not in the ring (nodes 0..1)" in capsys.readouterr().err


def test_the_command_runs_shell_commands_against_the_session(tmp_path, monkeypatch, capsys):
    shell = FakeShell({"numavia mode": ["mode: NUMA (the board switch says NUMA)"]})
    shell.start()
    monkeypatch.setenv("NUMAVIA_SESSION", str(tmp_path / "session.json"))
    (tmp_path / "session.json").write_text(
        json.dumps({"pid": os.getpid(), "nodes": 1, "bridge_port": 1, "regions": [], "console_port": shell.port})
    )
    assert cli.main(["console", "0", "--command", "numavia mode"]) == 0
    assert capsys.readouterr().out == "mode: NUMA (the board switch says NUMA)\n"


def test_sim_console_option_needs_serve_and_a_node_of_the_ring(capsys):
    for args, reason in (
        (["sim", "--console", "0"], "--console goes with --serve"),
        (["sim", "--nodes", "2", "--serve", "--console", "2"], "--console 2: the ring has nodes 0..1"),
    ):
        with pytest.raises(SystemExit) as exit_:
            cli.main(args)
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("numavia sim: error:") and reason in err[0], err
