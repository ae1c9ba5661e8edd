"""Structural verifier for Tile IR, run between passes in tests (and with `tilec --verify-ir`).

It checks invariants every pass must keep: variables are defined before use and in scope; buffers
are parameters or allocated before use; index lists and regions have the buffer's rank; operands
of arithmetic have the result's dtype; conditions are bool. A failure is a compiler bug, reported
as an internal error naming the pass that broke the invariant.
"""

from __future__ import annotations

from . import dtypes as D
from . import tile as T
from .printer import expr_str
from .visit import sub_exprs


class VerifyError(Exception):
    pass


def verify(module: T.Module) -> None:
    for k in module.kernels:
        _Verifier(k).run()


class _Verifier:
    def __init__(self, k: T.Kernel):
        self.k = k
        self.vars: list[set[T.Var]] = [set(k.size_vars + k.block_vars)
                                     | {p for p in k.params if isinstance(p, T.Var)}]
        self.buffers: set[T.Buffer] = {p for p in k.params if isinstance(p, T.Buffer)}

    def fail(self, msg: str) -> VerifyError:
        return VerifyError(f"kernel {self.k.name}: {msg}")

    def defined(self, v: T.Var) -> bool:
        return any(v in s for s in self.vars)

    def expr(self, e: T.Expr) -> None:
        for x in sub_exprs(e):
            if isinstance(x, T.Var) and x.kind != "thread" and not self.defined(x):  # (the thread index)
                raise self.fail(f"variable '{x.name}' used outside its scope in {expr_str(e)}")
            if isinstance(x, T.Load):
                self.buffer(x.buffer)
                if len(x.indices) != len(x.buffer.shape):
                    raise self.fail(f"load of '{x.buffer.name}' with {len(x.indices)} indices")
                if x.dtype != x.buffer.dtype:
                    raise self.fail(f"load of '{x.buffer.name}' typed {x.dtype}")
            if isinstance(x, T.Binary) and x.op not in ("and", "or"):
                if x.a.dtype != x.dtype or x.b.dtype != x.dtype:
                    raise self.fail(f"operand types {x.a.dtype}, {x.b.dtype} of {x.dtype} '{x.op}' in {expr_str(e)}")
            if isinstance(x, T.Compare) and (x.dtype != D.BOOL or x.a.dtype != x.b.dtype):
                raise self.fail(f"ill-typed comparison {expr_str(x)}")
            if isinstance(x, T.Select) and not x.cond.dtype.is_bool:
                raise self.fail(f"select condition is {x.cond.dtype}")

    def buffer(self, b: T.Buffer) -> None:
        if b not in self.buffers:
            raise self.fail(f"buffer '{b.name}' used before its allocation")

    def region(self, r: T.Region) -> None:
        self.buffer(r.buffer)
        if not (len(r.starts) == len(r.extents) == len(r.buffer.shape)):
            raise self.fail(f"region of '{r.buffer.name}' has the wrong rank")
        for e in r.starts + r.extents:
            self.expr(e)

    def run(self) -> None:
        for g in self.k.grid:
            self.expr(g)
        self.body(self.k.body)

    def body(self, body: list[T.Stmt]) -> None:
        self.vars.append(set())
        for s in body:
            self.stmt(s)
        self.vars.pop()

    def stmt(self, s: T.Stmt) -> None:
        if isinstance(s, T.Alloc):
            b = s.buffer
            if b.scope not in T.SCOPES or (b.scope == "global" and b.view_of is None):
                raise self.fail(f"bad scope for '{b.name}'")
            if b.view_of is not None:
                self.buffer(b.view_of)
                if b.view_of.scope != b.scope or b.is_output != b.view_of.is_output or s.init is not None:
                    raise self.fail(f"view '{b.name}' of '{b.view_of.name}' differs from it in scope or writability")
                for d in b.shape:
                    self.expr(d)
            self.buffers.add(s.buffer)
            if s.init is not None:
                self.expr(s.init)
        elif isinstance(s, T.Store):
            self.buffer(s.buffer)
            for i in s.indices:
                self.expr(i)
            self.expr(s.value)
            if s.value.dtype != s.buffer.dtype:
                raise self.fail(f"store of {s.value.dtype} into {s.buffer.dtype} buffer '{s.buffer.name}'")
        elif isinstance(s, T.Assign):
            self.expr(s.value)
            if s.value.dtype != s.var.dtype:
                raise self.fail(f"assignment of {s.value.dtype} to {s.var.dtype} '{s.var.name}'")
            self.vars[-1].add(s.var)
        elif isinstance(s, T.For):
            for e in s.extents + [x for x in (s.begin, s.step) if x is not None]:
                self.expr(e)
            if len(s.vars) != len(s.extents):
                raise self.fail("loop variables and extents differ in number")
            self.vars.append(set(s.vars))
            self.body(s.body)
            self.vars.pop()
        elif isinstance(s, T.If):
            self.expr(s.cond)
            if not s.cond.dtype.is_bool:
                raise self.fail("if condition is not bool")
            self.body(s.then_body)
            self.body(s.else_body)
        elif isinstance(s, T.While):
            self.expr(s.cond)
            if not s.cond.dtype.is_bool:
                raise self.fail("while condition is not bool")
            self.body(s.body)
        elif T.operand_fields(type(s)):  # a tile op: the regions and operands it declares read or written
            for f in T.operand_fields(type(s)):
                v = getattr(s, f)
                self.region(v) if isinstance(v, T.Region) else self.expr(v)
        elif isinstance(s, T.AnnotateLayout):
            self.buffer(s.buffer)
