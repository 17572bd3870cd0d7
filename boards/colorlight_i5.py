#!/usr/bin/env python3
"""Colorlight i5 (LFE5U-25F) on its extension board: a reduced card.

Clock: 25 MHz oscillator, ``sys`` 50 MHz. The 25F has 56 block RAMs and 24k LUTs, so the card
is reduced (see ``configs``): a smaller network cache, shared slice and private memory, and no
VIA engine (it does not fit even when shrunk), so the Ethernet PHYs are unused.

Ring link: the extension board brings out only two PMODs (16 pins), short of the 36 a
full-width ring link needs each way, so on this board the ring port is looped back inside the
FPGA (a one-node ring: every packet the card sends comes back round to it). Carrying ring
packets over the second RGMII port is the way to a real ring here; it is not built (docs/boards.md).

LED: heartbeat. Host: the extension board's USB UART (``litex_server --uart``).
"""

from litex_boards.platforms import colorlight_i5

from numavia.boards.target import Board

SYS_CLK_FREQ = 50e6


class _ActiveLow:
    def __init__(self, pad):
        self.pad = pad

    def eq(self, value):
        return self.pad.eq(~value)


def leds(platform):
    return [_ActiveLow(platform.request("user_led_n", 0))]


def reset(platform):
    return ~platform.request("cpu_reset_n")


BOARD: Board = Board(
    name="colorlight_i5",
    platform=colorlight_i5.Platform,
    platform_args={"revision": "7.0", "toolchain": "trellis"},
    openfpgaloader_board="colorlight-i5",
    nextpnr_device="25k",
    package="CABGA381",
    speed="6",
    clk_name="clk25",
    clk_freq=25e6,
    sys_clk_freq=SYS_CLK_FREQ,
    configs={
        # Measured: with the VIA engine, even shrunk to two VIs, 4 KiB buffers and a 256-page ATT,
        # the SoC needs 41.9k LUTs and 70 block RAMs (docs/boards.md): the 25F takes the
        # coherent shared-memory card without the VIA engine.
        "reduced": {
            # With a 16 KiB slice this needed 57 of the 56 block RAMs (17.7k LUTs): 8 KiB.
            "card": {
                "slice_bytes": 8 * 1024,
                "private_bytes": 4 * 1024,
                "cache_sets": 16,
                "cache_ways": 2,
                "ring_queue_depth": 8,
                "via": False,
            },
            "soc": {"rom_size": 0x8000, "sram_size": 0x1000, "main_ram_size": 0x2000, "host_mem_size": 0x1000},
        },
        # Kept for the measurement above: does not fit the 25F.
        "reduced_via": {
            "card": {
                "slice_bytes": 16 * 1024,
                "private_bytes": 4 * 1024,
                "cache_sets": 16,
                "cache_ways": 2,
                "via_vis": 2,
                "via_cqs": 2,
                "via_queue_depth": 8,
                "via_max_segments": 4,
                "via_window": 8,
                "via_max_mtu": 1500,
                "via_mtu": 1500,
                "via_att_regions": 8,
                "via_att_pages": 256,
                "via_tx_buffer_bytes": 4 * 1024,
                "via_rx_buffer_bytes": 4 * 1024,
            },
            "soc": {"rom_size": 0x8000, "sram_size": 0x1000, "main_ram_size": 0x2000, "host_mem_size": 0x4000},
        },
    },
    default_config="reduced",
    ring_pads=None,  # looped back inside the FPGA (see above)
    leds=leds,
    reset=reset,
)


if __name__ == "__main__":
    from numavia.boards.flow import board_main

    board_main(BOARD)
