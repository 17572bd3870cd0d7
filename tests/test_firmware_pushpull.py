"""The push-pull library's protocol (firmware/core/src/pushpull.c), compiled for the host
(ASan/UBSan): the plan at the bytes_to_push edges, every size class under both schemes, a receiver
that is not posted yet, credits, refusals; two endpoints joined by a minimal engine model that
checks every segment against the ATT the library wrote (firmware/tests/test_pushpull.c)."""

import re
import subprocess

from numavia.base import codegen, via_mailbox
from numavia.base import pushpull_format as ppf
from numavia.base.paths import REPO_ROOT


def test_pushpull_unit_tests(tmp_path):
    gen = tmp_path / "generated"
    codegen.write_all(gen)
    subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(REPO_ROOT / "firmware/tests"),
            f"BUILD_DIR={tmp_path}",
            f"GEN_DIR={gen}",
            str(tmp_path / "test_pushpull"),
        ],
        check=True,
    )
    result = subprocess.run([str(tmp_path / "test_pushpull")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    checks, failures = (int(w) for w in result.stdout.split()[::2][:2])
    assert failures == 0 and checks >= 300


def test_format_fits_the_mailbox_and_the_header_is_generated_from_it():
    bench = via_mailbox.command("BENCH")
    # Push-pull's extra words come after BENCH's own and stay inside the 16 mailbox words; its
    # operation codes do not collide with the agent's own.
    assert len(bench.args) <= min(ppf.ARG_THRESHOLD, ppf.ARG_FLAGS) and max(ppf.ARG_THRESHOLD, ppf.ARG_FLAGS) < 16
    assert len(bench.results) <= ppf.RESULT_BASE and ppf.RESULT_BASE + len(ppf.RESULTS) <= 16
    assert not {v for _, v, _ in ppf.BENCH_OP.values} & {v for _, v, _ in via_mailbox.BENCH_OP.values}
    assert ppf.AREA_RECV_PAGES + 4 * ppf.MAX_PAGES <= ppf.AREA_BYTES
    header = codegen.pushpull_c_header()
    defines = dict(re.findall(r"#define (\w+)\s+(0x[0-9a-f]+)u", header))
    for f in ppf.HEADER.ordered_fields():
        assert int(defines[f"NV_PP_HEADER_{f.name}_OFFSET"], 16) == f.offset
        assert int(defines[f"NV_PP_HEADER_{f.name}_BYTES"], 16) == f.size
    assert int(defines["NV_PP_SLOTS"], 16) == ppf.SLOTS and int(defines["NV_PP_BENCH_OP_ADVANCED"], 16) == 9
