"""A node's console from the host: the simulator serves each node's UART on a TCP port
(``--console-port``; ``soc/verilator/console.hpp``), bytes in both directions, so the firmware's
shell (the Zephyr image with the shell) can be used by a person (``numavia console NODE``) or by a
program (:meth:`NodeConsole.command`)."""

import re
import select
import socket
import sys
import time
from typing import Self, TextIO

from numavia.base.errors import NumaviaError

#: The prompt of Zephyr's shell on the UART backend (CONFIG_SHELL_PROMPT_UART).
SHELL_PROMPT = "uart:~$ "
#: The shell's terminal control sequences (colours, cursor moves), which a program reading the
#: output does without.
_VT100 = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class ConsoleError(NumaviaError):
    pass


class NodeConsole:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        try:
            self.socket = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise ConsoleError(f"cannot reach the node console at {host}:{port} ({e.strerror or e})") from None
        self.received = ""

    def close(self) -> None:
        self.socket.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, text: str) -> None:
        self.socket.sendall(text.encode())

    def read_until(self, text: str, timeout: float) -> str:
        """Everything received up to and including the first ``text`` after what earlier calls
        consumed; ConsoleError if it does not come within ``timeout`` seconds (wall time)."""
        deadline = time.monotonic() + timeout
        while text not in self.received:
            left = deadline - time.monotonic()
            if left <= 0 or not self._receive(left):
                raise ConsoleError(
                    f"the node did not print {text!r} within {timeout:g} s (it printed {self.received[-200:]!r})"
                )
        end = self.received.index(text) + len(text)
        taken, self.received = self.received[:end], self.received[end:]
        return taken

    def _receive(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.socket], [], [], timeout)
        if not ready:
            return True
        data = self.socket.recv(4096)
        if not data:
            raise ConsoleError("the simulator closed the console")
        self.received = _VT100.sub("", self.received + data.decode(errors="replace"))
        return True

    def command(self, line: str, timeout: float = 60.0, prompt: str = SHELL_PROMPT) -> list[str]:
        """Run a shell command: the lines it printed after its echo, up to the next prompt (what
        the node printed before the echo, such as an earlier prompt, is dropped)."""
        self.send(line + "\r")
        self.read_until(line, timeout)
        out = self.read_until(prompt, timeout)[: -len(prompt)]
        return [l.rstrip("\r") for l in out.split("\n") if l.strip()]

    def interact(self, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> None:
        """Pass bytes both ways until standard input ends (then print what follows for a second)."""
        linger = None
        while linger is None or time.monotonic() < linger:
            watched = [self.socket] + ([stdin] if linger is None else [])
            ready, _, _ = select.select(watched, [], [], 0.1)
            if self.socket in ready:
                data = self.socket.recv(4096)
                if not data:
                    return
                stdout.write(data.decode(errors="replace"))
                stdout.flush()
            if stdin in ready:
                line = stdin.readline()
                if line:
                    self.send(line.rstrip("\n") + "\r")
                else:
                    linger = time.monotonic() + 1.0
