"""Make the checkout importable (`import tilec`) without installing it, and `tests/` helpers
(`import filecheck`) importable from every test module."""

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# Keep the test suite's compile cache out of the user's ~/.cache (one fresh directory per run).
os.environ.setdefault("TILEC_CACHE_DIR", tempfile.mkdtemp(prefix="tilec-test-cache-"))
# Samples build without their tuning databases (samples/*.tune.json) unless a test asks: tests of a lowering look
# at one kernel per sample; tests/test_tuning.py covers the databases.
os.environ.setdefault("TILEC_TUNE_DB", "")
