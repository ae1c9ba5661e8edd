"""The samples under samples/ against numpy references, run in the reference interpreter.

Every kernel runs on fresh random inputs at several shapes, at least one of them ragged (not a
multiple of the kernel's tile sizes), in each dtype its `dtype` const allows (f16, and bf16
through `-D dtype=bf16`), and in the other variants its consts select (trans_B, causal).
References are written here in numpy (float64), never through the interpreter.  Outputs start as
NaN, so an element a kernel fails to write shows up as a mismatch.

Tolerances.  The references compute in float64 from the same (already rounded) inputs, so the
error budget is the kernel's own rounding: the final store to f16 / bf16 (half an ulp: relative
2**-11 for f16, 2**-8 for bf16) and, for attention, the cast of the probabilities P to dtype
before P @ V (one more rounding of that size per term).  f32 accumulation error is far below
that at these sizes.  `TOL` allows about four half-ulps relative, plus an absolute term of the
same size for values near zero (scaled by the output's magnitude where it is not ~1).  A real
bug (a wrong tile offset, a missing mask, a forgotten rescale) gives errors of order one;
test_broken_sample_is_caught checks that the comparisons do reject such bugs.
"""

from __future__ import annotations

import functools
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tilec
from tilec.interp import run_kernel

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SAMPLE_FILES = sorted(SAMPLES.glob("*.tile"))  # samples/common/ holds imported helpers, not kernels

NP_DTYPE = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32)}
# (rtol, atol) for an output stored in this dtype: ~4 half-ulps (see the module docstring).
TOL = {"f16": (2e-3, 2e-3), "bf16": (1.6e-2, 1.6e-2)}
DTYPES = ["f16", "bf16"]


@functools.cache
def _kernel(name: str, defines: tuple[tuple[str, object], ...], text: str | None):
    result = tilec.compile(SAMPLES / f"{name}.tile", text=text, defines=dict(defines), verify=True)
    (kernel,) = result.module.kernels
    return kernel


def run(name: str, args: dict[str, object], text: str | None = None, **defines) -> dict[str, object]:
    """Run sample `name` (or `text`, a modified copy of it) compiled with `defines` on `args`."""
    run_kernel(_kernel(name, tuple(sorted(defines.items())), text), args)
    return args


def randn(rng: np.random.Generator, shape, dtype: str, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    x = (mean + std * rng.standard_normal(shape)).astype(NP_DTYPE[dtype])
    assert np.all(x != 0)
    return x


def nans(shape, dtype: str) -> np.ndarray:
    return np.full(shape, np.nan, dtype=NP_DTYPE[dtype])


def f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def check(got: np.ndarray, want: np.ndarray, dtype: str, scale: float = 1.0) -> None:
    rtol, atol = TOL[dtype]
    got = f64(got)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} output element(s) never written (or NaN)"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale)


# ---------------------------------------------------------------------------------- every sample


def test_sample_set_is_complete():
    names = {p.stem for p in SAMPLE_FILES}
    assert names >= {"vector_add", "gemm", "softmax", "rmsnorm", "layernorm", "row_sum", "transpose",
                     "flash_attention", "gemm_bias_relu"}


# Every variant the tests below run, compiled with the IR verifier between passes.
VARIANTS = [(p.stem, {}) for p in SAMPLE_FILES] + [(p.stem, {"dtype": "bf16"}) for p in SAMPLE_FILES
                                                    if p.stem != "fp8_gemm"] + [
    ("fp8_gemm", {"in_dtype": "f8e5m2"}),
    ("vector_add", {"dtype": "f32"}),
    ("gemm", {"trans_B": True}), ("gemm", {"dtype": "bf16", "trans_B": True}),
    ("flash_attention", {"causal": True}), ("flash_attention", {"dtype": "bf16", "causal": True}),
]


VARIANT_IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in d.items()) or 'default'}" for n, d in VARIANTS]


@pytest.mark.parametrize("name, defines", VARIANTS, ids=VARIANT_IDS)
def test_sample_compiles_with_verifier(name, defines):
    result = tilec.compile(SAMPLES / f"{name}.tile", defines=defines, verify=True)
    assert [k.name for k in result.module.kernels] == [name]
    assert not result.diagnostics, [d.message for d in result.diagnostics]


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.stem for p in SAMPLE_FILES])
def test_sample_starts_with_what_it_computes(path):
    text = path.read_text()
    assert text.startswith(f"# {path.stem}:"), f"{path.name}: start with '# {path.stem}: <what it computes>'"
    header = text.split("\n\n", 2)[:2]
    assert any(f"#   kernel {path.stem}(" in h for h in header), f"{path.name}: give the signature up top"


# ---------------------------------------------------------------------------------- vector_add


@pytest.mark.parametrize("dtype", DTYPES + ["f32"])
@pytest.mark.parametrize("n", [1, 1000, 2048, 3075])
def test_vector_add(dtype, n):
    rng = np.random.default_rng(1)
    a, b = randn(rng, n, dtype), randn(rng, n, dtype)
    out = run("vector_add", {"A": a, "B": b, "C": nans(n, dtype)}, dtype=dtype)
    # One f32 add rounded once to dtype, which is what numpy computes: bit for bit.
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(NP_DTYPE[dtype])
    np.testing.assert_array_equal(out["C"], want)


# ---------------------------------------------------------------------------------- gemm


def check_gemm(dtype, trans_b, m, n, k, text=None):
    rng = np.random.default_rng(2)
    a = randn(rng, (m, k), dtype)
    b = randn(rng, (n, k) if trans_b else (k, n), dtype)
    out = run("gemm", {"A": a, "B": b, "C": nans((m, n), dtype)}, text, dtype=dtype, trans_B=trans_b)
    want = f64(a) @ (f64(b).T if trans_b else f64(b))
    check(out["C"], want, dtype, scale=np.sqrt(k))  # |C| ~ sqrt(K)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m, n, k", [(128, 256, 64), (200, 150, 70), (1, 129, 33)])
def test_gemm(dtype, trans_b, m, n, k):
    check_gemm(dtype, trans_b, m, n, k)


# ---------------------------------------------------------------------------------- fp8_gemm


@pytest.mark.parametrize("in_dtype", ["f8e4m3", "f8e5m2"])
@pytest.mark.parametrize("m, n, k", [(128, 128, 128), (200, 150, 100), (1, 129, 33)])
def test_fp8_gemm(in_dtype, m, n, k):
    rng = np.random.default_rng(m * 7 + k)
    np_t = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}[in_dtype]
    a = (rng.standard_normal((m, k)) * 4).astype(np_t)  # fp8 values: the inputs are exact in f32
    b = (rng.standard_normal((n, k)) * 4).astype(np_t)
    assert np.count_nonzero(f64(a)) > 0.99 * a.size  # fresh random values, not zeros
    scale_a, scale_b = 0.37, 1.9
    out = run("fp8_gemm", {"A": a, "B": b, "scale_a": scale_a, "scale_b": scale_b, "C": nans((m, n), "bf16")},
              in_dtype=in_dtype)
    want = (f64(a) @ f64(b).T) * (np.float32(scale_a) * np.float32(scale_b))
    check(out["C"], want, "bf16", scale=16 * np.sqrt(k))  # |C| ~ 16 sqrt(K) * scales


# ---------------------------------------------------------------------------------- gemm_bias_relu


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n, k", [(128, 128, 96), (130, 200, 45)])
def test_gemm_bias_relu(dtype, m, n, k):
    rng = np.random.default_rng(3)
    a, b = randn(rng, (m, k), dtype), randn(rng, (k, n), dtype)
    bias = randn(rng, n, dtype, std=4.0)  # comparable to |A @ B|, so that it moves the relu threshold
    out = run("gemm_bias_relu", {"A": a, "B": b, "bias": bias, "C": nans((m, n), dtype)}, dtype=dtype)
    want = np.maximum(f64(a) @ f64(b) + f64(bias), 0.0)
    assert 0.2 < np.mean(want == 0) < 0.8  # the relu matters
    check(out["C"], want, dtype, scale=np.sqrt(k))


# ---------------------------------------------------------------------------------- softmax


# The row kernels hold a row on chip when it fits in block_N columns (one read of X) and stream it in
# column tiles otherwise: with ONE_READ every test row fits (one row a block, read back from shared memory
# in several register tiles), with ONE_READ_ROWS too (two rows a block, one tile), with STREAMED none but
# the shortest does.
ONE_READ = {"block_M": 1, "block_N": 2048, "threads": 64}
ONE_READ_ROWS = {"block_M": 2, "block_N": 2048, "threads": 128}
STREAMED = {"block_M": 2, "block_N": 256, "threads": 64}
# The persistent schedule (row_grid > 0) on grids of a few blocks, so that each block loops over several row
# blocks: held rows read back a column tile at a time (PERSISTENT), held rows in one register tile
# (PERSISTENT_ROW, PERSISTENT_ROWS: two rows a block), and rows longer than block_N going from X straight into
# registers (PERSISTENT_ROWS at every length but the shortest).
PERSISTENT = {"block_M": 1, "block_N": 2048, "threads": 64, "row_grid": 3}
PERSISTENT_ROW = {"block_M": 1, "block_N": 2048, "threads": 64, "tile_elems": 32, "row_grid": 3}
PERSISTENT_ROWS = {"block_M": 2, "block_N": 256, "threads": 64, "row_grid": 2}
ROW_SCHEDULES = pytest.mark.parametrize(
    "schedule", [ONE_READ, ONE_READ_ROWS, STREAMED, PERSISTENT, PERSISTENT_ROW, PERSISTENT_ROWS],
    ids=["one_read", "one_read_rows", "streamed", "persistent", "persistent_row", "persistent_rows"])


def check_softmax(dtype, m, n, text=None, **defines):
    rng = np.random.default_rng(4)
    # std 3 around a per-row offset of up to +-60: without the max subtraction exp() overflows.
    x = (3.0 * rng.standard_normal((m, n)) + rng.uniform(-60, 60, (m, 1))).astype(NP_DTYPE[dtype])
    out = run("softmax", {"X": x, "Y": nans((m, n), dtype)}, text, dtype=dtype, **defines)
    xd = f64(x)
    e = np.exp(xd - xd.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    # Probabilities are small: the absolute tolerance is relative to the largest one.
    check(out["Y"], want, dtype, scale=float(want.max()))
    np.testing.assert_allclose(f64(out["Y"]).sum(axis=1), 1.0, rtol=0, atol=2 * TOL[dtype][0])


@ROW_SCHEDULES
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n", [(8, 512), (37, 1000), (5, 1537), (3, 100)])
def test_softmax(dtype, m, n, schedule):
    check_softmax(dtype, m, n, **schedule)


# ---------------------------------------------------------------------------------- rmsnorm


def check_rmsnorm(dtype, m, n, text=None, **defines):
    rng = np.random.default_rng(5)
    x = randn(rng, (m, n), dtype, mean=0.5, std=2.0)
    w = randn(rng, n, dtype)
    eps = 1e-5
    out = run("rmsnorm", {"X": x, "W": w, "Y": nans((m, n), dtype), "eps": eps}, text, dtype=dtype, **defines)
    xd = f64(x)
    want = xd / np.sqrt(np.mean(xd * xd, axis=1, keepdims=True) + eps) * f64(w)
    check(out["Y"], want, dtype)


@ROW_SCHEDULES
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n", [(8, 1024), (37, 1000), (3, 100), (5, 1537)])
def test_rmsnorm(dtype, m, n, schedule):
    check_rmsnorm(dtype, m, n, **schedule)


# ---------------------------------------------------------------------------------- layernorm


def check_layernorm(dtype, m, n, mean, text=None, **defines):
    rng = np.random.default_rng(6)
    # A trend along the row (features of different means), so that the column tiles' means differ
    # and the merge of per-tile statistics is exercised, on top of an overall offset `mean`.
    trend = np.linspace(-3.0, 3.0, n)
    x = (mean + trend + 1.5 * rng.standard_normal((m, n))).astype(NP_DTYPE[dtype])
    gamma, beta = randn(rng, n, dtype), randn(rng, n, dtype)
    eps = 1e-5
    args = {"X": x, "gamma": gamma, "beta": beta, "Y": nans((m, n), dtype), "eps": eps}
    out = run("layernorm", args, text, dtype=dtype, **defines)
    xd = f64(x)
    want = (xd - xd.mean(axis=1, keepdims=True)) / np.sqrt(xd.var(axis=1, keepdims=True) + eps)
    check(out["Y"], want * f64(gamma) + f64(beta), dtype)


@ROW_SCHEDULES
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n, mean", [(8, 1024, 0.0), (37, 1000, 0.0), (6, 1300, 24.0), (3, 100, -3.0)])
def test_layernorm(dtype, m, n, mean, schedule):
    check_layernorm(dtype, m, n, mean, **schedule)


# ---------------------------------------------------------------------------------- row_sum


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n", [(16, 256), (37, 1000), (1, 3)])
def test_row_sum(dtype, m, n):
    rng = np.random.default_rng(7)
    a = randn(rng, (m, n), dtype, mean=0.25)
    out = run("row_sum", {"A": a, "sums": nans(m, dtype)}, dtype=dtype)
    # f32 accumulation, then one rounding to dtype: within rtol; near-zero sums within atol.
    check(out["sums"], f64(a).sum(axis=1), dtype)


# ---------------------------------------------------------------------------------- transpose


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n", [(64, 128), (37, 100), (130, 1)])
def test_transpose(dtype, m, n):
    rng = np.random.default_rng(8)
    a = randn(rng, (m, n), dtype)
    out = run("transpose", {"A": a, "B": nans((n, m), dtype)}, dtype=dtype)
    np.testing.assert_array_equal(out["B"], a.T)  # pure data movement: exact


# ---------------------------------------------------------------------------------- flash_attention


def attention_ref(q, k, v, causal: bool) -> np.ndarray:
    q, k, v = f64(q), f64(k), f64(v)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def check_flash_attention(dtype, causal, b, s, h, text=None, dim=64):
    rng = np.random.default_rng(9)
    # q, k with std 2: logits of several units, so the softmax is far from uniform.
    q, k = randn(rng, (b, s, h, dim), dtype, std=2.0), randn(rng, (b, s, h, dim), dtype, std=2.0)
    v = randn(rng, (b, s, h, dim), dtype)
    args = {"Q": q, "K": k, "V": v, "O": nans((b, s, h, dim), dtype)}
    out = run("flash_attention", args, text, dtype=dtype, causal=causal, **({"dim": dim} if dim != 64 else {}))
    check(out["O"], attention_ref(q, k, v, causal), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, s, h", [(1, 128, 2), (2, 100, 1), (1, 150, 1)])
def test_flash_attention(dtype, causal, b, s, h):
    check_flash_attention(dtype, causal, b, s, h)


@pytest.mark.parametrize("dim, causal", [(96, False), (256, True)])
def test_flash_attention_other_head_dims(dim, causal):
    """Head dim 96, and 256, whose default tile (128 x 64) stores O straight from the accumulator, at a ragged S."""
    check_flash_attention("bf16", causal, 1, 150, 2, dim=dim)


# ---------------------------------------------------------------------------------- the tests bite


# (sample, text in it, replacement giving a plausible bug, a check above that must now fail)
MUTATIONS = [
    ("softmax", "if_then_else(k * tile_N + j < N, xt[i, j] * log2e, -infinity(accum_dtype))",
     "xt[i, j] * log2e", lambda t: check_softmax("f16", 37, 1000, t, **STREAMED)),  # ragged columns not masked
    ("softmax", "if_then_else(k * tile_N + j < N, xt[i, j] * log2e, -infinity(accum_dtype))",
     "xt[i, j] * log2e", lambda t: check_softmax("f16", 37, 1000, t, **ONE_READ)),  # one read: padding not masked
    ("softmax", "row_sum[i] * exp2(row_max_prev[i] -", "row_sum[i] + 0.0 * exp2(row_max_prev[i] -",
     lambda t: check_softmax("f16", 37, 1000, t, **STREAMED)),  # running sum not rescaled
    ("softmax", "row_sum[i] * exp2(row_max_prev[i] -", "row_sum[i] + 0.0 * exp2(row_max_prev[i] -",
     lambda t: check_softmax("f16", 37, 1000, t, **ONE_READ)),  # one read: running sum not rescaled
    ("flash_attention", "acc_o[i, j] * scores_scale[i]", "acc_o[i, j]",
     lambda t: check_flash_attention("f16", False, 1, 128, 1, t)),  # output not rescaled
    ("flash_attention", "if_then_else(k_idx < S, attended, -infinity(accum_dtype))", "attended",
     lambda t: check_flash_attention("f16", False, 1, 100, 1, t)),  # ragged keys not masked
    ("flash_attention", "k_idx <= q_idx and k_idx < S", "k_idx < S",
     lambda t: check_flash_attention("f16", True, 1, 100, 1, t)),  # causal mask lost
    ("flash_attention", "exp2(acc_s[i, j] * scale - scores_max[i] * scale)",
     "exp2(acc_s[i, j] - scores_max[i])",
     lambda t: check_flash_attention("f16", False, 1, 100, 1, t)),  # softmax scale forgotten
    ("layernorm", "delta * delta * (n_a * n_b / n_ab)", "0.0",
     lambda t: check_layernorm("f16", 6, 1300, 24.0, t, **STREAMED)),  # between-tile variance dropped
    ("layernorm", "if_then_else(k * tile_N + j < N, dev * dev, 0.0)", "dev * dev",
     lambda t: check_layernorm("f16", 6, 1300, 24.0, t, **ONE_READ)),  # one read: padding counted
    ("layernorm", "delta * delta * (n_a * n_b / n_ab)", "0.0",
     lambda t: check_layernorm("f16", 6, 1300, 24.0, t, **ONE_READ)),  # one read: tiles' variance dropped
    ("rmsnorm", "sum_sq[i] / cast(N, accum_dtype)", "sum_sq[i] / block_N",
     lambda t: check_rmsnorm("f16", 37, 1000, t, **ONE_READ)),  # mean over the tile, not the row
    ("softmax", "if_then_else(j < N, xt[i, j] * log2e, -infinity(accum_dtype))", "xt[i, j] * log2e",
     lambda t: check_softmax("f16", 37, 1000, t, **PERSISTENT_ROW)),  # persistent: padding not masked
    ("softmax", "if_then_else(k * tile_N + j < N, exp2(xt[i, j] * log2e - row_max[i]), 0.0)",
     "exp2(xt[i, j] * log2e - row_max[i])",
     lambda t: check_softmax("f16", 37, 1000, t, **PERSISTENT)),  # persistent: padding in the sum
    ("softmax", "bx + r * grid", "bx + r",
     lambda t: check_softmax("f16", 37, 1000, t, **PERSISTENT)),  # persistent: blocks' rows overlap
    ("rmsnorm", "acc[i, j] + xt[i, j] * xt[i, j]", "xt[i, j] * xt[i, j]",
     lambda t: check_rmsnorm("f16", 37, 1000, t, **PERSISTENT)),  # persistent: squares of one tile only
    ("layernorm", "if_then_else(j < N, xt[i, j] * xt[i, j], 0.0)", "xt[i, j] * xt[i, j]",
     lambda t: check_layernorm("f16", 6, 1300, 24.0, t, **PERSISTENT_ROW)),  # persistent: padding counted
    ("layernorm", "acc[i, j] + xt[i, j]", "xt[i, j]",
     lambda t: check_layernorm("f16", 6, 1300, 24.0, t, **PERSISTENT)),  # persistent: mean of one tile only
    ("gemm", "copy(B[bx * block_N, k * block_K], B_s)", "copy(B[bx * block_N, k], B_s)",
     lambda t: check_gemm("f16", True, 200, 150, 70, t)),  # K offset of the transposed B tile
]


@pytest.mark.parametrize("name, old, new, check_fn", MUTATIONS,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(MUTATIONS)])
def test_broken_sample_is_caught(name, old, new, check_fn):
    text = (SAMPLES / f"{name}.tile").read_text()
    assert old in text, f"mutation target no longer in {name}.tile; update MUTATIONS"
    with pytest.raises(AssertionError):
        check_fn(text.replace(old, new))
