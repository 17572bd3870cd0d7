"""Stream helpers for Amaranth testbenches: a transfer happens at the clock edge where both
``valid`` and ``ready`` are high, so both sides look at the settled values before ticking."""


async def put(ctx, s, payload, timeout=100_000):
    """Offer ``payload`` on stream ``s`` until it is taken."""
    ctx.set(s.payload, payload)
    ctx.set(s.valid, 1)
    for _ in range(timeout):
        if ctx.get(s.ready):
            await ctx.tick()
            ctx.set(s.valid, 0)
            return
        await ctx.tick()
    raise TimeoutError("stream never ready")


async def get(ctx, s, timeout=100_000):
    """Take one payload from stream ``s``."""
    ctx.set(s.ready, 1)
    for _ in range(timeout):
        if ctx.get(s.valid):
            payload = ctx.get(s.payload)
            await ctx.tick()
            ctx.set(s.ready, 0)
            return payload
        await ctx.tick()
    raise TimeoutError("stream never valid")


async def wait_for(ctx, signal, value=1, timeout=100_000):
    for _ in range(timeout):
        if ctx.get(signal) == value:
            return
        await ctx.tick()
    raise TimeoutError(f"{signal} never became {value}")
