"""The VIPL library's own checks, made on the host before anything reaches the card."""

from types import SimpleNamespace

import pytest

from numavia import vipl
from numavia.hostmem import VA_BASE, Buffer


def test_offering_an_unregistered_buffer_is_refused_before_the_card_is_asked():
    commands = []
    nic = SimpleNamespace(command=lambda name, **args: commands.append(name))
    vi = SimpleNamespace(number=0, nic=nic)
    unregistered = Buffer(memory=None, va=VA_BASE, length=64, pages=[0x6000_0000])
    with pytest.raises(vipl.ViplError, match="not registered") as refused:
        vipl.connect_start(vi, 1, 7, buffer=unregistered)
    assert refused.value.result == "INVALID_PARAMETER"
    assert commands == []
    unregistered.handle = 3  # registered: the request goes out with it
    vipl.connect_start(vi, 1, 7, buffer=unregistered)
    assert commands == ["CONNECT_REQUEST"]
