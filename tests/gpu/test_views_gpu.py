"""Views (`T.reshape`, `T.view`, `T.Tensor(shape, dtype, A.data)`) on the GPU (`pytest -m gpu tests/gpu`): the
kernels of tests/test_views.py built for sm90 where the compiler is, run through tilec.runtime on an H200 against
numpy at a regular and a ragged shape: the TMA kernel reading a flat tensor through its view and its no-TMA twin
(a row that is not a multiple of 16 bytes), views of views, a dtype change, shared views, and the launch check that
refuses a view larger than its tensor.

    python tests/gpu/test_views_gpu.py build .artifacts/views     # here: needs the compiler and nvcc
    python tests/gpu/test_views_gpu.py run .artifacts/views       # on the GPU: numpy, the CUDA driver, tilec.runtime
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TILEC_VIEWS_ARTIFACTS", ROOT / ".artifacts" / "views"))
KERNELS = ("GEMM", "HEADS", "BYTES", "SHARED", "SCRATCH", "FLAT", "ATOM", "LOOP")

pytestmark = pytest.mark.gpu


def build(out: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import test_views

    import tilec

    out.mkdir(parents=True, exist_ok=True)
    for name in KERNELS:
        src = out / f"{name.lower()}.tile"
        src.write_text(getattr(test_views, name))
        art = tilec.compile(src, "sm90", emit="cubin")
        (out / f"{name.lower()}.cubin").write_bytes(art.data)
        (out / f"{name.lower()}.cubin.json").write_bytes(art.manifest)
        print(f"built {name.lower()}.cubin")


def run(out: Path) -> int:
    import numpy as np

    import tilec.runtime as rt

    rng = np.random.default_rng(0)
    mods = {n: rt.load(out / f"{n.lower()}.cubin") for n in KERNELS}
    failures = 0

    def check(what, got, want, tol=1e-3):
        nonlocal failures
        err = float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)))) if np.size(want) else 0
        ok = np.allclose(got, want, rtol=tol, atol=tol)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: max |err| {err:.3g}")

    for M, N, K in ((256, 128, 64), (70, 100, 72), (70, 100, 100)):  # K=100: 200-byte rows, the no-TMA twin
        a = rng.standard_normal(M * K).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        c = np.zeros((M, N), np.float32)
        mods["GEMM"].gemm(a, b, c)
        check(f"gemm through views M={M} N={N} K={K}", c, a.reshape(M, K).astype(np.float32) @ b.astype(np.float32))
    try:
        import torch

        if torch.cuda.is_available():
            for K, want in ((72, "gemm"), (100, "gemm__no_tma")):
                # N = 128: B's rows are 256 bytes, so K alone decides (K = 100: the view's 200-byte rows)
                args = (torch.zeros(70 * K, dtype=torch.float16, device="cuda"),
                        torch.zeros(K, 128, dtype=torch.float16, device="cuda"),
                        torch.zeros(70, 128, dtype=torch.float32, device="cuda"))
                got = mods["GEMM"].gemm.launch_plan(*args).kernel.name
                failures += got != want
                print(f"{'ok  ' if got == want else 'FAIL'} K={K} launches {got} (expected {want})")
    except ImportError:
        print("(no torch: the TMA / twin choice is not inspected)")
    for B, S, H in ((2, 64, 4), (3, 45, 3)):
        x = rng.standard_normal((B, S, H * 16)).astype(np.float32)
        y, z, w = np.zeros_like(x), np.zeros((B, S, H, 16), np.float32), np.zeros(B * S, np.float32)
        mods["HEADS"].heads(x, y, z, w)
        x4 = x.reshape(B, S, H, 16)
        check(f"heads Y B={B} S={S} H={H}", y, (x4 * 2 + np.arange(H, dtype=np.float32)[None, None, :, None])
              .reshape(B, S, H * 16), 1e-6)
        check(f"heads Z B={B} S={S} H={H}", z, x4 - 1.0, 1e-6)
        check(f"heads W (atomics) B={B} S={S} H={H}", w, x4[..., 0].sum(-1).reshape(-1), 1e-5)
    for M in (32, 21):
        f = rng.standard_normal((M, 8)).astype(np.float32)
        p = f.view(np.uint8).reshape(M, 32).copy()
        F, G = np.zeros((M, 8), np.float32), np.zeros((M, 8), np.float32)
        mods["BYTES"].bytes(p, F, G)
        check(f"bytes as f32 M={M}", F.view(np.uint8), p, 0)
        check(f"f32 as bytes M={M}", G.view(np.uint8), p, 0)
    for M, N in ((64, 128), (70, 100)):
        x = rng.standard_normal((M, N)).astype(np.float32)
        s = np.zeros((M, N // 4), np.float32)
        mods["SHARED"].groups(x, s)
        check(f"shared view M={M} N={N}", s, x.reshape(M, N // 4, 4).sum(-1), 1e-5)
        y = np.zeros((M, 64), np.float32)
        mods["SCRATCH"].scratch(x[:, :64].copy(), y)
        check(f"shared f16 buffer as f32 scratch M={M}", y, x[:, :64] * 3, 0)
    for M, N in ((64, 64), (37, 50)):
        x = rng.standard_normal((M, N)).astype(np.float32)
        out, acc = np.zeros(M * N, np.float32), np.zeros(M * N, np.float32)
        mods["ATOM"].atom(x, out, acc)
        want = x.copy()
        want[::16] = 7.0
        check(f"copy / fill into a view of a flat output M={M} N={N}", out, want.reshape(-1), 0)
        check(f"atomics into a view of a flat output M={M} N={N}", acc, 2 * x.reshape(-1), 1e-6)
    for M, K in ((128, 64), (70, 72)):
        a16 = rng.standard_normal(M * K).astype(np.float16)
        c = np.zeros((M, 32), np.float32)
        mods["LOOP"].colsum(a16, np.zeros((M, K), np.int32), c)
        nk = -(-K // 32)
        padded = np.zeros((M, nk * 32), np.float32)
        padded[:, :K] = a16.reshape(M, K)
        check(f"a view made in a Pipelined loop M={M} K={K}", c, padded.reshape(M, nk, 32).sum(1), 1e-3)
    o = np.zeros(12, np.float32)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    mods["FLAT"].flat(a, np.zeros(12, np.float32), o)
    check("T.Tensor view of a prefix", o, a.reshape(-1))
    try:
        mods["FLAT"].flat(a, np.zeros(13, np.float32), np.zeros(13, np.float32))
        failures += 1
        print("FAIL a view past its tensor was launched")
    except rt.ArgumentError as e:
        print(f"ok   refused: {e}")
    print("all passed" if not failures else f"{failures} failed")
    return failures


def test_views_on_the_gpu():
    pytest.importorskip("numpy")
    if not (ARTIFACTS / "gemm.cubin").is_file():
        pytest.skip(f"no prebuilt kernels in {ARTIFACTS}; run `python tests/gpu/test_views_gpu.py build {ARTIFACTS}`")
    assert run(ARTIFACTS) == 0


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2])
    if mode == "build":
        build(where)
    else:
        sys.exit(1 if run(where) else 0)
