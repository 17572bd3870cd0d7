"""Address translator: the two-level ATT (paper's Fig. 6) in card memory, with lookup ports.

The table sits in on-card block RAM: a lookup reads the level-1 entry of the memory handle,
checks it (valid, protection tag, RDMA right, the byte range inside the region, the page inside
the region) and reads the level-2 entry of the page, five cycles in all, so no lookup cache is
needed. Each lookup port has its own read ports, so the transmit and receive sides translate in
parallel.

A level-1 entry (192 bits) is three 64-bit words of its level's memory, read one a cycle: 64
regions then fill two block RAMs a port (64-bit words, 256 deep) instead of six (192 bits, 64 deep,
a block RAM per 36 bits), for two cycles more a lookup.

A request names a memory handle, a virtual address, a length (the whole range must lie in the
region) and what is needed (``via_att.NEED_*``); the answer is either a failure reason
(``via_att.FAIL_*``) or the physical address of ``va`` and the bytes from there to the end of
its page (a DMA must not cross a page: the next page may be anywhere).

The firmware writes the table one word at a time (``write_*``), in the ATT_ADDR word space
described in ``via_att``, and keeps its own copy (the VIA manager's region table): nothing reads
the table back, which would cost each level a third copy in block RAM (10 of the 85F's 208 with
the full card's 64 regions and 2,048 pages).
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base import via_att

from .via_layouts import AttL1

LookupRequest = data.StructLayout({"handle": 32, "va": 64, "length": 32, "ptag": 16, "need": 2})
LookupResponse = data.StructLayout({"fail": 3, "pa": 32, "page_left": via_att.PAGE_SHIFT + 1})

#: A level-1 entry's words in its memory (64 bits: two of the firmware's 32-bit lanes), and the
#: words between entries there (a power of two: the entry's address is the handle, shifted).
L1_WORD_BITS = 64
L1_WORDS = -(-AttL1.size // L1_WORD_BITS)
L1_WORD_STRIDE = 1 << (L1_WORDS - 1).bit_length()


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
        l1 = Memory(shape=L1_WORD_BITS, depth=self.regions * L1_WORD_STRIDE, init=[])
        l2 = Memory(shape=32, depth=self.pages, init=[])
        m.submodules.l1 = l1
        m.submodules.l2 = l2

        # Firmware writes: a level-1 lane (half of a word of the entry), or a level-2 entry.
        lanes_per_word = L1_WORD_BITS // 32
        l1_w = l1.write_port(granularity=32)
        l2_w = l2.write_port()
        in_l1 = self.write_addr < l2_base
        lane = self.write_addr[:3]
        m.d.comb += [
            l1_w.addr.eq(self.write_addr // stride * L1_WORD_STRIDE + lane // lanes_per_word),
            l1_w.data.eq(self.write_data.replicate(lanes_per_word)),
            l2_w.addr.eq(self.write_addr - l2_base),
            l2_w.data.eq(self.write_data),
        ]
        with m.If(self.write_en):
            with m.If(in_l1):
                with m.If(lane < via_att.L1_WORDS):
                    m.d.comb += l1_w.en.eq(1 << lane % lanes_per_word)
            with m.Elif(self.write_addr - l2_base < self.pages):
                m.d.comb += l2_w.en.eq(1)

        for i, port in enumerate(self.lookups):
            self._lookup(m, port, l1.read_port(), l2.read_port(), name=f"lookup{i}")
        return m

    def _lookup(self, m, port, l1_r, l2_r, name):
        req = Signal(LookupRequest, name=f"{name}_req")
        fail = Signal(3, name=f"{name}_fail")
        # The entry's words read before its last, which the memory gives in the check's cycle.
        held = Signal(L1_WORD_BITS * (L1_WORDS - 1), name=f"{name}_held")
        entry = AttL1(Cat(held, l1_r.data)[: AttL1.size])
        word = Signal(range(L1_WORD_STRIDE), name=f"{name}_word")  # the entry's word being read
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
            # The request's entry, a word a cycle (the check reads the last one as it comes out).
            l1_r.addr.eq(req.handle * L1_WORD_STRIDE + word),
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
                m.d.comb += [port.req.ready.eq(1), l1_r.addr.eq(port.req.payload.handle * L1_WORD_STRIDE)]
                with m.If(port.req.valid):
                    m.d.sync += [req.eq(port.req.payload), word.eq(1)]
                    with m.If(port.req.payload.handle >= self.regions):
                        m.d.sync += fail.eq(via_att.FAIL_HANDLE)
                        m.next = "ANSWER"
                    with m.Else():
                        m.next = "READ"
            with m.State("READ"):
                # Word `word - 1` is out of the RAM: keep it, read the next.
                m.d.sync += [held.word_select((word - 1)[: len(word)], L1_WORD_BITS).eq(l1_r.data), word.eq(word + 1)]
                with m.If(word == L1_WORDS - 1):
                    m.next = "CHECK"
            with m.State("CHECK"):
                # The level-1 entry is whole; the level-2 read starts in the same cycle.
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
