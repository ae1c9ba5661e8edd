"""A minimal binding of the CUDA driver API through ctypes: no cuda-python, no compiler."""

from __future__ import annotations

import contextlib
import ctypes
import threading

from ..errors import UserFacingError

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_TENSOR_MAP_INTERLEAVE_NONE = 0
CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0  # out-of-bounds elements read as zero
TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap): 16 opaque 64-bit words
TENSOR_MAP_ALIGN = 128  # the driver asks for 64; cuda.h 13 declares the struct alignas(128)

CUtensorMap = ctypes.c_uint64 * 16
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


class CUlaunchAttribute(ctypes.Structure):
    """cuda.h's CUlaunchAttribute: the attribute's id, padding to 8 bytes, a 64-byte value union (for the cluster
    dimension: three unsigned ints x, y, z)."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint * 16)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(CUlaunchAttribute)), ("numAttrs", ctypes.c_uint)]


CU_MEMORYTYPE_DEVICE = 2


class CUDA_MEMCPY2D(ctypes.Structure):  # noqa: N801  (cuda.h's name)
    """cuda.h's CUDA_MEMCPY2D: a pitched copy's source and destination (x offset, row, memory type, host / device /
    array address, pitch), then the width in bytes and the number of rows."""

    _fields_ = [("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t), ("srcMemoryType", ctypes.c_int),
                ("srcHost", ctypes.c_void_p), ("srcDevice", ctypes.c_uint64), ("srcArray", ctypes.c_void_p),
                ("srcPitch", ctypes.c_size_t),
                ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t), ("dstMemoryType", ctypes.c_int),
                ("dstHost", ctypes.c_void_p), ("dstDevice", ctypes.c_uint64), ("dstArray", ctypes.c_void_p),
                ("dstPitch", ctypes.c_size_t),
                ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t)]


def cluster_launch_config(grid, threads: int, shared: int, stream: int, cluster) -> CUlaunchConfig:
    """The CUlaunchConfig of a launch in thread-block clusters of `cluster` = (x, y, z) blocks (it keeps its one
    attribute alive)."""
    attr = CUlaunchAttribute()
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value[0], attr.value[1], attr.value[2] = cluster
    config = CUlaunchConfig(grid[0], grid[1], grid[2], threads, 1, 1, shared, stream or None, ctypes.pointer(attr), 1)
    config._attr = attr
    return config


def tensor_map_buffer() -> ctypes.Array:
    """A zeroed CUtensorMap at a TENSOR_MAP_ALIGN-aligned address (ctypes only guarantees 16): a view
    into a larger buffer, which it keeps alive. `ctypes.byref` of it points at the struct itself, as a
    cuLaunchKernel kernelParams entry for a by-value CUtensorMap parameter must."""
    raw = ctypes.create_string_buffer(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN - 1)
    offset = -ctypes.addressof(raw) % TENSOR_MAP_ALIGN
    return CUtensorMap.from_buffer(raw, offset)


class CudaError(UserFacingError, RuntimeError):
    pass


def _open_library():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise CudaError(f"the CUDA driver (libcuda.so.1) is not available: {e}") from None
    rc = lib.cuInit(0)
    if rc != 0:
        raise CudaError(f"cuInit failed with CUresult {rc}: no usable NVIDIA GPU or driver")
    return lib


class Driver:
    """One GPU's primary context (the one torch and cupy use, so pointers are shared with them) and
    the driver calls tilec.runtime makes. `Driver.get(device)` returns the instance of a device."""

    _instances: dict[int, Driver] = {}
    _lib = None
    _lock = threading.Lock()

    def __init__(self, lib, ordinal: int) -> None:
        self.lib = lib
        dev = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), f"cuDeviceGet({ordinal})")
        self.device = dev.value
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self.context = ctx
        self.context_handle = ctx.value or 0
        self.lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        self.lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        # kernelParams as an address: the runtime packs the argument array once per kernel
        self.lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.cuLaunchKernel.restype = ctypes.c_int
        # The launch path calls cuLaunchKernel directly, without checking the current context first
        # (a ctypes call of its own): where the launch fails — no context current on this thread —
        # launch_packed retries with this device's context pushed, and reports any other error. It
        # is bound through PyDLL, which keeps the GIL across the call, as torch's own launches do
        # (cuLaunchKernel only enqueues), and without argtypes: its pointer arguments are passed as
        # ready c_void_p objects (pointer_arg) and the dimensions as ints, which ctypes converts
        # faster than through argtypes (4.1 against 4.9 us a call, measured on the H200's host).
        self._gil_held = ctypes.PyDLL(lib._name)
        self.raw_launch = self._gil_held.cuLaunchKernel
        self.raw_launch.restype = ctypes.c_int
        self.lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self._launch_ex = None  # cuLaunchKernelEx (CUDA 12+), bound on the first launch in clusters
        self.lib.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
        self.lib.cuCtxPopCurrent_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.lib.cuEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
        self.lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        self._encode_tiled = None
        self._copy_2d = None  # cuMemcpy2DAsync_v2, bound on the first padded launch

    @classmethod
    def get(cls, device: int = 0) -> Driver:
        """The driver bound to GPU `device` (its primary context); the first call loads libcuda."""
        drv = cls._instances.get(device)
        if drv is None:
            with cls._lock:
                if cls._lib is None:
                    cls._lib = _open_library()
                drv = cls._instances.get(device) or Driver(cls._lib, device)
                cls._instances[device] = drv
        return drv

    def entry_address(self, name: str) -> int:
        """The address of the driver's entry point `name` (the compiled launcher calls cuLaunchKernelEx for launches
        in clusters and cuStreamIsCapturing before a sequence on a kept workspace), 0 where this driver has none."""
        fn = getattr(self._gil_held, name, None)
        if fn is None:
            return 0
        return ctypes.cast(fn, ctypes.c_void_p).value or 0

    @staticmethod
    def pointer_arg(value: int) -> ctypes.c_void_p:
        """A pointer argument of raw_launch (a CUfunction, CUstream or kernelParams address)."""
        return ctypes.c_void_p(value)

    def driver_version(self) -> int:
        """cuDriverGetVersion: the newest CUDA version this driver supports (13.0 -> 13000)."""
        v = ctypes.c_int()
        self.check(self.lib.cuDriverGetVersion(ctypes.byref(v)), "cuDriverGetVersion")
        return v.value

    def is_capturing(self, stream: int) -> bool:
        """cuStreamIsCapturing: whether `stream` is capturing a CUDA graph."""
        status = ctypes.c_int()
        with self.current():
            self.check(self.lib.cuStreamIsCapturing(ctypes.c_void_p(stream or None), ctypes.byref(status)),
                       "cuStreamIsCapturing")
        return status.value != 0

    def name(self) -> str:
        """cuDeviceGetName: the GPU's marketing name (NVIDIA H200)."""
        buf = ctypes.create_string_buffer(256)
        self.check(self.lib.cuDeviceGetName(buf, 256, self.device), "cuDeviceGetName")
        return buf.value.decode(errors="replace")

    def enter(self) -> bool:
        """Make this device's context current for calls into the driver. Returns True when it had to
        be pushed (`leave` pops it again), so the caller's current context — torch's current device —
        is left as it was."""
        current = ctypes.c_void_p()
        self.lib.cuCtxGetCurrent(current)
        if current.value == self.context_handle:
            return False
        self.check(self.lib.cuCtxPushCurrent_v2(self.context), "cuCtxPushCurrent")
        return True

    def leave(self, pushed: bool) -> None:
        if pushed:
            self.lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    @contextlib.contextmanager
    def current(self):
        pushed = self.enter()
        try:
            yield self
        finally:
            self.leave(pushed)

    def launch_packed(self, fn, grid, threads: int, shared: int, stream: int, params: int, cluster=None) -> None:
        """cuLaunchKernel with a prepared kernelParams array at address `params`: asynchronous on
        `stream` (a CUstream handle; 0 is the legacy default stream), capturable into a CUDA graph. With
        `cluster` = (x, y, z), cuLaunchKernelEx in thread-block clusters of that shape."""
        pushed = self.enter()
        try:
            if cluster is not None:
                rc = self.launch_cluster(fn, grid, threads, shared, stream, params, cluster)
            else:
                rc = self.lib.cuLaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, shared, stream, params, None)
        finally:
            if pushed:
                self.leave(pushed)
        if rc:
            self.check(rc, "cuLaunchKernelEx" if cluster is not None else "cuLaunchKernel")

    def launch_cluster(self, fn, grid, threads: int, shared: int, stream: int, params: int, cluster) -> int:
        """cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = cluster; returns the CUresult (the launch
        path's retry through launch_packed reports an error)."""
        if self._launch_ex is None:
            ex = getattr(self.lib, "cuLaunchKernelEx", None)
            if ex is None:
                raise CudaError("this CUDA driver has no cuLaunchKernelEx (CUDA 12 or newer launches kernels in "
                                "thread-block clusters)")
            ex.argtypes = [ctypes.POINTER(CUlaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            ex.restype = ctypes.c_int
            self._launch_ex = ex
        config = cluster_launch_config(grid, threads, shared, stream, cluster)
        return self._launch_ex(ctypes.byref(config), fn, params, None)

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = ctypes.c_char_p()
            msg = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            self.lib.cuGetErrorString(rc, ctypes.byref(msg))
            n = name.value.decode() if name.value else str(rc)
            m = msg.value.decode() if msg.value else ""
            raise CudaError(f"{what} failed: {n} ({m})")

    def compute_capability(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.cuDeviceGetAttribute(ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device)
        self.lib.cuDeviceGetAttribute(ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device)
        return major.value, minor.value

    def multiprocessor_count(self) -> int:
        n = ctypes.c_int()
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(n), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                                 self.device), "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)")
        return n.value

    def load_module(self, image: bytes):
        mod = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(image + (b"\0" if not image.endswith(b"\0") else b""))
        with self.current():
            self.check(self.lib.cuModuleLoadData(ctypes.byref(mod), buf), "cuModuleLoadData")
        return mod

    def function(self, module, name: str):
        fn = ctypes.c_void_p()
        with self.current():
            rc = self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode())
        self.check(rc, f"cuModuleGetFunction({name})")
        return fn

    def set_dynamic_shared(self, fn, nbytes: int) -> None:
        with self.current():
            rc = self.lib.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
        self.check(rc, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        with self.current():
            self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(1, nbytes)), "cuMemAlloc")
        return ptr.value

    def free(self, ptr: int) -> None:
        with self.current():
            self.lib.cuMemFree_v2(ptr)

    def htod(self, ptr: int, host, nbytes: int) -> None:
        with self.current():
            self.check(self.lib.cuMemcpyHtoD_v2(ptr, host, nbytes), "cuMemcpyHtoD")

    def dtoh(self, host, ptr: int, nbytes: int) -> None:
        with self.current():
            self.check(self.lib.cuMemcpyDtoH_v2(host, ptr, nbytes), "cuMemcpyDtoH")

    def copy_rows(self, dst: int, dst_pitch: int, src: int, src_pitch: int, width: int, rows: int,
                  stream: int) -> None:
        """cuMemcpy2DAsync on `stream`, device to device: `rows` rows of `width` bytes, `src_pitch` bytes apart in
        the source and `dst_pitch` in the destination (a misaligned tensor into, or out of, a workspace whose rows
        are padded to 16 bytes)."""
        fn = self._copy_2d
        if fn is None:
            fn = self._copy_2d = self.lib.cuMemcpy2DAsync_v2
            fn.argtypes = [ctypes.POINTER(CUDA_MEMCPY2D), ctypes.c_void_p]
            fn.restype = ctypes.c_int
        copy = CUDA_MEMCPY2D(srcMemoryType=CU_MEMORYTYPE_DEVICE, srcDevice=src, srcPitch=src_pitch,
                             dstMemoryType=CU_MEMORYTYPE_DEVICE, dstDevice=dst, dstPitch=dst_pitch,
                             WidthInBytes=width, Height=rows)
        with self.current():
            self.check(fn(ctypes.byref(copy), stream or None), "cuMemcpy2DAsync (a padded workspace)")

    def global_address(self, module, name: str) -> tuple[int, int]:
        """(device address, bytes) of the module's `__device__` variable `name` (cuModuleGetGlobal)."""
        ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.lib.cuModuleGetGlobal_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                  ctypes.c_void_p, ctypes.c_char_p]
        with self.current():
            self.check(self.lib.cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size), module, name.encode()),
                       f"cuModuleGetGlobal({name})")
        return ptr.value, size.value

    def zero(self, ptr: int, nbytes: int) -> None:
        self.lib.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
        with self.current():
            self.check(self.lib.cuMemsetD8_v2(ptr, 0, nbytes), "cuMemsetD8")

    def encode_tensor_map(self, dtype: int, rank: int, ptr: int, dims, strides, box, swizzle: int,
                          what: str = "tensor map") -> ctypes.Array:
        """cuTensorMapEncodeTiled into a fresh aligned CUtensorMap (tensor_map_buffer). dims, box:
        `rank` entries, innermost first; strides: rank - 1 byte strides; element strides 1, no
        interleave, 256-byte L2 promotion, out-of-bounds elements read as zero. `what` names the
        tensor map in the error."""
        fn = self._encode_tiled
        if fn is None:
            fn = getattr(self.lib, "cuTensorMapEncodeTiled", None)
            if fn is None:
                raise CudaError(f"{what}: this CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12 or newer)")
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                           ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                           ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
            fn.restype = ctypes.c_int
            self._encode_tiled = fn
        tmap = tensor_map_buffer()
        c_dims = (ctypes.c_uint64 * rank)(*dims)
        c_strides = (ctypes.c_uint64 * max(1, rank - 1))(*strides)
        c_box = (ctypes.c_uint32 * rank)(*box)
        c_elem = (ctypes.c_uint32 * rank)(*([1] * rank))
        with self.current():  # the driver wants a context, although the encoding is host-side
            rc = fn(ctypes.addressof(tmap), dtype, rank, ctypes.c_void_p(ptr), c_dims, c_strides, c_box, c_elem,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        self.check(rc, f"cuTensorMapEncodeTiled for {what}")
        return tmap

    def synchronize(self, stream: int | None = None) -> None:
        """Wait for `stream`'s work (None: the whole context's) and report a kernel's fault."""
        with self.current():
            if stream is None:
                self.check(self.lib.cuCtxSynchronize(), "kernel execution (cuCtxSynchronize)")
            else:
                self.check(self.lib.cuStreamSynchronize(stream), "kernel execution (cuStreamSynchronize)")

    def event(self):
        ev = ctypes.c_void_p()
        with self.current():
            self.check(self.lib.cuEventCreate(ctypes.byref(ev), 0), "cuEventCreate")
        return ev

    def destroy_event(self, ev) -> None:
        with self.current():
            self.lib.cuEventDestroy_v2(ev)

    def record(self, ev, stream: int = 0) -> None:
        with self.current():
            self.check(self.lib.cuEventRecord(ev, ctypes.c_void_p(stream)), "cuEventRecord")

    def elapsed_ms(self, start, end) -> float:
        with self.current():
            self.check(self.lib.cuEventSynchronize(end), "cuEventSynchronize")
        ms = ctypes.c_float()
        self.check(self.lib.cuEventElapsedTime(ctypes.byref(ms), start, end), "cuEventElapsedTime")
        return ms.value
