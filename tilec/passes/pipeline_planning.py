"""pipeline-planning — how each `Pipelined` loop overlaps its loads with its compute.

Assumes: layout-inference has run.
Guarantees: `kernel.attrs["pipelines"]` maps every Pipelined loop to a PipelinePlan:
  * `producers`: the global→shared copies at the top level of the loop body whose source moves
    with the loop variable and whose destination is only written there; they are issued
    `stages - 1` iterations ahead;
  * `stages`: num_stages when the target has asynchronous copies (cp.async) and there are
    producers; 2 on AMD (register-staged double buffering); else 1 (load, barrier, compute, barrier);
  * `mechanism`: "cp.async", "registers" (AMD) or "sync";
  * every producer's shared buffer is multi-buffered `stages` times by lowering.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Reporter
from ..ir import tile as T
from ..ir.visit import sub_exprs, walk_stmts
from ..targets.registry import Target

NAME = "pipeline-planning"


@dataclass
class PipelinePlan:
    stages: int
    mechanism: str
    producers: list[T.Copy] = field(default_factory=list)

    def __str__(self) -> str:
        bufs = ", ".join(p.dst.buffer.name for p in self.producers) or "none"
        return f"{self.stages} stage(s), {self.mechanism}, prefetched: {bufs}"


def _uses(e: T.Expr, v: T.Var) -> bool:
    return any(x is v for x in sub_exprs(e))


def plan_loop(loop: T.For, target: Target, shared_bytes: dict[int, int] | None = None) -> PipelinePlan:
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
    if producers and "cp.async" in target.async_copy and loop.num_stages >= 2:
        return PipelinePlan(loop.num_stages, "cp.async", producers)
    if producers and target.backend == "hip" and loop.num_stages >= 2:
        # AMD has no cp.async: the next iteration's tiles are loaded into registers before this iteration's
        # compute and stored to the other of two shared buffers after it (one barrier per iteration) -- where
        # the second buffers fit in the target's shared memory (else the plain loop).
        sizes = shared_bytes or {}
        extra = sum(sizes.get(id(p.dst.buffer), 0) for p in producers)
        if sum(sizes.values()) + extra <= target.shared_memory_bytes:
            return PipelinePlan(2, "registers", producers)
    return PipelinePlan(1, "sync", producers)


def run(module: T.Module, rep: Reporter, target: Target) -> T.Module:
    for k in module.kernels:
        plans = {}
        table = k.attrs.get("layouts")
        shared_bytes = {key: lay.size * lay.elem_bytes for key, lay in table.shared.items()} if table else {}
        for s in walk_stmts(k.body):
            if isinstance(s, T.For) and s.kind == "pipelined":
                plans[id(s)] = plan_loop(s, target, shared_bytes)
        k.attrs["pipelines"] = _PlanTable(plans, k)
    return module


class _PlanTable(dict):
    def __init__(self, plans, kernel):
        super().__init__(plans)
        self._names = {id(s): s.vars[0].name for s in walk_stmts(kernel.body) if isinstance(s, T.For)}

    def __str__(self) -> str:
        return "".join(f"\n    loop {self._names[key]}: {plan}" for key, plan in self.items())
