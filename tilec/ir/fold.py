"""Constant folding and light algebraic simplification of Tile IR expressions.

This is the cheap, always-available simplifier (no TVM): it evaluates operations on constants with
the language's semantics, applies identities that hold for every value (x + 0, x * 1, x * 0 for
integers), and can prove two integer expressions differ by a constant by normalising both to
linear forms. Heavier reasoning (bounds, modular sets) lives in tilec/ir/arith.py.
"""

from __future__ import annotations

import math
import struct

from . import dtypes as D
from . import tile as T
from .visit import rewrite_expr


def const(value, dtype: D.DType, span=None) -> T.Const:
    return T.Const(dtype, span, value)


def as_int(e: T.Expr) -> int | None:
    return int(e.value) if isinstance(e, T.Const) and not e.dtype.is_float else None


def wrap_int(value: int, dtype: D.DType) -> int:
    """Two's-complement wrap-around, as the hardware does."""
    if dtype.is_bool:
        return int(bool(value))
    bits = dtype.bits
    value &= (1 << bits) - 1
    if dtype.kind == "int" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _round_float(value: float, dtype: D.DType) -> float:
    if dtype == D.F64:
        return float(value)
    if dtype in (D.F32, D.F16):  # IEEE round to nearest even, as numpy's cast (without importing numpy)
        fmt = "<f" if dtype == D.F32 else "<e"
        try:
            return struct.unpack(fmt, struct.pack(fmt, value))[0]
        except OverflowError:  # past the largest finite value after rounding: infinity, as numpy gives
            return math.copysign(math.inf, value)
    import ml_dtypes  # noqa: F401  (registers bfloat16 and float8 with numpy)
    import numpy as np

    with np.errstate(all="ignore"):
        return float(np.array(value, dtype=np.dtype(dtype.numpy_name)))


def convert(value, dtype: D.DType):
    """A Python value converted to `dtype` with C-like semantics (floats truncate to ints)."""
    if dtype.is_bool:
        return bool(value)
    if dtype.is_float:
        return _round_float(float(value), dtype)
    if isinstance(value, float):
        if not math.isfinite(value):
            return 0
        value = int(value)
    return wrap_int(int(value), dtype)


def floordiv(a: int, b: int) -> int:
    return a // b


_MATH1 = {
    "exp": math.exp, "exp2": lambda x: 2.0**x, "log": math.log, "log2": math.log2, "sqrt": math.sqrt,
    "rsqrt": lambda x: 1.0 / math.sqrt(x), "abs": abs, "tanh": math.tanh, "sin": math.sin, "cos": math.cos,
    "floor": math.floor, "ceil": math.ceil, "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
}


def _eval(e: T.Expr):
    """Value of an expression whose operands are all constants, or None if not computable."""
    if isinstance(e, T.Binary):
        a, b = e.a.value, e.b.value
        op = e.op
        if op in ("and", "or"):
            return (bool(a) and bool(b)) if op == "and" else (bool(a) or bool(b))
        if e.dtype.is_float:
            a, b = float(a), float(b)
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/":
                return a / b if b != 0 else None
            if op == "**":
                return a**b
            return None
        a, b = int(a), int(b)
        if op in ("//", "%") and b == 0:
            return None
        return {
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b,
            "%": lambda: a % b, "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
            "<<": lambda: a << b if 0 <= b < 64 else None, ">>": lambda: a >> b if 0 <= b < 64 else None,
            "**": lambda: a**b if 0 <= b < 64 else None,
        }.get(op, lambda: None)()
    if isinstance(e, T.Compare):
        a, b = e.a.value, e.b.value
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[e.op]
    if isinstance(e, T.Unary):
        a = e.a.value
        return {"-": lambda: -a, "not": lambda: not a, "~": lambda: ~int(a)}[e.op]()
    if isinstance(e, T.Select):
        return e.a.value if e.cond.value else e.b.value
    if isinstance(e, T.Cast):
        return e.value.value
    if isinstance(e, T.Call):
        args = [x.value for x in e.args]
        try:
            if e.func == "ceildiv":
                return -(-int(args[0]) // int(args[1])) if int(args[1]) != 0 else None
            if e.func in ("max", "min"):
                return max(args) if e.func == "max" else min(args)
            if e.func == "pow":
                return float(args[0]) ** float(args[1])
            if e.func in _MATH1 and len(args) == 1:
                return _MATH1[e.func](args[0])
        except (ValueError, OverflowError, ZeroDivisionError):
            return None
    return None


def fold_node(e: T.Expr) -> T.Expr | None:
    kids: list[T.Expr]
    if isinstance(e, T.Binary | T.Compare):
        kids = [e.a, e.b]
    elif isinstance(e, T.Unary):
        kids = [e.a]
    elif isinstance(e, T.Select):
        if isinstance(e.cond, T.Const):
            return e.a if e.cond.value else e.b
        kids = [e.cond, e.a, e.b]
    elif isinstance(e, T.Call):
        kids = list(e.args)
    elif isinstance(e, T.Cast):
        if isinstance(e.value, T.Const):
            return const(convert(e.value.value, e.dtype), e.dtype, e.span)
        if e.value.dtype == e.dtype:
            return e.value
        return None
    else:
        return None
    if all(isinstance(k, T.Const) for k in kids):
        v = _eval(e)
        if v is not None:
            return const(convert(v, e.dtype), e.dtype, e.span)
        return None
    if isinstance(e, T.Binary) and not e.dtype.is_float:
        a, b = as_int(e.a), as_int(e.b)
        if e.op == "+" and a == 0:
            return e.b
        if e.op in ("+", "-") and b == 0:
            return e.a
        if e.op == "*" and (a == 1 or b == 1):
            return e.b if a == 1 else e.a
        if e.op == "*" and (a == 0 or b == 0):
            return const(0, e.dtype, e.span)
        if e.op == "//" and b == 1:
            return e.a
        if (e.op == "+" and b is not None and isinstance(e.a, T.Binary) and e.a.op == "+"
                and e.a.dtype == e.dtype and as_int(e.a.b) is not None):
            # (x + c1) + c2 -> x + (c1 + c2): a long chain of constants folds to one (integers wrap,
            # so the sum is the same modulo 2**bits)
            return T.Binary(e.dtype, e.span, "+", e.a.a, const(convert(as_int(e.a.b) + b, e.dtype), e.dtype, e.span))
    return None


def fold(e: T.Expr) -> T.Expr:
    return rewrite_expr(e, fold_node)


# ---------------------------------------------------------------- linear forms


def linear_form(e: T.Expr) -> dict[object, int] | None:
    """An integer expression as {atom: coefficient} with the constant under key 1, or None."""
    e = fold(e)
    if e.dtype.is_float:
        return None
    if isinstance(e, T.Const):
        return {1: int(e.value)}
    if isinstance(e, T.Binary) and e.op in ("+", "-"):
        a, b = linear_form(e.a), linear_form(e.b)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v != 0}
    if isinstance(e, T.Binary) and e.op == "*":
        ca, cb = as_int(e.a), as_int(e.b)
        if ca is not None or cb is not None:
            c, other = (ca, e.b) if ca is not None else (cb, e.a)
            f = linear_form(other)
            return None if f is None else {k: v * c for k, v in f.items() if v * c != 0}
    if isinstance(e, T.Unary) and e.op == "-":
        f = linear_form(e.a)
        return None if f is None else {k: -v for k, v in f.items()}
    from .printer import expr_str

    return {("atom", expr_str(e)): 1}


def constant_difference(hi: T.Expr, lo: T.Expr) -> int | None:
    """hi - lo if it is the same integer for every value of the variables, else None."""
    a, b = linear_form(hi), linear_form(lo)
    if a is None or b is None:
        return None
    diff = dict(a)
    for k, v in b.items():
        diff[k] = diff.get(k, 0) - v
    diff = {k: v for k, v in diff.items() if v != 0}
    if not diff:
        return 0
    if set(diff) == {1}:
        return diff[1]
    return None


def multiple_of(e: T.Expr, vec: int) -> bool:
    """Whether integer expression e is a multiple of vec for every value of its variables."""
    e = fold(e)
    if isinstance(e, T.Const):
        return int(e.value) % vec == 0
    if isinstance(e, T.Binary):
        if e.op in ("+", "-"):
            return multiple_of(e.a, vec) and multiple_of(e.b, vec)
        if e.op == "*":
            return multiple_of(e.a, vec) or multiple_of(e.b, vec)
    if isinstance(e, T.Cast):
        return multiple_of(e.value, vec)
    return False


def _fold_multiple_node(e: T.Expr) -> T.Expr | None:
    """fold_node, and three rewrites that hold for every integer value: (x * k) // c -> x * (k / c) where c divides
    k; x % c -> 0 where x is a multiple of c; x ^ 0 -> x."""
    out = fold_node(e)
    if out is not None:
        e = out
    if not isinstance(e, T.Binary) or e.dtype.is_float:
        return out
    b = as_int(e.b)
    if e.op == "//" and b and isinstance(e.a, T.Binary) and e.a.op == "*" and e.a.dtype == e.dtype:
        k = as_int(e.a.b)
        if k is not None and k % b == 0:
            return fold(T.Binary(e.dtype, e.span, "*", e.a.a, const(k // b, e.dtype, e.span)))
    if e.op == "%" and b and multiple_of(e.a, b):
        return const(0, e.dtype, e.span)
    if e.op == "^" and (b == 0 or as_int(e.a) == 0):
        return e.a if b == 0 else e.b
    return out


def fold_multiples(e: T.Expr) -> T.Expr:
    """fold, with the rewrites of _fold_multiple_node: a swizzle's `(c ^ ((x * 64) % 8))` becomes `c`. Kept apart from
    fold, which every lowered index goes through: only the callers that want these rewrites pay for them."""
    return rewrite_expr(e, _fold_multiple_node)


def split_constant(e: T.Expr) -> tuple[T.Expr | None, int]:
    """An integer sum as (the terms that are not constant, or None; the sum of those that are)."""
    if isinstance(e, T.Const) and not e.dtype.is_float:
        return None, int(e.value)
    if isinstance(e, T.Binary) and e.op in ("+", "-") and not e.dtype.is_float:
        a_rest, a_const = split_constant(e.a)
        b_rest, b_const = split_constant(e.b)
        sign = 1 if e.op == "+" else -1
        if b_rest is None:
            rest = a_rest
        elif a_rest is None:
            rest = b_rest if sign == 1 else T.Unary(e.dtype, e.span, "-", b_rest)
        else:
            rest = T.Binary(e.dtype, e.span, e.op, a_rest, b_rest)
        return rest, a_const + sign * b_const
    return e, 0


# ---------------------------------------------------------------- polynomials (view sizes)


def polynomial(e: T.Expr) -> dict[tuple[str, ...], int]:
    """An integer expression as a polynomial: {monomial: coefficient}, a monomial being the sorted names of its
    factors ("v:N" for runtime size N, "a:..." for any other sub-expression, taken whole), () for the constant."""
    e = fold(e)
    if isinstance(e, T.Cast) and e.dtype.is_int and e.value.dtype.is_int:
        return polynomial(e.value)
    if isinstance(e, T.Const):
        return {(): int(e.value)} if int(e.value) else {}
    if isinstance(e, T.Var) and e.kind == "size":
        return {(f"v:{e.name}",): 1}
    if isinstance(e, T.Unary) and e.op == "-":
        return {m: -c for m, c in polynomial(e.a).items()}
    if isinstance(e, T.Binary) and e.op in ("+", "-", "*"):
        a, b = polynomial(e.a), polynomial(e.b)
        out: dict[tuple[str, ...], int] = {}
        if e.op == "*":
            for ma, ca in a.items():
                for mb, cb in b.items():
                    m = tuple(sorted(ma + mb))
                    out[m] = out.get(m, 0) + ca * cb
        else:
            out = dict(a)
            for m, c in b.items():
                out[m] = out.get(m, 0) + (c if e.op == "+" else -c)
        return {m: c for m, c in out.items() if c}
    from .printer import expr_str

    return {(f"a:{expr_str(e)}",): 1}


def compare_sizes(lhs: T.Expr, op: str, rhs: T.Expr) -> bool | None:
    """Whether `lhs op rhs` (op `==` or `<=`) holds for every value >= 1 of the runtime sizes: True when proven,
    False when it fails for every such value, None when it depends on them."""
    diff = polynomial(T.Binary(lhs.dtype, None, "-", rhs, lhs))  # rhs - lhs
    if not diff:
        return True
    if set(diff) == {()}:
        c = diff[()]
        return c == 0 if op == "==" else c >= 0
    if all(f.startswith("v:") for m in diff for f in m):  # a polynomial of sizes >= 1: its sign may be clear
        if all(c >= 0 for c in diff.values()):  # rhs - lhs >= the sum of the coefficients > 0
            return op == "<="
        if all(c <= 0 for c in diff.values()):  # rhs - lhs < 0
            return False
    return None
