"""`tilec run --device cuda [--check] [--rtol R --atol A] [--reference MOD:FN]` and `tilec bench`.

Both take a .tile file (compiled here for --target, default sm90) or a prebuilt artifact
(x.cubin / x.ptx / x.fatbin with its manifest) — the latter needs only numpy and the CUDA
driver, not the compiler. `--check` compares every output with the reference interpreter (which
needs the .tile source) or, with `--reference`, with a Python function given the kernel's inputs
as numpy arrays; tolerances default by dtype (tilec.testing.compare.DEFAULT_TOLERANCE).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from ..diagnostics import CompileError, Diagnostic

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
    --check, compare them with the reference interpreter or --reference (any back end's runtime module)."""
    from ..testing.compare import compare

    reference = getattr(args, "reference", None)
    if args.check and result is None and not reference:
        raise CompileError([Diagnostic("error", "--check compares with the interpreter and needs the .tile source "
                                                "(or give --reference MODULE:FUNCTION)")])
    ref_fn = _reference_function(reference) if reference and args.check else None
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
        if not args.check:
            continue
        wanted = _reference_outputs(kernel, expected, ref_fn, result, name)
        for p, a in outs:
            c = compare(a, wanted[p["name"]], getattr(args, "rtol", None), getattr(args, "atol", None),
                        name=f"{name}.{p['name']}")
            failures += not c.ok
            source = "--reference" if ref_fn else "the interpreter"
            print(f"  check {p['name']} against {source}: " + c.verdict().replace("\n", "\n  "))
    return 1 if failures else 0


def _reference_function(spec: str):
    """MODULE:FUNCTION or path/to/file.py:FUNCTION -> the callable (a CompileError if not found)."""
    import importlib
    import importlib.util

    where, _, fn_name = spec.rpartition(":")
    if not where or not fn_name:
        raise CompileError([Diagnostic("error", f"--reference {spec}: expected MODULE:FUNCTION or FILE.py:FUNCTION")])
    try:
        if where.endswith(".py"):
            spec_ = importlib.util.spec_from_file_location(Path(where).stem, where)
            if spec_ is None or spec_.loader is None:
                raise ImportError(f"cannot load {where}")
            module = importlib.util.module_from_spec(spec_)
            spec_.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        fn = getattr(module, fn_name)
    except (ImportError, AttributeError, OSError) as e:
        raise CompileError([Diagnostic("error", f"--reference {spec}: {e}")]) from None
    if not callable(fn):
        raise CompileError([Diagnostic("error", f"--reference {spec}: {fn_name} is not callable")])
    return fn


def _reference_outputs(kernel, inputs_and_outputs: list, ref_fn, result, name: str) -> dict:
    """{output name: expected array}: from the reference function called with the kernel's inputs, or
    from the interpreter run on a copy of every argument."""
    params = kernel.entry["params"]
    out_names = [p["name"] for p in params if p["kind"] == "tensor" and p.get("output")]
    if ref_fn is not None:
        inputs = [a for p, a in zip(params, inputs_and_outputs, strict=True)
                  if not (p["kind"] == "tensor" and p.get("output"))]
        got = ref_fn(*inputs)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        if len(got) != len(out_names):
            raise CompileError([Diagnostic("error", f"--reference returned {len(got)} value(s) for kernel '{name}', "
                                                    f"which has {len(out_names)} output(s) ({', '.join(out_names)})")])
        return dict(zip(out_names, got, strict=True))
    from ..interp import run_kernel

    k = next(k for k in result.module.kernels if k.name == name)
    named = {p["name"]: v for p, v in zip(params, inputs_and_outputs, strict=True)}
    run_kernel(k, named)
    return {n: named[n] for n in out_names}


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
