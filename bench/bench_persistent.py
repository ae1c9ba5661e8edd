"""The 128x256x64 gemm on sm90: 4 stages, 3 stages persistent, and 4 stages persistent (its accumulator staged two
panels at a time, docs/hopper.md "TMA stores") against cuBLAS (torch.matmul).

    python bench/bench_persistent.py build OUT     # here: compile the variants (no GPU needed)
    python bench/bench_persistent.py run OUT       # on the H200: check against torch, then time, print a table

Correctness: max |C - torch| / max |torch| at a regular and a ragged shape, C poisoned with NaN first. Timing:
medians of triton.testing.do_bench, each variant twice (the run-to-run spread).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TILE = ["block_N=256", "block_K=64", "threads=256"]
VARIANTS = [("4 stages", ["num_stages=4"]), ("persistent 3", ["num_stages=3", "persistent=True"]),
            ("persistent 4", ["num_stages=4", "persistent=True"])]
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (5120, 3584, 7168)]


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


def run(out: Path) -> None:
    import torch
    from triton.testing import do_bench

    import tilec.runtime as rt

    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}
    kern = {(dt, i): rt.load(out / f"gemm_{dt}_{i}.cubin").gemm for dt in tdt for i in range(len(VARIANTS))}
    bad = 0
    for dt in tdt:
        for m, n, k in ((1024, 1024, 512), (300, 264, 136), (1000, 1000, 1000)):
            a = torch.randn(m, k, dtype=tdt[dt], device="cuda")
            b = torch.randn(k, n, dtype=tdt[dt], device="cuda")
            ref = (a.float() @ b.float())
            for i, (label, _) in enumerate(VARIANTS):
                c = torch.full((m, n), float("nan"), dtype=tdt[dt], device="cuda")
                kern[(dt, i)](a, b, c)
                err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
                ok = err < 1e-2 and not torch.isnan(c).any().item()
                bad += not ok
                print(f"  {dt} {m}x{n}x{k} {label:<13} {err:.2e} {'ok' if ok else 'FAIL'}")
    print(f"\n{'shape':<22} {'cuBLAS':>7}" + "".join(f"{label:>15}" for label, _ in VARIANTS) + "   (TFLOP/s; again)")
    for dt in tdt:
        for m, n, k in SHAPES:
            a = torch.randn(m, k, dtype=tdt[dt], device="cuda")
            b = torch.randn(k, n, dtype=tdt[dt], device="cuda")
            c = torch.empty(m, n, dtype=tdt[dt], device="cuda")
            flops = 2 * m * n * k
            peer = flops / do_bench(lambda a=a, b=b: torch.matmul(a, b), return_mode="median") / 1e9
            res = [flops / do_bench(lambda f=kern[(dt, i)], args=(a, b, c): f(*args), warmup=25, rep=200,
                                    return_mode="median") / 1e9
                   for _ in range(2) for i in range(len(VARIANTS))]
            print(f"{dt} {m}x{n}x{k:<10} {peer:7.1f}" + "".join(f"{x:15.1f}" for x in res[:3])
                  + "   " + " ".join(f"{x:.1f}" for x in res[3:]))
    print(f"correctness failures: {bad}")


if __name__ == "__main__":
    cmd, out = sys.argv[1], Path(sys.argv[2])
    build(out) if cmd == "build" else run(out)
