"""Read the text form of SIMT IR (tilec/ir/simt_printer.py's SimtTextPrinter, `--emit-ir=after:lower-to-simt` and
later) back into an `S.SModule`.

`simt_module_str(read_simt(text)) == text` for what the compiler prints (tests/test_ir_reader.py checks it over the
samples after every SIMT pass). The text is C-like and spells division by what the printer could prove: `a / b` of
integers is a floor division whose operands are non-negative, `floordiv(a, b)` one whose operands may be negative;
both read back as `//` (and `%`, `floormod`, `fmodf` as `%`), so the printer, given the same variables, spells
them the same again. What the text does not carry is rebuilt or left at its default: the runtime sizes are the
trailing `i32` scalars of the signature (a trailing i32 scalar parameter reads as a size), a literal without a
suffix takes its partner's integer type, two declarations of one name (partition-boundaries' two copies of a
loop) declare one variable, as lowering names every variable afresh, an intrinsic's value type comes from its
definition, a TMA tensor map (`tl_tmapN`) is an i64 parameter (in the kernel's `tensor_map_params`), a global
tensor is not marked read-only, a shared buffer keeps the default 128-byte alignment and no alias
(storage-planning then counts an alias's bytes on their own), a branch is not marked concurrent, the kernel has
no other attributes. Statements get
spans at their lines of the text (a pass's diagnostics point there). Errors are `reader.ReadError`s at a line
and column.
"""

from __future__ import annotations

import re

from ..diagnostics import Span
from . import dtypes as D
from . import simt as S
from . import tile as T
from .intrinsics import get as intrinsic
from .intrinsics import parse as parse_intrinsic
from .text_lexer import Cursor, Line, ReadError, Scope, Tok, dtype_of, scan, split_lines

_TOKEN = re.compile(r"""[ \t]*(?:
    (?P<num>(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)(?:ll|u|f)?)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%&|^~<>=()\[\],!?:{};]))
""", re.VERBOSE)

_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "<<": 7, ">>": 7, "+": 8, "-": 8, "*": 9, "/": 9, "%": 9}
_CMP = ("<", "<=", ">", ">=", "==", "!=")
_OPS = {"||": "or", "&&": "and"}
_FUNC_BINARY = {"floordiv": "//", "floormod": "%", "fmodf": "%", "fmod": "%", "powf": "**"}


def tokenize(text: str, line: int, col0: int) -> list[Tok]:
    return scan(_TOKEN, text, line, col0)


def _literal(text: str) -> T.Const:
    if text.endswith("ll"):
        return T.Const(D.I64, None, int(text[:-2]))
    if text.endswith("u"):
        return _Bare(D.U32, None, int(text[:-1]))
    if text.endswith("f"):
        return T.Const(D.F32, None, float(text[:-1]))
    if "." in text or "e" in text.lower():
        return T.Const(D.F64, None, float(text))
    return _Bare(D.I32, None, int(text))


class _Bare(T.Const):
    """An integer literal whose text (`5`, `5u`) several types print as: it takes its partner's type."""


def _retype(e: T.Expr, dt: D.DType) -> T.Expr:
    if isinstance(e, _Bare) and dt.kind == e.dtype.kind and dt != e.dtype:
        return T.Const(dt, None, e.value)
    return e


def _settle(e: T.Expr) -> T.Expr:
    return T.Const(e.dtype, None, e.value) if isinstance(e, _Bare) else e


class SimtExprParser:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def expr(self, cur: Cursor, min_prec: int = 0) -> T.Expr:
        left = self.unary(cur)
        while True:
            t = cur.tok
            op = t.text if t.kind == "op" else None
            if op in _CMP:
                if 6 < min_prec:
                    return left
                cur.next()
                right = self.expr(cur, 7)
                a, b = _retype(left, right.dtype), _retype(right, left.dtype)
                left = T.Compare(D.BOOL, None, op, _settle(a), _settle(b))
                continue
            p = _PREC.get(op or "")
            if p is None or p < min_prec:
                return left
            cur.next()
            right = self.expr(cur, p + 1)
            left = self.binary(op, left, right)

    def binary(self, op: str, a: T.Expr, b: T.Expr) -> T.Expr:
        a, b = _retype(a, b.dtype), _retype(b, a.dtype)
        a, b = _settle(a), _settle(b)
        op = _OPS.get(op, op)
        if op == "/" and not a.dtype.is_float:
            op = "//"
        dt = D.BOOL if op in ("and", "or") else a.dtype
        return T.Binary(dt, None, op, a, b)

    def unary(self, cur: Cursor) -> T.Expr:
        if cur.accept("-"):
            a = self.unary(cur)
            if isinstance(a, T.Const) and not a.dtype.is_bool:
                return type(a)(a.dtype, None, -a.value)
            return T.Unary(a.dtype, None, "-", a)
        if cur.accept("~"):
            a = _settle(self.unary(cur))
            return T.Unary(a.dtype, None, "~", a)
        if cur.accept("!"):
            return T.Unary(D.BOOL, None, "not", self.unary(cur))
        if cur.accept("&"):
            ref = self.primary(cur)
            if not isinstance(ref, S.Ref):
                raise cur.error("'&' takes the address of a buffer element")
            return S.AddrOf(ref.dtype, None, ref.buffer, ref.index)
        return self.primary(cur)

    def args(self, cur: Cursor) -> list[T.Expr]:
        return cur.parenthesized(self.expr)

    def primary(self, cur: Cursor) -> T.Expr:
        t = cur.tok
        if cur.accept("("):
            e = self.expr(cur)
            if cur.accept("?"):
                a = self.expr(cur)
                cur.expect(":")
                b = self.expr(cur)
                a, b = _retype(a, b.dtype), _retype(b, a.dtype)
                e = T.Select(a.dtype, None, e, _settle(a), _settle(b))
            cur.expect(")")
            return e
        if t.kind == "num":
            cur.next()
            return _literal(t.text)
        if t.kind != "name":
            raise cur.error(f"expected an expression, found '{t.text or 'the end of the line'}'")
        cur.next()
        name = t.text
        obj = self.scope.get(name)
        if obj is None:
            if name in ("true", "false"):
                return T.Const(D.BOOL, None, name == "true")
            if name in ("TL_INF", "TL_NAN"):
                return T.Const(D.F32, None, float("inf") if name == "TL_INF" else float("nan"))
            if name == "tid":
                return S.ThreadIdx(D.I32, None)
            if name in ("bx", "by", "bz"):
                return S.BlockIdx(D.I32, None, "xyz".index(name[1]))
            if re.fullmatch(r"tl_tmap\d+", name):  # a TMA tensor map: a kernel argument outside the signature
                v = T.Var(D.I64, None, name, "param")
                self.scope.frames[0][name] = v
                return v
        if cur.at("(") and obj is None:
            args = self.args(cur)
            if name in D.BY_NAME:
                (v,) = args
                v = _settle(v)
                if isinstance(v, T.Const) and v.dtype == D.F32 and D.BY_NAME[name].is_float:
                    pass  # a narrow float literal prints as its type applied to the f32 text: kept as a cast
                return T.Cast(D.BY_NAME[name], None, v)
            if name in _FUNC_BINARY:
                a, b = args
                a, b = _settle(_retype(a, b.dtype)), _settle(_retype(b, a.dtype))
                return T.Binary(a.dtype, None, _FUNC_BINARY[name], a, b)
            d = intrinsic(name)
            if d is not None and not d.statement:
                args = [_settle(a) for a in args]
                dt = d.value_type or (args[0].dtype if args else D.I32)
                return S.Intrinsic(dt, None, name, args)
            ref = next((a for a in args if not isinstance(a, _Bare)), args[0] if args else None)
            args = [_settle(_retype(a, ref.dtype)) for a in args] if ref is not None else args
            return T.Call(args[0].dtype if args else D.I32, None, name, args)
        if cur.at("["):
            if not isinstance(obj, S.SBuffer):
                raise cur.error(f"'{name}' is not a buffer in scope", t)
            cur.next()
            idx = _settle(self.expr(cur))
            cur.expect("]")
            return S.Ref(obj.dtype, None, obj, idx)
        if not isinstance(obj, T.Var):
            raise cur.error(f"'{name}' is not a variable in scope", t)
        return obj


class SimtReader:
    def __init__(self, text: str, file: str = "<ir>") -> None:
        self.lines = split_lines(text)
        self.pos = 0
        self.file = file

    def span(self, line: Line) -> Span:
        return Span(self.file, line.number, line.indent + 1)

    def cursor(self, line: Line, start: int = 0) -> Cursor:
        return Cursor(tokenize(line.text[start:], line.number, line.indent + 1 + start), line.number)

    def error(self, message: str, line: Line) -> ReadError:
        return ReadError(message, line.number, line.indent + 1)

    def var(self, name: str, dt: D.DType, kind: str) -> T.Var:
        """The kernel's variable of this name: lowering names every variable it makes afresh, so two declarations
        of one name are one variable declared twice (partition-boundaries' two copies of a loop)."""
        v = self.vars.get(name)
        if v is None or v.dtype != dt or v.kind != kind:
            v = self.vars[name] = T.Var(dt, None, name, kind)
        return v

    def module(self) -> S.SModule:
        kernels = []
        while self.pos < len(self.lines):
            kernels.append(self.kernel())
        return S.SModule(kernels)

    def kernel(self) -> S.SKernel:
        head = self.lines[self.pos]
        m = re.fullmatch(r"simt kernel (\w+)\((.*)\) grid (\(.*\)) threads (\d+) shared (\d+) B", head.text)
        if m is None or head.indent != 0:
            raise self.error("expected 'simt kernel NAME(PARAMS) grid (X, Y, Z) threads N shared B B'", head)
        self.pos += 1
        scope = Scope()
        self.vars: dict[str, T.Var] = {}
        params: list[S.SBuffer | T.Var] = []
        if m.group(2):
            for p in m.group(2).split(", "):
                pm = re.fullmatch(r"(\w+): (global )?(\w+)", p)
                if pm is None:
                    raise self.error(f"bad parameter '{p}'", head)
                dt = dtype_of(pm.group(3))
                obj = S.SBuffer(pm.group(1), dt, "global") if pm.group(2) else T.Var(dt, None, pm.group(1), "param")
                params.append(obj)
        n = len(params)
        while n > 0 and isinstance(params[n - 1], T.Var) and params[n - 1].dtype == D.I32:
            n -= 1
        sizes = [T.Var(D.I32, None, p.name, "size") for p in params[n:]]
        params = params[:n]
        for p in [*params, *sizes]:
            scope.bind(p.name, p)
        gl = Line(head.number, head.indent + m.start(3), m.group(3))
        grid = SimtExprParser(scope).args(self.cursor(gl))
        shared: list[S.SBuffer] = []
        while self.pos < len(self.lines) and self.lines[self.pos].text.startswith("shared ") and \
                self.lines[self.pos].indent == 2:
            line = self.lines[self.pos]
            sm = re.fullmatch(r"shared (\w+): (\w+)\[(\d+)\] at (\d+|None)", line.text)
            if sm is None:
                raise self.error("expected 'shared NAME: DTYPE[SIZE] at OFFSET'", line)
            b = S.SBuffer(sm.group(1), dtype_of(sm.group(2)), "shared", int(sm.group(3)),
                          offset=None if sm.group(4) == "None" else int(sm.group(4)), span=self.span(line))
            shared.append(b)
            scope.bind(b.name, b)
            self.pos += 1
        body = self.block(2, scope)
        k = S.SKernel(m.group(1), params, sizes, grid, int(m.group(4)), shared, int(m.group(5)), body,
                      self.span(head))
        tmaps = [v for name, v in scope.frames[0].items() if re.fullmatch(r"tl_tmap\d+", name)]
        if tmaps:
            k.attrs["tensor_map_params"] = sorted(tmaps, key=lambda v: int(v.name[len("tl_tmap"):]))
        return k

    def block(self, indent: int, scope: Scope) -> list[S.SStmt]:
        body: list[S.SStmt] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.indent < indent or line.indent == 0:
                break
            if line.indent > indent:
                raise self.error("unexpected indentation", line)
            if line.text.startswith("}"):
                break
            self.pos += 1
            st = self.stmt(line, indent, scope)
            st.span = self.span(line)  # a pass's diagnostics point at the IR text
            body.append(st)
        return body

    def close(self, indent: int, expect: str = "}") -> None:
        if self.pos >= len(self.lines) or self.lines[self.pos].text != expect or \
                self.lines[self.pos].indent != indent:
            line = self.lines[min(self.pos, len(self.lines) - 1)]
            raise self.error(f"expected '{expect}'", line)
        self.pos += 1

    def nested(self, indent: int, scope: Scope, binds=()) -> list[S.SStmt]:
        scope.push()
        for v in binds:
            scope.bind(v.name, v)
        body = self.block(indent + 2, scope)
        scope.pop()
        return body

    def stmt(self, line: Line, indent: int, scope: Scope) -> S.SStmt:
        text = line.text
        ex = SimtExprParser(scope)
        if text.startswith("// "):
            return S.SComment(None, text[3:])
        if text in ("unroll:", "rolled:"):
            if self.pos >= len(self.lines) or not self.lines[self.pos].text.startswith("for ("):
                raise self.error(f"'{text}' must be followed by a loop", line)
            nxt = self.lines[self.pos]
            self.pos += 1
            loop = self.loop(nxt, indent, scope)
            loop.unroll, loop.keep_rolled = text == "unroll:", text == "rolled:"
            return loop
        if text.startswith("for ("):
            return self.loop(line, indent, scope)
        if text.startswith("while (") and text.endswith(") {"):
            cur = self.cursor(line, len("while ("))
            cond = _settle(ex.expr(cur))
            cur.expect(")")
            body = self.nested(indent, scope)
            self.close(indent)
            return S.SWhile(None, cond, body)
        if text.startswith("if (") and text.endswith(") {"):
            cur = self.cursor(line, len("if ("))
            cond = _settle(ex.expr(cur))
            cur.expect(")")
            cur.expect("{")
            cur.end()
            then = self.nested(indent, scope)
            els: list[S.SStmt] = []
            if self.pos < len(self.lines) and self.lines[self.pos].text == "} else {" and \
                    self.lines[self.pos].indent == indent:
                self.pos += 1
                els = self.nested(indent, scope)
            self.close(indent)
            return S.SIf(None, cond, then, els)
        if text == "barrier()":
            return S.Barrier(None)
        bm = re.fullmatch(r"barrier\(threads (\d+)(?:, id (.*))?\)", text)
        if bm:
            index = None
            if bm.group(2) is not None:
                cur = self.cursor(line, bm.start(2))
                index = _settle(ex.expr(cur))
                cur.expect(")")
                cur.end()
            return S.Barrier(None, int(bm.group(1)), index)
        vm = re.fullmatch(r"(\w+) = view (\w+) as global (\w+)", text)
        if vm:
            base = scope.get(vm.group(2))
            if not isinstance(base, S.SBuffer):
                raise self.error(f"'{vm.group(2)}' is not a buffer in scope", line)
            b = S.SBuffer(vm.group(1), dtype_of(vm.group(3)), "global", alias_of=base)
            scope.bind(b.name, b)
            return S.DeclareArray(None, b)
        cur = self.cursor(line)
        t = cur.tok
        if t.kind == "name" and t.text in D.BY_NAME and cur.peek().kind == "name" and scope.get(t.text) is None:
            dt = D.BY_NAME[cur.next().text]
            name = cur.name()
            if cur.accept("["):
                size = cur.integer()
                cur.expect("]")
                init = None
                if cur.accept("="):
                    cur.expect("{")
                    init = _settle(_retype(ex.expr(cur), dt))
                    cur.expect("}")
                cur.expect(";")
                cur.end()
                b = S.SBuffer(name, dt, "local", size)
                scope.bind(name, b)
                return S.DeclareArray(None, b, init)
            value = None
            if cur.accept("="):
                value = _settle(_retype(ex.expr(cur), dt))
            cur.expect(";")
            cur.end()
            v = self.var(name, dt, "local")
            scope.bind(name, v)
            return S.Declare(None, v, value)
        if t.kind == "name" and cur.peek().text == "[" and isinstance(scope.get(t.text), S.SBuffer):
            b = scope.get(cur.next().text)
            cur.expect("[")
            idx = _settle(ex.expr(cur))
            cur.expect("]")
            cur.expect("=")
            value = _settle(_retype(ex.expr(cur), b.dtype))
            cur.expect(";")
            cur.end()
            return S.SStore(None, b, idx, value)
        if t.kind == "name" and cur.peek().text == "=" and isinstance(scope.get(t.text), T.Var):
            var = scope.get(cur.next().text)
            cur.expect("=")
            value = _settle(_retype(ex.expr(cur), var.dtype))
            cur.expect(";")
            cur.end()
            return S.SAssign(None, var, value)
        return self.call(line, scope)

    def call(self, line: Line, scope: Scope) -> S.SCall:
        """`name(args)`: the name may hold any character but the argument list's (a print's format)."""
        text = line.text
        if not text.endswith(")"):
            raise self.error(f"not a statement: '{text}'", line)
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            if text[i] == ")":
                depth += 1
            elif text[i] == "(":
                depth -= 1
                if depth == 0:
                    break
        else:
            raise self.error("unbalanced parentheses", line)
        name = text[:i]
        try:
            op, params = parse_intrinsic(name)
        except KeyError:
            raise self.error(f"no intrinsic is named '{name}'", line) from None
        ex = SimtExprParser(scope)
        cur = self.cursor(line, i)
        args = [_settle(a) for a in ex.args(cur)]
        cur.end()
        return S.SCall(None, name, args, op=op, params=params)

    def loop(self, line: Line, indent: int, scope: Scope) -> S.SFor:
        m = re.fullmatch(r"for \(int (\w+) = 0; \1 < (.*); \+\+\1\) \{", line.text)
        if m is None:
            raise self.error("expected 'for (int V = 0; V < EXTENT; ++V) {'", line)
        cur = self.cursor(line, m.start(2))
        ext = _settle(SimtExprParser(scope).expr(cur))
        cur.expect(";")
        name = m.group(1)
        begin: T.Expr = T.Const(D.I32, None, 0)
        step = None
        scope.push()
        nxt = self.lines[self.pos] if self.pos < len(self.lines) else None
        bm = re.fullmatch(rf"int (\w+) = (.*) \+ {re.escape(name)}(?: \* (.*))?;", nxt.text) if nxt else None
        if name.endswith("_t") and bm and bm.group(1) == name[:-2] and nxt.indent == indent + 2:
            self.pos += 1
            ex = SimtExprParser(scope)
            c = self.cursor(Line(nxt.number, nxt.indent + bm.start(2), bm.group(2)))
            begin = _settle(ex.expr(c))
            c.end()
            if bm.group(3) is not None:
                c = self.cursor(Line(nxt.number, nxt.indent + bm.start(3), bm.group(3)))
                step = _settle(ex.expr(c))
                c.end()
            name = bm.group(1)
        var = self.var(name, D.I32, "loop")
        scope.bind(name, var)
        body = self.block(indent + 2, scope)
        scope.pop()
        self.close(indent)
        return S.SFor(None, var, begin, ext, body, step=step)


def read_simt(text: str, file: str = "<ir>") -> S.SModule:
    """The SIMT module printed as `text` (simt_printer.simt_module_str); statements and shared buffers get spans at
    their lines of `file`. Raises reader.ReadError."""
    return SimtReader(text, file).module()
