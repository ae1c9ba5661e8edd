"""sm90's TMA pipelines as a copy mechanism (tilec/ir/copy_mechanisms.py): which producer copies one TMA box can
do, and the remarks a TMA target makes about each loop's plan. (Their lowering -- tensor maps, mbarriers, the
producer warpgroup -- is hopper_lowering.py's, the sm90 target's LoweringExtension.)"""

from __future__ import annotations

from ...ir import copy_mechanisms as mechanisms
from ...ir import tile as T
from ...ir.copy_mechanisms import CopyMechanism, PlanContext
from ...ir.fold import multiple_of


def starts_16_bytes_in(region: T.Region) -> bool:
    """Whether a global region's first column always lies a multiple of 16 bytes into its row: a TMA box must (the
    H200 stops a load that starts 3 bytes in with an illegal instruction, bench/RESULTS.md s22)."""
    return multiple_of(region.starts[-1], max(1, 16 // region.buffer.dtype.bytes))


def tma_copy_ok(p: T.Copy, sched) -> bool:
    """A global->shared copy one TMA box (or one per 128-byte panel) can do: the whole destination
    tile, the same element type, a source box of at most 256 per dimension starting a multiple of 16 bytes into
    its row, and a destination layout that TMA writes (a swizzled panel layout, or linear rows of a multiple of 16
    bytes)."""
    src, dst = p.src, p.dst
    lay = sched.shared.get(dst.buffer.uid)
    exts = src.const_extents
    if (lay is None or exts is None or src.buffer.dtype != dst.buffer.dtype or len(src.buffer.shape) > 5
            or lay.index_map is not None  # (a user's layout: TMA writes none)
            or not starts_16_bytes_in(src)):
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


class TmaPipeline(CopyMechanism):
    """Every producer one TMA box per 128-byte panel, completion tracked by mbarriers; warp-specialized where the
    loop qualifies (pipeline-planning)."""

    name = "tma"
    label = "TMA"
    stages_aligned = True
    mbarriers = True
    producer_warpgroup = True
    once_per_loop_run = True  # mbarrier phases count one run of the loop from zero
    intrinsics = ("mbar_init", "mbar_expect_tx", "mbar_wait", "tma_load")

    def copy_ok(self, p: T.Copy, ctx: PlanContext) -> bool:
        return tma_copy_ok(p, ctx.sched)

    def remark_plan(self, loop: T.For, plan, asked: int, ctx: PlanContext, disabled, rep) -> None:
        """How each loop loads its tiles and, when not with TMA, why (category tma)."""
        if plan.producers and plan.mechanism != self.name and asked >= 2:
            if self.name in disabled:
                why = "TMA is turned off (--no-tma)"
            else:
                bad = [p.dst.buffer.name for p in plan.producers if not tma_copy_ok(p, ctx.sched)]
                why = (f"the copy into {', '.join(repr(b) for b in bad)} is not one TMA box (a whole tile, same "
                       "element type, at most 256 per dimension, starting a multiple of 16 bytes into its row, in a "
                       "layout TMA writes)" if bad
                       else "the schedule asks for another mechanism")
            how = mechanisms.named(plan.mechanism).label
            rep.remark("tma", f"Pipelined loop loads its tiles with {how}, not TMA: {why}", loop.span)
        elif plan.mechanism == self.name:
            how = ", from a producer warpgroup (warp-specialized)" if plan.warp_specialized else ""
            rep.remark("tma", f"Pipelined loop loads {', '.join(repr(p.dst.buffer.name) for p in plan.producers)} "
                              f"with TMA, {plan.stages} stages{how}", loop.span)
