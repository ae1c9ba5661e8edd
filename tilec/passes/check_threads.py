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
    writes shared memory that an earlier one there reads (that needs a barrier, which only some threads would
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
from ..ir.threads import Varying, analyze, stmt_exprs, uses_thread_index
from ..ir.visit import sub_exprs
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


def _shared_access(s: T.Stmt) -> tuple[set[T.Buffer], set[T.Buffer]]:
    """(the shared buffers the scalar statement s itself reads, those it writes), by storage."""
    reads = {_storage(x.buffer) for e in stmt_exprs(s) for x in sub_exprs(e)
             if isinstance(x, T.Load) and x.buffer.scope == "shared"}
    writes = set()
    if isinstance(s, T.Store) and s.buffer.scope == "shared":
        writes.add(_storage(s.buffer))
    if isinstance(s, T.Atomic) and s.dst.buffer.scope == "shared":
        writes.add(_storage(s.dst.buffer))
    return reads, writes


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
        first_read: dict[T.Buffer, T.Stmt] = {}  # per shared buffer, the first earlier statement that read / wrote it
        first_write: dict[T.Buffer, T.Stmt] = {}

        def visit(s: T.Stmt) -> bool:
            r, w = _shared_access(s)
            written = next((first_write[b] for b in r if b in first_write), None)
            if written is not None:
                self.error(f"this statement reads shared memory that {_what(written)} writes under the "
                           f"thread-dependent condition at {_line(top)}: other threads' writes become visible only "
                           "after a barrier, which cannot run where only some threads are; end the `if` (or loop) "
                           "between them (tilec then places the barrier), or keep the value in a per-thread alloc_var",
                           s.span, ("the write", written.span))
                return False
            read = next((first_read[b] for b in w if b in first_read and first_read[b] is not s), None)
            if read is not None:
                self.error(f"this statement writes shared memory that {_what(read)} reads under the "
                           f"thread-dependent condition at {_line(top)}: other threads may still be reading it, and "
                           "only a barrier, which cannot run where only some threads are, would wait for them; end "
                           "the `if` (or loop) between them (tilec then places the barrier)",
                           s.span, ("the read", read.span))
                return False
            for b in r:
                first_read.setdefault(b, s)
            for b in w:
                first_write.setdefault(b, s)
            return True

        def walk(body: list[T.Stmt]) -> bool:
            for s in body:
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
