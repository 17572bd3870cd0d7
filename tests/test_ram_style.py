"""Where yosys puts a memory read through a registered port, as ``block_ram_attrs`` asks: a 64-entry
memory of 16 bits (which yosys on its own maps to LUT RAM) in block RAM, a 16-entry one in LUT RAM.
Synthesised with ``synth_ecp5`` (out of context, a few seconds each)."""

import json
from collections import Counter

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.boards import synth
from numavia.gateware.ram_style import LUT_RAM_DEPTH, block_ram_attrs

WIDTH = 16


class RegisteredRead(wiring.Component):
    def __init__(self, depth, attrs):
        self.depth, self.attrs = depth, attrs
        super().__init__(
            {
                "w_addr": In(range(depth)),
                "w_data": In(WIDTH),
                "w_en": In(1),
                "r_addr": In(range(depth)),
                "r_data": Out(WIDTH),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = memory = Memory(shape=WIDTH, depth=self.depth, init=[], attrs=self.attrs)
        write, read = memory.write_port(), memory.read_port()
        m.d.comb += [
            write.addr.eq(self.w_addr),
            write.data.eq(self.w_data),
            write.en.eq(self.w_en),
            read.addr.eq(self.r_addr),
            self.r_data.eq(read.data),
        ]
        return m


def cells(depth, attrs):
    path = synth.netlist(
        lambda: RegisteredRead(depth, attrs), "ram_style_probe", {"depth": depth, "attrs": attrs}, log=lambda _: None
    )
    modules = json.loads(path.read_text())["modules"]
    return Counter(cell["type"] for cell in modules["ram_style_probe"]["cells"].values())


@pytest.mark.parametrize("depth", [LUT_RAM_DEPTH * 4, LUT_RAM_DEPTH], ids=["deep", "one-lut-ram"])
def test_a_memory_deeper_than_a_lut_ram_is_put_in_block_ram(depth):
    asked = cells(depth, block_ram_attrs(depth))
    if depth > LUT_RAM_DEPTH:
        assert asked["DP16KD"] == 1 and asked["TRELLIS_DPR16X4"] == 0
        # ... where yosys on its own would have used LUT RAM and a multiplexer per bit
        assert cells(depth, {})["TRELLIS_DPR16X4"] == depth // LUT_RAM_DEPTH * WIDTH // 4
    else:
        assert asked["DP16KD"] == 0 and asked["TRELLIS_DPR16X4"] == WIDTH // 4
