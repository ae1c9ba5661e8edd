"""Tune the samples for one GPU and write their tuning databases (samples/<name>.tune.json).

    python bench/tune_samples.py build .artifacts/tune            # here: compile every candidate (no GPU needed)
    python3 -m tilec.runtime.tune_worker .artifacts/tune/*         # on the GPU machine: check and time
    python bench/tune_samples.py collect .artifacts/tune          # here: write samples/*.tune.json

With --missing, `build` compiles each job only for the shapes its database entry lacks (a job whose entry has them
all is left out), and `collect` adds them to the entry (`tilec tune --extend`): the shapes a set gained since the
entry was tuned cost their own timing, not the whole entry's again.

Each job is one `tilec tune` run: a sample, the -D values its database entry is for (only values that differ
from the sample's defaults, so that a build with the same -D finds the entry), and the shapes it is tuned at.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GEMM = ["--shapes", "llm-gemm", "--shapes", "square-gemm"]
# decode and small-batch shapes (M = 1, 16, 64 tokens) of the llm-gemm layers, and a mid batch, so that the dispatch
# has a measured winner (typically split-K) near the small and skinny shapes instead of the nearest M = 128 one
DECODE = [f"M={m},N={n},K={k}" for m in (1, 16, 64) for n, k in ((4096, 4096), (11008, 4096), (4096, 11008),
                                                                   (28672, 8192))] + ["M=512,N=4096,K=4096"] + [
    f"M=4,N={n},K={k}" for n, k in ((4096, 4096), (4096, 11008))]  # between the M = 1 and 16 rows (GEMV tiles)
# mid batches (32, 256 and 2048 tokens) at weights outside llm-gemm's four: small and wide N x K, long and short K.
# Without them the nearest tuned shape of a 200x3072x4096 call is M = 128 at 4096x4096, whose winner (split-K)
# is far from the best tile there (bench/RESULTS.md, "s14"); none of these is a shape of bench/shape_sweep.py
MID = [f"M={m},N={n},K={k}" for m in (32, 256, 2048) for n, k in ((1536, 1536), (6144, 2048), (2048, 6144),
                                                                   (5120, 5120), (14336, 4096), (4096, 14336))]
# mid M against long K and large M against N = 256, where no tile of s19's space reached 0.8 of cuBLAS (the 128x128
# 6-stage tile and the split of 3 did: bench/small_m_trial.py --set mid); none of these is a shape of shape_sweep.py
MID_LONG_K = ["M=160,N=5120,K=10240", "M=384,N=2560,K=8192", "M=384,N=3072,K=3072", "M=4096,N=256,K=4096",
              "M=3072,N=256,K=8192"]
# issue #26's aligned anchor that neither named set has: without it the dispatch picked the nearest tuned shape's
# winner there, 8-19 % behind the fastest carried variant in the trans_B builds (bench/RESULTS.md, "s28")
ANCHORS = ["M=5120,N=3584,K=7168"]
GEMM_SMALL = GEMM + [arg for size in DECODE + MID + MID_LONG_K + ANCHORS for arg in ("--size", size)]
# The row kernels' winner changes with the rows in flight (M against the blocks the multiprocessors hold) and with
# whether a row fits a block and is 16-byte aligned, more than smoothly with log M and log N: with `rows` alone (M =
# 4096 at most row lengths) the nearest tuned shape ran a variant 1.1-2x slower than the fastest carried one at 8
# rmsnorm and 11 layernorm shapes of the sweep. These add decode batches (M = 16), mid and large row counts (300,
# 1500, 8000, 12000, 24000) and odd row lengths; none is a shape of shape_sweep.py. On the H200 they lifted rmsnorm's
# worst / 10th percentile / median ratio to torch over the sweep from 0.80 / 0.91 / 1.07 to 0.85 / 0.88 / 1.18 and
# layernorm's from 0.71 / 0.92 / 1.18 to 0.95 / 0.97 / 1.16; softmax, tuned at them too, went from 0.68 / 0.93 /
# 1.25 to 0.64 / 0.90 / 1.29 (the nearest shape's winner lost at 200 x 32000 and 200 x 50257), so its entry keeps
# `rows` (bench/RESULTS.md, "s23").
ROWS_EXTRA = [f"M={m},N={n}" for m, n in [
    (16, 2304), (16, 7168), (16, 24000), (16, 100003), (300, 1280), (300, 6001), (300, 14336), (1500, 640),
    (1500, 3001), (1500, 10240), (12000, 1280), (12000, 2304), (12000, 5000), (12000, 7001), (24000, 640),
    (8000, 20000)]]
ROWS = ["--shapes", "rows", *[arg for size in ROWS_EXTRA for arg in ("--size", size)]]
# softmax's next full tune (its entry predates softmax.tile's current source, so it cannot be extended): odd rows for
# the alignment classes, and a few long rows, which by the nearest shape sit as close to 64 x 4096 as to 1024 x 65536
# (s32: 8 x 65024 ran 1.4x slower on 64 x 4096's variant); 1 x 65536 is issue #26's, and four more few-long-row shapes
# give the split rows (split_n) tuned neighbours. None is a shape of shape_sweep.py.
SOFTMAX_EXTRA = [f"M={m},N={n}" for m, n in [
    (16, 100003), (300, 6001), (1500, 3001), (12000, 7001), (4000, 2049), (64, 12289), (16, 32768), (16, 65536),
    (32, 131072), (32, 50001), (1, 65536), (4, 200000), (128, 50257), (512, 32000)]]
SOFTMAX = ["--shapes", "rows", *[arg for size in SOFTMAX_EXTRA for arg in ("--size", size)]]
# Rows that are not a multiple of 16 bytes: the dispatch serves such a launch from the tuned shapes of its own class
# (docs/tuning.md, "Odd row lengths"), so these give odd-K/N launches winners measured on their own path (the padded
# workspaces) without moving any aligned launch's rule. None is a shape of shape_sweep.py.
FP8_ODD = ["M=8192,N=255,K=8191", "M=2048,N=4097,K=4095", "M=1024,N=2001,K=3001", "M=128,N=1003,K=2999",
           "M=4096,N=32001,K=4096", "M=512,N=4096,K=4100"]
# N just above 128 at long M, where a 64x144 tile beats the 128-wide ones (bench/fp8_tile_trial.py); not sweep shapes
FP8_NARROW_N = ["M=8192,N=136,K=8192", "M=4096,N=144,K=8192"]
# (the worker timed split-K 16-19 us slower than do_bench until 2026-12-02: it drained the queue after each launch --
# bench/RESULTS.md, "small and skinny gemm shapes" and "the GEMV tiles")
# the configurations an artifact carries (the database's default is 4): the gemms serve decode shapes (GEMV tiles,
# split-K) and large ones (the wide TMA tiles) from one artifact, the row kernels rows that fit a block and rows
# streamed through it
MAX_CONFIGS = {"gemm": 10, "fp8_gemm": 9, "softmax": 6, "rmsnorm": 8, "layernorm": 8}
# (job name, sample, -D values, tilec tune shape arguments)
JOBS = [
    ("gemm_f16", "gemm", [], GEMM_SMALL),
    ("gemm_bf16", "gemm", ["dtype=bf16"], GEMM_SMALL),
    ("gemm_f16_tB", "gemm", ["trans_B=True"], GEMM_SMALL),
    ("gemm_bf16_tB", "gemm", ["dtype=bf16", "trans_B=True"], GEMM_SMALL),
    ("fp8_gemm", "fp8_gemm", [], GEMM_SMALL + [arg for size in FP8_ODD + FP8_NARROW_N for arg in ("--size", size)]),
    ("attn_d64", "flash_attention", ["dtype=bf16"], ["--shapes", "attention"]),
    ("attn_d64_causal", "flash_attention", ["dtype=bf16", "causal=True"], ["--shapes", "attention"]),
    ("attn_d128", "flash_attention", ["dtype=bf16", "dim=128"], ["--shapes", "attention"]),
    ("attn_d128_causal", "flash_attention", ["dtype=bf16", "dim=128", "causal=True"], ["--shapes", "attention"]),
    # head dim 96 (issue #26's four head dims; 256 has one tile that fits, nothing to choose): untuned, it ran
    # sm90's default 128x128 tile at every S, 0.61-0.71 of cuDNN at S = 1 (bench/RESULTS.md, "s19")
    ("attn_d96", "flash_attention", ["dtype=bf16", "dim=96"], ["--shapes", "attention"]),
    ("attn_d96_causal", "flash_attention", ["dtype=bf16", "dim=96", "causal=True"], ["--shapes", "attention"]),
    ("softmax_bf16", "softmax", ["dtype=bf16"], SOFTMAX),
    ("rmsnorm_bf16", "rmsnorm", ["dtype=bf16"], ROWS),
    ("layernorm_bf16", "layernorm", ["dtype=bf16"], ROWS),
]


def missing_shapes(sample: str, defines: list[str], shape_args: list[str], target: str) -> list[str] | None:
    """The --size arguments of the job's shapes that its database entry lacks (None: the job has no entry)."""
    from tilec.tuning import database
    from tilec.tuning.shapes import label, resolve

    path = ROOT / "samples" / f"{sample}.tune.json"
    fixed = dict(d.split("=", 1) for d in defines)
    entry = next((e for e in database.load(path)["entries"] if e["target"] == target and e["defines"] == fixed),
                 None) if path.is_file() else None
    if entry is None:
        return None
    named = [v for k, v in zip(shape_args, shape_args[1:], strict=False) if k == "--shapes"]
    sizes = [v for k, v in zip(shape_args, shape_args[1:], strict=False) if k == "--size"]
    have = {tuple(sorted(s["sizes"].items())) for s in entry["shapes"]}
    return [arg for s in resolve(sizes, named) if tuple(sorted(s.items())) not in have for arg in ("--size", label(s))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=["build", "collect"])
    p.add_argument("folder", type=Path)
    p.add_argument("--only", action="append", help="just these jobs")
    p.add_argument("--target", default="sm90")
    p.add_argument("--missing", action="store_true", help="build: only the shapes each job's entry lacks; "
                   "collect: add them to the entries")
    args = p.parse_args()
    from tilec.cli.main import main as tilec_main

    for name, sample, defines, shapes in JOBS:
        if args.only and name not in args.only:
            continue
        folder = args.folder / name
        if args.missing and args.step == "build":
            lacking = missing_shapes(sample, defines, shapes, args.target)
            if lacking == []:
                print(f"{name}: its entry has every shape")
                continue
            shapes = shapes if lacking is None else lacking
        if args.step == "collect" and args.missing and not (folder / "plan.json").is_file():
            continue  # left out by build --missing
        if args.step == "build":
            rc = tilec_main(["tune", str(ROOT / "samples" / f"{sample}.tile"), "--target", args.target,
                             "--build-dir", str(folder), *[f"-D{d}" for d in defines], *shapes])
        else:
            rc = tilec_main(["tune", "--collect", str(folder), "--db", str(ROOT / "samples" / f"{sample}.tune.json"),
                             *(["--extend"] if args.missing else []),
                             *(["--max-configs", str(MAX_CONFIGS[sample])] if sample in MAX_CONFIGS else [])])
        if rc:
            print(f"{name}: failed", file=sys.stderr)
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
