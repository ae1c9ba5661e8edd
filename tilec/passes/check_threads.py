"""check-threads — per-thread code: what the thread index may and may not reach.

Assumes: check-tile-ops has run.
Guarantees, for every kernel that reads the thread index (`get_thread_binding`, `thread_binding`; tilec/ir/threads.py
says which values then differ between threads):
  * no Parallel loop, no Pipelined loop and no tile operation runs under thread-dependent control flow (an `if`
    or `while` whose condition, or a serial loop whose bounds, depend on the thread index): those are spread over
    all the threads of the block and need every thread to reach their barriers;
  * no tile operation takes a thread-dependent region start or scalar, nor reads a per-thread buffer holding a
    thread-dependent value (a scalar `print` may print one: the value of its `thread=`);
  * no thread-dependent value is read inside a Parallel loop (the compiler chooses which thread runs an
    iteration), and no fragment is indexed at a thread-dependent index;
  * under thread-dependent control flow no statement reads shared memory that an earlier one there writes, nor
    writes shared memory that an earlier one there reads, unless a named barrier of the user's
    (`T.sync_threads(id, count)`) stands between them (else that needs a barrier, which only some threads would
    reach); a statement outside such control flow that stores a thread-dependent value stores it at a
    thread-dependent element (every thread writing the same element would be a race);
  * a scalar atomic whose element or value depends on the thread index, or that runs under thread-dependent
    control flow, is marked `per_element`: each thread that runs it applies its own update (else one thread of
    the block applies the block's).
Errors point at the user's statement and say what to write instead.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic, Reporter
from ..ir import tile as T
from ..ir.fold import as_int, constant_difference
from ..ir.printer import expr_str
from ..ir.threads import Varying, analyze, stmt_exprs, uses_thread_index
from ..ir.visit import sub_exprs, walk_stmts
from ..ops import registry as ops

NAME = "check-threads"


def run(module: T.Module, rep: Reporter) -> T.Module:
    for k in module.kernels:
        if uses_thread_index(k):
            _Checker(analyze(k), rep).body(k.body, None, False)
    rep.check()
    return module


def _line(s: T.Stmt) -> str:
    return f"line {s.span.line}" if s.span is not None else "an enclosing statement"


def _storage(b: T.Buffer) -> T.Buffer:
    """The buffer that holds a buffer's memory (a view shares its base's)."""
    while b.view_of is not None:
        b = b.view_of
    return b


Access = tuple[T.Buffer, "list[T.Expr] | None"]  # a shared buffer's storage, and the element's indices (None: unknown)


def _shared_access(s: T.Stmt) -> tuple[list[Access], list[Access]]:
    """(the shared elements the scalar statement s itself reads, those it writes), by storage."""
    def at(b: T.Buffer, indices: list[T.Expr] | None) -> Access:
        return (_storage(b), indices if b.view_of is None else None)

    reads = [at(x.buffer, x.indices) for e in stmt_exprs(s) for x in sub_exprs(e)
             if isinstance(x, T.Load) and x.buffer.scope == "shared"]
    writes = []
    if isinstance(s, T.Store) and s.buffer.scope == "shared":
        writes.append(at(s.buffer, s.indices))
    if isinstance(s, T.Atomic) and s.dst.buffer.scope == "shared":
        writes.append(at(s.dst.buffer, None))
    return reads, writes


def _fixed(e: T.Expr, v: Varying, inner: set) -> bool:
    """e is the same in every thread and at every point of the divergent region (no thread-dependent value, no
    variable or buffer that the region's statements change)."""
    return not v.expr(e) and not any(x in inner or (isinstance(x, T.Load) and x.buffer in inner)
                                     for x in sub_exprs(e))


def _changed_inside(top: T.Stmt) -> set:
    """The loop variables, assigned variables and written buffers of the statements under `top`."""
    out: set = set()
    for s in walk_stmts([top]):
        if isinstance(s, T.For):
            out.update(s.vars)
        elif isinstance(s, T.Assign):
            out.add(s.var)
        elif isinstance(s, T.Store):
            out.add(s.buffer)
        elif isinstance(s, T.Atomic):
            out.add(s.dst.buffer)
    return out


def _differs(a: T.Expr, b: T.Expr) -> bool:
    """a != b for every value of the variables: a constant nonzero difference, or one is the other ^ a nonzero
    constant (the halves of a ping-pong buffer, `buf[r]` and `buf[r ^ 1]`)."""
    d = constant_difference(a, b)
    if d is not None:
        return d != 0
    for x, y in ((a, b), (b, a)):
        if isinstance(x, T.Binary) and x.op == "^":
            for k, other in ((x.a, x.b), (x.b, x.a)):
                if as_int(k) not in (None, 0) and expr_str(other) == expr_str(y):
                    return True
    return False


def _disjoint(x: Access, y: Access, fixed) -> bool:
    """The two accesses of one buffer never touch the same element, whichever threads make them: at some dimension
    both indices are `fixed` (the same in every thread, all through the region) and differ."""
    if x[1] is None or y[1] is None or len(x[1]) != len(y[1]):
        return False
    return any(fixed(i) and fixed(j) and _differs(i, j) for i, j in zip(x[1], y[1], strict=True))


class _Checker:
    def __init__(self, v: Varying, rep: Reporter):
        self.v = v
        self.rep = rep

    def error(self, msg: str, span, note: tuple[str, object] | None = None) -> None:
        d = Diagnostic("error", msg, span)
        if note is not None:
            d.notes.append(Diagnostic("note", note[0], note[1]))
        if not any(x.message == d.message and x.span == d.span for x in self.rep.diagnostics):
            self.rep.diagnostics.append(d)

    def body(self, body: list[T.Stmt], divergent: T.Stmt | None, in_parallel: bool) -> None:
        for s in body:
            self.stmt(s, divergent, in_parallel)

    def stmt(self, s: T.Stmt, divergent: T.Stmt | None, in_parallel: bool) -> None:
        v = self.v
        under = ("under the thread-dependent condition at " + _line(divergent)) if divergent is not None else ""
        if in_parallel:
            for e in stmt_exprs(s):
                if v.expr(e):
                    return self.error(f"this statement uses {v.cause(e)}, which differs between threads, but inside "
                                      "a Parallel loop the compiler chooses which thread runs each iteration: compute "
                                      "the value from the loop variables, or write this work as per-thread code "
                                      "outside the Parallel loop", s.span)
        if isinstance(s, T.For) and s.kind == "parallel":
            if divergent is not None:
                return self.error(f"a Parallel loop is spread over all the threads of the block, so it cannot run "
                                  f"{under}: end the `if` (or loop) before it, and guard the elements inside the "
                                  "Parallel loop instead", s.span, ("the condition", divergent.span))
            return self.body(s.body, None, True)
        if not in_parallel:
            for e in stmt_exprs(s):
                for x in sub_exprs(e):
                    if isinstance(x, T.Load) and x.buffer.scope == "fragment" and any(v.expr(i) for i in x.indices):
                        return self.error(f"fragment '{x.buffer.name}' is spread over the threads by the compiler, so "
                                          "it cannot be indexed by the thread: read it in a Parallel loop, or keep "
                                          "per-thread values in alloc_local", x.span or s.span)
        op = ops.op_module(s)
        if op is not None and not in_parallel:
            return self.tile_op(s, divergent, under)
        if isinstance(s, T.For) and s.kind == "pipelined" and not in_parallel:
            cause = divergent if divergent is not None else (s if v.divergent(s) is not None else None)
            if cause is not None:
                why = under or f"with a trip count that uses {v.cause(v.divergent(s))}"
                return self.error(f"a Pipelined loop keeps the whole block in step (its copies wait on barriers), so "
                                  f"it cannot run {why}: use a Serial loop", s.span)
        if isinstance(s, T.Store) and not in_parallel and divergent is None and s.buffer.scope in ("shared", "global") \
                and v.expr(s.value) and not any(v.expr(i) for i in s.indices):
            return self.error(f"every thread stores a value of its own into the same element of '{s.buffer.name}' "
                              f"(the value uses {v.cause(s.value)}): guard the store (`if tx == 0:`) or index the "
                              "element by the thread", s.span)
        if isinstance(s, T.If | T.While | T.For) and not in_parallel:
            if divergent is None and v.divergent(s) is not None:
                self.shared_races(s)
                inner = s
            else:
                inner = divergent
            if isinstance(s, T.If):
                self.body(s.then_body, inner, False)
                self.body(s.else_body, inner, False)
            else:
                self.body(s.body, inner, False)
        elif isinstance(s, T.If):
            self.body(s.then_body, divergent, in_parallel)
            self.body(s.else_body, divergent, in_parallel)
        elif isinstance(s, T.For | T.While):
            self.body(s.body, divergent, in_parallel)

    def tile_op(self, s: T.Stmt, divergent: T.Stmt | None, under: str) -> None:
        v = self.v
        name = type(s).__name__.lower()
        if isinstance(s, T.AnnotateLayout | T.UseSwizzle):
            return
        if isinstance(s, T.Atomic) and not isinstance(s.value, T.Region) and all(
                e == 1 for e in (s.dst.const_extents or [])) and (
                divergent is not None or any(v.expr(e) for e in stmt_exprs(s))):
            s.per_element = True  # each thread that runs it applies its own update
            return
        if isinstance(s, T.Print) and not isinstance(s.value, T.Region) and divergent is None:
            return  # a scalar: the value of thread `thread=` (0) is printed
        if divergent is not None:
            return self.error(f"{name} is a block-wide tile operation: every thread of the block takes part in it, so "
                              f"it cannot run {under}; move it out of the `if` (or loop), or write the per-thread "
                              "work as element assignments", s.span, ("the condition", divergent.span))
        for e in stmt_exprs(s):
            if v.expr(e):
                return self.error(f"the operands of {name}, a block-wide tile operation, must be the same in every "
                                  f"thread, but these use {v.cause(e)}: give it block-uniform regions, or write the "
                                  "per-thread work as element assignments", s.span)
        for r in ops.reads(s):
            if r.buffer in v.buffers:
                return self.error(f"{name} reads '{r.buffer.name}', which holds a different value in every thread, "
                                  "but a tile operation is spread over the threads by the compiler: store the "
                                  "per-thread values to shared memory at an index of the thread first", s.span)

    def shared_races(self, top: T.Stmt) -> None:
        """Under the divergent statement `top`, threads run without barriers: refuse a shared-memory read after a
        write there (or a write after a read) of the same buffer, which only a barrier would order."""
        # per shared buffer, the earlier statements that read / wrote it (since the last named barrier), with the
        # elements they touch
        first_read: dict[T.Buffer, list[tuple[Access, T.Stmt]]] = {}
        first_write: dict[T.Buffer, list[tuple[Access, T.Stmt]]] = {}

        inner = _changed_inside(top)

        def fixed(e: T.Expr) -> bool:
            return _fixed(e, self.v, inner)

        def clash(acc: list[Access], seen: dict, skip: T.Stmt | None = None) -> T.Stmt | None:
            return next((st for a in acc for b, st in seen.get(a[0], [])
                         if st is not skip and not _disjoint(a, b, fixed)), None)

        def visit(s: T.Stmt) -> bool:
            r, w = _shared_access(s)
            written = clash(r, first_write)
            if written is not None:
                self.error(f"this statement reads shared memory that {_what(written)} writes under the "
                           f"thread-dependent condition at {_line(top)}: other threads' writes become visible only "
                           "after a barrier, which cannot run where only some threads are; end the `if` (or loop) "
                           "between them (tilec then places the barrier), or keep the value in a per-thread alloc_var",
                           s.span, ("the write", written.span))
                return False
            read = clash(w, first_read, s)
            if read is not None:
                self.error(f"this statement writes shared memory that {_what(read)} reads under the "
                           f"thread-dependent condition at {_line(top)}: other threads may still be reading it, and "
                           "only a barrier, which cannot run where only some threads are, would wait for them; end "
                           "the `if` (or loop) between them (tilec then places the barrier)",
                           s.span, ("the read", read.span))
                return False
            for a in r:
                first_read.setdefault(a[0], []).append((a, s))
            for a in w:
                first_write.setdefault(a[0], []).append((a, s))
            return True

        def walk(body: list[T.Stmt]) -> bool:
            for s in body:
                if isinstance(s, T.NamedBarrier):  # the user's barrier orders what comes before against what after
                    first_read.clear()
                    first_write.clear()
                    continue
                if not visit(s):
                    return False
                if isinstance(s, T.If):
                    if not (walk(s.then_body) and walk(s.else_body)):
                        return False
                elif isinstance(s, T.For | T.While):
                    # twice: the second pass sees what the next iteration reads after this one's writes
                    if not (walk(s.body) and visit(s) and walk(s.body)):
                        return False
            return True

        if visit(top):
            body = top.then_body + top.else_body if isinstance(top, T.If) else top.body
            if isinstance(top, T.If):
                walk(top.then_body) and walk(top.else_body)
            else:
                walk(body) and visit(top) and walk(body)


def _what(s: T.Stmt) -> str:
    return f"the statement at {_line(s)}" if s.span is not None else "an earlier statement"
