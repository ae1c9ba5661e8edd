"""Tile IR: what the user wrote, resolved and typed, target-neutral.

Expressions are scalar and typed. Buffers have a scope (global tensors, shared memory, block-wide
fragments, per-thread locals, single variables). Tile operations (copy, gemm, reduce, ...) act on
rectangular regions of buffers and are executed by the whole block. Every node carries the span
of the source it came from, so that any later stage can point at the user's line.

Nodes compare by identity (eq=False): two uses of one variable are the same object.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

from ..diagnostics import Span
from .dtypes import DType

# ---------------------------------------------------------------- expressions


@dataclass(eq=False)
class Expr:
    dtype: DType
    span: Span | None


@dataclass(eq=False)
class Const(Expr):
    value: int | float | bool


@dataclass(eq=False)
class Var(Expr):
    name: str
    kind: str  # "size" (runtime dim), "block", "loop", "local", "param" (scalar argument)


@dataclass(eq=False)
class Binary(Expr):
    op: str  # + - * / // % & | ^ << >> and or
    a: Expr
    b: Expr


@dataclass(eq=False)
class Compare(Expr):
    op: str  # < <= > >= == !=
    a: Expr
    b: Expr


@dataclass(eq=False)
class Unary(Expr):
    op: str  # - not ~
    a: Expr


@dataclass(eq=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr


@dataclass(eq=False)
class Call(Expr):
    func: str  # exp exp2 log log2 sqrt rsqrt abs tanh sin cos floor ceil max min pow sigmoid
    args: list[Expr]


@dataclass(eq=False)
class Cast(Expr):
    value: Expr


@dataclass(eq=False)
class Load(Expr):
    buffer: Buffer
    indices: list[Expr]


# ---------------------------------------------------------------- buffers and regions

SCOPES = ("global", "shared", "fragment", "local", "var")


@dataclass(eq=False)
class Buffer:
    name: str
    dtype: DType
    shape: list[Expr]
    scope: str
    span: Span | None
    is_output: bool = False  # for global tensors: declared `out` (a view: its storage's)
    uid: int = field(default=0, kw_only=True)  # stable within its kernel (number_ops); 0: not numbered
    # A view (`T.Tensor(shape, dtype, X.data)`, `T.reshape`, `T.view`): the buffer whose storage this one reads
    # and writes, row-major, with its own shape and dtype. Declared by an `Alloc` of the view.
    view_of: Buffer | None = field(default=None, kw_only=True)
    # A scratch tensor (`alloc_global(..., zeroed=True)`) that holds zeros when its function's first launch starts
    # and that the function leaves zero again: counters the blocks of a launch meet at (split-K's arrivals).
    zeroed: bool = field(default=False, kw_only=True)

    @property
    def storage(self) -> Buffer:
        """The buffer that owns the memory: the root of a chain of views, else the buffer itself."""
        b = self
        while b.view_of is not None:
            b = b.view_of
        return b

    @property
    def const_shape(self) -> tuple[int, ...] | None:
        if all(isinstance(d, Const) for d in self.shape):
            return tuple(int(d.value) for d in self.shape)
        return None


@dataclass(eq=False)
class Region:
    """A rectangular box of a buffer: `buffer[starts[i] : starts[i] + extents[i], ...]`."""

    buffer: Buffer
    starts: list[Expr]
    extents: list[Expr]
    span: Span | None

    @property
    def const_extents(self) -> tuple[int, ...] | None:
        if all(isinstance(e, Const) for e in self.extents):
            return tuple(int(e.value) for e in self.extents)
        return None


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt:
    span: Span | None
    # A stable id within the kernel (number_ops), by which the schedule records decisions about this statement
    # and `--emit-ir` names it; it survives copies of the kernel. 0: made after numbering (by a pass).
    uid: int = field(default=0, kw_only=True)

    # A tile op declares here what the generic code of tilec/ir reads instead of naming the op: the fields it reads
    # and writes (Regions, or an operand that is a Region or an Expr; verify checks them, visit rewrites them,
    # access.written reports the buffers of the written ones), the phase a profiled build times it as (one of
    # profile.PHASES) and, for an op printed in the generic form, its keyword: `KEYWORD READS -> WRITES [ATTRS]`,
    # the read and written fields in field order, ATTRS the other fields (an int or str `name=value`, a bool its
    # name when true) -- printer.stmt_lines prints it and TileReader.stmt reads it back from these declarations.
    keyword: ClassVar[str | None] = None
    read_fields: ClassVar[tuple[str, ...]] = ()
    written_fields: ClassVar[tuple[str, ...]] = ()
    phase: ClassVar[str | None] = None


def operand_fields(cls: type[Stmt]) -> tuple[str, ...]:
    """The fields a statement class declares read or written (Stmt.read_fields, Stmt.written_fields), in field
    order."""
    declared = set(cls.read_fields) | set(cls.written_fields)
    return tuple(f.name for f in fields(cls) if f.name in declared)


def keyword_ops() -> dict[str, type[Stmt]]:
    """The statement classes printed in the generic form, by their keyword (Stmt.keyword)."""
    out: dict[str, type[Stmt]] = {}
    todo = [Stmt]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__dict__.get("keyword"):
                out[sub.keyword] = sub
            todo.append(sub)
    return out


@dataclass(eq=False)
class Alloc(Stmt):
    buffer: Buffer
    init: Expr | None = None  # alloc_var(dtype, init)


@dataclass(eq=False)
class Store(Stmt):
    written_fields = ("buffer",)

    buffer: Buffer
    indices: list[Expr]
    value: Expr


@dataclass(eq=False)
class Assign(Stmt):
    """Bind or re-bind a scalar local variable."""

    var: Var
    value: Expr


LOOP_KINDS = ("serial", "unroll", "parallel", "pipelined")


@dataclass(eq=False)
class For(Stmt):
    """`for vars in kind(extents)`; a serial loop may also have a start and a step.

    Iteration values are `begin + step * t` for t in [0, extent); `parallel` loops may bind
    several variables at once (a multi-dimensional iteration space).
    """

    kind: str
    vars: list[Var]
    extents: list[Expr]
    body: list[Stmt]
    begin: Expr | None = None
    step: Expr | None = None
    num_stages: int = 0  # pipelined only


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then_body: list[Stmt]
    else_body: list[Stmt]


@dataclass(eq=False)
class Copy(Stmt):
    read_fields, written_fields = ("src",), ("dst",)  # (its phase depends on its scopes: profile.tile_phase)

    src: Region
    dst: Region


@dataclass(eq=False)
class Gemm(Stmt):
    """C += op(A) @ op(B) over the block; op transposes when asked."""

    read_fields, written_fields, phase = ("a", "b"), ("c",), "gemm"

    a: Region
    b: Region
    c: Region
    transpose_a: bool = False
    transpose_b: bool = False
    clear_accum: bool = False
    policy: str = "square"  # warp partition: square | full_row | full_col


@dataclass(eq=False)
class Reduce(Stmt):
    read_fields, written_fields, phase = ("src",), ("dst",), "reduce"

    kind: str  # sum max min abssum absmax
    src: Region
    dst: Region
    dim: int
    clear: bool = True


@dataclass(eq=False)
class Fill(Stmt):
    read_fields, written_fields, phase = ("value",), ("dst",), "fill"

    dst: Region
    value: Expr


@dataclass(eq=False)
class While(Stmt):
    """`while cond:`; the condition is re-evaluated before every iteration and must be the same for
    every thread of the block (it may not depend on a Parallel loop variable)."""

    cond: Expr
    body: list[Stmt]


@dataclass(eq=False)
class Atomic(Stmt):
    """An atomic read-modify-write of `dst`. `per_element`: one element, updated by each iteration of
    the enclosing Parallel loop (TileLang's `atomic_add(C[i, j], v)` inside `T.Parallel`); otherwise
    a block-wide tile operation (`value` a region of dst's extents, or one scalar)."""

    read_fields, written_fields, phase = ("value",), ("dst",), "atomic"

    kind: str  # add max min
    dst: Region
    value: Region | Expr
    per_element: bool = False
    result: Var | None = None  # (per element) the local that receives the element's previous value (return_prev)


@dataclass(eq=False)
class CumSum(Stmt):
    """Inclusive prefix sum of `src` along `dim` into `dst` (same extents), from the end if `reverse`."""

    keyword, read_fields, written_fields, phase = "cumsum", ("src",), ("dst",), "reduce"

    src: Region
    dst: Region
    dim: int
    reverse: bool = False


@dataclass(eq=False)
class Print(Stmt):
    """Debug output of a region or a scalar; on a device only from the blocks matching `block` (None: every block)
    and by thread `thread` (None: thread 0, and the text names no thread for a buffer)."""

    read_fields = ("value",)

    label: str
    value: Region | Expr
    block: tuple[int, int, int] | None = None
    thread: int | None = None


@dataclass(eq=False)
class IndexMap:
    """A shared buffer's user layout (`T.Layout(shape, lambda i, j: ...)`): the element at logical index `vars`
    is stored at `offset` (an integer expression of `vars` and constants only); `outputs` are the lambda's
    physical coordinates as written (row-major in the extents they reach), kept for printing."""

    vars: list[Var]
    outputs: list[Expr]
    offset: Expr


@dataclass(eq=False)
class AnnotateLayout(Stmt):
    """A user-provided layout hint: `annotate_layout({buf: make_swizzled_layout(buf)})`, or ("custom") an index
    map, `annotate_layout({buf: T.Layout(buf.shape, lambda i, j: [j, i])})`."""

    buffer: Buffer
    layout: str  # swizzled | padded | linear | custom
    index_map: IndexMap | None = None


@dataclass(eq=False)
class UseSwizzle(Stmt):
    panel_size: int
    enable: bool = True


@dataclass(eq=False)
class NamedBarrier(Stmt):
    """TileLang's `T.sync_threads(barrier_id, arrive_count)`: the threads that reach it wait until `threads` of
    them have (CUDA's `bar.sync id, threads`) — a barrier among a subset of the block, which may stand under
    thread-dependent control flow that `threads` threads take. Shared-memory writes before it are visible to
    those threads after it."""

    barrier_id: int  # 1..15 (0 is the whole block's)
    threads: int  # a multiple of 32, at most the block's threads


@dataclass(eq=False)
class FenceGlobal(Stmt):
    """`fence_global()`: block-wide. The global-memory writes every thread of the block made before it are visible
    to every block of the launch before any thread of this block goes on (a device-scope acquire-release fence in
    each thread, between two barriers of the block). With an atomic counter after it, blocks of one launch hand
    results over: the one that finds the count complete reads what the others wrote before they counted (split-K's
    last block)."""


# ---------------------------------------------------------------- kernels and modules


@dataclass(eq=False)
class Kernel:
    name: str
    params: list[Buffer | Var]  # global tensors and scalar arguments, in signature order
    size_vars: list[Var]  # runtime dims, in order of first appearance in the signature
    grid: list[Expr]  # 3 extents
    threads: int
    block_vars: list[Var]  # bx, by, bz
    body: list[Stmt]
    span: Span | None
    # Bookkeeping of the compile, read through the properties below: "disabled" (features turned off), "internal"
    # (a kernel tilec added: the no-TMA twin), "stage_of" (one launch of a multi-launch kernel), "launch_checks"
    # (conditions on the sizes tested before each launch), "profile" (an instrumented build's level).
    attrs: dict[str, object] = field(default_factory=dict)
    # Typed as object: Tile IR does not depend on the schedule module (which depends on it).
    schedule: object | None = None  # the planning passes' decisions: a tilec.ir.schedule.KernelSchedule
    # What is asked of the schedule (tilec.ir.schedule.ScheduleRequest): the source's keywords (`keywords`, set by
    # the builder) and the caller's pins (tilec.compile(..., schedule=...), laid over them by the driver).
    request: object | None = None
    threads_span: Span | None = None  # the `threads=` argument, where a limit on threads is reported (None: default)

    @property
    def disabled(self) -> frozenset[str]:
        """Target features turned off for this kernel (tilec.options.DISABLEABLE)."""
        return frozenset(self.attrs.get("disabled", ()))

    @property
    def internal(self) -> bool:
        """A kernel tilec added (the no-TMA twin of a TMA kernel): it repeats no remark or warning."""
        return bool(self.attrs.get("internal"))

    @property
    def stage_of(self) -> str | None:
        """The multi-launch kernel function this kernel is one launch of, or None."""
        return self.attrs.get("stage_of")

    @property
    def launch_checks(self) -> list[dict]:
        """Conditions on the sizes tested before each launch (views, contracts)."""
        return list(self.attrs.get("launch_checks", ()))

    @property
    def profile(self) -> str | None:
        """The level of an instrumented build (tilec/ir/profile.py), or None."""
        return self.attrs.get("profile")


@dataclass(eq=False)
class Stage:
    """One launch of a multi-launch kernel: the stage kernel (an internal Kernel of the module, named
    NAME__stageI) and, per parameter of it, the name of the user parameter or scratch tensor it receives."""

    kernel: str
    args: list[str]


@dataclass(eq=False)
class Launches:
    """A kernel function with several `with Kernel(...)` blocks: the public signature (`params`, `size_vars`), the
    scratch tensors its `alloc_global`s allocate (global buffers, shapes over consts and sizes) and the launches in
    order. The stage kernels are ordinary kernels of the module (attrs["stage_of"] names this function), so each
    goes through its back end's pipeline on its own; the runtimes allocate the scratch and launch the stages."""

    name: str
    params: list[Buffer | Var]
    size_vars: list[Var]
    scratch: list[Buffer]
    stages: list[Stage]
    span: Span | None


@dataclass(eq=False)
class Module:
    kernels: list[Kernel]
    consts: dict[str, object]  # the compile-time constants after -D overrides
    files: list[str]  # the main file and every imported file, for dependency tracking
    launches: list[Launches] = field(default_factory=list)  # multi-launch kernel functions (their stages in kernels)
