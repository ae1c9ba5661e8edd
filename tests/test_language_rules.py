"""Language rules that are easy to get subtly wrong: each checked through the compiler and the
interpreter, the way a kernel author would meet it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel

ROOT = Path(__file__).resolve().parent.parent


def kernel_of(tmp_path, text: str):
    p = tmp_path / "k.tile"
    p.write_text(text)
    return tilec.compile(p).module.kernels[0]


def error_of(tmp_path, text: str) -> str:
    p = tmp_path / "k.tile"
    p.write_text(text)
    with pytest.raises(CompileError) as e:
        tilec.compile(p)
    return " ".join(d.message for d in e.value.diagnostics)


def test_comparisons_chain_as_in_python(tmp_path):
    k = kernel_of(tmp_path, "kernel k(A: out f32[N]):\n    with Kernel(1, threads=128) as bx:\n"
                            "        for i in Parallel(128):\n            if 64 <= i < 100:\n"
                            "                A[i] = 1.0\n")
    a = np.zeros(128, np.float32)
    run_kernel(k, {"A": a})
    assert a.sum() == 36 and a[64] == 1 and a[100] == 0 and a[63] == 0


def test_integer_literal_that_does_not_fit_promotes(tmp_path):
    k = kernel_of(tmp_path, "kernel k(U: u8[N], O: out i32[N]):\n    with Kernel(1, threads=128) as bx:\n"
                            "        for i in Parallel(4):\n            O[i] = U[i] * 300\n")
    u = np.array([1, 2, 3, 200], np.uint8)
    o = np.zeros(4, np.int32)
    run_kernel(k, {"U": u, "O": o})
    assert list(o) == [300, 600, 900, 60000]


def test_update_of_outer_scalar_in_parallel_is_an_error(tmp_path):
    msg = error_of(tmp_path, "kernel k(A: f32[N], B: out f32[N]):\n    with Kernel(1, threads=128) as bx:\n"
                             "        total = 0.0\n        for i in Parallel(4):\n            total += A[i]\n"
                             "        B[0] = total\n")
    assert "cannot update 'total' inside a Parallel loop" in msg


def test_local_made_inside_parallel_may_be_updated(tmp_path):
    k = kernel_of(tmp_path, "kernel k(A: f32[N], B: out f32[N]):\n    with Kernel(1, threads=128) as bx:\n"
                            "        for i in Parallel(4):\n            t = A[i]\n            t += 1.0\n"
                            "            B[i] = t\n")
    b = np.zeros(4, np.float32)
    run_kernel(k, {"A": np.arange(4, dtype=np.float32), "B": b})
    assert list(b) == [1, 2, 3, 4]


def test_allocation_inside_parallel_is_an_error(tmp_path):
    msg = error_of(tmp_path, "kernel k(A: f32[N], B: out f32[N]):\n    with Kernel(1, threads=128) as bx:\n"
                             "        for i in Parallel(4):\n            t = alloc_local((2,), f32)\n"
                             "            B[i] = A[i]\n")
    assert "alloc_local cannot be used inside a Parallel loop" in msg


def test_runtime_size_and_scalar_parameter_may_not_share_a_name(tmp_path):
    msg = error_of(tmp_path, "kernel k(A: out f32[n], n: i32):\n    with Kernel(1, threads=128) as bx:\n"
                             "        for i in Parallel(4):\n            A[i] = 1.0\n")
    assert "both a runtime size" in msg


def test_docstring_in_kernel_body(tmp_path):
    k = kernel_of(tmp_path, 'kernel k(A: out f32[N]):\n    """Fills four elements."""\n'
                            "    with Kernel(1, threads=128) as bx:\n        for i in Parallel(4):\n"
                            "            A[i] = 1.0\n")
    assert k.name == "k"


def test_cuda_source_on_stdout_writes_no_stray_manifest(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tilec", str(ROOT / "samples/vector_add.tile"), "--target", "sm90",
                           "--emit", "cu", "-o", "-", "--no-cache"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert 'extern "C" __global__' in proc.stdout
    assert not (tmp_path / "-.json").exists()
