"""`numavia status` against a served simulation: every card's error counters and the error log.
Hostile doorbells (a descriptor address outside host memory, a misaligned one) are refused by the
real card, counted, and logged once with the node's cycle; other nodes stay clean."""

import pytest
from support.ring_sim import build, served_cli

from numavia.base import regmap

pytestmark = pytest.mark.slow

CARD = 0x8000_0000  # the card's registers in a node's memory map (csr.json region "card")


def test_status_shows_error_counters_and_logs_each_increase(tmp_path):
    build(2)  # cached model; the CLI below finds it
    with served_cli(tmp_path, 2) as numavia:
        status = lambda *extra: numavia("status", *extra)
        clean = status()
        assert clean.returncode == 0, clean.stderr
        assert f"error counters ({len(regmap.ERROR_COUNTERS) + 1} per node): all zero" in clean.stdout
        assert "error log (0 entries, 0 new" in clean.stdout

        doorbell = CARD + regmap.CARD.element_address("doorbell", "VI", 0, "SQ_DOORBELL")
        for bad in (0x40, 0x6000_0004):  # outside host memory; not 16-byte aligned
            w = numavia("mem", "write", hex(doorbell), hex(bad))
            assert w.returncode == 0, w.stderr
        faulty = status()
        assert faulty.returncode == 0, faulty.stderr
        table = [line for line in faulty.stdout.splitlines() if line.startswith("| ")]
        assert "| node | via.DOORBELLS_REFUSED |" in table
        assert "| 0    | 2                     |" in table and "| 1    | 0                     |" in table
        log = [line.strip() for line in faulty.stdout.split("error log")[1].splitlines()[1:]]
        assert len(log) == 1 and log[0].startswith("node 0 cycle ")
        assert "via.DOORBELLS_REFUSED +2 (total 2)" in log[0]

        again = status("--log-lines", "5")  # nothing new happened: nothing new logged
        assert "error log (1 entries, 0 new" in again.stdout
        bad_arg = status("--log-lines", "-1")
        assert bad_arg.returncode == 2 and bad_arg.stderr.count("\n") == 1 and "must not be negative" in bad_arg.stderr
