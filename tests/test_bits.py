"""Issue #16, item 8: T.reinterpret (bit casts), T.Layout index maps in annotate_layout, and T.im2col.

Each one runs in the interpreter against numpy at a regular and a ragged shape, through the SIMT model of the
sm80 and gfx942 lowerings against the interpreter, through nvcc (sm80, sm90: SASS) and hipcc/clang-19 (gfx942)
where installed, and on WebGPU (lavapipe) where WGSL can express it; every refusal is a located diagnostic."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.cli.main import main as tilec_main
from tilec.interp import run_kernel
from tilec.interp.run import random_inputs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_diagnostics import compile_errors, one_error  # noqa: E402
from tilelang_ports import ref_conv  # noqa: E402

CONV = ROOT / "examples" / "tilelang" / "convolution.tile"


def _compile(tmp_path: Path, text: str, name: str = "k.tile", **kw):
    path = tmp_path / name
    path.write_text(text)
    return path, tilec.compile(str(path), verify=True, **kw)


def _copy(args: dict) -> dict:
    return {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}


def _same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    bad = np.nonzero(np.ascontiguousarray(got).view(np.uint8) != np.ascontiguousarray(want).view(np.uint8))[0]
    assert not bad.size, f"{what}: {bad.size} bytes differ, first at byte {bad[0]}"


def _simt(path: Path, target: str, args: dict, sizes: dict, defines=None) -> dict:
    """The kernel's outputs when the target's lowering runs lane by lane (the SIMT model)."""
    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup

    lowered = tilec.compile(str(path), target=target, defines=defines or {}, verify=True)
    got = _copy(args)
    run_simt(lowered.simt.kernels[0], got, sizes, warp_size=lookup(target).warp_size)
    return got


def _nvcc_builds(path: Path, tmp_path: Path, target: str, defines=None) -> str:
    """Build a cubin through nvcc and return its SASS (skips without nvcc / cuobjdump)."""
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    from test_cuda_backend import _sass

    out = tmp_path / f"{path.stem}.{target}.cubin"
    flags = [f"-D{k}={v}" for k, v in (defines or {}).items()]
    assert tilec_main([str(path), "--target", target, *flags, "-o", str(out)]) == 0
    sass = _sass(out)
    assert "EXIT" in sass, sass[:2000]
    return sass


def _hip_builds(path: Path, arch: str = "gfx942", defines=None) -> None:
    from tilec.targets.hip import toolchain as tc

    if tc.find_compiler(arch) is None:
        pytest.skip(f"no compiler for {arch}")
    r = tilec.compile(str(path), target=arch, defines=defines or {})
    assert tc.build(r.source, path.stem, arch, "hsaco").data[:4] == b"\x7fELF"


@pytest.fixture(scope="module")
def webgpu():
    from tilec.runtime import wgsl

    ok, why = wgsl.available()
    if not ok:
        pytest.skip(f"WebGPU: {why}")
    return wgsl


def _run_wgsl(result, tmp_path: Path, args: dict) -> dict:
    import tilec.runtime as rt
    from tilec.artifacts import dumps, manifest

    out = tmp_path / "k.wgsl"
    out.write_text(result.source)
    Path(str(out) + ".json").write_text(dumps(manifest(result, "wgsl", ["wgsl"], "none", {}, out.name)))
    k = result.module.kernels[0]
    got = _copy(args)
    getattr(rt.load(out), k.name)(*[got[p.name] for p in k.params])
    return got


# ================================================================ T.reinterpret

REINTERPRET = """\
const block = 64

kernel bits(X: f32[N], H: u16[N], Q: u8[N], Bf: bf16[N], I: i32[N],
            Y: out u32[N], F: out f16[N], G: out i16[N], E: out f8e4m3[N], Z: out i8[N], Bi: out i16[N],
            Xf: out f32[N]):
    with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
        for i in T.Parallel(block):
            n = bx * block + i
            if n < N:
                Y[n] = T.reinterpret(X[n], T.uint32) ^ 0x80000000
                F[n] = T.reinterpret(T.float16, (H[n] & 0x3ff) | 0x3c00)
                G[n] = T.reinterpret(T.reinterpret(F[n] * 2.0, u16) ^ 0x8000, i16)
                E[n] = T.reinterpret(Q[n] & 0x77, T.float8_e4m3)
                Z[n] = T.reinterpret(Q[n], dtype=i8)
                Bi[n] = T.reinterpret(Bf[n], "int16")
                Xf[n] = T.reinterpret((I[n] & 0x7fffff) | 0x3f800000, f32)
"""


def _reinterpret_inputs(n: int, seed: int) -> dict:
    import ml_dtypes

    rng = np.random.default_rng(seed)
    z = {"Y": np.uint32, "F": np.float16, "G": np.int16, "E": ml_dtypes.float8_e4m3fn, "Z": np.int8, "Bi": np.int16,
         "Xf": np.float32}
    return {"X": rng.standard_normal(n).astype(np.float32), "H": rng.integers(0, 1 << 16, n).astype(np.uint16),
            "Q": rng.integers(0, 256, n).astype(np.uint8),
            "Bf": rng.standard_normal(n).astype(ml_dtypes.bfloat16),
            "I": rng.integers(-(1 << 31), 1 << 31, n).astype(np.int32),
            **{k: np.zeros(n, dt) for k, dt in z.items()}}


def _reinterpret_reference(a: dict) -> dict:
    import ml_dtypes

    f = ((a["H"] & 0x3FF) | 0x3C00).view(np.float16)
    return {"Y": a["X"].view(np.uint32) ^ np.uint32(0x80000000), "F": f,
            "G": ((f.astype(np.float32) * 2).astype(np.float16).view(np.uint16) ^ np.uint16(0x8000)).view(np.int16),
            "E": (a["Q"] & 0x77).view(ml_dtypes.float8_e4m3fn), "Z": a["Q"].view(np.int8),
            "Bi": a["Bf"].view(np.int16),
            "Xf": ((a["I"] & 0x7FFFFF) | 0x3F800000).astype(np.int32).view(np.float32)}


@pytest.mark.parametrize("n", [256, 203])
def test_reinterpret_interpreter_matches_numpy(tmp_path, n):
    _, r = _compile(tmp_path, REINTERPRET)
    args = _reinterpret_inputs(n, n)
    run_kernel(r.module.kernels[0], args)
    for name, want in _reinterpret_reference(args).items():
        _same_bits(args[name], want, name)


@pytest.mark.parametrize("target", ["sm80", "gfx942"])
def test_reinterpret_lowering_matches_interpreter(tmp_path, target):
    path, r = _compile(tmp_path, REINTERPRET)
    args = _reinterpret_inputs(203, 5)
    want = _copy(args)
    run_kernel(r.module.kernels[0], want)
    got = _simt(path, target, args, {"N": 203})
    for name in _reinterpret_reference(args):
        _same_bits(got[name], want[name], f"{target}: {name}")


def test_reinterpret_argument_orders_and_literals(tmp_path):
    _, r = _compile(tmp_path, """\
kernel k(H: u16[N], X: f32[N], F: out f16[N], G: out f16[N], Y: out f32[N]):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            if i < N:
                F[i] = T.reinterpret(T.float16, H[i])
                G[i] = T.reinterpret(H[i], T.float16) + T.reinterpret(f16, 0x3c00)
                Y[i] = T.reinterpret(f32, T.reinterpret(X[i], i32))
""")
    ir = r.ir()
    assert "F[i] = reinterpret<f16>(H[i])" in ir and "reinterpret<f16>(H[i]) + reinterpret<f16>(15360:u16)" in ir
    assert "reinterpret<f32>(reinterpret<i32>(X[i]))" in ir


def test_reinterpret_spellings_in_cuda_hip_and_wgsl(tmp_path):
    text = REINTERPRET
    path, _ = _compile(tmp_path, text)
    cu = tilec.compile(str(path), target="sm80").source
    assert "tl::bit_cast<half>(static_cast<unsigned short>(" in cu and "tl::bit_cast<unsigned>(X[" in cu
    assert "tl::bit_cast<__nv_fp8_e4m3>(" in cu and "tl::bit_cast<short>(Bf[" in cu
    hip = tilec.compile(str(path), target="gfx942").source
    assert "tl::bit_cast<tl::half>(static_cast<unsigned short>(" in hip
    path32, _ = _compile(tmp_path, REINTERPRET32, name="k32.tile")
    wgsl = tilec.compile(str(path32), target="webgpu").source
    assert "bitcast<u32>(" in wgsl and "bitcast<f32>(" in wgsl and "bitcast<i32>(" in wgsl


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_reinterpret_builds_with_nvcc(tmp_path, target):
    path, _ = _compile(tmp_path, REINTERPRET)
    _nvcc_builds(path, tmp_path, target)


def test_reinterpret_builds_for_gfx942(tmp_path):
    path, _ = _compile(tmp_path, REINTERPRET)
    _hip_builds(path)


REINTERPRET32 = """\
kernel bits32(X: f32[N], I: i32[N], Y: out u32[N], Xf: out f32[N], J: out i32[N]):
    with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            n = bx * 64 + i
            if n < N:
                Y[n] = T.reinterpret(X[n], u32) ^ 0x80000000
                Xf[n] = T.reinterpret((I[n] & 0x7fffff) | 0x3f800000, f32)
                J[n] = T.reinterpret(X[n] * 2.0, i32)
"""


@pytest.mark.parametrize("n", [256, 203])
def test_reinterpret_runs_on_webgpu(webgpu, tmp_path, n):
    path, _ = _compile(tmp_path, REINTERPRET32)
    r = tilec.compile(str(path), target="webgpu", verify=True)
    rng = np.random.default_rng(n)
    args = {"X": rng.standard_normal(n).astype(np.float32),
            "I": rng.integers(-(1 << 31), 1 << 31, n).astype(np.int32),
            "Y": np.zeros(n, np.uint32), "Xf": np.zeros(n, np.float32), "J": np.zeros(n, np.int32)}
    want = _copy(args)
    run_kernel(r.module.kernels[0], want)
    _same_bits(want["J"], (args["X"] * 2).view(np.int32), "J (interpreter)")
    got = _run_wgsl(r, tmp_path, args)
    for name in ("Y", "Xf", "J"):
        _same_bits(got[name], want[name], name)


def test_reinterpret_width_mismatch_is_located(tmp_path):
    d = one_error(tmp_path, """\
kernel k(X: f16[N], Y: out u32[N]):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            Y[i] = T.reinterpret(X[i], u32)
""")
    assert (d.line, d.col) == (4, 20)
    assert "a bit cast keeps the width, and f16 has 16 bits where u32 has 32 bits" in d.message


@pytest.mark.parametrize("body,why", [
    ("Y[i] = T.reinterpret(X[i] > 0.0, u8)", "bool has no bit pattern"),
    ("Y[i] = T.reinterpret(X[i])", "takes a value and a dtype"),
    ("Y[i] = T.reinterpret(X[i], u16, u16)", "takes a value and a dtype"),
    ("Y[i] = T.reinterpret(X[i], dtpe=u16)", "no other keyword"),
])
def test_reinterpret_misuse_is_located(tmp_path, body, why):
    d = one_error(tmp_path, f"""\
kernel k(X: f16[N], Y: out u16[N]):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            {body}
""")
    assert d.line == 4 and why in d.message


def test_reinterpret_refused_on_webgpu_where_wgsl_has_no_bitcast(tmp_path):
    errs = compile_errors(tmp_path, """\
kernel k(X: bf16[N], Y: out f32[N]):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            Y[i] = T.cast(T.reinterpret(T.reinterpret(X[i], i16) ^ 1, bf16), f32)
""", "--target", "webgpu")
    # (f16 with i16/u16 runs through vec2<f16>; bf16, held as u16 words, has no bitcast of its own)
    msgs = [d.message for d in errs if "bitcast" in d.message]
    assert len(msgs) == 2 and all("converts 32-bit types (f32, i32, u32) and f16 with i16/u16 alone" in m
                                  for m in msgs)
    assert {(d.line, d.col) for d in errs if "bitcast" in d.message} == {(4, 27), (4, 41)}


def test_reinterpret_refused_on_ascend(tmp_path):
    d = one_error(tmp_path, """\
kernel k(X: f32[N], Y: out f32[N]):
    with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            Y[bx * 64 + i] = T.reinterpret(T.reinterpret(X[bx * 64 + i], u32) & 0x7fffffff, f32)
""", "--target", "ascend")  # (16-bit reinterprets run there: tests/test_ascend_bytes.py)
    assert "T.reinterpret is supported by the AscendC back end between 16-bit integers and f16" in d.message
    assert d.line == 4


# ================================================================ T.im2col

CONV_CASES = [  # (K, S, D, P), regular and ragged sizes
    ((3, 1, 1, 1), {"N": 2, "H": 8, "W": 8, "C": 16, "F": 32}),
    ((3, 1, 1, 1), {"N": 1, "H": 7, "W": 5, "C": 6, "F": 10}),
    ((3, 2, 1, 1), {"N": 2, "H": 9, "W": 7, "C": 5, "F": 12}),
    ((2, 1, 2, 0), {"N": 1, "H": 6, "W": 9, "C": 7, "F": 9}),
    ((3, 2, 2, 2), {"N": 3, "H": 5, "W": 6, "C": 3, "F": 17}),
]


def _conv_defines(ksdp) -> dict:
    k, s, d, p = ksdp
    return {"K": k, "S": s, "D": d, "P": p, "block_M": 32, "block_N": 32, "block_K": 16}


def _conv_args(sizes, ksdp, seed):
    k = ksdp[0]
    rng = np.random.default_rng(seed)
    n, h, w, c, f = (sizes[x] for x in "NHWCF")
    oh = (h + 2 * ksdp[3] - ksdp[2] * (k - 1) - 1) // ksdp[1] + 1
    ow = (w + 2 * ksdp[3] - ksdp[2] * (k - 1) - 1) // ksdp[1] + 1
    return {"data": rng.standard_normal((n, h, w, c)).astype(np.float16),
            "kernel_": rng.standard_normal((k, k, c, f)).astype(np.float16),
            "out_": np.zeros((n, oh, ow, f), np.float16)}


@pytest.mark.parametrize("ksdp,sizes", CONV_CASES, ids=[f"K{c[0]}S{c[1]}D{c[2]}P{c[3]}-{i}" for i, (c, _) in
                                                        enumerate(CONV_CASES)])
def test_im2col_convolution_matches_numpy(ksdp, sizes):
    r = tilec.compile(str(CONV), defines=_conv_defines(ksdp), verify=True)
    args = _conv_args(sizes, ksdp, sum(sizes.values()))
    run_kernel(r.module.kernels[0], args)
    want = ref_conv(args, sizes, stride=ksdp[1], pad=ksdp[3], dil=ksdp[2])["out_"]
    np.testing.assert_allclose(args["out_"].astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("target", ["sm80", "gfx942"])
@pytest.mark.parametrize("ksdp,sizes", [CONV_CASES[1], CONV_CASES[4]], ids=["K3S1D1P1", "K3S2D2P2"])
def test_im2col_convolution_lowering_matches_interpreter(target, ksdp, sizes):
    defines = _conv_defines(ksdp)
    r = tilec.compile(str(CONV), defines=defines)
    args = _conv_args(sizes, ksdp, 3)
    want = _copy(args)
    run_kernel(r.module.kernels[0], want)
    got = _simt(CONV, target, args, sizes, defines)
    np.testing.assert_allclose(got["out_"].astype(np.float32), want["out_"].astype(np.float32), rtol=2e-3, atol=2e-3)


IM2COL = """\
const K = 3
const S = 1
const D = 1
const P = 1
const bm = 16
const bk = 32
const to_fragment = True

kernel cols(data: f32[N, H, W, C],
            col: out f32[N * ((H + 2 * P - D * (K - 1) - 1) // S + 1) * ((W + 2 * P - D * (K - 1) - 1) // S + 1),
                         K * K * C]):
    with T.Kernel(T.ceildiv(K * K * C, bk), T.ceildiv(col.shape[0], bm), threads=64) as (bx, by):
        t = T.alloc_fragment((bm, bk), f32)
        s = T.alloc_shared((2, bm, bk), f32)
        if to_fragment:
            T.im2col(data, t, by, bx, K, S, D, P)
            T.copy(t, col[by * bm, bx * bk])
        else:
            T.c2d_im2col(data, s[1, :, :], by, bx, K, stride=S, dilation=D, pad=P, eviction_policy="evict_last")
            T.copy(s[1, :, :], col[by * bm, bx * bk])
"""


def _im2col_reference(x: np.ndarray, k, s, d, p) -> np.ndarray:
    n, h, w, c = x.shape
    oh, ow = (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
    xp = np.zeros((n, h + 2 * p, w + 2 * p, c), x.dtype)
    xp[:, p:p + h, p:p + w] = x
    cols = np.zeros((n, oh, ow, k, k, c), x.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, :, i, j] = xp[:, i * d:i * d + s * oh:s, j * d:j * d + s * ow:s]
    return cols.reshape(n * oh * ow, k * k * c)


@pytest.mark.parametrize("scope", ["fragment", "shared"])
@pytest.mark.parametrize("ksdp,sizes", [((3, 1, 1, 1), {"N": 2, "H": 8, "W": 8, "C": 8}),
                                        ((3, 2, 2, 2), {"N": 1, "H": 7, "W": 5, "C": 3}),
                                        ((2, 3, 1, 0), {"N": 2, "H": 11, "W": 6, "C": 5})])
def test_im2col_tile_is_the_im2col_matrix(tmp_path, scope, ksdp, sizes):
    """The gathered tiles, written out, are numpy's im2col matrix (zero padding), in the interpreter and in the
    sm80 and gfx942 lowerings; the tiles past its last row and column write nothing."""
    k, s, d, p = ksdp
    defines = {"K": k, "S": s, "D": d, "P": p, "to_fragment": scope == "fragment"}
    path, _ = _compile(tmp_path, IM2COL)
    r = tilec.compile(str(path), defines=defines, verify=True)
    kern = r.module.kernels[0]
    args = random_inputs(kern, sizes, seed=sum(sizes.values()))
    want = _im2col_reference(args["data"], k, s, d, p)
    got = _copy(args)
    run_kernel(kern, got)
    np.testing.assert_array_equal(got["col"], want)
    for target in ("sm80", "gfx942"):
        np.testing.assert_array_equal(_simt(path, target, args, sizes, defines)["col"], want, err_msg=target)


def test_im2col_ir_is_a_guarded_parallel_gather(tmp_path):
    path, r = _compile(tmp_path, IM2COL, defines={"S": 2})
    ir = r.ir()
    assert "for im2col_i, im2col_j in parallel(16, 32):" in ir
    assert "im2col_ow: i32 = (W - 1) // 2 + 1" in ir
    assert "t[im2col_i, im2col_j] = select(im2col_m < N * im2col_pixels and im2col_k < C * 9 and im2col_h >= 0" in ir


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_im2col_convolution_builds_with_nvcc(tmp_path, target):
    _nvcc_builds(CONV, tmp_path, target)


def test_im2col_convolution_builds_for_gfx942():
    _hip_builds(CONV, defines={"block_N": 64})


@pytest.mark.parametrize("scope", ["fragment", "shared"])
def test_im2col_runs_on_webgpu(webgpu, tmp_path, scope):
    path, _ = _compile(tmp_path, IM2COL)
    defines = {"S": 2, "D": 2, "P": 2, "to_fragment": scope == "fragment"}
    r = tilec.compile(str(path), target="webgpu", defines=defines, verify=True)
    sizes = {"N": 2, "H": 7, "W": 5, "C": 3}
    args = random_inputs(r.module.kernels[0], sizes, seed=4)
    got = _run_wgsl(r, tmp_path, args)
    np.testing.assert_array_equal(got["col"], _im2col_reference(args["data"], 3, 2, 2, 2))


IM2COL_BAD = """\
kernel k(data: f16[N, H, W, C], flat: f16[N, C], out_: out f16[N, C]):
    with T.Kernel(1, threads=64) as bx:
        s = T.alloc_shared((32, 32), f16)
        l = T.alloc_local((32, 32), f16)
        {stmt}
        T.copy(s, out_[0, 0])
"""


@pytest.mark.parametrize("stmt,col,why", [
    ("T.im2col(flat, s, bx, 0, 3, 1, 1, 1)", 18, "im2col reads a 4-D NHWC tensor; 'flat' is a 2-D global buffer"),
    ("T.im2col(data[0, 0, 0, 0], s, bx, 0, 3, 1, 1, 1)", 18, "im2col reads the whole image tensor"),
    ("T.im2col(data, l, bx, 0, 3, 1, 1, 1)", 24, "writes a 2-D tile of a shared or fragment buffer"),
    ("T.im2col(data, s, bx, 0, N, 1, 1, 1)", 34, "kernel must be a compile-time integer"),
    ("T.im2col(data, s, bx, 0, 3, 0, 1, 1)", 37, "stride must be at least 1"),
    ("T.im2col(data, s, bx, 0, 3, 1, 1)", 9, "missing argument(s): pad"),
    ("for i in T.Parallel(4):\n            T.im2col(data, s, bx, 0, 3, 1, 1, 1)", 13,
     "cannot be used inside a Parallel"),
])
def test_im2col_misuse_is_located(tmp_path, stmt, col, why):
    d = one_error(tmp_path, IM2COL_BAD.format(stmt=stmt))
    assert why in d.message and d.col == col, d


# ================================================================ T.Layout

LAYOUT = """\
const bm = 32
const bn = 32
const dtype = f32

kernel lay(X: dtype[M, N], W: dtype[N, N], Y: out dtype[M, N], R: out f32[M], G: out f32[M, N]):
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        S = T.alloc_shared((bm, bn), dtype)
        P = T.alloc_shared((bm, bn), dtype)
        B = T.alloc_shared((bn, bn), dtype)
        T.annotate_layout({S: T.Layout(S.shape, lambda i, j: [(i * 5) % bm, j]),
                           P: T.Layout([bm, bn], lambda i, j: (j % 4) * bm * (bn // 4) + i * (bn // 4) + j // 4),
                           B: T.Layout(B.shape, forward_fn=lambda i, j: (j, i ^ (j % 8)))})
        F = T.alloc_fragment((bm, bn), f32)
        rs = T.alloc_fragment((bm,), f32)
        acc = T.alloc_fragment((bm, bn), f32)
        T.copy(X[bx * bm, 0], S)
        T.copy(W[0, 0], B)
        for i, j in T.Parallel(bm, bn):
            P[i, j] = S[(i + 3) % bm, j] * 2.0
        for i, j in T.Parallel(bm, bn):
            F[i, j] = P[i, j] + S[i, bn - 1 - j]
        T.reduce_sum(F, rs, dim=1)
        T.copy(F, Y[bx * bm, 0])
        T.copy(rs, R[bx * bm])
        T.clear(acc)
        T.gemm(S, B, acc)
        T.copy(acc, G[bx * bm, 0])
"""


def _layout_reference(a: dict) -> dict:
    x, w = a["X"].astype(np.float32), a["W"].astype(np.float32)
    m = x.shape[0]
    bm = 32
    pad = -(-m // bm) * bm
    xs = np.zeros((pad, 32), np.float32)
    xs[:m] = x
    tiles = xs.reshape(-1, bm, 32)
    p = np.roll(tiles, -3, axis=1) * 2
    f = (p + tiles[:, :, ::-1]).reshape(pad, 32)[:m]
    return {"Y": f, "R": f.sum(axis=1), "G": x @ w}


@pytest.mark.parametrize("m", [96, 70])
def test_layout_interpreter_matches_numpy(tmp_path, m):
    _, r = _compile(tmp_path, LAYOUT)
    args = random_inputs(r.module.kernels[0], {"M": m, "N": 32}, seed=m)
    run_kernel(r.module.kernels[0], args)
    for name, want in _layout_reference(args).items():
        np.testing.assert_allclose(args[name], want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx942"])
def test_layout_lowering_matches_interpreter(tmp_path, target):
    path, r = _compile(tmp_path, LAYOUT)
    args = random_inputs(r.module.kernels[0], {"M": 70, "N": 32}, seed=2)
    want = _copy(args)
    run_kernel(r.module.kernels[0], want)
    got = _simt(path, target, args, {"M": 70, "N": 32})
    for name in ("Y", "R", "G"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4, err_msg=f"{target}: {name}")


def test_layout_addresses_the_buffer_through_the_map(tmp_path):
    """Every access of S, P and B goes through its map: the row-permuting map of S keeps 16-byte runs (vector
    copies), the others do not (element by element)."""
    path, _ = _compile(tmp_path, LAYOUT)
    r = tilec.compile(str(path), target="sm80", dump_after={"layout-inference", "lower-to-simt"})
    lay = r.ir_after["layout-inference"]
    assert "S: custom[32x32]" in lay and "P: custom[32x32]" in lay and "B: custom[32x32]" in lay
    simt = r.ir_after["lower-to-simt"]
    assert "copy16_or_zero(&S[(((idx / 8) * 5) % 32) * 32 + ((idx % 8) * 4)]" in simt
    assert "copy16_or_zero(&B[" not in simt and "% 8)] = (" in simt
    assert re.search(r"P\[\(\(\(j\w* % 4\) \* 32\) \* 8 \+ \(i\w* \* 8\)\) \+ \(j\w* / 4\)\]", simt)
    # the scalar gemm's operand reads
    assert re.search(r"S\[\(\(i\w* \* 5\) % 32\) \* 32 \+ k\] \* B\[j\w* \* 32 \+ \(k \^ j\w* % 8\)\]", simt)


def test_layout_builds_with_nvcc_and_hip(tmp_path):
    path, _ = _compile(tmp_path, LAYOUT)
    _nvcc_builds(path, tmp_path, "sm80")
    _nvcc_builds(path, tmp_path, "sm90")
    _hip_builds(path)


def test_layout_runs_on_webgpu(webgpu, tmp_path):
    path, _ = _compile(tmp_path, LAYOUT)
    r = tilec.compile(str(path), target="webgpu", verify=True)
    args = random_inputs(r.module.kernels[0], {"M": 70, "N": 32}, seed=9)
    want = _copy(args)
    run_kernel(r.module.kernels[0], want)
    got = _run_wgsl(r, tmp_path, args)
    for name in ("Y", "R", "G"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4, err_msg=name)


def test_layout_on_a_tensor_core_gemm_operand_is_refused(tmp_path):
    errs = compile_errors(tmp_path, LAYOUT.replace("const dtype = f32", "const dtype = f16"), "--target", "sm80")
    assert {d.line for d in errs} == {10, 12} and all("runs on mma.sync.m16n8k16" in d.message for d in errs)
    assert {d.col for d in errs} == {31}


def test_layout_is_ignored_by_ascend(tmp_path):
    """AscendC places its tiles itself: the annotation (a SIMT storage order) changes nothing there."""
    path, _ = _compile(tmp_path, """\
kernel k(X: f16[M, 64], Y: out f16[M, 64]):
    with T.Kernel(T.ceildiv(M, 32), threads=64) as bx:
        S = T.alloc_shared((32, 64), f16)
        T.annotate_layout({S: T.Layout(S.shape, lambda i, j: [j, i])})
        T.copy(X[bx * 32, 0], S)
        T.copy(S, Y[bx * 32, 0])
""")
    assert tilec.compile(str(path), target="ascend").source


LAYOUT_BAD = """\
const n = 8

kernel k(X: f32[M, 8], Y: out f32[M, 8]):
    with T.Kernel(T.ceildiv(M, 8), threads=32) as bx:
        S = T.alloc_shared((8, 8), f32)
        F = T.alloc_fragment((8, 8), f32)
        T.annotate_layout({ANN})
        T.copy(X[bx * 8, 0], S)
        T.copy(S, F)
        T.copy(F, Y[bx * 8, 0])
"""


@pytest.mark.parametrize("ann,at,why", [  # at: the text the caret points to
    ("S: T.Layout(S.shape, lambda i, j: [i // 2, j])", "lambda",
     "not one-to-one: it sends (0, 0) and (1, 0) to the same"),
    ("S: T.Layout(S.shape, lambda i, j: i * 9 + j)", "lambda", "sends (7, 1) to offset 64, outside the 64 elements"),
    ("S: T.Layout(S.shape, lambda i, j: [i - 1, j])", "i - 1",
     "sends (0, 0) to a negative coordinate (-1) in output 0"),
    ("S: T.Layout(S.shape, lambda i, j: [i + bx, j])", "i + bx", "`bx` is none of these"),
    ("S: T.Layout(S.shape, lambda i, j: [i, X[i, j]])", "X[i, j]", "`X[i, j]` is none of these"),
    ("S: T.Layout(S.shape, lambda i, j: [i, j * 1.5])", "j * 1.5", "is none of these"),
    ("S: T.Layout(S.shape, lambda i, j: [i, j % (i - i)])", "[i, j", "divides by zero"),
    ("S: T.Layout([8, 4], lambda i, j: [i, j])", "[8, 4]", "shape (8, 4) is not the shape of 'S' (8, 8)"),
    ("S: T.Layout(S.shape, lambda i: [i])", "lambda", "takes 2 argument(s), not 1"),
    ("S: T.Layout(S.shape, [0, 1])", "[0, 1]", "must be a lambda written in place"),
    ("F: T.Layout(F.shape, lambda i, j: [j, i])", "T.Layout", "'F' is a fragment buffer (tilec infers the register"),
    ("F: T.Fragment(F.shape, forward_fn=lambda i, j: [j, i])", "T.Fragment", "T.Fragment layouts are not supported"),
    ("S: T.make_layout(S)", "T.make", "or T.Layout(buf.shape, lambda i, j: ...)"),
])
def test_layout_misuse_is_located(tmp_path, ann, at, why):
    text = LAYOUT_BAD.replace("ANN", ann)
    d = one_error(tmp_path, text)
    assert why in d.message and (d.line, d.col) == (7, text.splitlines()[6].index(at) + 1), d


def test_layout_outside_annotate_layout_says_where_it_goes(tmp_path):
    text = LAYOUT_BAD.replace("T.annotate_layout({ANN})", "L = T.Layout(S.shape, lambda i, j: [j, i])")
    d = one_error(tmp_path, text)
    assert "TileLang's T.Layout is not supported: write it in place as a value of annotate_layout" in d.message


def test_layout_is_drawn_by_tilec_layout(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_inspect_layout import _cells, _layout_svg, _view

    path, _ = _compile(tmp_path, LAYOUT)
    views = _cells(_layout_svg(tmp_path, "sm80", "--size", "M=64,N=32", file=path))
    b = _view(views, "shared B")
    for i, j in [(0, 0), (3, 5), (17, 9), (31, 31)]:
        off = j * 32 + (i ^ (j % 8))
        assert b[(i, j)][0] == str(off), (i, j)


REDUCE_SHARED = """\
kernel rs(X: f32[M, 64], R: out f32[M], C: out f32[64]):
    with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
        S = T.alloc_shared((16, 64), f32)
        T.annotate_layout({S: T.Layout(S.shape, lambda i, j: (j % 16) * 64 + i * 4 + j // 16)})
        r = T.alloc_fragment((16,), f32)
        c = T.alloc_fragment((64,), f32)
        T.copy(X[bx * 16, 0], S)
        T.reduce_sum(S, r, dim=1)
        T.reduce_max(S, c, dim=0)
        T.copy(r, R[bx * 16])
        if bx == 0:
            T.copy(c, C[0])
"""


@pytest.mark.parametrize("target", ["sm80", "gfx942"])
def test_layout_reductions_of_a_shared_buffer(tmp_path, target):
    path, r = _compile(tmp_path, REDUCE_SHARED)
    sizes = {"M": 45}
    args = random_inputs(r.module.kernels[0], sizes, seed=11)
    want = _copy(args)
    run_kernel(r.module.kernels[0], want)
    np.testing.assert_allclose(want["R"], args["X"].sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(want["C"], args["X"][:16].max(axis=0), rtol=1e-6)
    got = _simt(path, target, args, sizes)
    np.testing.assert_allclose(got["R"], want["R"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["C"], want["C"], rtol=1e-6)
