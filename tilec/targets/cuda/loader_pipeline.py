"""sm90's loader warpgroup as a copy mechanism (tilec/ir/copy_mechanisms.py): where TMA cannot load a gemm
pipeline's tiles -- rows that are not 16-byte aligned, whose boxes the H200 refuses (bench/RESULTS.md s22) -- the
producer warpgroup's threads load them (each tile by its own warps), 16 bytes a thread, realigning misaligned rows out
of the aligned chunks that cover them, store them into the stage, fence them into the async proxy and arrive on the
tile's mbarrier, having asked L2 for the next iteration's tiles first; the consumers run the TMA pipeline's loop
unchanged. Against the cp.async twin, whose consumers load the next stage
themselves between a wgmma's commit and its wait, the loads of several stages are in flight while the consumers
compute. Offered only where asked (--loader-warpgroup: the "loader" feature is disabled otherwise), and only for a
warp-specialized gemm pipeline (pipeline-planning re-plans any other loop without it). Its lowering is
hopper_lowering.py's, beside TMA's."""

from __future__ import annotations

from ...ir import tile as T
from ...ir.copy_mechanisms import CopyMechanism, PlanContext


class LoaderWarpgroup(CopyMechanism):
    """A producer warpgroup whose threads copy every producer tile (16 bytes a thread, misaligned rows realigned),
    completion tracked by one mbarrier arrival from each warp that copies the tile."""

    name = "loader"
    label = "a loader warpgroup"
    stages_aligned = True  # (the same stage layout as TMA's: the consumers' loop is TMA's)
    mbarriers = True
    producer_warpgroup = True
    only_warp_specialized = True
    once_per_loop_run = True  # mbarrier phases count one run of the loop from zero
    intrinsics = ("mbar_init", "mbar_wait", "mbar_arrive_warp", "fence_proxy_async")

    def copy_ok(self, p: T.Copy, ctx: PlanContext) -> bool:
        """A global -> shared copy of one element type into a tile the threads store row by row (not a K-major tile,
        which goes through registers element by element)."""
        src, dst = p.src, p.dst
        lay = ctx.sched.shared.get(dst.buffer.uid) if ctx.sched is not None else None
        return (src.buffer.scope == "global" and dst.buffer.scope == "shared" and src.buffer.dtype == dst.buffer.dtype
                and lay is not None and not lay.transposed and lay.index_map is None)
