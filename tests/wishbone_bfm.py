"""Wishbone initiator for Amaranth simulator testbenches."""


class BusError(Exception):
    pass


async def _cycle(ctx, bus, adr, we, dat_w=0, sel=0xF, timeout=64):
    ctx.set(bus.adr, adr)
    ctx.set(bus.we, we)
    ctx.set(bus.dat_w, dat_w)
    ctx.set(bus.sel, sel)
    ctx.set(bus.cyc, 1)
    ctx.set(bus.stb, 1)
    for _ in range(timeout):
        await ctx.tick()
        if ctx.get(bus.ack) or ctx.get(bus.err):
            break
    else:
        raise TimeoutError(f"no ack/err for word address {adr:#x}")
    err, data = ctx.get(bus.err), ctx.get(bus.dat_r)
    ctx.set(bus.cyc, 0)
    ctx.set(bus.stb, 0)
    await ctx.tick()
    if err:
        raise BusError(f"bus error at word address {adr:#x}")
    return data


async def read(ctx, bus, byte_addr):
    return await _cycle(ctx, bus, byte_addr // 4, 0)


async def write(ctx, bus, byte_addr, value, sel=0xF):
    await _cycle(ctx, bus, byte_addr // 4, 1, value, sel)
