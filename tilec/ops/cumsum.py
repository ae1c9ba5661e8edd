"""cumsum(src, dst, dim, reverse): inclusive prefix sums along one dimension. Reads src, writes dst.

Lowering: a serial scan of each line along `dim`, one line per thread, in shared memory (f16/bf16 accumulate in
f32). Whole fragments are scanned through a shared tile: their owners store the elements, the lines are scanned
there, and the owners of the destination's elements read them back (a barrier between each step).
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import binary, cast
from ..ir.fold import as_int, fold
from ..ir.layout import add, c, mul
from .schema import extents, fmt, squeeze


def build(b, call, scope) -> T.CumSum:
    """`T.cumsum(src, dst=src, dim=0, reverse=False)` from the parser's builder b (tilec/parser/build_tileops.py's
    TileOpBuilder: argument matching, regions, compile-time constants, errors at the user's span)."""
    args, _ = b.call_args(call, ["src", "dst", "dim", "reverse"])
    b.require(args, ["src"], call)
    src = b.region(args["src"], scope)
    dst = b.region(args["dst"], scope) if "dst" in args else src
    b.require_full_extents(src, args["src"])
    b.require_full_extents(dst, args.get("dst", args["src"]))
    b.require_writable(dst, call.span)
    rank = len(src.extents)
    dim = b.const_int(args["dim"], scope, "dim") if "dim" in args else 0
    if not -rank <= dim < rank:
        raise b.fail(f"dim={dim} is out of range for a {rank}-D buffer", args["dim"].span)
    rev = b.const_bool(args["reverse"], scope, "reverse") if "reverse" in args else False
    src_ext, dst_ext = [as_int(fold(e)) for e in src.extents], [as_int(fold(e)) for e in dst.extents]
    if None not in src_ext + dst_ext and src_ext != dst_ext:
        raise b.fail(f"cumsum needs a destination of the source's extents {src_ext}, got {dst_ext}", call.span)
    return T.CumSum(call.span, src, dst, dim % rank, rev)


def _whole(r: T.Region) -> bool:
    return all(isinstance(x, T.Const) and int(x.value) == 0 for x in r.starts) and \
        list(r.const_extents) == list(r.buffer.const_shape)


def lower(cx, s: T.CumSum) -> None:
    if any(r.buffer.scope == "fragment" for r in (s.src, s.dst)) and \
            all(r.buffer.scope in ("fragment", "shared") and (r.buffer.scope == "shared" or _whole(r))
                for r in (s.src, s.dst)):
        return _through_shared(cx, s)
    for r in (s.src, s.dst):
        if r.buffer.scope != "shared":
            raise cx.fail(f"cumsum of the {r.buffer.scope} buffer '{r.buffer.name}' is not supported on "
                          f"{cx.target.name} yet: copy it to a shared buffer (or scan a whole fragment)", s.span)
    _scan(cx, s)


def _through_shared(cx, s: T.CumSum) -> None:
    """A whole fragment (source, destination or both) scanned in a shared tile of its shape."""
    from ..ir.layout import valid

    frag = s.src.buffer if s.src.buffer.scope == "fragment" else s.dst.buffer
    shape = list(frag.const_shape)
    size = 1
    for e in shape:
        size *= e
    tile = S.SBuffer(cx.fresh(f"{frag.name}_scan").name, frag.dtype, "shared", size,
                     origin=f"cumsum of fragment '{frag.name}'")
    cx.shared.append(tile)
    shared = T.Buffer(tile.name, frag.dtype, [T.Const(D.I32, None, e) for e in shape], "shared", s.span)
    cx.buffers[shared] = tile
    cx.staged_layouts[shared] = _linear(shape, frag.dtype.bytes)
    cx.staged.append(shared)  # (keeps the id alive)
    region = T.Region(shared, [T.Const(D.I32, None, 0) for _ in shape], [T.Const(D.I32, None, e) for e in shape],
                      s.span)

    def move(f: T.Buffer, to_tile: bool) -> None:
        lay = cx.sched.fragment(f)
        k = cx.fresh("r")

        def body():
            at = fold(cx.local_offset(f, lay.coords(cx.tid, k)))
            st = S.SStore(None, tile, at, S.Ref(f.dtype, None, cx.sbuf(f), k)) if to_tile else \
                S.SStore(None, cx.sbuf(f), k, S.Ref(tile.dtype, None, tile, at))
            ok = valid(lay, cx.tid, k)
            cx.emit(st if ok is None else S.SIf(None, ok, [st]))

        cx.emit(S.SFor(s.span, k, c(0), c(lay.num_local), cx.block(body), unroll=True))

    src = s.src if s.src.buffer.scope == "shared" else region
    dst = s.dst if s.dst.buffer.scope == "shared" else region
    cx.before_shared_access(False, True)
    if s.src.buffer.scope == "fragment":
        move(s.src.buffer, True)
        cx.after_shared_access(False, True)
        cx.before_shared_access(True, True)
    _scan(cx, dataclasses.replace(s, src=src, dst=dst))
    cx.after_shared_access(True, True)
    if s.dst.buffer.scope == "fragment":
        cx.before_shared_access(True, False)
        move(s.dst.buffer, False)
        cx.after_shared_access(True, False)
    cx.barrier()  # the tile is written again if this statement runs again (a loop), which the loop cannot see


def _linear(shape: list[int], elem_bytes: int):
    from ..ir.layout import SharedLayout

    return SharedLayout(tuple(shape), elem_bytes)


def _scan(cx, s: T.CumSum) -> None:
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
