"""`tilec run --device cuda [--check]` and `tilec bench`: run kernels on the GPU.

Both take a .tile file (compiled here for --target, default sm90) or a prebuilt artifact
(x.cubin / x.ptx / x.fatbin with its manifest) — the latter needs only numpy and the CUDA
driver, not the compiler. `--check` compares every output with the reference interpreter and
so needs the .tile source.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from ..diagnostics import CompileError, Diagnostic

TOLERANCE = {"f16": (1e-2, 1e-2), "bf16": (2e-2, 3e-2), "f32": (1e-4, 1e-4), "f64": (1e-8, 1e-8),
             "f8e4m3": (0.125, 0.125), "f8e5m2": (0.25, 0.25)}
PEAK = {"tflops": 989.0, "gbps": 4800.0}  # H200: dense f16/bf16 tensor-core peak, HBM3e bandwidth


def _load(args, defines):
    """(runtime module, compile result or None) for a .tile file or an artifact path."""
    import tilec.runtime as rt

    path = Path(args.file)
    if path.suffix != ".tile":
        return rt.load(path), None
    from .. import compile as tilec_compile
    from .build import run_build

    tmp = Path(tempfile.mkdtemp(prefix="tilec-run-"))
    out = tmp / f"{path.stem}.cubin"
    build_args = _BuildArgs(args.file, str(out), args.target or "sm90", args.include_dirs, args.kernel,
                            getattr(args, "disable", None))
    run_build(build_args, defines)
    result = tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel)
    return rt.load(out), result


class _BuildArgs:
    def __init__(self, file, output, target, include_dirs, kernel, disable=None):
        self.file, self.output, self.target = file, output, target
        self.include_dirs, self.kernel, self.disable = include_dirs, kernel, disable
        self.emit = self.manifest = self.keep = None
        self.lineinfo = self.G = self.dryrun = self.resource_usage = False
        self.compiler = "nvcc"
        self.no_color, self.debug = True, False


def _random_args(entry: dict, sizes: dict[str, int], seed: int) -> list:
    import ml_dtypes  # noqa: F401  (bfloat16 / float8 numpy dtypes)

    from ..runtime.arrays import NP_NAMES as _NP_NAMES

    rng = np.random.default_rng(seed)
    args = []
    for p in entry["params"]:
        if p["kind"] == "scalar":
            if p["dtype"] in ("f16", "bf16", "f32", "f64"):
                args.append(1e-5 if p["name"] == "eps" else 0.5)
            else:
                args.append(int(rng.integers(1, 8)))
            continue
        shape = tuple(d if isinstance(d, int) else sizes.get(d, 256) for d in p["shape"])
        dt = np.dtype(_NP_NAMES[p["dtype"]])
        if p["output"]:
            args.append(np.zeros(shape, dtype=dt))
        elif dt.kind in "iub":
            args.append(rng.integers(-8 if dt.kind == "i" else 0, 8, shape).astype(dt))
        else:
            args.append(rng.standard_normal(shape, dtype=np.float32).astype(dt))
    return args


def cmd_run_gpu(args, defines, sizes) -> int:
    mod, result = _load(args, defines)
    return run_and_check(mod, result, args, sizes)


def run_and_check(mod, result, args, sizes, launch_errors: tuple = ()) -> int:
    """Run every kernel of a loaded artifact on random inputs, print its outputs' summary and, with
    --check, compare them with the reference interpreter (any back end's runtime module)."""
    if args.check and result is None:
        raise CompileError([Diagnostic("error", "--check compares with the interpreter and needs the .tile source")])
    failures = 0
    for name, kernel in mod.kernels.items():
        unknown = set(sizes) - set(kernel.entry["sizes"])
        if unknown:
            raise CompileError([Diagnostic("error", f"kernel '{name}' has no runtime size "
                                                    f"{', '.join(sorted(unknown))} (its sizes: "
                                                    f"{', '.join(kernel.entry['sizes']) or 'none'})")])
        call = _random_args(kernel.entry, sizes, args.seed)
        expected = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in call]
        try:
            kernel(*call)
        except launch_errors as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        outs = [(p, a) for p, a in zip(kernel.entry["params"], call, strict=True) if p.get("output")]
        for p, a in outs:
            f = a.astype(np.float64)
            print(f"{name}.{p['name']}: {p['dtype']}{list(a.shape)}  min {np.nanmin(f):.6g}  max {np.nanmax(f):.6g}  "
                  f"mean {np.nanmean(f):.6g}")
        if args.check:
            from ..interp import run_kernel

            k = next(k for k in result.module.kernels if k.name == name)
            named = {p["name"]: v for p, v in zip(kernel.entry["params"], expected, strict=True)}
            run_kernel(k, named)
            for p, a in outs:
                rtol, atol = TOLERANCE.get(p["dtype"], (0, 0))
                got, want = a.astype(np.float64), named[p["name"]].astype(np.float64)
                close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
                err = float(np.nanmax(np.abs(got - want))) if got.size else 0.0
                status = "PASS" if close.all() else "FAIL"
                failures += status == "FAIL"
                print(f"  check {p['name']} against the interpreter: {status} (max |err| {err:.3g}, rtol {rtol}, "
                      f"atol {atol}, {int((~close).sum())} of {close.size} outside)")
    return 1 if failures else 0


def cmd_bench(args, defines, sizes) -> int:
    mod, _ = _load(args, defines)
    print(f"{'kernel':<22} {'sizes':<32} {'ms':>9} {'TFLOP/s':>9} {'GB/s':>9} {'roofline':>9}")
    for name, kernel in mod.kernels.items():
        call = _random_args(kernel.entry, sizes, args.seed)
        r = kernel.bench(*call, warmup=args.warmup, iters=args.iters)
        frac = max(r["tflops"] / PEAK["tflops"], r["gbps"] / PEAK["gbps"])
        shown = ",".join(f"{k}={v}" for k, v in kernel.sizes_of(call).items())
        print(f"{name:<22} {shown:<32} {r['ms']:9.4f} {r['tflops']:9.1f} {r['gbps']:9.1f} {frac:9.1%}")
    sys.stdout.flush()
    return 0
