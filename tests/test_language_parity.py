"""TileLang constructs of issue #30 (break/continue, tuple assignment, ...): each runs in the interpreter
against numpy on fresh random inputs, and every back end either generates code for it or refuses it at
the line with the reason."""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel

RNG = np.random.default_rng(30)
GPU_TARGETS = ["sm90", "sm80", "gfx942", "webgpu"]


def compiled(tmp_path, text: str, **kw):
    p = tmp_path / "k.tile"
    p.write_text(text)
    return tilec.compile(p, verify=True, **kw)


def kernel_of(tmp_path, text: str, **kw):
    return compiled(tmp_path, text, **kw).module.kernels[0]


def error_of(tmp_path, text: str, **kw) -> str:
    with pytest.raises(CompileError) as e:
        compiled(tmp_path, text, **kw)
    return " | ".join(f"{d.span.line}: {d.message}" if d.span else d.message for d in e.value.diagnostics)


def builds_everywhere(tmp_path, text: str, targets=(*GPU_TARGETS, "ascend910b")) -> None:
    for target in targets:
        compiled(tmp_path, text, target=target)


BREAK_CONTINUE = """
kernel steps(A: i32[N], B: out i32[N]):
    with T.Kernel(ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < N:
                s = 0
                for j in T.serial(10):
                    if j == 3:
                        continue
                    if j * A[bx * 128 + i] > 20:
                        break
                    s += j
                n = 0
                while True:
                    n += 1
                    if n % 2 == 1:
                        continue
                    if n >= A[bx * 128 + i]:
                        break
                B[bx * 128 + i] = s * 100 + n
"""


def _steps_reference(a):
    out = []
    for x in a:
        s = 0
        for j in range(10):
            if j == 3:
                continue
            if j * x > 20:
                break
            s += j
        n = 0
        while True:
            n += 1
            if n % 2 == 1:
                continue
            if n >= x:
                break
        out.append(s * 100 + n)
    return np.array(out, np.int32)


def test_break_and_continue_match_python(tmp_path):
    k = kernel_of(tmp_path, BREAK_CONTINUE)
    a = RNG.integers(0, 12, 300).astype(np.int32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_array_equal(b, _steps_reference(a))
    builds_everywhere(tmp_path, BREAK_CONTINUE, GPU_TARGETS)


def test_break_leaves_a_block_uniform_loop(tmp_path):
    text = """
kernel first_negative(A: f32[N], B: out i32[1]):
    with T.Kernel(1, threads=64) as bx:
        found = T.alloc_var(i32)
        found = -1
        for j in T.serial(N):
            if A[j] < 0.0:
                found = j
                break
        B[0] = found
"""
    k = kernel_of(tmp_path, text)
    for _ in range(3):
        a = np.abs(RNG.standard_normal(57)).astype(np.float32)
        at = int(RNG.integers(0, 57))
        a[at:] *= -1
        b = np.zeros(1, np.int32)
        run_kernel(k, {"A": a, "B": b})
        assert b[0] == at
    builds_everywhere(tmp_path, text, GPU_TARGETS)  # (AscendC has no per-thread alloc_var yet: issue #30's Ascend part)


def test_jumps_that_cannot_be_kept_say_why(tmp_path):
    msg = error_of(tmp_path, """
kernel k(A: f32[N]):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            if A[i] > 0.0:
                break
        for k in T.Pipelined(4, num_stages=2):
            continue
        break
""")
    assert "6: `break` in a Parallel loop" in msg
    assert "8: `continue` in a Pipelined loop" in msg
    assert "9: `break` outside a loop" in msg


def test_continue_in_a_parallel_loop_skips_that_iteration(tmp_path):
    text = """
kernel relu(A: f32[N], B: out f32[N]):
    with T.Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i >= N:
                continue
            B[bx * 64 + i] = T.max(A[bx * 64 + i], 0.0)
"""
    k = kernel_of(tmp_path, text)
    a = RNG.standard_normal(150).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_array_equal(b, np.maximum(a, 0))
    builds_everywhere(tmp_path, text, GPU_TARGETS)  # AscendC stores under bounds checks only


def test_tuple_assignment_swaps(tmp_path):
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with T.Kernel(ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < N:
                a = A[bx * 128 + i]
                b = 2.0
                a, b = b, a
                c, d, = a * 3.0, b + a
                B[bx * 128 + i] = a - b + c * d
"""
    k = kernel_of(tmp_path, text)
    a = RNG.standard_normal(300).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_allclose(b, 2 - a + 6 * (a + 2), rtol=1e-6, atol=1e-6)
    builds_everywhere(tmp_path, text)
    assert "2 targets are assigned 3 values" in error_of(tmp_path, text.replace("a, b = b, a", "a, b = b, a, a"))


def test_list_consts_and_allocations_chosen_by_a_const(tmp_path):
    text = """
const trans = True
const sizes = [16, 32, 64]
const blk = sizes[2]
const tile_shape = [2, blk // 2] if trans else [blk // 2, 2]
const row = [0, 1][1 if trans else 0]
kernel k(A: f32[M, 32], B: out f32[M, 32]):
    with T.Kernel(ceildiv(M, 2), threads=64) as bx:
        if trans:
            S = T.alloc_shared(tile_shape, f32)
        else:
            S = T.alloc_shared((blk,), f32)
        T.copy(A[bx * 2, 0], S)
        for i, j in T.Parallel(2, blk // 2):
            if bx * 2 + i < M:
                B[bx * 2 + i, j] = S[i, j] * 2.0 + row
"""
    k = kernel_of(tmp_path, text)
    assert [b.const_shape for b in _allocs(k)] == [(2, 32)]
    a = RNG.standard_normal((37, 32)).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    builds_everywhere(tmp_path, text, GPU_TARGETS)
    assert "index 3 is out of range for a list const of 3 values" in error_of(
        tmp_path, text.replace("sizes[2]", "sizes[3]"))
    assert "'sizes' is a list const, not a number" in error_of(tmp_path, text.replace("sizes[2]", "sizes"))


def _allocs(k):
    from tilec.ir import tile as T
    from tilec.ir.visit import walk_stmts

    return [s.buffer for s in walk_stmts(k.body) if isinstance(s, T.Alloc)]


def test_schedule_statements_and_layout_spellings(tmp_path):
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with T.Kernel(ceildiv(N, 128), threads=128) as bx:
        T.disable_warp_group_reg_alloc()
        S = T.alloc_shared((128,), f32)
        acc = T.alloc_fragment((2,), f32)
        T.annotate_layout({S: tilelang.layout.make_swizzled_layout(S)})
        T.fill(acc[0], 1.5)
        T.fill(acc[1], 2.5)
        T.fill(S, 0.25)
        T.fill(S[3], 3.0)
        T.sync_threads()
        tx = T.get_thread_binding(0)
        S[tx] = S[tx] + A[T.min(bx * 128 + tx, N - 1)]
        T.sync_threads()
        if bx * 128 + tx < N:
            B[bx * 128 + tx] = S[127 - tx]
"""
    k = kernel_of(tmp_path, text)
    assert k.request.keywords.warp_group_reg_alloc is False
    a = RNG.standard_normal(256).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    s = a.reshape(2, 128) + 0.25
    s[:, 3] += 2.75
    np.testing.assert_allclose(b, s[:, ::-1].reshape(-1), rtol=1e-6)
    builds_everywhere(tmp_path, text, GPU_TARGETS)
    msg = error_of(tmp_path, text.replace("T.sync_threads()\n        tx", "for i in T.Parallel(4):\n"
                                          "            T.sync_threads()\n        tx"))
    assert "T.sync_threads() is a statement of the whole block; it cannot be inside a Parallel loop" in msg


def test_disable_warp_group_reg_alloc_keeps_sm90_registers_as_launched(tmp_path):
    gemm = """
kernel gemm(A: f16[M, K], B: f16[K, N], C: out f16[M, N]):
    with T.Kernel(ceildiv(N, 128), ceildiv(M, 128), threads=256) as (bx, by):
        A_s = T.alloc_shared((128, 64), f16)
        B_s = T.alloc_shared((64, 128), f16)
        acc = T.alloc_fragment((128, 128), f32)
        T.clear(acc)
        for k in T.Pipelined(ceildiv(K, 64), num_stages=3):
            T.copy(A[by * 128, k * 64], A_s)
            T.copy(B[k * 64, bx * 128], B_s)
            T.gemm(A_s, B_s, acc)
        T.copy(acc, C[by * 128, bx * 128])
"""
    assert "tl::setmaxnreg_inc<" in compiled(tmp_path, gemm, target="sm90").source
    hinted = gemm.replace("        A_s = ", "        T.disable_warp_group_reg_alloc()\n        A_s = ", 1)
    assert "tl::setmaxnreg_inc<" not in compiled(tmp_path, hinted, target="sm90").source


def test_layout_of_a_tensor_is_refused_with_the_alternative(tmp_path):
    msg = error_of(tmp_path, """
kernel k(dQ: out f32[N, 64]):
    with T.Kernel(1, threads=64) as bx:
        T.annotate_layout({dQ: T.Layout(dQ.shape, lambda l, d: [d, l])})
        T.clear(dQ[0:64, :])
""")
    assert "'dQ' is a tensor: its layout is its caller's" in msg and "drop the annotation" in msg


def test_slice_extents_constant_through_locals(tmp_path):
    text = """
const block_N = 64
kernel k(A: f32[N, 64], B: out f32[N, 64]):
    with T.Kernel(ceildiv(N, block_N), threads=128) as bx:
        S = T.alloc_shared((block_N, 64), f32)
        lo = bx * block_N
        ext = block_N
        half = ext // 2
        T.copy(A[lo:lo + ext, :], S)
        T.copy(S[0:half, :], B[lo:lo + half, :])
        T.copy(S[half:ext, :], B[lo + half:lo + ext, :])
"""
    k = kernel_of(tmp_path, text)
    a = RNG.standard_normal((150, 64)).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)
    builds_everywhere(tmp_path, text, GPU_TARGETS)  # (AscendC copies a part of a tile: issue #30's Ascend part)


CLIPPED_COPY = """
const block_N = 32
const num_split = 2
kernel k(A: f16[N, 64], B: out f32[num_split, block_N, 64]):
    with T.Kernel(num_split, threads=128) as bx:
        S = T.alloc_shared((block_N, 64), f16)
        F = T.alloc_fragment((block_N, 64), f32)
        valid_block_N = T.min(block_N, N // num_split)
        T.clear(F)
        T.fill(S, 0)
        for k in T.Pipelined(T.ceildiv(N // num_split, block_N), num_stages=2):
            T.copy(A[(N // num_split) * bx + k * valid_block_N:(N // num_split) * bx + (k + 1) * valid_block_N, :], S)
            for i, j in T.Parallel(block_N, 64):
                F[i, j] += S[i, j]
        T.copy(F, B[bx, 0, 0])
"""


def _clipped_reference(a, block_n=32, splits=2):
    n = a.shape[0]
    per = n // splits
    valid = min(block_n, per)
    out = np.zeros((splits, block_n, 64), np.float32)
    for bx in range(splits):
        s = np.zeros((block_n, 64), np.float32)
        for k in range(-(-per // block_n)):
            first = per * bx + k * valid
            rows = a[first:first + valid].astype(np.float32)
            s[:len(rows)] = rows
            out[bx] += s
    return out


@pytest.mark.parametrize("n", [20, 100, 131])
def test_copy_from_a_region_with_a_runtime_extent_fills_its_rows(tmp_path, n):
    k = kernel_of(tmp_path, CLIPPED_COPY)
    a = RNG.standard_normal((n, 64)).astype(np.float16)
    b = np.zeros((2, 32, 64), np.float32)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_allclose(b, _clipped_reference(a), rtol=1e-3, atol=1e-3)


def test_copy_with_a_runtime_extent_builds_everywhere(tmp_path):
    builds_everywhere(tmp_path, CLIPPED_COPY)
    msg = error_of(tmp_path, CLIPPED_COPY.replace("T.copy(F, B[bx, 0, 0])", "T.copy(S[0:valid_block_N, :], "
                                                  "B[bx, :, :])"))
    assert "a copy with a run-time extent fills a tile" in msg


COMPACT = """
kernel compact(X: f32[N], Out: out f32[N], Count: out i32[1]):
    with T.Kernel(ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            if bx * 128 + i < N:
                if X[bx * 128 + i] > 0.0:
                    pos = T.atomic_add(Count[0], 1, return_prev=True)
                    Out[pos] = X[bx * 128 + i]
"""

# per-thread code, as TileLang's topk_selector.py writes it: a shared counter handing out slots
SLOTS = """
kernel slots(X: i32[N], Slot: out i32[N], Total: out i32[4]):
    with T.Kernel(ceildiv(N, 64), threads=64) as bx:
        tx = T.get_thread_binding()
        counts = T.alloc_shared([4], T.int32)
        pos = T.alloc_var(T.int32)
        T.fill(counts, 0)
        if bx * 64 + tx < N:
            pos = T.atomic_add(counts[X[bx * 64 + tx] % 4], 1, return_prev=True) + 100
            Slot[bx * 64 + tx] = pos
        if tx < 4:
            T.atomic_add(Total[tx], counts[tx])
"""


def _check_compact(args, n_pos):
    count = int(args["Count"][0])
    assert count == n_pos
    np.testing.assert_array_equal(np.sort(args["Out"][:count]), np.sort(args["X"][args["X"] > 0]))


def _check_slots(args):
    x, slot = args["X"], args["Slot"]
    for b in range(0, len(x), 64):  # within a block, the elements of one class get slots 100, 101, ...
        for c in range(4):
            got = np.sort(slot[b:b + 64][x[b:b + 64] % 4 == c])
            np.testing.assert_array_equal(got, 100 + np.arange(len(got)))
    np.testing.assert_array_equal(args["Total"], np.bincount(x % 4, minlength=4))


def _compact_args(n):
    x = RNG.standard_normal(n).astype(np.float32)
    return {"X": x, "Out": np.zeros(n, np.float32), "Count": np.zeros(1, np.int32)}, int((x > 0).sum())


def _slot_args(n):
    return {"X": RNG.integers(0, 50, n).astype(np.int32), "Slot": np.zeros(n, np.int32),
            "Total": np.zeros(4, np.int32)}


def test_atomic_return_prev_in_the_interpreter(tmp_path):
    args, n_pos = _compact_args(300)
    run_kernel(kernel_of(tmp_path, COMPACT), args)
    _check_compact(args, n_pos)
    args = _slot_args(150)
    run_kernel(kernel_of(tmp_path, SLOTS), args)
    _check_slots(args)


@pytest.mark.parametrize("target", ["sm80", "gfx942"])
def test_atomic_return_prev_lowered(tmp_path, target):
    """The lowering, run lane by lane by the SIMT model: every thread gets its own previous value."""
    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup

    for text, make, check in ((COMPACT, _compact_args, _check_compact), (SLOTS, _slot_args, None)):
        lowered = compiled(tmp_path, text, target=target)
        made = make(150)
        args, extra = made if isinstance(made, tuple) else (made, None)
        run_simt(lowered.simt.kernels[0], args, {"N": 150}, warp_size=lookup(target).warp_size)
        if check is None:
            _check_slots(args)
        else:
            check(args, extra)
    for text in (COMPACT, SLOTS):
        builds_everywhere(tmp_path, text, ["sm90", "webgpu"])


def test_atomic_value_needs_return_prev_and_one_thread_each(tmp_path):
    assert "atomic_add has a value only with return_prev=True" in error_of(
        tmp_path, COMPACT.replace(", return_prev=True", ""))
    block_wide = """
kernel k(C: out i32[2]):
    with T.Kernel(1, threads=64) as bx:
        old = T.atomic_add(C[0], 1, return_prev=True)
        C[1] = old
"""
    assert "made once, by thread 0, for the block" in error_of(tmp_path, block_wide, target="sm80")


def test_a_helper_assigns_an_alloc_var_it_is_given(tmp_path):
    text = """
def bump(v, by):
    v = v + by

def bump_once(v):
    v += 1

kernel k(A: f32[N], B: out f32[N]):
    with T.Kernel(ceildiv(N, 64), threads=64) as bx:
        cnt = T.alloc_var(i32)
        cnt = 0
        bump(cnt, 3)
        bump_once(cnt)
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                B[bx * 64 + i] = A[bx * 64 + i] + cnt
"""
    k = kernel_of(tmp_path, text)
    a = RNG.standard_normal(100).astype(np.float32)
    b = np.zeros_like(a)
    run_kernel(k, {"A": a, "B": b})
    np.testing.assert_allclose(b, a + 4, rtol=1e-6)
    builds_everywhere(tmp_path, text, GPU_TARGETS)


WARP_SPECIALIZED = """
const block_M = 64
const block_N = 64
const block_K = 32

kernel matmul_ws(A: f16[M, K], B: f16[K, N], C: out f16[M, N]):
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), f16)
        B_shared = T.alloc_shared((block_K, block_N), f16)
        C_local = T.alloc_fragment((block_M, block_N), f32)
        data_is_ready = T.alloc_barrier(arrive_count=128)
        compute_is_done = T.alloc_barrier(arrive_count=128)
        with T.ws(0):
            T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            with T.ws(1):
                T.barrier_wait(compute_is_done, (ko + 1) % 2)
                T.tma_copy(A[by * block_M, ko * block_K], A_shared, barrier=data_is_ready)
                T.tma_copy(B[ko * block_K, bx * block_N], B_shared, barrier=data_is_ready)
                T.barrier_arrive(data_is_ready)
            with T.ws(0):
                T.barrier_wait(data_is_ready, ko % 2)
                T.gemm(A_shared, B_shared, C_local)
                T.barrier_arrive(compute_is_done)
        with T.ws(0):
            T.copy(C_local, C[by * block_M, bx * block_N])
"""


def test_explicit_warp_specialization_compiles_as_written(tmp_path):
    result = compiled(tmp_path, WARP_SPECIALIZED, target="sm90")
    k = result.module.kernels[0]
    assert k.threads == 128  # warpgroup 1 only copies: tilec's producer issues its copies
    assert any(d.category == "warp-specialize" for d in result.remarks)
    a = RNG.standard_normal((70, 45)).astype(np.float16)
    b = RNG.standard_normal((45, 50)).astype(np.float16)
    c = np.zeros((70, 50), np.float16)
    run_kernel(kernel_of(tmp_path, WARP_SPECIALIZED), {"A": a, "B": b, "C": c})
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2,
                               atol=2e-2)
    builds_everywhere(tmp_path, WARP_SPECIALIZED, ["sm80", "gfx942", "webgpu"])
    msg = error_of(tmp_path, WARP_SPECIALIZED.replace("barrier_arrive(data_is_ready)", "barrier_arrive(A_shared)"))
    assert "expected a barrier made by T.alloc_barrier(...)" in msg
    assert "T.ws names warpgroups 0..1 (256 threads), but the kernel has 384" in error_of(
        tmp_path, WARP_SPECIALIZED.replace("threads=256", "threads=384"))


def semi_sparse(m, k, rng, meta_bits=16):
    """A random 2:4 sparse f16 matrix (two values kept in each group of four along K), its kept values
    (m x k/2) and their positions packed as TileLang's compress() writes them (two 2-bit indices per group,
    low group first, meta_bits-bit integers)."""
    dense = np.zeros((m, k), np.float16)
    kept = np.zeros((m, k // 2), np.float16)
    meta = np.zeros((m, k // meta_bits), np.int64)
    for r in range(m):
        for g in range(k // 4):
            pos = np.sort(rng.choice(4, 2, replace=False))
            vals = rng.standard_normal(2).astype(np.float16)
            dense[r, 4 * g + pos] = vals
            kept[r, 2 * g:2 * g + 2] = vals
            meta[r, 4 * g // meta_bits] |= (int(pos[0]) | int(pos[1]) << 2) << (4 * (g % (meta_bits // 4)))
    dtype = {8: np.int8, 16: np.int16, 32: np.int32}[meta_bits]
    return dense, kept, meta.astype(np.uint64).astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[meta_bits]).view(
        dtype)


GEMM_SP = """
const block_M = 32
const block_N = 32
const block_K = 64
const e_dtype = "int16"
const e_factor = 16

kernel gemm_sp_fp16(A_sparse: f16[M, K // 2], E: e_dtype[M, K // e_factor], B: f16[K, N], C: out f32[M, N]):
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K // 2), T.float16)
        E_shared = T.alloc_shared((block_M, block_K // e_factor), e_dtype)
        B_shared = T.alloc_shared((block_K, block_N), T.float16)
        C_local = T.alloc_fragment((block_M, block_N), f32)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A_sparse[by * block_M, k * block_K // 2], A_shared)
            T.copy(E[by * block_M, k * block_K // e_factor], E_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm_sp(A_shared, E_shared, B_shared, C_local, transpose_A=False, transpose_E=False,
                      transpose_B=False, policy=T.GemmWarpPolicy.Square)
        T.copy(C_local, C[by * block_M, bx * block_N])
"""


@pytest.mark.parametrize("meta_bits", [16, 8])
def test_gemm_sp_expands_the_2_4_operand(tmp_path, meta_bits):
    text = GEMM_SP.replace('"int16"', f'"int{meta_bits}"').replace("e_factor = 16", f"e_factor = {meta_bits}")
    dense, kept, meta = semi_sparse(40, 128, RNG, meta_bits)
    b = RNG.standard_normal((128, 37)).astype(np.float16)
    c = np.zeros((40, 37), np.float32)
    run_kernel(kernel_of(tmp_path, text), {"A_sparse": kept, "E": meta, "B": b, "C": c})
    np.testing.assert_allclose(c, dense.astype(np.float32) @ b.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_gemm_sp_lowered_matches_the_interpreter(tmp_path):
    from tilec.simt.interp import run_simt

    dense, kept, meta = semi_sparse(40, 128, RNG)
    args = {"A_sparse": kept, "E": meta, "B": RNG.standard_normal((128, 37)).astype(np.float16),
            "C": np.zeros((40, 37), np.float32)}
    result = compiled(tmp_path, GEMM_SP, target="sm80")
    assert any(d.category == "gemm" and "expands its 2:4 sparse operand" in d.message for d in result.remarks)
    run_simt(result.simt.kernels[0], args, {"M": 40, "K": 128, "N": 37})
    np.testing.assert_allclose(args["C"], dense.astype(np.float32) @ args["B"].astype(np.float32), rtol=2e-3,
                               atol=2e-3)
    builds_everywhere(tmp_path, GEMM_SP, ["sm90", "gfx942"])
    assert "is 32 x 4, not 32 x 2" in error_of(tmp_path, GEMM_SP.replace("block_K // e_factor), e_dtype)",
                                                                          "block_K // 32), e_dtype)"))


FRAGMENT_ELEMENTS = """
kernel k(A: f32[N, 16], B: out f32[N]):
    with T.Kernel(ceildiv(N, 16), threads=64) as bx:
        F = T.alloc_fragment((16, 16), f32)
        S = T.alloc_fragment((16,), f32)
        T.copy(A[bx * 16, 0], F)
        T.reduce_sum(F, S, dim=1)
        x = S[0] + F[1, 2]
        S[3] = x
        S[5] += 1.0
        T.copy(S, B[bx * 16])
"""


def _fragment_elements_reference(a):
    s = a.reshape(-1, 16, 16).sum(-1)
    s[:, 3] = s[:, 0] + a.reshape(-1, 16, 16)[:, 1, 2]
    s[:, 5] += 1
    return s.reshape(-1)


@pytest.mark.parametrize("target", [None, "sm80", "gfx942"])
def test_fragment_elements_outside_parallel_loops(tmp_path, target):
    """Read and written outside Parallel loops, a fragment's element goes through its owner (and, read, through
    shared memory to every thread): the interpreter and every GPU back end agree."""
    a = RNG.standard_normal((48, 16)).astype(np.float32)
    args = {"A": a, "B": np.zeros(48, np.float32)}
    if target is None:
        run_kernel(kernel_of(tmp_path, FRAGMENT_ELEMENTS), args)
        builds_everywhere(tmp_path, FRAGMENT_ELEMENTS, GPU_TARGETS)
    else:
        from tilec.simt.interp import run_simt
        from tilec.targets.registry import lookup

        run_simt(compiled(tmp_path, FRAGMENT_ELEMENTS, target=target).simt.kernels[0], args, {"N": 48},
                 warp_size=lookup(target).warp_size)
    np.testing.assert_allclose(args["B"], _fragment_elements_reference(a), rtol=1e-5, atol=1e-5)


def test_ascend_builds_a_two_launch_function_with_and_without_scratch(tmp_path):
    two = """
kernel two(A: f32[N], B: out f32[N], C: out f32[N]):
    with T.Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                B[bx * 64 + i] = A[bx * 64 + i] * 2.0
    with T.Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                C[bx * 64 + i] = B[bx * 64 + i] + 1.0
"""
    scratch = two.replace("    with T.Kernel", "    W = T.alloc_global([N], f32)\n    with T.Kernel", 1)
    for text in (two, scratch):  # (the stages run in order on the model: tests/test_ascend_cli.py)
        result = compiled(tmp_path, text, target="ascend910b")
        assert [p.name for p in result.simt] == ["two__stage0", "two__stage1"]


def _construct_cases():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench" / "constructs"))
    from cases import CASES

    return CASES


@pytest.mark.parametrize("case", _construct_cases(), ids=lambda c: c.name)
def test_gpu_construct_cases_match_their_references(case):
    """bench/constructs/ (the GPU suite's cases for these constructs, run by bench/ports_gpu.py) against their numpy
    references in the interpreter, at the ragged shape."""
    from tilec.interp.run import random_inputs

    k = tilec.compile(case.folder / case.file, verify=True).module.kernels[0]
    sizes = case.sizes["ragged"]
    rng = np.random.default_rng(3)
    args = case.inputs(sizes, rng) if case.inputs else random_inputs(k, sizes, seed=5)
    run_kernel(k, args)
    for name, want in case.reference(args, sizes).items():
        np.testing.assert_allclose(np.asarray(args[name], np.float32), np.asarray(want, np.float32),
                                   rtol=max(case.rtol, 1e-5), atol=max(case.atol, 1e-5), err_msg=name)
