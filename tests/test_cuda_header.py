"""Tests for tilec's CUDA device header and the mma/ldmatrix fragment layouts.

* The header compiles with nvcc (sm_80, sm_90a) in a kernel that uses every
  helper, and the sm_80 SASS holds the tensor-core / ldmatrix / cp.async
  instructions.
* The same kernel compiles with NVRTC (through ctypes), with and without the
  half-precision headers on the include path.
* mma_layouts is checked for self-consistency on the CPU, and (``-m gpu``)
  against the hardware: the kernel's ldmatrix registers and mma results are
  compared with what the layout functions predict.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilec.targets.cuda import mma_layouts as ml

INCLUDE_DIR = Path(ml.__file__).resolve().parent / "include"
HEADER = INCLUDE_DIR / "tilec_cuda.h"

# ---------------------------------------------------------------------------
# The self-test kernel: one warp, exercises every helper and writes results
# the GPU test can check.  Buffer offsets are mirrored in _run_on_gpu().
# ---------------------------------------------------------------------------

KERNEL_SRC = r"""
#include "tilec_cuda.h"

// Lets a test see in the PTX which way the header's fp16 guard went (41 + 0/1:
// a zero initializer would not be printed).
__device__ int tilec_fp16_marker = 41 + TILEC_HAS_FP16;

extern "C" __global__ void __launch_bounds__(32)
tilec_selftest(const void* A, const void* B, const void* Abf, const void* Bbf, const float* C,
               const int* ints, const float* floats, float* fout, unsigned* uout, int* iout,
               float* fatom, void* hatom, void* batom) {
  __shared__ __align__(16) unsigned short sA[16 * 16];
  __shared__ __align__(16) unsigned short sB[16 * 8];
  __shared__ __align__(16) unsigned short sAbf[16 * 16];
  __shared__ __align__(16) unsigned short sBbf[16 * 8];
  __shared__ __align__(16) unsigned sZ[32 * 4];

  const unsigned lane = tl::lane_id();  // launched as exactly one warp
  const char* gA = static_cast<const char*>(A);
  const char* gB = static_cast<const char*>(B);
  const char* gAbf = static_cast<const char*>(Abf);
  const char* gBbf = static_cast<const char*>(Bbf);

  // --- cp.async: real copies of 16, 8 and 4 bytes, then predicated-off ones.
  for (int j = 0; j < 4; ++j) sZ[lane * 4 + j] = 0xdeadbeefu;
  __syncthreads();
  tl::cp_async_cg_16(reinterpret_cast<char*>(sA) + 16 * lane, gA + 16 * lane);
  tl::cp_async_ca_16(reinterpret_cast<char*>(sAbf) + 16 * lane, gAbf + 16 * lane, true);
  tl::cp_async_ca_8(reinterpret_cast<char*>(sB) + 8 * lane, gB + 8 * lane, true);
  tl::cp_async_ca_4(reinterpret_cast<char*>(sBbf) + 4 * lane, gBbf + 4 * lane, true);
  tl::cp_async_ca_4(reinterpret_cast<char*>(sBbf) + 128 + 4 * lane, gBbf + 128 + 4 * lane, true);
  tl::cp_async_commit();
  const bool pred = ints[64] != 0;  // 0 from the host: every copy below must zero-fill
  char* z = reinterpret_cast<char*>(sZ) + 16 * lane;
  if (lane < 8) {
    tl::cp_async_cg_16(z, gA, pred);
  } else if (lane < 16) {
    tl::cp_async_ca_16(z, gA, pred);
  } else if (lane < 24) {
    tl::cp_async_ca_8(z, gA, pred);
    tl::cp_async_ca_8(z + 8, gA, pred);
  } else {
    for (int j = 0; j < 4; ++j) tl::cp_async_ca_4(z + 4 * j, gA, pred);
  }
  tl::cp_async_commit();
  tl::cp_async_wait<1>();
  tl::cp_async_wait<0>();
  tl::cp_async_wait_all();
  __syncthreads();

  // --- ldmatrix, every variant, on the standard 16x16 tile addressing.
  const int trow = lane % 16, tcol = (lane / 16) * 8;
  const unsigned short* tile = &sA[trow * 16 + tcol];
  unsigned a[4], at[4], r2[2], r2t[2], r1, r1t;
  tl::ldmatrix_x4(a, tile);
  tl::ldmatrix_x4_trans(at, tile);
  tl::ldmatrix_x2(r2, tile);
  tl::ldmatrix_x2_trans(r2t, tile);
  tl::ldmatrix_x1(r1, tile);
  tl::ldmatrix_x1_trans(r1t, tile);
  for (int j = 0; j < 4; ++j) {
    uout[lane * 4 + j] = a[j];
    uout[128 + lane * 4 + j] = at[j];
  }
  for (int j = 0; j < 2; ++j) {
    uout[256 + lane * 2 + j] = r2[j];
    uout[320 + lane * 2 + j] = r2t[j];
  }
  uout[384 + lane] = r1;
  uout[416 + lane] = r1t;
  uout[448 + lane] = lane;

  // --- mma f16: A via ldmatrix.x4, B (row-major K x N in smem) via ldmatrix.x2.trans.
  const int g = lane >> 2, t = lane & 3;
  unsigned b[2];
  tl::ldmatrix_x2_trans(b, &sB[(lane % 16) * 8]);
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
  tl::mma_m16n8k16_f16_f32(d, a, b, c);
  for (int i = 0; i < 4; ++i) fout[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d[i];

  // --- mma bf16: fragments gathered from global by hand, d aliasing c.
  unsigned abf[4], bbf[2];
  for (int j = 0; j < 4; ++j) {
    const int row = g + 8 * (j & 1), col = 2 * t + 8 * (j >> 1);
    abf[j] = tl::ld_32(gAbf + 2 * (row * 16 + col));
  }
#if TILEC_HAS_FP16
  const tl::bf16* Bb = static_cast<const tl::bf16*>(Bbf);
  for (int j = 0; j < 2; ++j) {
    const int k = 2 * t + 8 * j;
    bbf[j] = tl::pack_bf162(__bfloat162float(Bb[k * 8 + g]), __bfloat162float(Bb[(k + 1) * 8 + g]));
  }
#else
  for (int j = 0; j < 2; ++j) bbf[j] = 0u;
#endif
  float acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = c[i];
  tl::mma_m16n8k16_bf16_f32(acc, abf, bbf, acc);
  for (int i = 0; i < 4; ++i) fout[128 + (g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];

  // --- packing and zero-fill readback.
  if (lane == 0) {
    uout[480] = tl::pack_half2(floats[0], floats[1]);
    uout[481] = tl::pack_bf162(floats[0], floats[1]);
  }
  for (int j = 0; j < 4; ++j) uout[512 + lane * 4 + j] = sZ[lane * 4 + j];

  // --- vector loads / stores (global and shared through generic pointers).
  tl::st_128(uout + 640 + 4 * lane, tl::ld_global_nc_128(gA + 16 * lane));
  tl::st_64(uout + 768 + 4 * lane, tl::ld_64(gA + 16 * lane));
  tl::st_64(uout + 768 + 4 * lane + 2, tl::ld_64(gA + 16 * lane + 8));
  for (int j = 0; j < 4; ++j) tl::st_32(uout + 896 + 4 * lane + j, tl::ld_32(gA + 16 * lane + 4 * j));
  tl::st_128(uout + 1024 + 4 * lane, tl::ld_128(&sA[8 * lane]));

  // --- warp reductions.
  const float x = floats[32 + lane], y = floats[64 + lane];
  fout[256 + lane] = tl::warp_reduce_sum(x);
  fout[288 + lane] = tl::warp_reduce_max(x);
  fout[320 + lane] = tl::warp_reduce_min(x);
  fout[352 + lane] = tl::warp_reduce_sum(x, 8);
  const int k0 = ints[lane], k1 = ints[32 + lane];
  iout[lane] = tl::warp_reduce_sum(k0);
  iout[32 + lane] = tl::warp_reduce_max(k0);
  iout[64 + lane] = tl::warp_reduce_min(k0);
  iout[96 + lane] = tl::warp_reduce_max(k0, 4);

  // --- math and min/max.
  fout[384 + lane] = tl::exp2f_approx(y);
  fout[416 + lane] = tl::rsqrt(floats[96 + lane]);
  fout[448 + lane] = tl::max(x, y);
  fout[480 + lane] = tl::min(x, y);
  iout[128 + lane] = tl::max(k0, k1);
  iout[160 + lane] = tl::min(k0, k1);
  iout[192 + lane] = static_cast<int>(tl::max(static_cast<unsigned>(k0), static_cast<unsigned>(k1)));
  iout[224 + lane] = tl::floordiv(k0, k1);
  iout[256 + lane] = tl::floormod(k0, k1);
  iout[288 + lane] = tl::ceildiv(ints[96 + lane], ints[128 + lane]);
  iout[320 + lane] = static_cast<int>(tl::floordiv<long long>(k0, k1));
#if TILEC_HAS_FP16
  fout[512 + lane] = __half2float(tl::max(__float2half(x), __float2half(y)));
  fout[544 + lane] = __half2float(tl::min(__float2half(x), __float2half(y)));
  fout[576 + lane] = __bfloat162float(tl::max(__float2bfloat16(x), __float2bfloat16(y)));
  fout[608 + lane] = __bfloat162float(tl::min(__float2bfloat16(x), __float2bfloat16(y)));
  fout[640 + lane] = __half2float(tl::warp_reduce_max(__float2half(x)));
  fout[672 + lane] = __bfloat162float(tl::warp_reduce_min(__float2bfloat16(x)));
  fout[704 + lane] = __half2float(tl::warp_reduce_sum(__float2half(x), 16));
#endif

  // --- atomics.
  tl::atomic_add(fatom, 1.0f);
  iout[384 + lane] = tl::atomic_add(&iout[352], static_cast<int>(lane) + 1);
#if TILEC_HAS_FP16
  tl::atomic_add(static_cast<tl::half*>(hatom), __float2half(1.0f));
  tl::atomic_add(static_cast<tl::bf16*>(batom), __float2bfloat16(1.0f));
#endif
}
"""

N_FOUT, N_UOUT, N_IOUT = 736, 1152, 416

# ---------------------------------------------------------------------------
# Toolchain discovery.
# ---------------------------------------------------------------------------


def _require(found, what: str):
    """Skip when a toolchain piece is missing; fail instead under TILEC_REQUIRE_TOOLCHAINS=1."""
    if found:
        return found
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{what} not found and TILEC_REQUIRE_TOOLCHAINS=1")
    pytest.skip(f"{what} not found")


def _nvidia_dirs() -> list[Path]:
    """Roots of the pip `nvidia` namespace package (e.g. .../site-packages/nvidia)."""
    try:
        import nvidia  # namespace package from the nvidia-* wheels
    except ImportError:
        return []
    return [Path(p) for p in getattr(nvidia, "__path__", [])]


def _find_in_nvidia(pattern: str) -> list[Path]:
    hits: list[Path] = []
    for root in _nvidia_dirs():
        hits += sorted(Path(p) for p in glob.glob(str(root / pattern)))
    return hits


def _cuobjdump() -> str | None:
    hits = _find_in_nvidia("*/bin/cuobjdump")
    return str(hits[0]) if hits else shutil.which("cuobjdump")


def _cuda_include_dirs() -> list[Path]:
    """Folders holding cuda_fp16.h (needed by NVRTC, which has no built-in copy)."""
    cands: list[Path] = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append(Path(os.environ[env]) / "include")
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(Path(nvcc).resolve().parent.parent / "include")
    cands.append(Path("/usr/local/cuda/include"))
    cands += [p.parent for p in _find_in_nvidia("*/include/cuda_fp16.h")]
    return [p for p in cands if (p / "cuda_fp16.h").is_file() and (p / "cuda_bf16.h").is_file()]


def _nvcc_cubin(tmp: Path, arch_flags: list[str], name: str) -> Path:
    nvcc = _require(shutil.which("nvcc"), "nvcc")
    src = tmp / "selftest.cu"
    if not src.exists():
        src.write_text(KERNEL_SRC)
    out = tmp / f"{name}.cubin"
    cmd = [nvcc, "-cubin", *arch_flags, "-O3", "-Werror", "all-warnings", f"-I{INCLUDE_DIR}",
           "-o", str(out), str(src)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"nvcc failed:\n{' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
    assert out.stat().st_size > 0
    return out


# ---------------------------------------------------------------------------
# (a) nvcc, (b) SASS.
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sm80_cubin(tmp_path_factory) -> Path:
    return _nvcc_cubin(tmp_path_factory.mktemp("sm80"), ["-arch=sm_80"], "selftest_sm80")


def test_header_is_self_contained():
    text = HEADER.read_text()
    # NVRTC has no host headers, and CuTe/CUTLASS are deliberately not used.
    for banned in ("<stdint.h>", "<cstdint>", "cute/", "cutlass"):
        assert banned not in text


def test_nvcc_sm80(sm80_cubin):
    assert sm80_cubin.read_bytes()[:4] == b"\x7fELF"


def test_nvcc_sm90a(tmp_path):
    cubin = _nvcc_cubin(tmp_path, ["-gencode=arch=compute_90a,code=sm_90a"], "selftest_sm90a")
    assert cubin.read_bytes()[:4] == b"\x7fELF"


def test_sm80_sass_has_tensor_core_ldmatrix_cp_async(sm80_cubin):
    tool = _require(_cuobjdump(), "cuobjdump (pip nvidia-cuda-cuobjdump)")
    res = subprocess.run([tool, "--dump-sass", str(sm80_cubin)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    sass = res.stdout
    for opcode in ("HMMA.16816.F32", "HMMA.16816.F32.BF16", "LDSM.16.M88.4", "LDSM.16.MT88.4",
                   "LDSM.16.M88.2", "LDSM.16.MT88", "LDGSTS.E.BYPASS.128", "LDGSTS.E.128",
                   "LDGSTS.E.64", "LDGSTS.E", "LDGDEPBAR", "DEPBAR", "MUFU.EX2", "MUFU.RSQ",
                   "SHFL.BFLY", "F2FP"):
        assert opcode in sass, f"{opcode} missing from sm_80 SASS"


# ---------------------------------------------------------------------------
# (d) NVRTC through ctypes.
# ---------------------------------------------------------------------------


def _load_nvrtc():
    libs = [p for p in _find_in_nvidia("*/lib/libnvrtc.so*") if ".alt." not in p.name]
    if not libs:
        return None
    lib_dir = libs[0].parent
    # The builtins library must be loaded globally first: libnvrtc resolves it by
    # soname, and the wheel's folder is not on the loader's search path.
    for b in sorted(lib_dir.glob("libnvrtc-builtins.so*")):
        if ".alt." not in b.name:
            ctypes.CDLL(str(b), mode=ctypes.RTLD_GLOBAL)
            break
    return ctypes.CDLL(str(libs[0]))


def _nvrtc_ptx(lib, src: str, opts: list[str]) -> tuple[int, str, str]:
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"selftest.cu", 0, None, None)
    assert rc == 0, f"nvrtcCreateProgram: {rc}"
    try:
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        ptx = ""
        if rc == 0:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
            buf = ctypes.create_string_buffer(n.value)
            lib.nvrtcGetPTX(prog, buf)
            ptx = buf.value.decode()
        return rc, log.value.decode(errors="replace"), ptx
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


@pytest.fixture(scope="module")
def nvrtc():
    return _require(_load_nvrtc(), "NVRTC (pip nvidia-cuda-nvrtc)")


def test_nvrtc_with_fp16_headers(nvrtc):
    inc = _require(_cuda_include_dirs(), "a CUDA include folder with cuda_fp16.h")[0]
    opts = ["--gpu-architecture=compute_80", "-std=c++17", f"-I{INCLUDE_DIR}", f"-I{inc}"]
    rc, log, ptx = _nvrtc_ptx(nvrtc, KERNEL_SRC, opts)
    assert rc == 0, log
    assert "tilec_fp16_marker = 42" in ptx
    for text in ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                 "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                 "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                 "cp.async.cg.shared.global", "cp.async.wait_group 1", "cvt.rn.bf16x2.f32"):
        assert text in ptx, text


def test_nvrtc_without_fp16_headers(nvrtc):
    # No include path for cuda_fp16.h: the header must drop its half/bf16 parts
    # instead of failing, and the float/int parts must still build.
    opts = ["--gpu-architecture=compute_80", "-std=c++17", f"-I{INCLUDE_DIR}"]
    rc, log, ptx = _nvrtc_ptx(nvrtc, KERNEL_SRC, opts)
    assert rc == 0, log
    assert "tilec_fp16_marker = 41" in ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx


# ---------------------------------------------------------------------------
# (c) Layout self-consistency (pure Python / numpy).
# ---------------------------------------------------------------------------

LAYOUTS = [ml.MMA_M16N8K16_A, ml.MMA_M16N8K16_B, ml.MMA_M16N8K16_C]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: lay.name)
def test_layout_is_bijection(layout):
    inv = layout.inverse()  # raises on duplicates / out-of-range / gaps
    assert len(inv) == layout.rows * layout.cols == ml.WARP_SIZE * layout.elems_per_lane
    for (row, col), (lane, i) in inv.items():
        assert layout.coord(lane, i) == (row, col)


@pytest.mark.parametrize("layout", [ml.MMA_M16N8K16_A, ml.MMA_M16N8K16_B], ids=lambda lay: lay.name)
def test_16bit_register_pairs_are_adjacent(layout):
    # A register holds two consecutive K values of one output row (A) / column (B),
    # which is what lets a 32-bit load or ldmatrix fill it.
    for lane in range(ml.WARP_SIZE):
        for reg in range(layout.regs_per_lane):
            (r0, c0), (r1, c1) = layout.coord(lane, 2 * reg), layout.coord(lane, 2 * reg + 1)
            if layout is ml.MMA_M16N8K16_A:
                assert (r1, c1) == (r0, c0 + 1) and c0 % 2 == 0
            else:
                assert (r1, c1) == (r0 + 1, c0) and r0 % 2 == 0


def test_layouts_spot_values():
    # A few values read off the ISA's figures.
    assert ml.mma_m16n8k16_a(0, 0) == (0, 0)
    assert ml.mma_m16n8k16_a(5, 3) == (9, 3)
    assert ml.mma_m16n8k16_a(31, 7) == (15, 15)
    assert ml.mma_m16n8k16_b(6, 2) == (12, 1)
    assert ml.mma_m16n8k16_c(13, 1) == (3, 3)
    assert ml.mma_m16n8k16_c(30, 2) == (15, 4)
    with pytest.raises(ValueError):
        ml.mma_m16n8k16_a(32, 0)
    with pytest.raises(ValueError):
        ml.mma_m16n8k16_b(0, 4)


def test_c_rows_live_in_lane_quads():
    for lane, _i, row, _col in ml.MMA_M16N8K16_C.items():
        assert row % 8 == lane // 4
    for row in range(16):
        lanes = {lane for lane, _i, r, _c in ml.MMA_M16N8K16_C.items() if r == row}
        assert lanes == {4 * (row % 8) + q for q in range(4)}


def test_mma_simulation_through_fragments():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((16, 16)).astype(np.float32)
    B = rng.standard_normal((16, 8)).astype(np.float32)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    fa = ml.pack_fragments(A, ml.MMA_M16N8K16_A)
    fb = ml.pack_fragments(B, ml.MMA_M16N8K16_B)
    fc = ml.pack_fragments(C, ml.MMA_M16N8K16_C)
    assert fa.shape == (32, 8) and fb.shape == (32, 4) and fc.shape == (32, 4)
    # Per-lane model of the instruction: the owner of d_i computes its dot product
    # from the A/B elements fetched out of whichever lanes hold them.
    inv_a, inv_b = ml.MMA_M16N8K16_A.inverse(), ml.MMA_M16N8K16_B.inverse()
    fd = np.empty_like(fc)
    for lane in range(32):
        for i in range(4):
            row, col = ml.mma_m16n8k16_c(lane, i)
            acc = fc[lane, i]
            for k in range(16):
                la, ia = inv_a[(row, k)]
                lb, ib = inv_b[(k, col)]
                acc += fa[la, ia] * fb[lb, ib]
            fd[lane, i] = acc
    D = ml.unpack_fragments(fd, ml.MMA_M16N8K16_C)
    np.testing.assert_allclose(D, A @ B + C, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ml.unpack_fragments(fa, ml.MMA_M16N8K16_A), A)


def test_ldmatrix_address_convention():
    for num in (1, 2, 4):
        seen = {}
        for lane in range(32):
            mr = ml.ldmatrix_row_of_lane(lane, num)
            if lane < 8 * num:
                assert mr is not None and ml.ldmatrix_address_lane(*mr) == lane
                seen[mr] = lane
            else:
                assert mr is None
        assert len(seen) == 8 * num


def _tile_offsets(ld: int) -> list[int]:
    return [r * ld + c for r, c in (ml.ldmatrix_x4_tile_address(lane) for lane in range(32))]


def test_ldmatrix_x4_gives_a_fragment():
    A = np.arange(256, dtype=np.float16).reshape(16, 16)  # row-major tile in shared memory
    regs = ml.simulate_ldmatrix(A.ravel(), _tile_offsets(16), 4, trans=False)  # (32, 4, 2)
    np.testing.assert_array_equal(regs.reshape(32, 8), ml.pack_fragments(A, ml.MMA_M16N8K16_A))
    np.testing.assert_array_equal(ml.pack_registers(regs.reshape(32, 8)),
                                  ml.pack_registers(ml.pack_fragments(A, ml.MMA_M16N8K16_A)))


def test_ldmatrix_x4_trans_gives_two_b_fragments():
    Bt = np.arange(256, dtype=np.float16).reshape(16, 16)  # row-major K x N, N = 16
    regs = ml.simulate_ldmatrix(Bt.ravel(), _tile_offsets(16), 4, trans=True)
    b = ml.MMA_M16N8K16_B
    np.testing.assert_array_equal(regs[:, 0:2].reshape(32, 4), ml.pack_fragments(Bt[:, :8], b))
    np.testing.assert_array_equal(regs[:, 2:4].reshape(32, 4), ml.pack_fragments(Bt[:, 8:], b))


def test_ldmatrix_x2_trans_gives_b_fragment():
    Bt = np.arange(128, dtype=np.float16).reshape(16, 8)  # row-major K x N, N = 8
    offsets = [(lane % 16) * 8 for lane in range(32)]
    regs = ml.simulate_ldmatrix(Bt.ravel(), offsets, 2, trans=True)
    np.testing.assert_array_equal(regs.reshape(32, 4), ml.pack_fragments(Bt, ml.MMA_M16N8K16_B))


def test_pack_registers_order():
    f = np.array([[1.0, 2.0]] * 32, dtype=np.float16)
    assert ml.pack_registers(f)[0, 0] == 0x40003C00  # low half = first element


# ---------------------------------------------------------------------------
# (e) On a GPU: run the self-test kernel and check it against the layouts.
# ---------------------------------------------------------------------------


class _Cuda:
    """Just enough of the CUDA driver API, through ctypes, to run one kernel."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            pytest.skip("no CUDA driver (libcuda.so.1)")
        if self.lib.cuInit(0) != 0:
            pytest.skip("cuInit failed: no usable GPU")
        self.dev = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(self.dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), self.dev), "retain")
        self.check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    @staticmethod
    def check(rc, what):
        assert rc == 0, f"{what} failed with CUresult {rc}"

    def capability(self) -> tuple[int, int]:
        vals = []
        for attr in (75, 76):  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{MAJOR,MINOR}
            v = ctypes.c_int()
            self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, self.dev), "attr")
            vals.append(v.value)
        return vals[0], vals[1]

    def alloc(self, arr: np.ndarray) -> ctypes.c_uint64:
        ptr = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(arr.nbytes)), "alloc")
        self.check(self.lib.cuMemcpyHtoD_v2(ptr, arr.ctypes.data_as(ctypes.c_void_p),
                                            ctypes.c_size_t(arr.nbytes)), "HtoD")
        return ptr

    def read(self, ptr: ctypes.c_uint64, like: np.ndarray) -> np.ndarray:
        out = np.empty_like(like)
        self.check(self.lib.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ptr,
                                            ctypes.c_size_t(out.nbytes)), "DtoH")
        return out

    def launch(self, cubin: bytes, name: str, ptrs: list[ctypes.c_uint64]):
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "get fn")
        params = (ctypes.c_void_p * len(ptrs))(*[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in ptrs])
        self.check(self.lib.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, params, None), "launch")
        self.check(self.lib.cuCtxSynchronize(), "sync")
        self.check(self.lib.cuModuleUnload(mod), "unload")


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    # Exact for the small integers used here, so truncation == rounding.
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.gpu
def test_selftest_kernel_on_gpu(tmp_path):
    cuda = _Cuda()
    major, minor = cuda.capability()
    if major < 8:
        pytest.skip(f"needs sm_80+, GPU is sm_{major}{minor}")
    cubin = _nvcc_cubin(tmp_path, [f"-arch=sm_{major}{minor}"], "selftest_native").read_bytes()

    rng = np.random.default_rng(1)
    A = rng.integers(-3, 4, (16, 16)).astype(np.float32)
    B = rng.integers(-3, 4, (16, 8)).astype(np.float32)
    C = rng.integers(-8, 9, (16, 8)).astype(np.float32)
    ints = np.zeros(160, np.int32)
    ints[0:32] = rng.integers(-50, 51, 32)
    ints[32:64] = rng.choice([-7, -3, -2, -1, 1, 2, 5, 9], 32)
    ints[64] = 0  # cp.async predicate: off
    ints[96:128] = rng.integers(0, 100, 32)
    ints[128:160] = rng.integers(1, 9, 32)
    floats = np.zeros(128, np.float32)
    floats[0:2] = [1.0, 2.0]
    floats[32:64] = rng.integers(-20, 21, 32)
    floats[64:96] = rng.uniform(-10, 10, 32)
    floats[96:128] = rng.uniform(0.01, 100, 32)
    host = {
        "A": A.astype(np.float16), "B": B.astype(np.float16), "Abf": _bf16_bits(A), "Bbf": _bf16_bits(B),
        "C": C, "ints": ints, "floats": floats,
        "fout": np.zeros(N_FOUT, np.float32), "uout": np.zeros(N_UOUT, np.uint32),
        "iout": np.zeros(N_IOUT, np.int32), "fatom": np.zeros(1, np.float32),
        "hatom": np.zeros(1, np.float16), "batom": np.zeros(1, np.uint16),
    }
    dev = {k: cuda.alloc(v) for k, v in host.items()}
    cuda.launch(cubin, "tilec_selftest", list(dev.values()))
    fout, uout, iout = (cuda.read(dev[k], host[k]) for k in ("fout", "uout", "iout"))

    # ldmatrix: every variant against the reference model, and x4 == A fragment.
    mem = host["A"].view(np.uint16).ravel()
    offs = _tile_offsets(16)
    for base, num, trans in ((0, 4, False), (128, 4, True), (256, 2, False), (320, 2, True),
                             (384, 1, False), (416, 1, True)):
        want = ml.pack_registers(ml.simulate_ldmatrix(mem, offs, num, trans).reshape(32, 2 * num))
        got = uout[base:base + 32 * num].reshape(32, num)
        np.testing.assert_array_equal(got, want, err_msg=f"ldmatrix x{num} trans={trans}")
    a_regs = ml.pack_registers(ml.pack_fragments(host["A"], ml.MMA_M16N8K16_A))
    np.testing.assert_array_equal(uout[0:128].reshape(32, 4), a_regs)
    np.testing.assert_array_equal(uout[448:480], np.arange(32))

    # mma: exact with small integers.
    np.testing.assert_array_equal(fout[0:128].reshape(16, 8), A @ B + C)
    np.testing.assert_array_equal(fout[128:256].reshape(16, 8), A @ B + C)

    # Packing, zero-fill, vector copies.
    assert uout[480] == 0x40003C00 and uout[481] == 0x40003F80
    np.testing.assert_array_equal(uout[512:640], 0)
    a_words = host["A"].view(np.uint32)
    for base in (640, 768, 896, 1024):
        np.testing.assert_array_equal(uout[base:base + 128], a_words.ravel(), err_msg=f"copy @{base}")

    # Reductions.
    x, y = floats[32:64], floats[64:96]
    np.testing.assert_array_equal(fout[256:288], np.full(32, x.sum()))
    np.testing.assert_array_equal(fout[288:320], np.full(32, x.max()))
    np.testing.assert_array_equal(fout[320:352], np.full(32, x.min()))
    np.testing.assert_array_equal(fout[352:384], np.repeat(x.reshape(4, 8).sum(1), 8))
    k0, k1 = ints[0:32], ints[32:64]
    np.testing.assert_array_equal(iout[0:32], np.full(32, k0.sum()))
    np.testing.assert_array_equal(iout[32:64], np.full(32, k0.max()))
    np.testing.assert_array_equal(iout[64:96], np.full(32, k0.min()))
    np.testing.assert_array_equal(iout[96:128], np.repeat(k0.reshape(8, 4).max(1), 4))

    # Math.
    np.testing.assert_allclose(fout[384:416], np.exp2(y), rtol=1e-5)
    np.testing.assert_allclose(fout[416:448], 1 / np.sqrt(floats[96:128]), rtol=1e-5)
    np.testing.assert_array_equal(fout[448:480], np.maximum(x, y))
    np.testing.assert_array_equal(fout[480:512], np.minimum(x, y))
    np.testing.assert_array_equal(iout[128:160], np.maximum(k0, k1))
    np.testing.assert_array_equal(iout[160:192], np.minimum(k0, k1))
    np.testing.assert_array_equal(iout[192:224].view(np.uint32),
                                  np.maximum(k0.view(np.uint32), k1.view(np.uint32)))
    np.testing.assert_array_equal(iout[224:256], k0 // k1)  # numpy floors like Python
    np.testing.assert_array_equal(iout[256:288], k0 % k1)
    np.testing.assert_array_equal(iout[288:320], -(-ints[96:128] // ints[128:160]))
    np.testing.assert_array_equal(iout[320:352], k0 // k1)
    xh, yh = x.astype(np.float16).astype(np.float32), y.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(fout[512:544], np.maximum(xh, yh))
    np.testing.assert_array_equal(fout[544:576], np.minimum(xh, yh))
    xb = x  # small integers: exact in bf16
    yb = (_bf16_bits_rn(y).astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(fout[576:608], np.maximum(xb, yb))
    np.testing.assert_array_equal(fout[608:640], np.minimum(xb, yb))
    np.testing.assert_array_equal(fout[640:672], np.full(32, x.max()))
    np.testing.assert_array_equal(fout[672:704], np.full(32, x.min()))
    np.testing.assert_array_equal(fout[704:736], np.repeat(x.reshape(2, 16).sum(1), 16))

    # Atomics.
    assert cuda.read(dev["fatom"], host["fatom"])[0] == 32.0
    assert cuda.read(dev["hatom"], host["hatom"])[0] == 32.0
    assert cuda.read(dev["batom"], host["batom"])[0] == _bf16_bits(np.float32(32.0))
    assert iout[352] == sum(range(1, 33))
    # Returned old values, in the order the adds landed, are the running sums.
    order = np.argsort(iout[384:416])
    np.testing.assert_array_equal(iout[384:416][order], np.concatenate([[0], np.cumsum(order + 1)[:-1]]))


def _bf16_bits_rn(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bf16 bits (no NaNs here)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)
