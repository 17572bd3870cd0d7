"""An Ethernet wire with seeded faults between two VIA engines in the Amaranth simulator.

A background process takes each frame the sending engine transmits (whole, as 32-bit beats) and,
from a generator seeded with ``seed``, loses it (``loss``), marks it as failing the FCS check the
way the MAC does (``corrupt``: the error bits on its last beat), delivers it twice (``duplicate``)
or holds it back so that the next frame overtakes it (``reorder``; a held frame goes out alone
after ``hold_cycles`` if nothing follows). Frames leave one beat a cycle with a gap between them.
``counts`` says how many of each fault were injected.
"""

import random
from collections import deque


class FaultyWire:
    def __init__(self, src, dst, *, seed, loss=0.0, corrupt=0.0, duplicate=0.0, reorder=0.0, hold_cycles=2000, gap=3):
        self.src, self.dst = src, dst
        self.rng = random.Random(seed)
        self.loss, self.corrupt, self.duplicate, self.reorder = loss, corrupt, duplicate, reorder
        self.hold_cycles, self.gap = hold_cycles, gap
        self.counts = {"frames": 0, "lost": 0, "corrupted": 0, "duplicated": 0, "reordered": 0}
        self.out = deque()  # frames to deliver, each a list of beat values
        self.held = None  # (frame, cycle it was held at)
        self.cycle = 0  # clock cycles seen

    def _route(self, frame, cycle):
        self.counts["frames"] += 1
        r = self.rng.random
        if r() < self.loss:
            self.counts["lost"] += 1
            return
        if r() < self.corrupt:
            self.counts["corrupted"] += 1
            frame = frame[:-1] + [frame[-1] | self.error_mask]
        copies = [frame]
        if r() < self.duplicate:
            self.counts["duplicated"] += 1
            copies.append(frame)
        if self.held is None and r() < self.reorder:
            self.counts["reordered"] += 1
            self.held = (copies, cycle)
            return
        self.out.extend(copies)
        if self.held is not None:  # this frame overtook the held one
            self.out.extend(self.held[0])
            self.held = None

    async def process(self, ctx):
        shape = self.src.payload.shape()
        error, last = shape["error"], shape["last"]
        self.error_mask = ((1 << error.width) - 1) << error.offset
        last_mask = 1 << last.offset
        ctx.set(self.src.ready, 1)
        beats, sending, idle = [], None, 0
        async for _, _, valid, payload in ctx.tick().sample(self.src.valid, self.src.payload):
            self.cycle += 1
            cycle = self.cycle
            if valid:
                value = payload.as_value().value
                beats.append(value)
                if value & last_mask:
                    self._route(beats, cycle)
                    beats = []
            if self.held is not None and cycle - self.held[1] > self.hold_cycles:
                self.out.extend(self.held[0])
                self.held = None
            # Deliver: one beat a cycle, `gap` idle cycles between frames.
            if sending is None and self.out and idle >= self.gap:
                sending = deque(self.out.popleft())
            if sending:
                ctx.set(self.dst.payload, shape.from_bits(sending.popleft()))
                ctx.set(self.dst.valid, 1)
                idle = 0
                if not sending:
                    sending = None
            else:
                ctx.set(self.dst.valid, 0)
                idle += 1
