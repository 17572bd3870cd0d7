"""The protocol explorer: every interleaving of model cards running the real SCI microcode on one
line, each state checked (gateware/microcode/protocol_explorer.py).

The correct microcode explores without a violation or a deadlock and reaches the states a
correct protocol must reach; microcode with an injected bug is caught, with a readable trace."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from numavia.base.coherence import CacheState as C
from numavia.base.coherence import MemoryState as M
from numavia.base.microcode import isa
from numavia.base.microcode.assembler import assemble
from numavia.bench import protocol
from numavia.gateware.microcode.protocol_explorer import ExploreConfig, ProtocolExplorer, format_counterexample

SOURCE = Path(isa.__file__).with_name("sci.uasm").read_text()
PROGRAM = assemble(SOURCE, "sci.uasm")

EVERY_MEMORY_STATE = {(M.HOME, False), (M.FRESH, False), (M.FRESH, True), (M.GONE, False), (M.GONE, True)}
EVERY_MEMORY_STATE |= {(M.SHOWN, False)}  # read uncached since the home's last write
# What a cache that is not the home reaches in a list of at most two caches (no middle entry).
TWO_CACHE_STATES = {C.INVALID, C.ONLY_FRESH, C.ONLY_DIRTY, C.HEAD_FRESH, C.HEAD_DIRTY, C.TAIL_VALID}
TWO_CACHE_STATES |= {C.PENDING, C.WRITING}
COHERENT_COMMANDS = {"MREAD", "MWRITE", "MHEAD_LOCK", "MHEAD_UNLOCK", "MONLY_OUT"}
COHERENT_COMMANDS |= {"CPREPEND", "CPURGE", "CSET_FWD", "CSET_BWD", "CFETCH"}
COHERENT_COMMANDS |= {"MUREAD"}  # a line's first read miss, not cached (the allocation filter)


def explore(words=PROGRAM.words, **config):
    return ProtocolExplorer(words, ExploreConfig(**config)).run()


@pytest.mark.parametrize("home", [0, 1, 2])
@pytest.mark.parametrize("cache_first_miss", [False, True], ids=["filter", "first_miss"])
def test_three_nodes_with_the_home_among_them(home, cache_first_miss):
    result = explore(nodes=3, home=home, ops=(1, 1, 1), cache_first_miss=cache_first_miss)
    assert result.ok, [format_counterexample(*v) for v in result.violations + result.deadlocks]
    assert result.final_states > 0 and result.transitions > result.states > 1000
    # Home-side recalls (CPURGE from the home, CFETCH), NACKed attachers were on the way.
    assert {"MREAD", "MWRITE", "CPREPEND", "CPURGE", "CFETCH"} <= result.commands
    assert result.events["NACK_SENT"] > 0 and result.events["PURGE"] > 0
    if cache_first_miss:  # every read miss caches: no MUREAD, nothing SHOWN
        assert result.memory_states == EVERY_MEMORY_STATE - {(M.SHOWN, False)}
        assert "MUREAD" not in result.commands
        reached = TWO_CACHE_STATES
    else:
        # First reads (MUREAD, among them of GONE lines, which attach) make lines SHOWN; a second
        # miss of a line the home wrote since (HOME) is answered uncached. With one operation a
        # node, a copy is made only at a SHOWN or FRESH line, so two readers never both cache it
        # (no HEAD_FRESH).
        assert result.memory_states == EVERY_MEMORY_STATE
        assert "MUREAD" in result.commands and result.events["REWRITTEN_READ"] > 0
        reached = TWO_CACHE_STATES - {C.HEAD_FRESH}
    for node in range(3):  # the home never caches its own line
        assert result.cache_states[node] == ({C.INVALID} if node == home else reached)


@pytest.mark.parametrize("cache_first_miss", [False, True], ids=["filter", "first_miss"])
def test_rollouts_race_home_recalls_and_fetches(cache_first_miss):
    """Two operations on one cache: it can leave (flush, or a write from a shared state) while the
    home recalls or fetches the line and the third node attaches."""
    result = explore(nodes=3, home=0, ops=(1, 2, 1), cache_first_miss=cache_first_miss)
    assert result.ok, [format_counterexample(*v) for v in result.violations + result.deadlocks]
    reached = set(C) - {C.MID_VALID, C.LEAVE_MID}  # a list of two has no middle
    if not cache_first_miss:  # its head of two made by its second read leaves no operation to leave
        reached -= {C.LEAVE_HEAD_FRESH}
    assert result.cache_states[1] == reached
    if cache_first_miss:
        assert result.memory_states == EVERY_MEMORY_STATE - {(M.SHOWN, False)}
        assert result.commands == COHERENT_COMMANDS - {"MUREAD"}
    else:
        assert result.memory_states == EVERY_MEMORY_STATE
        assert result.commands == COHERENT_COMMANDS
    assert all(result.events[name] > 0 for name in ("NACK_SENT", "ROLLOUT", "PURGE"))


def test_three_caches_reach_every_cache_state():
    """Three caches (the home only answers): a list of three, each position leaving and purged."""
    result = explore(nodes=4, home=3, ops=(2, 1, 1, 0))
    assert result.ok, [format_counterexample(*v) for v in result.violations + result.deadlocks]
    assert result.cache_states[0] == set(C)  # every stable, attaching and leaving state
    assert result.cache_states[3] == {C.INVALID}
    assert result.memory_states == EVERY_MEMORY_STATE
    assert COHERENT_COMMANDS - {"CFETCH"} <= result.commands  # CFETCH: only the home's host reads
    assert all(result.events[name] > 0 for name in ("NACK_SENT", "ROLLOUT", "PURGE"))


def test_an_ordered_network_reaches_a_part_of_what_the_reordering_one_does():
    ordered = explore(nodes=3, home=0, ops=(1, 2, 1), ordered=True)
    reordering = explore(nodes=3, home=0, ops=(1, 2, 1))
    assert ordered.ok and reordering.ok
    assert ordered.memory_states <= reordering.memory_states and ordered.commands <= reordering.commands
    assert all(ordered.cache_states[n] <= reordering.cache_states[n] for n in range(3))


def test_a_bounded_search_says_it_was_cut_short():
    result = explore(nodes=3, home=0, ops=(1, 1, 1), max_states=500)
    assert result.truncated and not result.ok and not result.violations


@pytest.mark.parametrize(
    "config, error",
    [
        (dict(nodes=1, ops=(1,)), "at least 2 nodes"),
        (dict(nodes=3, home=3), "the home must be one of the nodes 0..2"),
        (dict(nodes=3, ops=(1, 1)), "ops gives each of the 3 nodes"),
        (dict(kinds=("read", "evict")), "kinds are among read, write, flush"),
    ],
)
def test_bad_configurations_are_refused(config, error):
    with pytest.raises(ValueError, match=error):
        ExploreConfig(**config)


# --- injected microcode bugs -----------------------------------------------------------------------


def broken(old, new):
    source = SOURCE.replace(old, new)
    assert source != SOURCE
    return assemble(source).words


def first_problem(result):
    problems = result.violations + result.deadlocks
    assert problems, "the bug went unnoticed"
    message, trace = problems[0]
    text = format_counterexample(message, trace)
    print(text)
    return message, trace, text


def test_a_dropped_write_back_is_caught_with_a_trace():
    words = broken("SEND cmd=MONLY_OUT, dest=HOME, data=BUF", "SEND cmd=MONLY_OUT, dest=HOME, data=NONE")
    message, trace, text = first_problem(explore(words, nodes=3, home=0, ops=(1, 2, 0), kinds=("write", "flush")))
    # Node 1 writes, rolls its dirty line out without the data: the home serves the stale value.
    assert "would read 0x0 on a hit, the last write was 0x201" in message
    assert "MONLY_OUT from 1 to 0" in text and "host 1 writes 0x201" in text
    assert len(trace) < 25


def test_a_purge_that_stops_early_is_caught_with_a_trace():
    words = broken("        BRT PTR_V, write_purge\n", "        NOP\n")
    message, _, text = first_problem(explore(words, nodes=4, home=3, ops=(1, 1, 1, 0), kinds=("read", "write")))
    # The writer purged the old head only: the tail keeps a readable copy beside the dirty writer.
    assert "may write without the sequencer while node(s)" in message
    assert "CPURGE" in text


def test_a_lost_fetch_answer_is_a_deadlock():
    words = broken("fetch:\n        REPLY status=OK, data=CACHE\n", "fetch:\n")
    result = explore(words, nodes=3, home=0, ops=(1, 1, 0), kinds=("read", "write"))
    assert not result.violations
    message, _, text = first_problem(result)
    assert message.startswith("no event possible") and "CFETCH from 0 to 1" in text


def test_a_tail_that_can_never_leave_is_a_livelock():
    words = broken("JMP setfwd_only_fresh       ; HEAD_FRESH", "JMP h_nack")
    # (Every read miss caches: with the filter, node 0's one read could not make it a tail.)
    result = explore(words, nodes=3, home=2, ops=(2, 1, 0), kinds=("read", "flush"), cache_first_miss=True)
    assert not result.violations
    message, _, text = first_problem(result)
    # The tail's CSET_FWD is NACKed for ever: retrying remains possible, finishing does not.
    assert message.startswith("no final state is reachable")
    loop = text[text.index("then, for ever:") :]
    assert "node 0 LEAVE_TAIL" in loop and "CSET_FWD answer NACK from 1 to 0" in loop


@pytest.mark.slow
def test_three_caches_two_of_them_leaving():
    """Three caches, two of which may also leave or write after attaching (600,000 states, about
    2 minutes): every state at both, lists of three emptied from every position."""
    result = explore(nodes=4, home=3, ops=(2, 2, 1, 0))
    assert result.ok, [format_counterexample(*v) for v in result.violations + result.deadlocks]
    assert result.cache_states[0] == result.cache_states[1] == set(C)
    assert result.memory_states == EVERY_MEMORY_STATE
    assert COHERENT_COMMANDS - {"CFETCH"} <= result.commands


# --- numavia bench protocol -------------------------------------------------------------------------

CLI = [sys.executable, "-m", "numavia.cli", "bench", "protocol"]


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--home", "3"], "the home must be one of the nodes 0..2, not 3"),
        (["--ops", "1,2"], "ops gives each of the 3 nodes a count of operations"),
        (["--ops", "1,x,1"], "'x' is not an integer"),
        (["--kinds", "read,evict"], "'evict' is not a kind of operation"),
        (["--nodes", "1"], "'1' is not a ring size (2..64)"),
        (["--max-states", "0"], "must be positive"),
        (["--cache-at", "third"], "invalid choice: 'third'"),
    ],
)
def test_bench_bad_arguments_are_one_line_errors(tmp_path, args, reason):
    result = subprocess.run(CLI + args + ["--out", str(tmp_path)], capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and reason in lines[0], result.stderr
    assert not any(tmp_path.iterdir())  # rejected before any work


@pytest.mark.parametrize("cache_at", ["second", "first"])
def test_bench_runs_and_writes_its_figures(tmp_path, cache_at):
    args = ["--ops", "1,1,0", "--cache-at", cache_at, "--out", str(tmp_path)]
    result = subprocess.run(CLI + args, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "exploring 3 cards sharing a line of node 0" in result.stderr
    assert f"caching a line at its {cache_at} read miss" in result.stderr
    figures = json.loads((tmp_path / "protocol.json").read_text())["figures"]
    assert figures["violations"] == figures["deadlocks"] == 0 and figures["states"] > 50
    assert figures["config"]["cache_first_miss"] == (cache_at == "first")
    assert ("SHOWN" in figures["memory_states"]) == (cache_at == "second")
    assert figures["states"] == int(next(r for r in csv.reader(open(tmp_path / "protocol.csv")) if r[0] == "states")[1])
    assert "| states" in result.stdout and (tmp_path / "protocol.md").read_text().startswith("# Protocol exploration")


def test_bench_without_a_verdict_fails_with_one_line(tmp_path):
    result = subprocess.run(CLI + ["--max-states", "100", "--out", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 1
    assert (
        result.stderr.strip().splitlines()[-1] == "numavia: error: the search stopped at --max-states 100: no verdict"
    )


def test_bench_writes_the_counterexample_of_a_broken_microcode(tmp_path):
    words = broken("SEND cmd=MONLY_OUT, dest=HOME, data=BUF", "SEND cmd=MONLY_OUT, dest=HOME, data=NONE")
    figures = protocol.run(ExploreConfig(ops=(0, 2, 0), kinds=("write", "flush")), log=lambda m: None, words=words)
    protocol.report(figures, tmp_path)
    assert figures["violations"] == 1
    text = (tmp_path / "counterexample.txt").read_text()
    assert text.startswith("VIOLATION: node 0 would read 0x0 on a hit") and "MONLY_OUT from 1 to 0" in text
