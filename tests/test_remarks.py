"""Remarks (-R, -Rpass=CATEGORY, the manifest's "remarks"), ptxas spills as warnings (-Werror), and the resources
every CUDA build records in its manifest (nvcc and NVRTC alike)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import tilec
from tilec.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.tile"
GEMM_LINE = next(i for i, line in enumerate(GEMM.read_text().splitlines(), 1) if line.strip().startswith("gemm("))
LOOP_LINE = next(i for i, line in enumerate(GEMM.read_text().splitlines(), 1) if "Pipelined(" in line)
KERNEL_LINE = next(i for i, line in enumerate(GEMM.read_text().splitlines(), 1) if line.startswith("kernel gemm"))


def _require(found, what: str):
    if not found:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
        pytest.skip(f"{what} not found")


def _remarks(target: str, **kw) -> list:
    return tilec.compile(str(GEMM), target=target, **kw).remarks


def test_gemm_off_tensor_cores_says_why():
    (r,) = [r for r in _remarks("sm80", defines={"dtype": "f32"}) if r.category == "tensor-cores"]
    assert r.span.line == GEMM_LINE
    assert "scalar multiply-adds" in r.message and "its operands are f32" in r.message
    assert not [r for r in _remarks("sm80") if r.category == "tensor-cores"]  # f16 runs on mma.sync: no remark
    (r,) = [r for r in _remarks("sm90", disable={"wgmma"}) if r.category == "tensor-cores"]
    assert "mma.sync" in r.message and "--no-wgmma" in r.message


def test_tma_and_twin_remarks():
    tma = [r for r in _remarks("sm90") if r.category == "tma"]
    assert any(r.span.line == LOOP_LINE and "with TMA" in r.message for r in tma)
    assert any(r.span.line == KERNEL_LINE and "gemm__no_tma" in r.message for r in tma)
    (r,) = [r for r in _remarks("sm90", disable={"tma"}) if r.category == "tma"]
    assert "cp.async, not TMA" in r.message and "--no-tma" in r.message


def test_reduced_stages_remark():
    (r,) = [r for r in _remarks("gfx942") if r.category == "pipeline"]
    assert r.span.line == LOOP_LINE and "2 stage(s), not the 3" in r.message
    assert not [r for r in _remarks("sm80") if r.category == "pipeline"]


def test_cli_prints_remarks_only_when_asked_and_manifest_always_has_them(tmp_path, capsys):
    out = tmp_path / "g.cu"
    assert main([str(GEMM), "--target", "gfx942", "-o", str(tmp_path / "g.hip")]) == 0
    assert "remark:" not in capsys.readouterr().err
    manifest = json.loads((tmp_path / "g.hip.json").read_text())
    assert [r["category"] for r in manifest["remarks"]] == ["pipeline"]
    assert manifest["remarks"][0]["line"] == LOOP_LINE
    for flags in (["-R"], ["-Rpass=tma"]):
        assert main([str(GEMM), "--target", "sm90", "-o", str(out), *flags]) == 0
        err = capsys.readouterr().err
        assert f"gemm.tile:{KERNEL_LINE}:1: remark: kernel 'gemm' takes TMA tensor maps" in err
        assert "[-Rpass=tma]" in err
    assert main([str(GEMM), "--target", "sm90", "-o", str(out), "-Rpass=pipeline"]) == 0  # a cache hit
    err = capsys.readouterr().err  # nothing matches: said, so that -R is not silent
    assert err.count("remark:") == 1 and "gemm.tile:1:1: remark: no remarks matching -Rpass=pipeline for sm90" in err


def test_bank_conflict_remark(tmp_path, capsys):
    from test_inspect_layout import CONFLICTING

    src = tmp_path / "linear.tile"
    src.write_text(CONFLICTING)
    assert main([str(src), "--target", "sm80", "-o", str(tmp_path / "l.cu"), "-R"]) == 0
    err = capsys.readouterr().err
    assert "linear.tile:4:9: remark: shared tile 'A_s': its reads by ldmatrix_x4" in err
    assert "up to 4-way" in err and "[-Rpass=bank-conflicts]" in err and "'B_s'" not in err
    remarks = json.loads((tmp_path / "l.cu.json").read_text())["remarks"]
    assert [r["category"] for r in remarks] == ["bank-conflicts"]


SPILLING = ["-D", "block_M=256", "-D", "block_N=256"]  # 256 f32 accumulators per thread on 128 threads


def test_spills_are_warnings_and_werror_errors(tmp_path, capsys):
    _require(shutil.which("nvcc"), "nvcc")
    out = tmp_path / "s.cubin"
    assert main([str(GEMM), "--target", "sm80", *SPILLING, "-o", str(out), "--compiler", "nvcc"]) == 0
    err = capsys.readouterr().err
    assert f"gemm.tile:{KERNEL_LINE}:1: warning: kernel 'gemm' spills " in err
    use = json.loads(Path(f"{out}.json").read_text())["resources"]["sm_80"]["gemm"]
    assert use["spill_stores"] > 0 and use["registers"] == 255 and use["shared_bytes"] > 0
    assert f"spills {use['spill_stores']} bytes" in err
    assert main([str(GEMM), "--target", "sm80", *SPILLING, "-o", str(out), "--compiler", "nvcc"]) == 0  # cache hit
    assert "warning: kernel 'gemm' spills" in capsys.readouterr().err
    out.unlink()
    assert main([str(GEMM), "--target", "sm80", *SPILLING, "-o", str(out), "--compiler", "nvcc", "-Werror"]) == 1
    err = capsys.readouterr().err
    assert "error: kernel 'gemm' spills" in err and "[-Werror]" in err
    assert not out.exists()


def test_nvrtc_build_records_resources(tmp_path):
    from tilec.targets.cuda.nvrtc import find_lib

    _require(find_lib(), "NVRTC")
    art = tilec.compile(str(GEMM), "sm80", emit="cubin", toolchain="nvrtc")
    use = json.loads(art.manifest)["resources"]["sm_80"]["gemm"]
    assert 0 < use["registers"] <= 255 and use["spill_stores"] == 0
    assert use["shared_bytes"] == json.loads(art.manifest)["kernels"][0]["shared_bytes"]


def test_werror_turns_compile_warnings_into_errors(tmp_path, capsys):
    vector_add = ROOT / "samples" / "vector_add.tile"
    out = tmp_path / "v.cu"
    assert main([str(vector_add), "--target", "sm80", "-D", "nope=1", "-o", str(out)]) == 0
    assert "warning: -D nope matches no const" in capsys.readouterr().err
    out.unlink()
    assert main([str(vector_add), "--target", "sm80", "-D", "nope=1", "-o", str(out), "-Werror"]) == 1
    err = capsys.readouterr().err
    assert "error: -D nope matches no const in the source [-Werror]" in err and "warning:" not in err
    assert not out.exists()
