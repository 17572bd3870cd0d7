"""Numavia: an open-hardware cluster interconnect card (SCI-style NCC-NUMA + hardware VIA RDMA)."""

from numavia.base.version import __version__

__all__ = ["__version__"]
