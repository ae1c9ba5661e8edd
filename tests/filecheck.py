"""A small FileCheck: match compiler output against `# CHECK:` lines written next to the source.

A test file (a `.tile` source) carries its own expectations as comments:

    # RUN-ARGS: -D block_M=64 --emit-ir=after:specialize     (CLI options; %S is the file's folder)
    # CHECK-LABEL: kernel gemm                               (splits the output into blocks)
    # CHECK: alloc_shared f16[64, 32]                        (on some later line, in order)
    # CHECK-NEXT: alloc_shared                               (on the very next line)
    # CHECK-NOT: if                                          (not between the neighbouring matches)
    # CHECK: copy A[by * {{[0-9]+}} +: 64                    ({{regex}} inside a pattern)

Semantics follow LLVM FileCheck where they overlap: a pattern is a substring of one line (with runs
of spaces matching runs of spaces), `{{...}}` is a Python regular expression; CHECK-LABEL lines are
matched first and cut the output into blocks, each checked on its own so one wrong block does not
hide the others; CHECK-NOT holds on the span from the previous positive match (or the block start)
to the next one (or the block end).

Run by hand: `python tests/filecheck.py CHECKFILE < output.txt`.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

DIRECTIVE = re.compile(r"#\s*(CHECK(?:-NEXT|-NOT|-LABEL)?|RUN-ARGS)\s*:(.*)$")
KINDS = ("CHECK", "CHECK-NEXT", "CHECK-NOT", "CHECK-LABEL")


class FileCheckError(AssertionError):
    """A check did not hold; the message quotes the directive and the output around the failure."""


@dataclass
class Check:
    kind: str  # CHECK | CHECK-NEXT | CHECK-NOT | CHECK-LABEL
    pattern: str  # as written
    regex: re.Pattern
    line: int  # line of the directive in the check file
    file: str = "<checks>"

    def where(self) -> str:
        return f"{self.file}:{self.line}: {self.kind}: {self.pattern}"


def compile_pattern(pattern: str) -> re.Pattern:
    """Literal text with `{{regex}}` pieces; runs of whitespace match runs of spaces or tabs."""
    parts: list[str] = []
    pos = 0
    while pos < len(pattern):
        start = pattern.find("{{", pos)
        if start < 0:
            parts.append(_literal(pattern[pos:]))
            break
        end = pattern.find("}}", start + 2)
        if end < 0:
            raise ValueError(f"unclosed '{{{{' in pattern: {pattern!r}")
        # '}}}' closes after the first '}' that belongs to the regex, as in FileCheck
        while pattern.startswith("}}}", end):
            end += 1
        parts.append(_literal(pattern[pos:start]))
        inner = pattern[start + 2 : end]
        try:
            re.compile(inner)
        except re.error as e:
            raise ValueError(f"bad regex {{{{{inner}}}}} in pattern {pattern!r}: {e}") from None
        parts.append(f"(?:{inner})")
        pos = end + 2
    return re.compile("".join(parts))


def _literal(text: str) -> str:
    return r"[ \t]+".join(re.escape(w) for w in re.split(r"[ \t]+", text))


def parse_checks(text: str, file: str = "<checks>") -> tuple[list[Check], list[str]]:
    """The CHECK directives and the RUN-ARGS (split like a shell would) of a check file."""
    checks: list[Check] = []
    args: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        m = DIRECTIVE.search(raw)
        if not m:
            if re.search(r"#\s*CHECK[-A-Z]*\s", raw) or re.search(r"#\s*CHECK-(?!NEXT|NOT|LABEL)[A-Z]+:", raw):
                raise ValueError(f"{file}:{n}: malformed or unknown directive: {raw.strip()}")
            continue
        kind, body = m.group(1), m.group(2).strip()
        if kind == "RUN-ARGS":
            args += shlex.split(body)
            continue
        if not body and kind != "CHECK-NOT":
            raise ValueError(f"{file}:{n}: empty {kind} pattern")
        try:
            rx = compile_pattern(body)
        except ValueError as e:
            raise ValueError(f"{file}:{n}: {e}") from None
        checks.append(Check(kind, body, rx, n, file))
    if checks and checks[0].kind == "CHECK-NEXT":
        raise ValueError(f"{file}:{checks[0].line}: CHECK-NEXT cannot be the first directive")
    return checks, args


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos)


def _context(text: str, pos: int, note: str, radius: int = 4) -> str:
    lines = text.splitlines()
    at = _line_of(text, pos)
    lo, hi = max(0, at - 1), min(len(lines), at + radius)
    out = [f"  output from line {at + 1} ({note}):"]
    for i in range(lo, hi):
        out.append(f"  {'>' if i == at else ' '} {i + 1:4} | {lines[i]}")
    if not lines:
        out.append("    (empty output)")
    return "\n".join(out)


def _search_line(rx: re.Pattern, text: str, pos: int, end: int) -> re.Match | None:
    """First match of `rx` at or after `pos` that lies within one line and ends by `end`."""
    while pos <= end:
        m = rx.search(text, pos, end)
        if m is None:
            return None
        if "\n" not in m.group(0):
            return m
        pos = m.start() + 1
    return None


def _check_block(checks: list[Check], text: str, start: int, end: int, errors: list[str]) -> None:
    pos = start
    prev_line: int | None = None if start == 0 else _line_of(text, start)
    pending_not: list[Check] = []

    def check_nots(lo: int, hi: int) -> None:
        for c in pending_not:
            m = _search_line(c.regex, text, lo, hi)
            if m is not None:
                errors.append(f"{c.where()}\n  excluded text found\n{_context(text, m.start(), 'found here')}")
        pending_not.clear()

    for c in checks:
        if c.kind == "CHECK-NOT":
            pending_not.append(c)
            continue
        if c.kind == "CHECK-NEXT":
            if prev_line is None:
                errors.append(f"{c.where()}\n  CHECK-NEXT has no previous match to follow")
                return
            # the next line: from the end of the current line to the end of the following one
            nl = text.find("\n", pos)
            if nl < 0 or nl + 1 >= end:
                errors.append(f"{c.where()}\n  expected a next line, but the output ends\n"
                              f"{_context(text, pos, 'previous match')}")
                return
            line_end = text.find("\n", nl + 1)
            line_end = end if line_end < 0 or line_end > end else line_end
            m = c.regex.search(text, nl + 1, line_end)
            if m is None:
                later = _search_line(c.regex, text, nl + 1, end)
                hint = f" (it matches later, on output line {_line_of(text, later.start()) + 1})" if later else ""
                errors.append(f"{c.where()}\n  not on the line after the previous match{hint}\n"
                              f"{_context(text, nl + 1, 'the next line')}")
                return
        else:
            m = _search_line(c.regex, text, pos, end)
            if m is None:
                errors.append(f"{c.where()}\n  no match\n{_context(text, pos, 'scanning from here')}")
                return
        check_nots(pos, m.start())
        pos = m.end()
        prev_line = _line_of(text, m.start())
    check_nots(pos, end)


def check(checks: list[Check], output: str) -> None:
    """Raise FileCheckError listing every failed directive (first failure per block)."""
    labels = [c for c in checks if c.kind == "CHECK-LABEL"]
    errors: list[str] = []
    # Place the labels first: each on a line after the previous label's.
    bounds: list[tuple[int, int]] = []
    pos = 0
    for c in labels:
        m = _search_line(c.regex, output, pos, len(output))
        if m is None:
            errors.append(f"{c.where()}\n  label not found\n{_context(output, pos, 'scanning from here')}")
            raise FileCheckError("\n\n".join(errors))
        line_start = output.rfind("\n", 0, m.start()) + 1
        bounds.append((line_start, m.end()))
        nl = output.find("\n", m.end())
        pos = len(output) if nl < 0 else nl + 1
    # Blocks: [start, first label), [label 1, label 2), ...; each label is the block's first check.
    groups: list[list[Check]] = [[]]
    for c in checks:
        if c.kind == "CHECK-LABEL":
            groups.append([c])
        else:
            groups[-1].append(c)
    starts = [0] + [b[0] for b in bounds]
    ends = [b[0] for b in bounds] + [len(output)]
    for group, lo, hi in zip(groups, starts, ends, strict=True):
        if group:
            _check_block(group, output, lo, hi, errors)
    if errors:
        raise FileCheckError("\n\n".join(errors))


def check_text(check_file_text: str, output: str, file: str = "<checks>") -> None:
    checks, _ = parse_checks(check_file_text, file)
    if not checks:
        raise ValueError(f"{file}: no CHECK directives")
    check(checks, output)


def run_args(path: Path, args: list[str]) -> list[str]:
    """RUN-ARGS with %s (the file) and %S (its folder) substituted."""
    return [a.replace("%S", str(path.parent)).replace("%s", str(path)) for a in args]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/filecheck.py CHECKFILE < output", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        check_text(path.read_text(), sys.stdin.read(), str(path))
    except (FileCheckError, ValueError) as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
