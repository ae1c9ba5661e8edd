"""WebGPU's 8- and 16-bit integers (issue #30: the dequantize and gemm_sp ports): held in 32 bits in registers and
workgroup memory and wrapped after each operation, read from an input tensor's words, f16 reinterpreted through its
16-bit pattern; run under wgpu/lavapipe against the interpreter on fresh random inputs (overflowing values
included), and output tensors of those types refused with the alternative."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel

NARROW = """
kernel narrow(A: u8[N], H: i16[N], S: i8[N], F: f16[N], U: out u32[N], I: out i32[N], G: out f16[N]):
    with T.Kernel(ceildiv(N, 64), threads=64) as bx:
        a_s = T.alloc_shared([64], u8)
        h_s = T.alloc_shared([64], i16)
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                a_s[i] = A[bx * 64 + i] * T.cast(3, u8) + T.cast(200, u8)
                h_s[i] = H[bx * 64 + i] * T.cast(7, i16) - T.cast(S[bx * 64 + i], i16)
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                bits = T.reinterpret(F[bx * 64 + i], u16)
                U[bx * 64 + i] = T.cast(a_s[i] << T.cast(i % 5, u8), u32) + T.cast(bits ^ T.cast(0x8000, u16), u32)
                I[bx * 64 + i] = T.cast(h_s[i], i32) * 10 + T.cast(T.cast(S[bx * 64 + i], i8) * T.cast(5, i8), i32)
                G[bx * 64 + i] = T.reinterpret(bits ^ T.cast(0x8000, u16), f16)
"""


def _args(n):
    rng = np.random.default_rng()
    return {"A": rng.integers(0, 256, n).astype(np.uint8), "H": rng.integers(-2**15, 2**15, n).astype(np.int16),
            "S": rng.integers(-128, 128, n).astype(np.int8), "F": rng.standard_normal(n).astype(np.float16),
            "U": np.zeros(n, np.uint32), "I": np.zeros(n, np.int32), "G": np.zeros(n, np.float16)}


@pytest.mark.parametrize("n", [64, 150])
def test_narrow_integers_on_lavapipe_match_the_interpreter(tmp_path, n):
    from tilec.runtime import wgsl as rt

    ok, why = rt.available()
    if not ok:
        pytest.skip(why)
    p = tmp_path / "k.tile"
    p.write_text(NARROW)
    want = _args(n)
    got = {k: v.copy() for k, v in want.items()}
    run_kernel(tilec.compile(p, verify=True).module.kernels[0], want)
    # the interpreter wraps as the types do
    assert np.array_equal(want["G"], -want["F"]) and int(want["U"].max()) > 255
    art = tilec.compile(p, "webgpu", emit="wgsl")
    kernel = rt.WgslModule(art.data.decode(), json.loads(art.manifest)).narrow
    kernel(*[got[q["name"]] for q in kernel.entry["params"]])
    for name in ("U", "I", "G"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_an_output_of_a_narrow_integer_type_is_refused_with_the_alternative(tmp_path):
    p = tmp_path / "k.tile"
    p.write_text(NARROW.replace("U: out u32[N]", "U: out u8[N]").replace("T.cast(a_s[i] << T.cast(i % 5, u8), u32) + "
                                                                         "T.cast(bits ^ T.cast(0x8000, u16), u32)",
                                                                         "a_s[i]"))
    with pytest.raises(CompileError) as e:
        tilec.compile(p, target="webgpu")
    msg = e.value.diagnostics[0].message
    assert "tensor 'U' is u8" in msg and "make the output u32" in msg


@pytest.mark.parametrize("dtype,np_name", [("f8e4m3", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2")])
def test_every_fp8_byte_decodes_as_ml_dtypes_does_on_lavapipe(tmp_path, dtype, np_name):
    """An fp8 input tensor is read from its words and decoded to f32 exactly: all 256 bytes (subnormals, the largest
    values, infinities and NaNs included) through a shared tile, against ml_dtypes."""
    import ml_dtypes

    from tilec.runtime import wgsl as rt

    ok, why = rt.available()
    if not ok:
        pytest.skip(why)
    p = tmp_path / "k.tile"
    p.write_text(f"""
kernel decode(X: {dtype}[N], Y: out f32[N]):
    with T.Kernel(ceildiv(N, 64), threads=64) as bx:
        s = T.alloc_shared([64], {dtype})
        T.copy(X[bx * 64], s)
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                Y[bx * 64 + i] = T.cast(s[i], f32) * 2.0
""")
    x = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, np_name))
    y = np.zeros(256, np.float32)
    art = tilec.compile(p, "webgpu", emit="wgsl")
    rt.WgslModule(art.data.decode(), json.loads(art.manifest)).decode(x, y)
    np.testing.assert_array_equal(y, x.astype(np.float32) * 2)  # (NaN where numpy's is NaN)


FP8_OUT = """
kernel enc(X: f32[N], Y: out {t}[N], Z: out {t}[N], W: out f32[N]):
    with T.Kernel(ceildiv(N, 64), threads=64) as bx:
        s = T.alloc_shared([64], {t})
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                s[i] = T.cast(X[bx * 64 + i], {t})
        for i in T.Parallel(64):
            if bx * 64 + i < N:
                Y[bx * 64 + i] = s[i]
                Z[bx * 64 + i] = s[i] * s[i] + s[i]
                W[bx * 64 + i] = T.cast(s[i], f32) * 2.0
"""


def _fp8_probe_values(np_name: str) -> np.ndarray:
    """Every finite fp8 value, the midpoints between neighbours (ties: round to even) and one f32 ulp either side of
    them, past the largest value, infinities, NaN, signed zeros, subnormals, random values of every scale."""
    import ml_dtypes

    f8 = getattr(ml_dtypes, np_name)
    vals = np.arange(256, dtype=np.uint8).view(f8).astype(np.float32)
    pos = np.unique(vals[np.isfinite(vals) & (vals >= 0)])
    mids = (pos[:-1] + pos[1:]) / 2
    big = float(pos[-1])
    near = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf)),
                           [big * 1.0625, big * 1.25, big * 2, big + (big - pos[-2]) / 2, pos[1] / 2, pos[1] / 3]])
    rng = np.random.default_rng()
    rand = rng.standard_normal(400) * np.exp2(rng.integers(-20, 20, 400))
    x = np.concatenate([pos, near, -pos, -near, rand, [np.inf, -np.inf, np.nan, 0.0, -0.0]]).astype(np.float32)
    return rng.permutation(x)


@pytest.mark.parametrize("dtype,np_name", [("f8e4m3", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2")])
def test_fp8_outputs_and_arithmetic_round_as_ml_dtypes_on_lavapipe(tmp_path, dtype, np_name):
    """f32 -> fp8 (round to nearest even; e4m3fn's overflow NaN, e5m2's infinity), fp8 arithmetic rounded after each
    operation, fp8 held in workgroup memory and written to fp8 output tensors (a byte of a u32 word each, stored
    by atomics that leave the other bytes alone): on lavapipe, byte for byte against the interpreter (ml_dtypes),
    at a ragged length so the last word is partly outside the tensor."""
    import ml_dtypes

    from tilec.runtime import wgsl as rt

    ok, why = rt.available()
    if not ok:
        pytest.skip(why)
    p = tmp_path / "k.tile"
    p.write_text(FP8_OUT.format(t=dtype))
    x = _fp8_probe_values(np_name)
    x = x[: len(x) - (len(x) % 4 == 0)]  # ragged: not a whole number of words
    n = len(x)
    f8 = getattr(ml_dtypes, np_name)
    want = {"X": x, "Y": np.zeros(n, f8), "Z": np.zeros(n, f8), "W": np.zeros(n, np.float32)}
    got = {k: v.copy() for k, v in want.items()}
    run_kernel(tilec.compile(p, verify=True).module.kernels[0], want)
    art = tilec.compile(p, "webgpu", emit="wgsl")
    rt.WgslModule(art.data.decode(), json.loads(art.manifest)).enc(*[got[k] for k in "XYZW"])
    for name in "YZW":
        a, b = got[name].astype(np.float32), want[name].astype(np.float32)
        nan = np.isnan(b)
        assert np.array_equal(np.isnan(a), nan), name
        if name != "W":
            bad = np.flatnonzero(got[name].view(np.uint8)[~nan] != want[name].view(np.uint8)[~nan])
            assert bad.size == 0, f"{name}: {x[~nan][bad[:5]]} -> {a[~nan][bad[:5]]}, expected {b[~nan][bad[:5]]}"
        np.testing.assert_array_equal(a[~nan], b[~nan], err_msg=name)
    # (the probes reach overflow, NaN and zero)
    assert (~np.isfinite(want["Y"].astype(np.float32))).sum() > 2 and (want["Y"].view(np.uint8) & 0x7F).min() == 0
