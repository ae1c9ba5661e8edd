"""Row kernels (softmax, rmsnorm, layernorm) on rows of odd length (a vocabulary of 50257, N = 1001, ...).

Such a row starts at any element of a 16-byte chunk, so the vector loads of a row into registers used to fall to
one 2-byte load an element. Now a load of a misaligned row into a fragment still moves a vector at a time
(`load_realign`: the two aligned vectors that cover it, funnel-shifted; element by element only where the row or the
tensor ends), and the no-TMA twin of a kernel whose streamed rows TMA would copy realigns its cp.async pipelines as
gemm's twin does (`copy_shifted` / `copy16_realign`). The SIMT model checks the values, the units' alignment and
that no aligned read reaches past the tensor, against the Tile IR interpreter at ragged shapes for f16, bf16 and f32;
planted bugs (a wrong shift, a missing mask, a wrong tensor end) fail. The header's funnel shift itself is compiled
for the CPU with the host's C++ compiler and checked byte by byte, every shift of every unit width.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import tilec
from tilec.ir import tile as T
from tilec.ir.dtypes import I64
from tilec.ops import copy as copy_op
from tilec.simt.interp import SimtInterpreterError
from tilec.testing.differential import simt_against_interpreter

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
HEADER = ROOT / "tilec" / "targets" / "cuda" / "include" / "tilec_cuda.h"
# One row a block, streamed in column tiles of 4 (or 8) elements a thread straight into registers (the schedule the
# tuned builds run at 4096 x 50257): rows past block_N.
DIRECT = {"block_M": 1, "block_N": 512, "threads": 64, "row_grid": 2, "tile_elems": 4}
# Two rows a block streamed through a pipelined shared tile: TMA on sm90, so misaligned rows run the no-TMA twin.
STREAMED = {"block_M": 2, "block_N": 256, "threads": 64}


def _run(sample: str, defines: dict, target: str, sizes: dict[str, int], kernel: str | None = None,
         seed: int = 0, realign_rows: bool = True) -> collections.Counter:
    """Run the lowered kernel (by default the first; built with --realign-rows unless told) in the SIMT model against
    the Tile IR interpreter; returns how many lanes ran each intrinsic statement."""
    tk = tilec.compile(str(SAMPLES / f"{sample}.tile"), defines=defines).module.kernels[0]
    lowered = tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, defines=defines, verify=True,
                            realign_rows=realign_rows)
    sk = next(k for k in lowered.simt.kernels if kernel is None or k.name == kernel)
    wrong, counts = simt_against_interpreter(tk, sk, sizes, seed)
    assert not wrong, f"{sample} {defines} {target} at {sizes}: " + "; ".join(wrong)
    return counts


@pytest.mark.parametrize("sample,dtype,target,sizes", [
    ("softmax", "bf16", "sm90", {"M": 3, "N": 1001}),
    ("softmax", "f16", "sm80", {"M": 5, "N": 1003}),
    ("rmsnorm", "bf16", "sm90", {"M": 5, "N": 1027}),
    ("rmsnorm", "f32", "sm90", {"M": 3, "N": 1025}),
    ("layernorm", "f16", "sm90", {"M": 3, "N": 999}),
    ("layernorm", "f32", "sm80", {"M": 2, "N": 1030}),
])
def test_odd_rows_load_vectors(sample, dtype, target, sizes):
    """Rows of odd length (and f32 rows of a length not a multiple of 4) load a vector at a time; every row starts
    at another place in its aligned unit, and the last one ends inside the tensor's last unit."""
    counts = _run(sample, {**DIRECT, "dtype": dtype}, target, sizes)
    assert counts["load_realign"] > 0, counts


def test_odd_rows_load_elements_by_default():
    """Off by default (--realign-rows asks for it): on the H200 the realigned bf16 rows ran up to 2.6x slower."""
    counts = _run("softmax", {**DIRECT, "dtype": "bf16"}, "sm90", {"M": 3, "N": 1001}, realign_rows=False)
    assert counts["load_realign"] == 0, counts
    twin = _run("layernorm", {**STREAMED, "dtype": "bf16"}, "sm90", {"M": 5, "N": 701}, kernel="layernorm__no_tma",
                realign_rows=False)
    assert twin["copy_shifted"] == 0, twin


def test_aligned_rows_keep_the_plain_vector_load():
    counts = _run("rmsnorm", {**DIRECT, "dtype": "bf16"}, "sm90", {"M": 3, "N": 1024})
    assert counts["load_realign"] == 0 and counts["load_vec"] > 0, counts


def test_hip_keeps_element_loads():
    """Only the CUDA targets have load_realign (the HIP header does not): gfx90a stays element by element."""
    from tilec.targets.registry import backend_available, lookup
    if not backend_available(lookup("gfx90a").backend):
        pytest.skip("no hip back end")
    lowered = tilec.compile(str(SAMPLES / "softmax.tile"), target="gfx90a", defines={**DIRECT, "dtype": "f16"},
                            realign_rows=True)
    assert "load_realign" not in lowered.source


@pytest.mark.parametrize("sample,dtype", [("layernorm", "bf16"), ("softmax", "f16")])
def test_sm90_row_twin_realigns_its_pipelines(sample, dtype):
    """The no-TMA twin (launched for misaligned rows) copies its streamed rows 16 bytes at a time."""
    counts = _run(sample, {**STREAMED, "dtype": dtype}, "sm90", {"M": 5, "N": 701}, kernel=f"{sample}__no_tma")
    assert counts["copy_shifted"] > 0 and counts["copy16_realign"] > 0, counts


# ---------------------------------------------------------------- planted bugs


def _planted(monkeypatch, name, fn, sample="rmsnorm", sizes=None):
    monkeypatch.setattr(copy_op, name, fn)
    with pytest.raises((AssertionError, SimtInterpreterError)) as info:
        _run(sample, {**DIRECT, "dtype": "bf16"}, "sm90", sizes or {"M": 3, "N": 1001}, seed=1)
    return info.value


def test_a_wrong_shift_is_caught(monkeypatch):
    real = copy_op.realign_split

    def off_by_one(flat, vec):
        unit, _ = real(flat, vec)
        _, shift = real(copy_op.binary("+", flat, T.Const(flat.dtype, None, 1)), vec)
        return unit, shift

    _planted(monkeypatch, "realign_split", off_by_one)


def test_a_missing_mask_is_caught(monkeypatch):
    """Every vector read whole, past the row's end: rmsnorm's sum of squares takes the next row's elements."""
    _planted(monkeypatch, "realign_count", lambda cx, mem, idx, vec: copy_op.c(vec))


def test_a_read_past_the_tensor_is_caught(monkeypatch):
    """The tensor's last full vector needs the unit after it, which reaches past the tensor: load_realign reads it
    element by element because of the end it is given; a wrong end is refused by the model."""
    err = _planted(monkeypatch, "tensor_elements", lambda cx, b: T.Const(I64, None, 1 << 40),
                   sizes={"M": 2, "N": 1001})
    assert "out-of-bounds" in str(err) or "end" in str(err)


# ---------------------------------------------------------------- the header's funnel shift, on the CPU

_PRELUDE = """
#include <cstdio>
#include <cstring>
#define TL_HOST_DEVICE inline
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
namespace tl {
"""
_CHECK = """
}  // namespace tl
template <typename U>
static int check(unsigned seed) {
  const int W = int(sizeof(U));
  int bad = 0;
  for (int trial = 0; trial < 64; ++trial) {
    unsigned char raw[2 * sizeof(U)];
    for (int i = 0; i < 2 * W; ++i) { seed = seed * 1103515245u + 12345u; raw[i] = (unsigned char)(seed >> 16); }
    U lo, hi;
    memcpy(&lo, raw, W);
    memcpy(&hi, raw + W, W);
    for (int s = 0; s < W; ++s) {
      U out = tl::shift_units(lo, hi, (unsigned)s);
      if (memcmp(&out, raw + s, W) != 0) ++bad;
    }
  }
  return bad;
}
int main() {
  int b4 = check<unsigned>(1u), b8 = check<unsigned long long>(2u), b16 = check<uint4>(3u);
  printf("%d %d %d\\n", b4, b8, b16);
  return (b4 || b8 || b16) ? 1 : 0;
}
"""


def _host_functions(text: str) -> str:
    """The header's TL_HOST_DEVICE functions (each with the template line before it), as written there."""
    out = []
    for m in re.finditer(r"^(template <[^\n]*>\n)?TL_HOST_DEVICE [^\n]*\{", text, re.M):
        depth, i = 0, m.end() - 1
        while True:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        out.append(text[m.start():i])
    return "\n".join(out)


def _shift_program(tmp_path: Path, functions: str) -> subprocess.CompletedProcess:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src = tmp_path / "shift.cpp"
    src.write_text(_PRELUDE + functions + _CHECK)
    subprocess.run([cxx, "-std=c++17", "-O1", str(src), "-o", str(tmp_path / "shift")], check=True,
                   capture_output=True, text=True)
    return subprocess.run([str(tmp_path / "shift")], capture_output=True, text=True)


def test_header_funnel_shift_on_the_cpu(tmp_path):
    functions = _host_functions(HEADER.read_text())
    assert "shift_units" in functions and "realign_words" in functions
    run = _shift_program(tmp_path, functions)
    assert run.returncode == 0 and run.stdout.split() == ["0", "0", "0"], run.stdout


def test_header_funnel_shift_catches_a_planted_bug(tmp_path):
    functions = _host_functions(HEADER.read_text())
    wrong = functions.replace("(8u * sizeof(T) - bits)", "(8u * sizeof(T) - bits - 8u)")
    wrong = wrong.replace("(s & 3u) * 8u", "(s & 1u) * 8u")
    assert wrong != functions
    run = _shift_program(tmp_path, wrong)
    bad = [int(x) for x in run.stdout.split()]
    assert run.returncode == 1 and all(b > 0 for b in bad), run.stdout
