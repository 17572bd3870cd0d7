"""VIPL-style host library for the card's VIA engine, over a node's host bridge.

The calls follow the VI Provider Library: ``VipOpenNic``, ``VipCreatePtag``, ``VipRegisterMem``,
``VipCreateCQ``, ``VipCreateVi``, ``VipConnectRequest``/``Wait``/``Accept``/``Reject``,
``VipDisconnect``, ``VipPostSend``/``Recv``, ``VipSendDone``/``Wait``, ``VipRecvDone``/``Wait``,
``VipCQDone``/``Wait``. Data path calls touch only host memory and the VI's doorbell page
(``Vi.doorbell_page``: the one 4 KiB page of the card's window a driver maps into the VI owner's
process; it holds that VI's doorbells and nothing else), as a user-level VIPL does; set-up calls go
to the card's firmware through the mailbox (``numavia.base.via_mailbox``). On top, :class:`Nic`
and :class:`Vi` offer Pythonic methods.

Errors raise :class:`ViplError` (with the VIP result name), never return codes.
"""

from __future__ import annotations  # the classes refer to each other (Nic, CQ, Vi)

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeVar, overload

from numavia.base import regmap, via_att, via_descriptor, via_mailbox
from numavia.base.errors import NumaviaError
from numavia.base.params import CARD_BASE
from numavia.base.via_descriptor import CONTROL_OP, CONTROL_SEGMENT, CQ_ENTRY
from numavia.bridge import HostBridge
from numavia.hostmem import AddressSpace, Buffer, PhysicalMemory

VIA = regmap.VIA
_VI = VIA.array("VI")
_CQ = VIA.array("CQ")
_DOORBELLS = regmap.DOORBELL.array("VI")
RESULT = via_mailbox.RESULT
NONE = via_mailbox.NONE
_STATUS = CONTROL_SEGMENT.field("STATUS")
_SLOT = 256  # bytes per descriptor slot in a VI's descriptor pages
#: Prebuilt descriptors (VipPrebuild) a VI holds at once, each in a slot of its own after the rings.
PREBUILT_SLOTS = 4
_LENGTH_OFFSET = via_descriptor.DATA_SEGMENT.field("LENGTH").offset
_STATES = {value: name for name, value in regmap.VI_STATES}
_T = TypeVar("_T")


class ViplError(NumaviaError):
    """A VIPL call failed; ``result`` is the VIP result name (``"INVALID_PARAMETER"``, ...)."""

    def __init__(self, result: str, message: str) -> None:
        self.result = result
        super().__init__(f"{message}: VIP_{result}")


@dataclass
class MemAttributes:
    ptag: int
    enable_rdma_write: bool = False
    enable_rdma_read: bool = False


@dataclass
class RemoteBuffer:
    """An RDMA buffer a peer offered while connecting."""

    va: int
    handle: int
    length: int


@dataclass
class Descriptor:
    """What the host posts: an operation on a list of ``(va, handle, length)`` data segments.

    After completion ``status``, ``length`` and ``immediate_data`` hold what the card wrote;
    ``errors`` names the error bits that are set.
    """

    op: int = CONTROL_OP.SENDRECV
    segments: list[tuple[int, int | None, int]] = field(default_factory=list)  # handle None: not registered
    immediate: int | None = None
    remote_va: int = 0
    remote_handle: int = 0
    status: int = 0
    length: int = 0
    immediate_data: int = 0
    address: int | None = None  # physical address while posted

    def encode(self) -> bytes:
        return via_descriptor.encode_descriptor(
            self.op, self.segments, immediate=self.immediate, remote_va=self.remote_va, remote_handle=self.remote_handle
        )

    @property
    def done(self) -> bool:
        return bool(self.status & _STATUS.bit("DONE").mask)

    @property
    def errors(self) -> list[str]:
        return [name for name, _ in via_descriptor.STATUS_ERRORS if self.status & _STATUS.bit(name).mask]

    @property
    def completed_op(self) -> str | None:
        return via_descriptor.STATUS_OP.name_of((self.status & _STATUS.bit("OP").mask) >> _STATUS.bit("OP").lsb)


def send_descriptor(
    buffer: Buffer, length: int | None = None, offset: int = 0, *, immediate: int | None = None
) -> Descriptor:
    return Descriptor(
        CONTROL_OP.SENDRECV,
        [(buffer.va + offset, buffer.handle, buffer.length - offset if length is None else length)],
        immediate=immediate,
    )


class _Ring:
    """Descriptor slots of one work queue, ``depth`` slots from ``base`` in the VI's descriptor area."""

    def __init__(self, base: int, depth: int) -> None:
        self.base = base
        self.depth = depth
        self.next = 0
        self.posted: list[Descriptor] = []  # in completion order

    def slot(self) -> int:
        address = self.base + (self.next % self.depth) * _SLOT
        self.next += 1
        return address


class Nic:
    """An open NIC: the card of one node, reached through its host bridge (``VipOpenNic``)."""

    def __init__(self, bridge: HostBridge, *, card_base: int = CARD_BASE, seed: int = 1, timeout: float = 60.0) -> None:
        self.bridge = bridge
        self.card_base = card_base
        self.timeout = timeout
        if self._reg(regmap.CARD.address("ctrl", "ID")) != regmap.CARD_ID:
            raise ViplError("ERROR", f"no Numavia card at {card_base:#x}")
        self.node_id = self._reg(regmap.CARD.address("ctrl", "NODE_ID"))
        self.attributes = {
            r.name.lower(): self.via_reg(r.name)
            for r in VIA.registers
            if r.name
            in (
                "VI_COUNT",
                "CQ_COUNT",
                "QUEUE_DEPTH",
                "MAX_SEGMENTS",
                "MAX_MTU",
                "ATT_REGIONS",
                "ATT_PAGES",
                "HOST_MEM_BASE",
                "HOST_MEM_SIZE",
                "WINDOW",
                "MTU",
            )
        }
        self.memory = PhysicalMemory(
            bridge, self.attributes["host_mem_base"], self.attributes["host_mem_size"], seed=seed + self.node_id
        )
        self.space = AddressSpace(self.memory)
        self._scratch = self.memory.pages(1)[0]  # page lists for registrations
        self._mbox_seq = VIA.register("MBOX_STATUS").field("SEQ").extract(self.via_reg("MBOX_STATUS"))
        self.vis: dict[int, Vi] = {}
        #: memory handle -> (va, length, ptag) of what this host registered
        self.regions: dict[int, tuple[int, int, int]] = {}
        #: Moves on at every deregistration, disconnection and VI destruction: a prebuilt descriptor
        #: built before one of them may name what is gone, and is refused as STALE.
        self.generation = 0
        self._wait_firmware()

    # --- registers and the mailbox --------------------------------------------------------------

    @overload
    def _reg(self, offset: int, value: None = None) -> int: ...
    @overload
    def _reg(self, offset: int, value: int) -> None: ...

    def _reg(self, offset: int, value: int | None = None) -> int | None:
        if value is None:
            return self.bridge.read(self.card_base + offset)
        self.bridge.write(self.card_base + offset, value)
        return None

    @overload
    def card_reg(self, block: str, name: str, value: None = None) -> int: ...
    @overload
    def card_reg(self, block: str, name: str, value: int) -> None: ...

    def card_reg(self, block: str, name: str, value: int | None = None) -> int | None:
        """Read (or write ``value`` to) register ``name`` of the card's ``block`` (``regmap.CARD``)."""
        return self._reg(regmap.CARD.address(block, name), value)

    @overload
    def via_reg(self, name: str, value: None = None) -> int: ...
    @overload
    def via_reg(self, name: str, value: int) -> None: ...

    def via_reg(self, name: str, value: int | None = None) -> int | None:
        return self.card_reg("via", name, value)

    @overload
    def vi_reg(self, vi: int, name: str, value: None = None) -> int: ...
    @overload
    def vi_reg(self, vi: int, name: str, value: int) -> None: ...

    def vi_reg(self, vi: int, name: str, value: int | None = None) -> int | None:
        return self._reg(regmap.CARD.element_address("via", "VI", vi, name), value)

    def doorbell_page(self, vi: int) -> int:
        """Bus address of VI ``vi``'s doorbell page: what a driver maps into the VI owner's process."""
        return self.card_base + regmap.CARD.element_base("doorbell", "VI", vi)

    @overload
    def cq_reg(self, cq: int, name: str, value: None = None) -> int: ...
    @overload
    def cq_reg(self, cq: int, name: str, value: int) -> None: ...

    def cq_reg(self, cq: int, name: str, value: int | None = None) -> int | None:
        return self._reg(regmap.CARD.element_address("via", "CQ", cq, name), value)

    def counters(self) -> dict[str, int]:
        base = self.card_base + regmap.CARD.address("via", regmap.VIA_COUNTERS[0][0])
        values = self.bridge.read(base, len(regmap.VIA_COUNTERS))
        return {name: v for (name, _), v in zip(regmap.VIA_COUNTERS, values)}

    def stamps(self) -> dict[str, int]:
        """The VIA engine's latency stamps (``regmap.VIA_STAMPS``): card cycles of the last events."""
        base = self.card_base + regmap.CARD.address("via", regmap.VIA_STAMPS[0][0])
        values = self.bridge.read(base, len(regmap.VIA_STAMPS))
        return {name: v for (name, _), v in zip(regmap.VIA_STAMPS, values)}

    def command(
        self, name: str, *, allow: Iterable[str] = ("SUCCESS",), extra_words: dict[int, int] | None = None, **args: int
    ) -> tuple[str, dict[str, Any]]:
        """Run mailbox command ``name``; returns ``(result name, results dict)``. ``extra_words``
        ({index: value}) fills argument words past the command's own (push-pull's BENCH); the
        results dict then also holds every word as ``words``."""
        cmd = via_mailbox.command(name)
        words = [0] * 16
        for arg, value in args.items():
            words[cmd.args.index(arg.upper())] = value & 0xFFFF_FFFF
        for index, value in (extra_words or {}).items():
            if not len(cmd.args) <= index < 16:
                raise ValueError(f"{name}: word {index} is not past the command's arguments")
            words[index] = value & 0xFFFF_FFFF
        data = regmap.CARD.element_address("via", "MBOX_DATA", 0, "WORD")
        self.bridge.write(self.card_base + data, words)
        self._mbox_seq = (self._mbox_seq + 1) & 0xFFFF
        seq_shift = VIA.register("MBOX_CMD").field("SEQ").lsb
        self.via_reg("MBOX_CMD", self._mbox_seq << seq_shift | cmd.code)
        deadline = time.monotonic() + self.timeout
        while True:
            status = self.via_reg("MBOX_STATUS")
            if status >> seq_shift == self._mbox_seq:
                break
            if time.monotonic() > deadline:
                raise ViplError("TIMEOUT", f"node {self.node_id}: the firmware did not answer {name}")
        result = RESULT.name_of(status & 0xFFFF) or f"UNKNOWN_{status & 0xFFFF}"
        values = self.bridge.read(self.card_base + data, 16)
        if result not in allow:
            raise ViplError(result, f"node {self.node_id}: {name}")
        results: dict[str, Any] = {r.lower(): values[i] for i, r in enumerate(cmd.results)}
        if extra_words is not None:
            results["words"] = list(values)
        return result, results

    def _wait_firmware(self) -> None:
        self.command("NOP")

    # --- Pythonic wrappers -----------------------------------------------------------------------

    def alloc(self, length: int, *, offset: int = 0, contiguous: bool = False) -> Buffer:
        return self.space.alloc(length, offset=offset, contiguous=contiguous)

    def create_ptag(self) -> int:
        return VipCreatePtag(self)

    def register(self, buffer: Buffer, ptag: int, *, rdma_write: bool = False, rdma_read: bool = False) -> int:
        buffer.handle = VipRegisterMem(
            self, buffer.va, buffer.length, MemAttributes(ptag, rdma_write, rdma_read), buffer=buffer
        )
        return buffer.handle

    def create_cq(self, entries: int = 16) -> CQ:
        return VipCreateCQ(self, entries)

    def create_vi(self, ptag: int, *, send_cq: CQ | None = None, recv_cq: CQ | None = None) -> Vi:
        return VipCreateVi(self, ptag, send_cq=send_cq, recv_cq=recv_cq)


# --- VIPL ------------------------------------------------------------------------------------------


def VipOpenNic(bridge: HostBridge, **kwargs: Any) -> Nic:
    return Nic(bridge, **kwargs)


def VipCloseNic(nic: Nic) -> None:
    nic.bridge.close()


def VipQueryNic(nic: Nic) -> dict[str, int]:
    return dict(nic.attributes, node_id=nic.node_id)


def VipCreatePtag(nic: Nic) -> int:
    return nic.command("CREATE_PTAG")[1]["ptag"]


def VipDestroyPtag(nic: Nic, ptag: int) -> None:
    nic.command("DESTROY_PTAG", ptag=ptag)


def VipRegisterMem(nic: Nic, va: int, length: int, attributes: MemAttributes, *, buffer: Buffer) -> int:
    """Register ``length`` bytes at ``va`` (held by ``buffer``); returns the memory handle."""
    if not (buffer.va <= va and va + length <= buffer.va + buffer.length):
        raise ViplError("INVALID_PARAMETER", "the range is not inside the buffer")
    first = buffer.pa(va - buffer.va)
    pages = [first] + [
        buffer.pa(((va >> via_att.PAGE_SHIFT) + i << via_att.PAGE_SHIFT) - buffer.va)
        for i in range(1, via_att.region_pages(va, length)[0])
    ]
    nic.memory.write_words(nic._scratch, pages)
    rights = via_att.L1_ENTRY.encode_bits(
        "ATTRIBUTES", RDMA_READ=int(attributes.enable_rdma_read), RDMA_WRITE=int(attributes.enable_rdma_write)
    )
    _, res = nic.command(
        "REGISTER_MEM",
        va_lo=va,
        va_hi=va >> 32,
        length=length,
        ptag=attributes.ptag,
        attributes=rights,
        page_list=nic._scratch,
        page_count=len(pages),
    )
    nic.regions[res["handle"]] = (va, length, attributes.ptag)
    return res["handle"]


def VipDeregisterMem(nic: Nic, handle: int) -> None:
    nic.command("DEREGISTER_MEM", handle=handle)
    nic.regions.pop(handle, None)
    nic.generation += 1


class CQ:
    def __init__(self, nic: Nic, entries: int) -> None:
        self.nic, self.entries = nic, entries
        pages = (entries * CQ_ENTRY.size + via_att.PAGE_SIZE - 1) // via_att.PAGE_SIZE
        self.base = nic.memory.pages(pages, contiguous=True)[0]
        nic.memory.write(self.base, bytes(entries * CQ_ENTRY.size))
        self.id = nic.command("CREATE_CQ", base=self.base, entries=entries)[1]["cq"]
        self.head = 0

    def done(self) -> tuple[Vi, bool] | None:
        return VipCQDone(self)


def VipCreateCQ(nic: Nic, entries: int) -> CQ:
    return CQ(nic, entries)


def VipDestroyCQ(cq: CQ) -> None:
    cq.nic.command("DESTROY_CQ", cq=cq.id)


def VipCQDone(cq: CQ) -> tuple[Vi, bool] | None:
    """``(vi, is_recv)`` of the next completion, or None. Raises if the queue overflowed."""
    at = cq.base + (cq.head % cq.entries) * CQ_ENTRY.size
    words = cq.nic.bridge.read(at, 2)
    entry = CQ_ENTRY.decode(words[0].to_bytes(4, "little") + words[1].to_bytes(4, "little"))
    info = CQ_ENTRY.decode_bits("INFO", entry["INFO"])
    expected_phase = 1 - (cq.head // cq.entries) % 2
    if info["PHASE"] != expected_phase:
        if cq.nic.cq_reg(cq.id, "STATUS") & 1:
            raise ViplError("ERROR_RESOURCE", f"completion queue {cq.id} overflowed")
        return None
    cq.head += 1
    cq.nic.cq_reg(cq.id, "HEAD", cq.head)
    return cq.nic.vis[info["VI"]], bool(info["RECV"])


def VipCQWait(cq: CQ, timeout: float | None = None) -> tuple[Vi, bool]:
    return _wait(lambda: VipCQDone(cq), timeout or cq.nic.timeout, f"completion queue {cq.id}")


def _descriptor_area_bytes(nic: Nic) -> int:
    """Both work queues' descriptor slots and the prebuilt descriptors': the VI's descriptor area,
    the only memory its doorbells may point the card at (VI ``DESC_BASE``/``DESC_SIZE``)."""
    return (2 * nic.attributes["queue_depth"] + PREBUILT_SLOTS) * _SLOT


class Vi:
    def __init__(
        self, nic: Nic, number: int, ptag: int, send_cq: CQ | None, recv_cq: CQ | None, desc_pages: list[int]
    ) -> None:
        self.nic, self.number, self.ptag = nic, number, ptag
        self.send_cq, self.recv_cq = send_cq, recv_cq
        depth = nic.attributes["queue_depth"]
        self.desc_pages = desc_pages
        self.send_queue = _Ring(desc_pages[0], depth)
        self.recv_queue = _Ring(desc_pages[0] + depth * _SLOT, depth)
        self.prebuilt: list[Prebuilt | None] = [None] * PREBUILT_SLOTS
        self.peer: tuple[int, int] | None = None  # (node, VI) once connected
        self.remote_buffer: RemoteBuffer | None = None
        #: Bus address of this VI's doorbell page (``regmap.DOORBELL_PAGE_BYTES`` bytes); the data
        #: path rings its doorbells through this page only.
        self.doorbell_page = nic.doorbell_page(number)

    def ring(self, doorbell: str, address: int) -> None:
        """Write ``address`` to ``doorbell`` (``SQ_DOORBELL``, ``SQ_REPOST`` or ``RQ_DOORBELL``) of this VI's page."""
        self.nic.bridge.write(self.doorbell_page + _DOORBELLS.register(doorbell).offset, address)

    @property
    def state(self) -> str:
        value = self.nic.vi_reg(self.number, "STATE")
        return _STATES.get(value & 3, "?")

    @property
    def error_bits(self) -> int:
        return _VI.register("STATE").field("ERROR").extract(self.nic.vi_reg(self.number, "STATE"))

    # Pythonic data path
    def post_send(self, descriptor: Descriptor, *, check: bool = True) -> Descriptor:
        VipPostSend(self, descriptor, check=check)
        return descriptor

    def post_recv(self, descriptor: Descriptor, *, check: bool = True) -> Descriptor:
        VipPostRecv(self, descriptor, check=check)
        return descriptor

    def send_wait(self, timeout: float | None = None) -> Descriptor:
        return VipSendWait(self, timeout)

    def recv_wait(self, timeout: float | None = None) -> Descriptor:
        return VipRecvWait(self, timeout)

    def disconnect(self) -> None:
        VipDisconnect(self)


def VipCreateVi(nic: Nic, ptag: int, *, send_cq: CQ | None = None, recv_cq: CQ | None = None) -> Vi:
    size = _descriptor_area_bytes(nic)
    pages = nic.memory.pages(-(-size // via_att.PAGE_SIZE), contiguous=True)
    try:
        res = nic.command(
            "CREATE_VI",
            ptag=ptag,
            send_cq=NONE if send_cq is None else send_cq.id,
            recv_cq=NONE if recv_cq is None else recv_cq.id,
            desc_base=pages[0],
            desc_size=size,
        )[1]
    except ViplError:
        nic.memory.release(pages)
        raise
    vi = Vi(nic, res["vi"], ptag, send_cq, recv_cq, pages)
    nic.vis[vi.number] = vi
    return vi


def VipDestroyVi(vi: Vi) -> None:
    vi.nic.command("DESTROY_VI", vi=vi.number)
    vi.nic.generation += 1
    vi.nic.memory.release(vi.desc_pages)
    del vi.nic.vis[vi.number]


class _BufferArgs(TypedDict):
    buf_va_lo: int
    buf_va_hi: int
    buf_handle: int
    buf_length: int


def _buffer_args(buffer: Buffer | None) -> _BufferArgs:
    if buffer is None:
        return {"buf_va_lo": 0, "buf_va_hi": 0, "buf_handle": NONE, "buf_length": 0}
    if buffer.handle is None:
        raise ViplError("INVALID_PARAMETER", "the buffer offered to the peer is not registered")
    return {
        "buf_va_lo": buffer.va,
        "buf_va_hi": buffer.va >> 32,
        "buf_handle": buffer.handle,
        "buf_length": buffer.length,
    }


def _remote_buffer(res: dict[str, int]) -> RemoteBuffer | None:
    if res["buf_handle"] == NONE:
        return None
    return RemoteBuffer(res["buf_va_lo"] | res["buf_va_hi"] << 32, res["buf_handle"], res["buf_length"])


def _wait(poll: Callable[[], _T | None], timeout: float, what: str) -> _T:
    deadline = time.monotonic() + timeout
    while True:
        value = poll()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise ViplError("TIMEOUT", f"{what} did not complete in {timeout} s")


def VipConnectRequest(
    vi: Vi,
    node: int,
    discriminator: int,
    *,
    buffer: Buffer | None = None,
    timeout: float = 30.0,
    firmware_timeout_us: int = 50_000,
) -> RemoteBuffer | None:
    """Connect ``vi`` to the VI a peer accepts on ``discriminator``; ``buffer`` (registered) is
    offered to the peer for RDMA. Returns the peer's offered :class:`RemoteBuffer` or None."""
    connect_start(vi, node, discriminator, buffer=buffer, firmware_timeout_us=firmware_timeout_us)
    return connect_finish(vi, timeout=timeout)


def connect_start(
    vi: Vi, node: int, discriminator: int, *, buffer: Buffer | None = None, firmware_timeout_us: int = 50_000
) -> None:
    """The first half of :func:`VipConnectRequest`: the firmware starts asking the peer."""
    vi.nic.command(
        "CONNECT_REQUEST",
        vi=vi.number,
        node=node,
        discriminator=discriminator,
        timeout_us=firmware_timeout_us,
        **_buffer_args(buffer),
    )


def connect_finish(vi: Vi, *, timeout: float = 30.0) -> RemoteBuffer | None:
    """The second half of :func:`VipConnectRequest`: wait until the peer answered."""

    def status() -> dict[str, Any] | None:
        result, res = vi.nic.command("CONNECT_STATUS", vi=vi.number, allow=("SUCCESS", "NOT_DONE"))
        return None if result == "NOT_DONE" else res

    res = _wait(status, timeout, f"connection of VI {vi.number}")
    vi.peer = (res["node"], res["peer_vi"])
    vi.remote_buffer = _remote_buffer(res)
    return vi.remote_buffer


def connect_pair(
    client: Vi,
    server: Vi,
    discriminator: int,
    *,
    client_buffer: Buffer | None = None,
    server_buffer: Buffer | None = None,
    timeout: float = 30.0,
) -> tuple[RemoteBuffer | None, RemoteBuffer | None]:
    """Connect two VIs from one thread (a test or a benchmark drives both nodes): returns
    ``(buffer the server offered, buffer the client offered)``."""
    connect_start(client, server.nic.node_id, discriminator, buffer=client_buffer)
    request = VipConnectWait(server.nic, discriminator, timeout=timeout)
    VipConnectAccept(request, server, buffer=server_buffer)
    return connect_finish(client, timeout=timeout), server.remote_buffer


@dataclass
class ConnectionRequest:
    nic: Nic
    id: int
    node: int
    vi: int
    buffer: RemoteBuffer | None


def VipConnectWait(nic: Nic, discriminator: int, *, timeout: float = 30.0) -> ConnectionRequest:
    def poll() -> dict[str, Any] | None:
        result, res = nic.command("CONNECT_WAIT", discriminator=discriminator, allow=("SUCCESS", "NOT_DONE"))
        return None if result == "NOT_DONE" else res

    res = _wait(poll, timeout, f"a connection request on {discriminator}")
    return ConnectionRequest(nic, res["request"], res["node"], res["peer_vi"], _remote_buffer(res))


def VipConnectAccept(request: ConnectionRequest, vi: Vi, *, buffer: Buffer | None = None) -> None:
    request.nic.command("CONNECT_ACCEPT", request=request.id, vi=vi.number, **_buffer_args(buffer))
    vi.peer = (request.node, request.vi)
    vi.remote_buffer = request.buffer


def VipConnectReject(request: ConnectionRequest) -> None:
    request.nic.command("CONNECT_REJECT", request=request.id)


def VipDisconnect(vi: Vi) -> None:
    vi.nic.command("DISCONNECT", vi=vi.number)
    vi.nic.generation += 1
    vi.peer = None
    for ring in (vi.send_queue, vi.recv_queue):
        for d in ring.posted:  # the engine flushed them
            _read_back(vi.nic, d)
        ring.posted.clear()


def _check_segments(vi: Vi, descriptor: Descriptor) -> None:
    """Refuse, before the card sees it, a local segment outside what this host registered for the
    VI's protection tag (the card checks again: this only catches the mistake earlier)."""
    for i, (va, handle, length) in enumerate(descriptor.segments):
        region = None if handle is None else vi.nic.regions.get(handle)
        if region is None:
            raise ViplError(
                "INVALID_PARAMETER", f"segment {i}: memory handle {handle} is not registered on node {vi.nic.node_id}"
            )
        start, size, ptag = region
        if ptag != vi.ptag:
            raise ViplError(
                "INVALID_PTAG",
                f"segment {i}: memory handle {handle} has protection tag {ptag}, VI {vi.number} has {vi.ptag}",
            )
        if not (start <= va and va + length <= start + size):
            raise ViplError(
                "INVALID_PARAMETER",
                f"segment {i}: {length} bytes at {va:#x} are outside region {handle} ({size} bytes at {start:#x})",
            )


def _post(vi: Vi, ring: _Ring, doorbell: str, descriptor: Descriptor, check: bool = True) -> None:
    if check:
        _check_segments(vi, descriptor)
    if len(ring.posted) >= ring.depth:
        raise ViplError("ERROR_RESOURCE", f"VI {vi.number}: work queue full ({ring.depth} posted)")
    data = descriptor.encode()
    if len(data) > _SLOT:
        raise ViplError("INVALID_PARAMETER", f"descriptor of {len(data)} bytes")
    address = ring.slot()
    vi.nic.memory.write(address, data)
    descriptor.address, descriptor.status = address, 0
    ring.posted.append(descriptor)
    vi.ring(doorbell, address)


def VipPostSend(vi: Vi, descriptor: Descriptor, *, check: bool = True) -> None:
    """Post ``descriptor`` on the send queue; ``check=False`` skips the host-side segment check
    (to test that the card refuses on its own)."""
    _post(vi, vi.send_queue, "SQ_DOORBELL", descriptor, check)


def VipPostRecv(vi: Vi, descriptor: Descriptor, *, check: bool = True) -> None:
    _post(vi, vi.recv_queue, "RQ_DOORBELL", descriptor, check)


def _read_back(nic: Nic, descriptor: Descriptor) -> None:
    assert descriptor.address is not None  # set when it was posted
    words = nic.bridge.read(descriptor.address, 8)
    ctrl = CONTROL_SEGMENT.decode(b"".join(w.to_bytes(4, "little") for w in words))
    descriptor.status, descriptor.length = ctrl["STATUS"], ctrl["LENGTH"]
    descriptor.immediate_data = ctrl["IMMEDIATE_DATA"]


def _done(vi: Vi, ring: _Ring) -> Descriptor | None:
    if not ring.posted:
        return None
    head = ring.posted[0]
    assert head.address is not None  # set when it was posted
    status = vi.nic.bridge.read(head.address + CONTROL_SEGMENT.field("STATUS").offset)
    if not status & _STATUS.bit("DONE").mask:
        return None
    _read_back(vi.nic, head)
    return ring.posted.pop(0)


def VipSendDone(vi: Vi) -> Descriptor | None:
    return _done(vi, vi.send_queue)


def VipRecvDone(vi: Vi) -> Descriptor | None:
    return _done(vi, vi.recv_queue)


def VipSendWait(vi: Vi, timeout: float | None = None) -> Descriptor:
    return _wait(lambda: VipSendDone(vi), timeout or vi.nic.timeout, f"VI {vi.number} send")


def VipRecvWait(vi: Vi, timeout: float | None = None) -> Descriptor:
    return _wait(lambda: VipRecvDone(vi), timeout or vi.nic.timeout, f"VI {vi.number} receive")


# --- prebuilt descriptors: the low-latency post path ------------------------------------------------


@dataclass(eq=False)
class Prebuilt:
    """A descriptor written once into a slot of its VI's descriptor area (:func:`VipPrebuild`).

    Each :func:`VipPostPrebuilt` writes only STATUS (and the first data segment's LENGTH when it
    changes) and rings the doorbell: one or two words instead of the whole descriptor. A send
    descriptor posted again unchanged rings ``SQ_REPOST``: the card may send it from the copy it
    kept of its last post."""

    vi: Vi
    doorbell: str  # SQ_DOORBELL or RQ_DOORBELL
    descriptor: Descriptor
    address: int
    generation: int  # the NIC's when built
    slot: int
    unchanged: bool = False  # posted since it was built or its LENGTH last changed


def _queue(vi: Vi, doorbell: str) -> _Ring:
    return vi.send_queue if doorbell == "SQ_DOORBELL" else vi.recv_queue


def VipPrebuild(vi: Vi, descriptor: Descriptor, *, queue: str = "send", check: bool = True) -> Prebuilt:
    """Write ``descriptor`` into a free prebuilt slot of ``vi`` for its ``queue`` ("send" or
    "recv"), to be posted again and again with :func:`VipPostPrebuilt`."""
    if queue not in ("send", "recv"):
        raise ViplError("INVALID_PARAMETER", f"queue {queue!r}: a prebuilt descriptor is for 'send' or 'recv'")
    if check:
        _check_segments(vi, descriptor)
    data = descriptor.encode()
    if len(data) > _SLOT:
        raise ViplError("INVALID_PARAMETER", f"descriptor of {len(data)} bytes")
    free = [i for i, p in enumerate(vi.prebuilt) if p is None]
    if not free:
        raise ViplError("ERROR_RESOURCE", f"VI {vi.number}: all {PREBUILT_SLOTS} prebuilt descriptor slots are taken")
    depth = vi.nic.attributes["queue_depth"]
    address = vi.desc_pages[0] + (2 * depth + free[0]) * _SLOT
    vi.nic.memory.write(address, data)
    doorbell = "SQ_DOORBELL" if queue == "send" else "RQ_DOORBELL"
    prebuilt = Prebuilt(vi, doorbell, descriptor, address, vi.nic.generation, free[0])
    descriptor.address, descriptor.status = address, 0
    vi.prebuilt[free[0]] = prebuilt
    return prebuilt


def _owner(prebuilt: Prebuilt) -> Vi:
    """The VI of ``prebuilt``, or INVALID_PARAMETER if it is not a live prebuilt descriptor."""
    vi = getattr(prebuilt, "vi", None)
    if not isinstance(prebuilt, Prebuilt) or vi is None or vi.prebuilt[prebuilt.slot] is not prebuilt:
        raise ViplError(
            "INVALID_PARAMETER", f"{prebuilt!r:.60} is not a prebuilt descriptor (never built, or released)"
        )
    return vi


def _refuse_in_flight(vi: Vi, prebuilt: Prebuilt, why: str) -> None:
    if any(p is prebuilt.descriptor for p in _queue(vi, prebuilt.doorbell).posted):
        raise ViplError(
            "INVALID_STATE",
            f"VI {vi.number}: the prebuilt descriptor at {prebuilt.address:#x} is still posted (not seen done): {why}",
        )


def _check_prebuilt(prebuilt: Prebuilt) -> Vi:
    vi = _owner(prebuilt)
    if prebuilt.generation != vi.nic.generation:
        raise ViplError(
            "STALE",
            f"VI {vi.number}: the prebuilt descriptor at {prebuilt.address:#x} was built before a memory "
            "deregistration or a disconnection: build it again",
        )
    return vi


def VipPostPrebuilt(prebuilt: Prebuilt, *, length: int | None = None) -> Descriptor:
    """Post ``prebuilt`` again (with ``length`` bytes in its first data segment, if given); returns
    its descriptor, which completes like any other (VipSendDone/Wait, VipRecvDone/Wait)."""
    vi = _check_prebuilt(prebuilt)
    _refuse_in_flight(vi, prebuilt, "posting it again would change it under the card")
    ring, d = _queue(vi, prebuilt.doorbell), prebuilt.descriptor
    if len(ring.posted) >= ring.depth:
        raise ViplError("ERROR_RESOURCE", f"VI {vi.number}: work queue full ({ring.depth} posted)")
    if length is not None and not d.segments:
        raise ViplError("INVALID_PARAMETER", "a length for a descriptor without data segments")
    doorbell = "SQ_REPOST" if prebuilt.unchanged and prebuilt.doorbell == "SQ_DOORBELL" else prebuilt.doorbell
    if length is not None and length != d.segments[0][2]:
        doorbell = prebuilt.doorbell
        va, handle, _ = d.segments[0]
        changed = Descriptor(d.op, [(va, handle, length), *d.segments[1:]])
        _check_segments(vi, changed)
        first = via_descriptor.descriptor_size(0, d.op != CONTROL_OP.SENDRECV)
        vi.nic.memory.write_words(prebuilt.address + first + _LENGTH_OFFSET, [length])
        d.segments[0] = (va, handle, length)
    vi.nic.memory.write_words(prebuilt.address + _STATUS.offset, [0])
    d.status = 0
    ring.posted.append(d)
    vi.ring(doorbell, prebuilt.address)
    prebuilt.unchanged = True
    return d


def VipPrebuiltRelease(prebuilt: Prebuilt) -> None:
    """Free ``prebuilt``'s slot; refused while it is posted and not seen done."""
    vi = _owner(prebuilt)
    _refuse_in_flight(vi, prebuilt, "releasing it would free its slot under the card")
    vi.prebuilt[prebuilt.slot] = None
