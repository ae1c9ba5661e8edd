"""`tilec run --target T [--check]` and `tilec bench`: run kernels on a device.

Both take a .tile file (compiled here for --target, default sm90, into the artifact its back end's runtime
loads: a cubin, WGSL, ...) or a prebuilt artifact with its manifest — the latter needs only numpy and the
device's driver (the CUDA driver, wgpu), not the compiler. `--check` compares every output with the
reference interpreter and so needs the .tile source.
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


def _backend(args):
    """The Backend of --target (default sm90), or None when the target is unknown or has no back end (loading a
    prebuilt artifact needs none; compiling reports it)."""
    from ..targets.registry import DEFAULT_TARGET, UnknownTarget, backend_available, get_backend, lookup

    try:
        t = lookup((args.target or DEFAULT_TARGET).split(",")[0])
    except UnknownTarget:
        return None
    return get_backend(t.backend) if backend_available(t.backend) else None


def _load(args):
    """(runtime module, compile result or None) for a .tile file (built here for --target, default sm90) or an
    artifact path."""
    import tilec.runtime as rt

    path = Path(args.file)
    if path.suffix != ".tile":
        return rt.load(path), None
    from .. import compile as tilec_compile
    from .common import compile_options, print_diagnostics

    options = compile_options(args)
    backend = _backend(args)
    if backend is not None and not backend.run_kind:
        raise CompileError([Diagnostic("error", f"tilec.runtime cannot run {backend.name} artifacts yet; build one "
                                                f"with -o NAME{backend.output_kinds[backend.default_kind]} instead")])
    kind = backend.run_kind if backend is not None else "cubin"
    out = Path(tempfile.mkdtemp(prefix="tilec-run-")) / f"{path.stem}{backend.output_kinds[kind] if backend else ''}"
    artifact = tilec_compile(args.file, options=options, emit=kind, output_name=out.name,
                             on_compiled=lambda r: print_diagnostics(r.diagnostics, r.sources, args))
    out.write_bytes(artifact.data)
    Path(str(out) + ".json").write_bytes(artifact.manifest)
    # the interpreter is the oracle for --check: it runs the checked Tile IR, before any target pass
    result = tilec_compile(args.file, options=options.replace(targets=()))
    return rt.load(out), result


def _random_args(entry: dict, sizes: dict[str, int], seed: int) -> list:
    import ml_dtypes  # noqa: F401  (bfloat16 / float8 numpy dtypes)

    from ..runtime.formulas import evaluate
    from ..runtime.module import _NP_NAMES

    rng = np.random.default_rng(seed)
    args = []
    # a dimension is an int, a size's name, or a formula of the sizes (ceildiv(N, 128))
    full = {d: sizes.get(d, 256) for p in entry["params"] if p["kind"] == "tensor" for d in p["shape"]
            if isinstance(d, str) and d.isidentifier()}
    for p in entry["params"]:
        if p["kind"] == "scalar":
            if p["dtype"] in ("f16", "bf16", "f32", "f64"):
                args.append(1e-5 if p["name"] == "eps" else 0.5)
            else:
                args.append(int(rng.integers(1, 8)))
            continue
        shape = tuple(d if isinstance(d, int) else full[d] if d in full else evaluate(d, full) for d in p["shape"])
        dt = np.dtype(_NP_NAMES[p["dtype"]])
        if p["output"]:
            args.append(np.zeros(shape, dtype=dt))
        elif dt.kind in "iub":
            args.append(rng.integers(-8 if dt.kind == "i" else 0, 8, shape).astype(dt))
        else:
            args.append(rng.standard_normal(shape, dtype=np.float32).astype(dt))
    return args


def cmd_run_gpu(args, sizes) -> int:
    """`tilec run --target T`: build for T (or load an artifact), run on T's device, --check against the
    interpreter."""
    mod, result = _load(args)
    backend = _backend(args)
    rc = run_and_check(mod, result, args, sizes, backend.runtime_errors() if backend else ())
    note = backend.device_note() if backend else ""
    if note:
        print(note)
    return rc


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


def cmd_bench(args, sizes) -> int:
    mod, _ = _load(args)
    print(f"{'kernel':<22} {'sizes':<32} {'ms':>9} {'TFLOP/s':>9} {'GB/s':>9} {'roofline':>9}")
    for name, kernel in mod.kernels.items():
        call = _random_args(kernel.entry, sizes, args.seed)
        r = kernel.bench(*call, warmup=args.warmup, iters=args.iters)
        frac = max(r["tflops"] / PEAK["tflops"], r["gbps"] / PEAK["gbps"])
        shown = ",".join(f"{k}={v}" for k, v in kernel.sizes_of(call).items())
        print(f"{name:<22} {shown:<32} {r['ms']:9.4f} {r['tflops']:9.1f} {r['gbps']:9.1f} {frac:9.1%}")
    sys.stdout.flush()
    return 0
