"""fill / clear: every element of a region set to one value. Writes dst.

Lowering: fragments element by element in registers; memory regions spread over the threads, bounds-guarded.
"""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import cast
from ..ir.fold import fold
from ..ir.layout import (
    c,
)
from .schema import extents


def lower(cx, s: T.Fill) -> None:
    b = s.dst.buffer
    value = cast(cx.lx(s.value), b.dtype)
    if b.scope == "fragment":
        layout = cx.sched.fragment(b)
        kv = cx.fresh("r")
        body = [S.SStore(s.span, cx.sbuf(b), kv, value)]
        cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), body, unroll=True))
        return
    if b.scope in ("local", "var"):
        size = cx.sbuf(b).size
        kv = cx.fresh("r")
        cx.emit(S.SFor(s.span, kv, c(0), c(size), [S.SStore(s.span, cx.sbuf(b), kv, value)], unroll=True))
        return
    sext = [e for e in s.dst.const_extents if e != 1] or [1]

    def point(tile: list[T.Expr]) -> None:
        idx = cx.region_index(s.dst, tile)
        guard = cx.bounds(s.dst, idx)
        st: S.SStmt = S.SStore(s.span, cx.sbuf(b), fold(cx.address(b, idx, s.span)), value)
        cx.emit(st if guard is None else S.SIf(None, guard, [st]))

    cx.spread(sext, "e", point, s.span)


def reads(s: T.Fill) -> list[T.Region]:
    return []


def writes(s: T.Fill) -> list[T.Region]:
    return [s.dst]


def check(s: T.Fill, rep: Reporter) -> None:
    extents(s.dst, rep, s.span)


def interpret(block, s: T.Fill) -> None:
    import numpy as np

    block.write_region(s.dst, np.broadcast_to(block.eval(s.value, None), block.extents(s.dst)))
