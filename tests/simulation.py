"""Shared helpers for tests that build and run the Verilator cluster model."""

from numavia.cluster_session import free_port_range  # noqa: F401 (re-exported for the tests)
from numavia.soc import sim

_builds = {}


def build(nodes=2, **kwargs):
    """The (cached) build for ``nodes`` nodes; built once per test process."""
    config = sim.SimConfig(nodes=nodes, **kwargs)
    if config not in _builds:
        _builds[config] = sim.build_all(config, log=lambda message: None)
    return _builds[config]

