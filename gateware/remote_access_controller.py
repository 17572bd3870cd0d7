"""Remote access controller: the writable control store, the sequencer and their registers
(``regmap.RAC``). See :mod:`sequencer` for how microprograms run and :mod:`control_store` for
how the firmware loads them."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap
from numavia.base.coherence import NODE_ID_BITS, CacheGeometry
from numavia.base.microcode import isa

from . import wishbone
from .control_store import ControlStore
from .event_counters import EventCounters
from .local_access_controller import MissSignature
from .local_side import RemoteSideSignature
from .register_bank import RegisterBank
from .sci_layouts import HeaderLayout
from .sequencer import Sequencer, SequencerEvents

_COUNTERS = tuple(name for name, _ in regmap.RAC_COUNTERS)


def live_ctrl(microcode_only=False):
    """The RAC.CTRL value that puts a loaded control store live, with the sequencer's hard-wired
    fast path on, or off (``microcode_only``)."""
    ctrl = regmap.RAC.register("CTRL")
    return ctrl.field("LOADED").mask | (ctrl.field("MICROCODE_ONLY").mask if microcode_only else 0)


class RemoteAccessController(wiring.Component):
    def __init__(
        self,
        *,
        geometry=CacheGeometry(),
        slice_lines,
        num_transactions=isa.NUM_TRANSACTIONS,
        ucode_init=(),
        counters_in_memory=False,
        **sequencer_params,
    ):
        self.geometry = geometry
        self.slice_lines = slice_lines
        self.num_transactions = num_transactions
        self.ucode_init = list(ucode_init)
        self.counters_in_memory = counters_in_memory
        self.sequencer_params = sequencer_params
        super().__init__(
            {
                "bus": In(wishbone.Signature(addr_width=regmap.RAC.addr_width)),
                "node_id": In(NODE_ID_BITS),
                "numa_mode": In(1),
                "cache_first_miss": In(1),
                "loaded": Out(1),
                "miss": In(MissSignature()),
                "local": Out(RemoteSideSignature(geometry)),
                "send_header": Out(stream.Signature(HeaderLayout)),
                "send_data": Out(stream.Signature(32)),
                "recv_header": In(stream.Signature(HeaderLayout)),
                "recv_data": In(stream.Signature(32)),
                "failed": In(stream.Signature(HeaderLayout)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = bank = RegisterBank(regmap.RAC, indexed={"counters": _COUNTERS})
        m.submodules.store = store = ControlStore(init=self.ucode_init)
        m.submodules.sequencer = seq = Sequencer(
            geometry=self.geometry,
            slice_lines=self.slice_lines,
            num_transactions=self.num_transactions,
            **self.sequencer_params,
        )
        wiring.connect(m, wiring.flipped(self.bus), bank.bus)
        wiring.connect(m, wiring.flipped(self.miss), seq.miss)
        wiring.connect(m, seq.local, wiring.flipped(self.local))
        for name in ("send_header", "send_data"):
            wiring.connect(m, getattr(seq, name), wiring.flipped(getattr(self, name)))
        for name in ("recv_header", "recv_data", "failed"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(seq, name))

        ctrl = regmap.RAC.register("CTRL")
        status = regmap.RAC.register("STATUS")
        loaded = bank.ctrl.value[ctrl.field("LOADED").lsb]
        m.d.comb += [
            self.loaded.eq(loaded),
            seq.loaded.eq(loaded),
            seq.fast_path.eq(~bank.ctrl.value[ctrl.field("MICROCODE_ONLY").lsb]),
            seq.node_id.eq(self.node_id),
            seq.numa_mode.eq(self.numa_mode),
            seq.cache_first_miss.eq(self.cache_first_miss),
            store.fetch_addr.eq(seq.fetch_addr),
            seq.fetch_data.eq(store.fetch_data),
        ]

        # The loader: address register, write on the high word, read-back.
        ucode_addr = Signal(isa.TARGET_BITS)
        with m.If(bank.ucode_addr.w_stb):
            m.d.sync += ucode_addr.eq(bank.ucode_addr.w_data)
        with m.If(bank.ucode_wdata_hi.w_stb & ~loaded):  # a refused write leaves it alone
            m.d.sync += ucode_addr.eq(ucode_addr + 1)
        # A new address reaches the RAM in the cycle it is written, so the read-back registers
        # hold its word by the time software can read them.
        m.d.comb += [
            store.addr.eq(Mux(bank.ucode_addr.w_stb, bank.ucode_addr.w_data, ucode_addr)),
            store.loaded.eq(loaded),
            store.wdata.eq(bank.ucode_wdata_hi.w_data << 32 | bank.ucode_wdata_lo.value),
            store.write.eq(bank.ucode_wdata_hi.w_stb),
            bank.ucode_pos.value.eq(ucode_addr),
            bank.ucode_rdata_lo.value.eq(store.rdata[:32]),
            bank.ucode_rdata_hi.value.eq(store.rdata[32:]),
            bank.ucode_depth.value.eq(isa.CONTROL_STORE_DEPTH),
            bank.status.value.eq(
                loaded << status.field("LOADED").lsb
                | store.write_refused << status.field("WRITE_REFUSED").lsb
                | seq.busy_contexts << status.field("BUSY_CONTEXTS").lsb
            ),
        ]
        # The sequencer's events, counted a cycle late (its decisions are long paths already) by an
        # EventCounters (in memory where the card asks: counters_in_memory). The microcode's
        # counters the ISA has no COUNT for stay 0.
        sources = list(SequencerEvents.NAMES[: len(isa.Counter)])
        sources += [None] * (isa.NUM_COUNTERS - len(isa.Counter)) + list(SequencerEvents.NAMES[len(isa.Counter) :])
        m.submodules.counters = counters = EventCounters(len(_COUNTERS), in_memory=self.counters_in_memory, late=True)
        wiring.connect(m, bank.counters, counters.read)
        for i, (_, source) in enumerate(zip(_COUNTERS, sources, strict=True)):
            if source is not None:
                m.d.comb += counters.increments[i].eq(getattr(seq.events, source))
        return m
