"""Address translator: the two-level ATT (paper's Fig. 6) in card memory, with lookup ports.

The table sits in on-card block RAM: a lookup reads the level-1 entry of the memory handle,
checks it (valid, protection tag, RDMA right, the byte range inside the region, the page inside
the region) and reads the level-2 entry of the page, three cycles in all, so no lookup cache is
needed. Each lookup port has its own read ports, so the transmit and receive sides translate in
parallel.

A request names a memory handle, a virtual address, a length (the whole range must lie in the
region) and what is needed (``via_att.NEED_*``); the answer is either a failure reason
(``via_att.FAIL_*``) or the physical address of ``va`` and the bytes from there to the end of
its page (a DMA must not cross a page: the next page may be anywhere).

The firmware writes the table one word at a time (``write_*``), in the ATT_ADDR word space
described in ``via_att``, and keeps its own copy (the VIA manager's region table): nothing reads
the table back, which would cost each level a third copy in block RAM (10 of the 85F's 208 with
the full card's 64 regions and 2,048 pages).
"""

from amaranth import C, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base import via_att

from .via_layouts import AttL1

LookupRequest = data.StructLayout({"handle": 32, "va": 64, "length": 32, "ptag": 16, "need": 2})
LookupResponse = data.StructLayout({"fail": 3, "pa": 32, "page_left": via_att.PAGE_SHIFT + 1})


def lookup_signature():
    """A requester's view of a lookup port."""
    return wiring.Signature(
        {
            "req": Out(stream.Signature(LookupRequest)),
            "resp": In(stream.Signature(LookupResponse)),
        }
    )


class AddressTranslator(wiring.Component):
    def __init__(self, *, regions, pages, ports):
        self.regions = regions
        self.pages = pages
        self.ports = ports
        super().__init__(
            {
                "lookups": In(lookup_signature()).array(ports),
                "write_addr": In(24),
                "write_data": In(32),
                "write_en": In(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        stride = via_att.L1_STRIDE_WORDS
        l2_base = via_att.l2_word_base(self.regions)
        l1 = Memory(shape=AttL1.size, depth=self.regions, init=[])
        l2 = Memory(shape=32, depth=self.pages, init=[])
        m.submodules.l1 = l1
        m.submodules.l2 = l2

        # Firmware writes: a level-1 word lane, or a level-2 entry.
        l1_w = l1.write_port(granularity=32)
        l2_w = l2.write_port()
        in_l1 = self.write_addr < l2_base
        lane = self.write_addr[:3]
        m.d.comb += [
            l1_w.addr.eq(self.write_addr // stride),
            l1_w.data.eq(self.write_data.replicate(AttL1.size // 32)),
            l2_w.addr.eq(self.write_addr - l2_base),
            l2_w.data.eq(self.write_data),
        ]
        with m.If(self.write_en):
            with m.If(in_l1):
                with m.If(lane < via_att.L1_WORDS):
                    m.d.comb += l1_w.en.eq(1 << lane)
            with m.Elif(self.write_addr - l2_base < self.pages):
                m.d.comb += l2_w.en.eq(1)

        for i, port in enumerate(self.lookups):
            self._lookup(m, port, l1.read_port(), l2.read_port(), name=f"lookup{i}")
        return m

    def _lookup(self, m, port, l1_r, l2_r, name):
        req = Signal(LookupRequest, name=f"{name}_req")
        fail = Signal(3, name=f"{name}_fail")
        entry = AttL1(l1_r.data)
        resp = port.resp

        # The range check in the region's own coordinates: `offset_in_region` is `va - START_VA`
        # (its top bit set when `va` lies below the region), and since LENGTH has 32 bits a request
        # inside the region has an offset below 2^32, so one 33-bit sum checks its end; its page
        # within the region is then below 2^(33 - PAGE_SHIFT), so the page arithmetic is as narrow
        # (the page check is only reached for a request inside the region). Exact to the reference
        # model (``via_att.translate``) with two 64-bit sums fewer per lookup port.
        length_bits = len(entry.length)
        page_bits = length_bits - via_att.PAGE_SHIFT + 1
        offset_in_region = Signal(65, name=f"{name}_offset_in_region")
        in_region = Signal(name=f"{name}_in_region")
        page = Signal(page_bits, name=f"{name}_page")
        l2_index = Signal(len(entry.l2_index) + 1, name=f"{name}_l2_index")
        m.d.comb += [
            offset_in_region.eq(req.va - entry.start_va),
            in_region.eq(
                ~offset_in_region[64]
                & (offset_in_region[length_bits:64] == 0)
                & (offset_in_region[:length_bits] + req.length <= entry.length)
            ),
            page.eq(req.va[via_att.PAGE_SHIFT :][:page_bits] - entry.start_va[via_att.PAGE_SHIFT :][:page_bits]),
            l2_index.eq(entry.l2_index + page),
            # Keep the entry of the request on the read port until it is answered.
            l1_r.addr.eq(req.handle),
            l2_r.addr.eq(l2_index),
        ]
        right = Mux(
            req.need == via_att.NEED_RDMA_READ,
            entry.attributes.rdma_read,
            Mux(req.need == via_att.NEED_RDMA_WRITE, entry.attributes.rdma_write, 1),
        )
        offset = req.va[: via_att.PAGE_SHIFT]

        with m.FSM(name=name):
            with m.State("IDLE"):
                m.d.comb += [port.req.ready.eq(1), l1_r.addr.eq(port.req.payload.handle)]
                with m.If(port.req.valid):
                    m.d.sync += req.eq(port.req.payload)
                    with m.If(port.req.payload.handle >= self.regions):
                        m.d.sync += fail.eq(via_att.FAIL_HANDLE)
                        m.next = "ANSWER"
                    with m.Else():
                        m.next = "CHECK"
            with m.State("CHECK"):
                # The level-1 entry is out of its RAM; the level-2 read starts in the same cycle.
                with m.If(~entry.attributes.valid):
                    m.d.sync += fail.eq(via_att.FAIL_HANDLE)
                with m.Elif(entry.ptag != req.ptag):
                    m.d.sync += fail.eq(via_att.FAIL_PTAG)
                with m.Elif(~right):
                    m.d.sync += fail.eq(via_att.FAIL_RIGHTS)
                with m.Elif(~in_region):
                    m.d.sync += fail.eq(via_att.FAIL_RANGE)
                with m.Elif((page >= entry.page_count) | (l2_index >= self.pages)):
                    m.d.sync += fail.eq(via_att.FAIL_PAGE)
                with m.Else():
                    m.d.sync += fail.eq(via_att.FAIL_NONE)
                m.next = "ANSWER"
            with m.State("ANSWER"):
                m.d.comb += [
                    resp.valid.eq(1),
                    resp.payload.fail.eq(fail),
                    resp.payload.pa.eq((l2_r.data & ~C(via_att.PAGE_MASK, 32)) | offset),
                    resp.payload.page_left.eq(via_att.PAGE_SIZE - offset),
                ]
                with m.If(resp.ready):
                    m.next = "IDLE"
