"""copy: a rectangular region moved between global, shared and fragment buffers, bounds-guarded.

Schema: `copy(src, dst)`; src and dst regions of equal (squeezed) extents. Reads src, writes dst.
Lowering (the SIMT targets): spread over the block's threads, 16 bytes at a time where both sides are
contiguous and a run-time check shows the global side aligned (as cp.async inside a cp.async pipeline); a
pipeline's global -> shared copy whose rows are not aligned still 16 bytes at a time, each chunk shifted out of the
aligned chunks that cover it (copy_shifted / copy16_realign); other copies element by element; into a K-major
(transposed) shared tile through registers (`staged_copy`, also what register-staged pipelining issues one
iteration ahead); fragments move a vector at a time where a
thread's registers are consecutive in memory ("vector_fragment_copy"), also from a global row not aligned to the
vector (load_realign: the two aligned vectors that cover it, shifted; CUDA, off with --no-realign), else element by
element. A
target's LoweringExtension may take the copy first (sm90: TMA stores of warpgroup accumulators).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import binary, both, cast, compare, to_i64
from ..ir.fold import as_int, fold, multiple_of
from ..ir.layout import (
    BlockRow,
    Projected,
    add,
    c,
    div,
    mod,
    mul,
    valid,
)
from ..ir.schedule import KernelSchedule
from .schema import extents, fmt, squeeze


@dataclass(frozen=True)
class CopyContext:
    """What the copy lowering may use (instead of the whole lowering, lower_to_simt.Lowerer): the kernel's target,
    schedule, threads and thread index, emitting statements, lowering expressions, buffers, their layouts and
    addresses, spreading a tile over the threads, and the note that shared memory was read. Built by `of(cx)`."""

    target: object
    sched: KernelSchedule
    threads: int  # the block's threads
    tid: T.Expr
    emit: Callable[[S.SStmt], None]
    block: Callable  # block(fn) -> the statements fn emits
    fresh: Callable  # fresh(name, dtype=i32) -> a new variable
    lx: Callable  # lower a Tile IR expression
    sbuf: Callable  # Tile IR buffer -> its SIMT buffer
    shared_layout: Callable  # shared buffer -> its SharedLayout
    region_index: Callable  # region_index(region, tile indices) -> buffer indices
    bounds: Callable  # bounds(region, buffer indices) -> the in-bounds condition of a global access, or None
    contiguous_inner: Callable  # contiguous_inner(region) -> the tile's inner extent runs along the buffer's
    address: Callable  # address(buffer, indices, span) -> the flat index into its SIMT buffer
    ref: Callable  # ref(buffer, indices, span) -> a read of the element
    addr: Callable  # addr(buffer, indices, span) -> its address (S.AddrOf)
    spread: Callable  # spread(shape, name, emit_point, span, cold=False): a tile's points over the threads
    fail: Callable  # fail(message, span) -> a CompileError to raise
    shared_read: Callable  # note that shared memory was read since the last barrier
    extension: object  # the target's LoweringExtension, which may take a copy first (lower_copy)
    realign_rows: bool = True  # misaligned rows into fragments a vector at a time (load_realign; off: --no-realign)

    @staticmethod
    def of(cx) -> CopyContext:
        """The context over a lowering (the one place that reads the Lowerer's members for copies)."""
        if isinstance(cx, CopyContext):
            return cx

        def read() -> None:
            cx.smem_read = True

        return CopyContext(cx.target, cx.sched, cx.k.threads, cx.tid, cx.emit, cx.block, cx.fresh, cx.lx, cx.sbuf,
                           cx.shared_layout, cx.region_index, cx.bounds, cx.contiguous_inner, cx.address, cx.ref,
                           cx.addr, cx.spread, cx.fail, read, cx.ext, "realign" not in cx.k.disabled)


def lower(cx, s: T.Copy, asynchronous: bool = False, realign: bool = False) -> None:
    """asynchronous: a cp.async pipeline's producer copy; realign: also one that feeds a matrix multiply, whose
    misaligned rows are worth the realigned copies' code (vector_copy)."""
    cx = CopyContext.of(cx)
    src, dst = s.src, s.dst
    sext = [e for e in src.const_extents if e != 1] or [1]
    if cx.extension.lower_copy(s):
        return
    if PER_THREAD & {src.buffer.scope, dst.buffer.scope} and "fragment" not in (src.buffer.scope, dst.buffer.scope):
        return copy_per_thread(cx, s, sext)
    if src.buffer.scope == "fragment" or dst.buffer.scope == "fragment":
        return copy_fragment(cx, s, sext)
    if dst.buffer.scope == "shared" and cx.shared_layout(dst.buffer).transposed:
        staged = staged_copy(cx, s, sext)
        if staged is not None:  # through registers: 128-bit global loads, stores in the K-major order
            load, store = staged
            load()
            store()
            return
        return copy_elements(cx, s, sext)
    if not vector_copy(cx, s, sext, asynchronous, realign):
        copy_elements(cx, s, sext)


PER_THREAD = {"local", "var"}  # scopes of which every thread holds its own whole copy


def copy_per_thread(cx, s: T.Copy, sext: list[int]) -> None:
    """A copy to or from a per-thread buffer (alloc_local): every thread moves the whole region itself, as the
    buffer is its own (spreading the elements over the threads would leave most of each thread's copy unset).
    Unrolled when small, so that the register array stays indexed by constants."""
    total = 1
    for e in sext:
        total *= e
    kv = cx.fresh("e")

    def body() -> None:
        rem: T.Expr = kv
        tile: list[T.Expr] = []
        for e in reversed(sext):
            tile.insert(0, mod(rem, e) if len(tile) < len(sext) - 1 else rem)
            rem = div(rem, e)
        copy_element(cx, s, tile)

    cx.emit(S.SFor(s.span, kv, c(0), c(total), cx.block(body), unroll=total <= 64))


def staged_copy(cx, s: T.Copy, sext: list[int], tag: str = "stage"):
    """A global -> shared copy through registers, as two code generators: load() reads this thread's
    16-byte chunks of the source into a register array (zero outside the tensor; element by element where
    the tensor is not 16-byte aligned at run time), store() writes them to shared memory (16 bytes at a time
    where the shared layout keeps a chunk contiguous, else element by element, e.g. into a K-major tile).
    Register-staged pipelining on AMD issues load() one iteration ahead. None when the copy does not fit
    (16-bit or 32-bit elements of one dtype, the source's inner dim contiguous and chunk-aligned)."""
    cx = CopyContext.of(cx)
    src, dst = s.src, s.dst
    if ("vector_copy16" not in cx.target.features or src.buffer.dtype != dst.buffer.dtype
            or src.buffer.scope != "global" or dst.buffer.scope != "shared" or len(sext) > 2):
        return None
    dt = src.buffer.dtype
    vec = 16 // dt.bytes
    if sext[-1] % vec or not cx.contiguous_inner(src) or not multiple_of(cx.lx(src.starts[-1]), vec):
        return None
    inner = cx.lx(src.buffer.shape[-1])
    if as_int(inner) is not None and as_int(inner) % vec:
        return None
    runtime_ok = None if as_int(inner) is not None else compare("==", mod(inner, vec), c(0))
    base = S.AddrOf(D.I64, None, cx.sbuf(src.buffer), c(0))
    runtime_ok = both(runtime_ok, S.Intrinsic(D.BOOL, None, "aligned16", [base]))
    dlay = cx.shared_layout(dst.buffer)
    rows = sext[0] if len(sext) == 2 else 1
    cchunks = sext[-1] // vec
    # K-major destination: consecutive threads take consecutive source rows, so that one wave's scalar
    # stores go to consecutive positions of a few stored rows (few LDS bank conflicts).
    rows_fastest = dlay.transposed and len(sext) == 2
    total = rows * cchunks
    threads = cx.threads
    iters = -(-total // threads)
    tmp = S.SBuffer(cx.fresh(f"{dst.buffer.name}_{tag}").name, dt, "local", iters * vec)
    cx.emit(S.DeclareArray(None, tmp))
    vector_store = dlay.runs(vec) and \
        multiple_of(cx.lx(dst.starts[-1]), vec) and cx.contiguous_inner(dst)

    def each_chunk(fn):
        for it in range(iters):  # unrolled here: the register array is indexed by constants
            flat = add(c(it * threads), cx.tid)
            r, cc = (mod(flat, rows), div(flat, rows)) if rows_fastest else (div(flat, cchunks), mod(flat, cchunks))
            tile = [r, mul(cc, vec)] if len(sext) == 2 else [mul(cc, vec)]
            body = cx.block(lambda it=it, tile=tile: fn(it, tile))
            for st in (body if total % threads == 0 or (it + 1) * threads <= total
                       else [S.SIf(None, compare("<", flat, c(total)), body)]):
                cx.emit(st)

    def load_chunk(it, tile):
        sidx = cx.region_index(src, tile)
        guard = cx.bounds(src, sidx)
        cx.emit(S.call(s.span, "load_vec", n=vec, args=[S.AddrOf(D.I64, None, tmp, c(it * vec)),
                                                     cx.addr(src.buffer, sidx, s.span),
                                                     guard if guard is not None else T.Const(D.BOOL, None, True)]))

    def load_elements(it, tile):  # the tensor is not 16-byte aligned: element by element
        for v in range(vec):
            t = list(tile)
            t[-1] = add(t[-1], v)
            idx = cx.region_index(src, t)
            g = cx.bounds(src, idx)
            load = cx.ref(src.buffer, idx, s.span)
            cx.emit(S.SStore(s.span, tmp, c(it * vec + v), load if g is None else
                               T.Select(dt, None, g, load, T.Const(dt, None, 0))))

    def load():
        fast = cx.block(lambda: each_chunk(load_chunk))
        slow = cx.block(lambda: each_chunk(load_elements))
        cx.emit(S.SIf(None, runtime_ok, fast, slow))

    def store_chunk(it, tile):
        didx = cx.region_index(dst, tile)
        if vector_store:
            cx.emit(S.call(s.span, "store_vec", n=vec, args=[cx.addr(dst.buffer, didx, s.span),
                                                          S.AddrOf(D.I64, None, tmp, c(it * vec))]))
            return
        for v in range(vec):
            t = list(tile)
            t[-1] = add(t[-1], v)
            idx = cx.region_index(dst, t)
            cx.emit(S.SStore(s.span, cx.sbuf(dst.buffer), fold(cx.address(dst.buffer, idx, s.span)),
                               S.Ref(dt, None, tmp, c(it * vec + v))))

    return load, (lambda: each_chunk(store_chunk))


def copy_fragment(cx, s: T.Copy, sext: list[int]) -> None:
    src, dst = s.src, s.dst
    frag = src.buffer if src.buffer.scope == "fragment" else dst.buffer
    layout = cx.sched.fragment(frag)
    if src.buffer.scope == dst.buffer.scope == "fragment" and \
            cx.sched.fragment(src.buffer) != cx.sched.fragment(dst.buffer):
        raise cx.fail("copy between fragments of different layouts", s.span)
    if [e for e in layout.shape if e != 1] != [e for e in sext if e != 1]:
        if src.buffer.scope == dst.buffer.scope == "fragment":
            raise cx.fail(f"copy of a part of fragment '{frag.name}' into another fragment is not supported; "
                          "index the fragment in a Parallel loop instead", s.span)
        return copy_fragment_part(cx, s, layout)
    if copy_fragment_vector(cx, s, layout, sext):
        return
    copy_fragment_elements(cx, s, layout)


def copy_fragment_vector(cx, s: T.Copy, layout, sext: list[int]) -> bool:
    """Fragment <-> memory `vec` elements at a time, where a block-row thread's consecutive
    registers are consecutive in memory (with a per-vector scalar fallback at ragged edges and
    a run-time alignment check on global tensors)."""
    src, dst = s.src, s.dst
    to_mem = src.buffer.scope == "fragment"
    frag_r, mem = (src, dst) if to_mem else (dst, src)
    block = layout.parent if isinstance(layout, Projected) and layout.keep == 1 else layout
    if not (isinstance(block, BlockRow) and block.vec >= 2 and mem.buffer.scope in ("global", "shared")
            and "vector_fragment_copy" in cx.target.features and frag_r.buffer.dtype.is_float
            and mem.buffer.dtype.is_float
            and cx.contiguous_inner(mem) and sext[-1] == layout.shape[-1]):
        return False
    vec = block.vec  # a block-row thread's (or its column projection's) registers run in chunks of vec
    nbytes = vec * mem.buffer.dtype.bytes
    if nbytes > 16 or 16 % nbytes or not multiple_of(cx.lx(mem.starts[-1]), vec):
        return False
    runtime_ok: T.Expr | None = None
    if mem.buffer.scope == "shared":
        if not cx.shared_layout(mem.buffer).runs(vec):
            return False
    else:
        inner = cx.lx(mem.buffer.shape[-1])
        if as_int(inner) is not None and as_int(inner) % vec:
            return False
        if as_int(inner) is None:
            runtime_ok = compare("==", mod(inner, vec), c(0))
        runtime_ok = both(runtime_ok, S.Intrinsic(D.BOOL, None, "aligned", [
            S.AddrOf(D.I64, None, cx.sbuf(mem.buffer), c(0)), c(nbytes)]))
    fsb = cx.sbuf(frag_r.buffer)
    if mem.buffer.scope == "shared":
        if not to_mem:
            cx.shared_read()

    def per_vector(emit_one):
        """An unrolled loop over the thread's vectors: emit_one(k0, idx) for the vector at register k0, whose
        elements start at global/shared index idx."""
        kv = cx.fresh("r")

        def body():
            k0 = mul(kv, vec)
            coords = layout.coords(cx.tid, k0)
            tile = [x for x, e in zip(coords, layout.shape, strict=True) if e != 1] or [c(0)]
            emit_one(k0, tile, cx.region_index(mem, tile))

        cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local // vec), cx.block(body), unroll=True))

    def one_vector(k0, tile, idx):
        dims = [cx.lx(d) for d in mem.buffer.shape]
        full = None
        partial = None
        if mem.buffer.scope == "global":
            for i, (d, x) in enumerate(zip(dims, idx, strict=True)):
                if i == len(idx) - 1:
                    full = both(full, compare("<=", add(x, vec), d))
                else:
                    partial = both(partial, bounds_one(cx, mem, i, x))
            full = both(partial, full)
        ok = valid(layout, cx.tid, k0)
        faddr = S.AddrOf(D.I64, None, fsb, k0)
        maddr = cx.addr(mem.buffer, idx, s.span)
        if to_mem:
            fast: list[S.SStmt] = [S.call(s.span, "store_vec", n=vec, args=[maddr, faddr])]
        else:
            fast = [S.call(s.span, "load_vec", n=vec, args=[faddr, maddr, full or T.Const(D.BOOL, None, True)])]
        if full is None:
            stmts = fast
        else:  # ragged edge: element by element
            slow = cx.block(lambda: fragment_elements(cx, s, layout, k0, vec, to_mem, mem, tile))
            stmts = [S.SIf(None, full, fast, slow)]
        if ok is not None:
            stmts = [S.SIf(None, ok, stmts)]
        for st in stmts:
            cx.emit(st)

    def one_realigned_vector(k0, tile, idx):
        unit, shift = realign_split(fold(cx.address(mem.buffer, idx, s.span)), vec)
        end = S.AddrOf(D.I64, None, cx.sbuf(mem.buffer), tensor_elements(cx, mem.buffer))
        load = S.call(s.span, "load_realign", n=vec, args=[
            S.AddrOf(D.I64, None, fsb, k0), S.AddrOf(D.I64, None, cx.sbuf(mem.buffer), unit), shift,
            realign_count(cx, mem, idx, vec), end])
        ok = valid(layout, cx.tid, k0)
        cx.emit(load if ok is None else S.SIf(None, ok, [load]))

    def vector_body():
        per_vector(one_vector)

    def realigned_body():
        per_vector(one_realigned_vector)

    if runtime_ok is None:
        vector_body()
    else:
        fast = cx.block(vector_body)
        slow = cx.block(lambda: copy_fragment_elements(cx, s, layout))
        if cx.realign_rows and not to_mem and mem.buffer.scope == "global" and nbytes in (4, 8, 16) and \
                "realigned_row_loads" in cx.target.features:
            # a row that is not aligned to `vec` elements (an odd row length) in a tensor whose start is: still a
            # vector at a time, from the two aligned vectors that cover it (load_realign), not element by element
            slow = [S.SIf(None, S.Intrinsic(D.BOOL, None, "aligned", [
                S.AddrOf(D.I64, None, cx.sbuf(mem.buffer), c(0)), c(nbytes)]), cx.block(realigned_body), slow)]
        cx.emit(S.SIf(None, runtime_ok, fast, slow))
    return True


def realign_split(flat: T.Expr, vec: int) -> tuple[T.Expr, T.Expr]:
    """A global element's flat index (in a tensor aligned to `vec` elements) as the aligned unit of `vec` elements
    holding it and its place in the unit (the shift, i32)."""
    shift = binary("&", flat, T.Const(flat.dtype, None, vec - 1))
    return binary("-", flat, shift), cast(shift, D.I32)


def realign_count(cx, mem: T.Region, idx: list[T.Expr], vec: int) -> T.Expr:
    """How many of the `vec` elements at global indices idx lie inside the tensor: those left in the row (at most
    vec), none where an outer index is past its dimension."""
    left = T.Binary(D.I32, None, "-", cx.lx(mem.buffer.shape[-1]), idx[-1])
    n = fold(T.Call(D.I32, None, "max", [fold(T.Call(D.I32, None, "min", [left, c(vec)])), c(0)]))
    rows_ok = None
    for i, x in enumerate(idx[:-1]):
        rows_ok = both(rows_ok, bounds_one(cx, mem, i, x))
    return n if rows_ok is None else fold(T.Select(D.I32, None, rows_ok, n, c(0)))


def bounds_one(cx, r: T.Region, axis: int, i: T.Expr) -> T.Expr | None:
    return compare("<", i, cx.lx(r.buffer.shape[axis]))


def fragment_elements(cx, s: T.Copy, layout, k0: T.Expr, vec: int, to_mem: bool, mem: T.Region,
                      tile: list[T.Expr]) -> None:
    """Elements k0 .. k0+vec-1 of a block-row fragment, each bounds-checked (a ragged edge)."""
    fsb = cx.sbuf((s.src if to_mem else s.dst).buffer)
    for v in range(vec):
        t = list(tile)
        t[-1] = add(t[-1], v)
        idx = cx.region_index(mem, t)
        guard = cx.bounds(mem, idx)
        k = add(k0, v)
        if to_mem:
            st: S.SStmt = S.SStore(s.span, cx.sbuf(mem.buffer), fold(cx.address(mem.buffer, idx, s.span)),
                                   cast(S.Ref(fsb.dtype, None, fsb, k), mem.buffer.dtype))
            cx.emit(st if guard is None else S.SIf(None, guard, [st]))
        else:
            load = cx.ref(mem.buffer, idx, s.span)
            value = load if guard is None else T.Select(mem.buffer.dtype, None, guard, load,
                                                        T.Const(mem.buffer.dtype, None, 0))
            cx.emit(S.SStore(s.span, fsb, k, cast(value, fsb.dtype)))


def copy_fragment_part(cx, s: T.Copy, layout) -> None:
    """A copy of a region of a fragment (`copy(f[0:16, 8:24], ...)`) to or from memory: each thread moves those
    of its elements that fall inside the region, element by element."""
    src, dst = s.src, s.dst
    frag_r, mem_r = (src, dst) if src.buffer.scope == "fragment" else (dst, src)
    starts = [cx.lx(x) for x in frag_r.starts]
    kv = cx.fresh("r")

    def body():
        coords = layout.coords(cx.tid, kv)
        inside = None
        tile = []
        for x, start, ext, dim in zip(coords, starts, frag_r.const_extents, layout.shape, strict=True):
            offset = fold(T.Binary(D.I32, None, "-", x, start))
            if ext != dim:
                lower = None if as_int(start) == 0 else compare(">=", x, start)
                inside = both(inside, both(lower, compare("<", offset, c(ext))))
            if ext != 1:
                tile.append(offset)
        tile = tile or [c(0)]
        midx = cx.region_index(mem_r, tile)
        guard = cx.bounds(mem_r, midx)
        if mem_r is dst:
            value = cast(S.Ref(src.buffer.dtype, None, cx.sbuf(src.buffer), kv), dst.buffer.dtype)
            st: S.SStmt = S.SStore(s.span, cx.sbuf(dst.buffer), fold(cx.address(dst.buffer, midx, s.span)), value)
        else:
            if src.buffer.scope == "shared":
                cx.shared_read()
            load = cx.ref(src.buffer, midx, s.span)
            value = load if guard is None else T.Select(src.buffer.dtype, None, guard, load,
                                                        T.Const(src.buffer.dtype, None, 0))
            st = S.SStore(s.span, cx.sbuf(dst.buffer), kv, cast(value, dst.buffer.dtype))
            guard = None  # (out of bounds reads zero, as a whole-fragment copy does)
        cond = both(both(valid(layout, cx.tid, kv), inside), guard)
        cx.emit(st if cond is None else S.SIf(None, cond, [st]))

    cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), cx.block(body), unroll=True))


def copy_fragment_elements(cx, s: T.Copy, layout) -> None:
    src, dst = s.src, s.dst
    kv = cx.fresh("r")

    def body():
        coords = layout.coords(cx.tid, kv)
        tile = [x for x, e in zip(coords, layout.shape, strict=True) if e != 1] or [c(0)]
        value: T.Expr
        if src.buffer.scope == "fragment":
            value = S.Ref(src.buffer.dtype, None, cx.sbuf(src.buffer), kv)
            guard = None
        else:
            sidx = cx.region_index(src, tile)
            guard = cx.bounds(src, sidx)
            if src.buffer.scope == "shared":
                cx.shared_read()
            load = cx.ref(src.buffer, sidx, s.span)
            value = load if guard is None else T.Select(src.buffer.dtype, None, guard, load,
                                                        T.Const(src.buffer.dtype, None, 0))
        value = cast(value, dst.buffer.dtype)
        if dst.buffer.scope == "fragment":
            st: S.SStmt = S.SStore(s.span, cx.sbuf(dst.buffer), kv, value)
        else:
            didx = cx.region_index(dst, tile)
            dguard = cx.bounds(dst, didx)
            st = S.SStore(s.span, cx.sbuf(dst.buffer), fold(cx.address(dst.buffer, didx, s.span)), value)
            if dguard is not None:
                st = S.SIf(None, dguard, [st])
        ok = valid(layout, cx.tid, kv)
        cx.emit(st if ok is None else S.SIf(None, ok, [st]))

    cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), cx.block(body), unroll=True))


def vector_copy(cx, s: T.Copy, sext: list[int], asynchronous: bool, realign: bool = False) -> bool:
    src, dst = s.src, s.dst
    if "vector_copy16" not in cx.target.features:  # WGSL: no reinterpreting 16-byte accesses
        return False
    if src.buffer.dtype != dst.buffer.dtype:
        return False
    vec = 16 // src.buffer.dtype.bytes
    if sext[-1] % vec != 0 or not (cx.contiguous_inner(src) and cx.contiguous_inner(dst)):
        return False
    for r in (src, dst):
        if r.buffer.scope == "shared":
            lay = cx.shared_layout(r.buffer)
            if not lay.runs(vec) or not multiple_of(cx.lx(r.starts[-1]), vec):
                return False
        elif not multiple_of(cx.lx(r.starts[-1]), vec):
            return False
    runtime_ok: T.Expr | None = None
    for r in (src, dst):
        if r.buffer.scope == "global":
            inner = cx.lx(r.buffer.shape[-1])
            if as_int(inner) is not None:
                if as_int(inner) % vec != 0:
                    return False
            else:
                runtime_ok = both(runtime_ok, compare("==", mod(inner, vec), c(0)))
            runtime_ok = both(runtime_ok, S.Intrinsic(D.BOOL, None, "aligned16", [
                S.AddrOf(D.I64, None, cx.sbuf(r.buffer), c(0))]))
    use_async = asynchronous and src.buffer.scope == "global" and dst.buffer.scope == "shared"
    chunks_shape = list(sext[:-1]) + [sext[-1] // vec]

    def point(tile: list[T.Expr]) -> None:
        tile = tile[:-1] + [mul(tile[-1], vec)]
        sidx = cx.region_index(src, tile)
        didx = cx.region_index(dst, tile)
        guard = both(cx.bounds(src, sidx), cx.bounds(dst, didx))
        saddr = cx.addr(src.buffer, sidx, s.span)
        daddr = cx.addr(dst.buffer, didx, s.span)
        pred = guard if guard is not None else T.Const(D.BOOL, None, True)
        if use_async:
            cx.emit(S.SCall(s.span, "cp_async16", [daddr, saddr, pred]))
        elif src.buffer.scope == "global":  # zero-fill what lies outside the tensor
            cx.emit(S.SCall(s.span, "copy16_or_zero", [daddr, saddr, pred]))
        else:
            st = S.SCall(s.span, "copy16", [daddr, saddr])
            cx.emit(st if guard is None else S.SIf(None, guard, [st]))

    def vector_body():
        cx.spread(chunks_shape, "v", point, s.span)

    def realigned_body():
        # A tile inside the tensor (with 16 bytes of the tensor after its last element) takes every chunk
        # unguarded, in straight-line code whose loads the compiler can issue together; edge tiles check each.
        inside = None
        for d, start, ext in zip(src.buffer.shape, src.starts, src.const_extents, strict=True):
            fits = compare("<=", add(cx.lx(start), c(ext)), cx.lx(d))
            if not (isinstance(fits, T.Const) and fits.value):
                inside = both(inside, fits)
        last = cx.address(src.buffer, [add(cx.lx(x), c(e - 1)) for x, e in
                                       zip(src.starts, src.const_extents, strict=True)], s.span)
        inside = both(inside, compare("<=", binary("+", last, T.Const(D.I64, None, vec + 1)),
                                      tensor_elements(cx, src.buffer)))
        groups_shape = chunks_shape[:-1] + [chunks_shape[-1] // group]
        cx.emit(S.SIf(None, inside, cx.block(lambda: cx.spread(groups_shape, "u", shifted_point, s.span)),
                      cx.block(lambda: cx.spread(chunks_shape, "u", realigned_point, s.span))))

    # A thread takes `group` consecutive chunks of a row: group + 1 aligned loads for them, not 2 * group, which
    # leaves registers for more loads in flight beside a large accumulator.
    group = next(g for g in (4, 2, 1) if chunks_shape[-1] % g == 0)

    def shifted_point(tile: list[T.Expr]) -> None:
        first = tile[:-1] + [mul(tile[-1], group * vec)]
        dsts = [cx.addr(dst.buffer, cx.region_index(dst, first[:-1] + [add(first[-1], g * vec)]), s.span)
                for g in range(group)]
        cx.emit(S.call(s.span, "copy_shifted", [*dsts, cx.addr(src.buffer, cx.region_index(src, first), s.span)],
                       chunks=group))

    def realigned_point(tile: list[T.Expr]) -> None:
        tile = tile[:-1] + [mul(tile[-1], vec)]
        sidx = cx.region_index(src, tile)
        didx = cx.region_index(dst, tile)
        rows_ok = None  # the outer dimensions' bounds (the inner one's is n's)
        for i, (x, ext, start) in enumerate(zip(sidx[:-1], src.const_extents[:-1], src.starts[:-1], strict=True)):
            dim, lo = as_int(cx.lx(src.buffer.shape[i])), as_int(cx.lx(start))
            if not (dim is not None and lo is not None and 0 <= lo and lo + ext <= dim):
                rows_ok = both(rows_ok, bounds_one(cx, src, i, x))
        left = T.Binary(D.I32, None, "-", cx.lx(src.buffer.shape[-1]), sidx[-1])
        n = fold(T.Call(D.I32, None, "max", [fold(T.Call(D.I32, None, "min", [left, c(vec)])), c(0)]))
        if rows_ok is not None:
            n = fold(T.Select(D.I32, None, rows_ok, n, c(0)))
        end = S.AddrOf(D.I64, None, cx.sbuf(src.buffer), tensor_elements(cx, src.buffer))
        cx.emit(S.SCall(s.span, "copy16_realign", [cx.addr(dst.buffer, didx, s.span),
                                                   cx.addr(src.buffer, sidx, s.span), n, end]))

    if runtime_ok is None:
        vector_body()
    else:
        fast = cx.block(vector_body)
        # a gemm pipeline's global -> shared copy of rows that are not 16-byte aligned: still 16 bytes at a time,
        # each chunk assembled from the aligned chunks that cover it (element by element only at ragged edges). Not
        # for other copies (a row kernel's rows): their kernels would carry the realigned code's registers on the
        # aligned path too (softmax sm90: 48 -> 64 registers, fewer rows in flight) for a gain not measured.
        slow = cx.block(realigned_body if use_async and realign else lambda: copy_elements(cx, s, sext, cold=True))
        cx.emit(S.SIf(None, runtime_ok, fast, slow))
    return True


def tensor_elements(cx, b: T.Buffer) -> T.Expr:
    """A global tensor's element count (its dims' product, in 64 bits)."""
    total: T.Expr = T.Const(D.I64, None, 1)
    for d in b.shape:
        total = binary("*", total, to_i64(cx.lx(d)))
    return total


def copy_element(cx, s: T.Copy, tile: list[T.Expr]) -> None:
    """One element of a copy at `tile` (offsets within the region): a read outside the source gives 0, a write
    outside the destination is skipped."""
    src, dst = s.src, s.dst
    sidx = cx.region_index(src, tile)
    didx = cx.region_index(dst, tile)
    sguard, dguard = cx.bounds(src, sidx), cx.bounds(dst, didx)
    load = cx.ref(src.buffer, sidx, s.span)
    value = load if sguard is None else T.Select(src.buffer.dtype, None, sguard, load,
                                                 T.Const(src.buffer.dtype, None, 0))
    st: S.SStmt = S.SStore(s.span, cx.sbuf(dst.buffer), fold(cx.address(dst.buffer, didx, s.span)),
                           cast(value, dst.buffer.dtype))
    cx.emit(st if dguard is None else S.SIf(None, dguard, [st]))


def copy_elements(cx, s: T.Copy, sext: list[int], cold: bool = False) -> None:
    cx.spread(sext, "e", lambda tile: copy_element(cx, s, tile), s.span, cold=cold)


def reads(s: T.Copy) -> list[T.Region]:
    return [s.src]


def writes(s: T.Copy) -> list[T.Region]:
    return [s.dst]


def check(s: T.Copy, rep: Reporter) -> None:
    """Source and destination regions of equal (squeezed) extent."""
    a, b = extents(s.src, rep, s.span), extents(s.dst, rep, s.span)
    if a is None or b is None:
        return
    if squeeze(a) != squeeze(b):
        rep.error(f"copy shape mismatch: source '{s.src.buffer.name}' region is {fmt(a)}, destination "
                  f"'{s.dst.buffer.name}' region is {fmt(b)}", s.span)


def interpret(block, s: T.Copy) -> None:
    """Tile IR semantics (tilec/interp/tile_interp.py's block): the region, bounds-guarded on global memory."""
    block.write_region(s.dst, block.read_region(s.src))
