"""simplify-indices — index and predicate arithmetic simplified by TVM's analyzer under the kernel's known bounds.

Assumes: an SModule from lower-to-simt (and partition-boundaries); `//` and `%` on integers are floor
division and modulo (tilec/ir/arith.py converts them to TVM's floordiv/floormod).
Guarantees: every integer or boolean expression over indices (addresses, offsets, loop bounds, guards,
intrinsic arguments) is replaced by the analyzer's simplification when that is cheaper — fewer operations, no
more floor-division helpers in the printed C — using what is known at that point: the thread index lies in
[0, threads), each loop variable in its range, each value declared once in the range of its value, blockIdx
below the grid, runtime sizes non-negative, and inside `if (c)` that c holds (when c reads no memory and no
variable assigned later). `((tid / 32) / 2)` becomes `tid / 64`; `((r % 4) % 2)` becomes `r % 2`, or `r` where
r < 2. Predicates the facts prove (blockIdx.z < B) become `true`. Values stay the same for every execution;
XOR swizzles, loads and intrinsics are kept as they are (their operands are simplified). Without apache-tvm,
or with "simplify_indices" in the kernel's disabled features, the module is returned unchanged.
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import Reporter
from ..ir import dtypes as D
from ..ir import simt as S
from ..ir import tile as T
from ..ir.visit import children as direct_children
from ..ir.visit import sub_exprs
from ..targets.registry import Target

NAME = "simplify-indices"
FEATURE = "simplify_indices"  # CompileOptions.disable / --no-simplify-indices

_INDEX_TYPES = ("i32", "i64", "bool")


def run(module: S.SModule, rep: Reporter, target: Target) -> S.SModule:
    from ..ir import arith

    if not arith.available():
        return module
    for k in module.kernels:
        if FEATURE not in k.disabled:
            _Simplifier(k, arith.Arith()).run()
    return module


def assigned_vars(body: list[S.SStmt], out: set[T.Var]) -> set[T.Var]:
    """The ids of variables given a new value after their declaration (their declared value says nothing later)."""
    for s in body:
        if isinstance(s, S.SAssign):
            out.add(s.var)
        elif isinstance(s, S.SFor):
            assigned_vars(s.body, out)
        elif isinstance(s, S.SIf):
            assigned_vars(s.then_body, out)
            assigned_vars(s.else_body, out)
    return out


class _Simplifier:
    def __init__(self, k: S.SKernel, arith) -> None:
        self.k, self.ar = k, arith
        self.assigned = assigned_vars(k.body, set())
        self.nonneg: set[T.Var] = set()  # variables the printers know to be non-negative (their syntactic rule)

    def run(self) -> None:
        k, ar = self.k, self.ar
        ar.bound_thread(k.threads)
        for axis, g in enumerate(k.grid):
            ar.bound_block(axis, g)
        with ar.kernel_scope():
            k.body = self.body(k.body)

    # ------------------------------------------------------------ statements
    def body(self, body: list[S.SStmt]) -> list[S.SStmt]:
        return [self.stmt(s) for s in body]

    def stmt(self, s: S.SStmt) -> S.SStmt:
        x = self.expr
        if isinstance(s, S.Declare):
            value = x(s.value) if s.value is not None else None
            if value is not None and s.var not in self.assigned and value.dtype.name in ("i32", "i64"):
                b = self.ar.bounds(value)
                if b is not None:
                    self.ar.bound_var(s.var, *b)
            if value is not None and self.syntactic_nonneg(value):
                self.nonneg.add(s.var)
            return dataclasses.replace(s, value=value)
        if isinstance(s, S.DeclareArray):
            return dataclasses.replace(s, init=x(s.init) if s.init is not None else None)
        if isinstance(s, S.SStore):
            return dataclasses.replace(s, index=x(s.index), value=x(s.value))
        if isinstance(s, S.SAssign):
            return dataclasses.replace(s, value=x(s.value))
        if isinstance(s, S.SCall):
            return dataclasses.replace(s, args=[x(a) for a in s.args])
        if isinstance(s, S.SFor):
            begin, extent = x(s.begin), x(s.extent)
            step = x(s.step) if s.step is not None else None
            self.bound_loop(s.var, begin, extent, step)
            if self.syntactic_nonneg(begin) and (step is None or self.syntactic_nonneg(step)):
                self.nonneg.add(s.var)
            return dataclasses.replace(s, begin=begin, extent=extent, step=step, body=self.body(s.body))
        if isinstance(s, S.SIf):
            cond = x(s.cond)
            if self.stable(cond):
                with self.ar.assume(cond):
                    then_body = self.body(s.then_body)
                with self.ar.assume(T.Unary(D.BOOL, None, "not", cond)):
                    else_body = self.body(s.else_body)
            else:
                then_body, else_body = self.body(s.then_body), self.body(s.else_body)
            return dataclasses.replace(s, cond=cond, then_body=then_body, else_body=else_body)
        return s

    def bound_loop(self, var: T.Var, begin: T.Expr, extent: T.Expr, step: T.Expr | None) -> None:
        """var = begin + t * step for t in [0, extent): its range, where begin, extent and step are bounded."""
        if var in self.assigned:
            return
        bb, be = self.ar.bounds(begin), self.ar.bounds(extent)
        bs = (1, 1) if step is None else self.ar.bounds(step)
        if bb is None or be is None or bs is None or bs[0] is None or bs[0] < 0:
            return
        lo = bb[0]
        hi = None
        if bb[1] is not None and be[1] is not None and bs[1] is not None:
            hi = bb[1] + max(be[1] - 1, 0) * bs[1]
        self.ar.bound_var(var, lo, hi)

    def stable(self, cond: T.Expr) -> bool:
        """Whether a condition keeps its value through the branch it guards: it reads no memory, calls no
        intrinsic and reads no variable that is assigned."""
        for e in sub_exprs(cond):
            if isinstance(e, S.Ref | S.Intrinsic | S.AddrOf):
                return False
            if isinstance(e, T.Var) and e in self.assigned:
                return False
        return True

    # ------------------------------------------------------------ expressions
    def expr(self, e: T.Expr) -> T.Expr:
        if e.dtype.name not in _INDEX_TYPES or isinstance(e, T.Const | T.Var | S.ThreadIdx | S.BlockIdx):
            return self.children(e)
        simpler = self.ar.simplify(e, simplify_atoms=self.children)
        if simpler is not None and self.better(simpler, e):
            return simpler
        return self.children(e)

    def children(self, e: T.Expr) -> T.Expr:
        """e with each operand simplified (e itself is kept)."""
        x = self.expr
        if isinstance(e, T.Binary | T.Compare):
            return dataclasses.replace(e, a=x(e.a), b=x(e.b))
        if isinstance(e, T.Unary):
            return dataclasses.replace(e, a=x(e.a))
        if isinstance(e, T.Select):
            return dataclasses.replace(e, cond=x(e.cond), a=x(e.a), b=x(e.b))
        if isinstance(e, T.Call | S.Intrinsic):
            return dataclasses.replace(e, args=[x(a) for a in e.args])
        if isinstance(e, T.Cast):
            return dataclasses.replace(e, value=x(e.value))
        if isinstance(e, S.Ref | S.AddrOf):
            return dataclasses.replace(e, index=x(e.index))
        return e

    def better(self, new: T.Expr, old: T.Expr) -> bool:
        if isinstance(new, T.Const):
            return not isinstance(old, T.Const)
        new_cost, new_helpers, new_nonneg = self.measure(new)
        old_cost, old_helpers, old_nonneg = self.measure(old)
        if new_helpers > old_helpers:
            return False
        if old_nonneg and not new_nonneg:
            return False  # a declared value or operand the printers spell with C's / and % must stay so
        return new_cost < old_cost

    def measure(self, e: T.Expr) -> tuple[int, int, bool]:
        """(cost, helpers, nonneg) of e: how much it costs to evaluate, roughly (operations; divisions and modulos
        twice); how many integer divisions and modulos the printers must spell with a floor-division helper; and
        whether the printers see it as non-negative (their syntactic rule, tilec/ir/simt_printer.py is_nonneg)."""
        if isinstance(e, T.Const):
            return 0, 0, not e.dtype.is_float and int(e.value) >= 0
        if isinstance(e, S.ThreadIdx | S.BlockIdx):
            return 0, 0, True
        if isinstance(e, T.Var):
            return 0, 0, e in self.nonneg or e.kind == "size"
        kids = [self.measure(x) for x in direct_children(e)]
        cost = sum(k[0] for k in kids) + 1
        helpers = sum(k[1] for k in kids)
        all_nonneg = all(k[2] for k in kids)
        if isinstance(e, T.Binary) and e.op in ("//", "%") and not e.dtype.is_float:
            cost += 1
            helpers += 0 if all_nonneg else 1
        if isinstance(e, T.Binary):
            nonneg = e.op in ("+", "*", "//", "%", "&", ">>") and all_nonneg
        elif isinstance(e, T.Call):
            nonneg = e.func in ("ceildiv", "max", "min") and all_nonneg
        else:
            nonneg = isinstance(e, T.Cast) and all_nonneg
        return cost, helpers, nonneg

    def syntactic_nonneg(self, e: T.Expr) -> bool:
        return self.measure(e)[2]
