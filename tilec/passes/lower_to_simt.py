"""lower-to-simt — tile operations to per-thread code.

Assumes: layout-inference and pipeline-planning have run: kernel.schedule holds every layout, gemm
instruction and loop plan, and lowering follows it without revisiting any of it.
Guarantees: an SModule whose kernels contain only per-thread statements:
  * fragments become register arrays indexed only inside fully unrolled loops over the layout's
    local elements; Parallel loops over fragments iterate those local elements, other Parallel
    loops are spread over the threads (consecutive threads on the innermost dimension);
  * copies are spread over the threads, 16 bytes at a time where both sides are contiguous and a
    run-time check shows the global side aligned (else element by element); every global access is
    predicated on the tensor bounds, so ragged shapes are safe;
  * gemm on the "mma" path becomes ldmatrix + mma.sync m16n8k16 per warp; on the "mfma" path (AMD)
    64/128-bit LDS reads of K-major operand tiles (or a register A operand) + v_mfma 16x16x16 per
    wave; on the "fma" path each thread computes its accumulator elements with scalar multiply-adds;
  * a global -> shared copy into a K-major (transposed) tile goes through registers;
  * reductions combine per-thread partials with warp shuffles, then across warps through shared
    scratch memory;
  * Pipelined loops with a cp.async plan become prologue / steady state with
    `stages - 1` copies in flight, multi-buffered shared tiles; with a "registers" plan (AMD),
    double-buffered tiles whose next contents are loaded into registers during the compute;
  * barriers are placed between shared-memory writes and reads by different threads.
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import CompileError, Diagnostic, Reporter, Span
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.fold import as_int, fold, multiple_of
from ..ir.layout import BlockRow, MmaTiled, Projected, SharedLayout, add, c, div, mod, mul, same_layout, valid
from ..ir.visit import sub_exprs, walk_stmts
from ..targets.registry import Target
from .lowering_extension import extension_for

NAME = "lower-to-simt"

I64 = D.I64


def _b(op: str, a: T.Expr, b: T.Expr, dt: D.DType | None = None) -> T.Expr:
    return fold(T.Binary(dt or a.dtype, None, op, a, b))


def _cmp(op: str, a: T.Expr, b: T.Expr) -> T.Expr:
    return fold(T.Compare(D.BOOL, None, op, a, b))


def _and(a: T.Expr | None, b: T.Expr | None) -> T.Expr | None:
    if a is None:
        return b
    if b is None:
        return a
    return fold(T.Binary(D.BOOL, None, "and", a, b))


def _cast(e: T.Expr, dt: D.DType) -> T.Expr:
    if e.dtype == dt:
        return e
    return fold(T.Cast(dt, None, e))


def _i64(e: T.Expr) -> T.Expr:
    return _cast(e, I64)


class Lowerer:
    def __init__(self, k: T.Kernel, target: Target, rep: Reporter):
        self.k = k
        self.target = target
        self.rep = rep
        self.sched = k.schedule  # the planners' decisions (tilec/ir/schedule.py): final
        self.staged_layouts: dict[int, SharedLayout] = {}  # shared buffers lowering makes (operand staging)
        self.tid = S.ThreadIdx(D.I32, None)
        self.buffers: dict[int, S.SBuffer] = {}
        self.shared: list[S.SBuffer] = []
        self.subst: dict[int, T.Expr] = {}
        self.stage_offset: dict[int, T.Expr] = {}
        self.stage_count: dict[int, int] = {}
        self.out: list[S.SStmt] = []
        self.frag_ctx: tuple[list[int], object, T.Expr] | None = None  # (loop var ids, layout, k)
        self.smem_dirty = False  # shared memory written since the last barrier
        self.smem_read = False  # shared memory read since the last barrier
        self.generic_smem_writes = False  # shared memory written by threads since the last proxy fence
        self.names: set[str] = set()
        self.scratch: S.SBuffer | None = None
        self.hoisted: list[S.SStmt] = []  # per-thread constants, declared once at kernel entry
        self.hoisted_vars: dict[str, T.Var] = {}
        self.staged: list[T.Buffer] = []  # shared buffers staging register gemm operands (keeps their ids alive)
        for v in k.block_vars:
            self.subst[id(v)] = S.BlockIdx(D.I32, None, k.block_vars.index(v))
        for kv in k.size_vars:
            self.names.add(kv.name)
        for p in k.params:
            self.names.add(p.name)
            if isinstance(p, T.Buffer):
                self.buffers[id(p)] = S.SBuffer(p.name, p.dtype, "global", None, const=not p.is_output, origin=p.name)
        for plan in self.sched.loops.values():
            if plan.stages > 1:
                for pr in plan.producers:
                    self.stage_count[id(pr.dst.buffer)] = plan.stages
        self.ext = extension_for(target, self)  # the target's own machinery (sm90: TMA, wgmma)

    # ------------------------------------------------------------ utilities
    def fail(self, msg: str, span: Span | None) -> CompileError:
        return CompileError([Diagnostic("error", msg, span)])

    def fresh(self, name: str, dt: D.DType = D.I32) -> T.Var:
        base, n = name, 1
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return T.Var(dt, None, name, "local")

    def emit(self, s: S.SStmt) -> None:
        self.out.append(s)

    def block(self, fn) -> list[S.SStmt]:
        saved = self.out
        self.out = []
        try:
            fn()
            return self.out
        finally:
            self.out = saved

    def declare(self, name: str, value: T.Expr, dt: D.DType | None = None) -> T.Var:
        v = self.fresh(name, dt or value.dtype)
        self.emit(S.Declare(None, v, value))
        return v

    def barrier(self) -> None:
        if self.out and isinstance(self.out[-1], S.Barrier):
            return
        self.emit(S.Barrier(None, self.ext.barrier_threads))
        self.smem_dirty = False
        self.smem_read = False

    def before_shared_access(self, reads: bool, writes: bool) -> None:
        if (reads and self.smem_dirty) or (writes and (self.smem_read or self.smem_dirty)):
            self.barrier()

    def after_shared_access(self, reads: bool, writes: bool) -> None:
        self.smem_read |= reads
        self.smem_dirty |= writes

    # ------------------------------------------------------------ buffers and addresses
    def sbuf(self, b: T.Buffer) -> S.SBuffer:
        return self.buffers[id(b)]

    def shared_layout(self, b: T.Buffer) -> SharedLayout:
        staged = self.staged_layouts.get(id(b))
        return staged if staged is not None else self.sched.shared_layout(b)

    def global_offset(self, b: T.Buffer, idx: list[T.Expr]) -> T.Expr:
        off: T.Expr = T.Const(I64, None, 0)
        for d, i in zip(b.shape, idx, strict=True):
            off = _b("+", _b("*", off, _i64(self.lx(d))), _i64(i))
        return off

    def shared_offset(self, b: T.Buffer, idx: list[T.Expr]) -> T.Expr:
        lay: SharedLayout = self.shared_layout(b)
        off = lay.offset(idx)
        st = self.stage_offset.get(id(b))
        return add(st, off) if st is not None else off

    def local_offset(self, b: T.Buffer, idx: list[T.Expr]) -> T.Expr:
        off: T.Expr = c(0)
        for d, i in zip(b.const_shape, idx, strict=True):
            off = add(mul(off, d), i)
        return off

    def address(self, b: T.Buffer, idx: list[T.Expr], span) -> T.Expr:
        """Flat index into b's SBuffer of the element at (already lowered) indices idx."""
        if b.scope == "global":
            return self.global_offset(b, idx)
        if b.scope == "shared":
            return self.shared_offset(b, idx)
        if b.scope in ("local", "var"):
            return self.local_offset(b, idx)
        raise self.fail(f"fragment '{b.name}' cannot be addressed by index here", span)

    def hoist(self, name: str, value: T.Expr) -> T.Var:
        """A value that depends only on the thread index, computed once at kernel entry (so that
        loops do not recompute it, e.g. a lane's swizzled ldmatrix offset)."""
        from ..ir.simt_printer import SimtTextPrinter

        key = SimtTextPrinter().expr(value)
        if key not in self.hoisted_vars:
            var = self.fresh(name)
            self.hoisted.append(S.Declare(None, var, value))
            self.hoisted_vars[key] = var
        return self.hoisted_vars[key]

    def ref(self, b: T.Buffer, idx: list[T.Expr], span) -> S.Ref:
        """Load of element idx (lowered indices) of a non-fragment buffer."""
        return S.Ref(b.dtype, None, self.sbuf(b), fold(self.address(b, idx, span)))

    def addr(self, b: T.Buffer, idx: list[T.Expr], span) -> S.AddrOf:
        return S.AddrOf(D.I64, None, self.sbuf(b), fold(self.address(b, idx, span)))

    def frag_local(self, b: T.Buffer, orig_idx: list[T.Expr], span) -> T.Expr:
        """The register holding fragment element b[orig_idx] in the current Parallel context."""
        if self.frag_ctx is None:
            raise self.fail(f"fragment '{b.name}' can only be indexed inside a Parallel loop (its elements "
                            "are spread over the threads)", span)
        loop_ids, layout, k = self.frag_ctx
        lay = self.sched.fragment(b)
        ids = [id(i) if isinstance(i, T.Var) else None for i in orig_idx]
        if ids == loop_ids and same_layout(lay, layout):
            return k
        if len(ids) == 1 and isinstance(lay, Projected) and ids[0] in loop_ids and not isinstance(layout, Projected):
            view = Projected(layout, loop_ids.index(ids[0]))
            if same_layout(view, lay):
                return view.local_of_parent(k)
        raise self.fail(f"fragment '{b.name}' (layout {lay}) is accessed at an index that this Parallel loop "
                        f"(layout {layout}) does not own; index fragments with the loop variables", span)

    # ------------------------------------------------------------ expressions
    def lx(self, e: T.Expr) -> T.Expr:
        if isinstance(e, T.Const | S.ThreadIdx | S.BlockIdx):
            return e
        if isinstance(e, T.Var):
            return self.subst.get(id(e), e)
        if isinstance(e, T.Load):
            b = e.buffer
            if b.scope == "fragment":
                return S.Ref(e.dtype, e.span, self.sbuf(b), self.frag_local(b, e.indices, e.span))
            idx = [self.lx(i) for i in e.indices]
            if b.scope == "shared":
                self.smem_read = True
            return S.Ref(e.dtype, e.span, self.sbuf(b), fold(self.address(b, idx, e.span)))
        if isinstance(e, T.Binary | T.Compare):
            return fold(dataclasses.replace(e, a=self.lx(e.a), b=self.lx(e.b)))
        if isinstance(e, T.Unary):
            return fold(dataclasses.replace(e, a=self.lx(e.a)))
        if isinstance(e, T.Select):
            return fold(dataclasses.replace(e, cond=self.lx(e.cond), a=self.lx(e.a), b=self.lx(e.b)))
        if isinstance(e, T.Call):
            return fold(dataclasses.replace(e, args=[self.lx(a) for a in e.args]))
        if isinstance(e, T.Cast):
            return fold(dataclasses.replace(e, value=self.lx(e.value)))
        raise self.fail(f"cannot lower expression {type(e).__name__}", e.span)

    # ------------------------------------------------------------ statements
    def run(self) -> S.SKernel:
        k = self.k
        self.stmts(k.body)
        body, threads = self.ext.finish(self.out)
        body = self.hoisted + body
        params: list[S.SBuffer | T.Var] = [self.buffers[id(p)] if isinstance(p, T.Buffer) else p for p in k.params]
        grid = self.ext.launch_grid([self.lx(g) for g in k.grid])
        sk = S.SKernel(k.name, params, list(k.size_vars), grid, threads, self.shared, 0, body, k.span)
        sk.attrs.update(self.ext.kernel_attrs())
        return sk

    def stmts(self, body: list[T.Stmt]) -> None:
        for s in body:
            self.stmt(s)

    def uses_shared(self, s: T.Stmt) -> tuple[bool, bool]:
        """(reads shared memory, writes shared memory) anywhere in s."""
        reads = writes = False
        for st in walk_stmts([s]):
            regions_r, regions_w = [], []
            exprs: list[T.Expr] = []
            if isinstance(st, T.Copy):
                regions_r, regions_w = [st.src], [st.dst]
            elif isinstance(st, T.Gemm):
                regions_r, regions_w = [st.a, st.b], [st.c]
            elif isinstance(st, T.Reduce):
                regions_r, regions_w = [st.src], [st.dst]
            elif isinstance(st, T.Fill):
                regions_w = [st.dst]
            elif isinstance(st, T.Atomic):
                regions_w = [st.dst]
                if isinstance(st.value, T.Region):
                    regions_r = [st.value]
            elif isinstance(st, T.Store):
                writes |= st.buffer.scope == "shared"
                exprs = [st.value, *st.indices]
            elif isinstance(st, T.Assign):
                exprs = [st.value]
            elif isinstance(st, T.If):
                exprs = [st.cond]
            reads |= any(r.buffer.scope == "shared" for r in regions_r)
            writes |= any(r.buffer.scope == "shared" for r in regions_w)
            for e in exprs:
                reads |= any(isinstance(x, T.Load) and x.buffer.scope == "shared" for x in sub_exprs(e))
        return reads, writes

    def stmt(self, s: T.Stmt) -> None:
        if isinstance(s, T.For) and s.kind != "parallel":
            return self.serial_loop(s)
        reads, writes = self.uses_shared(s)
        self.ext.before_stmt(s)
        self.before_shared_access(reads, writes)
        self.lower(s)
        self.after_shared_access(reads, writes)
        if writes:
            self.generic_smem_writes = True

    def lower(self, s: T.Stmt) -> None:
        if isinstance(s, T.Alloc):
            return self.alloc(s)
        if isinstance(s, T.Store):
            b = s.buffer
            value = self.lx(s.value)
            if b.scope == "fragment":
                idx = self.frag_local(b, s.indices, s.span)
            else:
                idx = fold(self.address(b, [self.lx(i) for i in s.indices], s.span))
            return self.emit(S.SStore(s.span, self.sbuf(b), idx, value))
        if isinstance(s, T.Assign):
            value = self.lx(s.value)
            if id(s.var) in self.subst:
                return self.emit(S.SAssign(s.span, self.subst[id(s.var)], value))
            v = self.fresh(s.var.name, s.var.dtype)
            self.subst[id(s.var)] = v
            return self.emit(S.Declare(s.span, v, value))
        if isinstance(s, T.If):
            cond = self.lx(s.cond)
            then_body = self.block(lambda: self.stmts(s.then_body))
            else_body = self.block(lambda: self.stmts(s.else_body))
            return self.emit(S.SIf(s.span, cond, then_body, else_body))
        if isinstance(s, T.For):
            return self.parallel(s)
        if isinstance(s, T.Copy):
            return self.copy(s)
        if isinstance(s, T.Fill):
            return self.fill(s)
        if isinstance(s, T.Gemm):
            return self.gemm(s)
        if isinstance(s, T.Reduce):
            return self.reduce(s)
        if isinstance(s, T.Atomic):
            return self.atomic(s)
        if isinstance(s, T.Print):
            return self.print(s)
        if isinstance(s, T.AnnotateLayout | T.UseSwizzle):
            return
        raise self.fail(f"cannot lower {type(s).__name__}", s.span)

    def alloc(self, s: T.Alloc) -> None:
        b = s.buffer
        self.names.add(b.name)
        if b.scope == "shared":
            stages = self.stage_count.get(id(b), 1)
            lay: SharedLayout = self.shared_layout(b)
            # a TMA/wgmma swizzle pattern repeats every 1024 bytes from an aligned base
            sb = S.SBuffer(b.name, b.dtype, "shared", lay.size * stages, origin=b.name,
                           align=1024 if lay.panel and lay.swizzle else 128)
            self.shared.append(sb)
            self.buffers[id(b)] = sb
            return
        if b.scope == "fragment":
            size = self.sched.fragment(b).num_local
        else:
            size = 1
            for d in b.const_shape:
                size *= d
        sb = S.SBuffer(b.name, b.dtype, "local", size, origin=b.name)
        self.buffers[id(b)] = sb
        init = self.lx(s.init) if s.init is not None else None
        self.emit(S.DeclareArray(s.span, sb, init))

    # ------------------------------------------------------------ loops
    def serial_loop(self, s: T.For) -> None:
        plan = self.sched.loop(s)
        if plan is not None and self.ext.lower_pipelined(s, plan):
            return
        if plan is not None and plan.stages > 1:
            return self.pipelined(s, plan)
        var = s.vars[0]
        v = self.fresh(var.name)
        begin = self.lx(s.begin) if s.begin is not None else c(0)
        step = self.lx(s.step) if s.step is not None else None
        extent = self.lx(s.extents[0])
        self.subst[id(var)] = v

        def body():
            self.stmts(s.body)
            # the next iteration may overwrite shared memory this one read (or read what it wrote)
            if self.smem_read or self.smem_dirty:
                r, w = self.uses_shared(s)
                if r and w:
                    self.barrier()

        # Barrier state at the loop head must hold for every iteration: enter with a clean slate.
        self.ext.before_loop(s)
        r, w = self.uses_shared(s)
        if (r and self.smem_dirty) or (w and (self.smem_read or self.smem_dirty)):
            self.barrier()
        stmts = self.block(body)
        self.emit(S.SFor(s.span, v, begin, extent, stmts, unroll=s.kind == "unroll", step=step))

    def pipelined(self, s: T.For, plan) -> None:
        if plan.mechanism == "registers":
            return self.pipelined_registers(s, plan)
        var = s.vars[0]
        n = self.declare(f"{var.name}_count", self.lx(s.extents[0]))
        stages = plan.stages
        producers = plan.producers
        sizes = {id(p.dst.buffer): self.shared_layout(p.dst.buffer).size for p in producers}

        def issue(iteration: T.Expr):
            self.subst[id(var)] = iteration
            for p in producers:
                self.stage_offset[id(p.dst.buffer)] = mul(mod(iteration, stages), sizes[id(p.dst.buffer)])
                self.copy(p, asynchronous=True)
            for p in producers:
                self.stage_offset.pop(id(p.dst.buffer), None)

        self.ext.before_loop(s)
        self.before_shared_access(False, True)
        self.emit(S.SComment(None, f"pipeline over {var.name}: {stages} stages, cp.async"))
        pro = self.fresh(f"{var.name}_pre")
        prologue = self.block(lambda: self.emit(S.SIf(None, _cmp("<", pro, n), self.block(lambda: issue(pro)))))
        prologue.append(S.SCall(None, "cp_async_commit", []))
        self.emit(S.SFor(None, pro, c(0), c(stages - 1), prologue, unroll=True))

        it = self.fresh(var.name)

        def steady():
            self.emit(S.SCall(None, "cp_async_wait", [c(stages - 2)]))
            self.ext.after_async_copies_landed(s)
            self.emit(S.Barrier(None))
            self.smem_dirty = self.smem_read = False
            ahead = self.declare(f"{var.name}_next", add(it, stages - 1))
            self.emit(S.SIf(None, _cmp("<", ahead, n), self.block(lambda: issue(ahead))))
            self.emit(S.SCall(None, "cp_async_commit", []))
            self.subst[id(var)] = it
            for p in producers:
                self.stage_offset[id(p.dst.buffer)] = mul(mod(it, stages), sizes[id(p.dst.buffer)])
            for st in s.body:
                if st not in producers:
                    self.stmt(st)
            for p in producers:
                self.stage_offset.pop(id(p.dst.buffer), None)

        body = self.block(steady)
        self.emit(S.SFor(s.span, it, c(0), n, body))
        self.emit(S.SCall(None, "cp_async_wait", [c(0)]))
        self.barrier()

    def pipelined_registers(self, s: T.For, plan) -> None:
        """Register-staged double buffering (AMD, no cp.async). Each producer's shared tile has two buffers;
        iteration `it` issues the global loads of iteration it+1 into registers, computes on buffer it%2, stores
        the registers to buffer (it+1)%2 and ends with the iteration's one barrier. That barrier also separates
        the stores from the previous iteration's reads of the same buffer."""
        var = s.vars[0]
        producers = plan.producers
        sizes = {id(p.dst.buffer): self.shared_layout(p.dst.buffer).size for p in producers}

        def sext(p: T.Copy) -> list[int]:
            return [e for e in p.src.const_extents if e != 1] or [1]

        n = self.declare(f"{var.name}_count", self.lx(s.extents[0]))
        self.before_shared_access(False, True)
        self.emit(S.SComment(None, f"pipeline over {var.name}: 2 shared buffers, next tiles staged in registers"))
        stagers = [(p, self.staged_copy(p, sext(p), tag="next")) for p in producers]
        if any(st is None for _, st in stagers):  # pipeline-planning's register_stageable promised otherwise
            raise self.fail("internal error: a register-staged pipeline's copy cannot go through registers", s.span)

        def at(iteration: T.Expr, phase: int):
            self.subst[id(var)] = iteration
            for p, st in stagers:
                self.stage_offset[id(p.dst.buffer)] = mul(mod(iteration, 2), sizes[id(p.dst.buffer)])
                st[phase]()
            for p in producers:
                self.stage_offset.pop(id(p.dst.buffer), None)

        zero = c(0)
        self.emit(S.SIf(None, _cmp("<", zero, n), self.block(lambda: (at(zero, 0), at(zero, 1)))))
        self.barrier()
        it = self.fresh(var.name)

        def body():
            nxt = self.declare(f"{var.name}_next", add(it, 1))
            self.emit(S.SIf(None, _cmp("<", nxt, n), self.block(lambda: at(nxt, 0))))
            self.subst[id(var)] = it
            for p in producers:
                self.stage_offset[id(p.dst.buffer)] = mul(mod(it, 2), sizes[id(p.dst.buffer)])
            for st in s.body:
                if st not in producers:
                    self.stmt(st)
            for p in producers:
                self.stage_offset.pop(id(p.dst.buffer), None)
            self.emit(S.SIf(None, _cmp("<", nxt, n), self.block(lambda: at(nxt, 1))))
            self.emit(S.Barrier(None))
            self.smem_dirty = self.smem_read = False

        self.emit(S.SFor(s.span, it, c(0), n, self.block(body)))

    def parallel(self, s: T.For) -> None:
        loop_ids = [id(v) for v in s.vars]
        driver = None
        for st in walk_stmts(s.body):
            exprs: list[T.Expr] = []
            if isinstance(st, T.Store):
                if st.buffer.scope == "fragment" and [id(i) if isinstance(i, T.Var) else None
                                                      for i in st.indices] == loop_ids:
                    driver = st.buffer
                    break
                exprs = [st.value]
            elif isinstance(st, T.Assign):
                exprs = [st.value]
            elif isinstance(st, T.If):
                exprs = [st.cond]
            for e in exprs:
                for x in sub_exprs(e):
                    if isinstance(x, T.Load) and x.buffer.scope == "fragment" and \
                            [id(i) if isinstance(i, T.Var) else None for i in x.indices] == loop_ids:
                        driver = driver or x.buffer
            if driver is not None:
                break
        extents = [as_int(e) for e in s.extents]
        if driver is not None:
            layout = self.sched.fragment(driver)
            if list(layout.shape) != extents:
                raise self.fail(f"this Parallel loop is {extents} but fragment '{driver.name}' is "
                                f"{list(layout.shape)}", s.span)
            kv = self.fresh("r")
            coords = layout.coords(self.tid, kv)

            def body():
                for v, idx in zip(s.vars, coords, strict=True):
                    self.subst[id(v)] = self.declare(v.name, idx)
                saved = self.frag_ctx
                self.frag_ctx = (loop_ids, layout, kv)
                try:
                    ok = valid(layout, self.tid, kv)
                    if ok is None:
                        self.stmts(s.body)
                    else:
                        self.emit(S.SIf(None, ok, self.block(lambda: self.stmts(s.body))))
                finally:
                    self.frag_ctx = saved

            self.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), self.block(body), unroll=True))
            return
        def point(tile: list[T.Expr]) -> None:
            for v, val in zip(s.vars, tile, strict=True):
                self.subst[id(v)] = self.declare(v.name, val)
            self.stmts(s.body)

        self.spread(extents, "it", point, s.span)

    def spread(self, shape: list[int], name: str, emit_point, span=None, cold: bool = False) -> None:
        """Spread the points of a tile over the block's threads (consecutive threads on the innermost
        dimension, so global accesses coalesce); emit_point(index list) emits one point's code."""
        total = 1
        for e in shape:
            total *= e
        threads = self.k.threads
        iters = -(-total // threads)
        itv = self.fresh(name)

        def body():
            flat = self.declare("idx", add(mul(itv, threads), self.tid))
            rem: T.Expr = flat
            tile: list[T.Expr] = []
            for e in reversed(shape):
                tile.insert(0, mod(rem, e))
                rem = div(rem, e)
            tile[0] = div(flat, total // shape[0]) if len(shape) > 1 else flat
            if total % threads == 0:
                emit_point(tile)
            else:
                self.emit(S.SIf(None, _cmp("<", flat, c(total)), self.block(lambda: emit_point(tile))))

        self.emit(S.SFor(span, itv, c(0), c(iters), self.block(body), unroll=iters <= 32 and not cold,
                         keep_rolled=cold))

    # ------------------------------------------------------------ copies
    def region_index(self, r: T.Region, tile_idx: list[T.Expr]) -> list[T.Expr]:
        """Indices into r.buffer of the element at squeezed tile position tile_idx (unit extents
        of the region take no tile index: they stay at the region's start)."""
        out = []
        it = iter(tile_idx)
        for start, ext in zip(r.starts, r.const_extents, strict=True):
            base = self.lx(start)
            out.append(add(base, next(it)) if ext != 1 else base)
        return out

    def bounds(self, r: T.Region, idx: list[T.Expr]) -> T.Expr | None:
        if r.buffer.scope != "global":
            return None
        cond = None
        for d, i, ext, start in zip(r.buffer.shape, idx, r.const_extents, r.starts, strict=True):
            dim = self.lx(d)
            if as_int(dim) is not None and as_int(self.lx(start)) is not None and \
                    as_int(self.lx(start)) + ext <= as_int(dim) and as_int(self.lx(start)) >= 0:
                continue
            cond = _and(cond, _cmp("<", i, dim))
        return cond

    def copy(self, s: T.Copy, asynchronous: bool = False) -> None:
        src, dst = s.src, s.dst
        sext = [e for e in src.const_extents if e != 1] or [1]
        if self.ext.lower_copy(s):
            return
        if src.buffer.scope == "fragment" or dst.buffer.scope == "fragment":
            return self.copy_fragment(s, sext)
        if dst.buffer.scope == "shared" and self.shared_layout(dst.buffer).transposed:
            staged = self.staged_copy(s, sext)
            if staged is not None:  # through registers: 128-bit global loads, stores in the K-major order
                load, store = staged
                load()
                store()
                return
            return self.copy_elements(s, sext)
        if not self.vector_copy(s, sext, asynchronous):
            self.copy_elements(s, sext)

    def staged_copy(self, s: T.Copy, sext: list[int], tag: str = "stage"):
        """A global -> shared copy through registers, as two code generators: load() reads this thread's
        16-byte chunks of the source into a register array (zero outside the tensor; element by element where
        the tensor is not 16-byte aligned at run time), store() writes them to shared memory (16 bytes at a time
        where the shared layout keeps a chunk contiguous, else element by element, e.g. into a K-major tile).
        Register-staged pipelining on AMD issues load() one iteration ahead. None when the copy does not fit
        (16-bit or 32-bit elements of one dtype, the source's inner dim contiguous and chunk-aligned)."""
        src, dst = s.src, s.dst
        if ("vector_copy16" not in self.target.features or src.buffer.dtype != dst.buffer.dtype
                or src.buffer.scope != "global" or dst.buffer.scope != "shared" or len(sext) > 2):
            return None
        dt = src.buffer.dtype
        vec = 16 // dt.bytes
        if sext[-1] % vec or not self.contiguous_inner(src) or not multiple_of(self.lx(src.starts[-1]), vec):
            return None
        inner = self.lx(src.buffer.shape[-1])
        if as_int(inner) is not None and as_int(inner) % vec:
            return None
        runtime_ok = None if as_int(inner) is not None else _cmp("==", mod(inner, vec), c(0))
        base = S.AddrOf(D.I64, None, self.sbuf(src.buffer), c(0))
        runtime_ok = _and(runtime_ok, S.Intrinsic(D.BOOL, None, "aligned16", [base]))
        dlay = self.shared_layout(dst.buffer)
        rows = sext[0] if len(sext) == 2 else 1
        cchunks = sext[-1] // vec
        # K-major destination: consecutive threads take consecutive source rows, so that one wave's scalar
        # stores go to consecutive positions of a few stored rows (few LDS bank conflicts).
        rows_fastest = dlay.transposed and len(sext) == 2
        total = rows * cchunks
        threads = self.k.threads
        iters = -(-total // threads)
        tmp = S.SBuffer(self.fresh(f"{dst.buffer.name}_{tag}").name, dt, "local", iters * vec)
        self.emit(S.DeclareArray(None, tmp))
        vector_store = not dlay.transposed and dlay.shape[-1] % vec == 0 and \
            multiple_of(self.lx(dst.starts[-1]), vec) and self.contiguous_inner(dst)

        def each_chunk(fn):
            for it in range(iters):  # unrolled here: the register array is indexed by constants
                flat = add(c(it * threads), self.tid)
                r, cc = (mod(flat, rows), div(flat, rows)) if rows_fastest else (div(flat, cchunks), mod(flat, cchunks))
                tile = [r, mul(cc, vec)] if len(sext) == 2 else [mul(cc, vec)]
                body = self.block(lambda it=it, tile=tile: fn(it, tile))
                self.out.extend(body if total % threads == 0 or (it + 1) * threads <= total
                                else [S.SIf(None, _cmp("<", flat, c(total)), body)])

        def load_chunk(it, tile):
            sidx = self.region_index(src, tile)
            guard = self.bounds(src, sidx)
            self.emit(S.SCall(s.span, f"load_vec{vec}", [S.AddrOf(D.I64, None, tmp, c(it * vec)),
                                                         self.addr(src.buffer, sidx, s.span),
                                                         guard if guard is not None else T.Const(D.BOOL, None, True)]))

        def load_elements(it, tile):  # the tensor is not 16-byte aligned: element by element
            for v in range(vec):
                t = list(tile)
                t[-1] = add(t[-1], v)
                idx = self.region_index(src, t)
                g = self.bounds(src, idx)
                load = self.ref(src.buffer, idx, s.span)
                self.emit(S.SStore(s.span, tmp, c(it * vec + v), load if g is None else
                                   T.Select(dt, None, g, load, T.Const(dt, None, 0))))

        def load():
            fast = self.block(lambda: each_chunk(load_chunk))
            slow = self.block(lambda: each_chunk(load_elements))
            self.emit(S.SIf(None, runtime_ok, fast, slow))

        def store_chunk(it, tile):
            didx = self.region_index(dst, tile)
            if vector_store:
                self.emit(S.SCall(s.span, f"store_vec{vec}", [self.addr(dst.buffer, didx, s.span),
                                                              S.AddrOf(D.I64, None, tmp, c(it * vec))]))
                return
            for v in range(vec):
                t = list(tile)
                t[-1] = add(t[-1], v)
                idx = self.region_index(dst, t)
                self.emit(S.SStore(s.span, self.sbuf(dst.buffer), fold(self.address(dst.buffer, idx, s.span)),
                                   S.Ref(dt, None, tmp, c(it * vec + v))))

        return load, (lambda: each_chunk(store_chunk))

    def copy_fragment(self, s: T.Copy, sext: list[int]) -> None:
        src, dst = s.src, s.dst
        frag = src.buffer if src.buffer.scope == "fragment" else dst.buffer
        layout = self.sched.fragment(frag)
        if src.buffer.scope == dst.buffer.scope == "fragment" and \
                self.sched.fragment(src.buffer) != self.sched.fragment(dst.buffer):
            raise self.fail("copy between fragments of different layouts", s.span)
        if [e for e in layout.shape if e != 1] != [e for e in sext if e != 1]:
            raise self.fail(f"copy of a part of fragment '{frag.name}' is not supported; copy it whole", s.span)
        if self.copy_fragment_vector(s, layout, sext):
            return
        self.copy_fragment_elements(s, layout)

    def copy_fragment_vector(self, s: T.Copy, layout, sext: list[int]) -> bool:
        """Fragment <-> memory `vec` elements at a time, where a block-row thread's consecutive
        registers are consecutive in memory (with a per-vector scalar fallback at ragged edges and
        a run-time alignment check on global tensors)."""
        src, dst = s.src, s.dst
        to_mem = src.buffer.scope == "fragment"
        frag_r, mem = (src, dst) if to_mem else (dst, src)
        block = layout.parent if isinstance(layout, Projected) and layout.keep == 1 else layout
        if not (isinstance(block, BlockRow) and block.vec >= 2 and mem.buffer.scope in ("global", "shared")
                and "vector_fragment_copy" in self.target.features and frag_r.buffer.dtype.is_float
                and mem.buffer.dtype.is_float
                and self.contiguous_inner(mem) and sext[-1] == layout.shape[-1]):
            return False
        vec = block.vec  # a block-row thread's (or its column projection's) registers run in chunks of vec
        nbytes = vec * mem.buffer.dtype.bytes
        if nbytes > 16 or 16 % nbytes or not multiple_of(self.lx(mem.starts[-1]), vec):
            return False
        runtime_ok: T.Expr | None = None
        if mem.buffer.scope == "shared":
            if self.shared_layout(mem.buffer).shape[-1] % vec or self.shared_layout(mem.buffer).transposed:
                return False
        else:
            inner = self.lx(mem.buffer.shape[-1])
            if as_int(inner) is not None and as_int(inner) % vec:
                return False
            if as_int(inner) is None:
                runtime_ok = _cmp("==", mod(inner, vec), c(0))
            runtime_ok = _and(runtime_ok, S.Intrinsic(D.BOOL, None, "aligned", [
                S.AddrOf(D.I64, None, self.sbuf(mem.buffer), c(0)), c(nbytes)]))
        fsb = self.sbuf(frag_r.buffer)
        if mem.buffer.scope == "shared":
            self.smem_read |= not to_mem

        def vector_body():
            kv = self.fresh("r")

            def body():
                k0 = mul(kv, vec)
                coords = layout.coords(self.tid, k0)
                tile = [x for x, e in zip(coords, layout.shape, strict=True) if e != 1] or [c(0)]
                idx = self.region_index(mem, tile)
                dims = [self.lx(d) for d in mem.buffer.shape]
                full = None
                partial = None
                if mem.buffer.scope == "global":
                    for i, (d, x) in enumerate(zip(dims, idx, strict=True)):
                        if i == len(idx) - 1:
                            full = _and(full, _cmp("<=", add(x, vec), d))
                        else:
                            partial = _and(partial, self.bounds_one(mem, i, x))
                    full = _and(partial, full)
                ok = valid(layout, self.tid, k0)
                faddr = S.AddrOf(D.I64, None, fsb, k0)
                maddr = self.addr(mem.buffer, idx, s.span)
                if to_mem:
                    fast: list[S.SStmt] = [S.SCall(s.span, f"store_vec{vec}", [maddr, faddr])]
                else:
                    fast = [S.SCall(s.span, f"load_vec{vec}", [faddr, maddr, full or T.Const(D.BOOL, None, True)])]
                if full is None:
                    stmts = fast
                else:  # ragged edge: element by element
                    slow = self.block(lambda: self.fragment_elements(s, layout, k0, vec, to_mem, mem, tile))
                    stmts = [S.SIf(None, full, fast, slow)] if to_mem else [S.SIf(None, full, fast, slow)]
                if ok is not None:
                    stmts = [S.SIf(None, ok, stmts)]
                self.out.extend(stmts)

            self.emit(S.SFor(s.span, kv, c(0), c(layout.num_local // vec), self.block(body), unroll=True))

        if runtime_ok is None:
            vector_body()
        else:
            fast = self.block(vector_body)
            slow = self.block(lambda: self.copy_fragment_elements(s, layout))
            self.emit(S.SIf(None, runtime_ok, fast, slow))
        return True

    def bounds_one(self, r: T.Region, axis: int, i: T.Expr) -> T.Expr | None:
        return _cmp("<", i, self.lx(r.buffer.shape[axis]))

    def fragment_elements(self, s: T.Copy, layout, k0: T.Expr, vec: int, to_mem: bool, mem: T.Region,
                          tile: list[T.Expr]) -> None:
        """Elements k0 .. k0+vec-1 of a block-row fragment, each bounds-checked (a ragged edge)."""
        fsb = self.sbuf((s.src if to_mem else s.dst).buffer)
        for v in range(vec):
            t = list(tile)
            t[-1] = add(t[-1], v)
            idx = self.region_index(mem, t)
            guard = self.bounds(mem, idx)
            k = add(k0, v)
            if to_mem:
                st: S.SStmt = S.SStore(s.span, self.sbuf(mem.buffer), fold(self.address(mem.buffer, idx, s.span)),
                                       _cast(S.Ref(fsb.dtype, None, fsb, k), mem.buffer.dtype))
                self.emit(st if guard is None else S.SIf(None, guard, [st]))
            else:
                load = self.ref(mem.buffer, idx, s.span)
                value = load if guard is None else T.Select(mem.buffer.dtype, None, guard, load,
                                                            T.Const(mem.buffer.dtype, None, 0))
                self.emit(S.SStore(s.span, fsb, k, _cast(value, fsb.dtype)))

    def copy_fragment_elements(self, s: T.Copy, layout) -> None:
        src, dst = s.src, s.dst
        kv = self.fresh("r")

        def body():
            coords = layout.coords(self.tid, kv)
            tile = [x for x, e in zip(coords, layout.shape, strict=True) if e != 1] or [c(0)]
            value: T.Expr
            if src.buffer.scope == "fragment":
                value = S.Ref(src.buffer.dtype, None, self.sbuf(src.buffer), kv)
                guard = None
            else:
                sidx = self.region_index(src, tile)
                guard = self.bounds(src, sidx)
                if src.buffer.scope == "shared":
                    self.smem_read = True
                load = self.ref(src.buffer, sidx, s.span)
                value = load if guard is None else T.Select(src.buffer.dtype, None, guard, load,
                                                            T.Const(src.buffer.dtype, None, 0))
            value = _cast(value, dst.buffer.dtype)
            if dst.buffer.scope == "fragment":
                st: S.SStmt = S.SStore(s.span, self.sbuf(dst.buffer), kv, value)
            else:
                didx = self.region_index(dst, tile)
                dguard = self.bounds(dst, didx)
                st = S.SStore(s.span, self.sbuf(dst.buffer), fold(self.address(dst.buffer, didx, s.span)), value)
                if dguard is not None:
                    st = S.SIf(None, dguard, [st])
            ok = valid(layout, self.tid, kv)
            self.emit(st if ok is None else S.SIf(None, ok, [st]))

        self.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), self.block(body), unroll=True))

    def contiguous_inner(self, r: T.Region) -> bool:
        """The tile's innermost extent runs along the buffer's innermost dimension."""
        return r.const_extents[-1] != 1 or all(e == 1 for e in r.const_extents)

    def vector_copy(self, s: T.Copy, sext: list[int], asynchronous: bool) -> bool:
        src, dst = s.src, s.dst
        if "vector_copy16" not in self.target.features:  # WGSL: no reinterpreting 16-byte accesses
            return False
        if src.buffer.dtype != dst.buffer.dtype:
            return False
        vec = 16 // src.buffer.dtype.bytes
        if sext[-1] % vec != 0 or not (self.contiguous_inner(src) and self.contiguous_inner(dst)):
            return False
        for r in (src, dst):
            if r.buffer.scope == "shared":
                lay = self.shared_layout(r.buffer)
                if lay.shape[-1] % vec != 0 or not multiple_of(self.lx(r.starts[-1]), vec) or lay.transposed:
                    return False
            elif not multiple_of(self.lx(r.starts[-1]), vec):
                return False
        runtime_ok: T.Expr | None = None
        for r in (src, dst):
            if r.buffer.scope == "global":
                inner = self.lx(r.buffer.shape[-1])
                if as_int(inner) is not None:
                    if as_int(inner) % vec != 0:
                        return False
                else:
                    runtime_ok = _and(runtime_ok, _cmp("==", mod(inner, vec), c(0)))
                runtime_ok = _and(runtime_ok, S.Intrinsic(D.BOOL, None, "aligned16", [
                    S.AddrOf(D.I64, None, self.sbuf(r.buffer), c(0))]))
        use_async = asynchronous and src.buffer.scope == "global" and dst.buffer.scope == "shared"
        chunks_shape = list(sext[:-1]) + [sext[-1] // vec]

        def point(tile: list[T.Expr]) -> None:
            tile = tile[:-1] + [mul(tile[-1], vec)]
            sidx = self.region_index(src, tile)
            didx = self.region_index(dst, tile)
            guard = _and(self.bounds(src, sidx), self.bounds(dst, didx))
            saddr = self.addr(src.buffer, sidx, s.span)
            daddr = self.addr(dst.buffer, didx, s.span)
            pred = guard if guard is not None else T.Const(D.BOOL, None, True)
            if use_async:
                self.emit(S.SCall(s.span, "cp_async16", [daddr, saddr, pred]))
            elif src.buffer.scope == "global":  # zero-fill what lies outside the tensor
                self.emit(S.SCall(s.span, "copy16_or_zero", [daddr, saddr, pred]))
            else:
                st = S.SCall(s.span, "copy16", [daddr, saddr])
                self.emit(st if guard is None else S.SIf(None, guard, [st]))

        def vector_body():
            self.spread(chunks_shape, "v", point, s.span)

        if runtime_ok is None:
            vector_body()
        else:
            fast = self.block(vector_body)
            slow = self.block(lambda: self.copy_elements(s, sext, cold=True))
            self.emit(S.SIf(None, runtime_ok, fast, slow))
        return True

    def copy_elements(self, s: T.Copy, sext: list[int], cold: bool = False) -> None:
        src, dst = s.src, s.dst

        def point(tile: list[T.Expr]) -> None:
            sidx = self.region_index(src, tile)
            didx = self.region_index(dst, tile)
            sguard, dguard = self.bounds(src, sidx), self.bounds(dst, didx)
            load = self.ref(src.buffer, sidx, s.span)
            value = load if sguard is None else T.Select(src.buffer.dtype, None, sguard, load,
                                                         T.Const(src.buffer.dtype, None, 0))
            st: S.SStmt = S.SStore(s.span, self.sbuf(dst.buffer), fold(self.address(dst.buffer, didx, s.span)),
                                   _cast(value, dst.buffer.dtype))
            self.emit(st if dguard is None else S.SIf(None, dguard, [st]))

        self.spread(sext, "e", point, s.span, cold=cold)

    def fill(self, s: T.Fill) -> None:
        b = s.dst.buffer
        value = _cast(self.lx(s.value), b.dtype)
        if b.scope == "fragment":
            layout = self.sched.fragment(b)
            kv = self.fresh("r")
            body = [S.SStore(s.span, self.sbuf(b), kv, value)]
            self.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), body, unroll=True))
            return
        if b.scope in ("local", "var"):
            size = self.sbuf(b).size
            kv = self.fresh("r")
            self.emit(S.SFor(s.span, kv, c(0), c(size), [S.SStore(s.span, self.sbuf(b), kv, value)], unroll=True))
            return
        sext = [e for e in s.dst.const_extents if e != 1] or [1]

        def point(tile: list[T.Expr]) -> None:
            idx = self.region_index(s.dst, tile)
            guard = self.bounds(s.dst, idx)
            st: S.SStmt = S.SStore(s.span, self.sbuf(b), fold(self.address(b, idx, s.span)), value)
            self.emit(st if guard is None else S.SIf(None, guard, [st]))

        self.spread(sext, "e", point, s.span)

    # ------------------------------------------------------------ gemm
    def gemm(self, s: T.Gemm) -> None:
        impl = self.sched.instruction(s)
        if s.clear_accum:
            self.fill(T.Fill(s.span, s.c, T.Const(s.c.buffer.dtype, None, 0)))
        if self.ext.lower_gemm(s, impl):
            return
        if impl == "mma":
            return self.gemm_mma(s)
        if impl == "mfma":
            return self.gemm_mfma(s)
        return self.gemm_fma(s)

    def gemm_dims(self, s: T.Gemm) -> tuple[int, int, int]:
        a = [e for e in s.a.const_extents if e != 1]
        b = [e for e in s.b.const_extents if e != 1]
        m, kd = (a[1], a[0]) if s.transpose_a else (a[0], a[1])
        n = b[0] if s.transpose_b else b[1]
        return m, n, kd

    def operand_index(self, r: T.Region, row: T.Expr, col: T.Expr) -> list[T.Expr]:
        return self.region_index(r, [row, col])

    def stage_operands(self, s: T.Gemm) -> T.Gemm:
        """The FMA path reads whole rows of A and columns of B, which a fragment spreads over the threads:
        stage each register operand through its own shared buffer (written, then a barrier)."""
        regions: dict[str, T.Region] = {}
        for name in ("a", "b"):
            r: T.Region = getattr(s, name)
            b = r.buffer
            if b.scope != "fragment":
                continue
            shape = b.const_shape
            if (shape is None or len(shape) != 2 or r.const_extents != shape
                    or any(as_int(self.lx(x)) != 0 for x in r.starts)):
                raise self.fail("gemm with a register operand needs the matrix-instruction path (f16/bf16 "
                                "operands, f32 accumulator, tile sizes multiple of 16) or the whole 2-D fragment",
                                s.span)
            layout = self.sched.fragment(b)
            stage = T.Buffer(self.fresh(f"{b.name}_stage").name, b.dtype, [c(d) for d in shape], "shared", b.span)
            lay = SharedLayout(shape, b.dtype.bytes)
            self.staged_layouts[id(stage)] = lay
            self.staged.append(stage)
            sb = S.SBuffer(stage.name, b.dtype, "shared", lay.size, origin=f"{b.name} staged for gemm")
            self.shared.append(sb)
            self.buffers[id(stage)] = sb
            self.before_shared_access(False, True)
            kv = self.fresh("r")
            i, j = layout.coords(self.tid, kv)
            st: S.SStmt = S.SStore(s.span, sb, lay.offset([i, j]), S.Ref(b.dtype, None, self.sbuf(b), kv))
            ok = valid(layout, self.tid, kv)
            self.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), [st if ok is None else S.SIf(None, ok, [st])],
                             unroll=True))
            self.smem_dirty = True
            regions[name] = T.Region(stage, [c(0), c(0)], list(r.extents), r.span)
        self.before_shared_access(True, False)
        self.smem_read = True
        return dataclasses.replace(s, **regions)

    def gemm_fma(self, s: T.Gemm) -> None:
        staged = s.a.buffer.scope == "fragment" or s.b.buffer.scope == "fragment"
        if staged:
            s = self.stage_operands(s)
        m, n, kd = self.gemm_dims(s)
        cb = s.c.buffer
        if cb.scope != "fragment":
            raise self.fail("gemm accumulator must be a fragment", s.span)
        layout = self.sched.fragment(cb)
        kv = self.fresh("r")
        acc_dt = D.F32 if cb.dtype.is_float else D.I32

        def body():
            i, j = layout.coords(self.tid, kv)
            i = self.declare("i", i)
            j = self.declare("j", j)
            acc = self.declare("acc", T.Const(acc_dt, None, 0), acc_dt)
            kk = self.fresh("k")
            a_idx = self.operand_index(s.a, kk, i) if s.transpose_a else self.operand_index(s.a, i, kk)
            b_idx = self.operand_index(s.b, j, kk) if s.transpose_b else self.operand_index(s.b, kk, j)
            av = _cast(self.ref(s.a.buffer, a_idx, s.span),
                       acc_dt)
            bv = _cast(self.ref(s.b.buffer, b_idx, s.span),
                       acc_dt)
            upd = S.SAssign(None, acc, T.Binary(acc_dt, None, "+", acc, T.Binary(acc_dt, None, "*", av, bv)))
            self.emit(S.SFor(None, kk, c(0), c(kd), [upd], unroll=kd <= 64))
            cur = S.Ref(cb.dtype, None, self.sbuf(cb), kv)
            self.emit(S.SStore(s.span, self.sbuf(cb), kv,
                               _cast(T.Binary(acc_dt, None, "+", _cast(cur, acc_dt), acc), cb.dtype)))

        ok = valid(layout, self.tid, kv)
        inner = self.block(body)
        self.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), inner if ok is None else [S.SIf(None, ok, inner)],
                         unroll=True))
        if staged:
            self.barrier()  # the staging buffer is rewritten by the next gemm, possibly in the next iteration

    def gemm_mma(self, s: T.Gemm) -> None:
        lay: MmaTiled = self.sched.fragment(s.c.buffer)
        m, n, kd = self.gemm_dims(s)
        dt = s.a.buffer.dtype
        kind = "f16" if dt == D.F16 else "bf16"
        warp = div(self.tid, 32)
        lane = mod(self.tid, 32)
        warp_m = mod(warp, lay.wm)
        warp_n = div(warp, lay.wm)
        wm_rows, wn_cols = m // lay.wm, n // lay.wn
        mi_count, ni_count = lay.mi, lay.ni
        c_sb = self.sbuf(s.c.buffer)

        def shared_addr(r: T.Region, row: T.Expr, col: T.Expr) -> T.Expr:
            # The lane's offset in the (swizzled) tile is a per-thread constant: hoist it; only the
            # pipeline stage's base changes from one iteration to the next.
            idx = self.operand_index(r, row, col)
            offset = self.hoist(f"{r.buffer.name}_off", fold(self.shared_layout(r.buffer).offset(idx)))
            stage = self.stage_offset.get(id(r.buffer))
            return S.AddrOf(D.I64, None, self.sbuf(r.buffer), add(stage, offset) if stage is not None else offset)

        def body(kk: int):
            a_regs = S.SBuffer(self.fresh("a_frag").name, D.U32, "local", mi_count * 4)
            b_regs = S.SBuffer(self.fresh("b_frag").name, D.U32, "local", ni_count * 2)
            self.emit(S.DeclareArray(None, a_regs))
            self.emit(S.DeclareArray(None, b_regs))
            k0 = c(kk * 16)
            for mi in range(mi_count):
                row0 = add(mul(warp_m, wm_rows), mi * 16)
                if s.a.buffer.scope == "fragment":
                    self.pack_register_a(s, a_regs, mi, c(kk))
                    continue
                if not s.transpose_a:  # A is [M, K]: lane l gives row l%16, k-half l/16
                    addr = shared_addr(s.a, add(row0, mod(lane, 16)), add(k0, mul(div(lane, 16), 8)))
                    self.emit(S.SCall(None, "ldmatrix_x4", [S.AddrOf(D.I64, None, a_regs, c(mi * 4)), addr]))
                else:  # A is [K, M]: matrices (k0-7,m0-7) (k0-7,m8-15) (k8-15,m0-7) (k8-15,m8-15)
                    q = div(lane, 8)
                    addr = shared_addr(s.a, add(add(k0, mul(div(q, 2), 8)), mod(lane, 8)), add(row0, mul(mod(q, 2), 8)))
                    self.emit(S.SCall(None, "ldmatrix_x4_trans", [S.AddrOf(D.I64, None, a_regs, c(mi * 4)), addr]))
            ni = 0
            while ni < ni_count:
                col0 = add(mul(warp_n, wn_cols), ni * 8)
                pair = ni + 1 < ni_count
                q = div(lane, 8)
                if not s.transpose_b:  # B is [K, N]: .trans; matrices (k0-7,n) (k8-15,n) (k0-7,n+8) (k8-15,n+8)
                    krow = add(add(k0, mul(mod(q, 2), 8)), mod(lane, 8))
                    ncol = add(col0, mul(div(q, 2), 8)) if pair else col0
                    name = "ldmatrix_x4_trans" if pair else "ldmatrix_x2_trans"
                    addr = shared_addr(s.b, krow, ncol)
                else:  # B is [N, K]: matrices (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15)
                    nrow = add(add(col0, mul(div(q, 2), 8)), mod(lane, 8)) if pair else add(col0, mod(lane, 8))
                    kcol = add(k0, mul(mod(q, 2), 8))
                    name = "ldmatrix_x4" if pair else "ldmatrix_x2"
                    addr = shared_addr(s.b, nrow, kcol)
                self.emit(S.SCall(None, name, [S.AddrOf(D.I64, None, b_regs, c(ni * 2)), addr]))
                ni += 2 if pair else 1
            for mi in range(mi_count):
                for nj in range(ni_count):
                    acc = S.AddrOf(D.I64, None, c_sb, c((mi * ni_count + nj) * 4))
                    self.emit(S.SCall(None, f"mma_{kind}", [acc, S.AddrOf(D.I64, None, a_regs, c(mi * 4)),
                                                            S.AddrOf(D.I64, None, b_regs, c(nj * 2))]))

        self.smem_read = True
        for kk in range(kd // 16):  # unrolled here, so every shared offset is a hoistable constant
            body(kk)

    def gemm_mfma(self, s: T.Gemm) -> None:
        """AMD v_mfma_f32_16x16x16{f16,bf16_1k}, per wave. Each lane needs, per 16x16 atom and k-step, the 4
        k-values of one A row (m = lane%16) and of one B column (n = lane%16), k = 4*(lane/16) + i (layouts in
        tilec/targets/hip/mfma_layouts.py). A transposed accumulator (MfmaTiled.transposed) is computed as
        C^T = B^T A^T: the same per-lane values, with the MFMA's A and B arguments swapped.

        k order: the MFMA sums over k, so any bijection between (k-step, lane group, element) and the tile's k is
        correct as long as A and B agree. With both operands in shared memory and K a multiple of 32, k-steps go
        in pairs and lane group g takes k = 32p + 8g + 4t + i in step t of pair p: 8 consecutive k per lane, one
        128-bit LDS read from a K-major swizzled tile. A register A operand (the transposed accumulator of an
        earlier MFMA) fixes the plain order k = 16kk + 4g + i; its B operand is then read 128 bits at a time
        from an interleaved K-major tile (SharedLayout.interleave), else 64 bits (4 consecutive k)."""
        from ..ir.layout import MfmaTiled
        lay: MfmaTiled = self.sched.fragment(s.c.buffer)
        m, n, kd = self.gemm_dims(s)
        dt = s.a.buffer.dtype
        name = "mfma_f32_16x16x16f16" if dt == D.F16 else "mfma_f32_16x16x16bf16_1k"
        wave = div(self.tid, self.target.warp_size)
        lane = mod(self.tid, self.target.warp_size)
        wave_m = mod(wave, lay.wm)
        wave_n = div(wave, lay.wm)
        wm_rows, wn_cols = m // lay.wm, n // lay.wn
        c_sb = self.sbuf(s.c.buffer)
        group = div(lane, 16)
        reg_a = s.a.buffer.scope == "fragment"
        b_lay = self.shared_layout(s.b.buffer)

        def kmajor(r: T.Region, k_first: bool, count: int = 8) -> bool:
            """K is the stored-contiguous dim, and `count` k-values of a lane form one aligned vector."""
            lay = self.shared_layout(r.buffer)
            kstart = as_int(self.lx(r.starts[0 if k_first else -1]))
            return (lay.transposed == k_first and lay.row_elems % count == 0 and kstart is not None
                    and kstart % (32 if lay.interleave else count) == 0)

        paired = not reg_a and kd % 32 == 0 and not b_lay.interleave and \
            not self.shared_layout(s.a.buffer).interleave
        interleaved = reg_a and b_lay.interleave and kmajor(s.b, not s.transpose_b) and kd % 32 == 0

        def operand(r: T.Region, k_first: bool, other: T.Expr, k0: T.Expr, count: int, regs: S.SBuffer, at: int):
            """regs[at + j] = the operand at (other, k0 + j) (j < count; logical k, or stored order when the tile
            is interleaved): one vector LDS read when the tile is K-major, else element by element."""
            def idx(kx):
                return self.operand_index(r, kx, other) if k_first else self.operand_index(r, other, kx)

            stage = self.stage_offset.get(id(r.buffer))
            if kmajor(r, k_first, count):
                off = self.hoist(f"{r.buffer.name}_off", fold(self.shared_layout(r.buffer).offset(idx(k0))))
                addr = S.AddrOf(D.I64, None, self.sbuf(r.buffer), add(stage, off) if stage is not None else off)
                self.emit(S.SCall(None, f"load_vec{count}", [S.AddrOf(D.I64, None, regs, c(at)), addr,
                                                              T.Const(D.BOOL, None, True)]))
                return
            for j in range(count):
                off = self.shared_layout(r.buffer).offset(idx(add(k0, j)))
                off = self.hoist(f"{r.buffer.name}_off", fold(off))
                ref = S.Ref(r.buffer.dtype, None, self.sbuf(r.buffer), add(stage, off) if stage is not None else off)
                self.emit(S.SStore(None, regs, c(at + j), ref))

        def mfma(mi: int, nj: int, a_addr: S.AddrOf, b_addr: S.AddrOf) -> None:
            acc = S.AddrOf(D.I64, None, c_sb, c((mi * lay.ni + nj) * 4))
            args = [acc, b_addr, a_addr] if lay.transposed else [acc, a_addr, b_addr]
            self.emit(S.SCall(None, name, args))

        rows = [add(add(mul(wave_m, wm_rows), mi * 16), mod(lane, 16)) for mi in range(lay.mi)]
        cols = [add(add(mul(wave_n, wn_cols), nj * 16), mod(lane, 16)) for nj in range(lay.ni)]
        per = 8 if paired or interleaved else 4  # k-values per lane and atom read at once
        for kp in range(kd // (16 * (per // 4))):
            b_regs = S.SBuffer(self.fresh("b_frag").name, dt, "local", lay.ni * per)
            self.emit(S.DeclareArray(None, b_regs))
            if paired:
                k0 = add(mul(group, 8), kp * 32)
            elif interleaved:
                k0 = add(mul(group, 4), kp * 32)  # stored order: this and the next k-step's 4 values
            else:
                k0 = add(mul(group, 4), kp * 16)
            for nj in range(lay.ni):
                operand(s.b, not s.transpose_b, cols[nj], k0, per, b_regs, nj * per)
            if reg_a:
                la: MfmaTiled = self.sched.fragment(s.a.buffer)
                a_sb = self.sbuf(s.a.buffer)
                for t in range(per // 4):
                    kk = kp * (per // 4) + t
                    for mi in range(lay.mi):
                        for nj in range(lay.ni):
                            mfma(mi, nj, S.AddrOf(D.I64, None, a_sb, c((mi * la.ni + kk) * 4)),
                                 S.AddrOf(D.I64, None, b_regs, c(nj * per + t * 4)))
                continue
            a_regs = S.SBuffer(self.fresh("a_frag").name, dt, "local", lay.mi * per)
            self.emit(S.DeclareArray(None, a_regs))
            for mi in range(lay.mi):
                operand(s.a, s.transpose_a, rows[mi], k0, per, a_regs, mi * per)
            for t in range(per // 4):
                for mi in range(lay.mi):
                    for nj in range(lay.ni):
                        mfma(mi, nj, S.AddrOf(D.I64, None, a_regs, c(mi * per + t * 4)),
                             S.AddrOf(D.I64, None, b_regs, c(nj * per + t * 4)))
        self.smem_read = True

    def pack_register_a(self, s: T.Gemm, a_regs: S.SBuffer, mi: int, kk: T.Expr) -> None:
        la: MmaTiled = self.sched.fragment(s.a.buffer)
        src = self.sbuf(s.a.buffer)
        pack = "pack_half2" if s.a.buffer.dtype == D.F16 else "pack_bf162"
        for reg, (tile_off, e) in enumerate(((0, 0), (0, 2), (1, 0), (1, 2))):
            ni = add(mul(kk, 2), tile_off)
            base = add(mul(add(mul(c(mi), la.ni), ni), 4), e)
            lo = _cast(S.Ref(src.dtype, None, src, base), D.F32)
            hi = _cast(S.Ref(src.dtype, None, src, add(base, 1)), D.F32)
            self.emit(S.SStore(None, a_regs, c(mi * 4 + reg), S.Intrinsic(D.U32, None, pack, [lo, hi])))

    # ------------------------------------------------------------ reductions
    def reduce_op(self, kind: str, a: T.Expr, b: T.Expr) -> T.Expr:
        if kind in ("sum", "abssum"):
            return T.Binary(a.dtype, None, "+", a, b)
        return T.Call(a.dtype, None, "max" if kind in ("max", "absmax") else "min", [a, b])

    def reduce_init(self, kind: str, dt: D.DType) -> T.Const:
        if kind in ("sum", "abssum", "absmax"):
            return T.Const(dt, None, 0)
        if dt.is_float:
            return T.Const(dt, None, float("-inf") if kind == "max" else float("inf"))
        return T.Const(dt, None, -(2**31) if kind == "max" else 2**31 - 1)

    def get_scratch(self, elems: int) -> S.SBuffer:
        if self.scratch is None:
            self.scratch = S.SBuffer("reduce_scratch", D.F32, "shared", 0, origin="reduction scratch")
            self.shared.append(self.scratch)
        self.scratch.size = max(self.scratch.size or 0, elems)
        return self.scratch

    def reduce(self, s: T.Reduce) -> None:
        src, dst = s.src.buffer, s.dst.buffer
        if src.scope == "fragment" and dst.scope == "fragment":
            ls, ld = self.sched.fragment(src), self.sched.fragment(dst)
            if isinstance(ld, Projected) and not isinstance(ls, Projected) and \
                    same_layout(ld, Projected(ls, 1 - s.dim)):
                from ..ir.layout import MfmaTiled
                if isinstance(ls, MfmaTiled):
                    return self.reduce_mfma(s, ls, Projected(ls, 1 - s.dim))
                return self.reduce_fragment(s, ls, Projected(ls, 1 - s.dim))
            if isinstance(ls, BlockRow) and len(ls.shape) == 1 and isinstance(ld, BlockRow):
                return self.reduce_whole(s, ls)
        if src.scope == "shared":
            return self.reduce_from_shared(s)
        raise self.fail(f"reduce_{s.kind} from {src.scope} '{src.name}' to {dst.scope} '{dst.name}' over dim "
                        f"{s.dim} is not supported; reduce a fragment along a dimension into a 1-D fragment",
                        s.span)

    def lane_partial(self, s: T.Reduce, acc_dt: D.DType, src_sb: S.SBuffer, count: int, parent, lanes) -> T.Var:
        """This thread's `count` parent elements parent(q) combined, then combined with the lanes `lanes`
        apart (xor shuffles): the partial result of one reduced row or column."""
        kind = s.kind
        v = self.declare("part", self.reduce_init(kind, acc_dt), acc_dt)
        q = self.fresh("q")
        elem = _cast(S.Ref(s.src.buffer.dtype, None, src_sb, parent(q)), acc_dt)
        if kind in ("abssum", "absmax"):
            elem = T.Call(acc_dt, None, "abs", [elem])
        self.emit(S.SFor(None, q, c(0), c(count), [S.SAssign(None, v, self.reduce_op(kind, v, elem))], unroll=True))
        for off in lanes:
            sh = S.Intrinsic(acc_dt, None, "shfl_xor", [v, c(off)])
            self.emit(S.SAssign(None, v, self.reduce_op(kind, v, sh)))
        return v

    def reduce_fragment(self, s: T.Reduce, ls, ld: Projected) -> None:
        kind = s.kind
        acc_dt = D.F32 if s.src.buffer.dtype.is_float else s.src.buffer.dtype
        src_sb, dst_sb = self.sbuf(s.src.buffer), self.sbuf(s.dst.buffer)
        rv = self.fresh("r")
        # Parent elements that project onto local rv, enumerated by a second unrolled loop.
        if isinstance(ls, MmaTiled):
            if ld.keep == 0:  # rows: vary ni and e%2
                count = ls.ni * 2
                def parent(q):  # noqa: E306
                    return add(add(mul(add(mul(div(rv, 2), ls.ni), div(q, 2)), 4), mul(mod(rv, 2), 2)), mod(q, 2))
                lanes = [1, 2]
                warps_across = ls.wn
                warp_group = lambda w: mod(w, ls.wm)  # noqa: E731
                warp_in_group = lambda w: div(w, ls.wm)  # noqa: E731
                groups = ls.wm
            else:  # cols: vary mi and e/2
                count = ls.mi * 2
                def parent(q):  # noqa: E306
                    return add(add(mul(add(mul(div(q, 2), ls.ni), div(rv, 2)), 4), mul(mod(q, 2), 2)), mod(rv, 2))
                lanes = [4, 8, 16]
                warps_across = ls.wm
                warp_group = lambda w: div(w, ls.wm)  # noqa: E731
                warp_in_group = lambda w: mod(w, ls.wm)  # noqa: E731
                groups = ls.wn
        else:
            if ld.keep != 0:
                raise self.fail("a column reduction (dim=0) of a generic fragment is not supported yet; "
                                "reduce along dim=1 or transpose the tile", s.span)
            if "warp_shuffle" not in self.target.features and ls.tpr > 1:
                return self.reduce_rows_shared(s, ls, ld)
            count = ls.per_row
            def parent(q):  # noqa: E306
                return add(mul(rv, ls.per_row), q)
            lanes = [x for x in (1, 2, 4, 8, 16) if x < min(ls.tpr, 32)]
            warps_across = max(1, ls.tpr // 32)
            warp_group = lambda w: div(w, warps_across)  # noqa: E731
            warp_in_group = lambda w: mod(w, warps_across)  # noqa: E731
            groups = max(1, self.k.threads // 32 // warps_across)

        def body():
            v = self.lane_partial(s, acc_dt, src_sb, count, parent, lanes)
            if warps_across > 1:
                partials.append(v)
            else:
                self.store_reduced(s, dst_sb, rv, v, acc_dt)

        partials: list[T.Var] = []
        if warps_across == 1:
            self.emit(S.SFor(s.span, rv, c(0), c(ld.num_local), self.block(body), unroll=True))
            return
        # Across warps: each warp writes its partial per (row group, local), then all combine.
        nloc = ld.num_local
        scratch = self.get_scratch(groups * warps_across * nloc)
        warp = self.declare("warp", div(self.tid, 32))
        lane0 = _cmp("==", mod(self.tid, 32), c(0)) if ls.__class__ is BlockRow else None
        self.before_shared_access(False, True)

        def write_partial():
            body()
            v = partials[-1]
            slot = add(mul(add(mul(warp_group(warp), warps_across), warp_in_group(warp)), nloc), rv)
            # every lane of the warp holds the same value per row; lanes that own different rows of an
            # mma tile write different slots, so let each row's owners write (identical values)
            st = S.SStore(None, scratch, slot_for(slot), _cast(v, D.F32))
            self.emit(st if lane0 is None else S.SIf(None, lane0, [st]))

        def slot_for(slot):
            if isinstance(ls, MmaTiled):  # rows/cols inside the warp also differ by lane
                sub = div(mod(self.tid, 32), 4) if ld.keep == 0 else mod(mod(self.tid, 32), 4)
                per = 8 if ld.keep == 0 else 4
                return add(mul(slot, per), sub)
            return slot

        if isinstance(ls, MmaTiled):
            per = 8 if ld.keep == 0 else 4
            scratch = self.get_scratch(groups * warps_across * nloc * per)
        self.emit(S.SFor(s.span, rv, c(0), c(nloc), self.block(write_partial), unroll=True))
        self.barrier()
        rv2 = self.fresh("r")

        def combine():
            v = self.declare("total", self.reduce_init(kind, acc_dt), acc_dt)
            w = self.fresh("w")
            slot = add(mul(add(mul(warp_group(warp), warps_across), w), nloc), rv2)
            val = _cast(S.Ref(D.F32, None, scratch, slot_for(slot)), acc_dt)
            self.emit(S.SFor(None, w, c(0), c(warps_across), [S.SAssign(None, v, self.reduce_op(kind, v, val))],
                             unroll=True))
            self.store_reduced(s, dst_sb, rv2, v, acc_dt)

        self.emit(S.SFor(s.span, rv2, c(0), c(nloc), self.block(combine), unroll=True))
        self.smem_read = True
        self.barrier()

    def reduce_mfma(self, s: T.Reduce, ls, ld: Projected) -> None:
        """Row (dim=1) or column (dim=0) reduction of an MFMA 16x16 accumulator (MfmaTiled) into its projection.
        Within a 16x16 atom an index is held either by a lane's 4 registers e (then the reduced index runs over
        lane%16: shuffles xor 1, 2, 4, 8) or by lane%16 (then it runs over e and lane/16: shuffles xor 16, 32);
        atoms of the same row/column are combined in the lane first. Waves that share rows (columns) combine
        through shared scratch, one slot per lane."""
        from ..ir.layout import _mfma_in_lane

        kind, keep = s.kind, ld.keep
        acc_dt = D.F32 if s.src.buffer.dtype.is_float else s.src.buffer.dtype
        src_sb, dst_sb = self.sbuf(s.src.buffer), self.sbuf(s.dst.buffer)
        ni, wm = ls.ni, ls.wm
        in_lane = _mfma_in_lane(ls, keep)
        lanes = [1, 2, 4, 8] if in_lane else [16, 32]
        if keep == 0:  # rows: combine over the atom columns ni (and e when the row is held by lane%16)
            count = ni if in_lane else ni * 4
            def parent(rv, q):  # noqa: E306
                return add(mul(add(mul(div(rv, 4), ni), q), 4), mod(rv, 4)) if in_lane else add(mul(rv, ni * 4), q)
            across = ls.wn
            def peer(wave, w):  # noqa: E306
                return add(mod(wave, wm), mul(w, wm))
        else:  # columns: combine over the atom rows mi (and e)
            count = ls.mi if in_lane else ls.mi * 4
            def parent(rv, q):  # noqa: E306
                return add(mul(q, ni * 4), rv) if in_lane else add(mul(add(mul(div(q, 4), ni), rv), 4), mod(q, 4))
            across = wm
            def peer(wave, w):  # noqa: E306
                return add(mul(div(wave, wm), wm), w)

        def partial(rv) -> T.Var:
            return self.lane_partial(s, acc_dt, src_sb, count, lambda q: parent(rv, q), lanes)

        nloc = ld.num_local
        if across == 1:
            rv = self.fresh("r")
            self.emit(S.SFor(s.span, rv, c(0), c(nloc),
                             self.block(lambda: self.store_reduced(s, dst_sb, rv, partial(rv), acc_dt)), unroll=True))
            return
        waves = self.k.threads // 64
        scratch = self.get_scratch(waves * nloc * 64)
        wave = self.declare("wave", div(self.tid, 64))
        lane = mod(self.tid, 64)
        self.before_shared_access(False, True)
        rv = self.fresh("r")

        def write():
            v = partial(rv)
            self.emit(S.SStore(None, scratch, add(mul(add(mul(wave, nloc), rv), 64), lane), _cast(v, D.F32)))

        self.emit(S.SFor(s.span, rv, c(0), c(nloc), self.block(write), unroll=True))
        self.smem_dirty = True
        self.barrier()
        rv2 = self.fresh("r")

        def combine():
            v = self.declare("total", self.reduce_init(kind, acc_dt), acc_dt)
            w = self.fresh("w")
            val = _cast(S.Ref(D.F32, None, scratch, add(mul(add(mul(peer(wave, w), nloc), rv2), 64), lane)), acc_dt)
            self.emit(S.SFor(None, w, c(0), c(across), [S.SAssign(None, v, self.reduce_op(kind, v, val))],
                             unroll=True))
            self.store_reduced(s, dst_sb, rv2, v, acc_dt)

        self.emit(S.SFor(s.span, rv2, c(0), c(nloc), self.block(combine), unroll=True))
        self.smem_read = True
        self.barrier()

    def reduce_rows_shared(self, s: T.Reduce, ls: BlockRow, ld: Projected) -> None:
        """Row reduction of a block-row fragment on a target without warp shuffles (WebGPU): each thread
        writes its partial of every row it holds to shared scratch, then combines the `tpr` partials of its
        row in the same order as the row's other threads (so the replicated results agree bit for bit).
        Rows go in rounds of at most 2 KiB of scratch."""
        kind = s.kind
        acc_dt = D.F32 if s.src.buffer.dtype.is_float else s.src.buffer.dtype
        src_sb, dst_sb = self.sbuf(s.src.buffer), self.sbuf(s.dst.buffer)
        threads, tpr, nloc = self.k.threads, ls.tpr, ld.num_local
        batch = max(1, min(nloc, 512 // threads))
        if acc_dt.is_float:
            scratch = self.get_scratch(threads * batch)
        else:  # integers combine exactly, not through the f32 scratch
            scratch = getattr(self, "scratch_int", None)
            if scratch is None:
                scratch = S.SBuffer("reduce_scratch_int", D.I32, "shared", 0, origin="reduction scratch (int)")
                self.scratch_int = scratch
                self.shared.append(scratch)
            scratch.size = max(scratch.size or 0, threads * batch)
        row_base = self.declare("row_base", mul(div(self.tid, tpr), tpr))
        for first in range(0, nloc, batch):
            count = min(batch, nloc - first)
            self.before_shared_access(False, True)
            rv = self.fresh("r")

            def write(rv=rv, first=first):
                v = self.declare("part", self.reduce_init(kind, acc_dt), acc_dt)
                q = self.fresh("q")
                elem = _cast(S.Ref(s.src.buffer.dtype, None, src_sb, add(mul(add(rv, first), ls.per_row), q)),
                             acc_dt)
                if kind in ("abssum", "absmax"):
                    elem = T.Call(acc_dt, None, "abs", [elem])
                self.emit(S.SFor(None, q, c(0), c(ls.per_row), [S.SAssign(None, v, self.reduce_op(kind, v, elem))],
                                 unroll=True))
                self.emit(S.SStore(None, scratch, add(mul(rv, threads), self.tid), _cast(v, scratch.dtype)))

            self.emit(S.SFor(s.span, rv, c(0), c(count), self.block(write), unroll=True))
            self.smem_dirty = True
            self.barrier()
            rv2 = self.fresh("r")

            def combine(rv2=rv2, first=first):
                v = self.declare("total", self.reduce_init(kind, acc_dt), acc_dt)
                w = self.fresh("w")
                val = _cast(S.Ref(scratch.dtype, None, scratch, add(add(mul(rv2, threads), row_base), w)), acc_dt)
                self.emit(S.SFor(None, w, c(0), c(tpr), [S.SAssign(None, v, self.reduce_op(kind, v, val))],
                                 unroll=True))
                self.store_reduced(s, dst_sb, add(rv2, first), v, acc_dt)

            self.emit(S.SFor(s.span, rv2, c(0), c(count), self.block(combine), unroll=True))
            self.smem_read = True
        self.barrier()  # the scratch is reused by the next reduction, possibly in the next loop iteration

    def store_reduced(self, s: T.Reduce, dst_sb: S.SBuffer, idx: T.Expr, v: T.Expr, acc_dt: D.DType) -> None:
        if s.clear:
            value = v
        else:
            value = self.reduce_op(s.kind, _cast(S.Ref(dst_sb.dtype, None, dst_sb, idx), acc_dt), v)
        self.emit(S.SStore(s.span, dst_sb, idx, _cast(value, dst_sb.dtype)))

    def reduce_whole(self, s: T.Reduce, ls: BlockRow) -> None:
        raise self.fail("reducing a 1-D fragment to a scalar is not supported yet", s.span)

    def reduce_from_shared(self, s: T.Reduce) -> None:
        """Each thread reduces its own destination elements serially from shared memory."""
        src, dst = s.src, s.dst
        acc_dt = D.F32 if src.buffer.dtype.is_float else src.buffer.dtype
        sext = list(src.const_extents)
        red = sext[s.dim]
        keep_shape = [e for i, e in enumerate(sext) if i != s.dim]
        self.smem_read = True

        def element(out_idx: list[T.Expr]):
            v = self.declare("part", self.reduce_init(s.kind, acc_dt), acc_dt)
            q = self.fresh("q")
            full = list(out_idx)
            full.insert(s.dim, q)
            idx = [add(self.lx(st), x) for st, x in zip(src.starts, full, strict=True)]
            elem = _cast(self.ref(src.buffer, idx, s.span),
                         acc_dt)
            if s.kind in ("abssum", "absmax"):
                elem = T.Call(acc_dt, None, "abs", [elem])
            self.emit(S.SFor(None, q, c(0), c(red), [S.SAssign(None, v, self.reduce_op(s.kind, v, elem))]))
            return v

        if dst.buffer.scope == "fragment":
            layout = self.sched.fragment(dst.buffer)
            kv = self.fresh("r")

            def body():
                coords = layout.coords(self.tid, kv)
                out_idx = coords if len(keep_shape) == len(coords) else coords[-len(keep_shape):]
                v = element(out_idx)
                self.store_reduced(s, self.sbuf(dst.buffer), kv, v, acc_dt)

            self.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), self.block(body), unroll=True))
            return
        raise self.fail("reduce from shared memory into a non-fragment buffer is not supported", s.span)

    # ------------------------------------------------------------ atomics and print
    def atomic(self, s: T.Atomic) -> None:
        dst = s.dst
        name = f"atomic_{s.kind}"
        if isinstance(s.value, T.Region) and s.value.buffer.scope == "fragment":
            vb = s.value.buffer
            layout = self.sched.fragment(vb)
            if isinstance(layout, Projected):
                raise self.fail("atomic update from a replicated (reduced) fragment would apply it several times; "
                                "copy it to shared memory first", s.span)
            kv = self.fresh("r")

            def body():
                coords = layout.coords(self.tid, kv)
                tile = [x for x, e in zip(coords, layout.shape, strict=True) if e != 1] or [c(0)]
                idx = self.region_index(dst, tile)
                guard = _and(self.bounds(dst, idx), valid(layout, self.tid, kv))
                addr = self.addr(dst.buffer, idx, s.span)
                val = _cast(S.Ref(vb.dtype, None, self.sbuf(vb), kv), dst.buffer.dtype)
                st: S.SStmt = S.SCall(s.span, name, [addr, val])
                self.emit(st if guard is None else S.SIf(None, guard, [st]))

            self.emit(S.SFor(s.span, kv, c(0), c(layout.num_local), self.block(body), unroll=True))
            return
        if isinstance(s.value, T.Region):
            raise self.fail("atomic update from a shared or global region is not supported; use a fragment",
                            s.span)
        ext = dst.const_extents
        if any(e != 1 for e in ext):
            raise self.fail("atomic update of a region with a scalar; index one element", s.span)
        idx = [self.lx(x) for x in dst.starts]
        guard = _and(self.bounds(dst, idx), _cmp("==", self.tid, c(0)))
        addr = self.addr(dst.buffer, idx, s.span)
        self.emit(S.SIf(s.span, guard, [S.SCall(s.span, name, [addr, _cast(self.lx(s.value), dst.buffer.dtype)])]))

    def print(self, s: T.Print) -> None:
        if isinstance(s.value, T.Region):
            self.emit(S.SComment(s.span, f"print of buffer '{s.value.buffer.name}' runs in the interpreter only"))
            return
        v = self.lx(s.value)
        self.emit(S.SIf(s.span, _cmp("==", self.tid, c(0)), [S.SCall(s.span, f"print:{s.label}", [v])]))


def run(module: T.Module, rep: Reporter, target: Target) -> S.SModule:
    kernels = []
    for k in module.kernels:
        kernels.append(Lowerer(k, target, rep).run())
    return S.SModule(kernels)
