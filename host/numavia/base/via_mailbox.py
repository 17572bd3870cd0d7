"""How the host talks to the card's firmware, and how two cards' firmware talk to each other.

Host -> firmware: the VIA block's mailbox. The host writes a command's arguments into
``MBOX_DATA`` words, then ``MBOX_CMD`` with the command code and a new ``SEQ``; the firmware polls
``MBOX_CMD``, runs the command, writes results into ``MBOX_DATA`` and last ``MBOX_STATUS`` with the
same ``SEQ`` and a result code. Every command is short: operations that wait for the network
(connecting) start with one command and are polled with another.

Firmware -> firmware: management frames (``FRAME_OP.MGMT``) carrying one :data:`MGMT_MESSAGE`.
They are not reliable; the firmware retries requests and answers repeated requests again.

Pure Python (no Amaranth): the firmware's header and the host library come from here.
"""

from dataclasses import dataclass

from numavia.base.bytestruct import Bits, ByteStruct, Constants, Field

RESULT = Constants(
    "VIP",
    "Result codes of mailbox commands (VIPL return values)",
    (
        ("SUCCESS", 0, "done"),
        ("NOT_DONE", 1, "not finished yet: poll again"),
        ("INVALID_PARAMETER", 2, "an argument is out of range or names nothing"),
        ("ERROR_RESOURCE", 3, "no free VI, CQ, ATT entry or protection tag"),
        ("TIMEOUT", 4, "the peer did not answer"),
        ("REJECT", 5, "the peer rejected the connection"),
        ("INVALID_STATE", 6, "the object is not in a state that allows this"),
        ("INVALID_PTAG", 7, "protection tag not allocated or does not match"),
        ("INVALID_FUNCTION", 8, "unknown command"),
        ("NO_MATCH", 9, "no such pending connection"),
        ("ERROR", 10, "the operation failed (see the console)"),
        ("STALE", 11, "a prebuilt descriptor outlived the memory registration or VI it was built for: build it again"),
    ),
)

#: Value of an optional argument that is absent (no completion queue, no buffer).
NONE = 0xFFFF_FFFF


@dataclass(frozen=True)
class Command:
    name: str
    code: int
    doc: str
    args: tuple = ()
    results: tuple = ()


COMMANDS = (
    Command("NOP", 0x01, "Does nothing; checks the firmware answers"),
    Command("CREATE_PTAG", 0x10, "Allocate a protection tag", results=("PTAG",)),
    Command("DESTROY_PTAG", 0x11, "Free a protection tag no VI or region uses", args=("PTAG",)),
    Command(
        "REGISTER_MEM",
        0x12,
        "Register a region: write its ATT entries; PAGE_LIST is the physical "
        "address of PAGE_COUNT 32-bit page addresses (the first one the region's first byte)",
        args=("VA_LO", "VA_HI", "LENGTH", "PTAG", "ATTRIBUTES", "PAGE_LIST", "PAGE_COUNT"),
        results=("HANDLE",),
    ),
    Command("DEREGISTER_MEM", 0x13, "Invalidate a region's ATT entries", args=("HANDLE",)),
    Command(
        "CREATE_CQ",
        0x20,
        "Set up a completion queue on a host ring of ENTRIES (power of two)",
        args=("BASE", "ENTRIES"),
        results=("CQ",),
    ),
    Command("DESTROY_CQ", 0x21, "Turn a completion queue off", args=("CQ",)),
    Command(
        "CREATE_VI",
        0x22,
        "Allocate a VI; SEND_CQ/RECV_CQ may be NONE. DESC_BASE/DESC_SIZE: the "
        "host area (aligned, in host memory) its descriptors must lie in (the caller's own memory)",
        args=("PTAG", "SEND_CQ", "RECV_CQ", "DESC_BASE", "DESC_SIZE"),
        results=("VI",),
    ),
    Command("DESTROY_VI", 0x23, "Free an idle VI whose queues are empty", args=("VI",)),
    Command(
        "CONNECT_REQUEST",
        0x30,
        "Start connecting VI to a peer listening on DISCRIMINATOR; the "
        "buffer (BUF_*, or BUF_HANDLE = NONE) is offered to the peer for RDMA",
        args=("VI", "NODE", "DISCRIMINATOR", "BUF_VA_LO", "BUF_VA_HI", "BUF_HANDLE", "BUF_LENGTH", "TIMEOUT_US"),
    ),
    Command(
        "CONNECT_STATUS",
        0x31,
        "State of a CONNECT_REQUEST: SUCCESS (with the peer and the buffer it offered), NOT_DONE, REJECT or TIMEOUT",
        args=("VI",),
        results=("NODE", "PEER_VI", "BUF_VA_LO", "BUF_VA_HI", "BUF_HANDLE", "BUF_LENGTH"),
    ),
    Command(
        "CONNECT_WAIT",
        0x32,
        "A connection request received on DISCRIMINATOR, if any",
        args=("DISCRIMINATOR",),
        results=("REQUEST", "NODE", "PEER_VI", "BUF_VA_LO", "BUF_VA_HI", "BUF_HANDLE", "BUF_LENGTH"),
    ),
    Command(
        "CONNECT_ACCEPT",
        0x33,
        "Accept REQUEST on VI, offering a buffer for RDMA",
        args=("REQUEST", "VI", "BUF_VA_LO", "BUF_VA_HI", "BUF_HANDLE", "BUF_LENGTH"),
    ),
    Command("CONNECT_REJECT", 0x34, "Reject REQUEST", args=("REQUEST",)),
    Command("DISCONNECT", 0x35, "Disconnect VI: both ends flush their queues and return to IDLE", args=("VI",)),
    Command(
        "BENCH",
        0x40,
        "Run a test between this node's benchmark agent and the peer's: "
        "ITERATIONS round trips (or streamed messages) of SIZE bytes with OP on VI; BUF is this "
        "node's registered buffer (physically contiguous from BUF_PA), REMOTE_* the peer's (RDMA); "
        "DESC is a 4 KiB host area for the agent's descriptors (it becomes the VI's descriptor area). "
        "The initiator (ROLE 1) sends first",
        args=(
            "ROLE",
            "OP",
            "VI",
            "SIZE",
            "ITERATIONS",
            "BUF_VA_LO",
            "BUF_VA_HI",
            "BUF_HANDLE",
            "BUF_PA",
            "REMOTE_VA_LO",
            "REMOTE_VA_HI",
            "REMOTE_HANDLE",
            "DESC",
            "TIMEOUT_US",
        ),
        results=("CYCLES_LO", "CYCLES_HI", "POST_RECV_CYCLES", "POST_RECVS", "POLLS", "SEEN_CYCLES"),
    ),
)

#: A stream's messages in flight on each of its VIs at most (and by default: BENCH_STREAM_ARG.DEPTH),
#: and the receives a send stream can have posted on each (its messages: at most that many times its
#: VIs).
BENCH_STREAM_DEPTH = 8
BENCH_STREAM_RECEIVES = 16

BENCH_OP = Constants(
    "BENCH_OP",
    "What the benchmark agent measures",
    (
        ("SEND_RECV", 0, "send/receive ping-pong"),
        ("RDMA_WRITE", 1, "RDMA-write ping-pong: each side polls the last byte of its buffer"),
        ("RDMA_READ", 2, "RDMA reads of SIZE bytes (no remote CPU): the initiator alone"),
        (
            "SEND_STREAM",
            3,
            f"at most {BENCH_STREAM_RECEIVES} sends a VI, up to {BENCH_STREAM_DEPTH} in flight on each, into "
            "receives the peer posted first",
        ),
        (
            "WRITE_STREAM",
            4,
            f"a stream of RDMA writes, up to {BENCH_STREAM_DEPTH} in flight on each VI (no remote CPU)",
        ),
    ),
)


#: The VIA ping-pongs' BENCH argument word after the command's own 14 (push-pull's operations use
#: it for themselves): how the agent waits for its receives. 0 polls their descriptors' DONE; n
#: sleeps on completion queue n-1's notification (the queue its VI's receives complete into).
BENCH_ARG_WAKE_CQ = 14

#: The streams' BENCH argument word after WAKE_CQ, a :data:`BENCH_STREAM_ARG`: over how many VIs a
#: stream spreads and how many of its messages are in flight on each.
BENCH_ARG_STREAM = 15

BENCH_STREAM_ARG = ByteStruct(
    "BENCH_STREAM_ARG",
    4,
    "A stream's shape: the BENCH command's STREAM argument word",
    (
        Field(
            "VIS",
            0,
            2,
            "over how many VIs the stream spreads (0 or 1: VI alone). With n, message i goes on VI + i % n "
            "(VI..VI+n-1, all connected, all using BUF and the peer's REMOTE_* buffer) and DESC is n pages, "
            "one per VI",
        ),
        Field("DEPTH", 2, 1, f"messages in flight on each VI, 1..{BENCH_STREAM_DEPTH} (0: {BENCH_STREAM_DEPTH})"),
        Field("RESERVED", 3, 1, "zero"),
    ),
)


def command(name):
    for c in COMMANDS:
        if c.name == name:
            return c
    raise KeyError(f"no mailbox command {name}")


MGMT_TYPE = Constants(
    "MGMT_TYPE",
    "Management message types",
    (
        ("CONNECT_REQUEST", 1, "a client asks to connect SRC_VI to a listener on DISCRIMINATOR"),
        ("CONNECT_ACCEPT", 2, "the server connected SRC_VI to the client's DST_VI"),
        ("CONNECT_REJECT", 3, "the server refused the request"),
        ("DISCONNECT", 4, "the sender disconnected SRC_VI from DST_VI"),
        ("DISCONNECT_ACK", 5, "the receiver of a DISCONNECT has reset DST_VI"),
    ),
)

MGMT_MESSAGE = ByteStruct(
    "MGMT_MESSAGE",
    32,
    "Payload of a management frame",
    (
        Field("TYPE", 0, 1, "MGMT_TYPE"),
        Field("FLAGS", 1, 1, "flags", bits=(Bits("HAS_BUFFER", 0, 1, "BUF_* describe an RDMA buffer"),)),
        Field("SRC_VI", 2, 2, "the sender's VI"),
        Field("DST_VI", 4, 2, "the receiver's VI (NONE & 0xffff in a request)"),
        Field("RESERVED", 6, 2, "zero"),
        Field("DISCRIMINATOR", 8, 4, "what the server listens on"),
        Field("REQUEST_ID", 12, 4, "the client's id of this connection attempt (answers echo it)"),
        Field("BUF_VA", 16, 8, "RDMA buffer offered by the sender: virtual address"),
        Field("BUF_HANDLE", 24, 4, "its memory handle"),
        Field("BUF_LENGTH", 28, 4, "its length"),
    ),
)
