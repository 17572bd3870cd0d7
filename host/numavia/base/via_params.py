"""Parameters of the VIA engine, and their defaults (:class:`numavia.gateware.card.CardConfig`
derives its ``via_*`` fields from them)."""

from dataclasses import dataclass

from numavia.base import params, regmap, via_frame


@dataclass(frozen=True)
class ViaParams:
    vis: int = 8  # Virtual Interfaces
    cqs: int = 4  # completion queues
    queue_depth: int = 16  # descriptors per work queue (a power of two)
    max_segments: int = 8  # data segments per descriptor
    window: int = 32  # frames a VI may have unacknowledged
    max_mtu: int = via_frame.MTU_JUMBO
    att_regions: int = 64  # level-1 entries (memory handles)
    att_pages: int = 2048  # level-2 entries
    host_base: int = params.HOST_MEM_BASE  # the host memory the card may DMA to
    host_size: int = params.HOST_MEM_SIZE
    tx_buffer_bytes: int = 32 * 1024
    rx_buffer_bytes: int = 64 * 1024
    read_jobs: int = 4  # RDMA read requests queued for response

    def __post_init__(self):
        vi_capacity = regmap.VIA.array("VI").count
        cq_capacity = regmap.VIA.array("CQ").count
        if not 1 <= self.vis <= vi_capacity:
            raise ValueError(f"vis must be 1..{vi_capacity}")
        if not 1 <= self.cqs <= cq_capacity:
            raise ValueError(f"cqs must be 1..{cq_capacity}")
        for name in ("queue_depth", "tx_buffer_bytes", "rx_buffer_bytes"):
            value = getattr(self, name)
            if value < 2 or value & (value - 1):
                raise ValueError(f"{name} must be a power of two")
        if not via_frame.MTU_MIN <= self.max_mtu <= via_frame.MTU_JUMBO:
            raise ValueError(f"max_mtu must be {via_frame.MTU_MIN}..{via_frame.MTU_JUMBO}")
        frame = via_frame.ETH_HEADER_SIZE + self.max_mtu
        for name in ("tx_buffer_bytes", "rx_buffer_bytes"):
            if getattr(self, name) < 2 * frame:
                raise ValueError(f"{name} must hold two frames of the largest MTU ({2 * frame} bytes)")
        if not 1 <= self.window <= 1 << 15:
            raise ValueError("window must be 1..32768 frames")
        if self.host_base % 4096 or self.host_size % 4096:
            raise ValueError("host memory must be page aligned")

    @property
    def max_payload(self):
        return via_frame.payload_per_frame(self.max_mtu)


def att_regions_for(vis: int) -> int:
    """Memory handles (ATT level-1 entries) of a card with ``vis`` VIs: the default, or one a VI
    where it has more VIs than that (each VI's process registers memory of its own)."""
    return max(ViaParams.att_regions, vis)
