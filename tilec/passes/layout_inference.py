"""layout-inference — a register layout for every fragment, a shared layout for every shared tile.

Assumes: check-tile-ops has run (tile ops are well-shaped); the target is known.
Guarantees: `kernel.schedule` (tilec/ir/schedule.py) records, keyed by stable op/buffer ids,
  * each fragment a layout: gemm accumulators take the matrix instruction's tiled accumulator
    layout (a warp partition chosen from the gemm's policy); fragments used together in a Parallel
    loop, or copied into each other, share a layout; 1-D fragments indexed by one loop variable of
    such a loop (and reduction results) take the projection of its layout onto that dimension;
    everything else gets the generic block-row layout;
  * each shared buffer a layout: XOR-swizzled when a matrix instruction reads it (16-bit data,
    power-of-two row of at least 32 bytes), linear otherwise (or as annotate_layout says); a shared buffer
    viewed with T.reshape / T.view and its views are linear (an error when a wgmma or MFMA operand, or an
    annotation, needs another layout);
  * each gemm an instruction (GemmSchedule: family, instruction shape, warp partition), chosen among the
    implementations registered in tilec/ops/gemm_impl.py whose predicate takes the target (the back ends'
    own: Hopper wgmma.m64nNk16, mma.sync m16n8k16, AMD MFMA 16x16x16), best first, the first whose
    accumulator_layout takes the gemm; the generic scalar FMA when none does. Each implementation also says
    what register A operand it reads and which shared layouts its operands need; this pass names none.
A gemm that runs on a lesser instruction than the target's best gets a remark (category tensor-cores) saying
why each better one does not fit.
Conflicting requirements (a fragment needed in two different layouts) are reported at the line
that creates the conflict; so is a gemm instruction or warp partition pinned by the kernel's
ScheduleRequest that this gemm cannot use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Reporter
from ..ir import tile as T
from ..ir.layout import (
    BlockRow,
    Fragment,
    MfmaTiled,
    MmaTiled,
    Projected,
    SharedLayout,
    block_row,
    same_layout,
)
from ..ir.schedule import KernelSchedule, request_of
from ..ir.visit import direct_exprs, sub_exprs, walk_stmts
from ..ops import gemm as gemm_op
from ..ops import gemm_impl
from ..ops.gemm import GemmQuery
from ..ops.gemm_impl import GemmImpl
from ..ops.registry import OPS  # noqa: F401 (loads the generic gemm implementation, which registers itself)
from ..targets.registry import Target

NAME = "layout-inference"


@dataclass
class LayoutTable:
    fragments: dict[T.Buffer, Fragment] = field(default_factory=dict)
    shared: dict[T.Buffer, SharedLayout] = field(default_factory=dict)
    gemm_impl: dict[T.Gemm, GemmImpl] = field(default_factory=dict)
    names: dict[T.Buffer, str] = field(default_factory=dict)

    def fragment(self, b: T.Buffer) -> Fragment:
        return self.fragments[b]

    def __str__(self) -> str:
        lines = [""]
        for key, lay in self.fragments.items():
            lines.append(f"    {self.names[key]}: {lay}")
        for key, lay in self.shared.items():
            lines.append(f"    {self.names[key]}: {lay}")
        return "\n".join(lines)


class _UnionFind:
    def __init__(self):
        self.parent: dict[T.Buffer, T.Buffer] = {}

    def find(self, x: T.Buffer) -> T.Buffer:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: T.Buffer, b: T.Buffer) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _fragment_loads(s: T.Stmt) -> list[tuple[T.Buffer, list[T.Expr], T.Stmt]]:
    """Every fragment access (loads and stores) directly in statement s (not nested)."""
    out = []
    if isinstance(s, T.Store) and s.buffer.scope == "fragment":
        out.append((s.buffer, s.indices, s))
    for e in direct_exprs(s):
        for x in sub_exprs(e):
            if isinstance(x, T.Load) and x.buffer.scope == "fragment":
                out.append((x.buffer, x.indices, s))
    return out


def run(module: T.Module, rep: Reporter, target: Target) -> T.Module:
    for k in module.kernels:
        table = _infer(k, rep, target)
        k.schedule = _record(k, table, k.schedule or KernelSchedule(), rep)
    rep.check()
    return module


def _record(k: T.Kernel, table: LayoutTable, sched: KernelSchedule, rep: Reporter) -> KernelSchedule:
    """The inference's results in the kernel's schedule, keyed by stable ids; a pinned instruction that
    was not taken is an error at the gemm."""
    for s in walk_stmts(k.body):
        if isinstance(s, T.Alloc):
            b = s.buffer
            if b in table.fragments:
                sched.fragments[b.uid] = table.fragments[b]
            elif b in table.shared:
                sched.shared[b.uid] = table.shared[b]
            else:
                continue
            sched.labels[b.uid] = b.name
        elif isinstance(s, T.Gemm):
            impl = table.gemm_impl.get(s) or gemm_impl.fallback()
            sched.gemms[s.uid] = impl.schedule(s, table.fragments.get(s.c.buffer))
            sched.labels[s.uid] = f"#{s.uid}" + (f" (line {s.span.line})" if s.span is not None else "")
            req = request_of(k).gemm(s)
            if req.instruction is not None and req.instruction != impl.name:
                rep.error(f"the schedule asks for '{req.instruction}' for this gemm, which cannot use it here "
                          f"(operands, shapes or target); it can use '{impl.name}'", s.span)
            elif req.warps is not None and sched.gemms[s.uid].warps != tuple(req.warps):
                rep.error(f"the schedule asks for a {req.warps[0]}x{req.warps[1]} warp partition for this gemm, "
                          f"which no matrix instruction of the target can take here (it runs on {impl.name})",
                          s.span)
    return sched


def _infer(k: T.Kernel, rep: Reporter, target: Target) -> LayoutTable:
    table = LayoutTable()
    frags: dict[T.Buffer, T.Buffer] = {}
    for s in walk_stmts(k.body):
        if isinstance(s, T.Alloc):
            table.names[s.buffer] = s.buffer.name
            if s.buffer.scope == "fragment":
                frags[s.buffer] = s.buffer
    uf = _UnionFind()
    for key in frags:
        uf.find(key)
    projections: list[tuple[int, int, int, T.Stmt]] = []  # (1-D frag, parent frag, keep, where)
    row_reduced: set[T.Buffer] = set()
    register_a: set[T.Buffer] = set()

    for s in walk_stmts(k.body):
        if isinstance(s, T.For) and s.kind == "parallel":
            loop_vars = list(s.vars)
            driver: T.Buffer | None = None
            accesses = [a for st in walk_stmts(s.body) for a in _fragment_loads(st)]
            for buf, idx, _ in accesses:
                if [i if isinstance(i, T.Var) else None for i in idx] == loop_vars:
                    if driver is None:
                        driver = buf
                    else:
                        uf.union(driver, buf)
            for buf, idx, where in accesses:
                if len(idx) == 1 and len(loop_vars) == 2 and isinstance(idx[0], T.Var) and idx[0] in loop_vars:
                    if driver is not None:
                        projections.append((buf, driver, loop_vars.index(idx[0]), where))
        elif isinstance(s, T.Copy) and s.src.buffer.scope == s.dst.buffer.scope == "fragment":
            uf.union(s.src.buffer, s.dst.buffer)
        elif isinstance(s, T.Reduce) and s.src.buffer.scope == "fragment" and s.dst.buffer.scope == "fragment":
            if len(s.src.buffer.shape) == 2 and len(s.dst.buffer.shape) == 1:
                projections.append((s.dst.buffer, s.src.buffer, 1 - s.dim, s))
                if s.dim == 1:
                    row_reduced.add(s.src.buffer)
        elif isinstance(s, T.Gemm) and s.a.buffer.scope == "fragment":
            register_a.add(s.a.buffer)

    # Gemm accumulators.
    class_layout: dict[T.Buffer, Fragment] = {}
    class_site: dict[T.Buffer, T.Stmt] = {}
    warps = k.threads // target.warp_size if target.warp_size else 0
    disabled = k.disabled
    projected_roots = {uf.find(parent) for _, parent, _, _ in projections}
    col_reduced = {s.src.buffer for s in walk_stmts(k.body)
                   if isinstance(s, T.Reduce) and s.src.buffer.scope == "fragment" and s.dim == 0}

    def set_accumulator(s: T.Gemm, lay: Fragment) -> None:
        root = uf.find(s.c.buffer)
        prev = class_layout.get(root)
        if prev is not None and prev != lay:
            rep.error(f"fragment '{s.c.buffer.name}' is the accumulator of two gemms that need different "
                      f"layouts ({prev} and {lay})", s.span)
        class_layout[root] = lay
        class_site[root] = s

    queries: dict[T.Gemm, tuple[GemmQuery, bool]] = {}  # gemm -> its query, and whether its instruction was pinned
    for s in walk_stmts(k.body):
        if not isinstance(s, T.Gemm):
            continue
        req = request_of(k).gemm(s)
        root = uf.find(s.c.buffer)
        members = [b for b in frags if uf.find(b) == root]
        policy = s.policy
        if policy == "square" and (any(b in row_reduced for b in members) or
                                   any(uf.find(a) == root for a in register_a)):
            policy = "full_row"  # rows stay inside one warp: row statistics and register A operands
        query = GemmQuery(s, k, warps, policy, req.warps,
                          a_layout=class_layout.get(uf.find(s.a.buffer)) if s.a.buffer.scope == "fragment"
                          else None,
                          col_reduced=any(uf.find(x) == root for x in col_reduced),
                          rows_projected=root in projected_roots,
                          transposed_wanted=_transposed_wanted(root, projections, register_a, uf))
        queries[s] = (query, req.instruction is not None)
        impl, lay = gemm_impl.choose(query, target, disabled, req.instruction)
        if lay is not None:
            set_accumulator(s, lay)
        table.gemm_impl[s] = impl

    # Everything else that is at least 2-D: the generic layout.
    for key, buf in frags.items():
        root = uf.find(key)
        if root not in class_layout and len(buf.shape) >= 2:
            class_layout[root] = block_row(buf.const_shape, k.threads)
    # Projections (1-D fragments tied to a 2-D layout), resolved until nothing changes. A reduction's
    # destination must be the projection of its source, so a reduction's projection overrides one that a
    # Parallel loop's read asked for; a Parallel loop that reads the 1-D fragment as the rows of another
    # 2-D layout (row statistics of acc_s applied to acc_o when block_N != dim) reads it through a shared
    # copy instead (lower-to-simt).
    changed = True
    while changed:
        changed = False
        for child, parent, keep, where in projections:
            proot, croot = uf.find(parent), uf.find(child)
            parent_layout = class_layout.get(proot)
            if parent_layout is None or isinstance(parent_layout, Projected):
                continue
            want = Projected(parent_layout, keep)
            have = class_layout.get(croot)
            if have is None:
                class_layout[croot] = want
                class_site[croot] = where
                changed = True
            elif same_layout(have, want) or not isinstance(where, T.Reduce):
                continue
            elif not isinstance(class_site.get(croot), T.Reduce):
                class_layout[croot] = want
                class_site[croot] = where
                changed = True
            else:
                rep.error(f"fragment '{frags[child].name}' would need two layouts: {have} and {want}; use a "
                          "separate fragment for each use", where.span)
                return table
    for key, buf in frags.items():
        root = uf.find(key)
        if root not in class_layout:
            class_layout[root] = block_row(buf.const_shape, k.threads)
        lay = class_layout[root]
        if tuple(lay.shape) != tuple(buf.const_shape):
            rep.error(f"fragment '{buf.name}' ({'x'.join(map(str, buf.const_shape))}) is used together with a "
                      f"fragment of layout {lay}; their shapes differ", buf.span)
            continue
        table.fragments[key] = lay

    # A register A operand, now that every layout is known: the implementation reads it as it is, reports it, or
    # the gemm falls back to the generic implementation (which stages it through shared memory).
    for s in walk_stmts(k.body):
        if isinstance(s, T.Gemm) and s.a.buffer.scope == "fragment":
            impl = table.gemm_impl[s]
            la = table.fragments.get(s.a.buffer)
            lc = table.fragments.get(s.c.buffer)
            err = impl.register_a_error(s, la, lc)
            if err is not None:
                rep.error(err, s.span)
            elif not impl.register_a_fits(s, la, lc):
                table.gemm_impl[s] = gemm_impl.fallback()

    if not k.internal:  # (a no-TMA twin repeats its kernel's remarks)
        _remark_missed_instructions(k, table, queries, target, rep)

    # Shared layouts.
    annotated = {s.buffer: s.layout for s in walk_stmts(k.body) if isinstance(s, T.AnnotateLayout)}
    index_maps = {s.buffer: s for s in walk_stmts(k.body) if isinstance(s, T.AnnotateLayout) and s.index_map}
    # What the gemms' implementations need of their shared operands: a layout of their own (operand_layouts: the
    # layout and its implementation; the first gemm that reads a buffer decides) or a swizzle where it is possible.
    gemms = [s for s in walk_stmts(k.body) if isinstance(s, T.Gemm)]
    swizzled = {r.buffer for s in gemms if table.gemm_impl[s].swizzles_operands
                for r in (s.a, s.b) if r.buffer.scope == "shared"}
    # A tensor-core accumulator copied into a 16-bit shared tile (attention's output staging): the accumulator's
    # lanes write 8 rows at a time (stmatrix, or 2-byte stores), which a linear tile of 128-byte rows puts in one
    # bank group, 8 ways conflicting; the swizzle spreads them, and 16-byte reads of the tile stay whole.
    accumulators = {s.c.buffer for s in gemms if table.gemm_impl[s].tensor_core}
    swizzled |= {s.dst.buffer for s in walk_stmts(k.body) if isinstance(s, T.Copy) and s.src.buffer in accumulators
                 and s.dst.buffer.scope == "shared" and s.dst.buffer.dtype.bytes == 2}
    operand_layouts: dict[T.Buffer, tuple[SharedLayout, GemmImpl]] = {}
    for impl in dict.fromkeys(table.gemm_impl[s] for s in gemms):
        mine = [s for s in gemms if table.gemm_impl[s] is impl]
        for key, lay in impl.shared_operand_layouts(mine).items():
            operand_layouts.setdefault(key, (lay, impl))
    # Views of a shared buffer (T.reshape, T.view) read its bytes row-major: the buffer and its views stay linear.
    views = [s for s in walk_stmts(k.body) if isinstance(s, T.Alloc) and s.buffer.scope == "shared"
             and s.buffer.view_of is not None]
    in_view_group = {v.buffer for v in views} | {v.buffer.storage for v in views}
    for s in gemms:
        if table.gemm_impl[s].tensor_core:
            for r in (s.a, s.b):
                if r.buffer in index_maps:
                    instr = table.gemm_impl[s].instruction.target_name
                    rep.error(f"'{r.buffer.name}' is an operand of a gemm that runs on {instr}, which reads its "
                              "shared operands in the layout the instruction needs (ldmatrix and wgmma their "
                              "swizzles, MFMA its K-major tiles); drop this T.Layout annotation (tilec picks that "
                              "layout itself) or copy the tile into a second shared buffer for the gemm",
                              index_maps[r.buffer].span)
    for s in walk_stmts(k.body):
        if isinstance(s, T.Alloc) and s.buffer.scope == "shared" and s.buffer in in_view_group:
            b = s.buffer
            why = (operand_layouts[b][1].stored_as if b in operand_layouts else
                   f"annotated {annotated[b]}" if annotated.get(b, "linear") != "linear" else None)
            if why is not None:
                view = next(v for v in views if b in (v.buffer, v.buffer.storage))
                rep.error(f"view '{view.buffer.name}' of shared buffer '{view.buffer.storage.name}' reads it "
                          f"row-major, but '{b.name}' is {why}; copy the tile into a separate shared buffer for the "
                          "gemm, or index it with the view's arithmetic", view.span)
            table.shared[b] = SharedLayout(b.const_shape, b.dtype.bytes)
    for s in walk_stmts(k.body):
        if isinstance(s, T.Alloc) and s.buffer.scope == "shared" and s.buffer not in in_view_group:
            b = s.buffer
            lay = SharedLayout(b.const_shape, b.dtype.bytes)
            if b in index_maps:
                table.shared[b] = SharedLayout(b.const_shape, b.dtype.bytes, index_map=index_maps[b].index_map)
                continue
            if b in operand_layouts and (operand_layouts[b][1].operand_layouts_beat_annotations
                                             or b not in annotated):
                table.shared[b] = operand_layouts[b][0]
                continue
            want = annotated.get(b, "swizzled" if b in swizzled else "linear")
            if want == "swizzled" and lay.can_swizzle() and len(b.shape) >= 2:
                lay = SharedLayout(b.const_shape, b.dtype.bytes, swizzle=True)
            table.shared[b] = lay
    return table


def _remark_missed_instructions(k: T.Kernel, table: LayoutTable, queries, target: Target, rep: Reporter) -> None:
    """A remark at each gemm that runs on a lesser instruction than the target's best, saying why each better one
    does not fit (gemms whose instruction the schedule pinned excepted)."""
    disabled = k.disabled
    for s in walk_stmts(k.body):
        if not isinstance(s, T.Gemm) or s not in queries or queries[s][1]:
            continue
        impl = table.gemm_impl[s]
        better = []
        for other in gemm_impl.offered(target):
            if other is impl or not other.tensor_core:
                break
            why = (f"turned off (--no-{other.name})" if other.name in disabled
                   else gemm_op.missed_reason(other, queries[s][0]))
            better.append(f"{other.instruction.target_name}: {why}")
        if not impl.tensor_core and not better:
            rep.remark("tensor-cores", f"gemm runs on scalar multiply-adds: {target.name} has no matrix instructions "
                                       "tilec uses", s.span)
        elif better:
            what = ("scalar multiply-adds, not tensor cores" if not impl.tensor_core
                    else f"{impl.instruction.target_name}, not the target's best matrix instruction")
            rep.remark("tensor-cores", f"gemm runs on {what}: " + "; ".join(better), s.span)


def _transposed_wanted(root: T.Buffer, projections, register_a: set[T.Buffer], uf) -> bool:
    """Whether a transposed accumulator serves the class better (GemmQuery.transposed_wanted; MFMA lays its
    accumulator out transposed then): it is the register A operand of a gemm (an MFMA lane's 4 registers along a
    row are then the B-operand layout of the swapped product) or its rows are projected (row reductions: 4 of a
    row's elements per lane, 2 shuffles instead of 4)."""
    if any(uf.find(a) == root for a in register_a):
        return True
    return any(keep == 0 and uf.find(parent) == root for _, parent, keep, _ in projections)


__all__ = ["LayoutTable", "run", "BlockRow", "MfmaTiled", "MmaTiled", "Projected"]
