"""Queue buffers against the hardware event ids CANN's TPipe hands out.

Assumes: lowered KernelPrograms with their queue depths. Guarantees: on every core, the queue buffers that draw
ids from one HardEvent pool fit in it, so CANN's `AllocEventID` never runs dry.

The rule (asc-devkit 8.5, TQueBind and TPipe): each HardEvent has a pool of 8 ids. A queue buffer takes an id of
its position's EnQue event at `EnQue` and gives it back at `DeQue`; it takes one of its FreeTensor event at
`FreeTensor` and keeps it until it is allocated again. Every queue buffer that has been used once therefore
holds a FreeTensor id, so the buffers of all positions sharing that event must number at most 8: A2 and B2
share M_MTE1, A1/B1/C1 share MTE1_MTE2; on the cube core the TPipe itself holds M_MTE1 ids 0, 1 and 2, leaving 5
for the L0A and L0B queues. When the L0 queues (or the L1 queues) are too many, they are single-buffered (the
MTE1 load of the next gemm then waits for the Mmad of the previous one, which tilec's lowering orders anyway;
the lowering also shares one L0A and one L0B queue among more than 5 operands); a kernel that still does not
fit is refused at the line of its first gemm operand, naming the buffers.
"""

from __future__ import annotations

from ....diagnostics import Reporter, error
from ..program import KernelProgram

NAME = "ascend-event-ids"

QUE_MAX_EVENT = 8
# The FreeTensor event of each queue position on dav-c220 (the EnQue events are given back before the next use).
FREE_EVENT = {"VECIN": "V_MTE2", "VECOUT": "MTE3_V", "A1": "MTE1_MTE2", "B1": "MTE1_MTE2", "C1": "MTE1_MTE2",
              "A2": "M_MTE1", "B2": "M_MTE1", "CO1": "FIX_M"}
RESERVED_ON_CUBE = {"M_MTE1": 3}  # TPipe's constructor on the AIC: the Matmul macro's ids 0, 1 and the bias's 2


def event_budget(event: str, cube: bool) -> int:
    return QUE_MAX_EVENT - (RESERVED_ON_CUBE.get(event, 0) if cube else 0)


def fit_side(p: KernelProgram, allocs, cube: bool) -> None:
    by_event: dict[str, list] = {}
    for a in allocs:
        if a.depth and a.position in FREE_EVENT:
            by_event.setdefault(FREE_EVENT[a.position], []).append(a)
    for event, queued in by_event.items():
        budget = event_budget(event, cube)
        if sum(a.depth for a in queued) > budget and event in ("M_MTE1", "MTE1_MTE2"):
            for a in queued:  # L0 and L1 operand queues that would run out are single-buffered (no overlap)
                a.depth = 1
        held = sum(a.depth for a in queued)
        if held > budget:
            listing = ", ".join(f"{a.name} x{a.depth} ({a.position})" for a in queued)
            reserved = " (the cube core's TPipe holds 3 of the 8)" if cube and event in RESERVED_ON_CUBE else ""
            spans = [a.span for a in queued if a.span]
            raise error(f"kernel '{p.name}' has {held} queue buffers that each hold a {event} event id ({listing}), "
                        f"but AscendC has {budget} free{reserved}: CANN's AllocEventID would run out; use fewer "
                        "pipeline stages, fewer gemm operands or fewer gemms per kernel", spans[0] if spans else p.span)


def run(programs: list[KernelProgram], rep: Reporter, target) -> list[KernelProgram]:
    for p in programs:
        for side in p.sides:
            cube = side.guard == "ASCEND_IS_AIC" or (side.guard is None and p.kernel_type == "AIC_ONLY")
            fit_side(p, side.allocs, cube)
    return programs
