"""The card's two-level address translation table (paper's Fig. 6).

Level 1 holds one entry per registered memory region; a memory handle is the index of its level-1
entry. Level 2 holds the physical address of each page of each region, from ``L2_INDEX`` on: entry
0 is the physical address of the region's first byte, entry ``i > 0`` the address of its page
``i``. A virtual address ``va`` of the region lies in page
``i = (va >> PAGE_SHIFT) - (START_VA >> PAGE_SHIFT)`` at physical address
``(L2[L2_INDEX + i] & ~PAGE_MASK) | (va & PAGE_MASK)``.

The firmware writes the table through the VIA block's ``ATT_ADDR``/``ATT_WDATA`` registers, in
32-bit words: level-1 entry ``h`` occupies words ``h*L1_STRIDE_WORDS ..`` (its ``L1_WORDS`` words,
the rest of the stride is unused), level 2 follows at word :func:`l2_word_base`. The firmware
writes an entry's ``ATTRIBUTES`` word (with ``VALID``) last.

Pure Python (no Amaranth).
"""

from numavia.base.bytestruct import Bits, ByteStruct, Field

PAGE_SHIFT = 12
PAGE_SIZE = 1 << PAGE_SHIFT
PAGE_MASK = PAGE_SIZE - 1

L1_ENTRY = ByteStruct(
    "ATT_L1",
    24,
    "Level-1 entry: one registered region",
    (
        Field("START_VA", 0, 8, "virtual address of the region's first byte"),
        Field("LENGTH", 8, 4, "bytes in the region"),
        Field("L2_INDEX", 12, 4, "level-2 entry of the region's first page"),
        Field("PAGE_COUNT", 16, 2, "pages the region touches"),
        Field("FIRST_PAGE_SIZE", 18, 2, "bytes of the region in its first page"),
        Field("PTAG", 20, 2, "protection tag: only VIs with this tag may use the region"),
        Field(
            "ATTRIBUTES",
            22,
            2,
            "memory attributes",
            bits=(
                Bits("VALID", 0, 1, "the entry describes a registered region"),
                Bits("RDMA_READ", 1, 1, "peers may RDMA-read the region"),
                Bits("RDMA_WRITE", 2, 1, "peers may RDMA-write the region"),
            ),
        ),
    ),
)

L1_WORDS = L1_ENTRY.words
#: Words between level-1 entries in the ATT_ADDR space (a power of two, so decoding is a shift).
L1_STRIDE_WORDS = 8
assert L1_WORDS <= L1_STRIDE_WORDS

L2_ENTRY = ByteStruct(
    "ATT_L2",
    4,
    "Level-2 entry: one physical page",
    (Field("PHYS_ADDR", 0, 4, "physical address (of the region start for page 0)"),),
)


def l2_word_base(regions):
    """Word address of level-2 entry 0 in the ATT_ADDR space."""
    return regions * L1_STRIDE_WORDS


#: What a lookup checks the region for, besides the protection tag (NEED_* of a request).
NEED_LOCAL, NEED_RDMA_READ, NEED_RDMA_WRITE = 0, 1, 2
#: Why a lookup failed (0: it did not).
FAIL_NONE, FAIL_HANDLE, FAIL_PTAG, FAIL_RIGHTS, FAIL_RANGE, FAIL_PAGE = range(6)


def region_pages(start_va, length):
    """``(page_count, first_page_size)`` of a region, as the level-1 entry records them."""
    first = min(length, PAGE_SIZE - (start_va & PAGE_MASK))
    if length == 0:
        return 1, 0
    last_page = (start_va + length - 1) >> PAGE_SHIFT
    return last_page - (start_va >> PAGE_SHIFT) + 1, first


def translate(entry, l2, va, length):
    """Reference model of one lookup: physical address of ``va``, or None if out of range.

    ``entry`` is a decoded level-1 entry, ``l2`` maps level-2 indices to physical addresses.
    """
    start, end = entry["START_VA"], entry["START_VA"] + entry["LENGTH"]
    if not (start <= va and va + length <= end):
        return None
    page = (va >> PAGE_SHIFT) - (start >> PAGE_SHIFT)
    return (l2[entry["L2_INDEX"] + page] & ~PAGE_MASK) | (va & PAGE_MASK)
