"""The HIP back end (gfx90a, gfx942): every sample builds to an AMD code object, and its ISA is what we expect.

Correctness of the AMD lowering is checked by running it in the SIMT interpreter (tests/test_simt_interp.py,
64-lane wavefronts); no AMD GPU is reachable here. Toolchains: Debian's hipcc (clang-15) for gfx90a, clang-19 for
gfx942 (scripts/test.sh installs both). Without them these tests skip, and fail under TILEC_REQUIRE_TOOLCHAINS=1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import tilec
from tilec.targets.hip import toolchain as tc

ROOT = Path(__file__).resolve().parent.parent
# fp8_gemm needs 8-bit float types, which the HIP back end does not have (test_fp8_is_refused_on_amd).
SAMPLES = sorted(p for p in (ROOT / "samples").glob("*.tile") if p.stem != "fp8_gemm")
ARCHS = ["gfx90a", "gfx942"]
G64 = {"block_M": 64, "block_N": 64}


def _require(arch: str) -> None:
    if tc.find_compiler(arch) is not None:
        return
    what = f"no compiler for {arch} (apt-get install hipcc / clang-19 lld-19)"
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(what + " but TILEC_REQUIRE_TOOLCHAINS=1")
    pytest.skip(what)


def _objdump() -> str:
    tool = shutil.which("llvm-objdump-19") or shutil.which("llvm-objdump-15") or shutil.which("llvm-objdump")
    if tool is None:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("llvm-objdump is required (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip("no llvm-objdump")
    return tool


def _build(path: Path, arch: str, defines=None, disable=()) -> bytes:
    _require(arch)
    r = tilec.compile(str(path), target=arch, defines=defines or {}, disable=set(disable))
    return tc.build(r.source, path.stem, arch, "hsaco").data


def _disasm(data: bytes, tmp_path: Path) -> str:
    f = tmp_path / "k.hsaco"
    f.write_bytes(data)
    return subprocess.run([_objdump(), "-d", str(f)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("sample", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_builds_code_object(sample, arch):
    data = _build(sample, arch)
    assert data[:4] == b"\x7fELF", "expected an ELF code object, not an offload bundle"
    usage = tc.resource_usage(data)
    assert usage, "no kernel metadata in the code object"
    for name, u in usage.items():
        assert u["vgpr"] > 0 and "lds" in u, (name, u)


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_isa(arch, tmp_path):
    """gemm (64x64 tiles): 128-bit global loads and LDS stores from the 16-byte copies, MFMA 16x16x16 (gfx90a spells
    it v_mfma_f32_16x16x16f16, gfx942 v_mfma_f32_16x16x16_f16; 2 waves x 2x4 atoms x 2 k-steps = 16 per tile),
    no scratch."""
    data = _build(ROOT / "samples" / "gemm.tile", arch, G64)
    asm = _disasm(data, tmp_path)
    assert "global_load_dwordx4" in asm
    assert "ds_write_b128" in asm
    assert asm.count("v_mfma_f32_16x16x16") == 16
    assert "v_fma_mix_f32" not in asm and "v_pk_fma_f32" not in asm  # no scalar FMA gemm left
    assert "s_barrier" in asm
    assert "scratch_" not in asm and "buffer_store_dword" not in asm
    (u,) = tc.resource_usage(data).values()
    assert u["scratch"] == 0 and u["lds"] == 2 * 8192, u  # A and B tiles, double-buffered (register staging)


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_isa_bf16_and_default_tile(arch, tmp_path):
    """bf16 gemm uses the bf16 MFMA (v_mfma_f32_16x16x16bf16_1k / _bf16); the default 128x128 tile needs no scratch."""
    asm = _disasm(_build(ROOT / "samples" / "gemm.tile", arch, {**G64, "dtype": "bf16"}), tmp_path)
    assert asm.count("v_mfma_f32_16x16x16") == 16 and "bf16" in asm
    data = _build(ROOT / "samples" / "gemm.tile", arch)
    assert _disasm(data, tmp_path).count("v_mfma_f32_16x16x16") == 64
    (u,) = tc.resource_usage(data).values()
    assert u["scratch"] == 0, u


@pytest.mark.parametrize("arch", ARCHS)
def test_reductions_use_cross_lane_permutes(arch, tmp_path):
    asm = _disasm(_build(ROOT / "samples" / "softmax.tile", arch), tmp_path)
    assert "ds_bpermute_b32" in asm
    (u,) = tc.resource_usage(_build(ROOT / "samples" / "softmax.tile", arch)).values()
    assert u["scratch"] == 0


def test_cli_builds_hsaco_and_asm(tmp_path):
    _require("gfx942")
    from tilec.cli.main import main

    out = tmp_path / "gemm.hsaco"
    assert main([str(ROOT / "samples" / "gemm.tile"), "--target", "gfx942", "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x7fELF"
    assert (tmp_path / "gemm.hsaco.json").exists()
    s = tmp_path / "gemm.s"
    assert main([str(ROOT / "samples" / "softmax.tile"), "--target", "gfx942", "-o", str(s)]) == 0
    assert 'amdgcn-amd-amdhsa--gfx942' in s.read_text()


def test_cli_emits_hip_source_without_a_toolchain(tmp_path):
    from tilec.cli.main import main

    out = tmp_path / "v.hip"
    assert main([str(ROOT / "samples" / "vector_add.tile"), "--target", "gfx90a", "-o", str(out)]) == 0
    text = out.read_text()
    assert "__builtin_amdgcn_workitem_id_x" in text and "#include" not in text


def test_parse_notes():
    text = """
amdhsa.kernels:
  - .agpr_count:     0
    .args:
      - .address_space:  global
        .name:           A
    .group_segment_fixed_size: 8192
    .name:           gemm
    .private_segment_fixed_size: 0
    .sgpr_count:     46
    .vgpr_count:     140
"""
    assert tc.parse_notes(text) == {"gemm": {"agpr": 0, "lds": 8192, "scratch": 0, "sgpr": 46, "vgpr": 140}}


GEMM_CASES = [("gemm", {}), ("gemm", {"trans_B": True}), ("gemm", {"dtype": "bf16"})]
FA_CASES = [("flash_attention", {}), ("flash_attention", {"causal": True}), ("flash_attention", {"dtype": "bf16"})]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("sample,defines", GEMM_CASES + FA_CASES,
                         ids=[f"{s}-{'-'.join(f'{k}={v}' for k, v in d.items()) or 'default'}"
                              for s, d in GEMM_CASES + FA_CASES])
def test_mfma_operands_are_read_128_bits_at_a_time(sample, defines, arch, tmp_path):
    """At the samples' default consts, every LDS read of an MFMA operand is one ds_read_b128 (K-major swizzled
    tiles, 8 k-values per lane): per wave, one read per operand atom and pair of k-steps. gemm 128x128x32 (2 waves
    of 64x128: 4 A + 8 B atoms, one pair) = 12; flash attention 64x64, dim 64 (2 waves of 32x64): Q K^T
    (2 + 4 atoms) x 2 pairs + P V (4 V atoms, interleaved tile) x 2 pairs = 20, plus 4 from the 16-byte copy of
    O_s to global = 24. No 16- or 64-bit operand reads, 64 MFMAs each, no scratch."""
    # counted on one copy of each loop: partitioning gives the O_s -> O copy an interior and a boundary version
    data = _build(ROOT / "samples" / f"{sample}.tile", arch, defines, disable={"partition"})
    asm = _disasm(data, tmp_path)
    assert asm.count("v_mfma_f32_16x16x16") == 64
    # gemm: A 2x4 + B 4x... per wave: (mi + ni) atoms x K/32 pairs = (4 + 4) x 1 = 8 per k-tile... at least one
    # 128-bit read per operand atom and k-pair; flash attention: Q/K (4 + 2) x 2 + V 4 x 2 = 20 .. plus nothing else
    assert asm.count("ds_read_b128") == (12 if sample == "gemm" else 24), asm.count("ds_read_b128")
    assert "ds_read_b64" not in asm and "ds_read2_b32" not in asm
    # flash attention: the element-by-element O_s -> O copy for unaligned tensors (a cold path, unrolled 8:
    # tilec/ir/simt_printer.py) reads 16 bits at a time
    assert asm.count("ds_read_u16") <= (0 if sample == "gemm" else 8)
    assert "v_fma_mix_f32" not in asm
    assert "scratch_" not in asm and "buffer_store_dword" not in asm
    (u,) = tc.resource_usage(data).values()
    assert u["scratch"] == 0, u
    if sample == "flash_attention":
        assert "ds_bpermute_b32" in asm  # row max / row sum across the 4 lane groups


@pytest.mark.parametrize("arch", ARCHS)
def test_pipelined_loops_are_register_staged(arch, tmp_path):
    """gemm's Pipelined loop on AMD is double-buffered through registers: twice the LDS of the A and B tiles and two
    s_barrier in the kernel (after the prologue's stores, and the one per iteration; the plain loop had three).
    The order inside the loop is checked on the SIMT IR (tests/test_simt_interp.py)."""
    data = _build(ROOT / "samples" / "gemm.tile", arch, G64)
    asm = _disasm(data, tmp_path)
    assert asm.count("s_barrier") == 2
    (u,) = tc.resource_usage(data).values()
    assert u["lds"] == 2 * (64 * 32 + 32 * 64) * 2 and u["scratch"] == 0, u


def test_fp8_is_refused_on_cdna2(capsys):
    from tilec.cli.main import main as tilec_main

    assert tilec_main([str(ROOT / "samples" / "fp8_gemm.tile"), "--target", "gfx90a", "--emit-ir"]) == 1
    err = capsys.readouterr().err
    assert "f8e4m3 is not supported on gfx90a" in err and "fp8_gemm.tile:" in err and "Traceback" not in err


@pytest.mark.parametrize("dtype", ["f8e4m3", "f8e5m2"])
def test_fp8_gemm_on_gfx942_uses_the_fp8_mfma(dtype, tmp_path):
    """MI300's v_mfma_f32_16x16x32_{fp8_fp8,bf8_bf8}: one per 16x16 atom and 32-deep k-step (the SIMT model checks
    the results: tests/test_examples_tilelang.py)."""
    data = _build(ROOT / "samples" / "fp8_gemm.tile", "gfx942", {"in_dtype": dtype, "block_K": 64, **G64})
    asm = _disasm(data, tmp_path)
    assert ("v_mfma_f32_16x16x32_fp8_fp8" if dtype == "f8e4m3" else "v_mfma_f32_16x16x32_bf8_bf8") in asm
    assert "v_mfma_f32_16x16x16" not in asm and "scratch_" not in asm


def test_fp8_conversions_of_the_device_header_match_ml_dtypes(tmp_path):
    """tilec_hip.h's OCP e4m3/e5m2 conversions, compiled for the host: every code decodes as ml_dtypes does, and
    floats encode to nearest even, saturating to the largest finite value (as CUDA's __nv_fp8 types do)."""
    import ml_dtypes
    import numpy as np

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    header = (Path(tilec.__file__).parent / "targets" / "hip" / "include" / "tilec_hip.h").read_text()
    start = header.index("// ------------------------------------------------------------------ 8-bit floats")
    section = header[start:header.index("// ------------------------------------------------------------------",
                                        start + 10)]
    rng = np.random.default_rng(8)
    values = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-6, 4, 2000),
                             [0.0, -0.0, 448.0, 464.0, 500.0, -1e9, 57344.0, 61440.0, 2.0 ** -9, 2.0 ** -10,
                              2.0 ** -16, 3 * 2.0 ** -17, np.inf, -np.inf, np.nan,
                              1.0625, -1.1875, 1.125, 1.375,  # ties: to even
                              3 * 2.0 ** -10, 5 * 2.0 ** -10]]).astype(np.float32)
    (tmp_path / "values.bin").write_bytes(values.tobytes())
    (tmp_path / "t.cpp").write_text(
        "#include <cstdio>\n#define TL_DEVICE inline\nnamespace tl {\n" + section + "}\n"
        "int main() {\n  FILE* f = std::fopen(\"values.bin\", \"rb\"); float v; \n"
        "  while (std::fread(&v, 4, 1, f) == 1)\n"
        "    std::printf(\"%u %u\\n\", tl::fp8_e4m3(v).bits, tl::fp8_e5m2(v).bits);\n"
        "  for (int b = 0; b < 256; ++b) {\n"
        "    float x = tl::fp8_e4m3::decode(b), y = tl::fp8_e5m2::decode(b);\n"
        "    std::printf(\"%a %a\\n\", x, y);\n  }\n}\n")
    subprocess.run([cxx, "-std=c++20", "-O1", "t.cpp", "-o", "t"], cwd=tmp_path, check=True)
    lines = subprocess.run(["./t"], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.splitlines()
    encoded = np.array([[int(x) for x in line.split()] for line in lines[:len(values)]])
    decoded = np.array([[float.fromhex(x) if "nan" not in x else np.nan for x in line.split()]
                        for line in lines[len(values):]])
    codes = np.arange(256, dtype=np.uint8)
    for col, dt, top in ((0, ml_dtypes.float8_e4m3fn, 448.0), (1, ml_dtypes.float8_e5m2, 57344.0)):
        want_decoded = codes.view(dt).astype(np.float64)
        np.testing.assert_array_equal(decoded[:, col], want_decoded)
        finite = np.isfinite(values)
        want = np.clip(values, -top, top).astype(dt).view(np.uint8)
        np.testing.assert_array_equal(encoded[finite, col], want[finite])
        assert (encoded[np.isnan(values), col] & 0x7F == 0x7F).all()
        assert (encoded[np.isinf(values), col] & 0x7F).tolist() == [0x7E if col == 0 else 0x7B] * 2


def test_fp8_mfma_reads_ocp_bytes_as_fnuz_at_half_their_value(tmp_path):
    """gfx942's fp8 MFMA reads its operands as FNUZ: after tilec_hip.h's byte fix-up every OCP e4m3/e5m2 value
    reads as exactly half of itself (so a product of two is a quarter, which the accumulator scaling undoes),
    -0 as 0 and NaN as NaN (e5m2's infinities too)."""
    import ml_dtypes
    import numpy as np

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    header = (Path(tilec.__file__).parent / "targets" / "hip" / "include" / "tilec_hip.h").read_text()
    start = header.index("TL_DEVICE unsigned long long ocp_to_fnuz")
    fn = header[start:header.index("\n}\n", start) + 3]
    (tmp_path / "t.cpp").write_text(
        "#include <cstdio>\n#include <initializer_list>\n#define TL_DEVICE inline\n" + fn +
        "int main() {\n  for (unsigned special : {0x7fu, 0x7cu})\n"
        "    for (unsigned long long b = 0; b < 256; b += 8) {\n"
        "      unsigned long long v = 0;\n      for (int i = 0; i < 8; ++i) v |= (b + i) << (8 * i);\n"
        "      v = ocp_to_fnuz(v, special);\n"
        "      for (int i = 0; i < 8; ++i) std::printf(\"%llu\\n\", (v >> (8 * i)) & 0xff);\n    }\n}\n")
    subprocess.run([cxx, "-std=c++17", "t.cpp", "-o", "t"], cwd=tmp_path, check=True)
    out = np.array(subprocess.run(["./t"], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.split(),
                   np.uint8).reshape(2, 256)
    codes = np.arange(256, dtype=np.uint8)
    for row, ocp, fnuz in ((0, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz),
                           (1, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)):
        want = codes.view(ocp).astype(np.float64)
        got = out[row].view(fnuz).astype(np.float64) * 2
        finite = np.isfinite(want)
        np.testing.assert_array_equal(got[finite], want[finite])
        assert np.isnan(got[~finite]).all()


@pytest.mark.parametrize(("sample", "define"), [("vector_add", "dtype"), ("softmax", "accum_dtype")])
def test_fp8_arithmetic_builds_for_gfx942(sample, define):
    """fp8 values in element-wise code (sums, products, selects) go through f32 as bf16 does."""
    data = _build(ROOT / "samples" / f"{sample}.tile", "gfx942", {define: "f8e4m3"})
    assert data[:4] == b"\x7fELF"
