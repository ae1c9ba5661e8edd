"""Expressions: names, literals, operators with TileLang's literal typing, casts and builtin calls."""

from __future__ import annotations

from ..diagnostics import Diagnostic, Span
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import as_int, convert, fold
from ..ir.threads import THREAD
from ..ir.visit import rewrite_expr, sub_exprs
from . import ast as A
from .build_common import (
    ALLOC_FUNCS,
    ATOMIC_FUNCS,
    BUILTINS,
    LOOP_FUNCS,
    MATH_FUNCS,
    MAX_INT_POWER,
    TILE_OPS,
    _callee,
    _describe_binding,
    _extreme,
    _fits,
    _Helper,
    _Scope,
    _zero,
    undefined_function,
    undefined_name,
    unsupported_builtin,
)


class ExprBuilder:
    """Mixin of Builder: typing and building scalar expressions."""

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
        elif isinstance(node, A.Attribute) and node.attr == "dtype":
            dt = self.buffer_attr_owner(node, scope).dtype
        elif isinstance(node, A.Attribute):
            dt = D.lookup(node.attr)
        else:
            dt = None
        if dt is None:
            names = " ".join(d.name for d in D.ALL)
            raise self.fail(f"expected a dtype ({names})", node.span)
        return dt

    # ------------------------------------------------------------ expressions
    def fold_locals(self, e: T.Expr) -> T.Expr:
        """`e` with the locals that are assigned a constant once (and never again) replaced by their
        value, folded: for the places that need a compile-time integer (slice extents, shapes)."""
        if not self.const_locals:
            return fold(e)
        return fold(rewrite_expr(e, lambda x: self.const_locals.get(x) if isinstance(x, T.Var) else None))

    def const_int(self, node: A.Node, scope: _Scope, what: str) -> int:
        e = self.fold_locals(self.expr(node, scope))
        if not isinstance(e, T.Const) or e.dtype.is_float:
            raise self.fail(f"{what} must be a compile-time integer", node.span)
        return int(e.value)

    def const_item(self, values: tuple, node: A.Subscript, scope: _Scope):
        """`sizes[i]` of a list const, i a compile-time integer."""
        if len(node.items) != 1 or isinstance(node.items[0], A.Slice):
            raise self.fail("index a list const with one integer: sizes[0]", node.span)
        i = self.const_int(node.items[0], scope, "a list const's index")
        if not -len(values) <= i < len(values):
            raise self.fail(f"index {i} is out of range for a list const of {len(values)} values", node.span)
        return values[i]

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

    def convert_implicitly(self, e: T.Expr, dt: D.DType, what: str) -> T.Expr:
        """`e` as `dt` where the source converts without saying so; a conversion that may change a value is a
        warning of category "conversion" (shown with -Wconversion). Literals and consts adapt, as in C."""
        if not isinstance(e, T.Const) and not D.holds(dt, e.dtype):
            self.rep.diagnostics.append(Diagnostic(
                "warning", f"implicit conversion from {e.dtype} to {dt} {what} may change the value; "
                f"write .astype({dt}) to convert explicitly", e.span, category="conversion"))
        return self.cast(e, dt)

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
        if isinstance(node, A.IfExpr):
            c = self.bool_expr(node.cond, scope)
            a, b = self.expr(node.then, scope), self.expr(node.orelse, scope)
            dt = self.operand_type(a, b)
            return fold(T.Select(dt, node.span, c, self.cast(a, dt), self.cast(b, dt)))
        if isinstance(node, A.Subscript) and isinstance(node.value, A.Attribute) and node.value.attr == "shape":
            shape = self.buffer_attr_owner(node.value, scope).shape
            if len(node.items) != 1 or isinstance(node.items[0], A.Slice):
                raise self.fail("index a shape with one integer: buf.shape[0]", node.span)
            i = self.const_int(node.items[0], scope, "a shape index")
            if not -len(shape) <= i < len(shape):
                raise self.fail(f"shape index {i} is out of range for a {len(shape)}-D buffer", node.span)
            return shape[i]
        if isinstance(node, A.Subscript):
            if isinstance(node.value, A.Name):
                bound = scope.lookup(node.value.id)
                if isinstance(bound, tuple) and bound[0] == "region":
                    raise self.fail("a region is not a scalar", node.span)
                if isinstance(bound, tuple) and bound[0] == "const" and isinstance(bound[1], tuple):
                    return self.literal(self.const_item(bound[1], node, scope), node.span)
            buf = self.buffer_ref(node.value, scope)
            idx = self.element_indices(buf, node, scope)
            if buf.scope == "fragment" and not self.in_parallel and _block_uniform(idx):
                return self.fragment_element(buf, idx, node.span)
            return T.Load(buf.dtype, node.span, buf, idx)
        if isinstance(node, A.CallExpr):
            return self.call_expr(node, scope)
        if isinstance(node, A.String):
            raise self.fail("a string is not a value here", node.span)
        if isinstance(node, A.TupleExpr | A.ListExpr):
            what = "tuple" if isinstance(node, A.TupleExpr) else "list"
            raise self.fail(f"a {what} is not a value here (shapes and tile-op options take one)", node.span)
        if isinstance(node, A.DictExpr):
            raise self.fail("a dict is not a value here (only annotate_layout takes one)", node.span)
        if isinstance(node, A.Attribute):
            if node.attr == "dtype":
                raise self.fail(f"'{_dotted(node)}' is a dtype, not a value (use it where a dtype goes: "
                                "cast(x, buf.dtype), alloc_fragment(shape, buf.dtype))", node.span)
            if node.attr == "shape":
                raise self.fail(f"'{_dotted(node)}' is a shape, not a value; index it (buf.shape[0]) or pass it "
                                "as an allocation's shape", node.span)
            raise self.fail(f"unknown attribute '{node.attr}' (buffers have .dtype and .shape)", node.span)
        raise self.fail("unsupported expression", node.span)

    def fragment_element(self, buf: T.Buffer, idx: list[T.Expr], span) -> T.Expr:
        """`F[i, j]` of a fragment outside Parallel loops (TileLang's alloc_fragment((1,)) used as a scalar): its
        element lives in one thread's registers, so it is handed to every thread through shared memory — a Parallel
        loop over the fragment in which the owner stores it to a one-element shared buffer, read after it."""
        if self.reading_loop_condition:
            raise self.fail(f"fragment '{buf.name}' is read in a while loop's condition outside a Parallel loop; read "
                            "it into a local before the loop and again at the end of its body", span)
        held = T.Buffer(self.unique(f"{buf.name}_element"), buf.dtype, [T.Const(D.I32, span, 1)], "shared", span)
        self.kernel_top.insert(0, T.Alloc(span, held, None))
        self.emit(self.at_fragment_element(buf, idx, span, lambda at: T.Store(
            span, held, [T.Const(D.I32, span, 0)], T.Load(buf.dtype, span, buf, at))))
        return T.Load(buf.dtype, span, held, [T.Const(D.I32, span, 0)])

    def at_fragment_element(self, buf: T.Buffer, idx: list[T.Expr], span, make) -> T.Stmt:
        """`for i, j in Parallel(buf's shape): if (i, j) == idx: make([i, j])`: the iteration that owns element idx
        of fragment buf (each thread tests its own elements)."""
        loop_vars = [T.Var(D.I32, span, self.unique("element"), "loop") for _ in buf.shape]
        cond: T.Expr | None = None
        for v, i in zip(loop_vars, idx, strict=True):
            eq = T.Compare(D.BOOL, span, "==", v, self.cast(i, D.I32))
            cond = eq if cond is None else self.binary("and", cond, eq, span)
        assert cond is not None
        return T.For(span, "parallel", loop_vars, list(buf.shape), [T.If(span, cond, [make(loop_vars)], [])])

    def buffer_attr_owner(self, node: A.Attribute, scope) -> T.Buffer:
        """The buffer of `buf.dtype` / `buf.shape`."""
        base = node.value
        bound = scope.lookup(base.id) if isinstance(base, A.Name) else None
        if not isinstance(bound, T.Buffer):
            raise self.fail(f"'.{node.attr}' is an attribute of a buffer or tensor; '{_dotted(base)}' is not one",
                            node.span)
        return bound

    def shape_arg(self, node: A.Node, scope) -> list[T.Expr]:
        """A shape: (a, b), [a, b], a single extent, or another buffer's `buf.shape`."""
        if isinstance(node, A.Attribute) and node.attr == "shape":
            return list(self.buffer_attr_owner(node, scope).shape)
        if isinstance(node, A.IfExpr):  # [a, b] if const else [b, a]
            taken = node.then if self.const_bool(node.cond, scope, "the condition choosing a shape") else node.orelse
            return self.shape_arg(taken, scope)
        bound = scope.lookup(node.id) if isinstance(node, A.Name) else None
        if isinstance(bound, tuple) and bound[0] == "const" and isinstance(bound[1], tuple):  # const shape = [a, b]
            return [self.literal(v, node.span) for v in bound[1]]
        dims = node.items if isinstance(node, A.TupleExpr | A.ListExpr) else [node]
        if not dims:
            raise self.fail("a buffer needs at least one dimension", node.span)
        return [self.fold_locals(self.int_expr(d, scope)) for d in dims]

    def name_expr(self, node: A.Name, scope: _Scope) -> T.Expr:
        bound = scope.lookup(node.id)
        if bound is None:
            if node.id in ("True", "False", "true", "false"):
                return T.Const(D.BOOL, node.span, node.id in ("True", "true"))
            if D.lookup(node.id) is not None:
                raise self.fail(f"'{node.id}' is a dtype, not a value", node.span)
            if node.id in BUILTINS:
                raise self.fail(f"'{node.id}' is a function; call it", node.span)
            raise self.fail(undefined_name(node.id, scope), node.span)
        if isinstance(bound, tuple) and bound[0] == "const":
            value = bound[1]
            if isinstance(value, D.DType):
                raise self.fail(f"'{node.id}' is a dtype, not a value", node.span)
            if isinstance(value, str):
                raise self.fail(f"'{node.id}' is a string const, not a number", node.span)
            if isinstance(value, tuple):
                raise self.fail(f"'{node.id}' is a list const, not a number; index it ({node.id}[0]) or pass it "
                                "as a shape", node.span)
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
        what = f"of an operand of '{op}'"
        return fold(T.Binary(dt, span, op, self.convert_implicitly(a, dt, what), self.convert_implicitly(b, dt, what)))

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

    def thread_index(self, fname: str, node: A.CallExpr, scope: _Scope) -> T.Expr:
        """TileLang's `get_thread_binding(dim=0)` and `thread_binding(0, n, thread="threadIdx.x")`: the thread's
        index along one dimension of the kernel's `threads=`. A multi-dimensional `threads=(x, y[, z])` is one
        block of x*y*z threads numbered as CUDA does (x fastest), so dimension d is a formula of the index."""
        dims = self.thread_dims
        if fname == "get_thread_binding":
            args, _ = self.call_args(node, ["dim"])
            d = self.const_int(args["dim"], scope, "the dimension of get_thread_binding") if "dim" in args else 0
            where = args.get("dim", node)
        else:
            args, _ = self.call_args(node, ["begin", "end", "thread"])
            self.require(args, ["begin", "end", "thread"], node)
            axis = args["thread"]
            names = {f"threadIdx.{a}": i for i, a in enumerate("xyz")}
            if not isinstance(axis, A.String) or axis.value not in names:
                raise self.fail('thread_binding(begin, end, thread="threadIdx.x") binds threadIdx.x, .y or .z',
                                axis.span)
            d, where = names[axis.value], axis
        if not 0 <= d < len(dims):
            shape = dims[0] if len(dims) == 1 else tuple(dims)
            raise self.fail(f"this kernel's threads (threads={shape}) have {len(dims)} dimension(s): the thread index "
                            f"has dimensions 0 to {len(dims) - 1}; give threads=(x, y) for a second one",
                            where.span)
        if fname == "thread_binding":
            begin = self.const_int(args["begin"], scope, "the start of thread_binding")
            end = self.const_int(args["end"], scope, "the end of thread_binding")
            if begin != 0 or end != dims[d]:
                raise self.fail(f"thread_binding({begin}, {end}) must cover the kernel's threads along "
                                f"threadIdx.{'xyz'[d]}: thread_binding(0, {dims[d]}, ...)", node.span)
        tid = T.Var(D.I32, node.span, "threadIdx", THREAD)
        below = 1
        for e in dims[:d]:
            below *= e
        out: T.Expr = tid
        if below > 1:
            out = T.Binary(D.I32, node.span, "//", out, T.Const(D.I32, node.span, below))
        if d < len(dims) - 1:
            out = T.Binary(D.I32, node.span, "%", out, T.Const(D.I32, node.span, dims[d]))
        return out

    def call_ceildiv(self, a: T.Expr, b: T.Expr, span: Span) -> T.Expr:
        dt = D.promote(a.dtype, b.dtype)
        return fold(T.Call(dt, span, "ceildiv", [self.cast(a, dt), self.cast(b, dt)]))

    def call_expr(self, node: A.CallExpr, scope: _Scope) -> T.Expr:
        if isinstance(node.func, A.Attribute) and node.func.attr == "astype":  # x.astype(f16)
            if len(node.args) != 1 or node.kwargs:
                raise self.fail("x.astype(dtype) takes one dtype", node.span)
            return self.cast(self.expr(node.func.value, scope), self.dtype_arg(node.args[0], scope))
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
        if fname in ATOMIC_FUNCS and bound is None:
            return self.atomic_value(fname, node, scope)
        if fname == "reinterpret":
            return self.reinterpret(node, scope)
        if fname in ("get_thread_binding", "thread_binding"):
            return self.thread_index(fname, node, scope)
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
        if fname == "clamp":
            if len(args) != 3:
                raise self.fail("clamp(x, lo, hi) takes three arguments", node.span)
            x, lo, hi = (self.expr(a, scope) for a in args)
            dt = D.promote(self.operand_type(x, lo), self.operand_type(x, hi))
            low = fold(T.Call(dt, node.span, "max", [self.cast(x, dt), self.cast(lo, dt)]))
            return fold(T.Call(dt, node.span, "min", [low, self.cast(hi, dt)]))
        if fname in ("shift_left", "shift_right"):
            if len(args) != 2:
                raise self.fail(f"{fname}(a, b) takes two arguments", node.span)
            a, b = self.int_expr(args[0], scope), self.int_expr(args[1], scope)
            return self.binary("<<" if fname == "shift_left" else ">>", a, b, node.span)
        if fname == "get_block_binding":  # TileLang's block index of dimension d: the Kernel's bx, by, bz
            if len(args) > 1:
                raise self.fail("get_block_binding(dim=0) takes the dimension", node.span)
            d = self.const_int(args[0], scope, "the dimension of get_block_binding") if args else 0
            if not 0 <= d < 3:
                raise self.fail(f"a block index has dimensions 0, 1 and 2, not {d}", node.span)
            return self.block_vars[d]
        if fname in ("floordiv", "floormod"):
            if len(args) != 2:
                raise self.fail(f"{fname}(a, b) takes two arguments", node.span)
            a, b = self.int_expr(args[0], scope), self.int_expr(args[1], scope)
            return self.binary("//" if fname == "floordiv" else "%", a, b, node.span)
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
        if fname in ("Tensor", "reshape", "view"):
            raise self.fail(f"T.{fname} makes a view: assign it to a name first (`X = T.{fname}(...)`), then "
                            "index or copy X", node.span)
        if fname in LOOP_FUNCS or fname == "Kernel":
            raise self.fail(f"{fname} can only be used as a loop or `with` header", node.span)
        raise self.fail(unsupported_builtin(fname) or undefined_function(fname, scope), node.func.span)

    def names_dtype(self, node: A.Node, scope: _Scope) -> bool:
        """Whether `node` spells a dtype (reported nothing either way)."""
        if isinstance(node, A.String):
            return D.lookup(node.value) is not None
        if isinstance(node, A.Name):
            return self.dtype_of_name(node.id, scope) is not None
        if isinstance(node, A.Attribute) and node.attr == "dtype":
            return isinstance(node.value, A.Name) and isinstance(scope.lookup(node.value.id), T.Buffer)
        return False

    def reinterpret(self, node: A.CallExpr, scope: _Scope) -> T.Expr:
        """`reinterpret(value, dtype)` (TileLang's order) or `reinterpret(dtype, value)` (TVM's): the bits of
        `value` read as `dtype`, a type of the same width. An integer literal takes the unsigned type of
        `dtype`'s width."""
        args = list(node.args)
        for kw in node.kwargs:
            if kw.name != "dtype":
                raise self.fail("reinterpret takes (value, dtype) and no other keyword", kw.span)
            args.append(kw.value)
        if len(args) != 2:
            raise self.fail("reinterpret(value, dtype) takes a value and a dtype", node.span)
        first_is_dtype = self.names_dtype(args[0], scope) and not self.names_dtype(args[1], scope)
        dnode, vnode = (args[0], args[1]) if first_is_dtype else (args[1], args[0])
        dt = self.dtype_arg(dnode, scope)
        value = self.expr(vnode, scope)
        src = value.dtype
        if isinstance(value, T.Const) and src == D.I32 and dt.bits != 32 and not dt.is_bool:
            unsigned = D.lookup(f"u{dt.bits}")
            if unsigned is not None and -(2 ** (dt.bits - 1)) <= int(value.value) < 2 ** dt.bits:
                value, src = T.Const(unsigned, value.span, int(value.value) % 2 ** dt.bits), unsigned
        if dt.is_bool or src.is_bool:
            raise self.fail(f"reinterpret of {src} as {dt}: bool has no bit pattern to reinterpret; compare "
                            "or cast instead", node.span)
        if src.bits != dt.bits:
            raise self.fail(f"reinterpret of {src} as {dt}: a bit cast keeps the width, and {src} has {src.bits} "
                            f"bits where {dt} has {dt.bits} bits; convert the value with T.cast to a "
                            f"{dt.bits}-bit type first", node.span)
        if src == dt:
            return value
        return T.Call(dt, node.span, "reinterpret", [value])


def _block_uniform(indices: list[T.Expr]) -> bool:
    """Indices made of constants, block indices, runtime sizes and loop variables only: the same in every thread
    outside Parallel loops (a local may hold the thread index: per-thread code keeps its own rules there)."""
    return all(not isinstance(x, T.Var) or x.kind in ("block", "size", "loop")
               for i in indices for x in sub_exprs(i))


def _dotted(node: A.Node) -> str:
    if isinstance(node, A.Name):
        return node.id
    if isinstance(node, A.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "this expression"
