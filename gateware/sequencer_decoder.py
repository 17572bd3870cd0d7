"""The sequencer's instruction decoder: a micro-instruction word split into its fields.

Combinational. The field positions are those of :data:`microcode.isa.FIELDS` (the assembler's),
so the gateware and the microcode tools cannot disagree on them. Which operand a field holds
depends on the opcode (``a`` is a condition for ``BRT``, a pointer register for ``MOVP``...);
the execute stage reads them by the opcode's operand table.
"""

from amaranth import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from numavia.base.microcode import isa

InstructionLayout = data.FlexibleLayout(
    isa.WORD_BITS, {name: data.Field(width, lsb) for name, (lsb, width) in isa.FIELDS.items()}
)


class SequencerDecoder(wiring.Component):
    """``word`` -> ``fields``; ``jump`` marks a ``JMP``, whose target is fetched at once (dispatch
    tables and vectors are ``JMP``s, so they cost no extra cycle)."""

    word: In(isa.WORD_BITS)
    fields: Out(InstructionLayout)
    jump: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.fields.eq(self.word),
            self.jump.eq(self.fields.op == isa.OPS["JMP"].code),
        ]
        return m
