"""Seeds and sizes of the constrained-random stimulus of the RTL receivers (random VIA frames,
ring symbols and descriptors, in the modules ``random_*`` beside this one).

Each generator is seeded (``random.Random(seed)``) and keeps a reference model of what the real RTL
must do with every input it makes: deliver it (legitimate traffic, checked byte for byte) or drop
it with a named counter. A hostile input is a valid one with random mutations; the model decides
its fate from the documented acceptance rules (``via_frame``, ``sci_packet``, the docstrings of
``via_rx`` and ``ring_link``), and a mutation whose fate the model cannot pin down (a frame the peer
itself could legitimately send) is drawn again rather than guessed.

``NUMAVIA_RTL_FUZZ_SCALE`` (a positive integer, default 1) multiplies the number of inputs per
run and ``NUMAVIA_RTL_FUZZ_SEED`` (an integer, default 0) is added to every test's fixed seed;
``make fuzz`` sets both (tests/fuzz/fuzz_all.py) for a long run with fresh seeds, and prints them
so that a failure can be replayed.
"""

import os

SCALE_VARIABLE = "NUMAVIA_RTL_FUZZ_SCALE"
SEED_VARIABLE = "NUMAVIA_RTL_FUZZ_SEED"


def _integer(variable, default, minimum):
    text = os.environ.get(variable, str(default))
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ValueError(f"{variable} must be an integer of at least {minimum}, not {text!r}")
    return value


def scale():
    """Multiplier of the input counts (``NUMAVIA_RTL_FUZZ_SCALE``; 1 in CI)."""
    return _integer(SCALE_VARIABLE, 1, 1)


def seed(base):
    """A test's seed: its fixed ``base`` plus ``NUMAVIA_RTL_FUZZ_SEED`` (0 in CI)."""
    return base + _integer(SEED_VARIABLE, 0, 0)
