"""Hopper TMA tensor maps on the host: the manifest's "tensor_maps" checked against TMA's static
rules, and the cuTensorMapEncodeTiled arguments of one launch (or why TMA cannot address it).

A kernel entry with "tensor_maps" takes, after its params and sizes, one CUtensorMap (by value,
__grid_constant__) per map, encoded on the host once the tensors' addresses and sizes are known;
when a launch's tensors do not meet TMA's alignment rules, its "fallback" entry (internal, same
params and sizes, no maps) is launched instead. tilec/runtime/launch.py encodes them (cached by
address and shape) and tilec/targets/cuda/launcher.py generates the same logic in C from
tensor_map_specs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserFacingError


class ManifestError(UserFacingError, ValueError):
    """A manifest the runtime (or the C launcher) cannot serve: a compiler bug, a damaged file, or a
    format this runtime does not know."""


TENSOR_MAPS_KEY = "tensor_maps"
FALLBACK_KEY = "fallback"
INTERNAL_KEY = "internal"

# CUtensorMapDataType: TMA copies bits, so every 1-byte type is UINT8 and i16/u16 are UINT16.
TMA_DTYPES = {"bool": 0, "i8": 0, "u8": 0, "f8e4m3": 0, "f8e5m2": 0, "i16": 1, "u16": 1, "u32": 2, "i32": 3,
              "u64": 4, "i64": 5, "f16": 6, "f32": 7, "f64": 8, "bf16": 9}
ELEM_BYTES = {"bool": 1, "i8": 1, "u8": 1, "f8e4m3": 1, "f8e5m2": 1, "i16": 2, "u16": 2, "f16": 2, "bf16": 2,
              "i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8}
TMA_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
TMA_MAX_RANK = 5
TMA_MAX_DIM = 1 << 32
TMA_MAX_STRIDE = 1 << 40  # exclusive
TMA_ALIGN = 16  # global address and every global stride


@dataclass(frozen=True)
class TensorMapSpec:
    """One validated "tensor_maps" item: what is fixed by the manifest (shape sizes come at launch)."""
    index: int  # position among the entry's tensor maps
    param: dict  # the tensor's param entry
    param_index: int  # its position in params
    dtype: int  # CUtensorMapDataType
    elem_bytes: int
    box: tuple[int, ...]  # outermost first, like the shape
    swizzle: int  # CUtensorMapSwizzle
    swizzle_bytes: int

    def describe(self) -> str:
        return f"tensor map {self.index} ('{self.param['name']}', box {list(self.box)}, swizzle {self.swizzle_bytes})"


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


def tensor_map_specs(entry: dict) -> list[TensorMapSpec]:
    """The entry's tensor maps, checked against TMA's static rules (ManifestError otherwise)."""
    maps = entry.get(TENSOR_MAPS_KEY) or []
    name = entry.get("name", "?")
    by_name = {p["name"]: (i, p) for i, p in enumerate(entry["params"])}
    out = []
    for j, m in enumerate(maps):
        where = f"kernel '{name}': tensor map {j}"
        if not isinstance(m, dict) or not isinstance(m.get("tensor"), str):
            raise ManifestError(f"{where} names no tensor (expected {{\"tensor\": NAME, \"box\": [...], "
                                f"\"swizzle\": BYTES}}, got {m!r})")
        if m["tensor"] not in by_name or by_name[m["tensor"]][1]["kind"] != "tensor":
            raise ManifestError(f"{where} refers to '{m['tensor']}', which is not a tensor parameter")
        pi, p = by_name[m["tensor"]]
        if p["dtype"] not in TMA_DTYPES:
            raise ManifestError(f"{where}: TMA cannot copy '{p['name']}' of type {p['dtype']}")
        ndim = len(p["shape"])
        box = m.get("box")
        if not isinstance(box, list) or len(box) != ndim or not all(type(b) is int and 1 <= b <= 256 for b in box):
            raise ManifestError(f"{where}: box {box!r} must have one entry in 1..256 per dimension of "
                                f"'{p['name']}' ({ndim})")
        if not 1 <= ndim <= TMA_MAX_RANK:
            raise ManifestError(f"{where}: '{p['name']}' has {ndim} dimensions; TMA takes 1 to {TMA_MAX_RANK}")
        sw = m.get("swizzle", 0)
        if sw not in TMA_SWIZZLES or type(sw) is not int:
            raise ManifestError(f"{where}: swizzle {sw!r} must be 0, 32, 64 or 128 (bytes)")
        inner = box[-1] * ELEM_BYTES[p["dtype"]]
        if inner % TMA_ALIGN:
            raise ManifestError(f"{where}: the box's inner extent ({inner} bytes) must be a multiple of 16 bytes")
        if sw and inner > sw:
            raise ManifestError(f"{where}: the box's inner extent ({inner} bytes) exceeds the {sw}-byte swizzle")
        out.append(TensorMapSpec(j, p, pi, TMA_DTYPES[p["dtype"]], ELEM_BYTES[p["dtype"]], tuple(box),
                                 TMA_SWIZZLES[sw], sw))
    return out


def fallback_entry(entry: dict, entries: list[dict]) -> dict | None:
    """The entry's "fallback" kernel entry among `entries` (checked), or None when it names none."""
    fb = entry.get(FALLBACK_KEY)
    if fb is None:
        return None
    found = [e for e in entries if e["name"] == fb]
    if not found:
        raise ManifestError(f"kernel '{entry['name']}': its fallback '{fb}' is not in the manifest")
    e = found[0]
    if e.get(TENSOR_MAPS_KEY) or e["params"] != entry["params"] or e["sizes"] != entry["sizes"]:
        raise ManifestError(f"kernel '{entry['name']}': its fallback '{fb}' must take the same params and sizes "
                            "and no tensor maps")
    return e


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
