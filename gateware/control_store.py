"""Writable control store of the remote access controller.

The firmware writes the microcode image word by word through registers (``UCODE_ADDR``,
``UCODE_WDATA_LO``, then ``UCODE_WDATA_HI``, which commits the 64-bit word and advances the
address), reads it back (``UCODE_RDATA_LO/HI`` at ``UCODE_ADDR``) to verify it, and then sets
``CTRL.LOADED``. Until then the sequencer refuses remote traffic; while loaded, the store cannot
be written (a write is ignored and counted in ``STATUS.WRITE_REFUSED``).
"""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base.microcode import isa


class ControlStore(wiring.Component):
    def __init__(self, *, depth=isa.CONTROL_STORE_DEPTH, init=()):
        self.depth = depth
        self.init = list(init)
        super().__init__(
            {
                # sequencer's fetch port: data one cycle after addr
                "fetch_addr": In(isa.TARGET_BITS),
                "fetch_data": Out(isa.WORD_BITS),
                # loader (register) side
                "addr": In(isa.TARGET_BITS),
                "wdata": In(isa.WORD_BITS),
                "write": In(1),
                "rdata": Out(isa.WORD_BITS),
                "loaded": In(1),
                "write_refused": Out(1),  # sticky
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.store = store = Memory(shape=isa.WORD_BITS, depth=self.depth, init=self.init)
        fetch = store.read_port()
        readback = store.read_port()
        wr = store.write_port()
        m.d.comb += [
            fetch.addr.eq(self.fetch_addr),
            self.fetch_data.eq(fetch.data),
            readback.addr.eq(self.addr),
            self.rdata.eq(readback.data),
            wr.addr.eq(self.addr),
            wr.data.eq(self.wdata),
            wr.en.eq(self.write & ~self.loaded),
        ]
        with m.If(self.write & self.loaded):
            m.d.sync += self.write_refused.eq(1)
        return m
