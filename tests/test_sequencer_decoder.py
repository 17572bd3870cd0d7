"""The sequencer's instruction decoder: every opcode's assembled words come apart into the fields
the instruction-set model reads, and only JMP is marked for the early target fetch."""

import random

from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.base.microcode import isa
from numavia.gateware.sequencer_decoder import SequencerDecoder


def random_words(rng, per_op=8):
    """(op name, operands, word) for random operand values of every opcode."""
    for name, op in isa.OPS.items():
        for _ in range(per_op):
            operands = {o.name: rng.randrange(1 << isa.FIELDS[o.field][1]) for o in op.operands}
            yield name, operands, isa.encode(name, **operands)


def test_fields_match_the_instruction_set_model():
    rng = random.Random(5)
    cases = list(random_words(rng))
    dut = SequencerDecoder()
    sim = Simulator(dut)

    async def testbench(ctx):
        for name, operands, word in cases:
            ctx.set(dut.word, word)
            op, values = isa.decode(word)
            assert op.name == name and values == operands
            assert ctx.get(dut.fields.op) == op.code
            for operand in op.operands:
                assert ctx.get(getattr(dut.fields, operand.field)) == values[operand.name], (name, operand.name)
            assert ctx.get(dut.jump) == (name == "JMP")

    sim.add_testbench(testbench)
    run_simulation(sim)


def test_every_field_is_where_the_assembler_puts_it():
    # one field all ones, the rest zero: it must show up in that field alone
    dut = SequencerDecoder()
    sim = Simulator(dut)

    async def testbench(ctx):
        for name, (lsb, width) in isa.FIELDS.items():
            ctx.set(dut.word, ((1 << width) - 1) << lsb)
            for other in isa.FIELDS:
                expected = (1 << width) - 1 if other == name else 0
                assert ctx.get(getattr(dut.fields, other)) == expected, (name, other)

    sim.add_testbench(testbench)
    run_simulation(sim)
