"""The host bridge client against a stand-in server: a simulation that stops answering is a one-line
BridgeError after the timeout, and one that goes away is one at once."""

import socket
import struct
import threading
import time

import pytest

from numavia.bridge import BridgeError, HostBridge

PROBE_REPLY = struct.pack(">HBB4x", 0x4E6F, 0x10 | 0x02, 0x44)  # the bus-error count probe: 0 errors


def serve(behaviour):
    """A one-connection server on a free port that greets and answers the connect-time probe, then
    runs ``behaviour(connection)``; returns the port."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def run():
        connection, _ = listener.accept()
        with connection, listener:
            connection.sendall(b"numavia test bridge")
            connection.recv(8)  # the probe
            connection.sendall(PROBE_REPLY)
            behaviour(connection)

    threading.Thread(target=run, daemon=True).start()
    return port


def test_a_bridge_that_stops_answering_is_a_one_line_error_after_the_timeout():
    stop = threading.Event()
    bridge = HostBridge(serve(lambda c: stop.wait(10)), timeout=0.3)
    started = time.monotonic()
    with pytest.raises(BridgeError, match=r"no answer from the host bridge at 127\.0\.0\.1:\d+ within 0\.3 s"):
        bridge.read(0x1000)
    assert time.monotonic() - started >= 0.3
    with pytest.raises(BridgeError, match="no answer"):
        bridge.write(0x1000, [1, 2])
    stop.set()
    bridge.close()


def test_a_bridge_that_goes_away_fails_the_access_at_once_whatever_the_timeout():
    bridge = HostBridge(serve(lambda c: None), timeout=60)
    started = time.monotonic()
    with pytest.raises(BridgeError, match="closed the connection"):
        bridge.read(0x1000)
    assert time.monotonic() - started < 30
    bridge.close()


def test_the_default_timeout_outlasts_a_starved_simulation():
    assert HostBridge.__init__.__defaults__[-1] >= 60
