"""Small helpers for tests of Amaranth components."""

import gc
import re
import traceback
import warnings
from contextlib import contextmanager

import pytest
from amaranth.hdl import UnusedElaboratable


@contextmanager
def rejected(exception, match):
    """Expect a component's constructor to refuse its parameters. The half-built object is
    dropped on purpose, so its unused-elaboratable warning is not a finding. (The exception is
    caught here rather than by pytest.raises, whose report would keep the object alive past the
    warning filter.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        try:
            yield
        except exception as error:
            # The traceback's frames (the constructor's among them) hold the half-built object:
            # clear them, or it outlives the filter and warns later, from whatever test runs then.
            traceback.clear_frames(error.__traceback__)
            assert re.search(match, str(error)), f"{error!r} does not match {match!r}"
        else:
            pytest.fail(f"{exception.__name__} not raised")
        gc.collect()
