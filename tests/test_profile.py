"""The intra-kernel timeline profiler without a GPU: the record buffer's decoding, trace and summary on synthetic
buffers; the instrumented lowering executed by the SIMT interpreter (results unchanged, every warp's marks
well nested); plain builds untouched; the instrumented CUDA compiling with nvcc for sm90 and sm80.

The GPU half (recording on the H200, the overhead) is bench/devprint_gpu.py.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import random_inputs, run_kernel
from tilec.ir.profile import PHASE, PHASES, manifest_entry
from tilec.runtime.timeline import decode
from tilec.simt.interp import run_simt

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
PROFILE = manifest_entry()
HEADER = PROFILE["header_words"]


def _tag(phase: str, end: bool) -> int:
    return 2 * PHASE[phase] + 1 + int(end)


def _buffer(warps: dict[tuple[int, int], dict], blocks: int, warps_per_block: int, capacity: int) -> np.ndarray:
    """A record buffer as the device writes it: warps[(block, warp)] = {gt0, clk0, sm, gt_end, marks}."""
    words = np.zeros((blocks * warps_per_block, HEADER + capacity), np.uint64)
    for (b, w), rec in warps.items():
        row = words[b * warps_per_block + w]
        row[:4] = [rec["gt0"], rec["clk0"], rec["sm"], rec["gt_end"]]
        for i, (tag, clk) in enumerate(rec["marks"][:capacity]):
            row[HEADER + i] = (tag << 48) | (clk & ((1 << 48) - 1))
    return words.reshape(-1)


def _warp(base_clk: int, gt0: int, pattern: list[tuple[str, bool, int]], cycles_end: int, ghz: float = 2.0):
    marks = [(_tag("kernel", False), base_clk)] + [(_tag(p, e), base_clk + c) for p, e, c in pattern]
    marks.append((_tag("kernel", True), base_clk + cycles_end))
    return {"gt0": gt0, "clk0": base_clk, "sm": 7, "gt_end": gt0 + int(cycles_end / ghz), "marks": marks}


def test_synthetic_buffer_decodes_to_spans_shares_and_a_trace():
    rng = np.random.default_rng()
    base = int(rng.integers(1, 1 << 40))
    # warp 0 (wg0): load 100..300, gemm 300..900 with a gemm_wait 500..800 inside, store 900..1000; 2000 cycles
    compute = [("load", False, 100), ("load", True, 300), ("gemm", False, 300), ("gemm_wait", False, 500),
               ("gemm_wait", True, 800), ("gemm", True, 900), ("store", False, 900), ("store", True, 1000)]
    # warp 4 (wg1, a producer): mbar_wait 0..1500, tma_issue 1500..1600, clock wrapping past 2^48 on the way
    wrap = (1 << 48) - 700
    producer = [("mbar_wait", False, 0), ("mbar_wait", True, 1500), ("tma_issue", False, 1500),
                ("tma_issue", True, 1600)]
    epoch = 1_764_500_000_000_000_000  # %globaltimer: ns since 1970 (float64 steps of 256 ns there)
    warps = {(0, 0): _warp(base, epoch, compute, 2000), (0, 4): _warp(wrap, epoch + 100, producer, 2000),
             (1, 0): _warp(base + 5000, epoch + 2500, compute, 2000)}
    words = _buffer(warps, blocks=2, warps_per_block=8, capacity=16)
    tl = decode(words, PROFILE, kernel="k", grid=(2, 1, 1), threads=256, capacity=16, blocks=2)
    assert tl.clock_source == "measured" and tl.clock_ghz == pytest.approx(2.0, rel=1e-3)
    assert len(tl.warps) == 3  # warps that never started record nothing
    w0 = next(w for w in tl.warps if (w.block, w.warp) == (0, 0))
    spans = {name: (b - a, depth) for name, a, b, depth in w0.spans}
    assert spans == {"load": (100, 1), "gemm_wait": (150, 2), "gemm": (300, 1), "store": (50, 1), "kernel": (1000, 0)}
    assert tl.origin_ns == epoch and w0.start_ns == 0 and w0.spans[0][1] == 50  # exact: no float rounding
    assert w0.exclusive["gemm"] == pytest.approx(150) and w0.exclusive["gemm_wait"] == pytest.approx(150)
    shares = tl.shares()
    assert shares[0]["gemm_wait"] == pytest.approx(0.15) and shares[0]["load"] == pytest.approx(0.1)
    assert shares[0]["other"] == pytest.approx(1 - 0.1 - 0.3 - 0.05) and shares[0]["stall"] == pytest.approx(0.15)
    assert shares[1]["mbar_wait"] == pytest.approx(0.75) and shares[1]["stall"] == pytest.approx(0.75)
    text = tl.summary()
    assert "2 of 2 blocks recorded" in text and "wg0" in text and "wg1" in text
    assert any(line.startswith("mbar_wait *") and line.rstrip().endswith("75.0%") for line in text.splitlines())
    trace = json.loads(json.dumps(tl.chrome_trace(max_blocks=1)))
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {0}  # block 1 left out of the trace
    gw = next(e for e in spans if e["name"] == "gemm_wait")
    assert gw["tid"] == 0 and gw["cat"] == "wait"
    assert gw["ts"] == pytest.approx(0.25) and gw["dur"] == pytest.approx(0.15)
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert names == ["k block (0, 0, 0) (SM 7)"]


def test_a_full_slot_is_reported_and_given_clock_is_used():
    marks = [("load", False, 10 * i) if i % 2 == 0 else ("load", True, 10 * i) for i in range(20)]
    warps = {(0, 0): _warp(1000, 5000, marks, 500)}
    tl = decode(_buffer(warps, 1, 1, capacity=8), PROFILE, kernel="k", grid=(1, 1, 1), threads=32, capacity=8,
                blocks=1, clock_ghz=1.0)
    assert tl.clock_source == "given" and tl.warps[0].full
    assert "ran out of record slots" in tl.summary()
    assert [s[0] for s in tl.warps[0].spans] == ["load"] * 3  # 8 marks: kernel begin, 3 loads, a begin left open


def _profiled_run(sample: str, target: str, sizes: dict, defines=None, level="full"):
    """(outputs equal to the interpreter's, marks by (block, warp)) of the instrumented lowering."""
    defines = defines or {}
    tk = tilec.compile(str(SAMPLES / f"{sample}.tile"), defines=defines).module.kernels[0]
    result = tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, defines=defines, profile=level)
    sk = result.simt.kernels[0]
    args = random_inputs(tk, sizes, 5)
    want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_kernel(tk, want)
    marks: dict = {}
    run_simt(sk, args, sizes, profile_marks=marks)
    for p in tk.params:
        if getattr(p, "is_output", False):
            np.testing.assert_allclose(args[p.name].astype(np.float64), want[p.name].astype(np.float64),
                                       rtol=5e-3, atol=5e-3)
    return sk, marks


def _check_nesting(marks: dict) -> set[str]:
    seen = set()
    for key, ms in marks.items():
        stack = []
        assert ms[0][0] == _tag("kernel", False) and ms[-1][0] == _tag("kernel", True), key
        for tag, _ in ms:
            phase = PHASES[(tag - 1) // 2]
            seen.add(phase)
            if tag % 2:
                stack.append(phase)
            else:
                assert stack and stack.pop() == phase, f"warp {key}: {phase} ends while {stack} is open"
        assert not stack
    return seen


SYNC = {"kernel", "mbar_wait", "tma_issue", "gemm_issue", "gemm_wait", "barrier"}


@pytest.mark.parametrize("sample, target, sizes, defines, level, phases", [
    ("flash_attention", "sm90", {"B": 1, "S": 200, "H": 1}, {}, "full", SYNC | {"reduce", "elementwise", "store"}),
    ("flash_attention", "sm90", {"B": 1, "S": 200, "H": 1}, {}, "sync", SYNC),
    ("gemm", "sm80", {"M": 70, "N": 100, "K": 45}, {"block_M": 64, "block_N": 64},
     "full", {"kernel", "pipeline_wait", "gemm", "barrier", "store", "fill"}),
])
def test_instrumented_lowering_runs_and_nests(sample, target, sizes, defines, level, phases):
    sk, marks = _profiled_run(sample, target, sizes, defines, level)
    seen = _check_nesting(marks)
    assert phases <= seen if level == "full" else seen == phases
    assert sk.attrs["profile"]["level"] == level
    # the marks, as a device would have written them, decode into a timeline (steps standing for cycles)
    warps_per_block = -(-sk.threads // 32)
    grid_blocks = sorted({b for b, _ in marks})
    index = {b: i for i, b in enumerate(grid_blocks)}
    cap = max(len(m) for m in marks.values())
    recs = {(index[b], w): {"gt0": 1 + index[b], "clk0": 1, "sm": 0, "gt_end": 0, "marks": m}
            for (b, w), m in marks.items()}
    tl = decode(_buffer(recs, len(grid_blocks), warps_per_block, cap), PROFILE, kernel=sk.name,
                grid=(len(grid_blocks), 1, 1), threads=sk.threads, capacity=cap, blocks=len(grid_blocks),
                clock_ghz=1.0)
    assert tl.shares() and "stall" in tl.summary() and len(tl.warps) == len(marks)


def test_adjacent_spans_of_a_phase_are_merged():
    """Two element-wise loops in a row are one span: no end mark directly followed by the same phase's begin."""
    import itertools
    import re

    src = tilec.compile(str(SAMPLES / "flash_attention.tile"), target="sm90", profile="full").source
    tags = [int(m) for m in re.findall(r"tl::prof_mark\(tl_prof, (\d+)u\);", src)]
    lines = [ln.strip() for ln in src.splitlines()]
    pairs = [(int(a.split(", ")[1][:-3]), int(b.split(", ")[1][:-3])) for a, b in itertools.pairwise(lines)
             if a.startswith("tl::prof_mark") and b.startswith("tl::prof_mark")]
    assert tags and pairs and not any(a % 2 == 0 and b == a - 1 for a, b in pairs)


def test_plain_builds_carry_no_instrumentation():
    plain = tilec.compile(str(SAMPLES / "gemm.tile"), target="sm90")
    assert "prof_" not in plain.source and "tilec_profile" not in plain.source
    assert all("profile" not in k.attrs for k in plain.simt.kernels)


@pytest.mark.parametrize("target", ["webgpu", "gfx942"])
def test_profiling_other_targets_and_levels_are_refused(target):
    with pytest.raises(CompileError) as e:
        tilec.compile(str(SAMPLES / "softmax.tile"), target=target, profile=True)
    assert "available on CUDA targets" in e.value.diagnostics[0].message
    with pytest.raises(CompileError) as e:
        tilec.compile(str(SAMPLES / "softmax.tile"), target="sm90", profile="everything")
    assert "unknown profile level 'everything' (known: full, sync)" in e.value.diagnostics[0].message


@pytest.mark.parametrize("sample, target", [("flash_attention", "sm90"), ("gemm", "sm90"), ("flash_attention", "sm80")])
def test_instrumented_cuda_builds_with_nvcc(sample, target):
    if not shutil.which("nvcc"):
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("nvcc is required (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip("no nvcc")
    art = tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, emit="cubin", profile=True, use_cache=False)
    manifest = json.loads(art.manifest)
    assert art.data[:4] == b"\x7fELF" and all(k["profile"]["symbol"] == "tilec_profile" for k in manifest["kernels"])
    assert b"tilec_profile" in art.data  # the module variable the runtime writes


def test_cli_sizes_and_refusals(capsys):
    from tilec.cli.main import main
    from tilec.cli.profile import sizes_of

    assert sizes_of(["B=4,S=4096", "H=16"]) == {"B": 4, "S": 4096, "H": 16}
    with pytest.raises(ValueError, match="--size S=x: expected NAME=INTEGER"):
        sizes_of(["S=x"])
    assert main(["profile", str(SAMPLES / "softmax.tile"), "--target", "webgpu", "--size", "M=4,N=64"]) == 2
    assert "available on CUDA targets, not webgpu" in capsys.readouterr().err


def test_cli_build_dir_writes_both_builds(tmp_path, capsys):
    if not shutil.which("nvcc"):
        pytest.skip("no nvcc")
    from tilec.cli.main import main

    rc = main(["profile", str(SAMPLES / "softmax.tile"), "--target", "sm80", "--size", "M=64,N=1024",
               "--level", "sync", "--build-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 0 and "python -m tilec.runtime.profile_worker" in err and "--size=N=1024" in err
    prof = json.loads((tmp_path / "softmax.prof.cubin.json").read_text())
    plain = json.loads((tmp_path / "softmax.cubin.json").read_text())
    assert prof["kernels"][0]["profile"]["level"] == "sync" and "profile" not in plain["kernels"][0]
