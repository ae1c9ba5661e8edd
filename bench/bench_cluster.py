"""Thread-block clusters on sm90 (docs/hopper.md, "Thread-block clusters"): the 128x256x64 warp-specialized gemm
without a cluster, with two blocks along M sharing B's tile (cluster_m=2) and along N sharing A's (cluster_n=2),
against cuBLAS (torch.matmul).

    python bench/bench_cluster.py build OUT     # here: compile the variants (no GPU needed)
    python bench/bench_cluster.py run OUT       # on the H200: check against torch, then time, print a table
    python bench/bench_cluster.py check OUT     # one ragged launch of each clustered variant (for compute-sanitizer)

Correctness: max |C - torch| / max |torch| at regular shapes, ragged ones whose grid is not a whole number of
clusters, and K = 100 (the clusterless no-TMA twin runs), C poisoned with NaN first. Timing: medians of
triton.testing.do_bench, each variant twice (the run-to-run spread).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TILE = ["block_N=256", "block_K=64", "threads=256", "num_stages=4"]
VARIANTS = [("no cluster", []), ("2x1 (M)", ["cluster_m=2"]), ("1x2 (N)", ["cluster_n=2"])]
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (5120, 3584, 7168)]
CHECKS = [(1024, 1024, 512), (300, 264, 136), (1000, 1000, 1000), (392, 520, 200), (300, 200, 100)]


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for dt in ("f16", "bf16"):
        for i, (_, defs) in enumerate(VARIANTS):
            rc = tilec_main([str(ROOT / "samples" / "gemm.tile"), "--target", "sm90", "-o",
                             str(out / f"gemm_{dt}_{i}.cubin"), "--resource-usage", f"-Ddtype={dt}",
                             *[f"-D{d}" for d in TILE + defs]])
            if rc:
                raise SystemExit(f"build of gemm_{dt}_{i} failed")


def _kernels(out: Path):
    import torch

    import tilec.runtime as rt

    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}
    return tdt, {(dt, i): rt.load(out / f"gemm_{dt}_{i}.cubin").gemm for dt in tdt for i in range(len(VARIANTS))}


def check(out: Path) -> None:
    import torch

    tdt, kern = _kernels(out)
    for (dt, i), k in kern.items():
        a = torch.randn(300, 136, dtype=tdt[dt], device="cuda")
        b = torch.randn(136, 520, dtype=tdt[dt], device="cuda")
        c = torch.empty(300, 520, dtype=tdt[dt], device="cuda")
        k(a, b, c)
        torch.cuda.synchronize()
        err = ((c.float() - a.float() @ b.float()).abs().max() / (a.float() @ b.float()).abs().max()).item()
        print(f"{dt} {VARIANTS[i][0]:<11} 300x520x136 rel err {err:.2e}", flush=True)


def run(out: Path) -> None:
    import torch
    from triton.testing import do_bench

    tdt, kern = _kernels(out)
    bad = 0
    for dt in tdt:
        for m, n, k in CHECKS:
            a = torch.randn(m, k, dtype=tdt[dt], device="cuda")
            b = torch.randn(k, n, dtype=tdt[dt], device="cuda")
            ref = (a.float() @ b.float())
            for i, (label, _) in enumerate(VARIANTS):
                c = torch.full((m, n), float("nan"), dtype=tdt[dt], device="cuda")
                plan = kern[(dt, i)].launch_plan(a, b, c)
                kern[(dt, i)](a, b, c)
                torch.cuda.synchronize()
                err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
                ok = err < 1e-2 and not torch.isnan(c).any().item()
                bad += not ok
                print(f"  {dt} {m}x{n}x{k} {label:<11} {plan.kernel.entry['name']:<13} grid {plan.grid} cluster "
                      f"{plan.cluster} {err:.2e} {'ok' if ok else 'FAIL'}", flush=True)
    print(f"\n{'shape':<22} {'cuBLAS':>7}" + "".join(f"{label:>15}" for label, _ in VARIANTS) + "   (TFLOP/s; again)")
    for dt in tdt:
        for m, n, k in SHAPES:
            a = torch.randn(m, k, dtype=tdt[dt], device="cuda")
            b = torch.randn(k, n, dtype=tdt[dt], device="cuda")
            c = torch.empty(m, n, dtype=tdt[dt], device="cuda")
            flops = 2 * m * n * k

            def tflops(fn, flops=flops):
                return flops / do_bench(fn, warmup=25, rep=200) / 1e9

            cublas = tflops(lambda: torch.matmul(a, b))  # noqa: B023
            cells = []
            for i in range(len(VARIANTS)):
                first = tflops(lambda i=i: kern[(dt, i)](a, b, c))  # noqa: B023
                second = tflops(lambda i=i: kern[(dt, i)](a, b, c))  # noqa: B023
                cells.append(f"{first:7.1f}/{second:<6.1f}")
            print(f"{dt} {m}x{n}x{k:<10} {cublas:7.1f} " + " ".join(f"{x:>14}" for x in cells), flush=True)
    print(f"\n{bad} failures")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run", "check"):
        raise SystemExit(__doc__)
    {"build": build, "run": run, "check": check}[sys.argv[1]](Path(sys.argv[2]))
