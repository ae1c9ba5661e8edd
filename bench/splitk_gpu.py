"""Split-K through gemm.tile's tuned dispatch on the H200: an artifact whose database routes small-M, long-K shapes to
the two-launch split-K configuration (stage 0 warp-specialized with TMA into an f32 workspace, stage 1 the sum and
cast) and the others to the one-launch Hopper tile, against the default build and cuBLAS (torch.matmul).

    python bench/splitk_gpu.py build OUT     # here: the dispatch and default artifacts, f16 and bf16 (no GPU needed)
    python3 bench/splitk_gpu.py run OUT      # on the H200 (torch, numpy, tilec.runtime): check, then time

The build also compiles examples/handover/gemm_split_k_last_block.tile (split-K in one launch, the last block of
each tile summing the planes) at split 2 and 4 with both of its tiles (OUT/last_block_*.cubin): `run` checks and
times it beside the dispatch's two-launch split-K at the same shapes, and tests/gpu/test_split_k_gpu.py runs it
through every way tilec.runtime gets a workspace (TILEC_SPLITK_ARTIFACTS=OUT).

The database is written by this script (it stands for what `tilec tune` would record if split-K won those shapes),
so the run checks the dispatch path itself: the variant tilec.runtime picks per shape, the workspace from torch's
allocator, both stages, at regular shapes (TMA) and ragged ones (K, N strides that TMA cannot address take the
no-TMA twins). Correctness: max |C - torch| / max |torch|, C poisoned with NaN first. Times: medians of CUDA events
around each call (Kernel.bench; torch.matmul timed the same way).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ONE = {"block_M": 128, "block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4, "persistent": False,
       "cluster_m": 1, "cluster_n": 1, "split_k": 1}
SPLIT = {"block_M": 128, "block_N": 128, "block_K": 64, "threads": 256, "num_stages": 4, "persistent": False,
         "cluster_m": 1, "cluster_n": 1, "split_k": 4}
ROUTED = [((4096, 4096, 4096), ONE), ((1024, 4096, 4096), ONE), ((128, 4096, 11008), SPLIT), ((128, 4096, 4096), SPLIT)]
SHAPES = [(128, 4096, 4096), (128, 4096, 11008), (128, 11008, 4096), (64, 4096, 16384), (100, 4000, 9000),
          (97, 1001, 3003), (1000, 1000, 1000), (4096, 4096, 4096)]
TOL = {"f16": 1e-2, "bf16": 4e-2}
# the one-launch example's builds: (tile, split) as the dispatch's split-K configurations have them
LAST_BLOCK = {f"last_block_{bm}x128_split{sk}": {"block_M": bm, "block_N": 128, "block_K": 64, "threads": 2 * bm,
                                                 "num_stages": 4, "split_k": sk}
              for bm in (64, 128) for sk in (2, 4)}


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for dt in ("f16", "bf16"):
        src = out / f"src_{dt}" / "gemm.tile"
        src.parent.mkdir(exist_ok=True)
        src.write_text((ROOT / "samples" / "gemm.tile").read_text())
        shapes = [{"sizes": {"M": m, "N": n, "K": k}, "winner": {"config": cfg, "ms": 1.0},
                   "runner_ups": [{"config": ONE if cfg is SPLIT else SPLIT, "ms": 2.0}]} for (m, n, k), cfg in ROUTED]
        entry = {"source": "gemm.tile", "kernel": "gemm", "target": "sm90",
                 "defines": {} if dt == "f16" else {"dtype": dt},
                 "source_consts": {"dtype": "f16", "accum_dtype": "f32", "trans_B": False}, "space": list(ONE),
                 "default": ONE, "gpu": "bench/splitk_gpu.py", "shapes": shapes}
        (src.parent / "gemm.tune.json").write_text(json.dumps({"tilec_tune_db": 1, "entries": [entry]}))
        for name, extra in (("dispatch", []), ("default", ["--tune-db", ""])):
            rc = tilec_main([str(src), "--target", "sm90", f"-Ddtype={dt}", "-o", str(out / f"gemm_{dt}_{name}.cubin"),
                             *extra])
            if rc:
                raise SystemExit(f"build of gemm_{dt}_{name} failed")
        m = json.loads((out / f"gemm_{dt}_dispatch.cubin.json").read_text())
        kinds = sorted(c.get("launches", False) for c in m["dispatch"]["gemm"]["configs"])
        assert kinds == [False, True], m["dispatch"]  # one variant of one launch, one of two
    for name, defines in LAST_BLOCK.items():
        if tilec_main([str(ROOT / "examples" / "handover" / "gemm_split_k_last_block.tile"), "--target", "sm90",
                       *[f"-D{k}={v}" for k, v in defines.items()], "-o", str(out / f"{name}.cubin")]):
            raise SystemExit(f"build of {name} failed")


def _ms(fn, *args, iters: int = 30) -> float:
    import torch

    for _ in range(3):
        fn(*args)
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def run(out: Path) -> int:
    import torch

    import tilec.runtime as rt
    from tilec.runtime.dispatch import choose

    bad = 0
    print(f"{'dtype':5} {'M':>5} {'N':>6} {'K':>6}  {'variant':16} {'rel err':>8}  {'dispatch':>8} {'default':>8} "
          f"{'cuBLAS':>8}  TFLOP/s")
    for dt in ("f16", "bf16"):
        tdt = torch.float16 if dt == "f16" else torch.bfloat16
        mod = rt.load(out / f"gemm_{dt}_dispatch.cubin")
        plain = rt.load(out / f"gemm_{dt}_default.cubin")
        table = mod.manifest["dispatch"]["gemm"]
        for m, n, k in SHAPES:
            g = torch.Generator(device="cuda").manual_seed(m + n + k)
            a = torch.randn(m, k, device="cuda", generator=g).to(tdt)
            b = torch.randn(k, n, device="cuda", generator=g).to(tdt)
            c = torch.full((m, n), float("nan"), device="cuda", dtype=tdt)
            cfg = table["configs"][choose(table, {"M": m, "N": n, "K": k})]["consts"]
            variant = f"{cfg['block_M']}x{cfg['block_N']}" + (f" split {cfg['split_k']}" if cfg["split_k"] > 1 else "")
            mod.gemm(a, b, c)
            want = a.float() @ b.float()
            err = ((c.float() - want).abs().max() / want.abs().max()).item()
            ok = err <= TOL[dt]
            bad += not ok
            t_disp, t_plain, t_blas = _ms(mod.gemm, a, b, c), _ms(plain.gemm, a, b, c), _ms(torch.matmul, a, b)
            fl = 2 * m * n * k / 1e9
            print(f"{dt:5} {m:5} {n:6} {k:6}  {variant:16} {err:8.1e}{'' if ok else ' WRONG'}  {t_disp:8.4f} "
                  f"{t_plain:8.4f} {t_blas:8.4f}  {fl / t_disp:.0f} / {fl / t_plain:.0f} / {fl / t_blas:.0f}")
    print("\nsplit-K in one launch (examples/handover), f16, against the dispatch's split-K in two launches:")
    print(f"{'build':26} {'M':>5} {'N':>6} {'K':>6} {'rel err':>8}  {'one':>8} {'two':>8} {'cuBLAS':>8}")
    two = rt.load(out / "gemm_f16_dispatch.cubin").gemm.variants
    for name in LAST_BLOCK:
        one = rt.load(out / f"{name}.cubin").gemm
        same = next(v for v in two if hasattr(v, "stages"))  # the two-launch variant (128x128 split 4)
        for m, n, k in SHAPES[:6]:
            g = torch.Generator(device="cuda").manual_seed(m * n + k)
            a = torch.randn(m, k, device="cuda", generator=g).half()
            b = torch.randn(k, n, device="cuda", generator=g).half()
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
            one(a, b, c)
            want = a.float() @ b.float()
            err = ((c.float() - want).abs().max() / want.abs().max()).item()
            bad += err > TOL["f16"]
            print(f"{name:26} {m:5} {n:6} {k:6} {err:8.1e}{'' if err <= TOL['f16'] else ' WRONG'}  "
                  f"{_ms(one, a, b, c):8.4f} {_ms(same, a, b, c):8.4f} {_ms(torch.matmul, a, b):8.4f}")
    print("all correct" if not bad else f"{bad} WRONG")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run"):
        raise SystemExit(__doc__)
    folder = Path(sys.argv[2])
    if sys.argv[1] == "build":
        build(folder)
    else:
        sys.exit(run(folder))
