"""Fitting a kernel's tiles to a target (tilec/tuning/fit.py, `--fit`): the consts that size the buffers are
found by changing them, the largest configuration of them that fits comes from compiling the candidates
through the target's passes, the error names it and --fit builds it, saying so in a remark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tilec
from tilec.options import CompileOptions
from tilec.tuning.fit import find_fit

ROOT = Path(__file__).resolve().parent.parent

# 128 x 128 x 128 f32 tiles need 128 KB of shared memory (gfx942 has 64 KB);
# `dim` is the problem's (it names a tensor's dimension) and num_stages sizes no buffer here
GEMM = """
const block_M = 128
const block_N = 128
const block_K = 128
const dim = 64
const num_stages = 1

kernel gemm(A: f32[M, K], B: f32[K, N], C: out f32[M, N], X: f32[dim]):
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), f32)
        B_shared = T.alloc_shared((block_K, block_N), f32)
        C_local = T.alloc_fragment((block_M, block_N), f32)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
"""


def test_the_largest_configuration_of_the_sizing_consts_that_fits(tmp_path):
    src = tmp_path / "gemm.tile"
    src.write_text(GEMM)
    fit = find_fit(str(src), CompileOptions.make(("gfx942",)))
    assert fit is not None
    assert set(fit.defines) <= {"block_M", "block_N", "block_K"}  # not dim (the problem's), not num_stages
    assert fit.was == {n: {"block_M": 128, "block_N": 128, "block_K": 128}[n] for n in fit.defines}
    chosen = {"block_M": 128, "block_N": 128, "block_K": 128, **fit.defines}
    tilec.compile(src, target="gfx942", defines=chosen)  # it fits
    shared = (chosen["block_M"] + chosen["block_N"]) * chosen["block_K"] * 4
    assert shared <= 65536 and shared * 2 > 65536  # and doubling any of its consts would not
    assert find_fit(str(src), CompileOptions.make(("sm90",))) is None  # nothing to fit


def _tilec(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tilec", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_the_error_says_what_to_change_and_fit_builds_it(tmp_path):
    (tmp_path / "gemm.tile").write_text(GEMM)
    r = _tilec("gemm.tile", "-t", "gfx942", "-o", "gemm.hip", cwd=tmp_path)
    assert r.returncode == 1 and "needs 13" in r.stderr and "bytes of shared memory" in r.stderr
    note = next(line for line in r.stderr.splitlines() if "note:" in line and "fit" in line)
    assert "the consts that size these buffers fit gfx942 as -D block_" in note and "--fit builds it" in note
    assert not (tmp_path / "gemm.hip").exists()
    r = _tilec("gemm.tile", "-t", "gfx942", "-o", "gemm.hip", "--fit", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "remark: --fit: built for gfx942 with block_" in r.stderr and "(was 128)" in r.stderr
    assert (tmp_path / "gemm.hip").read_text().count("__global__") >= 1


def test_gemms_share_their_operand_staging_buffer():
    """mha_bwd's two gemms with a register operand stage it through one shared buffer (each gemm ends with a
    barrier before the next writes it), not one each."""
    r = tilec.compile(ROOT / "examples" / "tilelang" / "mha_bwd_bhsd.tile", target="gfx942", kernel="flash_bwd")
    staged = [b for k in r.simt.kernels for b in k.shared if "staged for gemm" in (b.origin or "")]
    assert len(staged) == 1
