"""pipeline-planning — how each `Pipelined` loop overlaps its loads with its compute.

Assumes: layout-inference has run (kernel.schedule holds the layouts).
Guarantees: `kernel.schedule.loops` maps every Pipelined loop (by its stable id) to a LoopSchedule:
  * `producers`: the global→shared copies at the top level of the loop body whose source moves
    with the loop variable and whose destination is only written there; they are issued
    `stages - 1` iterations ahead;
  * `stages`: num_stages when the target has asynchronous copies (TMA or cp.async) and there are
    producers; 2 on targets with "register_double_buffer" (AMD: register-staged double buffering) where
    every producer can go through registers, the second buffers fit and the staged tiles come to at most
    MAX_STAGED_PER_THREAD elements a thread; else 1 (load, barrier, compute,
    barrier);
  * `mechanism`: "tma" (sm90: every producer is one TMA box per 128-byte panel, completion tracked
    by mbarriers), "cp.async", "registers" (AMD) or "sync";
  * `warp_specialized` (tma only): the kernel's single Pipelined loop sits at its top level and its
    copies depend only on the loop variable and launch values, so a producer warpgroup can issue
    them alone while the declared threads compute; off with `Kernel(..., warp_specialize=False)`
    or `--no-warp-specialize`;
  * every producer's shared buffer is multi-buffered `stages` times by lowering;
  * `kernel.schedule.persistent`: `Kernel(..., persistent=True)` on a warp-specialized kernel (else a
    warning says it has no effect);
  * `kernel.schedule.pingpong`: `Kernel(..., pingpong=True)` on a persistent kernel that `pingpong_ok` accepts (a
    gemm pipeline on one consumer warpgroup); else a warning says it has no effect, or, pinned by the schedule
    request, an error;
  * `overlap_softmax` (warp-specialized only): `Kernel(..., overlap_softmax=True)` on a loop whose body has
    the shape `overlap_split` accepts (FlashAttention's): the last gemm of iteration j is issued together
    with the first gemm of iteration j+1, so the statements between the two gemms (the softmax) run while
    the tensor cores work on both (else a warning says it has no effect);
  * `kernel.schedule.cluster` and the loop's `multicast` (sm90): `Kernel(..., cluster=(2, 1))` or `(1, 2)` on a
    warp-specialized gemm pipeline with a producer both blocks of a cluster share (`cluster_multicast`); else a
    remark (category cluster) says why it is ignored, or, pinned by the schedule request, an error;
  * `preloads` (warp-specialized, not persistent): with `Kernel(..., tma_preload=True)`, the copies before the
    loop that `preload_copies` accepts (FlashAttention's Q tile), which the producer warpgroup then issues
    through TMA before the loop's copies (else a warning says it has no effect).
Remarks: a loop given fewer stages than it asks for (category pipeline, with the reason); on a TMA target, how
each loop loads its tiles and, when not with TMA, why (category tma).
Parts pinned by the kernel's ScheduleRequest (stages, mechanism, warp specialization, persistence)
are taken when the loop can have them, else reported as errors at the loop. The plan is final:
lowering follows it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import Reporter
from ..ir import copy_mechanisms as mechanisms
from ..ir import tile as T
from ..ir.copy_mechanisms import PlanContext
from ..ir.schedule import KernelSchedule, LoopRequest, LoopSchedule, request_of
from ..ir.visit import direct_exprs, sub_exprs, walk_stmts
from ..ops import gemm_impl
from ..ops import registry as ops
from ..targets.registry import Target

NAME = "pipeline-planning"


def _uses(e: T.Expr, v: T.Var) -> bool:
    return any(x is v for x in sub_exprs(e))


def plan_loop(loop: T.For, target: Target, sched: KernelSchedule, disabled=(), rerun: bool = False,
              shared_bytes: dict[int, int] | None = None, request: LoopRequest | None = None,
              threads: int | None = None) -> LoopSchedule:
    """The plan for one Pipelined loop: the first copy mechanism the target offers (tilec/ir/copy_mechanisms.py,
    best first, less the disabled ones; not one that counts a single run of the loop when an enclosing loop runs
    it again, `rerun`) that can run it, else sync; `request` narrows the choice (stages, mechanism)."""
    request = request or LoopRequest()
    stages = request.stages if request.stages is not None else loop.num_stages
    var = loop.vars[0]
    producers = []
    written_elsewhere: set[T.Buffer] = set()
    for s in loop.body:
        if (isinstance(s, T.Copy) and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared"
                and any(_uses(x, var) for x in s.src.starts)):
            producers.append(s)
    producer_bufs = {p.dst.buffer for p in producers}
    for s in walk_stmts(loop.body):
        if s in producers:
            continue
        written = [r.buffer for r in ops.writes(s)] + ([s.buffer] if isinstance(s, T.Store) else [])
        written_elsewhere.update(b for b in written if b in producer_bufs)
    producers = [p for p in producers if p.dst.buffer not in written_elsewhere]
    # A producer's source may only depend on the loop variable and values fixed before the loop.
    assigned = {s.var for s in walk_stmts(loop.body) if isinstance(s, T.Assign)}
    producers = [p for p in producers
                 if not any(isinstance(x, T.Var) and x in assigned for e in p.src.starts for x in sub_exprs(e))]
    ctx = PlanContext(target, sched, shared_bytes or {}, threads)
    for m in mechanisms.offered(target, disabled):
        if request.mechanism not in (None, m.name) or (m.once_per_loop_run and rerun):
            continue
        if m.issues_ahead and not producers:
            continue
        got = m.stages_for(producers, stages, ctx)
        if got is not None:
            return LoopSchedule(got, m.name, producers)
    return LoopSchedule(1, mechanisms.FALLBACK.name, producers)


def _remark_plan(loop: T.For, plan: LoopSchedule, request: LoopRequest, target: Target, sched: KernelSchedule,
                 disabled, rep: Reporter) -> None:
    """Remarks on a Pipelined loop's plan: fewer stages than it asks for (category pipeline), and what the
    target's mechanisms say about it (on a target with TMA pipelines, a loop whose copies do not use TMA,
    category tma) -- each with the reason."""
    asked = loop.num_stages
    offered = mechanisms.offered(target)
    has_async = any(m.issues_ahead and m.fixed_stages is None for m in offered)
    has_staging = any(m.fixed_stages is not None for m in offered)
    if request.stages is None and plan.stages < asked:
        if not plan.producers:
            why = ("no copy global -> shared in its body reads a tile chosen by the loop variable (nothing to "
                   "prefetch)")
        elif mechanisms.named(plan.mechanism).register_staged:
            why = (f"{target.name} has no asynchronous copies: the next tiles are staged through registers into a "
                   "second shared buffer (double buffering)")
        elif not has_async and not has_staging:
            why = f"{target.name} has neither asynchronous copies nor register-staged double buffering"
        elif not has_async:
            why = (f"{target.name} has no asynchronous copies, and staging the tiles through registers does not fit "
                   "(a second shared buffer beyond the shared memory, or too many elements per thread)")
        else:
            why = "its copies cannot be issued ahead of the compute on this target"
        rep.remark("pipeline", f"Pipelined loop runs {plan.stages} stage(s), not the {asked} asked for: {why}",
                   loop.span)
    ctx = PlanContext(target, sched, {}, None)
    for m in offered:
        m.remark_plan(loop, plan, asked, ctx, disabled, rep)


def _top_level_loop_ok(k: T.Kernel, loop: T.For, plan: LoopSchedule) -> bool:
    """Warp specialization moves the copies of `loop` to a producer warpgroup that runs nothing else:
    the loop must sit at the kernel's top level, its trip count and copy sources must depend only on
    block indices, sizes, scalars and the loop variable, and nothing outside the loop may touch the
    buffers it fills."""
    if loop not in k.body:
        return False
    assigned = {s.var for s in walk_stmts(k.body) if isinstance(s, T.Assign)}
    launch_values = launch_value_assigns(k, loop)
    exprs = [*loop.extents, *(x for p in plan.producers for x in p.src.starts)]
    for e in exprs:
        for x in sub_exprs(e):
            if isinstance(x, T.Load) or (isinstance(x, T.Var) and x in assigned and
                                         not any(a.var is x for a in launch_values)):
                return False
    filled = {p.dst.buffer for p in plan.producers}
    inside = {s for s in walk_stmts(loop.body)}
    for s in walk_stmts(k.body):
        if s in inside or s is loop:
            continue
        if any(r.buffer in filled for r in ops.reads(s) + ops.writes(s)):
            return False
        if isinstance(s, T.Store) and s.buffer in filled:
            return False
    return True


@dataclass
class OverlapSplit:
    """A loop body [head..., first gemm, independent..., dependent..., last gemm] (producer copies aside)
    that may run as: head(j+1), first(j+1), last(j), independent(j+1) -- under both gemms --, dependent(j+1)
    once last(j) has completed. `early` producers are read only by the head and the first gemm (their stage
    is free once the first gemm has completed), `late` ones only by the last gemm."""

    head: list[T.Stmt]
    first: T.Gemm
    independent: list[T.Stmt]
    dependent: list[T.Stmt]
    last: T.Gemm
    early: list[T.Copy]
    late: list[T.Copy]


def _touched(stmts: list[T.Stmt]) -> tuple[set[T.Buffer], set[T.Buffer]]:
    """(ids of the buffers read, ids of the buffers written) anywhere in stmts."""
    reads: set[T.Buffer] = set()
    writes: set[T.Buffer] = set()
    for st in walk_stmts(stmts):
        reads.update(r.buffer for r in ops.reads(st))
        writes.update(r.buffer for r in ops.writes(st))
        if isinstance(st, T.Store):
            writes.add(st.buffer)
        for e in direct_exprs(st):
            reads.update(x.buffer for x in sub_exprs(e) if isinstance(x, T.Load))
    return reads, writes


def _warpgroup_async(sched: KernelSchedule, g: T.Gemm) -> bool:
    """Whether gemm g runs on an instruction issued asynchronously by warpgroups (sm90's wgmma), which the
    pipelines below keep in flight."""
    return gemm_impl.named(sched.instruction(g)).warpgroup_async


def overlap_split(loop: T.For, plan: LoopSchedule, sched: KernelSchedule) -> OverlapSplit | None:
    """The split of `loop`'s body that overlap_softmax runs, or None when moving the last gemm of an
    iteration past the next iteration's first statements would change what the loop computes: the loop has
    exactly two gemms, both on wgmma, the last one ends the body, the statements up to the first gemm touch
    nothing the last gemm reads or writes, the last gemm's operands use no value computed in the body, and
    each producer's tile is read either by the first part or by the last gemm only."""
    body = [st for st in loop.body if st not in plan.producers]
    gemms = [st for st in walk_stmts(body) if isinstance(st, T.Gemm)]
    if (len(gemms) != 2 or not all(_warpgroup_async(sched, g) for g in gemms) or gemms[0] not in body
            or body[-1] is not gemms[1]):
        return None
    first, last = gemms
    i = body.index(first)
    head, rest = body[:i], body[i + 1:-1]
    last_reads, last_writes = _touched([last])
    last_bufs = last_reads | last_writes
    head_reads, head_writes = _touched(head + [first])
    if (head_reads | head_writes) & last_writes or head_writes & last_reads:
        return None
    assigned = {st.var for st in walk_stmts(loop.body) if isinstance(st, T.Assign)}
    if any(isinstance(x, T.Var) and x in assigned
           for r in (last.a, last.b, last.c) for e in r.starts for x in sub_exprs(e)):
        return None
    cut = next((j for j, st in enumerate(rest) if set().union(*_touched([st])) & last_bufs), len(rest))
    rest_reads, _ = _touched(rest)
    early, late = [], []
    for p in plan.producers:
        tile = p.dst.buffer
        if tile in rest_reads:
            return None
        if tile in head_reads and tile not in last_reads:
            early.append(p)
        elif tile in last_reads and tile not in head_reads:
            late.append(p)
        else:
            return None
    return OverlapSplit(head, first, rest[:cut], rest[cut:], last, early, late)


def preload_copies(k: T.Kernel, loop: T.For, plan: LoopSchedule, sched: KernelSchedule) -> list[T.Copy]:
    """The global -> shared copies at the kernel's top level before `loop` that a producer warpgroup can issue
    through TMA before the loop: one box per panel (the mechanism's copy_ok), a source that depends only on launch
    values, and a tile nothing else in the kernel writes."""
    assigned = {s.var for s in walk_stmts(k.body) if isinstance(s, T.Assign)}
    launch = {a.var for a in launch_value_assigns(k, loop)}
    copy_ok = mechanisms.named(plan.mechanism).copy_ok
    out = []
    for st in k.body[:k.body.index(loop)]:
        if not (isinstance(st, T.Copy) and st.src.buffer.scope == "global" and st.dst.buffer.scope == "shared"
                and st not in plan.producers and copy_ok(st, PlanContext(None, sched, {}, None))):
            continue
        if any(isinstance(x, T.Load) or (isinstance(x, T.Var) and x in assigned and x not in launch)
               for e in st.src.starts for x in sub_exprs(e)):
            continue
        tile = st.dst.buffer
        if any(other is not st and tile in _touched([other])[1] for other in walk_stmts(k.body)):
            continue
        out.append(st)
    return out


def _plan_cluster(k: T.Kernel, target: Target, sched: KernelSchedule, loops: list[T.For],
                  plans: dict[int, LoopSchedule], rep: Reporter) -> None:
    """A thread-block cluster (Kernel(..., cluster=(cx, cy)), or the schedule's "cluster"): granted to a kernel
    whose pipeline `cluster_multicast` accepts; a Kernel keyword that cannot be granted is ignored with a remark
    (category cluster) saying why, a pinned schedule request is an error. The no-TMA twin is never clustered."""
    request = request_of(k)
    pinned = request.cluster
    shape = pinned if pinned is not None else request.keywords.cluster
    if shape == (1, 1) or k.internal:
        return
    dim = 0 if shape[0] > 1 else 1
    why = None
    multicast = [m for m in mechanisms.offered(target) if m.producer_warpgroup]  # (sm90: TMA)
    if not multicast:
        why = f"{target.name} has no thread-block clusters with TMA multicast (sm90 has)"
    elif multicast[0].name in k.disabled:
        why = f"{multicast[0].label} is turned off (--no-{multicast[0].name})"
    else:
        ws = [s for s in loops if plans[s.uid].warp_specialized]
        if not ws:
            why = "it applies to a warp-specialized TMA pipeline (the kernel's only Pipelined loop, at its top level)"
        elif sched.persistent:
            why = "the kernel is persistent (persistent=True): clusters apply to one output tile per block"
        else:
            shared, why = cluster_multicast(k, ws[0], plans[ws[0].uid], sched, dim)
    span = k.span
    text = f"cluster=({shape[0]}, {shape[1]})"
    if why is not None:
        if pinned is not None:
            rep.error(f"the schedule asks for a {shape[0]}x{shape[1]} cluster for kernel '{k.name}', which it cannot "
                      f"have: {why}", span)
        else:
            rep.remark("cluster", f"{text} is ignored for kernel '{k.name}' on {target.name}: {why}", span)
        return
    plans[ws[0].uid].multicast = shared
    sched.cluster = shape
    rep.remark("cluster", f"{text}: blocks {'side by side along grid x' if dim == 0 else 'along grid y'} share "
                          f"{', '.join(repr(p.dst.buffer.name) for p in shared)}; each loads half of it and TMA "
                          "multicasts it to both", span)


def _plan_pingpong(k: T.Kernel, target: Target, sched: KernelSchedule, loops: list[T.For],
                   plans: dict[int, LoopSchedule], rep: Reporter) -> None:
    """Persistent ping-pong (Kernel(..., pingpong=True), or the schedule's "pingpong"): granted to a persistent kernel
    that `pingpong_ok` accepts; a keyword that cannot be granted has no effect (a warning says why), a pinned request
    is an error. The no-TMA twin, an ordinary grid, says nothing."""
    request = request_of(k)
    pinned = request.pingpong
    wanted = pinned if pinned is not None else request.keywords.pingpong
    if not wanted or k.internal:
        return
    ws = [s for s in loops if plans[s.uid].warp_specialized]
    if not sched.persistent:
        why = ("it applies to a persistent kernel (persistent=True), warp-specialized: sm90, a TMA-pipelined loop at "
               "the kernel's top level")
    else:
        why = pingpong_ok(k, ws[0], plans[ws[0].uid], sched)
    if why is None:
        sched.pingpong = True
    elif pinned is not None:
        rep.error(f"the schedule asks for a ping-pong persistent kernel '{k.name}', which it cannot be: {why}", k.span)
    else:
        rep.warning(f"pingpong=True has no effect on kernel '{k.name}' for {target.name}: {why}", k.span)


def gemm_pipeline(loop: T.For, plan: LoopSchedule, sched: KernelSchedule) -> bool:
    """Whether a Pipelined loop is a gemm pipeline: its producer copies and one wgmma gemm accumulating into a
    fragment that nothing else in the loop touches (what ping-pong needs, and what sm90 lowering keeps one k-step
    of wgmma in flight for)."""
    rest = [st for st in loop.body if st not in plan.producers]
    return (len(rest) == 1 and isinstance(rest[0], T.Gemm) and _warpgroup_async(sched, rest[0])
            and not rest[0].clear_accum)


def pingpong_ok(k: T.Kernel, loop: T.For, plan: LoopSchedule, sched: KernelSchedule) -> str | None:
    """None when two consumer warpgroups can each run kernel k's body on alternate output tiles (ping-pong), else
    why not. The body must be written for one warpgroup (threads=128) around a gemm pipeline (the producer copies and
    one wgmma gemm accumulating into a fragment); the trip count may not depend on the tile (a tile's stages then
    start at its index in the block's sequence times the trip count, which both warpgroups and the producer compute
    alike); and the only shared tiles are the pipeline's (the warpgroups run the statements outside the loop at
    the same time, each for its own tile)."""
    if k.threads != 128:
        return f"it needs a kernel written for one consumer warpgroup (threads=128), not threads={k.threads}"
    if not gemm_pipeline(loop, plan, sched):
        return "the Pipelined loop is not a gemm pipeline (its copies and one wgmma gemm into an accumulator)"
    if any(isinstance(x, T.Load) or (isinstance(x, T.Var) and x.kind not in ("size", "param"))
           for e in loop.extents for x in sub_exprs(e)):
        return "the Pipelined loop's trip count depends on the tile (it may use only sizes and scalar parameters)"
    tiles = {p.dst.buffer for p in plan.producers}
    for st in walk_stmts(k.body):
        if isinstance(st, T.Alloc) and st.buffer.scope == "shared" and st.buffer not in tiles:
            return (f"shared tile '{st.buffer.name}' is not a tile of the pipeline (both consumer warpgroups would "
                    "use it at once)")
    return None


def cluster_multicast(k: T.Kernel, loop: T.For, plan: LoopSchedule, sched: KernelSchedule,
                      dim: int) -> tuple[list[T.Copy], str | None]:
    """(the producers both blocks of a 2-block cluster along grid dimension `dim` share, None) or ([], why not).
    The loop must be a gemm pipeline (its only statement besides the producers one wgmma gemm), nothing before or
    in it may write global memory (the blocks that round the grid up to whole clusters run the pipeline and skip
    what follows it), and at least one producer's source must not depend on the block index along `dim` (after
    rasterization) with a tile TMA can load in two halves of rows (panel layout, rows a multiple of 16)."""
    rest = [st for st in loop.body if st not in plan.producers]
    if not (len(rest) == 1 and isinstance(rest[0], T.Gemm) and _warpgroup_async(sched, rest[0])):
        return [], "the Pipelined loop is not a gemm pipeline (its copies and one gemm on wgmma)"
    if plan.overlap_softmax or plan.preloads:
        return [], "the loop overlaps the softmax or preloads tiles"
    for st in walk_stmts(k.body[:k.body.index(loop) + 1]):
        if any(r.buffer.scope == "global" for r in ops.writes(st)) or (
                isinstance(st, T.Store) and st.buffer.scope == "global"):
            return [], "a statement before the pipeline or in it writes global memory"
    raster = sched.raster_assigns
    block = raster[dim].var if raster is not None else k.block_vars[dim]
    assigns = {a.var: a for a in launch_value_assigns(k, loop)}

    def depends(e: T.Expr, seen=()) -> bool:
        for x in sub_exprs(e):
            if x is block:
                return True
            if isinstance(x, T.Var) and x in assigns and x not in seen:
                if depends(assigns[x].value, (*seen, x)):
                    return True
        return False

    shared = []
    for p in plan.producers:
        lay = sched.shared.get(p.dst.buffer.uid)
        rows = [e for e in p.src.const_extents if e != 1]
        if (any(depends(x) for x in p.src.starts) or lay is None or not (lay.panel and lay.swizzle)
                or len(rows) != 2 or rows[0] != lay.rows or lay.rows % 16):
            continue
        shared.append(p)
    if not shared:
        return [], (f"no producer tile is the same for the blocks side by side along grid {'xy'[dim]} (a copy whose "
                    f"source does not depend on the block index along {'xy'[dim]}, into a wgmma tile of 16k rows)")
    return shared, None


def launch_value_assigns(k: T.Kernel, loop: T.For) -> list[T.Assign]:
    """The top-level assignments before `loop` whose values depend only on launch values (block
    indices, sizes, scalars and earlier such assignments) -- what a producer warpgroup recomputes."""
    counts: dict[T.Var, int] = {}
    for s in walk_stmts(k.body):
        if isinstance(s, T.Assign):
            counts[s.var] = counts.get(s.var, 0) + 1
    ok: list[T.Assign] = []
    ok_ids: set[T.Var] = set()
    for s in k.body:
        if s is loop:
            break
        if isinstance(s, T.Assign) and counts[s.var] == 1:
            xs = list(sub_exprs(s.value))
            if not any(isinstance(x, T.Load) or (isinstance(x, T.Var) and x in counts and x not in ok_ids)
                       for x in xs):
                ok.append(s)
                ok_ids.add(s.var)
    return ok


def _nested_loop_uids(body: list[T.Stmt]) -> set[int]:
    """The loops that run inside another loop's body (each run of the outer loop runs them again)."""
    return {inner.uid for outer in walk_stmts(body) if isinstance(outer, T.For | T.While)
            for inner in walk_stmts(outer.body) if isinstance(inner, T.For)}


def run(module: T.Module, rep: Reporter, target: Target) -> T.Module:
    for k in module.kernels:
        sched = k.schedule if k.schedule is not None else KernelSchedule()
        k.schedule = sched
        disabled = k.disabled
        warpgroup_copies = {m.name for m in mechanisms.offered(target) if m.producer_warpgroup}  # (sm90: TMA)
        tma_ok = bool(warpgroup_copies - set(disabled))
        shared_bytes = {uid: lay.size * lay.elem_bytes for uid, lay in sched.shared.items()}
        loops = [s for s in walk_stmts(k.body) if isinstance(s, T.For) and s.kind == "pipelined"]
        request = request_of(k)
        asked = request.keywords  # the source's keywords: granted where they can be, else a warning says why
        requests = {s.uid: request.loop(s) for s in loops}
        if not tma_ok and k.internal:  # the TMA-less twin of a kernel: its pins on TMA do not apply
            requests = {uid: LoopRequest(r.stages, None if r.mechanism in warpgroup_copies else r.mechanism, None)
                        for uid, r in requests.items()}
        plans: dict[int, LoopSchedule] = {}
        nested = _nested_loop_uids(k.body)
        for s in loops:
            # TMA's mbarrier phases count one run of the loop from zero: a loop run again by an enclosing loop would
            # wait on the previous run's phases, so it gets cp.async
            plans[s.uid] = plan_loop(s, target, sched, disabled, s.uid in nested, shared_bytes, requests[s.uid],
                                     k.threads)
            sched.labels[s.uid] = f"#{s.uid} {s.vars[0].name}" + (f" (line {s.span.line})" if s.span else "")
        tma_loops = [s for s in loops if mechanisms.named(plans[s.uid].mechanism).producer_warpgroup]
        if loops:
            first = loops[0]
            wanted = requests[first.uid].warp_specialized
            can = (len(loops) == 1 and bool(tma_loops) and "warp_specialize" not in disabled
                   and _top_level_loop_ok(k, first, plans[first.uid]))
            if can and (wanted if wanted is not None else asked.warp_specialize):
                plans[first.uid].warp_specialized = True
        for s in loops:
            req, plan = requests[s.uid], plans[s.uid]
            if req.mechanism is not None and plan.mechanism != req.mechanism:
                rep.error(f"the schedule asks for copy mechanism '{req.mechanism}' for this loop, which it cannot "
                          f"use here; it can use '{plan.mechanism}'", s.span)
            if req.warp_specialized and not plan.warp_specialized:
                rep.error("the schedule asks for warp specialization of this loop, which needs the kernel's only "
                          "Pipelined loop, at its top level, on TMA", s.span)
        ws = any(p.warp_specialized for p in plans.values())
        wants_persistent = request.persistent if request.persistent is not None else asked.persistent
        if wants_persistent and not ws and not k.internal:  # (the TMA-less twin says nothing)
            rep.warning(f"persistent=True has no effect on kernel '{k.name}' for {target.name}: it applies to "
                        "warp-specialized kernels (sm90, a TMA-pipelined loop at the kernel's top level)", k.span)
        for s in loops:
            plan = plans[s.uid]
            wanted = requests[s.uid].overlap_softmax
            if wanted is None:
                wanted = asked.overlap_softmax and not k.internal
            if not wanted:
                continue
            if plan.warp_specialized and not wants_persistent and overlap_split(s, plan, sched) is not None:
                plan.overlap_softmax = True
            elif requests[s.uid].overlap_softmax:
                rep.error("the schedule asks for the softmax to overlap the gemms in this loop, which needs a "
                          "warp-specialized, not persistent loop whose body is [statements, gemm, statements, gemm] "
                          "on wgmma (pipeline_planning.overlap_split)", s.span)
            else:
                rep.warning(f"overlap_softmax=True has no effect on this loop of kernel '{k.name}' for "
                            f"{target.name}: it applies to a warp-specialized, not persistent loop whose body is "
                            "[statements, gemm, statements, gemm] on wgmma (sm90)", s.span)
        if asked.tma_preload and not k.internal:
            ws_loops = [s for s in loops if plans[s.uid].warp_specialized]
            if ws_loops and not wants_persistent:
                plans[ws_loops[0].uid].preloads = preload_copies(k, ws_loops[0], plans[ws_loops[0].uid], sched)
            if not ws_loops or wants_persistent or not plans[ws_loops[0].uid].preloads:
                rep.warning(f"tma_preload=True has no effect on kernel '{k.name}' for {target.name}: it applies to "
                            "TMA-able copies before a warp-specialized, not persistent loop (sm90)", k.span)
        if not k.internal:  # (a no-TMA twin repeats its kernel's remarks)
            for s in loops:
                _remark_plan(s, plans[s.uid], requests[s.uid], target, sched, disabled, rep)
        sched.loops.update(plans)
        sched.persistent = wants_persistent and ws
        _plan_pingpong(k, target, sched, loops, plans, rep)
        _plan_cluster(k, target, sched, loops, plans, rep)
    rep.check()
    return module
