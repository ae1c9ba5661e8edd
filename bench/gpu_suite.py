"""The GPU correctness suite: build here (no GPU), run on the H200 (no compiler).

    python bench/gpu_suite.py build .artifacts/suite     # compile every case, inputs + interpreter results
    python bench/gpu_suite.py run .artifacts/suite       # on the GPU machine: launch, compare, print a table

`build --compiler nvrtc` builds the cubins with NVRTC instead of tilec's default toolchain (nvcc when it is on
PATH); with TILEC_NVRTC_SPLIT=1 in the environment, with NVRTC's opt-in split build (tilec/targets/cuda/nvrtc.py).

`build` compiles each sample for sm90 (cubin, sm_90a) and for sm80 as PTX (so the Ampere-class
lowering runs on a Hopper GPU too), at three or more shapes (one ragged), in f16 and bf16, and
stores fresh random inputs with the reference interpreter's outputs. `run` needs only numpy,
ml_dtypes and tilec.runtime (the CUDA driver), as on a production machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOL = {"f16": (1e-2, 1e-2), "bf16": (2e-2, 3e-2), "f32": (1e-4, 1e-4)}

# sample, extra defines, list of size dicts (the last one ragged)
CASES = [
    ("vector_add", {}, [{"N": 4096}, {"N": 1 << 17}, {"N": 12345}]),
    # K=100 (f16 rows of 200 B) cannot be described by a TMA tensor map: the no-TMA twin runs; M=300, N=264,
    # K=136 is ragged in every tile dimension but 16-byte aligned, so TMA runs with zero-filled edges.
    # M=129, N=301, K=77 (odd: every row of A, B and C starts at another offset in its 16-byte chunk): the twin's
    # realigned copies (two aligned loads and a shift per 16 bytes), guarded at the edges and the tensors' ends.
    ("gemm", {}, [{"M": 256, "N": 256, "K": 128}, {"M": 512, "N": 384, "K": 256}, {"M": 300, "N": 264, "K": 136},
                  {"M": 300, "N": 200, "K": 100}, {"M": 129, "N": 301, "K": 77}]),
    # N=201 alone (C's rows 402 B, A's and B's 272 B): the direct-stores twin, TMA loads and the threads' stores
    ("gemm", {"trans_B": True}, [{"M": 256, "N": 256, "K": 128}, {"M": 300, "N": 264, "K": 136},
                                 {"M": 300, "N": 200, "K": 100}, {"M": 300, "N": 201, "K": 136},
                                 {"M": 129, "N": 301, "K": 77}]),
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 3},
     [{"M": 512, "N": 512, "K": 256}, {"M": 300, "N": 264, "K": 136}, {"M": 300, "N": 200, "K": 100},
      {"M": 257, "N": 515, "K": 333}]),
    ("gemm", {"block_N": 256, "block_K": 64, "threads": 256, "num_stages": 3, "persistent": True},
     [{"M": 1024, "N": 1024, "K": 256}, {"M": 300, "N": 264, "K": 136}, {"M": 300, "N": 200, "K": 100}]),
    # thread-block clusters (sm90; ignored elsewhere): two blocks along M share B's tile, or along N share A's, each
    # loading half and multicasting it; M=300 (3 M tiles) / N=264 (2 N tiles of 256, 3 of 128) leave a block past
    # the grid in a cluster, K=100 runs the clusterless twin
    ("gemm", {"cluster_m": 2}, [{"M": 512, "N": 512, "K": 256}, {"M": 300, "N": 264, "K": 136},
                                {"M": 300, "N": 200, "K": 100}]),
    ("gemm", {"cluster_n": 2}, [{"M": 512, "N": 512, "K": 256}, {"M": 300, "N": 520, "K": 136},
                                {"M": 300, "N": 200, "K": 100}]),
    ("gemm", {"cluster_m": 2, "trans_B": True, "block_N": 128, "block_K": 32, "threads": 128, "num_stages": 3},
     [{"M": 256, "N": 256, "K": 128}, {"M": 392, "N": 264, "K": 136}]),
    # the 6-stage 128x128 tile (192 KB of shared memory: sm90 only) in one launch and split in 3 (s20): the last
    # share of K runs past K (K=1000: 16 tiles of 64, shares of 6), M=129 N=301 K=777 runs the twin
    ("gemm", {"block_N": 128, "block_K": 64, "threads": 256, "num_stages": 6, "_sm90_only": True},
     [{"M": 512, "N": 512, "K": 384}, {"M": 300, "N": 264, "K": 1000}, {"M": 129, "N": 301, "K": 777}]),
    ("gemm", {"block_N": 128, "block_K": 64, "threads": 256, "num_stages": 6, "split_k": 3, "trans_B": True,
              "_sm90_only": True}, [{"M": 256, "N": 256, "K": 1536}, {"M": 300, "N": 264, "K": 1000},
                                    {"M": 300, "N": 263, "K": 1000}, {"M": 129, "N": 301, "K": 777}]),
    ("gemm_bias_relu", {}, [{"M": 256, "N": 256, "K": 128}, {"M": 384, "N": 512, "K": 64},
                            {"M": 300, "N": 200, "K": 100}]),
    # N=131 with K aligned: the direct-stores twin (split 3: its first launch's, the f32 planes' rows misaligned)
    ("fp8_gemm", {}, [{"M": 256, "N": 256, "K": 256}, {"M": 300, "N": 272, "K": 160}, {"M": 200, "N": 100, "K": 100},
                      {"M": 200, "N": 131, "K": 256}, {"M": 130, "N": 72, "K": 141}]),
    ("fp8_gemm", {"block_N": 128, "block_K": 128, "threads": 256, "num_stages": 6, "_sm90_only": True},
     [{"M": 512, "N": 256, "K": 768}, {"M": 300, "N": 272, "K": 1040}, {"M": 300, "N": 131, "K": 1040},
      {"M": 130, "N": 72, "K": 141}]),
    ("fp8_gemm", {"block_N": 128, "block_K": 128, "threads": 256, "num_stages": 6, "split_k": 3, "_sm90_only": True},
     [{"M": 256, "N": 256, "K": 1536}, {"M": 300, "N": 272, "K": 1040}, {"M": 300, "N": 131, "K": 1536},
      {"M": 130, "N": 72, "K": 1411}]),
    # the 64x144 tile (128 threads: one consumer warpgroup) at N just above 128, aligned, ragged and odd
    ("fp8_gemm", {"block_M": 64, "block_N": 144, "block_K": 128, "threads": 128, "num_stages": 6, "_sm90_only": True},
     [{"M": 512, "N": 144, "K": 1024}, {"M": 300, "N": 272, "K": 1040}, {"M": 300, "N": 131, "K": 1040},
      {"M": 130, "N": 136, "K": 141}]),
    # rows that fit the block (one read) and rows longer than it (streamed twice), ragged both ways
    ("softmax", {}, [{"M": 64, "N": 1024}, {"M": 100, "N": 2048}, {"M": 37, "N": 1000}, {"M": 5, "N": 20001}]),
    # split rows (two launches through a log-sum-exp workspace): full slices, empty slices, an odd row length
    ("softmax", {"block_M": 1, "block_N": 8192, "threads": 256, "row_grid": 0, "tile_elems": 8, "split_n": 8},
     [{"M": 1, "N": 65536}, {"M": 3, "N": 20001}, {"M": 16, "N": 32768}, {"M": 5, "N": 16385}]),
    ("rmsnorm", {}, [{"M": 64, "N": 1024}, {"M": 100, "N": 2048}, {"M": 37, "N": 1000}, {"M": 5, "N": 20001}]),
    ("layernorm", {}, [{"M": 64, "N": 1024}, {"M": 100, "N": 2048}, {"M": 37, "N": 1000}, {"M": 5, "N": 20001}]),
    ("row_sum", {}, [{"M": 64, "N": 1024}, {"M": 100, "N": 300}, {"M": 33, "N": 777}]),
    ("transpose", {}, [{"M": 128, "N": 128}, {"M": 256, "N": 192}, {"M": 100, "N": 70}]),
    ("flash_attention", {}, [{"B": 1, "S": 128, "H": 2}, {"B": 2, "S": 256, "H": 2}, {"B": 1, "S": 200, "H": 3}]),
    ("flash_attention", {"causal": True}, [{"B": 1, "S": 128, "H": 2}, {"B": 1, "S": 200, "H": 3}]),
    ("flash_attention", {"dim": 128}, [{"B": 1, "S": 128, "H": 2}, {"B": 1, "S": 200, "H": 3}]),
    ("flash_attention", {"dim": 128, "causal": True}, [{"B": 1, "S": 256, "H": 1}, {"B": 2, "S": 130, "H": 2}]),
    ("flash_attention", {"dim": 128, "causal": True, "block_M": 128, "threads": 256},
     [{"B": 1, "S": 384, "H": 2}, {"B": 2, "S": 200, "H": 2}]),
    ("flash_attention", {"block_M": 128, "block_N": 128, "threads": 256},
     [{"B": 1, "S": 384, "H": 2}, {"B": 2, "S": 200, "H": 2}]),
    # sm90's FlashAttention-3 overlap of the softmax with the gemms, and Q loaded by TMA (off by default)
    ("flash_attention", {"dim": 128, "overlap_softmax": True, "tma_preload": True, "_sm90_only": True},
     [{"B": 1, "S": 384, "H": 2}, {"B": 2, "S": 250, "H": 2}]),
    ("flash_attention", {"dim": 128, "causal": True, "overlap_softmax": True, "_sm90_only": True},
     [{"B": 1, "S": 384, "H": 2}, {"B": 2, "S": 250, "H": 2}]),
    # three warpgroups of 64 query rows: a Hopper configuration (on sm80 its layouts do not tile 12 warps)
    ("flash_attention", {"block_M": 192, "block_N": 128, "threads": 384, "causal": True, "_sm90_only": True},
     [{"B": 1, "S": 576, "H": 2}, {"B": 2, "S": 250, "H": 2}]),
    # one kernel, two launches with alloc_global scratch between them (split-KV decoding, then the combine): the
    # runtime allocates the workspace and launches the stages in order (a path below samples/ names the file)
    ("examples/tilelang/gqa_decode_splitkv", {}, [{"batch": 2, "heads": 16, "heads_kv": 4, "seqlen_kv": 512},
                                                  {"batch": 1, "heads": 8, "heads_kv": 2, "seqlen_kv": 1000}]),
    # issue #27: a copy into a per-thread buffer (every thread's whole copy), and a per-thread mask over tile ops
    ("bench/cases/per_thread_copy", {}, [{"N": 3}, {"N": 1000}]),
    ("bench/cases/per_thread_mask", {}, [{"N": 3}, {"N": 257}]),
]
# (label, target, artifact kind, extra tilec flags): sm90 runs the Hopper path (TMA + wgmma, warp-specialized
# where the planner chooses it) and again with warp specialization off; sm80 PTX runs the Ampere-class path.
TARGETS = [("sm90", "sm90", "cubin", []), ("sm90-nows", "sm90", "cubin", ["--no-warp-specialize"]),
           ("sm80", "sm80", "ptx", [])]


# The element-type const each sample takes, and the types the suite runs it with.
DTYPES = {"fp8_gemm": ("in_dtype", ("f8e4m3", "f8e5m2")), "bench/cases/per_thread_copy": ("dtype", ("i32",))}
TOL.update({"f8e4m3": TOL["bf16"], "f8e5m2": TOL["bf16"], "i32": (0, 0)})  # the fp8 gemm's output is bf16


def case_name(sample: str, defines: dict, dtype: str) -> str:
    extra = "".join(f"_{k}" if v is True else f"_{k}{v}" for k, v in sorted(defines.items()))
    return f"{Path(sample).name}{extra}_{dtype}"


def source_path(sample: str) -> Path:
    """A case's .tile file: samples/NAME.tile, or a path from the repository's root."""
    return ROOT / f"{sample}.tile" if "/" in sample else ROOT / "samples" / f"{sample}.tile"


def build(out: Path, compiler: str | None = None, only: str | None = None) -> None:
    import ml_dtypes  # noqa: F401

    import tilec
    from tilec.cli.main import main as tilec_main
    from tilec.interp.run import public_kernels, random_array, run_any, shape_of

    out.mkdir(parents=True, exist_ok=True)
    index = []
    for sample, defines, shapes in CASES:
        const, dtypes = DTYPES.get(sample, ("dtype", ("f16", "bf16")))
        sm90_only = defines.get("_sm90_only", False)
        defines = {k: v for k, v in defines.items() if k != "_sm90_only"}
        for dtype in dtypes:
            name = case_name(sample, defines, dtype)
            if only and not any(name.startswith(prefix) for prefix in only.split(",")):
                continue
            defs = {**defines, const: dtype}
            dargs = [f"-D{k}={v}" for k, v in defs.items()]
            for label, target, kind, flags in TARGETS:
                if sm90_only and target != "sm90":
                    continue
                art = out / f"{name}.{label}.{kind}"
                chosen = ["--compiler", compiler] if compiler else []
                rc = tilec_main([str(source_path(sample)), "--target", target, "-o", str(art), *dargs,
                                 *flags, *chosen])
                if rc != 0:
                    raise SystemExit(f"build of {name} for {target} failed")
            result = tilec.compile(source_path(sample), defines=defs)
            kernel = public_kernels(result.module)[0]  # (a multi-launch kernel: its public signature)
            if result.module.launches:  # its C launcher too (tests/gpu/test_launches_gpu.py calls it)
                header_targets = "sm90" if sm90_only else "sm80,sm90"
                if tilec_main([str(source_path(sample)), "--target", header_targets, "-o", str(out / f"{name}.h"),
                               *dargs]) != 0:
                    raise SystemExit(f"header of {name} failed")
            for si, sizes in enumerate(shapes):
                sizes = dict(sizes)
                rng = np.random.default_rng(1000 + si)
                args = {}
                for p in kernel.params:
                    if hasattr(p, "shape"):
                        shape = shape_of(p, sizes)
                        args[p.name] = (random_array(p.dtype, shape, rng) if not p.is_output
                                        else np.zeros(shape, dtype=random_array(p.dtype, (1,), rng).dtype))
                    else:
                        args[p.name] = 1e-5 if p.name == "eps" else 0.5
                inputs = {k: v for k, v in args.items()}
                t0 = time.time()
                expected = {k: np.array(v, copy=True) for k, v in args.items()}
                run_any(result.module, kernel, expected)
                data = {}
                meta = {"params": []}
                for p in kernel.params:
                    v = inputs[p.name]
                    if isinstance(v, np.ndarray):
                        data[f"in_{p.name}"] = _raw(v)
                        if p.is_output:
                            data[f"out_{p.name}"] = _raw(expected[p.name])
                        meta["params"].append({"name": p.name, "dtype": p.dtype.name, "output": p.is_output})
                    else:
                        meta["params"].append({"name": p.name, "scalar": float(v)})
                case = f"{name}.s{si}"
                np.savez(out / f"{case}.npz", **data)
                ragged = si == len(shapes) - 1
                index.append({"case": case, "name": name, "sample": sample, "dtype": dtype, "sizes": sizes,
                              "ragged": ragged, "meta": meta, "interp_s": round(time.time() - t0, 2)})
                print(f"built {case} {sizes} (interpreter {time.time() - t0:.1f} s)", flush=True)
    (out / "index.json").write_text(json.dumps(index, indent=1))


def _raw(a: np.ndarray) -> np.ndarray:
    """ml_dtypes arrays (bf16, fp8) are stored as their bits: npz files hold only numpy's own types."""
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8) if a.dtype.name in _ML_DTYPES else a


_ML_DTYPES = {"bfloat16": "bf16", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


def _typed(a: np.ndarray, dtype: str) -> np.ndarray:
    import ml_dtypes

    names = {"bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}
    return a.view(names[dtype]) if dtype in names else a


def run(out: Path, only: str | None, targets: list[str], results_path: str | None) -> int:

    import tilec.runtime as rt

    index = json.loads((out / "index.json").read_text())
    rows = []
    failures = 0
    for entry in index:
        if only and not any(entry["case"].startswith(o) for o in only.split(",")):
            continue
        data = np.load(out / f"{entry['case']}.npz")
        for target, _, kind, _ in TARGETS:
            if target not in targets or not (out / f"{entry['name']}.{target}.{kind}").exists():
                continue
            mod = rt.load(out / f"{entry['name']}.{target}.{kind}")
            kernel = next(iter(mod.kernels.values()))
            args = []
            outputs = {}
            for p in entry["meta"]["params"]:
                if "scalar" in p:
                    args.append(p["scalar"])
                    continue
                a = _typed(np.array(data[f"in_{p['name']}"], copy=True), p["dtype"])
                if p["output"]:
                    a[...] = np.nan if a.dtype.kind == "f" or p["dtype"] == "bf16" else 0  # unwritten shows up
                    outputs[p["name"]] = a
                args.append(a)
            err = ""
            ok = True
            worst = 0.0
            try:
                kernel(*args)
                for name, got in outputs.items():
                    exp = data[f"out_{name}"]
                    if got.dtype.name in _ML_DTYPES:
                        exp = _typed(exp, _ML_DTYPES[got.dtype.name])
                    g, e = got.astype(np.float64), exp.astype(np.float64)
                    rtol, atol = TOL[entry["dtype"]]
                    close = np.isclose(g, e, rtol=rtol, atol=atol) | (np.isnan(e) & np.isnan(g))
                    worst = max(worst, float(np.nanmax(np.abs(g - e))) if g.size else 0.0)
                    if not close.all():
                        ok = False
                        bad = np.argwhere(~close)[0]
                        err = f"{name}{list(bad)}: got {g[tuple(bad)]:.5g}, want {e[tuple(bad)]:.5g}; " \
                              f"{int((~close).sum())} of {close.size} differ"
            except Exception as e:  # noqa: BLE001  (report every failure in the table)
                ok, err = False, f"{type(e).__name__}: {e}"
            failures += not ok
            rows.append({"case": entry["case"], "target": f"{target}/{kind}", "sizes": entry["sizes"],
                         "ragged": entry["ragged"], "ok": ok, "max_abs_err": worst, "error": err})
            print(f"{'PASS' if ok else 'FAIL'}  {entry['case']:<34} {target}/{kind:<6} "
                  f"{json.dumps(entry['sizes']):<44} max|err| {worst:.3g} {err}", flush=True)
    print(f"\n{len(rows) - failures} passed, {failures} failed")
    if results_path:
        Path(results_path).write_text(json.dumps(rows, indent=1))
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "run"])
    ap.add_argument("dir")
    ap.add_argument("--only", help="comma-separated case prefixes (build: only those cases; run: only those of DIR)")
    ap.add_argument("--targets", default="sm90,sm90-nows,sm80")
    ap.add_argument("--results", help="write the results as JSON here")
    ap.add_argument("--compiler", choices=["nvcc", "nvrtc"], help="build: the device toolchain (default: tilec's)")
    a = ap.parse_args()
    if a.mode == "build":
        build(Path(a.dir), a.compiler, a.only)
        return 0
    return run(Path(a.dir), a.only, a.targets.split(","), a.results or os.environ.get("TILEC_RESULTS"))


if __name__ == "__main__":
    raise SystemExit(main())
