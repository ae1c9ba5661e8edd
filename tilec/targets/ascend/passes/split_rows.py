"""Row split of a mixed kernel's vector work between the two AIVs of a group.

Assumes: placement chose a mixed kernel; `kernel` is the AIV side's own copy of the Tile IR. Guarantees: when the
vector work is row-separable, every vector tile whose first dimension is the accumulators' row count M (the
block's rows) holds M/2 rows, Parallel loops over those rows run M/2 iterations, global copies and workspace
hand-overs of those tiles start `row0 = GetSubBlockIdx() * M/2` rows further, and a row index used as a value
(a causal mask's query index) is `i + row0`. Then each AIV computes and writes its own half. Returns M/2, or
None (the kernel unchanged) when some statement mixes split and unsplit rows -- a column vector of length M, a
transposed read, a copy between a split and an unsplit tile -- and both AIVs then compute every row, AIV 0
alone writing.
"""

from __future__ import annotations

import dataclasses

from ....ir import dtypes as D
from ....ir import tile as T
from ....ir.visit import rewrite_expr, sub_exprs, walk_stmts

NAME = "ascend-split-rows"
ROW0 = "row0"


class _NoSplit(Exception):
    pass


def _rows(k: T.Kernel) -> int | None:
    plan = k.attrs["ascend"]
    allocs = {s.buffer.name: s.buffer for s in walk_stmts(k.body) if isinstance(s, T.Alloc)}
    ms = {allocs[n].const_shape[0] for n in plan.vector_accumulators}
    if len(ms) != 1:
        return None
    m = ms.pop()
    return m if m % 2 == 0 and m >= 2 else None


def _candidates(k: T.Kernel, m: int) -> set[str]:
    plan = k.attrs["ascend"]
    out = set()
    for s in walk_stmts(k.body):
        if isinstance(s, T.Alloc) and plan.position.get(s.buffer.name) in ("VECCALC", "VECIN", "VECOUT"):
            if s.buffer.const_shape[0] == m:
                out.add(s.buffer.name)
    # 1-D tiles exchanged with global memory are column vectors (a bias), and so are tiles read at a column index.
    for s in walk_stmts(k.body):
        if isinstance(s, T.Copy):
            for a, b in ((s.src, s.dst), (s.dst, s.src)):
                if a.buffer.scope == "global" and len(b.buffer.shape) == 1:
                    out.discard(b.buffer.name)
        if isinstance(s, T.For) and s.kind == "parallel" and len(s.vars) == 2:
            for x in walk_stmts(s.body):
                exprs = [x.value] + list(x.indices) if isinstance(x, T.Store) else (
                    [x.value] if isinstance(x, T.Assign) else [])
                for e in exprs:
                    for ld in sub_exprs(e):
                        if isinstance(ld, T.Load) and ld.indices and ld.indices[0] is not s.vars[0]:
                            out.discard(ld.buffer.name)
    return out


def split_rows(k: T.Kernel) -> int | None:
    m = _rows(k)
    if m is None:
        return None
    split = _candidates(k, m)
    plan = k.attrs["ascend"]
    if not set(plan.vector_accumulators) <= split or not set(plan.workspace_operands) <= split:
        return None
    half = m // 2
    row0 = T.Var(D.I32, None, ROW0, "param")
    try:
        k.body = _body(k.body, split, m, half, row0)
    except _NoSplit:
        return None
    return half


def _half_region(r: T.Region, split: set[str], half: int) -> T.Region:
    if r.buffer.name not in split:
        return r
    ext = list(r.extents)
    ext[0] = T.Const(D.I32, None, half)
    return dataclasses.replace(r, extents=ext)


def _gm_region(r: T.Region, tile: T.Region, half: int, row0: T.Var) -> T.Region:
    """The global box of a split tile: its first non-unit dimension starts row0 later and spans half the rows."""
    ext = r.const_extents
    big = [i for i, e in enumerate(ext) if e != 1]
    if not big or len(tile.buffer.shape) != 2:
        raise _NoSplit
    d = big[0]
    starts, extents = list(r.starts), list(r.extents)
    starts[d] = T.Binary(starts[d].dtype, None, "+", starts[d], row0)
    extents[d] = T.Const(D.I32, None, half)
    return dataclasses.replace(r, starts=starts, extents=extents)


def _body(body: list[T.Stmt], split: set[str], m: int, half: int, row0: T.Var) -> list[T.Stmt]:
    out = []
    for s in body:
        if isinstance(s, T.Alloc) and s.buffer.name in split:
            s.buffer.shape = [T.Const(D.I32, None, half)] + list(s.buffer.shape[1:])
            out.append(s)
        elif isinstance(s, T.For) and s.kind == "parallel":
            out.append(_parallel(s, split, m, half, row0))
        elif isinstance(s, T.For | T.While):
            out.append(dataclasses.replace(s, body=_body(s.body, split, m, half, row0)))
        elif isinstance(s, T.If):
            out.append(dataclasses.replace(s, then_body=_body(s.then_body, split, m, half, row0),
                                           else_body=_body(s.else_body, split, m, half, row0)))
        elif isinstance(s, T.Copy):
            src_in, dst_in = s.src.buffer.name in split, s.dst.buffer.name in split
            if s.src.buffer.scope == "global" and dst_in:
                out.append(dataclasses.replace(s, src=_gm_region(s.src, s.dst, half, row0),
                                               dst=_half_region(s.dst, split, half)))
            elif s.dst.buffer.scope == "global" and src_in:
                out.append(dataclasses.replace(s, dst=_gm_region(s.dst, s.src, half, row0),
                                               src=_half_region(s.src, split, half)))
            elif src_in != dst_in and "global" not in (s.src.buffer.scope, s.dst.buffer.scope):
                raise _NoSplit
            else:
                out.append(dataclasses.replace(s, src=_half_region(s.src, split, half),
                                               dst=_half_region(s.dst, split, half)))
        elif isinstance(s, T.Reduce):
            if (s.src.buffer.name in split) != (s.dst.buffer.name in split):
                raise _NoSplit
            out.append(dataclasses.replace(s, src=_half_region(s.src, split, half),
                                           dst=_half_region(s.dst, split, half)))
        elif isinstance(s, T.Fill):
            out.append(dataclasses.replace(s, dst=_half_region(s.dst, split, half)))
        elif isinstance(s, T.Gemm):
            out.append(dataclasses.replace(s, a=_half_region(s.a, split, half), c=_half_region(s.c, split, half)))
        else:
            out.append(s)
    return out


def _parallel(s: T.For, split: set[str], m: int, half: int, row0: T.Var) -> T.For:
    touched = {x.buffer.name for st in walk_stmts(s.body) for e in _exprs(st) for x in sub_exprs(e)
               if isinstance(x, T.Load)} | {st.buffer.name for st in walk_stmts(s.body) if isinstance(st, T.Store)}
    if not touched & split:
        return s
    first = s.extents[0]
    if not (isinstance(first, T.Const) and int(first.value) == m):
        raise _NoSplit
    i = s.vars[0]
    i_global = T.Var(i.dtype, None, f"{i.name}_row", "local")

    def to_global(e: T.Expr) -> T.Expr:
        return rewrite_expr(e, lambda x: i_global if x is i else None)

    def fix_index(idx: list[T.Expr], buf: str) -> list[T.Expr]:
        new = [to_global(x) for x in idx]
        if buf in split:
            if not idx or idx[0] is not i:
                raise _NoSplit
            new[0] = i
        return new

    def fix_loads(e: T.Expr) -> T.Expr:
        e = to_global(e)
        return rewrite_expr(e, lambda x: dataclasses.replace(x, indices=[i] + list(x.indices[1:]))
                            if isinstance(x, T.Load) and x.buffer.name in split and x.indices
                            and x.indices[0] is i_global else None)

    def stmts(body: list[T.Stmt]) -> list[T.Stmt]:
        res = []
        for st in body:
            if isinstance(st, T.Store):
                res.append(dataclasses.replace(st, indices=fix_index(st.indices, st.buffer.name),
                                               value=fix_loads(st.value)))
            elif isinstance(st, T.Assign):
                res.append(dataclasses.replace(st, value=fix_loads(st.value)))
            elif isinstance(st, T.If):
                res.append(dataclasses.replace(st, cond=fix_loads(st.cond), then_body=stmts(st.then_body),
                                               else_body=stmts(st.else_body)))
            else:
                raise _NoSplit
        return res

    row = T.Binary(i.dtype, None, "+", i, row0)
    body = [T.Assign(None, i_global, row)] + stmts(s.body)
    for st in walk_stmts(body):  # an unsplit tile read at the row index, or global memory: not row-separable
        for e in _exprs(st):
            for x in sub_exprs(e):
                if isinstance(x, T.Load) and (x.buffer.scope == "global" or x.buffer.name not in split and any(
                        y is i_global or y is i for ix in x.indices for y in sub_exprs(ix))):
                    raise _NoSplit
        if isinstance(st, T.Store) and (st.buffer.scope == "global" or st.buffer.name not in split):
            raise _NoSplit
    return dataclasses.replace(s, extents=[T.Const(D.I32, None, half)] + list(s.extents[1:]), body=body)


def _exprs(st: T.Stmt) -> list[T.Expr]:
    if isinstance(st, T.Store):
        return [st.value, *st.indices]
    if isinstance(st, T.Assign):
        return [st.value]
    if isinstance(st, T.If):
        return [st.cond]
    return []
