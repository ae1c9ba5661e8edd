"""check_tile_ops — operand shapes, dtypes and scopes of every tile operation.

Assumes: specialize has run (shapes and tile extents are compile-time integers where they must be).
Guarantees: every Copy moves between regions of equal (squeezed) extent; every Gemm has 2-D
operands (2-D once unit dims are dropped, and none of M, N, K is 1) with matching M, N, K in the
scopes a matrix unit can read (A, B shared or fragment; C fragment or local) and a supported
accumulator; every Reduce's destination has the source's shape
without the reduced dimension; every region of an on-chip buffer lies inside it; tile extents of
global regions are compile-time integers. Errors point at the operation's span.
"""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import tile as T
from ..ir.visit import walk_stmts
from ..ops.registry import op_module

NAME = "check-tile-ops"


def run(module: T.Module, rep: Reporter) -> T.Module:
    for k in module.kernels:
        for s in walk_stmts(k.body):
            op = op_module(s)
            if op is not None:  # each tile op checks itself (tilec/ops/<op>.py: check)
                op.check(s, rep)
    rep.check()
    return module
