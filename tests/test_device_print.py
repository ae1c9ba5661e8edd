"""Device-side print (tilec/ops/print.py): one text format for the Tile IR interpreter, the SIMT interpreter
(executing the lowering lane by lane) and the GPUs' printf.

The GPU half is tests/gpu/test_device_print_gpu.py (bench/device_print_check.py on the H200); here: the format
itself against numpy, the lowering's text against the interpreter's for sm80, sm90 (wgmma accumulators,
warp-specialized pipeline) and gfx942, the filters, the refusals, and real nvcc / clang builds of the printf.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import random_inputs, run_kernel
from tilec.simt.interp import run_simt
from tilec.targets.registry import lookup
from tilec.testing.print_text import compare_prints

PRINTS = """
kernel k(A: f16[M, K], C: out f32[M, K]):
    with Kernel(ceildiv(M, 16), threads=64) as bx:
        s = alloc_shared((16, 12), f16)
        f = alloc_fragment((16, 12), f32)
        copy(A[bx * 16, 0], s)
        copy(s, f)
        print(s, "tile", block=(1,))
        print(f[2:4, :], msg="frag")
        print(A[bx * 16 + 14:bx * 16 + 18, 0:3], "edge")
        print(bx * 2 + 1, msg="x%y", thread=5)
        copy(f, C[bx * 16, 0])
"""

GEMM_PRINT = """
const bm = 64
const bn = 64
const bk = 32
kernel g(A: f16[M, K], B: f16[K, N], C: out f32[M, N]):
    with Kernel(ceildiv(N, bn), ceildiv(M, bm), threads=128) as (bx, by):
        A_s = alloc_shared((bm, bk), f16)
        B_s = alloc_shared((bk, bn), f16)
        acc = alloc_fragment((bm, bn), f32)
        clear(acc)
        for k in Pipelined(ceildiv(K, bk), num_stages=2):
            copy(A[by * bm, k * bk], A_s)
            copy(B[k * bk, bx * bn], B_s)
            gemm(A_s, B_s, acc)
        print(acc[5:7, 8:24], "acc", block=(1, 0))
        copy(acc, C[by * bm, bx * bn])
"""


def _both(text: str, target: str, sizes: dict[str, int], seed: int = 3) -> tuple[str, str]:
    """(Tile IR interpreter's output, SIMT interpreter's output of the target's lowering) on fresh inputs."""
    tk = tilec.compile("p.tile", text=text).module.kernels[0]
    sk = tilec.compile("p.tile", text=text, target=target).simt.kernels[0]
    args = random_inputs(tk, sizes, seed)
    copy = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    want, got = io.StringIO(), io.StringIO()
    run_kernel(tk, args, stdout=want)
    run_simt(sk, copy, sizes, warp_size=lookup(target).warp_size, stdout=got)
    return want.getvalue(), got.getvalue()


def test_interpreter_format_against_numpy():
    rng = np.random.default_rng()
    a = rng.standard_normal((20, 12)).astype(np.float16)
    out = io.StringIO()
    tk = tilec.compile("p.tile", text=PRINTS).module.kernels[0]
    run_kernel(tk, {"A": a, "C": np.zeros((20, 12), np.float32)}, stdout=out)
    lines = out.getvalue().splitlines()
    # the fragment rows 2..3 of block 0, 8 values a line, indices relative to the region
    assert lines[0] == "[block (0, 0, 0)] frag f[0, 0:8]: " + " ".join(format(v, ".5g") for v in a[2, 0:8])
    assert lines[1] == "[block (0, 0, 0)] frag f[0, 8:12]: " + " ".join(format(v, ".5g") for v in a[2, 8:12])
    assert lines[2].startswith(f"[block (0, 0, 0)] frag f[1, 0:8]: {a[3, 0]:.5g} ")
    # a global region: rows 14..17 of block 0 are inside the tensor (M = 20)
    assert lines[4] == "[block (0, 0, 0)] edge A[0, 0:3]: " + " ".join(format(v, ".5g") for v in a[14, 0:3])
    assert lines[8] == "[block (0, 0, 0) thread 5] x%y: 1"
    # block 1's rows 30..33 of A are past M = 20: printed as 0, as a guarded copy reads them
    assert "[block (1, 0, 0)] edge A[3, 0:3]: 0 0 0" in lines
    # block=(1,) is block (1, 0, 0) only; the shared tile prints all 16 rows there
    tile = [ln for ln in lines if " tile s[" in ln]
    assert len(tile) == 32 and all(ln.startswith("[block (1, 0, 0)] tile s[") for ln in tile)
    assert tile[0] == "[block (1, 0, 0)] tile s[0, 0:8]: " + " ".join(format(v, ".5g") for v in a[16, 0:8])


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx942"])
def test_lowered_print_matches_the_interpreter(target):
    """Ragged M: block 1 reads past the tensor. The fragment is gathered through shared memory."""
    want, got = _both(PRINTS, target, {"M": 21, "K": 12})
    assert want and got == want


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_gemm_accumulator_print_matches_the_interpreter(target):
    """An mma.sync (sm80) or wgmma (sm90: TMA, warp-specialized) accumulator, a sub-region, one block."""
    want, got = _both(GEMM_PRINT, target, {"M": 100, "N": 130, "K": 70})
    assert want.count("\n") == 4 and compare_prints(got, want, rtol=1e-4, atol=1e-4) == []
    assert compare_prints(got.replace("acc[1, 8:16]: -", "acc[1, 8:16]: 1"), want, 1e-4, 1e-4)  # (it can fail)


def test_block_filter_reaches_no_other_block():
    want, _ = _both(GEMM_PRINT, "sm80", {"M": 64, "N": 64, "K": 32})
    assert want == ""  # a single block (0, 0): block=(1, 0) prints nothing


@pytest.mark.parametrize("bad, message", [
    ('print(bx, block=(0, 0, 0, 0))', "one to three block indices"),
    ('print(bx, thread=-1)', "thread index"),
    ('print(bx, thread=64)', "the kernel has 64 threads"),
    ('print(bx, where=1)', "print(value"),
])
def test_bad_filters_are_diagnostics(bad, message):
    text = f"""
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        {bad}
        copy(A[bx * 64:(bx + 1) * 64], B[bx * 64:(bx + 1) * 64])
"""
    with pytest.raises(CompileError) as e:
        tilec.compile("p.tile", text=text, target="sm80")
    assert any(message in d.message and d.span.line == 4 for d in e.value.diagnostics)


@pytest.mark.parametrize("target, message", [("webgpu", "print cannot run on WebGPU"),
                                             ("ascend910b", "print cannot run on the AscendC back end")])
def test_targets_without_device_print_refuse_it(target, message):
    with pytest.raises(CompileError) as e:
        tilec.compile("p.tile", text=PRINTS, target=target)
    errs = [d for d in e.value.diagnostics if d.severity == "error"]
    assert errs and message in errs[0].message and errs[0].span.line == 8


def test_printf_spelling_escapes_the_label():
    src = tilec.compile("p.tile", text=PRINTS, target="sm80").source
    assert 'printf("[block (%lld, %lld, %lld) thread 5] x%%y: %lld\\n"' in src
    assert "print_scratch_f32" in src  # the fragment goes through shared memory


def _require(tool: str | None, what: str) -> str:
    if tool:
        return tool
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1)")
    pytest.skip(f"no {what}")


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_printf_builds_with_nvcc(target, tmp_path):
    _require(shutil.which("nvcc"), "nvcc")
    for name, text in (("p", PRINTS), ("g", GEMM_PRINT)):
        art = tilec.compile(f"{name}.tile", text=text, options=None, target=target, emit="cubin", use_cache=False)
        assert art.data[:4] == b"\x7fELF"


def test_printf_builds_for_amd(tmp_path):
    from tilec.targets.hip.toolchain import find_compiler

    _require(find_compiler("gfx942", printf=True) and "clang", "clang-19")
    readelf = _require(shutil.which("llvm-readelf-19") or shutil.which("llvm-readelf"), "llvm-readelf")
    art = tilec.compile("p.tile", text=PRINTS, target="gfx942", emit="hsaco", use_cache=False)
    path = tmp_path / "p.hsaco"
    path.write_bytes(art.data)
    notes = subprocess.run([readelf, "--notes", str(path)], capture_output=True, text=True).stdout
    assert "hidden_printf_buffer" in notes and "tile s[%lld, 8:12]: %.5g %.5g %.5g %.5g" in notes
