"""The calling convention every runtime shares (the CUDA driver's Kernel, WebGPU's, the interpreter's): a kernel
takes its parameters in signature order; its outputs may be left out, and are then allocated (shapes from the
inputs' sizes); the call returns the outputs in signature order: the array when there is one, a tuple when there
are several, None when there are none. Parameters are the manifest's ({"name", "kind", "dtype", "shape",
"output"}). numpy only.

tilec.runtime.launch.Kernel (CUDA) has its own copy of this logic on its launch fast path, for torch, cupy and
DLPack arrays; this module is the convention's statement for the others, and tests/test_calling_convention.py
holds the runtimes to it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .arrays import ArgumentError
from .formulas import evaluate


def output_shape(param: dict, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else sizes[d] if d.isidentifier() else evaluate(d, sizes)
                 for d in param["shape"])


def complete_arguments(name: str, params: Sequence[dict], args: Sequence, allocate: Callable[[dict, dict], object]
                       ) -> tuple:
    """`args` when every parameter is given; with the inputs alone, the full list with each output made by
    allocate(param, sizes), `sizes` read from the inputs' shapes; ArgumentError for any other count."""
    if len(args) == len(params):
        return tuple(args)
    inputs = [i for i, p in enumerate(params) if not p.get("output")]
    outputs = [i for i, p in enumerate(params) if p.get("output")]
    if not outputs or len(args) != len(inputs):
        names = ", ".join(p["name"] for p in params)
        ins = ", ".join(params[i]["name"] for i in inputs)
        raise ArgumentError(f"{name} takes {len(params)} argument(s) ({names})"
                            + (f", or {len(inputs)} without its outputs ({ins})" if outputs else "")
                            + f", got {len(args)}")
    full: list = [None] * len(params)
    sizes: dict[str, int] = {}
    for i, a in zip(inputs, args, strict=True):
        full[i] = a
        p = params[i]
        if p["kind"] != "tensor":
            continue
        shape = tuple(getattr(a, "shape", ()))
        if len(shape) != len(p["shape"]):
            raise ArgumentError(f"{name}: '{p['name']}' has {len(shape)} dimension(s), expected {len(p['shape'])} "
                                f"({p['shape']})")
        for want, got in zip(p["shape"], shape, strict=True):
            if isinstance(want, str) and want.isidentifier():
                sizes.setdefault(want, int(got))
    for i in outputs:
        missing = [d for d in params[i]["shape"] if isinstance(d, str) and d.isidentifier() and d not in sizes]
        if missing:
            raise ArgumentError(f"{name}: output '{params[i]['name']}' needs the size {missing[0]}, which no input "
                                "gives; pass the output")
        full[i] = allocate(params[i], sizes)
    return tuple(full)


def returned_outputs(params: Sequence[dict], args: Sequence):
    """What a call returns: its outputs in signature order (one: the array; several: a tuple; none: None)."""
    outs = [a for p, a in zip(params, args, strict=True) if p.get("output")]
    if len(outs) == 1:
        return outs[0]
    return tuple(outs) if outs else None


def allocate_numpy(param: dict, sizes: dict[str, int]):
    import numpy as np

    from .arrays import NP_NAMES

    if param["dtype"] in ("bf16", "f8e4m3", "f8e5m2"):
        import ml_dtypes  # noqa: F401  (registers these dtypes with numpy)
    return np.zeros(output_shape(param, sizes), dtype=NP_NAMES[param["dtype"]])
