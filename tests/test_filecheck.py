"""IR tests that read like the IR: every tests/ir/*.tile (front end) and tests/target_ir/*.tile (target
passes: `--target X --emit-ir=after:PASS`, one behaviour each) is compiled with its `# RUN-ARGS:` and its
output matched against its `# CHECK:` lines (see tests/filecheck.py); plus tests of the matcher."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from filecheck import FileCheckError, check_text, compile_pattern, parse_checks, run_args

from tilec.cli.main import main as tilec_main

IR_DIR = Path(__file__).parent / "ir"
TARGET_IR_DIR = Path(__file__).parent / "target_ir"
TARGET_IR_FILES = sorted(TARGET_IR_DIR.glob("*.tile"))
IR_FILES = sorted(IR_DIR.glob("*.tile")) + TARGET_IR_FILES


def run_tilec(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = tilec_main(argv)
        except SystemExit as e:  # argparse errors
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def test_there_are_ir_tests():
    assert len(IR_FILES) >= 8
    assert len(TARGET_IR_FILES) >= 8
    for path in TARGET_IR_FILES:  # each runs a target pass
        assert "--target" in path.read_text(), path


def run_ir_test(path: Path) -> None:
    """Compile `path` with its RUN-ARGS and match the output; raise FileCheckError on a mismatch."""
    text = path.read_text()
    checks, args = parse_checks(text, str(path))
    assert checks, f"{path} has no CHECK lines"
    args = run_args(path, args)
    if not any(a.startswith("--emit-ir") for a in args):
        args.append("--emit-ir")
    rc, out, err = run_tilec([str(path), *args])
    assert rc == 0, f"tilec {' '.join(args)} {path.name} failed (exit {rc}):\n{err}"
    try:
        check_text(text, out, str(path))
    except FileCheckError as e:
        raise FileCheckError(f"{e}\n\n--- full output of tilec {' '.join(args)}:\n{out}") from None


@pytest.mark.parametrize("path", IR_FILES, ids=[p.stem for p in IR_FILES])
def test_ir(path: Path):
    try:
        run_ir_test(path)
    except FileCheckError as e:
        pytest.fail(str(e), pytrace=False)


def test_a_wrong_ir_expectation_fails(tmp_path):
    """The harness can fail: a copy of an IR test with one CHECK changed does not pass."""
    src = (IR_DIR / "literals.tile").read_text()
    assert "# CHECK-NEXT: a[i] = a[i] * 0.5:f16\n" in src
    bad = tmp_path / "literals.tile"
    bad.write_text(src.replace("# CHECK-NEXT: a[i] = a[i] * 0.5:f16\n", "# CHECK-NEXT: a[i] = a[i] * 0.5:f32\n"))
    with pytest.raises(FileCheckError, match=r"literals.tile:\d+: CHECK-NEXT: a\[i\] = a\[i\] \* 0.5:f32"):
        run_ir_test(bad)


# ---------------------------------------------------------------- the matcher itself

OUTPUT = """\
kernel gemm(A: f16[M, K])
  sizes M, K
body:
  A_s = alloc_shared f16[128, 32]
  acc = alloc_fragment f32[128, 128]
  for k in pipelined(ceildiv(K, 32), num_stages=3):
    copy A[by * 128 +: 128, k * 32 +: 32] -> A_s[0 +: 128, 0 +: 32]
kernel second(B: f32[N])
body:
  fill B[0 +: 4], 0.0
"""


def ok(checks: str) -> None:
    check_text(checks, OUTPUT)


def fails(checks: str, needle: str = "") -> str:
    with pytest.raises(FileCheckError) as e:
        check_text(checks, OUTPUT)
    assert needle in str(e.value)
    return str(e.value)


def test_check_in_order():
    ok("# CHECK: kernel gemm\n# CHECK: alloc_shared\n# CHECK: num_stages=3")
    fails("# CHECK: num_stages=3\n# CHECK: alloc_shared", "no match")


def test_wrong_check_fails():
    msg = fails("# CHECK: kernel gemm\n# CHECK: alloc_shared f16[64, 32]", "<checks>:2: CHECK: alloc_shared")
    assert "scanning from here" in msg


def test_check_same_line_continues_after_previous_match():
    ok("# CHECK: copy A\n# CHECK: -> A_s")
    fails("# CHECK: -> A_s\n# CHECK: copy A")


def test_check_next():
    ok("# CHECK: A_s = alloc_shared\n# CHECK-NEXT: acc = alloc_fragment")
    fails("# CHECK: A_s = alloc_shared\n# CHECK-NEXT: for k in", "it matches later")
    fails("# CHECK: fill B\n# CHECK-NEXT: anything", "output ends")


def test_check_not():
    ok("# CHECK: sizes\n# CHECK-NOT: fill\n# CHECK: copy")
    fails("# CHECK: kernel gemm\n# CHECK-NOT: alloc_fragment\n# CHECK: copy", "excluded text found")
    ok("# CHECK: fill\n# CHECK-NOT: alloc")  # after the last match: to the end
    fails("# CHECK-NOT: second\n# CHECK: fill")  # before the first match: from the start


def test_check_label_splits_blocks():
    ok("# CHECK-LABEL: kernel gemm\n# CHECK-NOT: fill\n# CHECK-LABEL: kernel second\n# CHECK: fill")
    # a CHECK cannot run past the next label into another kernel's block
    fails("# CHECK-LABEL: kernel gemm\n# CHECK: fill\n# CHECK-LABEL: kernel second", "no match")
    fails("# CHECK-LABEL: kernel nosuch", "label not found")


def test_label_failures_are_reported_per_block():
    msg = fails("# CHECK-LABEL: kernel gemm\n# CHECK: nosuch1\n# CHECK-LABEL: kernel second\n# CHECK: nosuch2")
    assert "nosuch1" in msg and "nosuch2" in msg


def test_regex_and_whitespace():
    ok("# CHECK: A_s = alloc_shared f16[{{[0-9]+}}, 32]")
    ok("# CHECK: copy A[by * {{[0-9]+}} +: 128,   k")  # runs of spaces match runs of spaces
    fails("# CHECK: alloc_shared f16[{{[a-z]+}}, 32]")
    assert compile_pattern("a[{{x|y}}]").fullmatch("a[y]")
    assert not compile_pattern("a.b").search("axb")  # literal text is not a regex


def test_match_never_spans_lines():
    fails("# CHECK: K){{.*}}sizes")


def test_run_args_and_malformed_directives(tmp_path):
    checks, args = parse_checks("# RUN-ARGS: -D a=1 -I %S/inputs\n# RUN-ARGS: --emit-ir=all\n# CHECK: x\n")
    assert [c.kind for c in checks] == ["CHECK"]
    assert run_args(tmp_path / "f.tile", args) == ["-D", "a=1", "-I", f"{tmp_path}/inputs", "--emit-ir=all"]
    for bad in ("# CHECK-NXT: x", "# CHECK x", "# CHECK:", "# CHECK: a{{b", "# CHECK: {{(}}",
                "# CHECK-NEXT: first"):
        with pytest.raises(ValueError):
            parse_checks(bad)
    with pytest.raises(ValueError):
        check_text("no directives here", OUTPUT)
