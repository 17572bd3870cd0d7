"""Running Amaranth simulations in tests, with an optional waveform of each run.

Tests build their ``Simulator`` as usual and call :func:`run_simulation` instead of
``sim.run()``. While the waveform option is on (``pytest --waveforms``, or
``NUMAVIA_WAVEFORMS=1``; see ``support.waveforms``), every run of a test writes
``build/waveforms/<test id>.vcd`` (``-2``, ``-3``... for its later simulations), and the files
of a test that passed are removed when it ends.
"""

import re
import weakref
from pathlib import Path

from amaranth.sim import Simulator

#: The clock of the simulated designs: 100 MHz, as on the card.
CLOCK_PERIOD = 1e-8

_recording = None  # the test whose simulations are being recorded, if any
_started = weakref.WeakSet()  # simulators already run once: a VCD can only start at time 0


class Recording:
    """The waveform files of one test."""

    def __init__(self, folder, test_id):
        self.folder, self.stem, self.paths = Path(folder), file_stem(test_id), []

    def next_path(self):
        suffix = f"-{len(self.paths) + 1}" if self.paths else ""
        path = self.folder / f"{self.stem}{suffix}.vcd"
        self.paths.append(path)
        return path


def file_stem(test_id):
    """A file name for a pytest node id (``tests/test_x.py::test_y[a-1]`` -> ``test_x.py-test_y-a-1``)."""
    name = test_id.split("/")[-1].replace("::", "-")
    return re.sub(r"[^\w.-]+", "-", name).strip("-")


def begin(folder, test_id):
    """Record the simulations of ``test_id`` from now on (called by the pytest plugin)."""
    global _recording
    _recording = Recording(folder, test_id)


def end(keep):
    """Stop recording; remove the files unless ``keep``. Returns the files kept."""
    global _recording
    recording, _recording = _recording, None
    if recording is None:
        return []
    if not keep:
        for path in recording.paths:
            path.unlink(missing_ok=True)
    return [path for path in recording.paths if path.exists()]


def run_simulation(sim, *, until=None):
    """``sim.run()`` (or ``sim.run_until(until)``), writing a VCD of every signal of the design
    while a recording is on. A later call on the same simulator continues without a waveform (a
    VCD cannot start mid-run), as does a recording-free test."""
    go = sim.run if until is None else lambda: sim.run_until(until)
    if _recording is None or sim in _started:
        _started.add(sim)
        return go()
    _started.add(sim)
    path = _recording.next_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with sim.write_vcd(str(path)):
        return go()


def run_testbench(dut, testbench, *args):
    """Simulate ``dut`` on one clock with one testbench, ``await testbench(ctx, dut, *args)``."""
    sim = Simulator(dut)
    sim.add_clock(CLOCK_PERIOD)

    async def bench(ctx):
        await testbench(ctx, dut, *args)

    sim.add_testbench(bench)
    run_simulation(sim)
