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
