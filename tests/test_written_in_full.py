"""Outputs a kernel writes in full at every launch (tilec/ir/coverage.py; the manifest's written_in_full), which a
padded launch copies back from its workspace without copying them in first (tests/test_padded_tma.py runs that).

The claim is checked against the reference interpreter, not only against the rule: every sample kernel the analysis
marks, run at ragged sizes on an output poisoned with NaN, leaves no element unwritten. Planted kernels that leave
part of the output alone (half the grid, a shifted tile, a condition, a loop, a fixed dimension half covered) are
not marked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.artifacts import kernel_entries
from tilec.interp import random_inputs, run_kernel
from tilec.ir import tile as T
from tilec.ir.coverage import outputs_written_in_full

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
G64 = {"block_M": 64, "block_N": 64, "block_K": 32, "threads": 128, "num_stages": 2}
# (sample, defines, ragged sizes): small tiles, so that the interpreter runs several blocks along each dimension
CASES = [
    ("gemm", G64, {"M": 150, "N": 70, "K": 40}),
    ("gemm", {**G64, "trans_B": True}, {"M": 65, "N": 130, "K": 33}),
    ("gemm_bias_relu", G64, {"M": 70, "N": 129, "K": 20}),
    ("flash_attention", {}, {"B": 2, "S": 70, "H": 3}),
    ("transpose", {}, {"M": 100, "N": 37}),
    ("row_sum", {}, {"M": 20, "N": 300}),
]


def _kernel(sample: str, defines: dict, target: str | None) -> T.Kernel:
    return tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, defines=defines, tune_db="").module.kernels[0]


@pytest.mark.parametrize("sample, defines, sizes", CASES, ids=[c[0] + ("_tB" if c[1].get("trans_B") else "")
                                                                for c in CASES])
def test_what_the_analysis_marks_the_interpreter_writes_everywhere(sample, defines, sizes):
    marked = outputs_written_in_full(_kernel(sample, defines, "sm90"))
    assert marked, f"{sample}: the analysis proves nothing (the test would check nothing)"
    tk = _kernel(sample, defines, None)
    args = random_inputs(tk, {n: v for n, v in sizes.items() if n in {s.name for s in tk.size_vars}}, seed=3)
    for name in marked:
        args[name][...] = np.nan
    run_kernel(tk, args)
    for name in marked:
        assert not np.isnan(args[name].astype(np.float64)).any(), f"{sample}: {name} has elements nobody wrote"


@pytest.mark.parametrize("sample, defines, want", [
    ("gemm", {}, ["C"]),  # the sm90 default: rasterized (use_swizzle), TMA-stored
    ("gemm", {"persistent": True, "block_M": 128, "block_N": 128, "threads": 128, "block_K": 64}, ["C"]),
    ("fp8_gemm", {}, ["C"]),
    ("flash_attention", {"dtype": "bf16", "dim": 256}, ["O"]),  # (at 128, O leaves by plain stores: not tma_only)
])
def test_the_samples_manifests_name_their_tma_stored_outputs(sample, defines, want):
    entries = {e["name"]: e for e in kernel_entries(tilec.compile(str(SAMPLES / f"{sample}.tile"), target="sm90",
                                                                  defines=defines, tune_db=""))}
    (tma,) = [e for e in entries.values() if "tensor_maps" in e and not e.get("internal")]
    assert tma["written_in_full"] == want
    assert all(tma["tma_only"][n] == "store" for n in want)
    # the twins pad nothing they store: the no-TMA twin has no maps, the direct-stores twin (fp8_gemm) loads alone
    assert all("written_in_full" not in e for e in entries.values() if e.get("internal"))


def test_split_k_stages_each_write_their_output_in_full():
    r = tilec.compile(str(SAMPLES / "gemm.tile"), target="sm90", tune_db="",
                      defines={"block_M": 64, "block_N": 128, "block_K": 64, "threads": 128, "split_k": 4})
    marked = {k.name: outputs_written_in_full(k) for k in r.module.kernels}
    assert marked["gemm__stage0"] == ["Partial"]  # every plane, every tile (split_k blocks along z)
    assert marked["gemm__stage1"] == ["C"]


PLANTED = """
const bm = 32
const bn = 64

kernel k(A: f32[M, N], C: out f32[M, N], D: out f32[M, 64]):
    with Kernel({grid_x}, ceildiv(M, bm), threads=128) as (bx, by):
        t = alloc_fragment((bm, bn), f32)
        copy(A[by * bm, bx * bn], t)
        {store}
"""


@pytest.mark.parametrize("grid_x, store, want", [
    ("ceildiv(N, bn)", "copy(t, C[by * bm, bx * bn])", ["C"]),  # the tiles cover C
    ("ceildiv(N, 2 * bn)", "copy(t, C[by * bm, bx * bn])", []),  # half the grid along N
    ("ceildiv(N, bn)", "copy(t, C[by * bm, bx * bn + 1])", []),  # shifted: column 0 of each tile left
    ("ceildiv(N, bn)", "copy(t, C[by * bm, by * bn])", []),  # one block index for both dimensions
    ("ceildiv(N, bn)", "copy(t, C[bx * bm, by * bn])", []),  # the block indices swapped
    ("ceildiv(N, bn)", "if bx > 0:\n            copy(t, C[by * bm, bx * bn])", []),  # under a condition
    ("ceildiv(N, bn)", "for r in range(1):\n            copy(t, C[by * bm, bx * bn])", []),  # in a loop
    ("1", "copy(t, D[by * bm, 0])", ["D"]),  # a fixed dimension of 64 in one tile of 64
    ("1", "copy(t[0:bm, 0:32], D[by * bm, 0])", []),  # half of it
    # a local standing for a block index: the index itself, its reverse (the blocks in the other order), not a shift
    ("ceildiv(N, bn)", "x = bx\n        copy(t, C[by * bm, x * bn])", ["C"]),
    ("ceildiv(N, bn)", "x = ceildiv(N, bn) - 1 - bx\n        copy(t, C[by * bm, x * bn])", ["C"]),
    ("ceildiv(N, bn)", "x = ceildiv(N, bn) - bx\n        copy(t, C[by * bm, x * bn])", []),
    ("ceildiv(N, bn)", "x = ceildiv(M, bm) - 1 - by\n        copy(t, C[by * bm, x * bn])", []),
    ("ceildiv(N, bn)", "x = bx\n        x = bx + 1\n        copy(t, C[by * bm, x * bn])", []),  # assigned twice
    ("ceildiv(N, bn)", "x = by\n        copy(t, C[x * bm, by * bn])", []),  # by in both dimensions
])
def test_planted_partial_writes_are_not_marked(grid_x, store, want):
    kernel = tilec.compile("planted.tile", text=PLANTED.format(grid_x=grid_x, store=store)).module.kernels[0]
    assert outputs_written_in_full(kernel) == want


def test_the_benchmarks_copyin_build_strips_the_claim(tmp_path):
    """bench/misaligned_h200.py copyin OUT LABEL: the same cubins, manifests without written_in_full (the A/B of the
    copy into the workspace on the H200)."""
    import json
    import subprocess
    import sys

    (tmp_path / "after").mkdir()
    entry = {"name": "gemm", "tma_only": {"C": "store"}, "written_in_full": ["C"]}
    (tmp_path / "after" / "gemm_f16.cubin.json").write_text(json.dumps({"kernels": [entry]}))
    (tmp_path / "after" / "gemm_f16.cubin").write_bytes(b"\x7fELF")
    subprocess.run([sys.executable, str(ROOT / "bench" / "misaligned_h200.py"), "copyin", str(tmp_path), "after"],
                   check=True)
    (kernel,) = json.loads((tmp_path / "after_copyin" / "gemm_f16.cubin.json").read_text())["kernels"]
    assert kernel == {"name": "gemm", "tma_only": {"C": "store"}}
    assert (tmp_path / "after_copyin" / "gemm_f16.cubin").read_bytes() == b"\x7fELF"
