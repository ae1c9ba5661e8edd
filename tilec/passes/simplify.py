"""simplify — fold SIMT expressions and drop predicates that are always true.

Assumes: an SModule from lower-to-simt.
Guarantees: every expression is constant-folded; `if (true)` / `if (false)` are replaced by the
branch taken; loops with a zero trip count are removed. (Lowering already omits bounds checks
that constant extents prove in range.)
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import Reporter
from ..ir import simt as S
from ..ir import tile as T
from ..ir.fold import fold
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
        elif isinstance(s, S.SFor):
            ext = _x(s.extent)
            if isinstance(ext, T.Const) and int(ext.value) <= 0:
                continue
            out.append(dataclasses.replace(s, begin=_x(s.begin), extent=ext, body=_body(s.body)))
        elif isinstance(s, S.Declare):
            out.append(dataclasses.replace(s, value=_x(s.value)))
        elif isinstance(s, S.SStore):
            out.append(dataclasses.replace(s, index=_x(s.index), value=_x(s.value)))
        elif isinstance(s, S.SAssign):
            out.append(dataclasses.replace(s, value=_x(s.value)))
        elif isinstance(s, S.SCall):
            out.append(dataclasses.replace(s, args=[_x(a) for a in s.args]))
        else:
            out.append(s)
    return out


def run(module: S.SModule, rep: Reporter, target: Target) -> S.SModule:
    for k in module.kernels:
        k.body = _body(k.body)
    return module
