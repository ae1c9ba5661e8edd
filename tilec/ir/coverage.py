"""Which output tensors a kernel writes in full at every launch (the manifest's written_in_full, docs/deploy.md).

tilec.runtime copies an output into a padded workspace before a TMA launch when the kernel might leave some of its
elements unwritten (those must keep the caller's values); an output the kernel overwrites everywhere needs only the
copy back. The proof is syntactic and errs towards "not proven": an output counts when one `copy` into it stands in
the kernel's body itself (not under a condition or in a loop, so every block runs it) and, along each dimension of
the tensor,

- its region starts at 0 and spans the whole of a fixed dimension, or
- its region starts at `b * e` (`b` where e = 1) for a block index `b` that no other dimension uses, e being the
  region's extent, and the grid's extent along `b` is `ceildiv(size, e)` (`size` where e = 1) for that dimension's
  size -- so the blocks' regions tile the dimension. A copy writes its whole region inside the tensor (the parts
  past its edge are dropped).

Rasterization's remapped block indices (`use_swizzle`) stand for the indices they remap: the remapping is a
bijection of the grid (tilec/passes/rasterization.py), so the blocks still cover the same tiles. So does a local
assigned once, in the kernel's body itself, a block index `b` or its reverse `(n - 1) - b` where n is the grid's
extent along b (flash_attention's causal blocks, taken longest first).
"""

from __future__ import annotations

from . import tile as T
from .printer import expr_str


def outputs_written_in_full(k: T.Kernel) -> list[str]:
    """The names of the kernel's output tensors that every launch writes in full, in parameter order."""
    grid = dict(zip(k.block_vars, k.grid, strict=True))
    raster = getattr(k.schedule, "raster_assigns", None) if k.schedule is not None else None
    if raster is not None:  # (x assign, y assign): bx_swizzled, by_swizzled over bx's and by's grid extents
        for assign, original in zip(raster, k.block_vars[:2], strict=True):
            grid[assign.var] = grid[original]
    aliases = _block_aliases(k)
    grid.update({alias: grid[block] for alias, block in aliases.items()})
    outputs = [p for p in k.params if isinstance(p, T.Buffer) and p.is_output]
    covered = {p.name for s in k.body if isinstance(s, T.Copy) and s.dst.buffer in outputs
               for p in [s.dst.buffer] if _tiles_the_tensor(s.dst, grid, aliases)}
    return [p.name for p in outputs if p.name in covered]


def _block_aliases(k: T.Kernel) -> dict[T.Var, T.Var]:
    """Locals that enumerate a block index's values (see the module's docstring), with that block index."""
    from .visit import walk_stmts

    grid = dict(zip(k.block_vars, k.grid, strict=True))
    assigned: dict[T.Var, int] = {}
    for s in walk_stmts(k.body):
        if isinstance(s, T.Assign):
            assigned[s.var] = assigned.get(s.var, 0) + 1
    out: dict[T.Var, T.Var] = {}
    for s in k.body:
        if not isinstance(s, T.Assign) or assigned[s.var] != 1:
            continue
        v = s.value
        if isinstance(v, T.Var) and v in k.block_vars:
            out[s.var] = v
        elif (isinstance(v, T.Binary) and v.op == "-" and isinstance(v.b, T.Var) and v.b in k.block_vars
              and isinstance(v.a, T.Binary) and v.a.op == "-" and _is_const(v.a.b, 1)
              and expr_str(v.a.a) == expr_str(grid[v.b])):
            out[s.var] = v.b
    return out


def _tiles_the_tensor(region: T.Region, grid: dict[T.Var, T.Expr], aliases: dict[T.Var, T.Var]) -> bool:
    extents = region.const_extents
    shape = region.buffer.shape
    if extents is None or len(extents) != len(shape) or len(region.starts) != len(shape):
        return False
    used: set[T.Var] = set()  # (IR nodes hash by identity)
    for start, extent, size in zip(region.starts, extents, shape, strict=True):
        if _is_const(start, 0) and isinstance(size, T.Const) and int(size.value) <= extent:
            continue
        block = _block_times(start, extent)
        if block is None or block not in grid or aliases.get(block, block) in used:
            return False
        used.add(aliases.get(block, block))
        if not _spans(grid[block], size, extent):
            return False
    return True


def _block_times(start: T.Expr, extent: int) -> T.Var | None:
    """b for a start `b * extent` (or `extent * b`; `b` alone where extent is 1), else None."""
    if extent == 1 and isinstance(start, T.Var):
        return start
    if isinstance(start, T.Binary) and start.op == "*":
        for var, factor in ((start.a, start.b), (start.b, start.a)):
            if isinstance(var, T.Var) and _is_const(factor, extent):
                return var
    return None


def _spans(grid_extent: T.Expr, size: T.Expr, extent: int) -> bool:
    """Whether `grid_extent` blocks of `extent` elements reach past `size`."""
    if isinstance(grid_extent, T.Const) and isinstance(size, T.Const):
        return int(grid_extent.value) * extent >= int(size.value)
    if extent == 1 and expr_str(grid_extent) == expr_str(size):
        return True
    return (isinstance(grid_extent, T.Call) and grid_extent.func == "ceildiv" and len(grid_extent.args) == 2
            and _is_const(grid_extent.args[1], extent) and expr_str(grid_extent.args[0]) == expr_str(size))


def _is_const(e: T.Expr, value: int) -> bool:
    return isinstance(e, T.Const) and not isinstance(e.value, bool) and e.value == value
