"""Make the checkout importable (`import tilec`) without installing it, and `tests/` helpers
(`import filecheck`) importable from every test module."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
