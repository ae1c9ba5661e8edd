"""Builders of folded Tile IR expressions, for passes that generate code (lowering and the tile ops)."""

from __future__ import annotations

from . import dtypes as D
from . import tile as T
from .fold import fold


def binary(op: str, a: T.Expr, b: T.Expr, dt: D.DType | None = None) -> T.Expr:
    return fold(T.Binary(dt or a.dtype, None, op, a, b))


def compare(op: str, a: T.Expr, b: T.Expr) -> T.Expr:
    return fold(T.Compare(D.BOOL, None, op, a, b))


def both(a: T.Expr | None, b: T.Expr | None) -> T.Expr | None:
    """a and b, where a missing condition (None) holds."""
    if a is None:
        return b
    if b is None:
        return a
    return fold(T.Binary(D.BOOL, None, "and", a, b))


def cast(e: T.Expr, dt: D.DType) -> T.Expr:
    if e.dtype == dt:
        return e
    return fold(T.Cast(dt, None, e))


def to_i64(e: T.Expr) -> T.Expr:
    return cast(e, D.I64)
