"""Shape contracts (issue #27, item 1): a tensor's shape chosen by consts in every spelling TileLang uses, and
`assert` conditions on the sizes, recorded in the manifest and checked before every launch — the interpreter
(`tilec run`), tilec.runtime (CUDA on the fake driver, WebGPU), the C and HIP launchers. samples/gemm.tile's B is
tied to K and N, so a B of another shape is an error naming the parameter, the dimension and both sizes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_cuda import FakeDriver, install

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel
from tilec.interp.tile_interp import InterpreterError

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.tile"

SPELLINGS = [
    "T.Tensor([K, N] if not trans_B else [N, K], dtype)",
    "T.Tensor((K, N) if not trans_B else (N, K), dtype)",
    "T.Tensor([K, N] if not trans_B else [N, K], dtype=dtype)",
    "T.Tensor(shape=[K, N] if not trans_B else [N, K], dtype=dtype)",
    "T.Tensor[[K, N] if not trans_B else [N, K], dtype]",
    "dtype[K if not trans_B else N, N if not trans_B else K]",
]


def _kernel(b_type: str) -> str:
    return f"""
const trans_B = False
const dtype = f16
kernel k(A: dtype[M, K], B: {b_type}, C: out dtype[M, N]):
    with T.Kernel(1, threads=128) as bx:
        C[0, 0] = A[0, 0] + B[0, 0]
"""


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_shape_chosen_by_a_const(spelling, trans_b):
    k = tilec.compile("k.tile", text=_kernel(spelling), defines={"trans_B": trans_b}).module.kernels[0]
    b = next(p for p in k.params if p.name == "B")
    assert [d.name for d in b.shape] == (["N", "K"] if trans_b else ["K", "N"])
    assert [v.name for v in k.size_vars] == ["M", "K", "N"]


@pytest.mark.parametrize("spelling,message", [
    ("T.Tensor([K, N] if M else [N, K], dtype)", "a shape is chosen by consts, but 'M' is no const"),
    ("T.Tensor((K, N), dtype, 3)", "a parameter type is dtype[dims] or T.Tensor((dims...), dtype)"),
])
def test_a_shape_choice_that_is_no_const_is_refused(spelling, message):
    with pytest.raises(CompileError) as e:
        tilec.compile("k.tile", text=_kernel(spelling))
    errors = [d for d in e.value.diagnostics if d.severity == "error"]
    assert len(errors) == 1 and message in errors[0].message and errors[0].span.line == 4


CONTRACT = """
kernel scale(X: f32[M, K], Y: out f32[M, K]):
    assert K % 8 == 0, "K must be a multiple of 8"
    assert M >= 2 and M < 4096
    with T.Kernel(T.ceildiv(M, 4), threads=128) as bx:
        assert K <= 1024
        for i, j in T.Parallel(4, 8):
            for c in T.serial(K // 8):
                if bx * 4 + i < M:
                    Y[bx * 4 + i, c * 8 + j] = X[bx * 4 + i, c * 8 + j] * 2.0
"""
CHECKS = [{"lhs": "(K % 8)", "op": "==", "rhs": "0", "message": "K must be a multiple of 8"},
          {"lhs": "2", "op": "<=", "rhs": "M", "message": "assert M >= 2"},
          {"lhs": "(M + 1)", "op": "<=", "rhs": "4096", "message": "assert M < 4096"},
          {"lhs": "K", "op": "<=", "rhs": "1024", "message": "assert K <= 1024"}]


def _args(m, k):
    return {"X": np.ones((m, k), np.float32), "Y": np.zeros((m, k), np.float32)}


def test_asserts_become_launch_checks_in_the_ir_and_the_interpreter():
    k = tilec.compile("c.tile", text=CONTRACT).module.kernels[0]
    assert k.attrs["launch_checks"] == CHECKS
    out = run_kernel(k, _args(5, 16))
    assert (out["Y"] == 2).all()
    with pytest.raises(InterpreterError, match=r"K must be a multiple of 8: \(K % 8\) = 4, 0 = 0"):
        run_kernel(k, _args(5, 12))
    with pytest.raises(InterpreterError, match=r"assert M >= 2: 2 = 2, M = 1"):
        run_kernel(k, _args(1, 16))


@pytest.mark.parametrize("line,message", [
    ("assert K % 8 != 0", "write `or`, `not` and `!=` as separate asserts"),
    ("assert K < 8 or K > 16", "write `or`, `not` and `!=` as separate asserts"),
    ("assert blk == 3, \"block must be 3\"", "assertion fails for these consts: block must be 3"),
    ("assert K > 1, K", "an assert's message is a string literal"),
])
def test_refused_asserts_are_located(line, message):
    text = "const blk = 4\n" + CONTRACT.replace('    assert K % 8 == 0, "K must be a multiple of 8"', "    " + line)
    with pytest.raises(CompileError) as e:
        tilec.compile("c.tile", text=text)
    errs = [d for d in e.value.diagnostics if d.severity == "error"]
    assert errs and message in errs[0].message and errs[0].span.line == 4, [(d.span, d.message) for d in errs]


def test_an_assert_on_a_block_index_is_refused():
    with pytest.raises(CompileError) as e:
        tilec.compile("c.tile", text=CONTRACT.replace("assert K <= 1024", "assert K <= bx * 4"))
    errs = [d for d in e.value.diagnostics if d.severity == "error"]
    assert "a condition on the kernel's sizes and consts, checked before the launch; 'bx' is not one of them" in \
        errs[0].message and errs[0].span.line == 6


def test_an_assert_the_consts_prove_adds_no_check():
    text = "const blk = 4\n" + CONTRACT.replace('assert K % 8 == 0, "K must be a multiple of 8"', "assert blk == 4")
    k = tilec.compile("c.tile", text=text).module.kernels[0]
    assert k.attrs["launch_checks"] == CHECKS[1:]


def _cuda_module(text, target="sm80"):
    from tilec.artifacts import kernel_entry
    from tilec.runtime.module import Module

    r = tilec.compile("k.tile", text=text, target=target) if not isinstance(text, Path) else \
        tilec.compile(str(text), target=target, defines={"block_M": 64, "block_N": 64, "block_K": 32,
                                                        "threads": 128, "num_stages": 2})
    entries = [kernel_entry(k, sk, {}) for k, sk in zip(r.module.kernels, r.simt.kernels, strict=True)]
    manifest = {"manifest_version": 1, "kind": "cubin", "archs": ["sm_80"], "driver_api_version": 13000,
                "toolchain": "nvcc", "kernels": entries}
    return Module(b"\0", manifest), entries


def test_the_cuda_runtime_checks_the_contract_before_the_driver(monkeypatch):
    import tilec.runtime as rt

    mod, entries = _cuda_module(CONTRACT)
    assert entries[0]["launch_checks"] == CHECKS  # recorded in the manifest
    fake = install(monkeypatch, FakeDriver({e["name"]: e for e in entries}, capability=(8, 0)))
    mod.scale(*_args(5, 16).values())
    assert len(fake.launches) == 1
    with pytest.raises(rt.ArgumentError, match=r"scale: K must be a multiple of 8: \(K % 8\) = 4"):
        mod.scale(*_args(5, 12).values())
    assert len(fake.launches) == 1


def test_gemm_refuses_a_b_that_does_not_match_k_and_n(monkeypatch):
    """The issue's case: B of 32 rows for K=64 used to run (reading zeros); every runtime now refuses it."""
    import tilec.runtime as rt

    mod, entries = _cuda_module(GEMM)
    assert entries[0]["sizes"] == ["M", "K", "N"]
    fake = install(monkeypatch, FakeDriver({e["name"]: e for e in entries}, capability=(8, 0)))
    a, c = np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float16)
    mod.gemm(a, np.zeros((64, 64), np.float16), c)
    assert len(fake.launches) == 1
    with pytest.raises(rt.ArgumentError, match=r"size K is 64 from an earlier argument but 32 from 'B'"):
        mod.gemm(a, np.zeros((32, 64), np.float16), c)
    k = tilec.compile(str(GEMM), defines={"block_M": 64, "block_N": 64}).module.kernels[0]
    with pytest.raises(InterpreterError, match=r"'B'.*dimension 0.*expected 64.*got 32|'B'"):
        run_kernel(k, {"A": a, "B": np.zeros((32, 64), np.float16), "C": c})


def _tilec(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tilec", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)


def test_tilec_run_derives_what_contracts_determine_and_refuses_to_guess(tmp_path):
    src = tmp_path / "d.tile"
    src.write_text("""
kernel double(X: f32[K], Y: out f32[N]):
    assert N == 2 * K, "Y holds two copies of X"
    with T.Kernel(1, threads=128) as bx:
        for i in T.serial(N):
            Y[i] = X[i % K]
""")
    ok = _tilec("run", src, "--size", "K=5")  # N derived from the contract
    assert ok.returncode == 0 and "Y: f32[10]" in ok.stdout, ok.stderr
    bad = _tilec("run", src, "--size", "K=5,N=11")
    assert bad.returncode == 1 and "Y holds two copies of X: N = 11, (2 * K) = 10" in bad.stderr, bad.stderr
    gemm = _tilec("run", GEMM, "--size", "M=64,N=64", "-D", "block_M=64", "-D", "block_N=64")
    assert gemm.returncode == 1 and "--size gives M, N but not K, which nothing in the kernel determines" \
        in gemm.stderr, gemm.stderr
    old = _tilec("run", GEMM, "--size", "M=64,N=64,K=64,B_rows=32,B_cols=64", "-D", "block_M=64")
    assert old.returncode == 1 and "has no runtime size B_cols, B_rows (its sizes: M, K, N)" in old.stderr


def test_the_c_launcher_refuses_a_broken_contract():
    from tilec.targets.c_launcher.header import Image, generate_header

    _, entries = _cuda_module(CONTRACT)
    header = generate_header("scale.h", [Image("sm80", "sm_80", b"\0", entries)], source_name="c.tile",
                             tilec_version="0", toolchain="nvcc", driver_api_version=13000, source_hash="0")
    assert "if (!(tilec_floormod_(((int64_t)K), INT64_C(8)) == INT64_C(0))) return CUDA_ERROR_INVALID_VALUE; " \
           "/* K must be a multiple of 8 */" in header
    assert " * Checks before launching: K must be a multiple of 8 ((K % 8) == 0)." in header
    cc = shutil.which("cc")
    cuda_h = [p for p in ("/usr/local/cuda/include", "/usr/include") if (Path(p) / "cuda.h").exists()]
    if cc is None or not cuda_h:
        pytest.skip("no C compiler or cuda.h to compile the header")
    src = header + "\nint main(void) { return (int)scale_launch(0, 0, 0, 5, 12); }\n"
    res = subprocess.run([cc, "-std=c11", "-fsyntax-only", f"-I{cuda_h[0]}", "-x", "c", "-"], input=src,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_the_hip_launcher_refuses_a_broken_contract():
    from tilec.artifacts import kernel_entry
    from tilec.targets.hip.launcher import generate_object_source

    r = tilec.compile("c.tile", text=CONTRACT, target="gfx942")
    entries = [kernel_entry(k, sk, {}) for k, sk in zip(r.module.kernels, r.simt.kernels, strict=True)]
    src, _, _ = generate_object_source("scale", [("gfx942", b"\0", entries)], source_name="c.tile",
                                       tilec_version="0", toolchain="clang", prefix="",
                                       embed=lambda n, d: f"static const unsigned char {n}[1] = {{0}};")
    assert "return hipErrorInvalidValue; /* K must be a multiple of 8 */" in src


FLAT = """
kernel flat(A: f32[M, N], C: f32[K], O: out f32[K]):
    with Kernel(ceildiv(K, 128), threads=128) as bx:
        A2 = T.Tensor((K,), f32, A.data)
        t = alloc_fragment((128,), f32)
        copy(A2[bx * 128], t)
        copy(t, O[bx * 128])
"""


@pytest.mark.parametrize("api", ["cuda", "hip"])
def test_the_c_launcher_explains_a_broken_contract(tmp_path, api):
    """K_check_sizes (issue #27): the check K_launch refuses, in tilec.runtime's words -- the parameter, the
    dimension or view, the values expected and got -- written by C code that calls no driver function: the CUDA
    header's (static inline) and the HIP -c object's (exported, hipError_t), compiled and run on the CPU."""
    from tilec.runtime.arrays import ArgumentError
    from tilec.targets.c_launcher.header import Image, generate_header
    from tilec.targets.hip.launcher import generate_object_source

    cc = shutil.which("cc")
    inc = ("cuda.h", ("/usr/local/cuda/include", "/usr/include")) if api == "cuda" else \
        ("hip/hip_runtime_api.h", (os.environ.get("ROCM_PATH", "/opt/rocm") + "/include", "/usr/include"))
    found = [p for p in inc[1] if (Path(p) / inc[0]).exists()]
    if cc is None or not found:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"a C compiler and {inc[0]} are required (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip(f"no C compiler or {inc[0]} to compile the launcher")
    rng = np.random.default_rng()
    k_bad = int(rng.integers(1, 100)) * 8 + int(rng.integers(1, 8))  # not a multiple of 8
    m_ok = int(rng.integers(2, 4000))
    cases = []  # (kernel, C call, expected message (tilec.runtime's, where it has one))
    units = []
    for text, name in ((CONTRACT, "scale"), (FLAT, "flat")):
        mod, entries = _cuda_module(text)
        if api == "cuda":
            header = generate_header(f"{name}.h", [Image("sm80", "sm_80", b"\0", entries)], source_name="c.tile",
                                     tilec_version="0", toolchain="nvcc", driver_api_version=13000,
                                     source_hash="0")
            assert f"static inline CUresult {name}_check_sizes(" in header
            (tmp_path / f"{name}.h").write_text(header)
        else:
            source, exported, protos = generate_object_source(
                f"{name}.o", [("gfx942", b"\0", entries)], source_name="c.tile", tilec_version="0",
                toolchain="clang", prefix="", embed=lambda n, d: f"static const unsigned char {n}[] = {{0}};")
            assert f"{name}_check_sizes" in exported
            assert any(p.startswith(f"hipError_t {name}_check_sizes(") for p in protos)
            (tmp_path / f"{name}.c").write_text(source)
            (tmp_path / f"{name}.h").write_text("#include <stddef.h>\n#include <stdint.h>\n"
                                                "#include <hip/hip_runtime_api.h>\n" + "\n".join(protos) + "\n")
            units.append(str(tmp_path / f"{name}.c"))
        kernel = getattr(mod, name)
        if name == "scale":
            calls = [((m_ok, k_bad), {"M": m_ok, "K": k_bad}), ((1, 16), {"M": 1, "K": 16}),
                     ((m_ok, 2048), {"M": m_ok, "K": 2048}), ((m_ok, 16), None), ((-3, 16), None)]
        else:
            n = int(rng.integers(1, 50))
            calls = [((3, n, 3 * n + 1), {"M": 3, "N": n, "K": 3 * n + 1}), ((3, n, 3 * n), None),
                     ((3, -1, 5), None)]
        for sizes, named in calls:
            want = ""
            if named is not None:
                with pytest.raises(ArgumentError) as e:
                    kernel._sizes_from_shapes(kernel._layout(), _shapes(name, named))
                want = str(e.value)
            elif min(sizes) < 0:
                bad = next(s for s, v in zip(entries[0]["sizes"], sizes, strict=True) if v < 0)
                want = f"{name}: size {bad} = {min(sizes)} is negative"
            cases.append((name, sizes, want))
    main = ["#include <stdio.h>", '#include "scale.h"', '#include "flat.h"', "int main(void) {", "  char m[512];"]
    for name, sizes, _ in cases:
        args = ", ".join(map(str, sizes))
        main.append(f'  printf("%d|%s\\n", (int){name}_check_sizes({args}, m, sizeof m), m);')
    main += ["  return 0;", "}"]
    (tmp_path / "main.c").write_text("\n".join(main) + "\n")
    exe = tmp_path / "main"
    build = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", f"-I{found[0]}", f"-I{tmp_path}",
                            # HIP: the launchers (which call HIP) are dropped, so that no HIP library is needed
                            *(["-D__HIP_PLATFORM_AMD__=1", "-ffunction-sections", "-Wl,--gc-sections"]
                              if api == "hip" else []),
                            str(tmp_path / "main.c"), *units, "-o", str(exe), "-Wl,--unresolved-symbols=ignore-all",
                            "-lpthread"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    print("\n".join(lines))
    invalid = 1  # CUDA_ERROR_INVALID_VALUE and hipErrorInvalidValue are both 1
    for (name, sizes, want), line in zip(cases, lines, strict=True):
        rc, msg = line.split("|", 1)
        assert (rc, msg) == ((str(invalid), want) if want else ("0", "")), (name, sizes)


def _shapes(name, s):
    """Tensor shapes giving these sizes, in the kernel's tensor order."""
    if name == "scale":
        return [(s["M"], s["K"]), (s["M"], s["K"])]
    return [(s["M"], s["N"]), (s["K"],), (s["K"],)]
