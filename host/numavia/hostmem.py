"""Host memory as a host process sees it, for the VIPL library on a simulated node.

The node's ``hostmem`` RAM stands for the host's physical memory; the host bridge reaches it. This
module plays the host operating system's part: it hands out physical pages (deliberately not in
order, so a buffer's pages are scattered as they are on a real host and the card's two-level
address translation is exercised) and maps them at virtual addresses of a 64-bit process address
space. A :class:`Buffer` is a virtual range with the physical address of each page; the in-page
offset of a virtual address equals that of its physical address, as with real paging.
"""

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from numavia.base.errors import NumaviaError
from numavia.base.via_att import PAGE_MASK, PAGE_SHIFT, PAGE_SIZE
from numavia.bridge import HostBridge

#: Where the process's buffers start (above 4 GiB: virtual addresses use all 64 bits).
VA_BASE = 0x7F00_0000_0000


class HostMemoryError(NumaviaError):
    """Out of host memory, or an access outside a buffer."""


class PhysicalMemory:
    """Page allocator and byte access over ``[base, base + size)`` through a host bridge."""

    def __init__(self, bridge: HostBridge, base: int, size: int, *, seed: int = 1) -> None:
        if base % PAGE_SIZE or size % PAGE_SIZE:
            raise ValueError("host memory must be page aligned")
        self.bridge, self.base, self.size = bridge, base, size
        self._free = [base + i * PAGE_SIZE for i in range(size // PAGE_SIZE)]
        random.Random(seed).shuffle(self._free)

    def pages(self, count: int, *, contiguous: bool = False) -> list[int]:
        if contiguous:
            free = sorted(self._free)
            for i in range(len(free) - count + 1):
                if free[i + count - 1] - free[i] == (count - 1) * PAGE_SIZE:
                    run = free[i : i + count]
                    for p in run:
                        self._free.remove(p)
                    return run
            raise HostMemoryError(f"no {count} contiguous free pages of host memory")
        if count > len(self._free):
            raise HostMemoryError(f"out of host memory: {count} pages wanted, {len(self._free)} free")
        taken, self._free = self._free[:count], self._free[count:]
        return taken

    def release(self, pages: Iterable[int]) -> None:
        self._free.extend(pages)

    # --- bytes at physical addresses -----------------------------------------------------------

    def write(self, addr: int, data: bytes | Iterable[int]) -> None:
        data = bytes(data)
        if not data:
            return
        start, end = addr & ~3, (addr + len(data) + 3) & ~3
        head, tail = addr - start, end - addr - len(data)
        if head or tail:  # partial words: read-modify-write them
            first = self.bridge.read(start)
            last = self.bridge.read(end - 4) if end - 4 != start else first
            data = first.to_bytes(4, "little")[:head] + data + last.to_bytes(4, "little")[4 - tail :]
        self.bridge.write(start, [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data), 4)])

    def read(self, addr: int, length: int) -> bytes:
        if length == 0:
            return b""
        start, end = addr & ~3, (addr + length + 3) & ~3
        words = self.bridge.read(start, (end - start) // 4)
        raw = b"".join(w.to_bytes(4, "little") for w in words)
        return raw[addr - start : addr - start + length]

    def write_words(self, addr: int, words: Iterable[int]) -> None:
        self.bridge.write(addr, list(words))

    def read_word(self, addr: int) -> int:
        return self.bridge.read(addr)


@dataclass
class Buffer:
    """``length`` bytes at virtual ``va``; ``pages[i]`` is the physical address of page ``i``
    (``pages[0]`` the address of the first byte)."""

    memory: PhysicalMemory
    va: int
    length: int
    pages: list[int]
    handle: int | None = None  # the memory handle once registered

    def pa(self, offset: int = 0) -> int:
        """Physical address of byte ``offset``."""
        if not 0 <= offset <= self.length:
            raise HostMemoryError(f"offset {offset} outside a {self.length}-byte buffer")
        va = self.va + offset
        page = (va >> PAGE_SHIFT) - (self.va >> PAGE_SHIFT)
        return (self.pages[page] & ~PAGE_MASK) | (va & PAGE_MASK)

    def _pieces(self, offset: int, length: int) -> Iterator[tuple[int, int, int]]:
        if offset < 0 or length < 0 or offset + length > self.length:
            raise HostMemoryError(f"bytes {offset}..{offset + length} outside a {self.length}-byte buffer")
        while length:
            n = min(length, PAGE_SIZE - ((self.va + offset) & PAGE_MASK))
            yield self.pa(offset), offset, n
            offset += n
            length -= n

    def write(self, data: bytes | Iterable[int], offset: int = 0) -> None:
        data = bytes(data)
        for pa, at, n in self._pieces(offset, len(data)):
            self.memory.write(pa, data[at - offset : at - offset + n])

    def read(self, length: int | None = None, offset: int = 0) -> bytes:
        length = self.length - offset if length is None else length
        return b"".join(self.memory.read(pa, n) for pa, _, n in self._pieces(offset, length))

    @property
    def contiguous(self) -> bool:
        return all(
            self.pages[i] & ~PAGE_MASK == (self.pages[0] & ~PAGE_MASK) + i * PAGE_SIZE for i in range(len(self.pages))
        )


class AddressSpace:
    """A process's virtual memory: buffers at increasing virtual addresses, with guard gaps."""

    def __init__(self, memory: PhysicalMemory, *, va_base: int = VA_BASE) -> None:
        self.memory = memory
        self._next = va_base

    def alloc(self, length: int, *, offset: int = 0, contiguous: bool = False) -> Buffer:
        """A buffer of ``length`` bytes starting ``offset`` bytes into its first page."""
        if length <= 0 or not 0 <= offset < PAGE_SIZE:
            raise ValueError("length must be positive and offset inside a page")
        va = self._next + offset
        count = ((offset + length - 1) >> PAGE_SHIFT) + 1
        pages = self.memory.pages(count, contiguous=contiguous)
        pages[0] += offset
        self._next += (count + 1) * PAGE_SIZE  # an unmapped page between buffers
        return Buffer(self.memory, va, length, pages)

    def free(self, buffer: Buffer) -> None:
        self.memory.release([buffer.pages[0] & ~PAGE_MASK, *buffer.pages[1:]])
