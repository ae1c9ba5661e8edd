"""A copy whose first column is not 16 bytes into its row, on the GPU (bench/RESULTS.md, s22 call 3).

gemm.tile with its A copy shifted by `shift` f16 elements (`copy(A[by * block_M, k * block_K + shift], A_s)`): a shift
of 3 (6 bytes) must not be a TMA box -- the H200 stops such a box with an illegal instruction -- and loads with
cp.async; a shift of 8 (16 bytes) stays TMA. Both are checked against numpy in float64.

    python3 bench/tma_start_gpu.py build DIR     # here: the shifted sources and their sm90 cubins
    python3 bench/tma_start_gpu.py run DIR       # on the GPU (tilec.runtime, numpy staging)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHIFTS = (3, 8)
TILE = ["-Dblock_N=128", "-Dblock_K=64", "-Dthreads=256", "-Dnum_stages=4"]
COPY = "copy(A[by * block_M, k * block_K], A_s)"


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "samples" / "gemm.tile").read_text()
    assert COPY in text
    for shift in SHIFTS:
        src = ROOT / "samples" / f".shifted_{shift}.tile"  # beside the sample: its imports resolve
        src.write_text(text.replace(COPY, f"copy(A[by * block_M, k * block_K + {shift}], A_s)"))
        try:
            if tilec_main([str(src), "--target", "sm90", "-o", str(out / f"shift{shift}.cubin"), *TILE]):
                raise SystemExit(f"build of shift {shift} failed")
        finally:
            src.unlink()


def run(out: Path) -> int:
    import numpy as np

    import tilec.runtime as rt

    rng = np.random.default_rng(0)
    bad = 0
    for shift in SHIFTS:
        kern = next(iter(rt.load(out / f"shift{shift}.cubin").kernels.values()))
        M, N, K = 300, 264, 200
        A = rng.standard_normal((M, K)).astype(np.float16)
        B = rng.standard_normal((K, N)).astype(np.float16)
        C = np.full((M, N), np.nan, np.float16)
        kern(A, B, C)
        shifted = np.zeros((M, K))
        shifted[:, :K - shift] = A[:, shift:]  # column k of a tile reads A[:, k + shift], zero past K
        ref = shifted @ B.astype(np.float64)
        ok = bool(np.allclose(C.astype(np.float64), ref, rtol=2e-2, atol=2e-1))
        bad += not ok
        print(f"shift {shift}: {len(kern.entry.get('tensor_maps') or [])} tensor maps, "
              f"{'correct' if ok else 'WRONG'}, max |err| {float(np.nanmax(np.abs(C - ref))):.3g}")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "run"])
    ap.add_argument("dir", type=Path)
    a = ap.parse_args()
    if a.mode == "build":
        build(a.dir)
        return 0
    return run(a.dir)


if __name__ == "__main__":
    raise SystemExit(main())
