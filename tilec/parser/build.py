"""Syntax tree to Tile IR: resolve names and imports, evaluate constants, inline `def` helpers,
type every expression and turn tile-op calls into typed tile-op statements.

Errors are collected per statement (a bad statement is reported and skipped) so that one run
reports as many problems as it can.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..diagnostics import CompileError, Reporter, SourceManager, Span
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import as_int, constant_difference, convert, fold, linear_form
from . import ast as A
from .parse import parse


class _Fail(Exception):
    """Abandon the current statement; the diagnostic has already been reported."""


MATH_FUNCS = {
    "exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sin": 1, "cos": 1,
    "floor": 1, "ceil": 1, "sigmoid": 1, "abs": 1, "max": 2, "min": 2, "pow": 2,
}
LOOP_FUNCS = {"Parallel": "parallel", "Pipelined": "pipelined", "Serial": "serial", "serial": "serial",
              "range": "serial", "Unroll": "unroll", "unroll": "unroll", "Persistent": None}
ALLOC_FUNCS = {"alloc_shared": "shared", "alloc_fragment": "fragment", "alloc_local": "local",
               "alloc_var": "var"}
REDUCE_FUNCS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min", "reduce_abssum": "abssum",
                "reduce_absmax": "absmax"}
ATOMIC_FUNCS = {"atomic_add": "add", "atomic_max": "max", "atomic_min": "min"}
TILE_OPS = {"copy", "gemm", "fill", "clear", "print", "annotate_layout", "use_swizzle", *REDUCE_FUNCS,
            *ATOMIC_FUNCS}
BUILTINS = set(MATH_FUNCS) | set(LOOP_FUNCS) | set(ALLOC_FUNCS) | TILE_OPS | {
    "Kernel", "ceildiv", "if_then_else", "cast", "Cast", "infinity", "max_value", "min_value", "True", "False",
}
MAX_INLINE_DEPTH = 32
MAX_EXPR_NODES = 10_000  # limits on what an inlined helper may expand to
MAX_EXPR_DEPTH = 200
MAX_INT_POWER = 16  # x ** n with a runtime integer x becomes n - 1 multiplies


@dataclasses.dataclass
class _Helper:
    decl: A.DefDecl
    scope: _Scope  # where it was defined (its file's globals)


class _Scope:
    def __init__(self, parent: _Scope | None = None):
        self.parent = parent
        self.names: dict[str, object] = {}

    def lookup(self, name: str):
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                value = s.names[name]
                if value is _POISONED:
                    raise _Fail()  # its definition failed and was reported; do not cascade
                return value
            s = s.parent
        return None

    def is_bound(self, name: str) -> bool:
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                return True
            s = s.parent
        return False

    def poison(self, name: str) -> None:
        """Mark a name whose definition failed: later uses are skipped instead of reported again."""
        if not self.is_bound(name):
            self.names[name] = _POISONED

    def bind(self, name: str, value) -> None:
        self.names[name] = value


_POISONED = object()


class Builder:
    def __init__(self, sources: SourceManager, include_dirs: list[str], defines: dict[str, object],
                 reporter: Reporter):
        self.sources = sources
        self.include_dirs = include_dirs
        self.defines = defines
        self.rep = reporter
        self.files: list[str] = []
        self.consts: dict[str, object] = {}
        self.used_defines: set[str] = set()
        self.kernels: list[T.Kernel] = []
        self.inline_depth = 0
        # per-kernel state
        self.block: list[T.Stmt] = []
        self.names_in_kernel: set[str] = set()
        self.in_parallel = 0
        self.parallel_depth: dict[int, int] = {}  # Parallel nesting at which a local or var was made
        self.at_kernel_top = False
        self.size_vars: dict[str, T.Var] = {}

    # ------------------------------------------------------------ errors
    def fail(self, msg: str, span: Span | None) -> _Fail:
        self.rep.error(msg, span)
        return _Fail()

    # ------------------------------------------------------------ files
    def build_file(self, path: str, text: str, scope: _Scope, is_main: bool, chain: tuple[str, ...] = ()):
        self.sources.add(path, text)
        self.files.append(path)
        tree = parse(text, path)
        for decl in tree.decls:
            try:
                if isinstance(decl, A.ImportDecl):
                    self.import_file(decl, path, scope, chain + (os.path.abspath(path),))
                elif isinstance(decl, A.ConstDecl):
                    try:
                        self.const_decl(decl, scope)
                    except _Fail:
                        scope.poison(decl.name)
                        raise
                elif isinstance(decl, A.DefDecl):
                    self.check_redefinition(decl.name, decl.span, scope)
                    scope.bind(decl.name, _Helper(decl, scope))
                elif isinstance(decl, A.KernelDecl):
                    self.check_redefinition(decl.name, decl.span, scope)
                    if is_main:
                        kernel = self.kernel_decl(decl, scope)
                        if kernel is not None:
                            self.kernels.append(kernel)
                    scope.bind(decl.name, decl)
            except _Fail:
                pass

    def check_redefinition(self, name: str, span: Span, scope: _Scope) -> None:
        if name in scope.names:
            raise self.fail(f"redefinition of '{name}'", span)

    def import_file(self, decl: A.ImportDecl, current: str, scope: _Scope, chain: tuple[str, ...]) -> None:
        candidates = [Path(current).parent / decl.path] + [Path(d) / decl.path for d in self.include_dirs]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            searched = ", ".join(str(c.parent) or "." for c in candidates)
            raise self.fail(f"cannot find imported file '{decl.path}' (searched: {searched})", decl.span)
        key = os.path.abspath(found)
        if key in chain:
            raise self.fail(f"circular import of '{decl.path}'", decl.span)
        if any(os.path.abspath(f) == key for f in self.files):
            return  # imported already; its names are global
        try:
            text = read_source(str(found))
        except CompileError as e:
            for d in e.diagnostics:
                self.rep.error(d.message, decl.span)
            raise _Fail() from None
        try:
            self.build_file(str(found), text, scope, is_main=False, chain=chain)
        except CompileError as e:
            self.rep.diagnostics.extend(e.diagnostics)
            raise _Fail() from None

    def const_decl(self, decl: A.ConstDecl, scope: _Scope) -> None:
        self.check_redefinition(decl.name, decl.span, scope)
        if decl.name in self.defines:
            value = self.defines[decl.name]
            self.used_defines.add(decl.name)
        else:
            value = self.const_value(decl.value, scope)
        scope.bind(decl.name, ("const", value))
        self.consts[decl.name] = value

    def const_value(self, node: A.Node, scope: _Scope):
        if isinstance(node, A.String):
            return node.value
        if isinstance(node, A.Name):
            dt = self.dtype_of_name(node.id, scope)
            if dt is not None:
                return dt
        e = fold(self.expr(node, scope))
        if not isinstance(e, T.Const):
            raise self.fail("a const must be a compile-time value", node.span)
        return e.value

    # ------------------------------------------------------------ types
    def dtype_of_name(self, name: str, scope: _Scope) -> D.DType | None:
        bound = scope.lookup(name)
        if isinstance(bound, tuple) and bound[0] == "const":
            if isinstance(bound[1], str):  # const dtype = "float16", as TileLang kernels write it
                return D.lookup(bound[1])
            return bound[1] if isinstance(bound[1], D.DType) else None
        if bound is not None:
            return None
        return D.lookup(name)

    def dtype_arg(self, node: A.Node, scope: _Scope) -> D.DType:
        if isinstance(node, A.String):
            dt = D.lookup(node.value)
        elif isinstance(node, A.Name):
            dt = self.dtype_of_name(node.id, scope)
        elif isinstance(node, A.Attribute):
            dt = D.lookup(node.attr)
        else:
            dt = None
        if dt is None:
            names = " ".join(d.name for d in D.ALL)
            raise self.fail(f"expected a dtype ({names})", node.span)
        return dt

    # ------------------------------------------------------------ kernels
    def kernel_decl(self, decl: A.KernelDecl, gscope: _Scope) -> T.Kernel | None:
        scope = _Scope(gscope)
        self.size_vars = {}
        self.names_in_kernel = set()
        params: list[T.Buffer | T.Var] = []
        seen: set[str] = set()
        for p in decl.params:
            if p.name in seen:
                self.rep.error(f"duplicate parameter '{p.name}'", p.span)
                continue
            seen.add(p.name)
            try:
                params.append(self.kernel_param(p, scope))
            except _Fail:
                scope.poison(p.name)
        for p in params:
            scope.bind(p.name, p)
            self.names_in_kernel.add(p.name)
        body = [s for s in decl.body if not isinstance(s, A.PassStmt)
                and not (isinstance(s, A.ExprStmt) and isinstance(s.value, A.String))]  # docstrings
        for p in params:
            if isinstance(p, T.Var) and p.name in self.size_vars:
                self.rep.error(f"'{p.name}' is both a runtime size (a tensor dimension) and a scalar parameter; "
                               "rename one of them", p.span)
        if len(body) != 1 or not _is_kernel_launch(body[0]):
            span = body[0].span if body else decl.span
            self.rep.error("a kernel body must be one `with Kernel(grid..., threads=N) as (bx, by, ...):` "
                           "block", span)
            return None
        launch = body[0]
        assert isinstance(launch, A.WithStmt)
        self.kernel_attrs: dict[str, object] = {}
        try:
            grid, threads = self.kernel_launch_args(launch.context, scope)
        except _Fail:
            return None
        if len(launch.targets) > 3:
            self.rep.error("at most three block indices (bx, by, bz)", launch.targets[3][1])
            return None
        block_vars = []
        for i, axis in enumerate("xyz"):
            if i < len(launch.targets):
                name, span = launch.targets[i]
            else:
                name, span = f"b{axis}", launch.span
            v = T.Var(D.I32, span, self.unique(name), "block")
            block_vars.append(v)
            if i < len(launch.targets):
                scope.bind(name, v)
        self.block = []
        self.at_kernel_top = True
        self.stmts(launch.body, _Scope(scope))
        return T.Kernel(decl.name, params, list(self.size_vars.values()), grid, threads, block_vars,
                        self.block, decl.span, dict(self.kernel_attrs))

    def unique(self, name: str) -> str:
        """A name not used yet in this kernel (inlined helpers may reuse the caller's names)."""
        out, n = name, 1
        while out in self.names_in_kernel:
            n += 1
            out = f"{name}_{n}"
        self.names_in_kernel.add(out)
        return out

    def kernel_param(self, p: A.KernelParam, scope: _Scope) -> T.Buffer | T.Var:
        dt = self.dtype_arg(A.Name(p.type.span, p.type.dtype) if "." not in p.type.dtype
                            else A.Attribute(p.type.span, A.Name(p.type.span, "T"), p.type.dtype.split(".")[-1]),
                            scope)
        if p.type.dims is None:
            if p.is_output:
                raise self.fail("a scalar parameter cannot be `out`; use a one-element tensor", p.span)
            return T.Var(dt, p.span, p.name, "param")
        shape: list[T.Expr] = []
        for d in p.type.dims:
            if isinstance(d, A.Number) and isinstance(d.value, int):
                shape.append(T.Const(D.I32, d.span, d.value))
            elif isinstance(d, A.Name):
                bound = scope.lookup(d.id)
                if isinstance(bound, tuple) and bound[0] == "const":
                    if not isinstance(bound[1], int) or isinstance(bound[1], bool):
                        raise self.fail(f"dimension '{d.id}' is a const of value {bound[1]!r}, not an integer",
                                        d.span)
                    shape.append(T.Const(D.I32, d.span, bound[1]))
                else:
                    if d.id not in self.size_vars:
                        self.size_vars[d.id] = T.Var(D.I32, d.span, d.id, "size")
                        self.names_in_kernel.add(d.id)
                        scope.bind(d.id, self.size_vars[d.id])
                    shape.append(self.size_vars[d.id])
            else:
                raise self.fail("a tensor dimension must be a name (a runtime size or a const) or an integer",
                                d.span)
        return T.Buffer(p.name, dt, shape, "global", p.span, is_output=p.is_output)

    def kernel_launch_args(self, node: A.Node, scope: _Scope) -> tuple[list[T.Expr], int]:
        assert isinstance(node, A.CallExpr)
        if not 1 <= len(node.args) <= 3:
            raise self.fail(f"Kernel takes 1 to 3 grid extents, got {len(node.args)}", node.span)
        grid = [self.int_expr(a, scope) for a in node.args]
        for g, a in zip(grid, node.args, strict=True):
            n = as_int(fold(g))
            if n is not None and n <= 0:
                raise self.fail(f"a grid extent must be positive, this one is {n}", a.span)
        while len(grid) < 3:
            grid.append(T.Const(D.I32, node.span, 1))
        threads = 128
        for kw in node.kwargs:
            if kw.name == "threads":
                threads = self.const_int(kw.value, scope, "threads")
                if threads <= 0:
                    raise self.fail("threads must be positive", kw.value.span)
            elif kw.name == "prelude":
                pass
            elif kw.name == "warp_specialize":
                self.kernel_attrs["warp_specialize"] = self.const_bool(kw.value, scope, "warp_specialize")
            elif kw.name == "persistent":
                self.kernel_attrs["persistent"] = self.const_bool(kw.value, scope, "persistent")
            else:
                raise self.fail(f"unknown Kernel argument '{kw.name}' (expected threads=, warp_specialize= or "
                                "persistent=)", kw.span)
        return grid, threads

    # ------------------------------------------------------------ statements
    def stmts(self, body: list[A.Node], scope: _Scope) -> None:
        for s in body:
            try:
                self.stmt(s, scope)
            except _Fail:
                if isinstance(s, A.AssignStmt) and isinstance(s.target, A.Name) and s.op is None:
                    scope.poison(s.target.id)

    def nested(self, body: list[A.Node], scope: _Scope) -> list[T.Stmt]:
        saved, saved_top = self.block, self.at_kernel_top
        self.block, self.at_kernel_top = [], False
        try:
            self.stmts(body, _Scope(scope))
            return self.block
        finally:
            self.block, self.at_kernel_top = saved, saved_top

    def emit(self, s: T.Stmt) -> None:
        self.block.append(s)

    def stmt(self, s: A.Node, scope: _Scope) -> None:
        if isinstance(s, A.PassStmt):
            return
        if isinstance(s, A.AssignStmt):
            return self.assign(s, scope)
        if isinstance(s, A.ExprStmt):
            return self.expr_stmt(s, scope)
        if isinstance(s, A.ForStmt):
            return self.for_stmt(s, scope)
        if isinstance(s, A.IfStmt):
            cond = self.bool_expr(s.cond, scope)
            then_body = self.nested(s.body, scope)
            else_body = self.nested(s.orelse, scope)
            return self.emit(T.If(s.span, cond, then_body, else_body))
        if isinstance(s, A.WithStmt):
            raise self.fail("`with Kernel(...)` may only be the body of a kernel", s.span)
        if isinstance(s, A.ReturnStmt):
            raise self.fail("`return` outside a def helper", s.span)
        raise self.fail("unsupported statement", s.span)

    def assign(self, s: A.AssignStmt, scope: _Scope) -> None:
        target = s.target
        if isinstance(target, A.Name):
            name = target.id
            if s.op is None and isinstance(s.value, A.CallExpr) and _callee(s.value) in ALLOC_FUNCS:
                return self.alloc(name, s.value, scope, target.span)
            bound = scope.lookup(name)
            if isinstance(bound, T.Buffer) and bound.scope == "var":
                self.check_parallel_update(bound, name, target.span)
                value = self.expr(s.value, scope)
                if s.op:
                    value = self.binary(s.op, T.Load(bound.dtype, target.span, bound, [_zero(s.span)]), value,
                                        s.span)
                return self.emit(T.Store(s.span, bound, [_zero(s.span)], self.cast(value, bound.dtype)))
            if isinstance(bound, T.Var) and bound.kind == "local":
                self.check_parallel_update(bound, name, target.span)
                value = self.expr(s.value, scope)
                if s.op:
                    value = self.binary(s.op, bound, value, s.span)
                return self.emit(T.Assign(s.span, bound, self.cast(value, bound.dtype)))
            if bound is not None and not (isinstance(bound, T.Var) and bound.kind == "local"):
                what = _describe_binding(bound)
                raise self.fail(f"cannot assign to '{name}': it is {what}", target.span)
            if s.op:
                raise self.fail(f"use of undefined name '{name}'", target.span)
            value = self.expr(s.value, scope)
            if value.dtype.is_bool and isinstance(value, T.Const):
                pass
            var = T.Var(value.dtype, target.span, self.unique(name), "local")
            self.parallel_depth[id(var)] = self.in_parallel
            scope.bind(name, var)
            return self.emit(T.Assign(s.span, var, value))
        if isinstance(target, A.Subscript):
            buf = self.buffer_ref(target.value, scope)
            if buf.scope == "global" and not buf.is_output:
                raise self.fail(f"cannot assign to input tensor '{buf.name}'; declare it `out` in the kernel "
                                "signature", target.span)
            indices = self.element_indices(buf, target, scope)
            value = self.expr(s.value, scope)
            if s.op:
                value = self.binary(s.op, T.Load(buf.dtype, target.span, buf, indices), value, s.span)
            return self.emit(T.Store(s.span, buf, indices, self.cast(value, buf.dtype)))
        raise self.fail("cannot assign to this expression", target.span)

    def check_parallel_update(self, bound, name: str, span: Span) -> None:
        """Iterations of a Parallel loop run at once: one may not update a value they all share."""
        if self.in_parallel > self.parallel_depth.get(id(bound), 0):
            raise self.fail(f"cannot update '{name}' inside a Parallel loop: it is defined outside the loop and "
                            "the iterations run in parallel (accumulate into a fragment and use reduce_sum, or "
                            "use a Serial loop)", span)

    def alloc(self, name: str, call: A.CallExpr, scope: _Scope, span: Span) -> None:
        kind = _callee(call)
        bufscope = ALLOC_FUNCS[kind]
        if scope.lookup(name) is not None and name in scope.names:
            raise self.fail(f"'{name}' is already defined", span)
        if not self.at_kernel_top and bufscope in ("shared", "fragment"):
            raise self.fail(f"{kind} must be at the top level of the kernel body, not inside a loop or if",
                            call.span)
        if self.in_parallel:
            raise self.fail(f"{kind} cannot be used inside a Parallel loop; allocate before the loop", call.span)
        args, kwargs = self.call_args(call, ["shape", "dtype", "scope"] if bufscope != "var" else ["dtype", "init"])
        init = None
        if bufscope == "var":
            if "dtype" not in args:
                raise self.fail("alloc_var(dtype[, init]) needs a dtype", call.span)
            dt = self.dtype_arg(args["dtype"], scope)
            shape: list[T.Expr] = [T.Const(D.I32, call.span, 1)]
            if "init" in args:
                init = self.cast(self.expr(args["init"], scope), dt)
        else:
            if "shape" not in args or "dtype" not in args:
                raise self.fail(f"{kind}(shape, dtype) needs a shape and a dtype", call.span)
            dt = self.dtype_arg(args["dtype"], scope)
            shape_node = args["shape"]
            dims = shape_node.items if isinstance(shape_node, A.TupleExpr) else [shape_node]
            shape = []
            for d in dims:
                e = fold(self.int_expr(d, scope))
                shape.append(e)
            if not shape:
                raise self.fail("a buffer needs at least one dimension", shape_node.span)
        buf = T.Buffer(self.unique(name), dt, shape, bufscope, span)
        scope.bind(name, buf)
        self.parallel_depth[id(buf)] = self.in_parallel
        self.emit(T.Alloc(call.span, buf, init))

    def expr_stmt(self, s: A.ExprStmt, scope: _Scope) -> None:
        v = s.value
        if isinstance(v, A.CallExpr):
            fname = _callee(v)
            bound = scope.lookup(fname) if fname else None
            if isinstance(bound, _Helper):
                self.inline_helper(bound, v, scope, want_value=False)
                return
            if fname in TILE_OPS and bound is None:
                return self.tile_op(fname, v, scope)
        if isinstance(v, A.String):
            return  # a docstring
        raise self.fail("expression statement has no effect", s.span)

    def for_stmt(self, s: A.ForStmt, scope: _Scope) -> None:
        it = s.iter
        fname = _callee(it) if isinstance(it, A.CallExpr) else None
        if fname not in LOOP_FUNCS or scope.lookup(fname) is not None:
            raise self.fail("a loop iterates over Parallel(...), Pipelined(...), Serial(...), Unroll(...) or "
                            "range(...)", it.span)
        assert isinstance(it, A.CallExpr)
        kind = LOOP_FUNCS[fname]
        if kind is None:
            raise self.fail(f"{fname} loops are not supported", it.span)
        if self.in_parallel and kind != "serial" and kind != "unroll":
            raise self.fail(f"a {fname} loop cannot be nested inside a Parallel loop", it.span)
        begin = step = None
        num_stages = 0
        if kind == "parallel":
            if not it.args:
                raise self.fail("Parallel needs at least one extent", it.span)
            extents = [self.int_expr(a, scope) for a in it.args]
            for kw in it.kwargs:
                raise self.fail(f"unknown Parallel argument '{kw.name}'", kw.span)
            if len(s.targets) != len(extents):
                raise self.fail(f"Parallel over {len(extents)} dimension(s) binds {len(extents)} loop variable(s), "
                                f"not {len(s.targets)}", s.span)
        else:
            if len(s.targets) != 1:
                raise self.fail(f"{fname} binds one loop variable", s.span)
            args = [self.int_expr(a, scope) for a in it.args]
            if kind == "pipelined":
                if len(args) != 1:
                    raise self.fail("Pipelined(n, num_stages=k) takes one extent", it.span)
                num_stages = 2
                for kw in it.kwargs:
                    if kw.name == "num_stages":
                        num_stages = self.const_int(kw.value, scope, "num_stages")
                        if num_stages < 1:
                            raise self.fail("num_stages must be at least 1", kw.value.span)
                    elif kw.name in ("order", "stage", "group"):
                        pass  # TileLang scheduling hints; the pipeline planner decides
                    else:
                        raise self.fail(f"unknown Pipelined argument '{kw.name}' (expected num_stages=)", kw.span)
            else:
                for kw in it.kwargs:
                    raise self.fail(f"unknown {fname} argument '{kw.name}'", kw.span)
                if not 1 <= len(args) <= 3:
                    raise self.fail(f"{fname} takes 1 to 3 arguments (stop), (start, stop) or (start, stop, step)",
                                    it.span)
            if len(args) == 1:
                extents = args
            else:
                begin = args[0]
                step = args[2] if len(args) == 3 else None
                if step is not None and as_int(fold(step)) is not None and as_int(fold(step)) <= 0:
                    raise self.fail("a loop step must be positive", it.args[2].span)
                span_ = self.binary("-", args[1], begin, it.span)
                extents = [fold(self.call_ceildiv(span_, step, it.span) if step is not None else span_)]
        inner = _Scope(scope)
        vars_ = []
        for name, span in s.targets:
            v = T.Var(D.I32, span, self.unique(name), "loop")
            inner.bind(name, v)
            vars_.append(v)
        saved = self.block, self.at_kernel_top
        self.block, self.at_kernel_top = [], False
        if kind == "parallel":
            self.in_parallel += 1
        try:
            self.stmts(s.body, inner)
            body = self.block
        finally:
            self.block, self.at_kernel_top = saved
            if kind == "parallel":
                self.in_parallel -= 1
        self.emit(T.For(s.span, kind, vars_, extents, body, begin, step, num_stages))

    # ------------------------------------------------------------ def helpers
    def inline_helper(self, helper: _Helper, call: A.CallExpr, scope: _Scope, want_value: bool):
        decl = helper.decl
        if self.inline_depth >= MAX_INLINE_DEPTH:
            raise self.fail(f"helper '{decl.name}' is inlined more than {MAX_INLINE_DEPTH} deep "
                            "(recursive helpers are not supported)", call.span)
        inner = _Scope(helper.scope)
        names = [p.name for p in decl.params]
        if len(call.args) > len(names):
            raise self.fail(f"'{decl.name}' takes {len(names)} argument(s), got {len(call.args)}", call.span)
        given: dict[str, A.Node] = dict(zip(names, call.args, strict=False))
        for kw in call.kwargs:
            if kw.name not in names:
                raise self.fail(f"'{decl.name}' has no parameter '{kw.name}'", kw.span)
            if kw.name in given:
                raise self.fail(f"argument '{kw.name}' given twice", kw.span)
            given[kw.name] = kw.value
        for p in decl.params:
            node = given.get(p.name)
            if node is None:
                if p.default is None:
                    raise self.fail(f"'{decl.name}' is missing argument '{p.name}'", call.span)
                inner.bind(p.name, self.argument_value(p.default, helper.scope))
            else:
                inner.bind(p.name, self.argument_value(node, scope))
        self.inline_depth += 1
        try:
            body = decl.body
            result = None
            for i, st in enumerate(body):
                if isinstance(st, A.ReturnStmt):
                    if i != len(body) - 1:
                        raise self.fail("`return` must be the last statement of a helper", st.span)
                    if st.value is not None:
                        result = self.expr(st.value, inner)
                    break
                self.stmt(st, inner)
        finally:
            self.inline_depth -= 1
        if want_value and result is None:
            raise self.fail(f"helper '{decl.name}' returns no value", call.span)
        if result is not None:
            # A parameter used twice duplicates its argument: nested calls grow exponentially.
            size, depth = _size_and_depth(result)
            if size > MAX_EXPR_NODES or depth > MAX_EXPR_DEPTH:
                what = f"of more than {MAX_EXPR_NODES} operations" if size > MAX_EXPR_NODES else \
                    f"nested more than {MAX_EXPR_DEPTH} levels deep"
                raise self.fail(f"helper '{decl.name}' expands to an expression {what}; assign parts of it to "
                                "local variables", call.span)
        return result

    def argument_value(self, node: A.Node, scope: _Scope):
        """What a helper parameter is bound to: a buffer, a region, a dtype, a const or an expression."""
        if isinstance(node, A.Name):
            bound = scope.lookup(node.id)
            if isinstance(bound, T.Buffer) and bound.scope != "var":
                return bound
            if isinstance(bound, (_Helper, tuple)):
                return bound
            if bound is None:
                dt = D.lookup(node.id)
                if dt is not None:
                    return ("const", dt)
        if isinstance(node, A.String):
            return ("const", node.value)
        if isinstance(node, A.Subscript):
            base = node.value
            bound = scope.lookup(base.id) if isinstance(base, A.Name) else None
            if isinstance(bound, T.Buffer) and (
                any(isinstance(i, A.Slice) for i in node.items) or len(node.items) != len(bound.shape)
            ):
                return ("region", node, scope)
        return self.expr(node, scope)

    # ------------------------------------------------------------ tile ops
    def call_args(self, call: A.CallExpr, names: list[str]) -> tuple[dict[str, A.Node], dict[str, A.Node]]:
        """Match positional and keyword arguments against `names`; extra keywords are an error."""
        if len(call.args) > len(names):
            raise self.fail(f"{_callee(call)} takes at most {len(names)} positional argument(s), "
                            f"got {len(call.args)}", call.span)
        out = dict(zip(names, call.args, strict=False))
        for kw in call.kwargs:
            if kw.name not in names:
                raise self.fail(f"{_callee(call)} has no argument '{kw.name}' (expected: {', '.join(names)})",
                                kw.span)
            if kw.name in out:
                raise self.fail(f"argument '{kw.name}' given twice", kw.span)
            out[kw.name] = kw.value
        return out, {}

    def tile_op(self, fname: str, call: A.CallExpr, scope: _Scope) -> None:
        if self.in_parallel:
            raise self.fail(f"{fname} is a block-wide tile operation and cannot be used inside a Parallel loop",
                            call.span)
        span = call.span
        if fname == "copy":
            args, _ = self.call_args(call, ["src", "dst", "coalesced_width", "disable_tma"])
            self.require(args, ["src", "dst"], call)
            src, dst = self.region_pair(args["src"], args["dst"], scope)
            if dst.buffer.scope == "global" and not dst.buffer.is_output:
                raise self.fail(f"cannot copy into input tensor '{dst.buffer.name}'; declare it `out`",
                                args["dst"].span)
            return self.emit(T.Copy(span, src, dst))
        if fname == "gemm":
            args, _ = self.call_args(call, ["A", "B", "C", "transpose_A", "transpose_B", "policy", "clear_accum",
                                            "k_pack", "wg_wait"])
            self.require(args, ["A", "B", "C"], call)
            a = self.region(args["A"], scope)
            b = self.region(args["B"], scope)
            c = self.region(args["C"], scope)
            for r, node in ((a, args["A"]), (b, args["B"]), (c, args["C"])):
                self.require_full_extents(r, node)
            ta = self.const_bool(args["transpose_A"], scope, "transpose_A") if "transpose_A" in args else False
            tb = self.const_bool(args["transpose_B"], scope, "transpose_B") if "transpose_B" in args else False
            ca = self.const_bool(args["clear_accum"], scope, "clear_accum") if "clear_accum" in args else False
            policy = "square"
            if "policy" in args:
                policy = self.policy_arg(args["policy"])
            return self.emit(T.Gemm(span, a, b, c, ta, tb, ca, policy))
        if fname in REDUCE_FUNCS:
            args, _ = self.call_args(call, ["buffer", "out", "dim", "clear"])
            self.require(args, ["buffer", "out"], call)
            src = self.region(args["buffer"], scope)
            dst = self.region(args["out"], scope)
            self.require_full_extents(src, args["buffer"])
            self.require_full_extents(dst, args["out"])
            dim = self.const_int(args["dim"], scope, "dim") if "dim" in args else -1
            rank = len(src.extents)
            if not -rank <= dim < rank:
                raise self.fail(f"dim={dim} is out of range for a {rank}-D buffer", args.get("dim", call).span)
            clear = self.const_bool(args["clear"], scope, "clear") if "clear" in args else True
            return self.emit(T.Reduce(span, REDUCE_FUNCS[fname], src, dst, dim % rank, clear))
        if fname in ("fill", "clear"):
            names = ["buffer", "value"] if fname == "fill" else ["buffer"]
            args, _ = self.call_args(call, names)
            self.require(args, names, call)
            dst = self.region(args["buffer"], scope)
            self.require_full_extents(dst, args["buffer"])
            if dst.buffer.scope == "global" and not dst.buffer.is_output:
                raise self.fail(f"cannot fill input tensor '{dst.buffer.name}'", args["buffer"].span)
            value = self.expr(args["value"], scope) if fname == "fill" else T.Const(dst.buffer.dtype, span, 0)
            return self.emit(T.Fill(span, dst, self.cast(value, dst.buffer.dtype)))
        if fname in ATOMIC_FUNCS:
            args, _ = self.call_args(call, ["dst", "value"])
            self.require(args, ["dst", "value"], call)
            if self.is_region_node(args["value"], scope):
                src, dst = self.region_pair(args["value"], args["dst"], scope)
                value: T.Region | T.Expr = src
            else:
                dst = self.region(args["dst"], scope, unit_corner=True)
                value = self.expr(args["value"], scope)
            if dst.buffer.scope == "global" and not dst.buffer.is_output:
                raise self.fail(f"cannot update input tensor '{dst.buffer.name}' atomically; declare it `out`",
                                args["dst"].span)
            return self.emit(T.Atomic(span, ATOMIC_FUNCS[fname], dst, value))
        if fname == "print":
            label = ""
            vals = []
            for a in call.args:
                if isinstance(a, A.String):
                    label = a.value
                else:
                    vals.append(a)
            for kw in call.kwargs:
                if kw.name == "msg" and isinstance(kw.value, A.String):
                    label = kw.value.value
                else:
                    raise self.fail("print(value[, msg=\"...\"]) ", kw.span)
            if len(vals) != 1:
                raise self.fail("print takes one buffer or scalar (and an optional message string)", span)
            node = vals[0]
            pv: T.Region | T.Expr
            if self.is_region_node(node, scope):
                pv = self.region(node, scope, unit_corner=True)
                self.require_full_extents(pv, node)
            else:
                pv = self.expr(node, scope)
            return self.emit(T.Print(span, label, pv))
        if fname == "annotate_layout":
            if len(call.args) != 1 or not isinstance(call.args[0], A.DictExpr):
                raise self.fail("annotate_layout takes a dict {buffer: layout}", span)
            for key, val in call.args[0].items:
                buf = self.buffer_ref(key, scope)
                layout = _callee(val) if isinstance(val, A.CallExpr) else None
                if layout not in ("make_swizzled_layout", "make_padded_layout", "make_linear_layout"):
                    raise self.fail("expected make_swizzled_layout(buf), make_padded_layout(buf) or "
                                    "make_linear_layout(buf)", val.span)
                self.emit(T.AnnotateLayout(span, buf, layout.removeprefix("make_").removesuffix("_layout")))
            return
        if fname == "use_swizzle":
            args, _ = self.call_args(call, ["panel_size", "order", "enable"])
            panel = self.const_int(args["panel_size"], scope, "panel_size") if "panel_size" in args else 8
            enable = self.const_bool(args["enable"], scope, "enable") if "enable" in args else True
            if panel <= 0:
                raise self.fail("panel_size must be positive", args["panel_size"].span)
            return self.emit(T.UseSwizzle(span, panel, enable))
        raise self.fail(f"unknown tile operation '{fname}'", span)

    def require(self, args: dict, names: list[str], call: A.CallExpr) -> None:
        missing = [n for n in names if n not in args]
        if missing:
            raise self.fail(f"{_callee(call)} is missing argument(s): {', '.join(missing)}", call.span)

    def require_full_extents(self, r: T.Region, node: A.Node) -> None:
        if any(e is None for e in r.extents):
            raise self.fail(f"the extent of this region of '{r.buffer.name}' cannot be inferred; use slices "
                            "(a:b) or the whole buffer", node.span)

    def policy_arg(self, node: A.Node) -> str:
        name = node.attr if isinstance(node, A.Attribute) else node.id if isinstance(node, A.Name) else (
            node.value if isinstance(node, A.String) else None)
        mapping = {"Square": "square", "FullRow": "full_row", "FullCol": "full_col", "square": "square",
                   "full_row": "full_row", "full_col": "full_col"}
        if name not in mapping:
            raise self.fail("policy must be GemmWarpPolicy.Square, FullRow or FullCol", node.span)
        return mapping[name]

    # ------------------------------------------------------------ regions
    def is_region_node(self, node: A.Node, scope: _Scope) -> bool:
        base = node.value if isinstance(node, A.Subscript) else node
        if not isinstance(base, A.Name):
            return False
        bound = scope.lookup(base.id)
        if isinstance(bound, tuple) and bound[0] == "region":
            return True
        if not isinstance(bound, T.Buffer) or bound.scope == "var":
            return False
        if isinstance(node, A.Name):
            return True
        return any(isinstance(i, A.Slice) for i in node.items) or len(node.items) != len(bound.shape)

    def buffer_ref(self, node: A.Node, scope: _Scope) -> T.Buffer:
        if isinstance(node, A.Name):
            bound = scope.lookup(node.id)
            if isinstance(bound, T.Buffer):
                return bound
            if bound is None and node.id not in BUILTINS:
                raise self.fail(f"use of undefined name '{node.id}'", node.span)
        raise self.fail("expected a buffer or tensor", node.span)

    def region(self, node: A.Node, scope: _Scope, unit_corner: bool = False) -> T.Region:
        """A region whose extents may still be None (a corner index, sized by the other operand)."""
        if isinstance(node, A.Name):
            bound = scope.lookup(node.id)
            if isinstance(bound, tuple) and bound[0] == "region":
                return self.region(bound[1], bound[2], unit_corner)
            buf = self.buffer_ref(node, scope)
            zeros = [T.Const(D.I32, node.span, 0) for _ in buf.shape]
            return T.Region(buf, zeros, list(buf.shape), node.span)
        if isinstance(node, A.Subscript):
            if isinstance(node.value, A.Name):
                bound = scope.lookup(node.value.id)
                if isinstance(bound, tuple) and bound[0] == "region":
                    raise self.fail("indexing a region passed to a helper is not supported; pass the buffer",
                                    node.span)
            buf = self.buffer_ref(node.value, scope)
            if len(node.items) > len(buf.shape):
                raise self.fail(f"'{buf.name}' has {len(buf.shape)} dimension(s), indexed with {len(node.items)}",
                                node.span)
            items = list(node.items) + [A.Slice(node.span, None, None)] * (len(buf.shape) - len(node.items))
            has_slice = any(isinstance(i, A.Slice) for i in items)
            starts: list[T.Expr] = []
            extents: list[T.Expr | None] = []
            for dim, item in zip(buf.shape, items, strict=True):
                if isinstance(item, A.Slice):
                    lo = self.int_expr(item.lower, scope) if item.lower is not None else T.Const(D.I32, item.span, 0)
                    hi = self.int_expr(item.upper, scope) if item.upper is not None else dim
                    ext = constant_difference(hi, lo)
                    if ext is None:
                        if item.lower is None:
                            ext_e = fold(hi)
                        else:
                            raise self.fail("the extent of a slice (upper - lower) must be a compile-time constant",
                                            item.span)
                    else:
                        if ext <= 0:
                            raise self.fail(f"empty slice (extent {ext})", item.span)
                        ext_e = T.Const(D.I32, item.span, ext)
                    starts.append(fold(lo))
                    extents.append(ext_e)
                else:
                    starts.append(fold(self.int_expr(item, scope)))
                    extents.append(T.Const(D.I32, item.span, 1) if (has_slice or unit_corner) else None)
            return T.Region(buf, starts, extents, node.span)  # type: ignore[arg-type]
        raise self.fail("expected a buffer, a tensor region (A[i:j, :]) or a corner (A[i, j])", node.span)

    def region_pair(self, src_node: A.Node, dst_node: A.Node, scope: _Scope) -> tuple[T.Region, T.Region]:
        src = self.region(src_node, scope)
        dst = self.region(dst_node, scope)
        src_corner = any(e is None for e in src.extents)
        dst_corner = any(e is None for e in dst.extents)
        if src_corner and dst_corner:
            raise self.fail("both operands are corner indices; give one of them slices or a whole buffer",
                            src_node.span)
        if src_corner:
            src.extents = self.corner_extents(src, dst, src_node)
        if dst_corner:
            dst.extents = self.corner_extents(dst, src, dst_node)
        return src, dst

    def corner_extents(self, corner: T.Region, other: T.Region, node: A.Node) -> list[T.Expr]:
        """A corner index A[i, j] takes the other operand's (squeezed) extents; the other dims get 1.

        The tile's dims go to the rightmost dims whose start is a multiple of the tile extent there
        (`Q[b, i * bm, h, 0]` with a bm x 64 tile spans dims 1 and 3); when no such placement exists,
        to the trailing dims, as TileLang does.
        """
        tile = [e for e in other.extents if as_int(e) != 1] or [other.extents[-1]]
        rank = len(corner.extents)
        if len(tile) > rank:
            raise self.fail(f"a {len(tile)}-D tile does not fit the {rank}-D tensor '{corner.buffer.name}'",
                            node.span)
        dims = _aligned_dims(corner.starts, tile) or list(range(rank - len(tile), rank))
        out: list[T.Expr] = [T.Const(D.I32, node.span, 1) for _ in range(rank)]
        for d, e in zip(dims, tile, strict=True):
            out[d] = e
        return out

    def element_indices(self, buf: T.Buffer, node: A.Subscript, scope: _Scope) -> list[T.Expr]:
        if any(isinstance(i, A.Slice) for i in node.items):
            raise self.fail("a slice is not an element; use copy() or a Parallel loop", node.span)
        if len(node.items) != len(buf.shape):
            raise self.fail(f"'{buf.name}' has {len(buf.shape)} dimension(s), indexed with {len(node.items)}",
                            node.span)
        return [self.int_expr(i, scope) for i in node.items]

    # ------------------------------------------------------------ expressions
    def const_int(self, node: A.Node, scope: _Scope, what: str) -> int:
        e = fold(self.expr(node, scope))
        if not isinstance(e, T.Const) or e.dtype.is_float:
            raise self.fail(f"{what} must be a compile-time integer", node.span)
        return int(e.value)

    def const_bool(self, node: A.Node, scope: _Scope, what: str) -> bool:
        e = fold(self.expr(node, scope))
        if not isinstance(e, T.Const):
            raise self.fail(f"{what} must be a compile-time True or False", node.span)
        return bool(e.value)

    def int_expr(self, node: A.Node, scope: _Scope) -> T.Expr:
        e = self.expr(node, scope)
        if not e.dtype.is_int:
            if isinstance(e, T.Const) and e.dtype.is_bool:
                return T.Const(D.I32, e.span, int(e.value))
            raise self.fail(f"expected an integer expression, got {e.dtype}", node.span)
        return e

    def bool_expr(self, node: A.Node, scope: _Scope) -> T.Expr:
        return self.as_bool(self.expr(node, scope), node)

    def as_bool(self, e: T.Expr, node: A.Node) -> T.Expr:
        if not e.dtype.is_bool:
            if e.dtype.is_int:
                return T.Compare(D.BOOL, e.span, "!=", e, T.Const(e.dtype, e.span, 0))
            raise self.fail(f"a condition must be a bool or an integer, got {e.dtype}", node.span)
        return e

    def cast(self, e: T.Expr, dt: D.DType) -> T.Expr:
        if e.dtype == dt:
            return e
        if isinstance(e, T.Const):
            return T.Const(dt, e.span, convert(e.value, dt))
        return T.Cast(dt, e.span, e)

    def literal(self, value, span: Span) -> T.Const:
        if isinstance(value, bool):
            return T.Const(D.BOOL, span, value)
        if isinstance(value, int):
            dt = D.I32 if -(2**31) <= value < 2**31 else D.I64
            if not -(2**63) <= value < 2**63:
                raise self.fail(f"integer literal {value} does not fit in 64 bits", span)
            return T.Const(dt, span, value)
        if isinstance(value, float):
            return T.Const(D.F32, span, value)
        raise self.fail(f"a {type(value).__name__} value cannot be used in an expression", span)

    def expr(self, node: A.Node, scope: _Scope) -> T.Expr:
        if isinstance(node, A.Number):
            return self.literal(node.value, node.span)
        if isinstance(node, A.Name):
            return self.name_expr(node, scope)
        if isinstance(node, A.BinOp):
            a = self.expr(node.left, scope)
            b = self.expr(node.right, scope)
            return self.binary(node.op, a, b, node.span)
        if isinstance(node, A.UnaryOp):
            a = self.expr(node.operand, scope)
            if node.op == "+":
                return a
            if node.op == "not":  # (not bool_expr(operand): that would build the operand twice per level)
                return fold(T.Unary(D.BOOL, node.span, "not", self.as_bool(a, node.operand)))
            if node.op == "~" and not (a.dtype.is_int or a.dtype.is_bool):
                raise self.fail(f"'~' needs an integer, got {a.dtype}", node.span)
            if node.op == "-" and a.dtype.is_bool:
                raise self.fail("cannot negate a bool", node.span)
            if isinstance(a, T.Const):
                return fold(T.Unary(a.dtype, node.span, node.op, a))
            return T.Unary(a.dtype, node.span, node.op, a)
        if isinstance(node, A.CompareOp):
            a = self.expr(node.left, scope)
            b = self.expr(node.right, scope)
            dt = self.operand_type(a, b)
            return T.Compare(D.BOOL, node.span, node.op, self.cast(a, dt), self.cast(b, dt))
        if isinstance(node, A.Subscript):
            if isinstance(node.value, A.Name):
                bound = scope.lookup(node.value.id)
                if isinstance(bound, tuple) and bound[0] == "region":
                    raise self.fail("a region is not a scalar", node.span)
            buf = self.buffer_ref(node.value, scope)
            idx = self.element_indices(buf, node, scope)
            return T.Load(buf.dtype, node.span, buf, idx)
        if isinstance(node, A.CallExpr):
            return self.call_expr(node, scope)
        if isinstance(node, A.String):
            raise self.fail("a string is not a value here", node.span)
        if isinstance(node, A.TupleExpr):
            raise self.fail("a tuple is not a value here", node.span)
        if isinstance(node, A.DictExpr):
            raise self.fail("a dict is not a value here (only annotate_layout takes one)", node.span)
        if isinstance(node, A.Attribute):
            raise self.fail(f"unknown attribute '{node.attr}'", node.span)
        raise self.fail("unsupported expression", node.span)

    def name_expr(self, node: A.Name, scope: _Scope) -> T.Expr:
        bound = scope.lookup(node.id)
        if bound is None:
            if node.id in ("True", "False", "true", "false"):
                return T.Const(D.BOOL, node.span, node.id in ("True", "true"))
            if D.lookup(node.id) is not None:
                raise self.fail(f"'{node.id}' is a dtype, not a value", node.span)
            if node.id in BUILTINS:
                raise self.fail(f"'{node.id}' is a function; call it", node.span)
            raise self.fail(f"use of undefined name '{node.id}'", node.span)
        if isinstance(bound, tuple) and bound[0] == "const":
            value = bound[1]
            if isinstance(value, D.DType):
                raise self.fail(f"'{node.id}' is a dtype, not a value", node.span)
            if isinstance(value, str):
                raise self.fail(f"'{node.id}' is a string const, not a number", node.span)
            return self.literal(value, node.span)
        if isinstance(bound, T.Var):
            return bound
        if isinstance(bound, T.Expr):
            return bound
        if isinstance(bound, T.Buffer):
            if bound.scope == "var":
                return T.Load(bound.dtype, node.span, bound, [_zero(node.span)])
            raise self.fail(f"'{node.id}' is a buffer; index it (buf[i, j]) or pass it to a tile operation",
                            node.span)
        raise self.fail(f"'{node.id}' is {_describe_binding(bound)}, not a value", node.span)

    def operand_type(self, a: T.Expr, b: T.Expr) -> D.DType:
        """Literals and consts adapt to the other operand's type, as in TileLang — unless an integer
        literal does not fit that type (u8 * 300), in which case the usual promotion applies."""
        ca, cb = isinstance(a, T.Const), isinstance(b, T.Const)
        if ca and not cb and not _fits(a, b.dtype):
            return D.promote(b.dtype, D.I32 if a.dtype == D.I32 else a.dtype)
        if cb and not ca and not _fits(b, a.dtype):
            return D.promote(a.dtype, D.I32 if b.dtype == D.I32 else b.dtype)
        if ca and not cb:
            if b.dtype.is_float or not a.dtype.is_float:
                return b.dtype if not (b.dtype.is_bool and not a.dtype.is_bool) else a.dtype
        if cb and not ca:
            if a.dtype.is_float or not b.dtype.is_float:
                return a.dtype if not (a.dtype.is_bool and not b.dtype.is_bool) else b.dtype
        return D.promote(a.dtype, b.dtype)

    def binary(self, op: str, a: T.Expr, b: T.Expr, span: Span) -> T.Expr:
        if op in ("and", "or"):
            a2 = a if a.dtype.is_bool else T.Compare(D.BOOL, a.span, "!=", a, T.Const(a.dtype, a.span, 0))
            b2 = b if b.dtype.is_bool else T.Compare(D.BOOL, b.span, "!=", b, T.Const(b.dtype, b.span, 0))
            return fold(T.Binary(D.BOOL, span, op, a2, b2))
        dt = self.operand_type(a, b)
        if op == "**":
            if isinstance(b, T.Const) and not b.dtype.is_float and dt.is_int:
                return self.int_power(self.cast(a, dt), int(b.value), span)
            fdt = dt if dt.is_float else D.F32
            return fold(T.Call(fdt, span, "pow", [self.cast(a, fdt), self.cast(b, fdt)]))
        if op in ("&", "|", "^", "<<", ">>") and not (dt.is_int or dt.is_bool):
            raise self.fail(f"'{op}' needs integer operands, got {a.dtype} and {b.dtype}", span)
        if op in ("<<", ">>") and isinstance(b, T.Const) and not 0 <= int(b.value) < dt.bits:
            # undefined behaviour in C, CUDA and WGSL alike
            raise self.fail(f"shift by {int(b.value)} is out of range for {dt} (0 to {dt.bits - 1})", span)
        if op in ("//", "%") and dt.is_float and op == "//":
            raise self.fail("'//' needs integer operands; use '/' for floating-point division", span)
        if op == "/" and not dt.is_float:
            raise self.fail("'/' on integers is ambiguous; use '//' for floor division, or cast to a float",
                            span)
        if dt.is_bool and op in ("+", "-", "*", "/", "//", "%"):
            raise self.fail(f"arithmetic '{op}' on bool operands", span)
        if op in ("//", "%") and isinstance(b, T.Const) and not dt.is_float and int(b.value) == 0:
            raise self.fail("integer division by zero", span)
        return fold(T.Binary(dt, span, op, self.cast(a, dt), self.cast(b, dt)))

    def int_power(self, a: T.Expr, n: int, span: Span) -> T.Expr:
        """`a ** n` for an integer `a` and a constant n >= 0: folded, or a chain of multiplies."""
        if n < 0:
            raise self.fail(f"integer '**' with a negative exponent ({n}); use a float base", span)
        if isinstance(a, T.Const):
            r = fold(T.Binary(a.dtype, span, "**", a, T.Const(a.dtype, span, n)))
            if not isinstance(r, T.Const):
                raise self.fail(f"integer power {a.value} ** {n} is out of range", span)
            return r
        if n > MAX_INT_POWER:
            raise self.fail(f"integer '**' with a runtime base needs an exponent of at most {MAX_INT_POWER}",
                            span)
        result: T.Expr = T.Const(a.dtype, span, 1)
        for i in range(n):
            result = a if i == 0 else T.Binary(a.dtype, span, "*", result, a)
        return result

    def call_ceildiv(self, a: T.Expr, b: T.Expr, span: Span) -> T.Expr:
        dt = D.promote(a.dtype, b.dtype)
        return fold(T.Call(dt, span, "ceildiv", [self.cast(a, dt), self.cast(b, dt)]))

    def call_expr(self, node: A.CallExpr, scope: _Scope) -> T.Expr:
        fname = _callee(node)
        if fname is None:
            raise self.fail("only named functions can be called", node.func.span)
        bound = scope.lookup(fname)
        if isinstance(bound, _Helper):
            return self.inline_helper(bound, node, scope, want_value=True)
        if bound is not None and not (isinstance(bound, tuple) and isinstance(bound[1], D.DType)):
            raise self.fail(f"'{fname}' is {_describe_binding(bound)}, not a function", node.func.span)
        dt = self.dtype_of_name(fname, scope) if bound is not None or D.lookup(fname) else None
        if dt is not None:  # f32(x): a cast
            if len(node.args) != 1 or node.kwargs:
                raise self.fail(f"{fname}(x) converts one value", node.span)
            return self.cast(self.expr(node.args[0], scope), dt)
        if node.kwargs:
            raise self.fail(f"{fname} takes no keyword arguments", node.kwargs[0].span)
        args = node.args
        if fname in ("cast", "Cast"):
            if len(args) != 2:
                raise self.fail("cast(x, dtype) takes two arguments", node.span)
            if fname == "Cast":  # TileLang order: Cast(dtype, x)
                return self.cast(self.expr(args[1], scope), self.dtype_arg(args[0], scope))
            return self.cast(self.expr(args[0], scope), self.dtype_arg(args[1], scope))
        if fname == "ceildiv":
            if len(args) != 2:
                raise self.fail("ceildiv(a, b) takes two arguments", node.span)
            a, b = self.int_expr(args[0], scope), self.int_expr(args[1], scope)
            if as_int(b) == 0:
                raise self.fail("ceildiv by zero", args[1].span)
            return self.call_ceildiv(a, b, node.span)
        if fname == "if_then_else":
            if len(args) != 3:
                raise self.fail("if_then_else(cond, a, b) takes three arguments", node.span)
            c = self.bool_expr(args[0], scope)
            a, b = self.expr(args[1], scope), self.expr(args[2], scope)
            dt = self.operand_type(a, b)
            return fold(T.Select(dt, node.span, c, self.cast(a, dt), self.cast(b, dt)))
        if fname in ("infinity", "max_value", "min_value"):
            if len(args) != 1:
                raise self.fail(f"{fname}(dtype) takes one dtype", node.span)
            dt = self.dtype_arg(args[0], scope)
            if fname == "infinity" and not dt.is_float:
                raise self.fail(f"infinity({dt}): integers have no infinity; use max_value({dt})", node.span)
            return T.Const(dt, node.span, _extreme(fname, dt))
        if fname in MATH_FUNCS:
            n = MATH_FUNCS[fname]
            if len(args) != n:
                raise self.fail(f"{fname} takes {n} argument(s), got {len(args)}", node.span)
            vals = [self.expr(a, scope) for a in args]
            if n == 2:
                dt = self.operand_type(vals[0], vals[1])
            else:
                dt = vals[0].dtype
            if fname not in ("max", "min", "abs") and not dt.is_float:
                dt = D.F32
            if dt.is_bool:
                raise self.fail(f"{fname} of a bool", node.span)
            return fold(T.Call(dt, node.span, fname, [self.cast(v, dt) for v in vals]))
        if fname in TILE_OPS:
            raise self.fail(f"{fname} is a statement, not a value", node.span)
        if fname in ALLOC_FUNCS:
            raise self.fail(f"{fname} must be assigned to a name: buf = {fname}(...)", node.span)
        if fname in LOOP_FUNCS or fname == "Kernel":
            raise self.fail(f"{fname} can only be used as a loop or `with` header", node.span)
        raise self.fail(f"call to undefined function '{fname}'", node.func.span)


def _extreme(fname: str, dt: D.DType):
    if dt.is_float:
        if fname == "infinity":
            return float("inf")
        import numpy as np

        from ..ir.fold import _round_float  # noqa: F401  (registers ml_dtypes)

        if dt.name in ("bf16", "f8e4m3", "f8e5m2"):
            import ml_dtypes

            info = ml_dtypes.finfo(np.dtype(dt.numpy_name))
        else:
            info = np.finfo(dt.numpy_name)
        return float(info.max) if fname == "max_value" else float(-info.max)
    if dt.is_bool:
        return fname == "max_value"
    lo = -(1 << (dt.bits - 1)) if dt.kind == "int" else 0
    hi = (1 << (dt.bits - 1)) - 1 if dt.kind == "int" else (1 << dt.bits) - 1
    return hi if fname == "max_value" else lo


def _aligned_dims(starts: list[T.Expr], tile: list[T.Expr]) -> list[int] | None:
    """The rightmost dims (in order) whose starts are multiples of the matching tile extents."""

    def aligned(start: T.Expr, extent: T.Expr) -> bool:
        n = as_int(extent)
        if n is None or n <= 0:
            return True  # unknown here; a bad extent is reported elsewhere
        form = linear_form(start)
        return form is not None and all(c % n == 0 for c in form.values())

    dims: list[int] = []
    d = len(starts) - 1
    for e in reversed(tile):
        while d >= 0 and not aligned(starts[d], e):
            d -= 1
        if d < 0:
            return None
        dims.append(d)
        d -= 1
    return dims[::-1]


def _size_and_depth(e: T.Expr) -> tuple[int, int]:
    """Node count and depth of an expression as a tree (shared subexpressions count once per use)."""
    memo: dict[int, tuple[int, int]] = {}
    stack: list[tuple[T.Expr, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in memo:
            continue
        kids = _children(node)
        if not done:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in memo)
            continue
        size = 1 + sum(memo[id(k)][0] for k in kids)
        depth = 1 + max((memo[id(k)][1] for k in kids), default=0)
        memo[id(node)] = (size, depth)
    return memo[id(e)]


def _children(e: T.Expr) -> list[T.Expr]:
    if isinstance(e, T.Binary | T.Compare):
        return [e.a, e.b]
    if isinstance(e, T.Unary):
        return [e.a]
    if isinstance(e, T.Select):
        return [e.cond, e.a, e.b]
    if isinstance(e, T.Call):
        return list(e.args)
    if isinstance(e, T.Cast):
        return [e.value]
    if isinstance(e, T.Load):
        return list(e.indices)
    return []


def _fits(c: T.Const, dt: D.DType) -> bool:
    """Whether integer literal c is representable in integer type dt (floats and bools always adapt)."""
    if c.dtype.is_float or c.dtype.is_bool or not dt.is_int:
        return True
    v = int(c.value)
    if dt.kind == "uint":
        return 0 <= v < (1 << dt.bits)
    return -(1 << (dt.bits - 1)) <= v < (1 << (dt.bits - 1))


def _zero(span: Span) -> T.Const:
    return T.Const(D.I32, span, 0)


def _callee(node: A.Node) -> str | None:
    if isinstance(node, A.CallExpr):
        node = node.func
    if isinstance(node, A.Name):
        return node.id
    return None


def _is_kernel_launch(node: A.Node) -> bool:
    return isinstance(node, A.WithStmt) and isinstance(node.context, A.CallExpr) and _callee(node.context) == "Kernel"


def _describe_binding(bound) -> str:
    if isinstance(bound, tuple) and bound[0] == "const":
        return "a const"
    if isinstance(bound, tuple) and bound[0] == "region":
        return "a region"
    if isinstance(bound, T.Var):
        return {"size": "a runtime size", "block": "a block index", "loop": "a loop variable",
                "param": "a scalar kernel parameter", "local": "a local variable"}[bound.kind]
    if isinstance(bound, T.Buffer):
        return "an input tensor" if bound.scope == "global" else f"a {bound.scope} buffer"
    if isinstance(bound, _Helper):
        return "a def helper"
    if isinstance(bound, A.KernelDecl):
        return "a kernel"
    return "an expression"


MAX_SOURCE_BYTES = 1 << 20


def read_source(path: str) -> str:
    """Read a .tile file, turning every way that can fail into a one-line diagnostic."""
    p = Path(path)
    try:
        if p.is_dir():
            raise CompileError([_plain(f"'{path}' is a directory, not a .tile file")])
        data = p.read_bytes()
    except FileNotFoundError:
        raise CompileError([_plain(f"no such file: '{path}'")]) from None
    except PermissionError:
        raise CompileError([_plain(f"cannot read '{path}': permission denied")]) from None
    except OSError as e:
        raise CompileError([_plain(f"cannot read '{path}': {e.strerror or e}")]) from None
    if len(data) > MAX_SOURCE_BYTES:  # parsing is linear but slow (~10 s a MiB): refuse at once
        raise CompileError([_plain(f"'{path}' is {len(data)} bytes; a .tile file may have at most "
                                   f"{MAX_SOURCE_BYTES >> 20} MiB (split it into imported files)")])
    if b"\x00" in data[:8192]:
        raise CompileError([_plain(f"'{path}' is a binary file, not tile source")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CompileError([_plain(f"'{path}' is not valid UTF-8 (byte {e.start})")]) from None
    if not text.strip():
        raise CompileError([_plain(f"'{path}' is empty: it defines no kernel")])
    return text


def _plain(message: str):
    from ..diagnostics import Diagnostic

    return Diagnostic("error", message, None)


def build_module(path: str, text: str, sources: SourceManager, include_dirs: list[str],
                 defines: dict[str, object], reporter: Reporter) -> T.Module:
    b = Builder(sources, include_dirs, defines, reporter)
    b.build_file(path, text, _Scope(), is_main=True)
    for name in defines:
        if name not in b.used_defines:
            reporter.warning(f"-D {name} matches no const in the source")
    if not b.kernels and not reporter.has_errors:
        reporter.error("no kernel defined", Span(path, 1, 1))
    reporter.check()
    return T.Module(b.kernels, b.consts, b.files)
