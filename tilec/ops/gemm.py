"""gemm: C += op(A) @ op(B) over the block (`transpose_A/B`, `clear_accum`, warp `policy`).

Schema: A, B and C 2-D regions (unit dims squeezed) with matching M, N, K. Reads A and B, writes C.
layout-inference chooses the instruction (the schedule's GemmSchedule); lowering dispatches to the
implementation registered for it in IMPLEMENTATIONS (gemm_fma: scalar, gemm_mma: mma.sync m16n8k16,
gemm_mfma: AMD MFMA 16x16x16), after the target's LoweringExtension had its chance (sm90: wgmma).
Each implementation is a module `lower(cx, s)` talking to the lowering context only.
"""

from __future__ import annotations

from ..ir import tile as T


def dims(s: T.Gemm) -> tuple[int, int, int]:
    a = [e for e in s.a.const_extents if e != 1]
    b = [e for e in s.b.const_extents if e != 1]
    m, kd = (a[1], a[0]) if s.transpose_a else (a[0], a[1])
    n = b[0] if s.transpose_b else b[1]
    return m, n, kd


def operand_index(cx, r: T.Region, row: T.Expr, col: T.Expr) -> list[T.Expr]:
    return cx.region_index(r, [row, col])


def reads(s: T.Gemm) -> list[T.Region]:
    return [s.a, s.b]


def writes(s: T.Gemm) -> list[T.Region]:
    return [s.c]


IMPLEMENTATIONS: dict[str, object] = {}  # instruction -> lower(cx, s); the implementation modules register


def register(instruction: str):
    def add_implementation(lower):
        IMPLEMENTATIONS[instruction] = lower
        return lower
    return add_implementation


def lower(cx, s: T.Gemm) -> None:
    """The schedule's instruction for s, by the target's extension or a registered implementation."""
    instruction = cx.sched.instruction(s)
    if s.clear_accum:
        cx.lower(T.Fill(s.span, s.c, T.Const(s.c.buffer.dtype, None, 0)))
    if cx.ext.lower_gemm(s, instruction):
        return
    if instruction not in IMPLEMENTATIONS:
        raise cx.fail(f"internal error: no lowering of gemm instruction '{instruction}' for {cx.target.name}", s.span)
    IMPLEMENTATIONS[instruction](cx, s)
