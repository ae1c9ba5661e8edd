"""What the builder's modules share: the name tables, scopes, and small helpers on syntax and IR."""

from __future__ import annotations

import dataclasses

from ..diagnostics import Span
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import as_int, linear_form
from ..ir.visit import children
from ..ops.registry import BUILDERS as BUILT_OPS  # the ops their home builds (`build`)
from . import ast as A


class _Fail(Exception):
    """Abandon the current statement; the diagnostic has already been reported."""


MATH_FUNCS = {
    "exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sin": 1, "cos": 1,
    "floor": 1, "ceil": 1, "sigmoid": 1, "abs": 1, "max": 2, "min": 2, "pow": 2,
}
LOOP_FUNCS = {"Parallel": "parallel", "Pipelined": "pipelined", "Serial": "serial", "serial": "serial",
              "range": "serial", "parallel": "parallel", "Unroll": "unroll", "unroll": "unroll", "Persistent": None,
              "vectorized": "unroll", "Vectorized": "unroll"}  # (TileLang's per-thread vectorized loop)
ALLOC_FUNCS = {"alloc_shared": "shared", "alloc_fragment": "fragment", "alloc_local": "local",
               "alloc_var": "var"}
REDUCE_FUNCS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min", "reduce_abssum": "abssum",
                "reduce_absmax": "absmax"}
ATOMIC_FUNCS = {"atomic_add": "add", "atomic_max": "max", "atomic_min": "min"}
TILE_OPS = {"copy", "gemm", "gemm_sp", "fill", "clear", "print", "annotate_layout", "use_swizzle", "im2col",
            "c2d_im2col", *REDUCE_FUNCS,
            *ATOMIC_FUNCS, *BUILT_OPS}
BUILTINS = set(MATH_FUNCS) | set(LOOP_FUNCS) | set(ALLOC_FUNCS) | TILE_OPS | {
    "Kernel", "ceildiv", "if_then_else", "clamp", "floordiv", "floormod",
    "cast", "Cast", "reinterpret", "infinity", "max_value", "min_value", "True", "False", "Tensor", "reshape", "view",
    "get_thread_binding", "thread_binding", "sync_threads", "disable_warp_group_reg_alloc", "ws", "alloc_barrier",
    "barrier_arrive", "barrier_wait", "tma_copy", "shift_left", "shift_right", "get_block_binding", "assume",
    "fence_global",
}
# Names a generated CUDA/HIP source cannot use for a variable: C/C++ keywords, the CUDA/HIP built-in
# variables, the types and math functions the printers emit, and tilec's own `tl` namespace. A user
# name that is one of these gets a trailing underscore where the builder assigns IR names (the WGSL
# printer has its own list and suffix).
C_RESERVED = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires restrict return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq NULL main
threadIdx blockIdx blockDim gridDim warpSize dim3 half half2 nv_bfloat16 nv_bfloat162 size_t int8_t uint8_t
int16_t uint16_t int32_t uint32_t int64_t uint64_t uint
exp exp2 log log2 sqrt rsqrt tanh sin cos floor ceil abs fabs max min pow expf exp2f logf log2f sqrtf rsqrtf
tanhf sinf cosf floorf ceilf fabsf fmaxf fminf powf fmax fmin printf tl
""".split())


def c_safe(name: str) -> str:
    """`name`, or `name_` when it would clash with the generated source's own names."""
    if name in C_RESERVED or name.startswith(("tl_", "__")):
        return name + "_"
    return name


# TileLang builtins with no tilec counterpart, and what to write instead (docs/language.md, porting).
TILELANG_UNSUPPORTED = {
    "tvm_thread_allreduce": "reduce a fragment with reduce_sum / reduce_max instead",
    "call_extern": "tilec generates all device code itself: write the computation in the kernel instead",
    "import_source": "tilec generates all device code itself: write the computation in the kernel instead",
    "dp4a": "multiply and add the unpacked integers in a Parallel loop instead",
    "Layout": "write it in place as a value of annotate_layout: annotate_layout({buf: T.Layout(buf.shape, lambda i, "
              "j: [...])}) (a helper function cannot return one)",
    "Fragment": "tilec infers the register layout of every fragment; drop the annotation",
    "symbolic": "any tensor dimension that is not a const is already a runtime size",
    "dynamic": "any tensor dimension that is not a const is already a runtime size: name it in the shape",
    "empty": "declare the output as an `out` parameter of the kernel (the caller allocates it)",
    "alloc_buffer": "allocate by scope: T.alloc_shared, T.alloc_fragment, T.alloc_local, or T.alloc_global at the "
                    "kernel function's level",
    "evaluate": "a TIR statement has no .tile spelling: write the computation as statements of the kernel",
    "attr": "a TIR attribute has no .tile spelling: tilec decides what the attribute would (layouts, schedules)",
    "access_ptr": "tilec has no pointers: index the buffer (or pass a region to a tile operation) instead",
    "make_tensor": "tilec has no pointers, so no tensor made from one: pass the tensors as parameters (several "
                   "of one shape as one tensor with a leading batch dimension)",
    # the schedule's own machinery, which tilec plans (pipelines, mbarriers, TMA, wgmma, warp specialization)
    **dict.fromkeys(
        ("mbarrier_wait_parity", "mbarrier_arrive", "mbarrier_arrive_expect_tx", "alloc_cluster_barrier",
         "cp_async_barrier_noinc", "fence_proxy_async", "ptx_cp_async", "ptx_commit_group", "ptx_wait_group",
         "wait_wgmma", "wgmma_gemm", "WSSync", "WSID", "WSPipeline", "WSScope", "WSRole", "WSSchedule", "ws_op",
         "annotate_ws_schedule"),
        "tilec plans the asynchronous copies, their mbarriers, wgmma and warp specialization itself: write T.copy "
        "into shared tiles inside a T.Pipelined loop and T.gemm (with `with T.ws(i)`, T.alloc_barrier and "
        "T.barrier_arrive / T.barrier_wait where the roles are written out)"),
    **dict.fromkeys(
        ("set_max_nreg", "no_set_max_nreg", "annotate_producer_reg_dealloc", "annotate_consumer_reg_alloc"),
        "tilec sets the registers of the warpgroups it specializes (setmaxnreg) itself: drop the call, or write "
        "T.disable_warp_group_reg_alloc() to keep the launch's registers"),
    **dict.fromkeys(
        ("alloc_tmem", "tcgen05_gemm", "tcgen05_mma_arrive", "tcgen05_sf_warp_transpose", "tcgen05_cp_warpx4",
         "tcgen05_gemm_blockscaled", "mma_gemm_blockscaled"),
        "tilec has no lowering to Blackwell's tensor memory (tcgen05): write T.gemm on shared and fragment tiles "
        "(block-scaled operands: scale them to f16/bf16 tiles in a Parallel loop first)"),
    **dict.fromkeys(
        ("clc_try_cancel_multicast", "clc_is_canceled", "clc_get_first_ctaid_x", "PersistentTileScheduler"),
        "tilec has no persistent tile scheduler: launch one block per tile (T.use_swizzle orders them), or write "
        "the persistent loop over tile ids as a serial loop (examples/tilelang/gemm_persistent.tile)"),
    **dict.fromkeys(
        ("ClusterKernel", "block_rank_in_cluster"),
        "tilec forms thread block clusters itself where a TMA multicast pays: write `with T.Kernel(...)`, each block "
        "loading its own tiles"),
    **dict.fromkeys(
        ("comm_reducer", "alloc_reducer", "finalize_reducer"),
        "write the reduction with reduce_sum / reduce_max / reduce_min over a fragment, or T.atomic_add into a "
        "shared or global accumulator"),
    "any_sync": "tilec decides which threads hold a fragment's elements, so a warp vote has no fixed meaning: "
                "reduce the 0/1 condition with reduce_max over the tile instead (any = max)",
    "tvm_warp_shuffle": "reduce a fragment with reduce_sum / reduce_max (tilec shuffles within warps itself)",
    "index_to_coordinates": "write the row-major arithmetic: i // cols, i % cols",
    "atomic_load": "tilec has no synchronisation between blocks of one launch: split the kernel into launches of a "
                   "multi-launch kernel with T.alloc_global scratch between them",
    "atomic_store": "tilec has no synchronisation between blocks of one launch: split the kernel into launches of a "
                    "multi-launch kernel with T.alloc_global scratch between them",
    "sync_grid": "a barrier across the grid: split the kernel at it into launches of a multi-launch kernel (one "
                 "`with T.Kernel(...)` block each, T.alloc_global scratch between them)",
    "atomic_addx4": "write T.atomic_add on a region of four (or more) elements: how many go per instruction is "
                    "tilec's choice",
    "device_assert": "check the condition on the host, or record it in an `out` tensor (`if not cond: Flags[0] = 1`)",
    "rng_init": "pass the random numbers in as an input tensor (numpy or torch makes them)",
    "rng_rand": "pass the random numbers in as an input tensor (numpy or torch makes them)",
}


def unsupported_builtin(name: str) -> str | None:
    """The message for a TileLang builtin tilec does not have, or None."""
    if name == "alloc_global":  # supported, at the function's level only (Builder.launch_sequence)
        return ("T.alloc_global allocates a scratch tensor shared by the launches of a kernel: write "
                "`name = T.alloc_global(shape, dtype)` at the kernel function's level, before the "
                "`with T.Kernel(...)` blocks that use it, not inside one")
    advice = TILELANG_UNSUPPORTED.get(name)
    return f"TileLang's T.{name} is not supported: {advice}" if advice else None


MAX_INLINE_DEPTH = 32
MAX_EXPR_NODES = 10_000  # limits on what an inlined helper may expand to
MAX_EXPR_DEPTH = 200
MAX_INT_POWER = 16  # x ** n with a runtime integer x becomes n - 1 multiplies


@dataclasses.dataclass
class _Helper:
    decl: A.DefDecl
    scope: _Scope  # where it was defined (its file's globals)


class _Scope:
    def __init__(self, parent: _Scope | None = None):
        self.parent = parent
        self.names: dict[str, object] = {}

    def lookup(self, name: str):
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                value = s.names[name]
                if value is _POISONED:
                    raise _Fail()  # its definition failed and was reported; do not cascade
                return value
            s = s.parent
        return None

    def is_bound(self, name: str) -> bool:
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                return True
            s = s.parent
        return False

    def visible(self) -> set[str]:
        """Every name bound here or in an enclosing scope (for did-you-mean)."""
        names: set[str] = set()
        s: _Scope | None = self
        while s is not None:
            names |= {n for n, v in s.names.items() if v is not _POISONED}
            s = s.parent
        return names

    def poison(self, name: str) -> None:
        """Mark a name whose definition failed: later uses are skipped instead of reported again."""
        if not self.is_bound(name):
            self.names[name] = _POISONED

    def bind(self, name: str, value) -> None:
        self.names[name] = value


_POISONED = object()


def undefined_name(name: str, scope: _Scope) -> str:
    """`use of undefined name 'blockN'; did you mean 'block_N'?`: the closest names in scope."""
    return f"use of undefined name '{name}'" + _did_you_mean(name, scope.visible())


def undefined_function(name: str, scope: _Scope) -> str:
    """`call to undefined function 'clera'; did you mean 'clear'?`: the closest builtins and helpers in scope."""
    helpers = {n for n in scope.visible() if isinstance(scope.lookup(n), _Helper)}
    return f"call to undefined function '{name}'" + _did_you_mean(name, BUILTINS | helpers)


def _did_you_mean(word: str, names) -> str:
    import difflib

    close = difflib.get_close_matches(word, sorted(names), n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _extreme(fname: str, dt: D.DType):
    if dt.is_float:
        if fname == "infinity":
            return float("inf")
        import numpy as np

        from ..ir.fold import _round_float  # noqa: F401  (registers ml_dtypes)

        if dt.name in ("bf16", "f8e4m3", "f8e5m2"):
            import ml_dtypes

            info = ml_dtypes.finfo(np.dtype(dt.numpy_name))
        else:
            info = np.finfo(dt.numpy_name)
        return float(info.max) if fname == "max_value" else float(-info.max)
    if dt.is_bool:
        return fname == "max_value"
    lo = -(1 << (dt.bits - 1)) if dt.kind == "int" else 0
    hi = (1 << (dt.bits - 1)) - 1 if dt.kind == "int" else (1 << dt.bits) - 1
    return hi if fname == "max_value" else lo


def _aligned_dims(starts: list[T.Expr], tile: list[T.Expr]) -> list[int] | None:
    """The rightmost dims (in order) whose starts are multiples of the matching tile extents."""

    def aligned(start: T.Expr, extent: T.Expr) -> bool:
        n = as_int(extent)
        if n is None or n <= 0:
            return True  # unknown here; a bad extent is reported elsewhere
        form = linear_form(start)
        return form is not None and all(c % n == 0 for c in form.values())

    dims: list[int] = []
    d = len(starts) - 1
    for e in reversed(tile):
        while d >= 0 and not aligned(starts[d], e):
            d -= 1
        if d < 0:
            return None
        dims.append(d)
        d -= 1
    return dims[::-1]


def _size_and_depth(e: T.Expr) -> tuple[int, int]:
    """Node count and depth of an expression as a tree (shared subexpressions count once per use)."""
    memo: dict[T.Expr, tuple[int, int]] = {}
    stack: list[tuple[T.Expr, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if node in memo:
            continue
        kids = children(node)
        if not done:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if k not in memo)
            continue
        size = 1 + sum(memo[k][0] for k in kids)
        depth = 1 + max((memo[k][1] for k in kids), default=0)
        memo[node] = (size, depth)
    return memo[e]


def _fits(c: T.Const, dt: D.DType) -> bool:
    """Whether integer literal c is representable in integer type dt (floats and bools always adapt)."""
    if c.dtype.is_float or c.dtype.is_bool or not dt.is_int:
        return True
    v = int(c.value)
    if dt.kind == "uint":
        return 0 <= v < (1 << dt.bits)
    return -(1 << (dt.bits - 1)) <= v < (1 << (dt.bits - 1))


def read_only(buf: T.Buffer) -> tuple[str, str]:
    """What a write to input `buf` names, and the fix: ("input tensor 'A'", "declare it `out`"), or for a view
    ("'A2' (a view of input tensor 'A')", "declare 'A' `out`")."""
    if buf.view_of is None:
        return f"input tensor '{buf.name}'", "declare it `out`"
    return f"'{buf.name}' (a view of input tensor '{buf.storage.name}')", f"declare '{buf.storage.name}' `out`"


def _zero(span: Span) -> T.Const:
    return T.Const(D.I32, span, 0)


def _callee(node: A.Node) -> str | None:
    if isinstance(node, A.CallExpr):
        node = node.func
    if isinstance(node, A.Name):
        return node.id
    return None


def _is_kernel_launch(node: A.Node) -> bool:
    return isinstance(node, A.WithStmt) and isinstance(node.context, A.CallExpr) and _callee(node.context) == "Kernel"


def _describe_binding(bound) -> str:
    if isinstance(bound, tuple) and bound[0] == "const":
        return "a const"
    if isinstance(bound, tuple) and bound[0] == "region":
        return "a region"
    if isinstance(bound, tuple) and bound[0] == "barrier":
        return "a barrier"
    if isinstance(bound, T.Var):
        return {"size": "a runtime size", "block": "a block index", "loop": "a loop variable",
                "param": "a scalar kernel parameter", "local": "a local variable"}[bound.kind]
    if isinstance(bound, T.Buffer):
        return "an input tensor" if bound.scope == "global" else f"a {bound.scope} buffer"
    if isinstance(bound, _Helper):
        return "a def helper"
    if isinstance(bound, A.KernelDecl):
        return "a kernel"
    return "an expression"

