"""The launches a padded TMA call or a multi-launch call queues, as the compiled launcher's steps
(tilec/runtime/fastlaunch.py Step; fastlaunch.c runs them, tests/test_fastlaunch.py checks how): each step replayed
here as fastlaunch.c's launch_steps does it -- a parameter from the call's slots or the word at a fixed address --
on the fake driver must launch exactly what the Python path launched for the same call (kernels, grids, every
argument, the tensor maps), so a later call served from C does what the first did."""

from __future__ import annotations

import ctypes
import json
import struct
import sys

import pytest
from fake_cuda import FakeDriver, install

import tilec
from tilec.runtime.fastlaunch import ALWAYS, IF_ALLOCATED, UNLESS_ALLOCATED, Step
from tilec.runtime.module import Module

_SCALARS = {"f32": "<f", "i32": "<i"}


def _replay(fake, steps, params, args, stream, allocated=False):
    """fastlaunch.c's launch_steps on the fake driver: the call's slots (a tensor's pointer, a scalar's bytes)."""
    slots = []
    for p, a in zip(params, args, strict=True):
        word = (a.data_ptr() if p["kind"] == "tensor"
                else int.from_bytes(struct.pack(_SCALARS[p["dtype"]], a).ljust(8, b"\0"), "little"))
        slots.append(ctypes.c_uint64(word))
    for st in steps:
        if (st.when == UNLESS_ALLOCATED and allocated) or (st.when == IF_ALLOCATED and not allocated):
            continue
        block = (ctypes.c_void_p * len(st.sources))(*[ctypes.addressof(slots[s]) if s >= 0 else f
                                                      for s, f in zip(st.sources, st.fixed, strict=True)])
        fake._record(st.fn, st.grid, st.threads, st.shared, stream, ctypes.addressof(block), st.cluster)


class Recorder:
    """A compiled launcher as far as filing goes: what the Python path files in it."""

    def __init__(self):
        self.filed = []

    def remember_steps(self, key, steps, owner, stream):
        self.filed.append((key, steps, stream))
        self.owner = owner  # (fastlaunch.c keeps it with the plan: the fixed addresses are its storage)
        return True


def _launched(fake, start=0):
    return [(ln.fn, ln.grid, ln.block, ln.shared, ln.stream, ln.args, ln.maps) for ln in fake.launches[start:]]


def _batch_decoded(fake):
    """The fake driver reading tilec_pad_batch's one parameter, the copies by value (launch.py _PadCopies), as
    its args: per copy, (src, dst, rows, width, src pitch, dst pitch, src unit, dst unit, blocks x, blocks y, first
    block)."""
    from fake_cuda import Launch

    from tilec.runtime.launch import _PadCopies

    record = fake._record

    def recorded(fn, grid, threads, shared, stream, params, cluster=None):
        if fn != "tilec_pad_batch":
            return record(fn, grid, threads, shared, stream, params, cluster)
        copies = _PadCopies.from_address(ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))[0])
        args = [tuple(getattr(c, f) for f, _ in c._fields_) for c in copies.copy[:copies.count]]
        fake.launches.append(Launch(fn, tuple(grid), (threads, 1, 1), shared, stream, args, [], []))

    fake._record = recorded


@pytest.mark.parametrize("batch", [False, True], ids=["a launch a copy", "tilec_pad_batch"])
def test_a_padded_launchs_steps_replay_its_copies_kernel_and_copies_out(monkeypatch, batch):
    from test_padded_tma import PAD_ENTRY, _fake_torch
    from test_tensor_maps import GEMM_PARAMS, _entries

    log: list = []
    torch, Tensor = _fake_torch(log)
    monkeypatch.setitem(sys.modules, "torch", torch)
    e = _entries()
    params = [dict(p) for p in GEMM_PARAMS]
    params[2].update(dtype="f16")
    gemm, simt = dict(e["gemm"], params=params), dict(e["gemm__simt"], params=params)
    gemm["tensor_maps"] = [{"tensor": "A", "box": [128, 64], "swizzle": 128},
                           {"tensor": "B", "box": [64, 64], "swizzle": 128},
                           {"tensor": "C", "box": [128, 64], "swizzle": 128}]
    gemm["tma_only"] = {"A": "load", "B": "load", "C": "store"}
    fake = install(monkeypatch, FakeDriver({"gemm": gemm, "gemm__simt": simt, "tilec_pad_rows": PAD_ENTRY}))
    if batch:
        _batch_decoded(fake)
    mod = Module(b"\0", {"kind": "cubin", "archs": ["sm_90a"], "kernels": [gemm, simt],
                         "helpers": ["tilec_pad_rows", "tilec_pad_batch"] if batch else ["tilec_pad_rows"]})
    M, N, K = 128, 129, 16001
    A, B, C = Tensor(0x100000, (M, K)), Tensor(0x200000, (K, N)), Tensor(0x300000, (M, N))
    mod.gemm(A, B, C, 1.5)
    python = _launched(fake)
    copy = "tilec_pad_batch" if batch else "tilec_pad_rows"
    ncopies_in = 1 if batch else 3
    assert [x[0] for x in python] == [copy] * ncopies_in + ["gemm", copy]
    if batch:  # A, B and C in one launch, each into its place in the workspace; C out after the kernel
        (a, b, c), (c_out,) = python[0][5], python[2][5]
        assert (a[0], b[0], c[0]) == (0x100000, 0x200000, 0x300000) and c_out[1] == 0x300000
        assert a[2:6] == (M, K * 2, K * 2, 16008 * 2)
        # A's 32002-byte rows take 8 blocks of 256 threads a row, B's and C's 258-byte rows one: blocks laid out in turn
        assert [x[8:] for x in (a, b, c)] == [(8, M, 0), (1, K, 8 * M), (1, M, 8 * M + K)]
        assert python[0][1] == (8 * M + K + M, 1, 1) and python[0][2] == (256, 1, 1)
    stream = python[0][4]
    keep: list = []
    steps = mod.gemm.steps_for((A, B, C, 1.5), 0, stream, keep)
    nin, nfresh = (1, 1) if batch else (3, 2)
    assert steps is not None and [st.when for st in steps] == (
        [UNLESS_ALLOCATED] * nin + [IF_ALLOCATED] * nfresh + [ALWAYS] * 2)
    _replay(fake, steps, params, (A, B, C, 1.5), stream)
    assert _launched(fake, len(python)) == python
    start = len(fake.launches)
    _replay(fake, steps, params, (A, B, C, 1.5), stream, allocated=True)  # C made by the launcher: not copied in
    fresh = _launched(fake, start)
    assert [x[0] for x in fresh] == [copy] * (1 if batch else 2) + ["gemm", copy]
    if batch:
        assert [c[0] for c in fresh[0][5]] == [0x100000, 0x200000]
    # the Python path does the same with an output it allocated (C left out)
    start = len(fake.launches)
    plan = mod.gemm.launch_plan(A, B, C, 1.5)
    plan.padding.launch(mod.gemm, plan, (A, B, C, 1.5), (0x100000, 0x200000, 0x300000), stream, False, True)
    assert [x[0] for x in _launched(fake, start)] == [copy] * (1 if batch else 2) + ["gemm", copy]
    # the kernel reads the workspace's pointers and maps, the call's scalar: a planted slip (the caller's C) shows
    main = steps[nin + nfresh]
    assert main.sources[:4] == (-1, -1, -1, 3)
    start = len(fake.launches)
    _replay(fake, [main._replace(sources=(-1, -1, 2, 3, *main.sources[4:]))], params, (A, B, C, 1.5), stream)
    assert _launched(fake, start)[0][5] != python[ncopies_in][5]
    # another stream has no kept workspace of these: no steps to give
    assert mod.gemm.steps_for((A, B, C, 1.5), 0, stream + 1, []) is None
    # a call on the kept workspace files them in the kernel's compiled launcher, under the key its C code builds
    mod.gemm._native = Recorder()
    mod.gemm(A, B, C, 1.5)
    ((key, filed, bound),) = mod.gemm._native.filed
    assert key == [M, K, K, N, M, N, 0x100000, 0x200000, 0x300000, 0] and bound == stream
    start = len(fake.launches)
    _replay(fake, [Step(*st) for st in filed], params, (A, B, C, 1.5), stream)
    assert _launched(fake, start) == python
    mod.gemm(A, B, C, 1.5, stream=5)  # an explicit stream: a fresh workspace for this call alone, nothing filed
    assert len(mod.gemm._native.filed) == 1


@pytest.fixture
def kept_torch(monkeypatch):
    from test_launches import _FakeTorchTensor, fake_torch_module

    torch = fake_torch_module(monkeypatch)
    torch.Tensor = _FakeTorchTensor
    return torch


def test_a_multi_launch_calls_steps_replay_every_stage_on_the_kept_workspace(tmp_path, monkeypatch, kept_torch):
    from test_launches import SPLIT

    from tilec.artifacts import manifest as make_manifest
    from tilec.runtime.arrays import TORCH_NAMES

    (tmp_path / "k.tile").write_text(SPLIT)
    result = tilec.compile(tmp_path / "k.tile", target="sm80")
    m = json.loads(json.dumps(make_manifest(result, "cubin", ["sm_80"], "test", {}, "k.cubin")))
    fake = install(monkeypatch, FakeDriver({k["name"]: k for k in m["kernels"]}, capability=(8, 0)))
    mod = Module(b"\0", m)
    x = kept_torch.Tensor(kept_torch, 0x1000, (45, 37), "f32")
    y = kept_torch.Tensor(kept_torch, 0x9000, (45,), "f32")
    rowsum = mod.rowsum
    rowsum._run((x, 0.5, y), None, None, None)
    python = _launched(fake)
    assert [x[0] for x in python] == ["rowsum__stage0", "rowsum__stage1"] and {x[4] for x in python} == {7}
    (ws,) = kept_torch.empties
    pieces = rowsum._scratch[((45, 37), (45,))][1]  # the scratch tensors' views of the kept workspace
    views = [kept_torch.Tensor(kept_torch, ws.ptr + off, shape, getattr(kept_torch, TORCH_NAMES[b["dtype"]]))
             for (off, _, shape), b in zip(pieces, rowsum.entry["scratch"], strict=True)]
    keep: list = []
    steps = rowsum._steps((x, 0.5, y), views, 0, 7, keep)
    # the public X, alpha and Y are the call's parameters 0, 1 and 2; the scratch P and Cnt the kept workspace's
    assert steps[0].sources[:3] == (0, -1, -1) and steps[1].sources[:3] == (1, 2, -1)
    assert [ctypes.c_uint64.from_address(steps[0].fixed[j]).value for j in (1, 2)] == [ws.ptr, ws.ptr + 512]
    _replay(fake, steps, rowsum.entry["params"], (x, 0.5, y), 7)
    assert _launched(fake, len(python)) == python
    rowsum._native = Recorder()  # the general path files them in the launcher of the kernel it serves
    rowsum._run((x, 0.5, y), None, None, rowsum)
    ((key, filed, bound),) = rowsum._native.filed
    assert key == [45, 37, 45, 0] and bound == 7 and [st[0] for st in filed] == [st.fn for st in steps]
    kept_torch.capturing = True  # under graph capture: a workspace of its own, nothing filed
    rowsum._run((x, 0.5, y), None, None, rowsum)
    assert len(rowsum._native.filed) == 1
    # a call with another X (same shape) replays with its pointer: the plan is not tied to X's address
    x2 = kept_torch.Tensor(kept_torch, 0x7000, (45, 37), "f32")
    start = len(fake.launches)
    _replay(fake, steps, rowsum.entry["params"], (x2, 0.25, y), 7)
    again = _launched(fake, start)
    assert again[0][5][0] == 0x7000 and again[1][5][0] == 0.25  # X's pointer, alpha's value: the call's
