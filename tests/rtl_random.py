"""Constrained-random hostile stimulus for the RTL receivers (issue 11, "Hostile input"): the shared
part of the tests at the end of tests/test_via_rx.py, tests/test_ring_link.py and
tests/test_via_tx.py.

Each generator is seeded (``random.Random(seed)``) and keeps a reference model of what the real RTL
must do with every input it makes: deliver it (legitimate traffic, checked byte for byte) or drop
it with a named counter. A hostile input is a valid one with random mutations; the model decides
its fate from the documented acceptance rules (``via_frame``, ``sci_packet``, the docstrings of
``via_rx`` and ``ring_link``), and a mutation whose fate the model cannot pin down (a frame the peer
itself could legitimately send) is drawn again rather than guessed.

``NUMAVIA_RTL_FUZZ_SCALE`` (a positive integer, default 1) multiplies the number of inputs per
run and ``NUMAVIA_RTL_FUZZ_SEED`` (an integer, default 0) is added to every test's fixed seed;
``make fuzz`` sets both (tests/fuzz/fuzz_all.py) for a long run with fresh seeds, and prints them
so that a failure can be replayed.
"""

import os
import random
from dataclasses import replace

from amaranth.sim import Simulator

from numavia.base import regmap, via_att, via_frame
from numavia.base.sci_packet import (
    HEADER_BITS,
    SYMBOL_BITS,
    EchoStatus,
    Packet,
    PacketError,
    PacketType,
    crc16,
    decode,
    encode,
    field_positions,
)
from numavia.base.via_descriptor import (
    CONTROL_OP,
    CONTROL_SEGMENT,
    CONTROL_UNDEFINED_MASK,
    STATUS_OP,
    encode_descriptor,
    status_bits,
    status_op,
)
from ring_bench import LinkBench, as_sent_by, random_packet, read_counters, tx_monitor
from ring_bfm import receive, send
from via_pair import HOST, HOST_SIZE, PARAMS
from via_single import ME
from wishbone_bfm import read
from wishbone_sram import load_words

SCALE_VARIABLE = "NUMAVIA_RTL_FUZZ_SCALE"
SEED_VARIABLE = "NUMAVIA_RTL_FUZZ_SEED"


def _integer(variable, default, minimum):
    text = os.environ.get(variable, str(default))
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ValueError(f"{variable} must be an integer of at least {minimum}, not {text!r}")
    return value


def scale():
    """Multiplier of the input counts (``NUMAVIA_RTL_FUZZ_SCALE``; 1 in CI)."""
    return _integer(SCALE_VARIABLE, 1, 1)


def seed(base):
    """A test's seed: its fixed ``base`` plus ``NUMAVIA_RTL_FUZZ_SEED`` (0 in CI)."""
    return base + _integer(SEED_VARIABLE, 0, 0)


async def drain(ctx, wire, node, *, quiet=40, timeout=200_000):
    """Wait until every queued frame went in and the receive FIFO stayed empty ``quiet`` cycles."""
    still = 0
    for _ in range(timeout):
        if wire.inject or wire.busy or ctx.get(node.engine.rx_pending):
            still = 0
        else:
            still += 1
            if still >= quiet:
                return
        await ctx.tick()
    raise TimeoutError(f"the receive FIFO did not drain in {timeout} cycles (a hang)")


#: Cycles to wait after a descriptor's DONE appears before its memory is reused: the test RAM
#: (``WishboneSRAM`` with bursting) writes a single word again in the cycle that acknowledges it,
#: so a testbench that rewrites the word at once has its data overwritten with the old value.
COMPLETION_SETTLE = 4


def snapshot(ctx, ram):
    """Host memory as bytes."""
    return b"".join(ctx.get(ram.mem.data[i]).to_bytes(4, "little") for i in range(ram.mem.depth))


def fill(ctx, ram, data):
    for i in range(ram.mem.depth):
        ctx.set(ram.mem.data[i], int.from_bytes(data[4 * i:4 * i + 4], "little"))


def first_difference(want, got, base=HOST):
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"host byte {base + i:#x}: expected {a:#04x}, found {b:#04x}"
    return None


MAX_PAYLOAD = PARAMS.max_payload
MASK32 = (1 << 32) - 1
HEADER = via_frame.HEADER
OP = via_frame.OP


# --- VIA receive engine: hostile frames among legitimate traffic --------------------------------


PEER, PEER_VI, VI = 1, 2, 1          # the VI under test and its peer
PTAG, OTHER_PTAG = 5, 6


class Region:
    def __init__(self, handle, va, length, pages, ptag, read, write):
        self.handle, self.va, self.length, self.pages = handle, va, length, pages
        self.ptag, self.read, self.write = ptag, read, write

    def pa(self, va):
        """Host address of a VA of the region (``pages[0]`` holds its first byte)."""
        first_page = self.pages[0] & ~0xFFF
        page = (va >> 12) - (self.va >> 12)
        return (first_page if page == 0 else self.pages[page]) + (va & 0xFFF)


#: Registered regions: 1 the VI's buffers (read, write), 2 another protection tag, 3 read only,
#: 5 write only. Handles 0, 4, 6 and 7 are empty entries; 8 and up lie past the table.
REGIONS = {
    1: Region(1, 0x10_0000_0040, 0x4000, [HOST + 0x8040, HOST + 0x5000, HOST + 0x3000, HOST + 0x6000,
                                           HOST + 0x4000], PTAG, 1, 1),
    2: Region(2, 0x20_0000_0000, 0x800, [HOST + 0x9000], OTHER_PTAG, 1, 1),
    3: Region(3, 0x30_0000_0100, 0x600, [HOST + 0xA100], PTAG, 1, 0),
    5: Region(5, 0x50_0000_0000, 0x400, [HOST + 0xB000], PTAG, 0, 1),
}
#: Other VIs: 2 is connected to another node, 0 and 3 stay idle; 4 and up do not exist.
OTHER_CONNECTIONS = {2: (3, 2)}
DESC_SLOTS = [HOST + 0x100 * i for i in range(32)]     # receive descriptors (96 bytes each at most)
SEND_SLOTS = [HOST + 0x2000 + 0x100 * i for i in range(8)]     # descriptors of one round
#: The VI's descriptor area: the slots above and nothing else of host memory.
DESC_AREA = (HOST, SEND_SLOTS[-1] + 0x100 - HOST)
RECEIVE_CAPACITY = 1600


async def engine_setup(ctx, node):
    await node.enable(ctx)
    for r in REGIONS.values():
        await node.register(ctx, r.handle, r.va, r.length, r.pages, r.ptag, read=r.read, write_=r.write)
    await node.connect(ctx, VI, PEER, PEER_VI, PTAG, desc_area=DESC_AREA)
    for vi, (peer, peer_vi) in OTHER_CONNECTIONS.items():
        await node.connect(ctx, vi, peer, peer_vi, PTAG)


def rights_ok(handle, va, length, need_write, ptag=PTAG):
    """The ATT's verdict (``via_translate``): a registered handle of this protection tag with the
    right, and [va, va + length) inside the region."""
    r = REGIONS.get(handle)
    return (r is not None and r.ptag == ptag and (r.write if need_write else r.read)
            and r.va <= va and va + length <= r.va + r.length)


def flags(first, last, imm=False):
    return HEADER.encode_bits("FLAGS", FIRST=int(first), LAST=int(last), IMMEDIATE=int(imm))


def frame_fields(**kw):
    """Header fields of a frame from the peer's VI to the VI under test (``OP`` and others in kw)."""
    f = dict(DST_MAC=via_frame.mac_field(ME), SRC_MAC=via_frame.mac_field(PEER),
             ETHERTYPE=via_frame.ETHERTYPE_FIELD, FLAGS=0, SRC_VI=PEER_VI, DST_VI=VI, PSN=0,
             ACK_PSN=0, MSG_LENGTH=0, OFFSET=0, PAYLOAD_LENGTH=0, NAK_CODE=0, REMOTE_VA=0,
             REMOTE_HANDLE=0, IMMEDIATE_DATA=0)
    f.update(kw)
    return f


DROP_COUNTERS = ("RX_BAD_FCS", "RX_OVERFLOW", "RX_NOT_FOR_US", "RX_MALFORMED", "RX_NO_VI", "RX_DUPLICATE",
                 "RX_OUT_OF_ORDER", "RX_PROTECTION", "RX_STALE_RESPONSE")
#: The engine's receive buffer in bytes: a frame longer than it can never be stored.
RX_BUFFER = PARAMS.rx_buffer_bytes


def classify(raw, fcs_error, rcv_nxt):
    """What the receive engine must do with frame ``raw`` (as sent, before MAC padding) arriving
    when the VI under test expects ``rcv_nxt``: the drop counter it must count, "ACCEPT" (the peer
    could have sent it: a legitimate frame) or "UNSAFE" (it would act on it in a way this test does
    not model: such mutations are drawn again)."""
    if len(raw) > RX_BUFFER - 64:        # can never be stored, whatever its FCS
        return "RX_OVERFLOW" if len(raw) > RX_BUFFER + 64 else "UNSAFE"
    if fcs_error:
        return "RX_BAD_FCS"
    data = raw.ljust(60, b"\0")
    h = HEADER.decode(data.ljust(HEADER.size, b"\0"))
    if len(data) < HEADER.size:
        return "RX_MALFORMED"
    if h["ETHERTYPE"] != via_frame.ETHERTYPE_FIELD or h["DST_MAC"] != via_frame.mac_field(ME):
        return "RX_NOT_FOR_US"
    op, length, body = h["OP"], h["PAYLOAD_LENGTH"], len(data) - HEADER.size
    if (OP.name_of(op) is None or length > body or length > MAX_PAYLOAD
            or (op in via_frame.DATA_OPS and h["OFFSET"] + length > h["MSG_LENGTH"])
            or (op == OP.MGMT and length > via_frame.MGMT_PAYLOAD_MAX)):
        return "RX_MALFORMED"
    src = h["SRC_MAC"].to_bytes(6, "little")
    if op == OP.MGMT:                     # from a card: not part of a connection, left out
        return "RX_NOT_FOR_US" if src[:5] != via_frame.MAC_PREFIX else "UNSAFE"
    vi = h["DST_VI"]
    if vi == VI:
        peer = (PEER, PEER_VI)
    else:
        peer = OTHER_CONNECTIONS.get(vi)
    if (peer is None or src[:5] != via_frame.MAC_PREFIX or (src[5], h["SRC_VI"]) != peer):
        return "RX_NO_VI"
    if vi != VI or h["ACK_PSN"] != 0 or op == OP.NAK:
        return "UNSAFE"                   # acknowledgements of the peer's: the transmit side's
    if op == OP.ACK:
        return "ACCEPT"
    if op == OP.READ_RESPONSE:
        return "RX_STALE_RESPONSE"        # no RDMA read is outstanding
    diff = (h["PSN"] - rcv_nxt) & MASK32
    if diff >> 31:
        return "UNSAFE" if op == OP.READ_REQUEST else "RX_DUPLICATE"   # a read is served again
    if diff:
        return "RX_OUT_OF_ORDER"
    if op == OP.SEND:
        return "UNSAFE"
    if rights_ok(h["REMOTE_HANDLE"], h["REMOTE_VA"], h["MSG_LENGTH"], op == OP.RDMA_WRITE):
        return "UNSAFE"
    return "RX_PROTECTION"


class ViaRxFuzz:
    """Seeded groups of frames for the VI under test: legitimate messages (sends with and without
    immediate data, RDMA writes with and without, RDMA read requests, acknowledgements, management
    frames) cut into frames, interleaved with hostile frames, and the expected host memory."""

    KINDS = ("send", "send_imm", "write", "write_imm", "read", "ack", "mgmt")

    def __init__(self, rng, memory):
        self.rng = rng
        self.expected = bytearray(memory)    # host memory as it must end up
        self.rcv_nxt = 0
        self.posted = []                     # receive descriptors posted, oldest first: (addr, segments)
        self.unassigned = 0                  # of those, not yet claimed by a started message
        self.free_slots = list(DESC_SLOTS)
        self.message = None                  # frames of the message in progress (callables of psn)
        self.completions = []                # (descriptor, STATUS, LENGTH, immediate or None)
        self.reads = {}                      # psn -> bytes the responses must carry
        self.mgmt = None                     # (source node, payload) of a management frame sent
        self.counts = {name: 0 for name in DROP_COUNTERS}
        self.frames = 0
        self.legit_messages = 0
        self.log = []                        # (kind, fate, header fields) of every frame, for failures

    # Host memory model.
    def set_expected(self, addr, data):
        self.expected[addr - HOST:addr - HOST + len(data)] = data

    def write_va(self, region, va, data):
        for i, byte in enumerate(data):
            self.set_expected(region.pa(va + i), bytes([byte]))

    def receive_descriptor(self):
        """A receive descriptor of 1..4 segments in region 1, RECEIVE_CAPACITY bytes in all."""
        rng, r = self.rng, REGIONS[1]
        parts = rng.randint(1, PARAMS.max_segments)
        cuts = sorted(rng.sample(range(1, RECEIVE_CAPACITY), parts - 1))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, RECEIVE_CAPACITY])]
        return [(rng.randrange(r.va, r.va + r.length - n + 1), 1, n) for n in sizes]

    def post(self):
        """Descriptors to post now: ``[(address, bytes)]`` up to the queue depth."""
        out = []
        while len(self.posted) < PARAMS.queue_depth:
            addr = self.free_slots.pop(0)
            segments = self.receive_descriptor()
            data = encode_descriptor(CONTROL_OP.SENDRECV, segments)
            self.set_expected(addr, data)
            self.posted.append((addr, segments))
            self.unassigned += 1
            out.append((addr, data))
        return out

    def claim(self):
        """The oldest posted receive descriptor no started message has claimed yet."""
        entry = self.posted[len(self.posted) - self.unassigned]
        self.unassigned -= 1
        return entry

    def complete(self, entry, status, length, immediate=None):
        """Descriptor ``entry`` completes: its control segment as the card writes it."""
        addr, _ = entry
        self.completions.append((addr, status, length, immediate))
        ctrl = CONTROL_SEGMENT
        if immediate is not None:
            self.set_expected(addr + ctrl.field("IMMEDIATE_DATA").offset, immediate.to_bytes(4, "little"))
        self.set_expected(addr + ctrl.field("LENGTH").offset, length.to_bytes(4, "little"))
        self.set_expected(addr + ctrl.field("STATUS").offset, status.to_bytes(4, "little"))

    def retire(self, count):
        """The oldest ``count`` posted descriptors completed: their slots may be reused."""
        for _ in range(count):
            addr, _ = self.posted.pop(0)
            self.free_slots.append(addr)

    # Legitimate messages.
    def chunks(self, length):
        rng, out, pos = self.rng, [], 0
        while True:
            n = min(length - pos, rng.choice([rng.randint(1, 64), rng.randint(1, MAX_PAYLOAD)]))
            out.append((pos, n))
            pos += n
            if pos >= length:
                return out

    def trailing(self):
        """Bytes past PAYLOAD_LENGTH that the receiver must ignore (as it ignores MAC padding)."""
        return bytes(self.rng.randrange(256) for _ in range(self.rng.choice([0, 0, 0, 1, 3, 40])))

    def start_message(self, kind=None):
        rng = self.rng
        kinds = [k for k in self.KINDS if self.unassigned or k not in ("send", "send_imm", "write_imm")]
        kind = kind or rng.choice(kinds)
        self.legit_messages += 1
        frames = []
        if kind in ("send", "send_imm"):
            length = rng.choice([0, rng.randint(1, 100), rng.randint(1, RECEIVE_CAPACITY)])
            payload = bytes(rng.randrange(256) for _ in range(length))
            imm = rng.randrange(1 << 32) if kind == "send_imm" else None
            index = self.claim()
            _, segments = index
            pos = 0
            for va, _, n in segments:
                self.write_va(REGIONS[1], va, payload[pos:pos + n])
                pos += n
            pieces = self.chunks(length) if length else [(0, 0)]
            for k, (offset, n) in enumerate(pieces):
                last = k == len(pieces) - 1
                frames.append(dict(OP=OP.SEND, FLAGS=flags(offset == 0, last, imm is not None),
                                   MSG_LENGTH=length, OFFSET=offset, PAYLOAD_LENGTH=n,
                                   IMMEDIATE_DATA=imm or 0, payload=payload[offset:offset + n]))
            status = status_bits(DONE=1, IMMEDIATE=int(imm is not None)) | status_op(STATUS_OP.RECEIVE)
            frames[-1]["done"] = (index, status, length, imm)
        elif kind in ("write", "write_imm"):
            r = REGIONS[1]
            length = rng.choice([rng.randint(1, 100), rng.randint(1, 3000)])
            va = rng.randrange(r.va, r.va + r.length - length + 1)
            payload = bytes(rng.randrange(256) for _ in range(length))
            self.write_va(r, va, payload)
            imm = rng.randrange(1 << 32) if kind == "write_imm" else None
            index = self.claim() if imm is not None else None
            pieces = self.chunks(length)
            for k, (offset, n) in enumerate(pieces):
                frames.append(dict(OP=OP.RDMA_WRITE, FLAGS=flags(offset == 0, k == len(pieces) - 1,
                                                                 imm is not None),
                                   MSG_LENGTH=length, OFFSET=offset, PAYLOAD_LENGTH=n, REMOTE_VA=va,
                                   REMOTE_HANDLE=1, IMMEDIATE_DATA=imm or 0, payload=payload[offset:offset + n]))
            if imm is not None:
                status = status_bits(DONE=1, IMMEDIATE=1) | status_op(STATUS_OP.REMOTE_RDMA_WRITE)
                frames[-1]["done"] = (index, status, 0, imm)
        elif kind == "read":
            r = REGIONS[3]       # read only: nothing else writes it while the responses are read
            length = rng.randint(1, r.length)
            va = rng.randrange(r.va, r.va + r.length - length + 1)
            frames.append(dict(OP=OP.READ_REQUEST, MSG_LENGTH=length, REMOTE_VA=va, REMOTE_HANDLE=3,
                               read=bytes(self.expected[r.pa(va) - HOST:r.pa(va) - HOST + length])))
        elif kind == "ack":
            frames.append(dict(OP=OP.ACK, no_psn=True))
        else:
            length = rng.randint(0, via_frame.MGMT_PAYLOAD_MAX)
            src = rng.randrange(1 << regmap.NODE_ID_BITS)
            frames.append(dict(OP=OP.MGMT, SRC_MAC=via_frame.mac_field(src), DST_VI=rng.randrange(1 << 16),
                               PAYLOAD_LENGTH=length, payload=bytes(rng.randrange(256) for _ in range(length)),
                               mgmt=src, no_psn=True))
        self.message = frames

    def legit_frame(self):
        """The next frame of the message in progress (a new one if none): raw bytes."""
        if not self.message:
            self.start_message()
        spec = dict(self.message.pop(0))
        payload = spec.pop("payload", b"")
        done, read, mgmt = spec.pop("done", None), spec.pop("read", None), spec.pop("mgmt", None)
        no_psn = spec.pop("no_psn", False)
        fields = frame_fields(**spec)
        if not no_psn:
            fields["PSN"] = self.rcv_nxt
            self.rcv_nxt = (self.rcv_nxt + 1) & MASK32
        if done:
            self.complete(*done)
        if read is not None:
            self.reads[fields["PSN"]] = read
        if mgmt is not None:
            self.mgmt = (mgmt, payload)
        raw = HEADER.encode(**fields) + payload + self.trailing()
        assert classify(raw, False, (self.rcv_nxt - (0 if no_psn else 1)) & MASK32) in ("ACCEPT", "UNSAFE")
        self.frames += 1
        self.log.append(("legit", len(raw), {k: v for k, v in fields.items() if v and "MAC" not in k}))
        return raw, False, fields["OP"]

    # Hostile frames.
    def hostile_base(self):
        """A valid-looking frame of any operation for the VI under test."""
        rng = self.rng
        op = rng.choices([OP.ACK, OP.NAK, OP.SEND, OP.RDMA_WRITE, OP.READ_REQUEST, OP.READ_RESPONSE, OP.MGMT],
                         weights=[1, 1, 2, 3, 3, 2, 1])[0]
        length = rng.choice([0, rng.randint(1, 64), rng.randint(1, MAX_PAYLOAD)])
        handle = rng.choice([1, 1, 2, 3, 5, 0, 4, 7, 8, rng.randrange(1 << 32)])
        r = REGIONS.get(handle, REGIONS[1])
        msg = length + rng.choice([0, 0, rng.randint(1, 5000)])
        offset = rng.randint(0, msg - length)
        va = rng.choice([
            rng.randrange(r.va, r.va + r.length),                       # inside (maybe straddling)
            r.va + r.length - rng.randint(0, 64),                       # across the end
            r.va - rng.randint(1, 64),                                  # before the start
            rng.randrange(1 << 64),                                     # anywhere
            (1 << 64) - rng.randint(1, 4096),                           # wraps past 2**64
        ])
        fields = frame_fields(OP=op, PSN=rng.choice([self.rcv_nxt, self.rcv_nxt, rng.randrange(1 << 32)]),
                              FLAGS=rng.randrange(8), MSG_LENGTH=msg, OFFSET=offset, PAYLOAD_LENGTH=length,
                              NAK_CODE=rng.randrange(6), REMOTE_VA=va, REMOTE_HANDLE=handle,
                              IMMEDIATE_DATA=rng.randrange(1 << 32))
        fields["PSN"] &= MASK32
        return fields, bytes(rng.randrange(256) for _ in range(length))

    def mutate(self, fields, payload):
        rng = self.rng
        extra, cut, fcs_error = b"", None, False
        # Weighted: the checks deep in the engine (sequence numbers, the RDMA target) need
        # frames that pass the shallow ones, so a frame carries one mutation most of the time.
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            m = rng.choices(range(16), weights=[1, 1, 1, 2, 2, 2, 1, 2, 1, 4, 2, 1, 1, 5, 1, 1])[0]
            if m == 0:
                fcs_error = True
            elif m == 1:
                fields["ETHERTYPE"] = rng.choice([0x0008, 0xDD86, 0x0608, rng.randrange(1 << 16)])
            elif m == 2:
                fields["DST_MAC"] = rng.choice([via_frame.mac_field(rng.randrange(1, 64)), (1 << 48) - 1,
                                                rng.randrange(1 << 48)])
            elif m == 3:
                fields["OP"] = rng.choice([0, 8, 15, rng.randrange(256), rng.randint(1, 7)])
            elif m == 4:
                fields["PAYLOAD_LENGTH"] = rng.choice([len(payload) + rng.randint(1, 16),
                                                       rng.randrange(1 << 16)])
            elif m == 5:
                fields["MSG_LENGTH"] = rng.choice([rng.randrange(fields["MSG_LENGTH"] + 1),
                                                   rng.randrange(1 << 32)])
            elif m == 6:
                fields["OFFSET"] = rng.choice([fields["MSG_LENGTH"], rng.randrange(1 << 32)])
            elif m == 7:
                cut = rng.randrange(0, HEADER.size + len(payload) + 1)    # truncation at any layer
            elif m == 8:
                extra = bytes(rng.randrange(256) for _ in range(rng.randint(1, 100)))
            elif m == 9:
                d = rng.choice([rng.randint(1, 8), rng.randint(1, 1 << 31), rng.randrange(1 << 32)])
                fields["PSN"] = (self.rcv_nxt + rng.choice([d, -d])) & MASK32      # ahead, old, far
            elif m == 10:
                fields["DST_VI"] = rng.choice([0, 2, 3, PARAMS.vis, rng.randrange(1 << 16)])
            elif m == 11:
                fields["SRC_VI"] = rng.randrange(1 << 16)
            elif m == 12:
                mac = rng.choice([via_frame.mac_field(rng.randrange(64)), rng.randrange(1 << 48)])
                fields["SRC_MAC"] = mac
            elif m == 13:
                fields["REMOTE_HANDLE"] = rng.choice([0, 2, 3, 4, 5, 6, 7, 8, 9, rng.randrange(1 << 32)])
                fields["REMOTE_VA"] = rng.choice([fields["REMOTE_VA"], rng.randrange(1 << 64)])
            elif m == 14:
                size = rng.choice([MAX_PAYLOAD + rng.randint(1, 400)] * 3 + [RX_BUFFER + rng.randint(100, 800)])
                payload = bytes(rng.randrange(256) for _ in range(size))
                fields["PAYLOAD_LENGTH"] = size & 0xFFFF
                fields["MSG_LENGTH"] = max(fields["MSG_LENGTH"], fields["OFFSET"] + size) & MASK32
            else:
                fields["ACK_PSN"] = rng.randrange(1 << 32)
        raw = HEADER.encode(**fields) + payload + extra
        if cut is not None:
            raw = raw[:cut]
        return raw, fcs_error

    def hostile_frame(self):
        """A mutated frame the engine must drop, with the counter it must count."""
        for _ in range(200):
            fields, payload = self.hostile_base()
            raw, fcs_error = self.mutate(fields, payload)
            fate = classify(raw, fcs_error, self.rcv_nxt)
            if fate in DROP_COUNTERS:
                header = HEADER.decode(raw.ljust(HEADER.size, b"\0"))
                self.log.append((fate, len(raw), fcs_error, header))
                self.counts[fate] += 1
                self.frames += 1
                return raw, fcs_error, fate
        raise AssertionError("no droppable mutation in 200 draws")


COUNTERS = [name for name, _ in regmap.VIA_COUNTERS]


async def all_counters(ctx, node):
    return {name: await node.counter(ctx, name) for name in COUNTERS}


async def via_rx_fuzz(ctx, node, wire, *, seed, groups):
    """Groups of up to 12 frames, back to back, legitimate and hostile mixed (a group never holds
    more than the receive buffer, so nothing is lost to overflow); between groups the bench plays
    host and firmware: it checks completions, read responses and management frames and posts
    receive descriptors. Returns the fuzzer (for the figures)."""
    rng = random.Random(seed)
    memory = bytes(rng.randrange(256) for _ in range(HOST_SIZE))
    fill(ctx, node.ram, memory)
    await engine_setup(ctx, node)
    await node.reg(ctx, "MTU", 600)                    # read responses of several frames
    fuzz = ViaRxFuzz(rng, memory)
    before = await all_counters(ctx, node)
    checked_completions, seen_sent = 0, 0
    responses = {}                                     # psn -> payload bytes received so far
    rqs = []

    async def settle_group():
        nonlocal checked_completions, seen_sent
        await drain(ctx, wire, node)
        for addr, status, length, imm in fuzz.completions[checked_completions:]:
            try:
                st = await node.wait_done(ctx, addr, timeout=50_000)
            except TimeoutError:
                counters = {k: v - before[k] for k, v in (await all_counters(ctx, node)).items() if v != before[k]}
                raise AssertionError(f"receive descriptor {addr:#x} never completed; counters moved: {counters}, "
                                     f"RX_PSN {await node.vi_reg(ctx, VI, 'RX_PSN')} (model {fuzz.rcv_nxt}), "
                                     f"last frames {fuzz.log[-6:]}")
            assert (st["STATUS"], st["LENGTH"]) == (status, length), \
                f"receive descriptor {addr:#x}: {st} expected status {status:#x} length {length}"
            if imm is not None:
                assert st["IMMEDIATE_DATA"] == imm
        await ctx.tick().repeat(COMPLETION_SETTLE)
        fuzz.retire(len(fuzz.completions) - checked_completions)
        checked_completions = len(fuzz.completions)
        if fuzz.mgmt is not None:
            src, payload = fuzz.mgmt
            mgmt = regmap.VIA.register("MGMT_RX_STATUS")
            st = await node.reg(ctx, "MGMT_RX_STATUS")
            assert st & mgmt.field("VALID").mask, "a management frame was not delivered"
            assert mgmt.field("SRC_NODE").extract(st) == src
            assert mgmt.field("LENGTH").extract(st) == len(payload)
            words = [await node.reg_array(ctx, "MGMT_RX_DATA", i) for i in range((len(payload) + 3) // 4)]
            assert b"".join(w.to_bytes(4, "little") for w in words)[:len(payload)] == payload
            await node.reg(ctx, "MGMT_RX_POP", 1)
            fuzz.mgmt = None
        for _ in range(100_000):                          # the read responses, whole
            while seen_sent < len(wire.sent):
                raw = wire.sent[seen_sent]
                seen_sent += 1
                h = HEADER.decode(raw)
                if h["OP"] == OP.READ_RESPONSE:
                    assert h["PSN"] in fuzz.reads, f"a read response for PSN {h['PSN']} nobody asked for"
                    got = responses.setdefault(h["PSN"], bytearray())
                    assert h["OFFSET"] == len(got), "read responses out of order"
                    got += raw[HEADER.size:HEADER.size + h["PAYLOAD_LENGTH"]]
            if all(len(responses.get(psn, b"")) >= len(data) for psn, data in fuzz.reads.items()):
                break
            await ctx.tick()
        for psn, data in fuzz.reads.items():
            assert bytes(responses.get(psn, b"")) == data, f"read request PSN {psn}: wrong response data"

    for _ in range(groups):
        for addr, data in fuzz.post():
            load_words(ctx, node.ram, addr, data)
            await node.doorbell(ctx, VI, "RQ_DOORBELL", addr)
        size, count, special = 0, 0, False
        while count < 12:
            if rng.random() < 0.5:
                raw, fcs_error, _ = fuzz.hostile_frame()
            else:
                if not fuzz.message:
                    fuzz.start_message()
                op = fuzz.message[0]["OP"]
                if op in (OP.READ_REQUEST, OP.MGMT):    # one a group: the bench answers between groups
                    if special:
                        break
                    special = True
                raw, fcs_error, _ = fuzz.legit_frame()
            wire.send(raw, fcs_error=fcs_error)
            count += 1
            size += len(raw) + 64
            if size > RX_BUFFER // 2:
                break
        await settle_group()

    # The message in progress is finished, then a final legitimate send: the engine still answers.
    for final in (None, "send"):
        for addr, data in fuzz.post():
            load_words(ctx, node.ram, addr, data)
            await node.doorbell(ctx, VI, "RQ_DOORBELL", addr)
        if final:
            fuzz.start_message(final)
        while fuzz.message:
            raw, fcs_error, _ = fuzz.legit_frame()
            wire.send(raw)
            await drain(ctx, wire, node)
        await settle_group()
    assert ctx.get(node.engine.rx_pending) == 0

    after = await all_counters(ctx, node)
    delta = {name: after[name] - before[name] for name in COUNTERS}
    counted = {name: delta[name] for name in DROP_COUNTERS}
    assert counted == fuzz.counts, f"drop counters {counted}, expected {fuzz.counts}"
    assert delta["RX_FRAMES"] == fuzz.frames - fuzz.counts["RX_BAD_FCS"] - fuzz.counts["RX_OVERFLOW"]
    for name in ("RX_RQ_EMPTY", "RX_DESCRIPTOR_ERROR", "RX_MGMT_DROPPED", "READ_REQUESTS_DROPPED",
                 "DOORBELLS_REFUSED", "DMA_ERRORS", "TX_ERRORS", "TX_TIMEOUTS", "TX_NAK_SEQUENCE",
                 "CQ_OVERFLOWS"):
        assert delta[name] == 0, f"{name} moved by {delta[name]}"
    assert await node.vi_reg(ctx, VI, "RX_PSN") == fuzz.rcv_nxt
    assert (await node.vi_reg(ctx, VI, "STATE")) & 3 == dict(regmap.VI_STATES)["CONNECTED"]
    difference = first_difference(fuzz.expected, snapshot(ctx, node.ram))
    assert difference is None, difference
    return fuzz


# --- Ring link: hostile symbol streams among legitimate packets -----------------------------------

RING_NODE, RING_PEER = 5, 7          # the node under test; the node its own packets go to
_RING_FIELDS = field_positions()
RING_COUNTER_NAMES = [name for name, _ in regmap.RING_COUNTERS]


def routing(symbol0):
    """The header fields of a packet's first symbol (``target``, ``source``, ``ptype``, ...)."""
    value = symbol0 << (HEADER_BITS - SYMBOL_BITS)
    out = {}
    for name, (lsb, width) in _RING_FIELDS.items():
        if lsb >= HEADER_BITS - SYMBOL_BITS:
            out[name] = (value >> lsb) & ((1 << width) - 1)
    return out


def with_routing(symbol0, **fields):
    value = symbol0 << (HEADER_BITS - SYMBOL_BITS)
    for name, v in fields.items():
        lsb, width = _RING_FIELDS[name]
        value = (value & ~(((1 << width) - 1) << lsb)) | (v << lsb)
    return value >> (HEADER_BITS - SYMBOL_BITS)


def intact(symbols):
    try:
        decode(symbols)
        return True
    except PacketError:
        return False


class RingFuzz:
    """Reference model of one ring node (``ring_link``'s docstring) fed by a seeded generator."""

    def __init__(self, rng, scrub_window):
        self.rng = rng
        self.scrub_window = scrub_window
        self.rx_last = {}                 # source -> alternating bit of the last packet stored
        self.delivered = []               # packets the consumer must get, in order
        self.echoes = []                  # (target, seq) of the echoes the node must send, in order
        self.forwarded = []               # symbol lists the node must pass on, in order
        self.counts = {name: 0 for name in RING_COUNTER_NAMES}
        self.suspect = None               # (first symbol, cycle armed) of the scrubber
        self.in_flight = None             # seq of the own packet sent and not yet answered
        self.last_seq = 1                 # seq of the last own packet seen (the next one: 0)
        self.kinds = {}

    def suspect_active(self, now):
        return self.suspect is not None and now - self.suspect[1] < self.scrub_window

    def ambiguous(self, symbol0, now):
        """Too close to the scrubber's expiry to say what it does: wait a little."""
        return (self.suspect is not None and self.suspect[0] == symbol0
                and abs(now - self.suspect[1] - self.scrub_window) < 24)

    def judge(self, symbols, start, end):
        """Account one framed symbol sequence that entered at cycle ``start`` and ended at ``end``."""
        r = routing(symbols[0])
        for_me = r["target"] == RING_NODE
        came_back = r["source"] == RING_NODE and not for_me
        good = intact(symbols)
        if for_me:
            if not good:
                self.counts["CRC_ERRORS"] += 1
                return "crc"
            packet = decode(symbols)
            if packet.ptype == PacketType.ECHO:
                self.counts["RX_ECHOES"] += 1
                if packet.status == EchoStatus.BUSY:
                    self.counts["BUSY_RECEIVED"] += 1
                if (packet.status == EchoStatus.ACCEPTED and packet.source == RING_PEER
                        and self.in_flight == packet.seq):
                    self.counts["TX_ACCEPTED"] += 1
                    self.in_flight = None
                    return "own echo"
                return "echo"
            self.echoes.append((packet.source, packet.seq))
            self.counts["TX_ECHOES"] += 1
            if self.rx_last.get(packet.source, 1) == packet.seq:
                self.counts["DUPLICATES"] += 1
                return "duplicate"
            self.rx_last[packet.source] = packet.seq
            self.delivered.append(packet)
            self.counts["RX_PACKETS"] += 1
            return "delivered"
        if came_back:
            self.counts["UNDELIVERABLE"] += 1
            return "undeliverable"
        if self.suspect_active(start) and symbols[0] == self.suspect[0]:
            self.counts["SCRUBBED"] += 1
            self.suspect = None
            return "scrubbed"
        self.counts["BYPASSED"] += 1
        self.forwarded.append(list(symbols))
        if not good:
            self.suspect = (symbols[0], end)
        return "forwarded"

    # Generators.
    def legit_for_me(self):
        rng = self.rng
        source = rng.choice([1, 2, 3, RING_PEER, 60])
        packet = random_packet(rng, RING_NODE, data_ratio=0.5)
        return replace(packet, source=source, seq=self.rx_last.get(source, 1) ^ 1)

    def legit_for_others(self):
        rng = self.rng
        target = rng.choice([0, 1, 6, 9, 63])
        source = rng.choice([s for s in (0, 2, 8, 33) if s != target])
        ptype = rng.choice([PacketType.REQUEST, PacketType.RESPONSE, PacketType.ECHO])
        packet = replace(random_packet(rng, target, ptype=ptype), source=source, seq=rng.randrange(2))
        if ptype == PacketType.ECHO:
            packet = Packet(target=target, source=source, ptype=ptype, seq=packet.seq, status=rng.randrange(32))
        return encode(packet)

    def hostile_echo(self):
        """An echo for this node that answers nothing outstanding (or answers again)."""
        rng = self.rng
        source = rng.choice([RING_PEER, RING_PEER, 1, 2, 40])
        if source == RING_PEER:       # the other alternating bit, or the one just answered
            seq = self.last_seq ^ (1 if self.in_flight is not None else 0)
        else:
            seq = rng.randrange(2)
        status = rng.choice([EchoStatus.ACCEPTED, EchoStatus.BUSY, rng.randrange(32)])
        return encode(Packet(target=RING_NODE, source=source, ptype=PacketType.ECHO, seq=seq, status=status))

    def mutated(self):
        """Fragments (symbol lists, each framed on its own) of a damaged or invented packet."""
        rng = self.rng
        base = rng.choice([encode(self.legit_for_me()), self.legit_for_others(), self.hostile_echo()])
        m = rng.randrange(9)
        if m == 0:                        # bit errors anywhere (the CRC catches them)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(base))
                base[i] ^= 1 << rng.randrange(16)
        elif m == 1:                      # truncated
            base = base[:rng.randint(1, len(base) - 1)]
        elif m == 2:                      # overlong
            base = base + [rng.randrange(1 << 16) for _ in range(rng.randint(1, 40))]
        elif m == 3:                      # unknown packet type, CRC made good
            base[0] = with_routing(base[0], ptype=3)
            base[-1] = crc16(base[:-1])
        elif m == 4:                      # has_data that the length contradicts, CRC made good
            base[0] = with_routing(base[0], has_data=routing(base[0])["has_data"] ^ 1)
            base[-1] = crc16(base[:-1])
        elif m == 5:                      # garbage
            base = [rng.randrange(1 << 16) for _ in range(rng.randint(1, 60))]
            if rng.random() < 0.5:
                base[0] = with_routing(base[0], target=RING_NODE)
        elif m == 6:                      # a packet cut in two by a glitch of the frame bit
            cut = rng.randint(1, len(base) - 1)
            return [base[:cut], base[cut:]]
        elif m == 7:                      # from this node, not for it: must be removed
            base[0] = with_routing(base[0], source=RING_NODE)
            if routing(base[0])["target"] == RING_NODE:
                base[0] = with_routing(base[0], target=RING_PEER + 1)
        else:                             # a packet for a node that does not exist, corrupted
            base[0] = with_routing(base[0], target=62)
            base[rng.randrange(1, len(base))] ^= 0x8000
        return [base]


async def drive_symbols(ctx, link, symbols, gap, rng):
    """One framed symbol sequence on ``rx``, then ``gap`` idle cycles carrying random data (which
    the link must ignore)."""
    for symbol in symbols:
        ctx.set(link.rx.frame, 1)
        ctx.set(link.rx.data, symbol)
        await ctx.tick()
    ctx.set(link.rx.frame, 0)
    for _ in range(gap):
        ctx.set(link.rx.data, rng.randrange(1 << 16))
        await ctx.tick()


def ring_fuzz(*, seed, items, own_packets):
    """Simulate one node fed ``items`` seeded inputs; returns the model after checking the node."""
    rng = random.Random(seed)
    bench = LinkBench(RING_NODE)
    fuzz = RingFuzz(rng, scrub_window=bench.link.echo_timeout // 2)
    transmitted, received = [], []
    own = [random_packet(rng, RING_PEER) for _ in range(own_packets)]
    sim = Simulator(bench)
    sim.add_clock(1e-8)
    sim.add_testbench(tx_monitor(bench.cycle, bench.link, transmitted), background=True)

    async def consumer(ctx):
        while True:
            received.append(await receive(ctx, bench.link))

    def own_seen():
        return [decode(s) for _, s in transmitted if routing(s[0])["source"] == RING_NODE
                and routing(s[0])["ptype"] != PacketType.ECHO]

    async def put(ctx, fragments):
        for symbols in fragments:
            while fuzz.ambiguous(symbols[0], ctx.get(bench.cycle)):
                await ctx.tick()
            start = ctx.get(bench.cycle)
            await drive_symbols(ctx, bench.link, symbols, rng.choice([1, 1, 1, 2, 3, 7]), rng)
            fuzz.judge(symbols, start, start + len(symbols))

    async def answer_own(ctx):
        """Echo ACCEPTED the own packet on the wire, as node RING_PEER would."""
        seen = own_seen()
        packet = seen[-1]
        await put(ctx, [encode(Packet(target=RING_NODE, source=RING_PEER, ptype=PacketType.ECHO,
                                      seq=packet.seq, status=EchoStatus.ACCEPTED))])

    async def main(ctx):
        link = bench.link
        answered, queued = 0, 0
        for step in range(items):
            if queued < len(own) and rng.random() < 2 * len(own) / items:   # spread over the run
                await send(ctx, link, own[queued])
                queued += 1
            seen = own_seen()
            if len(seen) > answered and fuzz.in_flight is None and seen[-1].seq != fuzz.last_seq:
                fuzz.in_flight = fuzz.last_seq = seen[-1].seq
            if fuzz.in_flight is not None and rng.random() < 0.3:
                await answer_own(ctx)
                answered += 1
                continue
            kind = rng.choices(["for me", "duplicate", "others", "echo", "mutated", "scrub"],
                               weights=[3, 1, 3, 2, 6, 1])[0]
            fuzz.kinds[kind] = fuzz.kinds.get(kind, 0) + 1
            if kind == "for me":
                fragments = [encode(fuzz.legit_for_me())]
            elif kind == "duplicate" and fuzz.delivered:
                fragments = [encode(fuzz.delivered[-1])]
            elif kind == "echo":
                fragments = [fuzz.hostile_echo()]
            elif kind == "mutated":
                fragments = fuzz.mutated()
            elif kind == "scrub" and fuzz.suspect_active(ctx.get(bench.cycle) + 64):
                fragments = [fuzz.forwarded[-1]]          # the corrupt packet, round again
            else:
                fragments = [fuzz.legit_for_others()]
            await put(ctx, fragments)
        # Every own packet answered, then the link still works both ways.
        for packet in own[queued:]:
            await send(ctx, link, packet)
        while answered < len(own):
            for _ in range(2000):
                seen = own_seen()
                if len(seen) > answered:
                    break
                await ctx.tick()
            else:
                raise AssertionError(f"own packet {answered} never went out")
            fuzz.in_flight = fuzz.last_seq = seen[-1].seq
            await answer_own(ctx)
            answered += 1
        await put(ctx, [encode(fuzz.legit_for_me())])
        await put(ctx, [fuzz.legit_for_others()])
        for _ in range(300):
            await ctx.tick()

        assert received == fuzz.delivered, "the consumer got other packets than the legitimate ones"
        ours = [decode(s) for _, s in transmitted if routing(s[0])["source"] == RING_NODE]
        echoes = [(p.target, p.seq, p.status) for p in ours if p.ptype == PacketType.ECHO]
        assert echoes == [(t, s, EchoStatus.ACCEPTED) for t, s in fuzz.echoes]
        sent = [p for p in ours if p.ptype != PacketType.ECHO]
        assert sent == [replace(as_sent_by(p, RING_NODE), seq=i % 2) for i, p in enumerate(own)]
        passed = [s for _, s in transmitted if routing(s[0])["source"] != RING_NODE]
        assert passed == fuzz.forwarded, "forwarded packets differ from what came in"
        expected = dict(fuzz.counts, TX_PACKETS=len(own))
        counters = await read_counters(ctx, link, RING_COUNTER_NAMES)
        assert counters == expected
        status = await read(ctx, link.bus, regmap.RING.register("STATUS").offset)
        assert status == 0, f"queues not empty at the end: STATUS {status:#x}"
        errors = await read(ctx, link.bus, regmap.RING.register("ERRORS").offset)
        assert errors == 0, f"bypass FIFO overflow or underrun: ERRORS {errors:#x}"

    sim.add_testbench(consumer, background=True)
    sim.add_testbench(main)
    sim.run()
    return fuzz


# --- Descriptors: constrained-random work posted through the real doorbells ---------------------

_SEG_LIMIT = PARAMS.max_segments
_VI_REGS = regmap.VIA.array("VI")
_CONNECTED_STATE, _ERROR_STATE = dict(regmap.VI_STATES)["CONNECTED"], dict(regmap.VI_STATES)["ERROR"]
PER_FRAME_MTU = 600


def local_ok(va, handle, length):
    """The ATT's verdict on a local data segment: a registered handle of the VI's tag (no RDMA
    right needed), the range inside the region and its pages."""
    r = REGIONS.get(handle)
    if r is None or r.ptag != PTAG or not (r.va <= va and va + length <= r.va + r.length):
        return False
    count, _ = via_att.region_pages(r.va, r.length)
    return (va >> 12) - (r.va >> 12) < count


def status_op_of(op):
    return {CONTROL_OP.RDMA_WRITE: STATUS_OP.RDMA_WRITE, CONTROL_OP.RDMA_READ: STATUS_OP.RDMA_READ}.get(
        op, STATUS_OP.SEND)


class DescriptorFuzz:
    """Seeded descriptors, valid and not, and what the engine's rules make of each."""

    def __init__(self, rng, memory):
        self.rng = rng
        self.expected = bytearray(memory)
        self.counts = {"posted": 0, "errors": 0, "refused": 0, "vi_errors": 0, "valid": 0, "late_frames": 0}

    def set_expected(self, addr, data):
        self.expected[addr - HOST:addr - HOST + len(data)] = data

    def gather(self, segments):
        out = bytearray()
        for va, handle, length in segments:
            r = REGIONS[handle]
            for i in range(length):
                out.append(self.expected[r.pa(va + i) - HOST])
        return bytes(out)

    def scatter(self, segments, data):
        pos = 0
        for va, handle, length in segments:
            r = REGIONS[handle]
            for i in range(min(length, len(data) - pos)):
                self.set_expected(r.pa(va + i), bytes([data[pos + i]]))
            pos += length

    def segment(self, *, valid):
        rng = self.rng
        length = rng.choice([0, rng.randint(1, 16), rng.randint(1, 400)])
        if valid:
            handle = rng.choice([1, 1, 3, 5])          # local access needs no RDMA right
            r = REGIONS[handle]
            length = min(length, r.length)
            return rng.randrange(r.va, r.va + r.length - length + 1), handle, length
        handle = rng.choice([1, 2, 0, 4, 7, 8, rng.randrange(1 << 32)])
        r = REGIONS.get(handle, REGIONS[1])
        va = rng.choice([r.va + r.length - rng.randint(0, 16), r.va - rng.randint(1, 16),
                         rng.randrange(r.va, r.va + r.length), rng.randrange(1 << 64), (1 << 64) - 8])
        length = rng.choice([length, rng.randrange(1 << 32)])
        return va, handle, length

    def descriptor(self, queue):
        """``(bytes, fields)`` of a random descriptor for ``queue`` ("send" or "recv")."""
        rng = self.rng
        if queue == "send":
            op = rng.choices([CONTROL_OP.SENDRECV, CONTROL_OP.RDMA_WRITE, CONTROL_OP.RDMA_READ, 3],
                             weights=[4, 3, 3, 1])[0]
        else:
            op = rng.choices([CONTROL_OP.SENDRECV, CONTROL_OP.RDMA_WRITE, CONTROL_OP.RDMA_READ, 3],
                             weights=[12, 1, 1, 1])[0]
        count = rng.choice([0, 1, 1, 2, 3, 4, rng.randint(0, _SEG_LIMIT + 2)])
        bad = rng.random() < 0.25
        segments = [self.segment(valid=not bad or rng.random() < 0.5) for _ in range(count)]
        imm = rng.choice([None, rng.randrange(1 << 32)])
        data = bytearray(encode_descriptor(op if op != 3 else 0, segments, immediate=imm,
                                           remote_va=rng.randrange(1 << 64), remote_handle=rng.randrange(1 << 32),
                                           next_va=rng.randrange(1 << 64), next_handle=rng.randrange(1 << 32)))
        ctrl = CONTROL_SEGMENT.field("CONTROL")
        control = int.from_bytes(data[ctrl.offset:ctrl.offset + 2], "little")
        control = (control & ~CONTROL_SEGMENT.field("CONTROL").bit("OP").mask) | op
        if rng.random() < 0.15:   # bits CONTROL does not define: refused, as by the host's decoder
            control |= rng.randrange(1 << 16) & CONTROL_UNDEFINED_MASK
        data[ctrl.offset:ctrl.offset + 2] = control.to_bytes(2, "little")
        if rng.random() < 0.15:
            reserved = CONTROL_SEGMENT.field("RESERVED")
            data[reserved.offset:reserved.offset + reserved.size] = rng.randbytes(reserved.size)
        rdma = op in (CONTROL_OP.RDMA_WRITE, CONTROL_OP.RDMA_READ)
        fields = dict(op=op, segments=segments, imm=imm, rdma=rdma)
        if op == 3 or control & CONTROL_UNDEFINED_MASK or count > _SEG_LIMIT:
            fields["error"] = "FORMAT_ERROR"
        elif not all(local_ok(*s) for s in segments):
            fields["error"] = "PROTECTION_ERROR"
        else:
            fields["error"] = None
            fields["total"] = sum(s[2] for s in segments)
        if rdma:
            address = CONTROL_SEGMENT.size
            fields["remote_va"] = int.from_bytes(data[address:address + 8], "little")
            fields["remote_handle"] = int.from_bytes(data[address + 8:address + 12], "little")
        return bytes(data), fields

    def bad_doorbell(self):
        """A descriptor address the doorbell must refuse: misaligned, outside host memory, or in
        host memory but outside the VI's descriptor area (or its control segment straddling the end)."""
        rng = self.rng
        area_end = DESC_AREA[0] + DESC_AREA[1]
        return rng.choice([HOST + 0x2000 + rng.randrange(1, 16), HOST + HOST_SIZE, HOST - 0x100,
                           HOST + HOST_SIZE - 16, rng.randrange(1 << 32) | 1, 0,
                           area_end, area_end - 16, area_end + 16 * rng.randrange((HOST + HOST_SIZE - area_end) // 16)])


def peer_frame(op, **fields):
    return HEADER.encode(**frame_fields(OP=op, **fields))


async def descriptor_fuzz(ctx, node, wire, *, seed, rounds):
    """Rounds of up to four random descriptors, on the send queue (the bench plays the peer:
    checks every data frame against the descriptor, acknowledges, answers read requests, and now
    and then refuses an RDMA write with a remote-protection NAK) or on the receive queue (the bench
    sends one message for each). Returns the fuzzer."""
    rng = random.Random(seed)
    memory = bytes(rng.randrange(256) for _ in range(HOST_SIZE))
    fill(ctx, node.ram, memory)
    await engine_setup(ctx, node)
    await node.reg(ctx, "MTU", PER_FRAME_MTU)
    per_frame = PER_FRAME_MTU - via_frame.VIA_HEADER_SIZE
    fuzz = DescriptorFuzz(rng, memory)
    before = await all_counters(ctx, node)
    seen = 0
    peer_psn = 0                                       # next PSN the bench (peer) sends
    engine_psn = [0]                                   # next PSN the engine must send

    async def post(queue, addr, data):
        load_words(ctx, node.ram, addr, data)
        fuzz.set_expected(addr, data)
        await node.doorbell(ctx, VI, "SQ_DOORBELL" if queue == "send" else "RQ_DOORBELL", addr)
        fuzz.counts["posted"] += 1

    async def refused_doorbell(queue):
        await node.doorbell(ctx, VI, "SQ_DOORBELL" if queue == "send" else "RQ_DOORBELL", fuzz.bad_doorbell())
        fuzz.counts["refused"] += 1

    async def wait_all(addrs, serve=None, timeout=200_000):
        for _ in range(timeout // 8):
            if serve is not None:
                serve()
            if all(node.status(ctx, a)["STATUS"] & 1 for a in addrs):
                await ctx.tick().repeat(COMPLETION_SETTLE)
                return
            await ctx.tick().repeat(8)
        raise AssertionError("descriptors never completed: " + ", ".join(
            f"{a:#x}" for a in addrs if not node.status(ctx, a)["STATUS"] & 1))

    def expect(addr, status, length, imm=None):
        ctrl = CONTROL_SEGMENT
        if imm is not None:
            fuzz.set_expected(addr + ctrl.field("IMMEDIATE_DATA").offset, imm.to_bytes(4, "little"))
        fuzz.set_expected(addr + ctrl.field("LENGTH").offset, length.to_bytes(4, "little"))
        fuzz.set_expected(addr + ctrl.field("STATUS").offset, status.to_bytes(4, "little"))

    async def vi_state():
        value = await node.vi_reg(ctx, VI, "STATE")
        return value & 3, value >> 8

    async def recover():
        """A VI in ERROR: its queues drain, then RESET and CONNECT make it usable again."""
        nonlocal peer_psn, seen
        assert (await vi_state())[0] == _ERROR_STATE
        for _ in range(2000):
            if await node.vi_reg(ctx, VI, "QUEUE_STATUS") == 0:
                break
            await ctx.tick().repeat(8)
        else:
            raise AssertionError("the queues of a failed VI did not drain")
        await node.vi_reg(ctx, VI, "CMD", _VI_REGS.register("CMD").field("RESET").mask)
        assert (await vi_state())[0] == dict(regmap.VI_STATES)["IDLE"]
        await node.connect(ctx, VI, PEER, PEER_VI, PTAG, desc_area=DESC_AREA)
        assert await vi_state() == (_CONNECTED_STATE, 0)
        await ctx.tick().repeat(200)
        seen = len(wire.sent)                           # acknowledgements of the old connection
        peer_psn = 0
        engine_psn[0] = 0
        fuzz.counts["vi_errors"] += 1

    for _ in range(rounds):
        queue = rng.choice(["send", "recv"])
        batch = [fuzz.descriptor(queue) for _ in range(rng.randint(1, PARAMS.queue_depth))]
        addrs = SEND_SLOTS[:len(batch)]
        if queue == "send":
            # The peer NAKs the last descriptor if it is a valid RDMA write, now and then.
            last = batch[-1][1]
            nak_last = (last["op"] == CONTROL_OP.RDMA_WRITE and last["error"] is None and last["total"] > 0
                        and rng.random() < 0.5)
            work = [(addr, f) for addr, (_, f) in zip(addrs, batch) if f["error"] is None]
            progress = {"index": 0, "psn": engine_psn[0]}

            def serve():
                """Check and answer what the engine sent since the last call."""
                nonlocal seen
                while seen < len(wire.sent):
                    raw = wire.sent[seen]
                    seen += 1
                    h = HEADER.decode(raw)
                    if h["OP"] not in (OP.SEND, OP.RDMA_WRITE, OP.READ_REQUEST):
                        continue
                    assert h["PSN"] == progress["psn"], f"PSN {h['PSN']}, expected {progress['psn']}"
                    assert progress["index"] < len(work), "a frame for a descriptor that must fail"
                    addr, f = work[progress["index"]]
                    op = {CONTROL_OP.SENDRECV: OP.SEND, CONTROL_OP.RDMA_WRITE: OP.RDMA_WRITE,
                          CONTROL_OP.RDMA_READ: OP.READ_REQUEST}[f["op"]]
                    assert (h["OP"], h["MSG_LENGTH"]) == (op, f["total"]), (h, f)
                    if f["rdma"]:
                        assert (h["REMOTE_VA"], h["REMOTE_HANDLE"]) == (f["remote_va"], f["remote_handle"])
                    progress["psn"] += 1
                    if op == OP.READ_REQUEST:
                        data = bytes(rng.randrange(256) for _ in range(f["total"]))
                        fuzz.scatter(f["segments"], data)
                        offset = 0
                        while True:
                            n = min(len(data) - offset, rng.randint(1, via_frame.payload_per_frame(1500)))
                            wire.send(peer_frame(OP.READ_RESPONSE, PSN=h["PSN"], ACK_PSN=h["PSN"] + 1,
                                                 MSG_LENGTH=len(data), OFFSET=offset, PAYLOAD_LENGTH=n,
                                                 FLAGS=flags(offset == 0, offset + n == len(data)))
                                      + data[offset:offset + n])
                            offset += n
                            if offset >= len(data):
                                break
                        progress["index"] += 1
                        continue
                    message = fuzz.gather(f["segments"])
                    n = h["PAYLOAD_LENGTH"]
                    assert raw[HEADER.size:HEADER.size + n] == message[h["OFFSET"]:h["OFFSET"] + n], \
                        f"descriptor {addr:#x}: wrong payload at offset {h['OFFSET']}"
                    final = h["OFFSET"] + n >= f["total"]
                    if final and nak_last and progress["index"] == len(work) - 1:
                        wire.send(peer_frame(OP.NAK, PSN=h["PSN"], ACK_PSN=h["PSN"],
                                             NAK_CODE=via_frame.NAK.REMOTE_PROTECTION))
                    else:
                        wire.send(peer_frame(OP.ACK, ACK_PSN=h["PSN"] + 1))
                    if final:
                        progress["index"] += 1
                    else:
                        assert n == per_frame

            for addr, (data, f) in zip(addrs, batch):
                await post("send", addr, data)
                if rng.random() < 0.2:
                    await refused_doorbell("send")
                serve()
            await wait_all(addrs, serve)
            engine_psn[0] = progress["psn"]
            for k, (addr, (_, f)) in enumerate(zip(addrs, batch)):
                op_status = status_op(status_op_of(f["op"]))
                if f["error"]:
                    expect(addr, status_bits(DONE=1, **{f["error"]: 1}) | op_status, 0)
                    fuzz.counts["errors"] += 1
                elif nak_last and k == len(batch) - 1:
                    expect(addr, status_bits(DONE=1, RDMA_PROTECTION_ERROR=1) | op_status, 0)
                    fuzz.counts["errors"] += 1
                else:
                    expect(addr, status_bits(DONE=1) | op_status, f["total"])
                    fuzz.counts["valid"] += 1
            for addr in addrs:
                st = node.status(ctx, addr)
                want = CONTROL_SEGMENT.decode(fuzz.expected[addr - HOST:addr - HOST + CONTROL_SEGMENT.size])
                assert (st["STATUS"], st["LENGTH"]) == (want["STATUS"], want["LENGTH"]), \
                    f"send descriptor {addr:#x}: status {st['STATUS']:#x} length {st['LENGTH']}, expected " \
                    f"{want['STATUS']:#x} {want['LENGTH']} ({[f for a, (_, f) in zip(addrs, batch) if a == addr]})"
            if nak_last:
                assert await vi_state() == (_ERROR_STATE, status_bits(RDMA_PROTECTION_ERROR=1))
                # Work posted to a failed VI is flushed, not lost.
                data, f = fuzz.descriptor("send")
                await post("send", SEND_SLOTS[-1], data)
                await wait_all([SEND_SLOTS[-1]])
                expect(SEND_SLOTS[-1], status_bits(DONE=1, FLUSHED=1), 0)
                await recover()
        else:
            for addr, (data, f) in zip(addrs, batch):
                await post("recv", addr, data)
                if rng.random() < 0.2:
                    await refused_doorbell("recv")
            failed = None
            for k, (addr, (_, f)) in enumerate(zip(addrs, batch)):
                fits = f.get("total", 0)
                length = rng.choice([0, rng.randint(0, min(fits, 1200)), rng.randint(0, min(fits, 1200)),
                                     rng.randint(1, 1200)])
                message = bytes(rng.randrange(256) for _ in range(length))
                imm = rng.choice([None, rng.randrange(1 << 32)])
                pieces = [(o, min(per_frame, length - o)) for o in range(0, length, per_frame)] or [(0, 0)]
                for offset, n in pieces:
                    wire.send(peer_frame(OP.SEND, PSN=peer_psn, MSG_LENGTH=length, OFFSET=offset,
                                         PAYLOAD_LENGTH=n, IMMEDIATE_DATA=imm or 0,
                                         FLAGS=flags(offset == 0, offset + n == length, imm is not None))
                              + message[offset:offset + n])
                    peer_psn += 1
                await drain(ctx, wire, node)
                await wait_all([addr])
                receive = status_op(STATUS_OP.RECEIVE)
                if f["op"] != CONTROL_OP.SENDRECV:
                    error = "FORMAT_ERROR"           # not a receive (an RDMA or undefined operation)
                else:
                    error = f["error"] or ("LENGTH_ERROR" if f["total"] < length else None)
                if error:
                    expect(addr, status_bits(DONE=1, **{error: 1}) | receive, 0)
                    fuzz.counts["errors"] += 1
                    fuzz.counts["late_frames"] += len(pieces) - 1    # the first frame failed the VI
                    failed = (k, error)
                    break
                fuzz.scatter(f["segments"], message)
                imm_bits = {"IMMEDIATE": 1} if imm is not None else {}
                expect(addr, status_bits(DONE=1, **imm_bits) | receive, length, imm)
                fuzz.counts["valid"] += 1
            if failed is not None:
                k, error = failed
                rest = addrs[k + 1:]
                await wait_all(rest)
                for addr in rest:
                    expect(addr, status_bits(DONE=1, FLUSHED=1) | status_op(STATUS_OP.RECEIVE), 0)
                for addr in addrs[:k + 1] + rest:
                    st = node.status(ctx, addr)
                    want = CONTROL_SEGMENT.decode(fuzz.expected[addr - HOST:addr - HOST + CONTROL_SEGMENT.size])
                    assert (st["STATUS"], st["LENGTH"]) == (want["STATUS"], want["LENGTH"]), \
                        f"receive descriptor {addr:#x}: status {st['STATUS']:#x}, expected {want['STATUS']:#x} " \
                        f"{[f for a, (_, f) in zip(addrs, batch) if a == addr]}"
                assert await vi_state() == (_ERROR_STATE, status_bits(**{error: 1}))
                await recover()
        difference = first_difference(fuzz.expected, snapshot(ctx, node.ram))
        assert difference is None, difference

    # The VI still works: a valid send goes out and completes.
    data = encode_descriptor(CONTROL_OP.SENDRECV, [(REGIONS[1].va, 1, 100)])
    await post("send", SEND_SLOTS[0], data)
    for _ in range(5000):
        if seen < len(wire.sent) and HEADER.decode(wire.sent[-1])["OP"] == OP.SEND:
            break
        await ctx.tick()
    h = HEADER.decode(wire.sent[-1])
    assert (h["OP"], h["MSG_LENGTH"]) == (OP.SEND, 100)
    wire.send(peer_frame(OP.ACK, ACK_PSN=h["PSN"] + 1))
    await wait_all([SEND_SLOTS[0]])
    assert node.status(ctx, SEND_SLOTS[0])["STATUS"] == status_bits(DONE=1)

    after = await all_counters(ctx, node)
    delta = {name: after[name] - before[name] for name in COUNTERS}
    assert delta["DOORBELLS_REFUSED"] == fuzz.counts["refused"]
    assert delta["RX_NO_VI"] == fuzz.counts["late_frames"]       # frames for a VI that had failed
    assert delta["RX_DESCRIPTOR_ERROR"] + delta["TX_ERRORS"] == fuzz.counts["vi_errors"]
    for name in ("DMA_ERRORS", "TX_TIMEOUTS", "CQ_OVERFLOWS", "RX_PROTECTION", "RX_MALFORMED"):
        assert delta[name] == 0, f"{name} moved by {delta[name]}"
    return fuzz
