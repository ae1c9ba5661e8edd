"""Findings of issue #27 outside the lowering of per-thread copies (tests/test_threads.py has those) and the shape
contracts (tests/test_contracts.py): each test fails on the compiler before its fix.

- an out-of-bounds store under a condition on another loop variable is the interpreter's out-of-bounds
  diagnostic, not numpy's broadcasting error;
- a kernel whose name the generated code reserves (`main`, the `tl_` prefix) is published under another name,
  said in a warning at the kernel;
- check-threads refuses shared-memory accesses under thread-dependent control flow only where one buffer is
  written and read there (a write of one buffer under a condition that reads another needs no barrier inside);
- `--keep` leaves its intermediates under a stem no input has, and refuses a directory where it would write over an
  input; file names reach generated comments and depfiles escaped (a line break cannot inject code or a Make rule);
- absurd `-D` sizes, `-o /proc/x.cu`, `--seed -1`, `--rtol nan`, `--atol -1`, `-o A.TILE` are located errors naming
  the flag;
- the depfile lists the tuning database the build reads.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.cli.main import main as tilec_main
from tilec.interp import run_kernel
from tilec.interp.tile_interp import InterpreterError
from tilec.simt.interp import run_simt
from tilec.targets.registry import lookup


def test_out_of_bounds_store_under_a_condition_on_another_loop_variable():
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with T.Kernel(1, threads=64) as bx:
        s = T.alloc_shared([16], T.float32)
        for i, j in T.Parallel(4, 8):
            if j < 3:
                s[i + 14] = A[i]
        B[0] = s[0]
"""
    k = tilec.compile("k.tile", text=text).module.kernels[0]
    with pytest.raises(InterpreterError, match=r"out-of-bounds write of 's': index 16 in dimension 0 of size 16"):
        run_kernel(k, {"A": np.ones(64, np.float32), "B": np.zeros(64, np.float32)})


@pytest.mark.parametrize("name", ["main", "tl_topk"])
def test_a_renamed_kernel_is_said_in_a_warning(tmp_path, capsys, name):
    src = tmp_path / "k.tile"
    src.write_text(f"kernel {name}(A: f32[N], B: out f32[N]):\n"
                   "    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:\n"
                   "        for i in T.Parallel(128):\n"
                   "            B[bx * 128 + i] = A[bx * 128 + i]\n")
    assert tilec_main([str(src), "--target", "sm80", "-o", str(tmp_path / "k.cu")]) == 0
    err = capsys.readouterr().err
    assert f"k.tile:1:1: warning: kernel '{name}' is published as '{name}_'" in err
    assert f'"name": "{name}_"' in (tmp_path / "k.cu.json").read_text()
    assert tilec_main([str(src), "--target", "sm80", "-o", str(tmp_path / "w.cu"), "-Werror"]) == 1


SHARED_UNDER_CONDITION = """
kernel k(A: f32[N], B: out f32[N]):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        s1 = T.alloc_shared([64], T.float32)
        s2 = T.alloc_shared([64], T.float32)
        s1[tx] = A[tx]
        s2[tx] = 0.0
        if s1[(tx + 1) % 64] > 0.0:
            s2[tx] = s1[(tx + 1) % 64] * 2.0
        B[tx] = s2[(tx + 3) % 64]
"""


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx942", "webgpu"])
def test_a_shared_write_under_a_condition_reading_another_buffer(target):
    """Accepted (it was refused as a race), and right: the SIMT model reports a race where a barrier is missing."""
    k = tilec.compile("k.tile", text=SHARED_UNDER_CONDITION).module.kernels[0]
    a = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    want = {"A": a, "B": np.full(64, np.nan, np.float32)}
    run_kernel(k, want)
    got = {"A": a, "B": np.full(64, np.nan, np.float32)}
    result = tilec.compile("k.tile", text=SHARED_UNDER_CONDITION, target=target, verify=True)
    run_simt(result.simt.kernels[0], got, {"N": 64}, warp_size=lookup(target).warp_size)
    assert (got["B"] == want["B"]).all() and (want["B"] != 0).any()


def test_the_same_buffer_under_its_own_condition_is_still_refused():
    from tilec.diagnostics import CompileError

    text = SHARED_UNDER_CONDITION.replace("s2[tx] = s1[(tx + 1) % 64] * 2.0", "s1[tx] = 2.0")
    with pytest.raises(CompileError, match="writes shared memory that the statement at line 9 reads"):
        tilec.compile("k.tile", text=text)


# ================================================================ the command line

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = (ROOT / "samples" / "vector_add.tile").read_text()


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_keep_never_writes_over_the_source(here, capsys):
    if shutil.which("nvcc") is None:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("nvcc is required (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip("no nvcc (--keep keeps nvcc's intermediates)")
    (here / "k.cu").write_text(VECTOR_ADD)  # a .tile source under a name nvcc's intermediates would take
    assert tilec_main(["k.cu", "--target", "sm80", "-o", "k.cubin", "--keep"]) == 0, capsys.readouterr().err
    assert (here / "k.cu").read_text() == VECTOR_ADD
    assert (here / "k.tilec-keep.cu").is_file() and (here / "k.cubin").is_file()


def test_keep_refuses_a_directory_where_it_would_write_over_an_import(here, capsys):
    (here / "k.tilec-keep.tile").write_text("const block_N = 1024\n")
    (here / "k.tile").write_text('import "k.tilec-keep.tile"\n' + VECTOR_ADD.replace("const block_N = 1024\n", ""))
    before = (here / "k.tilec-keep.tile").read_text()
    assert tilec_main(["k.tile", "--target", "sm80", "-o", "k.cubin", "--keep"]) == 1
    err = capsys.readouterr().err
    assert "--keep '.' would write the toolchain's intermediate files (k.tilec-keep.*) over 'k.tilec-keep.tile'" \
        in err, err
    assert (here / "k.tilec-keep.tile").read_text() == before and not (here / "k.cubin").exists()


INJECTED = "k\nstatic_assert(false, \"injected\");\nint x"


@pytest.mark.parametrize("target,suffix", [("sm80", ".cu"), ("gfx942", ".hip"), ("webgpu", ".wgsl"),
                                           ("ascend910b", ".cpp")])
def test_a_file_name_cannot_inject_code(here, capsys, target, suffix):
    src = here / (INJECTED + ".tile")
    src.write_text(VECTOR_ADD)
    assert tilec_main([str(src), "--target", target, "-o", "out" + suffix]) == 0, capsys.readouterr().err
    text = (here / ("out" + suffix)).read_text()
    assert "injected" in text.splitlines()[0] and "\\nstatic_assert" in text.splitlines()[0]
    assert not any(line.startswith("static_assert") for line in text.splitlines())


def test_depfile_names_are_escaped_and_a_line_break_is_refused(here, capsys):
    src = here / "a b$%#.tile"
    src.write_text(VECTOR_ADD)
    assert tilec_main([str(src), "--target", "sm80", "-o", "o.cu", "-MD"]) == 0
    assert "a\\ b$$\\%\\#.tile" in (here / "o.cu.d").read_text()
    bad = here / "x\nevil: all.tile"
    bad.write_text(VECTOR_ADD)
    assert tilec_main([str(bad), "--target", "sm80", "-o", "p.cu", "-MD"]) == 1
    assert "Make cannot spell a file name that holds a line break" in capsys.readouterr().err
    assert not (here / "p.cu").exists() and not (here / "p.cu.d").exists()


def test_the_depfile_lists_the_tuning_database(here, capsys, monkeypatch):
    monkeypatch.delenv("TILEC_TUNE_DB")  # (the tests' conftest turns databases off)
    shutil.copy(ROOT / "samples" / "gemm.tile", here / "gemm.tile")
    shutil.copy(ROOT / "samples" / "gemm.tune.json", here / "gemm.tune.json")
    assert tilec_main(["gemm.tile", "-t", "sm90", "-o", "gemm.cu", "-MD"]) == 0, capsys.readouterr().err
    assert (here / "gemm.cu.d").read_text().split() == ["gemm.cu:", "\\", "gemm.tile", "\\", "gemm.tune.json"]
    assert tilec_main(["gemm.tile", "-t", "sm90", "-o", "gemm.cu", "-M"]) == 0
    assert "gemm.tune.json" in capsys.readouterr().out
    assert tilec_main(["gemm.tile", "-t", "sm90", "-o", "g2.cu", "-MD", "--tune-db", ""]) == 0
    assert "tune.json" not in (here / "g2.cu.d").read_text()


@pytest.mark.parametrize("argv,message", [
    (["run", "vector_add.tile", "-D", "block_N=2147483647"], "a Parallel loop of 2147483647 points; at most 4194304"),
    (["run", "vector_add.tile", "-D", "block_N=268435456"], "a Parallel loop of 268435456 points"),
    (["run", "vector_add.tile", "-D", "block_N=1099511627776"], "points; at most 4194304"),
    (["vector_add.tile", "-o", "/proc/x.cu"], "cannot write -o '/proc/x.cu': directory '/proc' does not take new"),
    (["run", "vector_add.tile", "--seed", "-1"], "--seed -1: the seed is an integer from 0 to 2**64-1"),
    (["run", "vector_add.tile", "--target", "sm80", "--check", "--rtol", "nan"], "--rtol nan: a tolerance is a"),
    (["run", "vector_add.tile", "--target", "sm80", "--check", "--atol", "-1"], "--atol -1.0: a tolerance is a"),
    (["vector_add.tile", "--emit", "cu", "-o", "A.TILE"], "refusing to write generated output under a .tile name"),
])
def test_bad_values_are_errors_naming_them(here, capsys, argv, message):
    (here / "vector_add.tile").write_text(VECTOR_ADD)
    assert tilec_main(argv) == 1
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in here.iterdir() if p.name != "cache") == ["vector_add.tile"]


@pytest.mark.parametrize("name", ["k$x.tile", "k`x`.tile", 'k"x\\y.tile'])
def test_a_name_the_shell_would_expand_builds_with_nvcc(here, capsys, name):
    """nvcc runs its steps through a shell: a source named k$x.tile made it look for k.cu (the intermediates are
    now named without the characters a shell reads between double quotes)."""
    if shutil.which("nvcc") is None:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("nvcc is required (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip("no nvcc")
    (here / name).write_text(VECTOR_ADD)
    assert tilec_main([name, "--target", "sm80", "-o", "o.ptx", "--compiler", "nvcc"]) == 0, capsys.readouterr().err
    assert b".entry" in (here / "o.ptx").read_bytes()
    assert tilec_main([name, "--target", "sm80", "-o", "o.cubin", "--compiler", "nvcc", "--keep", "kept"]) == 0
    kept = sorted(p.name for p in (here / "kept").iterdir())
    assert any(p.endswith(".tilec-keep.cu") and "$" not in p and "`" not in p for p in kept), kept
