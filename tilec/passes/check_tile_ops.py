"""check_tile_ops — operand shapes, dtypes and scopes of every tile operation.

Assumes: specialize has run (shapes and tile extents are compile-time integers where they must be).
Guarantees: every Copy moves between regions of equal (squeezed) extent; every Gemm has 2-D
operands (2-D once unit dims are dropped, and none of M, N, K is 1) with matching M, N, K in the
scopes a matrix unit can read (A, B shared or fragment; C fragment or local) and a supported
accumulator; every Reduce's destination has the source's shape
without the reduced dimension; every region of an on-chip buffer lies inside it; tile extents of
global regions are compile-time integers. Errors point at the operation's span.
"""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import as_int
from ..ir.visit import walk_stmts

NAME = "check-tile-ops"

GEMM_INPUTS = {D.F16, D.BF16, D.F32, D.F8E4M3, D.F8E5M2, D.I8}
GEMM_ACCUMULATORS = {D.F32, D.F16, D.I32}


def squeeze(extents: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(e for e in extents if e != 1) or (1,)


def _extents(r: T.Region, rep: Reporter, span) -> tuple[int, ...] | None:
    ext = r.const_extents
    if ext is None:
        rep.error(f"the tile extent of '{r.buffer.name}' must be a compile-time constant", r.span or span)
        return None
    if r.buffer.scope != "global":
        shape = r.buffer.const_shape
        if shape is not None:
            for axis, (start, e, dim) in enumerate(zip(r.starts, ext, shape, strict=True)):
                s = as_int(start)
                if s is not None and (s < 0 or s + e > dim):
                    rep.error(f"region [{s}:{s + e}] is outside dimension {axis} of '{r.buffer.name}' "
                              f"(size {dim})", r.span or span)
                    return None
                if e > dim:
                    rep.error(f"a tile of extent {e} does not fit dimension {axis} of '{r.buffer.name}' "
                              f"(size {dim})", r.span or span)
                    return None
    return ext


def _fmt(ext: tuple[int, ...]) -> str:
    return "x".join(str(e) for e in ext)


def _check_copy(s: T.Copy, rep: Reporter) -> None:
    a, b = _extents(s.src, rep, s.span), _extents(s.dst, rep, s.span)
    if a is None or b is None:
        return
    if squeeze(a) != squeeze(b):
        rep.error(f"copy shape mismatch: source '{s.src.buffer.name}' region is {_fmt(a)}, destination "
                  f"'{s.dst.buffer.name}' region is {_fmt(b)}", s.span)


def _check_gemm(s: T.Gemm, rep: Reporter) -> None:
    ok = True
    for name, r, scopes in (("A", s.a, ("shared", "fragment")), ("B", s.b, ("shared", "fragment")),
                            ("C", s.c, ("fragment", "local"))):
        if r.buffer.scope not in scopes:
            rep.error(f"gemm operand {name} ('{r.buffer.name}') must be in {' or '.join(scopes)} memory, not "
                      f"{r.buffer.scope}", r.span or s.span)
            ok = False
    exts = [_extents(r, rep, s.span) for r in (s.a, s.b, s.c)]
    if not ok or any(e is None for e in exts):
        return
    a, b, c = (squeeze(e) if len(squeeze(e)) == 2 else e for e in exts)
    for name, e, r in (("A", a, s.a), ("B", b, s.b), ("C", c, s.c)):
        if len(e) != 2:
            rep.error(f"gemm operand {name} ('{r.buffer.name}') must be 2-D, got {_fmt(e)}", r.span or s.span)
            ok = False
        elif 1 in e:
            # The lowering (and every matrix instruction) works on squeezed 2-D tiles.
            rep.error(f"gemm operand {name} ('{r.buffer.name}') is {_fmt(e)}: M, N and K must each be more than "
                      "1 (write a matrix-vector or outer product as a Parallel loop)", r.span or s.span)
            ok = False
    if not ok:
        return
    m, k = (a[1], a[0]) if s.transpose_a else a
    k2, n = (b[1], b[0]) if s.transpose_b else b
    if k != k2:
        rep.error(f"gemm K mismatch: A is {_fmt(a)}{' (transposed)' if s.transpose_a else ''}, B is "
                  f"{_fmt(b)}{' (transposed)' if s.transpose_b else ''}", s.span)
    elif c != (m, n):
        rep.error(f"gemm C must be {m}x{n} for A {_fmt(a)} and B {_fmt(b)}, got {_fmt(c)}", s.span)
    da, db, dc = s.a.buffer.dtype, s.b.buffer.dtype, s.c.buffer.dtype
    if da != db and not ({da, db} <= {D.F8E4M3, D.F8E5M2}):
        rep.error(f"gemm operand dtypes differ: A is {da}, B is {db}", s.span)
    elif da not in GEMM_INPUTS:
        rep.error(f"gemm does not support {da} operands", s.span)
    if dc not in GEMM_ACCUMULATORS:
        rep.error(f"gemm accumulator C must be f32, f16 or i32, got {dc}", s.c.span or s.span)
    elif (da == D.I8) != (dc == D.I32):
        rep.error(f"gemm of {da} operands cannot accumulate in {dc}", s.span)


def _check_reduce(s: T.Reduce, rep: Reporter) -> None:
    for r in (s.src, s.dst):
        if r.buffer.scope == "global":
            rep.error(f"reduce_{s.kind} works on on-chip buffers; copy '{r.buffer.name}' into shared or "
                      "fragment memory first", r.span or s.span)
            return
    a, b = _extents(s.src, rep, s.span), _extents(s.dst, rep, s.span)
    if a is None or b is None:
        return
    expected = tuple(e for i, e in enumerate(a) if i != s.dim) or (1,)
    if squeeze(expected) != squeeze(b):
        rep.error(f"reduce_{s.kind} over dim {s.dim} of a {_fmt(a)} buffer gives {_fmt(expected)}, but "
                  f"'{s.dst.buffer.name}' is {_fmt(b)}", s.span)
    if s.src.buffer.dtype.is_bool or s.dst.buffer.dtype.is_bool:
        rep.error(f"reduce_{s.kind} on bool buffers", s.span)


def _check_atomic(s: T.Atomic, rep: Reporter) -> None:
    if s.dst.buffer.scope not in ("global", "shared"):
        rep.error(f"atomic_{s.kind} needs a global or shared destination, '{s.dst.buffer.name}' is "
                  f"{s.dst.buffer.scope}", s.span)
        return
    d = _extents(s.dst, rep, s.span)
    if isinstance(s.value, T.Region):
        v = _extents(s.value, rep, s.span)
        if d is not None and v is not None and squeeze(d) != squeeze(v):
            rep.error(f"atomic_{s.kind} shape mismatch: destination is {_fmt(d)}, value is {_fmt(v)}", s.span)


def run(module: T.Module, rep: Reporter) -> T.Module:
    for k in module.kernels:
        for s in walk_stmts(k.body):
            if isinstance(s, T.Copy):
                _check_copy(s, rep)
            elif isinstance(s, T.Gemm):
                _check_gemm(s, rep)
            elif isinstance(s, T.Reduce):
                _check_reduce(s, rep)
            elif isinstance(s, T.Fill | T.Print):
                r = s.dst if isinstance(s, T.Fill) else s.value
                if isinstance(r, T.Region):
                    _extents(r, rep, s.span)
            elif isinstance(s, T.Atomic):
                _check_atomic(s, rep)
    rep.check()
    return module
