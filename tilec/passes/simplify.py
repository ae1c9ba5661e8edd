"""simplify — fold SIMT expressions, drop predicates that are always true, remove dead values.

Assumes: an SModule from lower-to-simt.
Guarantees: every expression is constant-folded; `if (true)` / `if (false)` are replaced by the
branch taken; loops with a zero trip count are removed; scalar declarations whose value is never
read (and has no side effect) are removed, so generated code has no dead variables; a register stored
with its own value (`acc[r] = acc[r]`: a mask that partition-boundaries proved a no-op) is removed, and
so is a loop left with nothing in it. (Lowering already omits bounds checks that constant extents prove
in range.)
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import Reporter
from ..ir import simt as S
from ..ir import tile as T
from ..ir.fold import fold
from ..ir.visit import sub_exprs
from ..targets.registry import Target

NAME = "simplify"


def _x(e):
    if isinstance(e, S.Ref | S.AddrOf):
        return dataclasses.replace(e, index=_x(e.index))
    if isinstance(e, S.Intrinsic):
        return dataclasses.replace(e, args=[_x(a) for a in e.args])
    return fold(e) if e is not None else None


def _body(body: list[S.SStmt]) -> list[S.SStmt]:
    out: list[S.SStmt] = []
    for s in body:
        if isinstance(s, S.SIf):
            cond = _x(s.cond)
            if isinstance(cond, T.Const):
                out.extend(_body(s.then_body if cond.value else s.else_body))
                continue
            out.append(dataclasses.replace(s, cond=cond, then_body=_body(s.then_body), else_body=_body(s.else_body)))
        elif isinstance(s, S.SWhile):
            out.append(dataclasses.replace(s, cond=_x(s.cond), body=_body(s.body)))
        elif isinstance(s, S.SFor):
            ext = _x(s.extent)
            if isinstance(ext, T.Const) and int(ext.value) <= 0:
                continue
            out.append(dataclasses.replace(s, begin=_x(s.begin), extent=ext, body=_body(s.body)))
        elif isinstance(s, S.Declare):
            out.append(dataclasses.replace(s, value=_x(s.value)))
        elif isinstance(s, S.SStore):
            s = dataclasses.replace(s, index=_x(s.index), value=_x(s.value))
            if not _stores_its_own_value(s):
                out.append(s)
        elif isinstance(s, S.SAssign):
            out.append(dataclasses.replace(s, value=_x(s.value)))
        elif isinstance(s, S.SCall):
            out.append(dataclasses.replace(s, args=[_x(a) for a in s.args]))
        else:
            out.append(s)
    return out


def _stores_its_own_value(s: S.SStore) -> bool:
    """`r[i] = r[i]` on a register array, the index the same loop variable or constant on both sides."""
    v = s.value
    if not (isinstance(v, S.Ref) and v.buffer is s.buffer and s.buffer.scope == "local"):
        return False
    a, b = s.index, v.index
    return a is b or (isinstance(a, T.Const) and isinstance(b, T.Const) and a.value == b.value)


def _used_vars(body: list[S.SStmt], out: set[T.Var]) -> None:
    def expr(e) -> None:
        if e is None:
            return
        for x in sub_exprs(e):
            if isinstance(x, T.Var):
                out.add(x)

    for s in body:
        if isinstance(s, S.Declare):
            expr(s.value)
        elif isinstance(s, S.DeclareArray):
            expr(s.init)
        elif isinstance(s, S.SStore):
            expr(s.index)
            expr(s.value)
        elif isinstance(s, S.SAssign):
            out.add(s.var)
            expr(s.value)
        elif isinstance(s, S.SFor):
            expr(s.begin)
            expr(s.extent)
            expr(s.step)
            _used_vars(s.body, out)
        elif isinstance(s, S.SWhile):
            expr(s.cond)
            _used_vars(s.body, out)
        elif isinstance(s, S.SIf):
            expr(s.cond)
            _used_vars(s.then_body, out)
            _used_vars(s.else_body, out)
        elif isinstance(s, S.SCall):
            for a in s.args:
                expr(a)


def _drop_dead(body: list[S.SStmt]) -> list[S.SStmt]:
    """The block without the declarations that no later statement of it mentions (a declaration is visible in its
    own block alone, so the interior and boundary copies of a loop that partition-boundaries made, which share
    their variables, are judged apart), and without the loops left empty."""
    out: list[S.SStmt] = []
    mentioned: set[T.Var] = set()
    for s in reversed(body):
        if isinstance(s, S.Declare) and s.var not in mentioned:
            continue  # values are pure expressions: dropping the declaration changes nothing
        if isinstance(s, S.SFor):
            s = dataclasses.replace(s, body=_drop_dead(s.body))
            if not s.body:
                continue  # nothing left to repeat (its bounds are pure expressions)
        elif isinstance(s, S.SWhile):
            s = dataclasses.replace(s, body=_drop_dead(s.body))
        elif isinstance(s, S.SIf):
            s = dataclasses.replace(s, then_body=_drop_dead(s.then_body), else_body=_drop_dead(s.else_body))
        out.append(s)
        _used_vars([s], mentioned)
    return out[::-1]


def run(module: S.SModule, rep: Reporter, target: Target) -> S.SModule:
    for k in module.kernels:
        k.body = _drop_dead(_body(k.body))
    return module

