"""Numavia: an open-hardware cluster interconnect card (SCI-style NCC-NUMA + hardware VIA RDMA)."""

from importlib.metadata import version as _version, PackageNotFoundError

try:
    __version__ = _version("numavia")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
