"""Generic traversal and rewriting of Tile IR."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from . import tile as T

ExprFn = Callable[[T.Expr], T.Expr | None]


def rewrite_expr(e: T.Expr, fn: ExprFn) -> T.Expr:
    """Rebuild `e` bottom-up; `fn` may return a replacement for each node (or None to keep it)."""
    if isinstance(e, T.Binary | T.Compare):
        a, b = rewrite_expr(e.a, fn), rewrite_expr(e.b, fn)
        if a is not e.a or b is not e.b:
            e = dataclasses.replace(e, a=a, b=b)
    elif isinstance(e, T.Unary):
        a = rewrite_expr(e.a, fn)
        if a is not e.a:
            e = dataclasses.replace(e, a=a)
    elif isinstance(e, T.Select):
        c, a, b = (rewrite_expr(x, fn) for x in (e.cond, e.a, e.b))
        if c is not e.cond or a is not e.a or b is not e.b:
            e = dataclasses.replace(e, cond=c, a=a, b=b)
    elif isinstance(e, T.Call):
        args = [rewrite_expr(x, fn) for x in e.args]
        if any(x is not y for x, y in zip(args, e.args, strict=True)):
            e = dataclasses.replace(e, args=args)
    elif isinstance(e, T.Cast):
        v = rewrite_expr(e.value, fn)
        if v is not e.value:
            e = dataclasses.replace(e, value=v)
    elif isinstance(e, T.Load):
        idx = [rewrite_expr(x, fn) for x in e.indices]
        if any(x is not y for x, y in zip(idx, e.indices, strict=True)):
            e = dataclasses.replace(e, indices=idx)
    out = fn(e)
    return e if out is None else out


def _rewrite_region(r: T.Region, fn: ExprFn) -> T.Region:
    return dataclasses.replace(
        r,
        starts=[rewrite_expr(x, fn) for x in r.starts],
        extents=[rewrite_expr(x, fn) for x in r.extents],
    )


def _rewrite_operand(v, fn: ExprFn):
    return _rewrite_region(v, fn) if isinstance(v, T.Region) else rewrite_expr(v, fn)


StmtFn = Callable[[T.Stmt], list[T.Stmt] | None]


def rewrite_body(body: list[T.Stmt], expr_fn: ExprFn, stmt_fn: StmtFn | None = None) -> list[T.Stmt]:
    """Rewrite every expression of a statement list; `stmt_fn` (applied after the children are
    rewritten) may replace a statement with a list of statements."""
    out: list[T.Stmt] = []
    for s in body:
        s = rewrite_stmt(s, expr_fn, stmt_fn)
        replaced = stmt_fn(s) if stmt_fn else None
        out.extend([s] if replaced is None else replaced)
    return out


def rewrite_stmt(s: T.Stmt, expr_fn: ExprFn, stmt_fn: StmtFn | None = None) -> T.Stmt:
    rx = lambda e: rewrite_expr(e, expr_fn)  # noqa: E731
    rb = lambda b: rewrite_body(b, expr_fn, stmt_fn)  # noqa: E731
    if isinstance(s, T.Alloc):
        buf = s.buffer
        buf.shape = [rx(d) for d in buf.shape]
        return dataclasses.replace(s, init=rx(s.init) if s.init is not None else None)
    if isinstance(s, T.Store):
        return dataclasses.replace(s, indices=[rx(i) for i in s.indices], value=rx(s.value))
    if isinstance(s, T.Assign):
        return dataclasses.replace(s, value=rx(s.value))
    if isinstance(s, T.For):
        return dataclasses.replace(
            s,
            extents=[rx(e) for e in s.extents],
            begin=rx(s.begin) if s.begin is not None else None,
            step=rx(s.step) if s.step is not None else None,
            body=rb(s.body),
        )
    if isinstance(s, T.If):
        return dataclasses.replace(s, cond=rx(s.cond), then_body=rb(s.then_body), else_body=rb(s.else_body))
    if isinstance(s, T.While):
        return dataclasses.replace(s, cond=rx(s.cond), body=rb(s.body))
    operands = T.operand_fields(type(s))  # a tile op: the regions and operands it declares read or written
    if operands:
        return dataclasses.replace(s, **{f: _rewrite_operand(getattr(s, f), expr_fn) for f in operands})
    return s


def walk_stmts(body: list[T.Stmt]) -> Iterator[T.Stmt]:
    """Every statement, pre-order, nested bodies included."""
    for s in body:
        yield s
        if isinstance(s, T.For | T.While):
            yield from walk_stmts(s.body)
        elif isinstance(s, T.If):
            yield from walk_stmts(s.then_body)
            yield from walk_stmts(s.else_body)


def sub_exprs(e: T.Expr) -> Iterator[T.Expr]:
    """`e` and every expression inside it, pre-order -- the one expression walker of both IRs (SIMT IR's
    nodes register their children with `register_children`, see tilec/ir/simt.py)."""
    yield e
    for x in children(e):
        yield from sub_exprs(x)


_CHILDREN: dict[type, Callable[[T.Expr], tuple | list]] = {}


def register_children(node_type: type, children: Callable[[T.Expr], tuple | list]) -> None:
    """Teach sub_exprs the sub-expressions of an expression node defined outside Tile IR."""
    _CHILDREN[node_type] = children


def children(e: T.Expr):
    """The direct sub-expressions of e (Tile IR's, and those registered with `register_children`)."""
    if isinstance(e, T.Binary | T.Compare):
        return (e.a, e.b)
    if isinstance(e, T.Unary):
        return (e.a,)
    if isinstance(e, T.Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, T.Call):
        return e.args
    if isinstance(e, T.Cast):
        return (e.value,)
    if isinstance(e, T.Load):
        return e.indices
    fn = _CHILDREN.get(type(e))
    return fn(e) if fn is not None else ()


def direct_exprs(s: T.Stmt) -> list[T.Expr]:
    """The expressions of a scalar statement itself, not of nested bodies or tile-op regions: a store's value
    and indices, an assignment's value, an `if`'s or a `while`'s condition, a loop's extents."""
    if isinstance(s, T.Store):
        return [s.value, *s.indices]
    if isinstance(s, T.Assign):
        return [s.value]
    if isinstance(s, T.If | T.While):
        return [s.cond]
    if isinstance(s, T.For):
        return [*s.extents]
    return []


def number_ops(k: T.Kernel) -> None:
    """Give every statement and buffer of kernel k its stable id: 1, 2, ... in source order (parameters,
    then the body depth first), so that the same source always numbers the same way."""
    n = 0
    for p in k.params:
        if isinstance(p, T.Buffer):
            n += 1
            p.uid = n
    for s in walk_stmts(k.body):
        n += 1
        s.uid = n
        if isinstance(s, T.Alloc):
            n += 1
            s.buffer.uid = n
