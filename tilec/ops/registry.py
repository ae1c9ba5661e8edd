"""Which tile op a Tile IR statement is, and what it reads and writes.

Each tile op has a home, tilec/ops/<op>.py, owning what the op reads and writes (`reads(s)`, `writes(s)`:
regions) and how the SIMT targets lower it (`lower(cx, s)`, talking to the lowering context `cx` only --
tilec/passes/lowering_extension.py says what the context offers). The instruction families of gemm are
implementations registered in tilec/ops/gemm_impl.py: the generic gemm_fma here, the back ends' own (mma.sync,
wgmma, MFMA) from their folders. Generic passes ask this registry instead of testing statement types, and the
parser asks it for the homes that build their op from the source's call (`build(b, call, scope)`).
"""

from __future__ import annotations

from ..ir import tile as T
from . import atomic, copy, cumsum, fill, gemm, reduce
from . import gemm_fma as _gemm_fma  # noqa: F401 -- the generic gemm implementation registers itself
from . import print as print_op

OPS = {T.Copy: copy, T.Fill: fill, T.Gemm: gemm, T.Reduce: reduce, T.Atomic: atomic, T.Print: print_op,
       T.CumSum: cumsum}
# the ops whose home builds them from a call (`build(b, call, scope)`, b the parser's builder), by the name a
# source calls them by: their IR keyword (T.Stmt.keyword)
BUILDERS = {cls.keyword: op for cls, op in OPS.items() if cls.keyword is not None and hasattr(op, "build")}


def builder(name: str):
    """The home module of the tile op a source calls `name` (T.name(...)), when it builds the op, or None."""
    return BUILDERS.get(name)


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
