"""The VIA formats (descriptor, ATT, wire header, mailbox): their definitions, and the C header and
Python module generated from them for the firmware and for tools."""

import subprocess

from numavia.base import codegen, via_att, via_descriptor, via_frame, via_mailbox
from numavia.base.via_descriptor import CONTROL_OP, CONTROL_SEGMENT, DATA_SEGMENT, encode_descriptor


def test_descriptor_follows_fig_4_and_via_1_0():
    # Rows of 16 bytes: next VA [7:0], handle [11:8], segment count [13:12], control [15:14];
    # then reserved, immediate data, length, status; address and data segments: VA, handle, length.
    offsets = {f.name: f.offset for f in CONTROL_SEGMENT.fields}
    assert offsets == {
        "NEXT_VA": 0,
        "NEXT_HANDLE": 8,
        "SEG_COUNT": 12,
        "CONTROL": 14,
        "RESERVED": 16,
        "IMMEDIATE_DATA": 20,
        "LENGTH": 24,
        "STATUS": 28,
    }
    assert [(f.name, f.offset) for f in DATA_SEGMENT.fields] == [("VA", 0), ("HANDLE", 8), ("LENGTH", 12)]
    d = encode_descriptor(CONTROL_OP.RDMA_WRITE, [(1, 2, 3), (4, 5, 6)], remote_va=7, remote_handle=8, immediate=9)
    assert len(d) == via_descriptor.descriptor_size(2, rdma=True) == 32 + 16 + 32
    ctrl = CONTROL_SEGMENT.decode(d)
    assert ctrl["SEG_COUNT"] == 2 and ctrl["IMMEDIATE_DATA"] == 9
    assert CONTROL_SEGMENT.decode_bits("CONTROL", ctrl["CONTROL"]) == {"OP": CONTROL_OP.RDMA_WRITE, "IMMEDIATE": 1}
    assert DATA_SEGMENT.decode(d[64:]) == {"VA": 4, "HANDLE": 5, "LENGTH": 6}


def test_att_entry_and_reference_translation():
    assert via_att.L1_ENTRY.size == 24  # the paper's 24-byte level-1 entry
    assert via_att.region_pages(0x1C00, 9 * 1024) == (3, 0x400)
    entry = via_att.L1_ENTRY.decode(via_att.L1_ENTRY.encode(START_VA=0x1C00, LENGTH=9 * 1024, L2_INDEX=4))
    l2 = {4: 0x2C00, 5: 0x5000, 6: 0x8000}
    assert via_att.translate(entry, l2, 0x2004, 4) == 0x5004
    assert via_att.translate(entry, l2, 0x4000, 1) is None


def test_wire_header_is_word_aligned_and_limits_are_right():
    assert via_frame.HEADER.size % 4 == 0 and via_frame.VIA_HEADER_SIZE == 42
    assert round(via_frame.wire_limit_bytes_per_s(1500, header=False) / 1e6, 1) == 121.9
    assert round(via_frame.wire_limit_bytes_per_s(9000, header=False) / 1e6, 1) == 124.5
    raw = via_frame.HEADER.encode(ETHERTYPE=via_frame.ETHERTYPE_FIELD, DST_MAC=via_frame.mac_field(3))
    assert raw[12:14] == bytes([0x88, 0xB5]) and raw[:6] == bytes([2, 0x4E, 0x56, 0, 0, 3])


def test_wire_message_rate_counts_frames_padding_and_overhead():
    # A 64-byte message: 8 preamble + 14 + 42 + 64 + 4 FCS + 12 gap = 144 bytes, 1.152 us.
    assert via_frame.wire_messages_per_s(64, 1500) == 125e6 / 144
    # Below the 64-byte minimum frame the rate stops growing: 1 and 4 bytes cost the same.
    assert via_frame.wire_messages_per_s(1, 1500) == via_frame.wire_messages_per_s(4, 1500) == 125e6 / 84
    # One byte past a full frame is a second, minimum-size frame.
    full = via_frame.payload_per_frame(1500)
    assert via_frame.wire_messages_per_s(full, 1500) == 125e6 / (8 + 14 + 1500 + 4 + 12)
    assert via_frame.wire_messages_per_s(full + 1, 1500) == 125e6 / (8 + 14 + 1500 + 4 + 12 + 8 + 64 + 12)
    # Large messages approach the wire's payload limit.
    mib = 1 << 20
    assert 0.999 < via_frame.wire_messages_per_s(mib, 1500) * mib / via_frame.wire_limit_bytes_per_s(1500) <= 1


def test_mailbox_commands_fit_the_registers():
    codes = [c.code for c in via_mailbox.COMMANDS]
    assert len(codes) == len(set(codes))
    for c in via_mailbox.COMMANDS:
        assert len(c.args) <= 16 and len(c.results) <= 16
    # The BENCH command's extra argument words follow its own, within the 16 mailbox words.
    bench = via_mailbox.command("BENCH")
    assert len(bench.args) <= via_mailbox.BENCH_ARG_WAKE_CQ < via_mailbox.BENCH_ARG_STREAM < 16
    assert via_mailbox.MGMT_MESSAGE.size <= via_frame.MGMT_PAYLOAD_MAX


def test_generated_c_headers_compile_together_and_agree(tmp_path):
    gen = tmp_path / "gen"
    codegen.write_all(gen)
    src = tmp_path / "t.c"
    src.write_text(
        '#include "numavia_regs.h"\n#include "numavia_via.h"\n#include <stdio.h>\nint main(void){'
        'printf("%u %u %u %u %u\\n", NV_DESC_CONTROL_STATUS_OFFSET, NV_ATT_L1_PTAG_OFFSET, '
        "NV_FRAME_HEADER_PSN_OFFSET, NV_MBOX_BENCH_ARG_DESC, NV_FRAME_OP_READ_RESPONSE);return 0;}\n"
    )
    subprocess.run(["cc", "-Wall", "-Werror", "-I", str(gen), str(src), "-o", str(tmp_path / "t")], check=True)
    out = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True).stdout.split()
    assert [int(x) for x in out] == [
        CONTROL_SEGMENT.field("STATUS").offset,
        via_att.L1_ENTRY.field("PTAG").offset,
        via_frame.HEADER.field("PSN").offset,
        via_mailbox.command("BENCH").args.index("DESC"),
        via_frame.OP.READ_RESPONSE,
    ]


def test_generated_python_module_encodes_like_the_definitions():
    namespace = {}
    exec(codegen.via_python_module(), namespace)
    assert namespace["DESC_CONTROL_STATUS_DONE_MASK"] == 1
    raw = namespace["encode"]("FRAME_HEADER", PSN=77, OP=3)
    assert raw == via_frame.HEADER.encode(PSN=77, OP=3)
    assert namespace["decode"]("FRAME_HEADER", raw)["PSN"] == 77
