"""tilec.runtime — load tilec artifacts and launch them, with numpy and the CUDA driver only.

    import tilec.runtime as rt
    mod = rt.load("gemm.cubin")            # reads gemm.cubin.json beside it
    mod.gemm(A, B, C)                       # numpy, torch or cupy arrays; sizes taken from them

No compiler, lark or TVM is imported here, so this works on a machine where only the artifacts
and numpy are installed. A WGSL artifact (`rt.load("softmax.wgsl")`, manifest backend "wgsl") runs
through wgpu instead of the CUDA driver (tilec/runtime/wgsl.py).
"""

from .loader import load
from .module import ArchitectureMismatch, ArgumentError, Kernel, Module

__all__ = ["load", "Module", "Kernel", "ArgumentError", "ArchitectureMismatch"]
