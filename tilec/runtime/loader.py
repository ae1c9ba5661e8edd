"""`tilec.runtime.load`: open an artifact with the runtime its manifest names.

The manifest's "loader" (tilec/manifest.py) picks the module: "cuda" (tilec.runtime.module, the CUDA
driver) or "wgsl" (tilec.runtime.wgsl, wgpu). This module sits above both, so neither imports the other.
A fatbin whose architectures launch differently carries per-architecture kernel entries; the GPU's compute
capability picks them here.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..manifest import ARCH_KERNELS_KEY, ManifestError, for_device, loader_name


def launch_errors(loader: str) -> tuple[type[BaseException], ...]:
    """The exceptions of the runtime `loader` names that `tilec run` reports as plain errors (not internal ones): the
    device, the shader or the arguments refused. Imports that runtime only for a loader that has such errors."""
    if loader == "wgsl":
        from .module import ArgumentError
        from .wgsl import LaunchError, ShaderError, WebGPUUnavailable

        return (WebGPUUnavailable, ShaderError, LaunchError, ArgumentError)
    return ()


def device_note(loader: str) -> str:
    """A line `tilec run` prints after running on the device of the runtime `loader` names ("" for none)."""
    if loader == "wgsl":
        from .wgsl import Device

        return f"(WebGPU adapter: {Device.get().name})"
    return ""


def require_device(loader: str) -> None:
    """Raise the runtime's own user-facing error when the device the runtime `loader` names is missing (the CUDA
    driver, or a GPU): `tilec run` asks before compiling, so that a machine without one hears it at once."""
    if loader == "cuda":
        from .cuda_driver import Driver

        Driver.get()  # CudaError without a driver or a GPU


def load(path: str | Path, manifest: str | Path | None = None, *, no_jit: bool | None = None):
    """The Module of the artifact at `path` (its manifest beside it, or at `manifest`). `no_jit`: the no-JIT
    guarantee (default: the environment's TILEC_NO_JIT): loading a PTX image the driver would compile raises
    JitRefused instead."""
    path = Path(path)
    mpath = Path(manifest) if manifest else Path(str(path) + ".json")
    if not mpath.is_file():
        raise FileNotFoundError(f"no manifest for {path} (expected {mpath})")
    try:
        meta = json.loads(mpath.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise ManifestError(f"{mpath}: not a tilec manifest (invalid JSON: {e})") from None
    from .module import check_manifest

    check_manifest(meta, str(mpath))
    loader = loader_name(meta)
    if loader not in ("cuda", "wgsl"):
        raise ManifestError(f"{path}: tilec.runtime cannot load {meta.get('backend', loader)} artifacts (its manifest "
                            f"names the loader '{loader}')")
    if loader == "wgsl":  # WebGPU: the artifact is WGSL source, run through wgpu
        from .wgsl import WgslModule

        return WgslModule(path.read_text(), meta, str(path))
    from .module import Module

    if meta.get(ARCH_KERNELS_KEY):
        from .cuda_driver import Driver

        major, minor = Driver.get().compute_capability()
        meta = for_device(meta, major * 10 + minor)
    return Module(path.read_bytes(), meta, str(path), no_jit=no_jit)
