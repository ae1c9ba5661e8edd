"""Global -> shared copies of rows that are not 16-byte aligned (an odd K or N: 4095, 50257, ...).

Such a copy used to fall to one 2-byte load a thread at a time (the no-TMA twin at 10-22 TFLOP/s on the H200). It
now moves 16 bytes a thread as the aligned copy does, each chunk assembled from the two aligned 16-byte chunks that
cover it (`copy_shifted` inside the tensor, `copy16_realign` at a tile's edges, where it reads element by element
what the tensor's end or a ragged edge leaves). The SIMT model checks the values, the destination's alignment and
that the aligned chunks never reach past the tensor, for gemm's no-TMA twin on sm90 (f16 NN, bf16 trans_B, fp8: 2-
and 1-byte elements), against the Tile IR interpreter at ragged shapes.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import tilec
from tilec.ir import tile as T
from tilec.ir.dtypes import I64
from tilec.simt.interp import SimtInterpreterError
from tilec.testing.differential import simt_against_interpreter

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
# one consumer warpgroup, small tiles: a few blocks, so the model runs in seconds
SMALL = {"block_M": 64, "block_N": 64, "block_K": 32, "threads": 128, "num_stages": 3}


@functools.cache
def _compiled(sample: str, defines: tuple, target: str | None):
    return tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, defines=dict(defines), verify=True)


def _run(sample: str, defines: dict, kernel: str, target: str, sizes: dict[str, int], seed: int = 0) -> dict:
    """Run `kernel` of the lowered sample in the SIMT model and compare with the Tile IR interpreter; returns how
    many times each realigning intrinsic ran (lane-instructions)."""
    key = tuple(sorted(defines.items()))
    tk = _compiled(sample, key, None).module.kernels[0]
    sk = next(k for k in _compiled(sample, key, target).simt.kernels if k.name == kernel)
    wrong, counts = simt_against_interpreter(tk, sk, sizes, seed)
    assert not wrong, f"{kernel} at {sizes}: " + "; ".join(wrong)
    return {op: counts[op] for op in ("copy_shifted", "copy16_realign")}


@pytest.mark.parametrize("defines,sizes", [
    # NN f16: odd K (A's rows) and odd N (B's rows); every row starts at another offset in its 16-byte chunk
    ({}, {"M": 70, "N": 101, "K": 77}),
    # trans_B bf16: B is [N, K], odd K misaligns both operands' rows
    ({"dtype": "bf16", "trans_B": True}, {"M": 130, "N": 64, "K": 99}),
], ids=["nn_f16", "trans_b_bf16"])
def test_sm90_twin_realigns_misaligned_rows(defines, sizes):
    counts = _run("gemm", {**SMALL, **defines}, "gemm__no_tma", "sm90", sizes)
    assert counts["copy_shifted"] > 0 and counts["copy16_realign"] > 0, counts


def test_sm90_fp8_twin_realigns_odd_k():
    """fp8's K-major operands: 1-byte elements, any of 16 byte offsets."""
    counts = _run("fp8_gemm", {"block_M": 64, "block_N": 64, "block_K": 64, "threads": 128, "num_stages": 2},
                  "fp8_gemm__no_tma", "sm90", {"M": 70, "N": 72, "K": 141})
    assert counts["copy_shifted"] > 0 and counts["copy16_realign"] > 0, counts


def test_sm80_keeps_element_copies_for_misaligned_rows():
    """Only sm90's wgmma pipelines ask for the realigned copies (they cost the kernel's aligned path registers:
    gemm sm80 246 -> 255, attention sm80 168 -> 171, not measured there); sm80 stays correct element by element."""
    counts = _run("gemm", {"block_M": 64, "block_N": 64}, "gemm", "sm80",
                  {"M": 70, "N": 133, "K": 70})
    assert counts == {"copy_shifted": 0, "copy16_realign": 0}


def test_aligned_rows_keep_the_plain_vector_copy():
    """A build's aligned path is unchanged: at K = N = 64 nothing realigns."""
    counts = _run("gemm", {**SMALL}, "gemm__no_tma", "sm90", {"M": 64, "N": 64, "K": 64})
    assert counts == {"copy_shifted": 0, "copy16_realign": 0}


def test_a_shifted_read_past_the_tensor_is_caught(monkeypatch):
    """The model refuses a copy_shifted whose second chunk would reach past the tensor's end (the interior
    condition the lowering puts around the unguarded chunks), so a wrong condition fails on a CPU."""
    from tilec.ops import copy as copy_op
    monkeypatch.setattr(copy_op, "tensor_elements", lambda cx, b: T.Const(I64, None, 1 << 40))
    _compiled.cache_clear()
    try:
        with pytest.raises(SimtInterpreterError, match="out-of-bounds read"):
            _run("gemm", {**SMALL}, "gemm__no_tma", "sm90", {"M": 64, "N": 67, "K": 64})
    finally:
        _compiled.cache_clear()


def test_twin_issues_the_next_stage_under_the_wgmma():
    """The twin's cp.async pipeline issues the next stage's copies (synchronous loads where a row is misaligned)
    between the wgmma's commit and its wait, so that they overlap the tensor cores; sm80's pipeline keeps them at
    the iteration's start."""
    twin_src = _compiled("gemm", tuple(sorted(SMALL.items())), "sm90").source
    loop = twin_src[twin_src.index("gemm__no_tma("):]
    loop = loop[loop.index("for (int k = 0;"):]
    assert loop.index("tl::wgmma_commit();") < loop.index("if (k_next < k_count)") < loop.index("tl::wgmma_wait<0>();")
    sm80 = _compiled("gemm", tuple(sorted({"block_M": 64, "block_N": 64}.items())), "sm80").source
    sm80_kernel = sm80[sm80.index("__global__"):]
    sm80_loop = sm80_kernel[sm80_kernel.index("for (int k = 0;"):]
    assert sm80_loop.index("if (k_next < k_count)") < sm80_loop.index("tl::mma_")
