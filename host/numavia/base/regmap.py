"""The card's register map: the one definition of every register the card exposes.

Gateware builds its register banks from these objects, and ``numavia.base.codegen`` turns them into the
firmware's C header, the host's Python constants and the JSON that Renode files are generated from.
Nothing else in the project writes a register offset down.

Offsets are in bytes. A :class:`Block` sits at ``base`` inside the card's register window; a
:class:`Register` sits at ``offset`` inside its block. Registers are 32 bits wide on the bus.
A :class:`RegisterArray` repeats a group of registers at a stride (one group per VI, per
completion queue, ...); its ``count`` is the capacity the map reserves, and a card may build fewer
elements (the rest answer ``err`` like any hole).
"""

from dataclasses import dataclass, field
from enum import Enum

from numavia.base.coherence import NODE_ID_BITS as NODE_ID_BITS  # part of the register map: the node-id fields


class Access(Enum):
    RO = "ro"  # value driven by hardware; reads may have a side effect (``r_stb``)
    RW = "rw"  # storage inside the bank; hardware sees the stored value
    WO = "wo"  # command/doorbell: a write strobe with data, reads return 0


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int = 1
    doc: str = ""

    @property
    def mask(self):
        return ((1 << self.width) - 1) << self.lsb

    def extract(self, value):
        """This field's value within a register value."""
        return (value & self.mask) >> self.lsb


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: Access
    doc: str
    width: int = 32
    reset: int = 0
    fields: tuple = ()

    def __post_init__(self):
        if self.offset % 4:
            raise ValueError(f"register {self.name}: offset {self.offset:#x} is not word aligned")
        if not 0 < self.width <= 32:
            raise ValueError(f"register {self.name}: width {self.width} is not 1..32")
        if self.reset >> self.width:
            raise ValueError(f"register {self.name}: reset {self.reset:#x} does not fit {self.width} bits")
        used = 0
        for f in self.fields:
            if f.lsb + f.width > self.width:
                raise ValueError(f"register {self.name}: field {f.name} exceeds the register width")
            if used & f.mask:
                raise ValueError(f"register {self.name}: field {f.name} overlaps another field")
            used |= f.mask

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name}")


@dataclass(frozen=True)
class RegisterArray:
    """``count`` copies of ``registers`` (offsets relative to an element), ``stride`` bytes apart."""

    name: str
    offset: int
    count: int
    stride: int
    doc: str
    registers: tuple = ()

    def __post_init__(self):
        if self.offset % 4 or self.stride % 4 or self.stride <= 0 or self.count <= 0:
            raise ValueError(f"array {self.name}: offset and stride must be word aligned, count positive")
        seen = {}
        for r in self.registers:
            if r.offset + 4 > self.stride:
                raise ValueError(f"array {self.name}: register {r.name} lies outside the stride")
            if r.offset in seen:
                raise ValueError(f"array {self.name}: {r.name} and {seen[r.offset]} share offset {r.offset:#x}")
            seen[r.offset] = r.name

    @property
    def size(self):
        return self.count * self.stride

    def register(self, name):
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(f"array {self.name} has no register {name}")

    def element_offset(self, index):
        """Byte offset inside the block of element ``index``."""
        if not 0 <= index < self.count:
            raise IndexError(f"array {self.name} has {self.count} elements, not {index + 1}")
        return self.offset + index * self.stride

    def offset_of(self, index, register):
        """Byte offset inside the block of ``register`` of element ``index``."""
        return self.element_offset(index) + self.register(register).offset


@dataclass(frozen=True)
class Block:
    name: str
    base: int
    size: int
    doc: str
    registers: tuple = ()
    arrays: tuple = ()

    def __post_init__(self):
        seen = {}
        for r in self.registers:
            if r.offset + 4 > self.size:
                raise ValueError(f"block {self.name}: register {r.name} lies outside the block")
            if r.offset in seen:
                raise ValueError(f"block {self.name}: {r.name} and {seen[r.offset]} share offset {r.offset:#x}")
            seen[r.offset] = r.name
        spans = [(r.offset, r.offset + 4, r.name) for r in self.registers]
        for a in self.arrays:
            if a.offset + a.size > self.size:
                raise ValueError(f"block {self.name}: array {a.name} lies outside the block")
            spans.append((a.offset, a.offset + a.size, a.name))
        spans.sort()
        for (_s0, e0, n0), (s1, _e1, n1) in zip(spans, spans[1:]):
            if s1 < e0:
                raise ValueError(f"block {self.name}: {n0} and {n1} overlap")
        names = [r.name for r in self.registers] + [a.name for a in self.arrays]
        if len(set(names)) != len(names):
            raise ValueError(f"block {self.name}: duplicate register or array names")

    def register(self, name):
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(f"block {self.name} has no register {name}")

    def array(self, name):
        for a in self.arrays:
            if a.name == name:
                return a
        raise KeyError(f"block {self.name} has no array {name}")

    @property
    def addr_width(self):
        """Word-address bits needed to decode this block."""
        return max(1, (self.size // 4 - 1).bit_length())


@dataclass(frozen=True)
class RegisterMap:
    name: str
    size: int
    blocks: tuple = field(default_factory=tuple)

    def __post_init__(self):
        spans = sorted((b.base, b.base + b.size, b.name) for b in self.blocks)
        for (_s0, e0, n0), (s1, _e1, n1) in zip(spans, spans[1:]):
            if s1 < e0:
                raise ValueError(f"register map {self.name}: blocks {n0} and {n1} overlap")
        for b in self.blocks:
            if b.base % b.size:
                raise ValueError(f"block {b.name}: base {b.base:#x} is not aligned to its size")
            if b.base + b.size > self.size:
                raise ValueError(f"block {b.name} lies outside the {self.name} window")

    def block(self, name):
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"register map {self.name} has no block {name}")

    def address(self, block, register):
        """Byte offset of ``block.register`` inside the window."""
        b = self.block(block)
        return b.base + b.register(register).offset

    def element_base(self, block, array, index):
        """Byte offset of element ``index`` of ``block.array`` inside the window."""
        b = self.block(block)
        return b.base + b.array(array).element_offset(index)

    def element_address(self, block, array, index, register):
        """Byte offset of ``register`` of element ``index`` of ``block.array`` inside the window."""
        b = self.block(block)
        return b.base + b.array(array).offset_of(index, register)

    @property
    def addr_width(self):
        return max(1, (self.size // 4 - 1).bit_length())


# --- The card ------------------------------------------------------------------------------------

#: "NMVA" in ASCII: a read of CTRL.ID that returns anything else means no card answers.
CARD_ID = 0x4E4D5641
#: Version of the card's hardware interface (this register map): bump on incompatible change.
#: 2.0: a VI posts only descriptors inside the area its driver gave it (VI ``DESC_BASE``/``DESC_SIZE``).
#: 2.1: a descriptor with CONTROL bits no version defines completes with FORMAT_ERROR.
#: 2.2: completion queues notify by interrupt (CQ ``CTRL.ARM``, ``CQ_NOTIFIED``, ``IRQ_PENDING.CQ``).
HW_VERSION = (2, 2, 0)


def _version_word(v):
    major, minor, patch = v
    return major << 16 | minor << 8 | patch


CTRL = Block(
    "ctrl",
    base=0x0000,
    size=0x100,
    doc="Identity, node id, control and the cycle counter",
    registers=(
        Register("ID", 0x00, Access.RO, "Card identity, always CARD_ID", reset=CARD_ID),
        Register(
            "VERSION",
            0x04,
            Access.RO,
            "Hardware interface version",
            reset=_version_word(HW_VERSION),
            fields=(
                Field("PATCH", 0, 8),
                Field("MINOR", 8, 8),
                Field("MAJOR", 16, 8),
            ),
        ),
        Register(
            "NODE_ID_STRAP", 0x08, Access.RO, "Node id given by board straps (or the simulation)", width=NODE_ID_BITS
        ),
        Register(
            "NODE_ID",
            0x0C,
            Access.RW,
            "This card's node id on the ring; set by the firmware at boot",
            width=NODE_ID_BITS,
        ),
        Register("SCRATCH", 0x10, Access.RW, "Free for software; used to check the bus at boot", reset=0x5CA7C411),
        Register(
            "CTRL",
            0x14,
            Access.RW,
            "Card-wide control",
            width=8,
            fields=(
                Field("NODE_ID_VALID", 0, doc="The firmware has set NODE_ID; the card may join the ring"),
                Field("NUMA_MODE", 1, doc="Bypass the network cache: every remote access goes to its home"),
                Field(
                    "CACHE_FIRST_MISS",
                    2,
                    doc="Cache a remote line at its first read miss; clear: a line is read without caching "
                    "at its first miss, cached at its second, and not while its copies die unused "
                    "(the allocation filter)",
                ),
            ),
        ),
        Register(
            "STATUS",
            0x18,
            Access.RO,
            "Card-wide status",
            width=8,
            fields=(Field("READY", 0, doc="NODE_ID_VALID is set"),),
        ),
        Register("CYCLES_LO", 0x20, Access.RO, "Free-running cycle counter, low word; reading it latches CYCLES_HI"),
        Register("CYCLES_HI", 0x24, Access.RO, "Cycle counter high word, as latched by the last CYCLES_LO read"),
        Register("CLK_FREQ_HZ", 0x28, Access.RO, "Frequency of the clock CYCLES counts, in Hz"),
        Register(
            "MODE_STRAP",
            0x2C,
            Access.RO,
            "Board switches the firmware applies at boot",
            width=8,
            fields=(
                Field("NUMA", 0, doc="start in NUMA mode (no network cache)"),
                Field("CACHE_FIRST_MISS", 1, doc="start caching remote lines at their first read miss"),
            ),
        ),
        Register(
            "FEATURES",
            0x30,
            Access.RO,
            "Blocks this card was built with (CardConfig)",
            width=8,
            fields=(
                Field("VIA", 0, doc="the VIA engine (the VIA block answers; small FPGAs build without it)"),
                Field("PCIE", 1, doc="the PCIe endpoint: BAR0 registers, BAR2 host port, VIA DMA to the PCIe host"),
            ),
        ),
    ),
)

#: Event counters of the local access controller, in register order (32 bits, they wrap).
LAC_COUNTERS = (
    ("HOME_READ_HITS", "reads of this node's slice served from memory"),
    ("HOME_WRITE_HITS", "writes to this node's slice served without the sequencer"),
    ("CACHE_READ_HITS", "reads of other nodes' lines served by the network cache"),
    ("CACHE_WRITE_HITS", "writes to ONLY_DIRTY lines of the network cache"),
    ("PRIVATE_ACCESSES", "accesses to the private memory"),
    ("READ_MISSES", "reads handed to the sequencer"),
    ("WRITE_MISSES", "writes handed to the sequencer"),
    ("ERRORS", "accesses answered with an error"),
    ("STALL_CYCLES", "cycles host accesses waited for the sequencer to give up the tags"),
    ("ACCESSES", "line accesses completed"),
    ("ACCESS_CYCLES", "sum of their latencies, request accepted to last beat, in cycles"),
    ("LAST_LATENCY", "latency of the last completed line access, in cycles"),
    ("LAST_HANDOFF", "cycles from request to the miss reaching the sequencer, last miss"),
    ("READ_ONCE", "read misses read without caching the line: a first miss or a dead line (the allocation filter)"),
)

LAC = Block(
    "lac",
    base=0x0100,
    size=0x100,
    doc="Local access controller and network cache",
    registers=(
        Register(
            "GEOMETRY",
            0x00,
            Access.RO,
            "Network cache and slice geometry",
            fields=(
                Field("WAYS", 0, 4),
                Field("SET_BITS", 4, 5),
                Field("SLICE_BITS", 9, 5),
                Field("LOOKUP_LATENCY", 14, 4, "tag lookup latency in cycles"),
                Field("LINE_BITS", 18, 3, "log2 of the line size in bytes"),
            ),
        ),
        Register(
            "COMMAND",
            0x04,
            Access.WO,
            "Commands",
            fields=(
                Field("FLUSH", 0, doc="roll every network-cache line out (before entering NUMA mode)"),
                Field("CLEAR_COUNTERS", 1, doc="zero the event counters"),
            ),
        ),
        Register(
            "STATUS",
            0x08,
            Access.RO,
            "Status",
            width=8,
            fields=(
                Field("FLUSH_BUSY", 0, doc="a flush is in progress"),
                Field("DEBUG_BUSY", 1, doc="a debug read is in progress"),
            ),
        ),
        # Debug reads of the tag SRAM and memories (for status tools and quiescence checks): write
        # DEBUG_ADDR then DEBUG_CMD; when STATUS.DEBUG_BUSY clears, the DEBUG_* results are valid.
        Register(
            "DEBUG_ADDR",
            0x10,
            Access.RW,
            "Debug read address: a global line address "
            "(DIRECTORY), set * ways + way (TAG) or a word index (HOME/CACHE/PRIVATE memory)",
        ),
        Register(
            "DEBUG_CMD",
            0x14,
            Access.WO,
            "Start a debug read",
            width=3,
            fields=(Field("WHAT", 0, 3, "0 directory entry, 1 cache tag, 2 home word, 3 cache word, 4 private word"),),
        ),
        Register(
            "DEBUG_TAG",
            0x18,
            Access.RO,
            "Cache tag read: state, forward, backward",
            fields=(
                Field("STATE", 0, 4),
                Field("FWD", 8, 6),
                Field("BWD", 16, 6),
            ),
        ),
        Register("DEBUG_TAG_LINE", 0x1C, Access.RO, "Cache tag read: global line address"),
        Register(
            "DEBUG_DIR",
            0x20,
            Access.RO,
            "Directory read: memory state, lock, head",
            fields=(
                Field("MSTATE", 0, 2),
                Field("LOCK", 2),
                Field("HEAD", 8, 6),
            ),
        ),
        Register("DEBUG_DATA", 0x24, Access.RO, "Memory word read"),
        *(Register(name, 0x40 + 4 * i, Access.RO, doc) for i, (name, doc) in enumerate(LAC_COUNTERS)),
    ),
)

#: Event counters of the sequencer, in register order (32 bits): the microcode's COUNT events
#: (microcode.isa.Counter, same order) then the sequencer's own.
RAC_COUNTERS = (
    ("PROTOCOL_ERRORS", "requests a correct protocol run never sends (must stay 0)"),
    ("NACKS_SENT", "requests answered NACK (line in a transient state)"),
    ("ROLLOUTS", "lines rolled out of the network cache"),
    ("PURGES", "lines invalidated here by a writer"),
    ("MIXED_MODE", "uncached accesses refused because another node caches the line"),
    ("RETRY_LIMITS", "local accesses abandoned after too many retries"),
    ("REWRITTEN_READS", "second read misses answered uncached: the home wrote the line since the first"),
    ("COUNTER7", "reserved"),
    ("RUNS", "microprogram runs"),
    ("INSTRUCTIONS", "micro-instructions executed"),
    ("REQUESTS", "requests received"),
    ("RESPONSES", "responses received"),
    ("DROPPED_RESPONSES", "responses nobody was waiting for"),
    ("SEND_STALLS", "SENDs suspended because the outgoing queue was full"),
    ("FAILED_SENDS", "packets the ring link gave up on"),
    ("NOT_READY_REPLIES", "requests refused before the control store was loaded"),
    ("FAST_PATH", "misses sent, answers completed and home requests answered by the hard-wired fast path"),
    ("LOOKUPS_TAKEN", "fast-path misses that took the local access controller's tag lookup (no second lookup)"),
)

RAC = Block(
    "rac",
    base=0x0200,
    size=0x100,
    doc="Remote access controller (microprogrammed sequencer)",
    registers=(
        Register(
            "CTRL",
            0x00,
            Access.RW,
            "Control",
            width=8,
            fields=(
                Field("LOADED", 0, doc="the control store holds a verified image: serve remote traffic"),
                Field(
                    "MICROCODE_ONLY",
                    1,
                    doc="run every transaction in microcode: the hard-wired fast path for plain misses and "
                    "home reads/writes is off (set it for a control store whose protocol differs)",
                ),
            ),
        ),
        Register(
            "STATUS",
            0x04,
            Access.RO,
            "Status",
            width=16,
            fields=(
                Field("LOADED", 0),
                Field("WRITE_REFUSED", 1, doc="a write to the loaded control store was ignored"),
                Field("BUSY_CONTEXTS", 8, 5, "transaction-buffer entries in use"),
            ),
        ),
        Register("UCODE_ADDR", 0x08, Access.WO, "Set the control-store address", width=16),
        Register("UCODE_POS", 0x0C, Access.RO, "Current control-store address", width=16),
        Register("UCODE_WDATA_LO", 0x10, Access.RW, "Low word of the next control-store write"),
        Register("UCODE_WDATA_HI", 0x14, Access.WO, "High word: writes {HI, LO} at the address, then address + 1"),
        Register("UCODE_RDATA_LO", 0x18, Access.RO, "Low word of the control store at the address"),
        Register("UCODE_RDATA_HI", 0x1C, Access.RO, "High word of the control store at the address"),
        Register("UCODE_DEPTH", 0x20, Access.RO, "Words in the control store", width=16),
        *(Register(name, 0x40 + 4 * i, Access.RO, doc) for i, (name, doc) in enumerate(RAC_COUNTERS)),
    ),
)

#: Saturating 32-bit event counters of the ring link, in register order (name, what is counted).
RING_COUNTERS = (
    ("TX_PACKETS", "Request/response packets transmitted, resends included"),
    ("TX_ACCEPTED", "Own packets completed by an ACCEPTED echo (each packet once)"),
    ("TX_ECHOES", "Echoes transmitted (ACCEPTED and BUSY)"),
    ("RX_PACKETS", "Packets stored in the incoming queue"),
    ("RX_ECHOES", "Echoes received for this node with a good CRC"),
    ("BYPASSED", "Packets forwarded to the next node"),
    ("CRC_ERRORS", "Packets for this node dropped for a bad CRC, a wrong length or an unknown type"),
    ("DUPLICATES", "Packets received again (same alternating bit): echoed ACCEPTED, not stored"),
    ("BUSY_SENT", "BUSY echoes sent because the incoming queue was full"),
    ("BUSY_RECEIVED", "BUSY echoes received for own packets"),
    ("TIMEOUTS", "Own packets resent (or given up) because no echo came within ECHO_TIMEOUT"),
    ("SEND_FAILURES", "Own packets given up after MAX_ATTEMPTS and reported on the failed stream"),
    ("UNDELIVERABLE", "Own packets that came back around the ring untaken and were removed"),
    ("ECHO_OVERFLOWS", "Packets for this node dropped unechoed because the echo queue was full"),
    ("SCRUBBED", "Corrupt packets removed on their second pass (nobody else would remove them)"),
    (
        "TX_UNDERRUNS",
        "Own packets started before their data was all queued and aborted when a word came too late "
        "(resent as soon as the data is in; the target counts the aborted copy in CRC_ERRORS)",
    ),
)

RING = Block(
    "ring",
    base=0x0300,
    size=0x100,
    doc="SCI ring link: configuration, queue status, counters",
    registers=(
        Register(
            "CONTROL",
            0x00,
            Access.WO,
            "Commands",
            width=1,
            fields=(Field("CLEAR", 0, doc="Write 1: zero every counter, BYPASS.PEAK and ERRORS"),),
        ),
        Register(
            "STATUS",
            0x04,
            Access.RO,
            "Queue occupancies",
            fields=(
                Field("OUT_QUEUE", 0, 8, "Packets in the outgoing queue (waiting or awaiting their echo)"),
                Field("IN_QUEUE", 8, 8, "Packets in the incoming queue not yet taken by the sequencer"),
                Field("OUTSTANDING", 16, 8, "Own packets in flight (sent or to be resent)"),
                Field("ECHO_QUEUE", 24, 8, "Echoes waiting to be transmitted"),
            ),
        ),
        Register(
            "BYPASS",
            0x08,
            Access.RO,
            "Bypass FIFO occupancy, in entries (symbols and packet ends)",
            fields=(
                Field("LEVEL", 0, 16, "Now"),
                Field("PEAK", 16, 16, "Highest since reset or CONTROL.CLEAR"),
            ),
        ),
        Register(
            "ERRORS",
            0x0C,
            Access.RO,
            "Sticky design-invariant violations: never set in a correct design",
            width=2,
            fields=(
                Field("BYPASS_OVERFLOW", 0, doc="A bypassed symbol found the bypass FIFO full"),
                Field("BYPASS_UNDERRUN", 1, doc="The bypass FIFO ran dry inside a packet"),
            ),
        ),
        Register(
            "PARAMS",
            0x10,
            Access.RO,
            "Build parameters",
            fields=(
                Field("OUT_DEPTH", 0, 8, "Outgoing queue, packets"),
                Field("IN_DEPTH", 8, 8, "Incoming queue, packets"),
                Field("MAX_OUTSTANDING", 16, 8, "Own packets awaiting their echo at once"),
                Field("ECHO_DEPTH", 24, 8, "Echo queue, echoes"),
            ),
        ),
        Register(
            "BYPASS_PARAMS",
            0x14,
            Access.RO,
            "Bypass FIFO build parameters",
            fields=(
                Field("DEPTH", 0, 16, "Entries"),
                Field("THRESHOLD", 16, 16, "Above this occupancy own traffic waits (bypass is forced)"),
            ),
        ),
        Register(
            "ECHO_TIMEOUT",
            0x20,
            Access.RW,
            "Cycles to wait for an echo before resending; also twice the scrubber's memory",
            width=16,
            reset=4096,
        ),
        Register(
            "BUSY_DELAY", 0x24, Access.RW, "Cycles to wait after a BUSY echo before resending", width=16, reset=64
        ),
        Register(
            "MAX_ATTEMPTS",
            0x28,
            Access.RW,
            "Consecutive transmissions without any echo after which a packet is given up (a BUSY echo restarts the count)",
            width=8,
            reset=8,
        ),
        *(Register(name, 0x40 + 4 * i, Access.RO, doc) for i, (name, doc) in enumerate(RING_COUNTERS)),
    ),
)

#: Where each block of the card lives in the 512 KiB register window. Reserved ahead so blocks
#: developed in parallel never collide:
#:   0x0000 ctrl   0x0100 lac (local access controller, network cache)   0x0200 rac (sequencer)
#:   0x0300 ring   0x1000 pcie   0x2000-0x3fff via (engine, completion queues; the VIs from 0x3000)
#:   0x40000-0x7ffff doorbell (one DOORBELL_PAGE_BYTES page per VI: the only part a process maps)

#: Event counters of the VIA engine, in register order from VIA_COUNTER_BASE. Each counts up and
#: wraps; reading one has no side effect.
VIA_COUNTERS = (
    ("TX_FRAMES", "frames handed to the MAC (all kinds)"),
    ("RX_FRAMES", "frames that passed the FCS check and fitted the receive buffer"),
    ("RX_BAD_FCS", "frames dropped for a bad FCS (corruption on the link)"),
    ("RX_OVERFLOW", "frames dropped because the receive buffer was full"),
    (
        "RX_NOT_FOR_US",
        "frames with another EtherType or another destination MAC, and management "
        "frames from a MAC that is not a card's",
    ),
    ("RX_MALFORMED", "VIA frames dropped as malformed (short, bad operation, bad lengths)"),
    ("RX_NO_VI", "frames for a VI that does not exist, is not connected, or has another peer"),
    ("RX_DUPLICATE", "data frames received again (already acknowledged): dropped, re-acknowledged"),
    ("RX_OUT_OF_ORDER", "data frames after a gap: dropped, a NAK asks for the missing one"),
    ("RX_RQ_EMPTY", "sends or RDMA writes with immediate data that found no receive descriptor"),
    ("RX_PROTECTION", "RDMA requests refused by translation, protection tag or rights"),
    ("RX_DESCRIPTOR_ERROR", "receive descriptors completed in error (format, protection, length)"),
    ("RX_STALE_RESPONSE", "read responses for no outstanding read, or at an unexpected offset"),
    ("RX_MGMT_DROPPED", "management frames dropped because the previous one was not taken yet"),
    ("TX_TIMEOUTS", "retransmission timer expiries (go back to the oldest unacknowledged frame)"),
    ("TX_NAK_SEQUENCE", "sequence NAKs received (go back to the frame the peer asked for)"),
    ("TX_ERRORS", "VIs put in the error state by a remote error, a retry limit or a DMA error"),
    ("CQ_OVERFLOWS", "completion-queue entries lost because the queue was full"),
    (
        "DOORBELLS_REFUSED",
        "doorbells refused: queue full, descriptor address unaligned or outside the "
        "VI's descriptor area or host memory, or a write to a doorbell page of no VI "
        "or to no doorbell of a page",
    ),
    ("DMA_ERRORS", "DMA accesses answered with a bus error"),
    ("READ_REQUESTS_DROPPED", "RDMA read requests dropped because the response queue was full"),
)
VIA_COUNTER_BASE = 0x080

#: Latency stamps of the VIA engine, in register order from VIA_STAMP_BASE: each holds the low word
#: of CTRL.CYCLES at the last time its event happened, so the steps of one message can be told apart
#: (the nodes' counters run from one clock and one reset: stamps of two cards compare). Data frames
#: are SEND, RDMA_WRITE, READ_REQUEST and READ_RESPONSE (not ACK, NAK or management frames).
VIA_STAMPS = (
    ("STAMP_SQ_DOORBELL", "a send-queue doorbell was accepted"),
    ("STAMP_TX_DATA", "the first word of a data frame went to the MAC"),
    ("STAMP_RX_DATA", "the last word of a data frame came from the MAC"),
    ("STAMP_RX_WRITTEN", "the payload of a received data frame was all in host memory"),
    ("STAMP_RX_COMPLETION", "a receive descriptor's STATUS was written (its DONE visible to the host)"),
)
VIA_STAMP_BASE = 0x0E0

VI_STATES = (("IDLE", 0), ("CONNECTED", 1), ("ERROR", 2))

#: VIs the register map reserves room for (a card may build fewer: ``VIA.VI_COUNT``). The VI numbers
#: of a descriptor's completion and a VI's peer are a byte wide, so this is also the most any card
#: can have.
VI_CAPACITY = 256
#: Bytes of one VI's doorbell page: the unit an operating system maps into a process, so it is the
#: host's page size. A page holds that VI's doorbells and nothing else.
DOORBELL_PAGE_BYTES = 0x1000

IRQ_FIELDS = (
    Field("MBOX", 0, doc="the host wrote MBOX_CMD since the last IRQ_ACK"),
    Field("MGMT_RX", 1, doc="a management frame waits (MGMT_RX_STATUS.VALID)"),
    Field("CQ", 2, doc="an armed completion queue holds an entry (CQ_NOTIFIED is not 0)"),
)

VIA = Block(
    "via",
    base=0x8000,
    size=0x8000,
    doc="VIA engine: VI state, completion queues, ATT, firmware mailbox and management frames",
    registers=(
        Register("VI_COUNT", 0x000, Access.RO, "VIs this card has (elements of the VI array)", width=16),
        Register("CQ_COUNT", 0x004, Access.RO, "Completion queues this card has", width=8),
        Register("QUEUE_DEPTH", 0x008, Access.RO, "Descriptors each work queue holds", width=16),
        Register("MAX_SEGMENTS", 0x00C, Access.RO, "Data segments a descriptor may have", width=8),
        Register("MAX_MTU", 0x010, Access.RO, "Largest MTU the buffers hold", width=16),
        Register("ATT_REGIONS", 0x014, Access.RO, "Level-1 entries of the ATT (memory handles)", width=16),
        Register("ATT_PAGES", 0x018, Access.RO, "Level-2 entries of the ATT (pages)", width=24),
        Register("HOST_MEM_BASE", 0x01C, Access.RO, "First byte of the host memory the card may DMA to"),
        Register("HOST_MEM_SIZE", 0x020, Access.RO, "Bytes of that host memory"),
        Register("WINDOW", 0x024, Access.RO, "Frames a VI may have unacknowledged", width=16),
        Register(
            "CTRL",
            0x028,
            Access.RW,
            "Engine control",
            width=8,
            fields=(Field("ENABLE", 0, doc="Serve doorbells and the link; when 0, received frames are dropped"),),
        ),
        Register(
            "MTU", 0x02C, Access.RW, "Ethernet payload bytes per frame (change only while idle)", width=16, reset=1500
        ),
        Register(
            "RTO_CYCLES",
            0x030,
            Access.RW,
            "Retransmission timeout in sys cycles, after the frames in the transmit buffer when a frame is "
            "queued have reached the wire",
            reset=25_000,
        ),
        Register(
            "RETRY_LIMIT", 0x034, Access.RW, "Timeouts in a row without progress before a VI fails", width=16, reset=64
        ),
        Register("ATT_ADDR", 0x038, Access.RW, "Word address in the ATT (level 1, then level 2)", width=24),
        Register("ATT_WDATA", 0x03C, Access.WO, "Write the ATT word at ATT_ADDR, then increment ATT_ADDR"),
        # 0x040 held ATT_RDATA, the ATT word at ATT_ADDR: nothing read it, and it cost each ATT level a
        # copy in block RAM (gateware/via_translate.py); it stays a hole, so a read answers err.
        Register(
            "FORGET_COPIES",
            0x044,
            Access.WO,
            "The engines forget the descriptor and the remote target they kept validated (SQ_REPOST, "
            "RDMA writes), as an ATT write makes them: written when memory they may hold a copy of is rewritten",
        ),
        Register(
            "MBOX_CMD",
            0x050,
            Access.RW,
            "Host to firmware: command of the mailbox",
            fields=(
                Field("CODE", 0, 16, "command (numavia.base.via_mailbox)"),
                Field("SEQ", 16, 16, "changes with every new command"),
            ),
        ),
        Register(
            "MBOX_STATUS",
            0x054,
            Access.RW,
            "Firmware to host: result of the mailbox command",
            fields=(
                Field("RESULT", 0, 16, "VIP_* result code"),
                Field("SEQ", 16, 16, "SEQ of the command this result belongs to"),
            ),
        ),
        Register(
            "MGMT_TX_CTRL",
            0x060,
            Access.WO,
            "Send MGMT_TX_DATA as a management frame",
            fields=(
                Field("DST_NODE", 0, NODE_ID_BITS, "destination node"),
                Field("LENGTH", 8, 7, "payload bytes (at most 64)"),
                Field("RAW", 16, doc="send the bytes as a whole frame from its first header byte (tests)"),
            ),
        ),
        Register(
            "MGMT_TX_STATUS",
            0x064,
            Access.RO,
            "Management transmit status",
            width=8,
            fields=(Field("BUSY", 0, doc="the previous management frame is not sent yet"),),
        ),
        Register(
            "MGMT_RX_STATUS",
            0x068,
            Access.RO,
            "Received management frame",
            fields=(
                Field("VALID", 0, doc="MGMT_RX_DATA holds a frame not yet popped"),
                Field("SRC_NODE", 8, NODE_ID_BITS, "sending node"),
                Field("LENGTH", 16, 7, "payload bytes"),
            ),
        ),
        Register("MGMT_RX_POP", 0x06C, Access.WO, "Release MGMT_RX_DATA for the next management frame"),
        # The card's interrupt (to the node's CPU) says the firmware has work: the protocol manager
        # sleeps until then instead of polling. Bare metal polls and leaves it disabled.
        Register("IRQ_PENDING", 0x070, Access.RO, "Work waiting for the firmware", width=8, fields=IRQ_FIELDS),
        Register(
            "IRQ_ENABLE",
            0x074,
            Access.RW,
            "Which IRQ_PENDING bits raise the card's interrupt",
            width=8,
            fields=IRQ_FIELDS,
        ),
        Register(
            "IRQ_ACK",
            0x078,
            Access.WO,
            "Write 1s to clear IRQ_PENDING.MBOX (MGMT_RX clears by popping, CQ by each queue's CTRL.ACK)",
            width=8,
            fields=IRQ_FIELDS,
        ),
        Register(
            "CQ_NOTIFIED",
            0x07C,
            Access.RO,
            "Completion queues whose armed notification fired, not yet acknowledged (bit i: CQ i)",
            width=16,
        ),
        *(Register(name, VIA_COUNTER_BASE + 4 * i, Access.RO, doc) for i, (name, doc) in enumerate(VIA_COUNTERS)),
        *(Register(name, VIA_STAMP_BASE + 4 * i, Access.RO, doc) for i, (name, doc) in enumerate(VIA_STAMPS)),
    ),
    arrays=(
        RegisterArray(
            "MBOX_DATA",
            0x100,
            16,
            4,
            "Mailbox arguments and results",
            registers=(Register("WORD", 0x0, Access.RW, "one word"),),
        ),
        RegisterArray(
            "MGMT_TX_DATA",
            0x140,
            16,
            4,
            "Payload of the next management frame",
            registers=(Register("WORD", 0x0, Access.RW, "one word, little-endian bytes"),),
        ),
        RegisterArray(
            "MGMT_RX_DATA",
            0x180,
            16,
            4,
            "Payload of the received management frame",
            registers=(Register("WORD", 0x0, Access.RO, "one word, little-endian bytes"),),
        ),
        # Offsets 0x00 and 0x04 of a VI held its doorbells before they moved to their own pages
        # (DOORBELL); they stay holes so that an old driver's doorbell write answers err.
        RegisterArray(
            "VI",
            0x1000,
            VI_CAPACITY,
            0x40,
            "One Virtual Interface: state, connection, binding (privileged; its doorbells are in the DOORBELL block)",
            registers=(
                Register(
                    "CMD",
                    0x08,
                    Access.WO,
                    "State change (firmware)",
                    width=8,
                    fields=(
                        Field("CONNECT", 0, doc="IDLE -> CONNECTED: sequence numbers restart at 0"),
                        Field("FAIL", 1, doc="-> ERROR: posted descriptors complete as FLUSHED"),
                        Field("RESET", 2, doc="-> IDLE (after ERROR, once the queues are empty)"),
                    ),
                ),
                Register(
                    "STATE",
                    0x0C,
                    Access.RO,
                    "State and last error",
                    fields=(
                        Field("STATE", 0, 2, "IDLE, CONNECTED or ERROR"),
                        Field("ERROR", 8, 16, "STATUS error bits that put the VI in ERROR"),
                    ),
                ),
                Register(
                    "PEER",
                    0x10,
                    Access.RW,
                    "The connected peer",
                    fields=(
                        Field("NODE", 0, NODE_ID_BITS, "peer node"),
                        Field("VI", 16, 8, "peer VI"),
                    ),
                ),
                Register("PTAG", 0x14, Access.RW, "Protection tag of the VI", width=16),
                Register(
                    "CQ_BIND",
                    0x18,
                    Access.RW,
                    "Completion queues of the work queues",
                    width=16,
                    fields=(
                        Field("SEND_CQ", 0, 4, "completion queue of the send queue"),
                        Field("SEND_EN", 4, doc="send completions go to SEND_CQ"),
                        Field("RECV_CQ", 8, 4, "completion queue of the receive queue"),
                        Field("RECV_EN", 12, doc="receive completions go to RECV_CQ"),
                    ),
                ),
                Register(
                    "QUEUE_STATUS",
                    0x1C,
                    Access.RO,
                    "Posted descriptors not yet completed",
                    fields=(
                        Field("SQ", 0, 16, "on the send queue"),
                        Field("RQ", 16, 16, "on the receive queue"),
                    ),
                ),
                Register("TX_PSN", 0x20, Access.RO, "Next sequence number this VI sends"),
                Register("RX_PSN", 0x24, Access.RO, "Next sequence number this VI expects"),
                # The descriptor area is the driver's (privileged) grant: a process rings only its own VI's
                # doorbell page, and the area keeps its descriptors - and the status the card writes back
                # into them - inside memory the driver gave that process.
                Register(
                    "DESC_BASE",
                    0x28,
                    Access.RW,
                    "Physical address of the VI's descriptor area "
                    "(DESCRIPTOR_ALIGN-aligned): its doorbells may name descriptors only inside it",
                ),
                Register(
                    "DESC_SIZE",
                    0x2C,
                    Access.RW,
                    "Bytes of the descriptor area (0, the reset value: the VI can post nothing)",
                ),
            ),
        ),
        RegisterArray(
            "CQ",
            0x800,
            16,
            0x20,
            "One completion queue: a ring of CQ_ENTRY in host memory",
            registers=(
                Register("BASE", 0x00, Access.RW, "Physical address of the ring"),
                Register("SIZE", 0x04, Access.RW, "Entries in the ring, a power of two (0: queue off)", width=17),
                Register("HEAD", 0x08, Access.RW, "Entries the host has consumed (free-running)"),
                Register("TAIL", 0x0C, Access.RO, "Entries the card has written (free-running)"),
                Register(
                    "CTRL",
                    0x10,
                    Access.WO,
                    "Commands",
                    width=8,
                    fields=(
                        Field("RESET", 0, doc="TAIL, OVERFLOW, ARMED and the CQ_NOTIFIED bit back to 0"),
                        Field(
                            "ARM",
                            1,
                            doc="notify once: as soon as the ring holds an entry not consumed (TAIL != HEAD, "
                            "already or later), set this queue's CQ_NOTIFIED bit and disarm",
                        ),
                        Field("ACK", 2, doc="clear this queue's CQ_NOTIFIED bit"),
                    ),
                ),
                Register(
                    "STATUS",
                    0x14,
                    Access.RO,
                    "Status",
                    width=8,
                    fields=(
                        Field("OVERFLOW", 0, doc="an entry was lost because the ring was full"),
                        Field("ARMED", 1, doc="a notification is requested and has not fired"),
                    ),
                ),
            ),
        ),
    ),
)

DOORBELL = Block(
    "doorbell",
    base=0x10_0000,
    size=VI_CAPACITY * DOORBELL_PAGE_BYTES,
    doc="VI doorbells, one page per VI: a driver maps a process only its own VI's page",
    arrays=(
        RegisterArray(
            "VI",
            0x000,
            VI_CAPACITY,
            DOORBELL_PAGE_BYTES,
            "The doorbell page of one VI (the page index is the VI number)",
            registers=(
                Register("SQ_DOORBELL", 0x00, Access.WO, "Post a send descriptor: its physical address"),
                Register("RQ_DOORBELL", 0x04, Access.WO, "Post a receive descriptor: its physical address"),
                Register(
                    "SQ_REPOST",
                    0x08,
                    Access.WO,
                    "Post again a send descriptor unchanged (STATUS aside) since this VI last posted it: its "
                    "physical address; the card may send it from the copy it kept, without fetching it",
                ),
            ),
        ),
    ),
)

#: The window ends with the doorbell pages, so it grows with them (0x20_0000 bytes: 2 MiB, a
#: power of two as a PCIe BAR must be).
CARD = RegisterMap("card", size=DOORBELL.base + DOORBELL.size, blocks=(CTRL, LAC, RAC, RING, VIA, DOORBELL))
#: The blocks a card built without the VIA engine (small FPGAs) does not have.
VIA_BLOCKS = (VIA, DOORBELL)

#: The counters that count faults: corrupted, lost, duplicated or refused traffic, recovered by
#: the hardware or refused by it (``numavia status`` shows them and logs every increase). The
#: rest count ordinary events. ``ring.ERRORS`` (sticky invariant bits) is read beside them.
ERROR_COUNTERS = (
    ("lac", "ERRORS"),
    ("rac", "PROTOCOL_ERRORS"),
    ("rac", "RETRY_LIMITS"),
    ("rac", "DROPPED_RESPONSES"),
    ("rac", "FAILED_SENDS"),
    ("rac", "NOT_READY_REPLIES"),
    ("ring", "CRC_ERRORS"),
    ("ring", "DUPLICATES"),
    ("ring", "TIMEOUTS"),
    ("ring", "SEND_FAILURES"),
    ("ring", "UNDELIVERABLE"),
    ("ring", "ECHO_OVERFLOWS"),
    ("ring", "SCRUBBED"),
    *(("via", name) for name, _ in VIA_COUNTERS if name not in ("TX_FRAMES", "RX_FRAMES", "RX_NOT_FOR_US")),
)
for _block, _register in ERROR_COUNTERS:
    CARD.block(_block).register(_register)  # every name exists (KeyError at import otherwise)
