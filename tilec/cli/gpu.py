"""`tilec run --target T [--check] [--rtol R --atol A] [--reference MOD:FN]` and `tilec bench`.

Both take a .tile file (compiled here for --target, default sm90, into the artifact its back end's runtime
loads: a cubin, WGSL, ...) or a prebuilt artifact with its manifest — the latter needs only numpy and the
device's driver (the CUDA driver, wgpu), not the compiler. `--check` compares every output with the
reference interpreter (which needs the .tile source) or, with `--reference`, with a Python function given the
kernel's inputs as numpy arrays; tolerances default by dtype (tilec.testing.compare.DEFAULT_TOLERANCE).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from ..diagnostics import CompileError, Diagnostic

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


def _require_device(args) -> None:
    """Before compiling a .tile file for a target whose artifacts a runtime loads: that runtime's device (the CUDA
    driver and a GPU; tilec.runtime.loader.require_device), so that a machine without one hears it at once, not
    after the build (tens of seconds for a large kernel)."""
    backend = _backend(args) if Path(args.file).suffix == ".tile" else None
    if backend is not None and backend.loader:
        from ..runtime.loader import require_device

        require_device(backend.loader)


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

    from ..runtime.arrays import NP_NAMES as _NP_NAMES
    from ..runtime.formulas import evaluate

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
    _require_device(args)
    mod, result = _load(args)
    backend = _backend(args)
    from ..runtime.loader import device_note, launch_errors

    loader = backend.loader if backend else ""
    rc = run_and_check(mod, result, args, sizes, launch_errors(loader))
    note = device_note(loader)
    if note:
        print(note)
    return rc


def run_and_check(mod, result, args, sizes, launch_errors: tuple = ()) -> int:
    """Run every kernel of a loaded artifact on random inputs, print its outputs' summary and, with
    --check, compare them with the reference interpreter or --reference (any back end's runtime module)."""
    from ..manifest import launch_checks
    from ..runtime.formulas import complete_sizes
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
        try:  # sizes that the kernel's contracts derive from those given; none guessed
            k_sizes = complete_sizes(name, list(kernel.entry["sizes"]), launch_checks(kernel.entry), sizes, 256)
        except ValueError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        call = _random_args(kernel.entry, k_sizes, args.seed)
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
    from ..interp.run import public_kernels, run_any

    k = next(k for k in public_kernels(result.module) if k.name == name)
    named = {p["name"]: v for p, v in zip(params, inputs_and_outputs, strict=True)}
    run_any(result.module, k, named)
    return {n: named[n] for n in out_names}


def cmd_bench(args, sizes) -> int:
    from .progress import Progress

    _require_device(args)
    mod, _ = _load(args)
    print(f"{'kernel':<22} {'sizes':<32} {'ms':>9} {'TFLOP/s':>9} {'GB/s':>9} {'roofline':>9}")
    # a bar on a terminal only: elsewhere the table's rows say how far it got
    progress = Progress(getattr(args, "quiet", False) or not sys.stderr.isatty(), prefix="tilec bench")
    try:
        for i, (name, kernel) in enumerate(mod.kernels.items()):
            progress("kernels timed", i, len(mod.kernels))
            _bench_one(args, sizes, name, kernel)
        progress("kernels timed", len(mod.kernels), len(mod.kernels))
    finally:
        progress.close()
    sys.stdout.flush()
    return 0


def _bench_one(args, sizes, name: str, kernel) -> None:
    """Time one kernel and print its row of the table."""
    call = _random_args(kernel.entry, sizes, args.seed)
    r = kernel.bench(*call, warmup=args.warmup, iters=args.iters)
    frac = max(r["tflops"] / PEAK["tflops"], r["gbps"] / PEAK["gbps"])
    shown = ",".join(f"{k}={v}" for k, v in kernel.sizes_of(call).items())
    print(f"{name:<22} {shown:<32} {r['ms']:9.4f} {r['tflops']:9.1f} {r['gbps']:9.1f} {frac:9.1%}", flush=True)
