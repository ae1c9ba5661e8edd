"""The command-line fuzzer (tilec/testing/cli_fuzz.py) for a fixed small budget (TILEC_CLI_FUZZ_BUDGET_S, default
15 s; scripts/cli_fuzz.py runs it long), and each of its detectors shown to catch a planted fault."""

from __future__ import annotations

import os
import random
import sys

from tilec.testing import cli_fuzz


def test_fuzzed_command_lines_find_nothing():
    figures = cli_fuzz.run(seed=12, budget_s=float(os.environ.get("TILEC_CLI_FUZZ_BUDGET_S", "15")),
                           exec_fraction=0.2)
    assert figures.command_lines >= 5 and figures.forked and figures.execed
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


def test_an_outcome_that_depends_on_the_file_name_is_found(tmp_path):
    """nvcc's shell expanded `$x` in k$x.tile: a build that fails under one name and not under a plain one."""
    (tmp_path / "p").mkdir()
    p = _project(tmp_path / "p")
    os.rename(tmp_path / "p" / p.name, tmp_path / "p" / "k$x.tile")
    p.name = "k$x.tile"
    fake = _fake("import sys; raise SystemExit(1 if any('$' in a for a in sys.argv) else 0)")
    args = [p.name, "--target", "sm80", "-o", "o.cu"]
    found = cli_fuzz.rename_check(tmp_path, p, args, 1, dict(os.environ), cli_fuzz.Launcher(), program=fake)
    assert found and "exit 1 under the name 'k$x.tile' but 0 under 'plain.tile'" in found[0], found
    assert cli_fuzz.rename_check(tmp_path, p, args, 0, dict(os.environ), cli_fuzz.Launcher(),
                                 program=_fake("raise SystemExit(0)")) == []


def test_forked_command_lines_behave_as_exec_ones(tmp_path):
    """A command line run in a fork of the fuzzer (tilec's modules imported) ends as `python -m tilec` does: the
    same status and stderr, and a traceback when tilec raises."""
    (tmp_path / "p").mkdir()
    p = _project(tmp_path / "p")
    env = dict(os.environ, PYTHONPATH=str(cli_fuzz.ROOT), TILEC_CACHE_DIR=str(tmp_path / "cache"), TILEC_TUNE_DB="")
    forked, execed = cli_fuzz.Launcher(tmp_path, exec_fraction=0.0), cli_fuzz.Launcher(tmp_path, exec_fraction=1.0)
    for args in ([p.name, "--target", "sm80", "-o", "o.cu"], [p.name, "--target", "nope"], ["--bogus"],
                 [p.name, "--target", "sm80", "-o", p.name]):
        a = forked.finish(forked.start(tmp_path / "p", args, env), 120)
        b = execed.finish(execed.start(tmp_path / "p", args, env), 120)
        assert a == b, (args, a, b)
    assert forked.forked == 4 and execed.execed == 4


def test_a_hang_is_found_by_cpu_time_and_by_wall_time(tmp_path, monkeypatch):
    """A busy command line past the CPU bound, and a sleeping one past the wall bound, are killed as hangs; a
    slow machine alone (wall time, little CPU) is not one."""
    launcher = cli_fuzz.Launcher(tmp_path)
    busy = launcher.start(tmp_path, [], {}, program=_fake("while True: pass"))
    assert launcher.finish(busy, timeout=0.5)[0] is None
    asleep = launcher.start(tmp_path, [], {}, program=_fake("import time; time.sleep(1.5)"))
    assert launcher.finish(asleep, timeout=0.5)[0] == 0  # 1.5 s of wall time, no CPU: not a hang
    monkeypatch.setattr(cli_fuzz, "HANG_WALL_S", 0.5)
    asleep = launcher.start(tmp_path, [], {}, program=_fake("import time; time.sleep(30)"))
    assert launcher.finish(asleep)[0] is None


def test_a_cache_that_serves_other_bytes_is_found(tmp_path):
    """Planted: a 'hit' that writes other bytes than the build before it and the fresh build after it."""
    (tmp_path / "o.cu").write_text("first")
    fake = _fake("import sys; open('o.cu', 'w').write('fresh' if '--no-cache' in sys.argv else 'stale')")
    found = cli_fuzz.recheck_cache(tmp_path, ["k.tile", "-o", "o.cu"], dict(os.environ), cli_fuzz.Launcher(),
                                   program=fake)
    assert found and "(both builds)" in found[0], found
    fake = _fake("open('o.cu', 'w').write('first')")
    (tmp_path / "o.cu").write_text("first")
    assert cli_fuzz.recheck_cache(tmp_path, ["k.tile", "-o", "o.cu"], dict(os.environ), cli_fuzz.Launcher(),
                                  program=fake) == []
    assert cli_fuzz._shared_output(["k.tile", "-o", "o.cu"], {"./o.cu", "o.cu.json"})
