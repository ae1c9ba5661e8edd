"""Loading an artifact and launching its kernels on numpy / torch / cupy arrays."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..errors import UserFacingError
from ..manifest import (  # noqa: F401  (the schema's names, re-exported for the runtime's users)
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
    fallback_entry,
    tensor_map_specs,
)
from .dispatch import add_dispatchers
from .formulas import evaluate

_NP_NAMES = {"bool": "bool", "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "u32": "uint32",
             "i64": "int64", "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
             "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
_TORCH_NAMES = {"bool": "bool", "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64",
                "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
                "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
_CTYPES = {"i8": ctypes.c_int8, "u8": ctypes.c_uint8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
           "u32": ctypes.c_uint32, "i64": ctypes.c_int64, "f32": ctypes.c_float, "f64": ctypes.c_double,
           "bool": ctypes.c_bool}


class ArgumentError(UserFacingError, TypeError):
    pass


class ArchitectureMismatch(UserFacingError, RuntimeError):
    pass


# ---------------------------------------------------------------- TMA tensor maps (Hopper)
#
# The manifest's "tensor_maps" are described and validated in tilec/manifest.py (shared with the C
# launcher); here each launch encodes them with cuTensorMapEncodeTiled.


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


class Module:
    def __init__(self, image: bytes, manifest: dict, name: str = "<memory>"):
        self.image = image
        self.manifest = manifest
        self.name = name
        self._module = None
        # internal entries (a TMA kernel's fallback) are launched by their public kernel, never by name
        self.kernels = {k["name"]: Kernel(self, k) for k in manifest["kernels"] if not k.get(INTERNAL_KEY)}
        self._internal = {k["name"]: Kernel(self, k) for k in manifest["kernels"] if k.get(INTERNAL_KEY)}
        add_dispatchers(manifest, self.kernels, self._internal)  # a tuned kernel's name over its variants

    def __getattr__(self, item: str) -> Kernel:
        kernels = self.__dict__.get("kernels", {})
        if item in kernels:
            return kernels[item]
        raise AttributeError(f"{self.name} has no kernel '{item}' (kernels: {', '.join(kernels)})")

    def cuda_module(self):
        from .cuda_driver import Driver

        drv = Driver.get()
        if self._module is None:
            self._check_arch(drv)
            self._module = drv.load_module(self.image)
        return drv, self._module

    def _check_arch(self, drv) -> None:
        major, minor = drv.compute_capability()
        have = major * 10 + minor
        kind = self.manifest.get("kind")
        ok = False
        for arch in self.manifest.get("archs", []):
            cc = int(arch.removeprefix("sm_").rstrip("a"))
            if kind == "ptx":
                ok |= have >= cc
            elif arch.endswith("a"):
                ok |= have == cc
            else:
                ok |= have // 10 == cc // 10 and have >= cc
        if not ok:
            raise ArchitectureMismatch(
                f"{self.name} was built for {', '.join(self.manifest.get('archs', []))} ({kind}); this GPU is "
                f"sm_{have}. Rebuild with --target for this GPU, or emit PTX.")


class Kernel:
    def __init__(self, module: Module, entry: dict):
        self.module = module
        self.entry = entry
        self.name = entry["name"]
        self._fn = None
        self._tmaps: list[TensorMapSpec] | None = None
        self._fallback: Kernel | None = None

    def _tensor_maps(self) -> tuple[list[TensorMapSpec], Kernel | None]:
        """The validated tensor maps and the fallback Kernel (None if the entry names none)."""
        if self._tmaps is None:
            tmaps = tensor_map_specs(self.entry)
            fb = fallback_entry(self.entry, self.module.manifest["kernels"]) if tmaps else None
            if fb is not None:
                self._fallback = self.module._internal.get(fb["name"]) or self.module.kernels[fb["name"]]
            self._tmaps = tmaps
        return self._tmaps, self._fallback

    def __repr__(self) -> str:
        sig = ", ".join(f"{p['name']}: {'out ' if p.get('output') else ''}{p['dtype']}"
                        + (f"[{', '.join(map(str, p['shape']))}]" if p["kind"] == "tensor" else "")
                        for p in self.entry["params"])
        return f"<tilec kernel {self.name}({sig})>"

    def _function(self):
        drv, mod = self.module.cuda_module()
        if self._fn is None:
            self._fn = drv.function(mod, self.name)
            if self.entry["shared_bytes"] > 48 * 1024:
                drv.set_dynamic_shared(self._fn, self.entry["shared_bytes"])
        return drv, self._fn

    def sizes_of(self, args) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for p, a in zip(self.entry["params"], args, strict=True):
            if p["kind"] != "tensor":
                continue
            shape = tuple(a.shape)
            if len(shape) != len(p["shape"]):
                raise ArgumentError(f"{self.name}: '{p['name']}' has {len(shape)} dimension(s), expected "
                                    f"{len(p['shape'])} ({p['shape']})")
            for axis, (want, got) in enumerate(zip(p["shape"], shape, strict=True)):
                if isinstance(want, int):
                    if want != got:
                        raise ArgumentError(f"{self.name}: dimension {axis} of '{p['name']}' must be {want}, got {got}")
                elif sizes.setdefault(want, got) != got:
                    raise ArgumentError(f"{self.name}: size {want} is {sizes[want]} from an earlier argument but "
                                        f"{got} from '{p['name']}'")
        return sizes

    def launch_config(self, sizes: dict[str, int]) -> tuple[tuple[int, int, int], int]:
        if any("num_sms" in g for g in self.entry["grid"]):  # a persistent kernel: one block per SM at most
            from .cuda_driver import Driver

            sizes = {**sizes, "num_sms": Driver.get().multiprocessor_count()}
        grid = tuple(max(0, evaluate(g, sizes)) for g in self.entry["grid"])
        return grid, self.entry["threads"]  # type: ignore[return-value]

    def __call__(self, *args, stream: int = 0, sync: bool = True):
        return self.launch(args, stream=stream, sync=sync)

    def launch(self, args, stream: int = 0, sync: bool = True, _prepared=None):
        params = self.entry["params"]
        if len(args) != len(params):
            raise ArgumentError(f"{self.name} takes {len(params)} argument(s) "
                                f"({', '.join(p['name'] for p in params)}), got {len(args)}")
        prepared = _prepared or self.prepare(args)
        kernel = prepared.get("kernel", self)  # the fallback when TMA could not address the tensors
        drv, fn = kernel._function()
        grid, threads = prepared["grid"], prepared["threads"]
        if all(g > 0 for g in grid):
            drv.launch(fn, grid, (threads, 1, 1), kernel.entry["shared_bytes"], stream, prepared["cargs"])
        if sync:
            drv.synchronize()
            prepared["finish"]()
        return prepared

    def prepare(self, args) -> dict:
        from .cuda_driver import Driver

        drv = Driver.get()
        sizes = self.sizes_of(args)
        cargs: list = []
        copies_back = []
        temps = []
        ptrs: dict[int, int] = {}
        for i, (p, a) in enumerate(zip(self.entry["params"], args, strict=True)):
            if p["kind"] == "scalar":
                ct = _CTYPES.get(p["dtype"])
                if ct is None:
                    raise ArgumentError(f"{self.name}: scalar '{p['name']}' of type {p['dtype']} cannot be passed")
                cargs.append(ct(a))
                continue
            ptr = _device_pointer(a, p, self.name)
            if ptr is None:  # a host numpy array: stage through device memory
                arr = a
                if not isinstance(arr, np.ndarray):
                    raise ArgumentError(f"{self.name}: '{p['name']}' must be a numpy, torch or cupy array")
                _check_numpy_dtype(arr, p, self.name)
                if not arr.flags.c_contiguous:
                    raise ArgumentError(f"{self.name}: '{p['name']}' must be C-contiguous")
                ptr = drv.alloc(arr.nbytes)
                temps.append(ptr)
                drv.htod(ptr, arr.ctypes.data, arr.nbytes)
                if p.get("output"):
                    copies_back.append((arr, ptr))
            ptrs[i] = ptr
            cargs.append(ctypes.c_uint64(ptr))
        for name in self.entry["sizes"]:
            cargs.append(ctypes.c_int32(sizes[name]))
        grid, threads = self.launch_config(sizes)

        def finish():
            for arr, ptr in copies_back:
                drv.dtoh(arr.ctypes.data, ptr, arr.nbytes)
            for ptr in temps:
                drv.free(ptr)
            temps.clear()

        kernel = self
        try:
            if all(g > 0 for g in grid):  # an empty launch encodes nothing (a zero dimension cannot be)
                kernel, grid, threads = self._encode_tensor_maps(drv, args, sizes, ptrs, cargs, grid, threads)
        except BaseException:
            finish()
            raise
        return {"cargs": cargs, "grid": grid, "threads": threads, "finish": finish, "sizes": sizes, "kernel": kernel}

    def _encode_tensor_maps(self, drv, args, sizes, ptrs, cargs, grid, threads):
        """Append this launch's encoded tensor maps to cargs, or pick the fallback kernel (and its
        launch configuration) when TMA cannot address the tensors. Returns (kernel, grid, threads)."""
        tmaps, fallback = self._tensor_maps()
        if not tmaps:
            return self, grid, threads
        encoded = []
        for spec in tmaps:
            shape = tuple(args[spec.param_index].shape)
            targs = tensor_map_args(spec, spec.param, shape, ptrs[spec.param_index])
            if isinstance(targs, NoTma):
                if fallback is None:
                    raise ArgumentError(f"{self.name}: TMA cannot read '{spec.param['name']}': {targs.reason}; "
                                        "this kernel has no fallback, so pass 16-byte aligned tensors whose rows "
                                        "are a multiple of 16 bytes")
                fgrid, fthreads = fallback.launch_config(sizes)
                return fallback, fgrid, fthreads
            encoded.append(drv.encode_tensor_map(targs.dtype, targs.rank, ptrs[spec.param_index], targs.dims,
                                                 targs.strides, targs.box, targs.swizzle,
                                                 what=f"{self.name}: {spec.describe()}"))
        cargs.extend(encoded)
        return self, grid, threads

    def bench(self, *args, warmup: int = 10, iters: int = 50) -> dict:
        """Median time of `iters` launches (CUDA events) after `warmup`, with the data on the device."""
        from .cuda_driver import Driver

        drv = Driver.get()
        prepared = self.prepare(args)
        try:
            for _ in range(warmup):
                self.launch(args, sync=False, _prepared=prepared)
            drv.synchronize()
            times = []
            for _ in range(iters):
                start, end = drv.event(), drv.event()
                drv.record(start)
                self.launch(args, sync=False, _prepared=prepared)
                drv.record(end)
                times.append(drv.elapsed_ms(start, end))
            drv.synchronize()
        finally:
            prepared["finish"]()
        times.sort()
        ms = times[len(times) // 2]
        sizes = prepared["sizes"]
        flops = evaluate(self.entry.get("flops", "0"), sizes)
        nbytes = evaluate(self.entry.get("bytes", "0"), sizes)
        return {"ms": ms, "tflops": flops / ms / 1e9, "gbps": nbytes / ms / 1e6, "flops": flops, "bytes": nbytes}


def _check_numpy_dtype(arr: np.ndarray, p: dict, kernel: str) -> None:
    want = _NP_NAMES[p["dtype"]]
    if arr.dtype.name != want:
        raise ArgumentError(f"{kernel}: '{p['name']}' has dtype {arr.dtype.name}, expected {want}")


def _device_pointer(a, p: dict, kernel: str) -> int | None:
    """The device address of a torch, cupy or any DLPack array (checked), or None for a host array."""
    mod = type(a).__module__
    if mod.startswith("torch"):
        if not a.is_cuda:
            raise ArgumentError(f"{kernel}: '{p['name']}' is a CPU torch tensor; move it to the GPU (or pass numpy)")
        if str(a.dtype).removeprefix("torch.") != _TORCH_NAMES.get(p["dtype"]):
            raise ArgumentError(f"{kernel}: '{p['name']}' has dtype {a.dtype}, expected {p['dtype']}")
        if not a.is_contiguous():
            raise ArgumentError(f"{kernel}: '{p['name']}' must be contiguous")
        return int(a.data_ptr())
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is not None:
        if iface.get("strides") not in (None,) and not getattr(a, "flags", None) or (
                hasattr(a, "flags") and not a.flags.c_contiguous):
            raise ArgumentError(f"{kernel}: '{p['name']}' must be C-contiguous")
        if np.dtype(iface["typestr"]).name != _NP_NAMES[p["dtype"]] and p["dtype"] != "bf16":
            raise ArgumentError(f"{kernel}: '{p['name']}' has dtype {np.dtype(iface['typestr']).name}, expected "
                                f"{_NP_NAMES[p['dtype']]}")
        return int(iface["data"][0])
    if hasattr(a, "__dlpack__") and not isinstance(a, np.ndarray):
        from .dlpack import K_DL_CUDA, describe

        d = describe(a)
        if d["device_type"] != K_DL_CUDA:
            raise ArgumentError(f"{kernel}: '{p['name']}' is a DLPack tensor on device type {d['device_type']}, "
                                "not a CUDA device")
        if d["dtype"] != p["dtype"]:
            raise ArgumentError(f"{kernel}: '{p['name']}' has dtype {d['dtype']}, expected {p['dtype']}")
        if not d["contiguous"]:
            raise ArgumentError(f"{kernel}: '{p['name']}' must be contiguous")
        return int(d["ptr"])
    return None
