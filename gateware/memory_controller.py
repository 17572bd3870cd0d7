"""Memory controller: the home slice, the network-cache data and the private memory, behind two
ports. The local access controller's port has priority over the sequencer's, as in the paper.

Memories are block RAM in simulation (a LiteDRAM-backed controller can replace this one behind
the same ports). A port issues word commands on ``cmd``; a read's data comes back on ``rdata``
with ``rvalid`` :data:`READ_LATENCY` cycles after the command was accepted: the command is
registered before the block RAMs and their output once more after them, so that neither the
arbitration nor the RAMs' slow clock-to-output shares a 10 ns cycle with other logic. Commands
are accepted every cycle.
"""

from enum import IntEnum

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


class MemSpace(IntEnum):
    HOME = 0  # this node's shared slice (word index = offset / 4)
    CACHE = 1  # network-cache data (word index = ((set * ways) + way) * line words + word)
    PRIVATE = 2  # private memory (word index = offset / 4)


INDEX_BITS = 24
READ_LATENCY = 3
CommandLayout = data.StructLayout({"space": 2, "index": INDEX_BITS, "write": 1, "data": 32, "be": 4})


class MemoryPortSignature(wiring.Signature):
    """User's view of one port."""

    def __init__(self):
        super().__init__(
            {
                "cmd": Out(stream.Signature(CommandLayout)),
                "rdata": In(32),
                "rvalid": In(1),
            }
        )


class MemoryController(wiring.Component):
    local: In(MemoryPortSignature())
    remote: In(MemoryPortSignature())

    def __init__(self, *, home_words, cache_words, private_words):
        self.depths = {MemSpace.HOME: home_words, MemSpace.CACHE: cache_words, MemSpace.PRIVATE: private_words}
        for space, depth in self.depths.items():
            if depth < 1 or depth > 1 << INDEX_BITS:
                raise ValueError(f"{space.name} memory of {depth} words is out of range")
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        ports = [self.local, self.remote]
        grant = Signal()  # 0: local, 1: remote
        m.d.comb += grant.eq(~self.local.cmd.valid)
        for i, port in enumerate(ports):
            m.d.comb += port.cmd.ready.eq(grant == i)
        # The granted command is registered before it reaches the block RAMs.
        cmd = Signal(CommandLayout)
        valid = Signal()
        issuer = Signal()
        with m.If(grant):
            m.d.sync += [cmd.eq(ports[1].cmd.payload), valid.eq(ports[1].cmd.valid)]
        with m.Else():
            m.d.sync += [cmd.eq(ports[0].cmd.payload), valid.eq(ports[0].cmd.valid)]
        m.d.sync += issuer.eq(grant)

        reading = Signal()
        reader = Signal()
        space_q = Signal(2)
        m.d.sync += [reading.eq(valid & ~cmd.write), reader.eq(issuer), space_q.eq(cmd.space)]
        rdata = Signal(32)
        for space, depth in self.depths.items():
            mem = Memory(shape=32, depth=depth, init=[])
            m.submodules[f"{space.name.lower()}_mem"] = mem
            rd = mem.read_port()
            wr = mem.write_port(granularity=8)
            index = cmd.index[: max(1, (depth - 1).bit_length())]
            selected = valid & (cmd.space == space)
            m.d.comb += [rd.addr.eq(index), wr.addr.eq(index), wr.data.eq(cmd.data)]
            with m.If(selected & cmd.write):
                m.d.comb += wr.en.eq(cmd.be)
            with m.If(space_q == space):
                m.d.comb += rdata.eq(rd.data)
        rdata_q = Signal(32)
        rvalid_q = Signal(2)
        m.d.sync += [rdata_q.eq(rdata), rvalid_q.eq(Cat(reading & (reader == 0), reading & (reader == 1)))]
        for i, port in enumerate(ports):
            m.d.comb += [port.rdata.eq(rdata_q), port.rvalid.eq(rvalid_q[i])]
        return m
