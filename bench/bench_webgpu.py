"""tilec's WebGPU kernels (WGSL through wgpu) against the same kernels on CUDA, on whatever adapter is present.

    python bench/bench_webgpu.py build .artifacts/webgpu          # here: .wgsl (and .cubin if nvcc is found)
    python bench/bench_webgpu.py run .artifacts/webgpu            # on the GPU machine: time, check, print a table
    python bench/bench_webgpu.py run .artifacts/webgpu --small    # tiny shapes (lavapipe on a CPU)

Kernels: gemm f32 at 2048³ (the FMA path, two tile configurations: WebGPU has no tensor cores) and
softmax in f32 and f16 over 8192 x 4096 (128 MiB in f32: WebGPU's default maximum storage binding).
Each WGSL kernel is timed through tilec.runtime.wgsl (mean wall-clock of `iters` dispatches
submitted together, after warm-up) and checked against numpy; the same artifact built for sm90
is timed through tilec.runtime's CUDA driver (median of CUDA events) when a cubin and a CUDA GPU
are there. `run` needs numpy and wgpu only (plus the CUDA driver for the CUDA column).

On the H200 (see the device notes on headless rendering): the wheels travel with the code
(`pip download --no-deps --only-binary=:all:` for manylinux x86-64, cp312: wgpu==0.32, cffi, pycparser,
rendercanvas), and the Vulkan loader must be present: if `ldconfig -p | grep libvulkan` prints
nothing, unpack Debian's libvulkan1 .deb there (`dpkg -x`, then `ldconfig`) and, if no driver is
found, export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json.
`TILEC_WGPU_ADAPTER=nvidia` makes sure the GPU, not a CPU fallback, is used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# name -> (sample, defines, sizes, small sizes)
KERNELS = {
    "gemm_f32_64x64x16": ("gemm", ["dtype=f32", "block_M=64", "block_N=64", "block_K=16"],
                          {"M": 2048, "N": 2048, "K": 2048}, {"M": 256, "N": 256, "K": 128}),
    "gemm_f32_128x128x16": ("gemm", ["dtype=f32", "block_M=128", "block_N=128", "block_K=16"],
                            {"M": 2048, "N": 2048, "K": 2048}, {"M": 256, "N": 256, "K": 128}),
    "softmax_f32": ("softmax", ["dtype=f32"], {"M": 8192, "N": 4096}, {"M": 64, "N": 1000}),
    "softmax_f16": ("softmax", ["dtype=f16"], {"M": 8192, "N": 4096}, {"M": 64, "N": 1000}),
}


def build(out: Path) -> None:
    import shutil

    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for name, (sample, defs, _, _) in KERNELS.items():
        src = str(ROOT / "samples" / f"{sample}.tile")
        d = [f"-D{x}" for x in defs]
        if tilec_main([src, "--target", "webgpu", "-o", str(out / f"{name}.wgsl"), *d]):
            raise SystemExit(f"WGSL build of {name} failed")
        if shutil.which("nvcc") and tilec_main([src, "--target", "sm90", "-o", str(out / f"{name}.cubin"), *d]):
            raise SystemExit(f"CUDA build of {name} failed")
    print(f"built {len(KERNELS)} kernels in {out}")


def _inputs(sample: str, sizes: dict[str, int], dtype: str, rng) -> tuple[list, np.ndarray]:
    """The call's arguments and numpy's answer."""
    dt = np.float16 if dtype == "f16" else np.float32
    if sample == "gemm":
        a = rng.standard_normal((sizes["M"], sizes["K"]), dtype=np.float32).astype(dt)
        b = rng.standard_normal((sizes["K"], sizes["N"]), dtype=np.float32).astype(dt)
        return [a, b, np.zeros((sizes["M"], sizes["N"]), dt)], a.astype(np.float32) @ b.astype(np.float32)
    x = rng.standard_normal((sizes["M"], sizes["N"]), dtype=np.float32).astype(dt)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return [x, np.zeros_like(x)], e / e.sum(axis=1, keepdims=True)


def run(out: Path, small: bool, iters: int, results: str | None) -> None:
    import tilec.runtime as rt
    from tilec.runtime import wgsl

    ok, adapter = wgsl.available()
    if not ok:
        raise SystemExit(f"no WebGPU: {adapter}")
    print(f"WebGPU adapter: {adapter}")
    rng = np.random.default_rng(0)
    rows = []
    for name, (sample, defs, sizes, small_sizes) in KERNELS.items():
        sizes = small_sizes if small else sizes
        dtype = next(d.split("=")[1] for d in defs if d.startswith("dtype="))
        args, want = _inputs(sample, sizes, dtype, rng)
        kern = getattr(rt.load(out / f"{name}.wgsl"), sample)
        kern(*args)
        got = args[-1].astype(np.float64)
        tol = 2e-2 if dtype == "f16" else 1e-3
        err = float(np.max(np.abs(got - want) / (np.abs(want) + 1.0)))
        args[-1][...] = 0
        w = kern.bench(*args, warmup=3, iters=iters)
        cuda_ms = None
        cubin = out / f"{name}.cubin"
        if cubin.is_file():
            try:
                c = getattr(rt.load(cubin), sample).bench(*args, warmup=10, iters=max(iters, 20))
                cuda_ms = c["ms"]
            except Exception as e:  # noqa: BLE001  (no CUDA driver or GPU: WebGPU column only)
                print(f"  ({name}: CUDA not timed: {type(e).__name__}: {str(e).splitlines()[0]})")
        if sample == "gemm":  # rates from the shapes: 2·M·N·K FLOPs; one read and one write of the tensor
            rate = f"{2 * sizes['M'] * sizes['N'] * sizes['K'] / w['ms'] / 1e9:.3g} TFLOP/s"
        else:
            rate = f"{2 * args[0].nbytes / w['ms'] / 1e6:.3g} GB/s"
        rows.append({"kernel": name, "sizes": sizes, "webgpu_ms": w["ms"], "rate": rate, "cuda_ms": cuda_ms,
                     "max_rel_err": err, "ok": err <= tol})
    print("\n| kernel | sizes | WebGPU ms | WebGPU rate | CUDA ms (same kernel, sm90) | WebGPU / CUDA | check |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        shown = ",".join(f"{k}={v}" for k, v in r["sizes"].items())
        cuda = f"{r['cuda_ms']:.3f}" if r["cuda_ms"] else "-"
        ratio = f"{r['webgpu_ms'] / r['cuda_ms']:.2f}x" if r["cuda_ms"] else "-"
        check = "ok" if r["ok"] else f"FAIL ({r['max_rel_err']:.2g})"
        print(f"| {r['kernel']} | {shown} | {r['webgpu_ms']:.3f} | {r['rate']} | {cuda} | {ratio} | {check} |")
    if results:
        Path(results).write_text(json.dumps({"adapter": adapter, "rows": rows}, indent=2) + "\n")
    if not all(r["ok"] for r in rows):
        raise SystemExit(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out", type=Path)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--small", action="store_true", help="tiny shapes, for a CPU adapter (lavapipe)")
    r.add_argument("--iters", type=int, default=20)
    r.add_argument("--results", help="also write the rows as JSON here")
    args = p.parse_args()
    if args.cmd == "build":
        build(args.out)
    else:
        run(args.out, args.small, args.iters, args.results)


if __name__ == "__main__":
    main()
