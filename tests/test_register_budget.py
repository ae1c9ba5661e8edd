"""A wgmma's registers against the block's register file (tilec/targets/cuda/codegen.py's check): a block of T threads
leaves each thread at most min(255, 65536 / T) registers, and a wgmma holds its whole accumulator, its register A
operand and its descriptors in them at once. A tile over that share is refused at the gemm's line, before ptxas
fails with C7602 ("Insufficient registers"); --fit shrinks it; ptxas's own C7602 (a tile just under the bound)
gets a hint. All without a toolchain: the check runs in the passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.options import CompileOptions
from tilec.targets.cuda.codegen import thread_register_limit
from tilec.targets.cuda.toolchain import toolchain_diagnostics
from tilec.tuning.fit import find_fit

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.tile"
NO_DB = {"tune_db": ""}
# three consumer warpgroups of 64 x 256 (128 f32 accumulator registers a thread) and the producer: 512 threads,
# 128 registers a thread -- ptxas asks for 154 ("register target of 154 or higher")
OVER = {"block_M": 192, "block_N": 256, "block_K": 64, "threads": 384, "num_stages": 3}


def _gemm_line() -> int:
    return next(i for i, line in enumerate(GEMM.read_text().splitlines(), 1)
                if "gemm(A_s, B_s, C_local" in line)


@pytest.mark.parametrize("threads, limit", [(128, 255), (256, 255), (384, 168), (512, 128), (640, 96), (1024, 64),
                                            (96, 255), (400, 152)])
def test_each_threads_share_of_the_register_file(threads, limit):
    """Whole warps (400 threads take 13 warps: 65536 / 416 = 157, rounded down to 152), 255 at most."""
    assert thread_register_limit(threads) == limit


def test_an_accumulator_over_the_threads_share_is_refused_at_the_gemm():
    with pytest.raises(CompileError) as e:
        tilec.compile(str(GEMM), target="sm90", defines=OVER, **NO_DB)
    (d,) = [d for d in e.value.diagnostics if d.severity == "error"]
    assert d.category == "registers"
    assert d.span is not None and Path(d.span.file).name == "gemm.tile" and d.span.line == _gemm_line()
    for words in ("512 threads a block (384 and the producer warpgroup's 128)", "at most 128", "'C_local' (128)",
                  "132 a thread", "4 of shared-memory descriptors"):
        assert words in d.message, (words, d.message)


@pytest.mark.parametrize("defines", [
    {**OVER, "block_N": 192},  # 96 accumulator registers: ptxas built it with 128 (bench/RESULTS.md, s16)
    {"block_M": 128, "block_N": 256, "block_K": 64, "threads": 256, "num_stages": 4},  # sm90's default: 255 a thread
])
def test_tiles_within_the_share_pass(defines):
    tilec.compile(str(GEMM), target="sm90", defines=defines, **NO_DB)


def test_attention_at_head_dim_256_passes_with_its_register_operand():
    """128x64 queries x keys on two consumer warpgroups and the producer (384 threads, 168 a thread): acc_o holds 128,
    P's register A operand 16 and the B descriptor 2 -- 146, under the share (ptxas built it with 168, no spill)."""
    tilec.compile(str(ROOT / "samples" / "flash_attention.tile"), target="sm90",
                  defines={"dtype": "bf16", "dim": 256}, **NO_DB)


def test_the_no_tma_twin_is_checked_on_its_own_threads():
    """Without TMA there is no producer warpgroup: 384 threads leave 168 a thread, over the 132 the tile needs."""
    result = tilec.compile(str(GEMM), target="sm90", defines=OVER, disable=("tma",), **NO_DB)
    assert result.simt.kernels[0].threads == 384


def test_fit_shrinks_the_tile_to_the_share():
    fit = find_fit(str(GEMM), CompileOptions.make(("sm90",), defines=OVER, tune_db=""))
    assert fit is not None and fit.defines and set(fit.defines) <= {"block_M", "block_N"}
    tilec.compile(str(GEMM), target="sm90", defines={**OVER, **fit.defines}, **NO_DB)


def test_the_command_line_reports_it_in_the_compilers_format(tmp_path):
    flags = [a for n, v in OVER.items() for a in ("-D", f"{n}={v}")]
    r = subprocess.run([sys.executable, "-m", "tilec", str(GEMM), "--target", "sm90", "--tune-db", "", *flags,
                        "-o", str(tmp_path / "gemm.cu")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"gemm.tile:{_gemm_line()}:" in r.stderr and ": error: kernel 'gemm' runs 512 threads" in r.stderr
    assert "^~~~" in r.stderr and not (tmp_path / "gemm.cu").exists()


def test_ptxas_register_failures_get_a_hint():
    log = ("ptxas error   : (C7602) Insufficient registers (128) to compile instruction at line 653 in function gemm. "
           "Try to compile with register target of 138 or higher.\n"
           "ptxas fatal   : Ptx assembly aborted due to errors\n")
    first, second = toolchain_diagnostics(log, Path("gemm.cu"), "")
    assert "Insufficient registers (128)" in first.message and "65536 / T registers" in first.message
    assert "65536" not in second.message
