"""Push-pull messaging end to end: the library in each node's real firmware, on the real VIA
engine RTL (Verilator), two nodes over the simulated GbE switch. Every message is filled with a
pattern by the sender's agent and checked byte for byte by the receiver's (the VERIFY flag), in
both directions of a ping-pong, under both schemes, for every size class around bytes_to_push
and past the MTU; with receives posted late (pushed parts wait in the pushed buffer, pulls wait
for the receive); and a one-way burst that runs the sender out of credits."""

import pytest
from support.via_system import session

from numavia.base import pushpull_format as ppf
from numavia.bench.pushpull import PushPullError, PushPullPair
from numavia.vipl import ViplError

pytestmark = pytest.mark.slow

THRESHOLD = 512
SIZES = [0, 1, ppf.REGISTER_BYTES, ppf.REGISTER_BYTES + 1, THRESHOLD - 1, THRESHOLD, THRESHOLD + 1, 5000]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with session(tmp_path_factory, "pushpull") as s:
        yield PushPullPair(s, max_size=8192, timeout=900)


def check(figures, *, iterations, size, threshold, received=None):
    for node, f in enumerate(figures):
        expected = iterations if received is None else received[node]
        assert f["bad_bytes"] == 0, f"node {node}: {f['bad_bytes']} bad bytes in {size}-byte messages"
        assert f["received"] == expected
        # The agents stamp each side's last message only: one one-way time per receiving side.
        assert f["one_ways"] == min(expected, 1)
        assert f["pulls"] == (expected if size > threshold else 0)


def test_a_message_of_a_few_bytes_leaves_the_bytes_after_it_alone(pair):
    """Each side writes a 1-3 byte message into its user buffer, and the library writes what it
    receives, with byte stores on the SoC bus (the word around them neither read nor written): the
    host's pattern after the message survives both, on both nodes."""
    after = bytes(range(0xC0, 0xC8))
    for size in (1, 2, 3):
        for node in (0, 1):
            buf, offset = pair.user_buffer(node)
            buf.write(after, offset + size)
        check(pair.run("advanced", size, THRESHOLD, 2, verify=True), iterations=2, size=size, threshold=THRESHOLD)
        for node in (0, 1):
            buf, offset = pair.user_buffer(node)
            assert buf.read(len(after), offset + size) == after, f"node {node}, {size}-byte messages"


@pytest.mark.parametrize("scheme", ["original", "advanced"])
def test_every_size_class_delivered_intact(pair, scheme):
    for size in SIZES:
        figures = pair.run(scheme, size, THRESHOLD, 2, verify=True)
        check(figures, iterations=2, size=size, threshold=THRESHOLD)
        # The card counters of both nodes started together: a message's one-way time is positive
        # and shorter than the initiator's whole round trip.
        round_trip = figures[0]["cycles"] / 2
        for f in figures:
            assert 0 < f["one_way_cycles"] < round_trip
        # What the schemes translate: the original always the user buffer, the advanced only a
        # pulled part (and the receiver's posted buffer beyond bytes_to_push, here none).
        if scheme == "original":
            assert (figures[0]["translated_pages"] > 0) == (size > 0)
        else:
            assert (figures[0]["translated_pages"] > 0) == (size > THRESHOLD)


@pytest.mark.parametrize("scheme", ["original", "advanced"])
def test_receiver_posts_late(pair, scheme):
    """The responder waits 2 ms before each receive: the push waits in its slot, a pull waits for
    the receive (the sender keeps its buffer until the ACK)."""
    for size in (THRESHOLD - 1, THRESHOLD + 1, 5000):
        figures = pair.run(scheme, size, THRESHOLD, 2, verify=True, late_us=2000)
        check(figures, iterations=2, size=size, threshold=THRESHOLD)
        # The second ping waits for its receive for 2 ms less a pong and the agents' pattern work
        # (well under 1 ms): the late side's one-way time exceeds the early side's by > 300 us.
        assert figures[1]["one_way_cycles"] - figures[0]["one_way_cycles"] > 300 * 100


def test_burst_past_the_credits_with_a_late_receiver(pair):
    """More messages than pushed-buffer slots, one way, receives late: the sender waits for the
    receiver's CREDIT instead of sending into a slot that is not posted (which would break the
    connection), and every message arrives intact and in order."""
    messages = 2 * ppf.SLOTS + 1
    for scheme, size in (("advanced", 100), ("original", THRESHOLD + 100)):
        figures = pair.run(scheme, size, THRESHOLD, messages, verify=True, burst=True, late_us=300)
        check(figures, iterations=messages, size=size, threshold=THRESHOLD, received=[0, messages])


def test_threshold_edges_at_other_thresholds(pair):
    for threshold in (0, 64, ppf.MAX_PUSH):
        for size in (threshold - 1, threshold, threshold + 1):
            if size < 0:
                continue
            for scheme in ("original", "advanced"):
                figures = pair.run(scheme, size, threshold, 1, verify=True)
                check(figures, iterations=1, size=size, threshold=threshold)


def test_bad_parameters_are_refused(pair):
    with pytest.raises(PushPullError, match="bytes_to_push must be"):
        pair.run("advanced", 8, ppf.MAX_PUSH + 1, 1)
    with pytest.raises(PushPullError, match="unknown scheme"):
        pair.run("eager", 8, 64, 1)
    # The firmware checks too (a host that skips the library's checks).
    args = pair._args(0, "advanced", 8, 1)
    with pytest.raises(ViplError) as e:
        pair.nics[0].command("BENCH", extra_words={ppf.ARG_THRESHOLD: ppf.MAX_PUSH + 1, ppf.ARG_FLAGS: 0}, **args)
    assert e.value.result == "INVALID_PARAMETER"
    # The pair still works afterwards.
    check(pair.run("advanced", 600, 512, 1, verify=True), iterations=1, size=600, threshold=512)
