"""Multi-launch kernels: one kernel function with `alloc_global` scratch and several `with T.Kernel(...)` blocks
(TileLang's split-and-combine kernels). The builder's split into internal stage kernels, the manifest's launches
entry, the interpreter, the SIMT model of each stage, the CUDA runtime's workspace and launch order (fake driver),
the diagnostics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fake_cuda import DeviceArray, FakeDriver, install, load_fake_module

import tilec
from tilec.artifacts import manifest as make_manifest
from tilec.diagnostics import CompileError
from tilec.interp.run import public_kernels, random_inputs, run_launches
from tilec.ir import tile as T

ROOT = Path(__file__).resolve().parent.parent

# Two partial sums per row (split over the columns), then a combine that also scales by a scalar; the
# scratch shapes use a const, a runtime size and a formula of it.
SPLIT = """
const block = 64
const parts = 2

kernel rowsum(X: f32[M, N], alpha: f32, Y: out f32[M]):
    P = T.alloc_global([M, parts], f32)
    Cnt = T.alloc_global((T.ceildiv(M, block),), i32)
    with T.Kernel(T.ceildiv(M, block), parts, threads=64) as (bx, part):
        acc = T.alloc_fragment((block,), f32)
        T.clear(acc)
        half = T.ceildiv(N, parts)
        for j in T.serial(half):
            for i in T.Parallel(block):
                col = part * half + j
                if bx * block + i < M and col < N:
                    acc[i] += X[bx * block + i, col]
        for i in T.Parallel(block):
            if bx * block + i < M:
                P[bx * block + i, part] = acc[i]
        if part == 0:
            Cnt[bx] = T.min(block, M - bx * block)
    with T.Kernel(T.ceildiv(M, block), threads=64) as (bx):
        for i in T.Parallel(block):
            if i < Cnt[bx]:
                Y[bx * block + i] = (P[bx * block + i, 0] + P[bx * block + i, 1]) * alpha
"""


def _write(tmp_path, text: str, name: str = "k.tile") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _errors(tmp_path, text: str) -> list:
    with pytest.raises(CompileError) as e:
        tilec.compile(_write(tmp_path, text))
    return [d for d in e.value.diagnostics if d.severity == "error"]


# ---------------------------------------------------------------- the split


def test_the_function_splits_into_internal_stage_kernels(tmp_path):
    m = tilec.compile(_write(tmp_path, SPLIT), verify=True).module
    assert [k.name for k in m.kernels] == ["rowsum__stage0", "rowsum__stage1"]
    s0, s1 = m.kernels
    assert all(k.attrs["stage_of"] == "rowsum" for k in m.kernels)
    # each stage takes the user's parameters it uses (signature order), then the scratch it uses
    assert [(p.name, getattr(p, "is_output", None)) for p in s0.params] == [("X", False), ("P", True), ("Cnt", True)]
    assert [(p.name, getattr(p, "is_output", None)) for p in s1.params] == [
        ("alpha", None), ("Y", True), ("P", False), ("Cnt", False)]
    assert [v.name for v in s0.size_vars] == ["M", "N"] and [v.name for v in s1.size_vars] == ["M"]
    # no IR node is shared between stages
    assert s0.params[1] is not s1.params[2]
    (seq,) = m.launches
    assert seq.name == "rowsum" and [p.name for p in seq.params] == ["X", "alpha", "Y"]
    assert [b.name for b in seq.scratch] == ["P", "Cnt"]
    assert [(st.kernel, st.args) for st in seq.stages] == [("rowsum__stage0", ["X", "P", "Cnt"]),
                                                           ("rowsum__stage1", ["alpha", "Y", "P", "Cnt"])]
    assert public_kernels(m) == [seq]


def test_emit_ir_prints_the_launch_sequence(tmp_path):
    text = tilec.compile(_write(tmp_path, SPLIT)).ir()
    assert text.rstrip().endswith("launches rowsum(X: f32[M, N], alpha: f32, Y: out f32[M])\n"
                                  "  scratch P: f32[M, 2]\n"
                                  "  scratch Cnt: i32[ceildiv(M, 64)]\n"
                                  "  launch rowsum__stage0(X, P, Cnt)\n"
                                  "  launch rowsum__stage1(alpha, Y, P, Cnt)")


def test_a_stage_takes_a_tensor_for_a_size_it_needs(tmp_path):
    """The second launch uses N only as a loop bound: it receives X (unused otherwise) so that N can be read off
    a shape."""
    src = """
kernel k(X: f32[M, N], Y: out f32[M]):
    S = T.alloc_global([M], f32)
    with T.Kernel(M, threads=32) as (bx):
        S[bx] = X[bx, 0]
    with T.Kernel(M, threads=32) as (bx):
        Y[bx] = S[bx]
        for j in T.serial(N):
            Y[bx] += 1.0
"""
    m = tilec.compile(_write(tmp_path, src), verify=True).module
    assert [p.name for p in m.kernels[1].params] == ["X", "Y", "S"]
    assert [v.name for v in m.kernels[1].size_vars] == ["M", "N"]
    args = random_inputs(m.launches[0], {"M": 3, "N": 4}, seed=0)
    run_launches(m, m.launches[0], args)
    np.testing.assert_allclose(args["Y"], args["X"][:, 0] + 4.0, rtol=1e-6)


def test_kernel_selects_a_multi_launch_kernel(tmp_path):
    src = SPLIT + """
kernel other(A: f32[K], B: out f32[K]):
    with T.Kernel(T.ceildiv(K, 32), threads=32) as (bx):
        for i in T.Parallel(32):
            if bx * 32 + i < K:
                B[bx * 32 + i] = A[bx * 32 + i]
"""
    path = _write(tmp_path, src)
    m = tilec.compile(path, kernel="rowsum").module
    assert [k.name for k in m.kernels] == ["rowsum__stage0", "rowsum__stage1"] and len(m.launches) == 1
    m = tilec.compile(path, kernel="other").module
    assert [k.name for k in m.kernels] == ["other"] and m.launches == []
    with pytest.raises(CompileError, match=r"no kernel named 'nope' \(kernels: other, rowsum\)"):
        tilec.compile(path, kernel="nope")


def test_the_manifest_lists_stages_and_scratch(tmp_path):
    result = tilec.compile(_write(tmp_path, SPLIT), target="sm80")
    m = make_manifest(result, "cubin", ["sm_80"], "test", {}, "k.cubin")
    assert [(k["name"], k.get("internal")) for k in m["kernels"]] == [("rowsum__stage0", True),
                                                                     ("rowsum__stage1", True)]
    (entry,) = m["launches"]
    assert entry["name"] == "rowsum" and entry["sizes"] == ["M", "N"]
    assert [p["name"] for p in entry["params"]] == ["X", "alpha", "Y"]
    assert entry["scratch"] == [
        {"name": "P", "dtype": "f32", "shape": ["M", 2], "offset": "0", "bytes": "((4 * M) * 2)"},
        {"name": "Cnt", "dtype": "i32", "shape": ["ceildiv(M, 64)"], "offset": "(ceildiv(((4 * M) * 2), 256) * 256)",
         "bytes": "(4 * ceildiv(M, 64))"}]
    from tilec.runtime.formulas import evaluate

    for M, want in ((1, 256 + 256), (32, 256 + 256), (33, 512 + 256), (1000, 8192 + 256)):
        assert evaluate(entry["workspace_bytes"], {"M": M}) == want
    assert [(s["kernel"], s["args"], s["grid"]) for s in entry["stages"]] == [
        ("rowsum__stage0", ["X", "P", "Cnt"], ["ceildiv(M, 64)", "2", "1"]),
        ("rowsum__stage1", ["alpha", "Y", "P", "Cnt"], ["ceildiv(M, 64)", "1", "1"])]
    assert "(" in entry["flops"] and "+" in entry["bytes"]


def test_single_launch_manifests_have_no_launches_key(tmp_path):
    result = tilec.compile(ROOT / "samples" / "gemm.tile", target="sm80")
    m = make_manifest(result, "cubin", ["sm_80"], "test", {}, "k.cubin")
    assert "launches" not in m and not any(k.get("internal") for k in m["kernels"])


# ---------------------------------------------------------------- the interpreter


def _rowsum_reference(args):
    return args["X"].astype(np.float64).sum(axis=1) * args["alpha"]


@pytest.mark.parametrize("M, N", [(64, 64), (45, 37), (1, 3)])
def test_the_interpreter_runs_the_stages_in_order(tmp_path, M, N):
    m = tilec.compile(_write(tmp_path, SPLIT), verify=True).module
    (seq,) = m.launches
    args = random_inputs(seq, {"M": M, "N": N}, seed=M * 100 + N)
    assert set(args) == {"X", "alpha", "Y"}  # the caller never sees the scratch
    run_launches(m, seq, args)
    np.testing.assert_allclose(args["Y"], _rowsum_reference(args), rtol=1e-5, atol=1e-5)


def test_scratch_starts_as_nan_so_unwritten_reads_show(tmp_path):
    """The first launch leaves half of P unwritten (part 1 is skipped): the combine reads NaN there."""
    src = SPLIT.replace("if bx * block + i < M:\n                P[", "if bx * block + i < M and part == 0:\n"
                                                                  "                P[")
    m = tilec.compile(_write(tmp_path, src)).module
    args = random_inputs(m.launches[0], {"M": 40, "N": 8}, seed=1)
    run_launches(m, m.launches[0], args)
    assert np.isnan(args["Y"]).all()


def test_tilec_run_runs_a_multi_launch_kernel(tmp_path):
    import subprocess
    import sys

    path = _write(tmp_path, SPLIT)
    out = subprocess.run([sys.executable, "-m", "tilec", "run", str(path), "--size", "M=45,N=37"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("kernel rowsum:\n  Y: f32[45]")


@pytest.mark.parametrize("target", ["sm80", "gfx942"])
def test_each_stage_lowered_matches_the_interpreter(tmp_path, target):
    """Every stage's SIMT lowering, executed lane by lane, on the scratch the interpreter's earlier stages left."""
    from tilec.interp import run_kernel
    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup

    path = _write(tmp_path, SPLIT)
    front = tilec.compile(path).module
    lowered = tilec.compile(path, target=target)
    sizes = {"M": 100, "N": 37}
    space = random_inputs(front.launches[0], sizes, seed=5)
    space["P"] = np.full((100, 2), np.nan, np.float32)
    space["Cnt"] = np.full((2,), -1, np.int32)
    for k in front.kernels:
        args = {p.name: np.array(space[p.name], copy=True) if isinstance(space[p.name], np.ndarray)
                else space[p.name] for p in k.params}
        want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
        run_kernel(k, want)
        sk = next(s for s in lowered.simt.kernels if s.name == k.name)
        run_simt(sk, args, {v.name: sizes[v.name] for v in k.size_vars}, warp_size=lookup(target).warp_size)
        for p in k.params:
            if isinstance(p, T.Buffer) and p.is_output:
                np.testing.assert_allclose(args[p.name], want[p.name], rtol=1e-5, atol=1e-5, err_msg=p.name)
        space.update(want)
    np.testing.assert_allclose(space["Y"], _rowsum_reference(space), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- diagnostics


CHOICE = """
const parts = 2

kernel rowsum(X: f32[M, N], Y: out f32[M]):
    if parts == 1:
        with T.Kernel(T.ceildiv(M, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < M:
                    acc = 0.0
                    for j in T.serial(N):
                        acc += X[bx * 64 + i, j]
                    Y[bx * 64 + i] = acc
    elif parts == 2:
        P = T.alloc_global([parts, M], f32)
        with T.Kernel(T.ceildiv(M, 64), parts, threads=64) as (bx, part):
            for i in T.Parallel(64):
                if bx * 64 + i < M:
                    acc = 0.0
                    for j in T.serial(T.ceildiv(N, parts)):
                        if part * T.ceildiv(N, parts) + j < N:
                            acc += X[bx * 64 + i, part * T.ceildiv(N, parts) + j]
                    P[part, bx * 64 + i] = acc
        with T.Kernel(T.ceildiv(M, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < M:
                    Y[bx * 64 + i] = P[0, bx * 64 + i] + P[1, bx * 64 + i]
    else:
        pass
"""


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_a_function_level_if_on_consts_chooses_the_launches(tmp_path, parts):
    """`if` / `elif` / `else` at a kernel function's level keeps the branch its consts choose, before the launches are
    split: one launch, two with scratch, or (an empty branch) no kernel body at all."""
    path = _write(tmp_path, CHOICE)
    if parts == 3:
        assert [d.message for d in _compile_errors(path, parts=parts)] == [
            "a kernel body must be one `with Kernel(grid..., threads=N) as (bx, by, ...):` block"]
        return
    module = tilec.compile(path, defines={"parts": parts}).module
    (unit,) = public_kernels(module)
    assert isinstance(unit, T.Launches) == (parts == 2)
    x = np.random.default_rng(parts).standard_normal((70, 33)).astype(np.float32)
    y = np.zeros(70, np.float32)
    if parts == 2:
        run_launches(module, unit, {"X": x, "Y": y})
    else:
        from tilec.interp import run_kernel

        run_kernel(unit, {"X": x, "Y": y})
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-5, atol=1e-5)


def _compile_errors(path, **defines):
    with pytest.raises(CompileError) as e:
        tilec.compile(path, defines=defines)
    return [d for d in e.value.diagnostics if d.severity == "error"]


def test_a_function_level_if_on_a_runtime_value_is_refused_at_its_condition(tmp_path):
    from tilec.diagnostics import render

    path = _write(tmp_path, CHOICE.replace("if parts == 1:", "if M > 64:"))
    with pytest.raises(CompileError) as e:
        tilec.compile(path)
    (d,) = [d for d in e.value.diagnostics if d.severity == "error"]
    assert d.message.startswith("an `if` at a kernel function's level chooses the function's launches at compile "
                                "time: its condition must be a const expression")
    assert (d.span.line, d.span.col) == (5, 8)
    assert render(d, e.value.sources, False).splitlines()[1:] == ["      if M > 64:", "         ^~~~~~"]


def test_statements_between_launches_are_refused_at_their_line(tmp_path):
    src = SPLIT.replace("    with T.Kernel(T.ceildiv(M, block), threads=64)", "    x = 3\n"
                        "    with T.Kernel(T.ceildiv(M, block), threads=64)")
    (e,) = _errors(tmp_path, src)
    assert "may hold only scratch allocations" in e.message and e.span.line == 22 and e.span.col == 5


def test_a_tile_op_between_launches_is_refused(tmp_path):
    src = SPLIT.replace("    with T.Kernel(T.ceildiv(M, block), threads=64)", "    T.fill(Y, 0)\n"
                        "    with T.Kernel(T.ceildiv(M, block), threads=64)")
    (e,) = _errors(tmp_path, src)
    assert "may hold only scratch allocations" in e.message and e.span.line == 22


def test_alloc_global_inside_a_launch_is_refused(tmp_path):
    src = SPLIT.replace("        acc = T.alloc_fragment((block,), f32)",
                        "        acc = T.alloc_fragment((block,), f32)\n        Q = T.alloc_global([M], f32)")
    (e,) = _errors(tmp_path, src)
    assert "at the kernel function's level" in e.message and e.span.line == 10


def test_alloc_global_in_a_single_launch_kernel_is_refused_inside(tmp_path):
    src = """
kernel k(A: f32[M], B: out f32[M]):
    with T.Kernel(M, threads=32) as (bx):
        S = T.alloc_global([M], f32)
        B[bx] = A[bx]
"""
    (e,) = _errors(tmp_path, src)
    assert "T.alloc_global allocates a scratch tensor shared by the launches" in e.message and e.span.line == 4


def test_a_scratch_shape_may_not_use_a_block_index(tmp_path):
    src = SPLIT.replace("P = T.alloc_global([M, parts], f32)", "P = T.alloc_global([M, bx], f32)")
    errs = _errors(tmp_path, src)
    assert "a scratch shape is fixed for all launches: 'bx' is a block index" in errs[0].message
    assert errs[0].span.line == 6 and errs[0].span.col == 28


def test_a_scratch_shape_may_not_use_an_unknown_size(tmp_path):
    src = SPLIT.replace("P = T.alloc_global([M, parts], f32)", "P = T.alloc_global([M, Q], f32)")
    errs = _errors(tmp_path, src)
    assert "'Q' in a scratch shape is neither a const nor a runtime size" in errs[0].message
    assert (errs[0].span.line, errs[0].span.col) == (6, 28)


def test_a_scratch_shape_may_not_use_a_scalar_parameter(tmp_path):
    src = SPLIT.replace("P = T.alloc_global([M, parts], f32)", "P = T.alloc_global([M, alpha], f32)")
    errs = _errors(tmp_path, src)
    assert any("'alpha' is a scalar kernel parameter" in e.message or "integer" in e.message for e in errs)
    assert errs[0].span.line == 6


def test_reading_scratch_no_earlier_launch_wrote_is_an_error(tmp_path):
    src = """
kernel k(A: f32[M], B: out f32[M]):
    S = T.alloc_global([M], f32)
    U = T.alloc_global([M], f32)
    with T.Kernel(M, threads=32) as (bx):
        S[bx] = A[bx]
    with T.Kernel(M, threads=32) as (bx):
        B[bx] = S[bx] + U[bx]
"""
    (e,) = _errors(tmp_path, src)
    assert "reads the scratch tensor 'U', which no earlier launch writes" in e.message
    assert (e.span.line, e.span.col) == (8, 25)  # the read of U


def test_a_launch_may_read_scratch_it_writes_itself(tmp_path):
    src = """
kernel k(A: f32[M], B: out f32[M]):
    S = T.alloc_global([M], f32)
    with T.Kernel(M, threads=32) as (bx):
        S[bx] = A[bx] * 2.0
        B[bx] = S[bx]
    with T.Kernel(M, threads=32) as (bx):
        B[bx] = B[bx] + S[bx]
"""
    m = tilec.compile(_write(tmp_path, src)).module
    args = random_inputs(m.launches[0], {"M": 5}, seed=2)
    run_launches(m, m.launches[0], args)
    np.testing.assert_allclose(args["B"], args["A"] * 4.0, rtol=1e-6)


def test_redefining_a_parameter_as_scratch_is_refused(tmp_path):
    src = SPLIT.replace("P = T.alloc_global([M, parts], f32)", "X = T.alloc_global([M, parts], f32)")
    errs = _errors(tmp_path, src)
    assert "'X' is already defined" in errs[0].message and errs[0].span.line == 6


def test_grid_and_threads_are_checked_per_launch(tmp_path):
    src = SPLIT.replace("with T.Kernel(T.ceildiv(M, block), threads=64) as (bx):",
                        "with T.Kernel(T.ceildiv(M, block), threads=0) as (bx):")
    (e,) = _errors(tmp_path, src)
    assert "threads must be positive" in e.message and e.span.line == 22


# ---------------------------------------------------------------- tilec.runtime (CUDA), with the fake driver


Dev = DeviceArray


@pytest.fixture
def loaded(tmp_path, monkeypatch):
    return load_fake_module(monkeypatch, tilec.compile(_write(tmp_path, SPLIT), target="sm80"))


def test_the_runtime_exposes_the_public_signature_only(loaded):
    mod, _ = loaded
    assert list(mod.kernels) == ["rowsum"]
    assert repr(mod.rowsum) == "<tilec multi-launch kernel rowsum(X: f32[M, N], alpha: f32, Y: out f32[M])>"
    with pytest.raises(AttributeError):
        mod.rowsum__stage0  # noqa: B018


def test_device_arrays_launch_the_stages_in_order_in_one_workspace(loaded):
    mod, fake = loaded
    x, y = Dev(0x1000, (45, 37)), Dev(0x9000, (45,))
    assert mod.rowsum(x, 0.5, y) is y
    assert [ln.fn for ln in fake.launches] == ["rowsum__stage0", "rowsum__stage1"]
    assert [ln.grid for ln in fake.launches] == [(1, 2, 1), (1, 1, 1)]
    ((ws, nbytes),) = fake.allocs  # one workspace: P (45 * 2 * 4 bytes, rounded to 512), then Cnt
    assert nbytes == mod.rowsum.workspace_bytes(x, 0.5, y) == 512 + 256
    s0, s1 = fake.launches
    assert s0.args == [0x1000, ws, ws + 512, 45, 37]  # X, P, Cnt, then the sizes M, N
    assert s1.args[:1] == [0.5] and s1.args[1:] == [0x9000, ws, ws + 512, 45]
    assert {ln.stream for ln in fake.launches} == {0} and fake.syncs == []
    mod.rowsum(x, 0.5, y)  # the workspace of this stream is kept
    assert len(fake.allocs) == 1 and len(fake.launches) == 4
    mod.rowsum(Dev(0x1000, (3000, 37)), 0.5, Dev(0x9000, (3000,)))  # a bigger one: grown
    assert len(fake.allocs) == 2 and fake.freed == [ws]
    mod.rowsum(x, 0.5, y, stream=42, sync=True)  # another stream: its own workspace
    assert len(fake.allocs) == 3 and [ln.stream for ln in fake.launches[-2:]] == [42, 42] and fake.syncs[-1] == 42


def test_numpy_arguments_are_staged_once_and_the_outputs_copied_back(loaded):
    mod, fake = loaded
    x, y = np.ones((45, 37), np.float32), np.zeros(45, np.float32)
    assert mod.rowsum(x, 2.0, y) is y
    assert len(fake.allocs) == 3  # X, Y, the workspace
    (xp, _), (yp, _), (ws, nbytes) = fake.allocs
    assert nbytes == 768 and sorted(fake.freed) == sorted([xp, yp, ws])
    assert fake.launches[0].args[:3] == [xp, ws, ws + 512] and fake.launches[1].args[1:4] == [yp, ws, ws + 512]
    assert fake.syncs == [0]


def test_outputs_left_out_are_allocated(loaded):
    mod, fake = loaded
    y = mod.rowsum(np.ones((10, 4), np.float32), 1.0)
    assert y.shape == (10,) and y.dtype == np.float32 and len(fake.launches) == 2


def test_arguments_are_checked_before_anything_launches(loaded):
    import tilec.runtime as rt

    mod, fake = loaded
    with pytest.raises(rt.ArgumentError, match="size M is 45 from an earlier argument but 44 from 'Y'"):
        mod.rowsum(Dev(0x1000, (45, 37)), 0.5, Dev(0x9000, (44,)))
    with pytest.raises(rt.ArgumentError, match="scalar 'alpha' is f32"):
        mod.rowsum(Dev(0x1000, (45, 37)), "x", Dev(0x9000, (45,)))
    assert fake.launches == [] and fake.allocs == []


def test_bench_times_the_whole_sequence(loaded):
    mod, fake = loaded
    r = mod.rowsum.bench(np.ones((45, 37), np.float32), 1.0, np.zeros(45, np.float32), warmup=1, iters=3)
    assert r["ms"] == 0.5 and r["flops"] > 0 and r["bytes"] > 0
    assert [ln.fn for ln in fake.launches] == ["rowsum__stage0", "rowsum__stage1"] * 4  # warm-up + timed calls
    assert sorted(set(fake.freed)) == sorted(p for p, _ in fake.allocs[:2])  # the staged copies; the workspace kept


class _FakeTorchTensor:
    __module__ = "torch"

    def __init__(self, torch, ptr, shape, dtype, device=0):
        self.torch, self.ptr, self.shape, self.dtype, self.device_index = torch, ptr, tuple(shape), dtype, device
        self.device = f"cuda:{device}"
        self.recorded = []

    def get_device(self):
        return self.device_index

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return self.ptr

    def numel(self):
        return self.shape[0]

    def __getitem__(self, s):
        return _FakeTorchTensor(self.torch, self.ptr + s.start, (s.stop - s.start,), self.dtype, self.device_index)

    def view(self, what):
        shape, dtype = (what, self.dtype) if isinstance(what, tuple) else (self.shape, what)
        return _FakeTorchTensor(self.torch, self.ptr, shape, dtype, self.device_index)

    def record_stream(self, s):
        self.recorded.append(s)


def fake_torch_module(monkeypatch):
    """A fake torch whose tensors the binder reads as torch's: an allocator, a current stream (7) and the flag of
    graph capture (`torch.capturing`)."""
    import sys
    import types

    from tilec.runtime import arrays

    torch = types.ModuleType("torch")
    torch.float32, torch.int32, torch.uint8 = "f32", "i32", "u8"
    torch.Tensor = _FakeTorchTensor
    torch.empties = []

    def empty(n, dtype, device):
        t = _FakeTorchTensor(torch, 0x50_0000 + 0x10000 * len(torch.empties), (n,), dtype)
        torch.empties.append(t)
        return t

    torch.empty = empty
    torch.capturing = False
    torch.cuda = types.SimpleNamespace(ExternalStream=lambda handle, device: ("stream", handle),
                                       is_current_stream_capturing=lambda: torch.capturing)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 7)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(arrays, "_torch_current_stream", lambda d: 7)
    return torch


@pytest.fixture
def fake_torch(monkeypatch):
    return fake_torch_module(monkeypatch)


def test_torch_tensors_get_a_workspace_from_torch_on_the_current_stream(loaded, fake_torch):
    mod, fake = loaded
    x = _FakeTorchTensor(fake_torch, 0x1000, (45, 37), "f32")
    y = _FakeTorchTensor(fake_torch, 0x9000, (45,), "f32")
    for _ in range(3):  # the stages' own fast paths take the later calls
        assert mod.rowsum(x, 0.5, y) is y
    assert fake.allocs == [] and fake.syncs == []  # asynchronous: torch's allocator, no cuMemAlloc, no sync
    assert [e.shape for e in fake_torch.empties] == [(768,)]  # kept for the current stream
    ws = fake_torch.empties[0].ptr
    assert [ln.fn for ln in fake.launches] == ["rowsum__stage0", "rowsum__stage1"] * 3
    assert {ln.stream for ln in fake.launches} == {7}
    assert fake.launches[0].args == [0x1000, ws, ws + 512, 45, 37]
    mod.rowsum(x, 0.5, y, stream=99)
    assert fake_torch.empties[-1].recorded == [("stream", 99)] and fake.launches[-1].stream == 99


# ---------------------------------------------------------------- the C launcher (header and object)

MOCK_DRIVER = r"""
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char name[64]; } mock_function;
CUresult cuCtxGetCurrent(CUcontext* c) { *c = (CUcontext)1; return CUDA_SUCCESS; }
CUresult cuCtxGetId(CUcontext c, unsigned long long* id) { (void)c; *id = 7; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice* d) { *d = 0; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *v = 8;
  else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *v = 0;
  else return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice d) { (void)d; snprintf(name, (size_t)len, "Mock");
                                                             return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult rc, const char** s) { (void)rc; *s = "MOCK"; return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule* m, const void* image) { (void)image; *m = (CUmodule)1; return CUDA_SUCCESS; }
CUresult cuModuleUnload(CUmodule m) { (void)m; return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  mock_function* mf = (mock_function*)calloc(1, sizeof *mf);
  (void)m;
  snprintf(mf->name, sizeof mf->name, "%s", name);
  *f = (CUfunction)mf;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { (void)f; (void)a; (void)v;
                                                                            return CUDA_SUCCESS; }
CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, CUstream s) {
  *p = (CUdeviceptr)0x100000;
  printf("alloc %zu stream %llu\n", bytes, (unsigned long long)(uintptr_t)s);
  return CUDA_SUCCESS;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  printf("free %llu stream %llu\n", (unsigned long long)p, (unsigned long long)(uintptr_t)s);
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void** p, void** extra) {
  const char* name = ((mock_function*)f)->name;
  (void)by; (void)bz; (void)shared; (void)extra;
  printf("launch %s grid %u %u %u block %u stream %llu args", name, gx, gy, gz, bx,
         (unsigned long long)(uintptr_t)s);
  if (strcmp(name, "rowsum__stage0") == 0)  /* X, P, Cnt, M, N */
    printf(" %llu %llu %llu %d %d\n", *(unsigned long long*)p[0], *(unsigned long long*)p[1],
           *(unsigned long long*)p[2], *(int*)p[3], *(int*)p[4]);
  else  /* alpha, Y, P, Cnt, M */
    printf(" %g %llu %llu %llu %d\n", *(float*)p[0], *(unsigned long long*)p[1], *(unsigned long long*)p[2],
           *(unsigned long long*)p[3], *(int*)p[4]);
  return CUDA_SUCCESS;
}
"""

MOCK_MAIN = r"""
#include "rowsum.h"
#include <stdlib.h>

int main(int argc, char** argv) {
  int m = atoi(argv[2]), n = atoi(argv[3]);
  (void)argc;
  size_t bytes = 0;
  if (argv[1][0] == 'w') {
    printf("rc %d\n", (int)rowsum_workspace_bytes(m, n, &bytes));
    printf("bytes %zu\n", bytes);
  } else if (argv[1][0] == 'l') {
    printf("rc %d\n", (int)rowsum_launch((CUstream)5, 4096, 0.5f, 8192, m, n));
  } else {
    printf("rc %d\n", (int)rowsum_launch_with_workspace((CUstream)6, (CUdeviceptr)atoll(argv[4]), 4096, 0.5f, 8192,
                                                        m, n));
  }
  return 0;
}
"""


def _gcc():
    import shutil

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found")
    return gcc


def _cuda_h():
    from tilec.targets.cuda.locate import driver_include_dir

    inc = driver_include_dir()
    if inc is None:
        pytest.skip("no cuda.h")
    return inc


@pytest.fixture(scope="module")
def mock_program(tmp_path_factory):
    """The rowsum header (mock images: the stage entries as compiled for sm80) against a recording driver."""
    import subprocess

    from tilec.artifacts import kernel_entries, launch_entries
    from tilec.targets.c_launcher.header import Image, generate_header

    gcc, inc = _gcc(), _cuda_h()
    d = tmp_path_factory.mktemp("launcher")
    (d / "k.tile").write_text(SPLIT)
    result = tilec.compile(d / "k.tile", target="sm80")
    entries = kernel_entries(result)
    header = generate_header("rowsum.h", [Image("sm80", "sm_80", b"TILECMOCK\0", entries)], source_name="k.tile",
                             tilec_version="0", toolchain="mock", driver_api_version=13000, source_hash="0" * 64,
                             launches=launch_entries(result.module, entries))
    (d / "rowsum.h").write_text(header)
    (d / "driver.c").write_text(MOCK_DRIVER)
    (d / "main.c").write_text(MOCK_MAIN)
    flags = ["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", f"-I{inc}", f"-I{d}"]
    subprocess.run([gcc, *flags, "main.c", "driver.c", "-o", "prog", "-lpthread"], cwd=d, check=True)
    return d / "prog", header


def _run(prog, *args) -> str:
    import subprocess

    out = subprocess.run([str(prog), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_header_declares_the_public_functions_only(mock_program):
    _, header = mock_program
    assert "static inline CUresult rowsum_launch(CUstream stream, CUdeviceptr X, float alpha, CUdeviceptr Y, int M, " \
           "int N)" in header
    assert "rowsum_launch_with_workspace(CUstream stream, CUdeviceptr workspace, CUdeviceptr X, float alpha, " \
           "CUdeviceptr Y, int M, int N)" in header
    assert "rowsum_workspace_bytes(int M, int N, size_t* bytes)" in header and "rowsum_check_device(" in header
    assert "rowsum__stage0_launch(" not in header.split("*/", 1)[0]  # the banner lists no stage
    assert " CUresult rowsum__stage0_launch(" not in header  # stage launchers are private (prefixed)


@pytest.mark.parametrize("M", [1, 45, 64, 1000])
def test_the_header_sizes_the_workspace_like_the_manifest(mock_program, tmp_path, M):
    from tilec.runtime.formulas import evaluate

    result = tilec.compile(_write(tmp_path, SPLIT), target="sm80")
    entry = make_manifest(result, "cubin", ["sm_80"], "t", {}, "k")["launches"][0]
    assert _run(mock_program[0], "w", M, 7) == f"rc 0\nbytes {evaluate(entry['workspace_bytes'], {'M': M})}\n"


def test_the_header_launches_the_stages_in_order_in_a_stream_ordered_workspace(mock_program):
    out = _run(mock_program[0], "l", 100, 7).splitlines()
    ws = 0x100000
    assert out == [f"alloc {1024 + 256} stream 5",
                   f"launch rowsum__stage0 grid 2 2 1 block 64 stream 5 args 4096 {ws} {ws + 1024} 100 7",
                   f"launch rowsum__stage1 grid 2 1 1 block 64 stream 5 args 0.5 8192 {ws} {ws + 1024} 100",
                   f"free {ws} stream 5", "rc 0"]


def test_the_header_takes_a_caller_workspace(mock_program):
    out = _run(mock_program[0], "x", 45, 7, 0x200000).splitlines()
    assert out[0].endswith(f"args 4096 {0x200000} {0x200000 + 512} 45 7") and out[-1] == "rc 0"
    assert not any(line.startswith("alloc") for line in out)
    assert _run(mock_program[0], "x", 45, 7, 0x200010) == "rc 1\n"  # misaligned: CUDA_ERROR_INVALID_VALUE
    assert _run(mock_program[0], "x", -1, 7, 0x200000) == "rc 1\n"


def test_nvcc_builds_the_port_as_cubin_header_and_object_that_link(tmp_path):
    """The split-KV GQA port (one kernel, two launches) built by nvcc for sm80 and sm90; the header and the object
    compiled into C programs against cuda.h and linked against the driver."""
    import shutil
    import subprocess

    from test_deploy import driver_stub

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    gcc, inc = _gcc(), _cuda_h()
    port = ROOT / "examples" / "tilelang" / "gqa_decode_splitkv.tile"
    art = tilec.compile(port, target="sm80,sm90", emit="fatbin", use_cache=False)
    m = json.loads(art.manifest)
    assert [e["name"] for e in m["launches"]] == ["gqa_decode"]
    assert {k["name"] for k in m["kernels"]} >= {"gqa_decode__stage0", "gqa_decode__stage1"}
    assert all(k.get("internal") for k in m["kernels"])
    h = tilec.compile(port, target="sm80,sm90", emit="header", output_name="gqa.h", use_cache=False)
    (tmp_path / "gqa.h").write_bytes(h.data)
    assert json.loads(h.manifest)["header"]["functions"] == [
        "gqa_decode_launch", "gqa_decode_launch_with_workspace", "gqa_decode_workspace_bytes",
        "gqa_decode_check_device"]
    main = ("#include \"gqa.h\"\nint main(void) {\n  size_t b = 0; char msg[256];\n"
            "  CUresult rc = gqa_decode_workspace_bytes(2, 8, 100, 2, &b);\n"
            "  rc = rc ? rc : gqa_decode_check_device(0, msg, sizeof msg);\n"
            "  rc = rc ? rc : gqa_decode_launch(0, 1, 2, 3, 4, 2, 8, 100, 2);\n"
            "  return (int)rc + (int)gqa_decode_launch_with_workspace(0, 256, 1, 2, 3, 4, 2, 8, 100, 2);\n}\n")
    (tmp_path / "main.c").write_text(main)
    stubs = driver_stub(tmp_path / "stubs")
    flags = ["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", f"-I{inc}", f"-I{tmp_path}"]
    subprocess.run([gcc, *flags, "main.c", "-o", "prog", f"-L{stubs}", "-lcuda", "-lpthread"], cwd=tmp_path,
                   check=True)
    obj = tilec.compile(port, target="sm80", emit="object", output_name="gqa.o", use_cache=False)
    (tmp_path / "gqa.o").write_bytes(obj.data)
    info = json.loads(obj.manifest)["object"]
    assert "CUresult gqa_decode_launch(CUstream stream, CUdeviceptr Q, CUdeviceptr K, CUdeviceptr V, " \
           "CUdeviceptr Output, int batch, int heads, int seqlen_kv, int heads_kv);" in info["prototypes"]
    (tmp_path / "use.c").write_text("#include <cuda.h>\n#include <stddef.h>\n" + "\n".join(info["prototypes"])
                                    + "\n" + main.split("\n", 1)[1])
    subprocess.run([gcc, *flags, "use.c", "gqa.o", "-o", "prog_obj", f"-L{stubs}", "-lcuda", "-lpthread"],
                   cwd=tmp_path, check=True)


# ---------------------------------------------------------------- WebGPU (wgpu on lavapipe)


@pytest.fixture(scope="module")
def webgpu():
    import os

    from tilec.runtime import wgsl

    ok, why = wgsl.available()
    if not ok:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"WebGPU is required (TILEC_REQUIRE_TOOLCHAINS=1): {why}")
        pytest.skip(f"WebGPU: {why} (without a GPU, install Mesa's lavapipe: apt-get install mesa-vulkan-drivers)")
    return wgsl


def _wgsl_module(path: Path, tmp_path: Path, defines=None):
    import tilec.runtime as rt
    from tilec.artifacts import dumps

    result = tilec.compile(path, target="webgpu", defines=defines or {}, verify=True)
    out = tmp_path / "k.wgsl"
    out.write_text(result.source)
    Path(str(out) + ".json").write_text(dumps(make_manifest(result, "wgsl", ["wgsl"], "none", {}, out.name)))
    return rt.load(out)


@pytest.mark.parametrize("M, N", [(64, 64), (45, 37)])
def test_webgpu_runs_the_stages_as_successive_dispatches(webgpu, tmp_path, M, N):
    path = _write(tmp_path, SPLIT)
    mod = _wgsl_module(path, tmp_path)
    assert list(mod.kernels) == ["rowsum"]
    front = tilec.compile(path).module
    args = random_inputs(front.launches[0], {"M": M, "N": N}, seed=M)
    want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_launches(front, front.launches[0], want)
    mod.rowsum(args["X"], args["alpha"], args["Y"])
    np.testing.assert_allclose(args["Y"], want["Y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", ["regular", "ragged"])
def test_webgpu_runs_the_gqa_decode_port(webgpu, tmp_path, shape):
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from tilelang_ports import CASES

    case = next(c for c in CASES if c.name == "gqa_decode_splitkv")
    dev = webgpu.Device.get()
    if "shader-f16" not in dev.features:
        pytest.skip(f"the WebGPU adapter {dev.name} has no shader-f16")
    path = ROOT / "examples" / "tilelang" / case.file
    defines = {**case.defines, **case.webgpu_defines}
    mod = _wgsl_module(path, tmp_path, defines)
    front = tilec.compile(path, defines=defines).module
    seq = front.launches[0]
    args = random_inputs(seq, case.sizes[shape], seed=11)
    want = {n: np.array(a, copy=True) for n, a in args.items()}
    run_launches(front, seq, want)
    mod.gqa_decode(*[args[p.name] for p in seq.params])
    np.testing.assert_allclose(args["Output"].astype(np.float32), want["Output"].astype(np.float32), rtol=1e-2,
                               atol=1e-2)


def test_webgpu_checks_the_storage_buffer_limit_per_stage(tmp_path):
    """Nine tensors in one function, but no launch binds more than eight: WebGPU accepts it."""
    params = ", ".join(f"A{i}: f32[M]" for i in range(7)) + ", B: out f32[M]"
    total = " + ".join(f"A{i}[bx]" for i in range(7))
    src = f"""
kernel wide({params}):
    S = T.alloc_global([M], f32)
    with T.Kernel(M, threads=32) as (bx):
        S[bx] = {total}
    with T.Kernel(M, threads=32) as (bx):
        B[bx] = S[bx] * 2.0
"""
    result = tilec.compile(_write(tmp_path, src), target="webgpu")
    assert len(result.simt.kernels) == 2  # stage 0 binds 8 buffers (A0..A6, S), stage 1 two
    src2 = src.replace("S[bx] * 2.0", "S[bx] * 2.0 + A0[bx]").replace("S[bx] = ", "S[bx] = A6[bx] + B[bx] + ")
    with pytest.raises(CompileError, match=r"kernel 'wide__stage0' has 9 tensor parameters .* at most 8 per shader "
                                           "stage") as e:
        tilec.compile(_write(tmp_path, src2, "k2.tile"), target="webgpu")
    assert e.value.diagnostics[0].span.line == 4  # the first launch's `with T.Kernel`


def test_tilec_run_target_webgpu_checks_against_the_interpreter(webgpu, tmp_path):
    import subprocess
    import sys

    path = _write(tmp_path, SPLIT)
    out = subprocess.run([sys.executable, "-m", "tilec", "run", str(path), "--target", "webgpu", "--check",
                          "--size", "M=45,N=37"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "rowsum.Y: f32[45]" in out.stdout and "check Y against the interpreter: PASS" in out.stdout


# ---------------------------------------------------------------- back ends and tools that refuse


def test_ascend_builds_the_stages_and_the_sequence_launcher(tmp_path):
    """ascend910b: the stages are kernels of the source, and the launcher header's rowsum_launch places the scratch
    in one buffer and launches them in order (the model runs such functions through it: test_ascend_launches.py).
    SPLIT's single-element store of Cnt is refused at its line."""
    with pytest.raises(CompileError) as e:
        tilec.compile(_write(tmp_path, SPLIT), target="ascend910b")
    (d,) = [d for d in e.value.diagnostics if d.severity == "error"]
    assert "a single-element store to the global tensor 'Cnt'" in d.message and d.span.line == 21
    no_count = SPLIT.replace("        if part == 0:\n            Cnt[bx] = T.min(block, M - bx * block)\n", "")
    no_count = no_count.replace("if i < Cnt[bx]:", "if bx * block + i < M:")
    path = _write(tmp_path, no_count, "nc.tile")
    r = tilec.compile(path, target="ascend910b")
    assert [p.name for p in r.simt] == ["rowsum__stage0", "rowsum__stage1"]
    out = tmp_path / "nc.h"
    subprocess_run_tilec(path, out)
    header = out.read_text()
    at0, at1 = header.index("err = rowsum__stage0_launch(stream"), header.index("err = rowsum__stage1_launch(stream")
    assert at0 < at1 and "static inline int64_t rowsum_scratch_bytes(int64_t M, int64_t N)" in header
    assert "void* P = (uint8_t*)scratch + at;" in header and "void* Cnt" in header


def subprocess_run_tilec(path, out):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "tilec", str(path), "--target", "ascend910b", "-o", str(out)],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_hip_object_launches_the_stages(tmp_path):
    """gfx942: the code object carries the stages, the -c launcher exports the sequence's functions (the stages'
    are private), and a program linked against the HIP runtime gets HIP's error back (no AMD GPU here)."""
    import shutil
    import subprocess

    from tilec.targets.hip.backend import _hip_include_dir
    from tilec.targets.hip.toolchain import find_compiler

    path = _write(tmp_path, SPLIT)
    if find_compiler("gfx942") is None or _hip_include_dir() is None or shutil.which("cc") is None:
        pytest.skip("needs hipcc / clang for gfx942, hip/hip_runtime_api.h and cc")
    art = tilec.compile(path, target="gfx942", emit="hsaco", use_cache=False)
    m = json.loads(art.manifest)
    assert m["launches"][0]["name"] == "rowsum" and [k.get("internal") for k in m["kernels"]] == [True, True]
    obj = tilec.compile(path, target="gfx942", emit="object", output_name="rowsum.o", use_cache=False)
    info = json.loads(obj.manifest)["object"]
    assert info["functions"] == ["rowsum_workspace_bytes", "rowsum_launch_with_workspace", "rowsum_launch"]
    assert info["prototypes"][2] == ("hipError_t rowsum_launch(hipStream_t stream, hipDeviceptr_t X, float alpha, "
                                     "hipDeviceptr_t Y, int M, int N);")
    (tmp_path / "rowsum.o").write_bytes(obj.data)
    syms = subprocess.run(["nm", "rowsum.o"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert " T rowsum_launch\n" in syms and " U hipMallocAsync\n" in syms and " U hipFreeAsync\n" in syms
    assert " T " not in "".join(line for line in syms.splitlines(True) if "stage" in line)  # stages: private
    (tmp_path / "main.c").write_text(
        "#define __HIP_PLATFORM_AMD__\n#include <hip/hip_runtime_api.h>\n#include <stdio.h>\n"
        + "\n".join(info["prototypes"]) + "\nint main(void) {\n  size_t b = 0;\n"
        "  hipError_t rc = rowsum_workspace_bytes(100, 7, &b);\n  printf(\"%d %zu\\n\", (int)rc, b);\n"
        "  rc = rowsum_launch_with_workspace(0, (hipDeviceptr_t)16, 0, 1.0f, 0, 100, 7);\n"
        "  printf(\"%d\\n\", (int)(rc == hipErrorInvalidValue));\n"
        "  return rowsum_launch(0, 0, 1.0f, 0, 100, 7) == hipSuccess;\n}\n")
    link = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", f"-I{_hip_include_dir()}", "main.c", "rowsum.o",
                           "-o", "prog", "-lamdhip64", "-lpthread"], cwd=tmp_path, capture_output=True, text=True)
    if link.returncode != 0 and "amdhip64" in link.stderr:
        pytest.skip("libamdhip64 not installed")
    assert link.returncode == 0, link.stderr
    run = subprocess.run(["./prog"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode in (0, 1)  # 0: HIP returned an error (no AMD device), 1: launched; else a crash
    assert run.stdout.splitlines()[:2] == ["0 1280", "1"]  # the workspace's bytes; a misaligned one refused


def test_tilec_tune_checks_a_multi_launch_kernel_as_a_whole(tmp_path, monkeypatch):
    """The tuner's check data come from the interpreter running every launch; each candidate's stages, run lane by lane
    in the SIMT interpreter on those inputs (--check-on-cpu), agree with it, and its artifact carries the launches.
    The GPU worker checks and times the whole sequence (here against the fake driver, which computes nothing)."""
    from tilec.options import CompileOptions
    from tilec.runtime import tune_worker
    from tilec.runtime.module import Module
    from tilec.tuning.plan import prepare

    path = _write(tmp_path, SPLIT.replace("const block = 64", "const block = tune(64, 128)"))
    plan = prepare(str(path), CompileOptions.make("sm80"), [{"M": 200, "N": 64}], tmp_path / "build", emit="cu",
                   jobs=1, check_on_cpu=True)
    assert [c.status for c in plan.candidates] == ["built", "built"], [c.reason for c in plan.candidates]
    for c in plan.candidates:
        m = json.loads((tmp_path / "build" / f"{c.artifact}.json").read_text())
        assert [st["kernel"] for st in m["launches"][0]["stages"]] == ["rowsum__stage0", "rowsum__stage1"]
    args = {a["name"]: a for a in plan.check["args"]}
    x = np.fromfile(tmp_path / "build" / args["X"]["file"], np.float32).reshape(args["X"]["shape"])
    y = np.fromfile(tmp_path / "build" / args["Y"]["expected"], np.float32)
    np.testing.assert_allclose(y, x.sum(axis=1) * args["alpha"]["value"], rtol=1e-4, atol=1e-4)

    m = json.loads((tmp_path / "build" / f"{plan.candidates[0].artifact}.json").read_text())
    fake = install(monkeypatch, FakeDriver({k["name"]: k for k in m["kernels"]}, capability=(8, 0)))
    kernel = Module(b"\0", m).kernels[plan.kernel]
    arrays = tune_worker.Arrays(None)
    r = tune_worker.check(kernel, tmp_path / "build", json.loads((tmp_path / "build" / "plan.json").read_text()),
                          arrays)
    assert r["check"] == "wrong"  # Y was never written
    assert [ln.fn for ln in fake.launches] == ["rowsum__stage0", "rowsum__stage1"]
    fake.launches.clear()
    assert tune_worker.time_launches(kernel, arrays.random(kernel.entry, {"M": 200, "N": 64}, {}, seed=1)) == 0.5
    assert len(fake.launches) > 2 and [ln.fn for ln in fake.launches[:2]] == ["rowsum__stage0", "rowsum__stage1"]
    assert len(fake.launches) % 2 == 0


def test_tilec_tune_refuses_a_multi_launch_kernel_for_ascend(tmp_path):
    from tilec.options import CompileOptions
    from tilec.tuning.plan import prepare

    path = _write(tmp_path, SPLIT.replace("const block = 64", "const block = tune(64, 128)"))
    with pytest.raises(CompileError) as e:
        prepare(str(path), CompileOptions.make("ascend910b"), [{"M": 64, "N": 64}], tmp_path / "build")
    (d,) = [d for d in e.value.diagnostics if d.severity == "error"]
    assert "a single-element store to the global tensor 'Cnt'" in d.message  # (ascend builds the stages otherwise)
    assert d.span.line == 21


def test_the_torch_op_fake_implementation_comes_from_the_public_entry(loaded):
    torch = pytest.importorskip("torch")
    import tilec.torch as tt

    mod, _ = loaded
    assert tt.schema(mod.rowsum, "rowsum") == "rowsum(Tensor X, float alpha) -> Tensor"
    y = tt.fake_outputs(mod.rowsum, (torch.empty(45, 37), 0.5))
    assert tuple(y.shape) == (45,) and y.dtype == torch.float32


VIEWS = """
kernel vs(X: f32[M, N], Y: out f32[M, N]):
    S = T.alloc_global([M, N], f32)
    with T.Kernel(ceildiv(M * N, 128), threads=128) as (bx,):
        S2 = T.reshape(S, (M * N,))
        X2 = T.reshape(X, (M * N,))
        for i in T.Parallel(128):
            if bx * 128 + i < M * N:
                S2[bx * 128 + i] = X2[bx * 128 + i] * 2.0
    with T.Kernel(ceildiv(M * N, 128), threads=128) as (bx,):
        S3 = T.reshape(S, (M * N,))
        Y2 = T.reshape(Y, (M * N,))
        for i in T.Parallel(128):
            if bx * 128 + i < M * N:
                Y2[bx * 128 + i] = S3[bx * 128 + i] + 1.0
"""


@pytest.mark.parametrize("M, N", [(8, 16), (5, 7)])
def test_stages_that_reach_tensors_and_scratch_only_through_views(tmp_path, M, N):
    """A stage that reads a parameter only through a view takes that parameter; one that writes scratch only
    through a view writes the scratch (so the next stage may read it)."""
    m = tilec.compile(_write(tmp_path, VIEWS), verify=True).module
    (seq,) = m.launches
    stage0 = next(k for k in m.kernels if k.name == "vs__stage0")
    assert {p.name for p in stage0.params} >= {"X", "S"}
    assert next(p for p in stage0.params if p.name == "S").is_output
    args = random_inputs(seq, {"M": M, "N": N}, seed=M + N)
    run_launches(m, seq, args)
    np.testing.assert_allclose(args["Y"], args["X"] * 2.0 + 1.0, rtol=1e-6, atol=1e-6)
