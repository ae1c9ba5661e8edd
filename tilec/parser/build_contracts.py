"""Contracts: `assert cond, "message"` in a kernel function states a condition on its sizes (a mixin of the
Builder).

`assert K % 8 == 0, "K must be a multiple of 8"` at the function's level (or in a `with T.Kernel` block, before
any statement depends on it) is decided at compile time where the consts settle it (a false one is an error at
the assert) and otherwise becomes one or more of the kernel's `launch_checks` (the manifest's conditions on the
sizes, which the interpreter, tilec.runtime and the C launchers test before every launch, as for views). A
condition is comparisons of size formulas joined by `and`; `<`, `>`, `>=` are rewritten to `<=` (the launch
checks' two operators are `==` and `<=`).
"""

from __future__ import annotations

from ..diagnostics import Span
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import fold
from ..ir.formula import formula
from ..ir.visit import sub_exprs
from . import ast as A
from .build_common import _Scope


class ContractBuilder:
    def contract(self, s: A.AssertStmt, scope: _Scope) -> list[dict]:
        """The launch checks an assert states (none when the consts prove it); a refuted one is an error."""
        message = None
        if s.message is not None:
            if not isinstance(s.message, A.String):
                raise self.fail("an assert's message is a string literal", s.message.span)
            message = s.message.value
        checks: list[dict] = []
        for part in _conjuncts(s.cond):
            if not isinstance(part, A.CompareOp) or part.op == "!=":
                raise self.fail("an assert states comparisons of sizes and consts (==, <=, <, >=, >) joined by "
                                "`and`; write `or`, `not` and `!=` as separate asserts of what must hold",
                                part.span)
            a, b = (fold(self.int_expr(x, scope)) for x in (part.left, part.right))
            for side, node in ((a, part.left), (b, part.right)):
                stray = [x for x in sub_exprs(side) if isinstance(x, T.Var) and x.kind != "size"]
                if stray:
                    raise self.fail(f"an assert states a condition on the kernel's sizes and consts, checked before "
                                    f"the launch; '{stray[0].name}' is not one of them", node.span)
            lhs, op, rhs = _normalized(part.op, a, b, part.span)
            decided = fold(T.Compare(D.BOOL, part.span, "==" if op == "==" else "<=", lhs, rhs))
            if isinstance(decided, T.Const):
                if not decided.value:
                    raise self.fail(f"assertion fails for these consts: {message or _text(part.op, a, b)}", part.span)
                continue
            try:
                check = {"lhs": formula(lhs), "op": op, "rhs": formula(rhs)}
            except ValueError:
                raise self.fail("an assert compares size formulas: integers, consts, sizes, + - * // % and "
                                "ceildiv/min/max", part.span) from None
            check["message"] = message or f"assert {_text(part.op, a, b)}"
            checks.append(check)
        return checks

    def add_contract(self, checks: list[dict]) -> None:
        """The checks into the kernel's launch checks (once each)."""
        into = self.kernel_attrs.setdefault("launch_checks", [])
        for c in checks:
            if not any(x["lhs"] == c["lhs"] and x["op"] == c["op"] and x["rhs"] == c["rhs"] for x in into):
                into.append(dict(c))


def _conjuncts(node: A.Node) -> list[A.Node]:
    if isinstance(node, A.BinOp) and node.op == "and":
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _normalized(op: str, a: T.Expr, b: T.Expr, span: Span | None) -> tuple[T.Expr, str, T.Expr]:
    one = T.Const(D.I32, span, 1)
    if op == "==" or op == "<=":
        return a, op, b
    if op == ">=":
        return b, "<=", a
    if op == "<":
        return fold(T.Binary(a.dtype, span, "+", a, one)), "<=", b
    return fold(T.Binary(b.dtype, span, "+", b, one)), "<=", a  # a > b


def _text(op: str, a: T.Expr, b: T.Expr) -> str:
    def show(e: T.Expr) -> str:
        try:
            return formula(e).removeprefix("(").removesuffix(")")
        except ValueError:
            return "..."

    return f"{show(a)} {op} {show(b)}"
