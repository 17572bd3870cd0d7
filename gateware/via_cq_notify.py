"""Completion-queue notification: the interrupt a thread sleeps on instead of polling a queue.

A consumer that finds its queue empty arms it (CQ ``CTRL.ARM``) and sleeps. The queue's notification
fires once the ring holds an entry the consumer has not taken (``TAIL != HEAD``), whether that entry
came before the arming or after it, so an entry written between the consumer's last look and its
arming is never slept through. Firing sets the queue's ``CQ_NOTIFIED`` bit (which raises
``IRQ_PENDING.CQ``) and disarms the queue: one interrupt per arming, as the verbs' request for a
completion notification. ``CTRL.ACK`` clears the bit; ``CTRL.RESET`` clears both.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class CqNotifier(wiring.Component):
    def __init__(self, cqs):
        self.cqs = cqs
        super().__init__(
            {
                "tail": In(32).array(cqs),  # entries the card has written
                "head": In(32).array(cqs),  # entries the consumer has taken
                "arm": In(cqs),  # pulses, one bit per queue
                "ack": In(cqs),
                "reset": In(cqs),
                "armed": Out(cqs),
                "notified": Out(cqs),
                "pending": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        # Whether each queue holds an entry not consumed, from this cycle's HEAD: a consumer that
        # takes the last entry and arms at once must not be woken by the entry it took.
        waiting = Signal(self.cqs)
        m.d.comb += waiting.eq(Cat(tail != head for tail, head in zip(self.tail, self.head)))
        for i in range(self.cqs):
            with m.If(self.reset[i]):
                m.d.sync += [self.armed[i].eq(0), self.notified[i].eq(0)]
            with m.Else():
                with m.If(self.ack[i]):
                    m.d.sync += self.notified[i].eq(0)
                # After the acknowledgement: a notification firing in the same cycle is a new one.
                with m.If(self.arm[i]):
                    m.d.sync += self.armed[i].eq(1)
                with m.Elif(self.armed[i] & waiting[i]):
                    m.d.sync += [self.armed[i].eq(0), self.notified[i].eq(1)]
        m.d.comb += self.pending.eq(self.notified.any())
        return m
