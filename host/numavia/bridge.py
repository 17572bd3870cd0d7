"""Host bridge client: a node's SoC bus over Etherbone/TCP, as LiteX's RemoteClient reaches a board.

The simulation serves one port per node (``numavia sim --serve``). Beyond RemoteClient, this
client notices bus errors: a read reply flags them, and writes are confirmed with a probe that
returns the node's bus-error count (see ``soc/verilator/etherbone_server.hpp``). One bridge may
serve several threads (a benchmark polls a node while another thread waits on it): each access
is one request/reply exchange under a lock.
"""

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Self, overload

from litex.tools.remote.etherbone import (
    EtherboneIPC,
    EtherbonePacket,
    EtherboneReads,
    EtherboneRecord,
    EtherboneWrites,
    etherbone_packet_header_length,
    etherbone_record_header_length,
)

from numavia.base.errors import NumaviaError

_RECORD_ERROR = 0x08
_PROBE, _PROBE_REPLY = 0x01, 0x02
_MAX_BURST = 255


class BridgeError(NumaviaError):
    """The bridge could not be reached, or an access ended in a bus error."""


class HostBridge(EtherboneIPC):
    """``timeout``: wall seconds an access may wait for its answer. The simulation answers in
    simulated time, so a simulator starved of CPU on a loaded machine answers late; a dead one
    closes the connection, which fails the access at once whatever the timeout."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 120.0) -> None:
        self.address = (host, port)
        self.timeout = timeout
        try:
            self.socket = socket.create_connection(self.address, timeout=timeout)
        except OSError as e:
            raise BridgeError(f"cannot reach the host bridge at {host}:{port} ({e.strerror or e})") from None
        self.socket.settimeout(timeout)
        self._lock = threading.Lock()
        with self._answered():
            self.server_info = self.socket.recv(128).decode(errors="replace")
            self._errors = self._error_count()

    @contextmanager
    def _answered(self) -> Iterator[None]:
        """A socket timeout or a connection the simulation dropped becomes a BridgeError that says
        what happened."""
        try:
            yield
        except ConnectionError:
            raise BridgeError(f"the host bridge at {self.address[0]}:{self.address[1]} closed the connection") from None
        except TimeoutError:
            raise BridgeError(
                f"no answer from the host bridge at {self.address[0]}:{self.address[1]} within {self.timeout:g} s "
                "(the simulation is stuck, or starved of CPU)"
            ) from None

    def close(self) -> None:
        self.socket.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- accesses ------------------------------------------------------------------------------

    @overload
    def read(self, addr: int) -> int: ...
    @overload
    def read(self, addr: int, count: int) -> list[int]: ...

    def read(self, addr: int, count: int | None = None) -> int | list[int]:
        """One 32-bit word at byte address ``addr``, or a list of ``count`` consecutive words."""
        n = 1 if count is None else count
        words: list[int] = []
        with self._lock, self._answered():
            for base in range(0, n, _MAX_BURST):
                words += self._read_burst(addr + 4 * base, min(_MAX_BURST, n - base))
        return words[0] if count is None else words

    def write(self, addr: int, values: int | list[int] | tuple[int, ...]) -> None:
        """Write one word or a list of consecutive words; raises BridgeError on a bus error."""
        values = values if isinstance(values, (list, tuple)) else [values]
        with self._lock, self._answered():
            for base in range(0, len(values), _MAX_BURST):
                record = EtherboneRecord(4)
                record.writes = EtherboneWrites(
                    base_addr=addr + 4 * base, addr_size=4, datas=list(values[base : base + _MAX_BURST])
                )
                record.wcount = len(record.writes)
                self._send(record)
            errors = self._error_count()
            failed, self._errors = errors != self._errors, errors
        if failed:
            raise BridgeError(f"bus error writing {len(values)} word(s) at {addr:#010x}")

    # --- protocol ------------------------------------------------------------------------------

    def _send(self, record: EtherboneRecord) -> None:
        packet = EtherbonePacket(32)
        packet.records = [record]
        packet.encode()
        self.send_packet(self.socket, packet)

    def _read_burst(self, addr: int, n: int) -> list[int]:
        record = EtherboneRecord(4)
        record.reads = EtherboneReads(addr_size=4, addrs=[addr + 4 * i for i in range(n)])
        record.rcount = n
        self._send(record)
        reply = self._receive_reply()
        flags = reply[8]
        packet = EtherbonePacket(32, reply)
        packet.decode()
        words = packet.records.pop().writes.get_datas()
        if flags & _RECORD_ERROR:
            self._errors = self._error_count()
            raise BridgeError(f"bus error reading {n} word(s) at {addr:#010x}")
        return words

    def _error_count(self) -> int:
        header = struct.pack(">HBB4x", 0x4E6F, 0x10 | _PROBE, 0x44)
        self.socket.sendall(header)
        reply = self._recv_exact(8)
        if not reply[2] & _PROBE_REPLY:
            raise BridgeError("the host bridge does not answer probes (not a Numavia simulation?)")
        return struct.unpack(">I", reply[4:8])[0]

    def _receive_reply(self) -> bytes:
        """One Etherbone reply packet (32-bit addresses). LiteX's ``receive_packet`` answers a
        timeout as if the connection had closed; this one lets the timeout through."""
        packet = self._recv_exact(etherbone_packet_header_length + etherbone_record_header_length)
        wcount, rcount = struct.unpack(">BB", packet[-2:])
        rest = (4 * wcount + 4 if wcount else 0) + (4 * rcount + 4 if rcount else 0)
        return packet + self._recv_exact(rest)

    def _recv_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.socket.recv(n - len(data))
            if not chunk:
                raise BridgeError(f"the host bridge at {self.address[0]}:{self.address[1]} closed the connection")
            data += chunk
        return data
