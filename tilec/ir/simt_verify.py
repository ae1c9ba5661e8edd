"""Structural invariants of SIMT IR, checked after lowering (tilec.compile(..., verify=True), `--verify-ir`).

  * every variable is defined before it is used and in scope: kernel parameters and sizes, `Declare`,
    a loop's variable inside its loop, and the launch values a LoweringExtension added to the kernel's
    parameters (sm90's TMA tensor maps);
  * every buffer an access names (Ref, AddrOf, SStore) is a parameter, one of the kernel's shared buffers
    or a register array declared (DeclareArray) in an enclosing scope;
  * a register array indexed by a constant is indexed inside its size;
  * shared buffers are listed once, and an alias views a listed buffer;
  * every call and intrinsic names a definition of tilec/ir/intrinsics.py, with parameters of the types it
    declares, and (given the target) one the target offers.
A violation is a compiler bug, reported as VerifyError naming the kernel and what broke.
"""

from __future__ import annotations

from . import simt as S
from . import tile as T
from .intrinsics import get as intrinsic_def
from .intrinsics import offered
from .visit import sub_exprs


class VerifyError(Exception):
    pass


def verify(module: S.SModule, target=None) -> None:
    for k in module.kernels:
        _Verifier(k, target).run()


class _Verifier:
    def __init__(self, k: S.SKernel, target=None):
        self.k = k
        self.target = target
        self.shared_set = set(k.shared)

    def fail(self, msg: str):
        raise VerifyError(f"kernel '{self.k.name}': {msg}")

    def run(self) -> None:
        k = self.k
        if len(self.shared_set) != len(k.shared):
            self.fail("a shared buffer is listed twice")
        for b in k.shared:
            if b.scope != "shared":
                self.fail(f"'{b.name}' is listed as shared but has scope {b.scope}")
            if b.alias_of is not None and b.alias_of not in self.shared_set:
                self.fail(f"shared buffer '{b.name}' aliases a buffer the kernel does not list")
        scope: set[T.Var] = set()
        buffers: set[S.SBuffer] = set(self.shared_set)
        for p in k.params:
            (buffers if isinstance(p, S.SBuffer) else scope).add(p)
        scope.update(v for v in k.size_vars)
        scope.update(v for v in k.attrs.get("tensor_map_params", []))
        self.body(k.body, scope, buffers)

    def body(self, body: list[S.SStmt], scope: set[T.Var], buffers: set[S.SBuffer]) -> None:
        scope, buffers = set(scope), set(buffers)  # declarations end with their block
        for s in body:
            if isinstance(s, S.Declare):
                if s.value is not None:
                    self.exprs([s.value], scope, buffers)
                scope.add(s.var)
            elif isinstance(s, S.DeclareArray):
                if s.init is not None:
                    self.exprs([s.init], scope, buffers)
                if s.buffer.scope == "global":  # a view of a tensor: a pointer to a buffer in scope
                    if s.buffer.alias_of is None or s.buffer.alias_of not in buffers:
                        self.fail(f"view '{s.buffer.name}' of a tensor that is not in scope")
                elif s.buffer.scope != "local":
                    self.fail(f"register array '{s.buffer.name}' has scope {s.buffer.scope}")
                buffers.add(s.buffer)
            elif isinstance(s, S.SStore):
                self.access(s.buffer, s.index, buffers, "store to")
                self.exprs([s.index, s.value], scope, buffers)
            elif isinstance(s, S.SAssign):
                if s.var not in scope:
                    self.fail(f"assignment to '{s.var.name}' before its declaration")
                self.exprs([s.value], scope, buffers)
            elif isinstance(s, S.SFor):
                self.exprs([x for x in (s.begin, s.extent, s.step) if x is not None], scope, buffers)
                self.body(s.body, scope | {s.var}, buffers)
            elif isinstance(s, S.SWhile):
                self.exprs([s.cond], scope, buffers)
                self.body(s.body, scope, buffers)
            elif isinstance(s, S.SIf):
                self.exprs([s.cond], scope, buffers)
                self.body(s.then_body, scope, buffers)
                self.body(s.else_body, scope, buffers)
            elif isinstance(s, S.SCall):
                self.intrinsic(s.op, True, s.params)
                self.exprs(list(s.args), scope, buffers)
            elif not isinstance(s, S.Barrier | S.SComment):
                self.fail(f"unknown statement {type(s).__name__}")

    def exprs(self, exprs: list[T.Expr], scope: set[T.Var], buffers: set[S.SBuffer]) -> None:
        for e in exprs:
            for x in sub_exprs(e):
                if isinstance(x, T.Var) and x not in scope:
                    self.fail(f"'{x.name}' is used outside the scope of its declaration")
                elif isinstance(x, S.Ref | S.AddrOf):
                    self.access(x.buffer, x.index, buffers, "access to")
                elif isinstance(x, S.Intrinsic):
                    self.intrinsic(x.name, False, {})
                elif isinstance(x, T.Load):
                    self.fail(f"a Tile IR load of '{x.buffer.name}' survived lowering")

    def access(self, b: S.SBuffer, index: T.Expr, buffers: set[S.SBuffer], what: str) -> None:
        if b not in buffers:
            self.fail(f"{what} '{b.name}', which is not declared here")
        if b.scope == "local" and isinstance(index, T.Const) and b.size is not None \
                and not 0 <= int(index.value) < b.size:
            self.fail(f"{what} '{b.name}'[{index.value}] outside its {b.size} elements")

    def intrinsic(self, op: str, statement: bool, params: dict) -> None:
        d = intrinsic_def(op)
        if d is None or d.statement != statement:
            self.fail(f"'{op}' is not a defined intrinsic {'statement' if statement else 'expression'}")
        try:
            d.check(params)
        except TypeError as e:
            self.fail(str(e))
        if self.target is not None and not offered(d, self.target):
            self.fail(f"intrinsic '{op}' needs '{d.feature}', which {self.target.name} does not offer")
