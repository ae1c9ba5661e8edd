"""Small- and mid-M gemm (issue #26): does a deeper pipeline (more bytes in flight a block) close the gap to cuBLAS?

    python bench/small_m_trial.py build DIR [--set mid]                 # here: single-configuration sm90 builds
    python3 bench/small_m_trial.py run DIR --results $OUT/trial.json    # the H200: each build at each shape, and cuBLAS

At decode and mid-M shapes (M of 1 to 256 against weights of 1.5k-8k square) every carried gemm variant runs at
0.5-0.8 of cuBLAS; Nsight Compute put the time in the consumers' waits for TMA data (bench/RESULTS.md, s15), so the
trial widens what a block keeps in flight: 8 stages of 64-deep K, 4 of 128-deep, a 64-wide N tile (twice the blocks),
a 128x128 tile on 6 stages, each with split-K 1, 2 and 4. `build` compiles them from a copy of samples/gemm.tile
whose split_k constraint admits every tile (the sample keeps split-K to the tiles the tuner measured with it), f16
with B as [K, N] and bf16 with B as [N, K]. `run` checks each against torch (outputs poisoned with NaN) and times it
with `triton.testing.do_bench` (median, the L2 flushed before each call) beside torch.mm, and prints per shape the
best of each tile family and cuBLAS. Needs numpy, torch, triton and tilec.runtime.

`--set mid` is the second trial (s20): the mid-M shapes where no carried variant reached 0.8 of cuBLAS in s19's
sweep (M of 37-512 against long K, large M against N = 256, 1000^3), with split-K over wider tiles and a split of 3
(120 blocks where 2 x 20 output tiles of 128 x 128 leave most of the 132 multiprocessors idle). The set's tiles,
splits and shapes go into DIR/builds.json, so `run` needs no flag.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (block_M, block_N, block_K, threads, num_stages): the sample's 64x128 baseline, then the deeper pipelines
TILES = [(64, 128, 64, 128, 4), (64, 128, 64, 128, 8), (64, 128, 128, 128, 4), (64, 64, 128, 128, 6),
         (128, 128, 64, 256, 6), (64, 256, 64, 128, 5)]
SPLITS = (1, 2, 4)
LAYOUTS = {"f16": {"dtype": "f16", "trans_B": "False"}, "bf16_tB": {"dtype": "bf16", "trans_B": "True"}}
MID_TILES = [(64, 128, 64, 128, 8), (128, 128, 64, 256, 4), (128, 128, 64, 256, 6), (64, 256, 64, 128, 4),
             (128, 256, 64, 256, 4), (128, 192, 64, 256, 4)]
MID_SPLITS = (1, 2, 3, 4)
MID_SHAPES = [(200, 2560, 10240), (200, 1536, 8960), (200, 4096, 14336), (512, 2560, 2560), (256, 5120, 5120),
              (200, 5120, 5120), (37, 2048, 16384), (64, 896, 4864), (512, 4672, 4544), (200, 18176, 4544),
              (1000, 1000, 1000), (2048, 256, 6144), (5120, 256, 5120), (8, 1600, 6400), (256, 2048, 6144),
              (2048, 5120, 5120), (1000, 3584, 18944)]
SHAPES = [(1, 4096, 4096), (3, 1536, 8960), (8, 2560, 2560), (16, 6144, 4096), (32, 5120, 5120), (37, 6144, 4096),
          (37, 7680, 2560), (37, 2048, 16384), (64, 2048, 2048), (64, 4096, 4096), (64, 8192, 3584),
          (128, 4608, 3584), (128, 4096, 11008), (200, 3072, 4096), (256, 1536, 1536)]


def name(layout: str, tile, split: int) -> str:
    m, n, k, t, s = tile
    return f"{layout}_{m}x{n}x{k}_t{t}_s{s}_split{split}"


def build(out: Path, trial: str = "small", jobs: int = 2) -> int:
    from concurrent.futures import ThreadPoolExecutor

    out.mkdir(parents=True, exist_ok=True)
    tiles, splits, shapes = (MID_TILES, MID_SPLITS, MID_SHAPES) if trial == "mid" else (TILES, SPLITS, SHAPES)
    src = (ROOT / "samples" / "gemm.tile").read_text()
    relaxed = src.replace("where=split_k == 1 or (not persistent and cluster_m * cluster_n == 1\n",
                              "where=split_k == 1 or (not persistent and cluster_m * cluster_n == 1)\n"
                              "                                                      or (not persistent\n", 1)
    relaxed = relaxed.replace("const split_k = tune(1, 2, 4, 8,", "const split_k = tune(1, 2, 3, 4, 8,", 1)
    if relaxed == src or "tune(1, 2, 3, 4, 8," not in relaxed:
        raise SystemExit("samples/gemm.tile's split_k constraint changed: update small_m_trial.py")
    (out / "gemm_trial.tile").write_text(relaxed)

    def one(layout, defines, tile, split):
        consts = dict(zip(("block_M", "block_N", "block_K", "threads", "num_stages"), tile, strict=True))
        flags = [f"-D{k}={v}" for k, v in {**defines, **consts, "split_k": split}.items()]
        path = out / f"{name(layout, tile, split)}.cubin"
        r = subprocess.run([sys.executable, "-m", "tilec", str(out / "gemm_trial.tile"), "--target", "sm90",
                            "-o", str(path), *flags], capture_output=True, text=True)
        print(f"{path.name}: build failed\n{r.stderr[-600:]}" if r.returncode else f"built {path.name}", flush=True)
        return None if r.returncode else path.name

    work = [(lay, d, t, s) for lay, d in LAYOUTS.items() for t in tiles for s in splits]
    with ThreadPoolExecutor(jobs) as pool:
        built = [b for b in pool.map(lambda w: one(*w), work) if b]
    (out / "builds.json").write_text(json.dumps({"builds": built, "shapes": shapes}))
    return 0


def run(out: Path, results: Path | None) -> int:
    import torch
    from triton.testing import do_bench

    import tilec.runtime as rt

    def bench(fn) -> float:
        return do_bench(fn, warmup=25, rep=100, return_mode="median")

    listed = json.loads((out / "builds.json").read_text())
    builds, shapes = (listed, SHAPES) if isinstance(listed, list) else (listed["builds"], listed["shapes"])
    rows, bad = [], 0
    for m, n, k in shapes:
        g = torch.Generator(device="cuda").manual_seed(m + n + k)
        for layout in LAYOUTS:
            dt = torch.float16 if layout == "f16" else torch.bfloat16
            trans_b = layout.endswith("tB")
            A = torch.randn(m, k, device="cuda", generator=g).to(dt)
            B = torch.randn(*((n, k) if trans_b else (k, n)), device="cuda", generator=g).to(dt)
            Bk = B.t() if trans_b else B
            ref = torch.mm(A, Bk)
            row = {"layout": layout, "M": m, "N": n, "K": k, "cublas_ms": bench(lambda: torch.mm(A, Bk)), "ms": {}}  # noqa: B023
            for b in (x for x in builds if x.startswith(layout + "_")):
                gemm = rt.load(out / b).gemm
                C = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
                gemm(A, B, C)
                torch.cuda.synchronize()
                err = ((C.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-6)).item()
                if not err <= 2e-2:
                    bad += 1
                    print(f"WRONG {b} at {m}x{n}x{k}: relative error {err:.3g}")
                    continue
                row["ms"][b.removesuffix(".cubin")] = bench(lambda gemm=gemm, C=C: gemm(A, B, C))  # noqa: B023
            rows.append(row)
            best = sorted(row["ms"].items(), key=lambda kv: kv[1])[:3]
            print(f"{layout:8s} {m:>4}x{n:>5}x{k:>5} cuBLAS {row['cublas_ms'] * 1e3:6.1f} us | " + "  ".join(
                f"{kk.removeprefix(layout + '_')} {v * 1e3:.1f} ({row['cublas_ms'] / v:.2f})" for kk, v in best))
            if results:
                results.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    print(f"{len(rows)} rows, {bad} wrong")
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["build", "run"])
    p.add_argument("dir", type=Path)
    p.add_argument("--results", type=Path)
    p.add_argument("--set", choices=["small", "mid"], default="small", help="which trial to build (default small)")
    p.add_argument("--jobs", type=int, default=2, help="compilations at once (build)")
    a = p.parse_args()
    return build(a.dir, a.set, a.jobs) if a.step == "build" else run(a.dir, a.results)


if __name__ == "__main__":
    sys.exit(main())
