"""Shared helpers for tests that build and run the Verilator cluster model."""

import socket

from numavia.soc import sim

_builds = {}


def build(nodes=2, **kwargs):
    """The (cached) build for ``nodes`` nodes; built once per test process."""
    config = sim.SimConfig(nodes=nodes, **kwargs)
    if config not in _builds:
        _builds[config] = sim.build_all(config, log=lambda message: None)
    return _builds[config]


def free_port_range(count):
    """A base port such that base .. base+count-1 are free on 127.0.0.1."""
    for base in range(23000, 60000, 97):
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")
