"""The cube/vector hand-over of mixed kernels (part of the lowering): each group's GM workspace, and the AIV side
of a gemm.

A gemm operand the vector cores compute is copied by AIV 0 to its workspace slot (MTE3), then
`CrossCoreSetFlag<2, PIPE_MTE3>(3g)`; the AIC waits for it, loads the slot with Nd2Nz and runs the gemm into a
fresh L0C tile, Fixpipes the product to the accumulator's slot and sets flag 3g + 1; the AIVs wait for it, copy
the product into UB, add it to the accumulator and set flag 3g + 2, which the AIC waits for before it may
overwrite the slot. Both AIVs run every flag (mode 2: the AIC's counter moves when both have set); each works on
its half of the block's rows (passes/split_rows.py), or, where the vector work is not row-separable, both
compute every row and AIV 0 alone writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import dtypes as D
from ...ir import tile as T
from ...ir.visit import walk_stmts
from .chip import ctype, round_up


@dataclass
class Workspace:
    name: str  # ws_<buffer>
    buffer: str
    ctype: str
    rows: int
    cols: int
    offset: int  # bytes into the group's workspace

    def region(self, dtype, half_rows: int | None = None) -> T.Region:
        """The whole slot, or (half_rows) this AIV's rows of it: row0 = GetSubBlockIdx() * half_rows."""
        buf = T.Buffer(self.name, dtype, [T.Const(D.I32, None, self.rows), T.Const(D.I32, None, self.cols)],
                       "global", None)
        zero = T.Const(D.I32, None, 0)
        start = T.Var(D.I32, None, "row0", "param") if half_rows else zero
        rows = half_rows or self.rows
        return T.Region(buf, [start, zero], [T.Const(D.I32, None, rows), T.Const(D.I32, None, self.cols)], None)


def workspace_layout(k: T.Kernel) -> tuple[dict[str, Workspace], int]:
    """One GM slot per handed-over buffer (gemm operands the AIVs compute, accumulators they compute on)."""

    plan = k.attrs["ascend"]
    out: dict[str, Workspace] = {}
    offset = 0
    for g in walk_stmts(k.body):
        if not isinstance(g, T.Gemm):
            continue
        for region in (g.a, g.b, g.c):
            b = region.buffer
            if b.name in out or (b.name not in plan.workspace_operands and b.name not in plan.vector_accumulators):
                continue
            rows, cols = b.const_shape
            ty = ctype(b.dtype)
            out[b.name] = Workspace(f"ws_{b.name}", b.name, ty, rows, cols, offset)
            offset += round_up(rows * cols * b.dtype.bytes, 512)
    return out, offset


FLAG_SETS = 3  # 9 of the 11 cross-core flag ids a kernel may use: gemm i takes set i % 3


def flags(lw, g: T.Gemm) -> tuple[int, int, int]:
    """The (ready, product, consumed) flag ids of gemm `g`. A flag is a counter: the k-th set of an id on one side
    is matched by the k-th wait of it on the other, and both sides run the gemms in the same program order (the
    scalar control flow is theirs alike), so gemms i and i + 3 may share ids, as one gemm's successive loop
    iterations already do; the AIVs wait for each product (and the AIC for each consumption) before the next
    hand-over on the same ids, so no counter runs more than one set ahead."""
    i = lw.gemm_index[g] % FLAG_SETS
    return 3 * i, 3 * i + 1, 3 * i + 2


def vector_gemm(lw, g: T.Gemm) -> None:
    """The AIV side of one gemm of a mixed kernel: hand operands over, receive and add the product."""
    plan = lw.plan
    ready, product, consumed = flags(lw, g)
    handed = False
    for region in (g.a, g.b):
        b = region.buffer
        if b.name in plan.workspace_operands:
            ws = lw.workspace[b.name]
            lw.copy_out(b, ws.region(b.dtype, lw.half_rows), g.span)
            handed = True
    if handed:
        lw.emit(f"CrossCoreSetFlag<2, PIPE_MTE3>({ready});")
    acc = g.c.buffer
    if acc.name not in plan.vector_accumulators:
        return
    ws = lw.workspace[acc.name]
    staged = lw.temp()  # the product, staged in a pool temporary
    lw.layouts[staged] = lw.layouts[acc.name]
    lw.emit(f"CrossCoreWaitFlag<2, PIPE_MTE2>({product});")
    lw.copy_in(ws.region(acc.dtype, lw.half_rows), acc, g.span, name=staged)
    lw.emit(f"CrossCoreSetFlag<2, PIPE_MTE2>({consumed});")
    lw.first_touch(acc.name)
    n = lw.allocs[acc.name].count
    if g.clear_accum:  # gemm(..., clear_accum=True): the product replaces the accumulator
        lw.v(f"Adds({acc.name}, {staged}, 0.0f, {n});", [staged], [acc.name])
    else:
        lw.v(f"Add({acc.name}, {acc.name}, {staged}, {n});", [acc.name, staged], [acc.name])
    lw.release(staged)
