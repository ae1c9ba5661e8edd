"""The work a kernel implies: FLOPs of its gemms and elementwise math, and global bytes moved.

Counted from Tile IR per block, multiplied by enclosing loop trip counts and the grid size, as
size formulas (strings over the runtime sizes). Ragged edges are counted as full tiles, so
these are upper bounds for ragged shapes and exact otherwise; a trip count that depends on the
block's index is the mean of its two middle blocks' counts (the grid's mean where it is linear in the index).
"""

from __future__ import annotations

from . import tile as T
from .fold import fold
from .formula import formula


def kernel_costs(k: T.Kernel) -> dict[str, str]:
    flops: list[str] = []
    bytes_: list[str] = []
    # Loop bounds may name locals (`n = ceildiv(N, 64)`); formulas must only use runtime sizes. A bound that reads the
    # block's index (a grid-stride loop, a causal mask's last tile, in either order) is counted as the mean of its
    # values at the two middle blocks of the grid, (n - 1) // 2 and n // 2: the mean trip count of the whole grid when
    # it is linear in the index (one middle block alone is half a step off at an even count of blocks, 3 % of a
    # causal attention at 32 query blocks), so that the count times the grid approximates the whole grid's.
    values: dict[T.Var, T.Expr] = {}
    middles: list[dict[T.Var, T.Expr]] = [{}, {}]
    for bv, extent in zip(k.block_vars, k.grid, strict=False):
        one, two = (T.Const(dtype=bv.dtype, span=None, value=v) for v in (1, 2))
        last = T.Binary(dtype=bv.dtype, span=None, op="-", a=extent, b=one)
        middles[0][bv] = T.Binary(dtype=bv.dtype, span=None, op="//", a=last, b=two)
        middles[1][bv] = T.Binary(dtype=bv.dtype, span=None, op="//", a=extent, b=two)

    def resolve(e: T.Expr, block: dict[T.Var, T.Expr]) -> T.Expr:
        from .visit import rewrite_expr

        def value(x: T.Expr) -> T.Expr | None:
            if isinstance(x, T.Var) and x in block:
                return block[x]
            return resolve(values[x], block) if isinstance(x, T.Var) and x in values else None
        return rewrite_expr(e, value)

    def _f(e: T.Expr) -> str:
        return formula(resolve(e, middles[0]))

    def trip_count(e: T.Expr) -> tuple[str, int]:
        """A loop's trip count as (a formula, the divisor its product takes): 1 if it does not read the block's
        index, else the sum of its two middle blocks' counts, halved at the end (formulas are integer)."""
        lo, hi = (formula(resolve(e, block)) for block in middles)
        return (f"({lo})", 1) if lo == hi else (f"(({lo}) + ({hi}))", 2)

    def walk(body: list[T.Stmt], mult: list[str], div: int = 1) -> None:
        for s in body:
            m = "*".join(mult) if mult else "1"
            m = m if div == 1 else f"({m}) // {div}"
            if isinstance(s, T.Assign) and not mult:
                values[s.var] = s.value
            if isinstance(s, T.For):
                if s.kind == "parallel":
                    walk(s.body, mult, div)
                    count_parallel(s, m)
                else:
                    count, halves = trip_count(s.extents[0])
                    walk(s.body, mult + [count], div * halves)
            elif isinstance(s, T.If):
                walk(s.then_body, mult, div)
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

    def count_parallel(s: T.For, m: str) -> None:
        n = 1
        for e in s.extents:
            n *= int(fold(e).value)
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
