"""The command-line fuzzer (tilec/testing/cli_fuzz.py) for a fixed small budget (TILEC_CLI_FUZZ_BUDGET_S, default
40 s; scripts/cli_fuzz.py runs it long), and each of its detectors shown to catch a planted fault."""

from __future__ import annotations

import os
import random
import sys

from tilec.testing import cli_fuzz


def test_fuzzed_command_lines_find_nothing():
    figures = cli_fuzz.run(seed=12, budget_s=float(os.environ.get("TILEC_CLI_FUZZ_BUDGET_S", "40")))
    assert figures.command_lines >= 5
    assert not figures.findings, "\n".join(figures.findings)


def _project(tmp_path):
    return cli_fuzz.Project(tmp_path, random.Random(0))


def _fake(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_write_over_an_input_is_found(tmp_path):
    p = _project(tmp_path)
    fake = _fake(f"open({p.name!r}, 'a').write('x')")
    _, found = cli_fuzz.check_one(tmp_path, p, [], {"o.cu"}, dict(os.environ), program=fake)
    assert any(f"input {p.name!r} changed" in f for f in found)


def test_a_file_outside_the_declared_outputs_is_found(tmp_path):
    p = _project(tmp_path)
    fake = _fake("open('stray.cu', 'w').write('x'); open('o.cu', 'w').write('y')")
    _, found = cli_fuzz.check_one(tmp_path, p, [], {"o.cu"}, dict(os.environ), program=fake)
    assert found == [f"created 'stray.cu' outside the declared outputs: tilec {[]!r}"]


def test_an_internal_error_and_a_traceback_are_found(tmp_path):
    p = _project(tmp_path)
    _, found = cli_fuzz.check_one(tmp_path, p, [], set(), dict(os.environ), program=_fake("raise SystemExit(3)"))
    assert found and found[0].startswith("exit 3")
    _, found = cli_fuzz.check_one(tmp_path, p, [], set(), dict(os.environ), program=_fake("1/0"))
    assert found and "exit 1" in found[0]
