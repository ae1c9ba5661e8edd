"""The compiled launcher (tilec/runtime/fastlaunch.c) on the CPU: it builds and imports here, reads torch tensors
through their DLPack exchange table, and launches through a fake cuLaunchKernel (a ctypes callback that records its
arguments) over host tensors -- so what reaches the driver (grid, block, stream, every kernel parameter) is checked
without a GPU. Everything it must leave to the Python path (which reports the errors) returns MISS untouched."""

from __future__ import annotations

import ctypes
import random

import pytest

torch = pytest.importorskip("torch")

from tilec.runtime import fastlaunch  # noqa: E402
from tilec.runtime.module import Module  # noqa: E402

if not fastlaunch.status()["native"]:
    pytest.skip(f"compiled launcher not available here: {fastlaunch.status()['why']}", allow_module_level=True)

MISS = object()
KDLCPU = 1
LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


def _t(name, dtype, shape, out=False):
    return {"name": name, "kind": "tensor", "dtype": dtype, "output": out, "shape": shape}


SCALE = {"name": "scale", "params": [_t("X", "f32", ["M", "N"]), {"name": "alpha", "kind": "scalar", "dtype": "f32"},
                                     {"name": "k", "kind": "scalar", "dtype": "i32"}, _t("Y", "f32", ["M", "N"], True),
                                     {"name": "flag", "kind": "scalar", "dtype": "bool"}],
         "sizes": ["M", "N"], "grid": ["ceildiv(M, 4)", "N", "1"], "threads": 128, "shared_bytes": 0}
GEMM = {"name": "gemm", "params": [_t("A", "bf16", ["M", "K"]), _t("B", "bf16", ["K", "N"]),
                                   _t("C", "bf16", ["M", "N"], True)],
        "sizes": ["M", "K", "N"], "grid": ["ceildiv(N, 128)", "ceildiv(M, 128)", "1"], "threads": 256,
        "shared_bytes": 0}


class Driver:
    """A fake cuLaunchKernel: records each launch's configuration and reads its parameters back."""

    def __init__(self, kernel, rc: int = 0) -> None:
        self.launches: list[dict] = []
        self.rc = rc
        self.nparams = len(kernel.entry["params"]) + len(kernel.entry["sizes"])
        self.kernel = kernel
        self.callback = LAUNCH(self._launch)
        self.address = ctypes.cast(self.callback, ctypes.c_void_p).value

    def _launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        got = []
        for i, p in enumerate(self.kernel.entry["params"]):
            if p["kind"] == "tensor":
                got.append(ctypes.c_uint64.from_address(params[i]).value)
            else:
                ct = {"f32": ctypes.c_float, "i32": ctypes.c_int32, "bool": ctypes.c_bool, "f16": ctypes.c_uint16,
                      "bf16": ctypes.c_uint16}[p["dtype"]]
                got.append(ct.from_address(params[i]).value)
        nsizes = len(self.kernel.entry["sizes"])
        sizes = [ctypes.c_int32.from_address(params[len(got) + j]).value for j in range(nsizes)]
        self.launches.append({"fn": fn, "grid": (gx, gy, gz), "block": (bx, by, bz), "shared": shared,
                              "stream": stream, "params": got, "sizes": sizes})
        return self.rc


class Plan:
    """What remember() reads of launch.py's _Plan."""

    def __init__(self, grid, sizes, fn=0x1234, threads=128, maps=()):
        self.empty, self.cluster, self.fn, self.grid = False, None, fn, grid
        self.threads, self.shared, self.sizes, self.map_addresses = threads, 0, sizes, list(maps)


def _setup(entry, rc=0):
    mod = Module(b"", {"manifest_version": 1, "kind": "cubin", "archs": ["sm_90a"], "kernels": [entry]})
    kernel = getattr(mod, entry["name"])
    layout = kernel._layout()
    drv = Driver(kernel, rc)
    launcher = fastlaunch.launcher_for(kernel, layout, MISS, launch=drv.address, device_type=KDLCPU)
    assert launcher is not None
    return kernel, layout, drv, launcher


def _remember(launcher, layout, args, plan):
    key = (*(tuple(args[t.index].shape) for t in layout.tensors), 0)
    fastlaunch.remember(launcher, layout, key, plan)


def test_extension_builds_and_describes_torch_tensors():
    ext = fastlaunch.extension()
    x = torch.zeros(5, 6, dtype=torch.bfloat16)[1:]
    dev_type, dev_id, dtype, shape, strides, ptr = ext.describe(x)
    assert (dev_type, dev_id, shape, strides, ptr) == (KDLCPU, 0, (4, 6), (6, 1), x.data_ptr())
    assert dtype == (4, 16, 1)  # kDLBfloat
    assert ext.describe(object()) is None
    assert fastlaunch.library_path().is_file()


def test_launch_passes_pointers_scalars_sizes_grid_and_stream():
    kernel, layout, drv, launcher = _setup(SCALE)
    M, N = random.randint(1, 50), random.randint(1, 50)
    x, y = torch.randn(M, N), torch.empty(M, N)
    args = (x, 1.5, -7, y, True)
    assert launcher.fast(args) is MISS  # no plan yet: the Python path makes it
    _remember(launcher, layout, args, Plan((-(-M // 4), N, 1), (M, N), threads=128))
    assert launcher.fast(args) is y
    (call,) = drv.launches
    assert call["fn"] == 0x1234 and call["grid"] == (-(-M // 4), N, 1) and call["block"] == (128, 1, 1)
    assert call["stream"] is None  # torch's current work stream of the host: none
    assert call["params"] == [x.data_ptr(), 1.5, -7, y.data_ptr(), True]
    assert call["sizes"] == [M, N]
    assert launcher.stats()["hits"] == 1


@pytest.mark.parametrize("change", ["dtype", "strided", "shape", "count", "int_range", "bool_as_int", "float_as_str",
                                    "numpy", "subclass"])
def test_what_it_leaves_to_the_python_path(change):
    kernel, layout, drv, launcher = _setup(SCALE)
    x, y = torch.randn(6, 10), torch.empty(6, 10)
    args = [x, 0.5, 3, y, False]
    _remember(launcher, layout, args, Plan((2, 10, 1), (6, 10)))
    if change == "dtype":
        args[0] = x.double()
    elif change == "strided":
        args[0] = torch.randn(10, 6).t()
    elif change == "shape":
        args[0], args[3] = torch.randn(7, 10), torch.empty(7, 10)
    elif change == "count":
        args.append(1)
    elif change == "int_range":
        args[2] = 2**31
    elif change == "bool_as_int":
        args[4] = 1
    elif change == "float_as_str":
        args[1] = "0.5"
    elif change == "numpy":
        args[0] = x.numpy()
    elif change == "subclass":
        args[0] = torch.nn.Parameter(x)
    assert launcher.fast(tuple(args)) is MISS
    assert drv.launches == []
    assert launcher.fast((x, 0.5, 3, y, False)) is y and len(drv.launches) == 1


def test_allocates_left_out_outputs():
    kernel, layout, drv, launcher = _setup(SCALE)
    x = torch.randn(9, 33)
    _remember(launcher, layout, (x, 0.0, 0, torch.empty(9, 33), False), Plan((3, 33, 1), (9, 33)))
    y = launcher.fast((x, 2.0, 1, False))
    assert isinstance(y, torch.Tensor) and y.shape == (9, 33) and y.dtype == torch.float32
    assert drv.launches[-1]["params"] == [x.data_ptr(), 2.0, 1, y.data_ptr(), False]
    gk, glayout, gdrv, glauncher = _setup(GEMM)  # C's N is no input's size: gemm has no allocating form here
    a, b = torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(8, 16, dtype=torch.bfloat16)
    assert glauncher.fast((a, b)) is MISS


def test_failed_launch_returns_miss_and_drops_allocations():
    kernel, layout, drv, launcher = _setup(SCALE, rc=201)  # CUDA_ERROR_INVALID_CONTEXT
    x = torch.randn(4, 4)
    _remember(launcher, layout, (x, 0.0, 0, torch.empty(4, 4), False), Plan((1, 4, 1), (4, 4)))
    assert launcher.fast((x, 1.0, 1, False)) is MISS
    assert len(drv.launches) == 1  # tried once; the Python path retries with a current context


def test_pointer_keyed_plans_for_tma_kernels():
    kernel, layout, drv, launcher = _setup(GEMM)
    layout.key_has_pointers = True  # what a TMA kernel's layout says; its plans hold the encoded tensor maps
    launcher = fastlaunch.launcher_for(kernel, layout, MISS, launch=drv.address, device_type=KDLCPU)
    a, b, c = (torch.randn(*s, dtype=torch.bfloat16) for s in ((64, 32), (32, 128), (64, 128)))
    maps = (ctypes.c_uint8 * 128)(), (ctypes.c_uint8 * 128)()
    key = ((64, 32), (32, 128), (64, 128), a.data_ptr(), b.data_ptr(), c.data_ptr(), 0)
    fastlaunch.remember(launcher, layout, key, Plan((1, 1, 1), (64, 32, 128), maps=[ctypes.addressof(m) for m in maps]))
    assert launcher.fast((a, b, c)) is c
    assert launcher.fast((a, b, c.clone())) is MISS  # another address: another plan


def test_clustered_plans_launch_through_cuLaunchKernelEx():
    """A kernel launched in thread-block clusters (gemm's 64x128 on a (2, 1) cluster): its plan is filed only where
    the launcher has cuLaunchKernelEx, which receives the grid, block, shared bytes, stream and the cluster dimension
    in cuda.h's CUlaunchConfig (read back through the ctypes structures the Python path launches with)."""
    from tilec.runtime.cuda_driver import CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CUlaunchConfig

    kernel, layout, drv, _ = _setup(GEMM)
    got = []

    def launch_ex(config, fn, params, extra):
        c = config.contents
        attr = c.attrs[0]
        got.append({"grid": (c.gridDimX, c.gridDimY, c.gridDimZ), "block": (c.blockDimX, c.blockDimY, c.blockDimZ),
                    "shared": c.sharedMemBytes, "stream": c.hStream, "attrs": c.numAttrs, "id": attr.id,
                    "cluster": tuple(attr.value[:3]), "fn": fn,
                    "A": ctypes.c_uint64.from_address(params[0]).value,
                    "K": ctypes.c_int32.from_address(params[4]).value})
        return 0

    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(CUlaunchConfig), ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(launch_ex)
    a, b, c = (torch.randn(*s, dtype=torch.bfloat16) for s in ((256, 64), (64, 256), (256, 256)))
    plan = Plan((2, 2, 1), (256, 64, 256), threads=128)
    plan.cluster, plan.shared = (2, 1, 1), 90112
    without = fastlaunch.launcher_for(kernel, layout, MISS, launch=drv.address, device_type=KDLCPU)
    _remember(without, layout, (a, b, c), plan)  # no cuLaunchKernelEx: declined, the Python path keeps it
    assert without.fast((a, b, c)) is MISS and without.stats()["plans"] == 0
    launcher = fastlaunch.launcher_for(kernel, layout, MISS, launch=drv.address, device_type=KDLCPU,
                                       launch_ex=ctypes.cast(callback, ctypes.c_void_p).value)
    _remember(launcher, layout, (a, b, c), plan)
    assert launcher.fast((a, b, c)) is c
    assert drv.launches == []  # not through cuLaunchKernel
    assert got == [{"grid": (2, 2, 1), "block": (128, 1, 1), "shared": 90112, "stream": None, "attrs": 1,
                    "id": CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "cluster": (2, 1, 1), "fn": 0x1234,
                    "A": a.data_ptr(), "K": 64}]


def test_unavailable_extension_falls_back(monkeypatch):
    monkeypatch.setattr(fastlaunch, "_state", {})
    monkeypatch.setenv("TILEC_NATIVE_LAUNCH", "0")
    assert fastlaunch.status() == {"native": False, "path": None, "why": "TILEC_NATIVE_LAUNCH=0"}
    mod = Module(b"", {"manifest_version": 1, "kind": "cubin", "archs": ["sm_90a"], "kernels": [SCALE]})
    assert fastlaunch.launcher_for(mod.scale, mod.scale._layout(), MISS, launch=1) is None


def test_missing_headers_are_reported(monkeypatch, tmp_path):
    import sysconfig

    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    with pytest.raises(RuntimeError, match="Python's headers are not installed"):
        fastlaunch.build(tmp_path / "x.so")
    monkeypatch.undo()
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(RuntimeError, match="no C compiler"):
        fastlaunch.build(tmp_path / "x.so")


def test_time_launch_issues_the_found_launch_again():
    kernel, layout, drv, launcher = _setup(SCALE)
    x, y = torch.randn(3, 5), torch.empty(3, 5)
    args = (x, 1.0, 2, y, True)
    assert launcher.time_launch(args, 10) == -1.0 and drv.launches == []  # no plan: nothing launched here
    _remember(launcher, layout, args, Plan((1, 5, 1), (3, 5)))
    assert launcher.time_launch(args, 10) >= 0 and len(drv.launches) == 11


def test_the_documented_command_names_the_extension(tmp_path):
    """`python -m tilec.runtime.fastlaunch` (docs/deploy.md): builds the extension where TILEC_NATIVE_DIR says and
    prints its path; with the launcher switched off, says why on stderr and exits 1."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "TILEC_NATIVE_DIR": str(tmp_path)}
    ok = subprocess.run([sys.executable, "-m", "tilec.runtime.fastlaunch"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    built = Path(ok.stdout.strip())
    assert built.is_file() and built.parent.parent == tmp_path and built.name == "tilec_fastlaunch.abi3.so"
    off = subprocess.run([sys.executable, "-m", "tilec.runtime.fastlaunch"], capture_output=True, text=True,
                         env={**env, "TILEC_NATIVE_LAUNCH": "0"})
    assert off.returncode == 1 and "not available: TILEC_NATIVE_LAUNCH=0" in off.stderr


HALF = {"name": "halves", "params": [_t("X", "f32", ["N"]), {"name": "h", "kind": "scalar", "dtype": "f16"},
                                     {"name": "b", "kind": "scalar", "dtype": "bf16"}, _t("Y", "f32", ["N"], True)],
        "sizes": ["N"], "grid": ["ceildiv(N, 256)", "1", "1"], "threads": 256, "shared_bytes": 0}


def _half_values():
    rng = random.Random()
    edge = [0.0, -0.0, 1.0, -2.5, 65504.0, 65519.99, -65519.0, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-9, 3e38,
            -3.3e38, float("inf"), float("-inf"), 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8, 1 + 3 * 2**-8, 7]
    return edge + [rng.uniform(-1, 1) * 10 ** rng.uniform(-9, 6) for _ in range(300)]


def test_half_precision_scalars_are_rounded_as_the_python_path_rounds_them():
    """f16 / bf16 scalars: the bits in the slot are launch.py's _f16_bits / _bf16_bits of the value (round to nearest
    even, subnormals, infinities); what those refuse (too large for f16, beyond f32 for bf16) and NaN are misses."""
    import struct

    from tilec.runtime.launch import _bf16_bits, _f16_bits

    kernel, layout, drv, launcher = _setup(HALF)
    n = random.randint(1, 999)
    x, y = torch.randn(n), torch.empty(n)
    _remember(launcher, layout, (x, 0.0, 0.0, y), Plan((-(-n // 256), 1, 1), (n,), threads=256))
    for v in _half_values():
        try:
            want_h = _f16_bits(v)
        except (OverflowError, struct.error):
            want_h = None
        try:
            want_b = _bf16_bits(v)
        except (OverflowError, struct.error):
            want_b = None
        before = len(drv.launches)
        got = launcher.fast((x, v, 1.0, y))
        if want_h is None:
            assert got is MISS and len(drv.launches) == before, v
        else:
            assert got is y and ctypes.c_uint16(drv.launches[-1]["params"][1]).value == want_h, v
        got = launcher.fast((x, 1.0, v, y))
        if want_b is None:
            assert got is MISS, v
        else:
            assert got is y and ctypes.c_uint16(drv.launches[-1]["params"][2]).value == want_b, v
    assert launcher.fast((x, float("nan"), 1.0, y)) is MISS  # NaN's bits: the Python path's
    assert launcher.fast((x, 1, 2, y)) is y  # ints are numbers too
    assert [ctypes.c_uint16(p).value for p in drv.launches[-1]["params"][1:3]] == [_f16_bits(1.0), _bf16_bits(2.0)]


class Cai:
    """A bare __cuda_array_interface__ exporter (over a host torch tensor here: the fake driver reads host memory)."""

    def __init__(self, t, typestr=None, strides=None):
        self.t = t
        self.iface = {"shape": tuple(t.shape), "typestr": typestr or "<f4", "strides": strides,
                      "data": (t.data_ptr(), False), "version": 3}

    @property
    def __cuda_array_interface__(self):
        return self.iface


class CaiInstance:
    """One whose interface is an instance attribute (arrays.py's "other" adapter reads it)."""

    def __init__(self, t):
        self.__cuda_array_interface__ = Cai(t).iface


def test_cuda_array_interface_objects_launch_on_the_legacy_stream():
    from tilec.runtime.arrays import adapter

    kernel, layout, drv, launcher = _setup(SCALE)
    # At least two rows and columns: with one, the column-major strides below describe a C-contiguous
    # array (a dimension of extent 1 has no stride), and the fast path rightly accepts it.
    M, N = random.randint(2, 40), random.randint(2, 40)
    x, y = torch.randn(M, N), torch.empty(M, N)
    args = (Cai(x), 0.5, 2, Cai(y), True)
    assert adapter(Cai).kind == "cuda_array_interface"
    assert launcher.fast(args) is MISS and launcher.reader(Cai) == 0  # not taught yet
    key = ((M, N), (M, N), 0)
    fastlaunch.remember(launcher, layout, key, Plan((-(-M // 4), N, 1), (M, N)), args)
    assert launcher.reader(Cai) == 2
    assert launcher.fast(args) is args[3]
    call = drv.launches[-1]
    assert call["params"] == [x.data_ptr(), 0.5, 2, y.data_ptr(), True] and call["stream"] is None
    assert call["sizes"] == [M, N] and call["grid"] == (-(-M // 4), N, 1)
    row = N * 4
    for bad in (Cai(x, typestr="<f8"), Cai(x, typestr=">f4"), Cai(x, strides=(4, 4 * M)), Cai(torch.randn(M + 1, N))):
        assert launcher.fast((bad, 0.5, 2, Cai(y), True)) is MISS  # the Python path reports (or accepts) these
    assert launcher.fast((Cai(x, strides=(row, 4)), 0.5, 2, Cai(y), True)) is not MISS  # explicit C strides
    assert launcher.fast((Cai(x), 0.5, 2, y, True)) is MISS  # a torch tensor beside it: mixed kinds
    assert launcher.fast((Cai(x), 0.5, 2)) is MISS  # only an exchange table allocates here
    inst = (CaiInstance(x), 0.5, 2, CaiInstance(y), True)
    assert adapter(CaiInstance).kind == "other" and launcher.fast(inst) is MISS
    fastlaunch.remember(launcher, layout, key, Plan((-(-M // 4), N, 1), (M, N)), inst)
    assert launcher.reader(CaiInstance) == 2 and launcher.fast(inst) is inst[3]
    bare = CaiInstance(x)
    del bare.__cuda_array_interface__  # arrays.py refuses it, with a message: the Python path's
    assert launcher.fast((bare, 0.5, 2, CaiInstance(y), True)) is MISS


def test_cupy_arrays_launch_on_cupys_current_stream(monkeypatch):
    """cupy arrays (a stand-in with cupy's fields: the test machine has no GPU) are read from dtype, _c_contiguous,
    shape, data.ptr and data.device_id, and launched on cupy's current stream of their device."""
    import sys
    import types

    import numpy as np

    class MemoryPointer:
        def __init__(self, ptr, device_id):
            self.ptr, self.device_id = ptr, device_id

    class ndarray:  # noqa: N801  (cupy's name)
        __module__ = "cupy._core.core"
        data = None  # a class attribute in cupy (a read-only field), as arrays.py's classification looks for

        def __init__(self, t, device_id=0, dtype=None, contiguous=True):
            self.t, self.shape, self._c_contiguous = t, tuple(t.shape), contiguous
            self.dtype = np.dtype("float32") if dtype is None else dtype
            self.data = MemoryPointer(t.data_ptr(), device_id)

        @property
        def device(self):
            return types.SimpleNamespace(id=self.data.device_id)

        @property
        def flags(self):
            return types.SimpleNamespace(c_contiguous=self._c_contiguous)

    streams = {0: 0x5000}
    made = []

    def empty(shape, dtype):
        made.append(ndarray(torch.empty(shape, dtype=getattr(torch, dtype)), dtype=np.dtype(dtype)))
        return made[-1]

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=streams[0]),
                                      runtime=types.SimpleNamespace(getDevice=lambda: 0))
    fake.empty = empty
    monkeypatch.setitem(sys.modules, "cupy", fake)
    kernel, layout, drv, launcher = _setup(SCALE)
    M, N = random.randint(1, 40), random.randint(1, 40)
    x, y = torch.randn(M, N), torch.empty(M, N)
    args = (ndarray(x), -1.25, 9, ndarray(y), False)
    fastlaunch.remember(launcher, layout, ((M, N), (M, N), 0), Plan((-(-M // 4), N, 1), (M, N)), args)
    assert launcher.reader(ndarray) == 3
    assert launcher.fast(args) is args[3]
    assert drv.launches[-1]["stream"] == 0x5000 and drv.launches[-1]["params"] == [x.data_ptr(), -1.25, 9,
                                                                                  y.data_ptr(), False]
    streams[0] = 0x6000  # the current stream is asked at every call
    assert launcher.fast(args) is args[3] and drv.launches[-1]["stream"] == 0x6000
    for bad in (ndarray(x, dtype=np.dtype("float64")), ndarray(x, contiguous=False), ndarray(x, device_id=1)):
        assert launcher.fast((bad, -1.25, 9, ndarray(y), False)) is MISS
    out = launcher.fast((args[0], 3.0, 1, True))  # the output left out: cupy.empty of its dtype and shape
    assert out is made[-1] and out.shape == (M, N) and drv.launches[-1]["params"][3] == out.data.ptr
    # the allocator runs Python, during which another thread may refile the plans: the plan is found again after
    fake.empty = lambda shape, dtype: launcher.forget() or empty(shape, dtype)
    before = len(drv.launches)
    assert launcher.fast((args[0], 3.0, 1, True)) is MISS and len(drv.launches) == before


def test_a_kernel_call_enters_the_compiled_launcher_without_a_python_frame():
    """With torch imported, a module's kernels are of a Kernel subclass over the extension's KernelBase: once a
    launcher is attached, a call that hits runs in C alone; keywords (stream=, sync=), misses and a kernel without
    a launcher go to the class's Python __call__ (`_python_call`)."""
    kernel, layout, drv, launcher = _setup(SCALE)
    from tilec.runtime.launch import Kernel

    assert isinstance(kernel, Kernel) and isinstance(kernel, fastlaunch.extension().KernelBase)
    assert type(kernel).__name__ == "Kernel" and "scale" in repr(kernel)
    calls = []
    kernel._python_call = lambda *a, **kw: calls.append((a, kw)) or "python"
    M, N = random.randint(1, 30), random.randint(1, 30)
    x, y = torch.randn(M, N), torch.empty(M, N)
    args = (x, 0.5, 3, y, True)
    assert kernel(*args) == "python" and calls == [(args, {})]  # no launcher attached yet
    kernel._attach(launcher)
    _remember(launcher, layout, args, Plan((-(-M // 4), N, 1), (M, N)))
    assert kernel(*args) is y and len(calls) == 1 and drv.launches[-1]["params"][0] == x.data_ptr()
    assert kernel(*args, stream=5) == "python" and calls[-1] == (args, {"stream": 5})
    assert kernel(x.double(), 0.5, 3, y, True) == "python"  # a miss
    kernel._attach(None)
    assert kernel(*args) == "python" and len(drv.launches) == 1
    with pytest.raises(TypeError):
        kernel._attach(object())


class RawDriver:
    """A fake cuLaunchKernel that reads each parameter of a launch as the 8 bytes at its address (as a step's kernel
    would: pointers, and the test's values), and a fake cuStreamIsCapturing whose answer the test sets."""

    def __init__(self, nparams: dict, rc=()) -> None:
        self.nparams, self.launches, self.rc, self.status, self.asked = nparams, [], list(rc), 0, []
        self.callback = LAUNCH(self._launch)
        self.address = ctypes.cast(self.callback, ctypes.c_void_p).value
        capturing = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))
        self.capturing_callback = capturing(self._capturing)
        self.capturing_address = ctypes.cast(self.capturing_callback, ctypes.c_void_p).value

    def _launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        words = [ctypes.c_uint64.from_address(params[j]).value for j in range(self.nparams[fn])]
        self.launches.append((fn, (gx, gy, gz), bx, shared, stream, words))
        return self.rc.pop(0) if self.rc else 0

    def _capturing(self, stream, status):
        self.asked.append(stream)
        status[0] = self.status
        return 0


UNLESS, IF = fastlaunch.UNLESS_ALLOCATED, fastlaunch.IF_ALLOCATED


def _steps_setup(capturing=True, rc=()):
    kernel, layout, _, _ = _setup(GEMM)
    layout.key_has_pointers = True
    drv = RawDriver({0x10: 3, 0x20: 4, 0x30: 2}, rc)
    launcher = fastlaunch.launcher_for(kernel, layout, MISS, launch=drv.address, device_type=KDLCPU,
                                       capturing=drv.capturing_address if capturing else 0)
    a, b, c = (torch.randn(*s, dtype=torch.bfloat16) for s in ((8, 4), (4, 16), (8, 16)))
    key = ((8, 4), (4, 16), (8, 16), a.data_ptr(), b.data_ptr(), c.data_ptr(), 0)
    values = (ctypes.c_uint64 * 4)(0xAAAA, 0xBBBB, 4, 0xCCCC)  # fixed: a workspace address, another, a size...
    at = [ctypes.addressof(values) + 8 * j for j in range(4)]
    steps = [fastlaunch.Step(0x10, (2, 3, 1), 64, 0, None, (0, -1, -1), (0, at[0], at[2])),  # copy A in
             fastlaunch.Step(0x30, (1, 1, 1), 32, 0, None, (2, -1), (0, at[3]), when=UNLESS),  # C in (passed)
             fastlaunch.Step(0x10, (9, 9, 9), 64, 0, None, (0, -1, -1), (0, at[0], at[2]), when=IF),  # (C made)
             fastlaunch.Step(0x20, (4, 1, 1), 256, 1024, None, (-1, 1, -1, -1), (at[0], 0, at[3], at[2])),
             fastlaunch.Step(0x30, (1, 1, 1), 32, 0, None, (-1, 2), (at[3], 0))]  # C out
    return kernel, layout, drv, launcher, (a, b, c), key, steps, values


def test_a_plan_of_several_launches_runs_them_in_order_from_the_call_and_fixed_addresses():
    """remember_steps: a padded launch's copies in, the kernel and the copy out, as the Python path files them
    (tilec/runtime/launch.py _Padding.steps): each parameter the call's (its pointer) or the word at a fixed
    address; the copies in for outputs the caller passed run, those for outputs the launcher allocated do not."""
    kernel, layout, drv, launcher, (a, b, c), key, steps, values = _steps_setup()
    assert fastlaunch.remember_steps(launcher, layout, key, steps, values, None)
    assert launcher.fast((a, b, c)) is c
    assert drv.launches == [(0x10, (2, 3, 1), 64, 0, None, [a.data_ptr(), 0xAAAA, 4]),
                            (0x30, (1, 1, 1), 32, 0, None, [c.data_ptr(), 0xCCCC]),
                            (0x20, (4, 1, 1), 256, 1024, None, [0xAAAA, b.data_ptr(), 0xCCCC, 4]),
                            (0x30, (1, 1, 1), 32, 0, None, [0xCCCC, c.data_ptr()])]
    assert drv.asked == []  # not bound to a stream: nothing to ask
    # the plan's order is the steps' order: planted swap of two steps shows
    drv.launches.clear()
    fastlaunch.remember_steps(launcher, layout, key, [steps[3], steps[0]], values, None)
    launcher.fast((a, b, c))
    assert [ln[0] for ln in drv.launches] == [0x20, 0x10]


def test_a_plan_bound_to_a_stream_launches_only_there_and_never_while_it_captures():
    kernel, layout, drv, launcher, args, key, steps, values = _steps_setup()
    assert fastlaunch.remember_steps(launcher, layout, key, steps, values, 0)  # torch's CPU stream: NULL
    assert launcher.fast(args) is args[2] and len(drv.launches) == 4 and drv.asked == [None]
    drv.status = 1  # CU_STREAM_CAPTURE_STATUS_ACTIVE: the Python path takes a fresh workspace
    assert launcher.fast(args) is MISS and len(drv.launches) == 4
    drv.status = 0
    with fastlaunch.held():  # a Python-path sequence on the kept workspace is between its launches
        assert launcher.fast(args) is MISS
    assert launcher.fast(args) is args[2] and len(drv.launches) == 8
    assert fastlaunch.remember_steps(launcher, layout, key, steps, values, 77)  # another stream's workspace
    assert launcher.fast(args) is MISS and len(drv.launches) == 8
    _, layout2, drv2, unbound, args2, key2, steps2, values2 = _steps_setup(capturing=False)
    assert not fastlaunch.remember_steps(unbound, layout2, key2, steps2, values2, 0)  # cannot check capture: declined
    assert unbound.stats()["plans"] == 0 and unbound.fast(args2) is MISS


def test_a_failed_first_launch_leaves_the_call_to_python_and_a_later_one_raises():
    _, layout, drv, launcher, args, key, steps, values = _steps_setup(rc=[201])
    fastlaunch.remember_steps(launcher, layout, key, steps, values, None)
    assert launcher.fast(args) is MISS and len(drv.launches) == 1  # nothing enqueued: the Python path retries
    drv.rc = [0, 0, 700]
    with pytest.raises(RuntimeError, match="launch 4 of 5"):  # (the third step is skipped: nothing allocated)
        launcher.fast(args)
    with pytest.raises(ValueError, match="source"):  # a source past the call's parameters is refused when filed
        fastlaunch.remember_steps(launcher, layout, key, [steps[0]._replace(sources=(9, -1, -1))], values, None)
    with pytest.raises(ValueError, match="source"):  # a fixed parameter with no address
        fastlaunch.remember_steps(launcher, layout, key, [steps[0]._replace(fixed=(0, 0, 0))], values, None)
    with pytest.raises(ValueError, match="when 3"):
        fastlaunch.remember_steps(launcher, layout, key, [steps[0]._replace(when=3)], values, None)


def test_a_step_maps_through_a_stage_mapping():
    """A multi-launch kernel's stage step over the public call: a public parameter's index, a scratch tensor's
    fixed address (sequence.py Launches._steps)."""
    step = fastlaunch.Step(1, (1, 1, 1), 32, 0, None, (0, 1, 2, -1), (0, 0, 0, 0x500))
    got = step.through({0: 4, 2: 0}, {1: 0x900})
    assert got.sources == (4, -1, 0, -1) and got.fixed == (0, 0x900, 0, 0x500)
