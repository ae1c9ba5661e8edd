"""The work a kernel implies: FLOPs of its gemms and elementwise math, and global bytes moved.

Counted from Tile IR per block, multiplied by enclosing loop trip counts and the grid size, as
size formulas (strings over the runtime sizes). Ragged edges are counted as full tiles, so
these are upper bounds for ragged shapes and exact otherwise; a trip count that depends on the
block's index is taken at the grid's middle block.
"""

from __future__ import annotations

from . import tile as T
from .fold import fold
from .formula import formula


def kernel_costs(k: T.Kernel) -> dict[str, str]:
    flops: list[str] = []
    bytes_: list[str] = []
    # Loop bounds may name locals (`n = ceildiv(N, 64)`); formulas must only use runtime sizes. A bound that reads the
    # block's index (a grid-stride loop, a causal mask's last tile) is counted at the middle block of the grid: the
    # mean trip count when it is linear in the index, so that count times the grid approximates the whole grid's.
    values: dict[T.Var, T.Expr] = {}
    for bv, extent in zip(k.block_vars, k.grid, strict=False):
        one, two = T.Const(dtype=bv.dtype, span=None, value=1), T.Const(dtype=bv.dtype, span=None, value=2)
        last = T.Binary(dtype=bv.dtype, span=None, op="-", a=extent, b=one)
        values[bv] = T.Binary(dtype=bv.dtype, span=None, op="//", a=last, b=two)

    def resolve(e: T.Expr) -> T.Expr:
        from .visit import rewrite_expr

        return rewrite_expr(e, lambda x: resolve(values[x]) if isinstance(x, T.Var) and x in values
                            else None)

    def _f(e: T.Expr) -> str:
        return formula(resolve(e))

    def walk(body: list[T.Stmt], mult: list[str]) -> None:
        for s in body:
            m = "*".join(mult) if mult else "1"
            if isinstance(s, T.Assign) and not mult:
                values[s.var] = s.value
            if isinstance(s, T.For):
                if s.kind == "parallel":
                    walk(s.body, mult)
                    count_parallel(s, mult)
                else:
                    walk(s.body, mult + [f"({_f(s.extents[0])})"])
            elif isinstance(s, T.If):
                walk(s.then_body, mult)
            elif isinstance(s, T.Gemm):
                a = [e for e in s.a.const_extents if e != 1]
                b = [e for e in s.b.const_extents if e != 1]
                mm, kk = (a[1], a[0]) if s.transpose_a else (a[0], a[1])
                nn = b[0] if s.transpose_b else b[1]
                flops.append(f"{2 * mm * nn * kk}*{m}")
            elif isinstance(s, T.Copy | T.Atomic):
                for r in (s.src, s.dst) if isinstance(s, T.Copy) else (s.dst,):
                    if r.buffer.scope == "global":
                        n = 1
                        for e in r.const_extents or ():
                            n *= e
                        bytes_.append(f"{n * r.buffer.dtype.bytes}*{m}")

    def count_parallel(s: T.For, mult: list[str]) -> None:
        n = 1
        for e in s.extents:
            n *= int(fold(e).value)
        m = "*".join(mult) if mult else "1"
        from .visit import sub_exprs, walk_stmts

        for st in walk_stmts(s.body):
            if isinstance(st, T.Store) and st.buffer.scope == "global":
                bytes_.append(f"{n * st.buffer.dtype.bytes}*{m}")
            exprs = [st.value] if isinstance(st, T.Store | T.Assign) else []
            for e in exprs:
                for x in sub_exprs(e):
                    if isinstance(x, T.Load) and x.buffer.scope == "global":
                        bytes_.append(f"{n * x.buffer.dtype.bytes}*{m}")
                    if isinstance(x, T.Binary | T.Call) and x.dtype.is_float:
                        flops.append(f"{n}*{m}")

    try:
        walk(k.body, [])
        grid = "*".join(f"({_f(g)})" for g in k.grid)
    except ValueError:  # a bound that is not a size formula (data-dependent): no estimate
        return {"flops": "0", "bytes": "0"}
    return {"flops": f"({' + '.join(flops) or '0'})*{grid}", "bytes": f"({' + '.join(bytes_) or '0'})*{grid}"}
