"""VIA engine, two of them back to back in the Amaranth simulator (no CPU): every operation end to
end with data checked byte for byte, protection, queue and loss handling, the firmware's interrupt (mailbox, management frames, completion queues). The same RTL runs in the
Verilator cluster under real firmware in tests/test_via_system.py."""

import random

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation
from support.via_pair import HOST, Node, Pair

from numavia.base import regmap, via_descriptor
from numavia.base.via_descriptor import CONTROL_OP, STATUS_OP, encode_descriptor
from numavia.gateware.bfm import wishbone_read, wishbone_release

CTRL = via_descriptor.CONTROL_SEGMENT
ST = CTRL.field("STATUS")
PTAG = 5


def status(**bits):
    return CTRL.encode_bits("STATUS", **bits)


def run(bench, **pair_kwargs):
    pair = Pair(**pair_kwargs)
    sim = Simulator(pair)
    sim.add_clock(1e-8)
    a, b = Node(pair.a, pair.ram_a, 0), Node(pair.b, pair.ram_b, 1)

    async def tb(ctx):
        await bench(ctx, a, b)

    sim.add_testbench(tb)
    run_simulation(sim)


async def setup(ctx, a, b, *, vi=1, rights=(1, 1)):
    """Both nodes: a 16 KiB region at VA 0x10_0000_0000 (handle 1) on scattered pages, VI `vi` connected."""
    for node in (a, b):
        await node.enable(ctx)
        pages = [HOST + 0x8000 + 0x40, HOST + 0x5000, HOST + 0x3000, HOST + 0x6000, HOST + 0x4000]
        await node.register(ctx, 1, 0x10_0000_0040, 0x4000, pages, PTAG, read=rights[0], write_=rights[1])
    await a.connect(ctx, vi, 1, vi, PTAG)
    await b.connect(ctx, vi, 0, vi, PTAG)


def va_to_pa(va):
    """Physical address of a VA of the region set up above."""
    pages = [HOST + 0x8000, HOST + 0x5000, HOST + 0x3000, HOST + 0x6000, HOST + 0x4000]
    page = (va >> 12) - (0x10_0000_0040 >> 12)
    return pages[page] + (va & 0xFFF)


def write_va(ctx, node, va, data):
    for i, byte in enumerate(data):
        node.load(ctx, va_to_pa(va + i), bytes([byte]))


def read_va(ctx, node, va, length):
    return b"".join(node.dump(ctx, va_to_pa(va + i), 1) for i in range(length))


VA = 0x10_0000_0040
DESC_A, DESC_B = HOST + 0x100, HOST + 0x200


def segments(va, length, parts):
    """`length` bytes at `va` split into `parts` data segments with gaps, (va, handle, len) each."""
    cuts = sorted(random.Random(length).sample(range(1, length), parts - 1)) if length >= parts > 1 else []
    bounds = [0, *cuts, length]
    return [(va + lo + 3 * i, 1, hi - lo) for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]


@pytest.mark.parametrize("size,parts", [(0, 1), (4, 1), (63, 3), (1501, 4)])
def test_send_receive(size, parts):
    payload = bytes(random.Random(size).randrange(256) for _ in range(size))

    async def bench(ctx, a, b):
        await setup(ctx, a, b)
        send_segs = segments(VA + 1, size, parts)
        recv_segs = segments(VA + 0x2001, size + 8, parts)
        pos = 0
        for va, _, n in send_segs:
            write_va(ctx, a, va, payload[pos : pos + n])
            pos += n
        await b.post(ctx, 1, "recv", DESC_B, encode_descriptor(CONTROL_OP.SENDRECV, recv_segs))
        await a.post(ctx, 1, "send", DESC_A, encode_descriptor(CONTROL_OP.SENDRECV, send_segs, immediate=0x1234))
        rst = await b.wait_done(ctx, DESC_B)
        sst = await a.wait_done(ctx, DESC_A)
        got = b"".join(read_va(ctx, b, va, n) for va, _, n in recv_segs)[:size]
        assert got == payload
        assert rst["LENGTH"] == size and rst["IMMEDIATE_DATA"] == 0x1234
        assert rst["STATUS"] == status(DONE=1, OP=STATUS_OP.RECEIVE, IMMEDIATE=1)
        assert sst["STATUS"] == status(DONE=1, OP=STATUS_OP.SEND) and sst["LENGTH"] == size

    run(bench)


@pytest.mark.parametrize("size,imm", [(1, False), (1600, True)])
def test_rdma_write(size, imm):
    payload = bytes(random.Random(size + 1).randrange(256) for _ in range(size))

    async def bench(ctx, a, b):
        await setup(ctx, a, b)
        write_va(ctx, a, VA + 5, payload)
        if imm:
            await b.post(ctx, 1, "recv", DESC_B, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 8)]))
        remote = VA + 0x1FFD  # crosses a page on the target
        await a.post(
            ctx,
            1,
            "send",
            DESC_A,
            encode_descriptor(
                CONTROL_OP.RDMA_WRITE,
                segments(VA + 5, size, 2 if size > 1 else 1),
                remote_va=remote,
                remote_handle=1,
                immediate=0xBEEF if imm else None,
            ),
        )
        sst = await a.wait_done(ctx, DESC_A)
        assert sst["STATUS"] == status(DONE=1, OP=STATUS_OP.RDMA_WRITE)
        if imm:
            rst = await b.wait_done(ctx, DESC_B)
            assert rst["STATUS"] == status(DONE=1, OP=STATUS_OP.REMOTE_RDMA_WRITE, IMMEDIATE=1)
            assert rst["IMMEDIATE_DATA"] == 0xBEEF
        segs = segments(VA + 5, size, 2 if size > 1 else 1)
        sent = b"".join(read_va(ctx, a, va, n) for va, _, n in segs)
        assert read_va(ctx, b, remote, size) == sent

    run(bench)


def test_rdma_read_of_several_frames():
    size = 3000
    payload = bytes(random.Random(7).randrange(256) for _ in range(size))

    async def bench(ctx, a, b):
        await setup(ctx, a, b)
        write_va(ctx, b, VA + 0x801, payload)
        segs = segments(VA + 2, size, 3)
        await a.post(
            ctx, 1, "send", DESC_A, encode_descriptor(CONTROL_OP.RDMA_READ, segs, remote_va=VA + 0x801, remote_handle=1)
        )
        sst = await a.wait_done(ctx, DESC_A, timeout=40000)
        assert sst["STATUS"] == status(DONE=1, OP=STATUS_OP.RDMA_READ) and sst["LENGTH"] == size
        assert b"".join(read_va(ctx, a, va, n) for va, _, n in segs) == payload

    run(bench)


def test_local_protection_error_sends_nothing():
    async def bench(ctx, a, b):
        await setup(ctx, a, b)
        await b.post(ctx, 1, "recv", DESC_B, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 64)]))
        bad = [(VA, 2, 4)]  # handle 2 is not registered
        await a.post(ctx, 1, "send", DESC_A, encode_descriptor(CONTROL_OP.SENDRECV, bad))
        sst = await a.wait_done(ctx, DESC_A)
        assert sst["STATUS"] == status(DONE=1, PROTECTION_ERROR=1)
        # The VI keeps working: the next send goes through.
        await a.post(ctx, 1, "send", DESC_A + 0x40, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 4)]))
        rst = await b.wait_done(ctx, DESC_B)
        assert rst["LENGTH"] == 4
        assert await b.vi_reg(ctx, 1, "RX_PSN") == 1

    run(bench)


def test_rdma_write_without_right_fails_the_vi_and_writes_nothing():
    async def bench(ctx, a, b):
        await setup(ctx, a, b, rights=(1, 0))
        write_va(ctx, a, VA, b"X" * 32)
        before = read_va(ctx, b, VA + 0x100, 32)
        await a.post(
            ctx,
            1,
            "send",
            DESC_A,
            encode_descriptor(CONTROL_OP.RDMA_WRITE, [(VA, 1, 32)], remote_va=VA + 0x100, remote_handle=1),
        )
        await a.post(ctx, 1, "send", DESC_A + 0x40, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 4)]))
        sst = await a.wait_done(ctx, DESC_A)
        assert sst["STATUS"] == status(DONE=1, OP=STATUS_OP.RDMA_WRITE, RDMA_PROTECTION_ERROR=1)
        flushed = await a.wait_done(ctx, DESC_A + 0x40)
        assert flushed["STATUS"] == status(DONE=1, FLUSHED=1)
        assert read_va(ctx, b, VA + 0x100, 32) == before
        assert await b.counter(ctx, "RX_PROTECTION") == 1
        state_reg, cmd = regmap.VIA.array("VI").register("STATE"), regmap.VIA.array("VI").register("CMD")
        failed = await a.vi_reg(ctx, 1, "STATE")
        assert failed & 3 == 2  # ERROR
        # The failure's bits, and only they; a RESET clears them, and a new failure after a new
        # CONNECT shows its own.
        assert state_reg.field("ERROR").extract(failed) == status(RDMA_PROTECTION_ERROR=1)
        await a.vi_reg(ctx, 1, "CMD", cmd.field("RESET").mask)
        assert await a.vi_reg(ctx, 1, "STATE") == 0  # IDLE, no error bits
        await a.vi_reg(ctx, 1, "CMD", cmd.field("CONNECT").mask)
        assert await a.vi_reg(ctx, 1, "STATE") == 1  # CONNECTED, no error bits

    run(bench)


@pytest.mark.parametrize("phase", range(2))
def test_a_failure_s_error_bits_are_read_with_its_error_state_from_the_first_cycle(phase):
    # The engine adds a failure's bits to the VI's record a cycle after the state turns ERROR
    # (from registers); the bus reads them from those registers in between. STATE read back to
    # back (one read every other cycle) from two phases reads every cycle of the change.
    async def bench(ctx, a, b):
        await setup(ctx, a, b, rights=(1, 0))
        write_va(ctx, a, VA, b"X" * 32)
        rdma_write = encode_descriptor(CONTROL_OP.RDMA_WRITE, [(VA, 1, 32)], remote_va=VA + 0x100, remote_handle=1)
        await a.post(ctx, 1, "send", DESC_A, rdma_write)
        for _ in range(phase):
            await ctx.tick()
        state_reg = regmap.VIA.array("VI").register("STATE")
        address = regmap.VIA.array("VI").offset_of(1, "STATE")
        for _ in range(5000):
            state = await wishbone_read(ctx, a.engine.regs, address, release=False)
            if state & 3 == 2:  # ERROR
                break
        else:
            pytest.fail("the VI never failed")
        await wishbone_release(ctx, a.engine.regs)
        assert state_reg.field("ERROR").extract(state) == status(RDMA_PROTECTION_ERROR=1)

    run(bench)


def test_send_with_empty_receive_queue():
    async def bench(ctx, a, b):
        await setup(ctx, a, b)
        await a.post(ctx, 1, "send", DESC_A, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 4)]))
        sst = await a.wait_done(ctx, DESC_A)
        assert sst["STATUS"] == status(DONE=1, OP=STATUS_OP.SEND, REMOTE_DESCRIPTOR_ERROR=1)
        assert await b.counter(ctx, "RX_RQ_EMPTY") == 1

    run(bench)


def test_lost_data_and_ack_frames_are_recovered_exactly_once():
    size = 5000  # 4 frames at MTU 1500
    payload = bytes(random.Random(3).randrange(256) for _ in range(size))

    async def bench(ctx, a, b):
        await setup(ctx, a, b)
        write_va(ctx, a, VA, payload)
        await b.post(ctx, 1, "recv", DESC_B, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 0x2000, 1, size)]))
        await b.post(ctx, 1, "recv", DESC_B + 0x40, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 0x3800, 1, 16)]))
        await a.post(ctx, 1, "send", DESC_A, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, size)]))
        await a.post(ctx, 1, "send", DESC_A + 0x40, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 8, 1, 16)]))
        await b.wait_done(ctx, DESC_B, timeout=60000)
        second = await b.wait_done(ctx, DESC_B + 0x40, timeout=60000)
        await a.wait_done(ctx, DESC_A + 0x40, timeout=60000)
        assert read_va(ctx, b, VA + 0x2000, size) == payload
        assert second["LENGTH"] == 16 and read_va(ctx, b, VA + 0x3800, 16) == payload[8:24]
        assert await b.vi_reg(ctx, 1, "RX_PSN") == 5  # 4 + 1 frames, each taken once
        assert await b.counter(ctx, "RX_OUT_OF_ORDER") >= 1
        assert await a.counter(ctx, "TX_NAK_SEQUENCE") + await a.counter(ctx, "TX_TIMEOUTS") >= 1

    # a->b: the second data frame is lost; b->a: the first acknowledgement is lost.
    run(bench, drop_ab=(1,), drop_ba=(0,))


def test_interrupt_for_mailbox_commands_and_management_frames():
    irq_bits = {name: regmap.VIA.register("IRQ_PENDING").field(name).mask for name in ("MBOX", "MGMT_RX")}
    both = irq_bits["MBOX"] | irq_bits["MGMT_RX"]

    async def bench(ctx, a, b):
        await a.enable(ctx)
        await b.enable(ctx)
        irq = b.engine.irq
        # A mailbox command is an event, held until acknowledged, raising the line only if enabled.
        await b.reg(ctx, "MBOX_CMD", 1 << 16 | 0x01)
        assert await b.reg(ctx, "IRQ_PENDING") == irq_bits["MBOX"] and not ctx.get(irq)
        await b.reg(ctx, "IRQ_ENABLE", both)
        assert ctx.get(irq)
        await b.reg(ctx, "MBOX_STATUS", 1 << 16)  # answering does not clear it ...
        assert await b.reg(ctx, "IRQ_PENDING") == irq_bits["MBOX"]
        await b.reg(ctx, "IRQ_ACK", irq_bits["MGMT_RX"])  # ... nor acknowledging the other bit
        assert ctx.get(irq)
        await b.reg(ctx, "IRQ_ACK", irq_bits["MBOX"])
        assert await b.reg(ctx, "IRQ_PENDING") == 0 and not ctx.get(irq)
        # A management frame is a level: pending until popped.
        ctrl = regmap.VIA.register("MGMT_TX_CTRL")
        await a.mgmt_word(ctx, 0, 0x1234_5678)
        await a.reg(ctx, "MGMT_TX_CTRL", 1 << ctrl.field("DST_NODE").lsb | 4 << ctrl.field("LENGTH").lsb)
        for _ in range(3000):
            if ctx.get(irq):
                break
            await ctx.tick()
        assert ctx.get(irq) and await b.reg(ctx, "IRQ_PENDING") == irq_bits["MGMT_RX"]
        await b.reg(ctx, "IRQ_ACK", both)  # acknowledging does not drop a frame
        assert ctx.get(irq)
        await b.reg(ctx, "IRQ_ENABLE", irq_bits["MBOX"])
        assert not ctx.get(irq)
        await b.reg(ctx, "MGMT_RX_POP", 1)
        assert await b.reg(ctx, "IRQ_PENDING") == 0

    run(bench)


def test_an_armed_completion_queue_interrupts_when_a_receive_completes():
    irq_cq = regmap.VIA.register("IRQ_PENDING").field("CQ").mask
    cq_ctrl = regmap.VIA.array("CQ").register("CTRL")
    arm, ack = cq_ctrl.field("ARM").mask, cq_ctrl.field("ACK").mask
    armed = regmap.VIA.array("CQ").register("STATUS").field("ARMED").mask
    bind = regmap.VIA.array("VI").register("CQ_BIND")
    ring = HOST + 0x700

    async def bench(ctx, a, b):
        await setup(ctx, a, b)
        irq = b.engine.irq
        await b.cq_reg(ctx, 1, "BASE", ring)
        await b.cq_reg(ctx, 1, "SIZE", 4)
        await b.vi_reg(ctx, 1, "CQ_BIND", 1 << bind.field("RECV_CQ").lsb | bind.field("RECV_EN").mask)
        await b.reg(ctx, "IRQ_ENABLE", irq_cq)
        await b.cq_reg(ctx, 1, "CTRL", arm)
        assert await b.cq_reg(ctx, 1, "STATUS") == armed and not ctx.get(irq)
        await b.post(ctx, 1, "recv", DESC_B, encode_descriptor(CONTROL_OP.SENDRECV, [(VA + 0x100, 1, 8)]))
        await a.post(ctx, 1, "send", DESC_A, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 8)]))
        for _ in range(3000):
            if ctx.get(irq):
                break
            await ctx.tick()
        # The line rose for the entry, with the queue's bit, and the queue is disarmed.
        assert ctx.get(irq) and await b.cq_reg(ctx, 1, "TAIL") == 1
        assert b.status(ctx, DESC_B)["STATUS"] & 1
        assert await b.reg(ctx, "IRQ_PENDING") == irq_cq and await b.reg(ctx, "CQ_NOTIFIED") == 0b10
        assert await b.cq_reg(ctx, 1, "STATUS") == 0
        await b.cq_reg(ctx, 1, "CTRL", ack)
        assert not ctx.get(irq) and await b.reg(ctx, "CQ_NOTIFIED") == 0
        # Armed again with the entry not consumed: at once. Consumed: not until the next one.
        await b.cq_reg(ctx, 1, "CTRL", arm)
        await ctx.tick()
        assert ctx.get(irq)
        await b.cq_reg(ctx, 1, "CTRL", ack)
        await b.cq_reg(ctx, 1, "HEAD", 1)
        await b.cq_reg(ctx, 1, "CTRL", arm)
        await ctx.tick().repeat(20)
        assert not ctx.get(irq) and await b.cq_reg(ctx, 1, "STATUS") == armed

    run(bench)


@pytest.mark.parametrize("imm", [False, True])
def test_latency_stamps_follow_the_steps_of_one_rdma_write(imm):
    """The stamps of the sender's doorbell and first data word, the receiver's last data word,
    written payload and (with immediate data) receive completion come in that order; the
    receiver's acknowledgements (not data) and the sender's own completion stamp nothing."""

    async def bench(ctx, a, b):
        await setup(ctx, a, b)
        write_va(ctx, a, VA, b"\x11\x22\x33\x44")
        if imm:
            await b.post(ctx, 1, "recv", DESC_B, encode_descriptor(CONTROL_OP.SENDRECV, [(VA, 1, 8)]))
        desc = encode_descriptor(
            CONTROL_OP.RDMA_WRITE, [(VA, 1, 4)], remote_va=VA + 0x100, remote_handle=1, immediate=7 if imm else None
        )
        await a.post(ctx, 1, "send", DESC_A, desc)
        await a.wait_done(ctx, DESC_A)
        sa = {name: await a.reg(ctx, name) for name, _ in regmap.VIA_STAMPS}
        sb = {name: await b.reg(ctx, name) for name, _ in regmap.VIA_STAMPS}
        assert 0 < sa["STAMP_SQ_DOORBELL"] < sa["STAMP_TX_DATA"] < sb["STAMP_RX_DATA"] < sb["STAMP_RX_WRITTEN"]
        if imm:
            assert sb["STAMP_RX_COMPLETION"] > sb["STAMP_RX_WRITTEN"]
        else:
            assert sb["STAMP_RX_COMPLETION"] == 0
        assert sb["STAMP_TX_DATA"] == sb["STAMP_SQ_DOORBELL"] == 0
        assert sa["STAMP_RX_DATA"] == sa["STAMP_RX_WRITTEN"] == sa["STAMP_RX_COMPLETION"] == 0
        assert read_va(ctx, b, VA + 0x100, 4) == b"\x11\x22\x33\x44"

    run(bench)
