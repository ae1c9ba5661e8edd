"""tilec.runtime — load tilec artifacts and launch them, with numpy and the CUDA driver only.

    import tilec.runtime as rt
    mod = rt.load("gemm.cubin")            # reads gemm.cubin.json beside it
    C = mod.gemm(A, B, C)                   # torch / cupy / DLPack device arrays: asynchronous, on the
                                            # caller's current stream; numpy arrays: synchronous
    C = mod.gemm(A, B)                      # outputs may be left out (allocated like A)

No compiler, lark or TVM is imported here, so this works on a machine where only the artifacts
and numpy are installed. A WGSL artifact (`rt.load("softmax.wgsl")`, manifest backend "wgsl") runs
through wgpu instead of the CUDA driver (tilec/runtime/wgsl.py). docs/deploy.md describes the
calling convention, streams, CUDA graphs and the torch integration (tilec.torch).

The names below are imported on first use (PEP 562), so that importing one light submodule
(tilec.runtime.background, tilec.runtime.nojit: what `tilec.load(..., background=True)` needs before it
returns) does not import the launcher.
"""

from __future__ import annotations

import importlib

_EXPORTS = {"ArgumentError": "arrays", "Kernel": "launch", "load": "loader", "ArchitectureMismatch": "module",
            "DriverTooOld": "module", "JitRefused": "module", "LoadedImage": "module", "ManifestError": "module",
            "Module": "module", "PackageError": "package", "load_package": "package"}

__all__ = ["load", "Module", "Kernel", "ArgumentError", "ArchitectureMismatch", "DriverTooOld", "JitRefused",
           "LoadedImage", "ManifestError", "PackageError", "load_package"]


def __getattr__(name: str):
    where = _EXPORTS.get(name)
    if where is None:  # a submodule not imported yet (tilec.runtime.module, ...)
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
