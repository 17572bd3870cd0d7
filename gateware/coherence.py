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

from enum import IntEnum

#: A network-cache line (and a home-memory directory line) is 64 bytes, as in the paper.
LINE_BYTES = 64
NODE_ID_BITS = 6


class MemoryState(IntEnum):
    HOME = 0
    FRESH = 1
    GONE = 2


MEMORY_STATE_BITS = 2


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
    PENDING = 8        # attaching (read or write miss): no valid data yet
    WRITING = 9        # write attach done, purging the old list; data valid once purged
    LEAVE_ONLY = 10    # rolling out; the position in the list is remembered so that
    LEAVE_HEAD = 11    # neighbours' pointer updates can still be applied while leaving
    LEAVE_MID = 12
    LEAVE_TAIL = 13


CACHE_STATE_BITS = 4

STABLE_VALID = frozenset({CacheState.ONLY_FRESH, CacheState.ONLY_DIRTY, CacheState.HEAD_FRESH,
                          CacheState.HEAD_DIRTY, CacheState.MID_VALID, CacheState.TAIL_VALID})
LEAVING = frozenset({CacheState.LEAVE_ONLY, CacheState.LEAVE_HEAD, CacheState.LEAVE_MID,
                     CacheState.LEAVE_TAIL})
TRANSIENT = frozenset({CacheState.PENDING, CacheState.WRITING}) | LEAVING

#: States in which the local access controller may serve a read / a write without the sequencer.
READ_HIT = STABLE_VALID
WRITE_HIT = frozenset({CacheState.ONLY_DIRTY})

#: A stable state's list position, and the leaving state that keeps it.
LEAVE_OF = {
    CacheState.ONLY_FRESH: CacheState.LEAVE_ONLY, CacheState.ONLY_DIRTY: CacheState.LEAVE_ONLY,
    CacheState.HEAD_FRESH: CacheState.LEAVE_HEAD, CacheState.HEAD_DIRTY: CacheState.LEAVE_HEAD,
    CacheState.MID_VALID: CacheState.LEAVE_MID, CacheState.TAIL_VALID: CacheState.LEAVE_TAIL,
}


def has_forward(state):
    """The entry has a successor (towards the tail): its ``fwd`` pointer is meaningful."""
    return state in (CacheState.HEAD_FRESH, CacheState.HEAD_DIRTY, CacheState.MID_VALID,
                     CacheState.LEAVE_HEAD, CacheState.LEAVE_MID)


def has_backward(state):
    """The entry has a predecessor (towards the head): its ``bwd`` pointer is meaningful."""
    return state in (CacheState.MID_VALID, CacheState.TAIL_VALID, CacheState.LEAVE_MID,
                     CacheState.LEAVE_TAIL)


def is_head(state):
    return state in (CacheState.ONLY_FRESH, CacheState.ONLY_DIRTY, CacheState.HEAD_FRESH,
                     CacheState.HEAD_DIRTY)
