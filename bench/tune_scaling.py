"""The same tuning job on 1, 2, 4, ... GPUs of one host: wall time, speed-up, identical winners (issue 20).

    python bench/tune_scaling.py build .artifacts/scaling     # here: compile the candidates (no GPU needed)
    python3 bench/tune_scaling.py run .artifacts/scaling      # on the GPU host: tilec.runtime + numpy only

`run` times the build folder's candidates with `python -m tilec.runtime.tune_worker --gpus ...` semantics
(tilec.runtime.tune_worker.time_on_gpus: one worker process per GPU, a shared queue, the winners re-timed on every
GPU) on the first GPU alone, then on the first 2, 4 and 8 GPUs as the host has them, each in a fresh copy of the
folder; it prints a table of wall time, speed-up and whether every shape's winner is the one the single GPU
chose (or within the timing noise of it: the single GPU's time for the other's winner is within 3%). Writes the
table to $OUT/tune_scaling.json when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

JOB = ["samples/gemm.tile", "--target", "sm90", "-D", "dtype=bf16", "--size", "M=4096,N=4096,K=4096",
       "--size", "M=128,N=11008,K=4096", "--size", "M=1000,N=1000,K=1000", "--size", "M=16384,N=4096,K=4096"]
NOISE = 0.03


def build(folder: Path) -> int:
    from tilec.cli.main import main as tilec_main

    return tilec_main(["tune", str(ROOT / JOB[0]), *JOB[1:], "--build-dir", str(folder)])


def _winners(results: dict) -> dict[str, tuple[int, float]]:
    best: dict[str, tuple[float, int]] = {}
    for index, r in results["candidates"].items():
        if r.get("check") != "ok":
            continue
        for label, ms in r.get("times", {}).items():
            best[label] = min(best.get(label, (float("inf"), -1)), (ms, int(index)))
    return {label: (i, ms) for label, (ms, i) in best.items()}


def run(folder: Path) -> int:
    from tilec.runtime.tune_worker import device_count, time_on_gpus

    n = device_count()
    counts = [c for c in (1, 2, 4, 8) if c <= n]
    rows, reference = [], None
    for count in counts:
        work = Path(f"/tmp/tune_scaling_{count}")
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(folder, work)
        start = time.perf_counter()
        results = time_on_gpus(work, [str(i) for i in range(count)])
        wall = time.perf_counter() - start
        winners = _winners(results)
        statuses: dict[str, int] = {}
        for r in results["candidates"].values():
            statuses[r.get("check", "?")] = statuses.get(r.get("check", "?"), 0) + 1
        print(f"{count} GPU(s): candidates {statuses}", flush=True)
        bad = next((r for r in results["candidates"].values() if r.get("check") != "ok"), None)
        if bad:
            print(f"  first failure: {json.dumps(bad)[:600]}", flush=True)
        if os.environ.get("OUT"):
            Path(os.environ["OUT"], f"results_{count}gpu.json").write_text(json.dumps(results, indent=1))
        if reference is None:
            reference = (wall, winners, results)
        same = 0
        for label, (index, _) in winners.items():
            ref_index, ref_ms = reference[1][label]
            other = reference[2]["candidates"][str(index)].get("times", {}).get(label, float("inf"))
            same += index == ref_index or other <= ref_ms * (1 + NOISE)
        rows.append({"gpus": count, "wall_s": round(wall, 2), "speedup": round(reference[0] / wall, 2),
                     "winners_identical": f"{same}/{len(winners)}",
                     "candidates": len(results["candidates"]),
                     "devices": sorted({d.get("uuid") or k for k, d in results.get("devices", {}).items()})})
    print(f"{'GPUs':>4} {'wall s':>8} {'speed-up':>9} {'same winners':>13} candidates")
    for r in rows:
        print(f"{r['gpus']:>4} {r['wall_s']:>8} {r['speedup']:>9} {r['winners_identical']:>13} {r['candidates']}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "tune_scaling.json").write_text(json.dumps(rows, indent=1))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=["build", "run"])
    p.add_argument("folder", type=Path)
    args = p.parse_args()
    return build(args.folder) if args.step == "build" else run(args.folder)


if __name__ == "__main__":
    sys.exit(main())
