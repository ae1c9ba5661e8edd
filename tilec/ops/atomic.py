"""atomic_add/max/min(dst, value): read-modify-write of global or shared memory. Writes (and reads) dst,
reads a region value. Lowering: one atomic per fragment element (or one, by thread 0, for a scalar)."""

from __future__ import annotations

from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import both, cast, compare
from ..ir.intrinsics import call
from ..ir.layout import (
    Projected,
    c,
    valid,
)


def lower(cx, s: T.Atomic) -> None:
    dst = s.dst
    if isinstance(s.value, T.Region) and s.value.buffer.scope == "fragment":
        vb = s.value.buffer
        layout = cx.sched.fragment(vb)
        if isinstance(layout, Projected):
            raise cx.fail("atomic update from a replicated (reduced) fragment would apply it several times; "
                            "copy it to shared memory first", s.span)
        kv = cx.fresh("r")

        def body():
            coords = layout.coords(cx.tid, kv)
            tile = [x for x, e in zip(coords, layout.shape, strict=True) if e != 1] or [c(0)]
            idx = cx.region_index(dst, tile)
            guard = both(cx.bounds(dst, idx), valid(layout, cx.tid, kv))
            addr = cx.addr(dst.buffer, idx, s.span)
            val = cast(S.Ref(vb.dtype, None, cx.sbuf(vb), kv), dst.buffer.dtype)
            st: S.SStmt = call(s.span, "atomic", [addr, val], kind=s.kind)
            cx.emit(st if guard is None else S.SIf(None, guard, [st]))

        cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), cx.block(body), unroll=True))
        return
    if isinstance(s.value, T.Region):
        raise cx.fail("atomic update from a shared or global region is not supported; use a fragment",
                        s.span)
    ext = dst.const_extents
    if any(e != 1 for e in ext):
        raise cx.fail("atomic update of a region with a scalar; index one element", s.span)
    idx = [cx.lx(x) for x in dst.starts]
    guard = both(cx.bounds(dst, idx), compare("==", cx.tid, c(0)))
    addr = cx.addr(dst.buffer, idx, s.span)
    cx.emit(S.SIf(s.span, guard, [call(s.span, "atomic", [addr, cast(cx.lx(s.value), dst.buffer.dtype)], kind=s.kind)]))


def reads(s: T.Atomic) -> list[T.Region]:
    return [s.value] if isinstance(s.value, T.Region) else []


def writes(s: T.Atomic) -> list[T.Region]:
    return [s.dst]
