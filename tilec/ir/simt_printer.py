"""One C-style printer for SIMT IR; each GPU language is a thin dialect of it.

A dialect overrides type names, thread/block index spellings, barriers, the kernel signature and
the intrinsic spellings; statements and expressions print the same everywhere.
"""

from __future__ import annotations

import math
import re

from . import dtypes as D
from . import simt as S
from . import tile as T

_PREC = {"or": 1, "and": 2, "|": 3, "^": 4, "&": 5, "cmp": 6, "<<": 7, ">>": 7, "+": 8, "-": 8,
         "*": 9, "/": 9, "//": 9, "%": 9}


def spelled(template: str):
    """A dialect's spelling of an intrinsic statement (tilec/ir/intrinsics.py) from a template: `{0}`, `{1}`...
    are the printed arguments, named fields (`{n}`, `{dtype}`) the intrinsic's parameters."""
    return lambda printer, s, args: template.format(*args, **s.params) + ";"


def _vector(fn: str):
    return lambda printer, s, args: f"tl::{fn}<{s.params['n']}>({', '.join(args)});"


def _printf(printer, s, args: list[str]) -> str:
    """A device printf of one line: the intrinsic's format uses %d and %.5g only (Python's `%` reads it too);
    C gets every integer as long long (%lld) and every float as double."""
    fmt = re.sub(r"%(%|d)", lambda m: "%%" if m.group(1) == "%" else "%lld", s.params["fmt"])
    fmt = fmt.replace("\\", "\\\\").replace('"', '\\"')
    vals = [f"static_cast<double>(static_cast<float>({a}))" if e.dtype.is_float and e.dtype.bytes < 4 else
            f"static_cast<double>({a})" if e.dtype.is_float else f"static_cast<long long>({a})"
            for e, a in zip(s.args, args, strict=True)]
    return f'printf("{fmt}\\n", {", ".join(vals)});'


# Intrinsic statements that every C-style dialect's device header provides under the same names, by op.
PORTABLE_CALLS = {
    "print": _printf,
    "copy16_or_zero": spelled("tl::copy16_or_zero({0}, {1}, {2})"),
    "copy16": spelled("tl::st_128({0}, tl::ld_128({1}))"),
    "atomic": spelled("tl::atomic_{kind}({0}, {1})"),
    "atomic_prev": spelled("{0} = tl::atomic_{kind}({1}, {2})"),
    "load_vec": _vector("load_cvt"),
    "store_vec": _vector("store_cvt"),
}


class CStylePrinter:
    types: dict[str, str] = {}
    thread_idx = "threadIdx.x"
    block_idx = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
    barrier = "__syncthreads();"
    unroll_pragma = "#pragma unroll"
    # keep_rolled marks a cold path (the element-wise fallback of a vector copy, taken when a row is not
    # 16-byte aligned at run time, e.g. bf16 rows of odd length): unrolled in full it would only add registers,
    # but one load at a time leaves the memory system idle, so a few iterations are unrolled.
    no_unroll_pragma = "#pragma unroll 8"

    def __init__(self) -> None:
        self.nonneg: set[T.Var] = set()
        self.lines: list[str] = []
        self.indent = 0

    # ------------------------------------------------------------ types and literals
    def type(self, dt: D.DType) -> str:
        return self.types[dt.name]

    def literal(self, e: T.Const) -> str:
        dt, v = e.dtype, e.value
        if dt.is_bool:
            return "true" if v else "false"
        if dt.is_float:
            f = float(v)
            if math.isinf(f):
                text = "(-TL_INF)" if f < 0 else "TL_INF"
            elif math.isnan(f):
                text = "TL_NAN"
            else:
                text = repr(f) + ("" if dt == D.F64 else "f")
            if dt in (D.F32, D.F64):
                return text
            return self.cast_from_float(text, dt)
        if dt == D.I64:
            return f"{int(v)}ll"
        if dt.kind == "uint":
            return f"{int(v)}u"
        return str(int(v))

    def cast_from_float(self, text: str, dt: D.DType) -> str:
        return f"{self.type(dt)}({text})"

    # ------------------------------------------------------------ expressions
    def is_nonneg(self, e: T.Expr) -> bool:
        if isinstance(e, T.Const):
            return not e.dtype.is_float and int(e.value) >= 0
        if isinstance(e, S.ThreadIdx | S.BlockIdx):
            return True
        if isinstance(e, T.Var):
            return e in self.nonneg or e.kind == "size"
        if isinstance(e, T.Binary) and e.op in ("+", "*", "//", "%", "&", "|", "^", ">>"):
            return self.is_nonneg(e.a) and self.is_nonneg(e.b)
        if isinstance(e, T.Cast):
            return self.is_nonneg(e.value)
        if isinstance(e, T.Call) and e.func in ("ceildiv", "max", "min"):
            return all(self.is_nonneg(a) for a in e.args)
        return False

    def expr(self, e: T.Expr, parent: int = 0) -> str:
        if isinstance(e, T.Const):
            return self.literal(e)
        if isinstance(e, T.Var):
            return e.name
        if isinstance(e, S.ThreadIdx):
            return f"int({self.thread_idx})" if self.thread_idx.startswith("threadIdx") else self.thread_idx
        if isinstance(e, S.BlockIdx):
            idx = self.block_idx[e.axis]
            return f"int({idx})" if idx.startswith("blockIdx") else idx
        if isinstance(e, S.Ref):
            return f"{e.buffer.name}[{self.expr(e.index)}]"
        if isinstance(e, S.AddrOf):
            return f"&{e.buffer.name}[{self.expr(e.index)}]"
        if isinstance(e, T.Binary):
            return self.binary(e, parent)
        if isinstance(e, T.Compare):
            p = _PREC["cmp"]
            text = f"{self.expr(e.a, p + 1)} {e.op} {self.expr(e.b, p + 1)}"
            return f"({text})" if p <= parent else text
        if isinstance(e, T.Unary):
            op = {"not": "!", "-": "-", "~": "~"}[e.op]
            return f"{op}{self.expr(e.a, 100)}"
        if isinstance(e, T.Select):
            return f"({self.expr(e.cond, 1)} ? {self.expr(e.a, 1)} : {self.expr(e.b, 1)})"
        if isinstance(e, T.Cast):
            return self.cast(e)
        if isinstance(e, T.Call):
            return self.call(e)
        if isinstance(e, S.Intrinsic):
            return self.intrinsic(e)
        raise TypeError(f"cannot print {type(e).__name__}")

    def binary(self, e: T.Binary, parent: int) -> str:
        op = e.op
        if op in ("//", "%") and not e.dtype.is_float:
            if self.is_nonneg(e.a) and self.is_nonneg(e.b):
                op = "/" if op == "//" else "%"
            else:
                fn = "floordiv" if op == "//" else "floormod"
                return f"{self.int_helper(fn)}({self.expr(e.a)}, {self.expr(e.b)})"
        elif op == "%":
            fn = "fmod" if e.dtype == D.F64 else "fmodf"
            return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"
        elif op == "**":
            return f"powf({self.expr(e.a)}, {self.expr(e.b)})"
        elif op in ("and", "or"):
            op = "&&" if op == "and" else "||"
        if self.wide_arith(e):
            return self.wide_binary(e, op)
        p = _PREC.get(e.op, 8)
        text = f"{self.expr(e.a, p)} {op} {self.expr(e.b, p + 1)}"
        return f"({text})" if p <= parent else text

    def wide_arith(self, e: T.Binary) -> bool:
        return False

    def wide_binary(self, e: T.Binary, op: str) -> str:
        raise NotImplementedError

    def int_helper(self, name: str) -> str:
        return f"tl::{name}"

    narrow_floats: frozenset = frozenset()  # storage-only float types: converted through float

    def cast(self, e: T.Cast) -> str:
        src, dst = e.value.dtype, e.dtype
        inner = self.expr(e.value)
        if (src in self.narrow_floats and dst != D.F32) or (dst in self.narrow_floats and src != D.F32):
            inner = f"static_cast<float>({inner})"
        return f"static_cast<{self.type(dst)}>({inner})"

    def call(self, e: T.Call) -> str:
        raise NotImplementedError

    def typed(self, e: T.Expr) -> str:
        """`e` as a value of its own C type (C promotes narrow integer arithmetic to int)."""
        text = self.expr(e)
        return text if isinstance(e, T.Var | S.Ref) else f"static_cast<{self.type(e.dtype)}>({text})"

    def intrinsic(self, e: S.Intrinsic) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------ statements
    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def stmts(self, body: list[S.SStmt]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: S.SStmt) -> None:
        if isinstance(s, S.Declare):
            if s.value is not None and self.is_nonneg(s.value):
                self.nonneg.add(s.var)
            init = f" = {self.expr(s.value)}" if s.value is not None else ""
            self.line(f"{self.type(s.var.dtype)} {s.var.name}{init};")
        elif isinstance(s, S.DeclareArray):
            self.declare_array(s)
        elif isinstance(s, S.SStore):
            self.line(f"{s.buffer.name}[{self.expr(s.index)}] = {self.expr(s.value)};")
        elif isinstance(s, S.SAssign):
            self.line(f"{s.var.name} = {self.expr(s.value)};")
        elif isinstance(s, S.SFor):
            self.loop(s)
        elif isinstance(s, S.SWhile):
            self.line(f"while ({self.expr(s.cond)}) {{")
            self.block(s.body)
            self.line("}")
        elif isinstance(s, S.SIf):
            self.line(f"if ({self.expr(s.cond)}) {{")
            self.block(s.then_body)
            if s.else_body:
                self.line("} else {")
                self.block(s.else_body)
            self.line("}")
        elif isinstance(s, S.Barrier):
            self.line(self.barrier if s.threads is None else self.named_barrier(s.threads, s.index))
        elif isinstance(s, S.SCall):
            self.line(self.call_stmt(s))
        elif isinstance(s, S.SComment):
            self.line(f"// {s.text}")
        else:
            raise TypeError(f"cannot print {type(s).__name__}")

    def block(self, body: list[S.SStmt]) -> None:
        self.indent += 1
        self.stmts(body)
        self.indent -= 1

    def declare_array(self, s: S.DeclareArray) -> None:
        b = s.buffer
        if b.scope == "global":  # a view of a tensor: its pointer, cast (restrict only when nothing writes it)
            t = f"{'const ' if b.const else ''}{self.type(b.dtype)}*"
            self.line(f"{t}{' __restrict__' if b.const else ''} {b.name} = reinterpret_cast<{t}>({b.alias_of.name});")
            return
        init = f" = {{{self.expr(s.init)}}}" if s.init is not None else ""
        self.line(f"{self.type(s.buffer.dtype)} {s.buffer.name}[{s.buffer.size}]{init};")

    def loop(self, s: S.SFor) -> None:
        begin_zero = isinstance(s.begin, T.Const) and int(s.begin.value) == 0
        if s.unroll:
            self.line(self.unroll_pragma)
        elif s.keep_rolled:
            self.line(self.no_unroll_pragma)
        if self.is_nonneg(s.begin) and (s.step is None or self.is_nonneg(s.step)):
            self.nonneg.add(s.var)
        if begin_zero and s.step is None:
            self.line(f"for (int {s.var.name} = 0; {s.var.name} < {self.expr(s.extent)}; ++{s.var.name}) {{")
            self.block(s.body)
            self.line("}")
            return
        t = f"{s.var.name}_t"
        self.line(f"for (int {t} = 0; {t} < {self.expr(s.extent)}; ++{t}) {{")
        step = f" * {self.expr(s.step, 9)}" if s.step is not None else ""
        self.indent += 1
        self.line(f"int {s.var.name} = {self.expr(s.begin, 8)} + {t}{step};")
        self.indent -= 1
        self.block(s.body)
        self.line("}")

    def call_stmt(self, s: S.SCall) -> str:
        raise NotImplementedError

    def named_barrier(self, threads: int, index: T.Expr | None = None) -> str:
        return f"barrier(threads {threads}{'' if index is None else f', id {self.expr(index)}'})"

    def c_params(self, k: S.SKernel) -> str:
        """The C/C++ kernel parameter list: tensors as restrict pointers, scalars, runtime sizes. In a kernel whose
        blocks hand results over (T.fence_global) the written tensors are plain pointers: what other blocks wrote
        there must not be read through the read-only (non-coherent) path that restrict lets the compiler choose."""
        handover = any(isinstance(s, S.SCall) and s.op == "fence_device" for s in S.walk_simt(k.body))
        params = []
        for p in k.params:
            if isinstance(p, S.SBuffer):
                const = "const " if p.const else ""
                restrict = "" if handover and not p.const else " __restrict__"
                params.append(f"{const}{self.type(p.dtype)}*{restrict} {p.name}")
            else:
                params.append(f"{self.type(p.dtype)} {p.name}")
        params += [f"int {v.name}" for v in k.size_vars]
        return ", ".join(params)


class SimtTextPrinter(CStylePrinter):
    """Target-neutral text of SIMT IR (`tilec --emit-ir=after:lower-to-simt`)."""

    types = {name: name for name in D.BY_NAME}
    thread_idx = "tid"
    block_idx = ("bx", "by", "bz")
    barrier = "barrier()"
    unroll_pragma = "unroll:"
    no_unroll_pragma = "rolled:"

    def cast(self, e: T.Cast) -> str:
        return f"{e.dtype}({self.expr(e.value)})"

    def call(self, e: T.Call) -> str:
        return f"{e.func}({', '.join(self.expr(a) for a in e.args)})"

    def intrinsic(self, e: S.Intrinsic) -> str:
        return f"{e.name}({', '.join(self.expr(a) for a in e.args)})"

    def declare_array(self, s: S.DeclareArray) -> None:
        if s.buffer.scope == "global":
            self.line(f"{s.buffer.name} = view {s.buffer.alias_of.name} as global {s.buffer.dtype}")
            return
        super().declare_array(s)

    def int_helper(self, name: str) -> str:
        return name

    def call_stmt(self, s: S.SCall) -> str:
        return f"{s.name}({', '.join(self.expr(a) for a in s.args)})"

    def kernel(self, k: S.SKernel) -> str:
        self.lines = []
        params = [f"{p.name}: {'global ' if isinstance(p, S.SBuffer) else ''}{p.dtype}" for p in k.params]
        params += [f"{v.name}: i32" for v in k.size_vars]
        grid = ", ".join(self.expr(g) for g in k.grid)
        self.line(f"simt kernel {k.name}({', '.join(params)}) grid ({grid}) threads {k.threads} "
                  f"shared {k.shared_bytes} B")
        for b in k.shared:
            self.line(f"  shared {b.name}: {b.dtype}[{b.size}] at {b.offset}")
        self.indent += 1
        self.stmts(k.body)
        self.indent -= 1
        return "\n".join(self.lines)


def simt_module_str(module: S.SModule) -> str:
    return "\n\n".join(SimtTextPrinter().kernel(k) for k in module.kernels) + "\n"
