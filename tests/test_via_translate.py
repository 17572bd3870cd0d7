"""Address translator: the paper's Fig. 6 example, every failure reason, read-back, two ports."""

from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.base import via_att
from numavia.gateware.bfm import recv, send
from numavia.gateware.via_translate import AddressTranslator

REGIONS, PAGES = 8, 64


def l1_words(**fields):
    data = via_att.L1_ENTRY.encode(**fields)
    return [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data), 4)]


def region(start_va, length, l2_index, ptag, read=0, write=0):
    pages, first = via_att.region_pages(start_va, length)
    attrs = via_att.L1_ENTRY.encode_bits("ATTRIBUTES", VALID=1, RDMA_READ=read, RDMA_WRITE=write)
    return dict(
        START_VA=start_va,
        LENGTH=length,
        L2_INDEX=l2_index,
        PAGE_COUNT=pages,
        FIRST_PAGE_SIZE=first,
        PTAG=ptag,
        ATTRIBUTES=attrs,
    )


# The paper's example: 9 KiB at virtual 0x1C00 over physical pages 0x2C00, 0x5000, 0x8000.
PAPER = region(0x1C00, 9 * 1024, l2_index=4, ptag=7, read=1)
PAPER_PAGES = {4: 0x2C00, 5: 0x5000, 6: 0x8000}
HIGH = region(0x7F00_0000_1000, 0x3000, l2_index=10, ptag=9, write=1)  # a 64-bit address
HIGH_PAGES = {10: 0x6000_1000, 11: 0x6004_0000, 12: 0x6000_3000}


def run(requests, *, ports=1):
    dut = AddressTranslator(regions=REGIONS, pages=PAGES, ports=ports)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    answers, readback = [], {}

    async def write(ctx, addr, value):
        ctx.set(dut.write_addr, addr)
        ctx.set(dut.write_data, value)
        ctx.set(dut.write_en, 1)
        await ctx.tick()
        ctx.set(dut.write_en, 0)

    async def bench(ctx):
        base = via_att.l2_word_base(REGIONS)
        for index, pa in {**PAPER_PAGES, **HIGH_PAGES}.items():
            await write(ctx, base + index, pa)
        for handle, entry in ((2, PAPER), (5, HIGH)):
            for i, word in enumerate(l1_words(**entry)):
                await write(ctx, handle * via_att.L1_STRIDE_WORDS + i, word)
        for addr in (2 * via_att.L1_STRIDE_WORDS + 0, base + 5):
            ctx.set(dut.read_addr, addr)
            await ctx.tick()
            readback[addr] = ctx.get(dut.read_data)
        for port, request in requests:
            lookup = dut.lookups[port]
            await send(ctx, lookup.req, request)
            answer = await recv(ctx, lookup.resp)
            answers.append((answer.fail, answer.pa, answer.page_left))

    sim.add_testbench(bench)
    run_simulation(sim)
    return answers, readback


def req(handle, va, length, ptag, need=via_att.NEED_LOCAL):
    return {"handle": handle, "va": va, "length": length, "ptag": ptag, "need": need}


def test_paper_example_translates_every_page():
    answers, _ = run(
        [
            (0, req(2, 0x1C00, 1, 7)),
            (0, req(2, 0x1FFF, 1, 7)),
            (0, req(2, 0x2000, 1, 7)),
            (0, req(2, 0x2ABC, 4, 7)),
            (0, req(2, 0x3FFF, 1, 7)),
        ]
    )
    assert answers == [(0, 0x2C00, 0x400), (0, 0x2FFF, 1), (0, 0x5000, 0x1000), (0, 0x5ABC, 0x544), (0, 0x8FFF, 1)]


def test_64_bit_virtual_addresses():
    answers, _ = run([(0, req(5, 0x7F00_0000_2010, 16, 9))])
    assert answers == [(0, 0x6004_0010, 0xFF0)]


def test_each_failure_reason():
    f = via_att
    answers, _ = run(
        [
            (0, req(REGIONS, 0x1C00, 1, 7)),  # handle past the table
            (0, req(3, 0x1C00, 1, 7)),  # no region registered there
            (0, req(2, 0x1C00, 1, 8)),  # another protection tag
            (0, req(2, 0x1C00, 1, 7, need=f.NEED_RDMA_WRITE)),  # RDMA write not enabled
            (0, req(5, 0x7F00_0000_1000, 1, 9, need=f.NEED_RDMA_READ)),  # RDMA read not enabled
            (0, req(2, 0x1BFF, 1, 7)),  # before the region
            (0, req(2, 0x4000 - 4, 8, 7)),  # runs past its end
            (0, req(2, 0xFFFF_FFFF_FFFF_FFF0, 0x20, 7)),  # wraps around 2^64
        ]
    )
    assert [a[0] for a in answers] == [
        f.FAIL_HANDLE,
        f.FAIL_HANDLE,
        f.FAIL_PTAG,
        f.FAIL_RIGHTS,
        f.FAIL_RIGHTS,
        f.FAIL_RANGE,
        f.FAIL_RANGE,
        f.FAIL_RANGE,
    ]


def test_rights_granted_pass_and_range_reaches_the_end():
    f = via_att
    answers, _ = run(
        [
            (0, req(2, 0x1C00, 9 * 1024, 7, need=f.NEED_RDMA_READ)),
            (0, req(5, 0x7F00_0000_3FFF, 1, 9, need=f.NEED_RDMA_WRITE)),
        ]
    )
    assert answers == [(0, 0x2C00, 0x400), (0, 0x6000_3FFF, 1)]


def test_firmware_reads_back_words():
    _, readback = run([])
    base = via_att.l2_word_base(REGIONS)
    assert readback[2 * via_att.L1_STRIDE_WORDS] == 0x1C00
    assert readback[base + 5] == 0x5000


def test_two_ports_translate_independently():
    answers, _ = run([(1, req(2, 0x2000, 1, 7)), (0, req(5, 0x7F00_0000_1000, 1, 9))], ports=2)
    assert answers == [(0, 0x5000, 0x1000), (0, 0x6000_1000, 0x1000)]
