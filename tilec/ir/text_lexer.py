"""What the IR readers share (tilec/ir/reader.py, tilec/ir/simt_reader.py): lines, tokens, a cursor over one
line's tokens, the names in scope, and ReadError (a message at a line and column of the text)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import dtypes as D


class ReadError(Exception):
    """Text that is not printed IR: a message at a line and column (1-based) of the text."""

    def __init__(self, message: str, line: int = 0, col: int = 0) -> None:
        super().__init__(message)
        self.message, self.line, self.col = message, line, col

    def __str__(self) -> str:
        return f"{self.line}:{self.col}: {self.message}"


@dataclass(slots=True)
class Tok:
    kind: str  # num name str op end
    text: str
    col: int  # 1-based


def scan(pattern: re.Pattern, text: str, line: int, col0: int) -> list[Tok]:
    """The tokens of one line (`pattern`: optional blanks, then one token in a named group)."""
    out: list[Tok] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() != pos:
            break
        kind = m.lastgroup
        start = m.start(kind)
        out.append(Tok(kind, text[start:m.end()], col0 + start))
        pos = m.end()
    rest = len(text) - len(text[pos:].lstrip(" \t"))
    if rest < len(text):
        raise ReadError(f"unexpected character {text[rest]!r}", line, col0 + rest)
    out.append(Tok("end", "", col0 + len(text)))
    return out


class Cursor:
    """A position in one line's tokens."""

    def __init__(self, toks: list[Tok], line: int) -> None:
        self.toks, self.i, self.line = toks, 0, line

    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def error(self, message: str, tok: Tok | None = None) -> ReadError:
        t = tok or self.tok
        return ReadError(message, self.line, t.col)

    def next(self) -> Tok:
        t = self.tok
        self.i = min(self.i + 1, len(self.toks) - 1)
        return t

    def at(self, text: str) -> bool:
        t = self.toks[self.i]
        return t.text == text and t.kind in ("op", "name")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.next()
            return True
        return False

    def parenthesized(self, item):
        """`( item, item, ... )`: the items `item(self)` reads, in order (none for `()`)."""
        self.expect("(")
        out = []
        if not self.at(")"):
            out.append(item(self))
            while self.accept(","):
                out.append(item(self))
        self.expect(")")
        return out

    def expect(self, text: str) -> Tok:
        if not self.at(text):
            got = self.tok.text or "the end of the line"
            raise self.error(f"expected '{text}', found '{got}'")
        return self.next()

    def name(self) -> str:
        if self.tok.kind != "name":
            raise self.error(f"expected a name, found '{self.tok.text or 'the end of the line'}'")
        return self.next().text

    def integer(self) -> int:
        t = self.tok
        neg = self.accept("-")
        t = self.tok
        if t.kind != "num" or not t.text.isdigit():
            raise self.error("expected an integer", t)
        self.next()
        return -int(t.text) if neg else int(t.text)

    def end(self) -> None:
        if self.tok.kind != "end":
            raise self.error(f"unexpected '{self.tok.text}'")


def dtype_of(name: str, cur: Cursor | None = None, tok: Tok | None = None) -> D.DType:
    dt = D.BY_NAME.get(name)
    if dt is None:
        if cur is not None:
            raise cur.error(f"unknown dtype '{name}'", tok)
        raise ReadError(f"unknown dtype '{name}'")
    return dt


class Scope:
    """Names in scope: variables and buffers, innermost last."""

    def __init__(self) -> None:
        self.frames: list[dict[str, object]] = [{}]

    def push(self) -> None:
        self.frames.append({})

    def pop(self) -> None:
        self.frames.pop()

    def bind(self, name: str, obj: object) -> None:
        self.frames[-1][name] = obj

    def get(self, name: str) -> object | None:
        for f in reversed(self.frames):
            if name in f:
                return f[name]
        return None


@dataclass
class Line:
    number: int  # 1-based
    indent: int  # spaces
    text: str  # without the indentation


def split_lines(text: str) -> list[Line]:
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        body = raw.lstrip(" ")
        out.append(Line(n, len(raw) - len(body), body.rstrip()))
    return out
