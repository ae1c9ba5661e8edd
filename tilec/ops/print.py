"""print(value, msg=): debug output. Reads a region value. Lowering: a scalar is printed by thread 0; a
buffer's print runs in the interpreter only."""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import compare
from ..ir.layout import (
    c,
)
from .schema import extents


def lower(cx, s: T.Print) -> None:
    if isinstance(s.value, T.Region):
        cx.emit(S.SComment(s.span, f"print of buffer '{s.value.buffer.name}' runs in the interpreter only"))
        return
    v = cx.lx(s.value)
    cx.emit(S.SIf(s.span, compare("==", cx.tid, c(0)), [S.call(s.span, "print", [v], label=s.label)]))


def reads(s: T.Print) -> list[T.Region]:
    return [s.value] if isinstance(s.value, T.Region) else []


def writes(s: T.Print) -> list[T.Region]:
    return []


def check(s: T.Print, rep: Reporter) -> None:
    if isinstance(s.value, T.Region):
        extents(s.value, rep, s.span)


def interpret(block, s: T.Print) -> None:
    import numpy as np

    value = block.read_region(s.value) if isinstance(s.value, T.Region) else block.eval(s.value, None)
    label = f"{s.label}: " if s.label else ""
    where = f"[block {block.block_idx}] "
    with np.printoptions(precision=4, suppress=True, threshold=64, edgeitems=3):
        print(f"{where}{label}{np.asarray(value)}", file=block.interp.stdout)
