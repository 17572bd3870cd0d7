"""pytest plugin: the ``--waveforms`` option (or ``NUMAVIA_WAVEFORMS``) that keeps a VCD of
each Amaranth simulation (run through ``support.sim.run_simulation``) of a failing test under
build/waveforms/.

``--waveforms`` (or ``NUMAVIA_WAVEFORMS=1``) keeps the waveforms of failing tests only;
``--waveforms=all`` (``NUMAVIA_WAVEFORMS=all``) keeps every test's.
"""

import os

import pytest

from support import sim

MODES = ("failed", "all")
ENVIRONMENT = "NUMAVIA_WAVEFORMS"


def pytest_addoption(parser):
    parser.addoption(
        "--waveforms",
        nargs="?",
        const="failed",
        default=None,
        choices=MODES,
        help="write a VCD of every Amaranth simulation run through support.sim.run_simulation to "
        "build/waveforms/<test id>.vcd and keep it if the test failed (or 'all'); "
        f"also {ENVIRONMENT}=1 or {ENVIRONMENT}=all",
    )
    parser.addoption(
        "--waveform-dir",
        default=None,
        help="folder for the waveforms (default: build/waveforms under the project root)",
    )


def mode(config):
    chosen = config.getoption("--waveforms")
    if chosen is not None:
        return chosen
    value = os.environ.get(ENVIRONMENT, "").strip().lower()
    if value in ("", "0", "no", "off"):
        return None
    if value in ("1", "yes", "on", "failed"):
        return "failed"
    if value == "all":
        return "all"
    raise pytest.UsageError(f"{ENVIRONMENT} must be 1, failed or all, not {value!r}")


def folder(config):
    return config.getoption("--waveform-dir") or config.rootpath / "build" / "waveforms"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    chosen = mode(item.config)
    if chosen is None:
        yield
        return
    item.stash[_FAILED] = False
    sim.begin(folder(item.config), item.nodeid)
    try:
        yield
    finally:
        sim.end(keep=chosen == "all" or item.stash[_FAILED])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed and _FAILED in item.stash:
        item.stash[_FAILED] = True


_FAILED = pytest.StashKey[bool]()
