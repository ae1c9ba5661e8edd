"""partition-boundaries — an unguarded fast path for the tiles and iterations that are provably interior.

Assumes: an SModule from lower-to-simt, before simplify-indices and simplify; `//` and `%` are floor division and
modulo; every variable assigned after its declaration is known (SAssign).
Guarantees: a per-thread loop (a tile's copy, store, mask or epilogue loop) whose guards compare a block-uniform
part with a part bounded over the thread index and the loop's own variables (`by * 128 + idx / 4 < M`,
`k * 64 + j <= bx * 64 + i`, `k_idx < S`) becomes

    if (U) { the loop with those guards replaced by true } else { the loop as it was }

where U (`by * 128 + 127 < M && k * 32 + 24 < K`, `k * 64 + 63 <= bx * 64`) is evaluated once, per tile and per
iteration of the enclosing loops, from block-uniform values only (sizes, block indices, uniform loop variables and
declared values, never the thread index, a load or an assigned variable), so every thread of the block takes the
same side and no barrier is split. Each guard is replaced only where apache-tvm's analyzer proves it true under U
for every thread and every iteration of the loop (its rules, run in Python by tilec/ir/arith.py's LazyArith, which
imports TVM only for a question they do not settle); the boundary side keeps the code unchanged. Loops that contain a
barrier are left alone. A guard with no block-uniform variable (`tid / 128 < 1`, a warpgroup's test) separates
threads, not tiles, and gives no branch: U would be a constant, and a loop split on it (the whole KV loop of a
warp-specialized attention) would keep every guard inside on both sides. Without apache-tvm, or with "partition" in
the kernel's disabled features, the module is returned unchanged.
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.exprs import binary, both
from ..ir.fold import fold_node
from ..ir.visit import rewrite_expr, sub_exprs
from ..targets.registry import Target

NAME = "partition-boundaries"
FEATURE = "partition"  # CompileOptions.disable / --no-partition

_FLIP = {">": "<", ">=": "<="}


def run(module: S.SModule, rep: Reporter, target: Target) -> S.SModule:
    from ..ir import arith

    if not arith.available():
        return module
    for k in module.kernels:
        if FEATURE not in k.disabled:
            _Partitioner(k, arith.LazyArith()).run()
    return module


class _Partitioner:
    def __init__(self, k: S.SKernel, arith) -> None:
        self.k, self.ar = k, arith
        self.assigned: set[T.Var] = set()
        self.defs: dict[T.Var, T.Expr] = {}  # var -> its declared value (variables never assigned)
        self.varying: set[T.Var] = set()  # variables whose value may differ between the threads of a block
        self.opaque: set[T.Var] = set()  # variables whose value is not known (assigned ones)

    def run(self) -> None:
        k, ar = self.k, self.ar
        ar.bound_thread(k.threads)
        for axis, g in enumerate(k.grid):
            ar.bound_block(axis, g)
        self.collect_assigned(k.body)
        self.learn(k.body)
        with ar.kernel_scope():
            k.body = self.body(k.body)

    # ------------------------------------------------------------ what is known about each variable
    def collect_assigned(self, body: list[S.SStmt]) -> None:
        for s in body:
            if isinstance(s, S.SAssign):
                self.assigned.add(s.var)
            elif isinstance(s, S.SFor):
                self.collect_assigned(s.body)
            elif isinstance(s, S.SIf):
                self.collect_assigned(s.then_body)
                self.collect_assigned(s.else_body)
        self.opaque = set(self.assigned)

    def depends_on_thread(self, e: T.Expr) -> bool:
        for x in sub_exprs(e):
            if isinstance(x, S.ThreadIdx | S.Ref | S.Intrinsic | S.AddrOf):
                return True
            if isinstance(x, T.Var) and (x in self.varying or x in self.opaque):
                return True
        return False

    def learn(self, body: list[S.SStmt]) -> None:
        """Definitions, ranges and thread dependence of every variable, in program order."""
        for s in body:
            if isinstance(s, S.Declare):
                if s.value is None or s.var in self.assigned:
                    self.opaque.add(s.var)
                    continue
                self.defs[s.var] = s.value
                if self.depends_on_thread(s.value):
                    self.varying.add(s.var)
                if s.value.dtype.name in ("i32", "i64"):
                    b = self.ar.bounds(s.value)
                    if b is not None:
                        self.ar.bound_var(s.var, *b)
            elif isinstance(s, S.SFor):
                parts = [s.begin, s.extent] + ([s.step] if s.step is not None else [])
                if s.var in self.assigned:
                    self.opaque.add(s.var)
                elif any(self.depends_on_thread(x) for x in parts):
                    self.varying.add(s.var)
                self.bound_loop(s)
                self.learn(s.body)
            elif isinstance(s, S.SIf):
                self.learn(s.then_body)
                self.learn(s.else_body)

    def bound_loop(self, s: S.SFor) -> None:
        if s.var in self.assigned:
            return
        bb, be = self.ar.bounds(s.begin), self.ar.bounds(s.extent)
        bs = (1, 1) if s.step is None else self.ar.bounds(s.step)
        if bb is None or be is None or bs is None or bs[0] is None or bs[0] < 0:
            return
        hi = None
        if bb[1] is not None and be[1] is not None and bs[1] is not None:
            hi = bb[1] + max(be[1] - 1, 0) * bs[1]
        self.ar.bound_var(s.var, bb[0], hi)

    # ------------------------------------------------------------ the walk
    def body(self, body: list[S.SStmt]) -> list[S.SStmt]:
        return [self.stmt(s) for s in body]

    def stmt(self, s: S.SStmt) -> S.SStmt:
        if isinstance(s, S.SFor):
            split = self.partition(s)
            if split is not None:
                return split
            return dataclasses.replace(s, body=self.body(s.body))
        if isinstance(s, S.SIf):
            return dataclasses.replace(s, then_body=self.body(s.then_body), else_body=self.body(s.else_body))
        return s

    def partition(self, loop: S.SFor) -> S.SStmt | None:
        inner = _declared_inside([loop])
        if inner is None:  # a barrier inside: the loop stays as it is
            return None
        local = self.varying | inner
        guards: list[T.Compare] = []
        for e in _stmt_exprs([loop]):
            for x in sub_exprs(e):
                if isinstance(x, T.Compare) and x.op in ("<", "<=", ">", ">=") and x.a.dtype.name in ("i32", "i64") \
                        and x.a.dtype == x.b.dtype and not any(x is g for g in guards):
                    guards.append(x)
        proven: list[T.Compare] = []
        needs: dict[tuple, tuple[str, T.Expr, int, T.Expr]] = {}  # per uniform comparison, the largest margin
        for g in guards:
            found = self.interior_condition(g, local)
            if found is None:
                continue
            proven.append(g)
            op, ua, m, ub = found
            key = (op, _key(ua), _key(ub))  # neighbouring copies ask the same, or with a smaller margin
            if key not in needs or needs[key][2] < m:
                needs[key] = found
        if not proven:
            return None
        cond = None
        for op, ua, m, ub in needs.values():
            left = binary("+" if m >= 0 else "-", ua, T.Const(ua.dtype, None, abs(m)))
            cond = both(cond, T.Compare(D.BOOL, None, op, left, ub))
        return _branch(loop, cond, _replace_guards([loop], proven))

    def interior_condition(self, g: T.Compare, local: set[T.Var]) -> tuple[str, T.Expr, int, T.Expr] | None:
        """(op, ua, m, ub): U = `ua + m op ub`, block-uniform, implies g for every thread and loop iteration (proven
        by the analyzer); None where there is no such U.

        g is `lhs < rhs` (or <=, >, >=). With the thread-dependent declared values expanded, lhs - rhs splits into
        a uniform part u and a part f over the thread index and the loop's variables only; the analyzer proves the
        split exact and bounds f by m over those variables, so `u + m < 0` implies g. U is spelled
        `ua + m < ub` with u = ua - ub."""
        lhs, rhs = (g.a, g.b) if g.op in ("<", "<=") else (g.b, g.a)
        op = _FLIP.get(g.op, g.op)
        lhs, rhs = self.expand(lhs, local), self.expand(rhs, local)
        if lhs is None or rhs is None:
            return None
        ua, fa = _split(lhs, lambda x: self.is_local(x, local))
        ub, fb = _split(rhs, lambda x: self.is_local(x, local))
        if _constant(ua) and _constant(ub):
            # no block-uniform variable (`tid / 128 < 1`): the guard separates threads, not tiles, and U would be a
            # constant -- false, or true where the guard already folds
            return None
        if fa is None and fb is None:
            return None  # the same for every thread: not a tile guard
        dt = g.a.dtype
        zero = T.Const(dt, None, 0)
        ua, ub = ua if ua is not None else zero, ub if ub is not None else zero
        f = _combine("-", fa, fb, dt)
        if not self.ar.equal(binary("-", lhs, rhs), binary("+", binary("-", ua, ub), f)):
            return None
        m = self.ar.bounds(f)
        if m is None or m[1] is None:
            return None
        return op, ua, m[1], ub

    def is_local(self, e: T.Expr, local: set[T.Var]) -> bool:
        return any(isinstance(x, S.ThreadIdx) or (isinstance(x, T.Var) and x in local) for x in sub_exprs(e))

    def expand(self, e: T.Expr, local: set[T.Var]) -> T.Expr | None:
        """e with every thread-dependent declared value replaced by its definition; None if e reads memory or a
        variable whose value is not known."""
        bad = False

        def sub(x: T.Expr) -> T.Expr | None:
            nonlocal bad
            if isinstance(x, S.Ref | S.Intrinsic | S.AddrOf):
                bad = True
            elif isinstance(x, T.Var):
                if x in self.opaque:
                    bad = True
                elif x in local and x in self.defs:
                    value = self.expand(self.defs[x], local)
                    bad = bad or value is None
                    return value
            return None

        out = rewrite_expr(e, sub)
        return None if bad else out


def _branch(loop: S.SFor, cond: T.Expr, fast: list[S.SStmt]) -> S.SIf:
    """The runtime choice between the loop without its proven guards and the loop as it was."""
    marker = S.SComment(loop.span, "interior: the bounds guards this branch tests are proven true")
    return S.SIf(loop.span, cond, [marker, *fast], [loop])


def _split(e: T.Expr, is_local) -> tuple[T.Expr | None, T.Expr | None]:
    """e = uniform + local: the additive terms of e that do not depend on the thread and the loop, and those that do
    (None for an empty sum). A term mixing both goes to the local part whole."""
    if isinstance(e, T.Binary) and e.op in ("+", "-"):
        ua, fa = _split(e.a, is_local)
        ub, fb = _split(e.b, is_local)
        return _combine(e.op, ua, ub, e.dtype), _combine(e.op, fa, fb, e.dtype)
    if isinstance(e, T.Binary) and e.op == "*" and isinstance(e.b, T.Const):
        u, f = _split(e.a, is_local)
        return (binary("*", u, e.b) if u is not None else None), (binary("*", f, e.b) if f is not None else None)
    if isinstance(e, T.Binary) and e.op == "*" and isinstance(e.a, T.Const):
        u, f = _split(e.b, is_local)
        return (binary("*", e.a, u) if u is not None else None), (binary("*", e.a, f) if f is not None else None)
    if isinstance(e, T.Const) and not e.dtype.is_float and int(e.value) == 0:
        return None, None
    return (None, e) if is_local(e) else (e, None)


def _constant(e: T.Expr | None) -> bool:
    """No variable, block index or thread index in e (None, an empty sum, counts)."""
    return e is None or not any(isinstance(x, T.Var | S.BlockIdx | S.ThreadIdx) for x in sub_exprs(e))


def _key(e: T.Expr) -> tuple:
    """A structural key: equal for expressions that are spelled the same over the same variables."""
    if isinstance(e, T.Var):
        return ("var", e)
    if isinstance(e, T.Const):
        return ("const", e.dtype.name, e.value)
    if isinstance(e, S.BlockIdx):
        return ("block", e.axis)
    fields = [getattr(e, f.name) for f in dataclasses.fields(e) if f.name not in ("span", "dtype")]
    parts = [type(e).__name__, e.dtype.name]
    for v in fields:
        if isinstance(v, T.Expr):
            parts.append(_key(v))
        elif isinstance(v, list):
            parts.append(tuple(_key(x) if isinstance(x, T.Expr) else x for x in v))
        elif isinstance(v, S.SBuffer):
            parts.append(v)
        else:
            parts.append(v)
    return tuple(parts)


def _combine(op: str, a: T.Expr | None, b: T.Expr | None, dt: D.DType) -> T.Expr | None:
    if b is None:
        return a
    if a is None:
        return b if op == "+" else binary("-", T.Const(dt, None, 0), b)
    return binary(op, a, b)


def _declared_inside(body: list[S.SStmt]) -> set[T.Var] | None:
    """The variables declared (or looped over) inside these statements; None if they contain a barrier."""
    out: set[T.Var] = set()
    for s in body:
        if isinstance(s, S.Barrier):
            return None
        if isinstance(s, S.Declare):
            out.add(s.var)
        elif isinstance(s, S.SFor):
            out.add(s.var)
            inner = _declared_inside(s.body)
            if inner is None:
                return None
            out |= inner
        elif isinstance(s, S.SIf):
            for b in (s.then_body, s.else_body):
                inner = _declared_inside(b)
                if inner is None:
                    return None
                out |= inner
    return out


def _stmt_exprs(body: list[S.SStmt]):
    for s in body:
        if isinstance(s, S.Declare | S.SAssign) and s.value is not None:
            yield s.value
        elif isinstance(s, S.SStore):
            yield s.index
            yield s.value
        elif isinstance(s, S.SCall):
            yield from s.args
        elif isinstance(s, S.SFor):
            yield from (x for x in (s.begin, s.extent, s.step) if x is not None)
            yield from _stmt_exprs(s.body)
        elif isinstance(s, S.SIf):
            yield s.cond
            yield from _stmt_exprs(s.then_body)
            yield from _stmt_exprs(s.else_body)


def _replace_guards(body: list[S.SStmt], proven: list[T.Compare]) -> list[S.SStmt]:
    """A copy of the statements with each proven guard replaced by true, boolean operators on constants folded."""
    ids = {g for g in proven}

    def fn(e: T.Expr) -> T.Expr | None:
        if isinstance(e, T.Compare) and e in ids:
            return T.Const(D.BOOL, e.span, True)
        if isinstance(e, T.Binary) and e.op in ("and", "or"):
            for x, other in ((e.a, e.b), (e.b, e.a)):
                if isinstance(x, T.Const):
                    if bool(x.value) == (e.op == "and"):
                        return other  # true and y, false or y
                    return x  # false and y, true or y
        return fold_node(e)

    def x(e: T.Expr | None) -> T.Expr | None:
        return rewrite_expr(e, fn) if e is not None else None

    out: list[S.SStmt] = []
    for s in body:
        if isinstance(s, S.Declare):
            s = dataclasses.replace(s, value=x(s.value))
        elif isinstance(s, S.SAssign):
            s = dataclasses.replace(s, value=x(s.value))
        elif isinstance(s, S.SStore):
            s = dataclasses.replace(s, index=x(s.index), value=x(s.value))
        elif isinstance(s, S.SCall):
            s = dataclasses.replace(s, args=[x(a) for a in s.args])
        elif isinstance(s, S.SFor):
            s = dataclasses.replace(s, body=_replace_guards(s.body, proven))
        elif isinstance(s, S.SIf):
            s = dataclasses.replace(s, cond=x(s.cond), then_body=_replace_guards(s.then_body, proven),
                                    else_body=_replace_guards(s.else_body, proven))
        out.append(s)
    return out
