"""The endpoint against cocotbext-pcie's root complex: enumeration, BAR accesses of every size and
alignment through the host's address space, the shared window, DMA reads and writes of host
memory, MSI, unsupported requests, a completion timeout and back-pressure.

Two halves in one file: ``test_endpoint_against_root_complex`` (pytest) converts ``PcieTestTop``
(tests/support/pcie_top.py) to Verilog, cached under build/ by its sources, and runs this same module
under Icarus with cocotb's runner; the ``@cocotb.test`` coroutines below are what runs there.
The shim, :class:`TlpStreamDevice`, is a cocotbext-pcie ``Device`` whose TLPs go to and come
from the DUT's TLP streams instead of Python functions: the DUT answers its own config space.
"""

import os
import random
import re
import sys
from pathlib import Path

import amaranth

from numavia.base import buildcache
from numavia.gateware.pcie.config import EndpointParams

TESTS = Path(__file__).parent
TOP = "numavia_pcie_top"
PARAMS = EndpointParams(bar0_bytes=4096, bar2_bytes=1 << 16, dma_outstanding=8, completion_timeout_cycles=3000)
CLOCK_NS = 8


def top_verilog():
    from amaranth.back import verilog
    from support.pcie_top import PcieTestTop

    key = buildcache.digest(
        buildcache.source_files(TESTS.parent / "gateware") + [TESTS / "support" / "pcie_top.py", Path(__file__)],
        params={"params": PARAMS.as_dict(), "amaranth": amaranth.__version__},
    )

    def produce(folder):
        text = verilog.convert(PcieTestTop(PARAMS), name=TOP, emit_src=False)
        (folder / f"{TOP}.v").write_text(comb_blocks_for_icarus(text))

    return buildcache.cached("pcie-top", key, produce) / f"{TOP}.v"


def comb_blocks_for_icarus(text):
    """Make every ``always @*`` block of Yosys's Verilog run once at the start under Icarus 11.

    An ``always @*`` block runs only when one of its inputs changes. Yosys writes blocks that
    never see a change under Icarus: constant assignments to part of a register, and blocks whose
    inputs rest at their initial value (Icarus initialises declarations before any process
    waits, so the initialisation is no event). They would drive X for ever. Every block here
    also reads a register of its module that changes once, a nanosecond in. (``always_comb``
    would say the same, but Icarus 11 makes it sensitive to whole vectors, which is very slow.)
    """
    kick = "icarus_kick"
    text, modules = re.subn(r"(\bmodule [^;]*;)", rf"\1\n  reg {kick} = 0;\n  initial #1 {kick} = 1;", text)
    text = text.replace("always @* begin", f"always @* begin\n    if ({kick}) begin end")
    text = re.sub(r"always @\*\n(\s+)([^\n]*;)\n", rf"always @* begin\n\1if ({kick}) begin end\n\1\2\n  end\n", text)
    assert modules and "always @*\n" not in text, "unexpected Verilog from Yosys: has the back-end changed?"
    return text


def test_endpoint_against_root_complex():
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    source = top_verilog()
    build_dir = source.parent / "icarus"
    runner = get_runner("icarus")
    runner.build(sources=[source], hdl_toplevel=TOP, build_dir=build_dir, timescale=("1ns", "1ps"))
    results = runner.test(
        test_module=Path(__file__).stem,
        hdl_toplevel=TOP,
        build_dir=build_dir,
        test_dir=TESTS,
        results_xml=str(build_dir / "results.xml"),
        extra_env={"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    tests, failed = get_results(results)
    assert tests >= 6 and failed == 0, f"{failed} of {tests} cocotb tests failed (see {results})"


# --- what runs inside the simulator ---------------------------------------------------------------

import cocotb
from cocotb.clock import Clock
from cocotb.queue import Queue
from cocotb.triggers import RisingEdge
from cocotbext.pcie.core import Device, RootComplex
from cocotbext.pcie.core.tlp import TlpType
from cocotbext.pcie.core.utils import PcieId

from numavia.gateware.pcie import requester
from numavia.gateware.pcie import tlp as tlp_layouts
from numavia.pcie_model import beat_dwords, dwords_to_beats, dwords_to_tlp, tlp_to_dwords

LANES = PARAMS.data_width // 32
STREAM = tlp_layouts.TlpStreamSignature(PARAMS.data_width).members["payload"].shape


def pack(layout, **fields):
    return sum(value << layout[name].offset for name, value in fields.items())


def field(layout, value, name):
    f = layout[name]
    return (value >> f.offset) & ((1 << f.width) - 1)


class TlpStreamDevice(Device):
    """The DUT as a PCIe device: downstream TLPs are driven onto ``phy_rx``, TLPs on ``phy_tx``
    are sent upstream. ``rx_gaps``/``tx_stalls``: probability of an idle cycle on either side."""

    def __init__(self, dut, rng, rx_gaps=0.0, tx_stalls=0.0):
        super().__init__()
        self.dut, self.rng = dut, rng
        self.rx_gaps, self.tx_stalls = rx_gaps, tx_stalls
        self.to_dut = Queue()
        self.from_dut = Queue()
        cocotb.start_soon(self._drive())
        cocotb.start_soon(self._monitor())
        cocotb.start_soon(self._forward())

    async def upstream_recv(self, tlp):
        assert tlp.check()
        if tlp.fmt_type in (TlpType.CFG_READ_0, TlpType.CFG_WRITE_0):
            self.bus_num = tlp.completer_id.bus
        await self.to_dut.put(tlp)

    async def _drive(self):
        rx = self.dut
        rx.phy_rx__valid.value = 0
        while True:
            tlp = await self.to_dut.get()
            for data, keep, last in dwords_to_beats(tlp_to_dwords(tlp), LANES):
                while self.rng.random() < self.rx_gaps:
                    await RisingEdge(rx.clk)
                rx.phy_rx__payload.value = pack(STREAM, data=data, keep=keep, last=int(last))
                rx.phy_rx__valid.value = 1
                while True:
                    await RisingEdge(rx.clk)
                    if rx.phy_rx__ready.value:
                        break
                rx.phy_rx__valid.value = 0
            tlp.release_fc()

    async def _monitor(self):
        dut = self.dut
        dwords = []
        while True:
            ready = int(self.rng.random() >= self.tx_stalls)
            dut.phy_tx__ready.value = ready
            await RisingEdge(dut.clk)
            if ready and dut.phy_tx__valid.value:
                value = int(dut.phy_tx__payload.value)
                dwords += beat_dwords(field(STREAM, value, "data"), field(STREAM, value, "keep"), LANES)
                if field(STREAM, value, "last"):
                    await self.from_dut.put(dwords_to_tlp(dwords))
                    dwords = []

    async def _forward(self):
        while True:
            await self.upstream_send(await self.from_dut.get())


class Bench:
    """Reset, a root complex with host memory, the DUT behind it, enumerated and enabled."""

    async def start(self, dut, *, rx_gaps=0.0, tx_stalls=0.0, mps=1, split_on_all_rcb=False):
        self.dut = dut
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
        for name in (
            "dma__read_cmd__valid",
            "dma__write_cmd__valid",
            "dma__write_data__valid",
            "dma__read_data__ready",
            "msi_event",
        ):
            getattr(dut, name).value = 0
        dut.rst.value = 1
        for _ in range(4):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        self.rc = RootComplex()
        self.rc.max_payload_size = mps
        self.rc.split_on_all_rcb = split_on_all_rcb
        self.device = TlpStreamDevice(dut, random.Random(1), rx_gaps, tx_stalls)
        self.rc.make_port().connect(self.device)
        self.memory = self.rc.mem_pool.alloc_region(1 << 20)
        self.memory_base = self.memory.get_absolute_address(0)
        await self.rc.enumerate()
        self.function = self.rc.find_device(PcieId(1, 0, 0))
        await self.function.enable_device()
        await self.function.set_master()
        await self.function.alloc_irq_vectors(1, 1)
        self.bar0 = self.function.bar_window[0]
        self.bar2 = self.function.bar_window[2]
        return self

    def cycles(self):
        return cocotb.utils.get_sim_time("ns") // CLOCK_NS

    async def send(self, stream, layout, **fields):
        valid, payload, ready = (getattr(self.dut, f"{stream}__{s}") for s in ("valid", "payload", "ready"))
        payload.value = pack(layout, **fields)
        valid.value = 1
        while True:
            await RisingEdge(self.dut.clk)
            if ready.value:
                break
        valid.value = 0

    async def dma_read(self, addr, dwords):
        dut = self.dut
        await self.send("dma__read_cmd", requester.ReadCommand, addr=addr, dwords=dwords)
        words = []
        dut.dma__read_data__ready.value = 1
        while True:
            await RisingEdge(dut.clk)
            if dut.dma__read_data__valid.value:
                value = int(dut.dma__read_data__payload.value)
                words.append((field(requester.ReadData, value, "data"), field(requester.ReadData, value, "error")))
                if field(requester.ReadData, value, "last"):
                    break
        dut.dma__read_data__ready.value = 0
        return words

    async def dma_write(self, addr, words, first_be=0xF, last_be=0xF):
        await self.send(
            "dma__write_cmd", requester.WriteCommand, addr=addr, dwords=len(words), first_be=first_be, last_be=last_be
        )
        for w in words:
            await self.send("dma__write_data", requester.WriteData, data=w)


@cocotb.test()
async def enumeration_finds_the_function_with_its_bars_and_capabilities(dut):
    bench = await Bench().start(dut)
    f = bench.function
    assert (f.vendor_id, f.device_id) == (PARAMS.vendor_id, PARAMS.device_id)
    assert f.class_code == PARAMS.class_code
    assert f.bar_size[0] == PARAMS.bar0_bytes and f.bar_size[2] == PARAMS.bar2_bytes
    assert f.bar_size[1] == 0 and f.bar_size[3] == 0
    assert f.is_pcie() and await f.get_mps() == 1
    assert f.msi_enabled


@cocotb.test()
async def bar0_registers_and_doorbells(dut):
    bench = await Bench().start(dut)
    from support.pcie_top import MAGIC

    assert await bench.bar0.read_dword(0x04) == MAGIC
    assert await bench.bar0.read_dword(0x00) == 0x5A5A_0000
    # Every size and alignment inside the scratch register.
    for offset in range(4):
        for size in range(1, 5 - offset):
            value = bytes(random.Random(offset * 8 + size).randrange(256) for _ in range(size))
            before = await bench.bar0.read(0, 4)
            await bench.bar0.write(offset, value)
            expected = bytearray(before)
            expected[offset : offset + size] = value
            assert await bench.bar0.read(0, 4) == expected
            assert await bench.bar0.read(offset, size) == value
    for n in range(3):
        await bench.bar0.write_dword(0x08, 0xD00B_0000 + n)
    assert await bench.bar0.read_dword(0x0C) == 3
    assert await bench.bar0.read_dword(0x10) == 0xD00B_0002
    assert await bench.bar0.read_dword(0x08) == 0  # a doorbell reads as zero


@cocotb.test()
async def shared_window_reads_and_writes_of_every_size_and_alignment(dut):
    bench = await Bench().start(dut, split_on_all_rcb=True)
    rng = random.Random(2)
    shadow = bytearray(await bench.bar2.read(0, 1024))
    for offset in range(8):
        for size in (1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 17, 63, 64, 65, 200, 500):
            addr = 16 * offset + offset
            data = bytes(rng.randrange(256) for _ in range(size))
            await bench.bar2.write(addr, data)
            shadow[addr : addr + size] = data
            assert await bench.bar2.read(addr, size) == data, (addr, size)
    assert await bench.bar2.read(0, 1024) == shadow
    big = bytes(rng.randrange(256) for _ in range(4096))
    await bench.bar2.write(0x2000, big)
    assert await bench.bar2.read(0x2000, 4096) == big


@cocotb.test()
async def dma_reads_and_writes_of_host_memory(dut):
    bench = await Bench().start(dut, mps=0, split_on_all_rcb=True)
    rng = random.Random(3)
    image = bytes(rng.randrange(256) for _ in range(16384))
    await bench.memory.write(0, image)
    for offset, dwords in ((0, 1), (4, 3), (0x7C, 33), (0xFF8, 512), (0x1000, 1024)):
        words = await bench.dma_read(bench.memory_base + offset, dwords)
        expected = [int.from_bytes(image[offset + 4 * i : offset + 4 * i + 4], "little") for i in range(dwords)]
        assert [w for w, _ in words] == expected and not any(e for _, e in words)
    for offset, dwords, first_be, last_be in (
        (0x8000, 1, 0b0011, 0),
        (0x8104, 70, 0b1110, 0b0001),
        (0x8FF0, 300, 0xF, 0xF),
    ):
        before = await bench.memory.read(offset, 4 * dwords)
        words = [rng.randrange(1 << 32) for _ in range(dwords)]
        await bench.dma_write(bench.memory_base + offset, words, first_be, last_be)
        expected = bytearray(before)
        for i, w in enumerate(words):
            be = first_be if i == 0 else (last_be if i == dwords - 1 else 0xF)
            for b in range(4):
                if be >> b & 1:
                    expected[4 * i + b] = w >> (8 * b) & 0xFF
        for _ in range(2000):  # posted: wait until it has landed
            if await bench.memory.read(offset, 4 * dwords) == expected:
                break
            await RisingEdge(dut.clk)
        assert await bench.memory.read(offset, 4 * dwords) == expected


@cocotb.test()
async def msi_on_a_completion_queue_event(dut):
    bench = await Bench().start(dut)
    event = bench.function.msi_vectors[0].event
    event.clear()
    dut.msi_event.value = 1
    await RisingEdge(dut.clk)
    dut.msi_event.value = 0
    for _ in range(500):
        if event.is_set():
            break
        await RisingEdge(dut.clk)
    assert event.is_set()


@cocotb.test()
async def unsupported_requests_and_a_completion_timeout(dut):
    bench = await Bench().start(dut)
    # Between BAR0 (4 KiB) and BAR2 (64 KiB, 64 KiB aligned) lies memory routed to the device
    # that no BAR claims: the completer answers Unsupported Request.
    gap = bench.function.bar[0] + PARAMS.bar0_bytes
    assert gap < bench.function.bar[2]
    try:
        await bench.rc.mem_read(gap, 4)
    except Exception as error:
        assert "Unsuccessful completion" in str(error)
    else:
        raise AssertionError("a read outside the BARs completed successfully")
    # The root complex loses one of the card's reads: its words come back as errors after the
    # completion timeout, and the next read is served normally.
    lost = bench.memory_base + 0x100
    handle = bench.rc.handle_mem_read_tlp

    async def lossy(tlp):
        if tlp.address == lost:
            tlp.release_fc()
            return
        await handle(tlp)

    bench.rc.register_rx_tlp_handler(TlpType.MEM_READ, lossy)
    start = bench.cycles()
    words = await bench.dma_read(lost, 4)
    assert [e for _, e in words] == [1, 1, 1, 1]
    assert bench.cycles() - start >= PARAMS.completion_timeout_cycles
    await bench.memory.write(0x200, b"\x11\x22\x33\x44")
    assert await bench.dma_read(bench.memory_base + 0x200, 1) == [(0x4433_2211, 0)]


@cocotb.test()
async def back_pressure_on_both_sides(dut):
    bench = await Bench().start(dut, rx_gaps=0.5, tx_stalls=0.5)
    rng = random.Random(4)
    data = bytes(rng.randrange(256) for _ in range(1500))
    await bench.bar2.write(0x103, data)
    assert await bench.bar2.read(0x103, 1500) == data
    await bench.memory.write(0, data)
    words = await bench.dma_read(bench.memory_base, 375)
    assert bytes(b for w, _ in words for b in w.to_bytes(4, "little")) == data
