"""The VIA node that the random frames and random descriptors run against: its regions,
connections and descriptor area, how the bench sets it up, reads its counters and host memory,
and the frame fields of its peer."""

from numavia.base import regmap, via_frame
from support.via_pair import HOST, PARAMS
from support.via_single import ME


async def drain(ctx, wire, node, *, quiet=40, timeout=200_000):
    """Wait until every queued frame went in and the receive FIFO stayed empty ``quiet`` cycles."""
    still = 0
    for _ in range(timeout):
        if wire.inject or wire.busy or ctx.get(node.engine.rx_pending):
            still = 0
        else:
            still += 1
            if still >= quiet:
                return
        await ctx.tick()
    raise TimeoutError(f"the receive FIFO did not drain in {timeout} cycles (a hang)")


#: Cycles to wait after a descriptor's DONE appears before its memory is reused: the test RAM
#: (``WishboneSRAM`` with bursting) writes a single word again in the cycle that acknowledges it,
#: so a testbench that rewrites the word at once has its data overwritten with the old value.
COMPLETION_SETTLE = 4


def snapshot(ctx, ram):
    """Host memory as bytes."""
    return b"".join(ctx.get(ram.mem.data[i]).to_bytes(4, "little") for i in range(ram.mem.depth))


def fill(ctx, ram, data):
    for i in range(ram.mem.depth):
        ctx.set(ram.mem.data[i], int.from_bytes(data[4 * i : 4 * i + 4], "little"))


def first_difference(want, got, base=HOST):
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"host byte {base + i:#x}: expected {a:#04x}, found {b:#04x}"
    return None


MAX_PAYLOAD = PARAMS.max_payload
MASK32 = (1 << 32) - 1
HEADER = via_frame.HEADER
OP = via_frame.OP


PEER, PEER_VI, VI = 1, 2, 1  # the VI under test and its peer
PTAG, OTHER_PTAG = 5, 6


class Region:
    def __init__(self, handle, va, length, pages, ptag, read, write):
        self.handle, self.va, self.length, self.pages = handle, va, length, pages
        self.ptag, self.read, self.write = ptag, read, write

    def pa(self, va):
        """Host address of a VA of the region (``pages[0]`` holds its first byte)."""
        first_page = self.pages[0] & ~0xFFF
        page = (va >> 12) - (self.va >> 12)
        return (first_page if page == 0 else self.pages[page]) + (va & 0xFFF)


#: Registered regions: 1 the VI's buffers (read, write), 2 another protection tag, 3 read only,
#: 5 write only. Handles 0, 4, 6 and 7 are empty entries; 8 and up lie past the table.
REGIONS = {
    1: Region(
        1,
        0x10_0000_0040,
        0x4000,
        [HOST + 0x8040, HOST + 0x5000, HOST + 0x3000, HOST + 0x6000, HOST + 0x4000],
        PTAG,
        1,
        1,
    ),
    2: Region(2, 0x20_0000_0000, 0x800, [HOST + 0x9000], OTHER_PTAG, 1, 1),
    3: Region(3, 0x30_0000_0100, 0x600, [HOST + 0xA100], PTAG, 1, 0),
    5: Region(5, 0x50_0000_0000, 0x400, [HOST + 0xB000], PTAG, 0, 1),
}
#: Other VIs: 2 is connected to another node, 0 and 3 stay idle; 4 and up do not exist.
OTHER_CONNECTIONS = {2: (3, 2)}
SEND_SLOTS = [HOST + 0x2000 + 0x100 * i for i in range(8)]  # descriptors of one round
#: The VI's descriptor area: the slots above and nothing else of host memory.
DESC_AREA = (HOST, SEND_SLOTS[-1] + 0x100 - HOST)


async def engine_setup(ctx, node):
    await node.enable(ctx)
    for r in REGIONS.values():
        await node.register(ctx, r.handle, r.va, r.length, r.pages, r.ptag, read=r.read, write_=r.write)
    await node.connect(ctx, VI, PEER, PEER_VI, PTAG, desc_area=DESC_AREA)
    for vi, (peer, peer_vi) in OTHER_CONNECTIONS.items():
        await node.connect(ctx, vi, peer, peer_vi, PTAG)


def flags(first, last, imm=False):
    return HEADER.encode_bits("FLAGS", FIRST=int(first), LAST=int(last), IMMEDIATE=int(imm))


def frame_fields(**kw):
    """Header fields of a frame from the peer's VI to the VI under test (``OP`` and others in kw)."""
    f = dict(
        DST_MAC=via_frame.mac_field(ME),
        SRC_MAC=via_frame.mac_field(PEER),
        ETHERTYPE=via_frame.ETHERTYPE_FIELD,
        FLAGS=0,
        SRC_VI=PEER_VI,
        DST_VI=VI,
        PSN=0,
        ACK_PSN=0,
        MSG_LENGTH=0,
        OFFSET=0,
        PAYLOAD_LENGTH=0,
        NAK_CODE=0,
        REMOTE_VA=0,
        REMOTE_HANDLE=0,
        IMMEDIATE_DATA=0,
    )
    f.update(kw)
    return f


COUNTERS = [name for name, _ in regmap.VIA_COUNTERS]


async def all_counters(ctx, node):
    return {name: await node.counter(ctx, name) for name in COUNTERS}
