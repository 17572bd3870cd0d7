"""DMA requester: reads split at the max read request size with at most ``outstanding`` in flight,
completions reassembled whatever their order and split, completion timeout, writes split at the
max payload size with the right byte enables, nothing crossing a 4 KiB page."""

import random

from cocotbext.pcie.core.tlp import TlpType
from support.pcie_helpers import SHARED_BYTES, harness, run

from numavia.gateware.bfm import recv, send
from numavia.gateware.pcie.config import EndpointParams

HOST = 0x1_2340_0000  # above 4 GiB: 4DW requests


def fill(h, base, nbytes, seed=5):
    rng = random.Random(seed)
    for a in range(base, base + nbytes):
        h.host_memory[a] = rng.randrange(256)


def words_at(h, addr, dwords):
    return [
        int.from_bytes(bytes(h.host_memory[a + k] for k in range(4)), "little")
        for a in range(addr, addr + 4 * dwords, 4)
    ]


def reads_sent(h):
    return [t for _, t in h.from_card if t.fmt_type in (TlpType.MEM_READ, TlpType.MEM_READ_64)]


def test_reads_split_at_max_read_request_and_reassembled_out_of_order():
    h = harness(order="reverse", completion_bytes=64, completion_delay=30)
    fill(h, HOST, 8192)

    async def body(ctx, h):
        for addr, dwords in ((HOST, 1), (HOST + 0x7C, 3), (HOST + 0x100, 700), (HOST + 0xFF0, 1024)):
            words, _ = await h.dma_read(ctx, addr, dwords)
            assert [w for w, _ in words] == words_at(h, addr, dwords), (hex(addr), dwords)
            assert not any(e for _, e in words)
        for t in reads_sent(h):
            assert t.length * 4 <= 256  # MRRS programmed 256 (code 1) < our 512
            start = t.address
            assert start // 256 == (start + 4 * t.length - 1) // 256  # aligned pieces
            assert start // 4096 == (start + 4 * t.length - 1) // 4096
            assert t.first_be == 0xF and t.last_be == (0 if t.length == 1 else 0xF)

    run(h, body, mrrs_code=1)


def test_outstanding_reads_never_exceed_the_tag_limit_and_tags_are_unique_in_flight():
    params = EndpointParams(bar2_bytes=SHARED_BYTES, dma_outstanding=4, completion_timeout_cycles=5000)
    h = harness(params=params, completion_delay=200, order="reverse")
    fill(h, HOST, 16384)

    async def body(ctx, h):
        words, _ = await h.dma_read(ctx, HOST, 1024)
        assert [w for w, _ in words] == words_at(h, HOST, 1024)

    run(h, body, mrrs_code=0)
    assert h.peak_pending_reads == 4  # the harness also checks tags are unique in flight
    assert len(reads_sent(h)) == 4096 // 128


def test_a_lost_completion_times_out_as_error_beats_and_later_reads_still_work():
    h = harness(drop_tags={1}, completion_delay=10)
    fill(h, HOST, 4096)

    async def body(ctx, h):
        words, _ = await h.dma_read(ctx, HOST, 4)  # tag 0
        assert [w for w, _ in words] == words_at(h, HOST, 4)
        words, cycles = await h.dma_read(ctx, HOST + 64, 8)  # tag 1: never answered
        assert [e for _, e in words] == [1] * 8 and all(w == 0 for w, _ in words)
        assert cycles >= 2000
        words, _ = await h.dma_read(ctx, HOST + 128, 8)  # tag 2
        assert [w for w, _ in words] == words_at(h, HOST + 128, 8) and not any(e for _, e in words)

    run(h, body)


def test_a_late_completion_for_a_timed_out_tag_is_dropped():
    h = harness(completion_delay=10)
    fill(h, HOST, 4096)

    def read_request(tag):
        (t,) = [t for _, t in h.from_card if t.tag == tag and t.fmt_type == TlpType.MEM_READ_64]
        return t

    async def body(ctx, h):
        h.drop_tags = {0}
        words, _ = await h.dma_read(ctx, HOST, 2)  # tag 0, slot 0: times out
        assert all(e for _, e in words)
        h.drop_tags = set()
        for i in range(1, 8):  # tags 1..7, slots 1..7
            await h.dma_read(ctx, HOST + 0x100 * i, 2)
        h.drop_tags = {8}  # tag 8 reuses slot 0
        await send(ctx, h.dut.dma.read_cmd, {"addr": HOST + 0x800, "dwords": 2})
        await h.wait(ctx, lambda: any(t.tag == 8 for _, t in h.from_card), what="read tag 8")
        # The timed-out read's answer arrives now, while slot 0 waits for tag 8 ...
        for cpl in h._completions_for(read_request(0)):
            cpl.data = bytearray(b"\xee" * len(cpl.data))
            h.send(cpl)
        for cpl in h._completions_for(read_request(8)):
            h.send(cpl, delay=50)
        # ... and must not be taken for tag 8's data.
        words = [(await recv(ctx, h.dut.dma.read_data)).data for _ in range(2)]
        assert words == words_at(h, HOST + 0x800, 2)

    run(h, body)


def test_writes_split_at_max_payload_with_first_and_last_byte_enables():
    h = harness(tx_ready=0.5, seed=9)

    async def body(ctx, h):
        cases = [
            (HOST + 0x10, 1, 0b0110, 0),
            (HOST + 0x40, 2, 0b1100, 0b0011),
            (HOST + 0xF80, 100, 0b1110, 0b0111),
            (0x8000_0000 - 0x40, 40, 0xF, 0xF),
        ]
        for n, (addr, dwords, first_be, last_be) in enumerate(cases):
            words = [(0x01010101 * (n + 1) + i) & 0xFFFF_FFFF for i in range(dwords)]
            await h.dma_write(ctx, addr, words, first_be, last_be)
            expected = {}
            for i, w in enumerate(words):
                be = first_be if i == 0 else (last_be if i == dwords - 1 else 0xF)
                if dwords == 1:
                    be = first_be
                for b in range(4):
                    if be >> b & 1:
                        expected[addr + 4 * i + b] = w >> (8 * b) & 0xFF
            await h.wait(ctx, lambda: all(h.host_memory.get(a) == v for a, v in expected.items()), what=f"write {n}")
            untouched = [a for a in range(addr, addr + 4 * dwords) if a not in expected]
            assert not [a for a in untouched if a in h.host_memory]
        writes = [
            t
            for _, t in h.from_card
            if t.fmt_type in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64) and t.address != h.msi_address
        ]
        for t in writes:
            assert t.length * 4 <= 128  # MPS programmed 128 (code 0)
            assert t.address // 128 == (t.address + 4 * t.length - 1) // 128
            assert (t.fmt_type == TlpType.MEM_WRITE_64) == (t.address >> 32 != 0)
        assert len(writes) == 1 + 1 + 4 + 2

    run(h, body, mps_code=0)


def test_no_requests_without_bus_mastering():
    h = harness()
    fill(h, HOST, 64)

    async def body(ctx, h):
        from numavia.pcie_model import config_write

        await h.request(ctx, config_write(0x04, 0x0002, tag=9))  # memory space only
        await send(ctx, h.dut.dma.read_cmd, {"addr": HOST, "dwords": 4})
        for _ in range(200):
            await ctx.tick()
        assert not reads_sent(h)
        await h.request(ctx, config_write(0x04, 0x0006, tag=10))
        await h.wait(ctx, lambda: reads_sent(h), what="read after enabling bus mastering")

    run(h, body)
