"""The gemm implementations (one per instruction family), registered by the back ends, chosen by predicate.

An implementation is a `GemmImpl`: the family's name in the schedule (`GemmSchedule.instruction`), its
instruction descriptor (tilec/ir/instructions.py's `MatrixInstruction`), which gemms it can run and with which
accumulator layout (`accumulator_layout`), the shared layouts it reads its operands in, and its lowering
(`lower(cx, s)`, against the narrow `GemmContext` below). Generic passes (layout-inference, pipeline-planning,
lower-to-simt) ask the implementation; none of them names a family.

Registration goes from the back end to this registry: each back end's `instructions` module
(`tilec.targets.<backend>.instructions`, named in `IMPLEMENTATIONS` of tilec/targets/registry.py and reached
through `Target.implementations`) calls `register_gemm_impl(impl, predicate, rank)` on import; this module never
imports a back end. The generic fallback, scalar FMA (tilec/ops/gemm_fma.py), registers itself with a predicate
that takes every target and the largest rank. For a gemm on a target, layout-inference tries the implementations
whose predicate takes the target (and that the kernel does not disable), lowest rank first; the first that
returns an accumulator layout runs it (`choose`). `check_registry` holds every registration to its back end:
a predicate that takes a target of another back end, or a target that does not offer the intrinsics the
implementation emits, is reported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from ..ir import simt as S
from ..ir import tile as T
from ..ir.intrinsics import lookup as intrinsic
from ..ir.intrinsics import offered as intrinsic_offered
from ..ir.layout import Fragment, SharedLayout
from ..ir.schedule import PARTITION_UNITS, GemmSchedule, KernelSchedule


class GemmImpl:
    """One way of running a gemm. Subclasses set the class attributes and override what applies."""

    name: str = ""  # the schedule's name for it (GemmSchedule.instruction, a ScheduleRequest's "instruction")
    instruction = None  # its tilec.ir.instructions.MatrixInstruction (None: scalar FMA)
    backend: str | None = None  # the back end that registers it (None: generic, every back end)
    intrinsics: tuple[str, ...] = ()  # the intrinsics its lowering emits (check_registry: the target offers them)
    unit: str = "warps"  # what its warp partition counts (the schedule's text: warps, warpgroups, waves)
    # mma.sync / MFMA: warps partitioned over instruction atoms (gemm.choose_warps) reading 2-D shared tiles of
    # 16-byte rows (gemm.operand_tiles_ok); False for wgmma (warpgroups over TMA panels)
    warp_tiled: bool = True
    # issued asynchronously by whole warpgroups (wgmma): sm90's pipelines keep it in flight (pipeline-planning's
    # overlap_split, gemm_pipeline, cluster_multicast)
    warpgroup_async: bool = False
    # shared operands stored XOR-swizzled where possible, unless an annotation says otherwise (mma.sync's ldmatrix)
    swizzles_operands: bool = False
    # gemm(..., clear_accum=True) needs no fill of the accumulator first: its first k-step replaces the accumulator
    # instead of adding to it (wgmma's scale-d operand)
    zeroes_accumulator: bool = False
    # its operand layouts (shared_operand_layouts) win over a layout annotation (wgmma's TMA panels)
    operand_layouts_beat_annotations: bool = False
    # why a shared operand with a layout of its own cannot be read row-major through a view (an error's words)
    stored_as: str = ""

    @property
    def tensor_core(self) -> bool:
        return self.instruction is not None

    def accumulator_layout(self, q) -> Fragment | None:
        """The accumulator layout when this implementation can run gemm q (a gemm.GemmQuery: operand dtypes,
        scopes and shapes, the block's warps), else None."""
        return None

    def register_a_fits(self, s: T.Gemm, la: Fragment | None, lc: Fragment | None) -> bool:
        """With all layouts known: whether a register A operand (layout la, accumulator lc) can be read as it is;
        False: the gemm falls back to the generic implementation (or register_a_error reports it)."""
        return True

    def register_a_error(self, s: T.Gemm, la: Fragment | None, lc: Fragment | None) -> str | None:
        """An error for a register A operand this implementation cannot read and cannot fall back from."""
        return None

    def shared_operand_layouts(self, gemms: list[T.Gemm]) -> dict[T.Buffer, SharedLayout]:
        """The shared layouts (by buffer) it needs for the shared operands of these gemms (all of a kernel's
        gemms it runs, in program order; the first that reads a buffer decides)."""
        return {}

    def instr_n(self, lay: Fragment) -> int:
        """N of one instruction, for the schedule (wgmma: the accumulator's own)."""
        return self.instruction.n

    def schedule(self, s: T.Gemm, lay: Fragment | None) -> GemmSchedule:
        """What the schedule records for gemm s run by this implementation with accumulator layout lay."""
        instr = self.instruction
        if instr is None or not isinstance(lay, instr.accumulator):
            return GemmSchedule(fallback().name)
        return GemmSchedule(self.name, (instr.m, self.instr_n(lay), instr.step_k(s.a.buffer.dtype)), (lay.wm, lay.wn))

    def lower(self, cx: GemmContext, s: T.Gemm) -> None:
        raise cx.fail(f"internal error: gemm instruction '{self.name}' has no lowering of its own on "
                      f"{cx.target.name}", s.span)


@dataclass(frozen=True)
class Registration:
    impl: GemmImpl
    predicate: Callable[[object], bool]  # Target -> whether this implementation may run there
    rank: int  # lower first
    module: str  # the module that registered it


_REGISTRY: dict[str, Registration] = {}
_LOADED: set[str] = set()
GENERIC = "tilec.ops.gemm_fma"  # the generic implementations' module, loaded (like a back end's) on first use


def register_gemm_impl(impl: GemmImpl, predicate: Callable[[object], bool], rank: int) -> GemmImpl:
    """Add an implementation (one line in the back end's instructions module). `predicate(target)`: the targets
    it serves; `rank`: its preference among those a target offers (lower first)."""
    if not impl.name:
        raise ValueError(f"{type(impl).__name__}: a gemm implementation needs a name")
    prev = _REGISTRY.get(impl.name)
    if prev is not None and type(prev.impl) is not type(impl):
        raise ValueError(f"gemm implementation '{impl.name}' registered twice ({prev.module}, {type(impl).__module__})")
    _REGISTRY[impl.name] = Registration(impl, predicate, rank, type(impl).__module__)
    PARTITION_UNITS[impl.name] = impl.unit
    return impl


def load(target) -> None:
    """Import the modules that register the generic implementations and the target's back end's
    (Target.implementations)."""
    for module in (GENERIC, getattr(target, "implementations", None)):
        if module and module not in _LOADED:
            importlib.import_module(module)
            _LOADED.add(module)


def offered(target, disabled=()) -> list[GemmImpl]:
    """The implementations the target's predicate takes, best first, less the disabled ones."""
    load(target)
    regs = sorted(_REGISTRY.values(), key=lambda r: (r.rank, r.impl.name))
    return [r.impl for r in regs if r.impl.name not in disabled and r.predicate(target)]


def named(name: str) -> GemmImpl:
    """The registered implementation of a schedule's instruction name (KeyError when none registered it)."""
    load(None)
    return _REGISTRY[name].impl


def lookup(name: str, target) -> GemmImpl | None:
    """The implementation `name` if the target may run it, else None."""
    load(target)
    reg = _REGISTRY.get(name)
    return reg.impl if reg is not None and reg.predicate(target) else None


def fallback() -> GemmImpl:
    """The generic implementation every target runs (scalar FMA): the one with the largest rank."""
    load(None)
    return max(_REGISTRY.values(), key=lambda r: r.rank).impl


def choose(q, target, disabled=(), pinned: str | None = None) -> tuple[GemmImpl, Fragment | None]:
    """The implementation that runs gemm q on target and its accumulator layout: the pinned one if it fits,
    else the first offered one whose accumulator_layout takes q; the fallback (layout None) when none does."""
    for impl in offered(target, disabled):
        if pinned is not None and impl.name != pinned:
            continue
        lay = impl.accumulator_layout(q)
        if lay is not None:
            return impl, lay
    return fallback(), None


def check_registry(targets) -> list[str]:
    """What is wrong with the registrations, for every target: an implementation of one back end offered on a
    target of another, or on a target that does not offer an intrinsic it emits; a target without a fallback."""
    problems = []
    for t in targets:
        load(t)
    for t in targets:
        impls = [r for r in _REGISTRY.values() if r.predicate(t)]
        for r in impls:
            impl = r.impl
            if impl.backend not in (None, t.backend):  # registered by another back end
                problems.append(f"{impl.name} ({r.module}, back end {impl.backend}) is offered on {t.name}, a "
                                f"{t.backend} target")
                continue
            missing = [op for op in impl.intrinsics if not intrinsic_offered(intrinsic(op), t)]
            if missing:
                problems.append(f"{impl.name} ({r.module}) is offered on {t.name}, which does not offer "
                                f"{', '.join(missing)}")
        if not any(r.impl.instruction is None for r in impls):
            problems.append(f"{t.name} has no fallback gemm implementation")
    return problems


@dataclass(frozen=True)
class GemmContext:
    """What a gemm implementation's lowering may use (instead of the whole lowering, lower_to_simt.Lowerer):
    the kernel's schedule and target, the thread index, emitting statements, lowering expressions, buffers and
    their layouts, and the shared-memory barrier bookkeeping. Built per gemm by `of(cx)`."""

    target: object
    sched: KernelSchedule
    tid: T.Expr
    emit: Callable[[S.SStmt], None]
    block: Callable  # block(fn) -> the statements fn emits
    fresh: Callable  # fresh(name, dtype=i32) -> a new variable
    declare: Callable  # declare(name, value, dtype=None) -> a variable holding value
    hoist: Callable  # hoist(name, value) -> a per-thread constant declared once at kernel entry
    lx: Callable  # lower a Tile IR expression
    sbuf: Callable  # Tile IR buffer -> its SIMT buffer
    shared_layout: Callable  # shared buffer -> its SharedLayout
    ref: Callable  # ref(buffer, indices, span) -> a read of the element
    region_index: Callable  # region_index(region, tile indices) -> buffer indices
    fail: Callable  # fail(message, span) -> a CompileError to raise
    barrier: Callable  # a block barrier
    before_shared_access: Callable  # before_shared_access(reads, writes): a barrier where one is needed
    stage_offset: Callable  # shared buffer -> the offset of the pipeline stage being read (None: not staged)
    shared_read: Callable  # note that shared memory was read since the last barrier
    shared_written: Callable  # note that shared memory was written since the last barrier
    staging_buffer: Callable  # staging_buffer(operand, buffer, shape) -> (T.Buffer, SharedLayout, S.SBuffer)
    # the target's LoweringExtension (tilec/passes/lowering_extension.py): an implementation whose lowering keeps
    # state across statements (sm90's wgmma: asynchronous groups, the producer warpgroup) hands the gemm to it
    extension: object

    @staticmethod
    def of(cx) -> GemmContext:
        """The context over a lowering (the one place that reads the Lowerer's members for gemms)."""
        def read() -> None:
            cx.smem_read = True

        def written() -> None:
            cx.smem_dirty = True

        return GemmContext(cx.target, cx.sched, cx.tid, cx.emit, cx.block, cx.fresh, cx.declare, cx.hoist, cx.lx,
                           cx.sbuf, cx.shared_layout, cx.ref, cx.region_index, cx.fail, cx.barrier,
                           cx.before_shared_access, lambda b: cx.stage_offset.get(b), read, written,
                           lambda name, b, shape: _staging_buffer(cx, name, b, shape), cx.ext)


def _staging_buffer(cx, name: str, b: T.Buffer, shape) -> tuple[T.Buffer, SharedLayout, S.SBuffer]:
    """A shared buffer staging register operand `name` of this dtype and shape: the kernel's gemms share one
    per operand position, dtype and shape."""
    from ..ir.layout import c

    key = (name, b.dtype, shape)
    if key in cx.gemm_stages:
        stage = cx.gemm_stages[key]
        return stage, cx.staged_layouts[stage], cx.buffers[stage]
    stage = T.Buffer(cx.fresh(f"{b.name}_stage").name, b.dtype, [c(d) for d in shape], "shared", b.span)
    lay = SharedLayout(shape, b.dtype.bytes)
    cx.staged_layouts[stage] = lay
    cx.staged.append(stage)
    sb = S.SBuffer(stage.name, b.dtype, "shared", lay.size, origin=f"{b.name} staged for gemm")
    cx.shared.append(sb)
    cx.buffers[stage] = sb
    cx.gemm_stages[key] = stage
    return stage, lay, sb


__all__ = ["GemmImpl", "GemmContext", "register_gemm_impl", "offered", "named", "lookup", "fallback", "choose",
           "check_registry"]
