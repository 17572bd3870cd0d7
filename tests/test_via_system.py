"""VIA end to end: two simulated nodes (real RTL in Verilator, real firmware on each VexRiscv)
joined by the simulated GbE switch, driven through the Python VIPL library over the host bridges.

Every operation with data checked byte for byte over scattered, unaligned segments; protection
errors that write nothing; queue and frame error handling with counters; and, in
test_via_reliability.py, exactly-once in-order delivery under injected loss and corruption."""

import pytest
from support.via_system import (
    Pair,
    check_wake_cq_ping_pong,
    payload,
    read_pieces,
    release,
    segments,
    session,
    split,
    write_pieces,
)

from numavia import vipl
from numavia.base import regmap, via_frame
from numavia.base.via_descriptor import CONTROL_OP
from numavia.bridge import BridgeError
from numavia.vipl import Descriptor, ViplError

pytestmark = pytest.mark.slow

SIZES = [0, 1, 4, 63, 64, 1500, 1501, 64 * 1024]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with session(tmp_path_factory, "via") as s:
        yield Pair(s)


def test_send_receive_every_size_scattered_and_unaligned(pair):
    vi0, vi1 = pair.connect()
    b0, b1 = pair.buffers
    for i, size in enumerate(SIZES):
        data = payload(size, i)
        send_pieces = split(1 + i, size, 3, i)
        recv_pieces = split(100_003, size + 5, 4, 50 + i)
        write_pieces(b0, send_pieces, data)
        r = vi1.post_recv(Descriptor(segments=segments(b1, recv_pieces)))
        vi0.post_send(Descriptor(segments=segments(b0, send_pieces), immediate=0xABC0 + i))
        got, sent = vi1.recv_wait(), vi0.send_wait()
        assert got is r and got.errors == [] and got.completed_op == "RECEIVE"
        assert got.length == size and got.immediate_data == 0xABC0 + i
        assert read_pieces(b1, recv_pieces)[:size] == data, f"{size} bytes"
        assert sent.errors == [] and sent.completed_op == "SEND" and sent.length == size
    release(pair, vi0, vi1)


def test_rdma_write_every_size_with_and_without_immediate(pair):
    vi0, vi1 = pair.connect()
    b0, b1 = pair.buffers
    assert vi0.remote_buffer.handle == b1.handle and vi0.remote_buffer.va == b1.va  # exchanged at connect
    for i, size in enumerate(SIZES):
        data = payload(size, 10 + i)
        pieces = split(5 + i, size, 3, i)
        write_pieces(b0, pieces, data)
        remote_offset = 3 + 4099 * i
        immediate = i % 2 == 1
        if immediate:
            r = vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, 16)]))
        d = vi0.post_send(
            Descriptor(
                CONTROL_OP.RDMA_WRITE,
                segments(b0, pieces),
                remote_va=vi0.remote_buffer.va + remote_offset,
                remote_handle=vi0.remote_buffer.handle,
                immediate=0x5000 + i if immediate else None,
            )
        )
        done = vi0.send_wait()
        assert done is d and done.errors == [] and done.completed_op == "RDMA_WRITE" and done.length == size
        if immediate:
            got = vi1.recv_wait()
            assert got is r and got.completed_op == "REMOTE_RDMA_WRITE" and got.immediate_data == 0x5000 + i
        assert b1.read(size, remote_offset) == data, f"{size} bytes"
    release(pair, vi0, vi1)


def test_rdma_read_every_size(pair):
    vi0, vi1 = pair.connect()
    b0, b1 = pair.buffers
    for i, size in enumerate(SIZES):
        data = payload(size, 20 + i)
        remote_offset = 1 + 4097 * i
        b1.write(data, remote_offset)
        pieces = split(2 + i, size, 3, 7 + i)
        d = vi0.post_send(
            Descriptor(
                CONTROL_OP.RDMA_READ,
                segments(b0, pieces),
                remote_va=vi0.remote_buffer.va + remote_offset,
                remote_handle=vi0.remote_buffer.handle,
            )
        )
        done = vi0.send_wait()
        assert done is d and done.errors == [] and done.completed_op == "RDMA_READ" and done.length == size
        assert read_pieces(b0, pieces) == data, f"{size} bytes"
    assert pair.counters(1)["RX_PROTECTION"] == 0
    release(pair, vi0, vi1)


def test_protection_errors_write_nothing_and_other_vis_keep_working(pair):
    nic0, nic1 = pair.nics
    b0, b1 = pair.buffers
    foreign = nic1.alloc(4096)
    nic1.register(foreign, nic1.create_ptag(), rdma_write=True, rdma_read=True)  # another tag
    foreign_local = nic0.alloc(4096)
    nic0.register(foreign_local, nic0.create_ptag())  # node 0, another tag
    no_rights = nic1.alloc(4096)
    nic1.register(no_rights, pair.ptags[1])  # no RDMA rights
    good0, good1 = pair.connect()
    unused_handle = nic1.attributes["att_regions"] - 1
    cases = [
        ("write", "bad memory handle", b1.va, unused_handle),
        ("write", "another protection tag", foreign.va, foreign.handle),
        ("write", "RDMA write disabled", no_rights.va, no_rights.handle),
        ("write", "past the region", b1.va + b1.length - 8, b1.handle),
        ("read", "RDMA read disabled", no_rights.va, no_rights.handle),
        ("read", "before the region", b1.va - 4, b1.handle),
    ]

    def around(va):
        """The remote bytes an access at `va` could reach, and some around them."""
        for buf in (b1, foreign, no_rights):
            if buf.va - 64 <= va < buf.va + buf.length:
                offset = max(0, min(va - buf.va - 64, buf.length - 256))
                return buf.read(256, offset)
        raise AssertionError(f"{va:#x} is in no buffer")

    for n, (op, what, remote_va, remote_handle) in enumerate(cases):
        vi0, vi1 = pair.connect()
        before = around(remote_va)
        local_before = b0.read(64)
        b0.write(payload(16, n))
        refused = pair.counters(1)["RX_PROTECTION"]
        d = vi0.post_send(
            Descriptor(
                CONTROL_OP.RDMA_WRITE if op == "write" else CONTROL_OP.RDMA_READ,
                [(b0.va + 32, b0.handle, 16)],
                remote_va=remote_va,
                remote_handle=remote_handle,
            )
        )
        done = vi0.send_wait()
        assert done is d and done.errors == ["RDMA_PROTECTION_ERROR"], what
        assert vi0.state == "ERROR", what
        assert pair.counters(1)["RX_PROTECTION"] == refused + 1, what
        assert around(remote_va) == before, f"{what}: memory changed"
        if op == "read":
            assert b0.read(64)[32:48] == local_before[32:48], f"{what}: local memory changed"
        # Another VI pair keeps working while this one is in error.
        data = payload(100, 100 + n)
        b0.write(data, 1000)
        good1.post_recv(Descriptor(segments=[(b1.va + 2000, b1.handle, 100)]))
        good0.post_send(Descriptor(segments=[(b0.va + 1000, b0.handle, 100)]))
        assert good1.recv_wait().errors == [] and b1.read(100, 2000) == data
        good0.send_wait()
        release(pair, vi0, vi1)

    # A bad local handle fails only the descriptor: nothing is sent and the VI stays connected.
    vi0, vi1 = pair.connect()
    frames = pair.counters(0)["TX_FRAMES"]
    with pytest.raises(ViplError, match="memory handle .* is not registered"):  # the host library refuses it ...
        vi0.post_send(Descriptor(segments=[(b0.va, unused_handle, 8)]))
    with pytest.raises(ViplError, match="INVALID_PTAG"):
        vi0.post_send(Descriptor(segments=[(foreign_local.va, foreign_local.handle, 8)]))
    with pytest.raises(ViplError, match="outside region"):
        vi0.post_send(Descriptor(segments=[(b0.va + b0.length - 4, b0.handle, 8)]))
    assert pair.nics[0].vi_reg(vi0.number, "QUEUE_STATUS") == 0  # ... before the card sees it
    d = vi0.post_send(Descriptor(segments=[(b0.va, unused_handle, 8)]), check=False)  # the card refuses too
    assert vi0.send_wait().errors == ["PROTECTION_ERROR"] and vi0.state == "CONNECTED"
    assert pair.counters(0)["TX_FRAMES"] == frames
    vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, 8)]))
    vi0.post_send(Descriptor(segments=[(b0.va, b0.handle, 8)]))
    assert vi1.recv_wait().length == 8 and vi0.send_wait().errors == []
    del d
    release(pair, vi0, vi1, good0, good1)


def test_receive_queue_empty_fails_the_send_and_is_counted(pair):
    vi0, vi1 = pair.connect()
    b0, _ = pair.buffers
    empty = pair.counters(1)["RX_RQ_EMPTY"]
    vi0.post_send(Descriptor(segments=[(b0.va, b0.handle, 8)]))
    vi0.post_send(Descriptor(segments=[(b0.va, b0.handle, 8)]))
    first, second = vi0.send_wait(), vi0.send_wait()
    assert first.errors == ["REMOTE_DESCRIPTOR_ERROR"] and second.errors == ["FLUSHED"]
    assert vi0.state == "ERROR" and pair.counters(1)["RX_RQ_EMPTY"] == empty + 1
    release(pair, vi0, vi1)
    # Nothing hangs: the next connection works.
    vi0, vi1 = pair.connect()
    vi1.post_recv(Descriptor(segments=[(pair.buffers[1].va, pair.buffers[1].handle, 8)]))
    vi0.post_send(Descriptor(segments=[(b0.va, b0.handle, 8)]))
    assert vi1.recv_wait().length == 8
    release(pair, vi0, vi1)


def test_completion_queues_and_overflow(pair):
    nic0, nic1 = pair.nics
    b0, b1 = pair.buffers
    cq0, cq1 = nic0.create_cq(16), nic1.create_cq(2)
    vi0, vi1 = pair.connect(send_cq=(cq0, None), recv_cq=(cq0, cq1))
    overflows = pair.counters(1)["CQ_OVERFLOWS"]
    recvs = [vi1.post_recv(Descriptor(segments=[(b1.va + 64 * i, b1.handle, 64)])) for i in range(4)]
    for i in range(4):
        b0.write(bytes([i]) * 64, 64 * i)
        vi0.post_send(Descriptor(segments=[(b0.va + 64 * i, b0.handle, 64)]))
    # The descriptors all complete although the 2-entry queue loses two entries.
    for i, r in enumerate(recvs):
        assert vi1.recv_wait() is r and b1.read(64, 64 * i) == bytes([i]) * 64
    for _ in range(4):
        assert vi0.send_wait().errors == []
    assert pair.counters(1)["CQ_OVERFLOWS"] == overflows + 2
    assert vipl.VipCQWait(cq1) == (vi1, True)
    assert vipl.VipCQWait(cq1) == (vi1, True)
    with pytest.raises(ViplError, match="overflowed"):
        vipl.VipCQDone(cq1)
    # The sender's queue saw its four sends, in order, with the VI and queue named.
    assert [vipl.VipCQWait(cq0) for _ in range(4)] == [(vi0, False)] * 4
    assert vipl.VipCQDone(cq0) is None
    release(pair, vi0, vi1)


def test_ping_pong_agents_sleep_on_their_receive_completion_queues(pair):
    """The firmware's send/receive ping-pong awaiting each receive through its completion queue's
    notification instead of polling the descriptor: the firmware arms the queue, the card fires it
    on the receive's entry (bare metal polls CQ_NOTIFIED; under Zephyr it is the interrupt,
    test_zephyr_image.py)."""
    check_wake_cq_ping_pong(pair, iterations=6)


def raw_frame(nic, node, data):
    """Send ``data`` (at most 64 bytes) as a whole Ethernet frame from ``nic``'s card."""
    data = bytes(data)
    words = [int.from_bytes(data[i : i + 4].ljust(4, b"\0"), "little") for i in range(0, len(data), 4)]
    ctrl = regmap.VIA.register("MGMT_TX_CTRL")
    nic.bridge.write(nic.card_base + regmap.CARD.element_address("via", "MGMT_TX_DATA", 0, "WORD"), words)
    nic.via_reg(
        "MGMT_TX_CTRL",
        node << ctrl.field("DST_NODE").lsb | len(data) << ctrl.field("LENGTH").lsb | ctrl.field("RAW").mask,
    )
    while nic.via_reg("MGMT_TX_STATUS"):
        pass


def test_malformed_and_misaddressed_frames_are_counted_and_dropped(pair):
    vi0, vi1 = pair.connect()
    idle_vi = max(set(range(pair.nics[1].attributes["vi_count"])) - set(pair.nics[1].vis))
    header = dict(
        DST_MAC=via_frame.mac_field(1),
        SRC_MAC=via_frame.mac_field(0),
        ETHERTYPE=via_frame.ETHERTYPE_FIELD,
        OP=via_frame.OP.SEND,
        SRC_VI=vi0.number,
        DST_VI=vi1.number,
        PSN=0,
        MSG_LENGTH=8,
        PAYLOAD_LENGTH=8,
        FLAGS=via_frame.HEADER.encode_bits("FLAGS", FIRST=1, LAST=1),
    )
    cases = [
        ("RX_NOT_FOR_US", dict(ETHERTYPE=0x0008)),  # IPv4
        ("RX_MALFORMED", dict(OP=15)),  # no such operation
        ("RX_MALFORMED", dict(PAYLOAD_LENGTH=200)),  # more payload than the frame holds
        ("RX_MALFORMED", dict(OFFSET=4)),  # past the end of its message
        ("RX_NO_VI", dict(DST_VI=200)),  # no such VI
        ("RX_NO_VI", dict(DST_VI=idle_vi)),  # a VI nobody connected
        ("RX_NO_VI", dict(SRC_VI=vi0.number + 1)),  # not the VI's peer
    ]
    for counter, change in cases:
        before = pair.counters(1)
        raw_frame(pair.nics[0], 1, via_frame.HEADER.encode(**{**header, **change}) + b"ABCDEFGH")
        for _ in range(200):
            if pair.counters(1)[counter] != before[counter]:
                break
        # Read again: a burst reads the counters one by one while the card runs, so one that saw
        # the verdict may have read RX_FRAMES before the frame's commit, which comes first.
        after = pair.counters(1)
        assert after[counter] == before[counter] + 1, (counter, change)
        assert after["RX_FRAMES"] == before["RX_FRAMES"] + 1
    # A runt: an Ethernet header and nothing else (the MAC pads it with zeros), refused as malformed.
    before = pair.counters(1)["RX_MALFORMED"]
    raw_frame(pair.nics[0], 1, via_frame.HEADER.encode(**header)[: via_frame.ETH_HEADER_SIZE])
    for _ in range(200):
        if pair.counters(1)["RX_MALFORMED"] == before + 1:
            break
    assert pair.counters(1)["RX_MALFORMED"] == before + 1
    # None of it reached the VI: its first real message is still sequence number 0.
    b0, b1 = pair.buffers
    assert pair.nics[1].vi_reg(vi1.number, "RX_PSN") == 0
    vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, 8)]))
    b0.write(b"realdata")
    vi0.post_send(Descriptor(segments=[(b0.va, b0.handle, 8)]))
    assert vi1.recv_wait().length == 8 and b1.read(8) == b"realdata"
    release(pair, vi0, vi1)


def test_bad_doorbells_descriptors_and_full_queues(pair):
    nic0, nic1 = pair.nics
    vi0, vi1 = pair.connect()
    b0, b1 = pair.buffers
    refused = pair.counters(0)["DOORBELLS_REFUSED"]
    vi0.ring("SQ_DOORBELL", 0x1000_0000)  # not host memory
    vi0.ring("SQ_DOORBELL", b0.pa(0) & ~0xF | 4)  # not 16-byte aligned
    assert pair.counters(0)["DOORBELLS_REFUSED"] == refused + 2
    assert nic0.vi_reg(vi0.number, "QUEUE_STATUS") == 0

    # Descriptor areas: the firmware gave vi0 the area VIPL allocated for its rings; a descriptor
    # anywhere else - another VI's ring, a data buffer - is refused even through vi0's own page.
    base, size = nic0.vi_reg(vi0.number, "DESC_BASE"), nic0.vi_reg(vi0.number, "DESC_SIZE")
    assert base == vi0.desc_pages[0] and base < vi0.recv_queue.base < base + size
    other = nic0.create_vi(vi0.ptag)
    nic0.memory.write(other.send_queue.base, Descriptor(segments=[(b0.va, b0.handle, 8)]).encode())
    vi0.ring("SQ_DOORBELL", other.send_queue.base)
    vi0.ring("RQ_DOORBELL", b0.pa(0) & ~0xF)
    assert pair.counters(0)["DOORBELLS_REFUSED"] == refused + 4
    assert nic0.vi_reg(vi0.number, "QUEUE_STATUS") == 0 and nic0.vi_reg(other.number, "QUEUE_STATUS") == 0
    vipl.VipDestroyVi(other)
    assert nic0.vi_reg(other.number, "DESC_SIZE") == 0
    refused += 2

    # Doorbell pages: each VI's own 4 KiB page. The page of a VI the card does not have, and
    # any other word of a page, answer a bus error and are counted; nothing is posted.
    assert vi0.doorbell_page == nic0.card_base + regmap.CARD.element_base("doorbell", "VI", vi0.number)
    missing = nic0.doorbell_page(nic0.attributes["vi_count"])
    doorbells = [r.offset for r in regmap.DOORBELL.array("VI").registers]
    state_offset = regmap.VIA.array("VI").register("STATE").offset  # no doorbell: where STATE sits in a VI
    assert state_offset not in doorbells
    for address in [missing + offset for offset in doorbells] + [vi0.doorbell_page + state_offset]:
        with pytest.raises(BridgeError, match="bus error"):
            nic0.bridge.write(address, b0.pa(0))
    assert pair.counters(0)["DOORBELLS_REFUSED"] == refused + len(doorbells) + 3
    assert nic0.vi_reg(vi0.number, "QUEUE_STATUS") == 0 and vi0.state == "CONNECTED"

    # Too many data segments: a format error, and the VI carries on.
    d = vi0.post_send(Descriptor(segments=[(b0.va, b0.handle, 1)] * (nic0.attributes["max_segments"] + 1)))
    assert vi0.send_wait() is d and d.errors == ["FORMAT_ERROR"] and vi0.state == "CONNECTED"

    # A full receive queue: the library refuses, so does the card, and nothing posted is lost.
    depth = nic1.attributes["queue_depth"]
    recvs = [vi1.post_recv(Descriptor(segments=[(b1.va + 16 * i, b1.handle, 16)])) for i in range(depth)]
    with pytest.raises(ViplError, match="ERROR_RESOURCE"):
        vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, 16)]))
    refused = pair.counters(1)["DOORBELLS_REFUSED"]
    vi1.ring("RQ_DOORBELL", recvs[0].address)
    assert pair.counters(1)["DOORBELLS_REFUSED"] == refused + 1
    assert nic1.vi_reg(vi1.number, "QUEUE_STATUS") >> 16 == depth
    for i in range(depth):
        b0.write(i.to_bytes(2, "little") * 8, 16 * i)
        vi0.post_send(Descriptor(segments=[(b0.va + 16 * i, b0.handle, 16)]))
        assert vi1.recv_wait() is recvs[i]
        vi0.send_wait()
    assert all(b1.read(16, 16 * i) == i.to_bytes(2, "little") * 8 for i in range(depth))
    release(pair, vi0, vi1)


def test_disconnect_flushes_posted_descriptors(pair):
    vi0, vi1 = pair.connect()
    b1 = pair.buffers[1]
    posted = [vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, 8)])) for _ in range(3)]
    vi1.disconnect()
    assert all(d.errors == ["FLUSHED"] for d in posted)
    assert vi1.state == "IDLE"
    release(pair, vi0)
    vipl.VipDestroyVi(vi1)


def test_jumbo_frames(pair):
    nic0, nic1 = pair.nics
    vi0, vi1 = pair.connect()
    b0, b1 = pair.buffers
    for nic in (nic0, nic1):
        nic.via_reg("MTU", via_frame.MTU_JUMBO)
    try:
        size = 30_000
        data = payload(size, 77)
        b0.write(data)
        frames = pair.counters(1)["RX_FRAMES"]
        vi1.post_recv(Descriptor(segments=[(b1.va, b1.handle, size)]))
        vi0.post_send(Descriptor(segments=[(b0.va, b0.handle, size)]))
        assert vi1.recv_wait().length == size and b1.read(size) == data
        vi0.send_wait()
        data_frames = -(-size // via_frame.payload_per_frame(via_frame.MTU_JUMBO))
        assert pair.counters(1)["RX_FRAMES"] - frames == data_frames  # 4 frames of up to 8958 bytes
    finally:
        for nic in (nic0, nic1):
            nic.via_reg("MTU", via_frame.MTU_DEFAULT)
    release(pair, vi0, vi1)


def test_prebuilt_rdma_write_is_posted_again_by_its_changes(pair):
    """A prebuilt RDMA write (VIPL's low-latency post path) posted four times with new lengths:
    every byte arrives; a post while it is in flight, and one after the VIs were disconnected, are
    refused with nothing sent."""
    vi0, vi1 = pair.connect()
    b0, b1 = pair.buffers
    remote = vi0.remote_buffer
    p = vipl.VipPrebuild(
        vi0,
        Descriptor(
            CONTROL_OP.RDMA_WRITE, [(b0.va, b0.handle, 4)], remote_va=remote.va + 64, remote_handle=remote.handle
        ),
    )
    for i, size in enumerate((4, 4, 100, 1501)):
        data = payload(size, 40 + i)
        b0.write(data)
        d = vipl.VipPostPrebuilt(p, length=size)
        with pytest.raises(ViplError, match="still posted"):
            vipl.VipPostPrebuilt(p)
        done = vi0.send_wait()
        assert done is d and done.errors == [] and done.completed_op == "RDMA_WRITE" and done.length == size
        assert b1.read(size, 64) == data, f"{size} bytes"
    release(pair, vi0, vi1)
    doorbells = pair.nics[0].counters()["DOORBELLS_REFUSED"], pair.nics[0].vi_reg(vi0.number, "QUEUE_STATUS")
    with pytest.raises(ViplError, match="build it again") as stale:
        vipl.VipPostPrebuilt(p)
    assert stale.value.result == "STALE"
    assert (pair.nics[0].counters()["DOORBELLS_REFUSED"], pair.nics[0].vi_reg(vi0.number, "QUEUE_STATUS")) == doorbells
