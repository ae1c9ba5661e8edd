"""`break` and `continue`, rewritten into flags before a loop body is built.

No back end needs a jump statement: a `break` sets a flag that the loop tests before each iteration, a
`continue` sets a flag that is cleared at the start of each iteration, and the statements that follow
a jump (in its block and in the blocks around it, up to the loop) run only while neither flag is set.
Every back end already prints locals and ifs, so each one runs the rewritten loop; a `for` loop whose
`break` fired runs its remaining iterations as empty ones (the flag is tested, nothing else).
"""

from __future__ import annotations

from ..diagnostics import Span
from . import ast as A


def loop_jumps(body: list[A.Node]) -> list[A.Node]:
    """The break and continue statements of one loop body (not those of the loops nested in it)."""
    found: list[A.Node] = []
    stack = list(body)
    while stack:
        s = stack.pop()
        if isinstance(s, A.BreakStmt | A.ContinueStmt):
            found.append(s)
        elif isinstance(s, A.IfStmt):
            stack.extend(s.body + s.orelse)
    return sorted(found, key=lambda s: (s.span.line, s.span.col))


def without_jumps(body: list[A.Node], broke: str | None, skipped: str | None) -> list[A.Node]:
    """`body` with each jump replaced by setting its flag (`broke`: the loop's break flag, `skipped`: its
    continue flag, names bound by the caller) and what follows a jump guarded by `not (broke or skipped)`."""
    out: list[A.Node] = []
    for i, s in enumerate(body):
        if isinstance(s, A.BreakStmt | A.ContinueStmt):
            flag = broke if isinstance(s, A.BreakStmt) else skipped
            assert flag is not None
            out.append(A.AssignStmt(s.span, A.Name(s.span, flag), A.Name(s.span, "True")))
            return out  # the rest of the block is unreachable
        if isinstance(s, A.IfStmt) and loop_jumps([s]):
            out.append(A.IfStmt(s.span, s.cond, without_jumps(s.body, broke, skipped),
                                without_jumps(s.orelse, broke, skipped)))
            rest = body[i + 1:]
            if rest:
                out.append(A.IfStmt(rest[0].span, _neither(rest[0].span, broke, skipped),
                                    without_jumps(rest, broke, skipped), []))
            return out
        out.append(s)
    return out


def _neither(span: Span, broke: str | None, skipped: str | None) -> A.Node:
    flags = [A.Name(span, f) for f in (broke, skipped) if f is not None]
    either = flags[0] if len(flags) == 1 else A.BinOp(span, "or", flags[0], flags[1])
    return A.UnaryOp(span, "not", either)


def not_broken(span: Span, broke: str, cond: A.Node | None = None) -> A.Node:
    """`not broke` (and `cond` after it, evaluated only while the loop has not been left)."""
    test = A.UnaryOp(span, "not", A.Name(span, broke))
    return test if cond is None else A.BinOp(span, "and", test, cond)
