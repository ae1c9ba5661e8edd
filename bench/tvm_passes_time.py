"""What the TVM-based passes (partition-boundaries, simplify-indices) add to a compile.

    python bench/tvm_passes_time.py [--runs 3]

For gemm and flash_attention on sm80, sm90 and gfx942 (the samples' default consts; the generated source only, no
toolchain, no compile cache) it prints, as medians over --runs:

- cold: the wall time of a fresh `tilec FILE -t T --emit SRC -o OUT --no-cache` process, with the passes and with
  `--no-partition --no-simplify-indices` (the difference is `import tvm` plus the passes);
- warm: the time of `tilec.compile` in one process that has already imported TVM, with and without the passes
  (the passes alone);
- import: the time importing TVM takes in a fresh process, as the passes do it.

A measurement, not a test: the exit status is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [("gemm", "sm80", "cu"), ("gemm", "sm90", "cu"), ("gemm", "gfx942", "hip"),
         ("flash_attention", "sm80", "cu"), ("flash_attention", "sm90", "cu"), ("flash_attention", "gfx942", "hip")]
OFF = ["--no-partition", "--no-simplify-indices"]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def cold(sample: str, target: str, ext: str, extra: list[str], runs: int) -> float:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"k.{ext}"
        args = [sys.executable, "-m", "tilec", str(ROOT / "samples" / f"{sample}.tile"), "-t", target, "--emit", ext,
                "-o", str(out), "--no-cache", *extra]
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run(args, env=_env(), check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def tvm_import(runs: int) -> float:
    probe = ("import time; t = time.perf_counter(); from tilec.ir.arith import Arith; Arith(); "
             "print(time.perf_counter() - t)")  # as the passes import it (tilec/ir/arith.py: torch kept out)
    return statistics.median(float(subprocess.run([sys.executable, "-c", probe], env=_env(), check=True,
                                                  capture_output=True, text=True).stdout) for _ in range(runs))


def warm(runs: int) -> dict[tuple[str, str], tuple[float, float]]:
    sys.path.insert(0, str(ROOT))
    import tvm  # noqa: F401  (imported first: these figures are the passes alone)

    import tilec

    out = {}
    for sample, target, _ in CASES:
        path = ROOT / "samples" / f"{sample}.tile"
        figures = []
        for disable in ({"partition", "simplify_indices"}, set()):
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                tilec.compile(path, target=target, disable=disable)
                times.append(time.perf_counter() - t)
            figures.append(statistics.median(times))
        out[(sample, target)] = (figures[0], figures[1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"importing TVM as the passes do, in a fresh process: {tvm_import(args.runs):.2f} s")
    hot = warm(args.runs)
    print("| sample | target | cold, passes off | cold, passes on | warm, passes off | warm, passes on |")
    print("|---|---|---|---|---|---|")
    for sample, target, ext in CASES:
        off, on = cold(sample, target, ext, OFF, args.runs), cold(sample, target, ext, [], args.runs)
        w_off, w_on = hot[(sample, target)]
        print(f"| {sample} | {target} | {off:.2f} s | {on:.2f} s | {w_off:.3f} s | {w_on:.3f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
