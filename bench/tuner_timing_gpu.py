"""One artifact timed both ways: the tuning worker's `time_launches` against triton's do_bench (issue #26).

    python3 bench/tuner_timing_gpu.py ARTIFACT.cubin [...] --shape M,N,K [...] [--json OUT.json]

For each artifact (a gemm build: one-launch or a split-K sequence) and shape: the worker's timing as it was before
2026-12-02 (events read right after each launch: the queue drained every time), the worker's timing now
(tilec/runtime/tune_worker.py: a round queued back to back, the events read after it), do_bench (L2 flushed,
median), the host's microseconds per call (launches queued without waiting), and for a sequence each stage alone
under do_bench. Needs numpy, torch, triton and tilec.runtime (no typer/lark): PYTHONPATH at a tilec checkout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def old_time_launches(kernel, args, iters=100):
    """tune_worker.time_launches as of a45bac2: each event pair read right after its launch."""
    from tilec.runtime import tune_worker
    from tilec.runtime.cuda_driver import Driver

    drv = Driver.get()
    for _ in range(10):
        kernel(*args)
    drv.synchronize()
    s, e = drv.event(), drv.event()
    flush = tune_worker._l2_flush()
    times = []
    for _ in range(iters):
        flush.zero_()
        drv.record(s)
        kernel(*args)
        drv.record(e)
        times.append(drv.elapsed_ms(s, e))
    drv.synchronize()
    return sorted(times)[len(times) // 2]


def host_us(kernel, args, n=200):
    import torch

    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        kernel(*args)
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return host


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("artifacts", nargs="+")
    p.add_argument("--shape", action="append", required=True)
    p.add_argument("--kernel", default="gemm")
    p.add_argument("--json")
    a = p.parse_args(argv)
    import torch
    from triton.testing import do_bench

    from tilec.runtime import tune_worker
    from tilec.runtime.loader import load

    rows = []
    for path in a.artifacts:
        mod = load(Path(path))
        kernel = mod.kernels[a.kernel]
        dt = torch.float16 if kernel.entry["params"][0]["dtype"] == "f16" else torch.bfloat16
        for shape in a.shape:
            m, n, k = map(int, shape.split(","))
            A = torch.randn(m, k, device="cuda").to(dt)
            B = torch.randn(k, n, device="cuda").to(dt)
            C = torch.empty(m, n, device="cuda", dtype=dt)
            kernel(A, B, C)
            torch.cuda.synchronize()
            ref = (A.float() @ B.float())
            err = float((C.float() - ref).abs().max() / ref.abs().max())
            row = {"artifact": Path(path).name, "shape": [m, n, k], "rel_err": err,
                   "old_worker_ms": old_time_launches(kernel, (A, B, C)),
                   "new_worker_ms": tune_worker.time_launches(kernel, (A, B, C)),
                   "do_bench_ms": do_bench(lambda f=kernel, x=(A, B, C): f(*x), warmup=25, rep=100,
                                           return_mode="median"),
                   "cublas_ms": do_bench(lambda x=(A, B, C): torch.mm(x[0], x[1], out=x[2]), warmup=25, rep=100,
                                         return_mode="median"),
                   "host_us_per_call": host_us(kernel, (A, B, C))}
            # the same call again with new values in the same tensors (a multi-launch kernel's fast path, which
            # keeps its workspace): the output poisoned first, then checked
            B.copy_(torch.randn(k, n, device="cuda").to(dt))
            C.fill_(float("nan"))
            kernel(A, B, C)
            torch.cuda.synchronize()
            ref = (A.float() @ B.float())
            row["rel_err_again"] = float((C.float() - ref).abs().max() / ref.abs().max())
            stages = getattr(kernel, "stages", None)
            if stages:
                views = kernel._torch_workspace(A, *kernel._layout_scratch(kernel._make_layout(), [
                    (m, k), (k, n), (m, n)], (A, B, C))[1:], None)
                args = (A, B, C)
                for si, (stage, mapping) in enumerate(stages):
                    sargs = [args[i] if public else views[i] for public, i in mapping]
                    row[f"stage{si}_do_bench_ms"] = do_bench(lambda s=stage, x=sargs: s(*x), warmup=25, rep=100,
                                                             return_mode="median")
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
