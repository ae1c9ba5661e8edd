"""Fuzz the real command line for a while (tilec/testing/cli_fuzz.py): tilec in subprocesses, hostile file names,
random flags and output locations, concurrent builds over one cache; prints the figures and every finding.

    python scripts/cli_fuzz.py --seconds 3600 --seed 2026 [--toolchains] [--lines 10000] [--summary FILE]

--toolchains adds device builds (cubin, hsaco, objects, --keep) to --slow-fraction of the builds: slower, and it
needs nvcc / clang. --exec-fraction of the command lines run as a real `python -m tilec`; the others fork this
process with tilec's modules imported (tilec/testing/cli_fuzz.Launcher). --summary writes the figures (lines,
time, findings, by category) to FILE, again every --report seconds; SIGTERM ends the run after the batch under way
with its figures.
"""

from __future__ import annotations

import argparse
import signal
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
    ap.add_argument("--jobs", type=int, default=4, help="the most command lines run at once in a concurrent batch")
    ap.add_argument("--lines", type=int, default=None, help="stop after this many command lines")
    ap.add_argument("--exec-fraction", type=float, default=0.15)
    ap.add_argument("--slow-fraction", type=float, default=0.25)
    ap.add_argument("--report", type=float, default=300)
    ap.add_argument("--summary", type=Path, default=None)
    a = ap.parse_args()
    t0 = time.time()
    command = "python scripts/cli_fuzz.py " + " ".join(sys.argv[1:])

    def summary(figures: cli_fuzz.Figures, final: bool) -> str:
        lines = [f"$ {command}",
                 f"tilec cli fuzz: seed {a.seed}, {time.time() - t0:.0f} s{'' if final else ' (running)'}, "
                 f"commit {_commit()}, started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))}",
                 figures.table(),
                 f"forked: {figures.forked}, exec'd (python -m tilec, re-checks included): {figures.execed}",
                 figures.by_category_table()]
        lines += [f"finding: {f}" for f in figures.findings]
        return "\n".join(lines) + "\n"

    def log(s: str) -> None:
        print(s, flush=True)

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # ends after the batch under way, with the figures

    def progress(figures: cli_fuzz.Figures) -> None:
        if a.summary:
            a.summary.write_text(summary(figures, False))

    figures = cli_fuzz.run(a.seed, a.seconds, slow_ok=a.toolchains, jobs=a.jobs, log=log,
                           exec_fraction=a.exec_fraction, max_lines=a.lines, slow_fraction=a.slow_fraction,
                           progress_s=a.report, progress=progress, should_stop=lambda: bool(stop))
    text = summary(figures, True)
    print(text, end="")
    if a.summary:
        a.summary.write_text(text)
    return 1 if figures.findings else 0


def _commit() -> str:
    """The commit fuzzed: TILEC_FUZZ_COMMIT when the tree is a copy (a long run fuzzes a frozen copy, so that
    edits made meanwhile do not mix into it), else git's HEAD."""
    import os
    import subprocess

    if os.environ.get("TILEC_FUZZ_COMMIT"):
        return os.environ["TILEC_FUZZ_COMMIT"]
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    raise SystemExit(main())
