"""Host memory for the VIPL library: page allocation (scattered or contiguous), virtual to physical
mapping with the in-page offset kept, byte access at any alignment."""

import pytest

from numavia.base.via_att import PAGE_SIZE
from numavia.hostmem import AddressSpace, HostMemoryError, PhysicalMemory

BASE = 0x6000_0000


class WordMemory:
    """What the host bridge reaches: 32-bit words by byte address."""

    def __init__(self):
        self.words = {}

    def read(self, addr, count=None):
        assert addr % 4 == 0
        if count is None:
            return self.words.get(addr, 0)
        return [self.words.get(addr + 4 * i, 0) for i in range(count)]

    def write(self, addr, values):
        values = values if isinstance(values, list) else [values]
        for i, v in enumerate(values):
            self.words[addr + 4 * i] = v


def test_pages_are_scattered_but_keep_the_in_page_offset():
    mem = PhysicalMemory(WordMemory(), BASE, 64 * PAGE_SIZE, seed=3)
    buf = AddressSpace(mem).alloc(3 * PAGE_SIZE, offset=0x123)
    assert len(buf.pages) == 4 and not buf.contiguous
    assert buf.va & 0xFFF == 0x123 and buf.pa(0) & 0xFFF == 0x123
    assert buf.pa(PAGE_SIZE - 0x123) == buf.pages[1]  # the second page starts a page
    assert buf.va >= 1 << 32  # a 64-bit address space


def test_bytes_round_trip_across_pages_at_any_alignment():
    mem = PhysicalMemory(WordMemory(), BASE, 16 * PAGE_SIZE)
    buf = AddressSpace(mem).alloc(10000, offset=3)
    data = bytes(range(256)) * 40
    buf.write(data[:9001], 77)
    assert buf.read(9001, 77) == data[:9001]
    assert buf.read(3, 74) == b"\0\0\0"  # neighbours untouched
    with pytest.raises(HostMemoryError):
        buf.write(b"xx", 9999)


def test_contiguous_allocation_and_running_out():
    mem = PhysicalMemory(WordMemory(), BASE, 8 * PAGE_SIZE)
    space = AddressSpace(mem)
    buf = space.alloc(4 * PAGE_SIZE, contiguous=True)
    assert buf.contiguous
    with pytest.raises(HostMemoryError, match="contiguous"):
        space.alloc(4 * PAGE_SIZE + 1, contiguous=True)
    space.free(buf)
    assert space.alloc(8 * PAGE_SIZE).length == 8 * PAGE_SIZE
    with pytest.raises(HostMemoryError, match="out of host memory"):
        space.alloc(1)
