"""gemm: C += op(A) @ op(B) over the block (`transpose_A/B`, `clear_accum`, warp `policy`).

Schema: A, B and C 2-D regions (unit dims squeezed) with matching M, N, K. Reads A and B, writes C.
layout-inference chooses the instruction (the schedule's GemmSchedule) among the implementations registered in
tilec/ops/gemm_impl.py (gemm_fma here: scalar; the back ends' own: tilec/targets/cuda/gemm_mma.py, gemm_wgmma.py,
tilec/targets/hip/gemm_mfma.py); lowering dispatches to that implementation's `lower(cx, s)`, which talks to the
narrow gemm_impl.GemmContext only, after the target's LoweringExtension had its chance (sm90: wgmma).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import tile as T
from . import gemm_impl
from .schema import extents, fmt, squeeze


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


@dataclass(frozen=True)
class GemmQuery:
    """What layout-inference tells an instruction's implementation about one gemm: the narrow context of
    `accumulator_layout(query) -> Fragment | None` (None: the instruction cannot run this gemm)."""

    s: T.Gemm
    kernel: T.Kernel
    warps: int  # warps (of the target's warp size) in the block
    policy: str  # the warp policy, made full_row where rows must stay inside one warp
    pinned_warps: tuple[int, int] | None  # a partition the schedule request pins
    a_layout: object | None  # the layout already chosen for a register A operand's class, if any
    col_reduced: bool  # the accumulator's class is reduced along columns somewhere
    rows_projected: bool  # its rows are projected (row statistics, row reductions)
    transposed_wanted: bool  # MFMA: a transposed accumulator serves its uses better

    @property
    def k(self) -> int:
        ext = [e for e in self.s.a.const_extents if e != 1] or [1]
        return ext[0] if self.s.transpose_a else ext[-1]


def operand_tiles_ok(s: T.Gemm) -> bool:
    """Operands a warp-level matrix instruction (mma.sync, MFMA) reads: B in shared memory, A and B of one type,
    shared tiles 2-D with 16-byte rows starting at multiples of 8, N a multiple of 8."""
    if s.a.buffer.dtype != s.b.buffer.dtype or s.b.buffer.scope != "shared":
        return False
    for r in (s.a, s.b):
        if r.buffer.scope == "shared":
            shape = r.buffer.const_shape
            if len(shape) != 2 or (shape[-1] * r.buffer.dtype.bytes) % 16 != 0:
                return False
            if any(not isinstance(x, T.Const) or int(x.value) % 8 != 0 for x in r.starts):
                return False
    ext_b = [e for e in s.b.const_extents if e != 1]
    n = ext_b[0] if s.transpose_b else ext_b[-1]
    return n % 8 == 0


def choose_warps(q: GemmQuery, atom_m: int, atom_n: int) -> tuple[int, int] | None:
    """A partition of the block's warps over M x N by the gemm's policy (or the pinned one), each warp's tile a
    whole number of atom_m x atom_n atoms; None when there is none."""
    m, n = q.s.c.buffer.const_shape
    options = []
    wm = 1
    while wm <= q.warps:
        if q.warps % wm == 0:
            wn = q.warps // wm
            if m % (atom_m * wm) == 0 and n % (atom_n * wn) == 0:
                options.append((wm, wn))
        wm *= 2
    if not options:
        return None
    if q.pinned_warps is not None:
        return q.pinned_warps if q.pinned_warps in options else None
    if q.policy == "full_row":
        return max(options, key=lambda o: o[0])
    if q.policy == "full_col":
        return max(options, key=lambda o: o[1])
    # square: warp tiles as square as possible (in elements)
    return min(options, key=lambda o: (abs((m / o[0]) - (n / o[1])), -o[0]))


def missed_reason(impl, q: GemmQuery) -> str:
    """Why the matrix instruction of implementation `impl` (a gemm_impl.GemmImpl the target offers) does not run
    gemm q, for a remark: the first of its documented requirements (see each implementation's
    accumulator_layout) that q fails, checked in the order a user can act on them."""
    s, c_buf, a, b = q.s, q.s.c.buffer, q.s.a.buffer, q.s.b.buffer
    instr = impl.instruction
    name = instr.target_name
    if a.dtype not in instr.operand_types:
        takes = "/".join(str(t) for t in instr.operand_types)
        return f"its operands are {a.dtype}; {name} takes {takes}"
    if c_buf.scope != "fragment" or c_buf.dtype.name != "f32":
        return f"its accumulator '{c_buf.name}' is a {c_buf.dtype} {c_buf.scope}; {name} accumulates into f32 fragments"
    if c_buf.const_shape is None or len(c_buf.const_shape) != 2 or s.c.const_extents is None:
        return f"its accumulator '{c_buf.name}' is not a whole 2-D fragment"
    if a.dtype != b.dtype:
        return f"A is {a.dtype} and B is {b.dtype}"
    if b.scope != "shared":
        return f"B ('{b.name}') is not in shared memory"
    if q.kernel.threads % instr.lanes:
        return f"the block's {q.kernel.threads} threads are not whole {instr.lanes}-thread groups"
    if q.k % instr.step_k(a.dtype):
        return f"K = {q.k} is not a multiple of {instr.step_k(a.dtype)}"
    m, n = c_buf.const_shape
    if m % instr.m or n % instr.n:
        return f"the {m}x{n} accumulator is not a whole number of {instr.m}x{instr.n} tiles"
    if impl.warp_tiled and not operand_tiles_ok(s):
        return ("a shared operand is not a 2-D tile of 16-byte rows starting at a multiple of 8, or N is not a "
                "multiple of 8")
    if impl.warp_tiled and choose_warps(q, instr.m, instr.n) is None:
        return (f"no partition of the block's {q.warps} warps over the {m}x{n} accumulator fits "
                f"{instr.m}x{instr.n} tiles")
    if a.scope == "fragment":
        return f"its register A operand '{a.name}' does not have {name}'s operand layout"
    return (f"its operand tiles or warp partition do not fit {name} (whole 2-D shared tiles in the instruction's "
            "layout, a partition of the warps that tiles the accumulator)")


def lower(cx, s: T.Gemm) -> None:
    """The schedule's instruction for s, by its registered implementation (tilec/ops/gemm_impl.py)."""
    instruction = cx.sched.instruction(s)
    impl = gemm_impl.lookup(instruction, cx.target)
    if impl is None:
        raise cx.fail(f"internal error: no lowering of gemm instruction '{instruction}' for {cx.target.name}", s.span)
    if s.clear_accum and not impl.zeroes_accumulator:
        cx.lower(T.Fill(s.span, s.c, T.Const(s.c.buffer.dtype, None, 0)))
    impl.lower(gemm_impl.GemmContext.of(cx), s)


GEMM_INPUTS = {D.F16, D.BF16, D.F32, D.F8E4M3, D.F8E5M2, D.I8}
GEMM_ACCUMULATORS = {D.F32, D.F16, D.I32}


def check(s: T.Gemm, rep: Reporter) -> None:
    """2-D operands with matching M, N, K in scopes a matrix unit reads, supported operand and accumulator types."""
    ok = True
    for name, r, scopes in (("A", s.a, ("shared", "fragment")), ("B", s.b, ("shared", "fragment")),
                            ("C", s.c, ("fragment", "local"))):
        if r.buffer.scope not in scopes:
            rep.error(f"gemm operand {name} ('{r.buffer.name}') must be in {' or '.join(scopes)} memory, not "
                      f"{r.buffer.scope}", r.span or s.span)
            ok = False
    exts = [extents(r, rep, s.span) for r in (s.a, s.b, s.c)]
    if not ok or any(e is None for e in exts):
        return
    a, b, c = (squeeze(e) if len(squeeze(e)) == 2 else e for e in exts)
    for name, e, r in (("A", a, s.a), ("B", b, s.b), ("C", c, s.c)):
        if len(e) != 2:
            rep.error(f"gemm operand {name} ('{r.buffer.name}') must be 2-D, got {fmt(e)}", r.span or s.span)
            ok = False
        elif 1 in e:
            # The lowering (and every matrix instruction) works on squeezed 2-D tiles.
            rep.error(f"gemm operand {name} ('{r.buffer.name}') is {fmt(e)}: M, N and K must each be more than "
                      "1 (write a matrix-vector or outer product as a Parallel loop)", r.span or s.span)
            ok = False
    if not ok:
        return
    m, k = (a[1], a[0]) if s.transpose_a else a
    k2, n = (b[1], b[0]) if s.transpose_b else b
    if k != k2:
        rep.error(f"gemm K mismatch: A is {fmt(a)}{' (transposed)' if s.transpose_a else ''}, B is "
                  f"{fmt(b)}{' (transposed)' if s.transpose_b else ''}", s.span)
    elif c != (m, n):
        rep.error(f"gemm C must be {m}x{n} for A {fmt(a)} and B {fmt(b)}, got {fmt(c)}", s.span)
    da, db, dc = s.a.buffer.dtype, s.b.buffer.dtype, s.c.buffer.dtype
    if da != db and not ({da, db} <= {D.F8E4M3, D.F8E5M2}):
        rep.error(f"gemm operand dtypes differ: A is {da}, B is {db}", s.span)
    elif da not in GEMM_INPUTS:
        rep.error(f"gemm does not support {da} operands", s.span)
    if dc not in GEMM_ACCUMULATORS:
        rep.error(f"gemm accumulator C must be f32, f16 or i32, got {dc}", s.c.span or s.span)
    elif (da == D.I8) != (dc == D.I32):
        rep.error(f"gemm of {da} operands cannot accumulate in {dc}", s.span)


def interpret(block, s: T.Gemm) -> None:
    """C (+)= op(A) @ op(B) in f32 (i64 for integers), rounded once to C's type."""
    import numpy as np

    def mat(r: T.Region):
        x = block.read_region(r)
        return x.reshape([e for e in x.shape if e != 1] or [1]) if x.ndim != 2 else x

    a, b = mat(s.a), mat(s.b)
    if s.transpose_a:
        a = a.T
    if s.transpose_b:
        b = b.T
    c_dt = s.c.buffer.dtype
    if c_dt.is_int:
        prod = a.astype(np.int64) @ b.astype(np.int64)
    else:
        prod = a.astype(np.float32) @ b.astype(np.float32)
    prod = prod.reshape(block.extents(s.c))
    result = prod if s.clear_accum else block.read_region(s.c) + prod
    block.write_region(s.c, block.round_to(result, c_dt))
