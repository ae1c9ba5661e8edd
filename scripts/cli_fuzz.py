"""Fuzz the real command line for a while (tilec/testing/cli_fuzz.py): tilec in subprocesses, hostile file names,
random flags and output locations, concurrent builds over one cache; prints the figures and every finding.

    python scripts/cli_fuzz.py --seconds 3600 --seed 2026 [--toolchains]

--toolchains adds device builds (cubin, hsaco, objects, --keep): slower, and it needs nvcc / clang.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tilec.testing import cli_fuzz  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--toolchains", action="store_true")
    ap.add_argument("--jobs", type=int, default=2, help="builds run at once in a concurrent batch")
    a = ap.parse_args()
    t0 = time.time()
    figures = cli_fuzz.run(a.seed, a.seconds, slow_ok=a.toolchains, jobs=a.jobs, log=lambda s: print(s, flush=True))
    print(f"tilec cli fuzz: seed {a.seed}, {time.time() - t0:.0f} s")
    print(figures.table())
    return 1 if figures.findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
