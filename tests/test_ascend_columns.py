"""AscendC lowering: copies of column boxes (a box whose one non-unit extent is an outer dimension of the tensor,
issue #30's topk and chunk_cumsum boxes), the f16 rounding of f16-typed intermediates and T.cumsum along rows,
each run on tilec's CPU model of the AscendC API against the interpreter at regular and ragged sizes on fresh inputs."""

from __future__ import annotations

import copy
import shutil

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp.run import random_inputs, run_kernel
from tilec.targets.ascend.model_run import build_runner, run_on_model

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the AscendC CPU model needs g++")

# G[b, s, h]: a [1, 64, 1] box (a column of the middle dimension) into a [1, 64] tile and back out, with a cast in;
# x[m, k]: a [16, 1] box into a [16] tile and a guarded store of a [16] tile into a [16, 1] box (topk's store).
COLUMNS = """
const blk = 64
kernel col2d(G: f16[B, S, H], out_: out f32[B, S, H]):
    with T.Kernel(T.ceildiv(S, blk), B * H) as (bs, bbh):
        bb = bbh // H
        bh = bbh % H
        t = T.alloc_shared((1, blk), f32)
        T.copy(G[bb, bs * blk:(bs + 1) * blk, bh], t)
        for i, j in T.Parallel(1, blk):
            t[i, j] = t[i, j] * 2.0 + 1.0
        T.copy(t, out_[bb, bs * blk:(bs + 1) * blk, bh])

kernel col1d(x: f32[M, K], y: out f32[M, K]):
    with T.Kernel(T.ceildiv(M, 16), K) as (bx, k):
        v = T.alloc_fragment([16], f32)
        T.copy(x[bx * 16:(bx + 1) * 16, k], v)
        for i in T.Parallel(16):
            if bx * 16 + i < M:
                y[bx * 16 + i, k] = v[i] - 3.0
"""

# The product of two f16 tiles is an f16 value (the interpreter rounds it), then summed in f32.
F16_PRODUCT = """
kernel prod(a: f16[N, C], b: f16[N, C], s: out f32[N]):
    with T.Kernel(T.ceildiv(N, 16)) as bx:
        x = T.alloc_fragment([16, 64], f16)
        y = T.alloc_fragment([16, 64], f16)
        acc = T.alloc_fragment([16, 64], f32)
        r = T.alloc_fragment([16], f32)
        T.copy(a[bx * 16, 0], x)
        T.copy(b[bx * 16, 0], y)
        for i, j in T.Parallel(16, 64):
            acc[i, j] = x[i, j] * y[i, j]
        T.reduce_sum(acc, r, 1)
        T.copy(r, s[bx * 16:(bx + 1) * 16])
"""


def _check(tmp_path, text: str, kernel: str, sizes: dict[str, int], rtol: float, atol: float, source_edit=None):
    path = tmp_path / f"{kernel}.tile"
    path.write_text(text)
    result = tilec.compile(path, target="ascend910b", kernel=kernel)
    k = tilec.compile(path, kernel=kernel).module.kernels[0]
    program = result.simt[0]
    arrays = random_inputs(k, sizes, seed=int(np.random.default_rng().integers(1 << 30)))
    got = copy.deepcopy(arrays)
    for p in k.params:
        if isinstance(p, tilec.ir.tile.Buffer) and p.is_output:
            got[p.name][...] = np.nan  # an element the kernel does not write stays NaN
            arrays[p.name][...] = np.nan
    source = source_edit(result.source) if source_edit else result.source
    run_on_model(build_runner(source, program), program, {**sizes, **got}, cores=4)
    run_kernel(k, arrays)
    for p in k.params:
        if isinstance(p, tilec.ir.tile.Buffer) and p.is_output:
            np.testing.assert_allclose(got[p.name], arrays[p.name], rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=p.name)
    return result.source


@pytest.mark.parametrize("sizes", [{"B": 2, "S": 128, "H": 3}, {"B": 1, "S": 100, "H": 5}])
def test_a_column_box_copies_into_and_out_of_a_row_tile(tmp_path, sizes):
    source = _check(tmp_path, COLUMNS, "col2d", sizes, 1e-6, 1e-6)
    assert "Gather(" in source and "Brcb(" in source  # one element per 32-byte block, gathered / spread


@pytest.mark.parametrize("sizes", [{"M": 32, "K": 4}, {"M": 37, "K": 3}])
def test_a_column_box_copies_into_and_out_of_a_1d_tile_with_a_guard(tmp_path, sizes):
    _check(tmp_path, COLUMNS, "col1d", sizes, 1e-6, 1e-6)


def test_a_planted_wrong_column_stride_fails(tmp_path):
    """Planted: the column copy's GM gap one element short (it reads along the row instead)."""
    with pytest.raises(AssertionError):
        _check(tmp_path, COLUMNS, "col2d", {"B": 1, "S": 64, "H": 3}, 1e-6, 1e-6,
               lambda s: s.replace("(uint32_t)((H) - 1) * 2", "(uint32_t)((H) - 2) * 2", 1))


@pytest.mark.parametrize("sizes", [{"N": 32, "C": 64}, {"N": 21, "C": 64}])
def test_f16_products_are_rounded_to_f16_as_the_language_says(tmp_path, sizes):
    # f32 tolerance: without the rounding the sums differ by about 1e-4 relative (mha_bwd's Delta did)
    source = _check(tmp_path, F16_PRODUCT, "prod", sizes, 2e-6, 2e-6)
    assert "RoundMode::CAST_RINT" in source


# T.cumsum along a 2-D tile's rows (forward, and reverse into another tile of f16) and along a 1-D tile
CUMSUM = """
kernel scan2d(x: f32[M, N], y: out f32[M, N], z: out f16[M, N]):
    with T.Kernel(T.ceildiv(M, 8), T.ceildiv(N, 40)) as (bx, by):
        t = T.alloc_shared((8, 40), f32)
        u = T.alloc_shared((8, 40), f16)
        T.copy(x[bx * 8, by * 40], t)
        T.cumsum(t, u, dim=1, reverse=True)
        T.cumsum(t, dim=1)
        T.copy(t, y[bx * 8, by * 40])
        T.copy(u, z[bx * 8, by * 40])

kernel scan1d(x: f16[N], y: out f32[N]):
    with T.Kernel(T.ceildiv(N, 100)) as bx:
        t = T.alloc_fragment((100,), f32)
        T.copy(x[bx * 100:(bx + 1) * 100], t)
        T.cumsum(t, dim=0)
        T.copy(t, y[bx * 100:(bx + 1) * 100])
"""


@pytest.mark.parametrize("sizes", [{"M": 16, "N": 80}, {"M": 13, "N": 57}])
def test_cumsum_along_rows_forward_and_reverse(tmp_path, sizes):
    source = _check(tmp_path, CUMSUM, "scan2d", sizes, 2e-3, 1e-5)  # z is f16
    assert source.count("Gather(") >= 12  # 6 doubling steps for 40 columns, each way


@pytest.mark.parametrize("sizes", [{"N": 200}, {"N": 137}])
def test_cumsum_of_a_1d_tile(tmp_path, sizes):
    _check(tmp_path, CUMSUM, "scan1d", sizes, 1e-5, 1e-5)


def test_a_planted_wrong_scan_mask_fails(tmp_path):
    """Planted: the first step's mask lets element 0 add the previous row's last element."""
    with pytest.raises(AssertionError):
        _check(tmp_path, CUMSUM, "scan2d", {"M": 8, "N": 40}, 2e-3, 1e-5,
               lambda s: s.replace("1.0f, CMPMODE::GE", "0.0f, CMPMODE::GE", 1))


def test_cumsum_down_columns_is_refused_at_its_line(tmp_path):
    path = tmp_path / "cs.tile"
    path.write_text("kernel cs(G: f32[N, N], O: out f32[N, N]):\n    with T.Kernel(1) as bx:\n"
                    "        t = T.alloc_shared((16, 16), f32)\n        T.copy(G[0, 0], t)\n"
                    "        T.cumsum(t, dim=0)\n        T.copy(t, O[0, 0])\n")
    with pytest.raises(CompileError) as e:
        tilec.compile(path, target="ascend910b")
    d = e.value.diagnostics[0]
    assert "scans 2-D tiles along their rows" in d.message and d.span.line == 5


# Views of global tensors (T.Tensor(shape, dtype, buf.data), convolution's kernel_flat and out_flat): the input
# read through a flattened 2-D view, the output written through one, a plain write of the same output after it
VIEWS = """
kernel viewk(x: f32[B, R, C], y: out f32[B, R, C]):
    with T.Kernel(T.ceildiv(B * R, 16)) as bx:
        xf = T.Tensor((B * R, C), f32, x.data)
        yf = T.Tensor((B * R, C), f32, y.data)
        t = T.alloc_fragment((16, 32), f32)
        T.copy(xf[bx * 16, 0], t)
        for i, j in T.Parallel(16, 32):
            t[i, j] = t[i, j] * 2.0 + 1.0
        T.copy(t, yf[bx * 16, 0])
"""


@pytest.mark.parametrize("sizes", [{"B": 2, "R": 16, "C": 32}, {"B": 3, "R": 7, "C": 29}])
def test_views_of_global_tensors(tmp_path, sizes):
    source = _check(tmp_path, VIEWS, "viewk", sizes, 1e-6, 1e-6)
    assert "xf.SetGlobalBuffer((__gm__ float*)x_addr);" in source


def test_a_view_of_a_tile_is_refused_at_its_line(tmp_path):
    path = tmp_path / "v.tile"
    path.write_text("kernel v(A: f32[N], C: out f32[N]):\n    with T.Kernel(1) as bx:\n"
                    "        t = T.alloc_shared((4, 16), f32)\n        f = T.reshape(t, (64,))\n"
                    "        T.copy(A[0:64], f)\n        T.copy(f, C[0:64])\n")
    with pytest.raises(CompileError) as e:
        tilec.compile(path, target="ascend910b")
    d = e.value.diagnostics[0]
    assert "supports views of global tensors" in d.message and d.span.line == 4
