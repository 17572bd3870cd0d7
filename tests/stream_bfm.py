"""amaranth.lib.stream helpers for simulator testbenches: a beat moves on a clock edge where
valid and ready are both high. (Explicit loops rather than ``until``, so that background
testbenches can be abandoned at the end of a simulation without a warning.)"""


async def send(ctx, stream, payload):
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        if ready:
            break
    ctx.set(stream.valid, 0)


async def recv(ctx, stream):
    ctx.set(stream.ready, 1)
    while True:
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        if valid:
            break
    ctx.set(stream.ready, 0)
    return payload
