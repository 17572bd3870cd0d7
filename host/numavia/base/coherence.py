"""SCI coherence states and tag field widths: one definition for the gateware, the microcode
assembler, the protocol model and the checkers.

Memory (home directory) states follow IEEE 1596: HOME (no copies), FRESH (read-only copies,
memory valid), GONE (a cache may hold the line dirty, memory stale). A directory entry also has a
``locked`` bit: the home serialises structural changes at the head of a list (head rollout,
home-side recalls) by refusing new attachers (they are answered NACK and retry).

Cache states: the stable states of the standard plus the transient states the microprograms use
while a transaction is in flight. In a transient state the line is never served by the local
access controller; conflicting requests from other nodes are answered NACK (retry with backoff).
"""

from dataclasses import dataclass
from enum import IntEnum

#: A network-cache line (and a home-memory directory line) is 64 bytes by default, as in the
#: paper; ``CacheGeometry.line_bytes`` builds a card with smaller lines (the paper's Table 3).
LINE_BYTES = 64
#: The line sizes a card can be built with. The largest: the SCI header's word, count and
#: byte-enable fields cover 64 bytes; the smallest, 4 words, keeps every word-index field of the
#: gateware at least 2 bits wide.
LINE_SIZES = (16, 32, 64)
MIN_LINE_BYTES, MAX_LINE_BYTES = LINE_SIZES[0], LINE_SIZES[-1]
#: Node ids are 6 bits: a ring of up to 64 cards.
NODE_ID_BITS = 6
MAX_NODES = 1 << NODE_ID_BITS


class MemoryState(IntEnum):
    """The home directory's state of a line."""

    HOME = 0  # no copy anywhere: memory is the line
    FRESH = 1  # a list of clean copies
    GONE = 2  # a list whose head holds the line dirty
    # As HOME, and a remote node read the line uncached (its first miss, MUREAD flag "I cache")
    # since the home last wrote it. A second miss's MREAD (flag "second miss") attaches only to a
    # SHOWN line; at HOME the home wrote it between the two reads, so the copy would only be
    # recalled (producer-consumer data): it is answered uncached again.
    SHOWN = 3


#: The memory states in which memory is the line and nobody holds a copy.
HOME_OWNED = (MemoryState.HOME, MemoryState.SHOWN)


MEMORY_STATE_BITS = 2

#: The read miss at which the network cache takes a remote line: the second (the local access
#: controller's allocation filter, the default) or the first (``CTRL.CTRL.CACHE_FIRST_MISS``). Each
#: name maps to the value of that control bit.
CACHE_AT = {"second": False, "first": True}


class CacheState(IntEnum):
    INVALID = 0
    # Stable states.
    ONLY_FRESH = 1
    ONLY_DIRTY = 2
    HEAD_FRESH = 3
    HEAD_DIRTY = 4
    MID_VALID = 5
    TAIL_VALID = 6
    # Transient states (a local transaction owns the line).
    PENDING = 7  # attaching (read or write miss): no valid data yet
    WRITING = 8  # write attach done, purging the old list
    # Rolling out: the position in the list (and, for heads, whether the data is dirty) is
    # remembered so that neighbours' pointer updates can still be applied while leaving.
    LEAVE_ONLY_FRESH = 9
    LEAVE_ONLY_DIRTY = 10
    LEAVE_HEAD_FRESH = 11
    LEAVE_HEAD_DIRTY = 12
    LEAVE_MID = 13
    LEAVE_TAIL = 14


CACHE_STATE_BITS = 4

STABLE_VALID = frozenset(
    {
        CacheState.ONLY_FRESH,
        CacheState.ONLY_DIRTY,
        CacheState.HEAD_FRESH,
        CacheState.HEAD_DIRTY,
        CacheState.MID_VALID,
        CacheState.TAIL_VALID,
    }
)
LEAVING = frozenset(
    {
        CacheState.LEAVE_ONLY_FRESH,
        CacheState.LEAVE_ONLY_DIRTY,
        CacheState.LEAVE_HEAD_FRESH,
        CacheState.LEAVE_HEAD_DIRTY,
        CacheState.LEAVE_MID,
        CacheState.LEAVE_TAIL,
    }
)
TRANSIENT = frozenset({CacheState.PENDING, CacheState.WRITING}) | LEAVING

#: States in which the local access controller may serve a read / a write without the sequencer.
READ_HIT = STABLE_VALID
WRITE_HIT = frozenset({CacheState.ONLY_DIRTY})

#: The leaving state that keeps a stable state's position (and dirtiness).
LEAVE_OF = {
    CacheState.ONLY_FRESH: CacheState.LEAVE_ONLY_FRESH,
    CacheState.ONLY_DIRTY: CacheState.LEAVE_ONLY_DIRTY,
    CacheState.HEAD_FRESH: CacheState.LEAVE_HEAD_FRESH,
    CacheState.HEAD_DIRTY: CacheState.LEAVE_HEAD_DIRTY,
    CacheState.MID_VALID: CacheState.LEAVE_MID,
    CacheState.TAIL_VALID: CacheState.LEAVE_TAIL,
}

#: States whose data is newer than memory (memory is GONE and this entry answers for the line).
DIRTY = frozenset(
    {CacheState.ONLY_DIRTY, CacheState.HEAD_DIRTY, CacheState.LEAVE_ONLY_DIRTY, CacheState.LEAVE_HEAD_DIRTY}
)


def has_forward(state):
    """The entry has a successor (towards the tail)."""
    return state in (
        CacheState.HEAD_FRESH,
        CacheState.HEAD_DIRTY,
        CacheState.MID_VALID,
        CacheState.LEAVE_HEAD_FRESH,
        CacheState.LEAVE_HEAD_DIRTY,
        CacheState.LEAVE_MID,
    )


def has_backward(state):
    """The entry has a predecessor (towards the head)."""
    return state in (CacheState.MID_VALID, CacheState.TAIL_VALID, CacheState.LEAVE_MID, CacheState.LEAVE_TAIL)


def is_head(state):
    return state in (CacheState.ONLY_FRESH, CacheState.ONLY_DIRTY, CacheState.HEAD_FRESH, CacheState.HEAD_DIRTY)


# --- Network cache geometry ----------------------------------------------------------------------


@dataclass(frozen=True)
class CacheGeometry:
    """The network cache: ``sets`` x ``ways`` lines of ``line_bytes``. The line size is also the
    home directory's unit and the length of an SCI packet's data block."""

    sets: int = 64
    ways: int = 4
    line_bytes: int = LINE_BYTES
    #: Lines the allocation filter remembers: a remote line is cached at its second read miss
    #: while its first is still remembered (one block RAM of 512 x 36 bits).
    filter_lines: int = 512

    def __post_init__(self):
        for name in ("sets", "ways", "line_bytes", "filter_lines"):
            v = getattr(self, name)
            if v < 1 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two, not {v}")
        if self.line_bytes not in LINE_SIZES:
            raise ValueError(f"line_bytes must be {MIN_LINE_BYTES}..{MAX_LINE_BYTES}, not {self.line_bytes}")

    @property
    def set_bits(self):
        return (self.sets - 1).bit_length()

    @property
    def way_bits(self):
        return (self.ways - 1).bit_length()

    @property
    def line_words(self):
        return self.line_bytes // 4

    @property
    def offset_bits(self):
        """Byte-offset bits of an address within its line."""
        return self.line_bytes.bit_length() - 1

    @property
    def word_bits(self):
        """Word-index bits within a line."""
        return self.offset_bits - 2

    @property
    def line_addr_bits(self):
        """Bits of a global line address (a byte address without its offset in the line)."""
        return 32 - self.offset_bits

    @property
    def lines(self):
        return self.sets * self.ways


def cache_set(line_index, home, sets):
    """Set of a line (``line_index`` = offset // line bytes within its home's slice).

    Every node lays its slice out alike (the same arrays at the same offsets), so indexing by
    offset alone would put every home's hot lines into the same sets. The home node's bits,
    reversed, are XORed into the top of the index: two homes then use opposite halves of the
    sets, four homes quarters, and so on, for any slice data that fits in sets / homes lines.
    (Reversed so that the low node ids, the ones a small ring uses, spread widest; XOR and not a
    sum keeps the tag SRAM's address path free of carries.)

    Works on ints and on Amaranth values alike; ``sets`` is a power of two.
    """
    top = (sets - 1).bit_length() - 1
    spread = 0
    for bit in range(min(NODE_ID_BITS, top + 1)):  # home bit b to index bit top - b
        spread = spread ^ (((home >> bit) & 1) << (top - bit))
    return (line_index ^ spread) & (sets - 1)
