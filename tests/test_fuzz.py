"""Fuzzing: mutated .tile sources must compile or be rejected with diagnostics, never crash.

The corpus is every `samples/*.tile` (and its imports) plus `tests/ir/*.tile`, read at run time.
Mutations: delete / duplicate / swap / replace tokens, syntax-preserving swaps (a number for a
number, a name for a name...) that reach the passes, delete / duplicate / re-indent lines, insert
random characters or bytes, nest brackets, operators and blocks deeply, and override consts with
odd `-D` values; with no target (Tile IR passes) or with a target of each back end present
(the target passes and code generation). The only acceptable outcomes are success (the IR prints and verifies)
or a CompileError whose diagnostics render as `file:line:col: severity: message` (or as one
`tilec: severity: message` line); anything else -- an exception from inside the compiler, a
diagnostic pointing outside the file -- is a bug.

CI runs a fixed set of examples (derandomize=True). To hunt for new bugs, run with random seeds
and more examples:  TILEC_FUZZ_RANDOM=1 TILEC_FUZZ_SCALE=10 pytest tests/test_fuzz.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tilec
from tilec.diagnostics import CompileError, render
from tilec.driver import pass_names

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted({*ROOT.glob("samples/*.tile"), *ROOT.glob("samples/*/*.tile"), *ROOT.glob("tests/ir/*.tile"),
                 *ROOT.glob("tests/ir/inputs/*.tile")})
TEXTS = [p.read_text() for p in CORPUS]

SCALE = float(os.environ.get("TILEC_FUZZ_SCALE", "1"))
RANDOM = os.environ.get("TILEC_FUZZ_RANDOM", "") not in ("", "0")


def fuzz_settings(n: int):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=not RANDOM, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=RANDOM)


TOKEN = re.compile(r"""
      [ \t]+ | \n | \#[^\n]*
    | "(?:\\.|[^"\\\n])*" | '(?:\\.|[^'\\\n])*'
    | [A-Za-z_][A-Za-z0-9_]* | \d[\w.]*(?:[eE][-+]?\d+)?
    | \*\*=? | //=? | <<=? | >>=? | [-+*/%&|^<>=!]=? | .
""", re.VERBOSE | re.DOTALL)


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


VOCAB = sorted({t for text in TEXTS for t in tokens(text) if t.strip() and not t.startswith("#")} | {
    "(", ")", "[", "]", "{", "}", ":", ",", ".", ";", "=", "\n", "    ", "\t", "\\\n", "out", "T.", "import",
    "const", "def", "kernel", "with", "for", "in", "if", "elif", "else", "return", "pass", "and", "or", "not",
    "0", "-1", "1e400", "0x7fffffffffffffff", "99999999999999999999999", "0.0", "-0.0", "nan", "True", "None",
    "f16", "bf16", "i8", "u8", "i64", "f64", "bool", "f8e4m3", "\"float16\"", "\"\"", "'x'", "Kernel",
    "alloc_var", "alloc_local", "Parallel", "Pipelined", "Unroll", "range", "ceildiv", "if_then_else",
    "infinity", "max_value", "cast", "exp", "print", "atomic_add", "annotate_layout", "use_swizzle",
    "make_swizzled_layout", "reduce_max", "gemm", "copy", "fill", "clear", "transpose_A", "num_stages",
    "threads", "dim", "clear_accum", "policy", "**", "//", "<<", ">>", "~", "%", "!=", "@", "$", "?", "`",
})
ODD_DEFINES = [0, -1, 1, 2, 3, 7, 16, 48, 100, 256, 1 << 20, 1 << 40, 0.5, -2.5, float("inf"), True, False,
               "f16", "bf16", "i8", "i64", "f64", "bool", "f8e4m3", "nosuch", ""]


def _targets() -> list[str | None]:
    """No target (Tile IR passes only), and a target of each back end this checkout has."""
    from tilec.targets.registry import backend_available, lookup

    out: list[str | None] = [None]
    for name in ("sm90", "sm80", "gfx90a", "webgpu"):
        try:
            if backend_available(lookup(name).backend):
                out.append(name)
        except Exception:  # noqa: BLE001 - a registry without this name
            pass
    return out


TARGETS = _targets()


def check(name: str, text: str | None = None, include_dirs=(), defines=None, path: Path | None = None,
          target: str | None = None) -> None:
    """Compile; success, or a CompileError with well-formed diagnostics, is all that is allowed."""
    source = path or name
    try:
        kw = {"target": target} if target else {}
        every_pass = set(pass_names(with_target=bool(target)))  # print the IR after every pass, as --emit-ir=all
        result = tilec.compile(source, text=text, include_dirs=list(include_dirs), defines=defines, verify=True,
                               dump_after=every_pass, **kw)
        result.ir()
        diags, sources = result.diagnostics, result.sources
        assert not any(d.severity == "error" for d in diags), diags
    except CompileError as e:
        diags, sources = e.diagnostics, getattr(e, "sources", None)
        assert any(d.severity == "error" for d in diags), f"CompileError without an error: {diags}"
    for d in diags:
        out = render(d, sources)
        first = out.splitlines()[0]
        assert re.match(r"^(tilec|.+?:\d+:\d+): (error|warning|note): \S", first), out
        if d.span is not None and d.span.line > 0:
            quoted = sources.line(d.span.file, d.span.line) if sources else None
            assert quoted is not None, f"diagnostic points at a line that does not exist: {d}"
            assert d.span.col >= 1, d
            if text is not None and d.span.file == str(source):  # the line the lexer counted
                assert quoted == text.split("\n")[d.span.line - 1].removesuffix("\r"), (d, quoted)


def origin(i: int) -> tuple[str, list[str]]:
    """A name for mutant i (in the original's folder, so relative imports resolve) and -I dirs."""
    p = CORPUS[i]
    return str(p.parent / f"mutant_{p.name}"), [str(p.parent), str(ROOT / "samples"), str(ROOT / "tests/ir/inputs")]


# ---------------------------------------------------------------- token and line mutations


@st.composite
def token_mutant(draw) -> tuple[int, str]:
    i = draw(st.integers(0, len(CORPUS) - 1))
    toks = tokens(TEXTS[i])
    for _ in range(draw(st.integers(1, 4))):
        if not toks:
            toks = [""]
        n = len(toks)
        k = draw(st.integers(0, n - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "replace", "insert"]))
        if op == "delete":
            del toks[k]
        elif op == "duplicate":
            toks.insert(k, toks[k])
        elif op == "swap":
            j = draw(st.integers(0, n - 1))
            toks[k], toks[j] = toks[j], toks[k]
        elif op == "replace":
            toks[k] = draw(st.sampled_from(VOCAB))
        else:
            toks.insert(k, draw(st.sampled_from(VOCAB)) + draw(st.sampled_from(["", " "])))
    return i, "".join(toks)


@st.composite
def line_mutant(draw) -> tuple[int, str]:
    i = draw(st.integers(0, len(CORPUS) - 1))
    lines = TEXTS[i].split("\n")
    for _ in range(draw(st.integers(1, 3))):
        n = len(lines)
        k = draw(st.integers(0, n - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "indent", "dedent", "tab"]))
        if op == "delete":
            del lines[k]
        elif op == "duplicate":
            lines.insert(k, lines[k])
        elif op == "swap":
            j = draw(st.integers(0, n - 1))
            lines[k], lines[j] = lines[j], lines[k]
        elif op == "indent":
            lines[k] = " " * draw(st.integers(1, 9)) + lines[k]
        elif op == "dedent":
            lines[k] = lines[k][draw(st.integers(1, 9)):]
        else:
            lines[k] = "\t" + lines[k].lstrip(" ")
        if not lines:
            lines = [""]
    return i, "\n".join(lines)


@fuzz_settings(400)
@given(token_mutant(), st.sampled_from(TARGETS))
def test_token_mutations(mutant, target):
    i, text = mutant
    note(text)
    name, inc = origin(i)
    check(name, text, inc, target=target)


NUMBERS = ["0", "1", "2", "3", "7", "8", "16", "17", "31", "32", "33", "64", "100", "128", "129", "256", "1024",
           "65536", "0.5", "-1", "1e9"]
OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "<", "<=", "==", "!=", ">=", ">"]
DTYPES = ["f16", "bf16", "f32", "f64", "i8", "u8", "i32", "i64", "bool", "f8e4m3"]


@st.composite
def semantic_mutant(draw) -> tuple[int, str]:
    """Mutations that keep the syntax valid, to get past the parser: a number for a number, a name
    for a name of the same file, a dtype for a dtype, an operator for an operator."""
    i = draw(st.integers(0, len(CORPUS) - 1))
    toks = tokens(TEXTS[i])
    names = sorted({t for t in toks if re.fullmatch(r"[A-Za-z_]\w*", t)})
    spots = [k for k, t in enumerate(toks) if t.strip() and not t.startswith("#") and not t.startswith('"')]
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.sampled_from(spots))
        t = toks[k]
        if t[0].isdigit():
            toks[k] = draw(st.sampled_from(NUMBERS))
        elif t in DTYPES:
            toks[k] = draw(st.sampled_from(DTYPES))
        elif t in OPERATORS:
            toks[k] = draw(st.sampled_from(OPERATORS))
        elif re.fullmatch(r"[A-Za-z_]\w*", t):
            toks[k] = draw(st.sampled_from(names))
    return i, "".join(toks)


@fuzz_settings(250)
@given(semantic_mutant(), st.sampled_from(TARGETS))
def test_semantic_mutations(mutant, target):
    i, text = mutant
    note(text)
    name, inc = origin(i)
    check(name, text, inc, target=target)


@fuzz_settings(300)
@given(line_mutant())
def test_line_mutations(mutant):
    i, text = mutant
    note(text)
    name, inc = origin(i)
    check(name, text, inc)


# ---------------------------------------------------------------- random characters and bytes


@fuzz_settings(200)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.text(min_size=1, max_size=12))
def test_random_characters(which, where, junk):
    i = which % len(CORPUS)
    text = TEXTS[i]
    pos = where % (len(text) + 1)
    mutated = text[:pos] + junk + text[pos:]
    note(repr(mutated[max(0, pos - 40):pos + 40]))
    name, inc = origin(i)
    check(name, mutated, inc)


@fuzz_settings(150)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.binary(min_size=1, max_size=12), st.booleans())
def test_random_bytes(tmp_path_factory, which, where, junk, truncate):
    """Bytes go through a real file, so reading and decoding are fuzzed too."""
    i = which % len(CORPUS)
    data = TEXTS[i].encode()
    pos = where % (len(data) + 1)
    mutated = data[:pos] + junk + (b"" if truncate else data[pos:])
    note(repr(mutated[max(0, pos - 40):pos + 40]))
    path = tmp_path_factory.mktemp("fuzz") / CORPUS[i].name
    path.write_bytes(mutated)
    _, inc = origin(i)
    check(str(path), None, inc, path=path)


# ---------------------------------------------------------------- deep nesting


NESTERS = {
    "parens": ("(", ")"),
    "brackets": ("A[", "]"),
    "calls": ("max(0, ", ")"),
    "casts": ("f32(", ")"),
    "negation": ("-", ""),
    "not": ("not ", ""),
    "chain": ("1 + ", ""),
    "power": ("2 ** ", ""),
    "compare": ("0 < ", ""),
}


@fuzz_settings(200)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(sorted(NESTERS)), st.integers(1, 700))
def test_deep_nesting(which, where, kind, depth):
    i = which % len(CORPUS)
    toks = tokens(TEXTS[i])
    k = where % len(toks)
    open_, close = NESTERS[kind]
    toks[k] = open_ * depth + toks[k] + close * depth
    name, inc = origin(i)
    check(name, "".join(toks), inc)


@fuzz_settings(80)
@given(st.integers(1, 400), st.sampled_from(["if bx > 0:", "for i in range(4):", "for i in Parallel(4):",
                                                "for i in Pipelined(4):", "with Kernel(1) as (bx,):"]))
def test_deep_blocks(depth, header):
    lines = ["kernel k(A: out f32[N]):", "    with Kernel(1) as (bx,):"]
    for d in range(depth):
        lines.append("    " * (d + 2) + header)
    lines.append("    " * (depth + 2) + "A[0] = 1.0")
    check("deep.tile", "\n".join(lines) + "\n")


# ---------------------------------------------------------------- odd -D values


CONST = re.compile(r"^const\s+([A-Za-z_]\w*)", re.M)
WITH_CONSTS = [i for i, t in enumerate(TEXTS) if CONST.search(t) and "kernel" in t]


@pytest.mark.skipif(not WITH_CONSTS, reason="no corpus file with consts")
@fuzz_settings(250)
@given(st.data(), st.sampled_from(TARGETS))
def test_odd_defines(data, target):
    i = data.draw(st.sampled_from(WITH_CONSTS))
    names = CONST.findall(TEXTS[i])
    defines = {n: data.draw(st.sampled_from(ODD_DEFINES), label=n)
               for n in data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))}
    name, inc = origin(i)
    check(name, TEXTS[i], inc, defines=defines, target=target)


def test_corpus_is_not_empty():
    assert len(CORPUS) >= 8
    for p, text in zip(CORPUS, TEXTS, strict=True):
        if "kernel" in text and "inputs" not in p.parts and "common" not in p.parts:
            name, inc = origin(CORPUS.index(p))
            check(name, text, inc)  # the unmutated files compile or fail cleanly
