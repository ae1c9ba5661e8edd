"""One call of tilec's gemm and one of cuBLAS's at an anchor shape, for Nsight Compute to profile side by side.

    python3 bench/shape_sweep.py build DIR       # here (or any build folder with gemm_f16.cubin / gemm_bf16.cubin)
    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        python3 bench/ncu_anchor.py DIR [--dtype f16] [--shape 4096,4096,4096] [--trans-b] [--variants]

Both run warmed up (outside the profiled range: torch.cuda.profiler.start/stop bracket one call of each), on fresh
random inputs, and the result is checked against cuBLAS's. The profile names the limiter at the anchors issue #26
lists (aligned gemm 4096^3 at 0.93 of cuBLAS in the last sweep); bench/RESULTS.md keeps what it showed.
`--trans-b` profiles the trans_B build (gemm_<dtype>_tB.cubin, B stored [N, K]); `--variants` adds one call of every
tuned variant the artifact carries (each checked too), for the shapes where no carried kernel keeps up with cuBLAS.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    import torch

    import tilec.runtime as rt
    from bench.shape_sweep import what_runs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--dtype", choices=["f16", "bf16"], default="f16")
    ap.add_argument("--shape", default="4096,4096,4096", help="M,N,K")
    ap.add_argument("--trans-b", action="store_true", help="the trans_B build: B stored [N, K]")
    ap.add_argument("--variants", action="store_true", help="also one call of every tuned variant")
    a = ap.parse_args()
    m, n, k = (int(x) for x in a.shape.split(","))
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    gemm = rt.load(a.dir / f"gemm_{a.dtype}{'_tB' if a.trans_b else ''}.cubin").gemm
    A = torch.randn(m, k, dtype=dt, device="cuda")
    B = torch.randn(n, k, dtype=dt, device="cuda") if a.trans_b else torch.randn(k, n, dtype=dt, device="cuda")
    C = torch.empty(m, n, dtype=dt, device="cuda")
    Bk = B.t() if a.trans_b else B
    calls = [gemm] + (list(getattr(gemm, "variants", ())) if a.variants else [])
    for call in calls:
        C.fill_(float("nan"))
        for _ in range(5):
            call(A, B, C)
            ref = torch.mm(A, Bk)
        torch.cuda.synchronize()
        err = (C.float() - ref.float()).abs().max().item()
        runs = what_runs(gemm, (A, B, C), {"M": m, "N": n, "K": k}) if call is gemm else call.name
        print(f"tilec {runs} at {m}x{n}x{k} {a.dtype}{' trans_B' if a.trans_b else ''}: max |err| against cuBLAS "
              f"{err:.3g}")
    torch.cuda.profiler.start()
    for call in calls:
        call(A, B, C)
    torch.mm(A, Bk, out=ref)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
