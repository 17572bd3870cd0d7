"""The sequencer's context store: the registers of suspended contexts, and the host's byte
enables of each transaction entry.

A context that suspends (``WAIT``, ``BACKOFF``, a ``SEND`` that found the outgoing queue full) is
saved whole; when it resumes it is read back. Reads take one cycle: the index given in one cycle
has its context on ``context`` (and its entry's byte enables on ``byte_enables``) in the next,
which lets the scheduler read a context while its response's header is being taken.
"""

from amaranth import Module
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base.coherence import NODE_ID_BITS
from numavia.base.microcode import isa

from .context_scheduler import ENTRY_BITS

PointerLayout = data.StructLayout({"id": NODE_ID_BITS, "valid": 1})

ContextLayout = data.StructLayout(
    {
        "pc": isa.TARGET_BITS,
        "ret": isa.TARGET_BITS,
        "addr": 32,
        "vaddr": 32,
        "kind": 2,
        "lword": 4,
        "lcount": 5,
        "state": 4,
        "mstate": 2,
        "locked": 1,
        "head": PointerLayout,
        "ptr": PointerLayout,
        "fwd": PointerLayout,
        "bwd": PointerLayout,
        "flags": 6,
        "retries": 8,
        "way": 3,
        "hit": 1,
        "victim": 1,
        "no_way": 1,
        "scan": 16,
        "scan_done": 1,
    }
)


class ContextStore(wiring.Component):
    """``read``: the context to read (its entry's byte enables too); ``context``,
    ``byte_enables``: what was read, a cycle later. ``save``: a context's registers;
    ``save_byte_enables``: an entry's byte enables (written apart: a local write's bytes arrive
    before its context first runs)."""

    def __init__(self, line_bytes):
        self.line_bytes = line_bytes
        super().__init__(
            {
                "read": In(isa.CONTEXT_BITS),
                "context": Out(ContextLayout),
                "byte_enables": Out(line_bytes),
                "save": In(data.StructLayout({"en": 1, "index": isa.CONTEXT_BITS, "context": ContextLayout})),
                "save_byte_enables": In(data.StructLayout({"en": 1, "entry": ENTRY_BITS, "byte_enables": line_bytes})),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.contexts = contexts = Memory(shape=ContextLayout, depth=1 << isa.CONTEXT_BITS, init=[])
        m.submodules.byte_enables = byte_enables = Memory(shape=self.line_bytes, depth=isa.NUM_TRANSACTIONS, init=[])
        ctx_rd, ctx_wr = contexts.read_port(), contexts.write_port()
        be_rd, be_wr = byte_enables.read_port(), byte_enables.write_port()
        m.d.comb += [
            ctx_rd.addr.eq(self.read),
            be_rd.addr.eq(self.read[:ENTRY_BITS]),
            self.context.eq(ctx_rd.data),
            self.byte_enables.eq(be_rd.data),
            ctx_wr.addr.eq(self.save.index),
            ctx_wr.data.eq(self.save.context),
            ctx_wr.en.eq(self.save.en),
            be_wr.addr.eq(self.save_byte_enables.entry),
            be_wr.data.eq(self.save_byte_enables.byte_enables),
            be_wr.en.eq(self.save_byte_enables.en),
        ]
        return m
