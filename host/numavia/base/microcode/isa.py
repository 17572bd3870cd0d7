"""Instruction set of the remote access controller's sequencer: the one definition read by the
micro-assembler, the instruction-set simulator and the Amaranth sequencer's decoder.

A micro-instruction is 64 bits::

    63      58 57   52 51   46 45   40 39   34 33         18 17   10 9        0
    |  op     |   a   |   b   |   c   |   d   |     imm     | (0)   |  target  |

Each operation names what its operand fields mean (:data:`OPS`). Operands are small enumerations
(pointer sources, conditions, ...) or immediates (states, commands). ``target`` is a control-store
address for jumps, branches, calls and dispatch tables.

The sequencer runs *contexts*: :data:`NUM_TRANSACTIONS` transaction-buffer entries for local
requests (they may wait for responses) and one handler context for incoming requests (which are
answered in one run, never waiting). A context runs until ``WAIT``, ``BACKOFF`` or ``END``.

Control-store layout: address 0 onwards holds the vector table: one ``JMP`` per incoming request
command (:func:`request_vector`), then one per local request kind (:func:`local_vector`), then
the fast path's resume points (:func:`resume_vector`); the assembler builds it from ``.vector``
directives.
"""

from dataclasses import dataclass
from enum import IntEnum

from numavia.base.coherence import CacheState, MemoryState
from numavia.base.sci_packet import Command, Status

WORD_BITS = 64
TARGET_BITS = 10
CONTROL_STORE_DEPTH = 1 << TARGET_BITS
NUM_TRANSACTIONS = 16
HANDLER_CONTEXT = NUM_TRANSACTIONS  # context index of the incoming-request handler
CONTEXT_BITS = 5  # fits the packet's tid field

FIELDS = {  # name: (lsb, width)
    "op": (58, 6),
    "a": (52, 6),
    "b": (46, 6),
    "c": (40, 6),
    "d": (34, 6),
    "imm": (18, 16),
    "target": (0, TARGET_BITS),
}


class LocalKind(IntEnum):
    """What the local access controller hands the sequencer."""

    READ = 0
    WRITE = 1
    FLUSH = 2  # roll every valid line of the network cache out
    READ_ONCE = 3  # a read miss the allocation filter does not cache (a first miss, a dead line)


#: The kinds whose answer is the words read (the host's count of response beats).
READ_KINDS = (LocalKind.READ, LocalKind.READ_ONCE)


NUM_COMMAND_VECTORS = 16
INVALID_COMMAND_SLOT = 0  # every value that is not a Command lands here


def command_index(cmd):
    """Commands 1..7 (to home) and 16..20 (to caches) fold into vector slots 1..12; any other
    value (a corrupted or hostile packet) into slot 0."""
    cmd = int(cmd)
    if cmd not in Command._value2member_map_:
        return INVALID_COMMAND_SLOT
    return cmd if cmd < 16 else cmd - 16 + 8


def request_vector(cmd):
    return command_index(cmd)


def local_vector(kind):
    return NUM_COMMAND_VECTORS + int(kind)


class Resume(IntEnum):
    """Where the sequencer's hard-wired fast path hands a local miss back to the microcode: the
    SEND of its attach request (the outgoing queue was full), the instruction after that SEND's
    WAIT (the answer came), after a read's answer whose words the fast path gave the host, after
    a purge it answered, and the steps of a write miss's purges. The microcode names them with
    ``.vector resume``, so the fast path follows the program wherever the assembler puts it, and
    waits at one with ``WAIT_AT`` where the fast path may take the answer."""

    READ_SEND = 0
    READ_SENT = 1
    WRITE_SEND = 2
    WRITE_SENT = 3
    READ_ONCE_SEND = 4  # a read miss not cached (the allocation filter's): its uncached read
    READ_ONCE_SENT = 5
    READ_ANSWERED = 6  # a caching read's answer, once the host has its words: the bookkeeping
    PURGE_ANSWERED = 7  # a purged copy's answer sent: the copy invalidated, the purge counted
    # A write miss's answer and its purges (the microcode waits for these with WAIT_AT):
    WRITE_ALONE = 8  # nobody to purge, the host's write done: the line kept and merged
    WRITE_FIRST_PURGE_SEND = 9  # the first CPURGE (the outgoing queue was full)
    WRITE_FIRST_PURGED = 10  # the first CPURGE sent: the line kept, the entry WRITING
    WRITE_PURGE_SEND = 11  # the next CPURGE (the outgoing queue was full)
    WRITE_PURGE_SENT = 12  # a purge's answer came
    WRITE_PURGED = 13  # the last purge answered, the host's write done: the merge


def resume_vector(point):
    return NUM_COMMAND_VECTORS + len(LocalKind) + int(point)


VECTOR_TABLE_SIZE = NUM_COMMAND_VECTORS + len(LocalKind) + len(Resume)


# --- Operand enumerations -------------------------------------------------------------------------


class Cond(IntEnum):
    """Branch conditions."""

    ALWAYS = 0
    M_OK = 1  # the message's status is OK
    M_NACK = 2
    M_ERROR = 3  # ERROR or NOT_READY
    M_PTR_V = 4  # the message carries a pointer
    M_FLAG = 5
    M_HAS_DATA = 6
    HIT = 7  # the last C_LOOKUP or C_ALLOC found the line
    VICTIM = 8  # the last C_ALLOC chose a way holding a valid line (roll it out first)
    NO_WAY = 9  # the last C_ALLOC found every way of the set in a transient state
    LOCKED = 10  # the last DIR_RD found the line locked
    SRC_IS_HEAD = 11  # the message's source is the directory's head
    SRC_IS_FWD = 12  # the message's source is this entry's successor
    SRC_IS_BWD = 13  # the message's source is this entry's predecessor
    FWD_V = 14  # the state register has a successor
    BWD_V = 15  # the state register has a predecessor
    RETRY_MAX = 16  # the retry counter reached its limit
    NUMA = 17  # the card is in NUMA mode
    IS_HOME = 18  # this node is the line's home
    SCAN_DONE = 19  # C_SCAN found no more valid lines
    PTR_V = 20  # the PTR register holds a node
    F_DATA = 24  # context flags (SETF/CLRF), see Flag
    F_GONE = 25
    F_DIRTY = 26
    F_WRITE = 27
    F_A = 28
    F_B = 29


class Flag(IntEnum):
    """Context flag bits; ``Cond.F_<name>`` tests them."""

    DATA = 0  # the line buffer holds the line
    GONE = 1  # the home answered GONE: the list's data is dirty
    DIRTY = 2  # write the line back / hand the new head a dirty list
    WRITE = 3  # after a rollout, carry on with a write attach
    A = 4  # scratch
    B = 5


FLAG_CONDS = {
    Flag.DATA: Cond.F_DATA,
    Flag.GONE: Cond.F_GONE,
    Flag.DIRTY: Cond.F_DIRTY,
    Flag.WRITE: Cond.F_WRITE,
    Flag.A: Cond.F_A,
    Flag.B: Cond.F_B,
}


class Field(IntEnum):
    """What DISP dispatches on."""

    STATE = 0  # the state register (16 entries)
    MSTATE = 1  # the directory's memory state (4 entries)
    M_MSTATE = 2  # the memory state in the message (4 entries)
    KIND = 3  # the local request kind


DISPATCH_SIZE = {Field.STATE: 16, Field.MSTATE: 4, Field.M_MSTATE: 4, Field.KIND: len(LocalKind)}


class Ptr(IntEnum):
    """Pointer registers and sources. Each value is a node id plus a valid bit."""

    NONE = 0  # source only: no node
    PTR = 1  # scratch pointer register
    FWD = 2  # successor (loaded by C_LOOKUP)
    BWD = 3  # predecessor (loaded by C_LOOKUP)
    HEAD = 4  # directory head (loaded by DIR_RD)
    M_SRC = 5  # source only: the message's source
    M_PTR = 6  # source only: the message's pointer field
    SELF = 7  # source only: this node
    KEEP = 8  # destination field only: leave unchanged


class Dest(IntEnum):
    """Where SEND sends a request."""

    HOME = 0  # the line's home node
    PTR = 1
    FWD = 2
    BWD = 3
    HEAD = 4


class FlagSrc(IntEnum):
    """The packet's ``flag`` bit for SEND/REPLY."""

    ZERO = 0
    ONE = 1
    F_GONE = 2  # context flag GONE
    F_DIRTY = 3  # context flag DIRTY
    SECOND_MISS = 4  # the card caches a line at its second miss (CTRL.CACHE_FIRST_MISS clear)


class Mem(IntEnum):
    HOME = 0  # the node's shared slice
    CACHE = 1  # the network cache data, at (set of addr, way)


class DataSrc(IntEnum):
    """The data block SEND/REPLY puts in the packet."""

    NONE = 0
    BUF = 1  # the line buffer
    HOME = 2  # the home memory line of addr, streamed straight into the packet (no buffer copy)
    CACHE = 3  # the network cache's line of (addr, way), likewise


class LineSrc(IntEnum):
    """Where COMPLETE reads the local request's words and WR_LINE the line it writes."""

    BUF = 0  # the line buffer
    MSG = 1  # the data block of the message that resumed the context (before any copy of it)


class StateSrc(IntEnum):
    IMM = 0  # the instruction's imm field
    KEEP = 1
    REG = 2  # the state register


class Lock(IntEnum):
    KEEP = 0
    CLEAR = 1
    SET = 2


class MStateSrc(IntEnum):
    IMM = 0
    KEEP = 1


class Counter(IntEnum):
    """Protocol event counters of the sequencer (COUNT)."""

    PROTOCOL_ERROR = 0  # a request that cannot happen in a correct protocol run
    NACK_SENT = 1
    ROLLOUT = 2
    PURGE = 3
    MIXED_MODE = 4  # an uncached access to a line cached elsewhere
    RETRY_LIMIT = 5  # a local request abandoned after too many retries
    REWRITTEN_READ = 6  # a second read miss answered uncached: the home wrote the line since the first


NUM_COUNTERS = 8


# --- Operations ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operand:
    name: str
    kind: object  # an IntEnum class, or "imm:<enum>" for the imm field, or "target"
    field: str  # instruction field holding it


@dataclass(frozen=True)
class Op:
    name: str
    code: int
    operands: tuple
    doc: str


def _o(name, kind, field):
    return Operand(name, kind, field)


_TARGET = _o("target", "target", "target")

OPS = {
    op.name: op
    for op in (
        Op("NOP", 0, (), "do nothing"),
        Op("JMP", 1, (_TARGET,), "continue at target"),
        Op("BRT", 2, (_o("cond", Cond, "a"), _TARGET), "branch if cond holds"),
        Op("BRF", 3, (_o("cond", Cond, "a"), _TARGET), "branch unless cond holds"),
        Op("DISP", 4, (_o("field", Field, "a"), _TARGET), "continue at target + value of field"),
        Op("CALL", 5, (_TARGET,), "continue at target, return address in the context (one level)"),
        Op("RET", 6, (), "continue at the return address"),
        Op("WAIT", 7, (), "suspend until the response to this context's request arrives"),
        Op(
            "WAIT_AT",
            15,
            (_o("point", Resume, "a"),),
            "as WAIT, but resume at the vector of point, where the fast path may take the answer",
        ),
        Op("BACKOFF", 8, (), "suspend for a backoff delay that grows with the retry count"),
        Op("END", 9, (), "the context's work is done; free it"),
        Op("SETF", 10, (_o("flag", Flag, "a"),), "set a context flag"),
        Op("CLRF", 11, (_o("flag", Flag, "a"),), "clear a context flag"),
        Op("MOVP", 12, (_o("dst", Ptr, "a"), _o("src", Ptr, "b")), "pointer register := source"),
        Op("MOVS", 13, (_o("state", "imm:CacheState", "imm"),), "state register := state"),
        Op("CLRRETRY", 14, (), "retry counter := 0"),
        Op("DIR_RD", 16, (), "read the directory entry of addr: MSTATE, LOCKED, HEAD"),
        Op(
            "DIR_WR",
            17,
            (
                _o("mstate_src", MStateSrc, "a"),
                _o("lock", Lock, "b"),
                _o("head", Ptr, "c"),
                _o("mstate", "imm:MemoryState", "imm"),
            ),
            "write the directory entry of addr",
        ),
        Op("C_LOOKUP", 18, (), "look addr up in the network cache: HIT, way, state, FWD, BWD"),
        Op(
            "C_ALLOC",
            19,
            (),
            "choose a way for addr: an invalid one, else the LRU stable one "
            "(VICTIM, victim address); NO_WAY if every way is transient. HIT if addr is cached "
            "already (C_LOOKUP finds its way), else the state and pointers are cleared as by a "
            "C_LOOKUP that misses: one tag lookup serves a miss",
        ),
        Op(
            "C_WR",
            20,
            (
                _o("state_src", StateSrc, "a"),
                _o("fwd", Ptr, "b"),
                _o("bwd", Ptr, "c"),
                _o("state", "imm:CacheState", "imm"),
            ),
            "write the tag of (addr, way): state, successor, predecessor",
        ),
        Op("C_TOUCH", 21, (), "mark (addr, way) most recently used"),
        Op("C_SCAN", 22, (), "advance the flush scan to the next valid way: addr, way (SCAN_DONE)"),
        Op("SWAP_VICTIM", 23, (), "exchange addr with the victim address (to roll the victim out)"),
        Op("RD_LINE", 24, (_o("mem", Mem, "a"),), "line buffer := memory line; sets DATA"),
        Op(
            "WR_LINE",
            25,
            (_o("mem", Mem, "a"), _o("src", LineSrc, "b")),
            "memory line := line buffer, or (src=MSG) the message's data block, with no copy of it",
        ),
        Op("M_TO_BUF", 26, (), "line buffer := the message's data; sets DATA"),
        Op("MERGE_HOST", 27, (), "merge the local request's write bytes into the line buffer"),
        Op("MERGE_MSG", 28, (), "merge the message's data under its byte enables into the buffer"),
        Op(
            "SEND",
            32,
            (
                _o("dest", Dest, "a"),
                _o("ptr", Ptr, "b"),
                _o("flag", FlagSrc, "c"),
                _o("data", DataSrc, "d"),
                _o("cmd", "imm:Command", "imm"),
            ),
            "send request cmd for addr to dest, tid = this context",
        ),
        Op(
            "REPLY",
            33,
            (
                _o("ptr", Ptr, "a"),
                _o("flag", FlagSrc, "b"),
                _o("data", DataSrc, "c"),
                _o("status", "imm:Status", "imm"),
            ),
            "answer the message being handled (the directory's MSTATE goes along)",
        ),
        Op(
            "COMPLETE",
            34,
            (_o("src", LineSrc, "a"), _o("status", "imm:Status", "imm")),
            "finish the local request: its read words (from src), or an error; the context runs on",
        ),
        Op("COUNT", 35, (_o("counter", Counter, "a"),), "count a protocol event"),
    )
}

OPS_BY_CODE = {op.code: op for op in OPS.values()}
assert len(OPS_BY_CODE) == len(OPS)
assert max(OPS_BY_CODE) < 1 << FIELDS["op"][1]

IMM_ENUMS = {"CacheState": CacheState, "MemoryState": MemoryState, "Command": Command, "Status": Status}


def encode(op_name, **operands):
    """Encode one instruction; operands by name, as ints or enum members."""
    op = OPS[op_name]
    word = op.code << FIELDS["op"][0]
    given = dict(operands)
    for operand in op.operands:
        if operand.name not in given:
            raise ValueError(f"{op_name}: missing operand {operand.name}")
        value = int(given.pop(operand.name))
        lsb, width = FIELDS[operand.field]
        if not 0 <= value < (1 << width):
            raise ValueError(f"{op_name}: operand {operand.name}={value} does not fit {width} bits")
        word |= value << lsb
    if given:
        raise ValueError(f"{op_name}: unknown operand(s) {', '.join(given)}")
    return word


def decode(word):
    """``(op, {operand: value})`` of an instruction word; raises ValueError if malformed."""
    if not 0 <= word < (1 << WORD_BITS):
        raise ValueError("instruction words are 64-bit")
    code = (word >> FIELDS["op"][0]) & ((1 << FIELDS["op"][1]) - 1)
    if code not in OPS_BY_CODE:
        raise ValueError(f"unknown opcode {code}")
    op = OPS_BY_CODE[code]
    values = {}
    used = FIELDS["op"]
    mask = ((1 << used[1]) - 1) << used[0]
    for operand in op.operands:
        lsb, width = FIELDS[operand.field]
        mask |= ((1 << width) - 1) << lsb
        values[operand.name] = (word >> lsb) & ((1 << width) - 1)
    if word & ~mask:
        raise ValueError(f"{op.name}: bits set outside its operand fields")
    return op, values
