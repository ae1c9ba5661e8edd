"""Source spans and compiler diagnostics.

Every stage of tilec reports problems as `Diagnostic`s that carry a `Span` into the user's source,
rendered the way clang and nvcc do: `file:line:col: error: message`, the source line, and a caret
under the offending span. Stages collect as many diagnostics as they can and then raise
`CompileError`; only `--debug` ever shows a Python traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A half-open region of one source file; lines and columns count from 1."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN_SPAN = Span("<unknown>", 0, 0)


@dataclass
class Diagnostic:
    severity: str  # "error" | "warning" | "note" | "remark"
    message: str
    span: Span | None = None
    notes: list[Diagnostic] = field(default_factory=list)
    category: str = ""  # remarks: what -Rpass=CATEGORY selects (tensor-cores, tma, pipeline, bank-conflicts, ...);
    # errors: what a tool may act on ("shared-memory", "threads": tilec/tuning/fit.py)


class CompileError(Exception):
    """Raised when a stage found errors; carries every diagnostic it collected."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        first = diagnostics[0] if diagnostics else None
        super().__init__(first.message if first else "compilation failed")


class SourceManager:
    """Holds the text of every file read so diagnostics can quote source lines."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}
        self._texts: dict[str, str] = {}

    def text(self, name: str) -> str | None:
        """The exact text the compiler read from file `name` (None if it read no such file)."""
        return self._texts.get(name)

    def add(self, name: str, text: str) -> None:
        self._texts[name] = text
        # Lines end at \n only, as the lexer counts them (str.splitlines also splits at \x0c, \x1e,
        # \u2028..., which would shift every later line number).
        self._lines[name] = [line.removesuffix("\r") for line in text.split("\n")]

    def line(self, name: str, line: int) -> str | None:
        lines = self._lines.get(name)
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1]


class Reporter:
    """Collects diagnostics of one compilation."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        # Remarks (why the compiler chose what it chose) are kept apart: they are printed only when asked for
        # (-R) and recorded in the manifest, never mixed into the warnings.
        self.remarks: list[Diagnostic] = []

    def error(self, message: str, span: Span | None = None) -> None:
        self.diagnostics.append(Diagnostic("error", message, span))

    def warning(self, message: str, span: Span | None = None) -> None:
        self.diagnostics.append(Diagnostic("warning", message, span))

    def remark(self, category: str, message: str, span: Span | None = None) -> None:
        self.remarks.append(Diagnostic("remark", message, span, category=category))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def check(self) -> None:
        """Raise CompileError if any error was reported."""
        if self.has_errors:
            raise CompileError(list(self.diagnostics))


def error(message: str, span: Span | None = None) -> CompileError:
    """A CompileError holding one diagnostic, for stages that stop at the first problem."""
    return CompileError([Diagnostic("error", message, span)])


def render(diag: Diagnostic, sources: SourceManager | None = None, color: bool = False) -> str:
    """Format one diagnostic as clang does: location, severity, message, source line, caret."""
    colors = {"error": "\x1b[1;31m", "warning": "\x1b[1;35m", "note": "\x1b[1;36m", "remark": "\x1b[1;34m"}
    sev = f"{colors[diag.severity]}{diag.severity}:\x1b[0m" if color else f"{diag.severity}:"
    span = diag.span
    if diag.category and diag.severity in ("remark", "warning"):  # an error's category is for tools (tuning/fit.py)
        flag = f"-Rpass={diag.category}" if diag.severity == "remark" else f"-W{diag.category}"
        diag = Diagnostic(diag.severity, f"{diag.message} [{flag}]", span, diag.notes)
    if span is None or span.line == 0:
        head = f"tilec: {sev} {diag.message}"
        out = [head]
    else:
        out = [f"{span}: {sev} {diag.message}"]
        text = sources.line(span.file, span.line) if sources else None
        if text is not None:
            text = "".join(c if c.isprintable() else " " for c in text.replace("\t", " "))
            start = max(span.col - 1, 0)
            if span.end_line == span.line and span.end_col > span.col:
                width = span.end_col - span.col
            else:
                width = 1
            width = max(1, min(width, len(text) - start)) if start < len(text) else 1
            text, start, width = _clip(text, start, width)
            out.append(f"  {text}")
            out.append("  " + " " * start + "^" + "~" * (width - 1))
    for note in diag.notes:
        out.append(render(note, sources, color))
    return "\n".join(out)


MAX_QUOTED = 120  # longest source excerpt quoted under a diagnostic


def _clip(text: str, start: int, width: int) -> tuple[str, int, int]:
    """A window of a long source line around the caret, with `...` where it was cut."""
    if len(text) <= MAX_QUOTED:
        return text, start, width
    lo = max(0, min(start - MAX_QUOTED // 3, len(text) - MAX_QUOTED))
    hi = lo + MAX_QUOTED
    head = "..." if lo > 0 else ""
    tail = "..." if hi < len(text) else ""
    width = max(1, min(width, hi - start))
    return head + text[lo:hi] + tail, start - lo + len(head), width
