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
