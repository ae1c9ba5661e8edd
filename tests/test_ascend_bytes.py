"""AscendC lowering of 8- and 16-bit data (issue #30): u8, i8, i16 and bool tiles copied in and out (rows padded
to 32 bytes), converted to f32 through the 910B's Cast pairs, stored back truncated and wrapped to their width as
the language says, bool tiles used as conditions and written from comparisons; run on tilec's CPU model of the
AscendC API against the interpreter at regular and ragged sizes on fresh inputs."""

from __future__ import annotations

import copy
import shutil

import numpy as np
import pytest

import tilec
from tilec.interp.run import random_inputs, run_kernel
from tilec.targets.ascend.model_run import build_runner, run_on_model

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the AscendC CPU model needs g++")

BYTES = """
const bm = 16
const bn = 48

kernel bytes_k(a: u8[M, N], b: i8[M, N], c: i16[M, N], m: bool[M, N], x: f32[M, N],
               ya: out u8[M, N], yb: out i8[M, N], yc: out i16[M, N], ym: out bool[M, N], s: out f32[M, N],
               h: out u8[M, N]):
    with T.Kernel(T.ceildiv(M, bm), T.ceildiv(N, bn)) as (bx, by):
        ta = T.alloc_shared((bm, bn), u8)
        tb = T.alloc_shared((bm, bn), i8)
        tc = T.alloc_shared((bm, bn), i16)
        tm = T.alloc_shared((bm, bn), bool)
        tx = T.alloc_fragment((bm, bn), f32)
        acc = T.alloc_fragment((bm, bn), f32)
        th = T.alloc_fragment((bm, bn), u8)
        T.copy(a[bx * bm, by * bn], ta)
        T.copy(b[bx * bm, by * bn], tb)
        T.copy(c[bx * bm, by * bn], tc)
        T.copy(m[bx * bm, by * bn], tm)
        T.copy(x[bx * bm, by * bn], tx)
        T.fill(th, 200)
        for i, j in T.Parallel(bm, bn):
            acc[i, j] = (T.cast(ta[i, j], f32) + T.cast(tb[i, j], f32) * 2.0 + T.cast(tc[i, j], f32) * 0.5
                         + T.if_then_else(tm[i, j], tx[i, j], -1.0))
        for i, j in T.Parallel(bm, bn):
            ta[i, j] = T.cast(acc[i, j] * 3.0, u8)
            tb[i, j] = T.cast(acc[i, j] * 5.0, i8)
            tc[i, j] = T.cast(acc[i, j] * 300.0, i16)
            tm[i, j] = tx[i, j] > 0.5
            th[i, j] = th[i, j] + T.cast(T.cast(tx[i, j] * 40.0, i32), u8)
        T.copy(ta, ya[bx * bm, by * bn])
        T.copy(tb, yb[bx * bm, by * bn])
        T.copy(tc, yc[bx * bm, by * bn])
        T.copy(tm, ym[bx * bm, by * bn])
        T.copy(acc, s[bx * bm, by * bn])
        T.copy(th, h[bx * bm, by * bn])
"""


def _run(tmp_path, text: str, kernel: str, sizes: dict[str, int], source_edit=None, widen=False):
    path = tmp_path / f"{kernel}.tile"
    path.write_text(text)
    result = tilec.compile(path, target="ascend910b", kernel=kernel)
    k = tilec.compile(path, kernel=kernel).module.kernels[0]
    program = result.simt[0]
    rng = np.random.default_rng()
    arrays = random_inputs(k, sizes, seed=int(rng.integers(1 << 30)))
    if widen:  # integer inputs over their whole range (random_inputs keeps them within -8..8)
        for a in arrays.values():
            if isinstance(a, np.ndarray) and a.dtype.kind in "iu":
                info = np.iinfo(a.dtype)
                a[...] = rng.integers(max(info.min, -(1 << 20)), min(info.max, 1 << 20) + 1, a.shape)
    got = copy.deepcopy(arrays)
    source = source_edit(result.source) if source_edit else result.source
    run_on_model(build_runner(source, program), program, {**sizes, **got}, cores=4)
    run_kernel(k, arrays)
    return result.source, got, arrays, k


@pytest.mark.parametrize("sizes", [{"M": 32, "N": 96}, {"M": 21, "N": 70}])
def test_byte_and_short_tiles_match_the_interpreter(tmp_path, sizes):
    source, got, want, k = _run(tmp_path, BYTES, "bytes_k", sizes, widen=True)
    for p in k.params:
        if isinstance(p, tilec.ir.tile.Buffer) and p.is_output:
            if p.dtype.is_float:
                np.testing.assert_allclose(got[p.name], want[p.name], rtol=1e-6, atol=1e-6, err_msg=p.name)
            else:
                np.testing.assert_array_equal(got[p.name], want[p.name], err_msg=p.name)
    assert "LocalTensor<uint8_t>" in source and "LocalTensor<int16_t>" in source
    assert "RoundMode::CAST_FLOOR" in source  # the wrap to the integer width


def test_a_planted_missing_wrap_fails(tmp_path):
    """Planted: the wrap's floor rounds toward zero instead, so negative values do not wrap (u8 results of
    negative sums come out as the hardware's saturated 0 where the language wraps)."""
    _, got, want, _ = _run(tmp_path, BYTES, "bytes_k", {"M": 16, "N": 48},
                           lambda s: s.replace("RoundMode::CAST_FLOOR", "RoundMode::CAST_TRUNC"))
    assert not np.array_equal(got["ya"], want["ya"])


# Integer operations on values held in f32: // and % by constants (negative operands included, Python's floor
# semantics), >> by a tile of shift counts, << by a constant, & with a mask; a tile read at a computed index (k // 2)
INTOPS = """
kernel intops(a: i32[M, N], b: u8[M, N], y: out i32[M, N], z: out i32[M, N]):
    with T.Kernel(T.ceildiv(M, 8), T.ceildiv(N, 64)) as (bx, by):
        ta = T.alloc_shared((8, 64), i32)
        tb = T.alloc_shared((8, 64), u8)
        ty = T.alloc_fragment((8, 64), i32)
        tz = T.alloc_fragment((8, 64), i32)
        T.copy(a[bx * 8, by * 64], ta)
        T.copy(b[bx * 8, by * 64], tb)
        for i, j in T.Parallel(8, 64):
            ty[i, j] = ta[i, j] // 7 + ta[i, j] % 5 * 100 + (ta[i, j] << 3)
            tz[i, j] = ((T.cast(tb[i, j // 2], i32) >> (4 * (j % 2))) & 15) - (ta[i, j] >> 2) % 3
        T.copy(ty, y[bx * 8, by * 64])
        T.copy(tz, z[bx * 8, by * 64])
"""


@pytest.mark.parametrize("sizes", [{"M": 16, "N": 128}, {"M": 13, "N": 90}])
def test_integer_operations_in_f32_match_the_interpreter(tmp_path, sizes):
    _, got, want, _ = _run(tmp_path, INTOPS, "intops", sizes, widen=True)
    for name in ("y", "z"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert np.any(want["y"] < 0)  # negative operands were exercised


# & and | of two integer tiles (negative values included) through the int16 halves, and f16 values built from
# their bits (sign, exponent and mantissa assembled with << and |, then T.reinterpret)
BITS = """
kernel bits(a: i32[M, N], b: i32[M, N], y: out i32[M, N], h: out f32[M, N]):
    with T.Kernel(T.ceildiv(M, 8), T.ceildiv(N, 64)) as (bx, by):
        ta = T.alloc_shared((8, 64), i32)
        tb = T.alloc_shared((8, 64), i32)
        ty = T.alloc_fragment((8, 64), i32)
        th = T.alloc_fragment((8, 64), f32)
        T.copy(a[bx * 8, by * 64], ta)
        T.copy(b[bx * 8, by * 64], tb)
        for i, j in T.Parallel(8, 64):
            ty[i, j] = (ta[i, j] & tb[i, j]) * 3 + (ta[i, j] | (tb[i, j] & 6))
            e = (T.cast(tb[i, j], u16) & 15) + 8
            th[i, j] = T.cast(T.reinterpret(f16, ((T.cast(ta[i, j], u16) & 1) << 15) | (e << 10)
                                            | (T.cast(ta[i, j], u16) & 1023)), f32)
        T.copy(ty, y[bx * 8, by * 64])
        T.copy(th, h[bx * 8, by * 64])
"""


@pytest.mark.parametrize("sizes", [{"M": 16, "N": 64}, {"M": 11, "N": 77}])
def test_bitwise_operations_and_reinterpret_match_the_interpreter(tmp_path, sizes):
    _, got, want, _ = _run(tmp_path, BITS, "bits", sizes, widen=True)
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["h"], want["h"])
    assert np.any(want["y"] < 0)


# |x| of f16 values through their bits (the sign bit cleared), as test_bits.py writes it for the GPU targets
ABS_BITS = """
kernel absbits(X: f16[N], Y: out f16[N]):
    with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                Y[bx * 64 + i] = T.reinterpret(T.reinterpret(X[bx * 64 + i], u16) & 0x7fff, f16)
"""


@pytest.mark.parametrize("sizes", [{"N": 128}, {"N": 101}])
def test_f16_bits_round_trip(tmp_path, sizes):
    _, got, want, _ = _run(tmp_path, ABS_BITS, "absbits", sizes)
    np.testing.assert_array_equal(got["Y"], want["Y"])
    np.testing.assert_array_equal(got["Y"], np.abs(got["X"]))
