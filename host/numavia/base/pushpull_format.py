"""Push-pull messaging (Kim & Kim's paper, docs/references.md) over the VIA engine: its wire
header, layout and the benchmark agent's extra mailbox words, in one place for the firmware
library and the host.

Push-pull is a library above VIA, not part of the card: the card only sees SENDs, RDMA reads and
receive descriptors. So its definitions live here, outside ``gateware/`` (changing them rebuilds
the firmware only, never the card's Verilog); ``numavia.base.codegen`` writes ``numavia_pushpull.h``
from this module for ``firmware/core/src/pushpull.c``.

A message of LENGTH bytes: the first PUSHED = min(LENGTH, bytes_to_push) bytes are pushed with a
header (a SEND) into one of the receiver's pre-posted pushed-buffer slots; the rest is pulled by
the receiver with an RDMA read straight into its user buffer, after which it sends an ACK so the
sender may reuse its buffer. Every header returns CREDITS: pushed-buffer slots its sender has
posted again since its last message (VIA has no flow control: a SEND that finds no receive
breaks the connection, so nobody sends without a credit). docs/via.md, "Push-pull messaging".
"""

from numavia.base import via_mailbox
from numavia.base.bytestruct import Bits, ByteStruct, Constants, Field

SCHEME = Constants(
    "PP_SCHEME",
    "Push-pull variants",
    (
        ("ORIGINAL", 0, "Wong & Wang as Kim & Kim describe it: translate, then push, then pull, then ack"),
        ("ADVANCED", 1, "Kim & Kim: variable zero buffer, masked translation, send/ack overlap, register path"),
    ),
)

KIND = Constants(
    "PP_KIND",
    "What a push-pull message is",
    (
        ("DATA", 1, "a message: header and its pushed part"),
        ("ACK", 2, "the pull of message SEQ is done: its sender may reuse the buffer"),
        ("CREDIT", 3, "returns CREDITS only (a receiver that has nothing else to send)"),
    ),
)

HEADER = ByteStruct(
    "PP_HEADER",
    32,
    "Header of every push-pull message, first in a pushed-buffer slot",
    (
        Field("KIND", 0, 1, "PP_KIND"),
        Field(
            "FLAGS",
            1,
            1,
            "flags",
            bits=(
                Bits(
                    "REGISTER",
                    0,
                    1,
                    "early-message register path: the bytes (at most REGISTER_BYTES) are the one word behind "
                    "the short header, written by one store; the push's descriptor never changes",
                ),
                Bits(
                    "PULL",
                    1,
                    1,
                    "a pulled part follows (PUSHED < LENGTH, named by PULL_VA and PULL_HANDLE); without it the "
                    "receiver takes PUSHED as LENGTH and reads neither",
                ),
                Bits(
                    "SHORT",
                    2,
                    1,
                    "nothing is pulled and LENGTH is below 256: SHORT_LENGTH holds it, the message carries only "
                    "the header's first SHORT_HEADER bytes and its pushed part follows them",
                ),
                Bits(
                    "STAMPED",
                    3,
                    1,
                    "SENT_CYCLES holds the send's start: the receiver adds this message's one-way time to its "
                    "statistics (a sample, asked for per message: it costs each side a read of the card's counter)",
                ),
            ),
        ),
        Field("CREDITS", 2, 1, "pushed-buffer slots the sender re-posted since its last message"),
        Field(
            "SHORT_LENGTH",
            3,
            1,
            "LENGTH of a SHORT message, in the word the receiver reads first (one uncached read fewer)",
        ),
        Field("SENT_CYCLES", 4, 4, "sender's card cycle counter (low word) when the send began, if STAMPED"),
        Field("SEQ", 8, 4, "message number (DATA), or the message an ACK is for"),
        Field("LENGTH", 12, 4, "message bytes"),
        Field("PUSHED", 16, 4, "bytes pushed behind this header (the rest is pulled)"),
        Field("PULL_VA", 20, 8, "where the receiver reads the pulled part (the sender's byte PUSHED)"),
        Field("PULL_HANDLE", 28, 4, "memory handle of the pulled part"),
    ),
)

#: Pushed-buffer slots each endpoint keeps posted (the credits its peer starts with).
SLOTS = 4
#: Largest bytes_to_push: a slot holds a header and this many bytes.
MAX_PUSH = 2048
SLOT_BYTES = HEADER.size + MAX_PUSH
#: Messages up to this size take the advanced scheme's register path (one word behind the short header).
REGISTER_BYTES = 4
#: What a SHORT message carries of its header: the first word and SENT_CYCLES (fewer bytes on the
#: wire and through both cards for the smallest messages).
SHORT_HEADER = 8
#: A register push's one data segment: the short header and the word, whatever the length (so
#: that its descriptor never changes and is reposted).
REGISTER_PUSH = SHORT_HEADER + REGISTER_BYTES
#: Pages one translation can cover (a 2 MiB message not page aligned).
MAX_PAGES = 520
#: The library's area at the start of a registered region: pushed slots, the send bounce slot,
#: the header of acks and original-scheme pushes, two page lists (send side, receive side).
AREA_SLOTS = 0
AREA_BOUNCE = AREA_SLOTS + SLOTS * SLOT_BYTES
AREA_HEADERS = AREA_BOUNCE + SLOT_BYTES  # two 32-byte headers: push, ack
AREA_SEND_PAGES = AREA_HEADERS + 2 * HEADER.size
AREA_RECV_PAGES = AREA_SEND_PAGES + 4 * MAX_PAGES
AREA_BYTES = 16384
assert AREA_RECV_PAGES + 4 * MAX_PAGES <= AREA_BYTES

#: Benchmark operations of the BENCH mailbox command beyond via_mailbox.BENCH_OP (whose codes end
#: at 4); they use two more argument words and more result words, below.
BENCH_OP = Constants(
    "PP_BENCH_OP",
    "Push-pull benchmark operations (BENCH's OP)",
    (
        ("ORIGINAL", 8, "push-pull ping-pong, original scheme"),
        ("ADVANCED", 9, "push-pull ping-pong, advanced scheme"),
    ),
)
#: BENCH argument words after the command's own 14: bytes_to_push, and flags.
ARG_THRESHOLD = 14
ARG_FLAGS = 15
FLAGS = Constants(
    "PP_BENCH_FLAG",
    "Bits of the push-pull BENCH FLAGS word",
    (
        ("VERIFY", 1, "fill every message with a pattern and check every byte received"),
        ("BURST", 2, "one-way: the initiator sends ITERATIONS messages, the responder only receives"),
        ("OPEN", 4, "open the endpoint on VI first (post its pushed-buffer slots): once per connection"),
    ),
)
FLAGS_LATE_US_SHIFT = 16  # FLAGS[31:16]: the responder waits this many us before each receive
#: BENCH result words after the command's own.
RESULTS = (
    "ONE_WAY_CYCLES_LO",
    "ONE_WAY_CYCLES_HI",
    "ONE_WAYS",
    "BAD_BYTES",
    "TRANSLATED_PAGES",
    "COPIED_BYTES",
    "PULLS",
    "RECEIVED",
)
RESULT_BASE = len(via_mailbox.command("BENCH").results)


def constants():
    """(symbol, value, comment) of every definition, for ``numavia_pushpull.h``."""
    for name in (
        "SLOTS",
        "MAX_PUSH",
        "SLOT_BYTES",
        "REGISTER_BYTES",
        "SHORT_HEADER",
        "REGISTER_PUSH",
        "MAX_PAGES",
        "AREA_SLOTS",
        "AREA_BOUNCE",
        "AREA_HEADERS",
        "AREA_SEND_PAGES",
        "AREA_RECV_PAGES",
        "AREA_BYTES",
        "ARG_THRESHOLD",
        "ARG_FLAGS",
        "FLAGS_LATE_US_SHIFT",
        "RESULT_BASE",
    ):
        yield f"NV_PP_{name}", globals()[name], None
    for i, name in enumerate(RESULTS):
        yield f"NV_PP_RES_{name}", RESULT_BASE + i, None
