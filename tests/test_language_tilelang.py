"""The TileLang spellings a port needs (issue #16): list literals, shapes as expressions, per-element
atomics in Parallel loops, `a if c else b`, buf.dtype / buf.shape, Pipelined(start, stop), while
loops, clamp / floordiv / cumsum. Each is checked through the compiler and the interpreter against
numpy, on fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel


def compiled(tmp_path, text: str, **kw):
    p = tmp_path / "k.tile"
    p.write_text(text)
    return tilec.compile(p, verify=True, **kw)


def kernel_of(tmp_path, text: str):
    return compiled(tmp_path, text).module.kernels[0]


def error_of(tmp_path, text: str, **kw) -> str:
    with pytest.raises(CompileError) as e:
        compiled(tmp_path, text, **kw)
    return " | ".join(d.message for d in e.value.diagnostics)


RNG = np.random.default_rng(16)


def test_list_literals_for_shapes_and_pipeline_options(tmp_path):
    k = kernel_of(tmp_path, """
const bm = 16
kernel rowcopy(A: f32[M, N], B: out f32[M, N]):
    with T.Kernel(T.ceildiv(M, bm), threads=64) as bx:
        S = T.alloc_shared([bm, 32], "float32")
        F = T.alloc_fragment([bm, 32], A.dtype)
        for k in T.Pipelined(T.ceildiv(N, 32), num_stages=2, order=[0, 1], stage=[0, 1]):
            T.copy(A[bx * bm, k * 32], S)
            T.copy(S, F)
            T.copy(F, B[bx * bm, k * 32])
""")
    a = RNG.standard_normal((37, 70)).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


def test_dimension_chosen_by_a_const_checks_k_against_both_operands(tmp_path):
    text = """
const trans_B = False
kernel mm(A: f32[M, K], B: f32[N if trans_B else K, K if trans_B else N], C: out f32[M, N]):
    with Kernel(ceildiv(N, 16), ceildiv(M, 16), threads=32) as (bx, by):
        acc = alloc_fragment((16, 16), f32)
        a_s = alloc_shared((16, 16), f32)
        b_s = alloc_shared((16, 16), f32)
        clear(acc)
        for k in Pipelined(ceildiv(K, 16), num_stages=0):
            copy(A[by * 16, k * 16], a_s)
            copy(B[k * 16, bx * 16], b_s)
            gemm(a_s, b_s, acc)
        copy(acc, C[by * 16, bx * 16])
"""
    k = kernel_of(tmp_path, text)
    assert [v.name for v in k.size_vars] == ["M", "K", "N"]
    assert k.params[1].shape[0] is k.size_vars[1]  # B's rows are K itself
    a = RNG.standard_normal((20, 30)).astype(np.float32)
    b = RNG.standard_normal((30, 17)).astype(np.float32)
    c = np.zeros((20, 17), np.float32)
    run_kernel(k, {"A": a, "B": b, "C": c})
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="runtime size K is 30"):
        run_kernel(k, {"A": a, "B": RNG.standard_normal((31, 17)).astype(np.float32), "C": c})


def test_dimension_formula_is_checked_at_launch(tmp_path):
    k = kernel_of(tmp_path, """
kernel partial(A: f32[M, N], S: out f32[M, ceildiv(N, 32)]):
    with Kernel(ceildiv(N, 32), M, threads=32) as (bx, by):
        acc = alloc_fragment((1,), f32)
        t = alloc_fragment((1, 32), f32)
        copy(A[by, bx * 32], t)
        reduce_sum(t, acc, dim=1)
        copy(acc, S[by, bx])
""")
    a = RNG.standard_normal((5, 70)).astype(np.float32)
    s = np.zeros((5, 3), np.float32)
    run_kernel(k, {"A": a, "S": s})
    padded = np.zeros((5, 96), np.float32)
    padded[:, :70] = a
    np.testing.assert_allclose(s, padded.reshape(5, 3, 32).sum(-1), rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception, match="expects 3"):
        run_kernel(k, {"A": a, "S": np.zeros((5, 4), np.float32)})


def test_dimension_formula_over_an_unknown_size_is_an_error(tmp_path):
    msg = error_of(tmp_path, """
kernel k(A: f32[M, ceildiv(Q, 2)]):
    with Kernel(1) as bx:
        pass
""")
    assert "runtime size 'Q' appears only inside dimension formulas" in msg


def test_per_element_atomics_inside_parallel_histogram(tmp_path):
    k = kernel_of(tmp_path, """
kernel hist(X: i32[N], H: out i32[16], Mx: out f32[4], V: f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in Parallel(64):
            if bx * 64 + i < N:
                atomic_add(H[X[bx * 64 + i]], 1, memory_order="relaxed")
                atomic_max(Mx[X[bx * 64 + i] % 4], V[bx * 64 + i])
""")
    x = RNG.integers(0, 16, 200).astype(np.int32)
    v = RNG.standard_normal(200).astype(np.float32)
    h = np.zeros(16, np.int32)
    mx = np.full(4, -np.inf, np.float32)
    run_kernel(k, {"X": x, "H": h, "Mx": mx, "V": v})
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16))
    want = np.array([v[(x % 4) == r].max() for r in range(4)], np.float32)
    np.testing.assert_array_equal(mx, want)


def test_per_element_atomic_needs_an_element(tmp_path):
    msg = error_of(tmp_path, """
kernel k(C: out f32[N, N]):
    with Kernel(1) as bx:
        for i in Parallel(4):
            atomic_add(C[i, 0:4], 1.0)
""")
    assert "updates one element" in msg


def test_ternary_shape_and_dtype_attributes_astype_clamp_floordiv(tmp_path):
    k = kernel_of(tmp_path, """
kernel k(A: f16[N], B: out f32[N]):
    with Kernel(ceildiv(N, 32), threads=32) as bx:
        t = alloc_fragment((32,), A.dtype)
        u = alloc_fragment(t.shape, f32)
        copy(A[bx * 32], t)
        for i in Parallel(t.shape[0]):
            x = t[i].astype(f32)
            u[i] = clamp(x, -0.5, 0.5) if T.floordiv(i, 2) * 2 == i else T.cast(T.floormod(i, 3), u.dtype)
        copy(u, B[bx * 32])
""")
    a = RNG.standard_normal(45).astype(np.float16)
    b = np.zeros(45, np.float32)
    run_kernel(k, {"A": a, "B": b})
    i = np.arange(45) % 32
    want = np.where(i % 2 == 0, np.clip(a.astype(np.float32), -0.5, 0.5), (i % 3).astype(np.float32))
    np.testing.assert_array_equal(b, want)


def test_vectorized_is_a_per_thread_unrolled_loop(tmp_path):
    k = kernel_of(tmp_path, """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 32), threads=8) as bx:
        for i in Parallel(8):
            for v in T.vectorized(4):
                g = bx * 32 + i * 4 + v
                if g < N:
                    B[g] = A[g] + 1.0
""")
    a = RNG.standard_normal(50).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a + 1)


def test_pipelined_with_start_and_stop(tmp_path):
    k = kernel_of(tmp_path, """
kernel tail_sum(A: f32[N, 8], S: out f32[8], start: i32):
    with Kernel(1, threads=32) as bx:
        acc = alloc_fragment((8,), f32)
        t = alloc_fragment((1, 8), f32)
        r = alloc_fragment((8,), f32)
        clear(acc)
        for k in Pipelined(start, N, num_stages=2):
            copy(A[k, 0], t)
            reduce_sum(t, r, dim=0)
            for j in Parallel(8):
                acc[j] += r[j]
        copy(acc, S)
""")
    a = RNG.standard_normal((13, 8)).astype(np.float32)
    s = np.zeros(8, np.float32)
    run_kernel(k, {"A": a, "S": s, "start": 5})
    np.testing.assert_allclose(s, a[5:].sum(0), rtol=1e-5, atol=1e-5)


WHILE_LOOPS = """
kernel collatz(X: i32[N], Steps: out i32[N], Total: out i32[1]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        total = alloc_var(i32, 0)
        while total < 3:
            total += 1
        for i in Parallel(64):
            if bx * 64 + i < N:
                x = X[bx * 64 + i]
                n = 0
                while x != 1:
                    x = x // 2 if x % 2 == 0 else 3 * x + 1
                    n += 1
                Steps[bx * 64 + i] = n + total
        Total[0] = total
"""

# A uniform while whose condition reads shared memory its body writes (a barrier at the end of every
# iteration); WebGPU refuses it (a barrier under a condition WGSL deems non-uniform) and says why.
WHILE_OVER_SHARED = """
kernel doubling(X: f32[N], Y: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        S = alloc_shared((64,), f32)
        C = alloc_shared((64,), i32)
        copy(X[bx * 64], S)
        for i in Parallel(64):
            C[i] = 0
        while C[0] < 3:
            for i in Parallel(64):
                S[i] = S[i] * 2.0 + 1.0
                C[i] = C[i] + 1
        copy(S, Y[bx * 64])
"""


def _collatz(v: int) -> int:
    n = 0
    while v != 1:
        v, n = (v // 2 if v % 2 == 0 else 3 * v + 1), n + 1
    return n


def test_while_loop_uniform_and_per_lane_on_every_back_end(tmp_path):
    """The interpreter, and the sm80, sm90 and gfx942 lowerings executed lane by lane (threads leave the
    per-lane loop at different iterations), at a regular and a ragged N."""
    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup

    k = kernel_of(tmp_path, WHILE_LOOPS)
    for n in (128, 77):
        x = RNG.integers(1, 50, n).astype(np.int32)
        want = np.array([_collatz(int(v)) + 3 for v in x], np.int32)
        steps, total = np.zeros(n, np.int32), np.zeros(1, np.int32)
        run_kernel(k, {"X": x, "Steps": steps, "Total": total})
        np.testing.assert_array_equal(steps, want)
        assert total[0] == 3
        for target in ("sm80", "sm90", "gfx942"):
            sk = compiled(tmp_path, WHILE_LOOPS, target=target).simt.kernels[0]
            steps, total = np.zeros(n, np.int32), np.zeros(1, np.int32)
            run_simt(sk, {"X": x, "Steps": steps, "Total": total}, {"N": n}, warp_size=lookup(target).warp_size)
            np.testing.assert_array_equal(steps, want, err_msg=target)
            assert total[0] == 3, target
    src = compiled(tmp_path, WHILE_LOOPS, target="webgpu").source
    assert "while (x != 1) {" in src


def test_while_loop_over_shared_memory(tmp_path):
    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup

    for target in ("sm80", "gfx942"):
        sk = compiled(tmp_path, WHILE_OVER_SHARED, target=target).simt.kernels[0]
        for n in (128, 70):
            x = RNG.standard_normal(n).astype(np.float32)
            y = np.zeros_like(x)
            run_simt(sk, {"X": x, "Y": y}, {"N": n}, warp_size=lookup(target).warp_size)
            np.testing.assert_allclose(y, ((x * 2 + 1) * 2 + 1) * 2 + 1, rtol=1e-6, err_msg=target)
    msg = error_of(tmp_path, WHILE_OVER_SHARED, target="webgpu")
    assert "while loop's condition reads shared memory ('C')" in msg


def test_while_loop_runs_under_wgpu(tmp_path):
    from tilec.runtime import wgsl

    ok, why = wgsl.available()
    if not ok:
        pytest.skip(f"WebGPU: {why}")
    import tilec.runtime as rt
    from tilec.artifacts import dumps, manifest

    result = compiled(tmp_path, WHILE_LOOPS, target="webgpu")
    out = tmp_path / "collatz.wgsl"
    out.write_text(result.source)
    (tmp_path / "collatz.wgsl.json").write_text(dumps(manifest(result, "wgsl", ["wgsl"], "none", {}, out.name)))
    mod = rt.load(out)
    for n in (128, 77):
        x = RNG.integers(1, 50, n).astype(np.int32)
        steps, total = np.zeros(n, np.int32), np.zeros(1, np.int32)
        mod.collatz(x, steps, total)
        np.testing.assert_array_equal(steps, [_collatz(int(v)) + 3 for v in x])


def test_while_loop_on_the_ascend_model(tmp_path):
    import copy
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("the AscendC CPU model needs g++")
    from tilec.targets.ascend.model_run import build_runner, run_on_model

    text = """
kernel w(X: f32[N], Y: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        t = alloc_fragment((64,), f32)
        copy(X[bx * 64], t)
        k = 0
        while k < 3:
            for i in Parallel(64):
                t[i] = t[i] * 2.0 + 1.0
            k += 1
        copy(t, Y[bx * 64])
"""
    result = compiled(tmp_path, text, target="ascend910b")
    program = result.simt[0]
    for n in (128, 100):
        x = RNG.standard_normal(n).astype(np.float32)
        args = {"X": x, "Y": np.zeros(n, np.float32), "N": n}
        run_on_model(build_runner(result.source, program), program, copy.deepcopy(args) | {"Y": args["Y"]}, cores=4)
        np.testing.assert_allclose(args["Y"], ((x * 2 + 1) * 2 + 1) * 2 + 1, rtol=1e-6)


def test_cumsum_forward_and_reverse(tmp_path):
    k = kernel_of(tmp_path, """
kernel cs(A: f32[M, 16], F: out f32[M, 16], R: out f32[M, 16]):
    with Kernel(ceildiv(M, 4), threads=32) as bx:
        s = alloc_shared((4, 16), f32)
        r = alloc_shared((4, 16), f32)
        copy(A[bx * 4, 0], s)
        cumsum(s, r, dim=1, reverse=True)
        copy(r, R[bx * 4, 0])
        T.cumsum(src=s, dim=1)
        copy(s, F[bx * 4, 0])
""")
    a = RNG.standard_normal((10, 16)).astype(np.float32)
    f, r = np.zeros_like(a), np.zeros_like(a)
    run_kernel(k, {"A": a, "F": f, "R": r})
    np.testing.assert_allclose(f, np.cumsum(a, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r, np.cumsum(a[:, ::-1], 1)[:, ::-1], rtol=1e-5, atol=1e-5)


def test_tilelang_tensor_parameter_types(tmp_path):
    k = kernel_of(tmp_path, """
const dtype = "float16"
kernel k(A: T.Tensor((M, K), dtype), B: out T.Tensor([M, K], "float32")):
    with T.Kernel(ceildiv(M, 16)) as bx:
        for i, j in T.Parallel(16, 16):
            if bx * 16 + i < M and j < K:
                B[bx * 16 + i, j] = A[bx * 16 + i, j]
""")
    assert [str(p.dtype) for p in k.params] == ["f16", "f32"]
    a = RNG.standard_normal((20, 9)).astype(np.float16)
    b = np.zeros((20, 9), np.float32)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a.astype(np.float32))
    assert "T.Tensor(shape, dtype) needs a shape and a dtype" in error_of(
        tmp_path, "kernel k(A: T.Tensor((M,))):\n    with Kernel(1) as bx:\n        pass\n")


def test_byte_order_mark_is_accepted(tmp_path):
    p = tmp_path / "bom.tile"
    p.write_bytes("\ufeffkernel k(A: out f32[4]):\n    with Kernel(1) as bx:\n        A[0] = 1.0\n".encode())
    assert tilec.compile(p).module.kernels[0].name == "k"


@pytest.mark.parametrize(("text", "needle"), [
    ("        foo(A)\n", "undefined function 'foo'"),
    ("        x = A.dtype\n", "is a dtype, not a value"),
    ("        x = A.size\n", "buffers have .dtype and .shape"),
    ("        x = [1, 2]\n", "a list is not a value here"),
    ("        T.tvm_thread_allreduce(A)\n", "T.tvm_thread_allreduce is not supported: reduce a fragment"),
    ("        T.im2col(A, A, 0, 0)\n", "im2col is missing argument(s): kernel, stride, dilation, pad"),
])
def test_diagnostics(tmp_path, text, needle):
    src = "kernel k(A: out f32[4]):\n    with Kernel(1) as bx:\n" + text
    assert needle in error_of(tmp_path, src)


def test_two_launches_in_one_kernel_run_in_order(tmp_path):
    """Several launches in one function (TileLang's split and combine kernels): stage kernels run in order
    (tests/test_launches.py has the rest)."""
    import numpy as np

    from tilec.interp.run import run_launches

    result = compiled(tmp_path, """
kernel k(A: out f32[4]):
    with Kernel(1) as bx:
        A[0] = 1.0
    with Kernel(1) as bx:
        A[1] = A[0] + 2.0
""")
    assert [k.name for k in result.module.kernels] == ["k__stage0", "k__stage1"]
    a = np.zeros(4, np.float32)
    run_launches(result.module, result.module.launches[0], {"A": a})
    assert a.tolist() == [1.0, 3.0, 0.0, 0.0]


def test_reserved_word_as_a_parameter_name_says_so(tmp_path):
    msg = error_of(tmp_path, "kernel k(kernel: out f32[4]):\n    with Kernel(1) as bx:\n        pass\n")
    assert "'kernel' is a reserved word" in msg


def test_manifest_and_runtime_check_dimension_formulas_and_scalar_grids(tmp_path):
    """The manifest carries a formula dimension as text; the runtime checks it and the shared sizes
    at launch, and an integer scalar parameter is a grid extent it can evaluate (no GPU needed)."""
    from tilec.artifacts import kernel_entry
    from tilec.runtime.module import ArgumentError, Kernel

    result = compiled(tmp_path, """
kernel part(A: f32[M, K], B: f32[K, N], S: out f32[M, ceildiv(N, 32)], nblocks: i32):
    with Kernel(nblocks, threads=32) as bx:
        pass
""", target="sm80")
    entry = kernel_entry(result.module.kernels[0], result.simt.kernels[0], {})
    assert entry["params"][2]["shape"] == ["M", "ceildiv(N, 32)"]
    k = Kernel(None, entry)
    a, b = np.zeros((4, 5)), np.zeros((5, 70))
    sizes = k.sizes_of([a, b, np.zeros((4, 3)), 7])
    assert sizes["N"] == 70 and k.launch_config(sizes)[0] == (7, 1, 1)
    with pytest.raises(ArgumentError, match="must be ceildiv"):
        k.sizes_of([a, b, np.zeros((4, 2)), 7])
    with pytest.raises(ArgumentError, match="size K is 5"):
        k.sizes_of([a, np.zeros((6, 70)), np.zeros((4, 3)), 7])


def test_slice_extent_from_a_local_assigned_once(tmp_path):
    k = kernel_of(tmp_path, """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        width = 32
        s = alloc_shared((2 * width,), f32)
        copy(A[bx * 64:bx * 64 + 2 * width], s)
        for i in Parallel(width):
            s[i] = s[i] * 2.0
        copy(s, B[bx * 64:bx * 64 + 2 * width])
""")
    a = RNG.standard_normal(100).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    want = a.copy()
    want[(np.arange(100) % 64) < 32] *= 2
    np.testing.assert_array_equal(b, want)


def test_slice_extent_from_a_reassigned_local_is_known_at_run_time(tmp_path):
    """A source slice whose extent a reassigned local gives is a run-time extent: the copy fills that many
    elements of the tile and leaves the others (issue #30); as a destination it stays an error."""
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(1, threads=64) as bx:
        w = 32
        w = 16
        s = alloc_shared((32,), f32)
        fill(s, -1.0)
        copy(A[0:w], s)
        copy(s, B[0:32])
"""
    a = RNG.standard_normal(40).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(kernel_of(tmp_path, text), {"A": a, "B": b})
    np.testing.assert_array_equal(b[:16], a[:16])
    np.testing.assert_array_equal(b[16:32], -1.0)
    assert "must be a compile-time constant" in error_of(tmp_path, text.replace("copy(s, B[0:32])", "copy(s, B[0:w])"))


RESERVED_NAMES = """
kernel new(do: f32[N], new: out f32[N], float: f32[N], threadIdx: f32[N], tl_smem: f32[N], nblocks: i32):
    with Kernel(nblocks, threads=64) as bx:
        switch = alloc_shared((32,), f32)
        copy(do[bx * 32], switch)
        for i in Parallel(32):
            if bx * 32 + i < N:
                new[bx * 32 + i] = switch[i] + float[bx * 32 + i] + threadIdx[bx * 32 + i] + tl_smem[bx * 32 + i]
"""


def test_reserved_names_are_renamed_in_generated_source(tmp_path):
    for target in ("sm80", "gfx942", "webgpu"):
        src = compiled(tmp_path, RESERVED_NAMES, target=target).source
        for name in ("do", "new", "float", "threadIdx", "tl_smem", "switch"):
            assert f"{name}_[" in src or f"{name}_:" in src or f"{name}_ " in src, (target, name)
            if name != "tl_smem":  # (tilec's own shared-memory array keeps that name)
                assert f" {name}[" not in src and f"({name}[" not in src, (target, name)
    k = kernel_of(tmp_path, RESERVED_NAMES)
    args = {"do_": RNG.standard_normal(40).astype(np.float32), "new_": np.zeros(40, np.float32),
            "float_": np.ones(40, np.float32), "threadIdx_": np.ones(40, np.float32),
            "tl_smem_": np.ones(40, np.float32), "nblocks": 2}
    run_kernel(k, args)
    np.testing.assert_allclose(args["new_"], args["do_"] + 3)


def test_reserved_names_and_a_scalar_grid_build_with_nvcc(tmp_path):
    """nvcc accepts the renamed names, and the C launcher computes the grid from the scalar."""
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("nvcc") is None:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("nvcc is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
        pytest.skip("nvcc not found")
    src = tmp_path / "k.tile"
    src.write_text(RESERVED_NAMES)
    header = tmp_path / "k.h"
    r = subprocess.run([sys.executable, "-m", "tilec", str(src), "--target", "sm80", "--emit", "header", "-o",
                        str(header)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = header.read_text()
    assert "tilec_gx = ((int64_t)nblocks);" in text


def test_parallel_loop_smaller_than_the_block_has_no_barrier_under_its_guard(tmp_path):
    """A Parallel loop that writes and then reads shared memory, with fewer iterations than threads:
    the lowering must not put a barrier inside the loop's thread-dependent guard (a race on CUDA/HIP,
    refused as non-uniform control flow on WebGPU)."""
    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup

    text = """
kernel k(X: f32[N, 64], Y: out f32[N, 64]):
    with Kernel(N, threads=128) as bx:
        S = alloc_shared((1, 64), f32)
        F = alloc_fragment((1, 64), f32)
        T.copy(X[bx, 0], F)
        for i, j in T.Parallel(1, 64):
            S[i, j] = F[i, j] * 2.0
            F[i, j] = S[i, j] + 1.0
        T.copy(F, Y[bx, 0])
"""
    compiled(tmp_path, text, target="webgpu")
    for target in ("sm80", "gfx942"):
        result = compiled(tmp_path, text, target=target)
        x = RNG.standard_normal((3, 64)).astype(np.float32)
        y = np.zeros_like(x)
        run_simt(result.simt.kernels[0], {"X": x, "Y": y}, {"N": 3}, warp_size=lookup(target).warp_size)
        np.testing.assert_allclose(y, x * 2 + 1, rtol=1e-6)


REGISTER_A_GEMM = """
kernel rg(A: f16[M, 64], B: f16[64, 64], C: out f32[M, 64]):
    with Kernel(ceildiv(M, 64), threads=128) as bx:
        a = alloc_fragment((64, 64), f16)
        b = alloc_shared((64, 64), f16)
        acc = alloc_fragment((64, 64), f32)
        copy(A[bx * 64, 0], a)
        copy(B[0, 0], b)
        clear(acc)
        gemm(a, b, acc)
        copy(acc, C[bx * 64, 0])
"""


def test_register_gemm_operand_outside_the_wgmma_layout_takes_the_other_path_on_sm90(tmp_path):
    """A register A operand filled by a copy (not by an earlier wgmma) is not an error on sm90: the gemm
    runs as on sm80, and the result matches numpy at a ragged M."""
    from tilec.simt.interp import run_simt

    result = compiled(tmp_path, REGISTER_A_GEMM, target="sm90")
    k = result.module.kernels[0]
    assert {g.instruction for g in k.schedule.gemms.values()} <= {"mma", "fma"}
    a = RNG.standard_normal((70, 64)).astype(np.float16)
    b = RNG.standard_normal((64, 64)).astype(np.float16)
    c = np.zeros((70, 64), np.float32)
    run_simt(result.simt.kernels[0], {"A": a, "B": b, "C": c}, {"M": 70})
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


def _on_models(tmp_path, text: str, args: dict, sizes: dict, targets=("sm80", "gfx942")) -> dict[str, dict]:
    """The outputs of the interpreter and of each target's lowering run lane by lane by the SIMT model, on
    copies of `args`: {"interp": ..., target: ...}."""
    import copy

    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup

    out = {}
    got = copy.deepcopy(args)
    run_kernel(kernel_of(tmp_path, text), got)
    out["interp"] = got
    for target in targets:
        got = copy.deepcopy(args)
        sk = compiled(tmp_path, text, target=target).simt.kernels[0]
        run_simt(sk, got, sizes, warp_size=lookup(target).warp_size)
        out[target] = got
    return out


FRAGMENT_PARTS = """
kernel parts(A: f32[M, 32], B: out f32[M, 16], C: out f32[M, 32], S: out f32[32], D: out f32[32]):
    with Kernel(ceildiv(M, 16), threads=64) as bx:
        f = alloc_fragment((16, 32), f32)
        g = alloc_fragment((16, 32), f32)
        cs = alloc_fragment((32,), f32)
        copy(A[bx * 16, 0], f)
        copy(f[0:16, 8:24], B[bx * 16, 0])
        clear(g)
        copy(A[bx * 16:bx * 16 + 16, 0:16], g[0:16, 16:32])
        copy(g, C[bx * 16, 0])
        for i, j in Parallel(16, 32):
            f[i, j] = if_then_else(bx * 16 + i < M, f[i, j], 0.0)
        reduce_sum(f, cs, dim=0)
        atomic_add(S[0], cs)
        reduce_max(f, cs, dim=0, clear=True)
        atomic_max(D[0], cs)
"""


def test_partial_fragment_copies_column_reductions_and_atomics_from_a_reduced_fragment(tmp_path):
    text = FRAGMENT_PARTS
    for m in (64, 37):
        a = RNG.standard_normal((m, 32)).astype(np.float32)
        args = {"A": a, "B": np.zeros((m, 16), np.float32), "C": np.zeros((m, 32), np.float32),
                "S": np.zeros(32, np.float32), "D": np.full(32, -100.0, np.float32)}
        want_c = np.zeros((m, 32), np.float32)
        want_c[:, 16:] = a[:, :16]
        for where, got in _on_models(tmp_path, text, args, {"M": m}).items():
            np.testing.assert_array_equal(got["B"], a[:, 8:24], err_msg=where)
            np.testing.assert_array_equal(got["C"], want_c, err_msg=where)
            np.testing.assert_allclose(got["S"], a.sum(0), rtol=1e-5, atol=1e-5, err_msg=where)
            np.testing.assert_array_equal(got["D"], np.maximum(a.max(0), 0.0) if m % 16 else a.max(0),
                                          err_msg=where)


FOREIGN_FRAGMENT_READS = """
kernel foreign(A: f32[M, 32], B: out f32[M, 64], C: out f32[M, 32]):
    with Kernel(ceildiv(M, 16), threads=64) as bx:
        f = alloc_fragment((16, 32), f32)
        g = alloc_fragment((16, 64), f32)
        rs = alloc_fragment((16,), f32)
        S = alloc_shared((16, 32), f32)
        copy(A[bx * 16, 0], f)
        reduce_sum(f, rs, dim=1)
        for i, j in Parallel(16, 64):
            g[i, j] = f[i, j // 2] * 2.0 + f[15 - i, 0]
        copy(g, B[bx * 16, 0])
        copy(A[bx * 16, 0], S)
        for i, j in Parallel(16, 32):
            S[i, j] = S[i, j] * rs[i]
        copy(S, C[bx * 16, 0])
"""


def test_fragment_read_at_elements_other_threads_hold(tmp_path):
    """`f[i, j // 2]`, `f[15 - i, 0]` in a loop driven by another fragment, and `rs[i]` in a loop no fragment
    drives (TileLang's `A_shared[i, j] *= A_powsum[i]`): read from a shared copy of the fragment."""
    for m in (64, 37):
        a = RNG.standard_normal((m, 32)).astype(np.float32)
        padded = np.zeros((-(-m // 16) * 16, 32), np.float32)
        padded[:m] = a
        flipped = padded.reshape(-1, 16, 32)[:, ::-1, 0].reshape(-1)[:m]
        want_b = np.repeat(a, 2, axis=1) * 2 + flipped[:, None]
        want_c = a * a.sum(1, keepdims=True)
        args = {"A": a, "B": np.zeros((m, 64), np.float32), "C": np.zeros((m, 32), np.float32)}
        for where, got in _on_models(tmp_path, FOREIGN_FRAGMENT_READS, args, {"M": m}).items():
            np.testing.assert_allclose(got["B"], want_b, rtol=1e-6, err_msg=where)
            np.testing.assert_allclose(got["C"], want_c, rtol=1e-5, atol=1e-5, err_msg=where)
    compiled(tmp_path, FOREIGN_FRAGMENT_READS, target="webgpu")


def test_fragment_indexed_outside_a_parallel_loop_works_on_the_gpu_back_ends_too(tmp_path):
    """The interpreter and the GPU back ends agree (issue #30): the element is written by its owner and read
    through shared memory."""
    from tilec.simt.interp import run_simt

    result = compiled(tmp_path, """
kernel k(A: out f32[4]):
    with Kernel(1, threads=64) as bx:
        s = alloc_fragment((1,), f32)
        s[0] = 2.0
        A[0] = s[0]
""", target="sm80")
    a = np.zeros(4, np.float32)
    run_simt(result.simt.kernels[0], {"A": a}, {})
    assert a[0] == 2.0


def test_every_error_of_a_kernel_in_one_run(tmp_path):
    """Errors of different classes arrive together: a type the target lacks (fp8 on gfx90a) and two statements
    the lowering refuses, each at its line."""
    text = """
kernel k(A: f32[M, 32], F8: f8e4m3[M], B: out f32[M, 32]):
    with Kernel(ceildiv(M, 16), threads=64) as bx:
        f = alloc_fragment((16, 32), f32)
        g = alloc_fragment((16, 32), f32)
        copy(A[bx * 16, 0], f)
        clear(g)
        copy(f[0:8, :], g[8:16, :])
        for i, j in Parallel(16, 32):
            f[i, 31 - j] = f[i, j] + 1.0
        copy(g, B[bx * 16, 0])
"""
    with pytest.raises(CompileError) as e:
        compiled(tmp_path, text, target="gfx90a")
    errors = [d for d in e.value.diagnostics if d.severity == "error"]
    assert "f8e4m3 is not supported on gfx90a" in errors[0].message
    lines = sorted(d.span.line for d in errors[1:])
    assert lines == [8, 10], [d.message for d in errors]


def test_block_uniform_update_of_shared_memory_from_itself(tmp_path):
    """`C[0] = C[0] + 1` outside Parallel loops, with several warps: every thread reads before one writes (the
    SIMT model reports the race otherwise)."""
    text = """
kernel count(X: f32[N], Y: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=128) as bx:
        S = alloc_shared((64,), f32)
        C = alloc_shared((1,), i32)
        copy(X[bx * 64], S)
        C[0] = 0
        while C[0] < 3:
            for i in Parallel(64):
                S[i] = S[i] * 2.0 + 1.0
            C[0] = C[0] + 1
        copy(S, Y[bx * 64])
"""
    for m in (128, 70):
        x = RNG.standard_normal(m).astype(np.float32)
        args = {"X": x, "Y": np.zeros(m, np.float32)}
        for where, got in _on_models(tmp_path, text, args, {"N": m}).items():
            np.testing.assert_allclose(got["Y"], ((x * 2 + 1) * 2 + 1) * 2 + 1, rtol=1e-6, err_msg=where)


def test_cumsum_of_whole_fragments(tmp_path):
    text = """
kernel cs(A: f32[M, 16], F: out f32[M, 16], R: out f32[M, 16]):
    with Kernel(ceildiv(M, 8), threads=64) as bx:
        f = alloc_fragment((8, 16), f32)
        g = alloc_fragment((8, 16), f32)
        for it in Serial(2):
            copy(A[bx * 8, 0], f)
            cumsum(f, g, dim=1, reverse=True)
            copy(g, R[bx * 8, 0])
            T.cumsum(src=f, dim=0)
            copy(f, F[bx * 8, 0])
"""
    for m in (64, 21):
        a = RNG.standard_normal((m, 16)).astype(np.float32)
        args = {"A": a, "F": np.zeros_like(a), "R": np.zeros_like(a)}
        padded = np.zeros((-(-m // 8) * 8, 16), np.float32)
        padded[:m] = a
        want_f = np.cumsum(padded.reshape(-1, 8, 16), axis=1).reshape(-1, 16)[:m]
        for where, got in _on_models(tmp_path, text, args, {"M": m}).items():
            np.testing.assert_allclose(got["R"], np.cumsum(a[:, ::-1], 1)[:, ::-1], rtol=1e-5, atol=1e-5,
                                       err_msg=where)
            np.testing.assert_allclose(got["F"], want_f, rtol=1e-5, atol=1e-5, err_msg=where)
    compiled(tmp_path, text, target="webgpu")


# softmax at block_N=256: the same fp8 reductions and comparisons as the default 1024-wide rows, which nvcc takes
# 19 s to compile (6 s here)
@pytest.mark.parametrize(("sample", "defines"), [("vector_add", ["-Ddtype=f8e4m3"]),
                                                 ("softmax", ["-Daccum_dtype=f8e4m3", "-Dblock_N=256"])])
def test_fp8_element_wise_code_builds_with_nvcc(sample, defines, tmp_path):
    """cuda_fp8.h's types have no arithmetic: sums, products and comparisons of fp8 values go through f32, and the
    header is included when an fp8 value appears anywhere (not only in the signature)."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("nvcc") is None:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("nvcc is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
        pytest.skip("nvcc not found")
    src = Path(__file__).resolve().parent.parent / "samples" / f"{sample}.tile"
    r = subprocess.run([sys.executable, "-m", "tilec", str(src), "--target", "sm80", *defines, "-o",
                        str(tmp_path / "k.cubin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
