"""Wishbone helpers for testbenches (see numavia.gateware.bfm)."""

from numavia.gateware.bfm import BusError, wishbone_read as read, wishbone_write as write  # noqa: F401
