"""reduce_sum/max/min/abssum/absmax(src, dst, dim, clear): a 2-D tile reduced along one dimension.

Schema: src 2-D, dst its projection (1-D). Reads src, writes dst (and reads it when clear=False).
Lowering: a fragment reduces in each thread's registers, then across lanes with warp shuffles (or shared
memory where the target has none), then across warps through a shared scratch buffer; a shared source is
reduced serially by the threads owning the destination elements.
"""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import cast, compare
from ..ir.layout import (
    BlockRow,
    MfmaTiled,
    MmaTiled,
    Projected,
    add,
    c,
    div,
    mod,
    mul,
    same_layout,
)
from .schema import extents, fmt, squeeze


def reduce_op(cx, kind: str, a: T.Expr, b: T.Expr) -> T.Expr:
    if kind in ("sum", "abssum"):
        return T.Binary(a.dtype, None, "+", a, b)
    return T.Call(a.dtype, None, "max" if kind in ("max", "absmax") else "min", [a, b])


def reduce_init(cx, kind: str, dt: D.DType) -> T.Const:
    if kind in ("sum", "abssum", "absmax"):
        return T.Const(dt, None, 0)
    if dt.is_float:
        return T.Const(dt, None, float("-inf") if kind == "max" else float("inf"))
    return T.Const(dt, None, -(2**31) if kind == "max" else 2**31 - 1)


def get_scratch(cx, elems: int) -> S.SBuffer:
    if cx.scratch is None:
        cx.scratch = S.SBuffer("reduce_scratch", D.F32, "shared", 0, origin="reduction scratch")
        cx.shared.append(cx.scratch)
    cx.scratch.size = max(cx.scratch.size or 0, elems)
    return cx.scratch


def lower(cx, s: T.Reduce) -> None:
    src, dst = s.src.buffer, s.dst.buffer
    if src.scope == "fragment" and dst.scope == "fragment":
        ls, ld = cx.sched.fragment(src), cx.sched.fragment(dst)
        if isinstance(ld, Projected) and not isinstance(ls, Projected) and \
                same_layout(ld, Projected(ls, 1 - s.dim)):
            if isinstance(ls, MfmaTiled):
                return reduce_mfma(cx, s, ls, Projected(ls, 1 - s.dim))
            return reduce_fragment(cx, s, ls, Projected(ls, 1 - s.dim))
        if isinstance(ls, BlockRow) and len(ls.shape) == 1 and isinstance(ld, BlockRow):
            return reduce_whole(cx, s, ls)
    if src.scope == "shared":
        return reduce_from_shared(cx, s)
    raise cx.fail(f"reduce_{s.kind} from {src.scope} '{src.name}' to {dst.scope} '{dst.name}' over dim "
                    f"{s.dim} is not supported; reduce a fragment along a dimension into a 1-D fragment",
                    s.span)


def lane_partial(cx, s: T.Reduce, acc_dt: D.DType, src_sb: S.SBuffer, count: int, parent, lanes) -> T.Var:
    """This thread's `count` parent elements parent(q) combined, then combined with the lanes `lanes`
    apart (xor shuffles): the partial result of one reduced row or column."""
    kind = s.kind
    v = cx.declare("part", reduce_init(cx, kind, acc_dt), acc_dt)
    q = cx.fresh("q")
    elem = cast(S.Ref(s.src.buffer.dtype, None, src_sb, parent(q)), acc_dt)
    if kind in ("abssum", "absmax"):
        elem = T.Call(acc_dt, None, "abs", [elem])
    cx.emit(S.SFor(None, q, c(0), c(count), [S.SAssign(None, v, reduce_op(cx, kind, v, elem))], unroll=True))
    for off in lanes:
        sh = S.Intrinsic(acc_dt, None, "shfl_xor", [v, c(off)])
        cx.emit(S.SAssign(None, v, reduce_op(cx, kind, v, sh)))
    return v


def reduce_fragment(cx, s: T.Reduce, ls, ld: Projected) -> None:
    kind = s.kind
    acc_dt = D.F32 if s.src.buffer.dtype.is_float else s.src.buffer.dtype
    src_sb, dst_sb = cx.sbuf(s.src.buffer), cx.sbuf(s.dst.buffer)
    rv = cx.fresh("r")
    # Parent elements that project onto local rv, enumerated by a second unrolled loop.
    if isinstance(ls, MmaTiled):
        if ld.keep == 0:  # rows: vary ni and e%2
            count = ls.ni * 2
            def parent(q):  # noqa: E306
                return add(add(mul(add(mul(div(rv, 2), ls.ni), div(q, 2)), 4), mul(mod(rv, 2), 2)), mod(q, 2))
            lanes = [1, 2]
            warps_across = ls.wn
            warp_group = lambda w: mod(w, ls.wm)  # noqa: E731
            warp_in_group = lambda w: div(w, ls.wm)  # noqa: E731
            groups = ls.wm
        else:  # cols: vary mi and e/2
            count = ls.mi * 2
            def parent(q):  # noqa: E306
                return add(add(mul(add(mul(div(q, 2), ls.ni), div(rv, 2)), 4), mul(mod(q, 2), 2)), mod(rv, 2))
            lanes = [4, 8, 16]
            warps_across = ls.wm
            warp_group = lambda w: div(w, ls.wm)  # noqa: E731
            warp_in_group = lambda w: mod(w, ls.wm)  # noqa: E731
            groups = ls.wn
    else:
        if ld.keep != 0:
            return reduce_columns_shared(cx, s, ls, ld)
        if "warp_shuffle" not in cx.target.features and ls.tpr > 1:
            return reduce_rows_shared(cx, s, ls, ld)
        count = ls.per_row
        def parent(q):  # noqa: E306
            return add(mul(rv, ls.per_row), q)
        lanes = [x for x in (1, 2, 4, 8, 16) if x < min(ls.tpr, 32)]
        warps_across = max(1, ls.tpr // 32)
        warp_group = lambda w: div(w, warps_across)  # noqa: E731
        warp_in_group = lambda w: mod(w, warps_across)  # noqa: E731
        groups = max(1, cx.k.threads // 32 // warps_across)

    def body():
        v = lane_partial(cx, s, acc_dt, src_sb, count, parent, lanes)
        if warps_across > 1:
            partials.append(v)
        else:
            store_reduced(cx, s, dst_sb, rv, v, acc_dt)

    partials: list[T.Var] = []
    if warps_across == 1:
        cx.emit(S.SFor(s.span, rv, c(0), c(ld.num_local), cx.block(body), unroll=True))
        return
    # Across warps: each warp writes its partial per (row group, local), then all combine.
    nloc = ld.num_local
    scratch = get_scratch(cx, groups * warps_across * nloc)
    warp = cx.declare("warp", div(cx.tid, 32))
    lane0 = compare("==", mod(cx.tid, 32), c(0)) if ls.__class__ is BlockRow else None
    cx.before_shared_access(False, True)

    def write_partial():
        body()
        v = partials[-1]
        slot = add(mul(add(mul(warp_group(warp), warps_across), warp_in_group(warp)), nloc), rv)
        # every lane of the warp holds the same value per row; lanes that own different rows of an
        # mma tile write different slots, so let each row's owners write (identical values)
        st = S.SStore(None, scratch, slot_for(slot), cast(v, D.F32))
        cx.emit(st if lane0 is None else S.SIf(None, lane0, [st]))

    def slot_for(slot):
        if isinstance(ls, MmaTiled):  # rows/cols inside the warp also differ by lane
            sub = div(mod(cx.tid, 32), 4) if ld.keep == 0 else mod(mod(cx.tid, 32), 4)
            per = 8 if ld.keep == 0 else 4
            return add(mul(slot, per), sub)
        return slot

    if isinstance(ls, MmaTiled):
        per = 8 if ld.keep == 0 else 4
        scratch = get_scratch(cx, groups * warps_across * nloc * per)
    cx.emit(S.SFor(s.span, rv, c(0), c(nloc), cx.block(write_partial), unroll=True))
    cx.barrier()
    rv2 = cx.fresh("r")

    def combine():
        v = cx.declare("total", reduce_init(cx, kind, acc_dt), acc_dt)
        w = cx.fresh("w")
        slot = add(mul(add(mul(warp_group(warp), warps_across), w), nloc), rv2)
        val = cast(S.Ref(D.F32, None, scratch, slot_for(slot)), acc_dt)
        cx.emit(S.SFor(None, w, c(0), c(warps_across), [S.SAssign(None, v, reduce_op(cx, kind, v, val))],
                         unroll=True))
        store_reduced(cx, s, dst_sb, rv2, v, acc_dt)

    cx.emit(S.SFor(s.span, rv2, c(0), c(nloc), cx.block(combine), unroll=True))
    cx.smem_read = True
    cx.barrier()


def reduce_columns_shared(cx, s: T.Reduce, ls: BlockRow, ld: Projected) -> None:
    """A column reduction (dim=0) of a block-row fragment, whose columns are spread over the threads of a
    row: every thread writes its elements to a shared tile, then each owner of a destination column reduces
    that column serially (the rows are few next to the shuffles and partial slots a lane-level scheme needs)."""
    acc_dt = D.F32 if s.src.buffer.dtype.is_float else s.src.buffer.dtype
    rows, cols = ls.rows, ls.cols
    tile = S.SBuffer(cx.fresh(f"{s.src.buffer.name}_cols").name, acc_dt, "shared", rows * cols,
                     origin=f"column reduction of '{s.src.buffer.name}'")
    cx.shared.append(tile)
    src_sb, dst_sb = cx.sbuf(s.src.buffer), cx.sbuf(s.dst.buffer)
    cx.before_shared_access(False, True)
    k = cx.fresh("r")

    def write():
        i, j = ls.coords2d(cx.tid, k)
        elem = cast(S.Ref(s.src.buffer.dtype, None, src_sb, k), acc_dt)
        if s.kind in ("abssum", "absmax"):
            elem = T.Call(acc_dt, None, "abs", [elem])
        st = S.SStore(None, tile, add(mul(i, cols), j), elem)
        ok = ls.valid(cx.tid, k)
        cx.emit(st if ok is None else S.SIf(None, ok, [st]))

    cx.emit(S.SFor(s.span, k, c(0), c(ls.num_local), cx.block(write), unroll=True))
    cx.after_shared_access(False, True)
    cx.before_shared_access(True, False)
    rv = cx.fresh("r")

    def column():
        (j,) = ld.coords(cx.tid, rv)
        v = cx.declare("total", reduce_init(cx, s.kind, acc_dt), acc_dt)
        q = cx.fresh("q")
        val = S.Ref(acc_dt, None, tile, add(mul(q, cols), j))
        cx.emit(S.SFor(None, q, c(0), c(rows), [S.SAssign(None, v, reduce_op(cx, s.kind, v, val))]))
        store_reduced(cx, s, dst_sb, rv, v, acc_dt)

    def guarded():
        ok = ld.valid(cx.tid, rv)
        if ok is None:
            column()
        else:
            cx.emit(S.SIf(None, ok, cx.block(column)))

    cx.emit(S.SFor(s.span, rv, c(0), c(ld.num_local), cx.block(guarded), unroll=True))
    cx.smem_read = True
    cx.barrier()  # the tile may be written again by the same statement in the next loop iteration


def reduce_mfma(cx, s: T.Reduce, ls, ld: Projected) -> None:
    """Row (dim=1) or column (dim=0) reduction of an MFMA 16x16 accumulator (MfmaTiled) into its projection.
    Within a 16x16 atom an index is held either by a lane's 4 registers e (then the reduced index runs over
    lane%16: shuffles xor 1, 2, 4, 8) or by lane%16 (then it runs over e and lane/16: shuffles xor 16, 32);
    atoms of the same row/column are combined in the lane first. Waves that share rows (columns) combine
    through shared scratch, one slot per lane."""
    from ..ir.layout import _mfma_in_lane

    kind, keep = s.kind, ld.keep
    acc_dt = D.F32 if s.src.buffer.dtype.is_float else s.src.buffer.dtype
    src_sb, dst_sb = cx.sbuf(s.src.buffer), cx.sbuf(s.dst.buffer)
    ni, wm = ls.ni, ls.wm
    in_lane = _mfma_in_lane(ls, keep)
    lanes = [1, 2, 4, 8] if in_lane else [16, 32]
    if keep == 0:  # rows: combine over the atom columns ni (and e when the row is held by lane%16)
        count = ni if in_lane else ni * 4
        def parent(rv, q):  # noqa: E306
            return add(mul(add(mul(div(rv, 4), ni), q), 4), mod(rv, 4)) if in_lane else add(mul(rv, ni * 4), q)
        across = ls.wn
        def peer(wave, w):  # noqa: E306
            return add(mod(wave, wm), mul(w, wm))
    else:  # columns: combine over the atom rows mi (and e)
        count = ls.mi if in_lane else ls.mi * 4
        def parent(rv, q):  # noqa: E306
            return add(mul(q, ni * 4), rv) if in_lane else add(mul(add(mul(div(q, 4), ni), rv), 4), mod(q, 4))
        across = wm
        def peer(wave, w):  # noqa: E306
            return add(mul(div(wave, wm), wm), w)

    def partial(rv) -> T.Var:
        return lane_partial(cx, s, acc_dt, src_sb, count, lambda q: parent(rv, q), lanes)

    nloc = ld.num_local
    if across == 1:
        rv = cx.fresh("r")
        cx.emit(S.SFor(s.span, rv, c(0), c(nloc),
                         cx.block(lambda: store_reduced(cx, s, dst_sb, rv, partial(rv), acc_dt)), unroll=True))
        return
    waves = cx.k.threads // 64
    scratch = get_scratch(cx, waves * nloc * 64)
    wave = cx.declare("wave", div(cx.tid, 64))
    lane = mod(cx.tid, 64)
    cx.before_shared_access(False, True)
    rv = cx.fresh("r")

    def write():
        v = partial(rv)
        cx.emit(S.SStore(None, scratch, add(mul(add(mul(wave, nloc), rv), 64), lane), cast(v, D.F32)))

    cx.emit(S.SFor(s.span, rv, c(0), c(nloc), cx.block(write), unroll=True))
    cx.smem_dirty = True
    cx.barrier()
    rv2 = cx.fresh("r")

    def combine():
        v = cx.declare("total", reduce_init(cx, kind, acc_dt), acc_dt)
        w = cx.fresh("w")
        val = cast(S.Ref(D.F32, None, scratch, add(mul(add(mul(peer(wave, w), nloc), rv2), 64), lane)), acc_dt)
        cx.emit(S.SFor(None, w, c(0), c(across), [S.SAssign(None, v, reduce_op(cx, kind, v, val))],
                         unroll=True))
        store_reduced(cx, s, dst_sb, rv2, v, acc_dt)

    cx.emit(S.SFor(s.span, rv2, c(0), c(nloc), cx.block(combine), unroll=True))
    cx.smem_read = True
    cx.barrier()


def reduce_rows_shared(cx, s: T.Reduce, ls: BlockRow, ld: Projected) -> None:
    """Row reduction of a block-row fragment on a target without warp shuffles (WebGPU): each thread
    writes its partial of every row it holds to shared scratch, then combines the `tpr` partials of its
    row in the same order as the row's other threads (so the replicated results agree bit for bit).
    Rows go in rounds of at most 2 KiB of scratch."""
    kind = s.kind
    acc_dt = D.F32 if s.src.buffer.dtype.is_float else s.src.buffer.dtype
    src_sb, dst_sb = cx.sbuf(s.src.buffer), cx.sbuf(s.dst.buffer)
    threads, tpr, nloc = cx.k.threads, ls.tpr, ld.num_local
    batch = max(1, min(nloc, 512 // threads))
    if acc_dt.is_float:
        scratch = get_scratch(cx, threads * batch)
    else:  # integers combine exactly, not through the f32 scratch
        scratch = getattr(cx, "scratch_int", None)
        if scratch is None:
            scratch = S.SBuffer("reduce_scratch_int", D.I32, "shared", 0, origin="reduction scratch (int)")
            cx.scratch_int = scratch
            cx.shared.append(scratch)
        scratch.size = max(scratch.size or 0, threads * batch)
    row_base = cx.declare("row_base", mul(div(cx.tid, tpr), tpr))
    for first in range(0, nloc, batch):
        count = min(batch, nloc - first)
        cx.before_shared_access(False, True)
        rv = cx.fresh("r")

        def write(rv=rv, first=first):
            v = cx.declare("part", reduce_init(cx, kind, acc_dt), acc_dt)
            q = cx.fresh("q")
            elem = cast(S.Ref(s.src.buffer.dtype, None, src_sb, add(mul(add(rv, first), ls.per_row), q)),
                         acc_dt)
            if kind in ("abssum", "absmax"):
                elem = T.Call(acc_dt, None, "abs", [elem])
            cx.emit(S.SFor(None, q, c(0), c(ls.per_row), [S.SAssign(None, v, reduce_op(cx, kind, v, elem))],
                             unroll=True))
            cx.emit(S.SStore(None, scratch, add(mul(rv, threads), cx.tid), cast(v, scratch.dtype)))

        cx.emit(S.SFor(s.span, rv, c(0), c(count), cx.block(write), unroll=True))
        cx.smem_dirty = True
        cx.barrier()
        rv2 = cx.fresh("r")

        def combine(rv2=rv2, first=first):
            v = cx.declare("total", reduce_init(cx, kind, acc_dt), acc_dt)
            w = cx.fresh("w")
            val = cast(S.Ref(scratch.dtype, None, scratch, add(add(mul(rv2, threads), row_base), w)), acc_dt)
            cx.emit(S.SFor(None, w, c(0), c(tpr), [S.SAssign(None, v, reduce_op(cx, kind, v, val))],
                             unroll=True))
            store_reduced(cx, s, dst_sb, add(rv2, first), v, acc_dt)

        cx.emit(S.SFor(s.span, rv2, c(0), c(count), cx.block(combine), unroll=True))
        cx.smem_read = True
    cx.barrier()  # the scratch is reused by the next reduction, possibly in the next loop iteration


def store_reduced(cx, s: T.Reduce, dst_sb: S.SBuffer, idx: T.Expr, v: T.Expr, acc_dt: D.DType) -> None:
    if s.clear:
        value = v
    else:
        value = reduce_op(cx, s.kind, cast(S.Ref(dst_sb.dtype, None, dst_sb, idx), acc_dt), v)
    cx.emit(S.SStore(s.span, dst_sb, idx, cast(value, dst_sb.dtype)))


def reduce_whole(cx, s: T.Reduce, ls: BlockRow) -> None:
    raise cx.fail("reducing a 1-D fragment to a scalar is not supported yet", s.span)


def reduce_from_shared(cx, s: T.Reduce) -> None:
    """Each thread reduces its own destination elements serially from shared memory."""
    src, dst = s.src, s.dst
    acc_dt = D.F32 if src.buffer.dtype.is_float else src.buffer.dtype
    sext = list(src.const_extents)
    red = sext[s.dim]
    keep_shape = [e for i, e in enumerate(sext) if i != s.dim]
    cx.smem_read = True

    def element(out_idx: list[T.Expr]):
        v = cx.declare("part", reduce_init(cx, s.kind, acc_dt), acc_dt)
        q = cx.fresh("q")
        full = list(out_idx)
        full.insert(s.dim, q)
        idx = [add(cx.lx(st), x) for st, x in zip(src.starts, full, strict=True)]
        elem = cast(cx.ref(src.buffer, idx, s.span),
                     acc_dt)
        if s.kind in ("abssum", "absmax"):
            elem = T.Call(acc_dt, None, "abs", [elem])
        cx.emit(S.SFor(None, q, c(0), c(red), [S.SAssign(None, v, reduce_op(cx, s.kind, v, elem))]))
        return v

    if dst.buffer.scope == "fragment":
        layout = cx.sched.fragment(dst.buffer)
        kv = cx.fresh("r")

        def body():
            coords = layout.coords(cx.tid, kv)
            out_idx = coords if len(keep_shape) == len(coords) else coords[-len(keep_shape):]
            v = element(out_idx)
            store_reduced(cx, s, cx.sbuf(dst.buffer), kv, v, acc_dt)

        cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), cx.block(body), unroll=True))
        return
    raise cx.fail("reduce from shared memory into a non-fragment buffer is not supported", s.span)


def reads(s: T.Reduce) -> list[T.Region]:
    return [s.src] if s.clear else [s.src, s.dst]


def writes(s: T.Reduce) -> list[T.Region]:
    return [s.dst]


def check(s: T.Reduce, rep: Reporter) -> None:
    """On-chip buffers; the destination has the source's shape without the reduced dimension."""
    for r in (s.src, s.dst):
        if r.buffer.scope == "global":
            rep.error(f"reduce_{s.kind} works on on-chip buffers; copy '{r.buffer.name}' into shared or "
                      "fragment memory first", r.span or s.span)
            return
    a, b = extents(s.src, rep, s.span), extents(s.dst, rep, s.span)
    if a is None or b is None:
        return
    expected = tuple(e for i, e in enumerate(a) if i != s.dim) or (1,)
    if squeeze(expected) != squeeze(b):
        rep.error(f"reduce_{s.kind} over dim {s.dim} of a {fmt(a)} buffer gives {fmt(expected)}, but "
                  f"'{s.dst.buffer.name}' is {fmt(b)}", s.span)
    if s.src.buffer.dtype.is_bool or s.dst.buffer.dtype.is_bool:
        rep.error(f"reduce_{s.kind} on bool buffers", s.span)


def interpret(block, s: T.Reduce) -> None:
    """The reduction in f32 (or the integer type), combined with the destination when clear=False."""
    import numpy as np

    reducers = {"sum": (np.sum, np.add), "abssum": (np.sum, np.add), "max": (np.max, np.maximum),
                "absmax": (np.max, np.maximum), "min": (np.min, np.minimum)}
    src = block.read_region(s.src)
    if s.src.buffer.dtype.is_float:
        src = src.astype(np.float32) if src.dtype != np.float64 else src
    if s.kind in ("abssum", "absmax"):
        src = np.abs(src)
    reducer, combine = reducers[s.kind]
    r = reducer(src, axis=s.dim).reshape(block.extents(s.dst))
    if not s.clear:
        r = combine(block.read_region(s.dst), r)
    block.write_region(s.dst, r)
