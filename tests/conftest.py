# The waveform option (support/waveforms.py) and pytester (to test that option in-process).
pytest_plugins = ["support.waveforms", "pytester"]


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite golden files (tests/golden/) from the current generators instead of comparing",
    )


def pytest_collection_modifyitems(config, items):
    """The Verilator tests (marker ``slow``, minutes each) run first, the many short ones after
    them: under ``pytest -n 2`` a long test started last would hold the run up while the other
    worker idles, whereas short tests left at the end even the two workers out. (``make test``
    hands the workers one test at a time, ``--maxschedchunk 1``: xdist's default first hands
    each worker a quarter of its share in one block, which would give one worker every slow test.)"""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
