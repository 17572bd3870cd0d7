"""Stream helpers for testbenches (see numavia.gateware.bfm)."""

from numavia.gateware.bfm import recv, send  # noqa: F401
