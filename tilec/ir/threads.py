"""Which values of a kernel differ between the threads of a block.

A kernel that reads the thread index (`T.get_thread_binding()`, a Var of kind "thread") has per-thread code:
outside Parallel loops every thread runs every statement, so a value computed from the thread index differs
per thread, and so does everything that depends on it. `analyze` finds, to a fixed point over loops:

* varying variables: locals assigned a varying value, or assigned under varying control flow;
* varying buffers: `alloc_local` / `alloc_var` buffers (per thread) written with a varying value or index,
  or under varying control flow;
* varying expressions: they read the thread index, a varying variable or buffer, or load any buffer at a
  varying index (a shared or global load at a block-uniform index gives every thread the same value);
* divergent statements: an `if` or `while` whose condition varies, a serial loop whose bounds vary — only
  some threads run their bodies.

check-threads (tilec/passes/check_threads.py) refuses what per-thread code cannot mean, lower-to-simt reads
the result to emit per-thread stores and to keep barriers out of divergent code, the interpreter runs the
kernel's block-level code vectorized over the threads when `uses_thread_index` holds.
"""

from __future__ import annotations

import dataclasses

from . import tile as T
from .visit import direct_exprs, sub_exprs, walk_stmts

THREAD = "thread"  # the Var kind of the thread index


def is_thread_index(e: T.Expr) -> bool:
    return isinstance(e, T.Var) and e.kind == THREAD


def uses_thread_index(k: T.Kernel) -> bool:
    """Whether any statement of k reads the thread index."""
    for s in walk_stmts(k.body):
        for e in stmt_exprs(s):
            if any(is_thread_index(x) for x in sub_exprs(e)):
                return True
    return False


def stmt_exprs(s: T.Stmt) -> list[T.Expr]:
    """Every expression of a statement itself (not of nested bodies): scalar statements' values and indices,
    loop bounds, an allocation's initial value, tile-op region starts and extents and scalar operands."""
    out = direct_exprs(s)
    if isinstance(s, T.For):
        out += [x for x in (s.begin, s.step) if x is not None]
    elif isinstance(s, T.Alloc):
        out += [s.init] if s.init is not None else []
    elif not isinstance(s, T.Store | T.Assign | T.If | T.While):
        for f in dataclasses.fields(s):  # a tile op: every region and scalar operand, whatever the field's name
            v = getattr(s, f.name)
            if isinstance(v, T.Region):
                out += [*v.starts, *v.extents]
            elif isinstance(v, T.Expr):
                out.append(v)
    return out


class Varying:
    def __init__(self):
        self.vars: set[T.Var] = set()
        self.buffers: set[T.Buffer] = set()
        self.aliases: set[T.Var] = set()  # locals assigned once, the thread index itself (`tx = get_thread_binding()`)

    def is_thread(self, e: T.Expr) -> bool:
        """e is the thread index itself: different in every thread."""
        return is_thread_index(e) or (isinstance(e, T.Var) and e in self.aliases)

    def expr(self, e: T.Expr | None) -> bool:
        if e is None:
            return False
        for x in sub_exprs(e):
            if is_thread_index(x) or (isinstance(x, T.Var) and x in self.vars):
                return True
            if isinstance(x, T.Load) and x.buffer in self.buffers:
                return True
        return False

    def cause(self, e: T.Expr) -> str:
        """What makes e thread-dependent, for a message: "the thread index", "'x' (computed from the thread
        index)", "'v' (a per-thread buffer holding thread-dependent values)"."""
        for x in sub_exprs(e):
            if is_thread_index(x):
                return "the thread index"
        for x in sub_exprs(e):
            if isinstance(x, T.Var) and x in self.vars:
                return f"'{x.name}' (computed from the thread index)"
            if isinstance(x, T.Load) and x.buffer in self.buffers:
                return f"'{x.buffer.name}' (a per-thread buffer holding thread-dependent values)"
        return "the thread index"

    def divergent(self, s: T.Stmt) -> T.Expr | None:
        """The varying condition or bound of s, when only some threads run its body; else None."""
        if isinstance(s, T.If | T.While):
            return s.cond if self.expr(s.cond) else None
        if isinstance(s, T.For) and s.kind != "parallel":
            for x in (*s.extents, s.begin, s.step):
                if x is not None and self.expr(x):
                    return x
        return None


def analyze(k: T.Kernel) -> Varying:
    v = Varying()
    if not uses_thread_index(k):
        return v

    def scan(body: list[T.Stmt], divergent: bool) -> bool:
        changed = False
        for s in body:
            if isinstance(s, T.Assign):
                if (divergent or v.expr(s.value)) and s.var not in v.vars:
                    v.vars.add(s.var)
                    changed = True
            elif isinstance(s, T.Store | T.Alloc):
                b = s.buffer
                if b.scope in ("local", "var") and b not in v.buffers and (
                        divergent or any(v.expr(e) for e in stmt_exprs(s))):
                    v.buffers.add(b)
                    changed = True
            elif isinstance(s, T.Atomic) and s.result is not None:  # each thread gets its own previous value
                if s.result not in v.vars:
                    v.vars.add(s.result)
                    changed = True
            elif isinstance(s, T.Fill) and s.dst.buffer.scope in ("local", "var"):
                if s.dst.buffer not in v.buffers and (divergent or v.expr(s.value)):
                    v.buffers.add(s.dst.buffer)
                    changed = True
            elif isinstance(s, T.For):
                d = divergent or v.divergent(s) is not None
                if d and s.kind != "parallel":
                    for var in s.vars:
                        if var not in v.vars:
                            v.vars.add(var)
                            changed = True
                changed |= scan(s.body, d)
            elif isinstance(s, T.While):
                changed |= scan(s.body, divergent or v.divergent(s) is not None)
            elif isinstance(s, T.If):
                d = divergent or v.divergent(s) is not None
                changed |= scan(s.then_body, d)
                changed |= scan(s.else_body, d)
        return changed

    while scan(k.body, False):  # to a fixed point: a loop may assign a value an earlier statement reads
        pass
    assigns: dict[T.Var, list[T.Assign]] = {}
    for s in walk_stmts(k.body):
        if isinstance(s, T.Assign):
            assigns.setdefault(s.var, []).append(s)
    v.aliases = {key for key, a in assigns.items() if len(a) == 1 and is_thread_index(a[0].value)}
    return v
