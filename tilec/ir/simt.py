"""SIMT IR: per-thread code for one thread block.

Lowering turns Tile IR into this: flat buffers (global pointers, shared arrays, per-thread
register arrays), scalar registers, loops, predicated accesses, barriers and intrinsics (matrix
instructions, async copies, shuffles). The CUDA, HIP and WGSL code generators all print from it.

Scalar expressions reuse the Tile IR expression nodes (Const, Var, Binary, Compare, Unary, Select,
Call, Cast); the nodes below add what exists only per thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Span
from . import dtypes as D
from .intrinsics import lookup as intrinsic
from .intrinsics import parse as parse_intrinsic
from .tile import Expr, Var
from .visit import register_children


@dataclass(eq=False)
class SBuffer:
    """A flat array: a global tensor's pointer, a shared-memory array or a register array."""

    name: str
    dtype: D.DType
    scope: str  # global | shared | local
    size: int | None = None  # elements; None for global tensors
    const: bool = False  # a read-only global tensor
    offset: int | None = None  # byte offset into dynamic shared memory (storage planning)
    align: int = 128  # byte alignment of a shared buffer (1024: a TMA/wgmma 128-byte swizzle pattern)
    # a buffer viewing another's bytes with its own element type: a shared buffer (same offset), or a global
    # pointer to a tensor's memory (a view, `T.reshape`: declared by a DeclareArray, a cast of the tensor's pointer)
    alias_of: SBuffer | None = None
    origin: str = ""  # the Tile IR buffer it implements, for messages
    span: Span | None = None  # where it was made (a view: the view's statement), for messages


@dataclass(eq=False)
class ThreadIdx(Expr):
    pass


@dataclass(eq=False)
class BlockIdx(Expr):
    axis: int


@dataclass(eq=False)
class Ref(Expr):
    """Load `buffer[index]`."""

    buffer: SBuffer
    index: Expr


@dataclass(eq=False)
class AddrOf(Expr):
    """The address of `buffer[index]` (for intrinsics that take pointers)."""

    buffer: SBuffer
    index: Expr


@dataclass(eq=False)
class Intrinsic(Expr):
    """A value-producing target intrinsic: shfl_xor, pack_half2, ..."""

    name: str
    args: list[Expr]


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class SStmt:
    span: Span | None


@dataclass(eq=False)
class Declare(SStmt):
    var: Var
    value: Expr | None


@dataclass(eq=False)
class DeclareArray(SStmt):
    buffer: SBuffer
    init: Expr | None = None


@dataclass(eq=False)
class SStore(SStmt):
    buffer: SBuffer
    index: Expr
    value: Expr


@dataclass(eq=False)
class SAssign(SStmt):
    var: Var
    value: Expr


@dataclass(eq=False)
class SFor(SStmt):
    var: Var
    begin: Expr
    extent: Expr
    body: list[SStmt]
    unroll: bool = False
    step: Expr | None = None
    keep_rolled: bool = False  # a cold path: unrolled a little (CUDA/HIP), not in full


@dataclass(eq=False)
class SWhile(SStmt):
    """`while (cond) body`: the condition is evaluated before every iteration (a `while` of the source)."""

    cond: Expr
    body: list[SStmt]


@dataclass(eq=False)
class SIf(SStmt):
    cond: Expr
    then_body: list[SStmt]
    else_body: list[SStmt] = field(default_factory=list)
    concurrent: bool = False  # the branches' threads run concurrently, synchronising through mbarriers
    # concurrent only: the else branch's threads are this many equal groups (consecutive thread ranges) that run it
    # concurrently, each on its own data, synchronising through mbarriers and named barriers (a ping-pong kernel's
    # consumer warpgroups); printed as one branch
    groups: int = 1


@dataclass(eq=False)
class Barrier(SStmt):
    threads: int | None = None  # a named barrier for the first `threads` threads (warp specialization)
    # a named barrier of this id (an expression: one id per consumer warpgroup of a ping-pong kernel) for the
    # `threads` threads that reach it; None: id 1, the first `threads` threads
    index: Expr | None = None


@dataclass(eq=False)
class SCall(SStmt):
    """An intrinsic statement (tilec/ir/intrinsics.py): mma, ldmatrix, cp.async, atomics, printf...

    `op` names the intrinsic's definition and `params` its typed compile-time parameters; `name` is the
    printed key (`load_vec8`). Built through intrinsics.call; a call built by name alone (a test) gets its
    op and params parsed from the name."""

    name: str
    args: list[Expr]
    op: str = ""
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.op:
            self.op, self.params = parse_intrinsic(self.name)


@dataclass(eq=False)
class SComment(SStmt):
    text: str


@dataclass(eq=False)
class SKernel:
    name: str
    params: list[SBuffer | Var]  # pointers and scalars, in the signature's order
    size_vars: list[Var]  # runtime sizes, passed after the tensor params
    grid: list[Expr]  # in terms of size vars
    threads: int
    shared: list[SBuffer]  # placed in dynamic shared memory
    shared_bytes: int
    body: list[SStmt]
    span: Span | None
    attrs: dict[str, object] = field(default_factory=dict)
    threads_span: Span | None = None  # the `threads=` argument (Kernel.threads_span)

    @property
    def disabled(self) -> frozenset[str]:
        """Features turned off for this kernel (the Tile kernel's, which lower-to-simt copies): the SIMT passes'."""
        return frozenset(self.attrs.get("disabled", ()))


@dataclass(eq=False)
class SModule:
    kernels: list[SKernel]


# The one expression walker (tilec/ir/visit.py: sub_exprs) reaches inside SIMT IR's expression nodes.
register_children(Ref, lambda e: (e.index,))
register_children(AddrOf, lambda e: (e.index,))
register_children(Intrinsic, lambda e: e.args)


def call(span: Span | None, op: str, args: list[Expr], **params) -> SCall:
    """The SCall of intrinsic `op` (tilec/ir/intrinsics.py) with these typed parameters."""
    d = intrinsic(op)
    if not d.statement:
        raise TypeError(f"intrinsic {op} is an expression, not a statement")
    d.check(params)
    return SCall(span, d.name(params), list(args), op=op, params=params)


def value(dtype: D.DType, span: Span | None, op: str, args: list[Expr]) -> Intrinsic:
    """The expression intrinsic `op` (S.Intrinsic)."""
    if intrinsic(op).statement:
        raise TypeError(f"intrinsic {op} is a statement, not an expression")
    return Intrinsic(dtype, span, op, list(args))


def walk_simt(body: list[SStmt]):
    """Every statement of a SIMT body, pre-order, loop and branch bodies included."""
    for s in body:
        yield s
        if isinstance(s, SFor):
            yield from walk_simt(s.body)
        elif isinstance(s, SIf):
            yield from walk_simt(s.then_body)
            yield from walk_simt(s.else_body)
