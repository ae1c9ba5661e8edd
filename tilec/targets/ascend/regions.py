"""Which buffers a Tile IR statement reads and writes (by name): what placement, queue planning and lowering
ask of each tile op."""

from __future__ import annotations

from ...ir import tile as T
from ...ir.visit import sub_exprs, walk_stmts


def _loads(e: T.Expr) -> set[str]:
    return {x.buffer.name for x in sub_exprs(e) if isinstance(x, T.Load)}


def reads_writes(s: T.Stmt) -> tuple[set[str], set[str]]:
    """(read, written) buffer names of one statement, nested bodies included."""
    r: set[str] = set()
    w: set[str] = set()
    for x in walk_stmts([s]):
        if isinstance(x, T.Copy):
            r.add(x.src.buffer.name)
            w.add(x.dst.buffer.name)
            for e in x.src.starts + x.dst.starts:
                r |= _loads(e)
        elif isinstance(x, T.Gemm):
            r |= {x.a.buffer.name, x.b.buffer.name, x.c.buffer.name}
            w.add(x.c.buffer.name)
        elif isinstance(x, T.Reduce):
            r.add(x.src.buffer.name)
            w.add(x.dst.buffer.name)
            if not x.clear:
                r.add(x.dst.buffer.name)
        elif isinstance(x, T.Fill):
            w.add(x.dst.buffer.name)
            r |= _loads(x.value)
        elif isinstance(x, T.Store):
            w.add(x.buffer.name)
            r |= _loads(x.value)
            for e in x.indices:
                r |= _loads(e)
        elif isinstance(x, T.Assign):
            r |= _loads(x.value)
        elif isinstance(x, T.If | T.While):
            r |= _loads(x.cond)
        elif isinstance(x, T.For):
            for e in x.extents:
                r |= _loads(e)
    return r, w


def touched(s: T.Stmt) -> set[str]:
    r, w = reads_writes(s)
    return r | w
