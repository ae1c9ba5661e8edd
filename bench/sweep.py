"""Tile-configuration sweep: the same sample under several -D settings, timed on the GPU.

    python bench/sweep.py build .artifacts/sweep     # here
    python3 bench/sweep.py run .artifacts/sweep      # on the H200

Variants change only consts (-D) and, for gemm, the use_swizzle panel size, so the kernel source
stays the sample's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (name, -D overrides, use_swizzle panel size). Threads are the `threads` const of the samples.
GEMM = [
    ("gemm_128x256x64_t256_s4_p8", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4}, 8),
    ("gemm_128x256x64_t256_s4_p16", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4}, 16),
    ("gemm_128x256x64_t256_s4_p4", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4}, 4),
    ("gemm_128x256x64_t256_s3_p8", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 3}, 8),
    ("gemm_256x128x64_t256_s4_p8", {"block_M": 256, "block_K": 64, "threads": 256, "num_stages": 4}, 8),
    ("gemm_128x128x64_t256_s4_p8", {"block_K": 64, "threads": 256, "num_stages": 4}, 8),
    ("gemm_128x128x64_t128_s4_p8", {"block_K": 64, "threads": 128, "num_stages": 4}, 8),
]
ATTN = [
    ("attn_d128_m128n128_t256", {"dim": 128, "block_M": 128, "block_N": 128, "threads": 256}),
    ("attn_d128_m128n64_t256", {"dim": 128, "block_M": 128, "threads": 256}),
    ("attn_d128_m64n128_t128", {"dim": 128, "block_N": 128}),
    ("attn_d64_m128n128_t256", {"dim": 64, "block_M": 128, "block_N": 128, "threads": 256}),
    ("attn_d64_m128n256_t256", {"dim": 64, "block_M": 128, "block_N": 256, "threads": 256}),
    ("attn_d64_m128n128_t256_s3", {"dim": 64, "block_M": 128, "block_N": 128, "threads": 256, "num_stages": 3}),
    ("attn_d64_m192n128_t384", {"dim": 64, "block_M": 192, "block_N": 128, "threads": 384}),
]


def _variant_source(sample: str, panel: int | None, out: Path, name: str) -> Path:
    text = (ROOT / "samples" / f"{sample}.tile").read_text()
    if panel is not None:
        text = text.replace("use_swizzle(panel_size=8)", f"use_swizzle(panel_size={panel})")
    path = out / f"{name}.tile"
    path.write_text(text)
    (out / "common").mkdir(exist_ok=True)
    return path


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    index = []
    for name, defs, panel in GEMM:
        src = _variant_source("gemm", panel, out, name)
        rc = tilec_main([str(src), "--target", "sm90", "-o", str(out / f"{name}.cubin"), "--resource-usage",
                         *[f"-D{k}={v}" for k, v in defs.items()]])
        if rc == 0:
            index.append({"name": name, "kind": "gemm"})
    for name, defs in ATTN:
        src = _variant_source("flash_attention", None, out, name)
        rc = tilec_main([str(src), "--target", "sm90", "-o", str(out / f"{name}.cubin"), "--resource-usage",
                         "-Ddtype=bf16", *[f"-D{k}={v}" for k, v in defs.items()]])
        if rc == 0:
            index.append({"name": name, "kind": "attn", "dim": defs["dim"]})
    (out / "index.json").write_text(json.dumps(index))


def run(out: Path) -> None:
    import torch
    from triton.testing import do_bench

    import tilec.runtime as rt

    index = json.loads((out / "index.json").read_text())
    for e in index:
        k = next(iter(rt.load(out / f"{e['name']}.cubin").kernels.values()))
        if e["kind"] == "gemm":
            for n in (4096, 8192):
                a, b = (torch.randn(n, n, dtype=torch.float16, device="cuda") for _ in range(2))
                c = torch.empty_like(a)
                ms = do_bench(lambda: k(a, b, c), warmup=25, rep=200)  # noqa: B023
                err = (c.float() - (a @ b).float()).abs().max().item()
                print(f"{e['name']:<34} {n}^3  {ms:7.3f} ms  {2 * n**3 / ms / 1e9:6.1f} TFLOP/s  err {err:.3g}",
                      flush=True)
        else:
            d = e["dim"]
            bb, h, s = 4, 32, 4096 if d == 128 else 8192
            q, kk, v = (torch.randn(bb, s, h, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
            o = torch.empty_like(q)
            ms = do_bench(lambda: k(q, kk, v, o), warmup=25, rep=200)  # noqa: B023
            ref = torch.nn.functional.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, kk, v)))
            err = (o.float() - ref.transpose(1, 2).float()).abs().max().item()
            print(f"{e['name']:<34} S{s} D{d}  {ms:7.3f} ms  {4 * bb * h * s * s * d / ms / 1e9:6.1f} TFLOP/s  "
                  f"err {err:.3g}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "run"])
    ap.add_argument("dir")
    a = ap.parse_args()
    build(Path(a.dir)) if a.mode == "build" else run(Path(a.dir))
