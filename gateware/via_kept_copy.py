"""Whether a copy an engine validated through the ATT is still good, and what it was validated for.

The transmit engine keeps the send descriptor it fetched and validated for a repost of it
(``SQ_REPOST``); the receive engine keeps the remote target of the RDMA write or read it validated
for the next frame to the same window. Either copy was checked against the ATT as it was then, so
an ATT write (or ``FORGET_COPIES``) makes it worthless, and so does a connect, which gives a VI new
rights. This component is that rule, once for both, with the ``key`` the copy was validated for
(the engine keeps the copy itself):

* ``start`` marks the cycle a validation begins: a forget from then on counts against it;
* ``keep`` marks the cycle it ends well: the copy is good for ``key`` unless a forget came since
  ``start`` (or comes in this very cycle);
* ``drop``: the engine overwrote or gave up the copy (another fetch, a failed walk, an error);
* ``forget``: the ATT or ``FORGET_COPIES`` was written; ``connect``: a VI was connected;
* ``hit``: the copy is good and ``probe`` was its key in the cycle before. The key's comparison
  (136 bits for the receive engine's remote target) is registered, so it is not in series with
  the engine's decision on the hit (the routed card's longest path at 071937f): an engine holds
  ``probe`` a cycle before it looks. ``good`` is still read as it stands, and a keep's cycle
  is followed by no hit, whatever the probe: the registered comparison was with the old key.
"""

from amaranth import Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class KeptCopy(wiring.Component):
    def __init__(self, key_shape):
        self.key_shape = key_shape
        super().__init__(
            {
                "start": In(1),
                "keep": In(1),
                "key": In(key_shape),
                "drop": In(1),
                "forget": In(1),
                "connect": In(1),
                "probe": In(key_shape),
                "hit": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        good = Signal()
        kept_key = Signal(self.key_shape)
        forgotten = Signal()  # a forget came since the validation under way began

        matched, just_kept = Signal(), Signal()
        m.d.sync += [matched.eq(Value.cast(kept_key) == Value.cast(self.probe)), just_kept.eq(self.keep)]
        m.d.comb += self.hit.eq(good & matched & ~just_kept)
        with m.If(self.start):
            m.d.sync += forgotten.eq(0)
        with m.If(self.keep):
            m.d.sync += [good.eq(~forgotten), kept_key.eq(self.key)]
        with m.If(self.drop):
            m.d.sync += good.eq(0)
        # Last, so that a forget in the cycle a validation starts or ends still counts against it.
        with m.If(self.forget):
            m.d.sync += forgotten.eq(1)
        with m.If(self.forget | self.connect):
            m.d.sync += good.eq(0)
        return m
