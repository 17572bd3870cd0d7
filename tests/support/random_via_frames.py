"""Hostile VIA frames among legitimate traffic, into the receive engine: the generator, its model
of the engine's acceptance rules and the run that checks every frame's fate."""

import random

from numavia.base import regmap, via_frame
from numavia.base.via_descriptor import (
    CONTROL_OP,
    CONTROL_SEGMENT,
    STATUS_OP,
    encode_descriptor,
    status_bits,
    status_op,
)
from support.random_via import (
    COMPLETION_SETTLE,
    COUNTERS,
    HEADER,
    MASK32,
    MAX_PAYLOAD,
    ME,
    OP,
    OTHER_CONNECTIONS,
    PEER,
    PEER_VI,
    PTAG,
    REGIONS,
    VI,
    all_counters,
    drain,
    engine_setup,
    fill,
    first_difference,
    flags,
    frame_fields,
    snapshot,
)
from support.via_pair import HOST, HOST_SIZE, PARAMS
from support.wishbone_sram import load_words

DESC_SLOTS = [HOST + 0x100 * i for i in range(32)]  # receive descriptors (96 bytes each at most)
RECEIVE_CAPACITY = 1600


def rights_ok(handle, va, length, need_write, ptag=PTAG):
    """The ATT's verdict (``via_translate``): a registered handle of this protection tag with the
    right, and [va, va + length) inside the region."""
    r = REGIONS.get(handle)
    return (
        r is not None
        and r.ptag == ptag
        and (r.write if need_write else r.read)
        and r.va <= va
        and va + length <= r.va + r.length
    )


DROP_COUNTERS = (
    "RX_BAD_FCS",
    "RX_OVERFLOW",
    "RX_NOT_FOR_US",
    "RX_MALFORMED",
    "RX_NO_VI",
    "RX_DUPLICATE",
    "RX_OUT_OF_ORDER",
    "RX_PROTECTION",
    "RX_STALE_RESPONSE",
)
#: The engine's receive buffer in bytes: a frame longer than it can never be stored.
RX_BUFFER = PARAMS.rx_buffer_bytes


def classify(raw, fcs_error, rcv_nxt):
    """What the receive engine must do with frame ``raw`` (as sent, before MAC padding) arriving
    when the VI under test expects ``rcv_nxt``: the drop counter it must count, "ACCEPT" (the peer
    could have sent it: a legitimate frame) or "UNSAFE" (it would act on it in a way this test does
    not model: such mutations are drawn again)."""
    if len(raw) > RX_BUFFER - 64:  # can never be stored, whatever its FCS
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
    if (
        OP.name_of(op) is None
        or length > body
        or length > MAX_PAYLOAD
        or (op in via_frame.DATA_OPS and h["OFFSET"] + length > h["MSG_LENGTH"])
        or (op == OP.MGMT and length > via_frame.MGMT_PAYLOAD_MAX)
    ):
        return "RX_MALFORMED"
    src = h["SRC_MAC"].to_bytes(6, "little")
    if op == OP.MGMT:  # from a card: not part of a connection, left out
        return "RX_NOT_FOR_US" if src[:5] != via_frame.MAC_PREFIX else "UNSAFE"
    vi = h["DST_VI"]
    if vi == VI:
        peer = (PEER, PEER_VI)
    else:
        peer = OTHER_CONNECTIONS.get(vi)
    if peer is None or src[:5] != via_frame.MAC_PREFIX or (src[5], h["SRC_VI"]) != peer:
        return "RX_NO_VI"
    if vi != VI or h["ACK_PSN"] != 0 or op == OP.NAK:
        return "UNSAFE"  # acknowledgements of the peer's: the transmit side's
    if op == OP.ACK:
        return "ACCEPT"
    if op == OP.READ_RESPONSE:
        return "RX_STALE_RESPONSE"  # no RDMA read is outstanding
    diff = (h["PSN"] - rcv_nxt) & MASK32
    if diff >> 31:
        return "UNSAFE" if op == OP.READ_REQUEST else "RX_DUPLICATE"  # a read is served again
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
        self.expected = bytearray(memory)  # host memory as it must end up
        self.rcv_nxt = 0
        self.posted = []  # receive descriptors posted, oldest first: (addr, segments)
        self.unassigned = 0  # of those, not yet claimed by a started message
        self.free_slots = list(DESC_SLOTS)
        self.message = None  # frames of the message in progress (callables of psn)
        self.completions = []  # (descriptor, STATUS, LENGTH, immediate or None)
        self.reads = {}  # psn -> bytes the responses must carry
        self.mgmt = None  # (source node, payload) of a management frame sent
        self.counts = {name: 0 for name in DROP_COUNTERS}
        self.frames = 0
        self.legit_messages = 0
        self.log = []  # (kind, fate, header fields) of every frame, for failures

    # Host memory model.
    def set_expected(self, addr, data):
        self.expected[addr - HOST : addr - HOST + len(data)] = data

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
                self.write_va(REGIONS[1], va, payload[pos : pos + n])
                pos += n
            pieces = self.chunks(length) if length else [(0, 0)]
            for k, (offset, n) in enumerate(pieces):
                last = k == len(pieces) - 1
                frames.append(
                    dict(
                        OP=OP.SEND,
                        FLAGS=flags(offset == 0, last, imm is not None),
                        MSG_LENGTH=length,
                        OFFSET=offset,
                        PAYLOAD_LENGTH=n,
                        IMMEDIATE_DATA=imm or 0,
                        payload=payload[offset : offset + n],
                    )
                )
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
                frames.append(
                    dict(
                        OP=OP.RDMA_WRITE,
                        FLAGS=flags(offset == 0, k == len(pieces) - 1, imm is not None),
                        MSG_LENGTH=length,
                        OFFSET=offset,
                        PAYLOAD_LENGTH=n,
                        REMOTE_VA=va,
                        REMOTE_HANDLE=1,
                        IMMEDIATE_DATA=imm or 0,
                        payload=payload[offset : offset + n],
                    )
                )
            if imm is not None:
                status = status_bits(DONE=1, IMMEDIATE=1) | status_op(STATUS_OP.REMOTE_RDMA_WRITE)
                frames[-1]["done"] = (index, status, 0, imm)
        elif kind == "read":
            r = REGIONS[3]  # read only: nothing else writes it while the responses are read
            length = rng.randint(1, r.length)
            va = rng.randrange(r.va, r.va + r.length - length + 1)
            frames.append(
                dict(
                    OP=OP.READ_REQUEST,
                    MSG_LENGTH=length,
                    REMOTE_VA=va,
                    REMOTE_HANDLE=3,
                    read=bytes(self.expected[r.pa(va) - HOST : r.pa(va) - HOST + length]),
                )
            )
        elif kind == "ack":
            frames.append(dict(OP=OP.ACK, no_psn=True))
        else:
            length = rng.randint(0, via_frame.MGMT_PAYLOAD_MAX)
            src = rng.randrange(1 << regmap.NODE_ID_BITS)
            frames.append(
                dict(
                    OP=OP.MGMT,
                    SRC_MAC=via_frame.mac_field(src),
                    DST_VI=rng.randrange(1 << 16),
                    PAYLOAD_LENGTH=length,
                    payload=bytes(rng.randrange(256) for _ in range(length)),
                    mgmt=src,
                    no_psn=True,
                )
            )
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
        op = rng.choices(
            [OP.ACK, OP.NAK, OP.SEND, OP.RDMA_WRITE, OP.READ_REQUEST, OP.READ_RESPONSE, OP.MGMT],
            weights=[1, 1, 2, 3, 3, 2, 1],
        )[0]
        length = rng.choice([0, rng.randint(1, 64), rng.randint(1, MAX_PAYLOAD)])
        handle = rng.choice([1, 1, 2, 3, 5, 0, 4, 7, 8, rng.randrange(1 << 32)])
        r = REGIONS.get(handle, REGIONS[1])
        msg = length + rng.choice([0, 0, rng.randint(1, 5000)])
        offset = rng.randint(0, msg - length)
        va = rng.choice(
            [
                rng.randrange(r.va, r.va + r.length),  # inside (maybe straddling)
                r.va + r.length - rng.randint(0, 64),  # across the end
                r.va - rng.randint(1, 64),  # before the start
                rng.randrange(1 << 64),  # anywhere
                (1 << 64) - rng.randint(1, 4096),  # wraps past 2**64
            ]
        )
        fields = frame_fields(
            OP=op,
            PSN=rng.choice([self.rcv_nxt, self.rcv_nxt, rng.randrange(1 << 32)]),
            FLAGS=rng.randrange(8),
            MSG_LENGTH=msg,
            OFFSET=offset,
            PAYLOAD_LENGTH=length,
            NAK_CODE=rng.randrange(6),
            REMOTE_VA=va,
            REMOTE_HANDLE=handle,
            IMMEDIATE_DATA=rng.randrange(1 << 32),
        )
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
                fields["DST_MAC"] = rng.choice(
                    [via_frame.mac_field(rng.randrange(1, 64)), (1 << 48) - 1, rng.randrange(1 << 48)]
                )
            elif m == 3:
                fields["OP"] = rng.choice([0, 8, 15, rng.randrange(256), rng.randint(1, 7)])
            elif m == 4:
                fields["PAYLOAD_LENGTH"] = rng.choice([len(payload) + rng.randint(1, 16), rng.randrange(1 << 16)])
            elif m == 5:
                fields["MSG_LENGTH"] = rng.choice([rng.randrange(fields["MSG_LENGTH"] + 1), rng.randrange(1 << 32)])
            elif m == 6:
                fields["OFFSET"] = rng.choice([fields["MSG_LENGTH"], rng.randrange(1 << 32)])
            elif m == 7:
                cut = rng.randrange(0, HEADER.size + len(payload) + 1)  # truncation at any layer
            elif m == 8:
                extra = bytes(rng.randrange(256) for _ in range(rng.randint(1, 100)))
            elif m == 9:
                d = rng.choice([rng.randint(1, 8), rng.randint(1, 1 << 31), rng.randrange(1 << 32)])
                fields["PSN"] = (self.rcv_nxt + rng.choice([d, -d])) & MASK32  # ahead, old, far
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


async def via_rx_fuzz(ctx, node, wire, *, seed, groups):
    """Groups of up to 12 frames, back to back, legitimate and hostile mixed (a group never holds
    more than the receive buffer, so nothing is lost to overflow); between groups the bench plays
    host and firmware: it checks completions, read responses and management frames and posts
    receive descriptors. Returns the fuzzer (for the figures)."""
    rng = random.Random(seed)
    memory = bytes(rng.randrange(256) for _ in range(HOST_SIZE))
    fill(ctx, node.ram, memory)
    await engine_setup(ctx, node)
    await node.reg(ctx, "MTU", 600)  # read responses of several frames
    fuzz = ViaRxFuzz(rng, memory)
    before = await all_counters(ctx, node)
    checked_completions, seen_sent = 0, 0
    responses = {}  # psn -> payload bytes received so far

    async def settle_group():
        nonlocal checked_completions, seen_sent
        await drain(ctx, wire, node)
        for addr, status, length, imm in fuzz.completions[checked_completions:]:
            try:
                st = await node.wait_done(ctx, addr, timeout=50_000)
            except TimeoutError as timeout:
                counters = {k: v - before[k] for k, v in (await all_counters(ctx, node)).items() if v != before[k]}
                raise AssertionError(
                    f"receive descriptor {addr:#x} never completed; counters moved: {counters}, "
                    f"RX_PSN {await node.vi_reg(ctx, VI, 'RX_PSN')} (model {fuzz.rcv_nxt}), "
                    f"last frames {fuzz.log[-6:]}"
                ) from timeout
            assert (st["STATUS"], st["LENGTH"]) == (status, length), (
                f"receive descriptor {addr:#x}: {st} expected status {status:#x} length {length}"
            )
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
            assert b"".join(w.to_bytes(4, "little") for w in words)[: len(payload)] == payload
            await node.reg(ctx, "MGMT_RX_POP", 1)
            fuzz.mgmt = None
        for _ in range(100_000):  # the read responses, whole
            while seen_sent < len(wire.sent):
                raw = wire.sent[seen_sent]
                seen_sent += 1
                h = HEADER.decode(raw)
                if h["OP"] == OP.READ_RESPONSE:
                    assert h["PSN"] in fuzz.reads, f"a read response for PSN {h['PSN']} nobody asked for"
                    got = responses.setdefault(h["PSN"], bytearray())
                    assert h["OFFSET"] == len(got), "read responses out of order"
                    got += raw[HEADER.size : HEADER.size + h["PAYLOAD_LENGTH"]]
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
                if op in (OP.READ_REQUEST, OP.MGMT):  # one a group: the bench answers between groups
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
    for name in (
        "RX_RQ_EMPTY",
        "RX_DESCRIPTOR_ERROR",
        "RX_MGMT_DROPPED",
        "READ_REQUESTS_DROPPED",
        "DOORBELLS_REFUSED",
        "DMA_ERRORS",
        "TX_ERRORS",
        "TX_TIMEOUTS",
        "TX_NAK_SEQUENCE",
        "CQ_OVERFLOWS",
    ):
        assert delta[name] == 0, f"{name} moved by {delta[name]}"
    assert await node.vi_reg(ctx, VI, "RX_PSN") == fuzz.rcv_nxt
    assert (await node.vi_reg(ctx, VI, "STATE")) & 3 == dict(regmap.VI_STATES)["CONNECTED"]
    difference = first_difference(fuzz.expected, snapshot(ctx, node.ram))
    assert difference is None, difference
    return fuzz
