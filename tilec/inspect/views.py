"""The grids a layout plot shows, computed from the layouts the compiler itself uses.

A View is a 2-D grid of cells (one per tile element, N-D tiles flattened to rows x last dim), each with a few
short lines of text, a colour group and a highlight flag, plus a legend. Three kinds:

* a fragment (registers spread over the block): which thread holds each element and at which index of its
  register array, coloured by warp (wave; warpgroup for wgmma accumulators). The positions come from the
  Fragment layout's own `coords(thread, k)` (tilec/ir/layout.py), evaluated for every thread and k;
* a matrix instruction's operand atoms (mma.sync m16n8k16 A/B/C, MFMA 16x16x16 A/B/C): from the tables the
  lowering and the SIMT interpreter use, which the back end hands over (Backend.operand_tables); wgmma m64nNk16 D
  from WgmmaTiled for one instruction;
* a shared tile: each element's (swizzled) element offset from SharedLayout.offset and its bank, coloured by bank,
  with the elements of bank-conflicting accesses (access.py) highlighted; a tile of a back end without threads
  (Backend.placed_tiles: an Ascend cube operand's NZ fractals in L1).

Nothing here re-derives a formula: a change to a layout changes the plot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..ir import tile as T
from ..ir.layout import BlockRow, Fragment, MfmaTiled, Projected, SharedLayout, WgmmaTiled, valid

BANKS = 32  # shared memory (NVIDIA) and LDS (CDNA) banks
BANK_BYTES = 4


@dataclass
class Cell:
    lines: tuple[str, ...]  # what is written in the cell, shortest first
    group: int  # colour group (a warp, a bank, a fractal); -1: uncoloured
    highlight: bool = False  # drawn with a red frame: part of a bank-conflicting access
    title: str = ""  # the full description (an SVG tooltip)

    def shown(self) -> tuple[str, ...]:
        """The two lines a cell has room for: the first two, or the first and a colliding lane's label (Ln)."""
        return (self.lines[0], self.lines[-1]) if len(self.lines) > 2 else self.lines[:2]


@dataclass
class View:
    title: str
    kind: str  # "fragment" | "atom" | "shared" | "fractal"
    rows: int
    cols: int
    cells: list[list[Cell | None]]  # [row][col]; None: no thread holds it
    legend: list[tuple[int, str]] = field(default_factory=list)  # (colour group, label)
    notes: list[str] = field(default_factory=list)  # lines printed under the grid
    groups: int = 1  # how many colour groups the palette spreads over


# ---------------------------------------------------------------- evaluating index expressions for many values


def evaluate(e: T.Expr, env: dict[T.Var, np.ndarray]) -> np.ndarray:
    """An integer index expression of tilec/ir/layout.py for numpy arrays of values of its variables (by id);
    floor division and modulo as the IR defines them."""
    if isinstance(e, T.Const):
        return np.asarray(int(e.value), np.int64)
    if isinstance(e, T.Var):
        return env[e]
    if isinstance(e, T.Binary):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        ops = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod,
               "^": np.bitwise_xor, "&": np.bitwise_and, "|": np.bitwise_or, "<<": np.left_shift,
               ">>": np.right_shift}
        return ops[e.op](a, b)
    if isinstance(e, T.Compare):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
                "!=": np.not_equal}[e.op](a, b)
    if isinstance(e, T.Select):
        return np.where(evaluate(e.cond, env), evaluate(e.a, env), evaluate(e.b, env))
    raise TypeError(f"cannot evaluate {type(e).__name__} in a layout")


def _var(name: str) -> T.Var:
    from ..ir import dtypes as D

    return T.Var(D.I32, None, name, "local")


# ---------------------------------------------------------------- fragments


def fragment_positions(layout: Fragment, threads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(coords, thread, k) of every (thread, k) of the layout that exists: coords is (n, ndim)."""
    t_var, k_var = _var("t"), _var("k")
    t, k = np.meshgrid(np.arange(threads), np.arange(layout.num_local), indexing="ij")
    t, k = t.ravel(), k.ravel()
    env = {t_var: t, k_var: k}
    coords = np.stack([np.broadcast_to(evaluate(c, env), t.shape) for c in layout.coords(t_var, k_var)], axis=1)
    cond = valid(layout, t_var, k_var)
    keep = np.broadcast_to(evaluate(cond, env), t.shape).astype(bool) if cond is not None else np.ones(t.shape, bool)
    return coords[keep], t[keep], k[keep]


def _grid_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    return (math.prod(shape[:-1]) if len(shape) > 1 else 1), shape[-1]


def _flat_rows(coords: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of N-D tile coordinates in the rows x last-dim grid."""
    row = np.zeros(len(coords), np.int64)
    for d, extent in enumerate(shape[:-1]):
        row = row * extent + coords[:, d]
    return row, coords[:, -1]


def thread_unit(layout: Fragment, warp_size: int) -> tuple[int, str]:
    """The thread group a fragment's cells are coloured by: warpgroups of wgmma accumulators, else warps."""
    parent = layout.parent if isinstance(layout, Projected) else layout
    if isinstance(parent, WgmmaTiled):
        return 128, "warpgroup"
    return warp_size, "wave" if isinstance(parent, MfmaTiled) or warp_size == 64 else "warp"


def fragment_view(name: str, layout: Fragment, threads: int, warp_size: int) -> View:
    """Which thread holds each element of fragment `name` and at which index k of its register array (the array
    the generated code declares per thread; how the toolchain packs 16-bit elements into registers is its own
    business). Elements a projection replicates over several threads name the first and how many more hold it."""
    coords, t, k = fragment_positions(layout, threads)
    rows, cols = _grid_shape(tuple(layout.shape))
    r, c = _flat_rows(coords, tuple(layout.shape))
    unit, unit_name = thread_unit(layout, warp_size)
    cells: list[list[Cell | None]] = [[None] * cols for _ in range(rows)]
    holders: dict[tuple[int, int], list[tuple[int, int]]] = {}
    order = np.lexsort((k, t))
    for i in order:
        holders.setdefault((int(r[i]), int(c[i])), []).append((int(t[i]), int(k[i])))
    for (i, j), owners in holders.items():
        t0, k0 = owners[0]
        more = f"+{len(owners) - 1}" if len(owners) > 1 else ""
        reg = f"r{k0}"
        title = f"{name}[{i},{j}]: " + ", ".join(f"thread {tt} element {kk}" for tt, kk in owners[:8])
        if len(owners) > 8:
            title += f", ... ({len(owners)} threads)"
        cells[i][j] = Cell((f"T{t0}{more}", reg), t0 // unit, title=title)
    groups = -(-threads // unit)
    legend = [(g, f"{unit_name} {g} (threads {g * unit}-{min(threads, (g + 1) * unit) - 1})") for g in range(groups)]
    notes = [f"layout {layout}; {layout.num_local} elements per thread; cell: T<thread> r<index in its register "
             "array>"]
    if isinstance(layout, BlockRow | Projected) and any(len(o) > 1 for o in holders.values()):
        notes.append("T<n>+<m>: thread n and m more threads hold a copy of the element")
    return View(f"fragment {name}: {'x'.join(map(str, layout.shape))}", "fragment", rows, cols, cells, legend,
                notes, groups)


# ---------------------------------------------------------------- one matrix instruction's operands


def wgmma_view(instr_n: int) -> View:
    """The D fragment of one wgmma.m64nNk16 over its warpgroup (WgmmaTiled for one instruction), coloured by warp."""
    view = fragment_view(f"wgmma.m64n{instr_n}k16 D", WgmmaTiled(64, instr_n, 1, 1), 128, 32)
    view.title = f"wgmma.m64n{instr_n}k16 D (one warpgroup; A and B are read from shared memory by descriptors)"
    view.kind = "atom"
    for row in view.cells:
        for cell in row:
            if cell is not None:
                cell.group = int(cell.lines[0][1:].split("+")[0]) // 32
    view.legend = [(g, f"warp {g} of the warpgroup (threads {32 * g}-{32 * g + 31})") for g in range(4)]
    view.groups = 4
    return view


def table_view(t) -> View:
    """One operand of a matrix instruction from its back end's table (tilec.targets.backend.OperandTable)."""
    cells: list[list[Cell | None]] = [[None] * t.cols for _ in range(t.rows)]
    for lane in range(t.lanes):
        for i in range(t.elems):
            r, c = t.coord(lane, i)
            reg = f"r{i}" if t.elems_per_reg == 1 else f"r{i // t.elems_per_reg}.{i % t.elems_per_reg}"
            cells[r][c] = Cell((f"T{lane}", reg), lane // t.lane_group,
                               title=f"[{r},{c}]: lane {lane}, element {i} (register {i // t.elems_per_reg})")
    groups = t.lanes // t.lane_group
    legend = [(g, f"lanes {g * t.lane_group}-{(g + 1) * t.lane_group - 1}") for g in range(groups)]
    return View(t.title, "atom", t.rows, t.cols, cells, legend,
                ["cell: T<lane> and its element (register.half for packed 16-bit operands)"], groups)


def placed_view(p) -> View:
    """A tile as a back end without threads stores it (tilec.targets.backend.PlacedTile: Ascend's NZ fractals)."""
    cells: list[list[Cell | None]] = [[None] * p.cols for _ in range(p.rows)]
    for i in range(p.rows):
        for j in range(p.cols):
            o, g = p.offset(i, j), p.group(i, j)
            cells[i][j] = Cell((f"{o}", f"f{g}"), g, title=f"{p.name}[{i},{j}]: offset {o}, fractal {g}")
    return View(p.title, "fractal", p.rows, p.cols, cells, [(g, f"fractal {g}") for g in range(min(p.groups, 16))],
                [p.note], p.groups)


# ---------------------------------------------------------------- shared tiles


def shared_offsets(layout: SharedLayout) -> np.ndarray:
    """The element offset of every element of the tile, as a rows x last-dim grid."""
    shape = tuple(layout.shape)
    idx_vars = [_var(f"i{d}") for d in range(len(shape))]
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    env = {v: g.ravel() for v, g in zip(idx_vars, grids, strict=True)}
    off = np.broadcast_to(evaluate(layout.offset(list(idx_vars)), env), grids[0].ravel().shape)
    return off.reshape(_grid_shape(shape))


def bank_of(offset: np.ndarray, elem_bytes: int) -> np.ndarray:
    return (offset * elem_bytes // BANK_BYTES) % BANKS


def shared_view(name: str, layout: SharedLayout, conflicting: set[int] | None = None,
                accesses: list[str] | None = None, collision: tuple[str, int, dict[int, tuple[int, ...]]] | None = None
                ) -> View:
    """Each element's offset in the shared array (elements from the tile's start) and its bank; `conflicting`
    holds the offsets of elements read or written in a bank-conflicting access, `accesses` describes each
    access pattern traced; `collision` (the access, the bank, {offset: lanes}) is one phase of the worst conflicting
    access: the elements its colliding lanes access in that bank are framed and labelled with those lanes."""
    off = shared_offsets(layout)
    banks = bank_of(off, layout.elem_bytes)
    rows, cols = off.shape
    conflicting = conflicting or set()
    lanes = collision[2] if collision else {}
    cells: list[list[Cell | None]] = [[None] * cols for _ in range(rows)]
    for i in range(rows):
        for j in range(cols):
            o, b = int(off[i, j]), int(banks[i, j])
            who = lanes.get(o)
            text = (f"{o}", f"b{b}") + ((f"L{','.join(map(str, who))}",) if who else ())
            cells[i][j] = Cell(text, b, who is not None,
                               f"{name}[{i},{j}]: offset {o} (byte {o * layout.elem_bytes}), bank {b}"
                               + (f" -- lane{'s' if len(who) > 1 else ''} {', '.join(map(str, who))} of a warp access "
                                  "it in a conflicting phase" if who else
                                  " -- in a bank-conflicting access" if o in conflicting else ""))
    notes = [f"layout {layout}; cell: element offset, bank (4-byte banks, {BANKS} of them)"]
    notes += accesses or []
    if collision:
        what, bank, _ = collision
        every = sorted({t for who in lanes.values() for t in who})
        words = len({o * layout.elem_bytes // BANK_BYTES for o in lanes})
        notes.append(f"red frame, Ln: the lanes that collide in bank {bank} in one phase of the {what}: lanes "
                     f"{', '.join(map(str, every))} access {words} different words of that bank, served one after "
                     "another")
    legend = [(b, f"bank {b}") for b in range(BANKS)]
    return View(f"shared {name}: {'x'.join(map(str, layout.shape))} x {layout.elem_bytes} B", "shared", rows, cols,
                cells, legend, notes, BANKS)


# ---------------------------------------------------------------- the summary view (the default plot)

SUMMARY_ROWS = 8  # a shared tile's summary: this many rows (a 128-byte swizzle repeats every 8) ...
SUMMARY_COLS = 64  # ... of this many elements (a row of 64 two-byte elements spans the 32 banks once)
SUMMARY_MAX = 32  # a fragment's summary: its first warp's elements, within this many rows and columns


def summary(view: View) -> View:
    """The part of `view` that shows its pattern, which repeats over the rest: a fragment's first warp (wave,
    warpgroup); a shared tile's first rows, from the first row with a conflicting access when there is one; an
    instruction atom's (an Ascend fractal tile's) first 32 rows and columns. The legend keeps the groups shown, a
    note says what was cut (`--full` draws all)."""
    if view.rows <= SUMMARY_ROWS and view.cols <= SUMMARY_COLS:
        return view
    if view.kind in ("atom", "fractal"):
        if view.rows <= SUMMARY_MAX and view.cols <= SUMMARY_MAX:
            return view
        r0 = c0 = 0
        r1, c1 = min(view.rows, SUMMARY_MAX), min(view.cols, SUMMARY_MAX)
        what = "the first rows and columns"
    elif view.kind == "fragment":
        first = min((c.group for row in view.cells for c in row if c is not None and c.group >= 0), default=None)
        where = [(i, j) for i, row in enumerate(view.cells) for j, c in enumerate(row)
                 if c is not None and c.group == first]
        if not where:
            return view
        r0, c0 = min(i for i, _ in where), min(j for _, j in where)
        r1 = min(max(i for i, _ in where) + 1, r0 + SUMMARY_MAX)
        c1 = min(max(j for _, j in where) + 1, c0 + SUMMARY_MAX)
        what = f"the elements of {view.legend[0][1].split(' (')[0] if view.legend else 'the first group'}"
    else:
        hot = [i for i, row in enumerate(view.cells) for c in row if c is not None and c.highlight]
        r0 = hot[0] if hot else 0
        r1, c0 = min(view.rows, r0 + SUMMARY_ROWS), 0
        c1 = min(view.cols, SUMMARY_COLS)
        what = "the first rows" + (" from the first conflicting access" if hot else "")
    cells = [row[c0:c1] for row in view.cells[r0:r1]]
    shown = {c.group for row in cells for c in row if c is not None}
    note = (f"summary: {what}, rows {r0}-{r1 - 1} and columns {c0}-{c1 - 1} of {view.rows}x{view.cols} (the "
            "pattern repeats; --full draws every element)")
    hot_note = [] if any("red frame" in n for n in view.notes) or not any(
        c is not None and c.highlight for row in cells for c in row) else [
        "red frame: an element that a bank-conflicting access reads or writes"]
    return View(view.title, view.kind, r1 - r0, c1 - c0, cells, [(g, label) for g, label in view.legend if g in shown],
                [note, *view.notes, *hot_note], view.groups)
