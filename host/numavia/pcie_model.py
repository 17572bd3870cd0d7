"""The Python side of the endpoint's TLP stream, for tests and benchmarks.

* :func:`tlp_to_dwords` / :func:`dwords_to_tlp`: cocotbext-pcie :class:`Tlp` objects to and from
  the dwords of the TLP stream (header dwords as the specification's values, payload dwords
  little-endian; see ``numavia.gateware.pcie.tlp``); :func:`dwords_to_beats` packs them into PHY
  beats. The cocotb shim (tests/test_pcie_endpoint.py) and the Amaranth harness below share these.
* :class:`EndpointHarness`: the endpoint in Amaranth's simulator with a small host in Python (a
  root complex stand-in with host memory that answers the card's reads, optionally split and out
  of order), a register file behind BAR0 and memory behind the shared-window host port. With
  ``card_side=False`` it plays only the host, for a design that has its own BAR targets (the
  whole card, tests/test_pcie_card.py).
"""

import random
import struct

from amaranth.sim import Simulator
from cocotbext.pcie.core.tlp import CplStatus, Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from numavia.gateware.bfm import recv, send
from numavia.gateware.pcie.config import MSI_CAP_OFFSET, PCIE_CAP_OFFSET

HOST_ID = PcieId(0, 0, 0)
CARD_ID = PcieId(1, 0, 0)


def tlp_to_dwords(tlp):
    header = bytes(tlp.pack_header())
    dwords = list(struct.unpack(f">{len(header) // 4}L", header))
    payload = bytes(tlp.data) if tlp.has_data() else b""
    dwords += struct.unpack(f"<{len(payload) // 4}L", payload)
    return dwords


def dwords_to_tlp(dwords):
    header_dwords = 4 if (dwords[0] >> 29) & 1 else 3
    header = struct.pack(f">{header_dwords}L", *dwords[:header_dwords])
    payload = struct.pack(f"<{len(dwords) - header_dwords}L", *dwords[header_dwords:])
    return Tlp.unpack(header + payload)


def dwords_to_beats(dwords, lanes=2):
    """[(data, keep, last)] PHY beats of ``lanes`` dwords carrying one TLP."""
    beats = []
    for i in range(0, len(dwords), lanes):
        chunk = dwords[i : i + lanes]
        data = sum(d << (32 * k) for k, d in enumerate(chunk))
        beats.append((data, (1 << len(chunk)) - 1, i + lanes >= len(dwords)))
    return beats


def beat_dwords(data, keep, lanes=2):
    return [(data >> (32 * k)) & 0xFFFF_FFFF for k in range(lanes) if keep >> k & 1]


# --- requests the host sends ------------------------------------------------------------------


def config_read(register, tag=0):
    t = Tlp()
    t.fmt_type = TlpType.CFG_READ_0
    t.requester_id, t.completer_id, t.tag = HOST_ID, CARD_ID, tag
    t.address = register & ~3
    t.first_be, t.length = 0xF, 1
    return t


def config_write(register, value, first_be=0xF, tag=0):
    t = Tlp()
    t.fmt_type = TlpType.CFG_WRITE_0
    t.requester_id, t.completer_id, t.tag = HOST_ID, CARD_ID, tag
    t.address = register & ~3
    t.first_be, t.length = first_be, 1
    t.data = bytearray(struct.pack("<L", value))
    return t


def memory_read(addr, length, tag=0):
    t = Tlp()
    t.fmt_type = TlpType.MEM_READ_64 if addr >> 32 else TlpType.MEM_READ
    t.requester_id, t.tag = HOST_ID, tag
    t.set_addr_be(addr, length)
    return t


def memory_write(addr, payload):
    t = Tlp()
    t.fmt_type = TlpType.MEM_WRITE_64 if addr >> 32 else TlpType.MEM_WRITE
    t.requester_id = HOST_ID
    t.set_addr_be_data(addr, payload)
    return t


class EndpointHarness:
    """``PcieEndpoint`` in Amaranth's simulator, with everything around it modelled in Python.

    ``host_memory`` (a dict of bytes) answers the card's memory reads: completions split at
    ``completion_bytes`` (RCB-aligned) after ``completion_delay`` cycles, the reads served in
    ``order`` ("fifo" or "reverse" per batch of outstanding reads), ``drop_tags`` never answered.
    ``tx_ready`` is the probability that the host takes a PHY beat in a cycle (back-pressure).
    ``phy_rx``/``phy_tx``/``data_width``: the DUT's TLP streams and their width when the DUT is not
    a bare ``PcieEndpoint``; ``card_side=False``: do not model what is behind BAR0/BAR2.
    """

    def __init__(
        self,
        dut,
        *,
        seed=1,
        tx_ready=1.0,
        rx_valid=1.0,
        completion_bytes=64,
        completion_delay=4,
        order="fifo",
        drop_tags=(),
        registers=None,
        shared_bytes=1 << 16,
        phy_rx=None,
        phy_tx=None,
        data_width=None,
        card_side=True,
    ):
        self.dut = dut
        self.phy_rx = dut.phy_rx if phy_rx is None else phy_rx
        self.phy_tx = dut.phy_tx if phy_tx is None else phy_tx
        self.lanes = (data_width or dut.params.data_width) // 32
        self.card_side = card_side
        self.random = random.Random(seed)
        self.tx_ready, self.rx_valid = tx_ready, rx_valid
        self.completion_bytes, self.completion_delay = completion_bytes, completion_delay
        self.order, self.drop_tags = order, set(drop_tags)
        self.cycle = 0
        self.to_card = []  # (not_before_cycle, Tlp)
        self.sent = []  # (cycle its first beat was taken, Tlp)
        self.from_card = []  # (cycle, Tlp) of everything the card sent
        self.completions = []  # (cycle, Tlp) of completions for the host's requests
        self.msi_writes = []
        self.host_memory = {}
        self.pending_reads = []  # the card's reads not yet answered
        self.peak_pending_reads = 0
        self.registers = dict(registers or {})  # BAR0 word offset -> value; others answer err
        self.register_writes = []
        self.shared = bytearray(shared_bytes)
        self.shared_requests = []  # (addr, write, count)
        self.msi_address = None

    # --- host side -----------------------------------------------------------------------------
    def send(self, tlp, delay=0):
        self.to_card.append((self.cycle + delay, tlp))

    async def _phy_sender(self, ctx):
        while True:
            ready_now = [t for t in self.to_card if t[0] <= self.cycle]
            if not ready_now:
                await ctx.tick()
                continue
            item = ready_now[0]
            self.to_card.remove(item)
            for i, (data, keep, last) in enumerate(dwords_to_beats(tlp_to_dwords(item[1]), self.lanes)):
                while self.random.random() >= self.rx_valid:
                    await ctx.tick()
                await send(ctx, self.phy_rx, {"data": data, "keep": keep, "last": last})
                if i == 0:
                    self.sent.append((self.cycle, item[1]))

    async def _phy_receiver(self, ctx):
        dwords = []
        while True:
            ready = self.random.random() < self.tx_ready
            ctx.set(self.phy_tx.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(self.phy_tx.valid, self.phy_tx.payload)
            if not (valid and ready):
                continue
            dwords += beat_dwords(payload.data, payload.keep, self.lanes)
            if payload.last:
                self._from_card(dwords_to_tlp(dwords))
                dwords = []

    def _from_card(self, tlp):
        self.from_card.append((self.cycle, tlp))
        if tlp.fmt_type in (TlpType.CPL, TlpType.CPL_DATA):
            self.completions.append((self.cycle, tlp))
        elif tlp.fmt_type in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            if self.msi_address is not None and tlp.address == self.msi_address:
                self.msi_writes.append((self.cycle, tlp))
                return
            data = tlp.get_data()
            start = tlp.address + tlp.get_first_be_offset()
            for i, b in enumerate(data[tlp.get_first_be_offset() : len(data) - tlp.get_last_be_offset()]):
                self.host_memory[start + i] = b
        elif tlp.fmt_type in (TlpType.MEM_READ, TlpType.MEM_READ_64):
            self.pending_reads.append((self.cycle, tlp))
            tags = [t.tag for _, t in self.pending_reads]
            assert len(tags) == len(set(tags)), f"tag reused while in flight: {tags}"
            self.peak_pending_reads = max(self.peak_pending_reads, len(tags))

    async def _memory_responder(self, ctx):
        """Answer the card's reads from ``host_memory``."""
        while True:
            await ctx.tick()
            due = [r for r in self.pending_reads if r[0] + self.completion_delay <= self.cycle]
            if not due:
                continue
            if self.order == "reverse":
                due.reverse()
            for item in due:
                self.pending_reads.remove(item)
                if item[1].tag in self.drop_tags:
                    continue
                for cpl in self._completions_for(item[1]):
                    self.send(cpl)

    def _completions_for(self, req):
        addr = req.address + req.get_first_be_offset()
        remaining = req.get_be_byte_count()
        out = []
        while remaining:
            chunk = min(remaining, self.completion_bytes - addr % self.completion_bytes)
            cpl = Tlp.create_completion_data_for_tlp(req, HOST_ID)
            cpl.byte_count = remaining
            cpl.lower_address = addr & 0x7F
            dword_addr = addr & ~3
            end = (addr + chunk + 3) & ~3
            cpl.set_data(bytes(self.host_memory.get(a, 0) for a in range(dword_addr, end)))
            cpl.length = (end - dword_addr) // 4
            out.append(cpl)
            addr += chunk
            remaining -= chunk
        return out

    # --- card side ---------------------------------------------------------------------------
    async def _registers(self, ctx):
        bus = self.dut.csr
        while True:
            _, _, cyc, stb, we, adr, dat_w, sel = await ctx.tick().sample(
                bus.cyc, bus.stb, bus.we, bus.adr, bus.dat_w, bus.sel
            )
            if not (cyc and stb):
                continue
            known = adr in self.registers
            if known and we:
                mask = sum(0xFF << (8 * i) for i in range(4) if sel >> i & 1)
                self.registers[adr] = (self.registers[adr] & ~mask) | (dat_w & mask)
                self.register_writes.append((adr, dat_w, sel))
            ctx.set(bus.dat_r, self.registers.get(adr, 0))
            ctx.set(bus.ack if known else bus.err, 1)
            await ctx.tick()
            ctx.set(bus.ack, 0)
            ctx.set(bus.err, 0)

    async def _shared_memory(self, ctx):
        port = self.dut.shared
        while True:
            req = await recv(ctx, port.req)
            self.shared_requests.append((req.addr, req.write, req.count))
            refused = req.addr + 4 * req.count > len(self.shared)
            if req.write:
                for i in range(req.count):
                    beat = await recv(ctx, port.wdata)
                    a = req.addr + 4 * i
                    for b in range(4):
                        if beat.be >> b & 1 and not refused:
                            self.shared[a + b] = beat.data >> (8 * b) & 0xFF
                await send(ctx, port.resp, {"data": 0, "error": refused, "last": 1})
            else:
                for i in range(req.count):
                    a = req.addr + 4 * i
                    word = 0 if refused else int.from_bytes(self.shared[a : a + 4], "little")
                    await send(ctx, port.resp, {"data": word, "error": refused, "last": i == req.count - 1})

    async def _clock(self, ctx):
        while True:
            await ctx.tick()
            self.cycle += 1

    def run(self, testbench, processes=()):
        """Run ``testbench(ctx, harness)`` with all models (and ``processes``) in the background."""
        sim = Simulator(self.dut)
        sim.add_clock(1e-8)
        models = [self._clock, self._phy_sender, self._phy_receiver, self._memory_responder]
        if self.card_side:
            models += [self._registers, self._shared_memory]
        for process in models + list(processes):
            sim.add_testbench(process, background=True)

        async def main(ctx):
            await testbench(ctx, self)

        sim.add_testbench(main)
        sim.run()

    # --- helpers for testbenches ----------------------------------------------------------------
    async def wait(self, ctx, condition, limit=20_000, what="condition"):
        for _ in range(limit):
            if condition():
                return
            await ctx.tick()
        raise TimeoutError(f"{what} not reached in {limit} cycles")

    async def request(self, ctx, tlp, limit=20_000):
        """Send a non-posted request; return its completions (all of them, by byte count)."""
        start = len(self.completions)
        self.send(tlp)

        def complete():
            got = [c for _, c in self.completions[start:] if c.tag == tlp.tag]
            return got and (
                got[-1].status != CplStatus.SC
                or not got[-1].has_data()
                or got[-1].byte_count <= len(got[-1].get_data()) - (got[-1].lower_address & 3)
            )

        await self.wait(ctx, complete, limit, f"completion of {tlp!r}")
        return [c for _, c in self.completions[start:] if c.tag == tlp.tag]

    async def enumerate(self, ctx, bar0=0xF000_0000, bar2=0xE000_0000, mps_code=1, mrrs_code=2):
        """What a host's enumeration leaves behind: BARs, memory + bus master, MPS/MRRS, MSI."""
        await self.request(ctx, config_write(0x10, bar0, tag=1))
        await self.request(ctx, config_write(0x18, bar2, tag=2))
        await self.request(ctx, config_write(PCIE_CAP_OFFSET + 8, mps_code << 5 | mrrs_code << 12, tag=3))
        self.msi_address = 0xFEE0_0000
        await self.request(ctx, config_write(MSI_CAP_OFFSET + 4, self.msi_address, tag=4))
        await self.request(ctx, config_write(MSI_CAP_OFFSET + 0xC, 0x0042, tag=5))
        await self.request(ctx, config_write(MSI_CAP_OFFSET, 1 << 16, tag=6))
        await self.request(ctx, config_write(0x04, 0x0006, tag=7))

    async def dma_read(self, ctx, addr, dwords):
        """One DMA read command; returns [(data, error)] and the cycle count until the last word."""
        assert 1 <= dwords <= 1024, "a DMA command moves 1..1024 dwords"
        start = self.cycle
        await send(ctx, self.dut.dma.read_cmd, {"addr": addr, "dwords": dwords})
        words = []
        while True:
            beat = await recv(ctx, self.dut.dma.read_data)
            words.append((beat.data, beat.error))
            if beat.last:
                return words, self.cycle - start

    async def dma_write(self, ctx, addr, words, first_be=0xF, last_be=0xF):
        assert 1 <= len(words) <= 1024, "a DMA command moves 1..1024 dwords"
        await send(
            ctx, self.dut.dma.write_cmd, {"addr": addr, "dwords": len(words), "first_be": first_be, "last_be": last_be}
        )
        for w in words:
            await send(ctx, self.dut.dma.write_data, {"data": w})
