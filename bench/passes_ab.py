"""The two TVM passes one at a time (partition-boundaries, simplify-indices): the default gemm builds and causal
attention built with each combination, timed with triton's do_bench (best of 3), in TFLOP/s.

    python bench/passes_ab.py build DIR     # here: 12 cubins
    python3 bench/passes_ab.py run DIR      # on the GPU: tilec.runtime, torch and triton; a table

Writes the table to $OUT/passes_ab.json when OUT is set. bench/partition_ab.py times both passes together
on every bench_h200 kernel.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {"both on": ["--simplify-indices"], "partition off": ["--no-partition", "--simplify-indices"],
            "simplify off": [], "both off": ["--no-partition"]}
JOBS = [("gemm", "gemm_bf16", ["-Ddtype=bf16"]), ("gemm", "gemm_f16", []),
        ("flash_attention", "attn_d128_causal", ["-Ddtype=bf16", "-Ddim=128", "-Dcausal=True"])]
GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (5120, 3584, 7168), (4096, 4096, 11008)]
ATTN_SHAPES = [(4, 32, 4096, 128)]


def _artifact(folder: Path, name: str, variant: str) -> Path:
    return folder / f"{name}.{variant.replace(' ', '_')}.cubin"


def build(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tilec.cli.main import main

    folder.mkdir(parents=True, exist_ok=True)
    for sample, name, defines in JOBS:
        for variant, flags in VARIANTS.items():
            out = _artifact(folder, name, variant)
            if main([str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "-o", str(out), *defines, *flags]):
                raise SystemExit(f"build of {out} failed")


def _call(mod, sample: str, shape: tuple, dtype):
    """(the launch, its FLOPs) on fresh random tensors."""
    import torch

    if sample == "gemm":
        m, n, k = shape
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        c = torch.empty(m, n, device="cuda", dtype=dtype)
        return (lambda: mod.gemm(a, b, c)), 2 * m * n * k
    batch, heads, seq, dim = shape
    q, k, v = (torch.randn(batch, seq, heads, dim, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.empty_like(q)
    return (lambda: mod.flash_attention(q, k, v, o)), 2 * batch * heads * seq * seq * dim  # causal: half of 4BHS²D


def run(folder: Path) -> None:
    import torch
    from triton.testing import do_bench

    import tilec.runtime as rt

    rows = []
    for sample, name, _ in JOBS:
        dtype = torch.float16 if name.endswith("f16") and "bf16" not in name else torch.bfloat16
        for shape in GEMM_SHAPES if sample == "gemm" else ATTN_SHAPES:
            tflops = {}
            for variant in VARIANTS:
                fn, flops = _call(rt.load(str(_artifact(folder, name, variant))), sample, shape, dtype)
                fn()
                torch.cuda.synchronize()
                ms = min(do_bench(fn, rep=200) for _ in range(3))
                tflops[variant] = flops / (ms * 1e-3) / 1e12
            rows.append({"kernel": name, "shape": list(shape), "tflops": tflops})
            print(f"{name:18} {str(shape):24} " + "  ".join(f"{v}: {t:6.1f}" for v, t in tflops.items()), flush=True)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "passes_ab.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    step, folder = sys.argv[1], Path(sys.argv[2])
    build(folder) if step == "build" else run(folder)
