"""Completer: host reads and writes to BAR0 (registers) and BAR2 (shared window) of every size and
alignment, completions split at the max payload size on RCB boundaries, UR answers, refused
accesses poisoned, back-pressure on both sides of the link."""

import random

import pytest
from cocotbext.pcie.core.tlp import CplStatus, Tlp, TlpType
from support.pcie_helpers import BAR0, BAR2, SHARED_BYTES, completion_payload, harness, run

from numavia.pcie_model import HOST_ID, memory_read, memory_write


def test_bar2_reads_and_writes_of_every_size_and_alignment():
    h = harness(seed=3)
    pattern = bytes((i * 37 + 11) & 0xFF for i in range(SHARED_BYTES))
    h.shared[:] = pattern
    expected = bytearray(pattern)
    rng = random.Random(7)

    async def body(ctx, h):
        tag = 0
        for offset in range(8):
            for length in (1, 2, 3, 4, 5, 7, 8, 9, 13, 64, 65, 130):
                addr = 0x400 + 0x200 * tag % 0x8000 + offset
                tag = (tag + 1) % 32
                got = completion_payload(await h.request(ctx, memory_read(BAR2 + addr, length, tag=tag)))
                assert got == bytes(expected[addr : addr + length]), (offset, length)
                new = bytes(rng.randrange(256) for _ in range(length))
                h.send(memory_write(BAR2 + addr, new))
                expected[addr : addr + length] = new
                # A read behind the write (same source, same order) returns the new bytes.
                got = completion_payload(await h.request(ctx, memory_read(BAR2 + addr, length, tag=tag)))
                assert got == new, (offset, length)
        assert h.shared == expected

    run(h, body)


def test_bar0_register_accesses_reach_the_register_bus_with_byte_enables():
    h = harness(registers={0: 0x0000_0000, 1: 0x1111_1111, 2: 0x2222_2222, 3: 0x3333_3333})

    async def body(ctx, h):
        h.send(memory_write(BAR0 + 5, b"\xab\xcd"))  # bytes 1, 2 of register 1
        await h.wait(ctx, lambda: h.register_writes, what="register write")
        assert h.register_writes == [(1, 0x00CD_AB00, 0b0110)]
        assert h.registers[1] == 0x11CD_AB11
        got = completion_payload(await h.request(ctx, memory_read(BAR0 + 4, 12, tag=3)))
        assert got == (0x11CD_AB11).to_bytes(4, "little") + (0x2222_2222).to_bytes(4, "little") + (
            0x3333_3333
        ).to_bytes(4, "little")
        got = completion_payload(await h.request(ctx, memory_read(BAR0 + 9, 1, tag=4)))
        assert got == b"\x22"

    run(h, body)


@pytest.mark.parametrize("mps_code", [0, 1])
def test_read_completions_split_at_the_max_payload_on_aligned_boundaries(mps_code):
    h = harness()
    h.shared[:] = bytes(i & 0xFF for i in range(SHARED_BYTES))
    mps = 128 << mps_code

    async def body(ctx, h):
        for addr, length in ((0x1000, 1024), (0x1044, 700), (0x10FC, 8), (0x2003, 4093)):
            completions = await h.request(ctx, memory_read(BAR2 + addr, length, tag=5))
            assert completion_payload(completions) == bytes(h.shared[addr : addr + length])
            remaining = length
            for i, c in enumerate(completions):
                assert c.fmt_type == TlpType.CPL_DATA and c.status == CplStatus.SC
                assert c.length * 4 <= mps
                assert c.byte_count == remaining
                first_byte = addr + length - remaining
                assert c.lower_address == first_byte & 0x7F
                if i:  # every completion but the first starts on an RCB (64-byte) boundary
                    assert first_byte % 64 == 0
                remaining -= c.length * 4 - (first_byte & 3)
            assert remaining <= 0 and len(completions) >= length // mps

    run(h, body, mps_code=mps_code)


def unsupported(fmt_type, addr=0, tag=0, data=None):
    t = Tlp()
    t.fmt_type = fmt_type
    t.requester_id, t.tag = HOST_ID, tag
    if data is None:
        t.set_addr_be(addr, 4)
    else:
        t.set_addr_be_data(addr, data)
    return t


def test_unsupported_requests_are_answered_ur_and_posted_ones_dropped():
    h = harness()

    async def body(ctx, h):
        cases = [
            unsupported(TlpType.IO_READ, 0x100, tag=1),
            unsupported(TlpType.IO_WRITE, 0x100, tag=2, data=b"\1\2\3\4"),
            unsupported(TlpType.MEM_READ_LOCKED, BAR2, tag=3),
            memory_read(0xD000_0000, 4, tag=4),  # outside both BARs
            memory_read(0x1_E000_0000, 4, tag=5),  # above 4 GiB: no 64-bit BARs
        ]
        for t in cases:
            (cpl,) = await h.request(ctx, t)
            assert cpl.fmt_type == TlpType.CPL and cpl.status == CplStatus.UR and cpl.tag == t.tag
        before = bytes(h.shared)
        h.send(memory_write(0xD000_0000, b"\xff" * 8))  # posted, outside: dropped silently
        (cpl,) = await h.request(ctx, memory_read(BAR2, 4, tag=6))  # and the card still answers
        assert cpl.status == CplStatus.SC
        assert bytes(h.shared) == before and not h.register_writes
        assert not [t for _, t in h.from_card if t.fmt_type == TlpType.CPL and t.tag == 0]

    run(h, body)


def test_memory_space_disabled_answers_ur():
    h = harness()

    async def body(ctx, h):
        from numavia.pcie_model import config_write

        await h.request(ctx, config_write(0x04, 0x0004, tag=1))  # bus master only
        (cpl,) = await h.request(ctx, memory_read(BAR2, 4, tag=2))
        assert cpl.status == CplStatus.UR

    run(h, body)


def test_a_refused_shared_access_comes_back_poisoned():
    h = harness(params=None)
    h.shared = bytearray(SHARED_BYTES // 2)  # the upper half of BAR2 is refused by the model

    async def body(ctx, h):
        (cpl,) = await h.request(ctx, memory_read(BAR2 + SHARED_BYTES - 64, 16, tag=7))
        assert cpl.ep and cpl.status == CplStatus.SC
        (cpl,) = await h.request(ctx, memory_read(BAR2 + 64, 16, tag=8))
        assert not cpl.ep

    run(h, body)


def test_back_pressure_on_both_sides_loses_nothing():
    h = harness(seed=11, tx_ready=0.3, rx_valid=0.4)
    h.shared[:] = bytes((i * 13) & 0xFF for i in range(SHARED_BYTES))

    async def body(ctx, h):
        for tag, (addr, length) in enumerate([(0x100, 300), (0x2002, 77), (0x3000, 1024)]):
            got = completion_payload(await h.request(ctx, memory_read(BAR2 + addr, length, tag=tag)))
            assert got == bytes(h.shared[addr : addr + length])
        payload = bytes(range(256)) * 2
        h.send(memory_write(BAR2 + 0x5001, payload))
        await h.wait(ctx, lambda: bytes(h.shared[0x5001:0x5201]) == payload, what="write landed")

    run(h, body)
