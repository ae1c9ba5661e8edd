"""print(value, msg=, block=, thread=): debug output of a region (any scope) or a scalar.

The text is one format for the interpreter and the devices, so that a test can compare them line for line:

    [block (0, 0, 0)] tile s[0, 0:8]: 1.1176 -1.3871 -0.42661 0 ...     a buffer: 8 values a line
    [block (0, 0, 0) thread 0] step: 3                                    a scalar: the thread that printed it

Every line starts with the block (and, for a scalar or a print with `thread=`, the thread), so the lines of
blocks that print concurrently on a GPU can be told apart and sorted. A buffer prints its region's elements in
row-major order, indices relative to the region's start; floats as C's `%.5g`, integers and bools as `%d`.
Elements of a global region past the tensor's edge print as 0 (as a bounds-guarded copy reads them).

Lowering (SIMT targets): the print runs only in the blocks named by `block=` (a block-uniform `if`, so the
barriers inside are legal); thread `thread` (default 0) prints. Shared, global and per-thread regions are read
where they are; a fragment is first gathered into a shared scratch tile (every thread stores the elements its
registers hold; barrier), printed from there, and a barrier protects the scratch from the next print. Each
line is one `print` intrinsic (a device printf), so a line is never split by another thread's output.
"""

from __future__ import annotations

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import binary, both, compare
from ..ir.layout import add, c, div, mod, mul, valid
from .schema import extents

VALUES_PER_LINE = 8  # a device printf takes at most 32 arguments; lines stay readable


def conversion(dt: D.DType) -> str:
    """The printf conversion of a value of type dt (C and Python's `%` agree on both)."""
    return "%.5g" if dt.is_float else "%d"


def _literal(text: str) -> str:
    return text.replace("%", "%%")


def block_prefix(thread: int | None) -> str:
    """The format of a line's prefix; its arguments are the three block indices."""
    return "[block (%d, %d, %d)" + (f" thread {thread}" if thread is not None else "") + "] "


def row_formats(s: T.Print, dims: list[int]) -> list[tuple[int, int, str]]:
    """(first column, column count, format) of each line of one row of a buffer print. A format's arguments
    are the three block indices, the row's leading indices (all dimensions but the last), then the values."""
    b = s.value.buffer
    head = block_prefix(s.thread) + (f"{_literal(s.label)} " if s.label else "") + _literal(b.name)
    lead = ["%d"] * (len(dims) - 1)
    conv = conversion(b.dtype)
    out = []
    for c0 in range(0, dims[-1], VALUES_PER_LINE):
        n = min(VALUES_PER_LINE, dims[-1] - c0)
        out.append((c0, n, f"{head}[{', '.join([*lead, f'{c0}:{c0 + n}'])}]: " + " ".join([conv] * n)))
    return out


def scalar_format(s: T.Print) -> str:
    dt = s.value.dtype
    return block_prefix(s.thread or 0) + (f"{_literal(s.label)}: " if s.label else "") + conversion(dt)


def _py(v, dt: D.DType):
    return float(v) if dt.is_float else int(v)


# ---------------------------------------------------------------- the tile op's home

def reads(s: T.Print) -> list[T.Region]:
    return [s.value] if isinstance(s.value, T.Region) else []


def writes(s: T.Print) -> list[T.Region]:
    return []


def check(s: T.Print, rep: Reporter) -> None:
    if isinstance(s.value, T.Region):
        extents(s.value, rep, s.span)


def interpret(block, s: T.Print) -> None:
    import numpy as np

    if s.block is not None and tuple(block.block_idx) != s.block:
        return
    bidx = tuple(int(i) for i in block.block_idx)
    out = block.interp.stdout
    if not isinstance(s.value, T.Region):
        values = np.asarray(block.eval(s.value, None)).reshape(-1)  # (per-thread code: one value per thread)
        value = values[min(s.thread or 0, values.size - 1)]
        print(scalar_format(s) % (*bidx, _py(value, s.value.dtype)), file=out)
        return
    dims = list(s.value.const_extents)
    rows = np.asarray(block.read_region(s.value)).reshape(-1, dims[-1])
    dt = s.value.buffer.dtype
    for r, row in enumerate(rows):
        lead = np.unravel_index(r, dims[:-1]) if len(dims) > 1 else ()
        for c0, n, fmt in row_formats(s, dims):
            print(fmt % (*bidx, *(int(i) for i in lead), *(_py(v, dt) for v in row[c0:c0 + n])), file=out)


def lower(cx, s: T.Print) -> None:
    thread = s.thread or 0
    if thread >= cx.k.threads:
        raise cx.fail(f"print(thread={thread}): the kernel has {cx.k.threads} threads", s.span)
    blocks = [S.BlockIdx(D.I32, None, a) for a in range(3)]
    me = compare("==", cx.tid, c(thread))

    def body():
        if not isinstance(s.value, T.Region):
            v = cx.lx(s.value)
            cx.emit(S.SIf(s.span, me, [S.call(s.span, "print", [*blocks, v], fmt=scalar_format(s))]))
            return
        _lower_buffer(cx, s, me, blocks)

    if s.block is None:
        return body()
    cond = None
    for a, want in enumerate(s.block):
        cond = both(cond, compare("==", blocks[a], c(want)))
    # The other blocks skip the barriers inside: what was unsynchronised before the print still is after it.
    dirty, read = cx.smem_dirty, cx.smem_read
    cx.emit(S.SIf(s.span, cond, cx.block(body)))
    cx.smem_dirty |= dirty
    cx.smem_read |= read


def _lower_buffer(cx, s: T.Print, me: T.Expr, blocks: list[T.Expr]) -> None:
    r = s.value
    b = r.buffer
    dims = list(r.const_extents)
    if b.scope == "fragment":
        src = _gather_fragment(cx, s, dims)

        def element(tile_idx: list[T.Expr]) -> T.Expr:
            flat: T.Expr = c(0)
            for i, d in zip(tile_idx, dims, strict=True):
                flat = add(mul(flat, d), i)
            return S.Ref(b.dtype, None, src, flat)
    else:
        def element(tile_idx: list[T.Expr]) -> T.Expr:
            idx = [add(cx.lx(st), i) for st, i in zip(r.starts, tile_idx, strict=True)]
            ref = cx.ref(b, idx, s.span)
            inside = cx.bounds(r, idx)
            return ref if inside is None else T.Select(b.dtype, None, inside, ref, T.Const(b.dtype, None, 0))

    row = cx.fresh("print_row")
    rows = 1
    for d in dims[:-1]:
        rows *= d

    def one_row():
        lead: list[T.Expr] = []
        rem: T.Expr = row
        for d in reversed(dims[:-1]):
            lead.insert(0, mod(rem, d))
            rem = div(rem, d)
        for c0, n, fmt in row_formats(s, dims):
            vals = [element([*lead, c(c0 + j)]) for j in range(n)]
            cx.emit(S.call(s.span, "print", [*blocks, *lead, *vals], fmt=fmt))

    cx.emit(S.SIf(s.span, me, [S.SFor(s.span, row, c(0), c(rows), cx.block(one_row), keep_rolled=True)]))
    if b.scope == "fragment":
        cx.barrier()  # the scratch tile is reused by the next print


def _gather_fragment(cx, s: T.Print, dims: list[int]) -> S.SBuffer:
    """Every thread stores the region's elements its registers hold into a shared scratch tile (row-major in
    the region); returns the tile, published by a barrier."""
    r = s.value
    b = r.buffer
    total = 1
    for d in dims:
        total *= d
    scratch = _scratch(cx, b.dtype, total)
    layout = cx.sched.fragment(b)
    frag = cx.sbuf(b)
    kv = cx.fresh("print_k")

    def body():
        cond = valid(layout, cx.tid, kv)
        flat: T.Expr = c(0)
        for i, st, d, full in zip(layout.coords(cx.tid, kv), r.starts, dims, b.const_shape, strict=True):
            start = cx.lx(st)
            rel = binary("-", i, start)
            if not (isinstance(start, T.Const) and start.value == 0 and d == full):  # part of the dimension
                cond = both(cond, both(compare(">=", rel, c(0)), compare("<", rel, c(d))))
            flat = add(mul(flat, d), rel)
        store = S.SStore(None, scratch, flat, S.Ref(b.dtype, None, frag, kv))
        cx.emit(store if cond is None else S.SIf(None, cond, [store]))

    cx.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), cx.block(body), unroll=True))
    cx.barrier()
    return scratch


def _scratch(cx, dt: D.DType, elems: int) -> S.SBuffer:
    """One shared scratch tile per element type, as large as the largest fragment print needs."""
    tiles = cx.__dict__.setdefault("print_scratch", {})
    if dt not in tiles:
        tiles[dt] = S.SBuffer(f"print_scratch_{dt.name}", dt, "shared", 0, origin="print scratch")
        cx.shared.append(tiles[dt])
    tiles[dt].size = max(tiles[dt].size or 0, elems)
    return tiles[dt]
