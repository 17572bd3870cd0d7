"""Ownership of the tags and memories: grants a cycle after the request, the local side first on
a tie, the hand-over without an idle cycle, never two owners, nobody starved."""

import random

from support.sim import run_testbench

from numavia.gateware.ownership import Ownership

MAX_HOLD = 5  # cycles a side keeps ownership in the random test


async def step(ctx, dut, local, remote):
    """Set the requests for one cycle; returns the grants seen after its clock edge."""
    ctx.set(dut.local_req, local)
    ctx.set(dut.remote_req, remote)
    await ctx.tick()
    return ctx.get(dut.local_grant), ctx.get(dut.remote_grant)


def test_a_grant_comes_the_cycle_after_the_request():
    async def bench(ctx, dut):
        assert await step(ctx, dut, 0, 0) == (0, 0)
        assert await step(ctx, dut, 0, 1) == (0, 1)
        assert await step(ctx, dut, 0, 0) == (0, 0)
        assert await step(ctx, dut, 1, 0) == (1, 0)
        assert await step(ctx, dut, 0, 0) == (0, 0)

    run_testbench(Ownership(), bench)


def test_on_a_tie_the_local_side_wins_and_hands_over_without_an_idle_cycle():
    async def bench(ctx, dut):
        assert await step(ctx, dut, 1, 1) == (1, 0)
        assert await step(ctx, dut, 1, 1) == (1, 0)  # the sequencer waits while the local side works
        assert await step(ctx, dut, 0, 1) == (0, 1)  # it lets go: the sequencer owns at once
        assert await step(ctx, dut, 1, 1) == (0, 1)  # ... and keeps it until it lets go
        assert await step(ctx, dut, 1, 0) == (1, 0)  # then the local side, at once too

    run_testbench(Ownership(), bench)


def test_a_refused_sequencer_goes_before_the_local_side_asking_again():
    async def bench(ctx, dut):
        await step(ctx, dut, 1, 0)  # local owns
        await step(ctx, dut, 1, 1)  # ... the sequencer is refused
        await step(ctx, dut, 0, 0)  # ... and both let go in the same cycle
        assert await step(ctx, dut, 1, 1) == (0, 1)  # the sequencer's turn, although a tie

    run_testbench(Ownership(), bench)


def test_random_requests_never_give_two_owners_and_every_request_is_granted():
    async def bench(ctx, dut):
        rng = random.Random(11)
        # Each side asks, keeps asking until granted, holds for a while, lets go, rests.
        sides = {name: dict(asking=False, held=0, waited=0, grants=0, released=None) for name in ("local", "remote")}
        for cycle in range(5000):
            for side in sides.values():
                # (both controllers go through an idle state between two pieces of work)
                if not side["asking"] and side["released"] != cycle - 1 and rng.random() < 0.3:
                    side.update(asking=True, held=rng.randrange(1, MAX_HOLD + 1), waited=0)
            grants = await step(ctx, dut, sides["local"]["asking"], sides["remote"]["asking"])
            assert grants != (1, 1)
            for granted, side in zip(grants, sides.values()):
                if not side["asking"]:
                    assert not granted
                    continue
                if granted:
                    side["held"] -= 1
                    if side["held"] == 0:
                        side.update(asking=False, grants=side["grants"] + 1, released=cycle)
                else:
                    side["waited"] += 1
                    # at most the other's hold, its request cycle and its release
                    assert side["waited"] <= MAX_HOLD + 4, "a requester starved"
        assert sides["local"]["grants"] > 300 and sides["remote"]["grants"] > 300

    run_testbench(Ownership(), bench)
