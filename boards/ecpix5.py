#!/usr/bin/env python3
"""LambdaConcept ECPIX-5 (LFE5UM5G-85F): the full card and smaller configurations of it.

Clock: 100 MHz oscillator, ``sys`` 75 MHz (40 MHz for ``minimal``, 33.3 MHz for ``compact``).
Ethernet: the RTL8211 RGMII PHY carries the VIA engine's frames. Ring link: source-synchronous, 16
data bits + frame + forwarded clock each way (:mod:`numavia.boards.ring_phy`), transmit on PMOD0,
PMOD1 and PMOD2 pins 0-1, receive on PMOD4, PMOD5 and PMOD6 pins 0-1; a cable crosses one board's
transmit to the next board's receive. LEDs (red channel of the four RGB LEDs): heartbeat, ring
receive activity, Ethernet traffic, ring transmit. Node id: jumpers on PMOD7 pins 0-5 (the card's
strap). Host: USB UART (FT2232 channel B), ``litex_server --uart``.
"""

from litex.build.generic_platform import IOStandard, Misc, Pins, Subsignal
from litex_boards.platforms import lambdaconcept_ecpix5

from numavia.boards.target import Board

SYS_CLK_FREQ = 75e6


# The card as simulated, with the shared slice and private memory sized for the block RAM (on-chip,
# as in simulation; the DDR3 is not used). With 64 KiB of host memory yosys mapped 215 block RAMs
# (of 208): 32 KiB.
FULL = {
    "card": {"slice_bytes": 64 * 1024, "private_bytes": 16 * 1024},
    "soc": {"rom_size": 0x8000, "sram_size": 0x2000, "main_ram_size": 0x8000, "host_mem_size": 0x8000},
}


def _pmod_pins(pmods, count):
    pins = [f"{pmod}:{i}" for pmod in pmods for i in range(8)]
    return pins[:count]


def ring_pads(platform):
    tx = _pmod_pins(("pmod0", "pmod1", "pmod2"), 18)
    rx = _pmod_pins(("pmod4", "pmod5", "pmod6"), 18)
    platform.add_extension(
        [
            (
                "ring_tx",
                0,
                Subsignal("clk", Pins(tx[0])),
                Subsignal("frame", Pins(tx[1])),
                Subsignal("data", Pins(" ".join(tx[2:]))),
                IOStandard("LVCMOS33"),
            ),
            (
                "ring_rx",
                0,
                Subsignal("clk", Pins(rx[0])),
                Subsignal("frame", Pins(rx[1])),
                Subsignal("data", Pins(" ".join(rx[2:]))),
                IOStandard("LVCMOS33"),
            ),
        ]
    )
    return platform.request("ring_tx"), platform.request("ring_rx")


def node_id_pads(platform):
    """Six jumpers on PMOD7 pins 0-5 (to 3.3 V: a one bit; pulled down when open)."""
    platform.add_extension(
        [("node_id", 0, Pins(" ".join(f"pmod7:{i}" for i in range(6))), IOStandard("LVCMOS33"), Misc("PULLMODE=DOWN"))]
    )
    return platform.request("node_id")


class _RedChannel:
    """One RGB LED used as a red LED: its pins are active low (the LED cathodes are on the FPGA),
    green and blue stay off."""

    def __init__(self, rgb):
        self.rgb = rgb

    def eq(self, value):
        return [self.rgb.r.eq(~value), self.rgb.g.eq(1), self.rgb.b.eq(1)]


def leds(platform):
    return [_RedChannel(platform.request("rgb_led", i)) for i in range(4)]


def reset(platform):
    return ~platform.request("rst_n")


BOARD: Board = Board(
    name="ecpix5",
    platform=lambdaconcept_ecpix5.Platform,
    platform_args={"device": "85F", "toolchain": "trellis"},
    openfpgaloader_board="ecpix5",
    nextpnr_device="um5g-85k",
    package="CABGA554",
    speed="8",
    clk_name="clk100",
    clk_freq=100e6,
    sys_clk_freq=SYS_CLK_FREQ,
    configs={
        # The whole card with 64 VIs. The engines read the VIs' records, configuration and send
        # queues from block RAM, which the VIA receive buffer (32 KiB: three jumbo frames), the
        # host memory and the main RAM (16 KiB each; the 64-VI firmware takes 10.5 KiB) and the
        # private memory (8 KiB; the firmware uses none) make room for (docs/boards.md). Routed
        # at 75.1 MHz with 59.6 % of the LUTs (0466d79, seed 1).
        "full": {
            "card": {
                **FULL["card"],
                "via_vis": 64,
                "via_rx_buffer_bytes": 32 * 1024,
                "private_bytes": 8 * 1024,
                "tags_in_block_ram": True,
                "counters_in_memory": True,
            },
            "soc": {**FULL["soc"], "main_ram_size": 0x4000, "host_mem_size": 0x4000},
        },
        # The full card with 4 VIs and 2 completion queues, and half the VIA receive buffer (the
        # transmit buffer holds two jumbo frames, its least). Sized when each VI's state was
        # logic (docs/boards.md): at 40 MHz it placed at 35.8 MHz; 33.3 MHz still carries Gigabit
        # Ethernet's line rate (the MAC hands the card 32 bits a cycle: 133 MB/s against 125).
        "compact": {
            "card": {**FULL["card"], "via_vis": 4, "via_cqs": 2, "via_rx_buffer_bytes": 32 * 1024},
            "soc": FULL["soc"],
            "sys_clk_freq": 100e6 / 3,
        },
        # The smallest card with the VIA engine: 2 VIs and 2 completion queues, a 32 KiB slice,
        # 512 ATT pages, 16 KiB of main RAM and host memory (144 of the 208 block RAMs). With the
        # reset on a global it routes: 50.4 MHz against 40 (48.8 against 33.3; docs/boards.md).
        "minimal": {
            "card": {
                **FULL["card"],
                "slice_bytes": 32 * 1024,
                "via_vis": 2,
                "via_cqs": 2,
                "via_rx_buffer_bytes": 32 * 1024,
                "via_att_pages": 512,
            },
            "soc": {**FULL["soc"], "main_ram_size": 0x4000, "host_mem_size": 0x4000},
            "sys_clk_freq": 40e6,
        },
        # The coherent shared-memory card without the VIA engine (as the Colorlight's `reduced`,
        # with the full card's cache and memories): a ring of 85F boards at the full card's clock.
        # Routed at 80.5 MHz (docs/boards.md). The Ethernet PHY is unused.
        "coherent": {
            "card": {**FULL["card"], "via": False},
            "soc": FULL["soc"],
        },
    },
    default_config="full",  # the whole card, 64 VIs, at the full card's clock
    ring_pads=ring_pads,
    leds=leds,
    reset=reset,
    node_id_pads=node_id_pads,
)


if __name__ == "__main__":
    from numavia.boards.flow import board_main

    board_main(BOARD)
