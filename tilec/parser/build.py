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
from ..ir.fold import as_int, fold
from ..ir.formula import formula
from ..ir.schedule import KernelKeywords, ScheduleRequest
from ..ir.visit import number_ops, rewrite_expr, sub_exprs, walk_stmts
from . import ast as A
from . import tune as tune_space
from .build_common import (
    ALLOC_FUNCS,
    BUILTINS,
    LOOP_FUNCS,
    MAX_EXPR_DEPTH,
    MAX_EXPR_NODES,
    MAX_INLINE_DEPTH,
    TILE_OPS,
    _callee,
    _describe_binding,
    _Fail,
    _Helper,
    _is_kernel_launch,
    _Scope,
    _size_and_depth,
    _zero,
    c_safe,
    read_only,
    undefined_function,
    undefined_name,
    unsupported_builtin,
)
from .build_contracts import ContractBuilder
from .build_expr import ExprBuilder, _block_uniform
from .build_jumps import loop_jumps, not_broken, without_jumps
from .build_tileops import TileOpBuilder
from .build_views import VIEW_FUNCS, ViewBuilder
from .parse import parse


class Builder(ExprBuilder, TileOpBuilder, ViewBuilder, ContractBuilder):
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
        self.launch_sequences: list[T.Launches] = []
        self.inline_depth = 0
        # per-kernel state
        self.block: list[T.Stmt] = []
        self.names_in_kernel: set[str] = set()
        self.in_parallel = 0
        self.thread_dims: list[int] = [128]  # the kernel's threads=, per dimension (get_thread_binding)
        self.parallel_depth: dict[T.Var | T.Buffer, int] = {}  # Parallel nesting at which a local or var was made
        self.at_kernel_top = False
        self.size_vars: dict[str, T.Var] = {}
        self.assign_counts: dict[str, int] = {}  # assignments to each name in the kernel body
        self.const_locals: dict[T.Var, T.Const] = {}  # locals assigned an integer constant exactly once
        self.size_locals: dict[T.Var, T.Expr] = {}  # locals assigned a formula of the runtime sizes exactly once
        self.reading_loop_condition = False  # (a fragment element read there would be read once: fragment_element)

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
        if decl.names or tune_space.is_tune_call(decl.value):  # a search space: tilec/parser/tune.py binds it
            return tune_space.bind_const(self, decl, scope)
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
        if isinstance(node, A.ListExpr | A.TupleExpr):  # const sizes = [64, 128]: a list const
            return tuple(self.const_value(item, scope) for item in node.items)
        if isinstance(node, A.IfExpr) and isinstance(node.then, A.ListExpr | A.TupleExpr):  # [a, b] if c else [b, a]
            taken = node.then if self.const_bool(node.cond, scope, "a const's condition") else node.orelse
            return self.const_value(taken, scope)
        if isinstance(node, A.Subscript) and isinstance(node.value, A.ListExpr | A.TupleExpr):  # [32, 64][i]
            return self.const_item(self.const_value(node.value, scope), node, scope)
        e = fold(self.expr(node, scope))
        if not isinstance(e, T.Const):
            raise self.fail("a const must be a compile-time value", node.span)
        return e.value

    # ------------------------------------------------------------ kernels
    def kernel_decl(self, decl: A.KernelDecl, gscope: _Scope) -> T.Kernel | None:
        scope = _Scope(gscope)
        self.size_vars = {}
        self.names_in_kernel = set()
        params: list[T.Buffer | T.Var] = []
        user_names: list[str] = []
        seen: set[str] = set()
        unshaped = set()
        decl_params = []
        for p in decl.params:
            try:
                p = self.choose_shape(p, scope)
            except _Fail:
                unshaped.add(p.name)
            decl_params.append(p)
        try:
            self.declare_sizes(decl_params, scope)
        except _Fail:
            pass
        for p in decl_params:
            if p.name in seen:
                self.rep.error(f"duplicate parameter '{p.name}'", p.span)
                continue
            seen.add(p.name)
            try:
                if p.name in unshaped:
                    raise _Fail()
                params.append(self.kernel_param(p, scope))
                user_names.append(p.name)
            except _Fail:
                scope.poison(p.name)
        self.check_sizes(params)
        for name, p in zip(user_names, params, strict=True):
            scope.bind(name, p)
            self.names_in_kernel.add(p.name)
        self.function_contract: list[dict] = []
        try:
            body = self.function_level(decl.body, scope)
        except _Fail:
            return None
        for name, p in zip(user_names, params, strict=True):
            if isinstance(p, T.Var) and name in self.size_vars:
                self.rep.error(f"'{name}' is both a runtime size (a tensor dimension) and a scalar parameter; "
                               "rename one of them", p.span)
        if len(body) != 1 or not _is_kernel_launch(body[0]):
            if any(_is_kernel_launch(b) for b in body):
                self.launch_sequence(decl, params, body, scope)
                return None
            span = body[0].span if body else decl.span
            self.rep.error("a kernel body must be one `with Kernel(grid..., threads=N) as (bx, by, ...):` "
                           "block", span)
            return None
        launch = body[0]
        assert isinstance(launch, A.WithStmt)
        return self.launch_kernel(self.kernel_symbol(decl), params, launch, scope, decl.span)

    def kernel_symbol(self, decl: A.KernelDecl) -> str:
        """The name a kernel is published under: its own, or with a trailing underscore where the generated source
        reserves it (`main`, tilec's `tl_` prefix), said in a warning, since a caller looks the kernel up by name."""
        name = c_safe(decl.name)
        if name != decl.name:
            self.rep.warning(f"kernel '{decl.name}' is published as '{name}' (the generated code reserves the name "
                             f"'{decl.name}'): the manifest, the C header and tilec.runtime call it '{name}'; rename "
                             "the kernel to choose its name", decl.span)
        return name

    def function_level(self, body: list[A.Node], scope: _Scope) -> list[A.Node]:
        """A kernel function's statements with its compile-time `if`s folded: `if <const expr>:` / `elif` /
        `else:` at the function's level keeps the branch its consts choose, so that a const may select the
        function's structure (one launch, or several with scratch between them) before the launches are split.
        Docstrings and `pass` are dropped."""
        out: list[A.Node] = []
        for s in body:
            if isinstance(s, A.PassStmt) or (isinstance(s, A.ExprStmt) and isinstance(s.value, A.String)):
                continue
            if isinstance(s, A.AssertStmt):  # the function's contract: checked before each of its launches
                try:
                    self.function_contract += self.contract(s, scope)
                except _Fail:
                    pass
                continue
            if not isinstance(s, A.IfStmt):
                out.append(s)
                continue
            e = fold(self.expr(s.cond, scope))
            if not isinstance(e, T.Const):
                raise self.fail("an `if` at a kernel function's level chooses the function's launches at compile "
                                "time: its condition must be a const expression (consts and -D values); move a "
                                "runtime condition into a `with Kernel(...)` block", s.cond.span)
            out += self.function_level(s.body if e.value else s.orelse, scope)
        return out

    def launch_kernel(self, name: str, params: list[T.Buffer | T.Var], launch: A.WithStmt, scope: _Scope,
                      span: Span) -> T.Kernel | None:
        """The kernel of one `with Kernel(...)` block, taking `params` (the sizes are the whole function's)."""
        self.kernel_attrs: dict[str, object] = {}
        self.kernel_keywords: dict[str, object] = {}  # the schedule's keywords (tilec.ir.schedule.KernelKeywords)
        self.add_contract(self.function_contract)
        for p in params:
            if isinstance(p, T.Buffer):
                self.check_dims_fit_i32(p)
        try:
            grid, threads = self.kernel_launch_args(launch.context, scope)
        except _Fail:
            return None
        if len(launch.targets) > 3:
            self.rep.error("at most three block indices (bx, by, bz)", launch.targets[3][1])
            return None
        block_vars = []
        self.block_vars = block_vars  # (T.get_block_binding(d))
        for i, axis in enumerate("xyz"):
            if i < len(launch.targets):
                var_name, var_span = launch.targets[i]
            else:
                var_name, var_span = f"b{axis}", launch.span
            v = T.Var(D.I32, var_span, self.unique(var_name), "block")
            block_vars.append(v)
            if i < len(launch.targets):
                scope.bind(var_name, v)
        self.block = []
        self.kernel_top = self.block  # (where a buffer tilec adds is allocated: gemm_sparse)
        self.at_kernel_top = True
        self.assign_counts = _assignment_counts(launch.body)
        self.const_locals = {}
        self.size_locals = {}
        self.warp_roles: dict[int, bool] = {}
        self.stmts(launch.body, _Scope(scope))
        if self.warp_roles:
            threads = self.fold_warp_roles(threads, launch.span)
        return T.Kernel(name, params, list(self.size_vars.values()), grid, threads, block_vars,
                        self.block, span, dict(self.kernel_attrs),
                        request=ScheduleRequest(keywords=KernelKeywords(**self.kernel_keywords)),
                        threads_span=self.threads_span)

    def launch_sequence(self, decl: A.KernelDecl, params: list[T.Buffer | T.Var], body: list[A.Node],
                        scope: _Scope) -> None:
        """A kernel function of several launches with `alloc_global` scratch between them (TileLang's split and
        combine kernels): one internal stage kernel per `with Kernel(...)` block, in order, and the sequence
        (tilec.ir.tile.Launches) that the runtimes and launchers run under the function's name."""
        name = self.kernel_symbol(decl)
        fscope = _Scope(scope)  # the function's level: parameters, sizes and the scratch tensors
        scratch: list[T.Buffer] = []
        stages: list[T.Kernel] = []
        block_names = {n for b in body if _is_kernel_launch(b) for n, _ in b.targets}
        for s in body:
            if _is_kernel_launch(s):
                names_before = set(self.names_in_kernel)
                k = self.launch_kernel(f"{name}__stage{len(stages)}", params + scratch, s, _Scope(fscope), s.span)
                self.names_in_kernel = names_before | {b.name for b in scratch}  # each launch names its own locals
                if k is not None:
                    stages.append(k)
                continue
            try:
                if (isinstance(s, A.AssignStmt) and isinstance(s.target, A.Name) and s.op is None
                        and _callee(s.value) == "alloc_global"):
                    scratch.append(self.alloc_global(s, fscope, block_names))
                    continue
                raise self.fail("beside its launches, a kernel function may hold only scratch allocations "
                                "(`name = T.alloc_global(shape, dtype)`); move this statement into a "
                                "`with T.Kernel(...)` block", s.span)
            except _Fail:
                if isinstance(s, A.AssignStmt) and isinstance(s.target, A.Name):
                    fscope.poison(s.target.id)
        if self.rep.has_errors:
            return
        from ..ir import access

        written_before: set[str] = set()
        seq = T.Launches(name, params, list(self.size_vars.values()), scratch, [], decl.span)
        for k in stages:
            used_bufs, used_vars = access.used(k)
            wrote = access.written(k)
            for b in scratch:
                if b in used_bufs and b not in wrote and b.name not in written_before and not b.zeroed:
                    self.rep.error(f"this launch reads the scratch tensor '{b.name}', which no earlier launch "
                                   "writes: its contents are undefined; write it in an earlier launch (or in this "
                                   "one)", access.first_use(k, b) or k.span)
            written_before |= {b.name for b in scratch if b in wrote}
            stage = _stage_kernel(k, params, scratch, used_bufs, used_vars, wrote)
            self.kernels.append(stage)
            seq.stages.append(T.Stage(stage.name, [p.name for p in stage.params]))
        self.launch_sequences.append(seq)

    def alloc_global(self, s: A.AssignStmt, scope: _Scope, block_names: set[str]) -> T.Buffer:
        """`name = T.alloc_global(shape, dtype)` at a kernel function's level: a scratch tensor of the launches,
        its shape over consts, runtime sizes and formulas of them (the runtimes allocate it)."""
        assert isinstance(s.target, A.Name) and isinstance(s.value, A.CallExpr)
        call, name = s.value, s.target.id
        if scope.lookup(name) is not None:
            raise self.fail(f"'{name}' is already defined ({_describe_binding(scope.lookup(name))})", s.target.span)
        args, _ = self.call_args(call, ["shape", "dtype", "scope", "zeroed"])
        if "shape" not in args or "dtype" not in args:
            raise self.fail("alloc_global(shape, dtype) needs a shape and a dtype", call.span)
        dt = self.dtype_arg(args["dtype"], scope)
        zeroed = "zeroed" in args and self.const_bool(args["zeroed"], scope, "zeroed")
        if zeroed and not dt.is_int:
            raise self.fail(f"a zeroed scratch tensor holds counters: its dtype must be an integer type, not {dt.name}",
                            args["dtype"].span)
        dims = args["shape"].items if isinstance(args["shape"], A.ListExpr | A.TupleExpr) else [args["shape"]]
        if not dims:
            raise self.fail("a scratch tensor needs at least one dimension", args["shape"].span)
        shape: list[T.Expr] = []
        for d in dims:
            for n in _names_in(d):
                if scope.lookup(n.id) is not None or n.id in BUILTINS or D.lookup(n.id) is not None:
                    continue
                if n.id in block_names:
                    raise self.fail(f"a scratch shape is fixed for all launches: '{n.id}' is a block index of a "
                                    "launch; use consts and runtime sizes (tensor dimensions) only", n.span)
                raise self.fail(f"'{n.id}' in a scratch shape is neither a const nor a runtime size: a scratch "
                                "tensor's dimensions are consts, dimensions of the parameters and formulas of those",
                                n.span)
            e = _tidy(fold(self.int_expr(d, scope)))
            stray = [x for x in sub_exprs(e) if isinstance(x, T.Var) and x.kind != "size"]
            if stray:
                raise self.fail(f"a scratch shape is fixed for all launches: '{stray[0].name}' is "
                                f"{_describe_binding(stray[0])}; use consts and runtime sizes (tensor dimensions) "
                                "only", d.span)
            if isinstance(e, T.Const) and int(e.value) <= 0:
                raise self.fail(f"a tensor dimension must be positive, this one is {e.value}", d.span)
            shape.append(e)
        buf = T.Buffer(self.unique(name), dt, shape, "global", s.target.span, is_output=True, zeroed=zeroed)
        scope.bind(name, buf)
        return buf

    def unique(self, name: str) -> str:
        """A name not used yet in this kernel (inlined helpers may reuse the caller's names)."""
        name = c_safe(name)
        out, n = name, 1
        while out in self.names_in_kernel:
            n += 1
            out = f"{name}_{n}"
        self.names_in_kernel.add(out)
        return out

    def choose_shape(self, p: A.KernelParam, scope: _Scope) -> A.KernelParam:
        """A shape chosen by consts, `T.Tensor([K, N] if not trans_B else [N, K], dtype)`: the taken branch's
        dimensions (each dimension may also be a choice, `dtype[K if not trans_B else N, ...]`, a plain expression)."""
        dims = p.type.dims
        while dims is not None and len(dims) == 1 and isinstance(dims[0], A.IfExpr) and any(
                isinstance(x, A.TupleExpr | A.ListExpr) for x in (dims[0].then, dims[0].orelse)):
            choice = dims[0]
            free = [n.id for n in _names_in(choice.cond) if scope.lookup(n.id) is None and n.id not in BUILTINS]
            if free:
                raise self.fail(f"a shape is chosen by consts, but '{free[0]}' is no const (a runtime size cannot "
                                "choose a tensor's shape)", choice.cond.span)
            branch = choice.then if self.const_bool(choice.cond, scope, "the condition choosing a shape") \
                else choice.orelse
            dims = list(branch.items) if isinstance(branch, A.TupleExpr | A.ListExpr) else [branch]
        if dims is p.type.dims:
            return p
        return dataclasses.replace(p, type=dataclasses.replace(p.type, dims=dims))  # (the syntax tree is shared)

    def declare_sizes(self, params: list[A.KernelParam], scope: _Scope) -> None:
        """Every name in a dimension that is no const (nor a builtin) is a runtime size: declared
        before the parameters are typed, so that a dimension like ceildiv(N, 128) may use a size that
        a later parameter introduces."""
        for p in params:
            for d in p.type.dims or []:
                for n in _names_in(d):
                    if n.id in self.size_vars or scope.lookup(n.id) is not None:
                        continue
                    if D.lookup(n.id) is None and n.id not in BUILTINS and n.id not in ("True", "False"):
                        self.size_vars[n.id] = T.Var(D.I32, n.span, c_safe(n.id), "size")
                        self.names_in_kernel.add(c_safe(n.id))
                        scope.bind(n.id, self.size_vars[n.id])

    def check_sizes(self, params: list[T.Buffer | T.Var]) -> None:
        """A runtime size is read from the arguments' shapes, so it must be a whole dimension of some
        tensor; one that appears only in the untaken branch of a const choice is dropped."""
        whole = {d for p in params if isinstance(p, T.Buffer) for d in p.shape}
        used = {x for p in params if isinstance(p, T.Buffer) for d in p.shape for x in sub_exprs(d)}
        for name, v in list(self.size_vars.items()):
            if v not in used:
                del self.size_vars[name]
            elif v not in whole:
                self.rep.error(f"runtime size '{name}' appears only inside dimension formulas; it must also be a "
                               "whole dimension of some tensor, so that its value can be read from the arguments",
                               v.span)

    def kernel_param(self, p: A.KernelParam, scope: _Scope) -> T.Buffer | T.Var:
        if p.type.dtype_node is not None:  # T.Tensor((M, K), dtype)
            if p.type.dtype.split(".")[-1] not in ("Tensor", "Buffer") or isinstance(p.type.dtype_node, A.Keyword):
                raise self.fail(f"a parameter type is dtype[dims] or T.Tensor((dims...), dtype), not "
                                f"{p.type.dtype}(...)", p.type.span)
            if isinstance(p.type.dtype_node, A.Name) and p.type.dtype_node.id == "?":
                raise self.fail("T.Tensor(shape, dtype) needs a shape and a dtype", p.type.span)
            dt = self.dtype_arg(p.type.dtype_node, scope)
        else:
            dt = self.dtype_arg(A.Name(p.type.span, p.type.dtype) if "." not in p.type.dtype
                                else A.Attribute(p.type.span, A.Name(p.type.span, "T"), p.type.dtype.split(".")[-1]),
                                scope)
        if p.type.dims is None:
            if p.is_output:
                raise self.fail("a scalar parameter cannot be `out`; use a one-element tensor", p.span)
            return T.Var(dt, p.span, c_safe(p.name), "param")
        shape: list[T.Expr] = []
        for d in p.type.dims:
            if isinstance(d, A.Name) and d.id in self.size_vars:
                shape.append(self.size_vars[d.id])
                continue
            e = _tidy(fold(self.int_expr(d, scope)))
            if isinstance(e, T.Const | T.Var) and not (isinstance(e, T.Var) and e.kind != "size"):
                if isinstance(e, T.Const) and int(e.value) <= 0:
                    raise self.fail(f"a tensor dimension must be positive, this one is {e.value}", d.span)
                shape.append(e)
                continue
            stray = [x for x in sub_exprs(e) if isinstance(x, T.Var) and x.kind != "size"]
            if stray or not all(isinstance(x, T.Const | T.Var | T.Binary | T.Call | T.Select | T.Compare | T.Cast)
                                for x in sub_exprs(e)):
                raise self.fail("a tensor dimension is an integer, a const, a runtime size or an expression of "
                                "those (like ceildiv(N, 128))", d.span)
            shape.append(e)
        return T.Buffer(c_safe(p.name), dt, shape, "global", p.span, is_output=p.is_output)

    def kernel_launch_args(self, node: A.Node, scope: _Scope) -> tuple[list[T.Expr], int]:
        assert isinstance(node, A.CallExpr)
        if not 1 <= len(node.args) <= 3:
            raise self.fail(f"Kernel takes 1 to 3 grid extents, got {len(node.args)}", node.span)
        grid = [self.int_expr(a, scope) for a in node.args]
        for g, a in zip(grid, node.args, strict=True):
            n = as_int(fold(g))
            if n is not None and n <= 0:
                raise self.fail(f"a grid extent must be positive, this one is {n}", a.span)
            try:  # the launch computes the grid from the manifest's formula of it
                formula(g)
            except ValueError:
                raise self.fail("a grid extent must be a formula of the runtime sizes and integers (+ - * // %, "
                                "ceildiv, min, max), which the launch evaluates; this one is not (a condition "
                                "on a runtime size can be written with min and max)", a.span) from None
        while len(grid) < 3:
            grid.append(T.Const(D.I32, node.span, 1))
        threads = 128
        self.thread_dims = [threads]
        self.threads_span = None
        for kw in node.kwargs:
            if kw.name == "threads":
                # TileLang's threads=(x, y[, z]): one block of x*y*z threads; get_thread_binding(d) unflattens
                items = kw.value.items if isinstance(kw.value, A.TupleExpr | A.ListExpr) else [kw.value]
                if not 1 <= len(items) <= 3:
                    raise self.fail("threads is a number, or (x, y) or (x, y, z)", kw.value.span)
                self.thread_dims = [self.const_int(i, scope, "threads") for i in items]
                for n, i in zip(self.thread_dims, items, strict=True):
                    if n <= 0:
                        raise self.fail("threads must be positive", i.span)
                self.threads_span = kw.span
                threads = 1
                for n in self.thread_dims:
                    threads *= n
            elif kw.name == "prelude":
                pass
            elif kw.name == "warp_specialize":
                self.kernel_keywords["warp_specialize"] = self.const_bool(kw.value, scope, "warp_specialize")
            elif kw.name == "persistent":
                self.kernel_keywords["persistent"] = self.const_bool(kw.value, scope, "persistent")
            elif kw.name in ("overlap_softmax", "tma_preload", "pingpong"):
                self.kernel_keywords[kw.name] = self.const_bool(kw.value, scope, kw.name)
            elif kw.name in ("cluster", "cluster_dims"):  # (cluster_dims: TileLang's spelling)
                shape = self.cluster_shape(kw.value, scope, kw.name)
                if shape != (1, 1):  # (1, 1): no cluster, the kernel as without the keyword
                    self.kernel_keywords["cluster"] = shape
            else:
                raise self.fail(f"unknown Kernel argument '{kw.name}' (expected threads=, warp_specialize=, "
                                "persistent=, pingpong=, overlap_softmax=, tma_preload= or cluster=)", kw.span)
        return grid, threads

    def cluster_shape(self, node: A.Node, scope: _Scope, name: str) -> tuple[int, int]:
        """Kernel(..., cluster=(cx, cy)): blocks of a thread-block cluster along grid x and y, compile-time integers.
        TileLang's cluster_dims= takes one integer (along x) or (x, y[, 1]) too."""
        from ..ir.schedule import check_cluster

        items = node.items if isinstance(node, A.TupleExpr | A.ListExpr) else [node]
        if not (len(items) == 2 or (name == "cluster_dims" and len(items) in (1, 3))):
            raise self.fail(f"{name}= takes two compile-time integers, (blocks along grid x, blocks along grid y): "
                            "(1, 1), (2, 1) or (1, 2)", node.span)
        values = [self.const_int(x, scope, "a cluster extent") for x in items]
        if len(values) == 3 and values[2] != 1:
            raise self.fail("a cluster of blocks along grid z is not supported: (1, 1), (2, 1) or (1, 2)", node.span)
        shape = (values + [1])[:2]
        try:
            return check_cluster(shape)
        except ValueError as e:
            raise self.fail(str(e), node.span) from None

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
        if isinstance(s, A.AssertStmt):
            return self.add_contract(self.contract(s, scope))
        if isinstance(s, A.AssignStmt):
            return self.assign(s, scope)
        if isinstance(s, A.ExprStmt):
            return self.expr_stmt(s, scope)
        if isinstance(s, A.ForStmt):
            return self.for_stmt(s, scope)
        if isinstance(s, A.IfStmt):
            cond = self.bool_expr(s.cond, scope)
            decided = fold(cond)
            if isinstance(decided, T.Const) and _allocates(s.body + s.orelse):
                # decided at compile time (TileLang's Python `if` on a config value): the taken branch's buffers
                # are the kernel's, visible after the `if`
                return self.stmts(s.body if decided.value else s.orelse, scope)
            then_body = self.nested(s.body, scope)
            else_body = self.nested(s.orelse, scope)
            return self.emit(T.If(s.span, cond, then_body, else_body))
        if isinstance(s, A.WhileStmt):
            return self.while_stmt(s, scope)
        if isinstance(s, A.BreakStmt | A.ContinueStmt):
            word = "break" if isinstance(s, A.BreakStmt) else "continue"
            raise self.fail(f"`{word}` outside a loop", s.span)
        if isinstance(s, A.WithStmt) and _callee(s.context) == "ws" and scope.lookup("ws") is None:
            return self.warp_role(s, scope)
        if isinstance(s, A.WithStmt):
            raise self.fail("`with Kernel(...)` may only be the body of a kernel", s.span)
        if isinstance(s, A.ReturnStmt):
            raise self.fail("`return` outside a def helper", s.span)
        raise self.fail("unsupported statement", s.span)

    def assign(self, s: A.AssignStmt, scope: _Scope) -> None:
        target = s.target
        if isinstance(target, A.TupleExpr):
            return self.tuple_assign(s, scope)
        if isinstance(target, A.Name):
            name = target.id
            if s.op is None and isinstance(s.value, A.CallExpr) and _callee(s.value) in ALLOC_FUNCS:
                return self.alloc(name, s.value, scope, target.span)
            if s.op is None and _callee(s.value) == "alloc_barrier" and scope.lookup("alloc_barrier") is None:
                args, _ = self.call_args(s.value, ["arrive_count"])
                if "arrive_count" in args:
                    self.const_int(args["arrive_count"], scope, "arrive_count")
                return scope.bind(name, ("barrier", target.span))  # (warp_role: the schedule's barriers are tilec's)
            if s.op is None and isinstance(s.value, A.CallExpr) and _callee(s.value) in VIEW_FUNCS \
                    and scope.lookup(_callee(s.value)) is None:
                return self.view(name, s.value, scope, target.span)
            bound = scope.lookup(name)
            if isinstance(bound, T.Buffer) and bound.scope == "var":
                self.check_parallel_update(bound, name, target.span)
                value = self.expr(s.value, scope)
                if s.op:
                    value = self.binary(s.op, T.Load(bound.dtype, target.span, bound, [_zero(s.span)]), value,
                                        s.span)
                return self.emit(T.Store(s.span, bound, [_zero(s.span)],
                                         self.convert_implicitly(value, bound.dtype, f"in the assignment to '{name}'")))
            if isinstance(bound, T.Var) and bound.kind == "local":
                self.check_parallel_update(bound, name, target.span)
                value = self.expr(s.value, scope)
                if s.op:
                    value = self.binary(s.op, bound, value, s.span)
                value = self.convert_implicitly(value, bound.dtype, f"in the assignment to '{name}'")
                return self.emit(T.Assign(s.span, bound, value))
            if bound is not None and not (isinstance(bound, T.Var) and bound.kind == "local"):
                what = _describe_binding(bound)
                raise self.fail(f"cannot assign to '{name}': it is {what}", target.span)
            if s.op:
                raise self.fail(undefined_name(name, scope), target.span)
            value = self.expr(s.value, scope)
            if value.dtype.is_bool and isinstance(value, T.Const):
                pass
            var = T.Var(value.dtype, target.span, self.unique(name), "local")
            known = self.fold_locals(value)  # (`half = ext // 2` of a local `ext = 64` is 32)
            if (isinstance(known, T.Const) and known.dtype.is_int and self.assign_counts.get(name) == 1
                    and not self.inline_depth):
                self.const_locals[var] = known  # assigned once: a compile-time value where one is needed
            sized = rewrite_expr(value, lambda x: self.size_locals.get(x))
            if self.assign_counts.get(name) == 1 and not self.inline_depth and value.dtype.is_int and all(
                    isinstance(x, T.Const | T.Binary | T.Call | T.Cast) or (isinstance(x, T.Var) and x.kind == "size")
                    for x in sub_exprs(sized)):
                self.size_locals[var] = sized  # assigned once a formula of the sizes: a view's shape may use it
            self.parallel_depth[var] = self.in_parallel
            scope.bind(name, var)
            return self.emit(T.Assign(s.span, var, value))
        if isinstance(target, A.Subscript):
            buf = self.buffer_ref(target.value, scope)
            if buf.scope == "global" and not buf.is_output:
                what, fix = read_only(buf)
                raise self.fail(f"cannot assign to {what}; {fix} in the kernel signature", target.span)
            indices = self.element_indices(buf, target, scope)
            value = self.expr(s.value, scope)
            if s.op:
                value = self.binary(s.op, self.expr(target, scope), value, s.span)
            value = self.convert_implicitly(value, buf.dtype, f"in the assignment to '{buf.name}'")
            if buf.scope == "fragment" and not self.in_parallel and _block_uniform(indices):  # its owner stores it
                return self.emit(self.at_fragment_element(buf, indices, s.span,
                                                          lambda at: T.Store(s.span, buf, at, value)))
            return self.emit(T.Store(s.span, buf, indices, value))
        raise self.fail("cannot assign to this expression", target.span)

    def tuple_assign(self, s: A.AssignStmt, scope: _Scope) -> None:
        """`a, b = x, y`: every value is computed (into a temporary) before any target is assigned, so
        `a, b = b, a` swaps."""
        assert isinstance(s.target, A.TupleExpr) and isinstance(s.value, A.TupleExpr)
        targets, values = s.target.items, s.value.items
        if len(targets) != len(values):
            raise self.fail(f"{len(targets)} targets are assigned {len(values)} values", s.span)
        names = []
        for v in values:
            value = self.expr(v, scope)
            temp = T.Var(value.dtype, v.span, self.unique("tuple_value"), "local")
            self.parallel_depth[temp] = self.in_parallel
            self.emit(T.Assign(v.span, temp, value))
            names.append(f"tuple·{temp.name}")  # not a name a source can spell
            scope.bind(names[-1], temp)
        for t, v, name in zip(targets, values, names, strict=True):
            self.assign(A.AssignStmt(t.span, t, A.Name(v.span, name)), scope)

    def check_parallel_update(self, bound, name: str, span: Span) -> None:
        """Iterations of a Parallel loop run at once: one may not update a value they all share."""
        if self.in_parallel > self.parallel_depth.get(bound, 0):
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
            shape = [fold(d) for d in self.shape_arg(shape_node, scope)]
            if not shape:
                raise self.fail("a buffer needs at least one dimension", shape_node.span)
        buf = T.Buffer(self.unique(name), dt, shape, bufscope, span)
        scope.bind(name, buf)
        self.parallel_depth[buf] = self.in_parallel
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
            if fname in ("sync_threads", "disable_warp_group_reg_alloc") and bound is None:
                return self.schedule_statement(fname, v, scope)
            if fname == "fence_global" and bound is None:
                if v.args or v.kwargs:
                    raise self.fail("T.fence_global() takes no arguments", v.span)
                if self.in_parallel:
                    raise self.fail("T.fence_global() is a statement of the whole block; it cannot be inside a "
                                    "Parallel loop", v.span)
                self.emit(T.FenceGlobal(v.span))
                return
            if fname == "assume" and bound is None:  # TileLang's hint to its simplifier: checked, then dropped
                if len(v.args) != 1 or v.kwargs:
                    raise self.fail("T.assume(condition) takes one condition", v.span)
                self.bool_expr(v.args[0], scope)
                return
            if fname in ("barrier_arrive", "barrier_wait") and bound is None:
                return self.barrier_statement(fname, v, scope)
            if fname == "tma_copy" and bound is None:  # a copy whose barrier is tilec's (warp_role)
                kept = [kw for kw in v.kwargs if kw.name != "barrier"]
                for kw in v.kwargs:
                    if kw.name == "barrier":
                        self.barrier_ref(kw.value, scope)
                return self.tile_op("copy", A.CallExpr(v.span, v.func, v.args, kept), scope)
            if fname is not None and bound is None and fname not in BUILTINS:
                raise self.fail(unsupported_builtin(fname) or undefined_function(fname, scope), v.func.span)
        if isinstance(v, A.String):
            return  # a docstring
        raise self.fail("expression statement has no effect", s.span)

    def warp_role(self, s: A.WithStmt, scope: _Scope) -> None:
        """`with T.ws(i):` — TileLang's explicit warp specialization: the body runs on warpgroup i (threads
        128 i .. 128 i + 127), synchronised with the others through T.alloc_barrier / T.barrier_arrive /
        T.barrier_wait and filled by T.tma_copy. tilec keeps what the roles compute and makes the schedule its own:
        each body runs where it stands, in program order (which is the order the barriers enforce), its
        tma_copy a copy, the barrier statements checked and dropped; a warpgroup that only copies becomes
        tilec's producer (fold_warp_roles). The pipeline planner then stages the copies, and on sm90 issues them
        from a producer warpgroup of its own."""
        call = s.context
        assert isinstance(call, A.CallExpr)
        if s.targets:
            raise self.fail("T.ws(...) binds no name", s.span)
        if self.in_parallel:
            raise self.fail("T.ws(...) cannot be inside a Parallel loop", s.span)
        ids = [self.const_int(a, scope, "a warpgroup index") for a in call.args]
        if not ids or call.kwargs:
            raise self.fail("T.ws(i, ...) takes the warpgroup indices the body runs on", call.span)
        copies_only = all(_is_producer_work(st) for st in s.body)
        for i in ids:
            self.warp_roles[i] = self.warp_roles.get(i, True) and copies_only
        self.stmts(s.body, scope)  # (Python's `with` opens no scope: names made in the body outlive it)

    def fold_warp_roles(self, threads: int, span: Span) -> int:
        """The threads that compute once the warpgroups that only copy are tilec's producer: 128 per other
        warpgroup (TileLang's threads=256 with ws(1) copying and ws(0) computing runs 128 compute threads, plus
        tilec's own producer warpgroup on sm90)."""
        groups = max(self.warp_roles) + 1
        compute = [i for i, copies in self.warp_roles.items() if not copies]
        if threads != 128 * groups:
            raise self.fail(f"T.ws names warpgroups 0..{groups - 1} ({128 * groups} threads), but the kernel has "
                            f"{threads}", span)
        if not compute or len(compute) == groups:
            return threads
        self.rep.remark("warp-specialize", f"the T.ws roles run as written, on tilec's schedule: warpgroup(s) "
                        f"{', '.join(str(i) for i in sorted(set(self.warp_roles) - set(compute)))} only copy: their "
                        "copies are the pipeline's (issued by a producer warpgroup of tilec's on sm90), and the kernel "
                        f"computes on {128 * len(compute)} threads",
                        span)
        return 128 * len(compute)

    def barrier_ref(self, node: A.Node, scope: _Scope) -> None:
        bound = scope.lookup(node.id) if isinstance(node, A.Name) else None
        if not (isinstance(bound, tuple) and bound[0] == "barrier"):
            raise self.fail("expected a barrier made by T.alloc_barrier(...)", node.span)

    def barrier_statement(self, fname: str, call: A.CallExpr, scope: _Scope) -> None:
        """T.barrier_arrive(b) / T.barrier_wait(b, phase) between T.ws roles: checked, then dropped (warp_role:
        the roles run in the order the barriers enforce)."""
        args, _ = self.call_args(call, ["barrier", "phase"] if fname == "barrier_wait" else ["barrier"])
        self.require(args, ["barrier", "phase"] if fname == "barrier_wait" else ["barrier"], call)
        self.barrier_ref(args["barrier"], scope)
        if "phase" in args:
            self.int_expr(args["phase"], scope)

    def schedule_statement(self, fname: str, call: A.CallExpr, scope: _Scope) -> None:
        """TileLang statements about the schedule, which tilec decides: `T.sync_threads()` (tilec puts a barrier
        wherever one thread's shared-memory writes meet another's reads, so an explicit one adds nothing) and
        `T.disable_warp_group_reg_alloc()` (on sm90 the kernel keeps its registers as launched: no setmaxnreg)."""
        if fname == "sync_threads" and (call.args or call.kwargs):
            return self.named_barrier(call, scope)
        if call.args or call.kwargs:
            raise self.fail(f"T.{fname}() takes no arguments", call.span)
        if self.in_parallel:
            raise self.fail(f"T.{fname}() is a statement of the whole block; it cannot be inside a Parallel loop",
                            call.span)
        if fname == "disable_warp_group_reg_alloc":
            self.kernel_keywords["warp_group_reg_alloc"] = False

    def named_barrier(self, call: A.CallExpr, scope: _Scope) -> None:
        """`T.sync_threads(barrier_id, arrive_count)`: a barrier among `arrive_count` threads (CUDA's
        `bar.sync id, n`), which may stand under an `if` that only those threads take; tilec's own barriers do
        not go there (check-threads), so where the threads of such a region share memory, these are the
        barriers that order them."""
        args, _ = self.call_args(call, ["barrier_id", "arrive_count"])
        self.require(args, ["barrier_id", "arrive_count"], call)
        if self.in_parallel:
            raise self.fail("T.sync_threads(id, count) is a statement of per-thread code; it cannot be inside a "
                            "Parallel loop", call.span)
        bar_id = self.const_int(args["barrier_id"], scope, "a barrier id")
        count = self.const_int(args["arrive_count"], scope, "a barrier's thread count")
        threads = 1
        for n in self.thread_dims:
            threads *= n
        if not 1 <= bar_id <= 15:
            raise self.fail(f"barrier id {bar_id} is not one of 1..15 (a block has 16 named barriers, and id 0 is "
                            "the whole block's T.sync_threads())", args["barrier_id"].span)
        if count <= 0 or count % 32 or count > threads:
            raise self.fail(f"a named barrier's thread count must be a multiple of 32 (whole warps) between 32 and "
                            f"the block's {threads} threads, not {count}", args["arrive_count"].span)
        self.emit(T.NamedBarrier(call.span, bar_id, count))

    def for_stmt(self, s: A.ForStmt, scope: _Scope) -> None:
        it = s.iter
        fname = _callee(it) if isinstance(it, A.CallExpr) else None
        if fname == "thread_binding" and scope.lookup(fname) is None:
            return self.thread_binding_loop(s, it, scope)
        if fname not in LOOP_FUNCS or scope.lookup(fname) is not None:
            raise self.fail("a loop iterates over Parallel(...), Pipelined(...), Serial(...), Unroll(...) or "
                            "range(...)", it.span)
        assert isinstance(it, A.CallExpr)
        kind = LOOP_FUNCS[fname]
        if kind is None:
            raise self.fail(f"{fname} loops are not supported", it.span)
        if self.in_parallel and kind != "serial" and kind != "unroll":
            raise self.fail(f"a {fname} loop cannot be nested inside a Parallel loop", it.span)
        begin = step = offset = None
        num_stages = 0
        if kind == "parallel":
            if not it.args:
                raise self.fail("Parallel needs at least one extent", it.span)
            extents = [self.fold_locals(self.int_expr(a, scope)) for a in it.args]
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
                if not 1 <= len(args) <= 2:
                    raise self.fail("Pipelined takes (n) or (start, stop), and num_stages=k", it.span)
                num_stages = 2
                for kw in it.kwargs:
                    if kw.name == "num_stages":
                        num_stages = self.const_int(kw.value, scope, "num_stages")
                        if num_stages < 0:
                            raise self.fail("num_stages must be at least 0 (0: no pipelining)", kw.value.span)
                    elif kw.name in ("order", "stage", "group", "sync"):
                        pass  # TileLang scheduling hints; the pipeline planner decides
                    else:
                        raise self.fail(f"unknown Pipelined argument '{kw.name}' (expected num_stages=)", kw.span)
                if num_stages == 0:
                    kind = "serial"  # TileLang's num_stages=0: an ordinary loop
                elif len(args) == 2:
                    # The planner's iterations count from 0: iterate t over stop - start and bind the
                    # user's name to start + t.
                    offset = args[0]
                    args = [fold(self.binary("-", args[1], args[0], it.span))]
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
        broke, skipped = self.jump_flags(s.body, kind, inner, s.span)
        body_ast = without_jumps(s.body, broke, skipped)
        if broke is not None:  # the iterations after a break do nothing
            body_ast = [A.IfStmt(s.span, not_broken(s.span, broke), body_ast, [])]
        vars_ = []
        for name, span in s.targets:
            v = T.Var(D.I32, span, self.unique(name), "loop")
            inner.bind(name, v if offset is None else fold(self.binary("+", offset, v, span)))
            vars_.append(v)
        saved = self.block, self.at_kernel_top
        self.block, self.at_kernel_top = [], False
        if kind == "parallel":
            self.in_parallel += 1
        try:
            self.clear_continue_flag(skipped, inner, s.span)
            self.stmts(body_ast, inner)
            body = self.block
        finally:
            self.block, self.at_kernel_top = saved
            if kind == "parallel":
                self.in_parallel -= 1
        self.emit(T.For(s.span, kind, vars_, extents, body, begin, step, num_stages))

    def jump_flags(self, body: list[A.Node], loop: str, scope: _Scope, span: Span) -> tuple[str | None, str | None]:
        """For a loop body with break/continue (build_jumps.py): declare its break flag here (cleared once,
        before the loop) and return the scope names of the break and continue flags, or None."""
        jumps = loop_jumps(body)
        if not jumps:
            return None, None
        for j in jumps:
            word = "break" if isinstance(j, A.BreakStmt) else "continue"
            if loop == "pipelined":
                raise self.fail(f"`{word}` in a Pipelined loop: its iterations are overlapped by the pipeline; use "
                                "T.serial (or num_stages=0) for a loop that can be left early", j.span)
            if loop == "parallel" and word == "break":
                raise self.fail("`break` in a Parallel loop: its iterations run at once, so none can end the "
                                "others; guard the remaining iterations' work with an `if`", j.span)
        broke = skipped = None
        if any(isinstance(j, A.BreakStmt) for j in jumps):
            broke = f"break·{len(self.names_in_kernel)}"  # not a name a source can spell
            var = T.Var(D.BOOL, span, self.unique("loop_left"), "local")
            self.parallel_depth[var] = self.in_parallel
            scope.bind(broke, var)
            self.emit(T.Assign(span, var, T.Const(D.BOOL, span, False)))
        if any(isinstance(j, A.ContinueStmt) for j in jumps):
            skipped = f"continue·{len(self.names_in_kernel)}"
        return broke, skipped

    def clear_continue_flag(self, skipped: str | None, scope: _Scope, span: Span) -> None:
        """At the start of each iteration: the continue flag, made inside the loop so each iteration owns it."""
        if skipped is not None:
            var = T.Var(D.BOOL, span, self.unique("iteration_skipped"), "local")
            self.parallel_depth[var] = self.in_parallel
            scope.bind(skipped, var)
            self.emit(T.Assign(span, var, T.Const(D.BOOL, span, False)))

    def while_stmt(self, s: A.WhileStmt, scope: _Scope) -> None:
        broke, skipped = self.jump_flags(s.body, "while", scope, s.span)
        self.reading_loop_condition = True
        try:
            cond = self.bool_expr(s.cond if broke is None else not_broken(s.cond.span, broke, s.cond), scope)
        finally:
            self.reading_loop_condition = False
        saved, saved_top = self.block, self.at_kernel_top
        self.block, self.at_kernel_top = [], False
        inner = _Scope(scope)
        try:
            self.clear_continue_flag(skipped, inner, s.span)
            self.stmts(without_jumps(s.body, broke, skipped), inner)
            body = self.block
        finally:
            self.block, self.at_kernel_top = saved, saved_top
        self.emit(T.While(s.span, cond, body))

    def thread_binding_loop(self, s: A.ForStmt, it: A.CallExpr, scope: _Scope) -> None:
        """TileLang's `for tx in T.thread_binding(0, threads, thread="threadIdx.x"):` is no loop: every thread runs
        the body once with tx its index."""
        if len(s.targets) != 1:
            raise self.fail("thread_binding binds one loop variable", s.span)
        if self.in_parallel:
            raise self.fail("a thread_binding loop cannot be nested inside a Parallel loop", it.span)
        value = self.thread_index("thread_binding", it, scope)
        inner = _Scope(scope)
        name, span = s.targets[0]
        var = T.Var(D.I32, span, self.unique(name), "local")
        self.parallel_depth[var] = self.in_parallel
        inner.bind(name, var)
        self.emit(T.Assign(span, var, value))
        self.stmts(s.body, inner)

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
            if isinstance(bound, T.Buffer):  # (an alloc_var too: the helper may assign it, `v = v + 1`)
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


def _tidy(e: T.Expr) -> T.Expr:
    """A dimension formula with its sums of sizes and constants collected (`(H + 2) - 2 - 1 + 1` is
    `H`), so that the manifest, the C header and the diagnostics show it the way one would write it."""
    if isinstance(e, T.Binary) and e.op in ("+", "-"):
        terms: dict[T.Var, list] = {}  # var -> [var, coefficient]
        const = 0
        stack = [(e, 1)]
        while stack:
            x, sign = stack.pop()
            if isinstance(x, T.Binary) and x.op in ("+", "-"):
                stack += [(x.a, sign), (x.b, sign if x.op == "+" else -sign)]
            elif isinstance(x, T.Const):
                const += sign * int(x.value)
            elif isinstance(x, T.Var):
                terms.setdefault(x, [x, 0])[1] += sign
            else:  # a product, quotient or call: tidied inside, kept as one term
                terms[x] = [_tidy(x), sign]
        out: T.Expr | None = None
        for var, coef in terms.values():
            if coef == 0:
                continue
            term = var if coef == 1 else T.Binary(var.dtype, e.span, "*", var, T.Const(var.dtype, e.span, abs(coef)))
            if out is None:
                out = term if coef > 0 else T.Binary(e.dtype, e.span, "-", T.Const(e.dtype, e.span, 0), term)
            else:
                out = T.Binary(e.dtype, e.span, "+" if coef > 0 else "-", out, term)
        if out is None:
            return T.Const(e.dtype, e.span, const)
        if const:
            out = T.Binary(e.dtype, e.span, "+" if const > 0 else "-", out, T.Const(e.dtype, e.span, abs(const)))
        return fold(out)
    if isinstance(e, T.Binary):
        return fold(dataclasses.replace(e, a=_tidy(e.a), b=_tidy(e.b)))
    if isinstance(e, T.Call):
        return fold(dataclasses.replace(e, args=[_tidy(a) for a in e.args]))
    return e


def _is_producer_work(s: A.Node) -> bool:
    """A statement of a T.ws body that only moves data or synchronises (a producer warpgroup's work)."""
    if isinstance(s, A.ExprStmt):
        return _callee(s.value) in ("copy", "tma_copy", "barrier_wait", "barrier_arrive", "c2d_im2col", "im2col")
    if isinstance(s, A.IfStmt):
        return all(_is_producer_work(x) for x in s.body + s.orelse)
    return isinstance(s, A.PassStmt)


def _allocates(body: list[A.Node]) -> bool:
    """Whether a block (its nested ifs included) allocates a buffer."""
    return any(isinstance(s, A.AssignStmt) and _callee(s.value) in ALLOC_FUNCS
               or isinstance(s, A.IfStmt) and _allocates(s.body + s.orelse) for s in body)


def _assignment_counts(body: list[A.Node]) -> dict[str, int]:
    """How often each plain name is assigned in a body (its nested blocks included)."""
    counts: dict[str, int] = {}
    stack = list(body)
    while stack:
        s = stack.pop()
        if isinstance(s, A.AssignStmt):
            for t in s.target.items if isinstance(s.target, A.TupleExpr) else [s.target]:
                if isinstance(t, A.Name):
                    counts[t.id] = counts.get(t.id, 0) + 1
        elif isinstance(s, A.ForStmt | A.WhileStmt | A.WithStmt):
            stack.extend(s.body)
        elif isinstance(s, A.IfStmt):
            stack.extend(s.body + s.orelse)
    return counts


def _stage_kernel(k: T.Kernel, params: list[T.Buffer | T.Var], scratch: list[T.Buffer], used_bufs: set[T.Buffer],
                  used_vars: set[T.Var], wrote: set[T.Buffer]) -> T.Kernel:
    """One launch of a sequence as a kernel of its own: the user's parameters it uses (in signature order; a tensor
    it does not use only when a runtime size it needs is read from that tensor's shape), then the scratch tensors
    it uses, each an output when this launch writes it. Copied, so that no two kernels share IR nodes."""
    import copy

    taken = [p for p in params if p in used_bufs or p in used_vars]
    taken += [b for b in scratch if b in used_bufs]

    def whole_dims(ps):
        return {d for p in ps if isinstance(p, T.Buffer) for d in p.shape if isinstance(d, T.Var)}

    for v in k.size_vars:
        in_shapes = {x for p in taken if isinstance(p, T.Buffer) for d in p.shape for x in sub_exprs(d)}
        if (v in used_vars or v in in_shapes) and v not in whole_dims(taken):
            giver = next(p for p in params if isinstance(p, T.Buffer) and any(d is v for d in p.shape))
            taken.append(giver)
    order = {p: i for i, p in enumerate([*params, *scratch])}
    taken.sort(key=lambda p: order[p])
    seen: set[T.Var] = set()
    sizes = []
    for p in taken:
        for d in p.shape if isinstance(p, T.Buffer) else []:
            for x in sub_exprs(d):
                if isinstance(x, T.Var) and x.kind == "size" and x not in seen:
                    seen.add(x)
                    sizes.append(x)
    rank = {v: i for i, v in enumerate(k.size_vars)}
    stage = T.Kernel(k.name, taken, sorted(sizes, key=lambda v: rank[v]), k.grid, k.threads, k.block_vars,
                     k.body, k.span, k.attrs, request=k.request, threads_span=k.threads_span)
    stage = copy.deepcopy(stage)
    for p, orig in zip(stage.params, taken, strict=True):
        if any(orig is b for b in scratch):
            p.is_output = orig in wrote
    for s in walk_stmts(stage.body):  # a view of scratch is writable exactly where its scratch tensor is
        if isinstance(s, T.Alloc) and s.buffer.view_of is not None and s.buffer.scope == "global":
            s.buffer.is_output = s.buffer.storage.is_output
    stage.attrs["stage_of"] = k.name.rsplit("__stage", 1)[0]
    return stage


def _names_in(node: A.Node) -> list[A.Name]:
    """The names an expression reads (not those it calls)."""
    if isinstance(node, A.Name):
        return [node]
    kids: list[A.Node] = []
    if isinstance(node, A.BinOp | A.CompareOp):
        kids = [node.left, node.right]
    elif isinstance(node, A.UnaryOp):
        kids = [node.operand]
    elif isinstance(node, A.BoolOp):
        kids = list(node.values)
    elif isinstance(node, A.IfExpr):
        kids = [node.cond, node.then, node.orelse]
    elif isinstance(node, A.CallExpr):
        kids = list(node.args) + [k.value for k in node.kwargs]
    elif isinstance(node, A.TupleExpr | A.ListExpr):
        kids = list(node.items)
    return [n for k in kids for n in _names_in(k)]


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
    text = text.removeprefix("\ufeff")  # a byte-order mark, as some Windows editors write
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
    for k in b.kernels:
        number_ops(k)  # stable ids for the schedule (tilec/ir/schedule.py)
    return T.Module(b.kernels, b.consts, b.files, b.launch_sequences)
