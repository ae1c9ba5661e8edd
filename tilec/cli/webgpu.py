"""`tilec run FILE --target webgpu [--check]`: run kernels through wgpu (a GPU's Vulkan/Metal/D3D12
driver, or Mesa's lavapipe on a machine without one) and compare them with the interpreter.

FILE is a .tile source (compiled here for webgpu) or a prebuilt x.wgsl with its manifest; `--check`
needs the source.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ..diagnostics import CompileError, Diagnostic


def _load(args, defines):
    """(runtime module, compile result or None)."""
    import tilec.runtime as rt

    path = Path(args.file)
    if path.suffix != ".tile":
        return rt.load(path), None
    from .. import compile as tilec_compile
    from ..artifacts import dumps, manifest

    result = tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel,
                           target="webgpu")
    from .main import _print_diagnostics

    _print_diagnostics(result.diagnostics, result.sources, args)
    out = Path(tempfile.mkdtemp(prefix="tilec-run-")) / f"{path.stem}.wgsl"
    out.write_text(result.source)
    Path(str(out) + ".json").write_text(dumps(manifest(result, "wgsl", ["wgsl"], "none", {}, out.name)))
    return rt.load(out), result


def cmd_run_webgpu(args, defines, sizes) -> int:
    from ..runtime.module import ArgumentError
    from ..runtime.wgsl import LaunchError, ShaderError, WebGPUUnavailable
    from .gpu import TOLERANCE, _random_args

    mod, result = _load(args, defines)
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
        for i, p in enumerate(kernel.entry["params"]):  # integer scalars: a small non-zero value, not 0.5
            if p["kind"] == "scalar" and p["dtype"] not in ("f16", "bf16", "f32", "f64"):
                call[i] = 3
        expected = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in call]
        try:
            kernel(*call)
        except (WebGPUUnavailable, ShaderError, LaunchError, ArgumentError) as e:
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
    from ..runtime.wgsl import Device

    print(f"(WebGPU adapter: {Device.get().name})")
    return 1 if failures else 0
