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
"""

from .arrays import ArgumentError
from .launch import Kernel
from .loader import load
from .module import ArchitectureMismatch, DriverTooOld, JitRefused, LoadedImage, ManifestError, Module
from .package import PackageError, load_package

__all__ = ["load", "Module", "Kernel", "ArgumentError", "ArchitectureMismatch", "DriverTooOld", "JitRefused",
           "LoadedImage", "ManifestError", "PackageError", "load_package"]
