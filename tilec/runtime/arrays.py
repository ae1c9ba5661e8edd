"""What tilec.runtime accepts as a tensor argument, and which stream a launch goes to.

Every array type is read by an *adapter*, picked once per Python type and cached, whose view
`(array, param, explicit stream or None)` returns `(device pointer, shape, device ordinal)` after
checking dtype, device and contiguity — or a host
pointer of None for a numpy array, which the runtime stages through device memory. Adapters read
the producer's own attributes (torch: `data_ptr()`, cupy: `data.ptr`), so no producer library is
imported here; torch and cupy are looked up in sys.modules, where an argument of theirs put them.

Streams (docs/deploy.md, "tilec.runtime"): an explicit `stream=` wins; otherwise a launch goes to
the current stream of the framework that made the first tensor argument — torch's
`current_stream(device)`, cupy's `get_current_stream()` — or, for __cuda_array_interface__ and
DLPack producers, the legacy default stream (handle 0; a DLPack producer on a GPU is told the
launch's stream through `__dlpack__(stream=...)`, so that it orders its pending work before it).
"""

from __future__ import annotations

import sys

from ..errors import UserFacingError

NP_NAMES = {"bool": "bool", "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32",
            "u32": "uint32", "i64": "int64", "u64": "uint64", "f16": "float16", "bf16": "bfloat16", "f32": "float32",
            "f64": "float64", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
TORCH_NAMES = {"bool": "bool", "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32",
               "u32": "uint32", "i64": "int64", "u64": "uint64", "f16": "float16", "bf16": "bfloat16",
               "f32": "float32", "f64": "float64", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
_NO_TYPESTR = {"bf16": 2, "f8e4m3": 1, "f8e5m2": 1}  # tilec dtypes __cuda_array_interface__ cannot name: bytes
HOST = -1  # the device ordinal an adapter reports for a host (numpy) array


class ArgumentError(UserFacingError, TypeError):
    """A launch's arguments do not fit the kernel: count, dtype, shape, device, contiguity, scalars."""


class TensorParam:
    """A tensor parameter of a kernel, with what its adapters compare against (built once)."""

    __slots__ = ("name", "dtype", "index", "output", "shape", "kernel", "torch_dtype_cached")

    def __init__(self, kernel: str, index: int, p: dict) -> None:
        self.kernel, self.index, self.name, self.dtype = kernel, index, p["name"], p["dtype"]
        self.output = bool(p.get("output"))
        self.shape = list(p["shape"])
        self.torch_dtype_cached = None  # the torch dtype object, once a torch argument made torch importable

    def where(self) -> str:
        return f"{self.kernel}: '{self.name}'"

    def torch_dtype(self):
        if self.torch_dtype_cached is None:
            name = TORCH_NAMES.get(self.dtype)
            self.torch_dtype_cached = getattr(sys.modules["torch"], name, None) if name else None
        return self.torch_dtype_cached


# ---------------------------------------------------------------- adapters: a -> (ptr | None, shape, device)


def _torch_view(a, p: TensorParam, stream):
    dev = a.get_device()
    if dev < 0 or a.dtype is not p.torch_dtype_cached or not a.is_contiguous():
        torch_problem(a, p)
    return a.data_ptr(), a.shape, dev


def torch_problem(a, p: TensorParam):
    """Raise the ArgumentError that a torch tensor deserves — unless its dtype only had to be
    looked up (the first torch call of a parameter), then return normally."""
    if p.torch_dtype_cached is None and a.dtype is p.torch_dtype() and a.get_device() >= 0 and a.is_contiguous():
        return
    if a.get_device() < 0:
        raise ArgumentError(f"{p.where()} is a torch tensor on {a.device}; move it to the GPU (or pass numpy)")
    if a.dtype is not p.torch_dtype():
        raise ArgumentError(f"{p.where()} has dtype {a.dtype}, expected {p.dtype} "
                            f"(torch.{TORCH_NAMES.get(p.dtype, '?')})")
    raise ArgumentError(f"{p.where()} must be contiguous (call .contiguous())")


def _cupy_view(a, p: TensorParam, stream):
    if a.dtype.name != NP_NAMES[p.dtype]:
        raise ArgumentError(f"{p.where()} has dtype {a.dtype.name}, expected {NP_NAMES[p.dtype]}")
    if not a.flags.c_contiguous:
        raise ArgumentError(f"{p.where()} must be C-contiguous")
    return a.data.ptr, a.shape, a.device.id


def _numpy_view(a, p: TensorParam, stream):
    if a.dtype.name != NP_NAMES[p.dtype]:
        raise ArgumentError(f"{p.where()} has dtype {a.dtype.name}, expected {NP_NAMES[p.dtype]}")
    if not a.flags.c_contiguous:
        raise ArgumentError(f"{p.where()} must be C-contiguous")
    return None, a.shape, HOST


def _cai_view(a, p: TensorParam, stream):
    """Any __cuda_array_interface__ exporter (numba, older cupy, ...)."""
    import numpy as np

    iface = a.__cuda_array_interface__
    dt = np.dtype(iface["typestr"])
    # The interface has no spelling for bfloat16 or fp8: any type of their width is taken as their bits.
    bits_only = p.dtype in _NO_TYPESTR and dt.itemsize == _NO_TYPESTR[p.dtype]
    if dt.name != NP_NAMES[p.dtype] and not bits_only:
        raise ArgumentError(f"{p.where()} has dtype {dt.name}, expected {NP_NAMES[p.dtype]}")
    shape = tuple(iface["shape"])
    strides = iface.get("strides")
    if strides is not None and tuple(strides) != _contiguous_strides(shape, np.dtype(iface["typestr"]).itemsize):
        raise ArgumentError(f"{p.where()} must be C-contiguous")
    return int(iface["data"][0]), shape, 0


def _dlpack_view(a, p: TensorParam, stream):
    from .dlpack import K_DL_CUDA, describe

    d = describe(a, stream)
    if d["device_type"] != K_DL_CUDA:
        raise ArgumentError(f"{p.where()} is a DLPack tensor on device type {d['device_type']}, not a CUDA device")
    if d["dtype"] != p.dtype:
        raise ArgumentError(f"{p.where()} has dtype {d['dtype']}, expected {p.dtype}")
    if not d["contiguous"]:
        raise ArgumentError(f"{p.where()} must be contiguous")
    return int(d["ptr"]), tuple(d["shape"]), d["device_id"]


def _contiguous_strides(shape, itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _instance_view(a, p: TensorParam, stream):
    """A type not recognized by its class: the array protocols may still be instance attributes."""
    if hasattr(a, "__cuda_array_interface__"):
        return _cai_view(a, p, stream)
    if hasattr(a, "__dlpack__"):
        return _dlpack_view(a, p, stream)
    raise ArgumentError(f"{p.where()} must be a torch, cupy, DLPack or numpy array, got {type(a).__name__}")


# ---------------------------------------------------------------- streams: device ordinal -> CUstream


_torch_current_stream = None


def _torch_stream(device: int) -> int:
    global _torch_current_stream
    if _torch_current_stream is None:
        torch = sys.modules["torch"]
        # the handle as an int, without building a torch.cuda.Stream object (what Triton's launcher uses)
        _torch_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda d: torch.cuda.current_stream(d).cuda_stream)
    return _torch_current_stream(device)


def _cupy_stream(device: int) -> int:
    return sys.modules["cupy"].cuda.get_current_stream().ptr


def _legacy_stream(device: int) -> int:
    return 0


class Adapter:
    __slots__ = ("kind", "view", "stream")

    def __init__(self, kind: str, view, stream) -> None:
        self.kind, self.view, self.stream = kind, view, stream


_ADAPTERS: dict[type, Adapter] = {}


def adapter(t: type) -> Adapter:
    """The adapter of arrays of type `t` (cached: one dict lookup per argument after the first)."""
    got = _ADAPTERS.get(t)
    if got is None:
        got = _ADAPTERS[t] = _classify(t)
    return got


def _classify(t: type) -> Adapter:
    mods = {c.__module__.split(".")[0] for c in t.__mro__}
    if "torch" in mods and hasattr(t, "data_ptr"):
        return Adapter("torch", _torch_view, _torch_stream)
    if "cupy" in mods and hasattr(t, "data") and hasattr(t, "device"):
        return Adapter("cupy", _cupy_view, _cupy_stream)
    if "numpy" in mods and hasattr(t, "__array_interface__") and hasattr(t, "flags"):
        return Adapter("numpy", _numpy_view, _legacy_stream)
    if hasattr(t, "__cuda_array_interface__"):
        return Adapter("cuda_array_interface", _cai_view, _legacy_stream)
    if hasattr(t, "__dlpack__"):
        return Adapter("dlpack", _dlpack_view, _legacy_stream)
    return Adapter("other", _instance_view, _legacy_stream)


def register_adapter(t: type, kind: str, view, stream=_legacy_stream) -> None:
    """Teach the runtime another array type: `view(array, param, explicit stream or None)` returns
    (device pointer, shape, device ordinal) after checking the array against the TensorParam;
    `stream(device)` gives the stream a launch on such arrays uses when none is passed."""
    _ADAPTERS[t] = Adapter(kind, view, stream)


def stream_handle(stream) -> int:
    """A CUstream handle from what a caller may pass as `stream=`: an int, a torch.cuda.Stream
    (`cuda_stream`), a cupy Stream (`ptr`) or any object with `__cuda_stream__()` (returns
    (version, handle))."""
    if isinstance(stream, int):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise ArgumentError(f"stream={stream!r}: expected a CUstream handle (int), a torch.cuda.Stream, a cupy Stream "
                        "or an object with __cuda_stream__")
