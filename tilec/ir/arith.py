"""The TVM boundary: integer reasoning about tilec expressions with apache-tvm's arithmetic analyzer.

Only passes that prove or simplify index arithmetic import this module, and only inside their `run`
(`import tvm` costs about half a second: never on `--help`, a cache hit, the front end's `--emit-ir` or in
tilec/runtime). `available()` says whether TVM can be imported without importing it; without TVM those
passes leave the module unchanged. partition-boundaries asks through `LazyArith` (below), which answers its
common questions with TVM's own rules in Python and imports TVM only for the others.

`Arith` holds one kernel's facts (the range of the thread index, of each loop variable and of each
declared value; `blockIdx < gridDim`; runtime sizes are non-negative) in one `tvm.sym.Analyzer`. It converts
tilec expressions to TVM and back:

- `//` and `%` on integers are floor division and floor modulo in tilec (the language's semantics; the C
  printers spell them `/` and `%` only where both operands are syntactically non-negative), so they become
  TVM's `floordiv` / `floormod`, never `truncdiv`.
- What TVM does not model faithfully (XOR and shifts, loads, intrinsics, casts, selects, `ceildiv`, other
  calls, types other than i32/i64/bool) becomes an *atom*: a fresh TVM variable standing for that subtree,
  with the subtree's bounds where they are known. Atoms convert back to the (separately simplified) subtree,
  so XOR swizzles and loads are never rewritten by TVM.
- TVM reasons about mathematical integers; C's signed overflow is undefined behaviour, so index expressions
  that do not overflow keep their value under every rewrite.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import sys
from functools import cache

from . import dtypes as D
from . import simt as S
from . import tile as T

_BINARY = ("+", "-", "*", "//", "%")
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")


@cache
def available() -> bool:
    """Whether apache-tvm is installed (found without importing it)."""
    try:
        return importlib.util.find_spec("tvm") is not None
    except (ImportError, ValueError):
        return False


_TVM_DTYPES = {"i32": "int32", "i64": "int64", "bool": "bool"}


def _import_tvm() -> None:
    """import tvm without letting it import torch or ml_dtypes, which it imports only for tensor and numpy dtype
    interop that tilec does not use: torch triples the import's cost (about 4 s instead of 1.5 s on this
    project's machines), ml_dtypes' extension alone takes about 0.45 s to load (bench/compile_time.py). A module
    already loaded is not hidden (TVM then sees it, as usual); afterwards `import torch` and `import ml_dtypes`
    work as usual (only TVM's own interop with them stays off in this process)."""
    if "tvm" in sys.modules:
        return
    hidden = [m for m in _NOT_FOR_TVM if m not in sys.modules]
    for m in hidden:
        sys.modules[m] = None  # type: ignore[assignment]  (an import of it now raises ImportError)
    try:
        import tvm.sym  # noqa: F401
        import tvm.tirx  # noqa: F401
    finally:
        for m in hidden:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]


_NOT_FOR_TVM = ("torch", "ml_dtypes")


def _index_dtype(dt: D.DType) -> str | None:
    return _TVM_DTYPES.get(dt.name)


class Arith:
    """One kernel's integer facts in a TVM analyzer, and the conversions between tilec and TVM expressions."""

    def __init__(self) -> None:
        _import_tvm()
        import tvm
        import tvm.tirx as tx
        from tvm.sym import Analyzer, ConstIntBound

        self._tvm, self._tx = tvm, tx
        self._Bound = ConstIntBound
        self.analyzer = Analyzer()
        self._vars: dict[T.Var, object] = {}  # tilec node -> TVM Var
        self._back: dict[object, T.Expr] = {}  # TVM Var -> the tilec expression it stands for
        self._thread = None
        self._blocks: dict[int, object] = {}
        self._atoms: dict[T.Expr, tuple[T.Expr, object]] = {}  # node -> (node, its atom)
        self._grid_facts: list = []  # blockIdx[axis] < gridDim[axis] where the grid is symbolic
        self._count = 0

    # ------------------------------------------------------------ facts
    def _fresh(self, name: str, dt: D.DType, stands_for: T.Expr):
        self._count += 1
        v = self._tx.Var(f"{name}_{self._count}", _index_dtype(dt) or "int32")
        self._back[v] = stands_for
        return v

    def _set_bound(self, v, lo: int | None, hi: int | None) -> None:
        lo = self._Bound.NEG_INF if lo is None else lo
        hi = self._Bound.POS_INF if hi is None else hi
        self.analyzer.update(v, self._Bound(lo, hi), True)

    def var(self, v: T.Var):
        """The TVM variable of a tilec variable (runtime sizes are known non-negative)."""
        tv = self._vars.get(v)
        if tv is None:
            tv = self._fresh(v.name, v.dtype, v)
            self._vars[v] = tv
            if v.kind == "size":
                self._set_bound(tv, 0, None)
        return tv

    def bound_var(self, v: T.Var, lo: int | None, hi: int | None) -> None:
        """`lo <= v <= hi` wherever v is in scope (None: unbounded on that side)."""
        self._set_bound(self.var(v), lo, hi)

    def bound_thread(self, threads: int) -> None:
        self._thread = self._tx.Var("tid", "int32")
        self._back[self._thread] = S.ThreadIdx(D.I32, None)
        self._set_bound(self._thread, 0, threads - 1)

    def bound_block(self, axis: int, extent: T.Expr) -> None:
        """blockIdx[axis] lies in [0, extent): the launch grid."""
        b = self._block(axis)
        self._set_bound(b, 0, int(extent.value) - 1 if isinstance(extent, T.Const) else None)
        if not isinstance(extent, T.Const):
            t = self.to_tvm(extent)
            if t is not None:
                self._grid_facts.append(b < t)

    def _block(self, axis: int):
        b = self._blocks.get(axis)
        if b is None:
            b = self._tx.Var("xyz"[axis] + "blk", "int32")
            self._back[b] = S.BlockIdx(D.I32, None, axis)
            self._set_bound(b, 0, None)
            self._blocks[axis] = b
        return b

    def bounds(self, e: T.Expr) -> tuple[int | None, int | None] | None:
        """The constant bounds of an integer expression (None on a side that is unbounded)."""
        t = self.to_tvm(e)
        if t is None:
            return None
        b = self.analyzer.const_int_bound(t)
        # TVM bounds a variable it knows nothing about by its type's range; a bound at or past that range says
        # nothing (and would not fit the type if printed)
        limit = (1 << (e.dtype.bits - 1)) - 1
        lo = int(b.min_value) if b.min_value != self._Bound.NEG_INF and int(b.min_value) > -limit else None
        hi = int(b.max_value) if b.max_value != self._Bound.POS_INF and int(b.max_value) < limit else None
        return lo, hi

    @contextlib.contextmanager
    def assume(self, cond: T.Expr):
        """Within the block, `cond` (a uniform condition the code tested) is taken as true."""
        t = self.to_tvm(cond)
        if t is None:
            yield
            return
        with self.analyzer.constraint_scope(t):
            yield

    def equal(self, a: T.Expr, b: T.Expr) -> bool:
        """Whether a and b have the same value for every value of their variables."""
        ta, tb = self.to_tvm(a), self.to_tvm(b)
        if ta is None or tb is None:
            return False
        diff = self.analyzer.simplify(ta - tb)
        return isinstance(diff, self._tx.IntImm) and int(diff.value) == 0

    @contextlib.contextmanager
    def kernel_scope(self):
        """Within the block, the facts that are not constant bounds (blockIdx < a symbolic gridDim) hold."""
        with contextlib.ExitStack() as stack:
            for fact in self._grid_facts:
                stack.enter_context(self.analyzer.constraint_scope(fact))
            yield

    # ------------------------------------------------------------ tilec -> TVM
    def to_tvm(self, e: T.Expr, simplify_atoms=None):
        """The TVM form of e, with every unmodelled subtree an atom; None when e's type is not an index type.

        `simplify_atoms(x)` (optional) rewrites each atom's tilec subtree before it is stood in for."""
        dt = _index_dtype(e.dtype)
        if dt is None:
            return None
        tx = self._tx
        if isinstance(e, T.Const):
            return tx.IntImm(dt, int(bool(e.value)) if dt == "bool" else int(e.value))
        if isinstance(e, T.Var):
            return self.var(e)
        if isinstance(e, S.ThreadIdx) and self._thread is not None:
            return self._thread
        if isinstance(e, S.BlockIdx):
            return self._block(e.axis)
        if isinstance(e, T.Binary) and e.op in _BINARY and e.a.dtype == e.dtype == e.b.dtype and dt != "bool":
            a, b = self.to_tvm(e.a, simplify_atoms), self.to_tvm(e.b, simplify_atoms)
            if a is not None and b is not None:
                if e.op in ("//", "%") and not (isinstance(e.b, T.Const) and int(e.b.value) > 0):
                    pass  # a division by a variable: TVM may not know its sign; keep it whole
                else:
                    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                            "//": lambda: tx.floordiv(a, b), "%": lambda: tx.floormod(a, b)}[e.op]()
        if isinstance(e, T.Binary) and e.op in ("and", "or") and e.a.dtype.is_bool and e.b.dtype.is_bool:
            a, b = self.to_tvm(e.a, simplify_atoms), self.to_tvm(e.b, simplify_atoms)
            if a is not None and b is not None:
                return tx.And(a, b) if e.op == "and" else tx.Or(a, b)
        if isinstance(e, T.Unary) and e.op == "not" and e.a.dtype.is_bool:
            a = self.to_tvm(e.a, simplify_atoms)
            if a is not None:
                return tx.Not(a)
        if isinstance(e, T.Compare) and e.a.dtype == e.b.dtype and _index_dtype(e.a.dtype) in ("int32", "int64"):
            a, b = self.to_tvm(e.a, simplify_atoms), self.to_tvm(e.b, simplify_atoms)
            if a is not None and b is not None:
                return {"<": tx.LT, "<=": tx.LE, ">": tx.GT, ">=": tx.GE, "==": tx.EQ, "!=": tx.NE}[e.op](a, b)
        if isinstance(e, T.Call) and e.func in ("min", "max") and len(e.args) == 2 and dt != "bool" \
                and all(x.dtype == e.dtype for x in e.args):
            a, b = (self.to_tvm(x, simplify_atoms) for x in e.args)
            if a is not None and b is not None:
                return tx.Min(a, b) if e.func == "min" else tx.Max(a, b)
        return self._atom(e, simplify_atoms)

    def _atom(self, e: T.Expr, simplify_atoms):
        held = self._atoms.get(e)
        if held is not None and held[0] is e:  # the same node converted again stands for the same value
            return held[1]
        inner = simplify_atoms(e) if simplify_atoms is not None else e
        v = self._fresh("atom", e.dtype, inner)
        bound = self._atom_bound(inner)
        if bound is not None:
            self._set_bound(v, *bound)
        self._atoms[e] = (e, v)  # the node is held, so its id is not reused
        return v

    def _atom_bound(self, e: T.Expr) -> tuple[int | None, int | None] | None:
        """Bounds of an unmodelled subtree where they follow from its operands."""
        if isinstance(e, T.Cast) and e.dtype.is_int and e.value.dtype.is_int and e.value.dtype.bits <= e.dtype.bits:
            return self.bounds(e.value)
        if isinstance(e, T.Binary) and e.op in ("^", "|", "&") and not e.dtype.is_bool:
            ba, bb = self.bounds(e.a), self.bounds(e.b)
            if ba and bb and None not in ba + bb and min(ba[0], bb[0]) >= 0:
                top = max(ba[1], bb[1])
                if e.op == "&":
                    return 0, min(ba[1], bb[1])
                return 0, (1 << top.bit_length()) - 1  # a bitwise or / xor of values < 2**n stays < 2**n
        if isinstance(e, T.Call) and e.func == "ceildiv" and len(e.args) == 2:
            ba, bb = self.bounds(e.args[0]), self.bounds(e.args[1])
            if ba and bb and ba[0] is not None and ba[0] >= 0 and bb[0] is not None and bb[0] >= 1:
                hi = None if ba[1] is None else -(-ba[1] // bb[0])
                return 0, hi
        return None

    # ------------------------------------------------------------ TVM -> tilec
    def from_tvm(self, t, dtype: D.DType) -> T.Expr | None:
        """The tilec form of a TVM expression built from the node kinds to_tvm produces; None otherwise."""
        tx = self._tx
        if isinstance(t, tx.IntImm):
            if dtype.is_bool or str(t.ty) == "bool":
                return T.Const(D.BOOL, None, bool(t.value))
            return T.Const(dtype, None, int(t.value))
        if isinstance(t, tx.Var):
            return self._back.get(t)
        kinds = [(tx.Add, "+"), (tx.Sub, "-"), (tx.Mul, "*"), (tx.FloorDiv, "//"), (tx.FloorMod, "%")]
        for cls, op in kinds:
            if isinstance(t, cls):
                a, b = self.from_tvm(t.a, dtype), self.from_tvm(t.b, dtype)
                return None if a is None or b is None else T.Binary(dtype, None, op, a, b)
        for cls, func in ((tx.Min, "min"), (tx.Max, "max")):
            if isinstance(t, cls):
                a, b = self.from_tvm(t.a, dtype), self.from_tvm(t.b, dtype)
                return None if a is None or b is None else T.Call(dtype, None, func, [a, b])
        cmps = [(tx.LT, "<"), (tx.LE, "<="), (tx.GT, ">"), (tx.GE, ">="), (tx.EQ, "=="), (tx.NE, "!=")]
        for cls, op in cmps:
            if isinstance(t, cls):
                odt = D.I64 if str(t.a.ty) == "int64" else D.I32
                a, b = self.from_tvm(t.a, odt), self.from_tvm(t.b, odt)
                return None if a is None or b is None else T.Compare(D.BOOL, None, op, a, b)
        for cls, op in ((tx.And, "and"), (tx.Or, "or")):
            if isinstance(t, cls):
                a, b = self.from_tvm(t.a, D.BOOL), self.from_tvm(t.b, D.BOOL)
                return None if a is None or b is None else T.Binary(D.BOOL, None, op, a, b)
        if isinstance(t, tx.Not):
            a = self.from_tvm(t.a, D.BOOL)
            return None if a is None else T.Unary(D.BOOL, None, "not", a)
        return None

    def simplify(self, e: T.Expr, simplify_atoms=None) -> T.Expr | None:
        """e simplified by the analyzer under the kernel's facts, or None when it cannot be converted back."""
        t = self.to_tvm(e, simplify_atoms)
        if t is None:
            return None
        return self.from_tvm(self.analyzer.simplify(t), e.dtype)


# ---------------------------------------------------------------------------- without importing TVM
#
# partition-boundaries asks two questions: constant bounds of an index expression (TVM's ConstIntBound), and whether
# two expressions are equal (that the split into a uniform and a per-thread part is exact). `LazyArith` answers both
# in Python where its answer is, by construction, the one TVM gives, and imports TVM (an `Arith` holding the same
# facts) only for a question it cannot answer so -- so a kernel whose proofs are all of the common kind (sums of
# multiples of variables, floor division and modulo by constants) compiles without `import tvm`, which costs about
# half a second (bench/compile_time.py). tests/test_partition.py checks its answers against TVM's.

_POS_INF = (1 << 63) - 1  # tvm.sym.ConstIntBound.POS_INF / NEG_INF: int64's range, as TVM's infinities
_NEG_INF = -_POS_INF


class _NeedsTvm(Exception):
    """A question LazyArith leaves to TVM."""


def _everything(dt: D.DType) -> tuple[int, int]:
    """TVM's bound of a variable it knows nothing about (ConstIntBound's Everything(dtype))."""
    vbits = dt.bits - 1
    if vbits >= 63:
        return _NEG_INF, _POS_INF
    return -(1 << vbits), (1 << vbits) - 1


def _inf_add(x: int, y: int) -> int:
    if x in (_POS_INF, _NEG_INF):
        return x
    if y in (_POS_INF, _NEG_INF):
        return y
    s = x + y
    if s > _POS_INF or s < _NEG_INF:  # (TVM: an overflow saturates, by the sign of x)
        return _POS_INF if x > 0 else _NEG_INF
    return s


def _inf_mul(x: int, y: int) -> int:
    p = x * y
    if _NEG_INF <= p <= _POS_INF:
        return p
    return _POS_INF if (x > 0) == (y > 0) else _NEG_INF


def _inf_floordiv(x: int, y: int) -> int:
    if x in (_POS_INF, _NEG_INF):
        return x if y > 0 else -x
    return x // y


def _trunc_mod(x: int, y: int) -> int:
    """C's x % y (the sign of x)."""
    r = abs(x) % abs(y)
    return r if x >= 0 else -r


def _mod_entry(coeff: int, base: int) -> tuple[int, int]:
    """A ModularSet entry as TVM normalizes it: coeff >= 0, 0 <= base < coeff."""
    if coeff < 0:
        coeff, base = -coeff, -base
    if coeff != 0:
        base = _trunc_mod(base, coeff)
        if base < 0:
            base += coeff
    return coeff, base


def _mod_union(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    coeff = math.gcd(a[0], b[0])
    if coeff == 0:
        return a if a[1] == b[1] else (1, 0)
    base0, base1 = _trunc_mod(a[1], coeff), _trunc_mod(b[1], coeff)
    if base0 == base1:
        return _mod_entry(coeff, base0)
    return _mod_entry(math.gcd(math.gcd(base0, base1), coeff), base0)


def _corners(a: tuple[int, int], b: tuple[int, int], op) -> tuple[int, int]:
    vs = [op(a[0], b[0]), op(a[1], b[1]), op(a[0], b[1]), op(a[1], b[0])]
    return min(vs), max(vs)


class LazyArith:
    """Arith's facts and its `bounds` and `equal`, answered without TVM where that answer is certain to be TVM's:

    - bounds: the interval arithmetic of TVM's ConstIntBound (its infinities, its saturation, its rules for
      floor division and modulo by a positive constant -- the modulo narrowed by ModularSet's residues as TVM
      does --, min and max), over the same variables, atoms and facts;
    - equal: true when both sides are the same sum of multiples of the same terms (variables, the thread and
      block indices, and otherwise identical subtrees), which TVM's simplifier cancels to 0.

    Both are sound on their own (intervals and residues bound the true values; equal sums are equal), so a
    difference from TVM could only cost a partition, never make a wrong one. Anything else (a boolean, a
    difference it cannot see as 0) goes to an Arith built on first need with every fact so far, atoms included
    with the bounds they were given, so that its answers are those it would have given from the start;
    `fallbacks` counts the questions asked of it."""

    def __init__(self) -> None:
        self._vars: dict[T.Var, tuple[T.Var, tuple[int, int]]] = {}  # var -> (var, its bound)
        self._bound: set[T.Var] = set()  # the variables given a bound (bound_var)
        self._thread: int | None = None
        self._blocks: dict[int, tuple[int, int]] = {}
        self._grid: list[tuple[int, T.Expr]] = []  # (axis, extent) of a symbolic grid
        self._atoms: dict[T.Expr, tuple[T.Expr, tuple[int, int]]] = {}  # node -> (node, bound), in creation order
        self._orders: dict[T.Expr, int] = {}  # node -> a number, for the term keys of _linear to sort by
        self._tvm: Arith | None = None
        self._scope: contextlib.ExitStack | None = None  # inside kernel_scope
        self.fallbacks = 0

    # ------------------------------------------------------------ facts (as Arith's)
    def bound_var(self, v: T.Var, lo: int | None, hi: int | None) -> None:
        self._var_bound(v)
        self._vars[v] = (v, (_NEG_INF if lo is None else lo, _POS_INF if hi is None else hi))
        self._bound.add(v)
        if self._tvm is not None:
            self._tvm.bound_var(v, lo, hi)

    def bound_thread(self, threads: int) -> None:
        self._thread = threads
        if self._tvm is not None:
            self._tvm.bound_thread(threads)

    def bound_block(self, axis: int, extent: T.Expr) -> None:
        self._blocks[axis] = (0, int(extent.value) - 1 if isinstance(extent, T.Const) else _POS_INF)
        if not isinstance(extent, T.Const):
            self._grid.append((axis, extent))
            try:
                self._interval(extent)  # (Arith converts it now: its atoms are made now)
            except _NeedsTvm:
                pass
        if self._tvm is not None:
            self._tvm.bound_block(axis, extent)

    @contextlib.contextmanager
    def kernel_scope(self):
        with contextlib.ExitStack() as stack:
            if self._tvm is not None:
                stack.enter_context(self._tvm.kernel_scope())
            self._scope = stack
            try:
                yield
            finally:
                self._scope = None

    # ------------------------------------------------------------ questions
    def bounds(self, e: T.Expr) -> tuple[int | None, int | None] | None:
        if self._tvm is None:
            try:
                return self._bounds(e)
            except _NeedsTvm:
                pass
        return self._arith().bounds(e)

    def equal(self, a: T.Expr, b: T.Expr) -> bool:
        if self._tvm is None:
            try:
                if self._linear(a) == self._linear(b):
                    return True
            except _NeedsTvm:
                pass
        return self._arith().equal(a, b)

    # ------------------------------------------------------------ TVM, when needed
    def _arith(self) -> Arith:
        self.fallbacks += 1
        if self._tvm is None:
            ar = Arith()
            # the same facts: atoms first, with the bounds they were made with, then the variables' bounds
            for node, (lo, hi) in self._atoms.values():
                v = ar._fresh("atom", node.dtype, node)
                ar._set_bound(v, None if lo == _NEG_INF else lo, None if hi == _POS_INF else hi)
                ar._atoms[node] = (node, v)
            for v, (lo, hi) in self._vars.values():
                if v in self._bound or v.kind == "size":
                    ar.bound_var(v, None if lo == _NEG_INF else lo, None if hi == _POS_INF else hi)
            if self._thread is not None:
                ar.bound_thread(self._thread)
            for axis, (lo, hi) in sorted(self._blocks.items()):
                ar._set_bound(ar._block(axis), lo, None if hi == _POS_INF else hi)
            for axis, extent in self._grid:
                ar.bound_block(axis, extent)
            if self._scope is not None:
                self._scope.enter_context(ar.kernel_scope())
            self._tvm = ar
        return self._tvm

    # ------------------------------------------------------------ ConstIntBound, as TVM computes it
    def _bounds(self, e: T.Expr) -> tuple[int | None, int | None] | None:
        if _index_dtype(e.dtype) is None:
            return None
        lo, hi = self._interval(e)
        limit = (1 << (e.dtype.bits - 1)) - 1
        return (lo if lo != _NEG_INF and lo > -limit else None), (hi if hi != _POS_INF and hi < limit else None)

    def _var_bound(self, v: T.Var) -> tuple[int, int]:
        held = self._vars.get(v)
        if held is None:  # Arith.var: a runtime size is non-negative, anything else is its type's range
            held = (v, (0, _POS_INF) if v.kind == "size" else _everything(v.dtype))
            self._vars[v] = held
        return held[1]

    def _modelled(self, e: T.Expr) -> bool:
        """Whether Arith.to_tvm converts e node by node (else e is an atom)."""
        if isinstance(e, T.Binary) and e.op in _BINARY and e.a.dtype == e.dtype == e.b.dtype:
            return e.op not in ("//", "%") or (isinstance(e.b, T.Const) and int(e.b.value) > 0)
        if isinstance(e, T.Call) and e.func in ("min", "max") and len(e.args) == 2:
            return all(x.dtype == e.dtype for x in e.args)
        return isinstance(e, T.Const | T.Var | S.BlockIdx) or (isinstance(e, S.ThreadIdx) and self._thread is not None)

    def _interval(self, e: T.Expr) -> tuple[int, int]:
        dt = _index_dtype(e.dtype)
        if dt is None or dt == "bool":
            raise _NeedsTvm
        if not self._modelled(e):
            return self._atom(e)
        if isinstance(e, T.Const):
            return int(e.value), int(e.value)
        if isinstance(e, T.Var):
            return self._var_bound(e)
        if isinstance(e, S.ThreadIdx):
            return 0, self._thread - 1
        if isinstance(e, S.BlockIdx):
            if e.axis not in self._blocks:
                self._blocks[e.axis] = (0, _POS_INF)
            return self._blocks[e.axis]
        if isinstance(e, T.Call):
            a, b = self._interval(e.args[0]), self._interval(e.args[1])
            pick = min if e.func == "min" else max
            return pick(a[0], b[0]), pick(a[1], b[1])
        a, b = self._interval(e.a), self._interval(e.b)
        if e.op == "+":
            return _inf_add(a[0], b[0]), _inf_add(a[1], b[1])
        if e.op == "-":
            return _inf_add(a[0], -b[1]), _inf_add(a[1], -b[0])
        if e.op == "*":
            return _corners(a, b, _inf_mul)
        if e.op == "//":
            return _corners(a, b, _inf_floordiv)
        # floor modulo by a positive constant: the interval, narrowed by what a's residues allow
        cap = _inf_add(b[1], -1)
        if a[0] >= 0:
            bound = a if a[1] < b[0] else (0, min(a[1], cap))
        else:
            bound = (0, cap)
        modulus = b[0]
        coeff, base = self._modular(e.a)
        g = math.gcd(coeff, modulus)
        if g > 1:
            lo = base % g
            return max(bound[0], lo), min(bound[1], modulus - g + lo)
        return bound

    def _modular(self, e: T.Expr) -> tuple[int, int]:
        """TVM's ModularSet of e: (coeff, base), e = coeff * k + base for some integer k (coeff 0: the constant
        base). Only the forms _interval models reach here; anything else is everything, (1, 0)."""
        if not self._modelled(e) or isinstance(e, T.Var | S.ThreadIdx | S.BlockIdx):
            return 1, 0
        if isinstance(e, T.Const):
            return 0, int(e.value)
        if isinstance(e, T.Call):  # min, max: the union
            return _mod_union(self._modular(e.args[0]), self._modular(e.args[1]))
        if e.op in ("//", "%"):
            c, val = self._modular(e.a), int(e.b.value)
            if e.op == "//":
                if c[0] % val == 0:
                    if c[1] == 0:
                        return _mod_entry(c[0] // val, 0)
                    if c[1] > 0:
                        return _mod_entry(c[0] // val, c[1] // val)
                return 1, 0
            g = math.gcd(c[0], val)
            if _trunc_mod(c[1], g) == 0 or c[1] > 0:
                return _mod_entry(g, _trunc_mod(c[1], g))
            return 1, 0
        a, b = self._modular(e.a), self._modular(e.b)
        if e.op in ("+", "-"):
            return _mod_entry(math.gcd(a[0], b[0]), a[1] + b[1] if e.op == "+" else a[1] - b[1])
        pq, pm, qn = a[0] * b[0], a[0] * b[1], a[1] * b[0]
        return _mod_entry(math.gcd(pq, math.gcd(pm, qn)), a[1] * b[1])

    def _atom(self, e: T.Expr) -> tuple[int, int]:
        """The bound Arith's atom for e has: fixed when the atom is made (Arith._atom, _atom_bound)."""
        held = self._atoms.get(e)
        if held is not None and held[0] is e:
            return held[1]
        if _index_dtype(e.dtype) in (None, "bool"):
            raise _NeedsTvm
        bound = self._atom_bound(e)
        if self._tvm is not None:  # a part of it needed TVM: so does the whole question
            raise _NeedsTvm
        whole = _everything(D.I64 if _index_dtype(e.dtype) == "int64" else D.I32)
        if bound is not None:
            lo, hi = bound
            whole = (_NEG_INF if lo is None else lo, _POS_INF if hi is None else hi)
        self._atoms[e] = (e, whole)
        return whole

    _atom_bound = Arith._atom_bound  # (the same rules, through this class's bounds)

    # ------------------------------------------------------------ sums of multiples of terms
    def _linear(self, e: T.Expr) -> tuple:
        """e as a constant and a sorted tuple of (term key, coefficient): equal for expressions that TVM's
        simplifier sees as the same sum."""
        terms: dict = {}
        const = self._collect(e, 1, terms)
        return const, tuple(sorted((k, c) for k, c in terms.items() if c != 0))

    def _collect(self, e: T.Expr, scale: int, terms: dict) -> int:
        if _index_dtype(e.dtype) in (None, "bool"):
            raise _NeedsTvm
        if isinstance(e, T.Const):
            return scale * int(e.value)
        if isinstance(e, T.Binary) and e.op in ("+", "-") and self._modelled(e):
            a = self._collect(e.a, scale, terms)
            return a + self._collect(e.b, scale if e.op == "+" else -scale, terms)
        if isinstance(e, T.Binary) and e.op == "*" and self._modelled(e):
            for c, x in ((e.a, e.b), (e.b, e.a)):
                if isinstance(c, T.Const):
                    return self._collect(x, scale * int(c.value), terms)
        k = self._term(e)
        terms[k] = terms.get(k, 0) + scale
        return 0

    def _order(self, e: T.Expr) -> int:
        """A number per variable or atom, in the order first asked about: term keys sort by it (nodes do not order)."""
        return self._orders.setdefault(e, len(self._orders))

    def _term(self, e: T.Expr):
        """A key equal for two terms exactly when Arith converts them to the same TVM expression."""
        if not self._modelled(e):
            self._atom(e)  # (made now, as Arith would make it: its bound is fixed from here on)
            return ("atom", self._order(e))
        if isinstance(e, T.Const):
            return ("const", e.dtype.name, int(e.value))
        if isinstance(e, T.Var):
            self._var_bound(e)
            return ("var", self._order(e))
        if isinstance(e, S.ThreadIdx):
            return ("tid",)
        if isinstance(e, S.BlockIdx):
            return ("block", e.axis)
        if isinstance(e, T.Call):
            return (e.func, e.dtype.name, self._term(e.args[0]), self._term(e.args[1]))
        return (e.op, e.dtype.name, self._term(e.a), self._term(e.b))
