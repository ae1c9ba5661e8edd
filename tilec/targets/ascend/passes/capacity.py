"""Capacity and queue checks of each lowered kernel against the 910B's on-chip memories.

Assumes: lowered KernelPrograms (every allocation known, temporaries included). Guarantees: each memory (UB 184 KB
usable, L1 512 KB - 128 B, L0A/L0B 64 KB, L0C 128 KB: chip.MEMORIES) holds its buffers with their alignments;
otherwise an error at the user's line of the largest buffer, naming every buffer of that memory with its size.
Queue buffers against the hardware event ids are the event-id pass's.
"""

from __future__ import annotations

from ....diagnostics import CompileError, Diagnostic, Reporter
from ..chip import MEMORIES, round_up
from ..program import KernelProgram

NAME = "ascend-capacity"


def check_program(p: KernelProgram) -> None:
    for side in p.sides:
        _check_side(p, side.allocs)


def _check_side(p: KernelProgram, side_allocs) -> None:
    for mem in MEMORIES.values():
        allocs = [a for a in side_allocs if a.memory == mem.name]
        used = 0
        for a in allocs:
            used = round_up(used, mem.align) + a.bytes
        if used > mem.bytes:
            biggest = max(allocs, key=lambda a: a.bytes)
            listing = ", ".join(f"{a.user or a.name} {a.bytes} B" + (f" ({a.depth} x {a.buffer_bytes})" if a.depth > 1
                                                                     else "") for a in allocs)
            # category: a resource error, which `tilec --fit` (tuning/fit.py) answers with smaller tiles
            raise CompileError([Diagnostic(
                "error", f"kernel '{p.name}' needs {used} bytes of {mem.name} but the Ascend 910B has {mem.bytes} "
                f"({listing}); make the tiles smaller (-D) or use fewer pipeline stages", biggest.span or p.span,
                category="shared-memory")])


def run(programs: list[KernelProgram], rep: Reporter, target) -> list[KernelProgram]:
    for p in programs:
        check_program(p)
    return programs
