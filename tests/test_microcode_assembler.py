"""Micro-assembler: encode/decode round trip, the real microcode, and source errors."""

import random
import subprocess
from pathlib import Path

import pytest

from numavia.base.microcode import isa
from numavia.base.microcode.assembler import AssemblyError, assemble, disassemble, image_crc32, pack_words

SOURCE = Path(isa.__file__).with_name("sci.uasm")


def test_every_operation_round_trips():
    rng = random.Random(1)
    for op in isa.OPS.values():
        for _ in range(20):
            operands = {}
            for operand in op.operands:
                width = isa.FIELDS[operand.field][1]
                if isinstance(operand.kind, type):
                    operands[operand.name] = rng.choice(list(operand.kind))
                else:
                    operands[operand.name] = rng.randrange(1 << width)
            decoded_op, values = isa.decode(isa.encode(op.name, **operands))
            assert decoded_op is op
            assert values == {k: int(v) for k, v in operands.items()}


def test_decode_rejects_unknown_opcode_and_stray_bits():
    with pytest.raises(ValueError, match="unknown opcode"):
        isa.decode(63 << 58)
    with pytest.raises(ValueError, match="outside"):
        isa.decode(isa.encode("END") | 1 << 20)


def test_real_microcode_assembles(tmp_path):
    program = assemble(SOURCE.read_text(), "sci.uasm")
    assert len(program.words) <= isa.CONTROL_STORE_DEPTH
    assert program.crc32 == image_crc32(program.words)
    for slot in range(isa.VECTOR_TABLE_SIZE):  # the vector table is all jumps into the program
        op, values = isa.decode(program.words[slot])
        assert op.name == "JMP" and isa.VECTOR_TABLE_SIZE <= values["target"] < len(program.words)
    assert "h_mread:" in program.listing and "rollout:" in program.listing
    for word in program.words:
        disassemble(word)
    (tmp_path / "ucode.h").write_text(program.c_array())
    (tmp_path / "t.c").write_text(
        '#include "ucode.h"\n'
        '_Static_assert(sizeof nv_ucode_packed == NV_UCODE_PACKED_BYTES, "size");\n'
        "int main(void){return nv_ucode_packed[0] ? 0 : 1;}\n"
    )
    subprocess.run(["cc", "-Wall", "-Werror", "-c", "t.c"], cwd=tmp_path, check=True)


def unpack_words(packed, count):
    """The test's own reading of :func:`pack_words`' format; every byte must be used."""
    data = iter(packed)
    words = []
    for _ in range(count):
        mask = next(data)
        words.append(sum(next(data) << 8 * i for i in range(8) if mask >> i & 1))
    assert next(data, None) is None, "bytes left over"
    return words


def test_packed_image_round_trips():
    program = assemble(SOURCE.read_text())
    packed = pack_words(program.words)
    assert unpack_words(packed, len(program.words)) == program.words
    assert len(packed) < 8 * len(program.words) // 2  # most of the microcode's bytes are zero
    assert f"#define NV_UCODE_PACKED_BYTES {len(packed)}u" in program.c_array()
    assert f"#define NV_UCODE_CRC32 0x{program.crc32:08x}u" in program.c_array()


@pytest.mark.parametrize(
    "word, packed",
    [
        (0, b"\x00"),
        (2**64 - 1, b"\xff" + b"\xff" * 8),
        (0x01, b"\x01\x01"),
        (0x80 << 56, b"\x80\x80"),
        (0x5A << 24, b"\x08\x5a"),
        (0x0400000000000013, b"\x81\x13\x04"),
    ],
)
def test_packing_of_edge_words(word, packed):
    assert pack_words([word]) == packed
    assert unpack_words(packed, 1) == [word]
    assert unpack_words(pack_words([word, 0, word]), 3) == [word, 0, word]


def test_commands_outside_the_enum_land_on_the_invalid_vector():
    program = assemble(SOURCE.read_text())
    invalid = program.words[isa.INVALID_COMMAND_SLOT]
    for cmd in (0, 8, 15, 21, 40, 63):
        assert program.words[isa.request_vector(cmd)] == invalid
    assert program.words[isa.request_vector(isa.Command.MREAD)] != invalid


VECTORS = (
    "\n".join(
        [".vector request INVALID x"]
        + [f".vector request {c.name} x" for c in isa.Command]
        + [f".vector local {k.name} x" for k in isa.LocalKind]
        + [f".vector resume {p.name} x" for p in isa.Resume]
    )
    + "\n"
)


def assemble_small(body):
    return assemble(VECTORS + body, "t.uasm")


def test_small_program():
    program = assemble_small("x:\n  COUNT NACK_SENT\n  REPLY status=NACK\n  END\n")
    assert len(program.words) == isa.VECTOR_TABLE_SIZE + 3


@pytest.mark.parametrize(
    "body, message",
    [
        ("x:\n  FROB\n", "unknown operation"),
        ("x:\n  BRT NOT_A_COND, x\n", "is not one of"),
        ("x:\n  JMP nowhere\n", "undefined label"),
        ("x:\nx:\n  END\n", "defined twice"),
        ("x:\n  END 1\n", "takes 0 operand"),
        ("x:\n  SEND cmd=MREAD\n", "needs operand dest"),
        ("x:\n  SEND cmd=MREAD, dest=HOME, bogus=1\n", "has no operand"),
        ("x:\n  C_WR NOT_A_STATE\n", "is not one of"),
        ("x:\n  DISP STATE, t\nt:\n  JMP x\n", "not marked"),
        ("x:\n  DISP MSTATE, t\n.dispatch MSTATE\nt:\n  JMP x\n  JMP x\n", "needs 4 JMP"),
        ("x:\n  END\n.frob\n", "unknown directive"),
        ("x:\n  END\ndangling:\n", "at the end"),
    ],
)
def test_source_errors_name_the_line(body, message):
    with pytest.raises(AssemblyError, match=message) as error:
        assemble_small(body)
    assert str(error.value).startswith("t.uasm:")


def test_missing_vector_is_an_error():
    with pytest.raises(AssemblyError, match="no .vector for .*local FLUSH"):
        assemble(VECTORS.replace(".vector local FLUSH x\n", "") + "x:\n  END\n")
