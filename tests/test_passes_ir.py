"""One pass at a time, on IR text: every tests/passes/<pass>/*.ir file is IR as `--emit-ir` prints it, with
`# RUN-ARGS: PASS[,PASS...] [--target T]` (the arguments of `python -m tilec.run_pass`, the file appended) and
FileCheck lines (tests/filecheck.py) matched against what the pass prints, its diagnostics after it. A file whose
checks expect an `error:` must fail (exit 1); every other file must pass. The IR is verified before and after the
pass (`--verify`). Also: every pass of tilec/passes/ and tilec/targets/*/passes/ has such a test, and planted bugs
in a few passes make their tests fail."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from filecheck import FileCheckError, check_text, parse_checks

from tilec import run_pass

ROOT = Path(__file__).resolve().parent.parent
PASS_DIR = Path(__file__).parent / "passes"
FILES = sorted(PASS_DIR.glob("*/*.ir"))
# Passes that run inside another step, not as a step of their own: tested through that step.
INSIDE = {"ascend-split-rows": "ascend-lower"}


def run_file(path: Path) -> tuple[int, str]:
    """Run the file's RUN-ARGS through tilec.run_pass; (exit status, stdout then stderr)."""
    text = path.read_text()
    checks, args = parse_checks(text, str(path))
    assert checks and args, f"{path} needs RUN-ARGS and CHECK lines"
    passes = args[0].split(",")
    want = INSIDE.get(path.parent.name, path.parent.name)
    assert want in passes, f"{path}: a test in {path.parent.name}/ must run {want} (it runs {args[0]})"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run_pass.main([args[0], str(path), *args[1:], "--verify"])
    return rc, out.getvalue() + err.getvalue()


def check_file(path: Path) -> None:
    text = path.read_text()
    checks, _ = parse_checks(text, str(path))
    rc, output = run_file(path)
    expect_error = any(re.search(r"\berror:", c.pattern) for c in checks if c.kind != "CHECK-NOT")
    assert rc == (1 if expect_error else 0), f"{path.name}: exit {rc}\n{output}"
    try:
        check_text(text, output, str(path))
    except FileCheckError as e:
        raise FileCheckError(f"{e}\n\n--- output:\n{output}") from None


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_pass_ir(path: Path):
    try:
        check_file(path)
    except FileCheckError as e:
        pytest.fail(str(e), pytrace=False)


def pass_modules() -> dict[str, Path]:
    """NAME of every pass module in tilec/passes/ and tilec/targets/*/passes/."""
    out = {}
    for p in [*sorted((ROOT / "tilec" / "passes").glob("*.py")),
              *sorted((ROOT / "tilec" / "targets").glob("*/passes/*.py"))]:
        m = re.search(r'^NAME = "([\w-]+)"', p.read_text(), re.M)
        if m:
            out[m.group(1)] = p
    return out


def test_every_pass_has_an_ir_test():
    from tilec.run_pass import steps_for
    from tilec.targets.registry import BACKENDS, TARGETS

    names = set(pass_modules())
    for backend in BACKENDS:  # the steps of every back end's pipeline (ascend-lower has no module of its own)
        target = next(t for t in TARGETS.values() if t.backend == backend)
        names |= {st.name for st in steps_for(target)}
    assert len(names) >= 17, sorted(names)
    missing = sorted(n for n in names if not list((PASS_DIR / n).glob("*.ir")))
    assert not missing, f"passes without an IR-text test in tests/passes/<pass>/: {missing}"


# ---------------------------------------------------------------- the same pass, from text and in the compiler


def _normal(text: str) -> str:
    """What a pass run on text may print differently: statement ids (the reader numbers the statements again:
    specialize removed some of the builder's), source lines in labels (the text's lines), the driver's
    `disabled` attribute (recorded after the front passes)."""
    text = re.sub(r"#\d+", "#N", re.sub(r" \(line \d+\)", "", text))
    return "".join(line for line in text.splitlines(True) if not line.startswith("  attr disabled = "))


@pytest.mark.parametrize("sample,target", [("gemm", "sm80"), ("flash_attention", "sm80"), ("gemm", "sm90"),
                                           ("gemm", "gfx942")])
def test_each_pass_on_the_printed_ir_does_what_it_does_in_the_compiler(sample, target):
    """Every pass of the SIMT pipeline, run by run_pass on the printed output of the pass before it, prints what
    the compiler printed after it: the readers rebuild what the passes read (schedules, layouts, variables)."""
    import tilec
    from tilec.driver import pass_names

    names = pass_names(target)
    r = tilec.compile(ROOT / "samples" / f"{sample}.tile", target, dump_after=set(names))
    start = names.index("check-threads")
    for prev, name in zip(names[start:], names[start + 1:], strict=False):
        if name == "simplify-indices":  # opt-in: the compiler skips it by default
            continue
        out = run_pass.run([name], r.ir_after[prev], f"{sample}.{prev}.ir", target)
        assert _normal(out) == _normal(r.ir_after[name]), f"{name} on the text of {prev} ({sample}, {target})"


# ---------------------------------------------------------------- the tests can fail: planted bugs


def _fails(path: Path) -> bool:
    """Whether the file's test fails (each file named below passes unplanted: test_pass_ir)."""
    try:
        check_file(path)
    except (FileCheckError, AssertionError):
        return True
    return False


def test_planted_bug_simplify_keeps_dead_declarations(monkeypatch):
    from tilec.passes import simplify

    monkeypatch.setattr(simplify, "run", lambda module, rep, target=None: module)
    assert _fails(PASS_DIR / "simplify" / "fold_and_drop.ir")


def test_planted_bug_storage_planning_overlaps_buffers(monkeypatch):
    from tilec.passes import storage_planning

    real = storage_planning.run

    def overlapping(module, rep, target):
        module = real(module, rep, target)
        for k in module.kernels:
            for b in k.shared:
                b.offset = 0
        return module

    monkeypatch.setattr(storage_planning, "run", overlapping)
    assert _fails(PASS_DIR / "storage-planning" / "offsets.ir")


def test_planted_bug_rasterization_swaps_the_block_indices(monkeypatch):
    from tilec.ir import schedule
    from tilec.passes import rasterization

    real = schedule.grouped_order
    monkeypatch.setattr(rasterization, "grouped_order", lambda bx, by, gx, gy, panel: real(by, bx, gy, gx, panel))
    assert _fails(PASS_DIR / "rasterization" / "grouped_order.ir")


def test_planted_bug_partition_boundaries_keeps_only_the_guarded_loop(monkeypatch):
    from tilec.passes import partition_boundaries

    monkeypatch.setattr(partition_boundaries, "run", lambda module, rep, target=None: module)
    assert _fails(PASS_DIR / "partition-boundaries" / "interior_tile.ir")


def test_planted_bug_check_threads_accepts_everything(monkeypatch):
    from tilec import driver

    patched = [(name, (lambda module, rep: module) if name == "check-threads" else run)
               for name, run in driver.FRONT_PASSES]
    monkeypatch.setattr(driver, "FRONT_PASSES", patched)
    assert _fails(PASS_DIR / "check-threads" / "thread_dependent.ir")


def test_planted_bug_layout_inference_forgets_the_swizzle(monkeypatch):
    import dataclasses

    from tilec.passes import layout_inference

    real = layout_inference.run

    def unswizzled(module, rep, target):
        module = real(module, rep, target)
        for k in module.kernels:
            for uid, lay in k.schedule.shared.items():
                k.schedule.shared[uid] = dataclasses.replace(lay, swizzle=False)
        return module

    monkeypatch.setattr(layout_inference, "run", unswizzled)
    assert _fails(PASS_DIR / "layout-inference" / "gemm_mma.ir")


def test_planted_bug_specialize_folds_nothing(monkeypatch):
    from tilec import driver

    patched = [(name, (lambda module, rep: module) if name == "specialize" else run)
               for name, run in driver.FRONT_PASSES]
    monkeypatch.setattr(driver, "FRONT_PASSES", patched)
    assert _fails(PASS_DIR / "specialize" / "fold_and_prune.ir")


def test_planted_bug_pipeline_planning_loses_a_stage(monkeypatch):
    from tilec.passes import pipeline_planning

    real = pipeline_planning.run

    def fewer(module, rep, target):
        module = real(module, rep, target)
        for k in module.kernels:
            for lp in k.schedule.loops.values():
                lp.stages -= 1
        return module

    monkeypatch.setattr(pipeline_planning, "run", fewer)
    assert _fails(PASS_DIR / "pipeline-planning" / "cp_async_stages.ir")


def test_planted_bug_ascend_sync_inserts_nothing(monkeypatch):
    from tilec.targets.ascend.passes import sync

    monkeypatch.setattr(sync, "run", lambda programs, rep, target: programs)
    assert _fails(PASS_DIR / "ascend-sync" / "flags_and_barriers.ir")


def test_planted_bug_ascend_split_rows_never_splits(monkeypatch):
    from tilec.targets.ascend.passes import split_rows

    monkeypatch.setattr(split_rows, "split_rows", lambda k: None)
    assert _fails(PASS_DIR / "ascend-split-rows" / "mixed_relu.ir")


# ---------------------------------------------------------------- the tool's own errors


def test_run_pass_reports_bad_input_at_its_line(tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text("kernel k(A: f16[N])\n  sizes N\n  grid (1, 1, 1) threads 32 as (bx, by, bz)\nbody:\n"
                   "  A[0] = B[0]\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = run_pass.main(["specialize", str(bad)])
    assert rc == 1
    assert err.getvalue().startswith(f"{bad}:5:10: error: 'B' is not a buffer in scope"), err.getvalue()


def test_run_pass_verifies_its_input(tmp_path):
    """With --verify, text that reads but is not well-formed IR (a value stored into a buffer of another type) is
    an error of the input, before any pass runs."""
    bad = tmp_path / "bad.ir"
    bad.write_text("kernel k(A: f32[N])\n  sizes N\n  grid (1, 1, 1) threads 32 as (bx, by, bz)\nbody:\n"
                   "  A[0] = 1.0:f16\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert run_pass.main(["specialize", str(bad)]) == 0
        assert run_pass.main(["specialize", str(bad), "--verify"]) == 1
    assert f"{bad}:1:1: error: IR verification failed after the input" in err.getvalue(), err.getvalue()


def test_run_pass_refuses_an_unknown_pass_and_the_wrong_level(tmp_path):
    ir = tmp_path / "k.ir"
    ir.write_text("simt kernel k(A: global f32) grid (1, 1, 1) threads 32 shared 0 B\n  A[tid] = 0.0f;\n")
    for argv, message in ((["nonesuch", str(ir)], "unknown pass(es) nonesuch"),
                          (["layout-inference", str(ir)], "a target's passes need --target"),
                          (["layout-inference", str(ir), "--target", "sm80"], "reads tile IR, not simt IR")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert run_pass.main(argv) == 1
        assert message in err.getvalue(), (argv, err.getvalue())


def test_a_target_pass_runs_alone_on_ir_that_names_a_back_end_mechanism():
    """`python -m tilec.run_pass lower-to-simt --target sm90 FILE` in a fresh interpreter: the IR names its loops'
    copy mechanism ("tma"), which the CUDA back end registers when imported; the compiler imports it while planning,
    which a pass run on text skips (it raised KeyError: 'tma' until s17, unless another test had imported it)."""
    import subprocess
    import sys

    ir = PASS_DIR / "lower-to-simt" / "tma_wgmma_sm90.ir"
    proc = subprocess.run([sys.executable, "-m", "tilec.run_pass", "lower-to-simt", "--target", "sm90", str(ir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "tma_load" in proc.stdout and "wgmma" in proc.stdout


def test_the_c_printer_knows_bitwise_results_of_non_negative_values_are_non_negative():
    """A swizzled offset (`col ^ row % 8`) divides with C's `/`; a floor division is printed only where an operand
    may be negative."""
    from tilec.ir import dtypes as D
    from tilec.ir import simt as S
    from tilec.ir import tile as T
    from tilec.ir.simt_printer import CStylePrinter

    tid = S.ThreadIdx(D.I32, None)
    swizzled = T.Binary(D.I32, None, "^", T.Binary(D.I32, None, "%", tid, T.Const(D.I32, None, 8)),
                        T.Const(D.I32, None, 3))
    p = CStylePrinter()
    for op in ("^", "|", "&"):
        assert p.is_nonneg(T.Binary(D.I32, None, op, swizzled, tid))
    assert not p.is_nonneg(T.Binary(D.I32, None, "^", swizzled, T.Const(D.I32, None, -1)))
    assert "floordiv" not in p.expr(T.Binary(D.I32, None, "//", swizzled, T.Const(D.I32, None, 2)))
    assert "floordiv" in p.expr(T.Binary(D.I32, None, "//", T.Binary(D.I32, None, "-", swizzled, tid),
                                         T.Const(D.I32, None, 2)))
