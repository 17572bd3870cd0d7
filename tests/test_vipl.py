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


class FakeCard:
    """What VIPL writes to host memory and the doorbells, word by word; STATUS reads say DONE once
    ``done`` is set."""

    def __init__(self):
        self.words, self.doorbells, self.done = {}, [], False

    def write(self, addr, data):
        if isinstance(data, int):
            self.doorbells.append((addr, data))
        else:
            self.write_words(addr, [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data), 4)])

    def write_words(self, addr, words):
        for i, w in enumerate(words):
            self.words[addr + 4 * i] = w

    def read(self, addr, count=None):
        status = vipl._STATUS.bit("DONE").mask if self.done else 0
        return status if count is None else [0] * 7 + [status]


def prebuilt_vi(regions):
    card = FakeCard()
    nic = SimpleNamespace(
        attributes={"queue_depth": 4},
        regions=regions,
        generation=0,
        memory=card,
        bridge=card,
        node_id=0,
        doorbell_page=lambda number: 0x1_0000 + number * 0x1000,
        command=lambda name, **args: None,
    )
    return vipl.Vi(nic, 2, 5, None, None, [0x6000_0000]), card


def test_prebuilt_descriptor_is_written_once_and_posted_by_its_changes():
    vi, card = prebuilt_vi({1: (VA_BASE, 4096, 5)})
    d = vipl.Descriptor(vipl.CONTROL_OP.RDMA_WRITE, [(VA_BASE, 1, 4)], remote_va=0x1000, remote_handle=3)
    p = vipl.VipPrebuild(vi, d)
    assert p.address == 0x6000_0000 + 8 * 256  # after both rings of 4 slots
    assert len(card.words) == 16 and card.doorbells == []
    card.words.clear()
    # The first post rings SQ_DOORBELL; one with nothing changed SQ_REPOST (+8: the card may send
    # its copy); one with a new LENGTH SQ_DOORBELL again.
    for length, doorbell in ((4, 0x1_2000), (4, 0x1_2008), (64, 0x1_2000), (64, 0x1_2008)):
        card.done = False
        assert vipl.VipPostPrebuilt(p, length=length) is d
        written = {p.address + 28: 0}
        if doorbell == 0x1_2000 and length == 64:
            written[p.address + 48 + 12] = 64
        assert card.words == written and card.doorbells == [(doorbell, p.address)]
        with pytest.raises(vipl.ViplError, match="still posted") as refused:
            vipl.VipPostPrebuilt(p)  # in flight
        assert refused.value.result == "INVALID_STATE" and len(card.doorbells) == 1
        with pytest.raises(vipl.ViplError, match="still posted"):
            vipl.VipPrebuiltRelease(p)
        card.done = True
        assert vipl.VipSendDone(vi) is d and d.segments[0][2] == length
        card.words.clear()
        card.doorbells.clear()


def test_prebuilt_descriptor_refuses_stale_bad_and_too_many():
    vi, card = prebuilt_vi({1: (VA_BASE, 4096, 5)})
    p = vipl.VipPrebuild(vi, vipl.Descriptor(segments=[(VA_BASE, 1, 4)]), queue="recv")
    card.words.clear()
    refusals = []

    def refused(call, *args, **kwargs):
        with pytest.raises(vipl.ViplError) as e:
            call(*args, **kwargs)
        refusals.append(e.value.result)

    refused(vipl.VipPostPrebuilt, p, length=5000)  # outside the registered region
    refused(vipl.VipPostPrebuilt, "not a handle")
    refused(vipl.VipPrebuild, vi, vipl.Descriptor(), queue="sideways")
    for _ in range(vipl.PREBUILT_SLOTS - 1):
        vipl.VipPrebuild(vi, vipl.Descriptor())
    refused(vipl.VipPrebuild, vi, vipl.Descriptor())  # no free slot
    vipl.VipDeregisterMem(vi.nic, 7)
    refused(vipl.VipPostPrebuilt, p)  # built before the deregistration
    vipl.VipPrebuiltRelease(p)
    refused(vipl.VipPostPrebuilt, p)  # released
    assert refusals == [
        "INVALID_PARAMETER",
        "INVALID_PARAMETER",
        "INVALID_PARAMETER",
        "ERROR_RESOURCE",
        "STALE",
        "INVALID_PARAMETER",
    ]
    assert card.doorbells == [] and not any(
        p.address <= a < p.address + 256 for a in card.words
    )  # nothing refused wrote
