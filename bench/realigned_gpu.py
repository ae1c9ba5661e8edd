"""The realigned-loads twin on the GPU (docs/hopper.md): at shapes whose K-major operands TMA cannot address (an odd
K, a base address off 16 bytes, a decode step's few rows), check which kernel the runtime launches and its result
against torch on fresh random inputs, and time it; run once more with TILEC_PADDING=always for the padded path the
twin replaces.

    python3 bench/realigned_gpu.py SWEEP_BUILD_DIR [--results FILE]

SWEEP_BUILD_DIR is `bench/shape_sweep.py build DIR --only fp8 --only "gemm f16 trans_B" --only "gemm f16"`'s. Prints
one line a case and a table; exits 1 when a result is wrong or the twin does not run where it should.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (build, M, N, K, offset of A's and B's first element in elements): odd K, a misaligned base, decode rows, aligned
CASES = [
    ("fp8_gemm", 1009, 2003, 4001, 0), ("fp8_gemm", 3, 4099, 515, 0), ("fp8_gemm", 15, 1001, 3003, 5),
    ("fp8_gemm", 300, 272, 1040, 3), ("fp8_gemm", 129, 131, 161, 0), ("fp8_gemm", 8191, 131, 8191, 0),
    ("fp8_gemm", 2047, 4099, 4097, 0), ("fp8_gemm", 4095, 4095, 4095, 0), ("fp8_gemm", 127, 4099, 515, 0),
    ("fp8_gemm", 97, 1001, 3003, 0), ("fp8_gemm", 512, 512, 512, 0),
    ("gemm_f16_tB", 1009, 2003, 4001, 0), ("gemm_f16_tB", 1, 4096, 4095, 1),
    ("gemm_f16_tB", 2047, 4099, 4097, 0), ("gemm_f16_tB", 8191, 131, 8191, 0),
    ("gemm_f16", 1009, 2000, 4001, 0), ("gemm_f16", 97, 1000, 3003, 3), ("gemm_f16", 4095, 4096, 4095, 0),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--results")
    a = ap.parse_args()

    import torch
    import triton.testing

    import tilec.runtime as rt

    dev = "cuda"
    mods = {}
    rows, bad = [], 0
    for build, m, n, k, offset in CASES:
        if build not in mods:
            mods[build] = rt.load(Path(a.dir) / f"{build}.cubin")
        kern = next(iter(mods[build].kernels.values()))
        fp8 = build == "fp8_gemm"
        trans = fp8 or "trans_B" in build
        dt = torch.float8_e4m3fn if fp8 else torch.float16

        def operand(rows_, cols_, offset=offset, dt=dt):
            flat = torch.randn(rows_ * cols_ + offset, device=dev).to(dt)  # fresh values every case
            return flat[offset:].view(rows_, cols_)

        A = operand(m, k)
        B = operand(n, k) if trans else operand(k, n)
        C = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16 if fp8 else torch.float16)
        args = (A, B, 0.5, 0.25, C) if fp8 else (A, B, C)
        ref = (A.float() @ (B.float().t() if trans else B.float())) * (0.125 if fp8 else 1.0)
        sizes = {"M": m, "N": n, "K": k}
        variant = kern.variant_for(sizes) if hasattr(kern, "variant_for") else kern
        plan = variant.launch_plan(*args)
        runs = plan.kernel.name + ("+padded" if getattr(plan, "padding", None) is not None else "")
        kern(*args)
        torch.cuda.synchronize()
        err = ((C.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
        ok = err < (2e-2 if fp8 else 1e-2) and not C.isnan().any().item()
        want_twin = k * A.element_size() % 16 != 0 or offset * A.element_size() % 16 != 0
        if os.environ.get("TILEC_PADDING") != "always":
            ok = ok and (not want_twin or runs.endswith("__realigned"))
        bad += not ok
        ms = triton.testing.do_bench(lambda kern=kern, args=args: kern(*args), warmup=3, rep=30)
        row = {"build": build, "M": m, "N": n, "K": k, "offset": offset, "runs": runs, "rel_err": err, "ok": ok,
               "ms": ms, "padding": os.environ.get("TILEC_PADDING", "auto")}
        rows.append(row)
        print(f"{'PASS' if ok else 'FAIL'} {build:<18} {m}x{n}x{k} +{offset}: {runs:<40} {ms * 1e3:9.1f} us "
              f"rel err {err:.2e}", flush=True)
    print(f"\n{len(rows) - bad} passed, {bad} failed")
    if a.results:
        Path(a.results).write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
