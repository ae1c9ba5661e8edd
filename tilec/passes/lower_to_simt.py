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
  * barriers are placed between shared-memory writes and reads by different threads;
  * per-thread code (a kernel reading the thread index, tilec/ir/threads.py) runs in every thread with
    threadIdx; under thread-dependent control flow no barrier is emitted (check-threads refused what would
    need one), and a store to shared memory that reads shared memory is made by every thread after a barrier
    when its element or value depends on the thread (by thread 0 when they are block-uniform). There, a
    store after stores to other shared buffers only needs no barrier, and a loop whose body stores at
    thread-dependent elements ends each iteration with one unless each of those buffers is indexed by the
    thread index itself in every store of the loop.
Errors: a statement the target cannot lower is reported and skipped, and lowering goes on, so the pass
fails once with every such statement of every kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses

from ..diagnostics import CompileError, Diagnostic, Reporter, Span
from ..ir import copy_mechanisms as mechanisms
from ..ir import dtypes as D
from ..ir import profile
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import binary, both, compare, to_i64
from ..ir.fold import as_int, fold
from ..ir.layout import Projected, SharedLayout, add, c, div, mod, mul, same_layout, valid
from ..ir.threads import analyze as thread_analysis
from ..ir.threads import uses_thread_index
from ..ir.visit import direct_exprs, sub_exprs, walk_stmts
from ..ops import copy as copy_op
from ..ops import registry as ops
from ..targets.registry import Target
from .lowering_extension import extension_for

NAME = "lower-to-simt"

class Lowerer:
    def __init__(self, k: T.Kernel, target: Target, rep: Reporter):
        self.k = k
        self.target = target
        self.rep = rep
        self.sched = k.schedule  # the planners' decisions (tilec/ir/schedule.py): final
        self.staged_layouts: dict[T.Buffer, SharedLayout] = {}  # shared buffers lowering makes (operand staging)
        self.tid = S.ThreadIdx(D.I32, None)
        self.buffers: dict[T.Buffer, S.SBuffer] = {}
        self.shared: list[S.SBuffer] = []
        self.subst: dict[T.Var, T.Expr] = {}
        self.stage_offset: dict[T.Buffer, T.Expr] = {}
        self.stage_count: dict[T.Buffer, int] = {}
        self.out: list[S.SStmt] = []
        self.frag_ctx: tuple[list[T.Var], object, T.Expr] | None = None  # (loop vars, layout, k)
        self.smem_written: set[T.Buffer] | None = set()  # written since the last barrier (None: unknown)
        self.smem_dirty = False  # shared memory written since the last barrier
        self.parallel_body = 0  # nesting of Parallel loop bodies being lowered
        self.varying = thread_analysis(k)  # values that differ between threads (per-thread code)
        self.per_thread_code = uses_thread_index(k)
        self.divergent = 0  # nesting of thread-dependent control flow being lowered (no barrier may go there)
        self.undriven_parallel: T.For | None = None  # a Parallel loop spread over the threads, no fragment driving it
        self.smem_read = False  # shared memory read since the last barrier
        self.generic_smem_writes = False  # shared memory written by threads since the last proxy fence
        self.names: set[str] = set()
        self.scratch: S.SBuffer | None = None
        self.hoisted: list[S.SStmt] = []  # per-thread constants, declared once at kernel entry
        self.hoisted_vars: dict[str, T.Var] = {}
        self.staged: list[T.Buffer] = []  # shared buffers staging register gemm operands (keeps their ids alive)
        self.gemm_stages: dict[tuple, T.Buffer] = {}  # (operand, dtype, shape) -> its staging buffer (gemm_impl.py)
        self.staged_fragments: dict[T.Buffer, S.SBuffer] = {}  # fragment -> its shared copy, in a Parallel loop
        for v in k.block_vars:
            self.subst[v] = S.BlockIdx(D.I32, None, k.block_vars.index(v))
        for kv in k.size_vars:
            self.names.add(kv.name)
        for p in k.params:
            self.names.add(p.name)
            if isinstance(p, T.Buffer):
                self.buffers[p] = S.SBuffer(p.name, p.dtype, "global", None, const=not p.is_output, origin=p.name)
        for st in walk_stmts(k.body):
            b = st.buffer if isinstance(st, T.Alloc) else None
            if b is not None and b.view_of is not None and b.scope == "global":
                # A view of a tensor: a pointer of its own type to the tensor's memory, declared at kernel entry
                # (every branch sees it, and a pipeline's prologue may copy from it before the loop body that
                # makes it); addressed row-major over its own shape like any tensor.
                root = self.buffers[b.storage]
                sb = S.SBuffer(b.name, b.dtype, "global", None, const=root.const, alias_of=root, origin=b.name)
                self.buffers[b] = sb
                self.names.add(b.name)
                self.hoisted.append(S.DeclareArray(st.span, sb))
        self.tma_staged: set[T.Buffer] = set()
        for plan in self.sched.loops.values():
            if plan.stages > 1:
                for pr in plan.producers:
                    self.stage_count[pr.dst.buffer] = plan.stages
                    if mechanisms.named(plan.mechanism).stages_aligned:  # each stage where a TMA box may land
                        self.tma_staged.add(pr.dst.buffer)
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
        if self.parallel_body or self.divergent:
            # Inside a Parallel loop each thread touches only its own iterations' elements (the
            # barriers around the loop order it against the rest); a barrier here would sit under
            # the thread-dependent guard of a loop with fewer iterations than threads. Under the user's
            # thread-dependent control flow check-threads refused what would need one.
            return
        self.emit(S.Barrier(None, self.ext.barrier_threads, self.ext.barrier_index))
        self.smem_dirty = False
        self.smem_read = False

    @property
    def smem_dirty(self) -> bool:
        return self._smem_dirty

    @smem_dirty.setter
    def smem_dirty(self, value: bool) -> None:  # (set directly: which buffers is not known)
        self._smem_dirty = value
        self.smem_written = None if value else set()

    def before_shared_access(self, reads: bool, writes: bool, written: set[T.Buffer] | None = None) -> None:
        # In per-thread code a write after writes of other shared buffers only (A_s[k] = ..., then B_s[tx, k] = ...)
        # needs no barrier: buffers never overlap.
        disjoint = self.per_thread_code and written is not None and self.smem_written is not None and \
            not (written & self.smem_written)
        if (reads and self.smem_dirty) or (writes and (self.smem_read or (self.smem_dirty and not disjoint))):
            self.barrier()

    def after_shared_access(self, reads: bool, writes: bool, written: set[T.Buffer] | None = None) -> None:
        self.smem_read |= reads
        if writes:
            known = self.smem_written if self._smem_dirty else set()
            self._smem_dirty = True
            self.smem_written = None if known is None or written is None else known | written

    # ------------------------------------------------------------ buffers and addresses
    def sbuf(self, b: T.Buffer) -> S.SBuffer:
        return self.buffers[b]

    def shared_layout(self, b: T.Buffer) -> SharedLayout:
        staged = self.staged_layouts.get(b)
        return staged if staged is not None else self.sched.shared_layout(b)

    def global_offset(self, b: T.Buffer, idx: list[T.Expr]) -> T.Expr:
        off: T.Expr = T.Const(D.I64, None, 0)
        for d, i in zip(b.shape, idx, strict=True):
            off = binary("+", binary("*", off, to_i64(self.lx(d))), to_i64(i))
        return off

    def shared_offset(self, b: T.Buffer, idx: list[T.Expr]) -> T.Expr:
        lay: SharedLayout = self.shared_layout(b)
        off = lay.offset(idx)
        st = self.stage_offset.get(b)
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

    def owned_local(self, b: T.Buffer, orig_idx: list[T.Expr], ctx) -> T.Expr | None:
        """The register holding fragment element b[orig_idx] in the Parallel context ctx (loop variables, the
        loop's layout, its local index), or None when the thread running the iteration does not hold it."""
        loop_vars, layout, k = ctx
        lay = self.sched.fragment(b)
        index_vars = [i if isinstance(i, T.Var) else None for i in orig_idx]
        if index_vars == loop_vars and same_layout(lay, layout):
            return k
        if len(index_vars) == 1 and isinstance(lay, Projected) and not isinstance(layout, Projected):
            # x[i] of a reduced fragment, or x[0] where the loop's dimension is 1 wide (`sum[0]` in a
            # Parallel(1, D) loop): the row this thread's iteration is on.
            dims = [loop_vars.index(index_vars[0])] if index_vars[0] in loop_vars else [
                d for d, e in enumerate(layout.shape) if e == 1] if as_int(orig_idx[0]) == 0 else []
            for d in dims:
                view = Projected(layout, d)
                if same_layout(view, lay):
                    return view.local_of_parent(k)
        return None

    def stage_foreign_fragments(self, s: T.For, ctx) -> None:
        """Fragments this Parallel loop reads at elements other threads hold (`f[i, j // 2]`, or any fragment
        read by a loop that no fragment drives) and does not write: every thread stores its elements to a
        shared copy first, and the loop reads the copy (frag_local), after a barrier."""
        written = {st.buffer for st in walk_stmts(s.body) if isinstance(st, T.Store)}
        foreign: dict[T.Buffer, T.Buffer] = {}
        for st in walk_stmts(s.body):
            for e in direct_exprs(st):
                for x in sub_exprs(e):
                    if not (isinstance(x, T.Load) and x.buffer.scope == "fragment") or x.buffer in written \
                            or x.buffer in foreign or not all(as_int(d) for d in x.buffer.shape):
                        continue
                    if ctx is None or self.owned_local(x.buffer, x.indices, ctx) is None:
                        foreign[x.buffer] = x.buffer
        if not foreign:
            return
        self.before_shared_access(False, True)
        for b in foreign.values():
            lay = self.sched.fragment(b)
            elements = 1
            for d in b.const_shape:
                elements *= d
            copy_sb = S.SBuffer(self.fresh(f"{b.name}_shared").name, b.dtype, "shared", elements,
                                origin=f"shared copy of fragment '{b.name}'")
            self.shared.append(copy_sb)
            kv = self.fresh("r")

            def store(lay=lay, b=b, copy_sb=copy_sb, kv=kv):
                st = S.SStore(None, copy_sb, fold(self.local_offset(b, lay.coords(self.tid, kv))),
                              S.Ref(b.dtype, None, self.sbuf(b), kv))
                ok = valid(lay, self.tid, kv)
                self.emit(st if ok is None else S.SIf(None, ok, [st]))

            self.emit(S.SFor(s.span, kv, c(0), c(lay.num_local), self.block(store), unroll=True))
            self.staged_fragments[b] = copy_sb
        self.after_shared_access(False, True)
        self.before_shared_access(True, False)

    def frag_local(self, b: T.Buffer, orig_idx: list[T.Expr], span) -> T.Expr:
        """The register holding fragment element b[orig_idx] in the current Parallel context."""
        if self.frag_ctx is None and self.undriven_parallel is not None:
            shape = ", ".join(str(as_int(e)) for e in self.undriven_parallel.extents)
            raise self.fail(f"fragment '{b.name}' is written and read in a Parallel loop that writes no fragment at "
                            f"the loop's variables (shape {shape}): {self.target.name} places a Parallel loop's "
                            "iterations on the threads that own such a fragment. Write a fragment of the loop's shape "
                            f"at the loop variables here, or keep '{b.name}' in shared memory", span)
        if self.frag_ctx is None:
            raise self.fail(f"fragment '{b.name}' is indexed outside a Parallel loop, but its elements are spread "
                            "over the threads; index it inside a Parallel loop, or use alloc_local (a per-thread "
                            "array) or alloc_var (a scalar) for values every thread keeps", span)
        local = self.owned_local(b, orig_idx, self.frag_ctx)
        if local is None:
            raise self.fail(f"fragment '{b.name}' (layout {self.sched.fragment(b)}) is accessed at an index that "
                            f"this Parallel loop (layout {self.frag_ctx[1]}) does not own, and the loop writes it; "
                            "write fragments at the loop variables, and read other elements from a fragment the "
                            "loop does not write", span)
        return local

    # ------------------------------------------------------------ expressions
    def lx(self, e: T.Expr) -> T.Expr:
        if isinstance(e, T.Const | S.ThreadIdx | S.BlockIdx):
            return e
        if isinstance(e, T.Var) and e.kind == "thread":
            return self.tid
        if isinstance(e, T.Var):
            return self.subst.get(e, e)
        if isinstance(e, T.Load):
            b = e.buffer
            if b.scope == "fragment":
                staged = self.staged_fragments.get(b)
                own = self.owned_local(b, e.indices, self.frag_ctx) if staged and self.frag_ctx else None
                if staged is not None and own is None:
                    self.smem_read = True
                    return S.Ref(e.dtype, e.span, staged, fold(self.local_offset(b, [self.lx(i) for i in e.indices])))
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
        used = _buffers_used(body)  # a view's pointer that nothing reads (its copies went through TMA) is dropped
        body = [h for h in self.hoisted if not (isinstance(h, S.DeclareArray) and h.buffer.scope == "global"
                                                and h.buffer not in used)] + body
        params: list[S.SBuffer | T.Var] = [self.buffers[p] if isinstance(p, T.Buffer) else p for p in k.params]
        grid = self.ext.launch_grid([self.lx(g) for g in k.grid])
        sk = S.SKernel(k.name, params, list(k.size_vars), grid, threads, self.shared, 0, body, k.span,
                        threads_span=k.threads_span)
        sk.attrs.update(self.ext.kernel_attrs())
        sk.attrs["disabled"] = k.disabled  # the SIMT passes' switches too
        return sk

    def stmts(self, body: list[T.Stmt]) -> None:
        for s in body:
            self.stmt(s)

    def uses_shared(self, s: T.Stmt) -> tuple[bool, bool]:
        """(reads shared memory, writes shared memory) anywhere in s."""
        reads = writes = False
        for st in walk_stmts([s]):
            reads |= any(r.buffer.scope == "shared" for r in ops.reads(st))
            writes |= any(r.buffer.scope == "shared" for r in ops.writes(st))
            writes |= isinstance(st, T.Store) and st.buffer.scope == "shared"
            for e in direct_exprs(st):
                reads |= any(isinstance(x, T.Load) and x.buffer.scope == "shared" for x in sub_exprs(e))
        return reads, writes

    def shared_written(self, s: T.Stmt) -> set[T.Buffer]:
        """The shared buffers s writes (element stores and tile-op destinations, nested statements included)."""
        out: set[T.Buffer] = set()
        for st in walk_stmts([s]):
            out |= {r.buffer for r in ops.writes(st) if r.buffer.scope == "shared"}
            if isinstance(st, T.Store) and st.buffer.scope == "shared":
                out.add(st.buffer)
        return out

    def per_thread_shared_writes(self, loop: T.Stmt) -> bool:
        """Whether the body of `loop` stores to shared memory at a thread-dependent element or under thread-dependent
        control flow (outside Parallel loops): then the next iteration's store by one thread may hit what another
        thread stored in this one, and only a barrier orders them. Every thread storing the same value to the same
        element needs none, nor does a buffer each of whose stores in the loop has the thread index itself as the
        same index (`B_s[tx, k]`): each thread then writes elements no other thread writes."""
        v = self.varying
        stores: dict[T.Buffer, list[T.Store]] = {}
        per_thread: set[T.Buffer] = set()
        spread: set[T.Buffer] = set()  # shared buffers that tile ops or Parallel loops of the body write

        def scan(body: list[T.Stmt], divergent: bool) -> None:
            for st in body:
                if isinstance(st, T.Store) and st.buffer.scope == "shared":
                    stores.setdefault(st.buffer, []).append(st)
                    if divergent or any(v.expr(i) for i in st.indices) or v.expr(st.value):
                        per_thread.add(st.buffer)
                if (isinstance(st, T.For) and st.kind == "parallel") or ops.op_module(st) is not None:
                    spread.update(self.shared_written(st))
                    continue
                d = divergent or v.divergent(st) is not None
                if isinstance(st, T.If):
                    scan(st.then_body, d)
                    scan(st.else_body, d)
                elif isinstance(st, T.For | T.While):
                    scan(st.body, d)

        def private(b: T.Buffer) -> bool:
            group = stores[b]
            dims = set(range(len(group[0].indices)))
            for st in group:
                dims &= {d for d, i in enumerate(st.indices) if v.is_thread(i)}
            return bool(dims) and b not in spread

        scan(loop.body, False)
        return any(not private(b) for b in per_thread)

    def stmt(self, s: T.Stmt) -> None:
        """Lower one statement. A statement the target cannot lower is reported and skipped, so that one
        compilation reports every such statement of the kernel (the module is not printed after an error)."""
        try:
            self.lower_stmt(s)
        except CompileError as e:
            for d in e.diagnostics:
                if not any(d.message == x.message and d.span == x.span for x in self.rep.diagnostics):
                    self.rep.diagnostics.append(d)

    def lower_stmt(self, s: T.Stmt) -> None:
        if isinstance(s, T.For) and s.kind != "parallel":
            return self.serial_loop(s)
        if isinstance(s, T.While):
            return self.while_loop(s)
        reads, writes = self.uses_shared(s)
        written = self.shared_written(s) if writes else None
        self.ext.before_stmt(s)
        self.before_shared_access(reads, writes, written)
        phase = self.profile_phase(s)
        if phase is None:
            self.lower(s)
        else:
            self.emit(profile.mark(phase, False))
            self.lower(s)
            self.emit(profile.mark(phase, True))
        self.after_shared_access(reads, writes, written)
        if writes:
            self.generic_smem_writes = True

    def profile_phase(self, s: T.Stmt) -> str | None:
        """In a fully profiled build (tilec/ir/profile.py), the phase a statement is timed as: tile ops and Parallel
        loops at the block's level, never an element's statements inside a Parallel loop."""
        if self.k.profile != "full" or self.parallel_body or self.divergent or self.frag_ctx is not None:
            return None  # (nor per-thread atomics under a thread-dependent condition: only some threads run them)
        return profile.tile_phase(s)

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
            if b.scope == "shared" and not self.parallel_body and any(
                    isinstance(x, S.Ref) and x.buffer.scope == "shared" for e in (value, idx) for x in sub_exprs(e)):
                # An update of shared memory from shared memory (`count[0] = count[0] + 1`): every thread reads,
                # then after a barrier (else a warp could read the new value) one thread writes a block-uniform
                # update, every thread its own (`s[tx] = s[tx + 1]`). Under thread-dependent control flow the
                # threads that run it read, then write.
                if self.divergent:
                    return self.emit(S.SStore(s.span, self.sbuf(b), idx, value))
                value = self.declare("shared_value", value)
                idx = self.declare("shared_index", idx)
                self.barrier()
                store = S.SStore(s.span, self.sbuf(b), idx, value)
                if self.varying.expr(s.value) or any(self.varying.expr(i) for i in s.indices):
                    return self.emit(store)
                return self.emit(S.SIf(s.span, compare("==", self.tid, c(0)), [store]))
            return self.emit(S.SStore(s.span, self.sbuf(b), idx, value))
        if isinstance(s, T.Assign):
            instead = self.ext.assign_value(s)
            value = self.lx(s.value if instead is None else instead)
            if s.var in self.subst:
                return self.emit(S.SAssign(s.span, self.subst[s.var], value))
            v = self.fresh(s.var.name, s.var.dtype)
            self.subst[s.var] = v
            return self.emit(S.Declare(s.span, v, value))
        if isinstance(s, T.If):
            cond = self.lx(s.cond)
            with self.diverging(s):
                then_body = self.block(lambda: self.stmts(s.then_body))
                else_body = self.block(lambda: self.stmts(s.else_body))
            return self.emit(S.SIf(s.span, cond, then_body, else_body))
        if isinstance(s, T.For):
            return self.parallel(s)
        op = ops.op_module(s)
        if op is not None:  # a tile op: its home lowers it (tilec/ops/<op>.py)
            return op.lower(self, s)
        if isinstance(s, T.AnnotateLayout | T.UseSwizzle):
            return
        if isinstance(s, T.NamedBarrier):  # the user's bar.sync id, threads (check-threads let it order their accesses)
            return self.named_barrier(s)
        if isinstance(s, T.FenceGlobal):
            return self.fence_global(s)
        raise self.fail(f"cannot lower {type(s).__name__}", s.span)

    def named_barrier(self, s: T.NamedBarrier) -> None:
        """`T.sync_threads(id, count)`: bar.sync id, count where the target has named barriers; a barrier of the
        whole block (count = the block's threads) is the block barrier everywhere."""
        if s.threads == self.k.threads and not self.divergent and self.ext.barrier_threads is None:
            self.emit(S.Barrier(s.span))
            self.smem_dirty = False
            self.smem_read = False
            return
        call = f"T.sync_threads({s.barrier_id}, {s.threads})"
        instead = (f"make every thread of the block reach a T.sync_threads() instead: move the thread condition "
                   f"that selects the {s.threads} threads from around the barriers onto the statements between "
                   "them (tilec then places the block's barriers itself)")
        if "named_barriers" not in self.target.features and "lds_named_barriers" in self.target.features:
            # no hardware named barriers (AMD): a software one in LDS, two words per id (arrivals, generation),
            # zeroed at kernel entry (the target's device header spins on them: tilec_hip_named_barrier.h)
            self.lds_named_barrier_words()
            self.emit(S.Barrier(s.span, s.threads, c(s.barrier_id)))
            return
        if "named_barriers" not in self.target.features:
            why = self.target.why_missing("named_barriers")
            raise self.fail(f"{call} is a named barrier among {s.threads} of the block's {self.k.threads} threads "
                            f"(CUDA's bar.sync {s.barrier_id}, {s.threads}), but {why}; {instead}", s.span)
        if self.ext.barrier_threads is not None:
            raise self.fail(f"{call}: on {self.target.name} tilec warp-specializes this kernel, and its own producer "
                            "and consumer warpgroups synchronise through named barriers 1 to 9, so the kernel's "
                            "barriers could meet them; build it with T.Kernel(..., warp_specialize=False), or "
                            f"{instead}", s.span)
        self.emit(S.Barrier(s.span, s.threads, c(s.barrier_id)))

    def fence_global(self, s: T.FenceGlobal) -> None:
        """A device-scope fence between two block barriers. After the first barrier the fence is cumulative over
        every write of the block, so an atomic after it tells other blocks that they are visible; a thread's atomic
        before it is ordered before every thread's accesses after the second barrier (the acquire side)."""
        if self.divergent or self.parallel_body:
            raise self.fail("fence_global() is block-wide (a barrier follows the fence): every thread of the block "
                            "must reach it, so it cannot run under a thread-dependent condition", s.span)
        if "device_fence" not in self.target.features:
            raise self.fail(f"fence_global() orders global memory between the blocks of a launch, but "
                            f"{self.target.why_missing('device_fence')}", s.span)
        self.barrier()
        self.emit(S.call(s.span, "fence_device", []))
        self.emit(S.Barrier(None, self.ext.barrier_threads, self.ext.barrier_index))
        self.smem_dirty = False
        self.smem_read = False

    NAMED_BARRIER_WORDS = "tl_named_barrier"

    def lds_named_barrier_words(self) -> S.SBuffer:
        """The LDS words of the software named barriers (2 per barrier id 0..15: arrivals, generation), made on the
        first named barrier with their zeroing at kernel entry, which the block barrier after it publishes."""
        for b in self.shared:
            if b.name == self.NAMED_BARRIER_WORDS:
                return b
        words = S.SBuffer(self.NAMED_BARRIER_WORDS, D.U32, "shared", 32, align=16,
                          origin="the software named barriers' arrival and generation words")
        self.shared.append(words)
        zero = S.SStore(None, words, self.tid, T.Const(D.U32, None, 0))
        self.hoisted += [S.SIf(None, compare("<", self.tid, c(32)), [zero]), S.Barrier(None)]
        return words

    @contextlib.contextmanager
    def diverging(self, s: T.Stmt):
        """Lower the body of s, under thread-dependent control flow if its condition or bounds vary."""
        d = 1 if self.varying.divergent(s) is not None and not self.parallel_body else 0
        self.divergent += d
        try:
            yield
        finally:
            self.divergent -= d

    def alloc(self, s: T.Alloc) -> None:
        b = s.buffer
        self.names.add(b.name)
        if b.view_of is not None and b in self.buffers:
            return  # a view of a tensor (made at kernel entry), or one lowered again (a pipeline's stages)
        if b.view_of is not None:  # a view of a shared buffer: its bytes (layout-inference kept both row-major)
            root = b.storage
            if self.stage_count.get(root, 1) > 1 or self.stage_count.get(b, 1) > 1:
                self.rep.error(f"view '{b.name}' of shared buffer '{root.name}': a Pipelined loop keeps several "
                               "stages of it, and a view sees one; copy into the buffer outside the pipelined loop, "
                               "or index it with the view's arithmetic", s.span)  # (lowering goes on: one report)
            sb = S.SBuffer(b.name, b.dtype, "shared", self.shared_layout(b).size, origin=b.name,
                           alias_of=self.buffers[root], span=s.span)
            self.shared.append(sb)
            self.buffers[b] = sb
            return
        if b.scope == "shared":
            stages = self.stage_count.get(b, 1)
            lay: SharedLayout = self.shared_layout(b)
            # a TMA/wgmma swizzle pattern repeats every 1024 bytes from an aligned base
            per_stage = lay.stage_size if b in self.tma_staged else lay.size
            sb = S.SBuffer(b.name, b.dtype, "shared", per_stage * stages, origin=b.name,
                           align=1024 if lay.panel and lay.swizzle else 128, span=s.span)
            self.shared.append(sb)
            self.buffers[b] = sb
            return
        if b.scope == "fragment":
            size = self.sched.fragment(b).num_local
        else:
            size = 1
            for d in b.const_shape:
                size *= d
        sb = S.SBuffer(b.name, b.dtype, "local", size, origin=b.name)
        self.buffers[b] = sb
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
        self.subst[var] = v

        def body():
            self.stmts(s.body)
            # the next iteration may overwrite shared memory this one read (or read what it wrote), or another
            # thread may overwrite what a thread wrote at its own index
            if self.smem_read or self.smem_dirty:
                r, w = self.uses_shared(s)
                if (r and w) or (w and self.per_thread_shared_writes(s)):
                    self.barrier()

        # Barrier state at the loop head must hold for every iteration: enter with a clean slate.
        self.ext.before_loop(s)
        r, w = self.uses_shared(s)
        if (r and self.smem_dirty) or (w and (self.smem_read or self.smem_dirty)):
            self.barrier()
        with self.diverging(s):
            stmts = self.block(body)
        self.emit(S.SFor(s.span, v, begin, extent, stmts, unroll=s.kind == "unroll", step=step))

    def while_loop(self, s: T.While) -> None:
        """`while cond: body`, with the barrier rules of a serial loop: the state at the loop head holds for
        every evaluation of the condition (which may read shared memory the body writes)."""
        def body():
            self.stmts(s.body)
            if self.smem_read or self.smem_dirty:
                r, w = self.uses_shared(s)
                if (r and w) or (w and self.per_thread_shared_writes(s)):
                    self.barrier()

        r, w = self.uses_shared(s)
        if (r and self.smem_dirty) or (w and (self.smem_read or self.smem_dirty)):
            self.barrier()
        cond = self.lx(s.cond)
        with self.diverging(s):
            stmts = self.block(body)
        self.emit(S.SWhile(s.span, cond, stmts))

    def pipelined(self, s: T.For, plan) -> None:
        if mechanisms.named(plan.mechanism).register_staged:
            return self.pipelined_registers(s, plan)
        var = s.vars[0]
        n = self.declare(f"{var.name}_count", self.lx(s.extents[0]))
        stages = plan.stages
        producers = plan.producers
        sizes = {p.dst.buffer: self.shared_layout(p.dst.buffer).size for p in producers}

        realign = self.ext.realign_pipeline_copies(s)

        def issue(iteration: T.Expr):
            self.subst[var] = iteration
            for p in producers:
                self.stage_offset[p.dst.buffer] = mul(mod(iteration, stages), sizes[p.dst.buffer])
                copy_op.lower(self, p, asynchronous=True, realign=realign)
            for p in producers:
                self.stage_offset.pop(p.dst.buffer, None)

        self.ext.before_loop(s)
        self.before_shared_access(False, True)
        self.emit(S.SComment(None, f"pipeline over {var.name}: {stages} stages, cp.async"))
        pro = self.fresh(f"{var.name}_pre")
        prologue = self.block(lambda: self.emit(S.SIf(None, compare("<", pro, n), self.block(lambda: issue(pro)))))
        prologue.append(S.SCall(None, "cp_async_commit", []))
        self.emit(S.SFor(None, pro, c(0), c(stages - 1), prologue, unroll=True))

        it = self.fresh(var.name)

        def steady():
            self.emit(S.SCall(None, "cp_async_wait", [c(stages - 2)]))
            self.ext.after_async_copies_landed(s)
            self.emit(S.Barrier(None))
            self.smem_dirty = self.smem_read = False
            ahead = self.declare(f"{var.name}_next", add(it, stages - 1))
            nxt = self.block(lambda: self.emit(S.SIf(None, compare("<", ahead, n), self.block(lambda: issue(ahead)))))
            nxt.append(S.SCall(None, "cp_async_commit", []))
            if not self.ext.place_next_stage_copies(s, nxt):
                self.out.extend(nxt)
            self.subst[var] = it
            for p in producers:
                self.stage_offset[p.dst.buffer] = mul(mod(it, stages), sizes[p.dst.buffer])
            for st in s.body:
                if st not in producers:
                    self.stmt(st)
            for p in producers:
                self.stage_offset.pop(p.dst.buffer, None)

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
        sizes = {p.dst.buffer: self.shared_layout(p.dst.buffer).size for p in producers}

        def sext(p: T.Copy) -> list[int]:
            return [e for e in p.src.const_extents if e != 1] or [1]

        n = self.declare(f"{var.name}_count", self.lx(s.extents[0]))
        self.before_shared_access(False, True)
        self.emit(S.SComment(None, f"pipeline over {var.name}: 2 shared buffers, next tiles staged in registers"))
        stagers = [(p, copy_op.staged_copy(self, p, sext(p), tag="next")) for p in producers]
        if any(st is None for _, st in stagers):  # the mechanism's register_stageable promised otherwise
            raise self.fail("internal error: a register-staged pipeline's copy cannot go through registers", s.span)

        def at(iteration: T.Expr, phase: int):
            self.subst[var] = iteration
            for p, st in stagers:
                self.stage_offset[p.dst.buffer] = mul(mod(iteration, 2), sizes[p.dst.buffer])
                st[phase]()
            for p in producers:
                self.stage_offset.pop(p.dst.buffer, None)

        zero = c(0)
        self.emit(S.SIf(None, compare("<", zero, n), self.block(lambda: (at(zero, 0), at(zero, 1)))))
        self.barrier()
        it = self.fresh(var.name)

        def body():
            nxt = self.declare(f"{var.name}_next", add(it, 1))
            self.emit(S.SIf(None, compare("<", nxt, n), self.block(lambda: at(nxt, 0))))
            self.subst[var] = it
            for p in producers:
                self.stage_offset[p.dst.buffer] = mul(mod(it, 2), sizes[p.dst.buffer])
            for st in s.body:
                if st not in producers:
                    self.stmt(st)
            for p in producers:
                self.stage_offset.pop(p.dst.buffer, None)
            self.emit(S.SIf(None, compare("<", nxt, n), self.block(lambda: at(nxt, 1))))
            self.emit(S.Barrier(None))
            self.smem_dirty = self.smem_read = False

        self.emit(S.SFor(s.span, it, c(0), n, self.block(body)))

    def parallel(self, s: T.For) -> None:
        driver = self.loop_driver(s)
        outer = self.staged_fragments
        if not self.parallel_body:
            ctx = (list(s.vars), self.sched.fragment(driver), c(0)) if driver is not None else None
            self.staged_fragments = {}
            self.stage_foreign_fragments(s, ctx)
        self.parallel_body += 1
        try:
            self.parallel_loop(s, driver)
        finally:
            self.parallel_body -= 1
            staged, self.staged_fragments = self.staged_fragments, outer
        if staged and not self.parallel_body:
            self.barrier()  # the copies are written again if the loop runs again (in a serial loop)

    def loop_driver(self, s: T.For) -> T.Buffer | None:
        """The fragment whose layout places this Parallel loop's iterations on the threads: the first one stored
        (else read) at exactly the loop variables."""
        loop_vars = list(s.vars)
        driver = None
        for st in walk_stmts(s.body):
            exprs: list[T.Expr] = []
            if isinstance(st, T.Store):
                if st.buffer.scope == "fragment" and [i if isinstance(i, T.Var) else None
                                                      for i in st.indices] == loop_vars:
                    driver = st.buffer
                    break
                exprs = [st.value]
            elif isinstance(st, T.Assign):
                exprs = [st.value]
            elif isinstance(st, T.If):
                exprs = [st.cond]
            elif isinstance(st, T.Atomic) and st.per_element:
                exprs = [st.value, *st.dst.starts]
            for e in exprs:
                for x in sub_exprs(e):
                    if isinstance(x, T.Load) and x.buffer.scope == "fragment" and \
                            [i if isinstance(i, T.Var) else None for i in x.indices] == loop_vars:
                        driver = driver or x.buffer
            if driver is not None:
                break
        return driver

    def parallel_loop(self, s: T.For, driver: T.Buffer | None) -> None:
        loop_vars = list(s.vars)
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
                    self.subst[v] = self.declare(v.name, idx)
                saved = self.frag_ctx
                self.frag_ctx = (loop_vars, layout, kv)
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
                self.subst[v] = self.declare(v.name, val)
            self.stmts(s.body)

        self.undriven_parallel = s  # (a fragment read here has no thread that owns it: frag_local says so)
        try:
            self.spread(extents, "it", point, s.span)
        finally:
            self.undriven_parallel = None

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
                self.emit(S.SIf(None, compare("<", flat, c(total)), self.block(lambda: emit_point(tile))))

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
            cond = both(cond, compare("<", i, dim))
        return cond

    def contiguous_inner(self, r: T.Region) -> bool:
        """The tile's innermost extent runs along the buffer's innermost dimension."""
        return r.const_extents[-1] != 1 or all(e == 1 for e in r.const_extents)

    # ------------------------------------------------------------ gemm
    # ------------------------------------------------------------ atomics and print

def _buffers_used(body: list[S.SStmt]) -> set[S.SBuffer]:
    """The ids of the SBuffers the statements read, write or take the address of."""
    out: set[S.SBuffer] = set()
    for s in body:
        if isinstance(s, S.SStore):
            out.add(s.buffer)
        for f in dataclasses.fields(s):
            v = getattr(s, f.name)
            for e in (v if isinstance(v, list) else [v]):
                if isinstance(e, T.Expr):
                    out.update(x.buffer for x in sub_exprs(e) if isinstance(x, S.Ref | S.AddrOf))
                elif isinstance(e, S.SStmt):
                    out |= _buffers_used([e])
    return out


def run(module: T.Module, rep: Reporter, target: Target) -> S.SModule:
    kernels = []
    for k in module.kernels:
        try:
            sk = Lowerer(k, target, rep).run()
        except CompileError as e:
            rep.diagnostics.extend(d for d in e.diagnostics if d not in rep.diagnostics)
            continue
        if k.profile:
            profile.instrument(sk, k.profile)
        kernels.append(sk)
    rep.check()  # every statement of every kernel that could not be lowered, at once
    return S.SModule(kernels)
