"""Small helpers for tests of Amaranth components."""

import gc
import warnings
from contextlib import contextmanager

import pytest
from amaranth.hdl import UnusedElaboratable


@contextmanager
def rejected(exception, match):
    """Expect a component's constructor to refuse its parameters. The half-built object is
    dropped on purpose, so its unused-elaboratable warning is not a finding."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(exception, match=match):
            yield
        gc.collect()
