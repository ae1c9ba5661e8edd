"""Misaligned rows through the TMA kernel (issue #26): the manifest's "tma_only" (the tensors a TMA kernel reaches
through its tensor maps alone) and the tensor maps tilec.runtime encodes for a copy of such a tensor whose rows are
padded to 16 bytes. The launches themselves (torch tensors on the GPU, C poisoned with NaN, against torch) are
bench/misaligned_h200.py's `run` on the H200 (bench/RESULTS.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
from tilec.artifacts import kernel_entries, tma_only_tensors
from tilec.ir import dtypes as D
from tilec.ir import simt as S
from tilec.ir import tile as T
from tilec.ir.layout import c
from tilec.runtime.launch import padded_map_args
from tilec.runtime.tensor_maps import NoTma, TensorMapArgs, tensor_map_args, tensor_map_specs

ROOT = Path(__file__).resolve().parent.parent


def _spec(dtype: str, shape: list, box: list, swizzle: int = 0):
    p = {"name": "X", "kind": "tensor", "dtype": dtype, "output": False, "shape": shape}
    return tensor_map_specs({"name": "k", "params": [p], "tensor_maps": [{"tensor": "X", "box": box,
                                                                          "swizzle": swizzle}]})[0]


def test_padded_maps_keep_the_dims_and_pad_the_strides():
    a = _spec("f16", ["M", "K"], [128, 64], 128)
    assert isinstance(tensor_map_args(a, None, (200, 4099), 0x1000), NoTma)  # 8198-byte rows
    # the map keeps the tensor's dims (TMA zero-fills past K, clips stores past N); rows 8208 bytes apart
    assert padded_map_args(a, (200, 4099)) == TensorMapArgs(6, 2, (4099, 200), (8208,), (64, 128), 3)
    assert padded_map_args(a, (3, 8)).strides == (16,)  # already aligned: the same stride
    f8 = _spec("f8e4m3", ["M", "K"], [128, 128], 128)
    assert padded_map_args(f8, (97, 3003)).strides == (3008,)
    q = _spec("bf16", ["B", "S", "D"], [1, 64, 64], 128)
    assert padded_map_args(q, (2, 5, 7)) == TensorMapArgs(9, 3, (7, 5, 2), (16, 80), (64, 64, 1), 3)
    assert padded_map_args(a, (0, 7)) is None
    assert padded_map_args(_spec("f16", ["M", "K"], [1, 8]), (2, 1 << 40)) is None  # a stride past TMA's limit


def _kernel(body, params):
    return S.SKernel("k", params, [], [c(1)], 128, [], 0, body, None,
                     attrs={"tensor_maps": [{"tensor": "A", "box": [64, 64], "swizzle": 128},
                                            {"tensor": "B", "box": [64, 64], "swizzle": 128},
                                            {"tensor": "C", "box": [64, 64], "swizzle": 128}],
                            "tensor_map_params": [T.Var(D.I64, None, f"tl_tmap{i}", "param") for i in range(3)]})


def test_tma_only_leaves_out_tensors_the_threads_touch():
    A, B, C = (S.SBuffer(n, D.F16, "global") for n in "ABC")
    smem = S.SBuffer("A_s", D.F16, "shared", 4096)
    maps = [T.Var(D.I64, None, f"tl_tmap{i}", "param") for i in range(3)]

    def load(m):
        return S.call(None, "tma_load", rank=2, args=[m, S.AddrOf(D.I64, None, smem, c(0)),
                                                      S.AddrOf(D.I64, None, smem, c(0)), c(0), c(0)])

    store = S.call(None, "tma_store", rank=2, args=[maps[2], S.AddrOf(D.I64, None, smem, c(0)), c(0), c(0)])
    body = [load(maps[0]), S.SFor(None, T.Var(D.I32, None, "i", "loop"), c(0), c(4), [load(maps[1])]), store]
    assert tma_only_tensors(_kernel(body, [A, B, C])) == {"A": "load", "B": "load", "C": "store"}
    # B also read by a thread (inside a branch), C also stored to: neither may be handed a padded copy
    read = S.SIf(None, T.Const(D.BOOL, None, True), [S.SStore(None, smem, c(0), S.Ref(D.F16, None, B, c(3)))])
    body2 = [*body, read, S.SStore(None, C, c(0), T.Const(D.F16, None, 0.0))]
    assert tma_only_tensors(_kernel(body2, [A, B, C])) == {"A": "load"}
    # a tensor both loaded and stored through maps: left out too
    body3 = [load(maps[0]), S.call(None, "tma_store", rank=2, args=[maps[0], S.AddrOf(D.I64, None, smem, c(0)),
                                                                     c(0), c(0)])]
    assert tma_only_tensors(_kernel(body3, [A, B, C])) == {}


@pytest.mark.parametrize("flags", [[], ["-Dtrans_B=True"]])
def test_gemm_manifest_lists_its_tma_only_tensors(flags):
    from tilec.cli.common import parse_defines

    r = tilec.compile(ROOT / "samples" / "gemm.tile", target="sm90", defines=parse_defines(
        ["block_N=256", "block_K=64", "threads=256", "num_stages=4", *[f[2:] for f in flags]]))
    entries = {e["name"]: e for e in kernel_entries(r)}
    assert entries["gemm"]["tma_only"] == {"A": "load", "B": "load", "C": "store"}
    assert "tma_only" not in entries["gemm__no_tma"]


def test_padding_is_chosen_where_the_fallback_blocks_have_enough_work():
    from test_tensor_maps import _entries

    from tilec.runtime.launch import PAD_MIN_BLOCK_FLOPS, PAD_MIN_FLOPS
    from tilec.runtime.module import Module

    e = _entries()  # gemm: flops 2*M*N*K; its fallback's grid ceildiv(N, 64) x ceildiv(M, 64)
    gemm = Module(b"\0", {"kind": "cubin", "archs": ["sm_90a"], "kernels": [e["gemm"], e["gemm__simt"]]}).gemm
    gemm._layout()

    def pays(M, N, K):
        return gemm._padding_pays({"M": M, "N": N, "K": K}, 0)

    def copied(m, n, k):  # A and B in, C in and out (f16)
        return 2 * (m * k + k * n + 2 * m * n)

    def pays_copying(m, n, k, inputs=True, nbytes=None):
        sizes = {"M": m, "N": n, "K": k}
        return gemm._padding_pays(sizes, 0, inputs, copied(m, n, k) if nbytes is None else nbytes)

    assert pays_copying(4095, 4095, 4095) and pays_copying(97, 1001, 3003)  # 64x64 fallback blocks of 3.4e7, 1.8e7
    # 130 blocks of 4.1e6 flops: padding won by 1.8x on the H200 with the deep 64-row tiles (s18), whose twins are slow
    assert pays_copying(127, 4099, 515) and pays_copying(127, 4099, 515, nbytes=127 * 515 * 2)
    assert not pays_copying(127, 4099, 480)  # 130 blocks of 3.8e6, and 6.5 MB to copy: the fallback is faster
    assert not pays_copying(1, 7, 9000)  # 1.3e5 flops in all: the copies' launches cost more than the fallback loses
    assert 2 * 64 * 64 * 1000 >= PAD_MIN_BLOCK_FLOPS and 2 * 200 * 200 * 700 >= PAD_MIN_FLOPS
    assert pays_copying(640, 640, 489) and not pays_copying(640, 640, 488)  # (the copies: more than flops / 500)
    # only the output misaligned: the fallback narrows its stores alone, so its blocks need twice the work to lose
    assert pays_copying(640, 640, 1250, inputs=False) and not pays_copying(640, 640, 1200, inputs=False)
    gemm._fallback = None  # without a fallback, padding is the only way
    assert pays(1, 7, 9)


class _TorchBase:
    """The fake torch's Tensor: what tilec.runtime's padding tests with isinstance (the binder reads the arrays below
    through __cuda_array_interface__, like cupy's)."""


def _fake_torch(log: list):
    import contextlib
    import types

    from test_tensor_maps import DeviceArray

    class Tensor(DeviceArray, _TorchBase):
        def __init__(self, ptr, shape, itemsize=2):
            super().__init__(ptr, tuple(shape), "<f2" if itemsize == 2 else "|u1")
            self.dtype, self.device, self.itemsize = "float16" if itemsize == 2 else "uint8", "cuda:0", itemsize

        def data_ptr(self):
            return self.__cuda_array_interface__["data"][0]

        def element_size(self):
            return self.itemsize

        def numel(self):
            n = 1
            for d in self.shape:
                n *= d
            return n

        def get_device(self):
            return 0

        def record_stream(self, stream):
            log.append(("record_stream", self.data_ptr(), stream))

    torch = types.ModuleType("torch")
    torch.Tensor = _TorchBase
    torch.uint8 = "uint8"
    torch._C = types.SimpleNamespace()  # (no raw current stream: the generated fast path stays out)
    torch.cuda = types.SimpleNamespace(stream=lambda s: contextlib.nullcontext(), ExternalStream=lambda h, device: h,
                                       is_current_stream_capturing=lambda: False,
                                       current_stream=lambda device=None: types.SimpleNamespace(cuda_stream=0))
    heap = iter(range(1 << 32, 1 << 40, 1 << 24))  # workspaces: apart from the tensors below

    def empty(shape, dtype=None, device=None):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        buf = Tensor(next(heap), shape, 1 if dtype == "uint8" else 2)
        log.append(("empty", buf.data_ptr(), shape))
        return buf

    torch.empty = empty
    return torch, Tensor


PAD_ENTRY = {"name": "tilec_pad_rows", "sizes": [],  # how the fake driver decodes a launch of the pitched copy
             "params": [{"name": n, "kind": "tensor", "dtype": "u8"} for n in ("src", "dst")]
             + [{"name": n, "kind": "scalar", "dtype": "i64"} for n in ("rows", "width", "src_pitch", "dst_pitch")]
             + [{"name": n, "kind": "scalar", "dtype": "i32"} for n in ("src_unit", "dst_unit")]}


@pytest.mark.parametrize("full", [False, True], ids=["C_maybe_partly_written", "C_written_in_full"])
@pytest.mark.parametrize("pad_kernel", [True, False], ids=["tilec_pad_rows", "cuMemcpy2DAsync"])
def test_a_padded_launch_copies_in_launches_the_tma_kernel_on_the_workspace_and_copies_out(monkeypatch, pad_kernel,
                                                                                           full):
    """tilec.runtime's padded launch on the fake driver: A (K = 16001 f16: 32002-byte rows), B and C (N = 129 f16)
    go through workspaces with 16-byte rows; A and B are copied in before the launch, C out after it (and in before
    it, unless the manifest says the kernel writes all of C: written_in_full);
    the kernel's pointer slots and maps are the workspaces' (padded strides, the tensors' own dims), and a later
    call of another shape with aligned rows launches with no copies. The copies are launches of the module's
    tilec_pad_rows (loads and stores as wide as each side's alignment), or, in a module without it, the driver's
    pitched copy."""
    import sys

    from fake_cuda import FakeDriver, install
    from test_tensor_maps import GEMM_PARAMS, _entries

    from tilec.runtime.module import Module

    log: list = []
    torch, Tensor = _fake_torch(log)
    monkeypatch.setitem(sys.modules, "torch", torch)
    e = _entries()
    params = [dict(p) for p in GEMM_PARAMS]
    params[2].update(dtype="f16")  # C: f16 [M, N]
    gemm, simt = dict(e["gemm"], params=params), dict(e["gemm__simt"], params=params)
    gemm["tensor_maps"] = [{"tensor": "A", "box": [128, 64], "swizzle": 128},
                           {"tensor": "B", "box": [64, 64], "swizzle": 128},
                           {"tensor": "C", "box": [128, 64], "swizzle": 128}]
    gemm["tma_only"] = {"A": "load", "B": "load", "C": "store"}
    if full:
        gemm["written_in_full"] = ["C"]
    fake = install(monkeypatch, FakeDriver({"gemm": gemm, "gemm__simt": simt}))
    record = fake._record
    units, copy_streams = [], []

    def recorded(fn, *a, **k):
        record(fn, *a, **k)
        if fn != "tilec_pad_rows":
            log.append(("launch",))
            return
        pad = fake.launches.pop()
        src, dst, rows, width, src_pitch, dst_pitch, src_unit, dst_unit = pad.args
        log.append(("copy", src, dst, src_pitch, dst_pitch, width, rows))
        units.append((src_unit, dst_unit))
        copy_streams.append(pad.stream)

    fake._record = recorded
    fake.entries["tilec_pad_rows"] = PAD_ENTRY
    copy_rows = fake.copy_rows
    fake.copy_rows = lambda *a: (log.append(("copy", a[2], a[0], a[3], a[1], a[4], a[5])),
                                 copy_streams.append(a[-1]), copy_rows(*a))
    # a module whose manifest lists the pitched copy among its helpers, or one built before tilec carried it
    manifest = {"kind": "cubin", "archs": ["sm_90a"], "kernels": [gemm, simt]}
    if pad_kernel:
        manifest["helpers"] = ["tilec_pad_rows"]
    mod = Module(b"\0", manifest)
    M, N, K = 128, 129, 16001
    A, B, C = Tensor(0x100000, (M, K)), Tensor(0x200000, (K, N)), Tensor(0x300000, (M, N))
    plan = mod.gemm.launch_plan(A, B, C, 1.0)
    assert plan.kernel.name == "gemm" and plan.padding is not None
    mod.gemm(A, B, C, 1.0, stream=None)
    (launch,) = fake.launches
    # one workspace of the three padded tensors, each at a 256-byte boundary: A (M x 16008), B (K x 136), C (M x 136)
    a_bytes, b_bytes, c_bytes = M * 16008 * 2, -(-K * 136 * 2 // 256) * 256, M * 136 * 2
    ((_, ws, shape), *rest) = log
    assert shape == (a_bytes + b_bytes + c_bytes,)
    wa, wb, wc = ws, ws + a_bytes, ws + a_bytes + b_bytes
    # (copy, from, to, from's pitch, to's pitch, width, rows): each a pitched copy into its place, C out after
    c_in = [] if full else [("copy", 0x300000, wc, N * 2, 272, N * 2, M)]  # what the kernel leaves stays the caller's
    assert rest == [("copy", 0x100000, wa, K * 2, 16008 * 2, K * 2, M), ("copy", 0x200000, wb, N * 2, 272, N * 2, K),
                    *c_in, ("launch",), ("copy", wc, 0x300000, 272, N * 2, N * 2, M)]
    assert launch.fn == "gemm" and launch.args == [wa, wb, wc, 1.0, M, K, N]
    # 2-byte wide on the caller's side (rows of 32002 and 258 bytes), 16 on the workspace's
    ins = ["copy"] * (2 + len(c_in))
    assert units == ([(2, 16)] * len(ins) + [(16, 2)] if pad_kernel else [])
    assert fake.copies == [] if pad_kernel else len(fake.copies) == len(ins) + 1
    by_marker = {i + 1: enc for i, enc in enumerate(fake.encodes)}
    a_map, b_map, c_map = (by_marker[m[0]] for m in launch.maps)  # in the kernel's map order
    assert a_map[2:6] == (wa, (K, M), (16008 * 2,), (64, 128)) and "padded rows" in a_map[7]
    assert b_map[2:6] == (wb, (N, K), (136 * 2,), (64, 64))
    assert c_map[2:6] == (wc, (N, M), (136 * 2,), (64, 128))
    # the next call on the stream: the same workspace, the maps already encoded, only the copies and the launch
    log.clear()
    encodes = len(fake.encodes)
    mod.gemm(A, B, C, 1.0, stream=None)
    assert [x[0] for x in log] == [*ins, "launch", "copy"] and len(fake.encodes) == encodes
    assert fake.launches[-1].args[:3] == [wa, wb, wc]
    mod.gemm.release_workspaces()  # given back: the next call allocates again
    log.clear()
    mod.gemm(A, B, C, 1.0, stream=None)
    assert log[0][0] == "empty"
    # an explicit stream: a workspace from torch's allocator for the call, held for that stream; copies on it
    log.clear()
    copy_streams.clear()
    mod.gemm(A, B, C, 1.0, stream=0x77)
    assert [x[0] for x in log] == ["empty", "record_stream", *ins, "launch", "copy"]
    assert log[1][2] == 0x77 and copy_streams == [0x77] * (len(ins) + 1) and fake.launches[-1].stream == 0x77
    # aligned rows: the TMA kernel with the caller's tensors, nothing copied
    log.clear()
    fake.launches.clear()
    A2, B2, C2 = Tensor(0x400000, (M, 16000)), Tensor(0x500000, (16000, 128)), Tensor(0x600000, (M, 128))
    assert mod.gemm.launch_plan(A2, B2, C2, 1.0).padding is None
    mod.gemm(A2, B2, C2, 1.0, stream=None)
    assert log == [("launch",)] and fake.launches[0].args[:3] == [0x400000, 0x500000, 0x600000]
    # C left out: allocated for the call (torch.empty through the runtime), so not copied in
    log.clear()
    fake.launches.clear()
    monkeypatch.setattr("tilec.runtime.launch.allocate_like", lambda like, shape, t: Tensor(0xB00000, shape))
    assert mod.gemm(A, B, 1.0, stream=None).data_ptr() == 0xB00000
    assert [x[0] for x in log] == ["copy", "copy", "launch", "copy"]  # (the kept workspace; C not copied in)
    assert log[-1][2] == 0xB00000
    # misaligned, but too little work a block for the copies to pay: the fallback, nothing copied
    log.clear()
    fake.launches.clear()
    A3, B3, C3 = Tensor(0x700000, (M, 1001)), Tensor(0x800000, (1001, N)), Tensor(0x900000, (M, N))
    assert mod.gemm.launch_plan(A3, B3, C3, 1.0).kernel.name == "gemm__simt"
    mod.gemm(A3, B3, C3, 1.0, stream=None)
    assert log == [("launch",)] and fake.launches[0].fn == "gemm__simt"
