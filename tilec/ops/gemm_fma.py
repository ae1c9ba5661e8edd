"""The gemm implementation for targets (or operands) without a matrix instruction: each thread computes
its accumulator elements with scalar multiply-adds; register operands are first staged through shared memory."""

from __future__ import annotations

import dataclasses

from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import cast
from ..ir.fold import as_int
from ..ir.layout import (
    SharedLayout,
    c,
    valid,
)
from . import gemm


def stage_operands(cx, s: T.Gemm) -> T.Gemm:
    """The FMA path reads whole rows of A and columns of B, which a fragment spreads over the threads:
    stage each register operand through a shared buffer (written, then a barrier). The gemms of a kernel share
    one staging buffer per operand position, dtype and shape: each gemm ends with a barrier before the next may
    write it (so mha_bwd's two staged gemms add one 8 KB buffer, not two)."""
    regions: dict[str, T.Region] = {}
    for name in ("a", "b"):
        r: T.Region = getattr(s, name)
        b = r.buffer
        if b.scope != "fragment":
            continue
        shape = b.const_shape
        if (shape is None or len(shape) != 2 or r.const_extents != shape
                or any(as_int(cx.lx(x)) != 0 for x in r.starts)):
            raise cx.fail("gemm with a register operand needs the matrix-instruction path (f16/bf16 "
                            "operands, f32 accumulator, tile sizes multiple of 16) or the whole 2-D fragment",
                            s.span)
        layout = cx.sched.fragment(b)
        key = (name, b.dtype, shape)
        if key in cx.gemm_stages:
            stage = cx.gemm_stages[key]
            lay = cx.staged_layouts[stage]
            sb = cx.buffers[stage]
        else:
            stage = T.Buffer(cx.fresh(f"{b.name}_stage").name, b.dtype, [c(d) for d in shape], "shared", b.span)
            lay = SharedLayout(shape, b.dtype.bytes)
            cx.staged_layouts[stage] = lay
            cx.staged.append(stage)
            sb = S.SBuffer(stage.name, b.dtype, "shared", lay.size, origin=f"{b.name} staged for gemm")
            cx.shared.append(sb)
            cx.buffers[stage] = sb
            cx.gemm_stages[key] = stage
        cx.before_shared_access(False, True)
        kv = cx.fresh("r")
        i, j = layout.coords(cx.tid, kv)
        st: S.SStmt = S.SStore(s.span, sb, lay.offset([i, j]), S.Ref(b.dtype, None, cx.sbuf(b), kv))
        ok = valid(layout, cx.tid, kv)
        cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), [st if ok is None else S.SIf(None, ok, [st])],
                         unroll=True))
        cx.smem_dirty = True
        regions[name] = T.Region(stage, [c(0), c(0)], list(r.extents), r.span)
    cx.before_shared_access(True, False)
    cx.smem_read = True
    return dataclasses.replace(s, **regions)


@gemm.register("fma")
def lower(cx, s: T.Gemm) -> None:
    staged = s.a.buffer.scope == "fragment" or s.b.buffer.scope == "fragment"
    if staged:
        s = stage_operands(cx, s)
    m, n, kd = gemm.dims(s)
    cb = s.c.buffer
    if cb.scope != "fragment":
        raise cx.fail("gemm accumulator must be a fragment", s.span)
    layout = cx.sched.fragment(cb)
    kv = cx.fresh("r")
    acc_dt = D.F32 if cb.dtype.is_float else D.I32

    def body():
        i, j = layout.coords(cx.tid, kv)
        i = cx.declare("i", i)
        j = cx.declare("j", j)
        acc = cx.declare("acc", T.Const(acc_dt, None, 0), acc_dt)
        kk = cx.fresh("k")
        a_idx = gemm.operand_index(cx, s.a, kk, i) if s.transpose_a else gemm.operand_index(cx, s.a, i, kk)
        b_idx = gemm.operand_index(cx, s.b, j, kk) if s.transpose_b else gemm.operand_index(cx, s.b, kk, j)
        av = cast(cx.ref(s.a.buffer, a_idx, s.span),
                   acc_dt)
        bv = cast(cx.ref(s.b.buffer, b_idx, s.span),
                   acc_dt)
        upd = S.SAssign(None, acc, T.Binary(acc_dt, None, "+", acc, T.Binary(acc_dt, None, "*", av, bv)))
        cx.emit(S.SFor(None, kk, c(0), c(kd), [upd], unroll=kd <= 64))
        cur = S.Ref(cb.dtype, None, cx.sbuf(cb), kv)
        cx.emit(S.SStore(s.span, cx.sbuf(cb), kv,
                           cast(T.Binary(acc_dt, None, "+", cast(cur, acc_dt), acc), cb.dtype)))

    ok = valid(layout, cx.tid, kv)
    inner = cx.block(body)
    cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), inner if ok is None else [S.SIf(None, ok, inner)],
                     unroll=True))
    if staged:
        cx.barrier()  # the staging buffer is rewritten by the next gemm, possibly in the next iteration
