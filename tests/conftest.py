import sys
from pathlib import Path

# Test helpers (BFMs, reference models) are plain modules next to the tests.
sys.path.insert(0, str(Path(__file__).parent))


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden files (tests/golden/) from the current generators instead of comparing")
