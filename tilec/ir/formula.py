"""Size formulas: integer expressions over runtime sizes, printed so that any host can evaluate
them (integers, names, + - * // %, ceildiv/min/max) — the manifest's grid and cost entries."""

from __future__ import annotations

from . import tile as T
from .fold import fold


def formula(e: T.Expr) -> str:
    e = fold(e)
    if isinstance(e, T.Const):
        return str(int(e.value))
    if isinstance(e, T.Var):
        return e.name
    if isinstance(e, T.Cast):
        return formula(e.value)
    if isinstance(e, T.Binary) and e.op in ("+", "-", "*", "//", "%"):
        return f"({formula(e.a)} {e.op} {formula(e.b)})"
    if isinstance(e, T.Call) and e.func in ("ceildiv", "min", "max"):
        return f"{e.func}({', '.join(formula(a) for a in e.args)})"
    raise ValueError(f"grid extent is not a size formula: {type(e).__name__}")
