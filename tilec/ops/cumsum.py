"""cumsum(src, dst, dim, reverse): inclusive prefix sums along one dimension. Reads src, writes dst.

Lowering: a serial scan of each line along `dim`, one line per thread, in shared memory (f16/bf16 accumulate in
f32); a fragment operand is refused at the user's line (scan a shared copy instead).
"""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import binary, cast
from ..ir.fold import fold
from ..ir.layout import add, c, mul
from .schema import extents, fmt, squeeze


def lower(cx, s: T.CumSum) -> None:
    for r in (s.src, s.dst):
        if r.buffer.scope != "shared":
            raise cx.fail(f"cumsum of the {r.buffer.scope} buffer '{r.buffer.name}' is not supported on "
                          f"{cx.target.name} yet: copy it to a shared buffer and scan that", s.span)
    ext = s.src.const_extents
    n = ext[s.dim]
    acc_dt = D.F32 if s.src.buffer.dtype.is_float and s.src.buffer.dtype.bits < 32 else s.src.buffer.dtype
    lines = [e for d, e in enumerate(ext) if d != s.dim] or [1]

    def line(tile: list[T.Expr]) -> None:
        acc = cx.declare("scan", T.Const(acc_dt, None, 0), acc_dt)
        t = cx.fresh("t")

        def step():
            j = add(c(n - 1), mul(t, c(-1))) if s.reverse else t
            full = tile[:s.dim] + [j] + tile[s.dim:] if len(ext) > 1 else [j]
            src_idx = [add(cx.lx(st), x) for st, x in zip(s.src.starts, full, strict=True)]
            dst_idx = [add(cx.lx(st), x) for st, x in zip(s.dst.starts, full, strict=True)]
            sb, db = s.src.buffer, s.dst.buffer
            value = cast(cx.ref(sb, src_idx, s.span), acc_dt)
            cx.emit(S.SAssign(s.span, acc, binary("+", acc, value, acc_dt)))
            cx.emit(S.SStore(s.span, cx.sbuf(db), fold(cx.address(db, dst_idx, s.span)), cast(acc, db.dtype)))

        cx.emit(S.SFor(s.span, t, c(0), c(n), cx.block(step)))

    cx.spread(lines, "line", line, s.span)


def reads(s: T.CumSum) -> list[T.Region]:
    return [s.src]


def writes(s: T.CumSum) -> list[T.Region]:
    return [s.dst]


def check(s: T.CumSum, rep: Reporter) -> None:
    """Source and destination of one shape."""
    a, b = extents(s.src, rep, s.span), extents(s.dst, rep, s.span)
    if a is not None and b is not None and squeeze(a) != squeeze(b):
        rep.error(f"cumsum shape mismatch: source is {fmt(a)}, destination is {fmt(b)}", s.span)


def interpret(block, s: T.CumSum) -> None:
    import numpy as np

    src = block.read_region(s.src)
    acc = src.astype(np.float32) if s.src.buffer.dtype.is_float and src.dtype != np.float64 else src
    if s.reverse:
        acc = np.flip(acc, axis=s.dim)
    r = np.cumsum(acc, axis=s.dim)
    if s.reverse:
        r = np.flip(r, axis=s.dim)
    block.write_region(s.dst, block.round_to(r.reshape(block.extents(s.dst)), s.dst.buffer.dtype))
