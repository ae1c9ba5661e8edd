"""Source text to syntax tree (tilec.parser.ast), with clang-style syntax diagnostics."""

from __future__ import annotations

import ast as pyast
import threading
from pathlib import Path

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.indenter import DedentError, Indenter

from ..diagnostics import CompileError, Diagnostic, Span
from ..identity import IdentitySet
from . import ast as A

MAX_NESTING = 200  # deeper bracket nesting is refused before parsing (the tree is walked recursively)
MAX_DEPTH = 250  # deeper syntax trees (long operator chains, deeply nested blocks) are refused after parsing
# Longer lines are refused before parsing: a line is one statement (or part of one), and a longer one
# would only reach MAX_DEPTH after seconds of parsing (about 1 s for 50,000 characters of `1 + 1 ...`).
MAX_LINE_CHARS = 50_000


class _TileIndenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB", "LBRACE"]
    CLOSE_PAREN_types = ["RPAR", "RSQB", "RBRACE"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def reset(self) -> None:
        self.paren_level = 0
        self.indent_level = [0]

    def process(self, stream):
        # Lark calls process() again when it resumes after a syntax error; keep the indentation
        # stack across that resumption instead of starting over (reset() starts a new file).
        return self._process(stream)

    def _process(self, stream):
        # Lark's own loop asserts on an unbalanced ')'; clamp instead and let the parser report it.
        for token in stream:
            if token.type == self.NL_type:
                yield from self.handle_NL(token)
            else:
                yield token
            if token.type in self.OPEN_PAREN_types:
                self.paren_level += 1
            elif token.type in self.CLOSE_PAREN_types:
                self.paren_level = max(0, self.paren_level - 1)
        while len(self.indent_level) > 1:
            self.indent_level.pop()
            yield Token(self.DEDENT_type, "")


_parser: Lark | None = None
_PARSE_LOCK = threading.Lock()


def _get_parser() -> Lark:
    global _parser
    if _parser is None:
        grammar = (Path(__file__).parent / "grammar.lark").read_text()
        _parser = Lark(
            grammar,
            parser="lalr",
            postlex=_TileIndenter(),
            propagate_positions=True,
            maybe_placeholders=True,
            cache=True,
        )
    return _parser


_TOKEN_NAMES = {
    "_NL": "end of line", "_INDENT": "indented block", "_DEDENT": "end of block", "$END": "end of file",
    "NAME": "name", "NUMBER": "number", "STRING": "string", "LPAR": "'('", "RPAR": "')'",
    "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "COLON": "':'", "COMMA": "','",
    "EQUAL": "'='", "DOT": "'.'", "SEMICOLON": "';'", "AUGOP": "'+='",
}


def _describe(tok_type: str) -> str:
    if tok_type in _TOKEN_NAMES:
        return _TOKEN_NAMES[tok_type]
    if tok_type.isupper() and len(tok_type) > 1 and not tok_type.startswith("_"):
        return tok_type.lower().replace("_", " ")
    return repr(tok_type)


def _token_text(tok: Token) -> str:
    if tok.type == "_NL":
        return "end of line"
    if tok.type == "_INDENT":
        return "indent"
    if tok.type == "_DEDENT":
        return "dedent"
    if tok.type == "$END":
        return "end of file"
    return repr(str(tok))


def _expected(e: UnexpectedToken) -> set[str]:
    """What the parser could take here. (An error raised by the contextual lexer lists only what
    that lexer knew, e.g. `_NL` where the parser wants an `_INDENT`; ask the parser instead.)"""
    ip = getattr(e, "interactive_parser", None)
    if ip is not None:
        try:
            return set(ip.accepts())
        except Exception:  # noqa: BLE001 - best effort; fall back to lark's list
            pass
    return set(e.expected)


_KEYWORDS = {"import", "const", "def", "kernel", "for", "while", "in", "if", "elif", "else", "with", "as", "return",
             "pass", "assert", "and", "or", "not", "lambda"}


def _unexpected_token(tok: Token, expected) -> str:
    if set(expected) == {"_INDENT"}:
        return f"expected an indented block, found {_token_text(tok)}"
    if str(tok) in _KEYWORDS and "NAME" in expected:
        return f"'{tok}' is a reserved word in .tile files and cannot be used as a name; rename it (e.g. '{tok}_')"
    return f"unexpected {_token_text(tok)}{_expected_list(expected)}"


# Terminals that start an expression, and those that continue one: listed as one phrase each.
_EXPR_START = {"NAME", "NUMBER", "STRING", "LPAR", "LSQB", "LBRACE", "NOT", "UNARY_OP", "ADD_OP"}
_OPERATORS = {"ADD_OP", "MUL_OP", "SHIFT_OP", "COMP_OP", "AMPERSAND", "VBAR", "CIRCUMFLEX", "AND", "OR", "_POW",
              "DOT", "LPAR", "LSQB"}


def _expected_list(expected) -> str:
    expected = {e for e in expected if not e.startswith("__")}
    phrases = []
    if {"NAME", "NUMBER", "LPAR"} <= expected:
        expected -= _EXPR_START
        phrases.append("an expression")
    if {"ADD_OP", "MUL_OP", "COMP_OP"} <= expected:
        expected -= _OPERATORS
        phrases.append("an operator")
    names = sorted({_describe(e) for e in expected}) + phrases
    if not names or len(names) > 6:
        return ""
    return " (expected " + ", ".join(names) + ")"


def _span(filename: str, meta) -> Span:
    return Span(filename, meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(filename: str, tok: Token, default_line: int = 1) -> Span:
    """Where a token is; tokens made up by the indenter at the end of the file have no position."""
    if tok.type in ("_INDENT", "_DEDENT"):
        # The line the newline run ends on; at the end of the file that is past the last line, so
        # take the line it starts on (the statement before the missing block).
        line = getattr(tok, "end_line", None) or default_line
        if line > default_line:
            line = getattr(tok, "line", None) or default_line
        return Span(filename, min(line, default_line), 1)
    if not getattr(tok, "line", None) or tok.line > default_line:
        return Span(filename, default_line, 1)
    return Span(filename, tok.line, tok.column or 1, tok.end_line or 0, tok.end_column or 0)


def _scan_brackets(text: str, filename: str) -> list[Span]:
    """Refuse brackets nested too deep for the (recursive) tree walks; return the unclosed ones."""
    stack: list[Span] = []
    line, col = 1, 0
    in_str: str | None = None
    in_comment = escaped = False
    for ch in text:
        col += 1
        if ch == "\n":
            line, col, in_comment = line + 1, 0, False
            in_str = None
            continue
        if in_comment:
            continue
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == in_str:
                in_str = None
            continue
        if ch in "\"'":
            in_str = ch
        elif ch == "#":
            in_comment = True
        elif ch in "([{":
            stack.append(Span(filename, line, col, line, col + 1))
            if len(stack) > MAX_NESTING:
                raise CompileError(
                    [Diagnostic("error", f"brackets nested more than {MAX_NESTING} deep",
                                Span(filename, line, col, line, col + 1))]
                )
        elif ch in ")]}" and stack:
            stack.pop()
    return stack


def _check_line_lengths(text: str, filename: str) -> None:
    for line_no, line in enumerate(text.split("\n"), 1):
        if len(line) > MAX_LINE_CHARS:
            raise CompileError([Diagnostic("error", f"line {line_no} is {len(line)} characters long; at most "
                                           f"{MAX_LINE_CHARS} (split the statement up)",
                                           Span(filename, line_no, MAX_LINE_CHARS + 1))])


def parse(text: str, filename: str) -> A.File:
    """Parse a whole .tile file; raise CompileError with every syntax error found.

    The trees of the last few files parsed are kept, keyed by text and name: a tuned build compiles its file once
    per configuration, a tuning worker once per candidate, and the builder only reads the tree."""
    key = (text, filename)
    tree = _PARSED.get(key)
    if tree is None:
        tree = _parse(text, filename)
        with _PARSED_LOCK:
            _PARSED[key] = tree
            while len(_PARSED) > _PARSED_MAX:
                del _PARSED[next(iter(_PARSED))]
    return tree


_PARSED: dict[tuple[str, str], A.File] = {}
_PARSED_MAX = 8
_PARSED_LOCK = threading.Lock()


def _parse(text: str, filename: str) -> A.File:
    text = text.removeprefix("\ufeff")
    unclosed = _scan_brackets(text, filename)  # too-deep brackets first: the more precise message
    _check_line_lengths(text, filename)
    if not text.endswith("\n"):
        text += "\n"
    last_line = max(1, text.count("\n"))
    diags: list[Diagnostic] = []

    error_lines: set[int] = set()
    lexical = IdentitySet()  # the diagnostics about characters rather than tokens (Diagnostic compares by value)

    def report(message: str, span: Span, is_lexical: bool = False) -> None:
        # Report the first error of each line; later ones on that line are usually its echo.
        if span.line not in error_lines:
            error_lines.add(span.line)
            diags.append(Diagnostic("error", message, span))
            if is_lexical:
                lexical.add(diags[-1])

    def on_error(e: UnexpectedInput) -> bool:
        if isinstance(e, UnexpectedCharacters):
            report(_unexpected_char(text, e), Span(filename, e.line, e.column, e.line, e.column + 1), True)
            return len(diags) < 20  # lark skips the character and goes on
        if not isinstance(e, UnexpectedToken):
            return False
        tok = e.token
        # At the end of the file (or of a block), an error after another one, or inside a bracket
        # that is never closed, is an echo of that problem.
        cascade = (diags or unclosed) and tok.type in ("_DEDENT", "$END")
        expected = _expected(e)
        if not cascade:
            report(_unexpected_token(tok, expected), _tok_span(filename, tok, last_line))
        if len(diags) >= 20 or tok.type == "$END":
            return False
        ip = e.interactive_parser
        if expected == {"_INDENT"}:
            # A header with no block under it: give it an empty block and go on with this token,
            # instead of reporting every following line as "expected an indented block".
            _recover_missing_block(ip, tok)
        elif tok.type == "_NL" and "COLON" in expected:
            # A block header without its ':': supply it, so that the block below parses as written
            # instead of every line of it being reported as a second error.
            # The end of line goes through the indenter again: lark resumes with a fresh token stream,
            # so the indent (or dedents) that this line break opens would otherwise be lost.
            ip.feed_token(Token("COLON", ":"))
            for t in _get_parser().options.postlex.handle_NL(tok):
                ip.feed_token(t)
        elif tok.type != "_NL" and "_NL" in expected:
            # Recover by ending the statement here and dropping the offending token.
            ip.feed_token(Token("_NL", "\n"))
        return True

    def failed() -> CompileError:
        if unclosed:
            # Inside a bracket newlines do not count, so to the parser the rest of the file after an
            # unclosed bracket is one line: errors there are echoes of the bracket.
            b = unclosed[0]
            # (Lexical errors -- a stray character, an unterminated string -- stand on their own.)
            diags[:] = [d for d in diags if d.span is None or (d.span.line, d.span.col) < (b.line, b.col)
                        or d in lexical]
            diags.append(Diagnostic("error", f"'{text_at(b)}' was never closed", b))
        diags.sort(key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0))
        return CompileError(diags)

    def text_at(span: Span) -> str:
        return text.split("\n")[span.line - 1][span.col - 1]  # (not splitlines: lark counts only \n)

    try:
        with _PARSE_LOCK:  # the indenter keeps per-parse state inside the shared parser
            parser = _get_parser()
            parser.options.postlex.reset()
            tree = parser.parse(text, on_error=on_error)
    except UnexpectedCharacters as e:
        report(_unexpected_char(text, e), Span(filename, e.line, e.column, e.line, e.column + 1), True)
        raise failed() from None
    except UnexpectedEOF as e:
        if not unclosed:
            report(f"unexpected end of file{_expected_list(e.expected)}", Span(filename, last_line, 1))
        raise failed() from None
    except UnexpectedToken as e:
        if not diags and not unclosed:
            report(_unexpected_token(e.token, _expected(e)),
                   _tok_span(filename, e.token, last_line))
        raise failed() from None
    except DedentError:
        line = _dedent_line(text)
        diags.append(Diagnostic("error", "inconsistent indentation: this line is dedented to a column that "
                                "matches no enclosing block", Span(filename, line, 1)))
        raise failed() from None
    if diags or unclosed:
        raise failed()
    _check_depth(tree, filename)
    return _ToAst(filename).transform(tree)


def _check_depth(tree: Tree, filename: str) -> None:
    """Every later stage walks the tree recursively; refuse a tree deeper than MAX_DEPTH with an
    error at the node that crosses the limit, instead of hitting Python's recursion limit."""
    stack = [(tree, 1, tree)]
    while stack:
        node, depth, located = stack.pop()
        if not getattr(node.meta, "empty", True):
            located = node
        if depth > MAX_DEPTH:
            meta = located.meta
            span = Span(filename, meta.line, meta.column) if not getattr(meta, "empty", True) else Span(filename, 1, 1)
            raise CompileError([Diagnostic(
                "error", f"expression or block nesting is more than {MAX_DEPTH} levels deep; split it up "
                "(for example with temporaries)", span)])
        stack.extend((c, depth + 1, located) for c in node.children if isinstance(c, Tree))


def _recover_missing_block(ip, tok: Token) -> None:
    for t in (Token("_INDENT", ""), Token("PASS", "pass"), Token("_NL", "\n"), Token("_DEDENT", "")):
        ip.feed_token(t)
    if tok.type in ip.accepts():
        ip.feed_token(tok)


def _unexpected_char(text: str, e: UnexpectedCharacters) -> str:
    ch = text[e.pos_in_stream] if e.pos_in_stream is not None and e.pos_in_stream < len(text) else "?"
    if ch in "\"'":
        return f"unterminated string (unexpected {ch!r})"
    what = "character" if ch.isprintable() else "byte"
    return f"unexpected {what} {ch!r}"


def _dedent_line(text: str) -> int:
    """Best-effort line of an indentation that matches no enclosing block."""
    stack = [0]
    for i, raw in enumerate(text.splitlines(), 1):
        stripped = raw.lstrip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        width = len(raw) - len(stripped)
        if width > stack[-1]:
            stack.append(width)
            continue
        while width < stack[-1]:
            stack.pop()
        if width != stack[-1]:
            return i
    return 1


@v_args(meta=True)
class _ToAst(Transformer):
    def __init__(self, filename: str):
        super().__init__()
        self.f = filename

    def _s(self, meta) -> Span:
        return _span(self.f, meta)

    # ---- top level
    def start(self, meta, items):
        decls = [i for i in items if isinstance(i, A.Node)]
        return A.File(Span(self.f, 1, 1), decls)

    def import_stmt(self, meta, items):
        return A.ImportDecl(self._s(meta), _unquote(items[0]))

    def const_def(self, meta, items):
        names = tuple(str(i) for i in items[:-1] if i is not None)
        return A.ConstDecl(self._s(meta), names[0], items[-1], names if len(names) > 1 else ())

    def def_def(self, meta, items):
        name, params, body = items
        return A.DefDecl(self._s(meta), str(name), params or [], body)

    def def_params(self, meta, items):
        return [i for i in items if i is not None]

    def def_param(self, meta, items):
        return A.DefParam(self._s(meta), str(items[0]), items[1])

    def kernel_def(self, meta, items):
        name, params, body = items
        return A.KernelDecl(self._s(meta), str(name), params or [], body)

    def kernel_params(self, meta, items):
        return [i for i in items if i is not None]

    def kernel_param(self, meta, items):
        name, out, typ = items
        return A.KernelParam(self._s(meta), str(name), typ, out is not None)

    def type_expr(self, meta, items):
        dims = items[1]
        if items[0].split(".")[-1] in ("Tensor", "Buffer") and dims is not None and len(dims) == 2:
            return self._tensor(meta, items[0], dims)  # T.Tensor[(M, K), dtype]
        return A.TypeExpr(self._s(meta), items[0], dims)

    def tensor_type(self, meta, items):
        """TileLang's `T.Tensor((M, K), dtype)` (the arguments by position or as shape= / dtype=); checked by
        the builder."""
        return self._tensor(meta, items[0], [a for a in (items[1] or [])])

    def _tensor(self, meta, name: str, args: list):
        kw = {a.name: a.value for a in args if isinstance(a, A.Keyword) and a.name in ("shape", "dtype")}
        args = [a for a in args if not (isinstance(a, A.Keyword) and a.name in ("shape", "dtype"))]
        shape = kw.pop("shape", None) or (args.pop(0) if args else None)
        dtype_node = kw.pop("dtype", None) or (args.pop(0) if args else None)
        if args:  # an argument more: the builder refuses the form
            dtype_node = A.Keyword(args[0].span, "", args[0])
        # the shape: a tuple or list of dims, one dim, or a const choice between shapes (resolved by the builder)
        dims = list(shape.items) if isinstance(shape, A.TupleExpr | A.ListExpr) else [shape] if shape else []
        return A.TypeExpr(self._s(meta), name, dims, dtype_node or A.Name(self._s(meta), "?"))

    def dim_list(self, meta, items):
        return [i for i in items if i is not None]

    def dotted(self, meta, items):
        return ".".join(str(t) for t in items)

    # ---- statements
    def suite(self, meta, items):
        out = []
        for i in items:
            if isinstance(i, list):
                out.extend(i)
            elif isinstance(i, A.Node):
                out.append(i)
        return out

    def simple_stmt(self, meta, items):
        return [i for i in items if i is not None]

    def assign(self, meta, items):
        return A.AssignStmt(self._s(meta), items[0], items[1])

    def tuple_assign(self, meta, items):
        """`a, b = x, y`: both sides as tuples (the builder assigns every value before any target)."""
        targets, values = items
        return A.AssignStmt(self._s(meta), A.TupleExpr(targets[0].span, targets),
                            A.TupleExpr(values[0].span, values))

    def assign_targets(self, meta, items):
        return [i for i in items if i is not None]

    def assign_values(self, meta, items):
        return [i for i in items if i is not None]

    def break_stmt(self, meta, items):
        return A.BreakStmt(self._s(meta))

    def continue_stmt(self, meta, items):
        return A.ContinueStmt(self._s(meta))

    def aug_assign(self, meta, items):
        target, op, value = items
        return A.AssignStmt(self._s(meta), target, value, str(op)[:-1])

    def expr_stmt(self, meta, items):
        return A.ExprStmt(self._s(meta), items[0])

    def pass_stmt(self, meta, items):
        return A.PassStmt(self._s(meta))

    def assert_stmt(self, meta, items):
        return A.AssertStmt(self._s(meta), items[0], items[1])

    def return_stmt(self, meta, items):
        return A.ReturnStmt(self._s(meta), items[0])

    def for_stmt(self, meta, items):
        names, it, body = items
        return A.ForStmt(self._s(meta), names, it, body)

    def while_stmt(self, meta, items):
        return A.WhileStmt(self._s(meta), items[0], items[1])

    def if_stmt(self, meta, items):
        cond, body, *rest = items
        elifs = [r for r in rest if isinstance(r, tuple)]
        orelse = rest[-1] if rest and isinstance(rest[-1], list) else []
        for e_meta, e_cond, e_body in reversed(elifs):
            orelse = [A.IfStmt(e_meta, e_cond, e_body, orelse)]
        return A.IfStmt(self._s(meta), cond, body, orelse)

    def elif_clause(self, meta, items):
        return (self._s(meta), items[0], items[1])

    def else_clause(self, meta, items):
        return items[0]

    def with_stmt(self, meta, items):
        ctx, names, body = items
        return A.WithStmt(self._s(meta), ctx, names or [], body)

    def name_list(self, meta, items):
        return [(str(t), _tok_span(self.f, t)) for t in items if t is not None]

    # ---- expressions
    def or_op(self, meta, items):
        return A.BinOp(self._s(meta), "or", items[0], items[1])

    def and_op(self, meta, items):
        return A.BinOp(self._s(meta), "and", items[0], items[1])

    def not_op(self, meta, items):
        return A.UnaryOp(self._s(meta), "not", items[0])

    def compare(self, meta, items):
        left, op, right = items
        if isinstance(left, A.CompareOp):
            # a < b < c means (a < b) and (b < c), as in Python
            return _chain(self._s(meta), left, A.CompareOp(self._s(meta), str(op), left.right, right))
        if isinstance(left, A.BinOp) and left.op == "and" and getattr(left, "chain", False):
            last = left.right
            return _chain(self._s(meta), left, A.CompareOp(self._s(meta), str(op), last.right, right))
        return A.CompareOp(self._s(meta), str(op), left, right)

    def binop(self, meta, items):
        return A.BinOp(self._s(meta), str(items[1]), items[0], items[2])

    def bitor(self, meta, items):
        return A.BinOp(self._s(meta), "|", items[0], items[1])

    def bitxor(self, meta, items):
        return A.BinOp(self._s(meta), "^", items[0], items[1])

    def bitand(self, meta, items):
        return A.BinOp(self._s(meta), "&", items[0], items[1])

    def pow(self, meta, items):
        return A.BinOp(self._s(meta), "**", items[0], items[1])

    def unary(self, meta, items):
        return A.UnaryOp(self._s(meta), str(items[0]), items[1])

    def call(self, meta, items):
        func, args = items
        pos, kws = [], []
        for a in args or []:
            (kws if isinstance(a, A.Keyword) else pos).append(a)
        return A.CallExpr(self._s(meta), func, pos, kws)

    def arguments(self, meta, items):
        return [i for i in items if i is not None]

    def kwarg(self, meta, items):
        return A.Keyword(self._s(meta), str(items[0]), items[1])

    def subscript(self, meta, items):
        return A.Subscript(self._s(meta), items[0], items[1])

    def subscripts(self, meta, items):
        return [i for i in items if i is not None]

    def slice(self, meta, items):
        return A.Slice(self._s(meta), items[0], items[1])

    def attribute(self, meta, items):
        base, attr = items
        if isinstance(base, A.Name) and base.id == "T":
            return A.Name(self._s(meta), str(attr))  # TileLang's T. prefix
        return A.Attribute(self._s(meta), base, str(attr))

    def name(self, meta, items):
        return A.Name(self._s(meta), str(items[0]))

    def number(self, meta, items):
        text = str(items[0]).replace("_", "")
        if text.lower().startswith("0x"):
            value: int | float = int(text, 16)
        elif any(c in text for c in ".eE"):
            value = float(text)
        else:
            value = int(text)
        return A.Number(self._s(meta), value)

    def string(self, meta, items):
        return A.String(self._s(meta), _unquote(items[0]))

    def ternary(self, meta, items):
        then, cond, orelse = items
        return A.IfExpr(self._s(meta), cond, then, orelse)

    def lambda_expr(self, meta, items):
        return A.LambdaExpr(self._s(meta), items[0] or [], items[1])

    def lambda_params(self, meta, items):
        return [(str(t), _tok_span(self.f, t)) for t in items if t is not None]

    def list(self, meta, items):
        return A.ListExpr(self._s(meta), [i for i in items if i is not None])

    def tuple(self, meta, items):
        return A.TupleExpr(self._s(meta), [i for i in items if i is not None])

    def dict(self, meta, items):
        return A.DictExpr(self._s(meta), items[0] or [])

    def dict_items(self, meta, items):
        return [i for i in items if i is not None]

    def dict_item(self, meta, items):
        return (items[0], items[1])


def _unquote(tok) -> str:
    try:
        return pyast.literal_eval(str(tok))
    except (ValueError, SyntaxError):
        return str(tok)[1:-1]


def _chain(span: Span, left: A.Node, comparison: A.CompareOp) -> A.BinOp:
    node = A.BinOp(span, "and", left, comparison)
    node.chain = True  # type: ignore[attr-defined]
    return node
