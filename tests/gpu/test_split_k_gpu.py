"""Split-K on the GPU (`pytest -m gpu tests/gpu`), through every way tilec.runtime gets a workspace: the kept one of
the current stream (torch), a call on an explicit stream (a workspace for the call), cupy arrays (a cuMemAlloc
workspace kept per stream) and numpy arrays, at ragged shapes against torch.

- examples/handover/gemm_split_k_last_block.tile: one launch, the last block of each tile summing the planes through
  a zeroed counter. The runtimes zero the counters once and keep them; each call leaves them zero. Calls alternate
  between shapes on one kept workspace, so a counter a call left nonzero would make a wrong block sum the planes and
  the next result wrong.
- gemm.tile's tuned split-K variant (two launches), the same way.

The artifacts are bench/splitk_gpu.py's (`python bench/splitk_gpu.py build DIR`); TILEC_SPLITK_ARTIFACTS names DIR.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TILEC_SPLITK_ARTIFACTS", ROOT / ".artifacts" / "splitk"))

pytestmark = pytest.mark.gpu

# (M, N, K): decode rows, ragged edges in every dimension, K not a multiple of a split's share, one tile only
SHAPES = [(1, 4096, 4096), (37, 1001, 3003), (200, 3072, 4096), (64, 4099, 2055), (16, 128, 8192), (130, 250, 2048)]
BUILDS = ["last_block_64x128_split2", "last_block_64x128_split4", "last_block_128x128_split2",
          "last_block_128x128_split4", "gemm_f16_dispatch"]


def _kernels(build: str):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    path = ARTIFACTS / f"{build}.cubin"
    if not path.is_file():
        pytest.skip(f"no build {path}; run `python bench/splitk_gpu.py build {ARTIFACTS}`")
    import tilec.runtime as rt

    gemm = rt.load(path).gemm
    if build.startswith("last_block"):
        return torch, [gemm]
    return torch, [v for v in gemm.variants if hasattr(v, "stages")]  # the two-launch variant


def _operands(torch, m: int, n: int, k: int, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g, dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", generator=g, dtype=torch.float16)
    return a, b, a.float() @ b.float()


def _check(out, want, what: str) -> None:
    scale = float(want.abs().max()) or 1.0
    err = float((out.float() - want).abs().max()) / scale
    assert err < 1e-2, f"{what}: max |C - torch| / max |torch| = {err:.3g}"


@pytest.mark.parametrize("build", BUILDS)
def test_split_k_matches_torch_on_the_kept_and_on_a_call_s_own_workspace(build):
    torch, kernels = _kernels(build)
    for kernel in kernels:
        for seed, (m, n, k) in enumerate(SHAPES):
            a, b, want = _operands(torch, m, n, k, seed)
            what = f"{build} ({kernel.name}) at {m}x{n}x{k}"
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
            kernel(a, b, c)  # the kept workspace of the current stream
            torch.cuda.synchronize()
            _check(c, want, what)
            side = torch.cuda.Stream()
            c2 = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
            torch.cuda.current_stream().synchronize()
            kernel(a, b, c2, stream=side.cuda_stream)  # a workspace for the call, its counters cleared on `side`
            side.synchronize()
            _check(c2, want, what + " on an explicit stream")


@pytest.mark.parametrize("build", BUILDS)
def test_calls_alternating_between_shapes_find_their_counters_zero(build):
    """Thirty calls, three shapes in turn, on the one kept workspace, each result checked."""
    torch, kernels = _kernels(build)
    cases = [_operands(torch, m, n, k, 100 + i) for i, (m, n, k) in enumerate(SHAPES[:3])]
    for kernel in kernels:
        outs = [torch.empty(want.shape, device="cuda", dtype=torch.float16) for _, _, want in cases]
        for step in range(30):
            a, b, _ = cases[step % 3]
            outs[step % 3].fill_(float("nan"))
            kernel(a, b, outs[step % 3])
            if step % 3 == 2:
                torch.cuda.synchronize()
                for (_, _, want), out in zip(cases, outs, strict=True):
                    _check(out, want, f"{build}, call {step}")


@pytest.mark.parametrize("build", ["last_block_64x128_split4", "gemm_f16_dispatch"])
def test_cupy_and_numpy_arguments(build):
    torch, kernels = _kernels(build)
    cp = pytest.importorskip("cupy")
    m, n, k = 37, 1001, 3003
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    want = torch.from_numpy(a.astype(np.float32) @ b.astype(np.float32)).cuda()
    for kernel in kernels:
        for _ in range(3):  # the cuMemAlloc workspace (and counters), kept for the stream
            c = cp.full((m, n), np.nan, dtype=cp.float16)
            kernel(cp.asarray(a), cp.asarray(b), c)
            cp.cuda.runtime.deviceSynchronize()
            _check(torch.as_tensor(c.get()).cuda(), want, f"{build} on cupy arrays")
        c = np.full((m, n), np.nan, dtype=np.float16)
        kernel(a, b, c)
        _check(torch.from_numpy(c).cuda(), want, f"{build} on numpy arrays")
