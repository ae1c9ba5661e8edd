"""print(value, msg=): debug output. Reads a region value. Lowering: a scalar is printed by thread 0; a
buffer's print runs in the interpreter only."""

from __future__ import annotations

from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import compare
from ..ir.intrinsics import call
from ..ir.layout import (
    c,
)


def lower(cx, s: T.Print) -> None:
    if isinstance(s.value, T.Region):
        cx.emit(S.SComment(s.span, f"print of buffer '{s.value.buffer.name}' runs in the interpreter only"))
        return
    v = cx.lx(s.value)
    cx.emit(S.SIf(s.span, compare("==", cx.tid, c(0)), [call(s.span, "print", [v], label=s.label)]))


def reads(s: T.Print) -> list[T.Region]:
    return [s.value] if isinstance(s.value, T.Region) else []


def writes(s: T.Print) -> list[T.Region]:
    return []
