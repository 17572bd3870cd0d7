"""One VIA engine with its host RAM in the Amaranth simulator, its Ethernet side played by the
testbench: every frame it transmits is captured, and frames can be injected into its receiver.
For the transmit- and receive-engine tests."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.sim import Simulator

from numavia.base import via_frame
from numavia.gateware.via_engine import ViaEngine
from support.sim import run_simulation
from support.via_pair import HOST, HOST_SIZE, PARAMS, Node
from support.wishbone_sram import WishboneSRAM

PEER = 1  # the node on the other side of the link
ME = 0


class ObservedEngine(ViaEngine):
    """The real engine; ``rx_pending`` mirrors its receive FIFO's "a whole frame is waiting", so a
    testbench can pace frames without overflowing the FIFO (an overflow would drop legitimate
    frames, which is the MAC's business, not the receiver's); ``tx_att_lookup`` and
    ``rx_att_lookup`` pulse for every ATT lookup the transmit or the receive engine makes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rx_pending = Signal()
        self.tx_att_lookup = Signal()
        self.rx_att_lookup = Signal()

    def elaborate(self, platform):
        m = super().elaborate(platform)
        tx_lookup, rx_lookup = m.submodules["tx"].att.req, m.submodules["rx"].att.req
        m.d.comb += [
            self.rx_pending.eq(m.submodules["rx_fifo"].head_valid),
            self.tx_att_lookup.eq(tx_lookup.valid & tx_lookup.ready),
            self.rx_att_lookup.eq(rx_lookup.valid & rx_lookup.ready),
        ]
        return m


class Single(wiring.Component):
    def __init__(self, *, rto_cycles=3000, retry_limit=8, params=PARAMS, bursting=True):
        self.engine = ObservedEngine(params, rto_cycles=rto_cycles, retry_limit=retry_limit)
        self.ram = WishboneSRAM(base=HOST, size=HOST_SIZE, bursting=bursting)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine, m.submodules.ram = self.engine, self.ram
        wiring.connect(m, self.engine.dma, self.ram.bus)
        m.d.comb += self.engine.node_id.eq(ME)
        return m


class Wire:
    """Captured frames (bytes) and frames waiting to be injected, with an FCS-error flag each;
    ``busy`` while a frame is still going in."""

    def __init__(self):
        self.sent = []
        self.inject = []
        self.busy = False

    def send(self, data, *, fcs_error=False):
        self.inject.append((bytes(data), fcs_error))


def run(bench, **kwargs):
    top = Single(**kwargs)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    node = Node(top.engine, top.ram, ME)
    wire = Wire()
    eth_tx, eth_rx = top.engine.eth_tx, top.engine.eth_rx

    async def ethernet(ctx):
        frame, _out = bytearray(), None
        beats = []
        while True:
            ctx.set(eth_tx.ready, 1)
            if ctx.get(eth_tx.valid):
                beat = ctx.get(eth_tx.payload)
                n = 4 if not beat.last else 1 + [1, 2, 4, 8].index(beat.last_be)
                frame += beat.data.to_bytes(4, "little")[:n]
                if beat.last:
                    wire.sent.append(bytes(frame))
                    frame = bytearray()
            if not beats and wire.inject:
                data, fcs_error = wire.inject.pop(0)
                data = data.ljust(60, b"\0")  # the MAC pads short frames
                words = [data[i : i + 4] for i in range(0, len(data), 4)]
                beats = [(w, i == len(words) - 1, fcs_error) for i, w in enumerate(words)]
            wire.busy = bool(beats)
            if beats:
                w, last, err = beats.pop(0)
                ctx.set(
                    eth_rx.payload,
                    {
                        "data": int.from_bytes(w.ljust(4, b"\0"), "little"),
                        "last": last,
                        "last_be": (1 << (len(w) - 1)) if last else 0,
                        "error": 0xF if last and err else 0,
                    },
                )
                ctx.set(eth_rx.valid, 1)
            else:
                ctx.set(eth_rx.valid, 0)
            await ctx.tick()

    async def tb(ctx):
        await bench(ctx, node, wire)

    sim.add_testbench(ethernet, background=True)
    sim.add_testbench(tb)
    run_simulation(sim)


def header(raw):
    return via_frame.HEADER.decode(raw)


def frame(
    op,
    *,
    psn=0,
    ack=0,
    src_vi=2,
    dst_vi=1,
    payload=b"",
    msg_length=None,
    offset=0,
    flags=None,
    remote_va=0,
    remote_handle=0,
    immediate=0,
    nak=0,
    src=PEER,
    dst=ME,
    ethertype=None,
):
    """A frame as the peer would send it."""
    length = len(payload) if msg_length is None else msg_length
    if flags is None:
        flags = via_frame.HEADER.encode_bits("FLAGS", FIRST=int(offset == 0), LAST=int(offset + len(payload) == length))
    return (
        via_frame.HEADER.encode(
            DST_MAC=via_frame.mac_field(dst),
            SRC_MAC=via_frame.mac_field(src),
            ETHERTYPE=via_frame.ETHERTYPE_FIELD if ethertype is None else ethertype,
            OP=op,
            FLAGS=flags,
            SRC_VI=src_vi,
            DST_VI=dst_vi,
            PSN=psn,
            ACK_PSN=ack,
            MSG_LENGTH=length,
            OFFSET=offset,
            PAYLOAD_LENGTH=len(payload),
            NAK_CODE=nak,
            REMOTE_VA=remote_va,
            REMOTE_HANDLE=remote_handle,
            IMMEDIATE_DATA=immediate,
        )
        + payload
    )


async def wait_frames(ctx, wire, count, timeout=20000):
    for _ in range(timeout):
        if len(wire.sent) >= count:
            return wire.sent
        await ctx.tick()
    raise TimeoutError(f"{count} frames expected, {len(wire.sent)} sent")


def descriptor_reads(ctx, node, addr, words):
    """A counter of the engine's reads of descriptor words [addr, addr + 4 * words), kept while it ticks."""
    reads = dict.fromkeys(range(addr // 4, addr // 4 + words), 0)
    bus = node.ram.bus

    async def tick(cycles=1):
        for _ in range(cycles):
            if ctx.get(bus.cyc & bus.stb & bus.ack & ~bus.we) and ctx.get(bus.adr) in reads:
                reads[ctx.get(bus.adr)] += 1
            await ctx.tick()

    async def until_done(desc):
        for _ in range(20000):
            if node.status(ctx, desc)["STATUS"]:
                await tick(20)  # the completion's last write is in
                return node.status(ctx, desc)
            await tick()
        raise TimeoutError(f"descriptor {desc:#x} never completed")

    return reads, tick, until_done
