"""Hopper TMA tensor maps on the host: the manifest's "tensor_maps" checked against TMA's static
rules, and the cuTensorMapEncodeTiled arguments of one launch (or why TMA cannot address it).

A kernel entry with "tensor_maps" takes, after its params and sizes, one CUtensorMap (by value,
__grid_constant__) per map, encoded on the host once the tensors' addresses and sizes are known;
when a launch's tensors do not meet TMA's alignment rules, its "fallback" entry (internal, same
params and sizes, no maps) is launched instead. tilec/runtime/launch.py encodes them (cached by
address and shape) and tilec/targets/c_launcher/header.py generates the same logic in C from
tensor_map_specs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..manifest import (  # noqa: F401  (the schema: shared with the C launcher; re-exported for the runtime)
    ELEM_BYTES,
    FALLBACK_KEY,
    INTERNAL_KEY,
    TENSOR_MAPS_KEY,
    TMA_ALIGN,
    TMA_DTYPES,
    TMA_MAX_DIM,
    TMA_MAX_RANK,
    TMA_MAX_STRIDE,
    TMA_SWIZZLES,
    ManifestError,
    TensorMapSpec,
    direct_stores_entry,
    fallback_entry,
    tensor_map_specs,
)


@dataclass(frozen=True)
class TensorMapArgs:
    """The arguments of cuTensorMapEncodeTiled, driver order (innermost dimension first)."""
    dtype: int
    rank: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]  # rank - 1 byte strides
    box: tuple[int, ...]
    swizzle: int


@dataclass(frozen=True)
class NoTma:
    """This launch's tensor cannot be described to TMA (the fallback kernel must run): why."""
    reason: str


def tensor_map_args(spec: TensorMapSpec | dict, param: dict | None, shape, ptr: int) -> TensorMapArgs | NoTma:
    """cuTensorMapEncodeTiled's arguments for a C-contiguous tensor of `shape` (outermost first) at
    device address `ptr`, or NoTma when TMA cannot address it (then the fallback kernel runs).
    `spec` is a TensorMapSpec, or a manifest "tensor_maps" item with the tensor's `param` entry."""
    if not isinstance(spec, TensorMapSpec):
        spec = tensor_map_specs({"name": "?", "params": [param], TENSOR_MAPS_KEY: [spec]})[0]
    shape = [int(d) for d in shape]
    rank = len(shape)
    if rank != len(spec.box):
        raise ManifestError(f"{spec.describe()}: shape {shape} does not match the box")
    if ptr % TMA_ALIGN:
        return NoTma(f"its address 0x{ptr:x} is not 16-byte aligned")
    if any(d < 1 or d > TMA_MAX_DIM for d in shape):
        return NoTma(f"its shape {shape} has a dimension outside 1..2^32")
    dims = tuple(reversed(shape))
    strides = []
    stride = spec.elem_bytes
    for d in dims[:-1]:
        stride *= d
        if stride % TMA_ALIGN or stride >= TMA_MAX_STRIDE:
            return NoTma(f"a row stride of {stride} bytes (shape {shape}) is not a multiple of 16 below 2^40")
        strides.append(stride)
    return TensorMapArgs(spec.dtype, rank, dims, tuple(strides), tuple(reversed(spec.box)), spec.swizzle)
