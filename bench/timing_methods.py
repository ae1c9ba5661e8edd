"""The tuner's timing and the sweep's side by side: every tuned variant of one gemm build at one shape, each timed by
tilec.runtime.tune_worker's `time_launches` (what `tilec tune` wrote into the database) and by
`triton.testing.do_bench` (what bench/shape_sweep.py reports), in turn, in one process, beside cuBLAS.

s21's `--variants` sweep timed gemm_bf16_tB's cfg1 (128x256, not persistent) at 4096³ at 206.7 µs and the persistent
cfg7 at 187.7, where the database has cfg1 at 186.5 and cfg7 at 186.8 (bench/RESULTS.md, s28): one of the two
methods misjudges the non-persistent kernel, and which one decides trans_B's dispatch.

    python bench/shape_sweep.py build DIR --only "gemm bf16 trans_B"           # here, no GPU
    python3 bench/timing_methods.py DIR --build gemm_bf16_tB --shape 4096,4096,4096 [--repeat 3]   # on the GPU

Prints one row a variant: the median over the repeats of each method's milliseconds, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WARMUP_MS, REP_MS = 3, 12  # bench/shape_sweep.py's do_bench settings


def operands(build: str, m: int, n: int, k: int):
    """A, B and C as bench/shape_sweep.py passes them: B [N, K] for a trans_B build, else [K, N]; f16 or bf16."""
    import torch

    dt = torch.bfloat16 if "bf16" in build else torch.float16
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b_shape = (n, k) if build.endswith("_tB") else (k, n)
    b = torch.randn(*b_shape, device="cuda", dtype=dt)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    return a, b, c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="a bench/shape_sweep.py build folder")
    ap.add_argument("--build", default="gemm_bf16_tB", help="the build's name in DIR (gemm_f16, gemm_bf16_tB, ...)")
    ap.add_argument("--shape", default="4096,4096,4096", help="M,N,K")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of both methods over every variant")
    a = ap.parse_args()

    import torch  # the GPU machine's (imported after the arguments, so that --help runs anywhere)
    from triton.testing import do_bench

    import tilec.runtime as rt
    from tilec.runtime.tune_worker import time_launches

    m, n, k = (int(x) for x in a.shape.split(","))
    gemm = rt.load(a.dir / f"{a.build}.cubin").gemm
    args = operands(a.build, m, n, k)
    x, b, c = args
    b_kn = b.t() if a.build.endswith("_tB") else b

    def cublas(*_):
        return torch.mm(x, b_kn)

    ref = cublas()
    calls = {"public call": gemm, **{v.name: v for v in getattr(gemm, "variants", ())}}
    for name, call in calls.items():
        c.fill_(float("nan"))
        call(*args)
        torch.cuda.synchronize()
        err = ((c.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        if not err <= 1e-2:
            print(f"{name}: wrong result (max |err| / max |ref| {err:.3g}); left out")
            calls[name] = None
    times: dict[str, dict[str, list[float]]] = {}
    for _ in range(a.repeat):
        for name, call in [*calls.items(), ("cuBLAS", cublas)]:
            if call is None:
                continue
            t = times.setdefault(name, {"time_launches": [], "do_bench": []})
            t["time_launches"].append(time_launches(call, args))
            t["do_bench"].append(do_bench(lambda f=call: f(*args), warmup=WARMUP_MS, rep=REP_MS, return_mode="median"))
    print(f"{a.build} at {m}x{n}x{k} on {torch.cuda.get_device_name()}, {a.repeat} rounds (median ms)")
    print("| variant | time_launches (tune) | do_bench (sweep) | sweep / tune |")
    print("|---|---|---|---|")
    for name, t in times.items():
        tl, db = statistics.median(t["time_launches"]), statistics.median(t["do_bench"])
        print(f"| {name} | {tl:.4f} | {db:.4f} | {db / tl:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
