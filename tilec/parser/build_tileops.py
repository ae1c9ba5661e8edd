"""Tile operations (copy, gemm, reduce, fill, atomic, print, layouts) and the regions they take."""

from __future__ import annotations

from ..diagnostics import Diagnostic, Span
from ..ir import dtypes as D
from ..ir import tile as T
from ..ir.fold import as_int, constant_difference, fold
from ..ops import registry as ops
from . import ast as A
from .build_common import (
    ATOMIC_FUNCS,
    BUILTINS,
    REDUCE_FUNCS,
    _aligned_dims,
    _callee,
    _Scope,
    read_only,
    undefined_name,
)


class TileOpBuilder:
    """Mixin of Builder: tile-op statements and their region operands."""

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
        if self.in_parallel and fname in ATOMIC_FUNCS:
            return self.atomic_element(fname, call, scope)
        if self.in_parallel:
            raise self.fail(f"{fname} is a block-wide tile operation and cannot be used inside a Parallel loop",
                            call.span)
        span = call.span
        home = ops.builder(fname)  # an op whose home builds it (tilec/ops/<op>.py's `build`)
        if home is not None:
            return self.emit(home.build(self, call, scope))
        if fname == "copy":
            args, _ = self.call_args(call, ["src", "dst", "coalesced_width", "disable_tma"])
            self.require(args, ["src", "dst"], call)
            if self.has_runtime_slice(args["src"], scope):
                return self.clipped_copy(args["src"], args["dst"], scope, span)
            src, dst = self.region_pair(args["src"], args["dst"], scope)
            if dst.buffer.scope == "global" and not dst.buffer.is_output:
                raise self.fail("cannot copy into {}; {}".format(*read_only(dst.buffer)),
                                args["dst"].span)
            if not D.holds(dst.buffer.dtype, src.buffer.dtype):
                self.rep.diagnostics.append(Diagnostic(
                    "warning", f"copy from {src.buffer.dtype} '{src.buffer.name}' to {dst.buffer.dtype} "
                    f"'{dst.buffer.name}' converts each element implicitly and may change its value", span,
                    category="conversion"))
            return self.emit(T.Copy(span, src, dst))
        if fname == "gemm_sp":
            return self.gemm_sparse(call, scope)
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
            dst = self.region(args["buffer"], scope, unit_corner=True)  # fill(buf[0], v): that one element
            self.require_full_extents(dst, args["buffer"])
            if dst.buffer.scope == "global" and not dst.buffer.is_output:
                raise self.fail("cannot fill {}; {}".format(*read_only(dst.buffer)), args["buffer"].span)
            value = self.expr(args["value"], scope) if fname == "fill" else T.Const(dst.buffer.dtype, span, 0)
            return self.emit(T.Fill(span, dst, self.cast(value, dst.buffer.dtype)))
        if fname in ATOMIC_FUNCS:
            args, _ = self.call_args(call, ["dst", "value", "memory_order", "return_prev", "use_tma"])
            self.atomic_options(args, scope)
            self.require(args, ["dst", "value"], call)
            if self.is_region_node(args["value"], scope):
                src, dst = self.region_pair(args["value"], args["dst"], scope)
                value: T.Region | T.Expr = src
            else:
                dst = self.region(args["dst"], scope, unit_corner=True)
                value = self.expr(args["value"], scope)
            if dst.buffer.scope == "global" and not dst.buffer.is_output:
                raise self.fail("cannot update {} atomically; {}".format(*read_only(dst.buffer)),
                                args["dst"].span)
            return self.emit(T.Atomic(span, ATOMIC_FUNCS[fname], dst, value))
        if fname == "print":
            return self.print_op(call, scope)
        if fname == "annotate_layout":
            if len(call.args) != 1 or not isinstance(call.args[0], A.DictExpr):
                raise self.fail("annotate_layout takes a dict {buffer: layout}", span)
            for key, val in call.args[0].items:
                buf = self.buffer_ref(key, scope)
                layout = _layout_function(val)
                if buf.scope == "global" and layout is not None:
                    raise self.fail(f"'{buf.name}' is a tensor: its layout is its caller's, and tilec reads and writes "
                                    "every tensor row-major (a launch passes no other order); drop the annotation "
                                    "(in every kernel that uses the tensor, so they agree), or index the tensor in "
                                    "the order you need in a Parallel loop", val.span)
                if layout == "Fragment":
                    raise self.fail("T.Fragment layouts are not supported: tilec infers the register layout of every "
                                    "fragment (from the gemms, reductions and copies that use it); drop the "
                                    "annotation", val.span)
                if layout == "Layout":
                    assert isinstance(val, A.CallExpr)
                    self.emit(T.AnnotateLayout(val.span, buf, "custom", self.index_map(val, buf, scope)))
                    continue
                if layout not in ("make_swizzled_layout", "make_padded_layout", "make_linear_layout"):
                    raise self.fail("expected make_swizzled_layout(buf), make_padded_layout(buf), "
                                    "make_linear_layout(buf) or T.Layout(buf.shape, lambda i, j: ...)", val.span)
                self.emit(T.AnnotateLayout(span, buf, layout.removeprefix("make_").removesuffix("_layout")))
            return
        if fname in ("im2col", "c2d_im2col"):
            return self.im2col(call, scope)
        if fname == "use_swizzle":
            args, _ = self.call_args(call, ["panel_size", "order", "enable"])
            panel = self.const_int(args["panel_size"], scope, "panel_size") if "panel_size" in args else 8
            enable = self.const_bool(args["enable"], scope, "enable") if "enable" in args else True
            if panel <= 0:
                raise self.fail("panel_size must be positive", args["panel_size"].span)
            return self.emit(T.UseSwizzle(span, panel, enable))
        raise self.fail(f"unknown tile operation '{fname}'", span)

    def index_map(self, call: A.CallExpr, buf: T.Buffer, scope: _Scope) -> T.IndexMap:
        """`T.Layout(shape, lambda i, j: [p, q])` (or `lambda i, j: offset`) for the shared buffer `buf`: where
        each element is stored, the physical coordinates row-major in the extents they reach. Checked here by
        enumeration: integer arithmetic of the arguments and constants only, one-to-one, inside the buffer."""
        import numpy as np

        from ..ir.layout import MAP_OPS, add, map_values, mul
        from ..ir.printer import expr_str
        from ..ir.visit import sub_exprs

        args, _ = self.call_args(call, ["shape", "forward_fn"])
        self.require(args, ["shape", "forward_fn"], call)
        if buf.scope != "shared":
            why = ("tilec infers the register layout of every fragment; drop the annotation" if buf.scope == "fragment"
                   else "only shared buffers take one")
            raise self.fail(f"T.Layout says where a shared buffer's elements are stored; '{buf.name}' is a "
                            f"{buf.scope} buffer ({why})", call.span)
        shape = buf.const_shape
        dims = [as_int(d) for d in self.shape_arg(args["shape"], scope)]
        if shape is None or dims != list(shape):
            raise self.fail(f"T.Layout's shape ({', '.join(map(str, dims))}) is not the shape of '{buf.name}' "
                            f"({', '.join(expr_str(d) for d in buf.shape)}); pass {buf.name}.shape", args["shape"].span)
        fn = args["forward_fn"]
        if not isinstance(fn, A.LambdaExpr):
            raise self.fail("T.Layout's index map must be a lambda written in place: lambda i, j: [row, col]",
                            fn.span)
        if len(fn.params) != len(shape):
            raise self.fail(f"the index map of the {len(shape)}-D buffer '{buf.name}' takes {len(shape)} "
                            f"argument(s), not {len(fn.params)}", fn.span)
        inner = _Scope(scope)
        vars_ = []
        for name, sp in fn.params:
            v = T.Var(D.I32, sp, name, "loop")  # (never a variable of the generated code: no unique name)
            inner.bind(name, v)
            vars_.append(v)
        items = fn.body.items if isinstance(fn.body, A.ListExpr | A.TupleExpr) else [fn.body]
        if not items:
            raise self.fail("the index map returns no coordinates", fn.body.span)
        outs = []
        for it in items:
            e = fold(self.expr(it, inner))
            for x in sub_exprs(e):
                ok = (isinstance(x, T.Const) and x.dtype.is_int) or (isinstance(x, T.Var) and x in vars_) or (
                    isinstance(x, T.Binary) and x.op in MAP_OPS and x.dtype.is_int) or (
                    isinstance(x, T.Unary) and x.op in ("-", "~") and x.dtype.is_int) or (
                    isinstance(x, T.Cast) and x.dtype.is_int and x.value.dtype.is_int)
                if not ok:
                    raise self.fail("an index map may compute only with its own arguments, compile-time integers and "
                                    f"+ - * // % ^ & | << >>; `{expr_str(x)}` is none of these",
                                    it.span if isinstance(x, T.Var) or x.span is None else x.span)
            outs.append(e if e.dtype == D.I32 else T.Cast(D.I32, e.span, e))
        env = {v: g for v, g in zip(vars_, np.indices(shape, dtype=np.int64), strict=True)}
        try:
            coords = [np.broadcast_to(map_values(o, env), shape) for o in outs]
        except ZeroDivisionError:
            raise self.fail("the index map divides by zero", fn.body.span) from None

        def at(flat: int) -> str:
            return "(" + ", ".join(str(int(x)) for x in np.unravel_index(flat, shape)) + ")"

        size = int(np.prod(shape))
        if len(outs) == 1:
            offset, offsets = outs[0], coords[0]
        else:
            for d, cd in enumerate(coords):
                if cd.min() < 0:
                    raise self.fail(f"the index map sends {at(int(np.argmin(cd)))} to a negative coordinate "
                                    f"({int(cd.min())}) in output {d}", items[d].span)
            extents = [int(cd.max()) + 1 for cd in coords]
            offset, offsets = outs[0], coords[0]
            for o, cd, ext in zip(outs[1:], coords[1:], extents[1:], strict=True):
                offset, offsets = add(mul(offset, ext), o), offsets * ext + cd
        flat = offsets.ravel()
        bad = np.nonzero((flat < 0) | (flat >= size))[0]
        if bad.size:
            raise self.fail(f"the index map sends {at(int(bad[0]))} to offset {int(flat[bad[0]])}, outside the "
                            f"{size} elements of '{buf.name}' (a layout here reorders the buffer's storage; it "
                            "cannot pad it)", fn.span)
        order = np.argsort(flat, kind="stable")
        same = np.nonzero(flat[order][1:] == flat[order][:-1])[0]
        if same.size:
            a, b = int(order[same[0]]), int(order[same[0] + 1])
            raise self.fail(f"the index map is not one-to-one: it sends {at(a)} and {at(b)} to the same place "
                            f"(offset {int(flat[a])})", fn.span)
        return T.IndexMap(vars_, outs, fold(offset))

    def im2col(self, call: A.CallExpr, scope: _Scope) -> None:
        """`im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`, TileLang's convolution gather, as
        the Parallel loop it means: row i, column j of the col tile (block_m x block_k, its last two dims) is
        output pixel m = nhw_step * block_m + i of the N x OH x OW pixels of the NHWC image, at position
        k = c_step * block_k + j of the (kh, kw, c) patch of a kernel x kernel window; zero where the window
        reads the padding, and past the last pixel or the last patch position."""
        names = ["img", "col", "nhw_step", "c_step", "kernel", "stride", "dilation", "pad", "eviction_policy",
                 "annotations"]
        args, _ = self.call_args(call, names)
        self.require(args, names[:8], call)
        span = call.span
        img = self.region(args["img"], scope)
        if img.buffer.scope != "global" or len(img.buffer.shape) != 4:
            raise self.fail(f"im2col reads a 4-D NHWC tensor; '{img.buffer.name}' is a {len(img.buffer.shape)}-D "
                            f"{img.buffer.scope} buffer", args["img"].span)
        if not isinstance(args["img"], A.Name):
            raise self.fail("im2col reads the whole image tensor: pass it without indices", args["img"].span)
        col = self.region(args["col"], scope)
        self.require_full_extents(col, args["col"])
        if col.buffer.scope not in ("shared", "fragment") or len(col.extents) < 2:
            raise self.fail(f"im2col writes a 2-D tile of a shared or fragment buffer; '{col.buffer.name}' is a "
                            f"{col.buffer.scope} buffer of {len(col.extents)} dimension(s)", args["col"].span)
        block = [as_int(fold(e)) for e in col.extents]
        if None in block[-2:] or any(b != 1 for b in block[:-2]):
            raise self.fail("the im2col tile must have compile-time rows and columns (its other extents 1)",
                            args["col"].span)
        nhw_step = self.cast(self.int_expr(args["nhw_step"], scope), D.I32)
        c_step = self.cast(self.int_expr(args["c_step"], scope), D.I32)
        ksize, stride, dilation, pad = (self.const_int(args[n], scope, n) for n in ("kernel", "stride", "dilation",
                                                                                      "pad"))
        for name, v, low in (("kernel", ksize, 1), ("stride", stride, 1), ("dilation", dilation, 1), ("pad", pad, 0)):
            if v < low:
                raise self.fail(f"im2col's {name} must be at least {low}, got {v}", args[name].span)
        if self.in_parallel:
            raise self.fail("im2col is a tile operation; it cannot be used inside a Parallel loop", span)

        def b(op, x, y):
            return self.binary(op, x if isinstance(x, T.Expr) else T.Const(D.I32, span, x),
                               y if isinstance(y, T.Expr) else T.Const(D.I32, span, y), span)

        def cmp(op, x, y):
            return fold(T.Compare(D.BOOL, span, op, x, y if isinstance(y, T.Expr) else T.Const(D.I32, span, y)))

        body: list[T.Stmt] = []

        def local(name: str, value: T.Expr, into: list[T.Stmt]) -> T.Expr:
            if isinstance(value, T.Const | T.Var):
                return value
            var = T.Var(value.dtype, span, self.unique(name), "local")
            self.parallel_depth[var] = self.in_parallel + (into is body)
            into.append(T.Assign(span, var, value))
            return var

        n_img, h_img, w_img, c_img = (self.cast(d, D.I32) for d in img.buffer.shape)
        reach = dilation * (ksize - 1) + 1 - 2 * pad  # an output row needs this many more input rows than it skips
        before: list[T.Stmt] = []
        out_h = b("+", b("//", b("-", h_img, reach), stride), 1) if stride > 1 else b("-", b("+", h_img, 1), reach)
        out_w = local("im2col_ow", b("+", b("//", b("-", w_img, reach), stride), 1) if stride > 1
                      else b("-", b("+", w_img, 1), reach), before)
        pixels = local("im2col_pixels", b("*", out_h, out_w), before)
        i = T.Var(D.I32, span, self.unique("im2col_i"), "loop")
        j = T.Var(D.I32, span, self.unique("im2col_j"), "loop")
        m = local("im2col_m", b("+", b("*", nhw_step, block[-2]), i), body)
        k = local("im2col_k", b("+", b("*", c_step, block[-1]), j), body)
        h = local("im2col_h", b("-", b("+", b("*", b("//", b("%", m, pixels), out_w), stride),
                                      b("*", b("//", k, b("*", c_img, ksize)), dilation)), pad), body)
        w = local("im2col_w", b("-", b("+", b("*", b("%", m, out_w), stride),
                                      b("*", b("%", b("//", k, c_img), ksize), dilation)), pad), body)
        inside = cmp("<", m, b("*", n_img, pixels))
        for cond in (cmp("<", k, b("*", c_img, ksize * ksize)), cmp(">=", h, 0), cmp("<", h, h_img),
                     cmp(">=", w, 0), cmp("<", w, w_img)):
            inside = self.binary("and", inside, cond, span)
        dt = col.buffer.dtype
        load = T.Load(img.buffer.dtype, span, img.buffer, [b("//", m, pixels), h, w, b("%", k, c_img)])
        value = fold(T.Select(dt, span, inside, self.cast(load, dt), T.Const(dt, span, 0)))
        idx = [*col.starts[:-2], b("+", col.starts[-2], i), b("+", col.starts[-1], j)]
        body.append(T.Store(span, col.buffer, idx, value))
        for st in before:
            self.emit(st)
        self.emit(T.For(span, "parallel", [i, j], [T.Const(D.I32, span, block[-2]), T.Const(D.I32, span, block[-1])],
                        body))

    def atomic_options(self, args: dict, scope) -> None:
        """memory_order= is accepted and ignored: every atomic is relaxed (docs/language.md)."""
        if "return_prev" in args:  # (as a statement the previous value is not used)
            self.const_bool(args["return_prev"], scope, "return_prev")
        if "use_tma" in args:
            self.const_bool(args["use_tma"], scope, "use_tma")
        order = args.get("memory_order")
        if order is not None and not (isinstance(order, A.String) and order.value in (
                "relaxed", "acquire", "release", "acq_rel", "seq_cst", "consume")):
            raise self.fail('memory_order must be a string: "relaxed", "acquire", "release", "acq_rel" or "seq_cst"',
                            order.span)

    def atomic_element(self, fname: str, call: A.CallExpr, scope: _Scope) -> None:
        """`atomic_add(C[i, j], v)` inside a Parallel loop: each iteration updates its element."""
        args, _ = self.call_args(call, ["dst", "value", "memory_order", "return_prev", "use_tma"])
        self.require(args, ["dst", "value"], call)
        self.atomic_options(args, scope)
        node = args["dst"]
        if not isinstance(node, A.Subscript) or any(isinstance(i, A.Slice) for i in node.items):
            raise self.fail(f"inside a Parallel loop {fname} updates one element: {fname}(buf[i, j], value)",
                            node.span)
        buf = self.buffer_ref(node.value, scope)
        if buf.scope == "global" and not buf.is_output:
            raise self.fail("cannot update {} atomically; {}".format(*read_only(buf)), node.span)
        if buf.scope not in ("global", "shared"):
            raise self.fail(f"atomic updates go to global or shared memory; '{buf.name}' is a {buf.scope} buffer "
                            "(its elements belong to one thread: update it with a plain assignment)", node.span)
        idx = self.element_indices(buf, node, scope)
        value = self.cast(self.expr(args["value"], scope), buf.dtype)
        ones = [T.Const(D.I32, node.span, 1) for _ in idx]
        self.emit(T.Atomic(call.span, ATOMIC_FUNCS[fname], T.Region(buf, idx, ones, node.span), value,
                           per_element=True))

    def atomic_value(self, fname: str, call: A.CallExpr, scope: _Scope) -> T.Expr:
        """`pos = atomic_add(H[b], 1, return_prev=True)`: the element's value before this update. The update is
        a statement put before the one using its value; a local receives the previous value."""
        args, _ = self.call_args(call, ["dst", "value", "memory_order", "return_prev", "use_tma"])
        self.require(args, ["dst", "value"], call)
        if "return_prev" not in args or not self.const_bool(args["return_prev"], scope, "return_prev"):
            raise self.fail(f"{fname} has a value only with return_prev=True (the element's previous value)",
                            call.span)
        self.atomic_options(args, scope)
        node = args["dst"]
        if not isinstance(node, A.Subscript) or any(isinstance(i, A.Slice) for i in node.items):
            raise self.fail(f"{fname}(..., return_prev=True) updates one element: {fname}(buf[i], value, "
                            "return_prev=True)", node.span)
        buf = self.buffer_ref(node.value, scope)
        if buf.scope not in ("global", "shared") or (buf.scope == "global" and not buf.is_output):
            why = "cannot update {}; {}".format(*read_only(buf)) if buf.scope == "global" else \
                f"atomic updates go to global or shared memory; '{buf.name}' is a {buf.scope} buffer"
            raise self.fail(why, node.span)
        idx = self.element_indices(buf, node, scope)
        value = self.cast(self.expr(args["value"], scope), buf.dtype)
        prev = T.Var(buf.dtype, call.span, self.unique("prev"), "local")
        self.parallel_depth[prev] = self.in_parallel
        self.emit(T.Assign(call.span, prev, T.Const(buf.dtype, call.span, 0)))
        ones = [T.Const(D.I32, node.span, 1) for _ in idx]
        self.emit(T.Atomic(call.span, ATOMIC_FUNCS[fname], T.Region(buf, idx, ones, node.span), value,
                           per_element=bool(self.in_parallel), result=prev))
        return prev

    def require(self, args: dict, names: list[str], call: A.CallExpr) -> None:
        missing = [n for n in names if n not in args]
        if missing:
            raise self.fail(f"{_callee(call)} is missing argument(s): {', '.join(missing)}", call.span)

    def print_op(self, call: A.CallExpr, scope) -> None:
        """print(value[, "label"][, msg="label"][, block=(bx, by, bz)][, thread=t]); block and thread are
        compile-time integers (a block given with fewer than three indices has 0 for the others)."""
        label = ""
        vals = []
        for a in call.args:
            if isinstance(a, A.String):
                label = a.value
            else:
                vals.append(a)
        block = thread = None
        for kw in call.kwargs:
            if kw.name == "msg" and isinstance(kw.value, A.String):
                label = kw.value.value
            elif kw.name == "block":
                items = kw.value.items if isinstance(kw.value, A.TupleExpr) else [kw.value]
                if not 1 <= len(items) <= 3:
                    raise self.fail("block= takes one to three block indices", kw.span)
                idx = [self.const_int(i, scope, "a block index of print") for i in items]
                if any(i < 0 for i in idx):
                    raise self.fail("block indices are not negative", kw.span)
                block = (*idx, *([0] * (3 - len(idx))))
            elif kw.name == "thread":
                thread = self.const_int(kw.value, scope, "thread of print")
                if thread < 0:
                    raise self.fail("thread= is a thread index (0 or more)", kw.span)
            else:
                raise self.fail('print(value[, msg="..."][, block=(bx, by)][, thread=t])', kw.span)
        if len(vals) != 1:
            raise self.fail("print takes one buffer or scalar (and an optional message string)", call.span)
        node = vals[0]
        pv: T.Region | T.Expr
        if self.is_region_node(node, scope):
            pv = self.region(node, scope, unit_corner=True)
            self.require_full_extents(pv, node)
        else:
            pv = self.expr(node, scope)
        return self.emit(T.Print(call.span, label, pv, block, thread))

    def gemm_sparse(self, call: A.CallExpr, scope: _Scope) -> None:
        """`gemm_sp(A_sparse, E, B, C)` — 2:4 structured sparsity (TileLang's example_gemm_sp.py): A_sparse holds
        the two kept values of each group of four along K (bm x bk/2), E their positions, two 2-bit indices per
        group packed low group first into E's integers (E: bm x bk/bits, `bits` E's width: what TileLang's
        compress() writes). tilec has no sparse matrix instruction yet: it expands A into a dense bm x bk shared
        tile (zeros where the group kept nothing) and runs the dense gemm, twice the multiplies of mma.sp, said
        in a -Rpass=gemm remark."""
        args, _ = self.call_args(call, ["A_sparse", "E", "B", "C", "transpose_A", "transpose_E", "transpose_B",
                                        "policy", "clear_accum"])
        self.require(args, ["A_sparse", "E", "B", "C"], call)
        for flag in ("transpose_A", "transpose_E"):
            if flag in args and self.const_bool(args[flag], scope, flag):
                raise self.fail(f"gemm_sp with {flag}=True is not supported: store the sparse operand and its "
                                "metadata row-major (M x K/2, M x K/bits)", args[flag].span)
        a_sp, meta = self.region(args["A_sparse"], scope), self.region(args["E"], scope)
        for r, node in ((a_sp, args["A_sparse"]), (meta, args["E"])):
            self.require_full_extents(r, node)
            if r.buffer.scope != "shared" or r.const_extents is None or len(r.const_extents) != 2:
                raise self.fail("gemm_sp reads its sparse operand and metadata from 2-D shared tiles", node.span)
        if a_sp.buffer.dtype.bytes != 2:
            raise self.fail(f"gemm_sp takes 16-bit values (f16, bf16) in its sparse operand, not "
                            f"{a_sp.buffer.dtype}", args["A_sparse"].span)
        bits = meta.buffer.dtype.bits
        if not meta.buffer.dtype.is_int or bits not in (8, 16, 32):
            raise self.fail(f"gemm_sp's metadata is an 8-, 16- or 32-bit integer tile, not {meta.buffer.dtype}",
                            args["E"].span)
        rows, half = a_sp.const_extents
        if meta.const_extents != (rows, 2 * half // bits):
            raise self.fail(f"gemm_sp's metadata for a {rows} x {half} sparse tile ({rows} x {2 * half} dense) of "
                            f"{bits}-bit integers is {rows} x {2 * half // bits}, not "
                            f"{' x '.join(map(str, meta.const_extents))}", args["E"].span)
        span = call.span
        dense = T.Buffer(self.unique(f"{a_sp.buffer.name}_dense"), a_sp.buffer.dtype,
                         [T.Const(D.I32, span, rows), T.Const(D.I32, span, 2 * half)], "shared", span)
        self.kernel_top.insert(0, T.Alloc(span, dense, None))

        def lit(v: int) -> T.Expr:
            return T.Const(D.I32, span, v)

        i, j = (T.Var(D.I32, span, self.unique(n), "loop") for n in ("row", "col"))
        group = self.binary("//", j, lit(4), span)
        word = T.Load(meta.buffer.dtype, span, meta.buffer,
                      [self.binary("+", meta.starts[0], i, span),
                       self.binary("+", meta.starts[1], self.binary("//", j, lit(bits), span), span)])
        shift = self.binary("*", lit(4), self.binary("%", group, lit(bits // 4), span), span)
        nibble = self.binary("&", self.binary(">>", self.cast(word, D.I32), shift, span), lit(15), span)
        lane = self.binary("%", j, lit(4), span)

        def kept(k: int) -> T.Expr:
            return T.Load(a_sp.buffer.dtype, span, a_sp.buffer,
                          [self.binary("+", a_sp.starts[0], i, span),
                           self.binary("+", a_sp.starts[1], self.binary("+", self.binary("*", group, lit(2), span),
                                                                         lit(k), span), span)])

        first = T.Compare(D.BOOL, span, "==", lane, self.binary("&", nibble, lit(3), span))
        second = T.Compare(D.BOOL, span, "==", lane, self.binary("&", self.binary(">>", nibble, lit(2), span),
                                                                  lit(3), span))
        zero = T.Const(a_sp.buffer.dtype, span, 0)
        value = T.Select(a_sp.buffer.dtype, span, first, kept(0), T.Select(a_sp.buffer.dtype, span, second, kept(1),
                                                                             zero))
        self.emit(T.For(span, "parallel", [i, j], [lit(rows), lit(2 * half)],
                        [T.Store(span, dense, [i, j], value)]))
        self.rep.remark("gemm", f"gemm_sp expands its 2:4 sparse operand '{a_sp.buffer.name}' into a dense "
                        f"{rows} x {2 * half} shared tile and multiplies it densely (no sparse matrix instruction "
                        "yet: twice mma.sp's multiplies)", span)
        options = [A.Keyword(args[k].span, k, args[k]) for k in ("transpose_B", "policy", "clear_accum") if k in args]
        operands = [A.Name(span, f"sparse·{dense.name}"), args["B"], args["C"]]
        dense_call = A.CallExpr(span, A.Name(span, "gemm"), operands, options)
        scope.bind(f"sparse·{dense.name}", dense)  # not a name a source can spell
        self.tile_op("gemm", dense_call, scope)

    def has_runtime_slice(self, node: A.Node, scope: _Scope) -> bool:
        """Whether a copy source is a slice whose extent is known only at run time (`K[s:s + valid_n, :]`)."""
        if not isinstance(node, A.Subscript) or not isinstance(node.value, A.Name) or \
                not isinstance(scope.lookup(node.value.id), T.Buffer):
            return False
        for item in node.items:
            if isinstance(item, A.Slice) and item.lower is not None and item.upper is not None:
                lo, hi = (self.fold_locals(self.int_expr(b, scope)) for b in (item.lower, item.upper))
                if constant_difference(hi, lo) is None:
                    return True
        return False

    def clipped_copy(self, src_node: A.Node, dst_node: A.Node, scope: _Scope, span) -> None:
        """`copy(K[s:s + n, :], K_shared)` with n known only at run time (TileLang's example_gqa_decode copies
        `valid_block_N = min(block_N, ...)` rows into a block_N-row tile): the first n rows of the tile get the
        source's and the others keep their values. Written as a Parallel loop over the destination, each element
        guarded by the source's extent and its tensor's bounds (so every back end runs it; it is not a
        vectorized or asynchronous copy)."""
        assert isinstance(src_node, A.Subscript)
        src = self.region(src_node, scope, runtime_extents=True)
        dst = self.region(dst_node, scope)
        self.require_full_extents(dst, dst_node)
        if src.buffer.scope == "fragment":
            raise self.fail("a fragment cannot be the source of a copy with a run-time extent; copy it whole",
                            src_node.span)
        if dst.buffer.scope == "global":
            raise self.fail("a copy with a run-time extent fills a tile: its destination must be a shared buffer or "
                            "a fragment", dst_node.span)
        src_dims = [d for d, e in enumerate(src.extents) if as_int(e) != 1]
        dst_dims = [d for d, e in enumerate(dst.extents) if as_int(e) != 1]
        if len(src_dims) != len(dst_dims):
            raise self.fail(f"copy from a {len(src_dims)}-D region into a {len(dst_dims)}-D one", span)
        loop_vars = [T.Var(D.I32, span, self.unique("row" if k + 1 < len(dst_dims) else "col"), "loop")
                     for k in range(len(dst_dims))]
        src_idx, dst_idx = list(src.starts), list(dst.starts)
        guards: list[T.Expr] = []

        def less(a: T.Expr, b: T.Expr) -> T.Expr:
            dt = self.operand_type(a, b)
            return T.Compare(D.BOOL, span, "<", self.cast(a, dt), self.cast(b, dt))

        for v, sd, dd in zip(loop_vars, src_dims, dst_dims, strict=True):
            src_idx[sd] = fold(self.binary("+", src.starts[sd], v, span))
            dst_idx[dd] = fold(self.binary("+", dst.starts[dd], v, span))
            known = as_int(src.extents[sd])
            if known is None or known < as_int(dst.extents[dd]):
                guards.append(less(v, src.extents[sd]))
            first, dim = as_int(src.starts[sd]), as_int(src.buffer.shape[sd])
            inside = first is not None and dim is not None and first + as_int(dst.extents[dd]) <= dim
            if src.buffer.scope == "global" and not inside:
                guards.append(less(src_idx[sd], src.buffer.shape[sd]))
        store: T.Stmt = T.Store(span, dst.buffer, dst_idx,
                                self.cast(T.Load(src.buffer.dtype, span, src.buffer, src_idx), dst.buffer.dtype))
        for g in reversed(guards):  # nested, one test each (what AscendC's vector loops take)
            store = T.If(span, g, [store], [])
        body = [store]
        self.emit(T.For(span, "parallel", loop_vars, [dst.extents[d] for d in dst_dims], body))

    def require_writable(self, r: T.Region, span: Span | None, verb: str = "write") -> None:
        """Refuse a write to a global tensor that is not an output (`cannot VERB ...`)."""
        if r.buffer.scope == "global" and not r.buffer.is_output:
            raise self.fail("cannot {} {}; {}".format(verb, *read_only(r.buffer)), span)

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
                raise self.fail(undefined_name(node.id, scope), node.span)
        raise self.fail("expected a buffer or tensor", node.span)

    def region(self, node: A.Node, scope: _Scope, unit_corner: bool = False, runtime_extents: bool = False
               ) -> T.Region:
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
                    ext = constant_difference(self.fold_locals(hi), self.fold_locals(lo))
                    if ext is None:
                        if item.lower is None:
                            ext_e = fold(hi)
                        elif runtime_extents:
                            ext_e = _difference(self.fold_locals(hi), self.fold_locals(lo),
                                                self.binary("-", hi, lo, item.span))
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
        if _callee(node) in ("Tensor", "reshape", "view"):
            name = _callee(node)
            raise self.fail(f"T.{name} makes a view: assign it to a name first (`X = T.{name}(...)`), then pass X",
                            node.span)
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


def _layout_function(val: A.Node) -> str | None:
    """The layout a value of annotate_layout calls: `make_swizzled_layout(buf)`, `T.Layout(...)`, or one by its module
    path (`tilelang.layout.make_swizzled_layout(buf)`)."""
    if not isinstance(val, A.CallExpr):
        return None
    func = val.func
    if isinstance(func, A.Attribute) and isinstance(func.value, A.Attribute) and isinstance(func.value.value, A.Name) \
            and (func.value.value.id, func.value.attr) == ("tilelang", "layout"):
        return func.attr
    return _callee(val)


def _difference(hi: T.Expr, lo: T.Expr, written: T.Expr) -> T.Expr:
    """hi - lo as the one term of either that it equals (`s + (k + 1) * n` - `(s + k * n)` is `n`), else as written."""
    from ..ir.fold import polynomial
    from ..ir.visit import sub_exprs

    want = polynomial(T.Binary(written.dtype, written.span, "-", hi, lo))
    for term in [*sub_exprs(hi), *sub_exprs(lo)]:
        if term.dtype.is_int and not isinstance(term, T.Const) and polynomial(term) == want:
            return term
    return fold(written)
