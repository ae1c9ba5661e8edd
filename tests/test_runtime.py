"""tilec.runtime without a GPU: manifest and driver version checks, argument validation before the
driver is touched, stream selection, asynchronous launches, omitted outputs, the plan cache and the
argument block, against the recording driver of tests/fake_cuda.py (tests/test_tensor_maps.py covers
the tensor-map encoding)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from fake_cuda import FakeDriver, install

import tilec.runtime as rt
from tilec.runtime import arrays, cuda_driver
from tilec.runtime.formulas import compile_formulas, evaluate
from tilec.runtime.module import SUPPORTED_MANIFEST_VERSIONS, Module


def _t(name, dtype, shape, out=False):
    return {"name": name, "kind": "tensor", "dtype": dtype, "output": out, "shape": shape}


def _s(name, dtype):
    return {"name": name, "kind": "scalar", "dtype": dtype}


SCALE = {"name": "scale", "params": [_t("X", "f32", ["M", "N"]), _s("alpha", "f32"), _s("n", "i32"),
                                     _s("h", "f16"), _s("b", "bf16"), _s("flag", "bool"),
                                     _t("Y", "f32", ["M", "N"], True)],
         "sizes": ["M", "N"], "grid": ["ceildiv(N, 256)", "M", "1"], "threads": 256, "shared_bytes": 0}
GEMM = {"name": "gemm", "params": [_t("A", "f16", ["M", "K"]), _t("B", "f16", ["K", "N2"]),
                                   _t("C", "f16", ["M", "N"], True)],
        "sizes": ["M", "K", "N2", "N"], "grid": ["ceildiv(N, 128)", "ceildiv(M, 128)", "1"], "threads": 128,
        "shared_bytes": 65536}
PERSISTENT = {"name": "persist", "params": [_t("X", "f16", ["N"]), _t("Y", "f16", ["N"], True)], "sizes": ["N"],
              "grid": ["min(ceildiv(N, 128), num_sms)", "1", "1"], "threads": 128, "shared_bytes": 0}


def _manifest(*entries, **extra):
    return {"manifest_version": 1, "kind": "cubin", "archs": ["sm_90a"], "driver_api_version": 13000,
            "toolchain": "nvcc 13.0.88", "kernels": list(entries), **extra}


@pytest.fixture
def fake(monkeypatch):
    return install(monkeypatch, FakeDriver({e["name"]: e for e in (SCALE, GEMM, PERSISTENT)}))


class Dev:
    """A device array through __cuda_array_interface__, at any address."""

    def __init__(self, ptr, shape, typestr="<f4"):
        self.shape = tuple(shape)
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": self.shape, "typestr": typestr,
                                         "strides": None, "version": 3}


# ---------------------------------------------------------------- manifests, driver, architecture


def _write(tmp_path, manifest, name="k.cubin"):
    (tmp_path / name).write_bytes(b"\0")
    (tmp_path / f"{name}.json").write_text(json.dumps(manifest))
    return tmp_path / name


def test_manifest_version_is_checked(tmp_path):
    assert isinstance(rt.load(_write(tmp_path, _manifest(SCALE))), Module)
    with pytest.raises(rt.ManifestError, match="manifest format 7 is newer than this tilec.runtime reads.*upgrade"):
        rt.load(_write(tmp_path, _manifest(SCALE, manifest_version=7)))
    bad = _manifest(SCALE)
    del bad["manifest_version"]
    with pytest.raises(rt.ManifestError, match="manifest format None is not one"):
        rt.load(_write(tmp_path, bad))
    (tmp_path / "k.cubin.json").write_text("{not json")
    with pytest.raises(rt.ManifestError, match="not a tilec manifest"):
        rt.load(tmp_path / "k.cubin")


def test_the_runtime_reads_what_the_compiler_writes():
    from tilec.artifacts import MANIFEST_VERSION

    assert MANIFEST_VERSION in SUPPORTED_MANIFEST_VERSIONS


def test_driver_version_is_checked(fake):
    fake.version = 12080
    mod = Module(b"\0", _manifest(SCALE))
    x = Dev(0x1000, (4, 300))
    with pytest.raises(rt.DriverTooOld, match=r"built with CUDA 13\.0 \(nvcc 13\.0\.88\), which needs a CUDA 13\.x "
                                              r"driver or newer; this driver supports CUDA 12\.8"):
        mod.scale(x, 1.0, 1, 1.0, 1.0, True, Dev(0x2000, (4, 300)))
    assert fake.loads == []  # refused before loading the binary
    fake.version = 13010
    mod.scale(x, 1.0, 1, 1.0, 1.0, True, Dev(0x2000, (4, 300)))
    assert len(fake.launches) == 1


def test_architecture_is_checked(fake):
    fake.capability = (8, 0)
    mod = Module(b"\0", _manifest(SCALE))
    with pytest.raises(rt.ArchitectureMismatch, match="built for sm_90a.*this GPU is sm_80"):
        mod.scale(Dev(0x1000, (4, 300)), 1.0, 1, 1.0, 1.0, True, Dev(0x2000, (4, 300)))


# ---------------------------------------------------------------- arguments, checked before the driver


@pytest.fixture
def no_gpu(monkeypatch):
    """A CPU-only machine: any use of the driver fails."""
    def refuse(cls, device=0):
        raise cuda_driver.CudaError("the CUDA driver (libcuda.so.1) is not available")

    monkeypatch.setattr(cuda_driver.Driver, "get", classmethod(refuse))


def test_arguments_are_checked_before_the_driver(no_gpu):
    mod = Module(b"\0", _manifest(SCALE, GEMM))
    x, y = np.ones((4, 300), np.float32), np.zeros((4, 300), np.float32)
    with pytest.raises(rt.ArgumentError, match="scale: 'X' has dtype float64, expected float32"):
        mod.scale(x.astype(np.float64), 1.0, 1, 1.0, 1.0, True, y)
    with pytest.raises(rt.ArgumentError, match="scalar 'alpha' is f32: pass a number, got str"):
        mod.scale(x, "1.0", 1, 1.0, 1.0, True, y)
    with pytest.raises(rt.ArgumentError, match="scalar 'n' is i32: pass an integer, got float 1.5"):
        mod.scale(x, 1.0, 1.5, 1.0, 1.0, True, y)
    with pytest.raises(rt.ArgumentError, match=r"scalar 'n' = 4294967296 does not fit i32"):
        mod.scale(x, 1.0, 2**32, 1.0, 1.0, True, y)
    with pytest.raises(rt.ArgumentError, match="scalar 'flag' is bool"):
        mod.scale(x, 1.0, 1, 1.0, 1.0, "yes", y)
    with pytest.raises(rt.ArgumentError, match="must be C-contiguous"):
        mod.scale(np.ones((300, 4), np.float32).T, 1.0, 1, 1.0, 1.0, True, y)
    with pytest.raises(rt.ArgumentError, match="size N is 300 from an earlier argument but 200 from 'Y'"):
        mod.scale(x, 1.0, 1, 1.0, 1.0, True, np.zeros((4, 200), np.float32))
    with pytest.raises(rt.ArgumentError, match=r"scale takes 7 argument\(s\) .*, or 6 without its outputs"):
        mod.scale(x, 1.0)
    with pytest.raises(rt.ArgumentError, match="must be a torch, cupy, DLPack or numpy array, got list"):
        mod.scale([[1.0]], 1.0, 1, 1.0, 1.0, True, y)
    with pytest.raises(rt.ArgumentError, match="'B' is on GPU 0 but 'A' is on the host"):
        mod.gemm(np.ones((4, 8), np.float16), Dev(0x1000, (8, 16), "<f2"), Dev(0x2000, (4, 16), "<f2"))
    # valid arguments get as far as the driver
    with pytest.raises(cuda_driver.CudaError, match="not available"):
        mod.scale(x, 1.0, 1, 1.0, 1.0, True, y)


def test_scalars_are_packed_in_their_types(fake):
    mod = Module(b"\0", _manifest(SCALE))
    mod.scale(Dev(0x1000, (4, 300)), 2, np.int64(-7), 1.5, 3.140625, np.bool_(True), Dev(0x2000, (4, 300)))
    args = fake.launches[0].args
    assert args[:2] == [0x1000, 2.0] and args[2] == -7 and args[5] is True and args[6] == 0x2000
    assert args[3] == struct.unpack("<H", struct.pack("<e", 1.5))[0]  # f16 bits
    assert args[4] == 0x4049  # bf16 bits of 3.140625 (0x40490000 as f32)
    assert args[7:] == [4, 300]


def test_bf16_bits_round_to_nearest_even():
    from tilec.runtime.launch import _bf16_bits

    assert _bf16_bits(1.0) == 0x3F80
    assert _bf16_bits(struct.unpack("<f", struct.pack("<I", 0x3F808000))[0]) == 0x3F80  # tie -> even
    assert _bf16_bits(struct.unpack("<f", struct.pack("<I", 0x3F818000))[0]) == 0x3F82  # tie -> even (up)
    assert _bf16_bits(struct.unpack("<f", struct.pack("<I", 0x3F808001))[0]) == 0x3F81
    assert _bf16_bits(float("nan")) & 0x7FC0 == 0x7FC0 and _bf16_bits(float("-inf")) == 0xFF80


# ---------------------------------------------------------------- asynchronous launches, streams


def test_device_arrays_launch_asynchronously_on_the_legacy_stream(fake):
    mod = Module(b"\0", _manifest(GEMM))
    a, b, c = Dev(0x1000, (300, 64), "<f2"), Dev(0x2000, (64, 200), "<f2"), Dev(0x3000, (300, 200), "<f2")
    assert mod.gemm(a, b, c) is c  # the output is returned
    (launch,) = fake.launches
    assert launch.stream == 0 and fake.syncs == [] and fake.allocs == []
    assert launch.grid == (2, 3, 1) and launch.shared == 65536 and fake.attrs == [("gemm", 65536)]
    assert launch.args == [0x1000, 0x2000, 0x3000, 300, 64, 200, 200]
    mod.gemm(a, b, c, sync=True)
    assert fake.syncs == [0]


class StreamObj:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


@pytest.mark.parametrize("stream, handle", [
    (77, 77), (StreamObj(cuda_stream=88), 88), (StreamObj(ptr=99), 99),
    (StreamObj(__cuda_stream__=lambda: (0, 55)), 55)])
def test_explicit_stream(fake, stream, handle):
    mod = Module(b"\0", _manifest(GEMM))
    mod.gemm(Dev(0x1000, (8, 8), "<f2"), Dev(0x2000, (8, 8), "<f2"), Dev(0x3000, (8, 8), "<f2"), stream=stream,
             sync=True)
    assert fake.launches[-1].stream == handle and fake.syncs == [handle]


def test_a_stream_of_the_wrong_kind_is_refused(fake):
    mod = Module(b"\0", _manifest(GEMM))
    with pytest.raises(rt.ArgumentError, match="stream='s0': expected a CUstream handle"):
        mod.gemm(Dev(0x1000, (8, 8), "<f2"), Dev(0x2000, (8, 8), "<f2"), Dev(0x3000, (8, 8), "<f2"), stream="s0")


class Framework:
    """An array type of a framework with a current stream (as torch and cupy have)."""

    def __init__(self, ptr, shape, device=0):
        self.ptr, self.shape, self.device = ptr, tuple(shape), device


def test_the_first_tensors_framework_gives_the_stream(fake):
    seen = []
    arrays.register_adapter(Framework, "framework", lambda a, p, s: (a.ptr, a.shape, a.device),
                            lambda device: seen.append(device) or 1000 + device)
    mod = Module(b"\0", _manifest(GEMM))
    a, b, c = Framework(0x1000, (8, 8)), Framework(0x2000, (8, 8)), Framework(0x3000, (8, 8))
    mod.gemm(a, b, c)
    assert fake.launches[-1].stream == 1000 and seen == [0]
    mod.gemm(a, b, c, stream=5)  # an explicit stream wins
    assert fake.launches[-1].stream == 5 and seen == [0]
    with pytest.raises(rt.ArgumentError, match="'B' is on GPU 1 but 'A' is on GPU 0"):
        mod.gemm(a, Framework(0x2000, (8, 8), device=1), c)


def test_torch_current_stream_is_read_as_an_int(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 4242 + device, raising=False)
    monkeypatch.setattr(arrays, "_torch_current_stream", None)
    assert arrays.adapter(torch.Tensor).kind == "torch"
    assert arrays.adapter(torch.Tensor).stream(1) == 4243


def test_dlpack_producers_are_told_the_stream():
    seen = []

    class Producer:  # a DLPack producer that says it is on a GPU: asked with the stream
        def __init__(self, device_type=2):
            self.data = np.ones(8, np.float32)
            self.shape = self.data.shape
            self.device_type = device_type

        def __dlpack_device__(self):
            return (self.device_type, 0)

        def __dlpack__(self, stream=None):
            seen.append(stream)
            return self.data.__dlpack__()  # (really on the host: refused below, by the capsule's device)

    p = arrays.TensorParam("k", 0, _t("X", "f32", ["N"]))
    with pytest.raises(rt.ArgumentError, match="DLPack tensor on device type 1, not a CUDA device"):
        arrays.adapter(Producer).view(Producer(), p, 33)
    with pytest.raises(rt.ArgumentError):
        arrays.adapter(Producer).view(Producer(), p, None)
    with pytest.raises(rt.ArgumentError):
        arrays.adapter(Producer).view(Producer(device_type=1), p, 33)  # a host producer gets no stream
    assert seen == [33, 1, None]  # no stream: the legacy default stream, spelled 1 by the protocol


def test_a_cpu_torch_tensor_is_refused_before_the_driver(no_gpu):
    torch = pytest.importorskip("torch")
    mod = Module(b"\0", _manifest(GEMM))
    a = torch.ones(8, 8, dtype=torch.float16)
    with pytest.raises(rt.ArgumentError, match="'A' is a torch tensor on cpu; move it to the GPU"):
        mod.gemm(a, a, a)


def test_a_launch_that_fails_is_retried_with_the_context_pushed(fake):
    mod = Module(b"\0", _manifest(GEMM))
    fake.raw_results = [201]  # CUDA_ERROR_INVALID_CONTEXT: no context current on this thread
    mod.gemm(Dev(0x1000, (8, 8), "<f2"), Dev(0x2000, (8, 8), "<f2"), Dev(0x3000, (8, 8), "<f2"))
    assert fake.calls[-1] == "launch_packed" and len(fake.launches) == 1


# ---------------------------------------------------------------- numpy: staged and synchronous


def test_numpy_arrays_are_staged_and_synchronous(fake):
    mod = Module(b"\0", _manifest(GEMM))
    a, b = np.ones((300, 64), np.float16), np.ones((64, 200), np.float16)
    c = np.zeros((300, 200), np.float16)
    assert mod.gemm(a, b, c) is c
    assert len(fake.allocs) == 3 and sorted(fake.freed) == sorted(p for p, _ in fake.allocs)
    assert fake.syncs == [0] and fake.launches[0].args[:3] == [p for p, _ in fake.allocs]


# ---------------------------------------------------------------- outputs left out


def test_outputs_left_out_are_allocated_like_the_inputs(fake):
    mod = Module(b"\0", _manifest(SCALE))
    x = np.ones((4, 300), np.float32)
    y = mod.scale(x, 1.0, 1, 1.0, 1.0, True)
    assert isinstance(y, np.ndarray) and y.shape == (4, 300) and y.dtype == np.float32
    torch = pytest.importorskip("torch")
    mod2 = Module(b"\0", _manifest(SCALE))
    with pytest.raises(rt.ArgumentError, match="torch tensor on cpu"):  # allocated on cpu like X, then refused
        mod2.scale(torch.ones(4, 300), 1.0, 1, 1.0, 1.0, True)


def test_an_output_size_no_input_gives_must_be_passed(fake):
    mod = Module(b"\0", _manifest(GEMM))
    with pytest.raises(rt.ArgumentError, match="output 'C' needs the size N, which no input gives; pass the output"):
        mod.gemm(np.ones((4, 8), np.float16), np.ones((8, 16), np.float16))


# ---------------------------------------------------------------- plans and the argument block


def test_plans_are_cached_by_shape(fake):
    mod = Module(b"\0", _manifest(GEMM))
    k = mod.gemm
    a, b, c = Dev(0x1000, (300, 64), "<f2"), Dev(0x2000, (64, 200), "<f2"), Dev(0x3000, (300, 200), "<f2")
    k(a, b, c)
    k(Dev(0x5000, (300, 64), "<f2"), b, c)  # a new address, same shapes: the same plan (no TMA here)
    assert len(k._arguments.plans) == 1 and fake.launches[1].args[0] == 0x5000
    k(Dev(0x1000, (100, 64), "<f2"), b, Dev(0x3000, (100, 200), "<f2"))
    assert len(k._arguments.plans) == 2 and fake.launches[2].grid == (2, 1, 1)
    assert fake.launches[2].args[3:] == [100, 64, 200, 200]
    k(a, b, c)  # back to the first plan: its sizes are written again
    assert fake.launches[3].args[3:] == [300, 64, 200, 200]
    assert fake.loads == [b"\0"]  # the module is loaded once


def test_an_empty_grid_launches_nothing(fake):
    mod = Module(b"\0", _manifest(GEMM))
    mod.gemm(Dev(0x1000, (0, 64), "<f2"), Dev(0x2000, (64, 200), "<f2"), Dev(0x3000, (0, 200), "<f2"))
    assert fake.launches == []


def test_persistent_grids_read_the_multiprocessor_count(fake):
    fake.sms = 4
    mod = Module(b"\0", _manifest(PERSISTENT))
    mod.persist(Dev(0x1000, (100000,), "<f2"), Dev(0x2000, (100000,), "<f2"))
    mod.persist(Dev(0x1000, (300,), "<f2"), Dev(0x2000, (300,), "<f2"))
    assert [launch.grid for launch in fake.launches] == [(4, 1, 1), (3, 1, 1)]


def test_sizes_must_fit_32_bits(fake):
    mod = Module(b"\0", _manifest(PERSISTENT))
    with pytest.raises(rt.ArgumentError, match=r"size N = 4294967296 exceeds the kernel's 32-bit sizes"):
        mod.persist(Dev(0x1000, (2**32,), "<f2"), Dev(0x2000, (2**32,), "<f2"))


def test_bench_releases_its_events(fake):
    mod = Module(b"\0", _manifest(GEMM))
    r = mod.gemm.bench(np.ones((256, 64), np.float16), np.ones((64, 128), np.float16),
                       np.zeros((256, 128), np.float16), warmup=2, iters=5)
    assert r["ms"] == 0.5 and len(fake.launches) == 7
    assert len(fake.events) == 2 and fake.destroyed == fake.events
    assert sorted(fake.freed) == sorted(p for p, _ in fake.allocs)


# ---------------------------------------------------------------- formulas


def test_compiled_formulas_match_the_evaluator():
    texts = ["ceildiv(N, 128)", "M * 2 // 3 + N % 7", "min(max(M, 3), num_sms)", "1"]
    fn = compile_formulas(texts, ["M", "N", "num_sms"])
    for m, n, s in [(1, 1, 1), (1000, 77, 132), (0, 5, 2)]:
        sizes = {"M": m, "N": n, "num_sms": s}
        assert fn(m, n, s) == tuple(evaluate(t, sizes) for t in texts)


@pytest.mark.parametrize("text", ["__import__('os')", "N.bit_length()", "(lambda: 1)()", "N ** 2", "ceildiv(N)",
                                  "N if N else 1", "[N][0]"])
def test_formulas_refuse_anything_else(text):
    with pytest.raises((ValueError, KeyError)):
        compile_formulas([text], ["N"])
    with pytest.raises((ValueError, KeyError)):
        evaluate(text, {"N": 3})


# ---------------------------------------------------------------- the fast path for torch tensors


class _FakeTorch:
    """Enough of torch for the launch path: a Tensor type (its module is torch), dtypes, the raw current stream."""

    def __init__(self):
        import types

        self.module = types.ModuleType("torch")
        self.stream = 7
        self.module.float32, self.module.float16 = object(), object()

        class Tensor:
            __module__ = "torch"

            def __init__(tensor, ptr, shape, dtype=None, device=0, contiguous=True):
                tensor.ptr, tensor.shape, tensor.device_index = ptr, tuple(shape), device
                tensor.dtype = dtype if dtype is not None else self.module.float32
                tensor.contiguous = contiguous

            def get_device(tensor):
                return tensor.device_index

            def is_contiguous(tensor):
                return tensor.contiguous

            def data_ptr(tensor):
                return tensor.ptr

        self.module.Tensor = Tensor
        self.module._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: self.stream)


@pytest.fixture
def fake_torch(monkeypatch):
    import sys

    t = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", t.module)
    monkeypatch.setattr(arrays, "_torch_current_stream", None)
    return t


def test_torch_calls_take_the_fast_path_once_a_plan_and_stream_exist(fake, fake_torch, monkeypatch):
    from tilec.runtime.launch import Kernel

    mod = Module(b"\0", _manifest(GEMM))
    general = []
    original = Kernel._call
    monkeypatch.setattr(Kernel, "_call", lambda self, *a: general.append(a[1:]) or original(self, *a))
    T = fake_torch.module.Tensor
    f16 = fake_torch.module.float16
    a, b, c = T(0x1000, (300, 64), f16), T(0x2000, (64, 200), f16), T(0x3000, (300, 200), f16)
    assert mod.gemm(a, b, c) is c  # the first call: the general path makes the plan and the stream's launcher
    assert len(general) == 1
    assert mod.gemm(T(0x5000, (300, 64), f16), b, c) is c  # the fast path: a new address, the same plan
    assert len(general) == 1
    assert [x.args for x in fake.launches] == [[0x1000, 0x2000, 0x3000, 300, 64, 200, 200],
                                               [0x5000, 0x2000, 0x3000, 300, 64, 200, 200]]
    assert fake.launches[1].stream == 7 and fake.launches[1].grid == (2, 3, 1)
    mod.gemm(T(0x1000, (100, 64), f16), b, T(0x3000, (100, 200), f16))  # a new shape: the general path
    assert len(general) == 2 and fake.launches[2].args[3:] == [100, 64, 200, 200]
    mod.gemm(a, b, c)  # back to the first shape, fast: its sizes are written again
    assert len(general) == 2 and fake.launches[3].args[3:] == [300, 64, 200, 200]
    fake_torch.stream = 9  # another current stream: the general path makes its launcher, then it is fast
    mod.gemm(a, b, c)
    mod.gemm(a, b, c)
    assert len(general) == 3 and [x.stream for x in fake.launches[4:]] == [9, 9]
    mod.gemm(a, b, c, stream=3)  # an explicit stream, or sync: the general path
    assert len(general) == 4 and fake.launches[-1].stream == 3
    with pytest.raises(rt.ArgumentError, match="'B' has dtype"):  # errors come from the general path
        mod.gemm(a, T(0x2000, (64, 200)), c)
    with pytest.raises(rt.ArgumentError, match="must be contiguous"):
        mod.gemm(a, b, T(0x3000, (300, 200), f16, contiguous=False))
    with pytest.raises(rt.ArgumentError, match="is on GPU 1"):
        mod.gemm(a, T(0x2000, (64, 200), f16, device=1), c)
    assert len(fake.launches) == 7


def test_the_fast_path_stores_scalars_and_checks_them(fake, fake_torch):
    mod = Module(b"\0", _manifest(SCALE))
    T = fake_torch.module.Tensor
    x, y = T(0x1000, (4, 300)), T(0x2000, (4, 300))
    mod.scale(x, 1.5, 3, 0.5, 2.0, True, y)
    mod.scale(x, 2.5, -4, 0.25, 1.0, False, y)
    assert fake.launches[1].args[:6] == [0x1000, 2.5, -4, 0x3400, 0x3F80, False]
    with pytest.raises(rt.ArgumentError, match="scalar 'n' is i32: pass an integer"):
        mod.scale(x, 2.5, 1.5, 0.25, 1.0, False, y)
