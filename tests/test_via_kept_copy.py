# amaranth: UnusedElaboratable=no
"""The rule both VIA engines keep a validated copy by: good for the key it was validated for from
the end of its validation, until it is dropped, the ATT is written (FORGET_COPIES alike) or a VI
connects; a forget at any cycle from the validation's start to its end spoils that validation."""

import pytest
from amaranth.lib import data
from support.sim import run_testbench

from numavia.gateware.via_kept_copy import KeptCopy

KEY = data.StructLayout({"vi": range(8), "desc": 32})


async def pulse(ctx, dut, *strobes, key=None):
    """One cycle with `strobes` high (and `key` given); they drop again after the edge."""
    if key is not None:
        ctx.set(dut.key, key)
    for s in strobes:
        ctx.set(getattr(dut, s), 1)
    await ctx.tick()
    for s in strobes:
        ctx.set(getattr(dut, s), 0)


async def validate(ctx, dut, key, forget_at=None):
    """A validation: `start`, two cycles, `keep`; `forget` in the named step if asked."""
    await pulse(ctx, dut, "start", *(["forget"] if forget_at == "start" else []))
    await pulse(ctx, dut, *(["forget"] if forget_at == "between" else []))
    await pulse(ctx, dut, "keep", *(["forget"] if forget_at == "keep" else []), key=key)


async def hit(ctx, dut, key):
    """Probe `key`: held for a cycle, as the engines do, then `hit` read."""
    ctx.set(dut.probe, key)
    await ctx.tick()
    return ctx.get(dut.hit)


A, B = {"vi": 3, "desc": 0x1000}, {"vi": 3, "desc": 0x1080}


def test_a_validated_copy_hits_its_own_key_only_until_it_is_dropped():
    async def bench(ctx, dut):
        assert not await hit(ctx, dut, A)  # nothing kept after reset
        await validate(ctx, dut, A)
        assert await hit(ctx, dut, A) and await hit(ctx, dut, A)  # probing changes nothing
        assert not await hit(ctx, dut, B) and not await hit(ctx, dut, {"vi": 2, "desc": 0x1000})
        await pulse(ctx, dut)
        assert await hit(ctx, dut, A)  # it lasts
        await validate(ctx, dut, B)  # a new validation replaces the key
        assert await hit(ctx, dut, B) and not await hit(ctx, dut, A)
        await pulse(ctx, dut, "drop")
        assert not await hit(ctx, dut, B)

    run_testbench(KeptCopy(KEY), bench)


@pytest.mark.parametrize("event", ["forget", "connect"])
def test_an_att_write_or_a_connect_drops_the_copy(event):
    async def bench(ctx, dut):
        await validate(ctx, dut, A)
        await pulse(ctx, dut, event)
        assert not await hit(ctx, dut, A)
        await validate(ctx, dut, A)  # a validation after it is good again
        assert await hit(ctx, dut, A)

    run_testbench(KeptCopy(KEY), bench)


@pytest.mark.parametrize("forget_at", ["start", "between", "keep"])
def test_a_forget_during_the_validation_spoils_it(forget_at):
    async def bench(ctx, dut):
        await validate(ctx, dut, A, forget_at=forget_at)
        assert not await hit(ctx, dut, A)
        await validate(ctx, dut, A)  # the next validation starts afresh
        assert await hit(ctx, dut, A)

    run_testbench(KeptCopy(KEY), bench)


def test_a_forget_before_the_validation_starts_does_not_spoil_it():
    async def bench(ctx, dut):
        await pulse(ctx, dut, "forget")
        await validate(ctx, dut, A)
        assert await hit(ctx, dut, A)

    run_testbench(KeptCopy(KEY), bench)


def test_a_copy_dropped_as_a_new_one_loads_is_good_again_once_that_one_is_kept():
    """The engines drop the old copy as they load a new one and keep only at the end: a drop alone
    never leaves a copy good, and a keep after the drop does."""

    async def bench(ctx, dut):
        await validate(ctx, dut, A)
        await pulse(ctx, dut, "drop", "start")
        assert not await hit(ctx, dut, A)
        await pulse(ctx, dut, "keep", key=B)
        assert await hit(ctx, dut, B)

    run_testbench(KeptCopy(KEY), bench)


def test_the_hit_answers_the_probe_of_the_cycle_before():
    """The key's comparison is registered: a probe changed in this cycle is answered in the next."""

    async def bench(ctx, dut):
        await validate(ctx, dut, A)
        assert not await hit(ctx, dut, B)
        ctx.set(dut.probe, A)
        assert not ctx.get(dut.hit)  # still B's answer
        await ctx.tick()
        assert ctx.get(dut.hit)
        ctx.set(dut.probe, B)
        assert ctx.get(dut.hit)  # still A's
        ctx.set(dut.probe, A)
        await pulse(ctx, dut, "forget")
        assert not ctx.get(dut.hit)  # A compared equal, but a forget counts at once

    run_testbench(KeptCopy(KEY), bench)


def test_the_old_key_does_not_hit_in_the_cycle_after_a_new_one_is_kept():
    """The comparison registered in a keep's cycle was with the old key: no hit follows it."""

    async def bench(ctx, dut):
        await validate(ctx, dut, A)
        ctx.set(dut.probe, A)
        await validate(ctx, dut, B)  # A probed all along
        assert not ctx.get(dut.hit)
        await ctx.tick()
        assert not ctx.get(dut.hit)  # now compared with B
        assert await hit(ctx, dut, B)

    run_testbench(KeptCopy(KEY), bench)
