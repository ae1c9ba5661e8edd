"""The remarks that need a compiled kernel run, not just planned: bank conflicts of shared-memory accesses.

Assumes: a CompileResult of a SIMT back end (its Tile IR kernels carry their schedules, its SIMT module the
lowered code). Guarantees: one remark (category bank-conflicts) per shared tile whose traced accesses in block
(0, 0, 0) (access.py) conflict, at the tile's allocation, naming the access, the phases that conflict and the
worst degree. The passes' own remarks (tensor cores, TMA, pipeline stages) are made where those decisions are.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic
from ..ir import tile as T
from ..ir.visit import walk_stmts


def bank_conflict_remarks(result, sizes: dict[str, int] | None = None) -> list[Diagnostic]:
    from .access import trace

    simt = getattr(result, "simt", None)
    if simt is None or not hasattr(simt, "kernels") or result.target is None:
        return []
    out = []
    for k in result.module.kernels:
        if k.internal or k.schedule is None or not k.schedule.shared:
            continue
        sk = next((s for s in simt.kernels if s.name == k.name), None)
        if sk is None:
            continue
        allocs = {s.buffer.name: s.buffer for s in walk_stmts(k.body) if isinstance(s, T.Alloc)}
        sizes_of = {allocs[n].name: lay.size for uid, lay in k.schedule.shared.items()
                    for n in allocs if allocs[n].uid == uid}
        report = trace(k, sk, result.target.warp_size, sizes, sizes_of)
        if not report.traced:
            continue
        for st in report.stats:
            if st.conflicting and st.buffer in allocs:
                where = f" (lowered from line {st.line})" if st.line else ""
                out.append(Diagnostic(
                    "remark", f"shared tile '{st.buffer}': its {st.kind}s by {st.op}{where} have bank conflicts: "
                              f"{st.conflicting} of {st.phases} warp phases in block (0, 0, 0), up to "
                              f"{st.worst:g}-way (tilec layout --buffer {st.buffer} shows where)",
                    allocs[st.buffer].span, category="bank-conflicts"))
    return out
