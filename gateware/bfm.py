"""Bus functional models for Amaranth simulator testbenches: one driver for
``amaranth.lib.stream`` interfaces (either side) and one Wishbone initiator (classic cycles, and
incrementing bursts on a ``wishbone_burst`` bus). Used by the tests and by the
benchmarks that run blocks in the simulator (so it lives in the package, not under tests/).

A stream beat moves on a clock edge where valid and ready are both high. Loops sample explicitly
rather than use ``until``, so background testbenches can be abandoned at the end of a simulation.
"""

from .wishbone_burst import CTI_CLASSIC, CTI_END, CTI_INCREMENTING


class BusError(Exception):
    """A Wishbone access ended in ``err``."""


async def send(ctx, stream, payload, *, timeout=None):
    """Offer ``payload`` on ``stream`` until a clock edge at which ``ready`` is high. Returns the
    number of edges ``ready`` was low before that; raises after ``timeout`` of them (if given)."""
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    waited = 0
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        if ready:
            break
        waited += 1
        if timeout is not None and waited > timeout:
            raise TimeoutError(f"stream not ready within {timeout} cycles")
    ctx.set(stream.valid, 0)
    return waited


async def recv(ctx, stream, *, timeout=None):
    """Take one payload (a layout view or an int) from ``stream``; raises after ``timeout``
    clock edges without ``valid`` (if given)."""
    ctx.set(stream.ready, 1)
    waited = 0
    while True:
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        if valid:
            break
        waited += 1
        if timeout is not None and waited > timeout:
            raise TimeoutError(f"stream not valid within {timeout} cycles")
    ctx.set(stream.ready, 0)
    return payload


async def wishbone_release(ctx, bus):
    """End the bus cycle: ``cyc`` and ``stb`` down for a clock."""
    ctx.set(bus.cyc, 0)
    ctx.set(bus.stb, 0)
    await ctx.tick()


async def _wishbone_cycle(ctx, bus, adr, we, dat_w=0, sel=0xF, timeout=64, release=True):
    """One access; with ``release`` False ``cyc`` and ``stb`` stay up, so that the next access's
    address is on the bus in the cycle after this one's answer (:func:`wishbone_release` ends
    the cycle)."""
    ctx.set(bus.adr, adr)
    ctx.set(bus.we, we)
    ctx.set(bus.dat_w, dat_w)
    ctx.set(bus.sel, sel)
    ctx.set(bus.cyc, 1)
    ctx.set(bus.stb, 1)
    for _ in range(timeout):
        _, _, ack, err, data = await ctx.tick().sample(bus.ack, bus.err, bus.dat_r)
        if ack or err:
            break
    else:
        raise TimeoutError(f"no ack/err for word address {adr:#x}")
    if release:
        await wishbone_release(ctx, bus)
    if err:
        raise BusError(f"bus error at word address {adr:#x}")
    return data


async def wishbone_read(ctx, bus, byte_addr, *, release=True):
    return await _wishbone_cycle(ctx, bus, byte_addr // 4, 0, release=release)


async def wishbone_write(ctx, bus, byte_addr, value, sel=0xF, *, release=True):
    await _wishbone_cycle(ctx, bus, byte_addr // 4, 1, value, sel, release=release)


async def wishbone_read_cycles(ctx, bus, byte_addr, *, timeout=64):
    """A read whose answer is not wanted, only its time: the clock edges from its request to its
    answer (``ack`` or ``err``)."""
    ctx.set(bus.adr, byte_addr // 4)
    ctx.set(bus.we, 0)
    ctx.set(bus.sel, 0xF)
    ctx.set(bus.cyc, 1)
    ctx.set(bus.stb, 1)
    for cycles in range(1, timeout + 1):
        _, _, ack, err = await ctx.tick().sample(bus.ack, bus.err)
        if ack or err:
            await wishbone_release(ctx, bus)
            return cycles
    raise TimeoutError(f"no ack/err for byte address {byte_addr:#x}")


async def wishbone_burst_read(ctx, bus, addr, words, *, give_up_after=None, limit=5000):
    """An incrementing burst read of ``words`` words from ``addr`` (a classic cycle for one) on a
    ``wishbone_burst`` bus; ``[(data, err)]``. ``give_up_after``: drop the cycle after that many words."""
    got = []
    ctx.set(bus.we, 0)
    ctx.set(bus.sel, 0xF)
    ctx.set(bus.cyc, 1)
    ctx.set(bus.stb, 1)
    for _ in range(limit):
        n = len(got)
        ctx.set(bus.adr, addr // 4 + n)
        ctx.set(bus.cti, CTI_CLASSIC if words == 1 else CTI_END if n == words - 1 else CTI_INCREMENTING)
        _, _, ack, err, data = await ctx.tick().sample(bus.ack, bus.err, bus.dat_r)
        if ack or err:
            got.append((data, err))
            if len(got) == (give_up_after or words):
                break
    else:
        raise TimeoutError("burst read did not finish")
    await wishbone_release(ctx, bus)
    return got


async def wishbone_burst_write(ctx, bus, addr, words, sels=None, limit=500):
    """An incrementing burst write of ``words`` (with byte selects ``sels``) from ``addr``."""
    sels = sels or [0xF] * len(words)
    ctx.set(bus.we, 1)
    ctx.set(bus.cyc, 1)
    ctx.set(bus.stb, 1)
    n = 0
    for _ in range(limit):
        ctx.set(bus.adr, addr // 4 + n)
        ctx.set(bus.dat_w, words[n])
        ctx.set(bus.sel, sels[n])
        ctx.set(bus.cti, CTI_END if n == len(words) - 1 else CTI_INCREMENTING)
        _, _, ack = await ctx.tick().sample(bus.ack)
        if ack:
            n += 1
            if n == len(words):
                break
    else:
        raise TimeoutError("burst write did not finish")
    ctx.set(bus.cyc, 0)
    ctx.set(bus.stb, 0)
    ctx.set(bus.we, 0)
    await ctx.tick()
