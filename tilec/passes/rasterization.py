"""rasterization — reorder thread blocks for L2 reuse (`use_swizzle(panel_size)`).

Assumes: check-tile-ops has run; the kernel's grid is (gx, gy, gz).
Guarantees: when the kernel asks for `use_swizzle(panel_size=P)` (enabled), its block indices
are remapped at entry so that consecutive blocks walk down a panel of P block-rows before moving
one block-column right (grouped ordering): blocks that run together share A and B tiles in L2.
The mapping is a bijection of the grid, so every block still runs exactly once; kernels without
use_swizzle are unchanged. The kernel's schedule records the panel size (`schedule.rasterization`).
"""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.schedule import KernelSchedule, grouped_order
from ..ir.visit import rewrite_body, walk_stmts

NAME = "rasterization"


def run(module: T.Module, rep: Reporter, target=None) -> T.Module:
    for k in module.kernels:
        swz = [s for s in walk_stmts(k.body) if isinstance(s, T.UseSwizzle) and s.enable]
        if not swz:
            continue
        panel = swz[0].panel_size
        bx, by = k.block_vars[0], k.block_vars[1]
        gx, gy = k.grid[0], k.grid[1]
        new_x = T.Var(D.I32, None, f"{bx.name}_swizzled", "local")
        new_y = T.Var(D.I32, None, f"{by.name}_swizzled", "local")
        x_value, y_value = grouped_order(bx, by, gx, gy, panel)
        mapping = {bx: new_x, by: new_y}
        body = rewrite_body(k.body, lambda e, m=mapping: m.get(e) if isinstance(e, T.Var) else None)
        prologue = [T.Assign(None, new_y, y_value), T.Assign(None, new_x, x_value)]
        k.body = prologue + body
        k.schedule = k.schedule if k.schedule is not None else KernelSchedule()
        k.schedule.rasterization = panel
        k.schedule.raster_assigns = (prologue[1], prologue[0])
    return module
