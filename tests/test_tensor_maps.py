"""TMA tensor maps on the host side (no GPU).

A kernel entry with "tensor_maps" takes one CUtensorMap per map after its params and sizes; the host
encodes them with cuTensorMapEncodeTiled at each launch, or launches the entry's internal "fallback"
kernel when TMA cannot address the tensors. Checked here:

* the encoding arguments (tilec.runtime.module.tensor_map_args) and the manifest's static rules;
* tilec.runtime's Kernel.prepare / launch against a recording fake driver, and the ctypes binding of
  cuTensorMapEncodeTiled against a fake libcuda;
* the C launcher header, compiled as C11 and C++17 with a mock driver written in C that logs every
  cuTensorMapEncodeTiled and cuLaunchKernel, around a real cubin of samples/vector_add.tile.
"""

from __future__ import annotations

import copy
import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_cuda import FakeDriver, install

from tilec.runtime import cuda_driver
from tilec.runtime.module import (
    ArgumentError,
    ManifestError,
    Module,
    NoTma,
    TensorMapArgs,
    tensor_map_args,
    tensor_map_specs,
)

ROOT = Path(__file__).resolve().parent.parent


# ================================================================ the encoding arguments


def _tensor(name: str, dtype: str, shape: list) -> dict:
    return {"name": name, "kind": "tensor", "dtype": dtype, "output": False, "shape": shape}


def test_args_2d_f16():
    A = _tensor("A", "f16", ["M", "K"])
    got = tensor_map_args({"tensor": "A", "box": [128, 64], "swizzle": 128}, A, (256, 128), 0x7F00_0000_0000)
    # driver order is innermost first: dims (K, M), one stride (a row: 128 f16 = 256 bytes)
    assert got == TensorMapArgs(dtype=6, rank=2, dims=(128, 256), strides=(256,), box=(64, 128), swizzle=3)
    got = tensor_map_args({"tensor": "A", "box": [64, 32], "swizzle": 64}, A, (3, 8), 0x1000)
    assert got == TensorMapArgs(dtype=6, rank=2, dims=(8, 3), strides=(16,), box=(32, 64), swizzle=2)


def test_args_4d_bf16():
    Q = _tensor("Q", "bf16", ["B", "H", "S", 64])
    got = tensor_map_args({"tensor": "Q", "box": [1, 64, 1, 64], "swizzle": 128}, Q, (2, 8, 1000, 64), 0x20000)
    assert got == TensorMapArgs(dtype=9, rank=4, dims=(64, 1000, 8, 2), strides=(128, 128_000, 1_024_000),
                                box=(64, 1, 64, 1), swizzle=3)


def test_args_other_dtypes_and_ranks():
    x = tensor_map_args({"tensor": "X", "box": [256], "swizzle": 0}, _tensor("X", "i8", ["N"]), (5,), 0x100)
    assert x == TensorMapArgs(dtype=0, rank=1, dims=(5,), strides=(), box=(256,), swizzle=0)
    for dtype, enum in [("f8e4m3", 0), ("u8", 0), ("bool", 0), ("i16", 1), ("i32", 3), ("u32", 2), ("i64", 5),
                        ("f32", 7), ("f64", 8), ("f16", 6), ("bf16", 9)]:
        got = tensor_map_args({"tensor": "X", "box": [2, 16], "swizzle": 0}, _tensor("X", dtype, ["M", "N"]),
                              (4, 16), 0x100)
        assert isinstance(got, TensorMapArgs) and got.dtype == enum, dtype
    f32 = _tensor("X", "f32", ["M", "N"])
    assert tensor_map_args({"tensor": "X", "box": [8, 4], "swizzle": 0}, f32, (9, 4), 0x100).strides == (16,)


def test_unaligned_stride_means_fallback():
    A = _tensor("A", "f16", ["M", "K"])
    got = tensor_map_args({"tensor": "A", "box": [128, 64], "swizzle": 128}, A, (256, 100), 0x10000)
    assert isinstance(got, NoTma) and "200 bytes" in got.reason  # a ragged K=100 row
    f32 = _tensor("X", "f32", ["M", "N"])
    assert isinstance(tensor_map_args({"tensor": "X", "box": [8, 4], "swizzle": 0}, f32, (9, 6), 0x100), NoTma)
    # an outer stride can be the unaligned one: [2, 3, 8] f16 has strides 16 and 48 -> fine; [2, 3, 8] i8: 8
    i8 = _tensor("X", "i8", ["A", "B", "C"])
    assert isinstance(tensor_map_args({"tensor": "X", "box": [1, 1, 16], "swizzle": 0}, i8, (2, 3, 8), 0x100), NoTma)
    assert isinstance(tensor_map_args({"tensor": "X", "box": [1, 1, 16], "swizzle": 0}, i8, (2, 3, 16), 0x100),
                      TensorMapArgs)
    # strides must stay below 2^40 bytes
    big = tensor_map_args({"tensor": "X", "box": [1, 1, 16], "swizzle": 0}, i8, (2, 1 << 20, 1 << 20), 0x100)
    assert isinstance(big, NoTma)


def test_misaligned_pointer_or_empty_dimension_means_fallback():
    A = _tensor("A", "f16", ["M", "K"])
    spec = {"tensor": "A", "box": [128, 64], "swizzle": 128}
    got = tensor_map_args(spec, A, (256, 128), 0x10008)
    assert isinstance(got, NoTma) and "0x10008" in got.reason
    assert isinstance(tensor_map_args(spec, A, (256, 128), 0x10010), TensorMapArgs)
    assert isinstance(tensor_map_args(spec, A, (256, 0), 0x10000), NoTma)


@pytest.mark.parametrize("tmap, match", [
    ({"tensor": "A", "box": [128, 64], "swizzle": 96}, "swizzle 96"),
    ({"tensor": "A", "box": [128, 128], "swizzle": 128}, "256 bytes.*exceeds the 128-byte swizzle"),
    ({"tensor": "A", "box": [128, 4], "swizzle": 0}, "8 bytes.*multiple of 16"),
    ({"tensor": "A", "box": [128], "swizzle": 0}, "one entry in 1..256 per dimension"),
    ({"tensor": "A", "box": [257, 64], "swizzle": 0}, "one entry in 1..256"),
    ({"tensor": "A", "box": [0, 64], "swizzle": 0}, "one entry in 1..256"),
    ({"tensor": "alpha", "box": [8], "swizzle": 0}, "'alpha', which is not a tensor parameter"),
    ({"tensor": "Z", "box": [8], "swizzle": 0}, "'Z', which is not a tensor parameter"),
    ({"param": "A"}, "names no tensor"),
])
def test_manifest_rules(tmap, match):
    entry = {"name": "k", "params": [_tensor("A", "f16", ["M", "K"]), {"name": "alpha", "kind": "scalar",
                                                                       "dtype": "f32"}],
             "tensor_maps": [tmap]}
    with pytest.raises(ManifestError, match=match):
        tensor_map_specs(entry)


# ================================================================ tilec.runtime, on a fake driver

GEMM_PARAMS = [_tensor("A", "f16", ["M", "K"]), _tensor("B", "f16", ["K", "N"]),
               dict(_tensor("C", "f32", ["M", "N"]), output=True), {"name": "alpha", "kind": "scalar", "dtype": "f32"}]


def _entries() -> dict[str, dict]:
    """gemm (TMA, three maps: A twice) + its internal fallback, and attn (TMA, no fallback)."""
    gemm = {"name": "gemm", "params": GEMM_PARAMS, "sizes": ["M", "K", "N"],
            "grid": ["ceildiv(N, 128)", "ceildiv(M, 128)", "1"], "threads": 384, "shared_bytes": 200000,
            "flops": "2*M*N*K", "bytes": "0",
            "tensor_maps": [{"tensor": "A", "box": [128, 64], "swizzle": 128},
                            {"tensor": "B", "box": [64, 64], "swizzle": 128},
                            {"tensor": "A", "box": [64, 32], "swizzle": 64}],
            "fallback": "gemm__simt"}
    simt = {"name": "gemm__simt", "params": GEMM_PARAMS, "sizes": ["M", "K", "N"],
            "grid": ["ceildiv(N, 64)", "ceildiv(M, 64)", "1"], "threads": 128, "shared_bytes": 32768,
            "flops": "2*M*N*K", "bytes": "0", "internal": True}
    attn = {"name": "attn", "params": [_tensor("Q", "bf16", ["B", "H", "S", 64]),
                                       dict(_tensor("O", "bf16", ["B", "H", "S", 64]), output=True)],
            "sizes": ["B", "H", "S"], "grid": ["ceildiv(S, 64)", "H", "B"], "threads": 128, "shared_bytes": 0,
            "tensor_maps": [{"tensor": "Q", "box": [1, 64, 1, 64], "swizzle": 128}]}
    return {"gemm": gemm, "gemm__simt": simt, "attn": attn}


class DeviceArray:
    """A device array seen through __cuda_array_interface__ (what cupy offers), at any address."""

    def __init__(self, ptr: int, shape: tuple, typestr: str):
        self.shape = shape
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr, "strides": None,
                                         "version": 3}


@pytest.fixture
def fake(monkeypatch):
    return install(monkeypatch, FakeDriver(_entries()))


def _module() -> Module:
    e = _entries()
    return Module(b"\0", {"kind": "cubin", "archs": ["sm_90a"], "kernels": [e["gemm"], e["gemm__simt"], e["attn"]]})


def test_runtime_hides_internal_kernels():
    mod = _module()
    assert sorted(mod.kernels) == ["attn", "gemm"]
    with pytest.raises(AttributeError, match="no kernel 'gemm__simt'"):
        mod.gemm__simt  # noqa: B018


def test_runtime_encodes_tensor_maps(fake):
    mod = _module()
    M, K, N = 256, 128, 512
    A, B, C = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16), np.zeros((M, N), np.float32)
    mod.gemm(A, B, C, 2.0)
    (launch,) = fake.launches
    fn, grid, block, shared, args = launch.as_tuple()
    assert (fn, grid, block, shared) == ("gemm", (4, 2, 1), (384, 1, 1), 200000)
    assert fake.attrs == [("gemm", 200000)]
    pa, pb = args[0], args[1]
    assert args[3:7] == [2.0, M, K, N]
    assert [e[:7] for e in fake.encodes] == [
        (6, 2, pa, (K, M), (K * 2,), (64, 128), 3),
        (6, 2, pb, (N, K), (N * 2,), (64, 64), 3),
        (6, 2, pa, (K, M), (K * 2,), (32, 64), 2)]
    assert "tensor map 1 ('B', box [64, 64], swizzle 128)" in fake.encodes[1][7]
    maps = launch.maps
    assert len(maps) == 3 and [m[0] for m in maps] == [1, 2, 3]  # in order, after the sizes
    assert all(address % 64 == 0 for address in launch.map_addresses)
    assert len(fake.freed) == 3  # staged numpy arrays released


def test_runtime_falls_back_when_tma_cannot_address_the_tensors(fake):
    mod = _module()
    M, K, N = 200, 100, 300  # a K=100 f16 row is 200 bytes
    A, B, C = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16), np.zeros((M, N), np.float32)
    mod.gemm(A, B, C, 1.0)
    (launch,) = fake.launches
    fn, grid, block, shared, args = launch.as_tuple()
    assert (fn, grid, block, shared) == ("gemm__simt", (5, 4, 1), (128, 1, 1), 32768)
    assert len(args) == 7 and fake.encodes == []
    # a misaligned device pointer: the same (launch_plan says what a call launches)
    fake.launches.clear()
    dA = DeviceArray(0x10008, (256, 128), "<f2")
    dB = DeviceArray(0x20000, (128, 512), "<f2")
    dC = DeviceArray(0x30000, (256, 512), "<f4")
    assert mod.gemm.launch_plan(dA, dB, dC, 1.0).kernel.name == "gemm__simt"
    mod.gemm(dA, dB, dC, 1.0)
    assert fake.launches[-1].fn == "gemm__simt" and fake.encodes == []
    # aligned: TMA (the first map encodes, the kernel is gemm)
    dA = DeviceArray(0x10010, (256, 128), "<f2")
    assert mod.gemm.launch_plan(dA, dB, dC, 1.0).kernel.name == "gemm"
    mod.gemm(dA, dB, dC, 1.0)
    assert fake.launches[-1].fn == "gemm" and len(fake.launches[-1].maps) == 3
    assert fake.encodes[0][2] == 0x10010


def test_runtime_empty_launch_and_no_fallback(fake):
    mod = _module()
    A, B, C = np.zeros((0, 64), np.float16), np.zeros((64, 64), np.float16), np.zeros((0, 64), np.float32)
    mod.gemm(A, B, C, 1.0)  # M = 0: an empty grid, nothing encoded or launched
    assert fake.launches == [] and fake.encodes == []
    Q = DeviceArray(0x40000, (2, 8, 100, 64), "<u2")
    O = DeviceArray(0x50000, (2, 8, 100, 64), "<u2")
    mod.attn(Q, O)
    (launch,) = fake.launches
    assert (launch.fn, launch.grid) == ("attn", (2, 8, 2)) and len(launch.args) == 5 and len(launch.maps) == 1
    assert fake.encodes[0][:7] == (9, 4, 0x40000, (64, 100, 8, 2), (128, 12800, 102400), (64, 1, 64, 1), 3)
    with pytest.raises(ArgumentError, match="TMA cannot read 'Q'.*no fallback"):
        mod.attn(DeviceArray(0x40008, (2, 8, 100, 64), "<u2"), O)


GEMMT_PARAMS = [_tensor("A", "f8e4m3", ["M", "K"]), _tensor("B", "f8e4m3", ["N", "K"]),
                dict(_tensor("C", "bf16", ["M", "N"]), output=True)]


def _twin_entries() -> dict[str, dict]:
    """gemmt (fp8_gemm's shape: TMA loads of A and B, a TMA store of C), its direct-stores twin (the loads' maps
    alone) and its no-TMA fallback."""
    common = {"params": GEMMT_PARAMS, "sizes": ["M", "K", "N"], "flops": "2*M*N*K", "bytes": "0"}
    a_map = {"tensor": "A", "box": [128, 128], "swizzle": 128}
    b_map = {"tensor": "B", "box": [128, 128], "swizzle": 128}
    gemmt = dict(common, name="gemmt", grid=["ceildiv(N, 128)", "ceildiv(M, 128)", "1"], threads=384,
                 shared_bytes=200000, tensor_maps=[{"tensor": "C", "box": [128, 64], "swizzle": 128}, a_map, b_map],
                 fallback="gemmt__simt", direct_stores="gemmt__stores", tma_only={"A": "load", "B": "load",
                                                                                 "C": "store"})
    stores = dict(common, name="gemmt__stores", grid=gemmt["grid"], threads=384, shared_bytes=199000,
                  tensor_maps=[a_map, b_map], fallback="gemmt__simt", tma_only={"A": "load", "B": "load"},
                  internal=True)
    simt = dict(common, name="gemmt__simt", grid=["ceildiv(N, 64)", "ceildiv(M, 64)", "1"], threads=128,
                shared_bytes=32768, internal=True)
    return {"gemmt": gemmt, "gemmt__stores": stores, "gemmt__simt": simt}


def test_runtime_launches_the_direct_stores_twin_when_only_the_output_is_misaligned(monkeypatch):
    from tilec.runtime import launch

    e = _twin_entries()
    fake = install(monkeypatch, FakeDriver(e))
    mod = Module(b"\0", {"kind": "cubin", "archs": ["sm_90a"], "kernels": list(e.values())})
    assert sorted(mod.kernels) == ["gemmt"]

    def arrays(M, K, N, a=0x10000, c=0x30000):
        return (DeviceArray(a, (M, K), "|u1"), DeviceArray(0x20000, (N, K), "|u1"),
                DeviceArray(c, (M, N), "<u2"))

    # aligned: the TMA kernel, three maps
    plan = mod.gemmt.launch_plan(*arrays(256, 128, 512))
    assert plan.kernel.name == "gemmt" and len(plan.maps) == 3
    # N = 301: C's 602-byte rows cannot be TMA's, A's and B's 128-byte rows can: the twin, with A's and B's maps
    fake.encodes.clear()
    mod.gemmt(*arrays(256, 128, 301))
    launch_ = fake.launches[-1]
    assert launch_.fn == "gemmt__stores" and launch_.grid == (3, 2, 1) and launch_.shared == 199000
    assert [m[0] for m in launch_.maps] == [1, 2] and [enc[2] for enc in fake.encodes] == [0x10000, 0x20000]
    # a misaligned C pointer alone: the twin too
    assert mod.gemmt.launch_plan(*arrays(256, 128, 512, c=0x30008)).kernel.name == "gemmt__stores"
    # A misaligned as well (K = 100): neither TMA kernel can run, the fallback does
    assert mod.gemmt.launch_plan(*arrays(256, 100, 301)).kernel.name == "gemmt__simt"
    assert mod.gemmt.launch_plan(*arrays(256, 100, 512)).kernel.name == "gemmt__simt"
    # TILEC_PADDING=always keeps the twin where the output cannot be padded (not a torch tensor)
    monkeypatch.setattr(launch, "_PADDING", "always")
    assert mod.gemmt.launch_plan(*arrays(256, 128, 300)).kernel.name == "gemmt__stores"


def test_a_direct_stores_twin_must_map_some_of_its_kernels_tensors():
    from tilec.manifest import direct_stores_entry

    e = _twin_entries()
    assert direct_stores_entry(e["gemmt"], list(e.values()))[1] == [1, 2]
    assert direct_stores_entry(e["gemmt__simt"], list(e.values())) is None
    bad = dict(e["gemmt__stores"], tensor_maps=[{"tensor": "A", "box": [64, 128], "swizzle": 128}])
    with pytest.raises(ManifestError, match="some of the kernel's own tensor maps"):
        direct_stores_entry(e["gemmt"], [e["gemmt"], bad])
    with pytest.raises(ManifestError, match="not in the manifest"):
        direct_stores_entry(e["gemmt"], [e["gemmt"]])


def test_driver_binding_of_cuTensorMapEncodeTiled():
    """Driver.encode_tensor_map against a fake libcuda: the arguments as the C API takes them."""
    calls = []

    def encode(tmap, dtype, rank, ptr, dims, strides, box, elem, interleave, swizzle, l2, oob):
        calls.append((tmap, dtype, rank, ptr.value, list(dims), list(strides)[:rank - 1], list(box), list(elem),
                      interleave, swizzle, l2, oob))
        ctypes.cast(tmap, ctypes.POINTER(ctypes.c_uint64))[15] = 77
        return lib.rc

    class Lib:
        rc = 0
        cuTensorMapEncodeTiled = staticmethod(encode)
        pushed = []  # the encoding needs a current context (CUDA_ERROR_INVALID_CONTEXT without one)

        def cuCtxGetCurrent(self, out):
            return 0  # none current: the device's context is pushed for the call

        def cuCtxPushCurrent_v2(self, ctx):
            self.pushed.append(ctx)
            return 0

        def cuCtxPopCurrent_v2(self, out):
            self.pushed.append("pop")
            return 0

        def cuGetErrorName(self, rc, out):
            return 0

        def cuGetErrorString(self, rc, out):
            return 0

    lib = Lib()
    drv = cuda_driver.Driver.__new__(cuda_driver.Driver)
    drv.lib, drv._encode_tiled, drv.context, drv.context_handle = lib, None, "ctx", 0x1234
    tmap = drv.encode_tensor_map(9, 4, 0x40000, (64, 100, 8, 2), (128, 12800, 102400), (64, 1, 64, 1), 3, what="Q")
    assert lib.pushed == ["ctx", "pop"]
    (addr, *rest), = calls
    assert addr == ctypes.addressof(tmap) and addr % 64 == 0 and tmap[15] == 77
    assert rest == [9, 4, 0x40000, [64, 100, 8, 2], [128, 12800, 102400], [64, 1, 64, 1], [1, 1, 1, 1], 0, 3, 3, 0]
    assert encode.argtypes[0] is ctypes.c_void_p and len(encode.argtypes) == 12
    lib.rc = 1
    with pytest.raises(cuda_driver.CudaError, match="cuTensorMapEncodeTiled for gemm: tensor map 0"):
        drv.encode_tensor_map(6, 2, 0x1000, (64, 64), (128,), (64, 64), 3, what="gemm: tensor map 0 ('A', box "
                              "[64, 64], swizzle 128)")


# ================================================================ the C launcher, on a mock driver

MOCK_DRIVER = r"""
/* A fake CUDA driver for a tilec header with TMA kernels: logs lookups, encodes and launches. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int env_int(const char* name, int dflt) { const char* v = getenv(name); return v ? atoi(v) : dflt; }
static int mock_encodes = 0;
CUresult cuCtxGetCurrent(CUcontext* c) { *c = (CUcontext)(uintptr_t)1; return CUDA_SUCCESS; }
CUresult cuCtxGetId(CUcontext c, unsigned long long* id) { (void)c; *id = 7; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice* d) { *d = 0; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  int cc = env_int("MOCK_CC", 90);
  (void)d;
  if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *v = cc / 10;
  else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *v = cc % 10;
  else return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice d) { (void)d; snprintf(name, (size_t)len, "Mock");
                                                             return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult rc, const char** s) { (void)rc; *s = "MOCK"; return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  if (((uintptr_t)image) % 64 != 0) return CUDA_ERROR_INVALID_IMAGE;
  if (memcmp(image, "\177ELF", 4) != 0) return CUDA_ERROR_INVALID_IMAGE; /* a real cubin */
  *m = (CUmodule)(uintptr_t)0x1234;
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule m) { (void)m; return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  char* copy = (char*)malloc(strlen(name) + 1);
  (void)m;
  printf("getfn %s\n", name);
  strcpy(copy, name);
  *f = (CUfunction)copy;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) printf("attr %s %d\n", (const char*)f, v);
  return CUDA_SUCCESS;
}
CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
                                const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                const cuuint32_t* elem, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  cuuint32_t i;
  printf("encode dt %d rank %u addr %llu dims", (int)dt, rank, (unsigned long long)(uintptr_t)addr);
  for (i = 0; i < rank; ++i) printf(" %llu", (unsigned long long)dims[i]);
  printf(" strides");
  for (i = 0; i + 1 < rank; ++i) printf(" %llu", (unsigned long long)strides[i]);
  printf(" box");
  for (i = 0; i < rank; ++i) printf(" %u", box[i]);
  printf(" elem");
  for (i = 0; i < rank; ++i) printf(" %u", elem[i]);
  printf(" interleave %d swizzle %d l2 %d oob %d aligned %d\n", (int)il, (int)sw, (int)l2, (int)oob,
         (int)(((uintptr_t)map) % 64 == 0));
  memset(map, 0, sizeof *map);
  map->opaque[0] = (cuuint64_t)++mock_encodes;
  return (CUresult)env_int("MOCK_ENCODE_RC", 0);
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void** p, void** extra) {
  const char* name = (const char*)f;
  (void)s; (void)extra; (void)by; (void)bz;
  printf("launch %s grid %u %u %u block %u shared %u args", name, gx, gy, gz, bx, shared);
  if (strcmp(name, "gemm") == 0 || strcmp(name, "gemm__simt") == 0) {
    printf(" %llu %llu %llu %g %d %d %d", *(unsigned long long*)p[0], *(unsigned long long*)p[1],
           *(unsigned long long*)p[2], *(float*)p[3], *(int*)p[4], *(int*)p[5], *(int*)p[6]);
    if (strcmp(name, "gemm") == 0 && env_int("MOCK_CC", 90) == 90)
      printf(" maps %llu %llu %llu", (unsigned long long)((CUtensorMap*)p[7])->opaque[0],
             (unsigned long long)((CUtensorMap*)p[8])->opaque[0], (unsigned long long)((CUtensorMap*)p[9])->opaque[0]);
  } else if (strncmp(name, "gemmt", 5) == 0) {
    int i, nmaps = env_int("MOCK_CC", 90) != 90 ? 0 : strcmp(name, "gemmt") == 0 ? 3
                   : strcmp(name, "gemmt__stores") == 0 ? 2 : 0;
    printf(" %llu %llu %llu %d %d %d", *(unsigned long long*)p[0], *(unsigned long long*)p[1],
           *(unsigned long long*)p[2], *(int*)p[3], *(int*)p[4], *(int*)p[5]);
    if (nmaps) printf(" maps");
    for (i = 0; i < nmaps; ++i) printf(" %llu", (unsigned long long)((CUtensorMap*)p[6 + i])->opaque[0]);
  } else if (strcmp(name, "attn") == 0) {
    printf(" %llu %llu %d %d %d", *(unsigned long long*)p[0], *(unsigned long long*)p[1], *(int*)p[2], *(int*)p[3],
           *(int*)p[4]);
    if (env_int("MOCK_CC", 90) == 90) printf(" maps %llu", (unsigned long long)((CUtensorMap*)p[5])->opaque[0]);
  } else {
    printf(" %llu %llu %llu %d", *(unsigned long long*)p[0], *(unsigned long long*)p[1], *(unsigned long long*)p[2],
           *(int*)p[3]);
  }
  printf("\n");
  return CUDA_SUCCESS;
}
"""

MOCK_MAIN = r"""
#include "tma.h"
#include <stdlib.h>
#include <string.h>

static CUdeviceptr ptr(const char* s) { return (CUdeviceptr)strtoull(s, NULL, 0); }

int main(int argc, char** argv) {
  const char* mode = argv[1];
  CUresult rc = CUDA_SUCCESS;
  (void)argc;
  if (strcmp(mode, "gemm") == 0)
    rc = gemm_launch(0, ptr(argv[2]), ptr(argv[3]), ptr(argv[4]), 1.5f, atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
  else if (strcmp(mode, "gemmt") == 0)
    rc = gemmt_launch(0, ptr(argv[2]), ptr(argv[3]), ptr(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
  else if (strcmp(mode, "attn") == 0)
    rc = attn_launch(0, ptr(argv[2]), ptr(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
  else if (strcmp(mode, "va") == 0)
    rc = vector_add_launch(0, 16, 32, 48, atoi(argv[2]));
  printf("rc %d\n", (int)rc);
  return 0;
}
"""


def _images(cubin: bytes, va_entry: dict):
    """sm_90a: the TMA kernels (gemm with an internal fallback, attn without) and vector_add; sm_80:
    the same public kernels without tensor maps and without the fallback."""
    from tilec.targets.c_launcher.header import Image

    e = _entries()
    sm80 = [dict(copy.deepcopy(e["gemm"]), threads=256, shared_bytes=1000), copy.deepcopy(e["attn"]), va_entry]
    for k in sm80[:2]:
        del k["tensor_maps"]
        k.pop("fallback", None)
    t = _twin_entries()
    sm80 += [dict(copy.deepcopy(t["gemmt"]), threads=256, shared_bytes=1000)]
    for key in ("tensor_maps", "fallback", "direct_stores", "tma_only"):
        del sm80[-1][key]
    return [Image("sm80", "sm_80", cubin, sm80),
            Image("sm90", "sm_90a", cubin, [e["gemm"], e["attn"], va_entry, t["gemmt"], e["gemm__simt"],
                                            t["gemmt__stores"], t["gemmt__simt"]])]


@pytest.fixture(scope="module")
def vector_add_cubin(tmp_path_factory):
    if not shutil.which("nvcc"):
        pytest.skip("nvcc not found")
    d = tmp_path_factory.mktemp("va")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "tilec", str(ROOT / "samples" / "vector_add.tile"), "-t", "sm90",
                           "-o", str(d / "va.cubin")], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads((d / "va.cubin.json").read_text())["kernels"]
    return (d / "va.cubin").read_bytes(), entry


@pytest.fixture(scope="module")
def tma_programs(tmp_path_factory, vector_add_cubin):
    from test_deploy import cuda_include_dir

    from tilec.targets.c_launcher.header import generate_header

    gcc = shutil.which("gcc")
    inc = cuda_include_dir()
    if not gcc or not inc:
        pytest.skip("gcc or the CUDA toolkit's cuda.h not found")
    d = tmp_path_factory.mktemp("tma")
    text = generate_header("tma.h", _images(*vector_add_cubin), source_name="tma.tile", tilec_version="0",
                           toolchain="nvcc 13.0", driver_api_version=13000, source_hash="0" * 64)
    (d / "tma.h").write_text(text)
    (d / "driver.c").write_text(MOCK_DRIVER)
    (d / "main.c").write_text(MOCK_MAIN)
    flags = ["-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{inc}", f"-I{d}"]
    subprocess.run([gcc, "-std=c11", *flags, "-c", "driver.c", "-o", "driver.o"], cwd=d, check=True)
    subprocess.run([gcc, "-std=c11", *flags, "main.c", "driver.o", "-o", "prog_c", "-lpthread"], cwd=d, check=True)
    progs = {"c": d / "prog_c", "text": text}
    gxx = shutil.which("g++")
    if gxx:
        shutil.copy(d / "main.c", d / "main.cpp")
        subprocess.run([gxx, "-std=c++17", *flags, "main.cpp", "driver.o", "-o", "prog_cpp", "-lpthread"], cwd=d,
                       check=True)
        progs["c++"] = d / "prog_cpp"
    return progs


def _run(prog: Path, *args, **env) -> list[str]:
    proc = subprocess.run([str(prog), *map(str, args)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **{k: str(v) for k, v in env.items()}))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _lines(out: list[str], kind: str) -> list[str]:
    return [ln for ln in out if ln.startswith(kind + " ")]


A, B, C = 0x10000, 0x20000, 0x30000


def test_header_declares_no_launcher_for_internal_kernels(tma_programs):
    text = tma_programs["text"]
    assert "gemm_launch(CUstream stream" in text and "attn_launch(" in text and "vector_add_launch(" in text
    assert "gemm__simt_launch" not in text and "gemm__simt_check_device" not in text
    assert "launches 'gemm__simt' instead" in text
    assert "#define TILEC_LAUNCHER_COMMON_3" in text  # ABI 3: images carry a PTX flag


@pytest.mark.parametrize("lang", ["c", "c++"])
def test_header_encodes_tensor_maps(tma_programs, lang):
    if lang not in tma_programs:
        pytest.skip("g++ not found")
    prog = tma_programs[lang]
    M, K, N = 256, 128, 512
    out = _run(prog, "gemm", A, B, C, M, K, N)
    # the module's kernels, the fallback included, looked up once; the big one gets its shared memory
    assert _lines(out, "getfn") == ["getfn gemm", "getfn attn", "getfn vector_add", "getfn gemmt", "getfn gemm__simt",
                                    "getfn gemmt__stores", "getfn gemmt__simt"]
    assert _lines(out, "attr") == ["attr gemm 200000", "attr gemmt 200000", "attr gemmt__stores 199000"]
    tail = "elem 1 1 interleave 0 swizzle {} l2 3 oob 0 aligned 1"
    assert _lines(out, "encode") == [
        f"encode dt 6 rank 2 addr {A} dims {K} {M} strides {K * 2} box 64 128 " + tail.format(3),
        f"encode dt 6 rank 2 addr {B} dims {N} {K} strides {N * 2} box 64 64 " + tail.format(3),
        f"encode dt 6 rank 2 addr {A} dims {K} {M} strides {K * 2} box 32 64 " + tail.format(2)]
    assert _lines(out, "launch") == [f"launch gemm grid 4 2 1 block 384 shared 200000 args {A} {B} {C} 1.5 {M} {K} {N} "
                                     "maps 1 2 3"]
    assert out[-1] == "rc 0"
    # 4-D bf16, box [1, 64, 1, 64]
    out = _run(prog, "attn", 0x40000, 0x50000, 2, 8, 100)
    assert _lines(out, "encode") == ["encode dt 9 rank 4 addr 262144 dims 64 100 8 2 strides 128 12800 102400 box 64 1 "
                                     "64 1 elem 1 1 1 1 interleave 0 swizzle 3 l2 3 oob 0 aligned 1"]
    assert _lines(out, "launch") == ["launch attn grid 2 8 2 block 128 shared 0 args 262144 327680 2 8 100 maps 1"]


@pytest.mark.parametrize("lang", ["c", "c++"])
def test_header_falls_back_when_tma_cannot_address_the_tensors(tma_programs, lang):
    if lang not in tma_programs:
        pytest.skip("g++ not found")
    prog = tma_programs[lang]
    simt = "launch gemm__simt grid {} {} 1 block 128 shared 32768 args {} {} {} 1.5 {} {} {}"
    out = _run(prog, "gemm", A, B, C, 200, 100, 300)  # K = 100: a 200-byte row of A
    assert _lines(out, "encode") == []
    assert _lines(out, "launch") == [simt.format(5, 4, A, B, C, 200, 100, 300)] and out[-1] == "rc 0"
    out = _run(prog, "gemm", A, B, C, 256, 128, 100)  # N = 100: A encodes, B cannot
    assert len(_lines(out, "encode")) == 1
    assert _lines(out, "launch") == [simt.format(2, 4, A, B, C, 256, 128, 100)]
    out = _run(prog, "gemm", A + 8, B, C, 256, 128, 512)  # a misaligned pointer
    assert _lines(out, "encode") == [] and _lines(out, "launch") == [simt.format(8, 4, A + 8, B, C, 256, 128, 512)]
    out = _run(prog, "gemm", A, B, C, 64, 0, 64)  # K = 0 with work to do: nothing TMA can describe
    assert _lines(out, "launch") == [simt.format(1, 1, A, B, C, 64, 0, 64)]
    out = _run(prog, "gemm", A, B, C, 0, 128, 512)  # M = 0: an empty launch encodes nothing
    assert _lines(out, "encode") == [] and _lines(out, "launch") == [] and out[-1] == "rc 0"
    # no fallback: CUDA_ERROR_INVALID_VALUE, nothing launched
    out = _run(prog, "attn", 0x40008, 0x50000, 2, 8, 100)
    assert _lines(out, "launch") == [] and out[-1] == "rc 1"
    # the driver's error is returned as is
    out = _run(prog, "gemm", A, B, C, 256, 128, 512, MOCK_ENCODE_RC=700)
    assert len(_lines(out, "encode")) == 1 and _lines(out, "launch") == [] and out[-1] == "rc 700"


@pytest.mark.parametrize("lang", ["c", "c++"])
def test_header_launches_the_direct_stores_twin_when_only_the_output_is_misaligned(tma_programs, lang):
    if lang not in tma_programs:
        pytest.skip("g++ not found")
    prog = tma_programs[lang]
    assert "launches 'gemmt__stores', whose threads store the rest" in tma_programs["text"]
    out = _run(prog, "gemmt", A, B, C, 256, 128, 512)  # aligned: the TMA kernel, its three maps
    assert _lines(out, "launch") == [f"launch gemmt grid 4 2 1 block 384 shared 200000 args {A} {B} {C} 256 128 512 "
                                     "maps 1 2 3"]
    # N = 301: C's rows are 602 bytes; A and B encode (maps 1 and 2 of this call), and the twin gets them in its order
    out = _run(prog, "gemmt", A, B, C, 256, 128, 301)
    assert [ln.split(" addr ")[1].split()[0] for ln in _lines(out, "encode")] == [str(A), str(B)]
    assert _lines(out, "launch") == [f"launch gemmt__stores grid 3 2 1 block 384 shared 199000 args {A} {B} {C} 256 "
                                     "128 301 maps 1 2"]
    out = _run(prog, "gemmt", A, B, C + 8, 256, 128, 512)  # a misaligned C pointer alone: the twin too
    assert _lines(out, "launch")[0].startswith("launch gemmt__stores grid 4 2 1")
    # K = 100: A cannot be TMA's either: the no-TMA fallback
    out = _run(prog, "gemmt", A, B, C, 256, 100, 301)
    assert _lines(out, "launch") == [f"launch gemmt__simt grid 5 4 1 block 128 shared 32768 args {A} {B} {C} 256 100 "
                                     "301"]
    out = _run(prog, "gemmt", A, B, C, 256, 128, 301, MOCK_CC=86)  # the sm_80 image: neither twin
    assert _lines(out, "launch") == [f"launch gemmt grid 3 2 1 block 256 shared 1000 args {A} {B} {C} 256 128 301"]


def test_header_without_tma_on_the_older_image(tma_programs):
    prog = tma_programs["c"]
    out = _run(prog, "gemm", A, B, C, 200, 100, 300, MOCK_CC=86)  # the sm_80 image: no maps, no fallback kernel
    assert _lines(out, "getfn") == ["getfn gemm", "getfn attn", "getfn vector_add", "getfn gemmt"]
    assert _lines(out, "encode") == [] and _lines(out, "attr") == []
    assert _lines(out, "launch") == ["launch gemm grid 3 2 1 block 256 shared 1000 args "
                                     f"{A} {B} {C} 1.5 200 100 300"]
    out = _run(prog, "va", 3000)
    assert _lines(out, "launch") == ["launch vector_add grid 3 1 1 block 256 shared 0 args 16 32 48 3000"]


def test_header_refuses_bad_tensor_map_entries(vector_add_cubin):
    from tilec.targets.c_launcher.header import LauncherError, generate_header

    def gen(images):
        return generate_header("x.h", images, source_name="x.tile", tilec_version="0", toolchain="nvcc 13.0",
                               driver_api_version=13000, source_hash="")

    images = _images(*vector_add_cubin)
    images[1].kernels[0]["tensor_maps"][1]["swizzle"] = 48
    with pytest.raises(LauncherError, match="sm_90a: kernel 'gemm': tensor map 1: swizzle 48"):
        gen(images)
    images = _images(*vector_add_cubin)
    images[1].kernels[0]["fallback"] = "nope"
    with pytest.raises(LauncherError, match="fallback 'nope' is not in the manifest"):
        gen(images)
    images = _images(*vector_add_cubin)
    images[1].kernels[3]["sizes"] = ["M", "N", "K"]
    with pytest.raises(LauncherError, match="must take the same params and sizes"):
        gen(images)
