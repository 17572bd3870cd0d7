"""Address translator: the paper's Fig. 6 example, every failure reason, the range at 2^32 and 2^64, two ports."""

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


def run(requests, *, ports=1, regions=None):
    """Answers to ``requests`` (``(port, request)``) after writing ``regions`` (``{handle: (entry,
    {level-2 index: physical address})}``, the paper's and the 64-bit region by default)."""
    regions = regions or {2: (PAPER, PAPER_PAGES), 5: (HIGH, HIGH_PAGES)}
    dut = AddressTranslator(regions=REGIONS, pages=PAGES, ports=ports)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    answers = []

    async def write(ctx, addr, value):
        ctx.set(dut.write_addr, addr)
        ctx.set(dut.write_data, value)
        ctx.set(dut.write_en, 1)
        await ctx.tick()
        ctx.set(dut.write_en, 0)

    async def bench(ctx):
        base = via_att.l2_word_base(REGIONS)
        for handle, (entry, pages) in regions.items():
            for index, pa in pages.items():
                await write(ctx, base + index, pa)
            for i, word in enumerate(l1_words(**entry)):
                await write(ctx, handle * via_att.L1_STRIDE_WORDS + i, word)
        for port, request in requests:
            lookup = dut.lookups[port]
            await send(ctx, lookup.req, request)
            answer = await recv(ctx, lookup.resp)
            answers.append((answer.fail, answer.pa, answer.page_left))

    sim.add_testbench(bench)
    run_simulation(sim)
    return answers


def req(handle, va, length, ptag, need=via_att.NEED_LOCAL):
    return {"handle": handle, "va": va, "length": length, "ptag": ptag, "need": need}


def test_paper_example_translates_every_page():
    answers = run(
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
    answers = run([(0, req(5, 0x7F00_0000_2010, 16, 9))])
    assert answers == [(0, 0x6004_0010, 0xFF0)]


def test_each_failure_reason():
    f = via_att
    answers = run(
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
    answers = run(
        [
            (0, req(2, 0x1C00, 9 * 1024, 7, need=f.NEED_RDMA_READ)),
            (0, req(5, 0x7F00_0000_3FFF, 1, 9, need=f.NEED_RDMA_WRITE)),
        ]
    )
    assert answers == [(0, 0x2C00, 0x400), (0, 0x6000_3FFF, 1)]


def test_two_ports_translate_independently():
    answers = run([(1, req(2, 0x2000, 1, 7)), (0, req(5, 0x7F00_0000_1000, 1, 9))], ports=2)
    assert answers == [(0, 0x5000, 0x1000), (0, 0x6000_1000, 0x1000)]


def test_range_and_page_agree_with_the_reference_model_around_2_32_boundaries():
    """The range is checked as an offset into the region (32 bits wide, as LENGTH is): requests
    2^32 bytes off, a region whose pages cross a 2^32 boundary of the address space, and one that
    runs past 2^64 (whose offsets wrap to small numbers below it) answer as ``via_att.translate``."""
    crossing = 0x3_FFFF_FE00  # the last 512 bytes below 2^34, then three pages above
    wrapping = (1 << 64) - 0x1000
    regions = {
        1: (region(crossing, 0x2400, l2_index=30, ptag=3), {30: 0x4_0E00, 31: 0x9000, 32: 0x7000, 33: 0xC000}),
        2: (region(wrapping, 0x2000, l2_index=40, ptag=3), {40: 0xA000, 41: 0xB000}),
    }
    offsets = [0, 0x1FF, 0x200, 0x1234, 0x23FC, 0x23FD, -1, -(1 << 32), 1 << 32, (1 << 32) + 0x200, 1 << 33]
    requests = [(1, crossing + offset, 4) for offset in offsets] + [(1, crossing + 0x2400, 0), (1, (1 << 64) - 4, 4)]
    requests += [(2, 0x10, 4), (2, 0, 0), (2, wrapping + 0x800, 4), (2, (1 << 64) - 4, 8)]
    answers = run([(0, req(h, va, length, 3)) for h, va, length in requests], regions=regions)
    expected = []
    for handle, va, length in requests:
        entry, pages = regions[handle]
        l1 = {name: entry[name] for name in ("START_VA", "LENGTH", "L2_INDEX")}
        if (pa := via_att.translate(l1, pages, va, length)) is None:
            expected.append(via_att.FAIL_RANGE)
        else:
            expected.append((via_att.FAIL_NONE, pa, via_att.PAGE_SIZE - (va & via_att.PAGE_MASK)))
    assert [a if a[0] == via_att.FAIL_NONE else a[0] for a in answers] == expected
    assert expected.count(via_att.FAIL_RANGE) == 9


def test_a_page_past_the_entry_s_page_count_fails():
    """A level-1 entry whose page count is short of its length (the firmware's to keep right):
    its last page is refused, not read past the region's level-2 entries."""
    short = dict(PAPER, PAGE_COUNT=2)
    answers = run([(0, req(2, 0x2ABC, 4, 7)), (0, req(2, 0x3000, 4, 7))], regions={2: (short, PAPER_PAGES)})
    assert answers[0] == (via_att.FAIL_NONE, 0x5ABC, 0x544)
    assert answers[1][0] == via_att.FAIL_PAGE
