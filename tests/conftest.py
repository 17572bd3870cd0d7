import sys
from pathlib import Path

# Test helpers (BFMs, reference models) are plain modules next to the tests.
sys.path.insert(0, str(Path(__file__).parent))
