"""Findings of issue #27 outside the lowering of per-thread copies (tests/test_threads.py has those): each test
fails on the compiler before its fix.

- an out-of-bounds store under a condition on another loop variable is the interpreter's out-of-bounds
  diagnostic, not numpy's broadcasting error;
- a kernel whose name the generated code reserves (`main`, the `tl_` prefix) is published under another name,
  said in a warning at the kernel;
- check-threads refuses shared-memory accesses under thread-dependent control flow only where one buffer is
  written and read there (a write of one buffer under a condition that reads another needs no barrier inside).
"""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tilec.cli.main import main as tilec_main
from tilec.interp import run_kernel
from tilec.interp.tile_interp import InterpreterError
from tilec.targets.registry import lookup
from tilec.testing.simt_interp import run_simt


def test_out_of_bounds_store_under_a_condition_on_another_loop_variable():
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with T.Kernel(1, threads=64) as bx:
        s = T.alloc_shared([16], T.float32)
        for i, j in T.Parallel(4, 8):
            if j < 3:
                s[i + 14] = A[i]
        B[0] = s[0]
"""
    k = tilec.compile("k.tile", text=text).module.kernels[0]
    with pytest.raises(InterpreterError, match=r"out-of-bounds write of 's': index 16 in dimension 0 of size 16"):
        run_kernel(k, {"A": np.ones(64, np.float32), "B": np.zeros(64, np.float32)})


@pytest.mark.parametrize("name", ["main", "tl_topk"])
def test_a_renamed_kernel_is_said_in_a_warning(tmp_path, capsys, name):
    src = tmp_path / "k.tile"
    src.write_text(f"kernel {name}(A: f32[N], B: out f32[N]):\n"
                   "    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:\n"
                   "        for i in T.Parallel(128):\n"
                   "            B[bx * 128 + i] = A[bx * 128 + i]\n")
    assert tilec_main([str(src), "--target", "sm80", "-o", str(tmp_path / "k.cu")]) == 0
    err = capsys.readouterr().err
    assert f"k.tile:1:1: warning: kernel '{name}' is published as '{name}_'" in err
    assert f'"name": "{name}_"' in (tmp_path / "k.cu.json").read_text()
    assert tilec_main([str(src), "--target", "sm80", "-o", str(tmp_path / "w.cu"), "-Werror"]) == 1


SHARED_UNDER_CONDITION = """
kernel k(A: f32[N], B: out f32[N]):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        s1 = T.alloc_shared([64], T.float32)
        s2 = T.alloc_shared([64], T.float32)
        s1[tx] = A[tx]
        s2[tx] = 0.0
        if s1[(tx + 1) % 64] > 0.0:
            s2[tx] = s1[(tx + 1) % 64] * 2.0
        B[tx] = s2[(tx + 3) % 64]
"""


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx942", "webgpu"])
def test_a_shared_write_under_a_condition_reading_another_buffer(target):
    """Accepted (it was refused as a race), and right: the SIMT model reports a race where a barrier is missing."""
    k = tilec.compile("k.tile", text=SHARED_UNDER_CONDITION).module.kernels[0]
    a = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    want = {"A": a, "B": np.full(64, np.nan, np.float32)}
    run_kernel(k, want)
    got = {"A": a, "B": np.full(64, np.nan, np.float32)}
    result = tilec.compile("k.tile", text=SHARED_UNDER_CONDITION, target=target, verify=True)
    run_simt(result.simt.kernels[0], got, {"N": 64}, warp_size=lookup(target).warp_size)
    assert (got["B"] == want["B"]).all() and (want["B"] != 0).any()


def test_the_same_buffer_under_its_own_condition_is_still_refused():
    from tilec.diagnostics import CompileError

    text = SHARED_UNDER_CONDITION.replace("s2[tx] = s1[(tx + 1) % 64] * 2.0", "s1[tx] = 2.0")
    with pytest.raises(CompileError, match="writes shared memory that the statement at line 9 reads"):
        tilec.compile("k.tile", text=text)
