"""Attention with and without overlap_softmax (docs/hopper.md) against cuDNN and torch's flash backend.

    python bench/bench_overlap.py build OUT     # here: compile the variants (no GPU needed)
    python bench/bench_overlap.py run OUT       # on the H200: check against torch, then time, print a table

Correctness: ||out - ref|| / ||ref|| against torch's SDPA on float32 inputs (the bf16 inputs upcast), at a regular
and a ragged shape, the output poisoned with NaN before the launch. Timing: medians of triton.testing.do_bench;
TFLOP/s count 4·B·H·S²·D, halved when causal.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 8192, 64, False), (4, 32, 8192, 64, True),
          (2, 16, 16384, 128, False), (2, 16, 16384, 128, True), (2, 16, 3000, 128, True)]
TILES = {128: ["block_M=128", "block_N=128", "threads=256"], 64: ["block_M=192", "block_N=128", "threads=384"]}
VARIANTS = [("ping-pong", ["overlap_softmax=False"]), ("overlap", ["overlap_softmax=True"]),
            ("preload", ["tma_preload=True"]), ("both", ["overlap_softmax=True", "tma_preload=True"])]


def name(d: int, causal: bool, variant: str) -> str:
    return f"attn_d{d}_{'causal' if causal else 'full'}_{variant}"


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for d in (64, 128):
        for causal in (False, True):
            for variant, flags in VARIANTS:
                rc = tilec_main([str(ROOT / "samples" / "flash_attention.tile"), "--target", "sm90", "-o",
                                 str(out / f"{name(d, causal, variant)}.cubin"), "--resource-usage", "-Ddtype=bf16",
                                 f"-Ddim={d}", f"-Dcausal={causal}", *[f"-D{x}" for x in TILES[d] + flags]])
                if rc:
                    raise SystemExit(f"build of {name(d, causal, variant)} failed")


def run(out: Path) -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    import tilec.runtime as rt

    dev = "cuda"
    kernels = {(d, c, v): rt.load(out / f"{name(d, c, v)}.cubin").flash_attention
               for d in (64, 128) for c in (False, True) for v, _ in VARIANTS}
    print("correctness: relative L2 error against torch SDPA in float32")
    bad = 0
    for d in (64, 128):
        for causal in (False, True):
            for b_, h, s in ((1, 4, 1024), (2, 3, 3000), (1, 2, 250)):
                q, k, v = (torch.randn(b_, s, h, d, dtype=torch.bfloat16, device=dev) for _ in range(3))
                ref = F.scaled_dot_product_attention(*(x.float().transpose(1, 2) for x in (q, k, v)),
                                                     is_causal=causal).transpose(1, 2)
                for variant, _ in VARIANTS:
                    o = torch.full_like(q, float("nan"))
                    kernels[(d, causal, variant)](q, k, v, o)
                    torch.cuda.synchronize()
                    err = ((o.float() - ref).norm() / ref.norm()).item()
                    ok = err < 1e-2 and not torch.isnan(o).any().item()
                    bad += not ok
                    print(f"  D{d} {'causal' if causal else 'full  '} B{b_} H{h} S{s:<5} {variant:<10} {err:.2e} "
                          f"{'ok' if ok else 'FAIL'}")
    rows = []
    for b_, h, s, d, causal in SHAPES:
        q, k, v = (torch.randn(b_, s, h, d, dtype=torch.bfloat16, device=dev) for _ in range(3))
        o = torch.empty_like(q)
        flops = 4 * b_ * h * s * s * d // (2 if causal else 1)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        row = {}
        for backend, label in ((SDPBackend.CUDNN_ATTENTION, "cuDNN"), (SDPBackend.FLASH_ATTENTION, "flash")):
            try:
                with sdpa_kernel(backend):
                    row[label] = flops / do_bench(
                        lambda qt=qt, kt=kt, vt=vt, causal=causal: F.scaled_dot_product_attention(
                            qt, kt, vt, is_causal=causal), warmup=25, rep=200, return_mode="median") / 1e9
            except RuntimeError:
                row[label] = float("nan")
        for variant, _ in VARIANTS:
            kern = kernels[(d, causal, variant)]
            row[variant] = flops / do_bench(lambda kern=kern, q=q, k=k, v=v, o=o: kern(q, k, v, o), warmup=25,
                                            rep=200, return_mode="median") / 1e9
        for variant, _ in VARIANTS:  # every variant again: the run-to-run spread
            kern = kernels[(d, causal, variant)]
            row[variant + " again"] = flops / do_bench(lambda kern=kern, q=q, k=k, v=v, o=o: kern(q, k, v, o),
                                                       warmup=25, rep=200, return_mode="median") / 1e9
        rows.append((f"B{b_} H{h} S{s} D{d}{' causal' if causal else ''}", row))
    print(f"\n{'shape':<28} {'cuDNN':>7} {'flash':>7}" + "".join(f"{v:>10}" for v, _ in VARIANTS)
          + "   (TFLOP/s; again)")
    for shape, r in rows:
        print(f"{shape:<28} {r['cuDNN']:7.1f} {r['flash']:7.1f}" + "".join(f"{r[v]:10.1f}" for v, _ in VARIANTS)
              + "   " + " ".join(f"{r[v + ' again']:.1f}" for v, _ in VARIANTS))
    print(f"correctness failures: {bad}")


if __name__ == "__main__":
    cmd, out = sys.argv[1], Path(sys.argv[2])
    build(out) if cmd == "build" else run(out)
