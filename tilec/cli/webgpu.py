"""`tilec run FILE --target webgpu [--check]`: run kernels through wgpu (a GPU's Vulkan/Metal/D3D12
driver, or Mesa's lavapipe on a machine without one) and compare them with the interpreter.

FILE is a .tile source (compiled here for webgpu) or a prebuilt x.wgsl with its manifest; `--check`
needs the source.
"""

from __future__ import annotations

import tempfile
from pathlib import Path


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
    from ..runtime.wgsl import Device, LaunchError, ShaderError, WebGPUUnavailable
    from .gpu import run_and_check

    mod, result = _load(args, defines)
    rc = run_and_check(mod, result, args, sizes, (WebGPUUnavailable, ShaderError, LaunchError, ArgumentError))
    print(f"(WebGPU adapter: {Device.get().name})")
    return rc
