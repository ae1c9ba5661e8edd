"""Diagnostics through the real command line (`python -m tilec` in a subprocess).

Every problem must come out as `file:line:col: error: message`, the source line and a caret under
the offending span (or, with no position to give, one line `tilec: error: message`), with exit
code 1 and never a Python traceback. One run reports as many independent errors as it can find.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|note): (?P<msg>.+)$")
PLAIN = re.compile(r"^tilec: (?P<sev>error|warning|note): (?P<msg>.+)$")
CARET = re.compile(r"^  (?P<pad> *)\^~*$")


@dataclass
class Diag:
    severity: str
    message: str
    file: str | None = None
    line: int = 0
    col: int = 0
    source: str | None = None  # the quoted source line, as printed
    caret_col: int = 0  # 1-based column of the caret in the quoted line


def tilec(*args: str, cwd: Path | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "tilec", *args], cwd=cwd or ROOT, env=env, input=input,
                          capture_output=True, timeout=120)


def parse_stderr(stderr: str) -> list[Diag]:
    """Every line of stderr must belong to a well-formed diagnostic."""
    lines = stderr.splitlines()
    out: list[Diag] = []
    i = 0
    while i < len(lines):
        text = lines[i]
        m = LOCATED.match(text)
        if m:
            d = Diag(m["sev"], m["msg"], m["file"], int(m["line"]), int(m["col"]))
            if i + 2 < len(lines) and lines[i + 1].startswith("  ") and CARET.match(lines[i + 2]):
                d.source = lines[i + 1][2:]
                d.caret_col = len(CARET.match(lines[i + 2])["pad"]) + 1
                i += 3
            else:
                i += 1
            out.append(d)
            continue
        m = PLAIN.match(text)
        assert m, f"stderr line {i + 1} is not a diagnostic: {text!r}\n--- stderr:\n{stderr}"
        out.append(Diag(m["sev"], m["msg"]))
        i += 1
    return out


def errors_of(proc: subprocess.CompletedProcess, expect_rc: int = 1) -> list[Diag]:
    stderr = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    assert "internal compiler error" not in stderr, stderr
    assert proc.returncode == expect_rc, f"exit {proc.returncode}, expected {expect_rc}\n{stderr}"
    diags = parse_stderr(stderr)
    if expect_rc == 1:
        assert any(d.severity == "error" for d in diags), stderr
    return [d for d in diags if d.severity == "error"]


def compile_errors(tmp_path: Path, source: str, *args: str, name: str = "k.tile") -> list[Diag]:
    path = tmp_path / name
    path.write_text(source)
    errs = errors_of(tilec(str(path), "--emit-ir", *args))
    lines = source.split("\n")
    for d in errs:
        assert d.file == str(path), d
        assert d.source is not None, f"no source line quoted under {d}"
        line = lines[d.line - 1].replace("\t", " ")
        quoted = d.source
        if quoted.startswith("...") or quoted.endswith("..."):  # a long line, clipped around the caret
            head = 3 if quoted.startswith("...") else 0
            inner = quoted[head:len(quoted) - 3 if quoted.endswith("...") else None]
            offset = d.col - (d.caret_col - head)  # where the excerpt starts in the line, if the caret is right
            assert line[offset:offset + len(inner)] == inner and len(quoted) <= 130, (d, line)
        else:
            assert quoted == line, (d, line)
            assert d.caret_col == d.col, d
    return errs


def one_error(tmp_path: Path, source: str, *args: str) -> Diag:
    errs = compile_errors(tmp_path, source, *args)
    assert len(errs) == 1, errs
    return errs[0]


HEAD = """\
const bm = 64
const bk = 32

kernel k(A: f16[M, K], B: bf16[K, N], C: out f32[M, N], I: i32[N]):
    with Kernel(ceildiv(N, bm), ceildiv(M, bm), threads=128) as (bx, by):
        A_s = alloc_shared((bm, bk), f16)
        B_s = alloc_shared((bk, bm), f16)
        Bb_s = alloc_shared((bk, bm), bf16)
        acc = alloc_fragment((bm, bm), f32)
        row = alloc_fragment((bm,), f32)
"""
HEAD_LINES = HEAD.count("\n")


def body(*stmts: str) -> str:
    return HEAD + "".join(f"        {s}\n" for s in stmts)


def test_valid_head_compiles(tmp_path):
    path = tmp_path / "ok.tile"
    path.write_text(body("gemm(A_s, B_s, acc)"))
    proc = tilec(str(path), "--emit-ir")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""


# ---------------------------------------------------------------- syntax


def test_several_syntax_errors_in_one_file(tmp_path):
    src = """\
kernel k(A: f16[M, K]):
    with Kernel(1 threads=128) as (bx,):
        x = = 3
        y = 2
        z = 4 +* 5
        w = (1, 2
"""
    errs = compile_errors(tmp_path, src)
    assert [(d.line, d.col) for d in errs[:3]] == [(2, 19), (3, 13), (5, 16)], errs
    assert all(d.message.startswith("unexpected ") for d in errs[:3])
    assert "'threads'" in errs[0].message and "'='" in errs[1].message
    assert errs[3].message == "'(' was never closed" and (errs[3].line, errs[3].col) == (6, 13)


_BLOCKS = """\
const bm = 64
kernel k(A: f16[M, K], C: out f32[M, N]):
    with Kernel(1, threads=128) as bx:
        for i in Parallel(bm):
            if i > 2:
                C[i, 0] = A[i, 0]
        y = = 2
"""


@pytest.mark.parametrize("line", [2, 3, 4, 5])
def test_missing_colon_is_one_error(tmp_path, line):
    # The block under a header without its ':' parses as written: one error, not one per line below it.
    lines = _BLOCKS.split("\n")
    lines[line - 1] = lines[line - 1].removesuffix(":")
    errs = compile_errors(tmp_path, "\n".join(lines))
    assert (errs[0].line, errs[0].col) == (line, len(lines[line - 1]) + 1), errs
    assert errs[0].message.startswith("unexpected end of line (expected ") and "':'" in errs[0].message, errs
    # an independent error further down is still reported, and nothing else
    assert len(errs) == 2 and errs[1].line == 7 and errs[1].message.startswith("unexpected '='"), errs


def test_unclosed_bracket_at_end_of_file(tmp_path):
    # not "unexpected dedent" at 1:1: the bracket that is never closed
    d = one_error(tmp_path, body("x = ceildiv(M, (bm + 1)"))
    assert d.message == "'(' was never closed" and (d.line, d.col) == (HEAD_LINES + 1, 20)


def test_unexpected_character(tmp_path):
    d = one_error(tmp_path, body("x = 1 $ 2"))
    assert (d.line, d.col) == (HEAD_LINES + 1, 15)
    assert d.message == "unexpected character '$'"


def test_unterminated_string(tmp_path):
    errs = compile_errors(tmp_path, body("print(acc, msg=\"abc)", "x = 1 $ 2"))
    assert [d.message for d in errs] == ["'(' was never closed", "unterminated string (unexpected '\"')",
                                         "unexpected character '$'"]


def test_unicode_line_separators_do_not_shift_lines(tmp_path):
    # \x0c, \x1e and \u2028 end a line for str.splitlines but not for the lexer
    src = body("# a\x1eb\x0cc\u2028d", "x = nosuch")
    d = one_error(tmp_path, src)
    assert d.line == HEAD_LINES + 2 and d.source == "        x = nosuch"


def test_bad_indentation(tmp_path):
    errs = compile_errors(tmp_path, body("x = 1", "  y = 2"))
    assert errs[0].message == "unexpected indent" and errs[0].line == HEAD_LINES + 2
    src = HEAD + "        x = 1\n      y = 2\n"
    errs = compile_errors(tmp_path, src)
    assert errs[-1].line == HEAD_LINES + 2
    assert "indentation" in errs[-1].message and "Expected dedent" not in errs[-1].message


def test_deep_nesting_is_one_error_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.tile"
    path.write_text("const x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n")
    proc = tilec(str(path), "--emit-ir")
    errs = errors_of(proc)
    assert len(errs) == 1 and "nested more than 200 deep" in errs[0].message
    stderr = proc.stderr.decode()
    assert "RecursionError" not in stderr
    assert len(stderr) < 1000  # the 200 000-character line is quoted as a short excerpt
    assert errs[0].caret_col <= len(errs[0].source)


@pytest.mark.parametrize("expr", [
    " + ".join(["bx"] * 5000),  # a long operator chain is a deep tree
    "-" * 5000 + "bx",
    "".join(f"A[{i} + " for i in range(150)) + "0" + "]" * 150,
])
def test_deep_trees_are_one_error(tmp_path, expr):
    errs = compile_errors(tmp_path, body(f"x = {expr}"))
    assert len(errs) == 1, errs
    assert "levels deep" in errs[0].message or "nested more than" in errs[0].message


def test_exponential_helper_expansion_is_refused(tmp_path):
    # each level triples the expression: 3**30 terms if inlined naively
    src = "def f(x):\n    return x * x + x\n\n" + body("y = " + "f(" * 30 + "1.5 * bx" + ")" * 30)
    d = one_error(tmp_path, src)
    assert "helper 'f' expands to an expression of more than" in d.message


def test_long_line_is_clipped_around_the_caret(tmp_path):
    src = body("x = 1 +" + " " * 400 + "nosuch" + " " * 400 + "+ 1  # " + "z" * 100)
    path = tmp_path / "long.tile"
    path.write_text(src)
    errs = errors_of(tilec(str(path), "--emit-ir"))
    assert len(errs) == 1 and errs[0].message == "use of undefined name 'nosuch'"
    d = errs[0]
    assert len(d.source) < 200 and d.source.startswith("...") and d.source.endswith("...")
    assert d.source[d.caret_col - 1:].startswith("nosuch")


# ---------------------------------------------------------------- names, calls, arguments


def test_undefined_name(tmp_path):
    d = one_error(tmp_path, body("x = nosuch + 1"))
    assert d.message == "use of undefined name 'nosuch'"
    assert (d.line, d.col) == (HEAD_LINES + 1, 13)


def test_undefined_function(tmp_path):
    d = one_error(tmp_path, body("x = nosuch(1)"))
    assert "undefined function 'nosuch'" in d.message


@pytest.mark.parametrize("stmt, needle", [
    ("copy(A_s)", "copy is missing argument(s): dst"),
    ("copy(A_s, B_s, 1, 2, 3)", "copy takes at most 4 positional argument(s), got 5"),
    ("gemm(A_s, B_s)", "gemm is missing argument(s): C"),
    ("clear()", "clear is missing argument(s): buffer"),
    ("x = exp(1.0, 2.0)", "exp takes 1 argument(s), got 2"),
    ("x = ceildiv(4)", "ceildiv(a, b) takes two arguments"),
])
def test_wrong_arity(tmp_path, stmt, needle):
    assert needle in one_error(tmp_path, body(stmt)).message


@pytest.mark.parametrize("stmt, needle", [
    ("clear(acc, foo=1)", "clear has no argument 'foo'"),
    ("gemm(A_s, B_s, acc, transpose_C=True)", "gemm has no argument 'transpose_C'"),
    ("reduce_sum(acc, row, dimension=1)", "reduce_sum has no argument 'dimension'"),
    ("copy(A_s, B_s, src=A_s)", "argument 'src' given twice"),
])
def test_unknown_or_duplicate_keyword(tmp_path, stmt, needle):
    d = one_error(tmp_path, body(stmt))
    assert needle in d.message
    assert d.col > 9  # points at the keyword, not the statement


# ---------------------------------------------------------------- types and shapes


def test_gemm_dtype_mismatch(tmp_path):
    d = one_error(tmp_path, body("gemm(A_s, Bb_s, acc)"))
    assert d.message == "gemm operand dtypes differ: A is f16, B is bf16"
    assert (d.line, d.col) == (HEAD_LINES + 1, 9)


@pytest.mark.parametrize("stmt, needle", [
    ("copy(A_s, acc)", "copy shape mismatch: source 'A_s' region is 64x32, destination 'acc' region is 64x64"),
    ("copy(A_s[0:16, :], B_s)", "copy shape mismatch"),
    ("gemm(A_s, A_s, acc)", "gemm K mismatch"),
    ("gemm(A_s, B_s, row)", "gemm operand C ('row') must be 2-D"),
    ("reduce_sum(acc, A_s, dim=1)", "reduce_sum over dim 1 of a 64x64 buffer gives 64"),
    ("reduce_max(acc, row, dim=2)", "dim=2 is out of range for a 2-D buffer"),
])
def test_shape_mismatch(tmp_path, stmt, needle):
    assert needle in one_error(tmp_path, body(stmt)).message


def test_gemm_with_a_unit_dimension(tmp_path):
    src = body("v = alloc_shared((bm, 1), f16)", "w = alloc_shared((1, bm), f16)", "gemm(v, w, acc)")
    errs = compile_errors(tmp_path, src)
    assert len(errs) == 2, errs
    assert "gemm operand A ('v') is 64x1: M, N and K must each be more than 1" in errs[0].message
    assert "gemm operand B ('w') is 1x64" in errs[1].message


def test_huge_on_chip_buffer(tmp_path):
    d = one_error(tmp_path, body("big = alloc_fragment((bm, 1 << 20), f32)"))
    assert "fragment buffer 'big' [64, 1048576] of f32 is 268435456 bytes" in d.message


def test_non_constant_buffer_shape(tmp_path):
    d = one_error(tmp_path, body("W = alloc_shared((M, 32), f16)"))
    assert d.message == "the shape of shared buffer 'W' must be known at compile time"


def test_assignment_to_input_tensor(tmp_path):
    d = one_error(tmp_path, body("A[0, 0] = 1.0"))
    assert "cannot assign to input tensor 'A'" in d.message and "`out`" in d.message
    d = one_error(tmp_path, body("copy(A_s, A[0, 0])"))
    assert "cannot copy into input tensor 'A'" in d.message


def test_integer_true_division(tmp_path):
    d = one_error(tmp_path, body("x = bx / 2"))
    assert "'/' on integers" in d.message and "'//'" in d.message
    assert (d.col, d.source[d.col - 1:d.col + 5]) == (13, "bx / 2")


@pytest.mark.parametrize("stmt, needle", [
    ("x = bx << 32", "shift by 32 is out of range for i32 (0 to 31)"),
    ("x = bx >> -1", "shift by -1 is out of range"),
    ("x = bx ** 20", "integer '**' with a runtime base needs an exponent of at most 16"),
    ("x = bx % 0", "integer division by zero"),
    ("x = {1: 2}", "a dict is not a value here"),
    ("x = 99999999999999999999999", "does not fit in 64 bits"),
])
def test_bad_arithmetic(tmp_path, stmt, needle):
    assert needle in one_error(tmp_path, body(stmt)).message


def test_constant_grid_extent_must_be_positive(tmp_path):
    d = one_error(tmp_path, "kernel k(A: f32[N]):\n    with Kernel(4 - 4, threads=32) as (bx,):\n        pass\n")
    assert d.message == "a grid extent must be positive, this one is 0" and (d.line, d.col) == (2, 17)


def test_grid_extent_must_be_a_launch_formula(tmp_path):
    """A condition on a runtime size in the grid is refused at its line (the launch evaluates the manifest's
    formula), not an internal error when the manifest is written."""
    d = one_error(tmp_path, "kernel k(A: f32[N]):\n    with Kernel(if_then_else(N > 64, N, 1), threads=32) as (bx,):\n"
                            "        pass\n")
    assert d.message.startswith("a grid extent must be a formula of the runtime sizes") and (d.line, d.col) == (2, 17)


def test_tile_op_inside_parallel(tmp_path):
    d = one_error(tmp_path, body("for i, j in Parallel(bm, bm):", "    copy(A_s, B_s)"))
    assert "cannot be used inside a Parallel loop" in d.message
    assert d.line == HEAD_LINES + 2


def test_failed_definition_does_not_cascade(tmp_path):
    # The bad alloc is reported once; later uses of `W` are not reported again as undefined.
    errs = compile_errors(tmp_path, body("W = alloc_shared((bm, bk), nosuchtype)", "clear(W)", "copy(W, A_s)"))
    assert len(errs) == 1 and "expected a dtype" in errs[0].message


# ---------------------------------------------------------------- as many errors as can be found


def test_three_independent_errors_in_the_builder(tmp_path):
    errs = compile_errors(tmp_path, body("x = nosuch + 1", "y = bx / 2", "clear(acc, foo=1)"))
    assert [d.line for d in errs] == [HEAD_LINES + 1, HEAD_LINES + 2, HEAD_LINES + 3], errs


def test_three_independent_errors_in_check_tile_ops(tmp_path):
    errs = compile_errors(tmp_path, body("gemm(A_s, Bb_s, acc)", "copy(A_s, acc)", "reduce_sum(acc, A_s, dim=1)"))
    assert [d.line for d in errs] == [HEAD_LINES + 1, HEAD_LINES + 2, HEAD_LINES + 3], errs


def test_errors_in_several_kernels(tmp_path):
    src = body("x = nosuch") + "\n" + body("y = bx / 2").replace("kernel k(", "kernel k2(").split("\n\n", 1)[1]
    errs = compile_errors(tmp_path, src)
    assert len(errs) == 2, errs


# ---------------------------------------------------------------- targets and files


def plain_error(proc: subprocess.CompletedProcess) -> str:
    errs = errors_of(proc)
    assert len(errs) == 1, errs
    assert errs[0].file is None, errs[0]
    return errs[0].message


def test_unknown_target_lists_the_valid_ones():
    msg = plain_error(tilec("samples/gemm.tile" if (ROOT / "samples/gemm.tile").exists() else "tests/ir/loops.tile",
                            "--target", "sm999"))
    assert "unknown target 'sm999'" in msg
    for name in ("sm80", "sm90", "gfx942", "webgpu", "ascend910b"):
        assert name in msg


def targets_without_back_end() -> list[str]:
    """One target of each back end this checkout does not have yet."""
    from tilec.targets.registry import TARGETS, backend_available

    by_backend = {t.backend: t.name for t in reversed(list(TARGETS.values())) if not backend_available(t.backend)}
    return sorted(by_backend.values())


@pytest.mark.parametrize("target", targets_without_back_end() or
                         [pytest.param("none", marks=pytest.mark.skip(reason="every back end exists"))])
def test_target_without_back_end(target, tmp_path):
    proc = tilec("tests/ir/loops.tile", "--target", target, "-o", str(tmp_path / "out.bin"))
    msg = plain_error(proc)
    assert "back end" in msg
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target", targets_without_back_end() or
                         [pytest.param("none", marks=pytest.mark.skip(reason="every back end exists"))])
def test_emit_ir_for_target_without_back_end(target):
    msg = plain_error(tilec("tests/ir/loops.tile", "--target", target, "--emit-ir", "-o", os.devnull))
    assert "back end" in msg


def test_targets_subcommand():
    proc = tilec("targets")
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"gfx942" in proc.stdout and b"Traceback" not in proc.stderr


def test_missing_file(tmp_path):
    assert "no such file" in plain_error(tilec(str(tmp_path / "nosuch.tile"), "--emit-ir"))


def test_directory(tmp_path):
    assert "is a directory" in plain_error(tilec(str(tmp_path), "--emit-ir"))


def test_empty_file(tmp_path):
    (tmp_path / "e.tile").write_text("")
    assert "empty" in plain_error(tilec(str(tmp_path / "e.tile"), "--emit-ir"))
    (tmp_path / "c.tile").write_text("# only a comment\n\n")
    errs = errors_of(tilec(str(tmp_path / "c.tile"), "--emit-ir"))
    assert len(errs) == 1 and "no kernel" in errs[0].message


def test_binary_file(tmp_path):
    (tmp_path / "b.tile").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    assert "binary" in plain_error(tilec(str(tmp_path / "b.tile"), "--emit-ir"))


def test_non_utf8_file(tmp_path):
    (tmp_path / "l1.tile").write_bytes("const x = 1  # caf\xe9\n".encode("latin-1"))
    assert "not valid UTF-8" in plain_error(tilec(str(tmp_path / "l1.tile"), "--emit-ir"))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read a chmod 000 file")
def test_unreadable_file(tmp_path):
    path = tmp_path / "u.tile"
    path.write_text("kernel k(A: f32[N]):\n    pass\n")
    path.chmod(0)
    try:
        assert "permission denied" in plain_error(tilec(str(path), "--emit-ir"))
    finally:
        path.chmod(0o644)


def test_unreadable_file_in_process(tmp_path, monkeypatch, capsys):
    """The same path for root, who can read a chmod 000 file: reading fails with PermissionError."""
    from tilec.cli.main import main

    path = tmp_path / "u.tile"
    path.write_text("kernel k(A: f32[N]):\n    pass\n")
    real = Path.read_bytes

    def deny(self):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", deny)
    assert main([str(path), "--emit-ir"]) == 1
    err = capsys.readouterr().err
    assert err == f"tilec: error: cannot read '{path}': permission denied\n"


def test_kernel_not_found():
    msg = plain_error(tilec("tests/ir/emit_final.tile", "--emit-ir", "--kernel", "nosuch"))
    assert "no kernel named 'nosuch'" in msg and "first" in msg and "second" in msg


def test_missing_import(tmp_path):
    d = one_error(tmp_path, 'import "nosuch.tile"\n' + body())
    assert "cannot find imported file 'nosuch.tile'" in d.message and d.line == 1


def test_bad_define_and_emit_ir_mode():
    assert "expected NAME=VALUE" in plain_error(tilec("tests/ir/loops.tile", "--emit-ir", "-D", "1x=2"))
    msg = plain_error(tilec("tests/ir/loops.tile", "--emit-ir=after:nosuch"))
    assert "specialize" in msg


# ---------------------------------------------------------------- warnings


def test_unused_define_warns_but_succeeds():
    proc = tilec("tests/ir/loops.tile", "--emit-ir", "-D", "nosuch=1", "-o", os.devnull)
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr
    diags = parse_stderr(stderr)
    assert len(diags) == 1 and diags[0].severity == "warning", diags
    assert "-D nosuch" in diags[0].message
    assert re.match(r"^tilec: warning: ", stderr)


# ---------------------------------------------------------------- resource limits, located


_SHARED = """\
const bm = {bm}
kernel k(A: f16[M, K], C: out f32[M, N]):
    with Kernel(1, threads=128) as bx:
        A_s = alloc_shared((bm, bm), f16)
        B_s = alloc_shared((bm, bm), f32)
        for i in Parallel(bm):
            C[i, 0] = A_s[i, 0] + B_s[i, 0]
"""


def all_diags(tmp_path: Path, source: str, *args: str) -> list[Diag]:
    path = tmp_path / "k.tile"
    path.write_text(source)
    proc = tilec(str(path), *args)
    errors_of(proc)
    return parse_stderr(proc.stderr.decode())


@pytest.mark.parametrize("bm, verb", [(256, "needs"), (700, "declares")])  # storage planning; the early check
def test_shared_memory_overflow_is_reported_at_the_allocations(tmp_path, bm, verb):
    diags = all_diags(tmp_path, _SHARED.format(bm=bm), "--target", "sm90", "-o", str(tmp_path / "k.cu"))
    # the error at the largest buffer's alloc_shared, a note at the other one's (and --fit's note, which has no line)
    assert any("--fit" in d.message for d in diags if d.line == 0), diags
    diags = [d for d in diags if "--fit" not in d.message]
    assert [(d.severity, d.line, d.col) for d in diags] == [("error", 5, 15), ("note", 4, 15)], diags
    assert f"kernel 'k' {verb} " in diags[0].message and "B_s " in diags[0].message, diags
    assert diags[0].source == "        B_s = alloc_shared((bm, bm), f32)" and diags[0].caret_col == 15
    assert diags[1].message == f"'A_s' takes {bm * bm * 2} bytes"


@pytest.mark.parametrize("threads, target, message", [
    (2048, "sm90", "no GPU runs more than 1024 threads per block"),
    (512, "webgpu", "webgpu allows at most 256"),
    (100, "sm90", "not a whole number of 32-lane warps"),
])
def test_thread_limits_are_reported_at_the_threads_argument(tmp_path, threads, target, message):
    src = _SHARED.format(bm=32).replace("threads=128", f"threads={threads}")
    out = tmp_path / ("k.wgsl" if target == "webgpu" else "k.cu")
    errs = [d for d in all_diags(tmp_path, src, "--target", target, "-o", str(out)) if d.severity == "error"]
    assert len(errs) == 1 and message in errs[0].message, errs
    assert (errs[0].line, errs[0].col, errs[0].caret_col) == (3, 20, 20), errs


# ---------------------------------------------------------------- -Wconversion


_CONVERSIONS = """\
kernel k(A: f16[N], I: i32[N], B: out f16[N], C: out i8[N]):
    with Kernel(1, threads=64) as bx:
        acc = alloc_fragment((64,), f32)
        for i in Parallel(64):
            acc[i] = A[i] * 2.0
        for i in Parallel(64):
            B[i] = A[i] + I[i]
            C[i] = I[i]
            B[i] = acc[i]
            B[i] = A[i] + 1
            B[i] = acc[i].astype(f16)
            C[i] = (I[i] > 0) + A[i]
        copy(acc, B[0:64])
"""


def test_conversions_are_silent_by_default(tmp_path):
    path = tmp_path / "k.tile"
    path.write_text(_CONVERSIONS)
    for flags in ((), ("-Wconversion", "-Wno-conversion")):
        proc = tilec(str(path), "--emit-ir", *flags)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode()


def test_wconversion_warns_at_each_lossy_implicit_conversion(tmp_path):
    path = tmp_path / "k.tile"
    path.write_text(_CONVERSIONS)
    proc = tilec(str(path), "--emit-ir", "-Wconversion")
    assert proc.returncode == 0, proc.stderr.decode()
    diags = parse_stderr(proc.stderr.decode())
    assert all(d.severity == "warning" and d.message.endswith(" [-Wconversion]") for d in diags), diags
    got = [(d.line, d.col, d.message.removesuffix(" [-Wconversion]")) for d in diags]
    assert got == [
        (7, 27, "implicit conversion from i32 to f16 of an operand of '+' may change the value; "
                "write .astype(f16) to convert explicitly"),
        (8, 20, "implicit conversion from i32 to i8 in the assignment to 'C' may change the value; "
                "write .astype(i8) to convert explicitly"),
        (9, 20, "implicit conversion from f32 to f16 in the assignment to 'B' may change the value; "
                "write .astype(f16) to convert explicitly"),
        # (bool + f16 converts nothing lossy; the f16 sum into i8 does)
        (12, 20, "implicit conversion from f16 to i8 in the assignment to 'C' may change the value; "
                 "write .astype(i8) to convert explicitly"),
        (13, 9, "copy from f32 'acc' to f16 'B' converts each element implicitly and may change its value"),
    ], got
    assert diags[0].source == "            B[i] = A[i] + I[i]" and diags[0].caret_col == 27
    # docs/language.md shows this kernel and these warnings
    doc = (ROOT / "docs" / "language.md").read_text()
    assert _CONVERSIONS in doc
    assert all(f"k.tile:{line}:{col}: warning: {message} [-Wconversion]\n" in doc for line, col, message in got)


def test_wconversion_with_werror_fails_the_compile(tmp_path):
    path = tmp_path / "k.tile"
    path.write_text(_CONVERSIONS)
    errs = errors_of(tilec(str(path), "-Wconversion", "-Werror", "--target", "sm90", "-o", str(tmp_path / "k.cu")))
    assert len(errs) == 5 and all(d.message.endswith(" [-Werror,-Wconversion]") for d in errs), errs
    assert not (tmp_path / "k.cu").exists()


@pytest.mark.parametrize("src, dst, exact", [
    ("f16", "f32", True), ("bf16", "f32", True), ("f8e4m3", "f16", True), ("f8e5m2", "bf16", True),
    ("i8", "f16", True), ("i16", "f32", True), ("u8", "i16", True), ("i8", "i32", True), ("bool", "f16", True),
    ("f32", "f16", False), ("f16", "bf16", False), ("bf16", "f16", False), ("i32", "f16", False),
    ("i32", "f32", False), ("i32", "i8", False), ("i16", "u16", False), ("u16", "i16", False), ("f16", "i32", False),
    ("i8", "bool", False),
])
def test_which_conversions_are_exact(src, dst, exact):
    from tilec.ir import dtypes as D

    assert D.holds(D.BY_NAME[dst], D.BY_NAME[src]) is exact
