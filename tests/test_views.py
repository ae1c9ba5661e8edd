"""Views of a buffer's storage (TileLang's `T.Tensor(shape, dtype, A.data)`, `T.reshape`, `T.view`): the
interpreter against numpy at regular and ragged shapes, the sm80 / gfx942 / sm90 (TMA) lowerings executed by the
SIMT model, WebGPU on lavapipe, the launch checks (interpreter, tilec.runtime on the fake driver, the C launcher),
the sm90 build's TMA instructions, and a located error for every refusal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_cuda import FakeDriver, install

import tilec
from tilec.diagnostics import CompileError, render
from tilec.interp import run_kernel
from tilec.interp.tile_interp import InterpreterError
from tilec.simt.interp import run_simt

ROOT = Path(__file__).resolve().parent.parent

# A flat [M * K] operand seen as [M, K], B seen through an identity reshape: both views feed TMA on sm90.
GEMM = """
const BM = 64
const BN = 64
const BK = 32

kernel gemm(A: f16[M * K], B: f16[K, N], C: out f32[M, N]):
    with Kernel(ceildiv(N, BN), ceildiv(M, BM), threads=128) as (bx, by):
        A2 = T.Tensor((M, K), f16, A.data)
        B2 = T.reshape(B, (K, N))
        A_s = alloc_shared((BM, BK), f16)
        B_s = alloc_shared((BK, BN), f16)
        acc = alloc_fragment((BM, BN), f32)
        clear(acc)
        for k in Pipelined(ceildiv(K, BK), num_stages=2):
            copy(A2[by * BM, k * BK], A_s)
            copy(B2[k * BK, bx * BN], B_s)
            gemm(A_s, B_s, acc)
        copy(acc, C[by * BM, bx * BN])
"""

# [B, S, H * D] seen as [B, S, H, D]; the output written through a view of views; element accesses too.
HEADS = """
const D = 16

kernel heads(X: f32[B, S, H * D], Y: out f32[B, S, H * D], Z: out f32[B, S, H, D], W: out f32[B * S]):
    with Kernel(ceildiv(S, 32), H, B, threads=128) as (bs, h, b):
        X4 = T.reshape(X, (B, S, H, D))
        Y4 = T.view(Y, (B, S, H, D))
        W2 = T.reshape(W, (B, S))
        Z3 = T.reshape(Z, (B, S, H * D))
        Z4 = T.view(Z3, (B, S, H, D))
        t = alloc_fragment((32, D), f32)
        copy(X4[b, bs * 32, h, 0], t)
        for i, j in Parallel(32, D):
            t[i, j] = t[i, j] * 2.0 + f32(h)
        copy(t, Y4[b, bs * 32, h, 0])
        for i, j in Parallel(32, D):
            if bs * 32 + i < S:
                Z4[b, bs * 32 + i, h, j] = X4[b, bs * 32 + i, h, j] - 1.0
        for i in Parallel(32):
            if bs * 32 + i < S:
                atomic_add(W2[b, bs * 32 + i], X4[b, bs * 32 + i, h, 0])
"""

# u8 bytes seen as f32 (and f32 as its 16-bit halves): the dtype changes the innermost dimension.
BYTES = """
kernel bytes(P: u8[M, N], F: out f32[M, N // 4], G: out f32[M, N // 4]):
    with Kernel(ceildiv(M, 16), threads=128) as bx:
        P4 = T.view(P, dtype=f32)
        t = alloc_shared((16, 8), f32)
        copy(P4[bx * 16, 0], t)
        copy(t, F[bx * 16, 0])
        G2 = T.view(G, dtype=u8)
        g = alloc_shared((16, 32), u8)
        copy(P[bx * 16, 0], g)
        copy(g, G2[bx * 16, 0])
"""

# a shared tile seen as [rows, groups, 4], and flat
SHARED = """
const BM = 16
const BN = 64

kernel groups(A: f32[M, N], S: out f32[M, N // 4]):
    with Kernel(ceildiv(N, BN), ceildiv(M, BM), threads=128) as (bx, by):
        s = alloc_shared((BM, BN), f32)
        s3 = T.reshape(s, (BM, BN // 4, 4))
        r = alloc_fragment((BM, BN // 4), f32)
        copy(A[by * BM, bx * BN], s)
        for i, j in Parallel(BM, BN // 4):
            r[i, j] = s3[i, j, 0] + s3[i, j, 1] + s3[i, j, 2] + s3[i, j, 3]
        for i, j in Parallel(BM, BN // 4):
            s3[i, j, 0] = r[i, j]
        flat = T.view(s, (BM * BN,))
        for i, j in Parallel(BM, BN // 4):
            r[i, j] = flat[i * BN + j * 4]
        copy(r, S[by * BM, bx * BN // 4])
"""


# TileLang's sparse_mla_bwd idiom: a shared buffer of one dtype reused as a scratch tile of another
SCRATCH = """
kernel scratch(A: f32[M, 64], B: out f32[M, 64]):
    with Kernel(ceildiv(M, 16), threads=128) as bx:
        raw = alloc_shared((16, 128), f16)
        acc = T.view(raw, shape=[16, 64], dtype=f32)
        copy(A[bx * 16, 0], acc)
        for i, j in Parallel(16, 64):
            acc[i, j] = acc[i, j] * 3.0
        copy(acc, B[bx * 16, 0])
"""


# a view made inside a Pipelined loop: the pipeline's prologue copies from it before the body that makes it
LOOP = """
const BM = 64
const BK = 32

kernel colsum(A: f16[M * K], D: i32[M, K], C: out f32[M, 32]):
    with Kernel(ceildiv(M, BM), threads=128) as by:
        A_s = alloc_shared((BM, BK), f16)
        acc = alloc_fragment((BM, BK), f32)
        clear(acc)
        for k in Pipelined(ceildiv(K, BK), num_stages=2):
            A2 = T.Tensor((M, K), f16, A.data)
            copy(A2[by * BM, k * BK], A_s)
            for i, j in Parallel(BM, BK):
                acc[i, j] += f32(A_s[i, j])
        copy(acc, C[by * BM, 0])
"""


def _loop_args(M, K, rng):
    return {"A": rng.standard_normal(M * K).astype(np.float16), "D": np.zeros((M, K), np.int32),
            "C": np.zeros((M, 32), np.float32)}


def _loop_ref(a, M, K):
    nk = -(-K // 32)
    padded = np.zeros((M, nk * 32), np.float32)
    padded[:, :K] = a["A"].reshape(M, K)
    return padded.reshape(M, nk, 32).sum(1)


# tile ops on the regions of views of flat outputs: a ragged column edge is guarded against the view's N (the
# storage is flat, so a guard against it would spill into the next row)
ATOM = """
kernel atom(X: f32[M, N], Out: out f32[M * N], Acc: out f32[M * N]):
    with Kernel(ceildiv(N, 32), ceildiv(M, 16), threads=128) as (bx, by):
        Out2 = T.reshape(Out, (M, N))
        Acc2 = T.reshape(Acc, (M, N))
        t = alloc_fragment((16, 32), f32)
        copy(X[by * 16, bx * 32], t)
        copy(t, Out2[by * 16, bx * 32])
        atomic_add(Acc2[by * 16, bx * 32], t)
        atomic_add(Acc2[by * 16, bx * 32], t)
        fill(Out2[by * 16:by * 16 + 1, bx * 32:bx * 32 + 32], 7.0)
"""


def _atom_args(M, N, rng):
    return {"X": rng.standard_normal((M, N)).astype(np.float32), "Out": np.zeros(M * N, np.float32),
            "Acc": np.zeros(M * N, np.float32)}


def _atom_ref(a):
    out = a["X"].copy()
    out[::16] = 7.0
    return {"Out": out.reshape(-1), "Acc": (2 * a["X"]).reshape(-1)}


def _compile(text, target=None, **kw):
    return tilec.compile("k.tile", text=text, target=target, verify=True, **kw)


def _gemm_args(M, N, K, rng):
    return {"A": rng.standard_normal(M * K).astype(np.float16), "B": rng.standard_normal((K, N)).astype(np.float16),
            "C": np.zeros((M, N), np.float32)}


def _gemm_ref(a, M, N, K):
    return a["A"].reshape(M, K).astype(np.float32) @ a["B"].astype(np.float32)


def _heads_args(B, S, H, rng):
    return {"X": rng.standard_normal((B, S, H * 16)).astype(np.float32), "Y": np.zeros((B, S, H * 16), np.float32),
            "Z": np.zeros((B, S, H, 16), np.float32), "W": np.zeros(B * S, np.float32)}


def _heads_ref(a, B, S, H):
    y = a["X"].reshape(B, S, H, 16) * 2 + np.arange(H, dtype=np.float32)[None, None, :, None]
    w = a["X"].reshape(B, S, H, 16)[..., 0].sum(-1).reshape(-1)
    return {"Y": y.reshape(B, S, H * 16), "Z": (a["X"] - 1.0).reshape(B, S, H, 16), "W": w}


def _bytes_args(M, N, rng):
    f = rng.standard_normal((M, N // 4)).astype(np.float32)
    return {"P": f.view(np.uint8).reshape(M, N).copy(), "F": np.zeros((M, N // 4), np.float32),
            "G": np.zeros((M, N // 4), np.float32)}


SHAPES = {"regular": dict(M=128, N=128, K=64), "ragged": dict(M=70, N=100, K=72)}


@pytest.mark.parametrize("shape", ["regular", "ragged"])
def test_interpreter_matches_numpy(shape):
    rng = np.random.default_rng(1)
    M, N, K = SHAPES[shape].values()
    a = _gemm_args(M, N, K, rng)
    run_kernel(_compile(GEMM).module.kernels[0], a)
    np.testing.assert_allclose(a["C"], _gemm_ref(a, M, N, K), rtol=1e-3, atol=1e-3)
    B, S, H = (2, 64, 4) if shape == "regular" else (3, 45, 3)
    a = _heads_args(B, S, H, rng)
    run_kernel(_compile(HEADS).module.kernels[0], a)
    for name, want in _heads_ref(a, B, S, H).items():
        np.testing.assert_allclose(a[name], want, rtol=1e-6, err_msg=name)
    Mb = 32 if shape == "regular" else 21
    a = _bytes_args(Mb, 32, rng)
    run_kernel(_compile(BYTES).module.kernels[0], a)
    np.testing.assert_array_equal(a["F"].view(np.uint8), a["P"][:, :32].reshape(Mb, -1)[:, :32])
    np.testing.assert_array_equal(a["G"].view(np.uint8), a["P"])
    x = rng.standard_normal((M, N)).astype(np.float32)
    s = np.zeros((M, N // 4), np.float32)
    run_kernel(_compile(SHARED).module.kernels[0], {"A": x, "S": s})
    np.testing.assert_allclose(s, x.reshape(M, N // 4, 4).sum(-1), rtol=1e-5, atol=1e-5)
    a = {"A": x[:, :64].copy(), "B": np.zeros((M, 64), np.float32)}
    run_kernel(_compile(SCRATCH).module.kernels[0], a)
    np.testing.assert_array_equal(a["B"], a["A"] * 3)
    a = _atom_args(M, N, rng)
    run_kernel(_compile(ATOM).module.kernels[0], a)
    for name, want in _atom_ref(a).items():
        np.testing.assert_allclose(a[name], want, rtol=1e-6, err_msg=name)
    a = _loop_args(M, K, rng)
    run_kernel(_compile(LOOP).module.kernels[0], a)
    np.testing.assert_allclose(a["C"], _loop_ref(a, M, K), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target,warp", [("sm80", 32), ("gfx942", 64), ("sm90", 32)])
def test_lowering_matches_the_interpreter(target, warp):
    """Every kernel's lowering, lane by lane in the SIMT model (sm90: TMA maps of the views, and the no-TMA twin)."""
    rng = np.random.default_rng(2)
    M, N, K = SHAPES["ragged"].values()
    r = _compile(GEMM, target)
    for sk in r.simt.kernels:
        a = _gemm_args(M, N, K, rng)
        run_simt(sk, a, {"M": M, "N": N, "K": K}, warp_size=warp)
        np.testing.assert_allclose(a["C"], _gemm_ref(a, M, N, K), rtol=1e-3, atol=1e-3, err_msg=sk.name)
    if target == "sm90":
        maps = r.simt.kernels[0].attrs["tensor_maps"]
        assert [m["tensor"] for m in maps] == ["A", "B"]
        assert maps[0]["view"] == {"dtype": "f16", "shape": ["M", "K"]}
    for text, args, sizes in [(HEADS, _heads_args(3, 45, 3, rng), dict(B=3, S=45, H=3)),
                              (BYTES, _bytes_args(21, 32, rng), dict(M=21, N=32)),
                              (SHARED, {"A": rng.standard_normal((70, 100)).astype(np.float32),
                                        "S": np.zeros((70, 25), np.float32)}, dict(M=70, N=100)),
                              (SCRATCH, {"A": rng.standard_normal((37, 64)).astype(np.float32),
                                         "B": np.zeros((37, 64), np.float32)}, dict(M=37)),
                              (LOOP, _loop_args(70, 72, rng), dict(M=70, K=72)),
                              (ATOM, _atom_args(37, 50, rng), dict(M=37, N=50))]:
        want = {n: v.copy() for n, v in args.items()}
        run_kernel(_compile(text).module.kernels[0], want)
        run_simt(_compile(text, target).simt.kernels[0], args, sizes, warp_size=warp)
        for n in args:
            np.testing.assert_allclose(args[n], want[n], rtol=1e-5, atol=1e-5, err_msg=f"{target} {n}")


def test_views_in_the_ir():
    text = _compile(HEADS).ir()
    assert "X4 = view X as f32[B, S, H, 16]" in text and "Z4 = view Z3 as f32[B, S, H, 16]" in text
    # every view's size proven at compile time; W's dimension B * S (a product of sizes) must fit 32-bit indices
    assert [line.strip() for line in text.splitlines() if "check" in line] == [
        "check (B * S) <= 2147483647"]
    ir = _compile(BYTES).ir()
    assert "P4 = view P as f32[M, N // 4]" in ir and "check (N % 4) == 0" in ir
    cu = _compile(HEADS, "sm80").source
    assert "const float* __restrict__ X4 = reinterpret_cast<const float*>(X);" in cu
    assert "float* Z4 = reinterpret_cast<float*>(Z);" in cu  # a view of a view: the tensor's pointer


# ---------------------------------------------------------------- launch checks

FLAT = """
kernel flat(A: f32[M, N], C: f32[K], O: out f32[K]):
    with Kernel(ceildiv(K, 128), threads=128) as bx:
        A2 = T.Tensor((K,), f32, A.data)
        t = alloc_fragment((128,), f32)
        copy(A2[bx * 128], t)
        copy(t, O[bx * 128])
"""


def test_launch_checks_in_the_interpreter():
    k = _compile(FLAT).module.kernels[0]
    assert k.attrs["launch_checks"] == [{"lhs": "(4 * K)", "op": "<=", "rhs": "((4 * M) * N)",
                                         "message": "view 'A2' (f32[K]) of 'A' (f32[M, N]) must fit inside its "
                                                    "storage"}]
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    o = np.zeros(10, np.float32)
    run_kernel(k, {"A": a, "C": np.zeros(10, np.float32), "O": o})
    np.testing.assert_array_equal(o, a.reshape(-1)[:10])
    with pytest.raises(InterpreterError, match=r"must fit inside its storage: \(4 \* K\) = 52"):
        run_kernel(k, {"A": a, "C": np.zeros(13, np.float32), "O": np.zeros(13, np.float32)})


def _cuda_module(text, target="sm80"):
    from tilec.artifacts import kernel_entry
    from tilec.runtime.module import Module

    r = _compile(text, target)
    entries = [kernel_entry(k, sk, {}) for k, sk in zip(r.module.kernels, r.simt.kernels, strict=True)]
    manifest = {"manifest_version": 1, "kind": "cubin", "archs": ["sm_90a" if target == "sm90" else "sm_80"],
                "driver_api_version": 13000, "toolchain": "nvcc", "kernels": entries}
    return Module(b"\0", manifest), entries


def test_runtime_refuses_a_view_past_its_tensor(monkeypatch):
    import tilec.runtime as rt

    mod, entries = _cuda_module(FLAT)
    fake = install(monkeypatch, FakeDriver({e["name"]: e for e in entries}, capability=(8, 0)))
    assert entries[0]["launch_checks"][0]["op"] == "<="
    mod.flat(np.zeros((3, 4), np.float32), np.zeros(12, np.float32), np.zeros(12, np.float32))
    assert len(fake.launches) == 1
    with pytest.raises(rt.ArgumentError, match=r"flat: view 'A2' .* must fit inside its storage: \(4 \* K\) = 52, "
                                               r"\(\(4 \* M\) \* N\) = 48 \(sizes M=3, N=4, K=13\)"):
        mod.flat(np.zeros((3, 4), np.float32), np.zeros(13, np.float32), np.zeros(13, np.float32))
    assert len(fake.launches) == 1  # refused before the driver


def test_runtime_encodes_a_views_tensor_map(monkeypatch):
    mod, entries = _cuda_module(GEMM, "sm90")
    fake = install(monkeypatch, FakeDriver({e["name"]: e for e in entries}))
    M, N, K = 256, 128, 64
    mod.gemm(np.zeros(M * K, np.float16), np.zeros((K, N), np.float16), np.zeros((M, N), np.float32))
    assert fake.launches[0].fn == "gemm"
    dims = [e[3] for e in fake.encodes]
    assert dims == [(K, M), (N, K)]  # the flat A described with the view's dims, innermost first


def test_c_launcher_checks_the_view():
    from tilec.targets.c_launcher.header import Image, generate_header

    _, entries = _cuda_module(FLAT)
    header = generate_header("flat.h", [Image("sm80", "sm_80", b"\0", entries)], source_name="k.tile",
                             tilec_version="0", toolchain="nvcc", driver_api_version=13000, source_hash="0")
    assert ("if (!((INT64_C(4) * ((int64_t)K)) <= ((INT64_C(4) * ((int64_t)M)) * ((int64_t)N)))) return "
            "CUDA_ERROR_INVALID_VALUE;") in header
    cc = shutil.which("cc")
    cuda_h = [p for p in ("/usr/local/cuda/include", "/usr/include") if (__import__("pathlib").Path(p) /
                                                                          "cuda.h").exists()]
    if cc is None or not cuda_h:
        pytest.skip("no C compiler or cuda.h to compile the header")
    src = header + "\nint main(void) { return (int)flat_launch(0, 0, 0, 0, 3, 4, 13); }\n"
    res = subprocess.run([cc, "-std=c11", "-fsyntax-only", f"-I{cuda_h[0]}", "-x", "c", "-"], input=src,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_c_launcher_runs_the_checks_and_encodes_the_views_maps(tmp_path):
    """A header built for sm90 (a real cubin), linked with test_tensor_maps' mock driver: the view's tensor map
    has the view's dims, and a launch whose sizes make a view larger than its tensor returns INVALID_VALUE."""
    from test_deploy import cuda_include_dir
    from test_tensor_maps import MOCK_DRIVER

    gcc, inc = shutil.which("gcc"), cuda_include_dir()
    if not gcc or not inc or shutil.which("nvcc") is None:
        pytest.skip("gcc, nvcc or the CUDA toolkit's cuda.h not found")
    (tmp_path / "v.tile").write_text(GEMM.replace("kernel gemm(", "kernel vgemm(") + FLAT)
    proc = subprocess.run([sys.executable, "-m", "tilec", "v.tile", "--target", "sm90", "-o", "v.h"], cwd=tmp_path,
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "driver.c").write_text(MOCK_DRIVER)
    (tmp_path / "main.c").write_text(r"""
#include "v.h"
#include <stdlib.h>
#include <string.h>
int main(int argc, char** argv) {
  CUresult rc;
  (void)argc;
  if (strcmp(argv[1], "vgemm") == 0)
    rc = vgemm_launch(0, 0x10000, 0x20000, 0x30000, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  else
    rc = flat_launch(0, 0x10000, 0x20000, 0x30000, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  printf("rc %d\n", (int)rc);
  return 0;
}
""")
    flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{inc}", f"-I{tmp_path}"]
    subprocess.run([gcc, *flags, "main.c", "driver.c", "-o", "prog", "-lpthread"], cwd=tmp_path, check=True)

    def run(*args):
        out = subprocess.run([str(tmp_path / "prog"), *map(str, args)], capture_output=True, text=True, timeout=60,
                             check=True).stdout.splitlines()
        return [ln for ln in out if ln.startswith(("encode", "launch", "rc"))]

    out = run("vgemm", 256, 64, 128)  # M, K, N
    assert [ln.split(" strides")[0] for ln in out if ln.startswith("encode")] == [
        "encode dt 6 rank 2 addr 65536 dims 64 256", "encode dt 6 rank 2 addr 131072 dims 128 64"]
    assert out[-1] == "rc 0" and any(ln.startswith("launch vgemm ") for ln in out)
    assert run("flat", 3, 4, 12)[-2:] == ["launch flat grid 1 1 1 block 128 shared 0 args 65536 131072 196608 3",
                                          "rc 0"]
    assert run("flat", 3, 4, 13) == ["rc 1"]  # CUDA_ERROR_INVALID_VALUE, nothing launched


def test_sm90_build_uses_tma_for_views(tmp_path):
    from test_cli_nvcc import _cuobjdump

    cuobjdump = _cuobjdump()
    if shutil.which("nvcc") is None or cuobjdump is None:
        pytest.skip("nvcc / cuobjdump not on PATH")
    src = tmp_path / "g.tile"
    src.write_text(GEMM)
    out = tmp_path / "g.cubin"
    out.write_bytes(tilec.compile(src, "sm90", emit="cubin").data)
    sass = subprocess.run([cuobjdump, "-sass", str(out)], capture_output=True, text=True, check=True).stdout
    functions = {part.split()[0]: part for part in sass.split("Function : ")[1:]}
    assert "UTMALDG" in functions["gemm"] and "UTMALDG" not in functions["gemm__no_tma"]


@pytest.mark.parametrize("target", ["gfx942", "gfx90a"])
def test_hip_builds_views(tmp_path, target):
    if shutil.which("hipcc") is None and shutil.which("clang-19") is None:
        pytest.skip("neither hipcc nor clang-19 on PATH")
    for name, text in (("gemm", GEMM), ("bytes", BYTES), ("scratch", SCRATCH)):
        src = tmp_path / f"{name}.tile"
        src.write_text(text)
        art = tilec.compile(src, target, emit="hsaco")
        assert art.data[:4] == b"\x7fELF", name


# ---------------------------------------------------------------- WebGPU


def test_webgpu_runs_views(tmp_path):
    from test_wgsl import _module, _require, _run_and_compare

    from tilec.runtime import wgsl

    ok, why = wgsl.available()
    _require(ok, f"WebGPU: {why}")
    for name, text, sizes in [("heads", HEADS, [dict(B=2, S=64, H=4), dict(B=3, S=45, H=3)]),
                              ("groups", SHARED, [dict(M=64, N=128), dict(M=37, N=100)]),
                              ("atom", ATOM, [dict(M=64, N=64), dict(M=37, N=50)]),
                              ("colsum", LOOP, [dict(M=128, K=64), dict(M=70, K=72)])]:
        r = _compile(text, "webgpu")
        mod = _module(r, tmp_path, name)
        for s in sizes:
            _run_and_compare(r, mod, s)


# ---------------------------------------------------------------- refusals


def _error(text, target=None):
    with pytest.raises(CompileError) as e:
        tilec.compile("k.tile", text=text, target=target)
    d = next(d for d in e.value.diagnostics if d.severity == "error")
    shown = render(d, e.value.sources)
    assert shown.startswith(f"k.tile:{d.span.line}:{d.span.col}: error: ") and "^" in shown
    return d.message, d.span


def _k(body, sig="A: f32[M, N], B: out f32[M, N]"):
    return f"kernel k({sig}):\n    with Kernel(1, threads=128) as bx:\n" + "".join(
        f"        {line}\n" for line in body)


@pytest.mark.parametrize("body,message,col", [
    (["A2 = T.reshape(A, (M * N + 1,))"], "T.reshape: the view 'A2' (f32[M * N + 1]) of 'A' (f32[M, N]) must cover "
     "its storage exactly: (M * N + 1) * 4 bytes against M * N * 4 bytes", 14),
    (["A2 = T.Tensor((M, 2 * N), f32, A.data)"], "must fit inside its storage: M * (2 * N) * 4 bytes", 14),
    (["A2 = T.view(A, (M, N), f16)"], "must cover its storage exactly: M * N * 2 bytes against M * N * 4 bytes "
     "(T.Tensor(shape, dtype, buf.data) views a part of it)", 14),
    (["x = 1", "A2 = T.reshape(x, (M, N))"], "T.reshape views a tensor or a shared buffer; this is a local variable",
     24),
    (["A2 = T.reshape(A[0:4, :], (4, N))"], "this is a region (view the whole buffer, then index the view)", 24),
    (["f = alloc_fragment((4, 4), f32)", "f2 = T.reshape(f, (16,))"], "of fragment 'f' is not supported", 24),
    (["A2 = T.Tensor((M, bx), f32, A.data)"], "a view's dimension is an integer, a const, a runtime size", 27),
    (["A2 = T.Tensor((M, N), f32)"], "it needs the storage it views", 14),
    (["A2 = T.view(A, dtype=bool)"], "a bool is not a bit pattern", 14),
    (["A2 = T.reshape(A, (N, M))", "copy(B, A2)"], "cannot copy into 'A2' (a view of input tensor 'A'); declare 'A' "
     "`out`", 17),
    (["A2 = T.reshape(A, (N, M))", "for i in Parallel(4):", "    A2[0, i] = 1.0"],
     "cannot assign to 'A2' (a view of input tensor 'A'); declare 'A' `out`", 13),
    (["A2 = T.reshape(A, (N, M))", "atomic_add(A2[0, 0], 1.0)"], "cannot update 'A2' (a view of input tensor 'A') "
     "atomically", 20),
    (["copy(T.reshape(A, (N, M)), B)"], "T.reshape makes a view: assign it to a name first", 14),
])
def test_refusals_are_located(body, message, col):
    got, span = _error(_k(body))
    assert message in got and span.col == col, got


def test_dtype_size_mismatch():
    got, _ = _error(_k(["P4 = T.view(P, dtype=f32)"], "P: u8[M, 6], B: out f32[M, N]"))
    assert "innermost dimension (6) must be a multiple of 4" in got


def test_shared_view_refusals():
    gemm_operand = """
kernel k(A: f16[64, 32], B: f16[32, 64], C: out f32[64, 64]):
    with Kernel(1, threads=128) as bx:
        A_s = alloc_shared((64, 32), f16)
        B_s = alloc_shared((32, 64), f16)
        A_flat = T.reshape(A_s, (2048,))
        acc = alloc_fragment((64, 64), f32)
        copy(A, A_s)
        copy(B, B_s)
        gemm(A_s, B_s, acc)
        for i, j in Parallel(64, 64):
            acc[i, j] += f32(A_flat[i * 32 + j // 2])
        copy(acc, C)
"""
    got, span = _error(gemm_operand, "sm90")
    assert "view 'A_flat' of shared buffer 'A_s' reads it row-major, but 'A_s' is a wgmma operand" in got
    assert span.line == 6
    got, _ = _error(gemm_operand, "gfx942")
    assert "'A_s' is an MFMA operand" in got
    r = _compile(gemm_operand, "sm80")  # mma.sync reads a linear operand too (no swizzle): accepted, and right
    rng = np.random.default_rng(5)
    a = {"A": rng.standard_normal((64, 32)).astype(np.float16), "B": rng.standard_normal((32, 64)).astype(np.float16),
         "C": np.zeros((64, 64), np.float32)}
    want = {n: v.copy() for n, v in a.items()}
    run_kernel(r.module.kernels[0], want)
    run_simt(r.simt.kernels[0], a, {})
    np.testing.assert_allclose(a["C"], want["C"], rtol=1e-3, atol=1e-3)
    staged = """
kernel k(A: f32[M, 64], B: out f32[M, 64]):
    with Kernel(1, threads=128) as bx:
        s = alloc_shared((32, 64), f32)
        s2 = T.reshape(s, (2048,))
        f = alloc_fragment((32, 64), f32)
        clear(f)
        for k in Pipelined(ceildiv(M, 32), num_stages=2):
            copy(A[k * 32, 0], s)
            for i, j in Parallel(32, 64):
                f[i, j] += s2[i * 64 + j]
        copy(f, B[0, 0])
"""
    got, _ = _error(staged, "sm80")
    assert "a Pipelined loop keeps several stages of it" in got
    got, _ = _error(_k(["s = alloc_shared((4, 4), f32)", "s2 = T.view(s, (M,))"]))
    assert "a view of shared buffer 's' needs a compile-time shape" in got
    got, _ = _error(_k(["s = alloc_shared((4, 4), f32)", "for t in Serial(2):", "    s2 = T.view(s, (16,))"]))
    assert "a view of shared buffer 's' must be made at the top level of the kernel body" in got


def test_backend_refusals():
    got, span = _error(SCRATCH, "webgpu")
    assert "view 'acc' reads shared buffer 'raw' (f16) as f32, which WGSL cannot do" in got and span.line == 5
    with pytest.raises(CompileError) as e:
        tilec.compile("k.tile", text=BYTES, target="webgpu")
    (d,) = [d for d in e.value.diagnostics if "view 'P4' reads tensor 'P' (u8) as f32, which WebGPU cannot do" in
            d.message]
    assert d.span.line == 4
    # AscendC takes views of global tensors (run on its model in tests/test_ascend_columns.py), not of tiles
    src = tilec.compile("k.tile", text=GEMM, target="ascend910b").source
    assert "A2.SetGlobalBuffer((__gm__ half*)A_addr);" in src


def test_manifest_rules_for_views():
    from tilec.manifest import ManifestError, launch_checks, tensor_map_specs

    entry = {"name": "k", "params": [{"name": "A", "kind": "tensor", "dtype": "u8", "output": False,
                                      "shape": ["M"]}], "sizes": ["M"]}
    assert launch_checks(entry) == []
    good = {"lhs": "M", "op": "<=", "rhs": "(4 * M)", "message": "m"}
    assert launch_checks(dict(entry, launch_checks=[good])) == [good]
    for bad in ({**good, "op": "<"}, {**good, "lhs": 3}, "M <= 4"):
        with pytest.raises(ManifestError, match="launch check 0 must be"):
            launch_checks(dict(entry, launch_checks=[bad]))
    tmap = {"tensor": "A", "box": [64, 32], "swizzle": 64, "view": {"dtype": "f16", "shape": ["M // 64", 32]}}
    (spec,) = tensor_map_specs(dict(entry, tensor_maps=[tmap]))
    assert (spec.view_shape, spec.elem_bytes, spec.dtype) == (("M // 64", 32), 2, 6)
    for view in ({"dtype": "f16"}, {"dtype": "f17", "shape": ["M"]}, {"dtype": "f16", "shape": [1.5, 2]}):
        with pytest.raises(ManifestError, match="view"):
            tensor_map_specs(dict(entry, tensor_maps=[dict(tmap, view=view)]))
    with pytest.raises(ManifestError, match="box"):  # the box's rank is the view's
        tensor_map_specs(dict(entry, tensor_maps=[dict(tmap, view={"dtype": "f16", "shape": ["M"]})]))


def test_views_in_helpers():
    helper = """
def flat_copy(src, dst, n):
    src2 = T.reshape(src, (n,))
    t = alloc_fragment((32,), f32)
    copy(src2[0], t)
    copy(t, dst[0])

def bad(r):
    r2 = T.reshape(r, (4,))

kernel k(A: f32[M, N], B: out f32[M * N]):
    with Kernel(1, threads=128) as bx:
        flat_copy(A, B, M * N)
"""
    k = _compile(helper).module.kernels[0]
    a = {"A": np.arange(40, dtype=np.float32).reshape(4, 10), "B": np.zeros(40, np.float32)}
    run_kernel(k, a)
    np.testing.assert_array_equal(a["B"][:32], np.arange(32))
    got, span = _error(helper + "        bad(A[0:2, 0:2])\n")
    assert "this is a region (view the whole buffer, then index the view)" in got and span.line == 9


def test_the_hip_launcher_tests_the_launch_checks():
    """The HIP `-c` launcher refuses a view past its tensor as the CUDA one does (the shared launch_check_lines)."""
    from tilec.artifacts import kernel_entry
    from tilec.targets.hip.launcher import generate_object_source

    r = _compile(FLAT, "gfx942")
    entries = [kernel_entry(k, sk, {}) for k, sk in zip(r.module.kernels, r.simt.kernels, strict=True)]
    src, _, _ = generate_object_source("flat", [("gfx942", b"\0", entries)], source_name="flat.tile",
                                       tilec_version="0", toolchain="clang", prefix="",
                                       embed=lambda n, d: f"static const unsigned char {n}[1] = {{0}};")
    assert "return hipErrorInvalidValue; /* view 'A2'" in src


FLAT_PRODUCT = """
kernel flatten(A: f16[M, N], B: out f16[M * N]):
    with Kernel(ceildiv(M * N, 256), threads=128) as bx:
        F = T.reshape(A, (M * N,))
        s = alloc_fragment((256,), f16)
        copy(F[bx * 256], s)
        copy(s, B[bx * 256])
"""


class _DeviceArray:
    """A device tensor's description only (no memory): the binder reads shapes and pointers, the fake driver
    launches nothing."""

    def __init__(self, shape, ptr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f2", "data": (ptr, False), "version": 3}


def test_a_product_of_sizes_must_fit_the_kernels_32_bit_indices(monkeypatch):
    """M and N each fit in 32 bits, M * N (B's dimension, F's) may not: the kernel would index past 2**31 with
    wrapped integers. One launch check (B's and F's are the same) refuses such a launch before the driver."""
    import tilec.runtime as rt

    mod, entries = _cuda_module(FLAT_PRODUCT)
    assert entries[0]["launch_checks"] == [{"lhs": "(M * N)", "op": "<=", "rhs": "2147483647", "message":
                                            "dimension 0 of 'B' (M * N) must fit the kernel's 32-bit indices"}]
    fake = install(monkeypatch, FakeDriver({e["name"]: e for e in entries}, capability=(8, 0)))
    mod.flatten(_DeviceArray((1000, 1000), 1 << 20), _DeviceArray((1000 * 1000,), 1 << 30))
    assert len(fake.launches) == 1
    with pytest.raises(rt.ArgumentError, match=r"must fit the kernel's 32-bit indices: \(M \* N\) = 4294967296"):
        mod.flatten(_DeviceArray((65536, 65536), 1 << 20), _DeviceArray((65536 * 65536,), 1 << 40))
    assert len(fake.launches) == 1
