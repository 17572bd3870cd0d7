# The waveform option (support/waveforms.py) and pytester (to test that option in-process).
pytest_plugins = ["support.waveforms", "pytester"]


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite golden files (tests/golden/) from the current generators instead of comparing",
    )
