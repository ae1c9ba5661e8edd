"""`tilec layout`'s library side: compile a kernel for a target and build the views of its layouts.

Assumes: a .tile source that compiles for the target. Guarantees: one View (views.py) per fragment and shared
tile of each user kernel (the no-TMA twins are skipped), then the operand atoms of each matrix instruction its
gemms run on (from the back end's tables, Backend.operand_tables); shared tiles carry the bank conflicts of block
(0, 0, 0)'s traced accesses (access.py). A back end without threads (Ascend) shows how it stores its tiles
instead (Backend.placed_tiles: each cube operand's NZ fractals in L1).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import CompileError, Diagnostic
from ..ir import tile as T
from ..ir.visit import walk_stmts
from ..ops import gemm_impl
from .views import View, fragment_view, placed_view, shared_view, table_view, wgmma_view


@dataclass
class LayoutReport:
    views: list[View]
    summary: str  # what the command prints: each layout and each traced access pattern


def kernel_views(source: str, options, buffer: str | None = None, sizes: dict[str, int] | None = None,
                 trace_accesses: bool = True) -> LayoutReport:
    from ..driver import compile as compile_ir

    result = compile_ir(source, options)
    target = result.target
    kernels = [k for k in result.module.kernels if not k.internal]
    views: list[View] = []
    lines: list[str] = []
    known: list[str] = []
    for k in kernels:
        buffers = {s.buffer.uid: s.buffer for s in walk_stmts(k.body) if isinstance(s, T.Alloc)}
        known += [b.name for b in buffers.values() if b.scope in ("fragment", "shared")]
        placed = result.backend.placed_tiles(k)
        if placed or k.schedule is None:  # a back end without threads (Ascend): how it stores the tiles
            for p in placed:
                if buffer in (None, p.name):
                    views.append(placed_view(p))
                    lines.append(f"{k.name}: {p.title}")
            if not placed:
                lines.append(f"{k.name}: no on-chip tiles")
            continue
        sched = k.schedule
        report = None
        if trace_accesses and sched.shared and (buffer is None or any(
                buffers[u].name == buffer for u in sched.shared)):
            from .access import trace

            sk = next(s for s in result.simt.kernels if s.name == k.name)
            per_stage = {buffers[u].name: lay.size for u, lay in sched.shared.items()}
            report = trace(k, sk, target.warp_size, sizes, per_stage)
        for uid, lay in sched.fragments.items():
            b = buffers[uid]
            if buffer in (None, b.name):
                views.append(fragment_view(b.name, lay, k.threads, target.warp_size))
                lines.append(f"{k.name}: fragment {b.name}: {lay}")
        for uid, lay in sched.shared.items():
            b = buffers[uid]
            if buffer not in (None, b.name):
                continue
            accesses = []
            if report is not None and not report.traced:
                accesses.append(f"access pattern not traced: {report.reason}")
            elif report is not None:
                accesses = [s.describe() for s in report.of(b.name)] or [
                    "no lane accesses it (written by TMA / read by wgmma descriptors, or unused)"]
            hit = report.worst_collision(b.name) if report is not None and report.traced else None
            collision = (f"{hit[0].kind} by {hit[0].op}" + (f" (line {hit[0].line})" if hit[0].line else ""),
                         hit[1], hit[2]) if hit else None
            views.append(shared_view(b.name, lay, report.conflicting_offsets(b.name) if report else None, accesses,
                                     collision))
            lines.append(f"{k.name}: shared {b.name}: {lay}")
            lines += [f"    {a}" for a in accesses]
        if buffer is None:
            seen = set()
            for g in sched.gemms.values():
                n = g.shape[1] if g.shape else None
                impl = gemm_impl.named(g.instruction)
                if impl.tensor_core and (g.instruction, n) not in seen:
                    seen.add((g.instruction, n))
                    # (a warpgroup instruction's A and B come from shared memory: its D fragment alone)
                    views += ([wgmma_view(n)] if impl.warpgroup_async else
                              [table_view(t) for t in result.backend.operand_tables(g.instruction)])
                lines.append(f"{k.name}: gemm: {g}")
    if buffer is not None and not views:
        raise CompileError([Diagnostic("error", f"--buffer {buffer}: no fragment or shared tile of that name "
                                                f"(there are: {', '.join(sorted(set(known))) or 'none'})")])
    return LayoutReport(views, "\n".join(lines) + "\n")
