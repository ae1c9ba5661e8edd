"""Views of a buffer's storage: `X = T.Tensor(shape, dtype, A.data)`, `X = T.reshape(A, shape)`,
`X = T.view(A, shape=None, dtype=None)` (a mixin of the Builder).

A view is a new name for the same memory, read row-major with its own shape and dtype: the IR gets a Buffer
whose `view_of` is the buffer it views, declared by an `Alloc` at the statement. `T.reshape` and `T.view` must
cover their storage exactly (TileLang asserts the same: equal bit counts); `T.Tensor(..., A.data)` must fit
inside it. Each condition is proven or refuted at compile time when the shapes allow (a polynomial identity of
the runtime sizes), and otherwise recorded in the kernel's `launch_checks` (formulas of the sizes), which the
interpreter, tilec.runtime and the C launcher test before a launch, so that an oversized view is an error
rather than a read past the tensor.
"""

from __future__ import annotations

from ..diagnostics import Span
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import as_int, compare_sizes, fold, multiple_of
from ..ir.formula import formula
from ..ir.visit import rewrite_expr, sub_exprs
from . import ast as A
from .build_common import _callee, _describe_binding, _Scope

VIEW_FUNCS = {"Tensor": "T.Tensor", "reshape": "T.reshape", "view": "T.view"}


def _product(dims: list[T.Expr], factor: int, span: Span | None) -> T.Expr:
    out: T.Expr = T.Const(D.I64, span, factor)
    for d in dims:
        out = fold(T.Binary(D.I64, span, "*", out, d if d.dtype == D.I64 else T.Cast(D.I64, span, d)))
    return out


def _is_none(node: A.Node) -> bool:
    return isinstance(node, A.Name) and node.id == "None"


def _fmt_shape(b: T.Buffer) -> str:
    from ..ir.printer import expr_str

    return f"{b.dtype}[{', '.join(expr_str(d) for d in b.shape)}]"


def _bytes(b: T.Buffer) -> str:
    """`M * N * 4 bytes`: a buffer's size as its shape's product."""
    from ..ir.printer import expr_str

    dims = [expr_str(d) if isinstance(d, T.Const | T.Var) else f"({expr_str(d)})" for d in b.shape]
    return " * ".join([*dims, str(b.dtype.bytes)]) + " bytes"


class ViewBuilder:
    """Mixin of Builder: views of a tensor's or a shared buffer's storage."""

    def view(self, name: str, call: A.CallExpr, scope: _Scope, span: Span) -> None:
        fname = VIEW_FUNCS[_callee(call)]
        if scope.lookup(name) is not None and name in scope.names:
            raise self.fail(f"'{name}' is already defined", span)
        if self.in_parallel:
            raise self.fail(f"{fname} cannot be used inside a Parallel loop; make the view before the loop",
                            call.span)
        exact = False  # the shape covers the storage by construction
        if fname == "T.Tensor":
            args, _ = self.call_args(call, ["shape", "dtype", "data"])
            if "data" not in args:
                raise self.fail("a view is T.Tensor(shape, dtype, buf.data): it needs the storage it views "
                                "(a parameter type is written `A: dtype[dims]` in the kernel's signature)", call.span)
            self.require(args, ["shape", "dtype"], call)
            data = args["data"]
            base = self.view_base(data.value if isinstance(data, A.Attribute) and data.attr == "data" else data,
                                  scope, fname)
            dt = self.dtype_arg(args["dtype"], scope)
            shape = self.view_shape(args["shape"], scope, base)
        else:
            names = ["src", "shape"] if fname == "T.reshape" else ["src", "shape", "dtype"]
            args, _ = self.call_args(call, names)
            self.require(args, ["src", "shape"] if fname == "T.reshape" else ["src"], call)
            base = self.view_base(args["src"], scope, fname)
            dt = self.dtype_arg(args["dtype"], scope) if "dtype" in args and not _is_none(args["dtype"]) else base.dtype
            if "shape" in args and not _is_none(args["shape"]):
                shape = self.view_shape(args["shape"], scope, base)
            else:  # covers the storage by construction (given the divisibility it checks)
                shape, exact = self.scaled_shape(base, dt, call), True
        if dt.is_bool != base.dtype.is_bool:
            raise self.fail(f"{fname} cannot view {base.dtype} storage as {dt}: a bool is not a bit pattern of "
                            "another type", call.span)
        buf = T.Buffer(self.unique(name), dt, shape, base.scope, span, is_output=base.is_output, view_of=base)
        if not exact:
            self.check_view_size(buf, base, "==" if fname != "T.Tensor" else "<=", fname, call.span)
        self.check_dims_fit_i32(buf)
        scope.bind(name, buf)
        self.parallel_depth[buf] = self.in_parallel
        self.emit(T.Alloc(call.span, buf))

    def view_base(self, node: A.Node, scope: _Scope, fname: str) -> T.Buffer:
        bound = scope.lookup(node.id) if isinstance(node, A.Name) else None
        region = isinstance(node, A.Subscript)
        if isinstance(bound, tuple) and bound[0] == "region":  # a helper's parameter bound to a caller's operand
            region = not isinstance(bound[1], A.Name)
            bound = None if region else bound[2].lookup(bound[1].id)
        if not isinstance(bound, T.Buffer):
            what = "a region" if region else _describe_binding(bound) if bound is not None else "not a buffer"
            hint = " (view the whole buffer, then index the view)" if region else ""
            raise self.fail(f"{fname} views a tensor or a shared buffer; this is {what}{hint}", node.span)
        if bound.scope == "fragment":
            raise self.fail(f"{fname} of fragment '{bound.name}' is not supported: a fragment is spread over the "
                            "threads in a layout the compiler chooses, so it has no row-major storage to view; "
                            "index the fragment with the view's arithmetic, or view a shared buffer", node.span)
        if bound.scope in ("local", "var"):
            raise self.fail(f"{fname} of {bound.scope} buffer '{bound.name}' is not supported: view a tensor or a "
                            "shared buffer", node.span)
        if bound.scope == "shared" and not self.at_kernel_top:
            raise self.fail(f"a view of shared buffer '{bound.name}' must be made at the top level of the kernel body "
                            "(like alloc_shared), not inside a loop or if", node.span)
        return bound

    def view_shape(self, node: A.Node, scope: _Scope, base: T.Buffer) -> list[T.Expr]:
        if isinstance(node, A.Attribute) and node.attr == "shape":  # another buffer's shape: T.view(A, B.shape)
            return list(self.buffer_attr_owner(node, scope).shape)
        dims = node.items if isinstance(node, A.TupleExpr | A.ListExpr) else [node]
        if not dims:
            raise self.fail("a view needs at least one dimension", node.span)
        out = []
        for d in dims:
            e = fold(rewrite_expr(self.fold_locals(self.int_expr(d, scope)), lambda x: self.size_locals.get(x)))
            n = as_int(e)
            if n is not None:
                if n <= 0:
                    raise self.fail(f"a view's dimension must be positive, this one is {n}", d.span)
            elif base.scope != "global":
                raise self.fail(f"a view of shared buffer '{base.name}' needs a compile-time shape", d.span)
            else:
                stray = [x for x in sub_exprs(e) if isinstance(x, T.Var) and x.kind != "size"]
                try:
                    formula(e)
                except ValueError:
                    stray = stray or [e]
                if stray:
                    raise self.fail("a view's dimension is an integer, a const, a runtime size or a formula of "
                                    "those (+ - * // %, ceildiv, min, max), like the dimensions of a kernel's "
                                    "tensors", d.span)
            out.append(e)
        return out

    def scaled_shape(self, base: T.Buffer, dt: D.DType, call: A.CallExpr) -> list[T.Expr]:
        """T.view(A, dtype=...) without a shape: A's shape, its innermost dimension scaled by the size ratio."""
        shape = list(base.shape)
        old, new = base.dtype.bytes, dt.bytes
        if old == new:
            return shape
        inner = shape[-1]
        span = call.span
        if new < old:
            shape[-1] = fold(T.Binary(D.I32, span, "*", inner, T.Const(D.I32, span, old // new)))
            return shape
        ratio = new // old
        n = as_int(inner)
        if n is not None and n % ratio:
            raise self.fail(f"T.view of '{base.name}' ({_fmt_shape(base)}) as {dt}: its innermost dimension ({n}) "
                            f"must be a multiple of {ratio}, the number of {base.dtype} elements in one {dt}", span)
        if n is None and not multiple_of(inner, ratio):
            self.launch_check(T.Binary(D.I32, span, "%", inner, T.Const(D.I32, span, ratio)), "==",
                              T.Const(D.I32, span, 0),
                              f"T.view of '{base.name}' as {dt} needs its innermost dimension to be a multiple of "
                              f"{ratio}")
        shape[-1] = fold(T.Binary(D.I32, span, "//", inner, T.Const(D.I32, span, ratio)))
        return shape

    def check_view_size(self, buf: T.Buffer, base: T.Buffer, op: str, fname: str, span: Span) -> None:
        need = _product(buf.shape, buf.dtype.bytes, span)
        have = _product(base.shape, base.dtype.bytes, span)
        what = f"view '{buf.name}' ({_fmt_shape(buf)}) of '{base.name}' ({_fmt_shape(base)})"
        proven = compare_sizes(need, op, have)
        if proven is False:
            rule = "must cover its storage exactly" if op == "==" else "must fit inside its storage"
            n, h = as_int(need), as_int(have)
            sizes = f": {n} bytes against {h}" if n is not None and h is not None else \
                f": {_bytes(buf)} against {_bytes(base)}"
            hint = " (T.Tensor(shape, dtype, buf.data) views a part of it)" if op == "==" and compare_sizes(
                need, "<=", have) else ""
            raise self.fail(f"{fname}: the {what} {rule}{sizes}{hint}", span)
        if proven is None:
            self.launch_check(need, op, have, f"{what} " + (
                "must cover its storage exactly" if op == "==" else "must fit inside its storage"))

    def check_dims_fit_i32(self, buf: T.Buffer) -> None:
        """A dimension that sums or multiplies sizes (`M * N` of a flattened A: f16[M, N], a parameter `B: f16[M * N]`)
        is indexed with the kernel's 32-bit integers like every size; each size is checked at launch, but their
        product can pass 2**31 when none does, so such a dimension gets a launch check of its own."""
        for axis, dim in enumerate(buf.shape):
            if any(isinstance(x, T.Binary) and x.op in ("*", "+") and as_int(x.a) is None and as_int(x.b) is None
                   for x in sub_exprs(dim)):
                text = formula(dim).removeprefix("(").removesuffix(")")
                self.launch_check(dim, "<=", T.Const(D.I32, None, 2**31 - 1),
                                  f"dimension {axis} of '{buf.name}' ({text}) must fit the kernel's 32-bit indices")

    def launch_check(self, lhs: T.Expr, op: str, rhs: T.Expr, message: str) -> None:
        """A condition on the runtime sizes, tested before each launch (the manifest's `launch_checks`)."""
        checks = self.kernel_attrs.setdefault("launch_checks", [])
        check = {"lhs": formula(lhs), "op": op, "rhs": formula(rhs), "message": message}
        if not any(c["lhs"] == check["lhs"] and c["op"] == op and c["rhs"] == check["rhs"] for c in checks):
            checks.append(check)
