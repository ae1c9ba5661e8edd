"""sm90's TMA stores of a warpgroup accumulator (part of hopper_lowering.py's HopperLowering): the accumulator goes
into a staging tile in shared memory, in the TMA panel layout and the output's type, and one thread stores it to
global memory with TMA, one box per 128-byte panel (the tensor map clips the ragged edges).

The staging writes: where the output has 16-bit elements, `stmatrix` stores a warp's 16x16 piece of the accumulator
(two 8-column chunks, four registers of packed halves a lane) in one instruction -- the wgmma accumulator's
arrangement is stmatrix's own -- in place of eight 2-byte stores a lane; other types take one store an element. A
copy of the accumulator into a 16-bit shared tile of the kernel's own (attention's O_s) is written the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...ir import dtypes as D
from ...ir import simt as S
from ...ir import tile as T
from ...ir.exprs import both
from ...ir.fold import fold
from ...ir.layout import SharedLayout, WgmmaTiled, add, c, compare, div, mod, mul, sub
from .intrinsics import PACK_PAIR
from .tma_pipeline import starts_16_bytes_in


class TmaStores:
    """The TMA-store methods of HopperLowering (which provides cx, pingpong, persistent, tensor_map, barrier...)."""

    @property
    def threads_store(self) -> bool:
        """The direct-stores twin ("tma_store" disabled): the accumulator staged as for a TMA store, then stored by
        the consumer threads."""
        return "tma_store" in self.cx.k.disabled

    def dead_tma_tile(self, nbytes: int) -> S.SBuffer | None:
        """A TMA-filled, 1024-byte aligned pipeline buffer of at least nbytes that nothing reads or
        writes after its loop (the loop has finished when the statement being lowered runs)."""
        for key, dead in self.tma_loops_done.items():
            buf = self.cx.buffers.get(key)
            if dead and buf is not None and (buf.size or 0) * buf.dtype.bytes >= nbytes:
                return buf
        return None

    def tma_store_fragment(self, s: T.Copy) -> bool:
        """A warpgroup accumulator stored to global memory goes through a dead pipeline tile in the
        TMA panel layout (converted to the output type there) and leaves with TMA stores: one thread
        issues one box per 128-byte panel; the tensor map clips the ragged edges."""
        lay = self.cx.sched.fragments.get(s.src.buffer.uid)
        dst = s.dst
        threads_store = self.threads_store
        if not (isinstance(lay, WgmmaTiled) and self.tma_enabled and not (threads_store and self.pingpong)
                and dst.const_extents is not None
                and len(lay.shape) == 2 and [e for e in dst.const_extents if e != 1] == list(lay.shape)
                and dst.const_extents[-1] != 1 and len(dst.buffer.shape) <= 5
                and (threads_store or starts_16_bytes_in(dst))):
            return False
        out_dt = dst.buffer.dtype
        rows, cols = lay.shape
        if (cols * out_dt.bytes) % 128 and cols * out_dt.bytes not in (32, 64):
            return False
        staging_layout = SharedLayout((rows, cols), out_dt.bytes, swizzle=True, panel=True)
        width = staging_layout.panel_elems
        if any(e > 256 for e in dst.const_extents[:-1]) or width > 256 or (
                threads_store and self.consumer_threads() % width):
            return False
        tile = self.dead_tma_tile(rows * cols * out_dt.bytes)
        copies = 2 if self.pingpong else 1  # ping-pong: a staging tile per consumer warpgroup, side by side
        if tile is None and self.persistent:  # the pipeline tiles are busy with the next tile: a tile of its own
            used = sum((b.size or 0) * b.dtype.bytes for b in self.cx.shared if b.alias_of is None)
            if used + copies * rows * cols * out_dt.bytes + 1024 <= self.cx.target.shared_memory_bytes:
                tile = S.SBuffer(self.cx.fresh("tl_store_tile").name, out_dt, "shared", copies * rows * cols,
                                 origin="TMA store staging" + (", one per warpgroup" if self.pingpong else ""),
                                 align=1024)
                self.cx.shared.append(tile)
            elif lay.wn == 1 and width % 8 == 0:  # a staging tile for as many 128-byte panels as fit
                fit = (self.cx.target.shared_memory_bytes - used - 1024) // (copies * rows * width * out_dt.bytes)
                if 1 <= fit < -(-cols // width):
                    return self.tma_store_in_panels(s, lay, staging_layout, fit)
        if tile is None:
            return False
        staging = tile
        if tile.dtype != out_dt:  # the same shared bytes seen as the output type
            staging = S.SBuffer(self.cx.fresh(f"{tile.name}_{out_dt.name}").name, out_dt, "shared",
                                tile.size * tile.dtype.bytes // out_dt.bytes, origin=tile.origin, align=tile.align,
                                alias_of=tile)
            self.cx.shared.append(staging)
        self.cx.emit(S.SComment(s.span, f"store {s.src.buffer.name} through shared memory and "
                                        + ("the threads' stores" if threads_store else "TMA")))
        self.cx.before_shared_access(False, True)
        writes = self.write_staging(lay, s.src.buffer, staging, lambda i, j: self.own_staging(
            rows * cols, staging_layout.offset([i, j])), [(mi, range(lay.ni)) for mi in range(lay.mi)])
        # (always true for the computing threads: without the branch ptxas serializes the main loop's wgmma,
        # C7514, as if these reads of the accumulator could join its last wgmma stage)
        self.cx.emit(S.SIf(None, compare("<", self.thread, c(self.consumer_threads())), writes))
        if threads_store:
            self.cx.barrier()
            stores = self.store_staging_with_threads(dst, staging, lambda i, j: staging_layout.offset([i, j]), rows,
                                                     width, range(-(-cols // width)))
            self.cx.emit(S.SIf(None, compare("<", self.thread, c(self.consumer_threads())), stores))
            self.cx.smem_read = True
            return True
        self.cx.emit(S.SCall(None, "fence_proxy_async", []))
        self.cx.barrier()
        box = [1] * (len(dst.buffer.shape) - 1) + [width]
        box[[k for k, e in enumerate(dst.const_extents) if e != 1][0]] = rows
        tmap = self.tensor_map(dst.buffer, box, staging_layout.swizzle_bytes)
        starts = [fold(T.Cast(D.I32, None, self.cx.lx(x))) for x in dst.starts]
        stores = []
        for p in range(-(-cols // width)):
            coords = list(starts)
            coords[-1] = fold(add(coords[-1], c(p * width)))
            stores.append(S.call(None, "tma_store", rank=len(coords), args=[
                tmap, S.AddrOf(D.I64, None, staging, self.own_staging(rows * cols, c(p * rows * width))),
                *reversed(coords)]))
        stores += [S.SCall(None, "tma_store_commit", []), S.SCall(None, "tma_store_wait", [])]
        self.cx.emit(S.SIf(None, compare("==", self.cx.tid, c(0)), stores))
        self.cx.smem_read = True
        self.cx.smem_dirty = True  # the staging tile must not be overwritten before the stores have read it
        return True

    def store_staging_with_threads(self, dst: T.Region, staging: S.SBuffer, offset: Callable[[T.Expr, T.Expr], T.Expr],
                                   rows: int, width: int, panels: range, unroll: bool = True) -> list[S.SStmt]:
        """The staging tile's 128-byte panels `panels` (each `width` columns of the tile; offset(i, j) is element
        (i, j)'s place in the staging tile) stored to the output by the consumer threads: a pass of the threads
        covers threads/width rows of a panel, consecutive threads on consecutive elements of a row (a warp writes
        64 contiguous bytes of 2-byte elements), each store guarded by the output's bounds. What the direct-stores
        twin does where a TMA store cannot address the output (its rows not a multiple of 16 bytes), in place of the
        fragment's own scattered 2-element stores (H200, s21: fp8 2048x50257x768 0.545 -> 0.276 ms). `unroll`: the
        passes over the rows unrolled too (not where the accumulator stays live around them: its registers)."""
        threads = self.consumer_threads()
        per_pass = threads // width
        spread = [k for k, e in enumerate(dst.const_extents) if e != 1]
        row_dim, col_dim = spread[0], len(dst.const_extents) - 1
        start, dim = self.cx.lx(dst.starts[row_dim]), self.cx.lx(dst.buffer.shape[row_dim])
        col_start, cols = self.cx.lx(dst.starts[col_dim]), self.cx.lx(dst.buffer.shape[col_dim])
        gbuf = self.cx.sbuf(dst.buffer)

        def element(i: T.Expr, j: T.Expr) -> list[T.Expr]:
            return [add(self.cx.lx(at), i) if k == row_dim else add(self.cx.lx(at), j) if k == col_dim
                    else self.cx.lx(at) for k, at in enumerate(dst.starts)]

        def store(i: T.Expr, j: T.Expr) -> S.SStmt:
            return S.SIf(None, compare("<", add(col_start, j), cols), [S.SStore(
                None, gbuf, self.cx.global_offset(dst.buffer, element(i, j)),
                S.Ref(staging.dtype, None, staging, offset(i, j)))])

        def passes(count: T.Expr, rows_guarded: bool, unrolled: bool) -> S.SFor:
            rv, pv = self.cx.fresh("r"), self.cx.fresh("p")
            i = add(mul(rv, c(per_pass)), div(self.thread, c(width)))
            row_inside = compare("<", i, c(rows)) if rows % per_pass else None
            for k, at in enumerate(element(i, c(0))):
                if k == row_dim and rows_guarded or k not in (row_dim, col_dim):
                    row_inside = both(row_inside, compare("<", at, self.cx.lx(dst.buffer.shape[k])))
            body = store(i, add(mul(pv, c(width)), mod(self.thread, c(width))))
            if row_inside is not None:
                body = S.SIf(None, row_inside, [body])
            return S.SFor(None, rv, c(0), count, [S.SFor(None, pv, c(panels.start), c(len(panels)), [body],
                                                        unroll=True)], unroll=unrolled)

        # A tile with all its rows inside the output: every pass, unrolled (the offsets are the thread's plus
        # constants); else as many passes as it has rows inside (a decode step's M = 1 stores one row, not 64)
        full = passes(c(-(-rows // per_pass)), False, unroll)
        partial = passes(div(add(sub(dim, start), c(per_pass - 1)), c(per_pass)), True, False)
        return [S.SIf(None, compare("<=", add(start, c(rows)), dim), [full], [partial])]

    def own_staging(self, elems: int, offset: T.Expr) -> T.Expr:
        """`offset` in this warpgroup's part of a TMA-store staging tile of `elems` elements per warpgroup (ping-pong:
        one part per consumer warpgroup, side by side)."""
        return add(mul(self.warpgroup, elems), offset) if self.pingpong else offset

    def tma_store_in_panels(self, s: T.Copy, lay: WgmmaTiled, staging_layout: SharedLayout, fit: int) -> bool:
        """A persistent kernel's accumulator whose whole staging tile does not fit beside the pipeline: a staging
        tile of `fit` 128-byte panels, filled and stored (TMA) group of panels by group of panels -- so the
        pipeline keeps all its stages. Between groups, thread 0 waits until the stores have read the staging
        tile, and a barrier tells the others. Needs warpgroups stacked along M (wn = 1): a panel is then a
        fixed range of each thread's local elements (8-column chunks), known at compile time."""
        dst = s.dst
        out_dt = dst.buffer.dtype
        rows, cols = lay.shape
        width = staging_layout.panel_elems
        panel = rows * width
        copies = 2 if self.pingpong else 1
        staging = S.SBuffer(self.cx.fresh("tl_store_tile").name, out_dt, "shared", copies * fit * panel,
                            origin="TMA store staging (groups of panels)" + (
                                ", one per warpgroup" if self.pingpong else ""), align=1024)
        self.cx.shared.append(staging)
        threads_store = self.threads_store
        how = "the threads' stores" if threads_store else "TMA"
        self.cx.emit(S.SComment(s.span, f"store {s.src.buffer.name} through shared memory and {how}, {fit} of "
                                        f"{-(-cols // width)} panels at a time"))
        box = [1] * (len(dst.buffer.shape) - 1) + [width]
        box[[k for k, e in enumerate(dst.const_extents) if e != 1][0]] = rows
        tmap = None if threads_store else self.tensor_map(dst.buffer, box, staging_layout.swizzle_bytes)
        starts = [fold(T.Cast(D.I32, None, self.cx.lx(x))) for x in dst.starts]
        panels = -(-cols // width)
        for first in range(0, panels, fit):
            group = range(first, min(first + fit, panels))
            if first:  # the previous group's stores have read the staging tile (thread 0 waited)
                self.cx.barrier()
            self.cx.before_shared_access(False, True)
            chunks = [ch for ch in range(lay.ni) if ch * 8 // width in group]
            writes = self.write_staging(lay, s.src.buffer, staging, lambda i, j: self.own_staging(
                fit * panel, sub(staging_layout.offset([i, j]), c(first * panel))),  # noqa: B023 (called at once)
                [(mi, range(chunks[0], chunks[-1] + 1)) for mi in range(lay.mi)])
            # (the always-true branch keeps ptxas from serializing the main loop's wgmma, as in tma_store_fragment)
            self.cx.emit(S.SIf(None, compare("<", self.thread, c(self.consumer_threads())), writes))
            if threads_store:
                self.cx.barrier()
                self.cx.emit(S.SIf(None, compare("<", self.thread, c(self.consumer_threads())),
                                   self.store_staging_with_threads(
                                       dst, staging, lambda i, j, first=first: sub(staging_layout.offset([i, j]),
                                                                                   c(first * panel)), rows, width,
                                       group, unroll=False)))
                self.cx.smem_read = True
                continue
            self.cx.emit(S.SCall(None, "fence_proxy_async", []))
            self.cx.barrier()
            stores = []
            for pn in group:
                coords = list(starts)
                coords[-1] = fold(add(coords[-1], c(pn * width)))
                stores.append(S.call(None, "tma_store", rank=len(coords), args=[
                    tmap, S.AddrOf(D.I64, None, staging, self.own_staging(fit * panel, c((pn - first) * panel))),
                    *reversed(coords)]))
            stores += [S.SCall(None, "tma_store_commit", []), S.SCall(None, "tma_store_wait", [])]
            self.cx.emit(S.SIf(None, compare("==", self.cx.tid, c(0)), stores))
            self.cx.smem_read = True
            self.cx.smem_dirty = True
        return True

    def accumulator_to_shared(self, s: T.Copy) -> bool:
        """copy(accumulator, shared tile) of a whole 16-bit tile whose rows are stored in 16-byte runs (a linear,
        swizzled or panel layout): the staging writes above (stmatrix), into the tile's own layout."""
        lay = self.cx.sched.fragments.get(s.src.buffer.uid)
        dst = s.dst
        if not (isinstance(lay, WgmmaTiled) and dst.buffer.dtype in PACK_PAIR and len(lay.shape) == 2
                and list(dst.const_extents or ()) == list(lay.shape) and all(_is_zero(x) for x in dst.starts)
                and dst.buffer not in self.cx.stage_offset):
            return False
        shared = self.cx.shared_layout(dst.buffer)
        if (shared.index_map is not None or shared.transposed or shared.interleave or shared.shape != lay.shape
                or shared.row_elems % 8):
            return False
        self.cx.emit(S.SComment(s.span, f"{s.src.buffer.name} into {dst.buffer.name}: stmatrix"))
        for st in self.write_staging(lay, s.src.buffer, self.cx.sbuf(dst.buffer),
                                     lambda i, j: shared.offset([i, j]), [(mi, range(lay.ni)) for mi in range(lay.mi)]):
            self.cx.emit(st)
        return True

    def write_staging(self, lay: WgmmaTiled, acc: T.Buffer, staging: S.SBuffer,
                      offset: Callable[[T.Expr, T.Expr], T.Expr], chunks: Sequence[tuple[int, range]]) -> list[S.SStmt]:
        """Statements writing the accumulator's 8-column chunks `chunks` ((m64 slice, chunk range) pairs) into the
        staging tile, converted to its type; offset(i, j) is element (i, j)'s place there."""
        src = self.cx.sbuf(acc)
        out_dt = staging.dtype
        if out_dt not in PACK_PAIR or src.dtype not in (D.F32, out_dt):
            out = []
            for mi, rng in chunks:
                kv = self.cx.fresh("r")
                i, j = lay.coords(self.cx.tid, kv)
                out.append(S.SFor(None, kv, c((mi * lay.ni + rng.start) * 4), c(len(rng) * 4), [
                    S.SStore(None, staging, offset(i, j), fold(T.Cast(out_dt, None, S.Ref(src.dtype, None, src, kv))))],
                    unroll=True))
            return out

        def value(k: int) -> T.Expr:
            lo, hi = (S.Ref(src.dtype, None, src, c(k + e)) for e in (0, 1))
            if src.dtype == out_dt:
                return S.Intrinsic(D.U32, None, "pack2", [lo, hi])
            return S.Intrinsic(D.U32, None, PACK_PAIR[out_dt], [lo, hi])

        out = []
        for mi, rng in chunks:
            for ch in range(rng.start, rng.stop, 2):
                count = 4 if ch + 1 < rng.stop else 2
                i, j = lay.stmatrix_row(self.cx.tid, mi, ch, count)
                base = (mi * lay.ni + ch) * 4
                regs = [value(base + e) for e in (0, 2)] + ([value(base + 4 + e) for e in (0, 2)] if count == 4 else [])
                out.append(S.call(None, "stmatrix", [S.AddrOf(D.I64, None, staging, fold(offset(i, j))), *regs],
                                  count=count))
        return out


def _is_zero(e: T.Expr) -> bool:
    return isinstance(e, T.Const) and e.value == 0
