"""Every tuned variant of the sweep's flash_attention builds at ragged shapes, for compute-sanitizer.

    python bench/shape_sweep.py build DIR --only attention --only "attention causal"     # here
    compute-sanitizer --tool memcheck --error-exitcode 1 python3 bench/sanitize_attention.py DIR   # on the GPU
    compute-sanitizer --tool racecheck --error-exitcode 1 python3 bench/sanitize_attention.py DIR

For each attention build of DIR (attn_d64 ... attn_d256_causal) and each variant the build carries (the tuned
configurations: tiles, mask_after_gemm, ...), one launch at each of a few small ragged shapes (S = 1, 17, 200: a
partial query tile and a partial key tile, masked edges), on random inputs in torch device tensors, checked against
a numpy reference (bf16 tolerance), so that the sanitizer sees every variant's copies, barriers and masked edges.
Small shapes keep racecheck's run short. Needs numpy, torch (the device arrays: numpy has no bfloat16) and
tilec.runtime.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = [(1, 2, 1), (2, 1, 17), (1, 2, 200)]  # (B, H, S)


def to_bf16(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even


def from_bf16(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def reference(q, k, v, causal: bool) -> np.ndarray:
    """[B, S, H, D] inputs (f32) -> softmax(q k^T / sqrt(D)) v, per batch and head."""
    scores = np.einsum("bshd,bthd->bhst", q, k) / np.sqrt(q.shape[-1])
    if causal:
        s = q.shape[1]
        scores = np.where(np.tril(np.ones((s, s), dtype=bool)), scores, -np.inf)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    return np.einsum("bhst,bthd->bshd", scores / scores.sum(-1, keepdims=True), v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--only", action="append", metavar="BUILD", help="just these builds (attn_d64, ...)")
    args = ap.parse_args()
    import torch

    import tilec.runtime as rt

    def device(bits: np.ndarray):
        return torch.from_numpy(bits.view(np.int16)).cuda().view(torch.bfloat16)

    rng = np.random.default_rng(7)
    bad = 0
    for path in sorted(args.dir.glob("attn_d*.cubin")):
        if args.only and path.stem not in args.only:
            continue
        mod = rt.load(path)
        kern = mod.kernels["flash_attention"]
        variants = list(getattr(kern, "variants", [kern]))
        d = int(path.stem.split("_")[1][1:])
        causal = path.stem.endswith("_causal")
        for var in variants:
            for b, h, s in SHAPES:
                q, k, v = (to_bf16(rng.standard_normal((b, s, h, d), dtype=np.float32)) for _ in range(3))
                o = device(np.full_like(q, 0x7FC0))  # NaN: every element must be written
                var(device(q), device(k), device(v), o)
                torch.cuda.synchronize()
                want = reference(from_bf16(q), from_bf16(k), from_bf16(v), causal)
                got = from_bf16(o.view(torch.int16).cpu().numpy().view(np.uint16))
                err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
                ok = err < 4e-2
                bad += not ok
                print(f"{path.stem:18} {var.name:28} B{b} H{h} S{s}: max rel err {err:.1e} {'ok' if ok else 'WRONG'}")
    print(f"{bad} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
