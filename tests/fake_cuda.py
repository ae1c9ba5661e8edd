"""A recording stand-in for tilec.runtime.cuda_driver.Driver, for tests without a GPU.

It implements the calls tilec.runtime makes and records launches with their arguments read back
from the packed kernelParams block (so the packing itself is tested), streams, synchronizations,
allocations and events. `install(monkeypatch, fake)` makes `Driver.get(device)` return it.
"""

from __future__ import annotations

import contextlib
import ctypes

from tilec.runtime import cuda_driver

_SCALAR_CTYPES = {"i8": ctypes.c_int8, "u8": ctypes.c_uint8, "i16": ctypes.c_int16, "u16": ctypes.c_uint16,
                  "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64, "u64": ctypes.c_uint64,
                  "f32": ctypes.c_float, "f64": ctypes.c_double, "bool": ctypes.c_bool, "f16": ctypes.c_uint16,
                  "bf16": ctypes.c_uint16}


class Launch:
    def __init__(self, fn, grid, block, shared, stream, args, maps, map_addresses, cluster=None):
        self.fn, self.grid, self.block, self.shared, self.stream = fn, grid, block, shared, stream
        self.cluster = cluster  # the cluster dimension launch attribute (cuLaunchKernelEx), or None
        self.args = args  # tensor pointers, scalar values, sizes: decoded from the argument block
        self.maps = maps  # each CUtensorMap's 16 words, as the kernel would receive them
        self.map_addresses = map_addresses

    def as_tuple(self):
        return self.fn, self.grid, self.block, self.shared, self.args


class FakeDriver:
    def __init__(self, entries: dict[str, dict] | None = None, capability=(9, 0), version=13000, sms=132):
        self.entries = dict(entries or {})  # kernel name -> manifest entry, to decode launches
        self.capability, self.version, self.sms = capability, version, sms
        self.next_ptr = 0x7F00_0000_0000
        self.encodes, self.launches, self.attrs, self.freed, self.allocs = [], [], [], [], []
        self.syncs, self.events, self.destroyed, self.loads, self.calls = [], [], [], [], []
        self.raw_results = []
        self.copies = []
        self.zeroed = []  # (pointer, bytes) of each memset

    def watch(self, module) -> None:
        """Decode launches of every kernel of a tilec.runtime Module."""
        for k in module.manifest["kernels"]:
            self.entries[k["name"]] = k

    # ---- what Module / Kernel call
    def driver_version(self):
        self.calls.append("driver_version")
        return self.version

    def compute_capability(self):
        self.calls.append("compute_capability")
        return self.capability

    def multiprocessor_count(self):
        return self.sms

    def name(self):
        return "Fake GPU"

    @contextlib.contextmanager
    def current(self):
        """The device's context made current for a block of calls (no contexts here: nothing to push)."""
        self.calls.append("current")
        yield self

    def load_module(self, image):
        self.calls.append("load_module")
        self.loads.append(image)
        return "module"

    def function(self, mod, name):
        return name

    def set_dynamic_shared(self, fn, nbytes):
        self.attrs.append((fn, nbytes))

    def alloc(self, nbytes):
        self.calls.append("alloc")
        ptr, self.next_ptr = self.next_ptr, self.next_ptr + ((nbytes + 255) // 256 + 1) * 256
        self.allocs.append((ptr, nbytes))
        return ptr

    def htod(self, ptr, host, nbytes):
        pass

    def dtoh(self, host, ptr, nbytes):
        pass

    def free(self, ptr):
        self.freed.append(ptr)

    def zero(self, ptr, nbytes):
        self.zeroed.append((ptr, nbytes))

    def encode_tensor_map(self, dtype, rank, ptr, dims, strides, box, swizzle, what=""):
        self.encodes.append((dtype, rank, ptr, tuple(dims), tuple(strides), tuple(box), swizzle, what))
        tmap = cuda_driver.tensor_map_buffer()
        tmap[0] = len(self.encodes)  # a marker the launch can be matched with
        return tmap

    @staticmethod
    def pointer_arg(value):
        return value

    def raw_launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        """cuLaunchKernel as the launch path calls it: records the launch and returns 0, or returns
        the next code of `raw_results` (the runtime then retries through launch_packed)."""
        if self.raw_results:
            return self.raw_results.pop(0)
        self._record(fn, (gx, gy, gz), bx, shared, stream, params)
        return 0

    def launch_packed(self, fn, grid, threads, shared, stream, params, cluster=None):
        self.calls.append("launch_packed")
        self._record(fn, grid, threads, shared, stream, params, cluster)

    def launch_cluster(self, fn, grid, threads, shared, stream, params, cluster):
        """cuLaunchKernelEx with the cluster dimension attribute, as the launch path calls it (0, or the next code of
        `raw_results`); the CUlaunchConfig is built as the real driver's would be, and read back."""
        if self.raw_results:
            return self.raw_results.pop(0)
        config = cuda_driver.cluster_launch_config(grid, threads, shared, stream, cluster)
        attr = config.attrs[0]
        assert config.numAttrs == 1 and attr.id == cuda_driver.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
        self.calls.append("launch_cluster")
        self._record(fn, grid, config.blockDimX, config.sharedMemBytes, config.hStream or 0, params,
                     tuple(attr.value[:3]))
        return 0

    def _record(self, fn, grid, threads, shared, stream, params, cluster=None):
        entry = self.entries[fn]
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        args = []
        i = 0
        for p in entry["params"]:
            ct = ctypes.c_uint64 if p["kind"] == "tensor" else _SCALAR_CTYPES[p["dtype"]]
            args.append(ct.from_address(pointers[i]).value)
            i += 1
        for _ in entry["sizes"]:
            args.append(ctypes.c_int32.from_address(pointers[i]).value)
            i += 1
        maps, addresses = [], []
        for _ in entry.get("tensor_maps") or []:
            addresses.append(pointers[i])
            maps.append(list((ctypes.c_uint64 * 16).from_address(pointers[i])))
            i += 1
        self.launches.append(Launch(fn, tuple(grid), (threads, 1, 1), shared, stream, args, maps, addresses, cluster))

    def copy_rows(self, dst, dst_pitch, src, src_pitch, width, rows, stream):
        """cuMemcpy2DAsync as a padded launch calls it: recorded in `copies`, in order with the launches."""
        assert width <= min(dst_pitch, src_pitch), (width, dst_pitch, src_pitch)
        self.copies.append((dst, dst_pitch, src, src_pitch, width, rows, stream))

    def synchronize(self, stream=None):
        self.syncs.append(stream)

    def event(self):
        ev = object()
        self.events.append(ev)
        return ev

    def destroy_event(self, ev):
        self.destroyed.append(ev)

    def record(self, ev, stream=0):
        pass

    def elapsed_ms(self, start, end):
        return 0.5


def install(monkeypatch, fake: FakeDriver) -> FakeDriver:
    monkeypatch.setattr(cuda_driver.Driver, "get", classmethod(lambda cls, device=0: fake))
    return fake


class DeviceArray:
    """A device array through __cuda_array_interface__, at any address (nothing behind it: the fake driver's)."""

    def __init__(self, ptr, shape, typestr="<f4"):
        self.shape = tuple(shape)
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": self.shape, "typestr": typestr,
                                         "strides": None, "version": 3}


def load_fake_module(monkeypatch, result, capability=(8, 0)):
    """(tilec.runtime Module, FakeDriver) of a compile result's sm80 artifact, the fake driver installed."""
    import json

    from tilec.artifacts import manifest
    from tilec.runtime.module import Module

    m = json.loads(json.dumps(manifest(result, "cubin", ["sm_80"], "test", {}, "k.cubin")))
    fake = install(monkeypatch, FakeDriver({k["name"]: k for k in m["kernels"]}, capability=capability))
    return Module(b"\0", m), fake
