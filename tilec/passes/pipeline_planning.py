"""pipeline-planning — how each `Pipelined` loop overlaps its loads with its compute.

Assumes: layout-inference has run.
Guarantees: `kernel.attrs["pipelines"]` maps every Pipelined loop to a PipelinePlan:
  * `producers`: the global→shared copies at the top level of the loop body whose source moves
    with the loop variable and whose destination is only written there; they are issued
    `stages - 1` iterations ahead;
  * `stages`: num_stages when the target has asynchronous copies (TMA or cp.async) and there are
    producers; 2 on AMD (register-staged double buffering, where the staged tiles come to at most
    MAX_STAGED_PER_THREAD elements a thread); else 1 (load, barrier, compute, barrier);
  * `mechanism`: "tma" (sm90: every producer is one TMA box per 128-byte panel, completion tracked
    by mbarriers), "cp.async", "registers" (AMD) or "sync";
  * `warp_specialized` (tma only): the kernel's single Pipelined loop sits at its top level and its
    copies depend only on the loop variable and launch values, so a producer warpgroup can issue
    them alone while the declared threads compute; off with `Kernel(..., warp_specialize=False)`
    or `--no-warp-specialize`;
  * every producer's shared buffer is multi-buffered `stages` times by lowering.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..diagnostics import Reporter
from ..ir import tile as T
from ..ir.visit import sub_exprs, walk_stmts
from ..targets.registry import Target

NAME = "pipeline-planning"
# Register staging holds a thread's share of every prefetched tile in registers, and lowering
# unrolls one load per element: beyond this many elements a thread (a block of a few threads
# loading whole tiles) it costs minutes of compile time for code that spills; the loop is plain.
MAX_STAGED_PER_THREAD = 512


@dataclass
class PipelinePlan:
    stages: int
    mechanism: str
    producers: list[T.Copy] = field(default_factory=list)
    warp_specialized: bool = False  # tma only: a producer warpgroup issues the copies

    def __str__(self) -> str:
        bufs = ", ".join(p.dst.buffer.name for p in self.producers) or "none"
        ws = ", warp-specialized" if self.warp_specialized else ""
        return f"{self.stages} stage(s), {self.mechanism}{ws}, prefetched: {bufs}"


def _uses(e: T.Expr, v: T.Var) -> bool:
    return any(x is v for x in sub_exprs(e))


def plan_loop(loop: T.For, target: Target, layouts=None, tma_ok: bool = False,
              shared_bytes: dict[int, int] | None = None, threads: int | None = None) -> PipelinePlan:
    var = loop.vars[0]
    producers = []
    written_elsewhere: set[int] = set()
    for s in loop.body:
        if (isinstance(s, T.Copy) and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared"
                and any(_uses(x, var) for x in s.src.starts)):
            producers.append(s)
    producer_bufs = {id(p.dst.buffer) for p in producers}
    for s in walk_stmts(loop.body):
        if s in producers:
            continue
        dst = None
        if isinstance(s, T.Copy | T.Fill | T.Reduce):
            dst = s.dst.buffer
        elif isinstance(s, T.Store):
            dst = s.buffer
        elif isinstance(s, T.Gemm):
            dst = s.c.buffer
        if dst is not None and id(dst) in producer_bufs:
            written_elsewhere.add(id(dst))
    producers = [p for p in producers if id(p.dst.buffer) not in written_elsewhere]
    # A producer's source may only depend on the loop variable and values fixed before the loop.
    assigned = {id(s.var) for s in walk_stmts(loop.body) if isinstance(s, T.Assign)}
    producers = [p for p in producers
                 if not any(isinstance(x, T.Var) and id(x) in assigned for e in p.src.starts for x in sub_exprs(e))]
    if producers and loop.num_stages >= 2 and tma_ok and all(tma_copy_ok(p, layouts) for p in producers):
        return PipelinePlan(loop.num_stages, "tma", producers)
    if producers and "cp.async" in target.async_copy and loop.num_stages >= 2:
        return PipelinePlan(loop.num_stages, "cp.async", producers)
    if producers and target.backend == "hip" and loop.num_stages >= 2:
        # AMD has no cp.async: the next iteration's tiles are loaded into registers before this iteration's
        # compute and stored to the other of two shared buffers after it (one barrier per iteration) -- where
        # the second buffers fit in the target's shared memory (else the plain loop).
        sizes = shared_bytes or {}
        extra = sum(sizes.get(id(p.dst.buffer), 0) for p in producers)
        staged = sum(math.prod(p.dst.buffer.const_shape or (0,)) for p in producers)
        fits = sum(sizes.values()) + extra <= target.shared_memory_bytes
        if fits and staged <= MAX_STAGED_PER_THREAD * (threads or 1):
            return PipelinePlan(2, "registers", producers)
    return PipelinePlan(1, "sync", producers)


def tma_copy_ok(p: T.Copy, layouts) -> bool:
    """A global->shared copy one TMA box (or one per 128-byte panel) can do: the whole destination
    tile, the same element type, a source box of at most 256 per dimension, and a destination layout
    that TMA writes (a swizzled panel layout, or linear rows of a multiple of 16 bytes)."""
    src, dst = p.src, p.dst
    lay = layouts.shared.get(id(dst.buffer))
    exts = src.const_extents
    if lay is None or exts is None or src.buffer.dtype != dst.buffer.dtype or len(src.buffer.shape) > 5:
        return False
    if not (all(isinstance(x, T.Const) and int(x.value) == 0 for x in dst.starts)
            and list(dst.const_extents) == list(dst.buffer.const_shape)):
        return False
    if [e for e in exts if e != 1] != [e for e in dst.buffer.const_shape if e != 1] or exts[-1] == 1:
        return False
    if lay.panel and lay.swizzle:
        inner = lay.panel_elems
    else:
        inner = exts[-1]
        if lay.swizzle or (inner * dst.buffer.dtype.bytes) % 16:
            return False
    return all(e <= 256 for e in exts[:-1]) and inner <= 256


def _top_level_loop_ok(k: T.Kernel, loop: T.For, plan: PipelinePlan) -> bool:
    """Warp specialization moves the copies of `loop` to a producer warpgroup that runs nothing else:
    the loop must sit at the kernel's top level, its trip count and copy sources must depend only on
    block indices, sizes, scalars and the loop variable, and nothing outside the loop may touch the
    buffers it fills."""
    if loop not in k.body:
        return False
    assigned = {id(s.var) for s in walk_stmts(k.body) if isinstance(s, T.Assign)}
    launch_values = launch_value_assigns(k, loop)
    exprs = [*loop.extents, *(x for p in plan.producers for x in p.src.starts)]
    for e in exprs:
        for x in sub_exprs(e):
            if isinstance(x, T.Load) or (isinstance(x, T.Var) and id(x) in assigned and
                                         not any(a.var is x for a in launch_values)):
                return False
    filled = {id(p.dst.buffer) for p in plan.producers}
    inside = {id(s) for s in walk_stmts(loop.body)}
    for s in walk_stmts(k.body):
        if id(s) in inside or s is loop:
            continue
        regions = [getattr(s, f) for f in ("src", "dst", "a", "b", "c") if isinstance(getattr(s, f, None), T.Region)]
        if any(id(r.buffer) in filled for r in regions):
            return False
        if isinstance(s, T.Store) and id(s.buffer) in filled:
            return False
    return True


def launch_value_assigns(k: T.Kernel, loop: T.For) -> list[T.Assign]:
    """The top-level assignments before `loop` whose values depend only on launch values (block
    indices, sizes, scalars and earlier such assignments) -- what a producer warpgroup recomputes."""
    counts: dict[int, int] = {}
    for s in walk_stmts(k.body):
        if isinstance(s, T.Assign):
            counts[id(s.var)] = counts.get(id(s.var), 0) + 1
    ok: list[T.Assign] = []
    ok_ids: set[int] = set()
    for s in k.body:
        if s is loop:
            break
        if isinstance(s, T.Assign) and counts[id(s.var)] == 1:
            xs = list(sub_exprs(s.value))
            if not any(isinstance(x, T.Load) or (isinstance(x, T.Var) and id(x) in counts and id(x) not in ok_ids)
                       for x in xs):
                ok.append(s)
                ok_ids.add(id(s.var))
    return ok


def run(module: T.Module, rep: Reporter, target: Target) -> T.Module:
    for k in module.kernels:
        plans = {}
        disabled = k.attrs.get("disabled", ())
        tma_ok = target.tma_pipelines and "tma" not in disabled
        table = k.attrs.get("layouts")
        shared_bytes = {key: lay.size * lay.elem_bytes for key, lay in table.shared.items()} if table else {}
        loops = [s for s in walk_stmts(k.body) if isinstance(s, T.For) and s.kind == "pipelined"]
        for s in loops:
            plans[id(s)] = plan_loop(s, target, table, tma_ok, shared_bytes, k.threads)
        tma_loops = [s for s in loops if plans[id(s)].mechanism == "tma"]
        if (len(loops) == 1 and tma_loops and "warp_specialize" not in disabled
                and k.attrs.get("warp_specialize", True) and _top_level_loop_ok(k, loops[0], plans[id(loops[0])])):
            plans[id(loops[0])].warp_specialized = True
        k.attrs["pipelines"] = _PlanTable(plans, k)
    return module


class _PlanTable(dict):
    def __init__(self, plans, kernel):
        super().__init__(plans)
        self._names = {id(s): s.vars[0].name for s in walk_stmts(kernel.body) if isinstance(s, T.For)}

    def __str__(self) -> str:
        return "".join(f"\n    loop {self._names[key]}: {plan}" for key, plan in self.items())
