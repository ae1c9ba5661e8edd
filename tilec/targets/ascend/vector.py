"""Parallel loops, reductions and on-chip tile copies as AscendC vector calls (part of the lowering).

A Parallel loop over a tile becomes three-address vector calls over whole tiles in f32 (f16/bf16 operands are
Cast in, results Cast out): tile (op) tile as Add/Sub/Mul/Div/Max/Min, tile (op) scalar as Adds/Muls/Maxs/Mins,
math as Exp/Ln/Sqrt/Rsqrt/Abs, `if_then_else` and `if` as CompareScalar/Compare + Select (conditions on the loop
indices compare index tiles made once per core with CreateVecIndex/Duplicate), a row vector `v[i]` broadcast with
Brcb and a level-0 call with a zero source stride, a column vector `v[j]` with one call per row, any other affine
read (a transpose) as a Gather through a byte-offset table made once per core. Global reads and writes in the loop
(`C[bx * n + i] = ...`) become a copy in and a copy out of the tile; a guard that only keeps indices inside the
tensor is the copy's clipping. Row reductions fold 64-column chunks with level-0 calls, then WholeReduceSum/Max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...diagnostics import error
from ...ir import dtypes as D
from ...ir import tile as T
from ...ir.fold import fold, linear_form
from ...ir.printer import expr_str
from ...ir.visit import rewrite_expr, sub_exprs
from .chip import ctype
from .layout import layout_of
from .program import CPP_SIZES, Alloc
from .scalar import NO_REINTERPRET, cpp, float_literal

TILE_VALUE = "ascend-tile"  # the kind of a Var standing for a computed temporary tile
CMP = {"<": "LT", ">": "GT", "==": "EQ", "<=": "LE", ">=": "GE", "!=": "NE"}
FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}
BINARY = {"+": "Add", "-": "Sub", "*": "Mul", "/": "Div"}
UNARY = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "abs": "Abs"}


@dataclass
class Val:
    kind: str  # "s": a C++ expression of type float (a literal or float(...)); "t": a float tile
    text: str
    owned: bool = False  # a pool temporary this value may release


class VecLoop:
    def __init__(self, lw, vars_: list[T.Var], shape: tuple[int, ...], span):
        self.lw = lw
        self.vars = vars_
        self.shape = shape
        self.layout = layout_of(shape)
        self.n = self.layout.count
        self.span = span
        self.env: dict[str, T.Expr] = {}
        # Locals whose value reads a tile are computed where they are assigned (a later store may change the
        # tile): name -> a Var standing for the temporary holding the value.
        self.materialized: dict[str, T.Var] = {}
        self.globals: dict[str, str] = {}  # key of a global access -> its tile
        self.limits: dict[str, dict[int, str]] = {}  # key of a global store -> {dim: at most this many elements}

    # ------------------------------------------------------------ helpers

    def subst(self, e: T.Expr) -> T.Expr:
        def fn(x):
            if isinstance(x, T.Var) and x.name in self.materialized:
                return self.materialized[x.name]
            if isinstance(x, T.Var) and x.name in self.env:
                return self.env[x.name]  # substituted when it was assigned (`a, b = b, a` is no cycle)
            return None

        return rewrite_expr(e, fn)

    def is_vec(self, e: T.Expr) -> bool:
        return any(isinstance(x, T.Load) and not self.is_scalar_load(x) or
                   (isinstance(x, T.Var) and (x.kind == TILE_VALUE or any(x is v for v in self.vars)))
                   for x in sub_exprs(e))

    def is_scalar_load(self, x: T.Load) -> bool:
        """An alloc_var, or an element of a global tensor at an index the loop does not change: one value the
        scalar unit reads (scalar.cpp), not a tile."""
        if x.buffer.scope == "var":
            return True
        return x.buffer.scope == "global" and not any(
            isinstance(y, T.Load) and not self.is_scalar_load(y) or
            isinstance(y, T.Var) and (y.kind == TILE_VALUE or any(y is v for v in self.vars))
            for ix in x.indices for y in sub_exprs(self.subst(ix)))

    def target(self, into: str | None) -> Val:
        return Val("t", into) if into else Val("t", self.lw.temp(), True)

    def done(self, *vals: Val, keep: Val | None = None) -> None:
        for v in vals:
            if v.owned and (keep is None or v.text != keep.text):
                self.lw.release(v.text)

    def v(self, text: str, reads=(), writes=()) -> None:
        self.lw.v(text, [r for r in reads if r], [w for w in writes if w])

    def tile(self, v: Val) -> Val:
        """A scalar value as a tile (Duplicate)."""
        if v.kind == "t":
            return v
        t = self.target(None)
        self.v(f"Duplicate({t.text}, {v.text}, {self.n});", writes=[t.text])
        return t

    def key(self, e: T.Load) -> str:
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"

    # ------------------------------------------------------------ expressions

    def eval(self, e: T.Expr, into: str | None = None) -> Val:
        e = self.subst(e)
        got = self._eval(e, into)
        # Tiles compute in f32, but an f16/bf16 result (o[i, j] * do[i, j] of two f16 tiles, a cast to f16) is that
        # type's value, as the language (and the interpreter) rounds it: a round trip through the narrow type.
        narrow = e.dtype in (D.F16, D.BF16) and (
            isinstance(e, (T.Binary, T.Call)) and not (isinstance(e, T.Call) and e.func in ("max", "min")) or
            isinstance(e, T.Cast) and e.value.dtype in (D.F32, D.F64))
        if narrow and got.kind == "t":
            t = self.lw.temp()
            raw = f"{t}.ReinterpretCast<{ctype(e.dtype)}>()"
            # (a tile this value only reads, such as the f32 buffer under a cast, is not rounded in place)
            d = got if got.owned or got.text == into else self.target(into)
            self.v(f"Cast({raw}, {got.text}, RoundMode::CAST_RINT, {self.n});", [got.text], [t])
            self.v(f"Cast({d.text}, {raw}, RoundMode::CAST_NONE, {self.n});", [t], [d.text])
            self.lw.release(t)
            return d
        return got

    def _eval(self, e: T.Expr, into: str | None) -> Val:
        if isinstance(e, T.Const):
            return Val("s", float_literal(float(e.value)))
        if not self.is_vec(e):
            return Val("s", f"float({cpp(e)})")
        if isinstance(e, T.Var):
            return Val("t", e.name if e.kind == TILE_VALUE else self.index_tile(e))
        if isinstance(e, T.Load):
            return self.load(e, into)
        if isinstance(e, T.Cast):
            if e.dtype.is_bool and not e.value.dtype.is_bool:
                zero = T.Const(e.value.dtype, e.span, 0)
                return self.select(T.Compare(D.BOOL, e.span, "!=", e.value, zero), T.Const(D.F32, e.span, 1.0),
                                   T.Const(D.F32, e.span, 0.0), into)
            if e.dtype.is_int and (e.value.dtype.is_float or e.dtype.bits < e.value.dtype.bits or
                                   e.dtype.bits == e.value.dtype.bits and e.dtype.kind != e.value.dtype.kind):
                # an integer value held in f32: truncated, and wrapped to the narrower width (as the language does)
                got = self.tile(self.eval(e.value))
                d = got if got.owned else self.target(into)
                self.lw.wrap_in_float(d.text, got.text, e.dtype, self.n)
                return d
            return self.eval(e.value, into)
        if isinstance(e, T.Compare) or (e.dtype.is_bool and not isinstance(e, T.Load)):
            return self.select(e, T.Const(D.F32, e.span, 1.0), T.Const(D.F32, e.span, 0.0), into)
        if isinstance(e, T.Unary):
            if e.op != "-":
                raise error(f"'{e.op}' on a tile has no AscendC lowering here", e.span)
            a = self.eval(e.a)
            d = self.target(into)
            self.v(f"Muls({d.text}, {a.text}, -1.0f, {self.n});", [a.text], [d.text])
            self.done(a, keep=d)
            return d
        if isinstance(e, T.Binary):
            return self.binary(e, into)
        if isinstance(e, T.Call):
            return self.call(e, into)
        if isinstance(e, T.Select):
            return self.select(e.cond, e.a, e.b, into)
        raise error(f"this expression has no AscendC vector lowering: {expr_str(e)}", e.span)

    def const_int(self, e: T.Expr) -> int | None:
        c = fold(self.subst(e))
        return int(c.value) if isinstance(c, T.Const) and float(c.value) == int(c.value) else None

    def pow2(self, s: Val, sign: float) -> Val:
        """2^(sign * s) for a tile s of small integers, exactly: the float's exponent bits built in int32."""
        t = self.lw.temp()
        n = self.n
        self.v(f"Muls({t}, {s.text}, {sign!r}f, {n});", [s.text], [t])
        self.v(f"Adds({t}, {t}, 127.0f, {n});", [t], [t])
        self.v(f"Cast({t}.ReinterpretCast<int32_t>(), {t}, RoundMode::CAST_RINT, {n});", [t], [t])
        self.v(f"Muls({t}.ReinterpretCast<int32_t>(), {t}.ReinterpretCast<int32_t>(), int32_t(8388608), {n});",
               [t], [t])
        self.done(s)
        return Val("t", t, True)

    def integer_binary(self, e: T.Binary, into: str | None) -> Val:
        """Integer //, %, >>, <<, & on values held in f32 (exact below 2^22): by constants (a mask 2^k - 1 for &),
        shifts also by a tile of small integers."""
        n = self.n
        a_e, b_e = e.a, e.b
        if e.op == "&" and self.const_int(a_e) is not None:
            a_e, b_e = b_e, a_e
        c = self.const_int(b_e)
        if e.op in ("<<", ">>"):
            a = self.tile(self.eval(a_e))
            if c is not None:
                factor = Val("s", f"{float(2.0 ** (c if e.op == '<<' else -c))!r}f")
            else:
                factor = self.pow2(self.tile(self.eval(b_e)), 1.0 if e.op == "<<" else -1.0)
            d = Val("t", into) if into else (a if a.owned else self.target(None))
            if factor.kind == "s":
                self.v(f"Muls({d.text}, {a.text}, {factor.text}, {n});", [a.text], [d.text])
            else:
                self.v(f"Mul({d.text}, {a.text}, {factor.text}, {n});", [a.text, factor.text], [d.text])
            if e.op == ">>":
                self.v(f"Cast({d.text}, {d.text}, RoundMode::CAST_FLOOR, {n});", [d.text], [d.text])
            self.done(a, factor, keep=d)
            return d
        if e.op == "&" and c is not None and c >= 0 and not (c + 1) & c:
            op, c = "%", c + 1  # a mask 2^k - 1: the remainder by 2^k
        elif e.op in ("&", "|"):
            return self.bitwise(e.op, self.tile(self.eval(a_e)), self.tile(self.eval(b_e)), into)
        else:
            op = e.op
        if c is None or c == 0:
            raise error(f"'{e.op}' on tiles: the AscendC back end computes integers in f32 and divides by a non-zero "
                        f"constant only (not {expr_str(b_e)})", e.span)
        a = self.tile(self.eval(a_e))
        q = self.target(None)
        # floor(a / c) = floor((a + 0.5) / c) for integers a and c > 0, never within 0.5/c of a boundary
        sa = 1.0 if c > 0 else -1.0
        self.v(f"Muls({q.text}, {a.text}, {sa!r}f, {n});", [a.text], [q.text])
        self.v(f"Adds({q.text}, {q.text}, 0.5f, {n});", [q.text], [q.text])
        self.v(f"Muls({q.text}, {q.text}, {1.0 / abs(c)!r}f, {n});", [q.text], [q.text])
        self.v(f"Cast({q.text}, {q.text}, RoundMode::CAST_FLOOR, {n});", [q.text], [q.text])
        if op == "//":
            self.done(a)
            if into:
                self.v(f"Adds({into}, {q.text}, 0.0f, {n});", [q.text], [into])
                self.done(q)
                return Val("t", into)
            return q
        d = Val("t", into) if into else (a if a.owned else self.target(None))
        self.v(f"Muls({q.text}, {q.text}, {-float(c)!r}f, {n});", [q.text], [q.text])
        self.v(f"Add({d.text}, {a.text}, {q.text}, {n});", [a.text, q.text], [d.text])
        self.done(a, q, keep=d)
        return d

    def split16(self, x: Val) -> tuple[str, str]:
        """An integer-valued f32 tile (|x| < 2^24) as two int16 tiles of its two's-complement bits: the high half
        floor(x / 2^16) and the low half x mod 2^16 (as int16 bits)."""
        lw, n = self.lw, self.n
        hi, lo = lw.temp(), lw.temp()
        lw.v(f"Muls({hi}, {x.text}, {2.0 ** -16!r}f, {n});", [x.text], [hi])
        lw.v(f"Cast({hi}, {hi}, RoundMode::CAST_FLOOR, {n});", [hi], [hi])
        lw.v(f"Muls({lo}, {hi}, -65536.0f, {n});", [hi], [lo])
        lw.v(f"Add({lo}, {lo}, {x.text}, {n});", [lo, x.text], [lo])
        lw.wrap_in_float(lo, lo, D.I16, n)
        for t in (hi, lo):  # in place: int16 results are written below the float source they come from
            w = lw.temp()
            lw.v(f"Cast({w}.ReinterpretCast<int16_t>(), {t}, RoundMode::CAST_RINT, {n});", [t], [w])
            lw.v(f"Adds({t}.ReinterpretCast<int16_t>(), {w}.ReinterpretCast<int16_t>(), int16_t(0), {n});", [w], [t])
            lw.release(w)
        return hi, lo

    def bitwise(self, op: str, a: Val, b: Val, into: str | None) -> Val:
        """a & b, a | b on integer values held in f32 (|a|, |b| < 2^24): the vector unit's int16 And/Or on each
        16-bit half of their two's-complement bits, recombined in f32."""
        lw, n = self.lw, self.n
        fn = {"&": "And", "|": "Or"}[op]
        ah, al = self.split16(a)
        bh, bl = self.split16(b)
        self.done(a, b)
        for x, y in ((ah, bh), (al, bl)):
            lw.v(f"{fn}({x}.ReinterpretCast<int16_t>(), {x}.ReinterpretCast<int16_t>(), "
                 f"{y}.ReinterpretCast<int16_t>(), {n});", [x, y], [x])
            lw.release(y)
        d = self.target(into)
        for t in (ah, al):
            w = lw.temp()
            lw.v(f"Cast({w}, {t}.ReinterpretCast<int16_t>(), RoundMode::CAST_NONE, {n});", [t], [w])
            lw.v(f"Adds({t}, {w}, 0.0f, {n});", [w], [t])
            lw.release(w)
        lw.wrap_in_float(al, al, D.U16, n)  # the low half's bits as an unsigned value
        lw.v(f"Muls({ah}, {ah}, 65536.0f, {n});", [ah], [ah])
        lw.v(f"Add({d.text}, {ah}, {al}, {n});", [ah, al], [d.text])
        lw.release(ah)
        lw.release(al)
        return d

    def reinterpret16(self, e: T.Call, into: str | None) -> Val:
        """T.reinterpret(f16 or bf16, x) of a 16-bit integer x held in f32: its bits as int16, viewed as the float
        type, converted to f32."""
        lw, n = self.lw, self.n
        x = self.tile(self.eval(e.args[0]))
        t = lw.temp()
        lw.wrap_in_float(t, x.text, D.I16, n)
        self.done(x)
        w = lw.temp()
        lw.v(f"Cast({w}.ReinterpretCast<int16_t>(), {t}, RoundMode::CAST_RINT, {n});", [t], [w])
        lw.release(t)
        d = self.target(into)
        lw.v(f"Cast({d.text}, {w}.ReinterpretCast<{ctype(e.dtype)}>(), RoundMode::CAST_NONE, {n});", [w], [d.text])
        lw.release(w)
        return d

    def bits16(self, e: T.Call, into: str | None) -> Val:
        """T.reinterpret(i16 or u16, x) of an f16/bf16 value x held in f32: x converted to its type (exact: it is
        that type's value), its bits viewed as int16 and converted to f32 (wrapped to u16 for u16)."""
        lw, n = self.lw, self.n
        x = self.tile(self.eval(e.args[0]))
        w = lw.temp()
        ft = ctype(e.args[0].dtype)
        lw.v(f"Cast({w}.ReinterpretCast<{ft}>(), {x.text}, RoundMode::CAST_RINT, {n});", [x.text], [w])
        self.done(x)
        d = self.target(into)
        lw.v(f"Cast({d.text}, {w}.ReinterpretCast<int16_t>(), RoundMode::CAST_NONE, {n});", [w], [d.text])
        lw.release(w)
        if e.dtype.kind == "uint":
            lw.wrap_in_float(d.text, d.text, e.dtype, n)
        return d

    def binary(self, e: T.Binary, into: str | None) -> Val:
        if not e.dtype.is_float and e.op in ("//", "%", ">>", "<<", "&", "|"):
            return self.integer_binary(e, into)
        if e.op not in BINARY:
            raise error(f"'{e.op}' on tiles has no AscendC vector lowering", e.span)
        a, b = self.eval(e.a), self.eval(e.b)
        # element-wise calls may write over an operand: reuse a temporary the operands own
        d = Val("t", into) if into else (a if a.owned else (b if b.owned and e.op in "+*" else self.target(None)))
        n = self.n
        if a.kind == "t" and b.kind == "t":
            self.v(f"{BINARY[e.op]}({d.text}, {a.text}, {b.text}, {n});", [a.text, b.text], [d.text])
        elif a.kind == "t":
            scalar = {"+": b.text, "-": f"-({b.text})", "*": b.text, "/": f"1.0f / ({b.text})"}[e.op]
            fn = "Adds" if e.op in "+-" else "Muls"
            self.v(f"{fn}({d.text}, {a.text}, {scalar}, {n});", [a.text], [d.text])
        elif e.op in "+*":
            self.v(f"{'Adds' if e.op == '+' else 'Muls'}({d.text}, {b.text}, {a.text}, {n});",
                   [b.text], [d.text])
        elif e.op == "-":
            self.v(f"Muls({d.text}, {b.text}, -1.0f, {n});", [b.text], [d.text])
            self.v(f"Adds({d.text}, {d.text}, {a.text}, {n});", [d.text], [d.text])
        else:
            t = self.tile(a)
            self.v(f"Div({d.text}, {t.text}, {b.text}, {n});", [t.text, b.text], [d.text])
            self.done(t, keep=d)
        self.done(a, b, keep=d)
        return d

    def call(self, e: T.Call, into: str | None) -> Val:
        n = self.n
        if e.func == "reinterpret":
            src = e.args[0].dtype
            if e.dtype in (D.F16, D.BF16) and src.is_int and src.bits == 16:
                return self.reinterpret16(e, into)
            if src in (D.F16, D.BF16) and e.dtype.is_int and e.dtype.bits == 16:
                return self.bits16(e, into)
            raise error(NO_REINTERPRET, e.span)
        if e.func in ("max", "min"):
            a, b = self.eval(e.args[0]), self.eval(e.args[1])
            if a.kind == "s":
                a, b = b, a
            d = self.target(into)
            fn = "Max" if e.func == "max" else "Min"
            if b.kind == "t":
                self.v(f"{fn}({d.text}, {a.text}, {b.text}, {n});", [a.text, b.text], [d.text])
            else:
                self.v(f"{fn}s({d.text}, {a.text}, {b.text}, {n});", [a.text], [d.text])
            self.done(a, b, keep=d)
            return d
        if len(e.args) != 1:
            raise error(f"{e.func}() has no AscendC vector lowering", e.span)
        a = self.eval(e.args[0])
        if a.kind == "s":
            a = self.tile(a)
        d = self.target(into)
        if e.func in UNARY:
            self.v(f"{UNARY[e.func]}({d.text}, {a.text}, {n});", [a.text], [d.text])
        elif e.func == "exp2":  # 2^x = e^(x ln 2)
            self.v(f"Muls({d.text}, {a.text}, {math.log(2.0)!r}f, {n});", [a.text], [d.text])
            self.v(f"Exp({d.text}, {d.text}, {n});", [d.text], [d.text])
        elif e.func == "log2":
            self.v(f"Ln({d.text}, {a.text}, {n});", [a.text], [d.text])
            self.v(f"Muls({d.text}, {d.text}, {1.0 / math.log(2.0)!r}f, {n});", [d.text], [d.text])
        else:
            raise error(f"{e.func}() has no AscendC vector lowering in tilec yet", e.span)
        self.done(a, keep=d)
        return d

    def select(self, cond: T.Expr, a: T.Expr, b: T.Expr, into: str | None) -> Val:
        cond = fold(self.subst(cond))
        if isinstance(cond, T.Const):  # a condition a const decides (`visible = ... if is_causal else True`)
            return self.eval(a if cond.value else b, into)
        if isinstance(cond, T.Binary) and cond.op in ("and", "or"):
            for x, y in ((cond.a, cond.b), (cond.b, cond.a)):
                if isinstance(fold(x), T.Const):  # True and c == c; False or c == c; ...
                    known = bool(fold(x).value)
                    if known == (cond.op == "and"):
                        return self.select(y, a, b, into)
                    return self.eval(a if known else b, into)
        if isinstance(cond, T.Binary) and cond.op == "and":
            inner = self.select(cond.b, a, b, None)
            return self._select_val(cond.a, inner, self.eval(b), into)
        if isinstance(cond, T.Binary) and cond.op == "or":
            inner = self.select(cond.b, a, b, None)
            return self._select_val(cond.a, self.eval(a), inner, into)
        if isinstance(cond, T.Unary) and cond.op == "not":
            return self.select(cond.a, b, a, into)
        return self._select_val(cond, self.eval(a), self.eval(b), into)

    def _select_val(self, cond: T.Expr, a: Val, b: Val, into: str | None) -> Val:
        if cond.dtype.is_bool and isinstance(cond, T.Load):  # a bool tile's element: 0 or 1
            cond = T.Compare(D.BOOL, cond.span, "!=", cond, T.Const(D.F32, cond.span, 0.0))
        if not isinstance(cond, T.Compare):
            raise error(f"condition {expr_str(cond)} has no AscendC vector lowering (use a comparison)", cond.span)
        x, y = self.eval(cond.a), self.eval(cond.b)
        op = cond.op
        if x.kind == "s" and y.kind == "t":
            x, y, op = y, x, FLIP[op]
        if x.kind == "s":
            x = self.tile(x)
        m = self.lw.mask()
        if y.kind == "t":
            self.v(f"Compare({m}, {x.text}, {y.text}, CMPMODE::{CMP[op]}, {self.n});", [x.text, y.text], [m])
        else:
            self.v(f"CompareScalar({m}, {x.text}, {y.text}, CMPMODE::{CMP[op]}, {self.n});", [x.text], [m])
        self.done(x, y)
        if a.kind == "s":
            a = self.tile(a)
        d = self.target(into)
        if b.kind == "t":
            self.v(f"Select({d.text}, {m}, {a.text}, {b.text}, SELMODE::VSEL_TENSOR_TENSOR_MODE, {self.n});",
                   [m, a.text, b.text], [d.text])
        else:
            self.v(f"Select({d.text}, {m}, {a.text}, {b.text}, SELMODE::VSEL_TENSOR_SCALAR_MODE, {self.n});",
                   [m, a.text], [d.text])
        self.lw.release_mask(m)
        self.done(a, b, keep=d)
        return d

    # ------------------------------------------------------------ loads

    def index_kind(self, e: T.Load) -> str:
        idx = [self.subst(i) for i in e.indices]
        if len(idx) == len(self.vars) and all(i is v for i, v in zip(idx, self.vars, strict=True)):
            return "same"
        if len(self.vars) == 2 and len(idx) == 1 and idx[0] is self.vars[0]:
            return "row"
        if len(self.vars) == 2 and len(idx) == 1 and idx[0] is self.vars[1]:
            return "col"
        return "gather"

    def as_float(self, name: str, ctype: str, count: int, into: str | None) -> Val:
        if ctype == "float":
            return Val("t", name)
        d = self.target(into)
        self.lw.to_float(d.text, name, ctype, count)
        return d

    def load(self, e: T.Load, into: str | None) -> Val:
        buf = e.buffer
        if buf.scope == "global":
            name = self.globals[self.key(e)]
            return self.as_float(name, self.lw.allocs[name].ctype, self.n, into)
        a = self.lw.allocs.get(buf.name)
        if a is None:
            raise error(f"'{buf.name}' is not a UB tile; the AscendC back end reads it only with tile copies", e.span)
        kind = self.index_kind(e)
        lay = self.lw.layouts[buf.name]
        if kind == "same":
            if lay.rows != self.layout.rows or lay.cols != self.layout.cols:
                raise error(f"'{buf.name}' is {lay.rows}x{lay.cols} but the loop is over {self.shape}", e.span)
            return self.as_float(buf.name, a.ctype, self.n, into)
        if kind == "row":
            src = self.as_float(buf.name, a.ctype, lay.count, None)
            return self.row_broadcast(src, into, e.span)
        if kind == "col":
            if lay.rows != self.shape[1]:
                raise error(f"'{buf.name}' has {lay.rows} elements but is read across {self.shape[1]} columns",
                            e.span)
            d = self.target(into)
            r, cp = self.layout.rows, self.layout.cols_pad
            if CPP_SIZES[a.ctype] == 1:
                raise error(f"'{buf.name}' ({buf.dtype}) is read across the columns of the loop: the AscendC back end "
                            "does this for 16- and 32-bit tiles; copy it into an f16 or f32 tile first", e.span)
            row = (f"Adds({d.text}[r * {cp}], {buf.name}, 0.0f, {cp});" if a.ctype == "float" else
                   f"Cast({d.text}[r * {cp}], {buf.name}, RoundMode::CAST_NONE, {cp});")
            self.lw.out.append(_for_rows(r, [(row, [buf.name], [d.text])]))
            return d
        if CPP_SIZES[a.ctype] == 1:  # Gather moves 16- and 32-bit elements: gather the tile converted to f32
            table = self.lw_gather_table(e, 4)
            whole = self.as_float(buf.name, a.ctype, lay.count, None)
            d = self.target(into)
            self.v(f"Gather({d.text}, {whole.text}, {table}.ReinterpretCast<uint32_t>(), 0, {self.n});",
                   [whole.text, table], [d.text])
            self.done(whole)
            return d
        table = self.lw_gather_table(e)
        if a.ctype == "float":
            d = self.target(into)
            self.v(f"Gather({d.text}, {buf.name}, {table}.ReinterpretCast<uint32_t>(), 0, {self.n});",
                   [buf.name, table], [d.text])
            return d
        t = self.lw.temp()
        raw = f"{t}.ReinterpretCast<{a.ctype}>()"
        self.v(f"Gather({raw}, {buf.name}, {table}.ReinterpretCast<uint32_t>(), 0, {self.n});",
               [buf.name, table], [t])
        d = self.target(into)
        self.v(f"Cast({d.text}, {raw}, RoundMode::CAST_NONE, {self.n});", [t], [d.text])
        self.lw.release(t)
        return d

    def row_broadcast(self, src: Val, into: str | None, span) -> Val:
        rows, cp = self.layout.rows, self.layout.cols_pad
        if rows > 255 * 8:
            raise error("row broadcast over more than 2040 rows", span)
        scratch = self.lw.brcb_scratch(rows)
        self.v(f"Brcb({scratch}, {src.text}, {(rows + 7) // 8}, BrcbRepeatParams(1, 8));", [src.text], [scratch])
        self.done(src)
        d = self.target(into)
        full, tail = divmod(cp, 64)
        calls = []
        if full:
            calls.append((f"Adds({d.text}[r * {cp}], {scratch}[r * 8], 0.0f, 64, {full}, "
                          "UnaryRepeatParams(1, 0, 8, 0));", [scratch], [d.text]))
        if tail:
            calls.append((f"Adds({d.text}[r * {cp} + {full * 64}], {scratch}[r * 8], 0.0f, {tail}, 1, "
                          "UnaryRepeatParams(1, 0, 8, 0));", [scratch], [d.text]))
        self.lw.out.append(_for_rows(rows, calls))
        return d

    def index_tile(self, var: T.Var) -> str:
        axis = next(i for i, v in enumerate(self.vars) if v is var)
        rows_t, cols_t = self.lw.index_tiles_for(self.layout)
        return (rows_t, cols_t)[axis] if self.layout.is_2d else cols_t

    def lw_gather_table(self, e: T.Load, elem: int | None = None) -> str:
        """A per-core int32 table of source byte offsets for an affine read of an on-chip tile (of `elem`-byte
        elements: the tile's own, or f32 for a byte tile gathered from its f32 conversion)."""
        src = self.lw.layouts[e.buffer.name]
        size = elem or CPP_SIZES[self.lw.allocs[e.buffer.name].ctype]
        idx = [self.subst(i) for i in e.indices]
        coef = {"1": 0, "i": 0, "j": 0}
        names = [v.name for v in self.vars]
        mult = [src.cols_pad, 1] if src.is_2d else [1]
        names = [v.name for v in self.vars]
        if any(linear_form(ix) is None or any(k != 1 and k[1] not in names for k in linear_form(ix))
               for ix in idx):  # floor division, modulo: computed per tile, in f32
            return self.dynamic_gather_table(e, idx, mult, size, src.count * size - size)
        for m, ix in zip(mult, idx, strict=True):
            form = linear_form(ix)
            if form is None or any(k != 1 and k[1] not in names for k in form):
                raise error(f"'{expr_str(e)}' reads a tile at an index the AscendC back end cannot make affine in "
                            "the loop variables", e.span)
            for k, c in form.items():
                slot = "1" if k == 1 else ("i" if k[1] == names[0] else "j")
                coef[slot] += c * m * size
        return self.lw.gather_table(self.layout, coef, src.count * size - size)


    def dynamic_gather_table(self, e: T.Load, idx, mult, size: int, max_bytes: int) -> str:
        """An int32 tile of the byte offsets of `e`'s elements, computed by the vector unit from the index expressions
        (`B[n, k // 2]`: integer division and modulo by constants are exact in f32), clamped into the source."""
        lw, n = self.lw, self.n
        name = "gather_dyn"  # one table at a time: each gather computes its own right before it
        if name not in lw.allocs:
            lw.add_alloc(Alloc(name, "VECCALC", "int32_t", lw.temp_count))
        work = f"{name}.ReinterpretCast<float>()"
        lw.v(f"Duplicate({work}, 0.0f, {n});", [], [name])
        for m, ix in zip(mult, idx, strict=True):
            v = self.eval(ix)
            if v.kind == "s":
                lw.v(f"Adds({work}, {work}, ({v.text}) * {float(m * size)!r}f, {n});", [name], [name])
            else:
                t = v if v.owned else self.target(None)
                lw.v(f"Muls({t.text}, {v.text}, {float(m * size)!r}f, {n});", [v.text], [t.text])
                lw.v(f"Add({work}, {work}, {t.text}, {n});", [name, t.text], [name])
                self.done(t)
        lw.v(f"Maxs({work}, {work}, 0.0f, {n});", [name], [name])
        lw.v(f"Mins({work}, {work}, {float(max_bytes)!r}f, {n});", [name], [name])
        lw.v(f"Cast({name}, {work}, RoundMode::CAST_RINT, {n});", [name], [name])
        return name

def _for_rows(rows: int, calls) -> object:
    from .program import Block, Call

    return Block(f"for (int64_t r = 0; r < {rows}; ++r)", [Call(t, "V", tuple(r), tuple(w)) for t, r, w in calls],
                 loop=True)


# ---------------------------------------------------------------- statements


def _global_box(loop: VecLoop, e) -> tuple[T.Region, str] | None:
    """The region of a global tensor a loop reads or writes at `base + loop var` (per dimension)."""
    buf = e.buffer
    idx = [loop.subst(i) for i in e.indices]

    def uses_loop_var(x) -> bool:
        return any(isinstance(y, T.Var) and any(y is w for w in loop.vars) for y in sub_exprs(x))

    # The dimensions indexed by the loop's variables, in order (`Q[b, t0 + row, h, d0 + col]`); the others are
    # fixed for the loop (extent 1).
    moving = [d for d, ix in enumerate(idx) if uses_loop_var(ix)]
    if len(moving) != len(loop.vars):
        return None
    starts = [fold(ix) for ix in idx]
    extents = [T.Const(D.I32, None, 1) for _ in idx]
    for d, var, n in zip(moving, loop.vars, loop.shape, strict=True):
        form = linear_form(idx[d])
        if form is None or form.get(("atom", var.name)) != 1:
            return None
        base = rewrite_expr(idx[d], lambda x, v=var: T.Const(v.dtype, None, 0) if x is v else None)
        if uses_loop_var(base):
            return None
        starts[d] = fold(base)
        extents[d] = T.Const(D.I32, None, n)
    region = T.Region(buf, starts, extents, e.span)
    return region, f"{buf.name}[{', '.join(expr_str(i) for i in idx)}]"


def _collect(loop: VecLoop, body: list[T.Stmt], loads, stores, guards) -> None:
    for s in body:
        if isinstance(s, T.Assign):
            loop.env[s.var.name] = loop.subst(s.value)
            for x in sub_exprs(loop.env[s.var.name]):
                if isinstance(x, T.Load) and x.buffer.scope == "global" and not loop.is_scalar_load(x):
                    loads.append(x)
        elif isinstance(s, T.Store):
            if s.buffer.scope == "var":
                raise error(f"'{s.buffer.name}' (alloc_var) is assigned inside a Parallel loop; the AscendC back end "
                            "keeps it on the scalar unit, which the loop's vector calls do not write", s.span)
            for x in sub_exprs(loop.subst(s.value)):
                if isinstance(x, T.Load) and x.buffer.scope == "global" and not loop.is_scalar_load(x):
                    loads.append(x)
            if s.buffer.scope == "global":
                stores.append(s)
        elif isinstance(s, T.If):
            guards.append(s)
            _collect(loop, s.then_body, loads, stores, guards)
            _collect(loop, s.else_body, loads, stores, guards)
        else:
            raise error("the AscendC back end lowers assignments, stores and ifs inside a Parallel loop", s.span)


def lower_parallel(lw, s: T.For) -> None:
    shape = []
    for e in s.extents:
        e = fold(e)
        if not isinstance(e, T.Const):
            raise error("a Parallel loop lowered to AscendC vector calls needs constant extents", s.span)
        shape.append(int(e.value))
    if len(shape) > 2:
        raise error("the AscendC back end lowers 1-D and 2-D Parallel loops", s.span)
    loop = VecLoop(lw, s.vars, tuple(shape), s.span)
    loads, stores, guards = [], [], []
    _collect(loop, s.body, loads, stores, guards)
    ins, outs = [], []
    for x in loads + stores:
        box = _global_box(loop, x)
        if box is None:
            if any(v.name.startswith("im2col_") for v in s.vars):  # the loop T.im2col expands to (build_tileops)
                raise error(f"T.im2col has no AscendC lowering: its window gather reads '{x.buffer.name}' at positions "
                            "computed from each tile row and column by division and remainder (the output pixel, "
                            "the window position), and the AscendC back end moves global memory only as boxes whose "
                            "indices are `start + loop variable`; build the kernel for sm80, sm90, gfx942 or webgpu, "
                            "which lower T.im2col, or gather the window with box copies (`T.copy(data[n, h, w, c], "
                            "tile)`) for ascend910b", x.span)
            raise error(f"'{x.buffer.name}' is accessed at an index that is not `start + loop variable`; the AscendC "
                        "back end copies a global tile in or out around the vector calls: copy the box the loop reads "
                        "into a tile with T.copy and index the tile (a tile is read at any index through Gather)",
                        x.span)
        region, key = box
        if key in loop.globals:
            continue
        lw.implicit += 1
        name = f"{x.buffer.name}_v{lw.implicit}"
        is_store = isinstance(x, T.Store)
        lw.layouts[name] = loop.layout
        from .program import Alloc

        lw.add_alloc(Alloc(name, "VECOUT" if is_store else "VECIN", _ctype(x.buffer.dtype), loop.n, 2, x.span,
                           x.buffer.name))
        loop.globals[key] = name
        (outs if is_store else ins).append((name, region, getattr(x, "kind", None)))
    loop.env.clear()
    for name, region, _ in ins:
        lw.copy_in(region, region.buffer, s.span, name=name)
    for name, _, _ in outs:
        lw.first_touch(name)
    _lower_body(loop, s.body, [])
    for var in loop.materialized.values():
        lw.release(var.name)
    for name, region, kind in outs:  # kind: a per-element atomic's (placement's AtomicStore), else None
        key = next(k for k, v in loop.globals.items() if v == name)
        lw.copy_out(region.buffer, region, s.span, name=name, atomic=kind, limits=loop.limits.get(key))
    for name, _, _ in ins:
        lw.emit(f"{name}_que.FreeTensor({name});", ordered=(name,))


def _ctype(dt) -> str:
    return ctype(dt)


def _is_bound_guard(loop: VecLoop, cond: T.Expr, body: list[T.Stmt]) -> bool:
    """`idx < N` where idx indexes a global store of `body` along a dimension of size N: the copy clips it."""
    cond = loop.subst(cond)
    if isinstance(cond, T.Binary) and cond.op == "and":
        return _is_bound_guard(loop, cond.a, body) and _is_bound_guard(loop, cond.b, body)
    if not isinstance(cond, T.Compare) or cond.op != "<":
        return False
    for s in body:
        if isinstance(s, T.Store) and s.buffer.scope == "global":
            for ix, dim in zip(s.indices, s.buffer.shape, strict=True):
                if expr_str(loop.subst(ix)) == expr_str(cond.a) and expr_str(dim) == expr_str(cond.b):
                    return True
    # `i < n` on a loop variable, n the scalar unit's (grouped_gemm's `i < actual_rows`): each store of the body
    # at `start + i` along one dimension writes its first n elements there, a limit of its copy's box.
    var = next((v for v in loop.vars if cond.a is v), None)
    if var is None or loop.is_vec(cond.b):
        return False
    limits = []
    for s in body:
        if not (isinstance(s, T.Store) and s.buffer.scope == "global"):
            return False
        key = f"{s.buffer.name}[{', '.join(expr_str(loop.subst(i)) for i in s.indices)}]"
        dims = [d for d, ix in enumerate(s.indices)
                if (linear_form(loop.subst(ix)) or {}).get(("atom", var.name)) == 1]
        if len(dims) != 1:
            return False
        limits.append((key, dims[0]))
    for key, d in limits:
        loop.limits.setdefault(key, {})[d] = cpp(cond.b)
    return True


def _lower_body(loop: VecLoop, body: list[T.Stmt], guards: list[T.Expr]) -> None:
    for s in body:
        if isinstance(s, T.Assign):
            value = loop.subst(s.value)
            loop.materialized.pop(s.var.name, None)
            loop.env[s.var.name] = value
            if any(isinstance(x, T.Load) or (isinstance(x, T.Var) and x.kind == TILE_VALUE)
                   for x in sub_exprs(value)):
                got = loop.tile(loop.eval(value))
                if not got.owned:  # a tile the loop may overwrite: take a copy
                    t = loop.lw.temp()
                    loop.v(f"Adds({t}, {got.text}, 0.0f, {loop.n});", [got.text], [t])
                    got = Val("t", t, True)
                loop.materialized[s.var.name] = T.Var(D.F32, s.span, got.text, TILE_VALUE)
        elif isinstance(s, T.If):
            if s.else_body or not _is_bound_guard(loop, s.cond, s.then_body):
                inner = guards + [s.cond]
                _lower_body(loop, s.then_body, inner)
                if s.else_body:
                    _lower_body(loop, s.else_body, guards + [T.Unary(D.BOOL, s.span, "not", s.cond)])
            else:
                _lower_body(loop, s.then_body, guards)
        elif isinstance(s, T.Store):
            _store(loop, s, guards)


def _store(loop: VecLoop, s: T.Store, guards: list[T.Expr]) -> None:
    lw = loop.lw
    if s.buffer.scope == "global":
        if guards:
            raise error("a guarded global store that is not a bounds check has no AscendC lowering", s.span)
        key = f"{s.buffer.name}[{', '.join(expr_str(loop.subst(i)) for i in s.indices)}]"
        name = loop.globals[key]
    else:
        name = s.buffer.name
        probe = T.Load(s.buffer.dtype, s.span, s.buffer, s.indices)
        kind = loop.index_kind(probe)
        one_row = (kind == "col" and loop.layout.is_2d and loop.layout.rows == 1 and name in lw.layouts
                   and not lw.layouts[name].is_2d and lw.layouts[name].rows == loop.shape[1])
        if kind != "same" and not one_row:  # (a loop of one row stores a 1-D tile at its column: the same offsets)
            raise error(f"the store to '{name}' is not at the loop's own index; the AscendC back end writes whole "
                        "tiles", s.span)
        lw.first_touch(name)
    a = lw.allocs[name]
    value = s.value
    for g in reversed(guards):
        value = T.Select(value.dtype, s.span, g, value, T.Load(s.buffer.dtype, s.span, s.buffer, s.indices))
    value = loop.subst(value)
    n = loop.n
    if a.ctype == "float":
        got = loop.eval(value, into=name)
        if got.kind == "s":
            loop.v(f"Duplicate({name}, {got.text}, {n});", writes=[name])
        elif got.text != name:
            loop.v(f"Adds({name}, {got.text}, 0.0f, {n});", [got.text], [name])
            loop.done(got)
        return
    plain = value.value if isinstance(value, T.Cast) and value.dtype == value.value.dtype else value
    if isinstance(plain, T.Load) and plain.buffer.scope != "global" and lw.allocs[plain.buffer.name].ctype == a.ctype:
        kind = loop.index_kind(plain)
        if kind == "same":
            loop.v(f"Adds({name}.ReinterpretCast<int16_t>(), {plain.buffer.name}.ReinterpretCast<int16_t>(), "
                   f"int16_t(0), {n * CPP_SIZES[a.ctype] // 2});", [plain.buffer.name], [name])
            return
        if kind == "gather" and CPP_SIZES[a.ctype] > 1:
            table = loop.lw_gather_table(plain)
            loop.v(f"Gather({name}, {plain.buffer.name}, {table}.ReinterpretCast<uint32_t>(), 0, {n});",
                   [plain.buffer.name, table], [name])
            return
    got = loop.tile(loop.eval(value))
    lw.from_float(name, a.ctype, got.text, n, s.buffer.dtype.name)
    loop.done(got)


def lower_tile_assign(lw, s: T.Copy) -> None:
    """An on-chip to on-chip copy (with a cast) is a Parallel store over the destination tile."""
    for r in (s.src, s.dst):
        if any(not (isinstance(x, T.Const) and x.value == 0) for x in r.starts) or \
                r.const_extents != r.buffer.const_shape:
            raise error("the AscendC back end copies whole on-chip tiles", s.span)
    shape = s.dst.buffer.const_shape
    if s.src.buffer.const_shape != shape:
        raise error("an on-chip copy between tiles of different shapes", s.span)
    vars_ = [T.Var(D.I32, s.span, f"_c{i}", "loop") for i in range(len(shape))]
    loop = VecLoop(lw, vars_, shape, s.span)
    store = T.Store(s.span, s.dst.buffer, list(vars_), T.Load(s.src.buffer.dtype, s.span, s.src.buffer, list(vars_)))
    _store(loop, store, [])


def lower_reduce(lw, s: T.Reduce) -> None:
    src, dst = s.src.buffer, s.dst.buffer
    shape = src.const_shape
    if shape is None or len(shape) != 2 or s.dim not in (1, -1):
        raise error("the AscendC back end reduces 2-D tiles along their rows (dim=1)", s.span)
    lay = lw.layouts[src.name]
    rows, cols, cp = lay.rows, lay.cols, lay.cols_pad
    if rows > 255 or cp // 8 > 255:
        raise error(f"a {rows}x{cols} reduction exceeds the vector unit's repeat limits (255 rows, 2040 columns)",
                    s.span)
    lw.first_touch(dst.name)
    loop = VecLoop(lw, [], shape, s.span)
    source = loop.as_float(src.name, lw.allocs[src.name].ctype, lay.count, None)
    x = source.text
    if s.kind in ("abssum", "absmax"):
        t = lw.temp()
        lw.v(f"Abs({t}, {x}, {lay.count});", [x], [t])
        loop.done(source)
        source = Val("t", t, True)
        x = t
    combine = {"sum": "Add", "abssum": "Add", "max": "Max", "absmax": "Max", "min": "Min"}[s.kind]
    whole = {"Add": "WholeReduceSum", "Max": "WholeReduceMax", "Min": "WholeReduceMin"}[combine]
    order = ", ReduceOrder::ORDER_ONLY_VALUE" if combine != "Add" else ""
    da = lw.allocs[dst.name]
    direct = s.clear and da.ctype == "float"
    out = dst.name if direct else lw.temp()
    if cols <= 64:
        lw.v(f"{whole}({out}, {x}, {cols}, {rows}, 1, 1, {cp // 8}{order});", [x], [out])
    else:
        fold_t = lw.temp()
        lw.v(f"Adds({fold_t}, {x}, 0.0f, 64, {rows}, UnaryRepeatParams(1, 1, 8, {cp // 8}));", [x], [fold_t])
        for c in range(1, (cols + 63) // 64):
            mask = min(64, cols - c * 64)
            lw.v(f"{combine}({fold_t}, {fold_t}, {x}[{c * 64}], {mask}, {rows}, "
                 f"BinaryRepeatParams(1, 1, 1, 8, 8, {cp // 8}));", [fold_t, x], [fold_t])
        lw.v(f"{whole}({out}, {fold_t}, 64, {rows}, 1, 1, 8{order});", [fold_t], [out])
        lw.release(fold_t)
    loop.done(source)
    if direct:
        return
    n = da.count
    if not s.clear:
        acc = loop.as_float(dst.name, da.ctype, n, None)
        lw.v(f"{combine}({out}, {out}, {acc.text}, {n});", [out, acc.text], [out])
        loop.done(acc)
    if da.ctype == "float":
        lw.v(f"Adds({dst.name}, {out}, 0.0f, {n});", [out], [dst.name])
    else:
        lw.from_float(dst.name, da.ctype, out, n, dst.dtype.name)
    lw.release(out)
