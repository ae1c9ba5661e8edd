"""atomic_add/max/min(dst, value): read-modify-write of global or shared memory. Writes (and reads) dst,
reads a region value. Lowering: one atomic per fragment or shared element (of a replicated, reduced fragment:
by one of the replicas), one by thread 0 for a block-wide scalar, one per iteration for a per-element update
inside a Parallel loop, one per thread for a per-element update in per-thread code (check-threads marks it).
A per-element update with `result` (return_prev=True) stores the element's previous value in that local."""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import both, cast, compare
from ..ir.layout import (
    Projected,
    c,
    valid,
)
from .schema import extents, fmt, squeeze


def lower(cx, s: T.Atomic) -> None:
    dst = s.dst
    if isinstance(s.value, T.Region) and s.value.buffer.scope == "fragment":
        vb = s.value.buffer
        layout = cx.sched.fragment(vb)
        kv = cx.fresh("r")

        def body():
            coords = layout.coords(cx.tid, kv)
            tile = [x for x, e in zip(coords, layout.shape, strict=True) if e != 1] or [c(0)]
            idx = cx.region_index(dst, tile)
            guard = both(cx.bounds(dst, idx), valid(layout, cx.tid, kv))
            if isinstance(layout, Projected):  # a reduced fragment is replicated: one replica applies it
                guard = both(guard, layout.owner(cx.tid, kv))
            addr = cx.addr(dst.buffer, idx, s.span)
            val = cast(S.Ref(vb.dtype, None, cx.sbuf(vb), kv), dst.buffer.dtype)
            st: S.SStmt = S.call(s.span, "atomic", [addr, val], kind=s.kind)
            cx.emit(st if guard is None else S.SIf(None, guard, [st]))

        cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), cx.block(body), unroll=True))
        return
    if isinstance(s.value, T.Region) and s.value.buffer.scope == "shared":
        src = s.value

        def point(tile: list[T.Expr]) -> None:  # each element of the tile by one thread
            idx = cx.region_index(dst, tile)
            guard = cx.bounds(dst, idx)
            val = cast(cx.ref(src.buffer, cx.region_index(src, tile), s.span), dst.buffer.dtype)
            st: S.SStmt = S.call(s.span, "atomic", [cx.addr(dst.buffer, idx, s.span), val], kind=s.kind)
            cx.emit(st if guard is None else S.SIf(None, guard, [st]))

        cx.spread([e for e in src.const_extents if e != 1] or [1], "e", point, s.span)
        return
    if isinstance(s.value, T.Region):
        raise cx.fail("atomic update from a global region is not supported: copy it to a fragment or to "
                      "shared memory first", s.span)
    ext = dst.const_extents
    if any(e != 1 for e in ext):
        raise cx.fail("atomic update of a region with a scalar; index one element", s.span)
    idx = [cx.lx(x) for x in dst.starts]
    # A block-wide scalar update is made once, by thread 0; a per-element one (inside a Parallel
    # loop) by the thread that owns the iteration.
    if s.result is not None and not s.per_element:
        raise cx.fail(f"atomic_{s.kind}(..., return_prev=True) outside a Parallel loop and per-thread code would be "
                      "made once, by thread 0, for the block: the other threads would have no previous value; "
                      "use it inside a Parallel loop or in per-thread code (T.get_thread_binding())", s.span)
    guard = cx.bounds(dst, idx) if s.per_element else both(cx.bounds(dst, idx), compare("==", cx.tid, c(0)))
    addr = cx.addr(dst.buffer, idx, s.span)
    value = cast(cx.lx(s.value), dst.buffer.dtype)
    st = S.call(s.span, "atomic", [addr, value], kind=s.kind) if s.result is None else \
        S.call(s.span, "atomic_prev", [cx.lx(s.result), addr, value], kind=s.kind)
    cx.emit(st if guard is None else S.SIf(s.span, guard, [st]))


def reads(s: T.Atomic) -> list[T.Region]:
    return [s.value] if isinstance(s.value, T.Region) else []


def writes(s: T.Atomic) -> list[T.Region]:
    return [s.dst]


def check(s: T.Atomic, rep: Reporter) -> None:
    """A global or shared destination; a region value of the destination's shape."""
    if s.dst.buffer.scope not in ("global", "shared"):
        rep.error(f"atomic_{s.kind} needs a global or shared destination, '{s.dst.buffer.name}' is "
                  f"{s.dst.buffer.scope}", s.span)
        return
    d = extents(s.dst, rep, s.span)
    if isinstance(s.value, T.Region):
        v = extents(s.value, rep, s.span)
        if d is not None and v is not None and squeeze(d) != squeeze(v):
            rep.error(f"atomic_{s.kind} shape mismatch: destination is {fmt(d)}, value is {fmt(v)}", s.span)


def interpret(block, s: T.Atomic) -> None:
    import numpy as np

    if s.result is not None:
        raise block.error(f"atomic_{s.kind}(..., return_prev=True) of the whole block has no previous value per "
                          "thread: use it inside a Parallel loop or in per-thread code", s.span)

    ext = block.extents(s.dst)
    if isinstance(s.value, T.Region):
        v = block.read_region(s.value).reshape(ext)
    else:
        v = np.broadcast_to(block.eval(s.value, None), ext)
    cur = block.read_region(s.dst)
    block.write_region(s.dst, {"add": np.add, "max": np.maximum, "min": np.minimum}[s.kind](cur, v))
