"""`tilec.load(path, target="cpu")`: a .tile file's kernels run by the reference interpreter, called as every
runtime's kernels are (tilec/runtime/signature.py): parameters in signature order, outputs optional (allocated,
zeroed) and returned in signature order. numpy arrays in the declared dtypes (bf16 and fp8 through ml_dtypes)."""

from __future__ import annotations

import numpy as np

from ..ir import tile as T
from ..runtime.signature import complete_arguments, returned_outputs
from .run import public_kernels, run_any, shape_of
from .tile_interp import storage_dtype


def _param(p) -> dict:
    """A Tile IR parameter as the manifest describes it (what the calling convention reads)."""
    if isinstance(p, T.Buffer):
        dims = [d.value if isinstance(d, T.Const) else d.name if isinstance(d, T.Var) else str(d) for d in p.shape]
        return {"name": p.name, "kind": "tensor", "dtype": str(p.dtype), "shape": dims, "output": p.is_output,
                "buffer": p}
    return {"name": p.name, "kind": "scalar", "dtype": str(p.dtype)}


class InterpKernel:
    def __init__(self, module: T.Module, unit):
        self.module, self.unit, self.name = module, unit, unit.name
        self.params = [_param(p) for p in unit.params]

    def __repr__(self) -> str:
        return f"<tilec interpreted kernel {self.name}({', '.join(p['name'] for p in self.params)})>"

    def __call__(self, *args):
        def allocate(param: dict, sizes: dict[str, int]) -> np.ndarray:
            buffer = param["buffer"]
            return np.zeros(shape_of(buffer, sizes), dtype=storage_dtype(buffer.dtype))

        args = complete_arguments(self.name, self.params, args, allocate)
        run_any(self.module, self.unit, {p["name"]: a for p, a in zip(self.params, args, strict=True)})
        return returned_outputs(self.params, args)


class InterpModule:
    """The public kernels of a checked module, as attributes (mod.softmax) and in `kernels`."""

    def __init__(self, module: T.Module, name: str):
        self.name = name
        self.kernels = {k.name: InterpKernel(module, k) for k in public_kernels(module)}

    def __getattr__(self, item: str) -> InterpKernel:
        kernels = self.__dict__.get("kernels", {})
        if item in kernels:
            return kernels[item]
        raise AttributeError(f"{self.name} has no kernel '{item}' (it has: {', '.join(kernels) or 'none'})")
