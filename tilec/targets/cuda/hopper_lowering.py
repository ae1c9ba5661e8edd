"""The Hopper (sm90) parts of lower-to-simt: TMA copies, mbarrier pipelines, wgmma, warp specialization.

The sm90 target's LoweringExtension: the generic lowering hands it a Pipelined loop that pipeline-planning gave the
"tma" mechanism, a gemm that layout-inference gave "wgmma", a warpgroup accumulator stored to global memory (TMA
stores); it talks back only through the lowering context (tilec/passes/lowering_extension.py).

Pipelines (stage s = iteration % stages, phase = (iteration / stages) & 1):
  * full[p][s]: producer p's tile for stage s has landed. One arrival (the issuing thread's
    arrive.expect_tx with the box bytes) plus the TMA transaction bytes complete a phase.
  * empty[s] (warp specialization only): every consumer warp arrives (lane 0, after __syncwarp) when it
    is done with stage s; the producer waits for it before refilling the stage (parity starts at 1, so
    the first round passes).
  * Without warp specialization, thread 0 issues the copies `stages - 1` iterations ahead after the
    block barrier that opens each iteration (which also frees the stage being refilled).
Consumers wait for a producer's stage lazily, right before the first statement that reads it, so FlashAttention's
softmax runs while V is still in flight.

wgmma: per k-step (16, or 32 for 8-bit types) and per 64-row slice, one wgmma.mma_async whose shared operands are
described by matrix descriptors over the TMA panel layout (K-major: SBO = 8 rows of the swizzle span; MN-major:
LBO = the stride between 128-byte panels, SBO = 8 rows). A gemm statement ends with wgmma.wait_group 0, so the
accumulator is complete when the next statement reads it -- except in a warp-specialized gemm-like loop, which
waits one iteration later (wait_group 1) and releases a stage only when the wgmma that read it has finished.

Persistent ping-pong (schedule.pingpong): the kernel body, written for one consumer warpgroup, runs in two, each
on alternate tiles of the block's sequence (warpgroup w takes tiles w, w + 2, ...; the body sees thread indices
0..127 in either); the producer walks the whole sequence, so the stages hold tile 0's k-steps, then tile 1's, ...
and tile i's k-step j uses pipeline iteration i * trips + j. The warpgroups take turns in the main loop: before
it, warpgroup w waits on named barrier PINGPONG_TURN + w (bar.sync, both warpgroups' 256 threads; not for the
block's first tile), and once it has issued its last wgmma it hands the turn on with bar.arrive on the other's
(not after the block's last tile). Besides keeping the tensor cores busy with one warpgroup's wgmma while the other
runs its epilogue, the turn makes the mbarrier parities safe: a warpgroup waits for a stage's phase only once the
other has waited for all of its own, so that phase is at most one round away. Each warpgroup has its own block
barrier (named barrier PINGPONG_BARRIER + w, 128 threads) and TMA-store staging tile.
"""

from __future__ import annotations

from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.fold import fold
from ...ir.layout import SharedLayout, WgmmaTiled, add, c, compare, div, mod, mul, sub
from ...ir.schedule import consumer_threads, grouped_order, request_of
from ...ir.visit import sub_exprs, walk_stmts
from ...ops import gemm as gemm_op
from ...ops import registry as ops
from ...passes.lowering_extension import LoweringExtension
from ...passes.pipeline_planning import gemm_pipeline, launch_value_assigns, overlap_split
from .gemm_wgmma import WGMMA
from .intrinsics import PACK_PAIR
from .tma_store import TmaStores

_SWIZZLE_CODE = {128: 1, 64: 2, 32: 3}
MBAR = D.I64  # an mbarrier is 8 bytes of shared memory
# Named barrier ids: 0 is __syncthreads, 1 the consumers' block barrier under warp specialization, 2..5 the turns
# of attention's ping-pong; a ping-pong persistent kernel's per-warpgroup block barriers and main-loop turns:
PINGPONG_BARRIER = 6  # + warpgroup (6, 7), 128 threads
PINGPONG_TURN = 8  # + warpgroup (8, 9), 256 threads


def _and(a: T.Expr, b: T.Expr) -> T.Expr:
    return fold(T.Binary(D.BOOL, None, "and", a, b))


def _or(a: T.Expr, b: T.Expr) -> T.Expr:
    return fold(T.Binary(D.BOOL, None, "or", a, b))


class HopperLowering(TmaStores, LoweringExtension):
    """sm90's additions to lower-to-simt, talking to the generic lowering through its context `cx`."""

    def __init__(self, cx) -> None:
        super().__init__(cx)
        self.tensor_maps: list[dict] = []
        self.tensor_map_vars: list[T.Var] = []
        self.mbar_count = 0
        self.mbar_inits: list[tuple[int, int]] = []  # (index, arrival count)
        self.mbar: S.SBuffer | None = None
        self.ws_loop: tuple[T.For, object, dict] | None = None  # (loop, plan, barrier indices)
        self.wgmma_in_flight = False  # the gemm being lowered may leave its wgmma group running
        self.wgmma_no_wait = False  # the gemm being lowered commits its group and leaves the wait to the caller
        self.preload_bars: list[tuple[T.Copy, int]] = []  # (copy the producer issues before its loop, mbarrier)
        self.before_preload: tuple[bool, bool, bool] | None = None
        self.after_wgmma_issue: list[S.SStmt] = []  # emitted between a gemm's wgmma commit and its wait
        self.next_stage_gemm: T.Gemm | None = None  # the gemm after whose commit a cp.async pipeline's copies go
        self.tma_enabled = self.cx.target.tma_pipelines and "tma" not in self.cx.k.disabled
        self.tma_loops_done: dict[T.Buffer, bool] = {}  # buffer filled by a finished TMA loop -> unused after it
        if any(p.warp_specialized for p in self.cx.sched.loops.values()):
            self.barrier_threads = self.cx.k.threads  # consumer-only named barrier under warp specialization
        # persistent=True: the grid is at most one block per multiprocessor and each block loops over output
        # tiles (tile, tile + gridDim.x, ...); the block indices become functions of the tile, and the
        # pipelines' stage/phase counters run on across tiles.
        self.persistent = self.cx.sched.persistent
        self.persistent_pre: list[S.SStmt] = []
        # a 2-block cluster along grid x or y (schedule.cluster): rank = block index % 2 along it; the grid is
        # rounded up to whole clusters, and a block past the declared grid (a "ghost") runs the pipeline for its
        # peer and skips what follows it
        self.cluster = self.cx.sched.cluster if self.tma_enabled else (1, 1)
        self.cluster_dim = 0 if self.cluster[0] > 1 else 1
        self.cluster_tail: int | None = None  # where the statements after the pipeline start in the body
        if self.cluster != (1, 1):
            self.rank = mod(S.BlockIdx(D.I32, None, self.cluster_dim), 2)
        self.pingpong = self.cx.sched.pingpong
        if self.pingpong:
            self.block_thread = self.cx.tid
            self.warpgroup = div(self.block_thread, 128)
            self.cx.tid = mod(self.block_thread, 128)
            self.barrier_index = add(c(PINGPONG_BARRIER), self.warpgroup)
            self.seq = T.Var(D.I32, None, "tl_seq", "local")  # the tile's place in the block's sequence
            self.block_tiles = T.Var(D.I32, None, "tl_block_tiles", "local")  # tiles of this block
            self.cx.names.update(("tl_seq", "tl_block_tiles"))
        if self.persistent:
            self.tile = T.Var(D.I32, None, "tl_tile", "local")
            self.cx.names.add("tl_tile")
            gx, gy = self.cx.lx(self.cx.k.grid[0]), self.cx.lx(self.cx.k.grid[1])
            bx, by, bz = self.cx.k.block_vars
            self.cx.subst[bx] = mod(self.tile, gx)
            self.cx.subst[by] = mod(div(self.tile, gx), gy)
            self.cx.subst[bz] = div(self.tile, mul(gx, gy))

    @property
    def thread(self) -> T.Expr:
        """The block's own thread index (the kernel body's is cx.tid, which ping-pong makes per warpgroup)."""
        return self.block_thread if self.pingpong else self.cx.tid

    # ------------------------------------------------------------ hooks (LoweringExtension)
    def forget_preload_writes(self) -> None:
        if self.before_preload is not None:
            self.cx.smem_dirty, self.cx.smem_read, self.cx.generic_smem_writes = self.before_preload
            self.before_preload = None

    def before_stmt(self, s: T.Stmt) -> None:
        self.forget_preload_writes()
        if isinstance(s, T.Gemm) and self.cx.sched.instruction(s) == "wgmma" and self.cx.generic_smem_writes:
            # wgmma reads shared memory through the async proxy: the threads' own stores (and cp.async)
            # must be fenced into it before the barrier that publishes them.
            self.cx.emit(S.SCall(None, "fence_proxy_async", []))
            self.cx.generic_smem_writes = False
            self.cx.smem_dirty = True

    def before_loop(self, loop: T.For) -> None:
        self.fence_generic_writes_before(loop)

    def lower_pipelined(self, s: T.For, plan) -> bool:
        self.forget_preload_writes()
        if plan.mechanism != "tma":
            return False
        self.pipelined_tma(s, plan)
        return True

    def after_async_copies_landed(self, loop: T.For) -> None:
        if any(isinstance(st, T.Gemm) and self.cx.sched.instruction(st) == "wgmma"
               for st in walk_stmts(loop.body)):
            self.cx.emit(S.SCall(None, "fence_proxy_async", []))

    def lower_copy(self, s: T.Copy) -> bool:
        if any(s in plan.preloads for plan in self.cx.sched.loops.values()):
            # the producer warpgroup issues it (producer_branch); the consumers wait before the loop
            self.preload_bars.append((s, self.mbarriers(1, 1)))
            # the threads write nothing here: what lower-to-simt is about to note (shared memory written by
            # threads, needing a proxy fence and a barrier) is forgotten at the next statement
            self.before_preload = (self.cx.smem_dirty, self.cx.smem_read, self.cx.generic_smem_writes)
            self.cx.emit(S.SComment(s.span, f"{s.dst.buffer.name}: loaded by the producer warpgroup (TMA)"))
            return True
        if s.src.buffer.scope == "fragment" and s.dst.buffer.scope == "shared":
            return self.accumulator_to_shared(s)
        return s.src.buffer.scope == "fragment" and s.dst.buffer.scope == "global" and self.tma_store_fragment(s)

    def lower_wgmma(self, s: T.Gemm) -> None:
        """A wgmma gemm (WgmmaGemm.lower hands it here: its groups and the producer warpgroup are this kernel's)."""
        self.gemm_wgmma(s)
        if s is self.next_stage_gemm:  # the copies of a later stage went out with this gemm's wgmma
            self.next_stage_gemm, self.after_wgmma_issue = None, []

    def realign_pipeline_copies(self, loop: T.For) -> bool:
        """A cp.async pipeline around one wgmma gemm in the no-TMA twin: its misaligned rows are realigned (H200: the
        LM head 4096x50257x4096 22 -> 204 TFLOP/s); the twin runs for misaligned tensors alone, so its registers
        cost nothing else. So does a twin without matrix multiplies (a row kernel's odd rows); not attention's: its
        rows are aligned, and realigning would cost its aligned path 24 registers (165 -> 189)."""
        k = self.cx.k
        return self.one_wgmma_gemm(loop) is not None or bool(
            k.attrs.get("internal") and "tma" in k.disabled and "realign" not in k.disabled
            and not any(isinstance(st, T.Gemm) for st in walk_stmts(k.body)))

    def one_wgmma_gemm(self, loop: T.For) -> T.Gemm | None:
        gemms = [st for st in loop.body if isinstance(st, T.Gemm)]
        return gemms[0] if len(gemms) == 1 and self.cx.sched.instruction(gemms[0]) == "wgmma" else None

    def place_next_stage_copies(self, loop: T.For, stmts: list[S.SStmt]) -> bool:
        """A cp.async pipeline around one wgmma gemm (the no-TMA twin, --no-tma): its next stage's copies go between
        the gemm's commit and its wait, so that they run while the tensor cores do. Where a row is not 16-byte
        aligned those copies are synchronous loads (copy_shifted), whose latency the wgmma then hides. The stage
        they fill was last read by the previous iteration's wgmma, complete before this iteration's barrier."""
        gemm = self.one_wgmma_gemm(loop)
        if gemm is None or self.after_wgmma_issue or self.wgmma_in_flight or self.wgmma_no_wait:
            return False
        self.next_stage_gemm, self.after_wgmma_issue = gemm, stmts
        return True

    def finish(self, body: list[S.SStmt]) -> tuple[list[S.SStmt], int]:
        return self.finish_hopper(body)

    def launch_grid(self, grid: list[T.Expr]) -> list[T.Expr]:
        if self.cluster != (1, 1):  # whole clusters
            d = self.cluster_dim
            return [mul(T.Call(D.I32, None, "ceildiv", [g, c(2)]), c(2)) if i == d else g for i, g in enumerate(grid)]
        if not self.persistent:
            return grid
        num_sms = T.Var(D.I32, None, "num_sms", "size")  # at most one block per multiprocessor (known at launch)
        return [T.Call(D.I32, None, "min", [self.total_tiles(), num_sms]), c(1), c(1)]

    def kernel_attrs(self) -> dict[str, object]:
        if not self.tensor_maps:
            return {}
        attrs = {"tensor_maps": self.tensor_maps, "tensor_map_params": self.tensor_map_vars}
        if self.cluster != (1, 1):
            attrs["cluster"] = (*self.cluster, 1)
        return attrs

    def assign_value(self, s: T.Assign) -> T.Expr | None:
        """Clustered and rasterized: the grouped block order over the grid of clusters, then the block's rank
        within its cluster -- so the two blocks of a cluster get neighbouring tiles along the cluster's dimension
        (sharing the multicast tile), and every tile of the declared grid still runs exactly once."""
        raster = self.cx.sched.raster_assigns
        if self.cluster == (1, 1) or raster is None or not any(s is a for a in raster):
            return None
        k = self.cx.k
        bx, by = k.block_vars[0], k.block_vars[1]
        gx, gy = k.grid[0], k.grid[1]

        def half(e):
            return T.Binary(D.I32, None, "//", e, c(2))

        def halves(g):
            return T.Call(D.I32, None, "ceildiv", [g, c(2)])

        if self.cluster_dim == 0:
            x, y = grouped_order(half(bx), by, halves(gx), gy, self.cx.sched.rasterization)
            x = T.Binary(D.I32, None, "+", T.Binary(D.I32, None, "*", x, c(2)), T.Binary(D.I32, None, "%", bx, c(2)))
        else:
            x, y = grouped_order(bx, half(by), gx, halves(gy), self.cx.sched.rasterization)
            y = T.Binary(D.I32, None, "+", T.Binary(D.I32, None, "*", y, c(2)), T.Binary(D.I32, None, "%", by, c(2)))
        return x if s is raster[0] else y

    def inside_grid(self) -> T.Expr:
        """This block lies inside the declared grid (not one that only rounds it up to whole clusters)."""
        d = self.cluster_dim
        raster = self.cx.sched.raster_assigns
        index = self.cx.lx(raster[d].var) if raster is not None else S.BlockIdx(D.I32, None, d)
        return compare("<", index, self.cx.lx(self.cx.k.grid[d]))

    # ------------------------------------------------------------ resources
    def mbarriers(self, n: int, count: int) -> int:
        if self.mbar is None:
            self.mbar = S.SBuffer("tl_mbar", MBAR, "shared", 0, origin="mbarriers")
            self.cx.shared.append(self.mbar)
        first = self.mbar_count
        self.mbar_count += n
        self.mbar.size = self.mbar_count
        self.mbar_inits.extend((first + i, count) for i in range(n))
        return first

    def mbar_addr(self, index: T.Expr) -> S.AddrOf:
        return S.AddrOf(D.I64, None, self.mbar, index)

    def tensor_map(self, tensor: T.Buffer, box: list[int], swizzle: int) -> T.Var:
        entry = {"tensor": tensor.storage.name, "box": box, "swizzle": swizzle}
        if tensor.view_of is not None:  # a view: the map describes the tensor's memory with the view's dims
            from ...ir.formula import formula

            entry["view"] = {"dtype": tensor.dtype.name, "shape": [
                int(d.value) if isinstance(d, T.Const) else d.name if isinstance(d, T.Var) else formula(d)
                for d in tensor.shape]}
        if entry in self.tensor_maps:
            return self.tensor_map_vars[self.tensor_maps.index(entry)]
        var = T.Var(D.I64, None, f"tl_tmap{len(self.tensor_maps)}", "param")
        self.tensor_maps.append(entry)
        self.tensor_map_vars.append(var)
        return var

    # ------------------------------------------------------------ TMA
    def tma_boxes(self, p: T.Copy) -> list[tuple[T.Var, int, list[int]]]:
        """(tensor map, element offset in the shared tile, column offset) for each box of copy p."""
        lay: SharedLayout = self.cx.shared_layout(p.dst.buffer)
        exts = list(p.src.const_extents)
        if lay.panel and lay.swizzle:
            width = lay.panel_elems
            box = exts[:-1] + [min(width, exts[-1])]
            tmap = self.tensor_map(p.src.buffer, box, lay.swizzle_bytes)
            panels = -(-exts[-1] // width)
            return [(tmap, j * lay.rows * width, j * width) for j in range(panels)]
        return [(self.tensor_map(p.src.buffer, exts, 0), 0, 0)]

    def tma_bytes(self, p: T.Copy) -> int:
        n = p.dst.buffer.dtype.bytes
        for e in p.dst.buffer.const_shape:
            n *= e
        return n

    def issue_tma(self, p: T.Copy, stage: T.Expr, full: T.Expr) -> None:
        """arrive.expect_tx on `full`, then one TMA box per panel into stage `stage` of p's tile."""
        dst = self.cx.sbuf(p.dst.buffer)
        size = self.cx.shared_layout(p.dst.buffer).stage_size
        self.cx.emit(S.SCall(None, "mbar_expect_tx", [self.mbar_addr(full), c(self.tma_bytes(p))]))
        starts = [fold(T.Cast(D.I32, None, self.cx.lx(x))) for x in p.src.starts]
        if self.cluster != (1, 1) and any(p is m for lp in self.cx.sched.loops.values() for m in lp.multicast):
            return self.issue_multicast(p, dst, mul(stage, size), full, starts)
        for tmap, smem_off, col in self.tma_boxes(p):
            coords = list(starts)
            coords[-1] = fold(add(coords[-1], c(col)))
            rank = len(coords)
            self.cx.emit(S.call(None, "tma_load", rank=rank, args=[
                tmap, S.AddrOf(D.I64, None, dst, add(mul(stage, size), c(smem_off))), self.mbar_addr(full),
                *reversed(coords)]))

    def issue_multicast(self, p: T.Copy, dst: S.SBuffer, base: T.Expr, full: T.Expr, starts: list[T.Expr]) -> None:
        """A tile both blocks of the cluster share: this block loads its half of the rows of every 128-byte panel
        (rank 0 the upper, rank 1 the lower) and TMA multicasts it into the same place of both blocks' stage,
        completing transaction bytes on both blocks' full barrier -- so each block's barrier still expects the
        whole tile, half from its own loads and half from its peer's."""
        lay: SharedLayout = self.cx.shared_layout(p.dst.buffer)
        exts = list(p.src.const_extents)
        row_dim = next(i for i, e in enumerate(exts) if e != 1)
        half = lay.rows // 2
        width = lay.panel_elems
        box = exts[:-1] + [min(width, exts[-1])]
        box[row_dim] = half
        tmap = self.tensor_map(p.src.buffer, box, lay.swizzle_bytes)
        first_row = mul(self.rank, half)
        for j in range(-(-exts[-1] // width)):
            coords = list(starts)
            coords[-1] = fold(add(coords[-1], c(j * width)))
            coords[row_dim] = fold(add(coords[row_dim], first_row))
            offset = add(base, add(c(j * lay.rows * width), mul(first_row, width)))
            self.cx.emit(S.call(None, "tma_load_multicast", rank=len(coords), args=[
                tmap, S.AddrOf(D.I64, None, dst, offset), self.mbar_addr(full), c(3), *reversed(coords)]))

    def release(self, empty: T.Expr) -> S.SCall:
        """The consumer warps are done with a stage: arrive on its empty barrier -- in a cluster, on both blocks'
        (either block's producer multicasts into this block's stage)."""
        if self.cluster != (1, 1):
            return S.SCall(None, "mbar_arrive_cluster_warp", [self.mbar_addr(empty), c(3)])
        return S.SCall(None, "mbar_arrive_warp", [self.mbar_addr(empty)])

    def fence_generic_writes_before(self, loop: T.For) -> None:
        """Shared memory the threads wrote before a loop whose wgmma may read it: fence it into the
        async proxy and publish it once, before the loop, rather than in every iteration."""
        if self.cx.generic_smem_writes and any(isinstance(st, T.Gemm) and self.cx.sched.instruction(st) == "wgmma"
                                            for st in walk_stmts(loop.body)):
            self.cx.emit(S.SCall(None, "fence_proxy_async", []))
            self.cx.generic_smem_writes = False
            self.cx.smem_dirty = True
            self.cx.barrier()

    def unused_after(self, loop: T.For, buf: T.Buffer) -> bool:
        """Nothing after `loop` (a statement of the kernel's top level) touches `buf`."""
        if loop not in self.cx.k.body:
            return False
        after = self.cx.k.body[self.cx.k.body.index(loop) + 1:]
        for st in walk_stmts(after):
            if self.reads_buffer(st, buf):
                return False
            for f in ("dst", "c"):
                r = getattr(st, f, None)
                if isinstance(r, T.Region) and r.buffer is buf:
                    return False
            if isinstance(st, T.Store) and st.buffer is buf:
                return False
        return True

    def reads_buffer(self, s: T.Stmt, buf: T.Buffer) -> bool:
        for st in walk_stmts([s]):
            for f in ("src", "a", "b", "value"):
                r = getattr(st, f, None)
                if isinstance(r, T.Region) and r.buffer is buf:
                    return True
            exprs = [getattr(st, f) for f in ("value", "cond") if isinstance(getattr(st, f, None), T.Expr)]
            if isinstance(st, T.Store):
                exprs += st.indices
            for e in exprs:
                if any(isinstance(x, T.Load) and x.buffer is buf for x in sub_exprs(e)):
                    return True
        return False

    def pipelined_tma(self, s: T.For, plan) -> None:
        var = s.vars[0]
        stages = plan.stages
        producers = plan.producers
        nprod = len(producers)
        full0 = self.mbarriers(stages * nprod, 1)
        ws = plan.warp_specialized
        # empty[s]: one arrival per consumer warp (after __syncwarp, lane 0), not per thread; one per producer
        # and stage when the producers' tiles are released at different points (overlap_softmax)
        empties = stages * nprod if plan.overlap_softmax else stages
        # (in a cluster, the consumer warps of both blocks release each stage)
        warps = self.cx.k.threads // 32 * self.cluster[0] * self.cluster[1]
        empty0 = self.mbarriers(empties, warps) if ws else None
        sizes = {p.dst.buffer: self.cx.shared_layout(p.dst.buffer).stage_size for p in producers}
        self.fence_generic_writes_before(s)
        n = self.cx.declare(f"{var.name}_count", self.cx.lx(s.extents[0]))

        def issue(iteration: T.Expr) -> None:
            self.cx.subst[var] = iteration
            stage = mod(iteration, stages)
            for i, p in enumerate(producers):
                self.issue_tma(p, stage, add(c(full0 + i * stages), stage))

        self.cx.emit(S.SComment(None, f"pipeline over {var.name}: {stages} stages, TMA + mbarriers"
                                   f"{', warp-specialized' if ws else ''}"))
        for _, bar in self.preload_bars:  # tiles the producer loaded before its loop (tma_preload)
            self.cx.emit(S.SCall(None, "mbar_wait", [self.mbar_addr(c(bar)), c(0)]))
        if ws:
            self.ws_loop = (s, plan, {"full": full0, "empty": empty0, "empty_per_producer": plan.overlap_softmax})
        else:
            self.cx.before_shared_access(False, True)
            self.cx.barrier()
            pro = self.cx.fresh(f"{var.name}_pre")
            prologue = [S.SIf(None, compare("<", pro, n), self.cx.block(lambda: issue(pro)))]
            self.cx.emit(S.SIf(None, compare("==", self.cx.tid, c(0)),
                            [S.SFor(None, pro, c(0), c(stages - 1), prologue, unroll=True)]))
        it = self.cx.fresh(var.name)
        base = None
        counter = None  # the running count of this pipeline's iterations over the block's tiles
        if self.persistent and ws and self.pingpong:  # (the trip count is the same for every tile: planned so)
            base = mul(self.seq, n)
        elif self.persistent and ws:
            base = counter = self.cx.fresh(f"{var.name}_done")
            self.persistent_pre.append(S.Declare(None, base, c(0)))
        if plan.overlap_softmax:
            self.overlapped_loop(s, plan, full0, empty0, n, base)
            return
        # A gemm-like loop (its only computation is one wgmma gemm into an accumulator nothing else in
        # the loop touches) keeps one k-step of wgmma in flight: wait_group 1, then release the stage
        # the previous iteration read.
        rest = [st for st in s.body if st not in producers]
        deferred = ws and gemm_pipeline(s, plan, self.cx.sched)
        # An attention-like loop (two or more wgmma gemms, the rest elementwise work on their results) on
        # 2-4 consumer warpgroups: the warpgroups take turns (round robin, named barriers 2..) issuing the first
        # gemm, which keeps them out of phase, so one's softmax overlaps the others' gemms (FlashAttention-3's
        # ping-pong).
        gemms = [st for st in rest if isinstance(st, T.Gemm) and self.cx.sched.instruction(st) == "wgmma"]
        groups = self.cx.k.threads // 128
        pingpong = gemms[0] if ws and len(gemms) >= 2 and 2 <= groups <= 4 and not deferred else None
        group = div(self.cx.tid, 128)

        def steady():
            if not ws:
                self.cx.emit(S.Barrier(None))  # every thread is done with the stage refilled next
                self.cx.smem_dirty = self.cx.smem_read = False
                ahead = self.cx.declare(f"{var.name}_next", add(it, stages - 1))
                self.cx.emit(S.SIf(None, compare("==", self.cx.tid, c(0)),
                                [S.SIf(None, compare("<", ahead, n), self.cx.block(lambda: issue(ahead)))]))
            step = add(base, it) if base is not None else it  # iterations of this pipeline so far
            stage = self.cx.declare(f"{var.name}_stage", mod(step, stages))
            phase = self.cx.declare(f"{var.name}_phase", mod(div(step, stages), 2))
            self.cx.subst[var] = it
            for p in producers:
                self.cx.stage_offset[p.dst.buffer] = mul(stage, sizes[p.dst.buffer])
            waited: set[T.Copy] = set()
            for st in s.body:
                if st in producers:
                    continue
                if st is pingpong:  # wait for this warpgroup's turn to issue (see below)
                    self.cx.emit(S.SCall(None, "named_barrier_sync", [add(c(2), group), c(256)]))
                for i, p in enumerate(producers):
                    if p not in waited and self.reads_buffer(st, p.dst.buffer):
                        waited.add(p)
                        self.cx.emit(S.SCall(None, "mbar_wait", [self.mbar_addr(add(c(full0 + i * stages), stage)),
                                                              phase]))
                self.wgmma_in_flight = deferred
                if st is pingpong:  # once issued, hand the turn to the next warpgroup (the last one's last turn
                    # has no taker)
                    following = mod(add(group, c(1)), groups) if groups > 2 else sub(c(1), group)
                    other = S.SCall(None, "named_barrier_arrive", [add(c(2), following), c(256)])
                    self.after_wgmma_issue = [
                        S.SIf(None, _or(compare("<", group, c(groups - 1)), compare("<", it, sub(n, c(1)))), [other])]
                try:
                    self.cx.stmt(st)
                finally:
                    self.wgmma_in_flight = False
                    self.after_wgmma_issue = []
            for p in producers:
                self.cx.stage_offset.pop(p.dst.buffer, None)
            if deferred:
                previous = mod(add(step, stages - 1), stages)
                self.cx.emit(S.SIf(None, compare(">", it, c(0)), [self.release(add(c(empty0), previous))]))
            elif ws:
                self.cx.emit(self.release(add(c(empty0), stage)))

        if pingpong is not None:
            self.cx.emit(S.SComment(None, f"{groups} warpgroups take turns issuing the first gemm: one's softmax runs "
                                       "under the others' gemms"))
            self.cx.emit(S.SIf(None, _and(compare("==", group, c(groups - 1)), compare(">", n, c(0))),
                            [S.SCall(None, "named_barrier_arrive", [c(2), c(256)])]))
        body = self.cx.block(steady)
        for p in producers:  # (a persistent kernel's producer is already refilling them for the next tile)
            self.tma_loops_done[p.dst.buffer] = not self.persistent and self.unused_after(s, p.dst.buffer)
        if deferred:
            acc = self.cx.sbuf(rest[0].c.buffer)
            self.cx.emit(S.SCall(None, "wgmma_fence_regs", [S.AddrOf(D.I64, None, acc, c(0)), c(acc.size)]))
        if self.pingpong:
            self.cx.emit(S.SComment(None, "ping-pong: this warpgroup's turn in the main loop (the other's epilogue "
                                       "runs under it)"))
            self.cx.emit(S.SIf(None, compare(">", self.seq, c(0)), [S.SCall(None, "named_barrier_sync", [
                add(c(PINGPONG_TURN), self.warpgroup), c(256)])]))
        self.cx.emit(S.SFor(s.span, it, c(0), n, body))
        if self.pingpong:  # every wgmma of this tile is issued: the other warpgroup's turn (if it has a next tile)
            self.cx.emit(S.SIf(None, compare("<", add(self.seq, c(1)), self.block_tiles), [
                S.SCall(None, "named_barrier_arrive", [add(c(PINGPONG_TURN), sub(c(1), self.warpgroup)), c(256)])]))
        if deferred:
            acc = self.cx.sbuf(rest[0].c.buffer)
            self.cx.emit(S.SCall(None, "wgmma_wait", [c(0)]))
            self.cx.emit(S.SCall(None, "wgmma_fence_regs", [S.AddrOf(D.I64, None, acc, c(0)), c(acc.size)]))
            if base is not None:  # the next tile's loads may reuse the last stage
                last = mod(add(base, sub(n, c(1))), stages)
                self.cx.emit(S.SIf(None, compare(">", n, c(0)), [self.release(add(c(empty0), last))]))
        if counter is not None:
            self.cx.emit(S.SAssign(None, counter, add(counter, n)))
        self.cx.barrier()
        if self.cluster != (1, 1):
            self.cluster_tail = len(self.cx.out)

    def overlapped_loop(self, s: T.For, plan, full0: int, empty0: int, n: T.Expr, base: T.Expr | None) -> None:
        """A warp-specialized loop with overlap_softmax (FlashAttention-3's intra-warpgroup overlap): iteration
        j issues its first gemm (Q.K^T of j) and then the previous iteration's last gemm (P.V of j-1), waits
        for the first only (wait_group 1), runs the independent statements (the softmax statistics) while
        P.V(j-1) is still on the tensor cores, waits for it (wait_group 0) and runs the dependent ones
        (rescaling O, P = cast). Iteration 0 is peeled (no last gemm before it); the last gemm of the last
        iteration follows the loop. An early producer's stage (K) is released once the first gemm has read it,
        a late one's (V) once the last gemm has. With ping-pong the warpgroups take turns issuing the first gemm,
        as in the plain loop (measured on the H200: handing the turn on after both gemms, or no turns, was no
        faster)."""
        split = overlap_split(s, plan, self.cx.sched)
        var = s.vars[0]
        stages = plan.stages
        sizes = {p.dst.buffer: self.cx.shared_layout(p.dst.buffer).stage_size for p in plan.producers}
        index = {p: i for i, p in enumerate(plan.producers)}
        groups = self.cx.k.threads // 128
        pingpong = 2 <= groups <= 4
        group = div(self.cx.tid, 128)
        first_acc = self.cx.sbuf(split.first.c.buffer)
        last_acc = self.cx.sbuf(split.last.c.buffer)

        def counters(step: T.Expr, suffix: str) -> tuple[T.Var, T.Var]:
            return (self.cx.declare(f"{var.name}_stage{suffix}", mod(step, stages)),
                    self.cx.declare(f"{var.name}_phase{suffix}", mod(div(step, stages), 2)))

        def wait_full(producers, stage: T.Expr, phase: T.Expr) -> None:
            for p in producers:
                self.cx.stage_offset[p.dst.buffer] = mul(stage, sizes[p.dst.buffer])
                full = add(c(full0 + index[p] * stages), stage)
                self.cx.emit(S.SCall(None, "mbar_wait", [self.mbar_addr(full), phase]))

        def release(producers, stage: T.Expr) -> None:
            for p in producers:
                empty = add(c(empty0 + index[p] * stages), stage)
                self.cx.emit(S.SCall(None, "mbar_arrive_warp", [self.mbar_addr(empty)]))

        def handoff(it: T.Expr) -> list[S.SStmt]:
            if not pingpong:
                return []
            following = mod(add(group, c(1)), groups) if groups > 2 else sub(c(1), group)
            other = S.SCall(None, "named_barrier_arrive", [add(c(2), following), c(256)])
            return [S.SIf(None, _or(compare("<", group, c(groups - 1)), compare("<", it, sub(n, c(1)))), [other])]

        def issue(gemm: T.Gemm, after: list[S.SStmt]) -> None:
            """The gemm's wgmma group, committed and left running."""
            self.wgmma_no_wait, self.after_wgmma_issue = True, after
            try:
                self.cx.stmt(gemm)
            finally:
                self.wgmma_no_wait, self.after_wgmma_issue = False, []

        assigned = [st.var for st in walk_stmts(s.body) if isinstance(st, T.Assign)]
        written: dict[T.Buffer, T.Buffer] = {}
        for st in walk_stmts(split.independent):
            for b in [r.buffer for r in ops.writes(st)] + ([st.buffer] if isinstance(st, T.Store) else []):
                written[b] = b
        pinned = [self.cx.sbuf(b) for b in written.values() if b.scope == "fragment" and b.dtype == D.F32]
        # ptxas moves wgmma.wait_group (and the arithmetic around it) freely: seen on nvcc 13.0, it hoisted the
        # wait for P.V above the whole softmax. A shared-memory store of the row statistics (which depend on
        # every exp) ahead of the wait keeps the softmax before it; nothing reads the store.
        statistics = [S.Ref(D.F32, None, b, c(i)) for b in pinned if b.size <= 4 for i in range(b.size)]
        anchor = None
        if statistics:
            anchor = S.SBuffer(self.cx.fresh("tl_order_anchor").name, D.F32, "shared", self.cx.k.threads,
                               origin="keeps the softmax ahead of the wait for P.V")
            self.cx.shared.append(anchor)

        def fresh_assigns() -> None:  # the body's statements are lowered more than once: declare their values anew
            for v in assigned:
                self.cx.subst.pop(v, None)

        def iteration(it: T.Expr, peeled: bool) -> None:
            fresh_assigns()
            step = add(base, it) if base is not None else it
            stage, phase = counters(step, "")
            self.cx.subst[var] = it
            for st in split.head:
                self.cx.stmt(st)
            if pingpong:  # this warpgroup's turn to issue
                self.cx.emit(S.SCall(None, "named_barrier_sync", [add(c(2), group), c(256)]))
            wait_full(split.early, stage, phase)
            issue(split.first, handoff(it))
            if not peeled:  # the previous iteration's last gemm, behind this one's first
                prev_stage, prev_phase = counters(sub(step, c(1)), "_prev")
                self.cx.subst[var] = sub(it, c(1))
                wait_full(split.late, prev_stage, prev_phase)
                issue(split.last, [])
                self.cx.subst[var] = it
            self.cx.emit(S.SCall(None, "wgmma_wait", [c(0 if peeled else 1)]))
            self.cx.emit(S.SCall(None, "wgmma_fence_regs", [S.AddrOf(D.I64, None, first_acc, c(0)),
                                                            c(first_acc.size)]))
            release(split.early, stage)
            for st in split.independent:
                self.cx.stmt(st)
            if not peeled:
                # the independent statements' f32 results are pinned before the wait: without that the compiler
                # is free to sink their arithmetic below it, and the softmax would no longer run under P.V
                for buf in pinned:
                    self.cx.emit(S.SCall(None, "wgmma_fence_regs", [S.AddrOf(D.I64, None, buf, c(0)), c(buf.size)]))
                if anchor is not None:
                    total = statistics[0]
                    for x in statistics[1:]:
                        total = fold(T.Binary(D.F32, None, "+", total, x))
                    self.cx.emit(S.SStore(None, anchor, self.cx.tid, total))
                self.cx.emit(S.SCall(None, "wgmma_wait", [c(0)]))
                self.cx.emit(S.SCall(None, "wgmma_fence_regs", [S.AddrOf(D.I64, None, last_acc, c(0)),
                                                                c(last_acc.size)]))
                release(split.late, prev_stage)
            for st in split.dependent:
                self.cx.stmt(st)
            for p in plan.producers:
                self.cx.stage_offset.pop(p.dst.buffer, None)

        self.cx.emit(S.SComment(None, "each iteration issues its first gemm, then the previous iteration's last "
                                   "gemm; the statements between them run under both"))
        if pingpong:
            self.cx.emit(S.SComment(None, f"{groups} warpgroups take turns issuing the gemms: one's softmax runs "
                                       "under the others' gemms"))
            self.cx.emit(S.SIf(None, _and(compare("==", group, c(groups - 1)), compare(">", n, c(0))),
                            [S.SCall(None, "named_barrier_arrive", [c(2), c(256)])]))
        self.cx.emit(S.SIf(None, compare(">", n, c(0)), self.cx.block(lambda: iteration(c(0), True))))
        it = self.cx.fresh(var.name)
        self.cx.emit(S.SFor(s.span, it, c(1), sub(n, c(1)), self.cx.block(lambda: iteration(it, False))))

        def last_gemm() -> None:
            fresh_assigns()
            last = sub(n, c(1))
            stage, phase = counters(add(base, last) if base is not None else last, "")
            self.cx.subst[var] = last
            wait_full(split.late, stage, phase)
            self.cx.stmt(split.last)
            release(split.late, stage)
            for p in plan.producers:
                self.cx.stage_offset.pop(p.dst.buffer, None)

        self.cx.emit(S.SIf(None, compare(">", n, c(0)), self.cx.block(last_gemm)))
        for p in plan.producers:
            self.tma_loops_done[p.dst.buffer] = not self.persistent and self.unused_after(s, p.dst.buffer)
        if base is not None:
            self.cx.emit(S.SAssign(None, base, add(base, n)))
        self.cx.barrier()

    def producer_branch(self) -> list[S.SStmt]:
        """The producer warpgroup's program: recompute the launch values, then for each iteration
        wait for the stage to be free and issue its boxes (one elected thread)."""
        loop, plan, bars = self.ws_loop
        var = loop.vars[0]
        stages = plan.stages

        base = self.cx.fresh(f"{var.name}_issued") if self.persistent else None

        def body():
            saved = dict(self.cx.subst)
            for a in launch_value_assigns(self.cx.k, loop):
                v = self.cx.fresh(a.var.name, a.var.dtype)
                instead = self.assign_value(a)
                self.cx.emit(S.Declare(a.span, v, self.cx.lx(a.value if instead is None else instead)))
                self.cx.subst[a.var] = v
            for p, bar in self.preload_bars:  # first of all, the tiles the consumers need before the loop
                self.issue_tma(p, c(0), c(bar))
            n = self.cx.declare(f"{var.name}_count", self.cx.lx(loop.extents[0]))
            it = self.cx.fresh(f"{var.name}_load")

            def step():
                count = add(base, it) if base is not None else it
                stage = self.cx.declare(f"{var.name}_slot", mod(count, stages))
                phase = self.cx.declare(f"{var.name}_round", mod(div(count, stages), 2))
                free = fold(T.Binary(D.I32, None, "^", phase, c(1)))
                if not bars["empty_per_producer"]:
                    self.cx.emit(S.SCall(None, "mbar_wait", [self.mbar_addr(add(c(bars["empty"]), stage)), free]))
                self.cx.subst[var] = it
                for i, p in enumerate(plan.producers):
                    if bars["empty_per_producer"]:  # each tile as soon as its own stage is free
                        empty = add(c(bars["empty"] + i * stages), stage)
                        self.cx.emit(S.SCall(None, "mbar_wait", [self.mbar_addr(empty), free]))
                    self.issue_tma(p, stage, add(c(bars["full"] + i * stages), stage))

            self.cx.emit(S.SFor(None, it, c(0), n, self.cx.block(step)))
            if base is not None:
                self.cx.emit(S.SAssign(None, base, add(base, n)))
            self.cx.subst = saved

        issuer = compare("==", self.thread, c(self.consumer_threads()))
        if base is None:
            return [S.SIf(None, issuer, self.cx.block(body))]
        return [S.SIf(None, issuer, [S.Declare(None, base, c(0)), self.tile_loop(self.cx.block(body))])]

    def consumer_threads(self) -> int:
        """The threads that run the kernel body: the declared ones, twice over with ping-pong."""
        return consumer_threads(self.cx.k.threads, self.cx.sched)

    def total_tiles(self) -> T.Expr:
        g = [self.cx.lx(x) for x in self.cx.k.grid]
        return mul(mul(g[0], g[1]), g[2])

    def tile_loop(self, body: list[S.SStmt]) -> S.SFor:
        """for (tile = blockIdx.x; tile < tiles; tile += gridDim.x) body"""
        first = S.BlockIdx(D.I32, None, 0)
        stride = S.Intrinsic(D.I32, None, "grid_dim_x", [])
        count = T.Call(D.I32, None, "ceildiv", [sub(self.total_tiles(), first), stride])
        return S.SFor(None, self.tile, first, count, body, step=stride)

    def pingpong_tile_loop(self, body: list[S.SStmt]) -> list[S.SStmt]:
        """A ping-pong consumer warpgroup's tiles: the block's sequence (tile_loop's) from its place `seq` = 0, 1, ...,
        taking every other one from the warpgroup's index."""
        first = S.BlockIdx(D.I32, None, 0)
        stride = S.Intrinsic(D.I32, None, "grid_dim_x", [])
        tiles = T.Call(D.I32, None, "ceildiv", [sub(self.total_tiles(), first), stride])
        mine = T.Call(D.I32, None, "ceildiv", [sub(self.block_tiles, self.warpgroup), c(2)])
        return [S.Declare(None, self.block_tiles, tiles),
                S.SFor(None, self.seq, self.warpgroup, mine,
                       [S.Declare(None, self.tile, add(first, mul(self.seq, stride))), *body], step=c(2))]

    def finish_hopper(self, body: list[S.SStmt]) -> tuple[list[S.SStmt], int]:
        """Kernel body with mbarrier initialisation and the warp-specialized split; the block size."""
        threads = self.consumer_threads()
        pre: list[S.SStmt] = []
        if self.mbar is not None:
            inits = [S.SCall(None, "mbar_init", [self.mbar_addr(c(i)), c(n)]) for i, n in self.mbar_inits]
            inits.append(S.SCall(None, "fence_mbar_init", []))
            pre = [S.SIf(None, compare("==", self.thread, c(0)), inits), S.Barrier(None)]
        if self.ws_loop is None:
            return pre + body, threads
        end: list[S.SStmt] = []
        if self.cluster != (1, 1):
            # both blocks' barriers are initialised before either block's TMA multicasts into the other; neither
            # exits while the other may still arrive on its barriers
            pre.append(S.SCall(None, "cluster_sync", []))
            end = [S.SComment(None, "no block of the cluster exits while its peer may still signal it"),
                   S.SCall(None, "cluster_sync", [])]
            tail = body[self.cluster_tail:]
            if tail:
                body = body[:self.cluster_tail] + [
                    S.SComment(None, "a block past the grid (rounding it up to whole clusters) stops here"),
                    S.SIf(None, self.inside_grid(), tail)]
        producer = self.producer_branch()
        if self.pingpong:
            body = self.persistent_pre + [S.SComment(None, "persistent ping-pong: this warpgroup's output tiles, "
                                                           "every other one of the block's"),
                                          *self.pingpong_tile_loop(body)]
        elif self.persistent:
            body = self.persistent_pre + [S.SComment(None, "persistent: this block's output tiles"),
                                          self.tile_loop(body)]
        consumer_regs = producer_regs = None
        if threads >= 256 and request_of(self.cx.k).keywords.warp_group_reg_alloc:  # the producer's registers to the
            # consumers (setmaxnreg), unless the kernel says T.disable_warp_group_reg_alloc()
            producer_regs = 40
            consumer_regs = min(240, (65536 - producer_regs * 128) // threads // 8 * 8)
        prod = ([S.SCall(None, "setmaxnreg_dec", [c(producer_regs)])] if producer_regs else []) + producer
        cons = ([S.SCall(None, "setmaxnreg_inc", [c(consumer_regs)])] if consumer_regs else []) + body
        split = S.SIf(None, compare(">=", self.thread, c(threads)), prod, cons, concurrent=True,
                      groups=2 if self.pingpong else 1)
        what = f"0..{threads - 1} compute" + (" (two warpgroups, ping-pong)" if self.pingpong else "")
        return pre + [S.SComment(None, f"warp specialization: threads {threads}.. issue TMA, {what}"), split] + end, \
            threads + 128

    # ------------------------------------------------------------ wgmma
    def descriptor(self, r: T.Region, row: T.Expr, col: T.Expr, k_major: bool) -> list[T.Expr]:
        """[shared address, leading byte offset, stride byte offset, swizzle code] of the operand
        tile starting at (row, col) of shared buffer r."""
        lay: SharedLayout = self.cx.shared_layout(r.buffer)
        off = lay.offset([row, col])
        stage = self.cx.stage_offset.get(r.buffer)
        addr = S.AddrOf(D.I64, None, self.cx.sbuf(r.buffer), add(stage, off) if stage is not None else off)
        span = lay.swizzle_bytes
        lbo = 16 if k_major else lay.rows * span
        return [addr, c(lbo), c(8 * span), c(_SWIZZLE_CODE[span])]

    def gemm_wgmma(self, s: T.Gemm) -> None:
        lay: WgmmaTiled = self.cx.sched.fragment(s.c.buffer)
        m, n, kd = gemm_op.dims(s)
        dt = s.a.buffer.dtype
        kstep = WGMMA.step_k(dt)
        group = div(self.cx.tid, 128)
        row_base = c(0) if lay.wm == 1 else mul(mod(group, lay.wm), m // lay.wm)
        col_base = c(0) if lay.wn == 1 else mul(div(group, lay.wm), n // lay.wn)
        c_sb = self.cx.sbuf(s.c.buffer)
        regs = lay.ni * 4
        register_a = s.a.buffer.scope == "fragment"
        variant = {"operands": "rs" if register_a else "ss", "n": lay.instr_n, "dtype": dt.name,
                   "b_k_major": 0 if s.transpose_b else 1}
        self.cx.smem_read = True
        a_all = None
        if register_a:  # every k-step's A registers are packed before wgmma.fence (see below)
            a_all = S.SBuffer(self.cx.fresh("a_frag").name, D.U32, "local", 4 * lay.mi * (kd // kstep))
            self.cx.emit(S.DeclareArray(None, a_all))
            for kk in range(kd // kstep):
                for mi in range(lay.mi):
                    self.pack_register_a_into(s, a_all, mi, kk, base=4 * (kk * lay.mi + mi))
        if not self.wgmma_in_flight and not s.clear_accum:
            # pin the accumulator's earlier writes before wgmma.fence: ptxas serializes every wgmma
            # (C7515) when a non-wgmma instruction defines an accumulator register inside a stage.
            # (A pipelined loop with a group in flight pins them once, before the loop; clear_accum's first
            # wgmma writes the accumulator without reading it.)
            self.cx.emit(S.SCall(None, "wgmma_fence_regs", [S.AddrOf(D.I64, None, c_sb, c(0)), c(lay.num_local)]))
        self.cx.emit(S.SCall(None, "wgmma_fence", []))
        for kk in range(kd // kstep):
            k0 = c(kk * kstep)
            if s.transpose_b:
                b_desc = self.descriptor(s.b, col_base, k0, True)
            else:
                b_desc = self.descriptor(s.b, k0, col_base, False)
            # clear_accum: the first k-step's product replaces the accumulator (no fill before the gemm)
            step = {**variant, "zero_d": s.clear_accum and kk == 0}
            for mi in range(lay.mi):
                acc = S.AddrOf(D.I64, None, c_sb, c(mi * regs))
                if register_a:
                    a_regs = S.AddrOf(D.I64, None, a_all, c(4 * (kk * lay.mi + mi)))
                    self.cx.emit(S.call(s.span, "wgmma", [acc, a_regs, *b_desc], **step))
                else:
                    a_desc = self.descriptor(s.a, add(row_base, c(mi * 64)), k0, True)
                    self.cx.emit(S.call(s.span, "wgmma", [acc, *a_desc, *b_desc], **step))
        self.cx.emit(S.SCall(None, "wgmma_commit", []))
        for st in self.after_wgmma_issue:
            self.cx.emit(st)
        if self.wgmma_in_flight:  # the pipeline waits for this group one iteration later
            self.cx.emit(S.SCall(None, "wgmma_wait", [c(1)]))
            return
        if self.wgmma_no_wait:
            return
        self.cx.emit(S.SCall(None, "wgmma_wait", [c(0)]))
        self.cx.emit(S.SCall(None, "wgmma_fence_regs", [S.AddrOf(D.I64, None, c_sb, c(0)), c(lay.num_local)]))

    def pack_register_a_into(self, s: T.Gemm, a_regs: S.SBuffer, mi: int, kk: int, base: int = 0) -> None:
        """wgmma's register A fragment for k-step kk of 64-row slice mi, from an accumulator-layout
        fragment (a warp's rows match; two 8-column accumulator chunks make one 16-wide k-step)."""
        la = self.cx.sched.fragment(s.a.buffer)
        src = self.cx.sbuf(s.a.buffer)
        for reg, (chunk, e) in enumerate(((0, 0), (0, 2), (1, 0), (1, 2))):
            k = ((mi * la.ni) + kk * 2 + chunk) * 4 + e
            lo, hi = S.Ref(src.dtype, None, src, c(k)), S.Ref(src.dtype, None, src, c(k + 1))
            if src.dtype in (D.F16, D.BF16):  # already rounded: put the bits side by side
                packed = S.Intrinsic(D.U32, None, "pack2", [lo, hi])
            else:
                pack = PACK_PAIR[s.a.buffer.dtype]
                packed = S.Intrinsic(D.U32, None, pack, [fold(T.Cast(D.F32, None, lo)), fold(T.Cast(D.F32, None, hi))])
            self.cx.emit(S.SStore(None, a_regs, c(base + reg), packed))
