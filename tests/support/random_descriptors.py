"""Constrained-random descriptors posted through the real doorbells: the generator, the engine's
rules for each (completion status, frames on the wire) and the run where the bench plays the peer."""

import random

from numavia.base import regmap, via_att, via_frame
from numavia.base.via_descriptor import (
    CONTROL_OP,
    CONTROL_SEGMENT,
    CONTROL_UNDEFINED_MASK,
    STATUS_OP,
    encode_descriptor,
    status_bits,
    status_op,
)
from support.random_via import (
    COMPLETION_SETTLE,
    COUNTERS,
    DESC_AREA,
    HEADER,
    OP,
    PEER,
    PEER_VI,
    PTAG,
    REGIONS,
    SEND_SLOTS,
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
        op, STATUS_OP.SEND
    )


class DescriptorFuzz:
    """Seeded descriptors, valid and not, and what the engine's rules make of each."""

    def __init__(self, rng, memory):
        self.rng = rng
        self.expected = bytearray(memory)
        self.counts = {"posted": 0, "errors": 0, "refused": 0, "vi_errors": 0, "valid": 0, "late_frames": 0}

    def set_expected(self, addr, data):
        self.expected[addr - HOST : addr - HOST + len(data)] = data

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
            handle = rng.choice([1, 1, 3, 5])  # local access needs no RDMA right
            r = REGIONS[handle]
            length = min(length, r.length)
            return rng.randrange(r.va, r.va + r.length - length + 1), handle, length
        handle = rng.choice([1, 2, 0, 4, 7, 8, rng.randrange(1 << 32)])
        r = REGIONS.get(handle, REGIONS[1])
        va = rng.choice(
            [
                r.va + r.length - rng.randint(0, 16),
                r.va - rng.randint(1, 16),
                rng.randrange(r.va, r.va + r.length),
                rng.randrange(1 << 64),
                (1 << 64) - 8,
            ]
        )
        length = rng.choice([length, rng.randrange(1 << 32)])
        return va, handle, length

    def descriptor(self, queue):
        """``(bytes, fields)`` of a random descriptor for ``queue`` ("send" or "recv")."""
        rng = self.rng
        if queue == "send":
            op = rng.choices(
                [CONTROL_OP.SENDRECV, CONTROL_OP.RDMA_WRITE, CONTROL_OP.RDMA_READ, 3], weights=[4, 3, 3, 1]
            )[0]
        else:
            op = rng.choices(
                [CONTROL_OP.SENDRECV, CONTROL_OP.RDMA_WRITE, CONTROL_OP.RDMA_READ, 3], weights=[12, 1, 1, 1]
            )[0]
        count = rng.choice([0, 1, 1, 2, 3, 4, rng.randint(0, _SEG_LIMIT + 2)])
        bad = rng.random() < 0.25
        segments = [self.segment(valid=not bad or rng.random() < 0.5) for _ in range(count)]
        imm = rng.choice([None, rng.randrange(1 << 32)])
        data = bytearray(
            encode_descriptor(
                op if op != 3 else 0,
                segments,
                immediate=imm,
                remote_va=rng.randrange(1 << 64),
                remote_handle=rng.randrange(1 << 32),
                next_va=rng.randrange(1 << 64),
                next_handle=rng.randrange(1 << 32),
            )
        )
        ctrl = CONTROL_SEGMENT.field("CONTROL")
        control = int.from_bytes(data[ctrl.offset : ctrl.offset + 2], "little")
        control = (control & ~CONTROL_SEGMENT.field("CONTROL").bit("OP").mask) | op
        if rng.random() < 0.15:  # bits CONTROL does not define: refused, as by the host's decoder
            control |= rng.randrange(1 << 16) & CONTROL_UNDEFINED_MASK
        data[ctrl.offset : ctrl.offset + 2] = control.to_bytes(2, "little")
        if rng.random() < 0.15:
            reserved = CONTROL_SEGMENT.field("RESERVED")
            data[reserved.offset : reserved.offset + reserved.size] = rng.randbytes(reserved.size)
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
            fields["remote_va"] = int.from_bytes(data[address : address + 8], "little")
            fields["remote_handle"] = int.from_bytes(data[address + 8 : address + 12], "little")
        return bytes(data), fields

    def bad_doorbell(self):
        """A descriptor address the doorbell must refuse: misaligned, outside host memory, or in
        host memory but outside the VI's descriptor area (or its control segment straddling the end)."""
        rng = self.rng
        area_end = DESC_AREA[0] + DESC_AREA[1]
        return rng.choice(
            [
                HOST + 0x2000 + rng.randrange(1, 16),
                HOST + HOST_SIZE,
                HOST - 0x100,
                HOST + HOST_SIZE - 16,
                rng.randrange(1 << 32) | 1,
                0,
                area_end,
                area_end - 16,
                area_end + 16 * rng.randrange((HOST + HOST_SIZE - area_end) // 16),
            ]
        )


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
    peer_psn = 0  # next PSN the bench (peer) sends
    engine_psn = [0]  # next PSN the engine must send

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
        raise AssertionError(
            "descriptors never completed: "
            + ", ".join(f"{a:#x}" for a in addrs if not node.status(ctx, a)["STATUS"] & 1)
        )

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
        seen = len(wire.sent)  # acknowledgements of the old connection
        peer_psn = 0
        engine_psn[0] = 0
        fuzz.counts["vi_errors"] += 1

    for _ in range(rounds):
        queue = rng.choice(["send", "recv"])
        batch = [fuzz.descriptor(queue) for _ in range(rng.randint(1, PARAMS.queue_depth))]
        addrs = SEND_SLOTS[: len(batch)]
        if queue == "send":
            # The peer NAKs the last descriptor if it is a valid RDMA write, now and then.
            last = batch[-1][1]
            nak_last = (
                last["op"] == CONTROL_OP.RDMA_WRITE
                and last["error"] is None
                and last["total"] > 0
                and rng.random() < 0.5
            )
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
                    op = {
                        CONTROL_OP.SENDRECV: OP.SEND,
                        CONTROL_OP.RDMA_WRITE: OP.RDMA_WRITE,
                        CONTROL_OP.RDMA_READ: OP.READ_REQUEST,
                    }[f["op"]]
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
                            wire.send(
                                peer_frame(
                                    OP.READ_RESPONSE,
                                    PSN=h["PSN"],
                                    ACK_PSN=h["PSN"] + 1,
                                    MSG_LENGTH=len(data),
                                    OFFSET=offset,
                                    PAYLOAD_LENGTH=n,
                                    FLAGS=flags(offset == 0, offset + n == len(data)),
                                )
                                + data[offset : offset + n]
                            )
                            offset += n
                            if offset >= len(data):
                                break
                        progress["index"] += 1
                        continue
                    message = fuzz.gather(f["segments"])
                    n = h["PAYLOAD_LENGTH"]
                    assert raw[HEADER.size : HEADER.size + n] == message[h["OFFSET"] : h["OFFSET"] + n], (
                        f"descriptor {addr:#x}: wrong payload at offset {h['OFFSET']}"
                    )
                    final = h["OFFSET"] + n >= f["total"]
                    if final and nak_last and progress["index"] == len(work) - 1:
                        wire.send(
                            peer_frame(OP.NAK, PSN=h["PSN"], ACK_PSN=h["PSN"], NAK_CODE=via_frame.NAK.REMOTE_PROTECTION)
                        )
                    else:
                        wire.send(peer_frame(OP.ACK, ACK_PSN=h["PSN"] + 1))
                    if final:
                        progress["index"] += 1
                    else:
                        assert n == per_frame

            for addr, (data, _f) in zip(addrs, batch):
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
                want = CONTROL_SEGMENT.decode(fuzz.expected[addr - HOST : addr - HOST + CONTROL_SEGMENT.size])
                assert (st["STATUS"], st["LENGTH"]) == (want["STATUS"], want["LENGTH"]), (
                    f"send descriptor {addr:#x}: status {st['STATUS']:#x} length {st['LENGTH']}, expected "
                    f"{want['STATUS']:#x} {want['LENGTH']} ({[f for a, (_, f) in zip(addrs, batch) if a == addr]})"
                )
            if nak_last:
                assert await vi_state() == (_ERROR_STATE, status_bits(RDMA_PROTECTION_ERROR=1))
                # Work posted to a failed VI is flushed, not lost.
                data, f = fuzz.descriptor("send")
                await post("send", SEND_SLOTS[-1], data)
                await wait_all([SEND_SLOTS[-1]])
                expect(SEND_SLOTS[-1], status_bits(DONE=1, FLUSHED=1), 0)
                await recover()
        else:
            for addr, (data, _f) in zip(addrs, batch):
                await post("recv", addr, data)
                if rng.random() < 0.2:
                    await refused_doorbell("recv")
            failed = None
            for k, (addr, (_, f)) in enumerate(zip(addrs, batch)):
                fits = f.get("total", 0)
                length = rng.choice(
                    [0, rng.randint(0, min(fits, 1200)), rng.randint(0, min(fits, 1200)), rng.randint(1, 1200)]
                )
                message = bytes(rng.randrange(256) for _ in range(length))
                imm = rng.choice([None, rng.randrange(1 << 32)])
                pieces = [(o, min(per_frame, length - o)) for o in range(0, length, per_frame)] or [(0, 0)]
                for offset, n in pieces:
                    wire.send(
                        peer_frame(
                            OP.SEND,
                            PSN=peer_psn,
                            MSG_LENGTH=length,
                            OFFSET=offset,
                            PAYLOAD_LENGTH=n,
                            IMMEDIATE_DATA=imm or 0,
                            FLAGS=flags(offset == 0, offset + n == length, imm is not None),
                        )
                        + message[offset : offset + n]
                    )
                    peer_psn += 1
                await drain(ctx, wire, node)
                await wait_all([addr])
                receive = status_op(STATUS_OP.RECEIVE)
                if f["op"] != CONTROL_OP.SENDRECV:
                    error = "FORMAT_ERROR"  # not a receive (an RDMA or undefined operation)
                else:
                    error = f["error"] or ("LENGTH_ERROR" if f["total"] < length else None)
                if error:
                    expect(addr, status_bits(DONE=1, **{error: 1}) | receive, 0)
                    fuzz.counts["errors"] += 1
                    fuzz.counts["late_frames"] += len(pieces) - 1  # the first frame failed the VI
                    failed = (k, error)
                    break
                fuzz.scatter(f["segments"], message)
                imm_bits = {"IMMEDIATE": 1} if imm is not None else {}
                expect(addr, status_bits(DONE=1, **imm_bits) | receive, length, imm)
                fuzz.counts["valid"] += 1
            if failed is not None:
                k, error = failed
                rest = addrs[k + 1 :]
                await wait_all(rest)
                for addr in rest:
                    expect(addr, status_bits(DONE=1, FLUSHED=1) | status_op(STATUS_OP.RECEIVE), 0)
                for addr in addrs[: k + 1] + rest:
                    st = node.status(ctx, addr)
                    want = CONTROL_SEGMENT.decode(fuzz.expected[addr - HOST : addr - HOST + CONTROL_SEGMENT.size])
                    assert (st["STATUS"], st["LENGTH"]) == (want["STATUS"], want["LENGTH"]), (
                        f"receive descriptor {addr:#x}: status {st['STATUS']:#x}, expected {want['STATUS']:#x} "
                        f"{[f for a, (_, f) in zip(addrs, batch) if a == addr]}"
                    )
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
    assert delta["RX_NO_VI"] == fuzz.counts["late_frames"]  # frames for a VI that had failed
    assert delta["RX_DESCRIPTOR_ERROR"] + delta["TX_ERRORS"] == fuzz.counts["vi_errors"]
    for name in ("DMA_ERRORS", "TX_TIMEOUTS", "CQ_OVERFLOWS", "RX_PROTECTION", "RX_MALFORMED"):
        assert delta[name] == 0, f"{name} moved by {delta[name]}"
    return fuzz
