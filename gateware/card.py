"""The Numavia card: every block of the card behind one register window.

This is the top of the gateware; ``numavia.soc`` instantiates its Verilog inside the LiteX SoC,
and the card cluster bench instantiates it alone. Ports:

* ``regs``: the register window (``regmap.CARD``);
* ``window``: the SoC bus's view of the host port (shared window + private memory), and
  ``host``: a second host port (trace player, PCIe), arbitrated round robin with it;
* ``rx``/``tx``: the SCI ring link;
* ``node_id_strap``, ``mode_strap``: the node id and switches the board (or the simulation)
  gives this card;
* ``dma``, ``eth_tx``/``eth_rx`` (with the VIA engine): bursts into the SoC's host memory, and
  frames to and from the LiteEth MAC.

With ``CardConfig.pcie`` the card is a PCIe endpoint (docs/pcie.md): ``pcie_rx``/``pcie_tx`` carry
TLPs to and from the PHY; BAR0 reaches the register window (shared with ``regs``, round robin),
BAR2 takes the second host port (so ``host`` is not a port then), the VIA engine's DMA goes to
host memory over PCIe (so ``dma`` is not a port either), and a completion-queue entry raises an
MSI once its memory write is on the link.
"""

from dataclasses import asdict, dataclass

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import params, regmap, via_frame
from numavia.base.coherence import CacheGeometry
from numavia.base.microcode import isa
from numavia.base.via_params import ViaParams

from . import wishbone, wishbone_burst
from .card_control import CardControl
from .host_port import HostAddressMap, HostPortArbiter, HostPortSignature, WishboneHostPort
from .host_window import HostWindow
from .local_side import LocalSide
from .pcie import tlp
from .pcie.config import EndpointParams
from .pcie.dma_bridge import WishboneToDma
from .pcie.endpoint import PcieEndpoint
from .remote_access_controller import RemoteAccessController
from .ring_link import MAX_OUTSTANDING, QUEUE_DEPTH, RingLink
from .sci_layouts import SymbolLayout
from .via_engine import ViaEngine
from .via_layouts import EthBeat
from .wishbone_arbiter import WishboneArbiter


@dataclass(frozen=True)
class CardConfig:
    """Every parameter of the card. The Verilog cache is keyed by these values."""

    clk_freq_hz: int = params.SYS_CLOCK_HZ
    slice_bytes: int = HostAddressMap.slice_bytes  # this node's share of the global shared memory
    max_nodes: int = HostAddressMap.max_nodes
    private_bytes: int = HostAddressMap.private_bytes
    cache_sets: int = CacheGeometry.sets  # network cache: sets x ways x lines of line_bytes
    cache_ways: int = CacheGeometry.ways
    line_bytes: int = CacheGeometry.line_bytes  # cache line = directory unit = SCI data block
    transactions: int = isa.NUM_TRANSACTIONS
    ring_queue_depth: int = QUEUE_DEPTH  # incoming and outgoing queues, packets each
    ring_outstanding: int = MAX_OUTSTANDING  # packets in flight awaiting their echo
    # The network cache's tags in block RAM (TagStore's block_ram): fewer LUTs, where the card has
    # the block RAMs and its clock the margin (the ECPIX-5's 64-VI card; docs/boards.md).
    tags_in_block_ram: bool = False
    # The ring link's, the remote and local access controllers' event counters in memory
    # (EventCounters' in_memory), not in flip-flops: about 1,500 fewer LUTs on the ECPIX-5, and
    # 5.7 MHz less on its `coherent` card (75.6 against 81.3; docs/boards.md).
    counters_in_memory: bool = False
    # VIA engine (docs/via.md). Without it (the coherence bench, small FPGAs) its register window
    # answers bus errors and the card has no dma/eth ports. The engine's build parameters and their
    # defaults are ViaParams' (``via_x`` here is its ``x``, ``host_mem_*`` its ``host_*``); the
    # MTU, timeout and retry limit are its registers' values after reset.
    via: bool = True
    via_vis: int = ViaParams.vis
    via_cqs: int = ViaParams.cqs
    via_queue_depth: int = ViaParams.queue_depth
    via_max_segments: int = ViaParams.max_segments
    via_window: int = ViaParams.window
    via_max_mtu: int = ViaParams.max_mtu
    via_mtu: int = via_frame.MTU_DEFAULT
    via_att_regions: int = ViaParams.att_regions
    via_att_pages: int = ViaParams.att_pages
    via_tx_buffer_bytes: int = ViaParams.tx_buffer_bytes
    via_rx_buffer_bytes: int = ViaParams.rx_buffer_bytes
    via_rto_cycles: int = regmap.VIA.register("RTO_CYCLES").reset
    via_retry_limit: int = regmap.VIA.register("RETRY_LIMIT").reset
    host_mem_base: int = ViaParams.host_base
    host_mem_size: int = ViaParams.host_size
    # PCIe endpoint (docs/pcie.md). Off: the host is the SoC (its bus reaches regs/window/dma).
    pcie: bool = False
    pcie_data_width: int = EndpointParams.data_width  # the PHY's TLP stream
    pcie_dma_outstanding: int = EndpointParams.dma_outstanding
    pcie_completion_timeout_cycles: int = EndpointParams.completion_timeout_cycles

    def __post_init__(self):
        self.geometry()  # checks the cache parameters
        self.via_params()  # checks the VIA parameters
        if not via_frame.MTU_MIN <= self.via_mtu <= self.via_max_mtu:
            raise ValueError(f"via_mtu must be {via_frame.MTU_MIN}..{self.via_max_mtu}")
        if self.pcie:
            try:
                self.pcie_params()
            except ValueError as e:  # the endpoint's parameter names are ours with "pcie_"
                raise ValueError(f"pcie_{e}") from None

    def via_params(self):
        return ViaParams(
            vis=self.via_vis,
            cqs=self.via_cqs,
            queue_depth=self.via_queue_depth,
            max_segments=self.via_max_segments,
            window=self.via_window,
            max_mtu=self.via_max_mtu,
            att_regions=self.via_att_regions,
            att_pages=self.via_att_pages,
            host_base=self.host_mem_base,
            host_size=self.host_mem_size,
            tx_buffer_bytes=self.via_tx_buffer_bytes,
            rx_buffer_bytes=self.via_rx_buffer_bytes,
        )

    def pcie_params(self):
        """The endpoint's parameters: BAR0 is the whole register window, BAR2 the host port's."""
        return EndpointParams(
            bar0_bytes=regmap.CARD.size,
            bar2_bytes=self.address_map().window_bytes,
            data_width=self.pcie_data_width,
            dma_outstanding=self.pcie_dma_outstanding,
            completion_timeout_cycles=self.pcie_completion_timeout_cycles,
        )

    def as_dict(self):
        return asdict(self)

    def address_map(self):
        return HostAddressMap(slice_bytes=self.slice_bytes, max_nodes=self.max_nodes, private_bytes=self.private_bytes)

    def geometry(self):
        return CacheGeometry(sets=self.cache_sets, ways=self.cache_ways, line_bytes=self.line_bytes)

    @property
    def window_addr_width(self):
        """Word-address bits of the ``window`` port."""
        return (self.address_map().window_bytes // 4 - 1).bit_length()


def card_signature(config):
    """The card's ports (also what the LiteX wrapper instantiates, without elaborating a Card)."""
    return wiring.Signature(
        {
            "regs": In(wishbone.Signature(addr_width=regmap.CARD.addr_width)),
            "window": In(wishbone.Signature(addr_width=config.window_addr_width)),
            **({"host": In(HostPortSignature())} if not config.pcie else {}),
            "rx": In(SymbolLayout),
            "tx": Out(SymbolLayout),
            "node_id_strap": In(regmap.NODE_ID_BITS),
            "mode_strap": In(8),  # board switches (regmap.CTRL.MODE_STRAP): the firmware applies them
            **(
                {"dma": Out(wishbone_burst.Signature(addr_width=params.BUS_ADDR_WIDTH))}  # into host memory alone
                if config.via and not config.pcie
                else {}
            ),
            **(
                {
                    "eth_tx": Out(stream.Signature(EthBeat)),  # to the LiteEth MAC core
                    "eth_rx": In(stream.Signature(EthBeat)),
                    "irq": Out(1),  # to the node's CPU: firmware work
                }
                if config.via
                else {}
            ),
            **(
                {
                    "pcie_rx": In(tlp.TlpStreamSignature(config.pcie_data_width)),  # TLPs from the PHY
                    "pcie_tx": Out(tlp.TlpStreamSignature(config.pcie_data_width)),
                }
                if config.pcie
                else {}
            ),
        }
    )


def _join_wishbone(m, initiator, target):
    """Connect Wishbone ports whose signatures differ only in the bursting members (left at 0)."""
    m.d.comb += [
        getattr(target, name).eq(getattr(initiator, name)) for name in ("cyc", "stb", "we", "adr", "dat_w", "sel")
    ]
    m.d.comb += [getattr(initiator, name).eq(getattr(target, name)) for name in ("dat_r", "ack", "err")]


# Register blocks no post or poll waits on (microcode, directory and ring set-up, counters, the VIA
# engine's set-up, mailbox and completion queue registers; its doorbells have a block of their own):
# their decode takes the SoC bus's address a cycle late (wishbone.RequestRegister). The remote
# access controller's register decode, then the VIA engine's, was the routed card's longest path
# (docs/boards.md).
_REGISTERED_REQUEST = ("lac", "rac", "ring", "via")


def card_blocks(config):
    """The register-map blocks this configuration instantiates."""
    return tuple(b for b in regmap.CARD.blocks if config.via or b not in regmap.VIA_BLOCKS)


class Card(wiring.Component):
    def __init__(self, config=CardConfig()):
        self.config = config
        super().__init__(card_signature(config))

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        amap, geometry = cfg.address_map(), cfg.geometry()

        m.submodules.decoder = decoder = wishbone.Decoder(
            addr_width=regmap.CARD.addr_width, windows=[(b.name, b.base // 4, b.addr_width) for b in card_blocks(cfg)]
        )
        if cfg.pcie:
            m.submodules.pcie = pcie = PcieEndpoint(cfg.pcie_params())
            wiring.connect(m, wiring.flipped(self.pcie_rx), pcie.phy_rx)
            wiring.connect(m, pcie.phy_tx, wiring.flipped(self.pcie_tx))
            # The SoC's CPU and the PCIe host (BAR0) take turns on the register window.
            m.submodules.regs_arbiter = regs_arbiter = WishboneArbiter(count=2, addr_width=regmap.CARD.addr_width)
            _join_wishbone(m, self.regs, regs_arbiter.initiators[0])
            _join_wishbone(m, pcie.csr, regs_arbiter.initiators[1])
            _join_wishbone(m, regs_arbiter.bus, decoder.bus)
            register_write = Signal()
            m.d.comb += register_write.eq(decoder.bus.cyc & decoder.bus.stb & decoder.bus.we)
        else:
            wiring.connect(m, wiring.flipped(self.regs), decoder.bus)

        m.submodules.ctrl = ctrl = CardControl(clk_freq_hz=cfg.clk_freq_hz, via=cfg.via, pcie=cfg.pcie)
        m.submodules.local = local = LocalSide(
            address_map=amap,
            geometry=geometry,
            tags_in_block_ram=cfg.tags_in_block_ram,
            counters_in_memory=cfg.counters_in_memory,
        )
        m.submodules.rac = rac = RemoteAccessController(
            geometry=geometry,
            slice_lines=amap.slice_bytes // cfg.line_bytes,
            num_transactions=cfg.transactions,
            counters_in_memory=cfg.counters_in_memory,
        )
        m.submodules.ring = ring = RingLink(
            out_depth=cfg.ring_queue_depth,
            in_depth=cfg.ring_queue_depth,
            max_outstanding=cfg.ring_outstanding,
            line_bytes=cfg.line_bytes,
            counters_in_memory=cfg.counters_in_memory,
        )
        buses = {"ctrl": ctrl.bus, "lac": local.bus, "rac": rac.bus, "ring": ring.bus}
        if cfg.via:
            m.submodules.via = via = ViaEngine(
                cfg.via_params(),
                mtu=cfg.via_mtu,
                rto_cycles=cfg.via_rto_cycles,
                retry_limit=cfg.via_retry_limit,
                cq_event=cfg.pcie,
                clk_freq_hz=cfg.clk_freq_hz,
            )
            buses["via"], buses["doorbell"] = via.regs, via.doorbells
            m.d.comb += [via.node_id.eq(ctrl.node_id), via.cycles.eq(ctrl.cycles[:32])]
            # DMA into host memory (the SoC's, or the PCIe host's), frames to and from the Ethernet MAC.
            if cfg.pcie:
                m.submodules.pcie_dma = dma_bridge = WishboneToDma()
                wiring.connect(m, via.dma, dma_bridge.bus)
                wiring.connect(m, dma_bridge.dma, pcie.dma)
                # A doorbell (any register write) orders the host's earlier memory writes before
                # the engine's next reads: nothing the bridge read ahead before it may be used.
                m.d.comb += dma_bridge.flush.eq(register_write)
                # The MSI waits until the entry's memory write has gone to the requester, so that
                # it follows the write on the link and the host finds the entry when it looks.
                cq_pending = Signal()
                with m.If(via.cq_event):
                    m.d.sync += cq_pending.eq(1)
                with m.Elif(cq_pending & dma_bridge.idle):
                    m.d.sync += cq_pending.eq(0)
                    m.d.comb += pcie.msi_event.eq(1)
            else:
                # On the SoC the DMA is joined to host memory alone (host_window.py).
                m.submodules.host_window = host_window = HostWindow(
                    addr_width=params.BUS_ADDR_WIDTH, base=cfg.host_mem_base, size=cfg.host_mem_size
                )
                wiring.connect(m, via.dma, host_window.initiator)
                wiring.connect(m, host_window.bus, wiring.flipped(self.dma))
            wiring.connect(m, via.eth_tx, wiring.flipped(self.eth_tx))
            wiring.connect(m, wiring.flipped(self.eth_rx), via.eth_rx)
            m.d.comb += self.irq.eq(via.irq)
        for block in card_blocks(cfg):
            window = getattr(decoder, block.name)
            if block.name in _REGISTERED_REQUEST:
                request = wishbone.RequestRegister(addr_width=block.addr_width)
                m.submodules[f"{block.name}_request"] = request
                wiring.connect(m, window, request.bus)
                window = request.target
            wiring.connect(m, window, buses[block.name])

        # Host accesses: the SoC bus window and the second host port (or PCIe BAR2), one at a time.
        m.submodules.window_port = window_port = WishboneHostPort(addr_width=cfg.window_addr_width)
        m.submodules.host_arbiter = arbiter = HostPortArbiter(2)
        wiring.connect(m, wiring.flipped(self.window), window_port.bus)
        wiring.connect(m, window_port.host, arbiter.host0)
        wiring.connect(m, pcie.shared if cfg.pcie else wiring.flipped(self.host), arbiter.host1)
        wiring.connect(m, arbiter.out, local.host)

        # Local side <-> remote access controller <-> ring link.
        wiring.connect(m, local.miss, rac.miss)
        wiring.connect(m, rac.local, local.remote)
        wiring.connect(m, rac.send_header, ring.send_header)
        wiring.connect(m, rac.send_data, ring.send_data)
        wiring.connect(m, ring.recv_header, rac.recv_header)
        wiring.connect(m, ring.recv_data, rac.recv_data)
        wiring.connect(m, ring.failed, rac.failed)

        m.d.comb += [
            ctrl.node_id_strap.eq(self.node_id_strap),
            ctrl.mode_strap.eq(self.mode_strap),
            local.node_id.eq(ctrl.node_id),
            local.node_ready.eq(ctrl.ready),
            local.numa_mode.eq(ctrl.numa_mode),
            local.cache_first_miss.eq(ctrl.cache_first_miss),
            rac.node_id.eq(ctrl.node_id),
            rac.numa_mode.eq(ctrl.numa_mode),
            rac.cache_first_miss.eq(ctrl.cache_first_miss),
            ring.node_id.eq(ctrl.node_id),
            ring.enable.eq(ctrl.ready),
            ring.rx.eq(self.rx),
            self.tx.eq(ring.tx),
        ]
        return m
