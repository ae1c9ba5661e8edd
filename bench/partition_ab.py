"""Before/after of partition-boundaries and simplify-indices on the H200: bench/bench_h200.py's kernels built twice.

    python bench/partition_ab.py build .artifacts/ab    # here: ab/on (default build), ab/off (--no-partition
                                                        #        --no-simplify-indices)
    python bench/partition_ab.py run .artifacts/ab      # on the H200: bench_h200's run on both, then the tilec
                                                        #        rows side by side (ms off, ms on, speed-up)

The peers (cuBLAS, cuDNN, torch) are timed in both runs too, which shows the run-to-run noise. Correctness of the
partitioned code on the GPU (ragged shapes, both paths) is bench/gpu_suite.py's job.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

OFF = ["--no-partition", "--no-simplify-indices"]


def build(out: Path) -> None:
    import bench_h200

    import tilec.cli.main as cli

    plain = cli.main
    bench_h200.build(out / "on")
    cli.main = lambda args: plain([*args, *OFF])
    try:
        bench_h200.build(out / "off")
    finally:
        cli.main = plain


def run(out: Path) -> None:
    import bench_h200

    for side in ("off", "on"):
        print(f"---- {side}: {'default build' if side == 'on' else ' '.join(OFF)}", flush=True)
        bench_h200.run(out / side, str(out / f"{side}.json"))
    rows = {side: json.loads((out / f"{side}.json").read_text()) for side in ("off", "on")}
    on = {(r["group"], r["shape"], r["impl"]): r["ms"] for r in rows["on"]}
    print(f"\n{'group':<10} {'shape':<28} {'impl':<32} {'off ms':>9} {'on ms':>9} {'speed-up':>8}")
    for r in rows["off"]:
        key = (r["group"], r["shape"], r["impl"])
        if key in on:
            print(f"{r['group']:<10} {r['shape']:<28} {r['impl']:<32} {r['ms']:9.3f} {on[key]:9.3f} "
                  f"{r['ms'] / on[key]:8.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["build", "run"])
    ap.add_argument("dir")
    args = ap.parse_args()
    (build if args.mode == "build" else run)(Path(args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
