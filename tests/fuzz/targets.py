"""Fuzz targets for the host-side decoders of every format hostile input can reach.

Each target takes one input (bytes) and must either accept it or refuse it with the format's own
error (a one-line message); any other exception, or an accepted input that breaks the target's
round-trip property, is a finding. The same functions are run three ways:

* coverage-guided by atheris (``tests/fuzz/run_atheris.py``, bounded in ``tests/test_fuzz_python.py``,
  longer by ``make fuzz``);
* over the stored corpus ``tests/fuzz/corpus/<target>/`` (seeds, and every input that once
  crashed, kept as a regression test).

Targets import only what they fuzz, so atheris instruments just those modules.
"""

import contextlib
import io
import os
import tempfile

from numavia.base import sci_packet, trace, via_descriptor, via_frame
from numavia.base.microcode import assembler, isa


def _one_line(message):
    assert message and "\n" not in str(message).strip(), f"error message is not one line: {message!r}"


def sci_packet_decode(data):
    """Ring symbols (16-bit, big-endian pairs of bytes) -> packet; re-encoding gives them back."""
    symbols = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data) - 1, 2)]
    try:
        packet = sci_packet.decode(symbols)
    except sci_packet.PacketError as e:
        _one_line(e)
        return
    assert sci_packet.encode(packet) == symbols, "decode/encode round trip changed the packet"


def via_frame_decode(data):
    """An Ethernet frame as the card receives it -> VIA header + payload; header re-encodes."""
    try:
        header, payload = via_frame.decode_frame(data)
    except via_frame.FrameError as e:
        _one_line(e)
        return
    assert via_frame.HEADER.encode(**header) == bytes(data[: via_frame.HEADER.size])
    assert len(payload) == header["PAYLOAD_LENGTH"]


def via_descriptor_decode(data):
    """A descriptor in host memory -> its fields; encoding the host's fields gives the bytes back."""
    try:
        d = via_descriptor.decode_descriptor(data, max_segments=255)
    except via_descriptor.DescriptorError as e:
        _one_line(e)
        return
    again = via_descriptor.encode_descriptor(
        d["op"],
        d["segments"],
        immediate=d["immediate"],
        remote_va=d["remote_va"],
        remote_handle=d["remote_handle"],
        next_va=d["next_va"],
        next_handle=d["next_handle"],
    )
    original = bytearray(data[: len(again)])
    # The card's fields (LENGTH, STATUS), RESERVED words, and IMMEDIATE_DATA without IMMEDIATE are
    # not the host's to set: compare with them cleared.
    ctrl = via_descriptor.CONTROL_SEGMENT
    cleared = ["RESERVED", "LENGTH", "STATUS"] + ([] if d["immediate"] is not None else ["IMMEDIATE_DATA"])
    for name in cleared:
        f = ctrl.field(name)
        original[f.offset : f.offset + f.size] = bytes(f.size)
    if d["op"] in (via_descriptor.CONTROL_OP.RDMA_WRITE, via_descriptor.CONTROL_OP.RDMA_READ):
        f = via_descriptor.ADDRESS_SEGMENT.field("RESERVED")
        start = ctrl.size + f.offset
        original[start : start + f.size] = bytes(f.size)
    assert bytes(original) == again, "decode/encode round trip changed the descriptor"


def microcode_assemble(data):
    """Micro-assembler source -> control-store image; every word disassembles and decodes."""
    text = data.decode("latin-1")
    try:
        program = assembler.assemble(text, "fuzz.uasm")
    except assembler.AssemblyError as e:
        _one_line(e)
        return
    assert len(program.words) <= isa.CONTROL_STORE_DEPTH
    assert program.crc32 == assembler.image_crc32(program.words)
    for word in program.words:
        op, values = isa.decode(word)
        assert isa.encode(op.name, **values) == word


def microcode_words(data):
    """A raw control-store image (little-endian 64-bit words): decode refuses or round-trips."""
    for i in range(0, len(data) - 7, 8):
        word = int.from_bytes(data[i : i + 8], "little")
        try:
            op, values = isa.decode(word)
        except ValueError as e:
            _one_line(e)
            continue
        assert isa.encode(op.name, **values) == word
        assembler.disassemble(word)


def trace_read(data):
    """A host-port trace file -> records; every record accepted is one the writer would write
    (the C++ trace player trusts what the reader let through)."""
    fd, path = tempfile.mkstemp(suffix=".trace")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            _, records = trace.read_trace(path)
        except trace.TraceError as e:
            _one_line(e)
            return
        for r in records:
            try:
                r.pack()
            except trace.TraceError as e:
                raise AssertionError(f"the reader accepted a record the writer refuses: {e}") from None
    finally:
        os.unlink(path)


def cli_arguments(data):
    """Command-line words (NUL-separated) -> the parser: it parses or exits 2 with one line."""
    from numavia import cli

    argv = [w.decode("utf-8", "surrogateescape") for w in data.split(b"\0")] if data else []
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.make_parser().parse_args(argv)
        except SystemExit as e:
            assert e.code in (0, 2), f"parser exited {e.code}"
            if e.code == 2:
                _one_line(err.getvalue())


TARGETS = {
    "sci_packet": sci_packet_decode,
    "via_frame": via_frame_decode,
    "via_descriptor": via_descriptor_decode,
    "microcode_assemble": microcode_assemble,
    "microcode_words": microcode_words,
    "trace": trace_read,
    "cli": cli_arguments,
}


def seeds(name):
    """Well-formed inputs of a target, made by the formats' own encoders (the fuzzer mutates them)."""
    if name == "sci_packet":
        out = []
        for ptype, has_data in (
            (sci_packet.PacketType.REQUEST, 0),
            (sci_packet.PacketType.RESPONSE, 1),
            (sci_packet.PacketType.ECHO, 0),
        ):
            p = sci_packet.Packet(
                target=1,
                source=2,
                ptype=ptype,
                has_data=has_data,
                cmd=sci_packet.Command.MREAD,
                tid=3,
                addr=sci_packet.line_address(1, 0x40),
                data=list(range(sci_packet.DATA_WORDS)) if has_data else [],
            )
            out.append(b"".join(s.to_bytes(2, "big") for s in sci_packet.encode(p)))
        return out
    if name == "via_frame":
        out = []
        for op, payload in (
            (via_frame.OP.SEND, b"hello world!"),
            (via_frame.OP.ACK, b""),
            (via_frame.OP.MGMT, bytes(range(64))),
            (via_frame.OP.RDMA_WRITE, bytes(100)),
        ):
            out.append(
                via_frame.HEADER.encode(
                    DST_MAC=via_frame.mac_field(1),
                    SRC_MAC=via_frame.mac_field(0),
                    ETHERTYPE=via_frame.ETHERTYPE_FIELD,
                    OP=op,
                    FLAGS=3,
                    SRC_VI=1,
                    DST_VI=2,
                    PSN=5,
                    ACK_PSN=4,
                    MSG_LENGTH=len(payload),
                    PAYLOAD_LENGTH=len(payload),
                    REMOTE_VA=0x1000,
                    REMOTE_HANDLE=1,
                )
                + payload
            )
        return out
    if name == "via_descriptor":
        op = via_descriptor.CONTROL_OP
        return [
            via_descriptor.encode_descriptor(op.SENDRECV, [(0x1000, 1, 64), (0x2000, 1, 32)]),
            via_descriptor.encode_descriptor(
                op.RDMA_WRITE, [(0x1000, 1, 4096)], immediate=7, remote_va=0x8000, remote_handle=2
            ),
            via_descriptor.encode_descriptor(op.RDMA_READ, [], remote_va=4, remote_handle=3),
        ]
    if name == "microcode_assemble":
        from numavia.base.sci_packet import Command

        lines = [".vector request INVALID done"] + [f".vector request {c.name} done" for c in Command]
        lines += [f".vector local {k.name} done" for k in isa.LocalKind]
        lines += ["done: END", "other: JMP done"]
        return ["\n".join(lines).encode()]
    if name == "microcode_words":
        return [
            b"".join(isa.encode("JMP", target=i).to_bytes(8, "little") for i in range(4))
            + isa.encode("END").to_bytes(8, "little")
        ]
    if name == "trace":
        fd, path = tempfile.mkstemp(suffix=".trace")
        os.close(fd)
        try:
            trace.write_trace(
                path, 1, [trace.read_access(0x100, 4), trace.write_access(0x200, 5, 1, gap=3), trace.barrier(1)]
            )
            with open(path, "rb") as f:
                return [f.read()]
        finally:
            os.unlink(path)
    if name == "cli":
        return [
            b"\0".join(a.encode() for a in argv)
            for argv in (
                ["sim", "--nodes", "4", "--serve"],
                ["bench", "coherence", "--flip-rate", "1e-4"],
                ["bench", "via", "--mtu", "1500,9000", "--min-size", "64k"],
                ["mem", "read", "0x40000000", "--count", "4"],
                ["bench", "splash2", "--kernels", "lu,fft", "--nodes", "1,2"],
                ["status"],
            )
        ]
    raise KeyError(name)
