"""Read the text form of Tile IR (tilec/ir/printer.py, `--emit-ir`) back into a `T.Module`.

The text is what the printer writes, so `module_str(read_module(text)) == text` for every module the compiler
prints (tests/test_ir_reader.py checks it over the samples at every Tile IR stage). What the text does not carry
is rebuilt from it: a variable's kind from where it is bound (`sizes`, the block variables, a loop, an
assignment, a scalar parameter, `threadIdx`), a value's dtype from its operands (a literal's from its `:dtype`
suffix), the statements' stable ids by numbering them again (visit.number_ops: where specialize removed
statements the builder had numbered, a pass run on the text numbers its gemms and loops differently from the
compiler), the ids of the gemms and Pipelined loops a printed schedule names from its labels, and the schedule's
layouts from their printed names (a shared tile's element size from its buffer, a BlockRow's threads from the
kernel's). Statements, buffers and regions get spans at their lines
of the text, so a pass's diagnostics point there; expressions have none; launch checks have no messages; the
source's schedule keywords (`keyword NAME = VALUE`) become the kernel's request (KernelKeywords, no pins); an
attribute whose value is not a Python literal keeps its text (`RawAttr`) unless the caller names its class
(`attr_types`). Errors are `ReadError`s carrying the line and column.

Used to run one pass alone on IR text (`python -m tilec.run_pass`, tests/passes/).
"""

from __future__ import annotations

import ast
import dataclasses
import re

from ..diagnostics import Span
from . import dtypes as D
from . import tile as T
from .text_lexer import Cursor, Line, ReadError, Scope, Tok, dtype_of, scan, split_lines

__all__ = ["ReadError", "read_module"]

# ---------------------------------------------------------------- tokens

_TOKEN = re.compile(r"""[ \t]*(?:
    (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<num>(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)(?::[a-z]\w*)?)
  | (?P<name>(?:inf|nan)(?::[a-z]\w*)|[A-Za-z_]\w*)
  | (?P<op>\+:|->|//|<<|>>|<=|>=|==|!=|[-+*/%&|^~<>=()\[\],:]))
""", re.VERBOSE)


def tokenize(text: str, line: int, col0: int = 1) -> list[Tok]:
    return scan(_TOKEN, text, line, col0)


# ---------------------------------------------------------------- expressions

_BIN_PREC = {"or": 1, "and": 2, "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10,
             "//": 10, "%": 10}
_CMP = ("<", "<=", ">", ">=", "==", "!=")


def literal(text: str, cur: Cursor, tok: Tok) -> T.Const:
    body, _, suffix = text.partition(":")
    if body in ("true", "false"):
        return T.Const(D.BOOL, None, body == "true")
    is_float = body in ("inf", "nan") or "." in body or "e" in body.lower()
    dt = dtype_of(suffix, cur, tok) if suffix else (D.F32 if is_float else D.I32)
    return T.Const(dt, None, float(body) if dt.is_float else int(body))


class TileExprParser:
    """Expressions as tilec/ir/printer.py prints them (its precedences, `select`, `reinterpret<dt>`, casts
    spelled `dt(x)`, loads `buf[i, j]`)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def expr(self, cur: Cursor, min_prec: int = 0) -> T.Expr:
        left = self.unary(cur)
        while True:
            t = cur.tok
            op = t.text if t.kind in ("op", "name") else None
            if op in _CMP:
                if 4 < min_prec:
                    return left
                cur.next()
                right = self.expr(cur, 5)
                left = T.Compare(D.BOOL, None, op, left, right)
                continue
            p = _BIN_PREC.get(op or "")
            if p is None or p < min_prec or (t.kind == "name" and op not in ("and", "or")):
                return left
            cur.next()
            right = self.expr(cur, p + 1)
            left = self.binary(op, left, right, cur, t)

    def binary(self, op: str, a: T.Expr, b: T.Expr, cur: Cursor, t: Tok) -> T.Expr:
        a, b = unify(a, b)
        dt = D.BOOL if op in ("and", "or") else a.dtype
        return T.Binary(dt, None, op, a, b)

    def unary(self, cur: Cursor) -> T.Expr:
        t = cur.tok
        if cur.accept("-"):
            a = self.unary(cur)
            if isinstance(a, T.Const) and not a.dtype.is_bool:
                return T.Const(a.dtype, None, -a.value)
            return T.Unary(a.dtype, None, "-", a)
        if cur.accept("~"):
            a = self.unary(cur)
            return T.Unary(a.dtype, None, "~", a)
        if t.kind == "name" and t.text == "not":
            cur.next()
            return T.Unary(D.BOOL, None, "not", self.unary(cur))
        return self.primary(cur)

    def args(self, cur: Cursor) -> list[T.Expr]:
        return cur.parenthesized(self.expr)

    def primary(self, cur: Cursor) -> T.Expr:
        t = cur.tok
        if cur.accept("("):
            e = self.expr(cur)
            cur.expect(")")
            return e
        if t.kind == "num":
            cur.next()
            return literal(t.text, cur, t)
        if t.kind != "name":
            raise cur.error(f"expected an expression, found '{t.text or 'the end of the line'}'")
        cur.next()
        name = t.text
        if name.split(":")[0] in ("true", "false", "inf", "nan") and self.scope.get(name) is None:
            return literal(name, cur, t)
        if name == "select" and cur.at("("):
            c, a, b = self.args(cur)
            a, b = unify(a, b)
            return T.Select(a.dtype, None, c, a, b)
        if name == "reinterpret" and cur.at("<"):
            cur.next()
            dt = dtype_of(cur.name(), cur)
            cur.expect(">")
            (v,) = self.args(cur)
            return T.Call(dt, None, "reinterpret", [v])
        if cur.at("(") and name in D.BY_NAME and self.scope.get(name) is None:
            (v,) = self.args(cur)
            return T.Cast(D.BY_NAME[name], None, v)
        if cur.at("("):
            args = self.args(cur)
            args = unify_all(args)
            return T.Call(call_dtype(name, args), None, name, args)
        obj = self.scope.get(name)
        if cur.at("["):
            if not isinstance(obj, T.Buffer):
                raise cur.error(f"'{name}' is not a buffer in scope", t)
            cur.next()
            idx = [self.expr(cur)]
            while cur.accept(","):
                idx.append(self.expr(cur))
            cur.expect("]")
            return T.Load(obj.dtype, None, obj, idx)
        if not isinstance(obj, T.Var):
            raise cur.error(f"'{name}' is not a variable in scope", t)
        return obj


def call_dtype(name: str, args: list[T.Expr]) -> D.DType:
    return args[0].dtype if args else D.I32


def unify(a: T.Expr, b: T.Expr) -> tuple[T.Expr, T.Expr]:
    """A literal without a suffix takes its partner's dtype where that is an integer's (i32 literals print bare)."""
    return _retype(a, b.dtype), _retype(b, a.dtype)


def unify_all(args: list[T.Expr]) -> list[T.Expr]:
    if len(args) < 2:
        return args
    ref = next((a for a in args if not isinstance(a, T.Const)), args[0])
    return [_retype(a, ref.dtype) for a in args]


def _retype(e: T.Expr, dt: D.DType) -> T.Expr:
    return e


class RawAttr:
    """A kernel attribute whose printed value is not a Python literal: kept as its text (prints the same)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def _literal_node(node: ast.AST) -> object:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset") \
            and not node.keywords and len(node.args) <= 1:
        items = _literal_node(node.args[0]) if node.args else ()
        return set(items) if node.func.id == "set" else frozenset(items)
    return ast.literal_eval(node)


def attr_value(text: str, attr_types: dict[str, type] | None = None) -> object:
    """A kernel attribute from its printed value: a Python literal (sets included), an object of a class named in
    `attr_types` printed as its dataclass repr (`Plan(kind='x', queues={})`), else its text (`RawAttr`)."""
    try:
        node = ast.parse(text, mode="eval").body
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (attr_types or {}):
            v = attr_types[node.func.id](*[_literal_node(a) for a in node.args],
                                         **{kw.arg: _literal_node(kw.value) for kw in node.keywords})
        else:
            v = _literal_node(node)
    except (ValueError, SyntaxError, TypeError):
        return text if re.fullmatch(r"[A-Za-z_][\w.]*", text) else RawAttr(text)
    if isinstance(v, frozenset) and str(v) != text:  # the same set, printed in another order by another process
        v = _PrintedFrozenset(v)
        v.text = text
    return v if str(v) == text else RawAttr(text)


class _PrintedFrozenset(frozenset):
    """A set attribute that prints as it was read (a set's order depends on the process's string hashing)."""

    text = ""

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


# ---------------------------------------------------------------- module


class TileReader:
    def __init__(self, text: str, file: str = "<ir>", attr_types: dict[str, type] | None = None) -> None:
        self.lines = split_lines(text)
        self.pos = 0
        self.file = file
        self.attr_types = attr_types or {}

    def span(self, line: Line) -> Span:
        return Span(self.file, line.number, line.indent + 1)

    def cursor(self, line: Line, start: int = 0) -> Cursor:
        return Cursor(tokenize(line.text[start:], line.number, line.indent + 1 + start), line.number)

    def error(self, message: str, line: Line | None = None) -> ReadError:
        if line is None:
            line = self.lines[self.pos] if self.pos < len(self.lines) else Line(0, 0, "")
        return ReadError(message, line.number, line.indent + 1)

    def module(self) -> T.Module:
        kernels: list[T.Kernel] = []
        launches: list[T.Launches] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.indent != 0:
                raise self.error("expected 'kernel' or 'launches' at the start of a line", line)
            if line.text.startswith("kernel "):
                kernels.append(self.kernel())
            elif line.text.startswith("launches "):
                launches.append(self.launches())
            else:
                raise self.error("expected 'kernel' or 'launches'", line)
        return T.Module(kernels, {}, [], launches)

    # -- signatures
    def params(self, cur: Cursor, scope: Scope, sizes: dict[str, T.Var]) -> list[T.Buffer | T.Var]:
        out: list[T.Buffer | T.Var] = []
        cur.expect("(")
        while not cur.at(")"):
            name = cur.name()
            cur.expect(":")
            is_out = cur.accept("out")
            dt = dtype_of(cur.name(), cur)
            if cur.accept("["):
                shape = self.shape(cur, scope, sizes)
                b = T.Buffer(name, dt, shape, "global", None, is_out)
                out.append(b)
                scope.bind(name, b)
            else:
                v = T.Var(dt, None, name, "param")
                out.append(v)
                scope.bind(name, v)
            if not cur.accept(","):
                break
        cur.expect(")")
        return out

    def shape(self, cur: Cursor, scope: Scope, sizes: dict[str, T.Var]) -> list[T.Expr]:
        """Dims after '[' up to ']': unknown names are runtime sizes (i32 'size' variables)."""
        dims: list[T.Expr] = []
        while True:
            for t in cur.toks[cur.i:]:
                if t.kind == "name" and scope.get(t.text) is None and t.text not in sizes and \
                        t.text not in D.BY_NAME and not _is_call(cur, t):
                    sizes[t.text] = T.Var(D.I32, None, t.text, "size")
                    scope.bind(t.text, sizes[t.text])
                if t.text == "]":
                    break
            dims.append(TileExprParser(scope).expr(cur))
            if not cur.accept(","):
                break
        cur.expect("]")
        return dims

    def kernel(self) -> T.Kernel:
        head = self.lines[self.pos]
        cur = self.cursor(head)
        cur.expect("kernel")
        name = cur.name()
        scope = Scope()
        scope.bind("threadIdx", T.Var(D.I32, None, "threadIdx", "thread"))  # T.get_thread_binding() (ir/threads.py)
        sizes: dict[str, T.Var] = {}
        params = self.params(cur, scope, sizes)
        cur.end()
        self.pos += 1
        size_vars: list[T.Var] = list(sizes.values())
        attrs: dict[str, object] = {}
        keywords: dict[str, object] = {}
        grid: list[T.Expr] = []
        threads = 0
        block_vars: list[T.Var] = []
        sched_lines: list[Line] | None = None
        while self.pos < len(self.lines) and self.lines[self.pos].text != "body:":
            line = self.lines[self.pos]
            if line.indent == 0:
                raise self.error("expected 'body:'", line)
            self.pos += 1
            if line.text.startswith("sizes "):
                names = [n.strip() for n in line.text[len("sizes "):].split(",")]
                size_vars = [sizes.get(n) or T.Var(D.I32, None, n, "size") for n in names]
                for v in size_vars:
                    scope.bind(v.name, v)
            elif line.text.startswith("grid "):
                cur = self.cursor(line)
                cur.expect("grid")
                m = re.search(r" threads (\d+) as \(([^)]*)\)$", line.text)
                if m is None:
                    raise self.error("expected 'grid (...) threads N as (bx, by, bz)'", line)
                block_vars = [T.Var(D.I32, None, n.strip(), "block") for n in m.group(2).split(",")]
                for v in block_vars:
                    scope.bind(v.name, v)
                gcur = Cursor(tokenize(line.text[len("grid "):m.start()], line.number, line.indent + 6), line.number)
                grid = TileExprParser(scope).args(gcur)
                threads = int(m.group(1))
            elif line.text.startswith("check "):
                m = re.fullmatch(r"check (.+?) (<=|>=|==|!=|<|>) (.+)", line.text)
                if m is None:
                    raise self.error("expected 'check LHS OP RHS'", line)
                attrs.setdefault("launch_checks", []).append(
                    {"lhs": m.group(1), "op": m.group(2), "rhs": m.group(3), "message": ""})
            elif line.text.startswith("attr "):
                m = re.fullmatch(r"attr (\w+) = (.*)", line.text)
                if m is None:
                    raise self.error("expected 'attr NAME = VALUE'", line)
                attrs[m.group(1)] = attr_value(m.group(2), self.attr_types)
            elif line.text.startswith("keyword "):
                keywords.update(self.keyword(line))
            elif line.text == "schedule:":
                sched_lines = []
                while self.pos < len(self.lines) and self.lines[self.pos].indent >= 4:
                    sched_lines.append(self.lines[self.pos])
                    self.pos += 1
            else:
                raise self.error(f"unknown kernel header line '{line.text}'", line)
        if self.pos >= len(self.lines):
            raise self.error("the kernel has no 'body:'", head)
        self.pos += 1
        body = self.block(1, scope)
        k = T.Kernel(name, params, size_vars, grid, threads, block_vars, body, self.span(head), attrs)
        if keywords:  # the source's schedule keywords (tilec.ir.schedule.KernelKeywords)
            from .schedule import KernelKeywords, ScheduleRequest

            k.request = ScheduleRequest(keywords=KernelKeywords(**keywords))
        from .visit import number_ops

        number_ops(k)
        if sched_lines is not None:
            from .schedule_reader import read_schedule

            k.schedule = read_schedule(k, sched_lines)
        return k

    def keyword(self, line: Line) -> dict[str, object]:
        """`keyword NAME = VALUE`: one of the kernel's schedule keywords (KernelKeywords), a literal of its type."""
        from dataclasses import fields

        from .schedule import KernelKeywords

        m = re.fullmatch(r"keyword (\w+) = (.*)", line.text)
        if m is None:
            raise self.error("expected 'keyword NAME = VALUE'", line)
        known = {f.name: f.default for f in fields(KernelKeywords)}
        name = m.group(1)
        if name not in known:
            raise self.error(f"unknown keyword '{name}' (known: {', '.join(known)})", line)
        try:
            value = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError):
            value = None
        default = known[name]
        same_shape = not isinstance(value, tuple) or (
            len(value) == len(default) and all(type(x) is type(d) for x, d in zip(value, default, strict=False)))
        if type(value) is not type(default) or not same_shape:
            kind = "True or False" if isinstance(default, bool) else f"a value like {default!r}"
            raise self.error(f"keyword {name} takes {kind}, not '{m.group(2)}'", line)
        return {name: value}

    def launches(self) -> T.Launches:
        head = self.lines[self.pos]
        cur = self.cursor(head)
        cur.expect("launches")
        name = cur.name()
        scope = Scope()
        sizes: dict[str, T.Var] = {}
        params = self.params(cur, scope, sizes)
        self.pos += 1
        scratch: list[T.Buffer] = []
        stages: list[T.Stage] = []
        while self.pos < len(self.lines) and self.lines[self.pos].indent > 0:
            line = self.lines[self.pos]
            self.pos += 1
            cur = self.cursor(line)
            if cur.accept("scratch"):
                bname = cur.name()
                cur.expect(":")
                dt = dtype_of(cur.name(), cur)
                cur.expect("[")
                b = T.Buffer(bname, dt, self.shape(cur, scope, sizes), "global", None,
                             zeroed=line.text.endswith(" zeroed"))
                scratch.append(b)
            elif cur.accept("launch"):
                kname = cur.name()
                m = re.fullmatch(r"launch \w+\((.*)\)", line.text)
                args = [a.strip() for a in m.group(1).split(",")] if m and m.group(1) else []
                stages.append(T.Stage(kname, args))
            else:
                raise self.error("expected 'scratch' or 'launch'", line)
        return T.Launches(name, params, list(sizes.values()), scratch, stages, None)

    # -- statements
    def block(self, indent: int, scope: Scope) -> list[T.Stmt]:
        body: list[T.Stmt] = []
        want = indent * 2
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.indent < want or line.indent == 0:
                break
            if line.indent > want:
                raise self.error("unexpected indentation", line)
            self.pos += 1
            if line.text == "pass":
                continue
            st = self.stmt(line, indent, scope)
            st.span = self.span(line)  # a pass's diagnostics point at the IR text
            if isinstance(st, T.Alloc):
                st.buffer.span = st.span
            body.append(st)
        return body

    def nested(self, indent: int, scope: Scope, binds: list[T.Var] = ()) -> list[T.Stmt]:
        scope.push()
        for v in binds:
            scope.bind(v.name, v)
        body = self.block(indent + 1, scope)
        scope.pop()
        return body

    def region(self, cur: Cursor, scope: Scope) -> T.Region:
        t = cur.tok
        b = scope.get(cur.name())
        if not isinstance(b, T.Buffer):
            raise cur.error(f"'{t.text}' is not a buffer in scope", t)
        cur.expect("[")
        ex = TileExprParser(scope)
        starts, extents = [], []
        while True:
            starts.append(ex.expr(cur))
            cur.expect("+:")
            extents.append(ex.expr(cur))
            if not cur.accept(","):
                break
        cur.expect("]")
        return T.Region(b, starts, extents, Span(self.file, cur.line, t.col))

    def operand(self, cur: Cursor, scope: Scope) -> T.Region | T.Expr:
        if cur.tok.kind == "name" and isinstance(scope.get(cur.tok.text), T.Buffer) and _has_region_colon(cur):
            return self.region(cur, scope)
        return TileExprParser(scope).expr(cur)

    def flags(self, cur: Cursor) -> list[str]:
        out: list[str] = []
        cur.expect("[")
        start = cur.i
        depth = 0
        parts: list[list[Tok]] = [[]]
        while not (cur.at("]") and depth == 0):
            t = cur.next()
            if t.kind == "end":
                raise cur.error("expected ']'")
            if t.text in ("(", "["):
                depth += 1
            if t.text in (")", "]"):
                depth -= 1
            if t.text == "," and depth == 0:
                parts.append([])
            else:
                parts[-1].append(t)
        cur.expect("]")
        del start
        for p in parts:
            out.append(" ".join(t.text for t in p))
        return out

    def generic_op(self, cls: type[T.Stmt], cur: Cursor, scope: Scope) -> T.Stmt:
        """A tile op in the generic form its class declares (T.Stmt.keyword; printer.generic_op_str prints it)."""
        cur.next()
        names = T.operand_fields(cls)
        values: dict[str, object] = {}
        for group, sep in (([f for f in names if f in cls.read_fields], None),
                           ([f for f in names if f in cls.written_fields], "->")):
            if group and sep:
                cur.expect(sep)
            for i, f in enumerate(group):
                if i:
                    cur.expect(",")
                values[f] = self.operand(cur, scope)
        given: dict[str, str | bool] = {}
        at = cur.tok  # the attributes' '[' (or the end of the line): where their errors point
        if cur.at("["):
            for flag in self.flags(cur):
                name, eq, value = flag.partition("=")
                given[name.strip()] = value.replace(" ", "") if eq else True
        cur.end()
        for f in dataclasses.fields(cls):
            if f.name in ("span", "uid") or f.name in names:
                continue
            v = given.pop(f.name, False if f.type == "bool" else None)
            if v is None:
                if f.default is dataclasses.MISSING:
                    raise cur.error(f"{cls.keyword} needs '{f.name}=...'", at)
                continue
            if f.type == "bool" and v is not True and v is not False:
                raise cur.error(f"'{f.name}' of {cls.keyword} is a flag: '{f.name}' when true, nothing when false", at)
            if f.type != "bool" and v is True:
                raise cur.error(f"'{f.name}' of {cls.keyword} needs a value: '{f.name}=...'", at)
            if f.type == "int":
                if not re.fullmatch(r"-?\d+", v):
                    raise cur.error(f"'{f.name}' of {cls.keyword} must be an integer", at)
                v = int(v)
            values[f.name] = v
        if given:
            raise cur.error(f"{cls.keyword} has no attribute '{next(iter(given))}'", at)
        return cls(None, **values)

    def stmt(self, line: Line, indent: int, scope: Scope) -> T.Stmt:
        cur = self.cursor(line)
        t = cur.tok
        word = t.text if t.kind == "name" else ""
        ex = TileExprParser(scope)
        if word == "for" and line.text.endswith(":"):
            cur.next()
            names = [cur.name()]
            while cur.accept(","):
                names.append(cur.name())
            cur.expect("in")
            kt = cur.tok
            kind = cur.name()
            if kind not in T.LOOP_KINDS:
                raise cur.error(f"unknown loop kind '{kind}'", kt)
            cur.expect("(")
            begin = step = None
            extents: list[T.Expr] = []
            stages = 0
            while not cur.at(")"):
                if cur.tok.kind == "name" and cur.peek().text == "=" and cur.tok.text in ("start", "step",
                                                                                           "num_stages"):
                    key = cur.next().text
                    cur.next()
                    if key == "num_stages":
                        stages = cur.integer()
                    elif key == "start":
                        begin = ex.expr(cur)
                    else:
                        step = ex.expr(cur)
                else:
                    extents.append(ex.expr(cur))
                if not cur.accept(","):
                    break
            cur.expect(")")
            cur.expect(":")
            cur.end()
            vs = [T.Var(D.I32, None, n, "loop") for n in names]
            body = self.nested(indent, scope, vs)
            return T.For(None, kind, vs, extents, body, begin, step, stages)
        if word in ("if", "while") and line.text.endswith(":"):
            cur.next()
            cond = ex.expr(cur)
            cur.expect(":")
            cur.end()
            body = self.nested(indent, scope)
            if word == "while":
                return T.While(None, cond, body)
            els: list[T.Stmt] = []
            if self.pos < len(self.lines) and self.lines[self.pos].indent == indent * 2 and \
                    self.lines[self.pos].text == "else:":
                self.pos += 1
                els = self.nested(indent, scope)
            return T.If(None, cond, body, els)
        if word == "copy" and cur.peek().kind == "name":
            cur.next()
            src = self.region(cur, scope)
            cur.expect("->")
            dst = self.region(cur, scope)
            cur.end()
            return T.Copy(None, src, dst)
        op = T.keyword_ops().get(word) if word else None
        if op is not None and cur.peek().kind == "name":
            return self.generic_op(op, cur, scope)
        if word == "gemm" and cur.peek().kind == "name":
            cur.next()
            a = self.region(cur, scope)
            cur.expect(",")
            b = self.region(cur, scope)
            cur.expect("->")
            c = self.region(cur, scope)
            fl = self.flags(cur)
            cur.end()
            policy = next((f.split("=", 1)[1].strip() for f in fl if f.startswith("policy")), "square")
            return T.Gemm(None, a, b, c, "transpose_A" in fl, "transpose_B" in fl, "clear_accum" in fl, policy)
        if word.startswith("reduce_") and cur.peek().kind == "name":
            cur.next()
            src = self.region(cur, scope)
            cur.expect("->")
            dst = self.region(cur, scope)
            fl = self.flags(cur)
            cur.end()
            return T.Reduce(None, word[len("reduce_"):], src, dst, _dim(fl, cur), "clear" in fl)
        if word == "fill" and cur.peek().kind == "name":
            cur.next()
            dst = self.region(cur, scope)
            cur.expect(",")
            v = ex.expr(cur)
            cur.end()
            return T.Fill(None, dst, v)
        if word.startswith("atomic_") and cur.peek().kind == "name":
            cur.next()
            dst = self.region(cur, scope)
            cur.expect(",")
            v = self.operand(cur, scope)
            result = None
            if cur.accept("->"):
                rt = cur.tok
                result = scope.get(cur.name())
                if not isinstance(result, T.Var):
                    raise cur.error(f"'{rt.text}' is not a variable in scope", rt)
            each = False
            if cur.at("["):
                each = self.flags(cur) == ["per element"]
            cur.end()
            return T.Atomic(None, word[len("atomic_"):], dst, v, each, result)
        if word == "print" and cur.peek().kind == "str":
            cur.next()
            label = ast.literal_eval(cur.next().text)
            cur.expect(",")
            v = self.operand(cur, scope)
            block = thread = None
            if cur.at("["):
                for f in self.flags(cur):
                    key, _, val = f.partition("=")
                    if key.strip() == "block":
                        block = tuple(int(x) for x in re.findall(r"-?\d+", val))
                    else:
                        thread = int(val.replace(" ", ""))
            cur.end()
            return T.Print(None, label, v, block, thread)
        if word == "annotate_layout":
            cur.next()
            bt = cur.tok
            b = scope.get(cur.name())
            if not isinstance(b, T.Buffer):
                raise cur.error(f"'{bt.text}' is not a buffer in scope", bt)
            cur.expect(":")
            kind = cur.name()
            if kind != "custom" or cur.at("end"):
                cur.end()
                return T.AnnotateLayout(None, b, kind)
            cur.expect("(")
            vs = [T.Var(D.I32, None, cur.name(), "loop")]
            while cur.accept(","):
                vs.append(T.Var(D.I32, None, cur.name(), "loop"))
            cur.expect(")")
            cur.expect("->")
            cur.expect("[")
            scope.push()
            for v in vs:
                scope.bind(v.name, v)
            outs = [ex.expr(cur)]
            while cur.accept(","):
                outs.append(ex.expr(cur))
            scope.pop()
            cur.expect("]")
            cur.end()
            return T.AnnotateLayout(None, b, "custom", T.IndexMap(vs, outs, _map_offset(outs, b)))
        if word == "use_swizzle":
            m = re.fullmatch(r"use_swizzle panel_size=(-?\d+), enable=(true|false)", line.text)
            if m is None:
                raise self.error("expected 'use_swizzle panel_size=N, enable=true|false'", line)
            return T.UseSwizzle(None, int(m.group(1)), m.group(2) == "true")
        if word == "fence_global":
            cur.next()
            cur.end()
            return T.FenceGlobal(None)
        if word == "named_barrier":
            m = re.fullmatch(r"named_barrier id=(\d+), threads=(\d+)", line.text)
            if m is None:
                raise self.error("expected 'named_barrier id=N, threads=N'", line)
            return T.NamedBarrier(None, int(m.group(1)), int(m.group(2)))
        # NAME = view / alloc_*, NAME[...] = value, NAME: dtype = value
        if t.kind != "name":
            raise cur.error(f"expected a statement, found '{t.text}'")
        name = cur.next().text
        if cur.accept("="):
            if cur.accept("view"):
                base = scope.get(cur.name())
                cur.expect("as")
                dt = dtype_of(cur.name(), cur)
                cur.expect("[")
                shape = self.dims(cur, ex)
                cur.end()
                if not isinstance(base, T.Buffer):
                    raise self.error("a view of something that is not a buffer", line)
                b = T.Buffer(name, dt, shape, base.scope, None, base.is_output, view_of=base)
                scope.bind(name, b)
                return T.Alloc(None, b)
            st = cur.tok
            kw = cur.name()
            if not kw.startswith("alloc_") or kw[len("alloc_"):] not in T.SCOPES:
                raise cur.error(f"expected 'alloc_<scope>' or 'view', found '{kw}'", st)
            dt = dtype_of(cur.name(), cur)
            cur.expect("[")
            shape = self.dims(cur, ex)
            init = None
            if cur.accept("="):
                init = ex.expr(cur)
            cur.end()
            b = T.Buffer(name, dt, shape, kw[len("alloc_"):], None)
            scope.bind(name, b)
            return T.Alloc(None, b, init)
        if cur.accept(":"):
            dt = dtype_of(cur.name(), cur)
            cur.expect("=")
            value = ex.expr(cur)
            cur.end()
            old = scope.get(name)
            var = old if isinstance(old, T.Var) and old.kind == "local" and old.dtype == dt else \
                T.Var(dt, None, name, "local")
            scope.bind(name, var)
            return T.Assign(None, var, value)
        if cur.accept("["):
            b = scope.get(name)
            if not isinstance(b, T.Buffer):
                raise self.error(f"'{name}' is not a buffer in scope", line)
            idx = [ex.expr(cur)]
            while cur.accept(","):
                idx.append(ex.expr(cur))
            cur.expect("]")
            cur.expect("=")
            value = ex.expr(cur)
            cur.end()
            return T.Store(None, b, idx, value)
        raise self.error(f"not a statement: '{line.text}'", line)

    def dims(self, cur: Cursor, ex: TileExprParser) -> list[T.Expr]:
        dims = [ex.expr(cur)]
        while cur.accept(","):
            dims.append(ex.expr(cur))
        cur.expect("]")
        return dims


def _is_call(cur: Cursor, t: Tok) -> bool:
    i = cur.toks.index(t)
    return i + 1 < len(cur.toks) and cur.toks[i + 1].text == "("


def _has_region_colon(cur: Cursor) -> bool:
    """Whether the bracket after the name at the cursor holds `+:` (a region) rather than indices (a load)."""
    depth = 0
    for t in cur.toks[cur.i + 1:]:
        if t.text in ("[", "("):
            depth += 1
        elif t.text in ("]", ")"):
            depth -= 1
            if depth == 0:
                return False
        elif t.text == "+:" and depth == 1:
            return True
    return False


def _dim(flags: list[str], cur: Cursor) -> int:
    for f in flags:
        if f.replace(" ", "").startswith("dim="):
            return int(f.replace(" ", "")[4:])
    raise cur.error("expected 'dim=N'")


def _map_offset(outs: list[T.Expr], b: T.Buffer) -> T.Expr:
    """The storage offset of an index map's physical coordinates: row-major in the extents they reach over the
    tile, as the builder computes it (tilec/parser/build_tileops.py)."""
    from .fold import fold
    from .layout import add, mul

    if len(outs) == 1:
        return outs[0]
    import numpy as np

    from .layout import map_values
    from .visit import sub_exprs

    vs: list[T.Var] = []
    for o in outs:
        for e in [o, *sub_exprs(o)]:
            if isinstance(e, T.Var) and all(e is not v for v in vs):
                vs.append(e)
    shape = b.const_shape or ()
    env = {v: g for v, g in zip(vs, np.indices(shape, dtype=np.int64), strict=False)}
    extents = [int(np.max(np.broadcast_to(map_values(o, env), shape))) + 1 for o in outs]
    off: T.Expr = outs[0]
    for o, ext in zip(outs[1:], extents[1:], strict=True):
        off = add(mul(off, ext), o)
    return fold(off)


def read_module(text: str, file: str = "<ir>", attr_types: dict[str, type] | None = None) -> T.Module:
    """The module printed as `text` (tilec/ir/printer.py's module_str); statements, buffers and regions get spans
    at their lines of `file`. Raises ReadError."""
    return TileReader(text, file, attr_types).module()


