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
from typing import Self, overload

from litex.tools.remote.etherbone import EtherboneIPC, EtherbonePacket, EtherboneReads, EtherboneRecord, EtherboneWrites

from numavia.base.errors import NumaviaError

_RECORD_ERROR = 0x08
_PROBE, _PROBE_REPLY = 0x01, 0x02
_MAX_BURST = 255


class BridgeError(NumaviaError):
    """The bridge could not be reached, or an access ended in a bus error."""


class HostBridge(EtherboneIPC):
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.address = (host, port)
        try:
            self.socket = socket.create_connection(self.address, timeout=timeout)
        except OSError as e:
            raise BridgeError(f"cannot reach the host bridge at {host}:{port} ({e.strerror or e})") from None
        self.socket.settimeout(timeout)
        self._lock = threading.Lock()
        self.server_info = self.socket.recv(128).decode(errors="replace")
        self._errors = self._error_count()

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
        with self._lock:
            for base in range(0, n, _MAX_BURST):
                words += self._read_burst(addr + 4 * base, min(_MAX_BURST, n - base))
        return words[0] if count is None else words

    def write(self, addr: int, values: int | list[int] | tuple[int, ...]) -> None:
        """Write one word or a list of consecutive words; raises BridgeError on a bus error."""
        values = values if isinstance(values, (list, tuple)) else [values]
        with self._lock:
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
        reply = self.receive_packet(self.socket, 4)
        if not reply:
            raise BridgeError(f"the host bridge at {self.address[0]}:{self.address[1]} closed the connection")
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

    def _recv_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.socket.recv(n - len(data))
            if not chunk:
                raise BridgeError("the host bridge closed the connection")
            data += chunk
        return data
