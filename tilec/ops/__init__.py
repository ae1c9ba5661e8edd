"""A home per tile op: tilec/ops/<op>.py owns what the op reads and writes (`reads(s)`, `writes(s)`: regions)
and how the SIMT targets lower it (`lower(cx, s)`, talking to the lowering context `cx` only -- see
tilec/passes/lowering_extension.py for what the context offers). Instruction families of an op are
implementation modules registered with it (gemm: gemm_fma, gemm_mma, gemm_mfma; sm90's wgmma through the
target's LoweringExtension). The generic passes ask this registry instead of testing statement types.
"""

from __future__ import annotations

from ..ir import tile as T
from . import atomic, copy, fill, gemm, gemm_fma, gemm_mfma, gemm_mma, reduce  # noqa: F401 (registration)
from . import print as print_op

OPS = {T.Copy: copy, T.Fill: fill, T.Gemm: gemm, T.Reduce: reduce, T.Atomic: atomic, T.Print: print_op}


def op_module(s: T.Stmt):
    """The module of the tile op s, or None (a scalar statement, a loop, a hint)."""
    return OPS.get(type(s))


def reads(s: T.Stmt) -> list[T.Region]:
    """The regions the tile op s reads (none for other statements)."""
    op = OPS.get(type(s))
    return op.reads(s) if op is not None else []


def writes(s: T.Stmt) -> list[T.Region]:
    """The regions the tile op s writes (none for other statements)."""
    op = OPS.get(type(s))
    return op.writes(s) if op is not None else []
