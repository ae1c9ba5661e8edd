"""Layouts: where each element of a block-wide tile lives.

A *fragment layout* distributes a fragment (a tile held in registers across the block) over the
threads: thread t holds `num_local` elements, and `coords(t, k)` gives the tile indices of its
k-th element. Layout inference picks one per fragment; lowering unrolls loops over k, so register
arrays are only indexed by constants.

A *shared layout* maps tile indices to an offset in a shared-memory array; the XOR swizzle
permutes 16-byte chunks within a row so that ldmatrix and 16-byte copies are bank-conflict free.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes as D
from . import tile as T

# ---------------------------------------------------------------- expression helpers


def c(v: int) -> T.Const:
    return T.Const(D.I32, None, v)


def _bin(op: str, a: T.Expr, b: T.Expr | int) -> T.Expr:
    if isinstance(b, int):
        b = c(b)
    from .fold import fold_node

    e = T.Binary(D.I32, None, op, a, b)
    return fold_node(e) or e


def add(a, b):
    return _bin("+", a, b)


def sub(a, b):
    from .fold import fold

    return fold(T.Binary(D.I32, None, "-", a, c(b) if isinstance(b, int) else b))


def compare(op: str, a: T.Expr, b: T.Expr) -> T.Expr:
    from .fold import fold

    return fold(T.Compare(D.BOOL, None, op, a, b))


def mul(a, b):
    return _bin("*", a, b)


def div(a, b):
    return _bin("//", a, b)


def mod(a, b):
    return _bin("%", a, b)


def xor(a, b):
    return _bin("^", a, b)


# ---------------------------------------------------------------- fragment layouts


K = T.Expr | int


def _e(k: K) -> T.Expr:
    return c(k) if isinstance(k, int) else k


@dataclass(frozen=True)
class _WarpTiled:
    """A block tile M x N split into wm x wn warp (wave) tiles, each split into atoms of a matrix
    instruction's accumulator; local element k = (mi * ni_count + ni) * 4 + e."""

    m: int
    n: int
    wm: int
    wn: int
    atom_m = 16
    atom_n = 8

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.m, self.n)

    @property
    def mi(self) -> int:
        return self.m // self.wm // self.atom_m

    @property
    def ni(self) -> int:
        return self.n // self.wn // self.atom_n

    @property
    def num_local(self) -> int:
        return self.mi * self.ni * 4


@dataclass(frozen=True)
class MmaTiled(_WarpTiled):
    """The accumulator of warp-level m16n8 matrix instructions tiled over warps.

    The block tile M x N is split into wm x wn warp tiles; each warp tile into 16x8 atoms. In an
    atom, lane l holds (l/4 + 8*(e/2), 2*(l%4) + e%2) for e in 0..3 (PTX ISA, mma.m16n8k16 C/D).
    Local element k = (mi * ni_count + ni) * 4 + e.
    """

    atom_n = 8

    def coords(self, t: T.Expr, k: K) -> list[T.Expr]:
        k = _e(k)
        mi, ni, e = div(k, self.ni * 4), mod(div(k, 4), self.ni), mod(k, 4)
        warp, lane = div(t, 32), mod(t, 32)
        warp_m, warp_n = mod(warp, self.wm), div(warp, self.wm)
        i = add(add(add(mul(warp_m, self.m // self.wm), mul(mi, 16)), mul(div(e, 2), 8)), div(lane, 4))
        j = add(add(add(mul(warp_n, self.n // self.wn), mul(ni, 8)), mod(e, 2)), mul(mod(lane, 4), 2))
        return [i, j]

    def __str__(self) -> str:
        return f"mma_m16n8[{self.m}x{self.n}, warps {self.wm}x{self.wn}]"


@dataclass(frozen=True)
class WgmmaTiled(MmaTiled):
    """The accumulator of Hopper wgmma.m64nNk16 tiled over warpgroups (128 threads each).

    The block tile M x N is split into wm x wn warpgroup tiles (warpgroup g covers (g % wm, g / wm));
    a warpgroup tile is covered by m64 instructions stacked along M (`mi` of them), each N wide.
    In one instruction, warp w of the warpgroup owns rows 16w..16w+15 and, per 8 columns, lane l holds
    (l/4 + 8*(e/2), 2*(l%4) + e%2) (PTX ISA, wgmma D fragment for .f32). Local element
    k = (mi * ni_count + ni) * 4 + e, so one instruction's registers are contiguous.
    """

    atom_m = 64

    def coords(self, t: T.Expr, k: K) -> list[T.Expr]:
        k = _e(k)
        mi, ni, e = div(k, self.ni * 4), mod(div(k, 4), self.ni), mod(k, 4)
        group, warp, lane = div(t, 128), mod(div(t, 32), 4), mod(t, 32)
        group_m = c(0) if self.wm == 1 else mod(group, self.wm)
        group_n = c(0) if self.wn == 1 else div(group, self.wm)
        i = add(add(add(add(mul(group_m, self.m // self.wm), mul(mi, 64)), mul(warp, 16)), mul(div(e, 2), 8)),
                div(lane, 4))
        j = add(add(add(mul(group_n, self.n // self.wn), mul(ni, 8)), mod(e, 2)), mul(mod(lane, 4), 2))
        return [i, j]

    def stmatrix_row(self, t: T.Expr, mi: int, chunk: int, count: int) -> list[T.Expr]:
        """(i, j) of the 8-element row whose shared address thread t gives to stmatrix_x{count} (count 8x8 matrices)
        storing the chunks chunk.. of 64-row slice mi: lane l gives row l % 8 of matrix l / 8, and matrix q holds
        rows 8 * (q % 2).. of chunk chunk + q / 2 of the warp's 16 rows (the accumulator's own arrangement)."""
        group, warp, lane = div(t, 128), mod(div(t, 32), 4), mod(t, 32)
        matrix = div(lane, 8) if count == 4 else mod(div(lane, 8), count)
        group_m = c(0) if self.wm == 1 else mod(group, self.wm)
        group_n = c(0) if self.wn == 1 else div(group, self.wm)
        i = add(add(add(add(mul(group_m, self.m // self.wm), c(mi * 64)), mul(warp, 16)), mul(mod(matrix, 2), 8)),
                mod(lane, 8))
        j = add(add(mul(group_n, self.n // self.wn), c(chunk * 8)), mul(div(matrix, 2), 8))
        return [i, j]

    @property
    def instr_n(self) -> int:
        return self.n // self.wn

    def __str__(self) -> str:
        return f"wgmma_m64n{self.instr_n}[{self.m}x{self.n}, warpgroups {self.wm}x{self.wn}]"


@dataclass(frozen=True)
class MfmaTiled(_WarpTiled):
    """The accumulator of AMD v_mfma_f32_16x16x16{f16,bf16_1k} (wave64) tiled over waves.

    The block tile M x N is split into wm x wn wave tiles; each wave tile into 16x16 atoms. In an
    atom, lane l holds (4*(l/16) + e, l%16) for e in 0..3 (tilec/targets/hip/mfma_layouts.py, C/D).
    Local element k = (mi * ni_count + ni) * 4 + e. Wave w covers wave tile (w % wm, w / wm).
    """

    atom_n = 16
    # transposed: lane l holds (l%16, 4*(l/16) + e) instead -- the accumulator of the swapped product
    # C^T = B^T A^T. A lane's 4 registers then run along a row, which is the MFMA B-operand layout of C^T:
    # a transposed f16/bf16 accumulator feeds a following MFMA (P V in flash attention) with no data movement.
    transposed: bool = False

    def coords(self, t: T.Expr, k: K) -> list[T.Expr]:
        k = _e(k)
        mi, ni, e = div(k, self.ni * 4), mod(div(k, 4), self.ni), mod(k, 4)
        wave, lane = div(t, 64), mod(t, 64)
        wave_m, wave_n = mod(wave, self.wm), div(wave, self.wm)
        if self.transposed:
            i = add(add(mul(wave_m, self.m // self.wm), mul(mi, 16)), mod(lane, 16))
            j = add(add(add(mul(wave_n, self.n // self.wn), mul(ni, 16)), mul(div(lane, 16), 4)), e)
            return [i, j]
        i = add(add(add(mul(wave_m, self.m // self.wm), mul(mi, 16)), mul(div(lane, 16), 4)), e)
        j = add(add(mul(wave_n, self.n // self.wn), mul(ni, 16)), mod(lane, 16))
        return [i, j]

    def __str__(self) -> str:
        t = "T" if self.transposed else ""
        return f"mfma_16x16{t}[{self.m}x{self.n}, waves {self.wm}x{self.wn}]"


def _mfma_in_lane(p: MfmaTiled, keep: int) -> bool:
    """Whether the index kept by a projection of MFMA tile p varies with a lane's register e (0..3) -- the
    rows of an untransposed tile, the columns of a transposed one -- rather than with lane % 16."""
    return (keep == 0) != p.transposed


@dataclass(frozen=True)
class BlockRow:
    """A generic row-major distribution: each row is spread over `tpr` consecutive threads, each
    holding `vec` consecutive elements per chunk; `rpt` = threads / tpr rows are covered per pass.
    Local element k = (ri * col_chunks + cc) * vec + v."""

    rows: int
    cols: int
    threads: int
    tpr: int
    vec: int
    dims: tuple[int, ...]  # the fragment's own shape (rows x cols is it flattened to 2-D)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.dims

    @property
    def rpt(self) -> int:
        return self.threads // self.tpr

    @property
    def row_passes(self) -> int:
        return -(-self.rows // self.rpt)

    @property
    def col_chunks(self) -> int:
        return self.cols // (self.tpr * self.vec)

    @property
    def per_row(self) -> int:
        return self.col_chunks * self.vec

    @property
    def num_local(self) -> int:
        return self.row_passes * self.per_row

    def coords2d(self, t: T.Expr, k: K) -> tuple[T.Expr, T.Expr]:
        k = _e(k)
        ri, cc, v = div(k, self.per_row), div(mod(k, self.per_row), self.vec), mod(k, self.vec)
        i = add(div(t, self.tpr), mul(ri, self.rpt))
        j = add(add(mul(mod(t, self.tpr), self.vec), mul(cc, self.tpr * self.vec)), v)
        return i, j

    def coords(self, t: T.Expr, k: K) -> list[T.Expr]:
        i, j = self.coords2d(t, k)
        if len(self.dims) == 1:
            return [j]
        if len(self.dims) == 2:
            return [i, j]
        out = [j]  # unflatten the leading dims from the row index
        for d in reversed(self.dims[1:-1]):
            out.insert(0, mod(i, d))
            i = div(i, d)
        out.insert(0, i)
        return out

    def valid(self, t: T.Expr, k: K) -> T.Expr | None:
        """Whether element k of thread t exists (the last row pass may be partial)."""
        if self.rows % self.rpt == 0:
            return None
        i, _ = self.coords2d(t, k)
        return T.Compare(D.BOOL, None, "<", i, c(self.rows))

    def __str__(self) -> str:
        return f"block_row[{'x'.join(map(str, self.dims))}, {self.tpr} threads/row, vec {self.vec}]"


@dataclass(frozen=True)
class Projected:
    """One dimension of a 2-D parent layout: a 1-D fragment indexed like the parent's rows
    (keep=0) or columns (keep=1), replicated over the threads that share them."""

    parent: MmaTiled | MfmaTiled | BlockRow
    keep: int

    @property
    def shape(self) -> tuple[int, ...]:
        p = self.parent
        if isinstance(p, MmaTiled | MfmaTiled):
            return (p.shape[self.keep],)
        return (p.rows,) if self.keep == 0 else (p.cols,)

    @property
    def num_local(self) -> int:
        p = self.parent
        if isinstance(p, MmaTiled):
            return p.mi * 2 if self.keep == 0 else p.ni * 2
        if isinstance(p, MfmaTiled):  # one register per atom row/column, times 4 where e selects the index
            return (p.mi if self.keep == 0 else p.ni) * (4 if _mfma_in_lane(p, self.keep) else 1)
        return p.row_passes if self.keep == 0 else p.per_row

    def local_of_parent(self, k: K) -> T.Expr:
        """The local index holding the projection of the parent's local element k."""
        k = _e(k)
        p = self.parent
        if isinstance(p, MmaTiled):
            if self.keep == 0:
                return add(mul(div(k, p.ni * 4), 2), div(mod(k, 4), 2))
            return add(mul(mod(div(k, 4), p.ni), 2), mod(k, 2))
        if isinstance(p, MfmaTiled):
            atom = div(k, p.ni * 4) if self.keep == 0 else mod(div(k, 4), p.ni)
            return add(mul(atom, 4), mod(k, 4)) if _mfma_in_lane(p, self.keep) else atom
        return div(k, p.per_row) if self.keep == 0 else mod(k, p.per_row)

    def parent_local(self, k: K) -> T.Expr:
        """A parent local element whose projection is local element k."""
        k = _e(k)
        p = self.parent
        if isinstance(p, MmaTiled):
            if self.keep == 0:
                return add(mul(div(k, 2), p.ni * 4), mul(mod(k, 2), 2))
            return add(mul(div(k, 2), 4), mod(k, 2))
        if isinstance(p, MfmaTiled):
            if _mfma_in_lane(p, self.keep):
                atom, e = div(k, 4), mod(k, 4)
                return add(mul(atom, p.ni * 4), e) if self.keep == 0 else add(mul(atom, 4), e)
            return mul(k, p.ni * 4) if self.keep == 0 else mul(k, 4)
        return mul(k, p.per_row) if self.keep == 0 else k

    def coords(self, t: T.Expr, k: K) -> list[T.Expr]:
        p = self.parent
        pk = self.parent_local(k)
        idx = p.coords2d(t, pk) if isinstance(p, BlockRow) else p.coords(t, pk)
        return [idx[self.keep]]

    def valid(self, t: T.Expr, k: K) -> T.Expr | None:
        return self.parent.valid(t, self.parent_local(k)) if isinstance(self.parent, BlockRow) else None

    def owner(self, t: T.Expr, k: K) -> T.Expr:
        """Whether thread t is the one replica of local element k that makes a side effect happen once (an
        atomic): the thread whose parent element parent_local(k) lies at index 0 of the dropped dimension."""
        p = self.parent
        pk = self.parent_local(k)
        idx = p.coords2d(t, pk) if isinstance(p, BlockRow) else p.coords(t, pk)
        return T.Compare(D.BOOL, None, "==", idx[1 - self.keep], c(0))

    @property
    def canonical(self) -> tuple:
        """Two projections with the same key put the same indices in the same registers of the same
        threads, even if their parents differ (rows of a 64x64 and of a 64x128 accumulator)."""
        p = self.parent
        if isinstance(p, MmaTiled):
            kind = type(p).__name__
            return (kind, "rows", p.m, p.wm) if self.keep == 0 else (kind, "cols", p.n, p.wm, p.wn)
        if isinstance(p, MfmaTiled):
            if self.keep == 0:
                return ("mfma_rows", p.transposed, p.m, p.wm)
            return ("mfma_cols", p.transposed, p.n, p.wm, p.wn)
        return ("rows", p.rows, p.tpr, p.threads) if self.keep == 0 else ("cols", p.cols, p.tpr, p.vec, p.threads)

    def __str__(self) -> str:
        return f"{'rows' if self.keep == 0 else 'cols'}_of({self.parent})"


def same_layout(a, b) -> bool:
    if isinstance(a, Projected) and isinstance(b, Projected):
        return a.canonical == b.canonical
    return a == b


def valid(layout, t: T.Expr, k: K) -> T.Expr | None:
    return layout.valid(t, k) if isinstance(layout, BlockRow | Projected) else None


Fragment = MmaTiled | WgmmaTiled | MfmaTiled | BlockRow | Projected


def block_row(dims: tuple[int, ...], threads: int, max_vec: int = 4) -> BlockRow:
    """The generic layout for a fragment that no matrix instruction constrains."""
    cols = dims[-1]
    rows = 1
    for d in dims[:-1]:
        rows *= d
    vec = next(v for v in (max_vec, 4, 2, 1) if v <= max_vec and cols % v == 0)
    chunks = cols // vec
    tpr = 1
    # tpr divides the block as well as the row: with threads % tpr != 0 the last threads would start a row group
    # past the others' (t // tpr == rpt) and reach past the fragment's rows, or repeat another thread's elements.
    while (tpr * 2 <= threads and chunks % (tpr * 2) == 0 and threads % (tpr * 2) == 0
           and (threads // tpr > rows or tpr * 2 <= 32)):
        tpr *= 2
    return BlockRow(rows, cols, threads, tpr, vec, tuple(dims))


# ---------------------------------------------------------------- shared layouts


def panel_span(row_bytes: int) -> int:
    """The swizzle span (bytes) of a TMA/wgmma panel layout for rows of `row_bytes`: the widest of 128, 64 and
    32 that divides the row, so that the row is whole panels; 0 when none does (no panel layout then)."""
    return next((span for span in (128, 64, 32) if row_bytes % span == 0), 0)


@dataclass(frozen=True)
class SharedLayout:
    """Row-major 2-D (or flattened N-D) layout of a shared tile, optionally XOR-swizzled in
    16-byte chunks: chunk' = chunk ^ ((row / rows_per_128B) % chunks_per_group)."""

    shape: tuple[int, ...]
    elem_bytes: int
    swizzle: bool = False
    # TMA/wgmma form: rows wider than the swizzle span are split into column panels of that span (128 B,
    # or 64 / 32 B where the row is not a multiple of 128 B: 192-byte rows, head dim 96, are 3 panels of
    # 64 B), each stored whole (rows x span) one after the other -- the layout a TMA box of span-wide rows
    # writes and a wgmma descriptor reads. Within a panel the XOR pattern is the one below.
    panel: bool = False
    # transposed: the last two dims are stored swapped ("K-major" for an MFMA operand whose K is the
    # tile's first dim); swizzle and interleave then apply to the stored order.
    transposed: bool = False
    # interleave: within each 32 elements of a stored row, element 16t + 4g + i sits at 8g + 4t + i, so
    # one 16-byte read gives a lane (group g) its 4 values of two consecutive MFMA 16x16x16 k-steps.
    interleave: bool = False
    # index_map: the user's layout (T.Layout in annotate_layout), checked by the builder to be a one-to-one map
    # of the tile onto its `size` elements; it replaces all of the above.
    index_map: T.IndexMap | None = None

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def stage_size(self) -> int:
        """Elements between two stages of a TMA pipeline's tile: its size, rounded up so that every stage starts
        where a TMA box may land (128 bytes; 1024 where a swizzle pattern repeats from an aligned base). cp.async
        and register-staged pipelines keep `size` as their stride."""
        align = 1024 if self.panel and self.swizzle else 128
        per = max(1, align // self.elem_bytes)
        return -(-self.size // per) * per

    @property
    def stored_shape(self) -> tuple[int, ...]:
        if self.transposed:
            return (*self.shape[:-2], self.shape[-1], self.shape[-2])
        return self.shape

    @property
    def row_elems(self) -> int:
        return self.stored_shape[-1]

    def runs(self, vec: int) -> bool:
        """Whether each `vec` consecutive elements of a row, from a multiple of `vec`, are stored consecutively
        from a multiple of `vec` (what a vector access of `vec` elements needs)."""
        if self.index_map is None:
            return self.shape[-1] % vec == 0 and not self.transposed
        if self.shape[-1] % vec:
            return False
        off = map_offsets(self.index_map, self.shape).reshape(-1, vec)
        return bool((off[:, 0] % vec == 0).all() and (off - off[:, :1] == range(vec)).all())

    def can_swizzle(self) -> bool:
        if self.index_map is not None:
            return False
        rb = self.row_elems * self.elem_bytes
        return rb >= 32 and rb & (rb - 1) == 0

    @property
    def rows(self) -> int:
        return self.size // self.row_elems

    @property
    def swizzle_bytes(self) -> int:
        """The TMA/wgmma swizzle span (32, 64 or 128 bytes) of a panel layout; 0 when not swizzled."""
        if not self.swizzle:
            return 0
        return panel_span(self.row_elems * self.elem_bytes)

    @property
    def panel_elems(self) -> int:
        return self.swizzle_bytes // self.elem_bytes if self.panel else self.row_elems

    def offset(self, idx: list[T.Expr]) -> T.Expr:
        if self.index_map is not None:
            from .fold import fold
            from .visit import rewrite_expr

            at = {v: i if i.dtype == D.I32 else T.Cast(D.I32, None, i)
                  for v, i in zip(self.index_map.vars, idx, strict=True)}
            return fold(rewrite_expr(self.index_map.offset, lambda x: at.get(x) if isinstance(x, T.Var) else None))
        if self.transposed:
            idx = [*idx[:-2], idx[-1], idx[-2]]
        row: T.Expr = c(0)
        for d, i in zip(self.stored_shape[:-1], idx[:-1], strict=True):
            row = add(mul(row, d), i)
        col = idx[-1]
        if self.panel and self.swizzle:
            span = self.swizzle_bytes
            width = span // self.elem_bytes
            per_chunk = 16 // self.elem_bytes
            in_panel = mod(col, width)
            chunk = div(in_panel, per_chunk)
            phys = xor(chunk, mod(div(mul(row, span), 128), span // 16))
            base = add(mul(div(col, width), self.rows * width), mul(row, width))
            return add(add(base, mul(phys, per_chunk)), mod(in_panel, per_chunk))
        if self.interleave:  # 32p + 16t + 4g + i -> 32p + 8g + 4t + i
            r32 = mod(col, 32)
            col = add(add(add(mul(div(col, 32), 32), mul(div(mod(r32, 16), 4), 8)), mul(div(r32, 16), 4)), mod(col, 4))
        if not self.swizzle:
            return add(mul(row, self.row_elems), col)
        per_chunk = 16 // self.elem_bytes
        rb = self.row_elems * self.elem_bytes
        rows_per_line = max(1, 128 // rb)
        chunks = min(rb // 16, 8)
        chunk = div(col, per_chunk)
        phys = xor(chunk, mod(div(row, rows_per_line), chunks))
        return add(add(mul(row, self.row_elems), mul(phys, per_chunk)), mod(col, per_chunk))

    def __str__(self) -> str:
        if self.index_map is not None:
            return f"custom[{'x'.join(map(str, self.shape))}]"
        kind = f"tma_swizzled{self.swizzle_bytes}" if self.panel and self.swizzle else (
            "swizzled" if self.swizzle else "linear")
        kind += (" k-major" if self.transposed else "") + (" interleaved" if self.interleave else "")
        return f"{kind}[{'x'.join(map(str, self.shape))}]"


# ---------------------------------------------------------------- user index maps

MAP_OPS = ("+", "-", "*", "//", "%", "^", "&", "|", "<<", ">>")  # what a T.Layout lambda may compute with


def map_values(e: T.Expr, env: dict[T.Var, object]):
    """`e` (constants, the map's variables, MAP_OPS, negation and integer casts) evaluated on numpy index
    arrays, with floor division; raises ZeroDivisionError for a division by zero."""
    import numpy as np

    if isinstance(e, T.Const):
        return np.int64(int(e.value))
    if isinstance(e, T.Var):
        return env[e]
    if isinstance(e, T.Cast):
        return map_values(e.value, env)
    if isinstance(e, T.Unary) and e.op == "-":
        return -map_values(e.a, env)
    if isinstance(e, T.Unary) and e.op == "~":
        return ~map_values(e.a, env)
    assert isinstance(e, T.Binary) and e.op in MAP_OPS, e
    a, b = map_values(e.a, env), map_values(e.b, env)
    if e.op in ("//", "%") and np.any(np.asarray(b) == 0):
        raise ZeroDivisionError
    return {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod,
            "^": np.bitwise_xor, "&": np.bitwise_and, "|": np.bitwise_or, "<<": np.left_shift,
            ">>": np.right_shift}[e.op](a, b)


def map_offsets(m: T.IndexMap, shape: tuple[int, ...]):
    """The storage offset of every element of a tile of `shape` under `m`, as an int64 array of that shape."""
    import numpy as np

    grids = np.indices(shape, dtype=np.int64)
    env = {v: g for v, g in zip(m.vars, grids, strict=True)}
    return np.broadcast_to(map_values(m.offset, env), shape)
