"""The fuzzer in CI (tilec.testing.fuzz): a fixed budget of generated and mutated inputs, each compiled
to --emit-ir, sm90 .cu, gfx942 .hip and .wgsl, with no internal error, no malformed diagnostic and
no run over two seconds; every entry of the crash corpus (tests/fuzz_corpus/) replayed; and the
fuzzer's own detectors shown to work on planted bugs.

TILEC_FUZZ_INPUTS sets the budget (default 150 inputs, at most 20 of them also run differentially; the seed is
fixed, so every run checks the same prefix of one sequence, whatever the machine's load: a finding in CI is found
again by the same command anywhere). Long runs: scripts/fuzz.py (docs/reliability.md).
"""

from __future__ import annotations

import os
import time

import pytest

from tilec.testing import fuzz

INPUTS = int(os.environ.get("TILEC_FUZZ_INPUTS", "150"))
DIFFERENTIAL = max(1, INPUTS * 2 // 15)  # 20 of the default 150


def _describe(findings) -> str:
    return "\n".join(f"{o.status} [{o.output}] {c.how} {c.name} -D {c.defines}: {o.message}\n{c.text[:2000]}"
                     for c, o in findings[:5])


def test_fuzz_for_a_fixed_budget():
    fz = fuzz.Fuzzer(seed=12)
    start = time.perf_counter()
    findings, inputs, runs, compiled, differential = [], 0, 0, 0, 0
    for case in fz.cases():
        if inputs == INPUTS:
            break
        inputs += 1
        ok = False
        for out in fuzz.OUTPUTS:
            o = fuzz.run_case(case, out)
            runs += 1
            ok |= o.status == "ok"
            if o.status in fuzz.BAD:
                findings.append((case, o))
        compiled += ok
        if case.consts_only and ok and differential < DIFFERENTIAL:
            problem = fuzz.differential(case, seed=inputs)
            differential += 1
            if problem:
                findings.append((case, fuzz.Outcome("sm80/gfx90a", "differential", 0.0, problem)))
    print(f"fuzz: {inputs} inputs, {runs} runs, {compiled} inputs compiled somewhere, {differential} differential "
          f"checks, {len(findings)} findings in {time.perf_counter() - start:.0f} s")
    assert inputs == INPUTS and compiled >= INPUTS // 10 and differential >= min(DIFFERENTIAL, 5)
    assert not findings, _describe(findings)


CORPUS = fuzz.load_corpus()


@pytest.mark.parametrize("case, outputs", CORPUS, ids=[c.key() for c, _ in CORPUS])
def test_corpus_replays_cleanly(case, outputs):
    """Every input the fuzzer (or issue #12) ever found a failure with: now a success or a diagnostic,
    under two seconds, on the output it failed on and on every other."""
    bad = [(case, o) for out in dict.fromkeys([*outputs, *fuzz.OUTPUTS])
           if (o := fuzz.run_case(case, out)).status in fuzz.BAD]
    assert not bad, _describe(bad)


def test_the_corpus_holds_the_issue_classes():
    names = {c.defines.get("num_stages") for c, _ in CORPUS} | {c.defines.get("threads") for c, _ in CORPUS}
    assert {"65536", "1099511627776", "1"} <= names


# ---------------------------------------------------------------- the detectors work


def _sample(name: str) -> fuzz.Case:
    path = fuzz.ROOT / "samples" / f"{name}.tile"
    return fuzz.Case(str(path), path.read_text())


def test_an_internal_error_is_a_finding(monkeypatch):
    from tilec.passes import specialize

    def broken(module, rep):
        raise KeyError("planted")

    monkeypatch.setattr(specialize, "run", broken)
    monkeypatch.setattr("tilec.driver.FRONT_PASSES", [(specialize.NAME, broken)])
    case = _sample("vector_add")
    o = fuzz.run_case(case, "ir")
    assert o.status == "internal" and "planted" in o.message


def test_a_slow_run_and_a_hang_are_findings(monkeypatch):
    import tilec

    case = fuzz.Case("x.tile", "kernel k(A: out f32[N]):\n    with Kernel(1) as bx:\n        A[bx] = 1.0\n")
    real = tilec.compile

    def slow(*a, **k):  # busy: slowness is counted in CPU time, not wall time
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        return real(*a, **k)

    monkeypatch.setattr(tilec, "compile", slow)
    assert fuzz.run_case(case, "ir", slow_s=0.2).status == "slow"
    monkeypatch.setattr(tilec, "compile", lambda *a, **k: time.sleep(5))
    t = time.perf_counter()
    assert fuzz.run_case(case, "ir", hang_s=0.5).status == "hang"
    assert time.perf_counter() - t < 3


def test_a_malformed_diagnostic_is_a_finding(monkeypatch):
    from tilec.diagnostics import CompileError, Diagnostic, Span
    from tilec.passes import specialize

    def bad_span(module, rep):
        raise CompileError([Diagnostic("error", "somewhere", Span(module.files[0], 9999, 1))])

    monkeypatch.setattr("tilec.driver.FRONT_PASSES", [(specialize.NAME, bad_span)])
    case = _sample("vector_add")
    assert fuzz.run_case(case, "ir").status == "malformed"


def test_differential_catches_a_wrong_lowering(monkeypatch):
    """The swapped-lanes bug of test_simt_interp: the sm80 lowering of gemm computes wrong values."""
    from tilec.ir import dtypes as D
    from tilec.ir import tile as T
    from tilec.ir.layout import MmaTiled

    case = fuzz.Case(str(fuzz.ROOT / "samples" / "gemm.tile"), (fuzz.ROOT / "samples/gemm.tile").read_text(),
                     {"block_M": "64", "block_N": "64"}, consts_only=True)
    assert fuzz.differential(case, targets=("sm80",), max_threads_x_blocks=1 << 16) == ""
    orig = MmaTiled.coords
    monkeypatch.setattr(MmaTiled, "coords",
                        lambda self, t, k: orig(self, T.Binary(D.I32, None, "^", t, T.Const(D.I32, None, 1)), k))
    problem = fuzz.differential(case, targets=("sm80",), max_threads_x_blocks=1 << 16)
    assert "differs" in problem


def test_generated_programs_reach_code_generation():
    import random

    rng = random.Random(5)
    statuses = [fuzz.run_case(fuzz.Case(str(fuzz.ROOT / "samples/g.tile"), fuzz.generate(rng)), "sm90").status
                for _ in range(30)]
    assert statuses.count("ok") >= 5, statuses
    assert not set(statuses) & set(fuzz.BAD)


ASCEND_MUTANTS = int(os.environ.get("TILEC_FUZZ_ASCEND", "1"))


def test_const_only_mutants_on_the_ascend_model():
    """Issue #27's differential check on the AscendC model: the first const-only mutants of seed 12 that the
    ascend910b back end builds run on tilec's CPU model of the AscendC API against the interpreter (a g++ build
    of the model each: TILEC_FUZZ_ASCEND mutants, default 1). Per-thread programs are refused there (no threads)."""
    import shutil

    import tilec
    from tilec.diagnostics import CompileError

    if shutil.which("g++") is None:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("g++ is required (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip("the AscendC model needs g++")
    checked, problems = 0, []
    for i, case in enumerate(fuzz.Fuzzer(seed=12).cases()):
        if checked == ASCEND_MUTANTS or i > 2000:
            break
        if not case.consts_only:
            continue
        try:
            tilec.compile(case.name, text=case.text, include_dirs=fuzz.include_dirs(),
                          defines=case.parsed_defines(), target="ascend910b")
        except CompileError:
            continue
        checked += 1
        problem = fuzz.differential(case, targets=(), seed=i, ascend=True)
        if problem:
            problems.append(f"{case.name} -D {case.defines}: {problem}")
    assert checked == ASCEND_MUTANTS
    assert not problems, "\n".join(problems)


def test_the_ascend_differential_catches_a_wrong_result(monkeypatch):
    """Planted: the model's run leaves one output element unwritten (NaN) and changes another."""
    from tilec.targets.ascend import model_run

    def wrong(exe, program, args, cores=8, timeout=120.0):
        import numpy as np

        from tilec.interp import run_kernel

        k = next(k for k in tilec_compile_front().module.kernels if k.name == program.name)
        run_kernel(k, args)
        out = np.asarray(args["C"]).reshape(-1)
        out[0] = np.nan
        out[-1] += 1
        return ""

    import tilec

    path = fuzz.ROOT / "samples" / "vector_add.tile"

    def tilec_compile_front():
        return tilec.compile(path)

    monkeypatch.setattr(model_run, "build_runner", lambda source, program: path)
    monkeypatch.setattr(model_run, "run_on_model", wrong)
    case = fuzz.Case(str(path), path.read_text(), {"block_N": "512"}, consts_only=True)
    problem = fuzz.differential(case, targets=(), seed=1, ascend=True)
    assert "ascend910b vector_add" in problem and "C differs in" in problem, problem
