#!/usr/bin/env python3
"""Long fuzzing runs of tilec (tilec.testing.fuzz), with figures.

    python scripts/fuzz.py --seconds 3600 --seed 1            # an hour, one process
    python scripts/fuzz.py --inputs 100000 --seed 7 --save    # and keep findings in tests/fuzz_corpus/

Each input is compiled to every output of --outputs (default: ir, sm90, gfx942, webgpu). Figures are
printed every --report seconds and at the end: inputs, runs, outcomes per output and per input source,
the slowest runs, and each finding (an internal error, a malformed diagnostic, a run over --slow
seconds of CPU time, a hang). With --differential N, every Nth const-only mutant that compiles is also run in
the Tile IR interpreter and the SIMT interpreter (sm80 and gfx90a lowerings) and compared.
Exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tilec.testing import fuzz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=None, help="stop after this long")
    p.add_argument("--inputs", type=int, default=None, help="stop after this many inputs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--outputs", default=",".join(fuzz.OUTPUTS), help="comma-separated: ir, sm90, gfx942, webgpu")
    p.add_argument("--slow", type=float, default=fuzz.SLOW_S,
                   help="a run taking more CPU seconds than this is a finding")
    p.add_argument("--differential", type=int, default=0, metavar="N",
                   help="compare interpreters on every Nth const-only mutant that compiles (0: never)")
    p.add_argument("--save", action="store_true", help="write findings to tests/fuzz_corpus/")
    p.add_argument("--report", type=float, default=60.0, help="seconds between progress lines")
    args = p.parse_args(argv)
    if args.seconds is None and args.inputs is None:
        args.seconds = 60.0
    outputs = [o for o in args.outputs.split(",") if o]
    os.environ.setdefault("TILEC_CACHE_DIR", "/tmp/tilec-fuzz-cache")

    fz = fuzz.Fuzzer(args.seed)
    start = time.perf_counter()
    next_report = start + args.report
    by_output: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_source: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    slowest: list[tuple[float, str, str]] = []
    findings: list[tuple[fuzz.Case, fuzz.Outcome]] = []
    n_inputs = n_runs = n_diff = n_diff_bad = 0
    max_wall = 0.0
    const_only_ok = 0
    for case in fz.cases():
        elapsed = time.perf_counter() - start
        if (args.seconds is not None and elapsed >= args.seconds) or (args.inputs is not None and
                                                                      n_inputs >= args.inputs):
            break
        n_inputs += 1
        compiled = False
        for out in outputs:
            o = fuzz.run_case(case, out, slow_s=args.slow)
            n_runs += 1
            by_output[out][o.status] += 1
            by_source[case.how][o.status] += 1
            slowest.append((o.seconds, out, case.how))
            max_wall = max(max_wall, o.wall)
            compiled |= o.status == "ok"
            if o.status in fuzz.BAD:
                findings.append((case, o))
                where = fuzz.save_finding(case, o) if args.save else None
                print(f"FINDING {o.status} [{out}] {case.how} {case.name} -D {case.defines}: {o.message}"
                      + (f" -> {where}" if where else ""), flush=True)
        if len(slowest) > 200:
            slowest = sorted(slowest, reverse=True)[:20]
        if args.differential and case.consts_only and compiled:
            const_only_ok += 1
            if const_only_ok % args.differential == 0:
                n_diff += 1
                problem = fuzz.differential(case, seed=n_inputs)
                if problem:
                    n_diff_bad += 1
                    print(f"FINDING differential {case.name} -D {case.defines}: {problem}", flush=True)
        if time.perf_counter() >= next_report:
            next_report += args.report
            print(f"[{time.perf_counter() - start:7.0f} s] {n_inputs} inputs, {n_runs} runs, "
                  f"{len(findings)} findings, {n_diff} differential ({n_diff_bad} mismatched)", flush=True)
    total = time.perf_counter() - start
    print()
    print(f"tilec fuzz: seed {args.seed}, {n_inputs} inputs x {len(outputs)} outputs = {n_runs} runs in "
          f"{total:.0f} s ({n_runs / max(total, 1e-9):.1f} runs/s)")
    statuses = ["ok", "rejected", *fuzz.BAD]
    print(f"{'output':<10}" + "".join(f"{s:>10}" for s in statuses))
    for out in outputs:
        print(f"{out:<10}" + "".join(f"{by_output[out][s]:>10}" for s in statuses))
    print(f"{'source':<10}" + "".join(f"{s:>10}" for s in statuses))
    for how in sorted(by_source):
        print(f"{how:<10}" + "".join(f"{by_source[how][s]:>10}" for s in statuses))
    print("slowest runs (CPU time): " + ", ".join(f"{s:.2f} s ({o}, {h})"
                                                  for s, o, h in sorted(slowest, reverse=True)[:5]))
    print(f"longest wall time of a run: {max_wall:.2f} s (on a shared machine)")
    print(f"differential checks: {n_diff}, mismatches: {n_diff_bad}")
    print(f"findings: {len(findings)}")
    return 1 if findings or n_diff_bad else 0


if __name__ == "__main__":
    sys.exit(main())
