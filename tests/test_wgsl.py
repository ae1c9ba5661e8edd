"""The WebGPU back end: WGSL generation and WebGPU's limits (no device needed), and every sample WebGPU
can express run through wgpu (Mesa's lavapipe in CI) against the interpreter at a regular and a ragged
shape. Execution tests skip without wgpu or an adapter, and fail under TILEC_REQUIRE_TOOLCHAINS=1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.cli.main import main as tilec_main
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel
from tilec.interp.run import random_inputs

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"

# (sample, defines, [regular sizes, ragged sizes], rtol/atol)
F32_GEMM = {"dtype": "f32", "block_M": 64, "block_N": 64, "block_K": 16}
FLASH = {"dtype": "f32", "block_M": 16, "block_N": 32, "dim": 32}
CASES = [
    ("vector_add", {}, [{"N": 2048}, {"N": 1000}]),
    ("vector_add", {"dtype": "f32"}, [{"N": 4096}, {"N": 777}]),
    ("row_sum", {}, [{"M": 32, "N": 512}, {"M": 37, "N": 300}]),
    ("softmax", {}, [{"M": 8, "N": 1024}, {"M": 37, "N": 1000}]),
    ("softmax", {"dtype": "f32"}, [{"M": 8, "N": 512}, {"M": 5, "N": 1300}]),
    ("rmsnorm", {}, [{"M": 8, "N": 1024}, {"M": 37, "N": 1000}]),
    ("layernorm", {}, [{"M": 8, "N": 1024}, {"M": 37, "N": 1000}]),
    # The defaults above stream rows longer than 512; these hold a ragged row on chip (one read of X).
    ("softmax", {"block_M": 2, "block_N": 1024}, [{"M": 8, "N": 1024}, {"M": 37, "N": 700}]),
    ("rmsnorm", {"block_M": 2, "block_N": 1024}, [{"M": 37, "N": 700}]),
    ("layernorm", {"block_M": 2, "block_N": 1024}, [{"M": 37, "N": 700}]),
    # the persistent row schedule: three workgroups looping over the rows, held or (past block_N) streamed
    ("softmax", {"block_M": 2, "block_N": 512, "row_grid": 3}, [{"M": 37, "N": 500}, {"M": 9, "N": 700}]),
    ("rmsnorm", {"block_M": 2, "block_N": 512, "row_grid": 3}, [{"M": 37, "N": 500}, {"M": 9, "N": 700}]),
    ("layernorm", {"block_M": 2, "block_N": 512, "row_grid": 3}, [{"M": 37, "N": 500}, {"M": 9, "N": 700}]),
    ("transpose", {}, [{"M": 128, "N": 64}, {"M": 100, "N": 37}]),
    ("transpose", {"dtype": "f32", "block_M": 32, "block_N": 32}, [{"M": 64, "N": 64}, {"M": 45, "N": 70}]),
    ("gemm", F32_GEMM, [{"M": 128, "N": 128, "K": 64}, {"M": 100, "N": 130, "K": 70}]),
    ("gemm", {**F32_GEMM, "trans_B": True}, [{"M": 64, "N": 64, "K": 32},
                                             {"M": 70, "N": 50, "K": 33}]),
    ("gemm", {"dtype": "f16"}, [{"M": 128, "N": 128, "K": 64}, {"M": 100, "N": 130, "K": 70}]),
    # split-K: f32 atomic adds into C (compare-exchange loops on u32 words); the last K block runs past K
    ("gemm_splitk", {}, [{"M": 70, "N": 50, "K": 200}]),
    ("gemm_bias_relu", {"block_K": 16}, [{"M": 128, "N": 128, "K": 32}, {"M": 70, "N": 130, "K": 45}]),
    ("flash_attention", FLASH, [{"B": 1, "S": 64, "H": 2}, {"B": 2, "S": 50, "H": 3}]),
    ("flash_attention", {**FLASH, "causal": True}, [{"B": 1, "S": 64, "H": 1}, {"B": 1, "S": 45, "H": 2}]),
    # the WebGPU default (f16, dim 64, 16x32 tiles, row statistics through workgroup memory)
    ("flash_attention", {}, [{"B": 1, "S": 64, "H": 1}, {"B": 1, "S": 45, "H": 2}]),
    # bf16: tensors of u16 patterns in u32 words, values converted to f32 in the kernel
    ("vector_add", {"dtype": "bf16"}, [{"N": 2048}, {"N": 1001}]),
    ("row_sum", {"dtype": "bf16", "block_M": 8}, [{"M": 37, "N": 303}]),
    ("softmax", {"dtype": "bf16"}, [{"M": 37, "N": 1000}]),
    ("layernorm", {"dtype": "bf16"}, [{"M": 37, "N": 701}]),
    ("transpose", {"dtype": "bf16"}, [{"M": 100, "N": 37}]),
    # (bf16 shared buffers are f32 arrays: half gemm's default block_K to fit 16 KiB)
    ("gemm", {"dtype": "bf16", "block_K": 16}, [{"M": 100, "N": 130, "K": 70}]),
]
TOLERANCE = {"f16": (1e-2, 1e-2), "bf16": (2e-2, 3e-2), "f32": (1e-4, 1e-4), "i32": (0, 0)}


def _require(ok: bool, what: str) -> None:
    if ok:
        return
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1) but not available")
    pytest.skip(what)


@pytest.fixture(scope="module")
def webgpu():
    """The wgpu device (lavapipe on CI), or a skip saying why there is none."""
    from tilec.runtime import wgsl

    ok, why = wgsl.available()
    _require(ok, f"WebGPU: {why}")
    dev = wgsl.Device.get()
    _require("shader-f16" in dev.features, f"the WebGPU adapter {dev.name} has no shader-f16 (without a GPU, install "
             "Mesa's lavapipe: apt-get install mesa-vulkan-drivers)")
    return wgsl


def _wgsl(path, defines=None, **kw):
    return tilec.compile(str(path), target="webgpu", defines=defines or {}, verify=True, **kw)


def _errors(path=None, defines=None, text=None, **kw) -> list:
    with pytest.raises(CompileError) as e:
        if text is not None:
            tilec.compile("k.tile", text=text, target="webgpu", defines=defines or {}, **kw)
        else:
            _wgsl(path, defines, **kw)
    return [d for d in e.value.diagnostics if d.severity == "error"]


def _module(result, tmp_path: Path, name: str):
    """Write result as name.wgsl + manifest and load it through tilec.runtime, as a user would."""
    import tilec.runtime as rt
    from tilec.artifacts import dumps, manifest

    out = tmp_path / f"{name}.wgsl"
    out.write_text(result.source)
    Path(str(out) + ".json").write_text(dumps(manifest(result, "wgsl", ["wgsl"], "none", {}, out.name)))
    return rt.load(out)


def _run_and_compare(result, mod, sizes: dict[str, int], seed: int = 0) -> None:
    for k in result.module.kernels:
        args = random_inputs(k, {n: v for n, v in sizes.items() if n in {s.name for s in k.size_vars}}, seed)
        expected = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
        run_kernel(k, expected)
        getattr(mod, k.name)(*[args[p.name] for p in k.params])
        for p in k.params:
            if isinstance(p, tilec.ir.tile.Buffer) and p.is_output:
                got, want = args[p.name].astype(np.float64), expected[p.name].astype(np.float64)
                rtol, atol = TOLERANCE[p.dtype.name]
                bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
                assert not bad.any(), (f"{k.name}.{p.name} at {sizes}: {int(bad.sum())} of {bad.size} differ, "
                                       f"max |err| {np.max(np.abs(got - want)):.3g}")


# ---------------------------------------------------------------- running on wgpu


@pytest.mark.parametrize("sample,defines,shapes", CASES,
                         ids=[f"{s}-{'-'.join(f'{k}={v}' for k, v in d.items()) or 'default'}" for s, d, _ in CASES])
def test_sample_matches_interpreter(webgpu, tmp_path, sample, defines, shapes):
    import tilec.ir.tile  # noqa: F401  (for _run_and_compare)

    result = _wgsl(SAMPLES / f"{sample}.tile", defines)
    mod = _module(result, tmp_path, sample)
    for sizes in shapes:
        _run_and_compare(result, mod, sizes)


def test_cli_run_check_softmax(webgpu, capsys):
    """The issue's acceptance: `tilec run samples/softmax.tile --target webgpu --check` passes without a GPU."""
    rc = tilec_main(["run", str(SAMPLES / "softmax.tile"), "--target", "webgpu", "--check", "--size", "M=37,N=700"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "check Y against the interpreter: PASS" in out


def test_cli_build_then_load(webgpu, tmp_path):
    out = tmp_path / "softmax.wgsl"
    assert tilec_main([str(SAMPLES / "softmax.tile"), "--target", "webgpu", "-o", str(out)]) == 0
    meta = json.loads(Path(str(out) + ".json").read_text())
    assert meta["backend"] == "wgsl" and meta["kind"] == "wgsl" and meta["target"] == "webgpu"
    abi = meta["kernels"][0]["abi"]
    assert [b["access"] for b in abi["bindings"]] == ["read", "read_write"]
    assert [f["name"] for f in abi["uniform"]["fields"]] == ["M", "N"]
    assert abi["features"] == ["shader-f16"]
    import tilec.runtime as rt

    mod = rt.load(out)
    x = np.random.default_rng(1).standard_normal((9, 333)).astype(np.float16)
    y = np.zeros_like(x)
    mod.softmax(x, y)
    ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=1e-2, atol=1e-3)


def test_integer_ops_and_atomics(webgpu, tmp_path):
    """Floor division and modulo of negative ints, bit operations, select, ceildiv, i32 atomics."""
    text = """
kernel ints(A: i32[N], B: out i32[N], C: out i32[N], D: out f32[N], Hist: out i32[16], d: i32):
    with Kernel(ceildiv(N, 128), threads=128) as bx:
        for i in Parallel(128):
            j = bx * 128 + i
            if j < N:
                B[j] = A[j] // d
                C[j] = (A[j] % d) ^ (A[j] & 6)
                D[j] = if_then_else(A[j] > 0 or A[j] < -5, cast(A[j] | 1, f32), sigmoid(cast(A[j], f32))) \\
                       + cast(ceildiv(A[j], 3), f32)
        atomic_add(Hist[bx % 16], 1)
        atomic_max(Hist[15], bx)   # a slot no add touches (< 16 blocks): max and add do not commute
"""
    result = tilec.compile("ints.tile", text=text, target="webgpu")
    assert "atomic<i32>" in result.source and "tl_floordiv" in result.source
    mod = _module(result, tmp_path, "ints")
    k = result.module.kernels[0]
    for n, d in ((1000, 3), (300, -4)):
        args = random_inputs(k, {"N": n})
        args["d"] = d
        expected = {a: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for a, v in args.items()}
        run_kernel(k, expected)
        mod.ints(*[args[p.name] for p in k.params])
        for name in ("B", "C", "Hist"):
            np.testing.assert_array_equal(args[name], expected[name], err_msg=name)
        np.testing.assert_allclose(args["D"], expected["D"], rtol=1e-5, atol=1e-6)


def test_uniform_condition_keeps_barriers(webgpu, tmp_path):
    """A branch on a scalar parameter and a read-only tensor is uniform: its barriers are allowed."""
    text = """
kernel k(A: f32[N], B: out f32[N], flag: i32):
    with Kernel(ceildiv(N, 128), threads=128) as bx:
        s = alloc_shared((128,), f32)
        t = alloc_shared((128,), f32)
        copy(A[bx * 128], s)
        if flag > 0 and A[0] > -1000.0:
            copy(s, t)
            copy(t, B[bx * 128])
"""
    result = tilec.compile("k.tile", text=text, target="webgpu")
    body = result.source.split("if (flag > 0", 1)[1]
    assert "workgroupBarrier();" in body
    mod = _module(result, tmp_path, "k")
    a = np.arange(300, dtype=np.float32)
    b = np.zeros_like(a)
    mod.k(a, b, 1)
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- runtime errors


def test_runtime_checks_dispatch_size(webgpu, tmp_path):
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(N, threads=32) as bx:
        for i in Parallel(32):
            if i == 0:
                B[bx] = A[bx] * 2.0
"""
    mod = _module(tilec.compile("k.tile", text=text, target="webgpu"), tmp_path, "k")
    a = np.ones(70000, np.float32)
    with pytest.raises(webgpu.LaunchError, match=r"70000 workgroups along x for N=70000.*at most 65535"):
        mod.k(a, np.zeros_like(a))


def test_runtime_checks_workgroup_storage_of_the_adapter(webgpu, tmp_path):
    """A kernel built for more workgroup memory than this adapter grants fails at launch, clearly."""
    defs = {**F32_GEMM, "block_M": 128, "block_N": 128, "block_K": 64}
    result = _wgsl(SAMPLES / "gemm.tile", defs, limits={"shared_memory_bytes": 1 << 20})
    mod = _module(result, tmp_path, "gemm")
    have = webgpu.Device.get().limits["max-compute-workgroup-storage-size"]
    if result.simt.kernels[0].attrs["abi"]["workgroup_storage_bytes"] <= have:
        pytest.skip(f"this adapter grants {have} bytes of workgroup storage")
    a = np.zeros((64, 64), np.float32)
    with pytest.raises(webgpu.LaunchError, match="bytes of workgroup storage"):
        mod.gemm(a, a, np.zeros_like(a))


def test_shader_errors_are_wrapped(webgpu):
    from tilec.runtime.wgsl import WgslModule

    result = _wgsl(SAMPLES / "vector_add.tile", {"dtype": "f32"})
    from tilec.artifacts import manifest

    meta = json.loads(json.dumps(manifest(result, "wgsl", ["wgsl"], "none", {}, "x.wgsl")))
    broken = WgslModule(result.source.replace("let N: i32", "let N: f32"), meta, "broken.wgsl")
    a = np.zeros(10, np.float32)
    with pytest.raises(webgpu.ShaderError) as e:
        broken.vector_add(a, a, a.copy())
    msg = str(e.value)
    assert msg.startswith("WebGPU rejected the WGSL that tilec generated for kernel 'vector_add' (broken.wgsl)")
    assert "bug in tilec" in msg


def test_runtime_argument_errors(webgpu, tmp_path):
    mod = _module(_wgsl(SAMPLES / "vector_add.tile", {"dtype": "f32"}), tmp_path, "va")
    from tilec.runtime import ArgumentError

    a = np.zeros(10, np.float32)
    with pytest.raises(ArgumentError, match="dtype float64, expected float32"):
        mod.vector_add(a, a, np.zeros(10))
    with pytest.raises(ArgumentError, match=r"takes 3 argument\(s\) \(A, B, C\), or 2 without its outputs"):
        mod.vector_add(a)


# ---------------------------------------------------------------- WGSL text (no device)


def test_wgsl_interface():
    src = _wgsl(SAMPLES / "layernorm.tile").source
    assert src.splitlines()[3] == "enable f16;"
    assert "@group(0) @binding(0) var<storage, read> X: array<f16>;" in src
    assert "@group(0) @binding(3) var<storage, read_write> Y: array<f16>;" in src
    assert "struct tl_params {\n  eps: f32,\n  M: i32,\n  N: i32,\n}" in src
    assert "@group(0) @binding(4) var<uniform> tl_u: tl_params;" in src
    assert "var<workgroup> x_s: array<f16, 1024>;" in src  # 4 rows x 256 (WebGPU default)
    assert "@compute @workgroup_size(128)" in src
    assert "@builtin(local_invocation_index)" in src and "@builtin(workgroup_id)" in src
    assert "workgroupBarrier();" in src
    assert "shfl" not in src and "copy16" not in src and "aligned16" not in src


def test_f32_kernel_has_no_f16():
    src = _wgsl(SAMPLES / "gemm.tile", F32_GEMM).source
    assert "enable f16" not in src and "f16" not in src.split("\n", 2)[2]


def test_reserved_words_are_renamed():
    text = """
kernel k(A: f32[N], select: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in Parallel(64):
            loop = bx * 64 + i
            if loop < N:
                select[loop] = exp(A[loop])
"""
    src = tilec.compile("k.tile", text=text, target="webgpu").source
    assert "select_tl: array<f32>" in src and "let loop_tl: i32" in src and "exp(A[loop_tl])" in src


def test_build_is_deterministic(tmp_path):
    outs = []
    for i in range(2):
        out = tmp_path / f"g{i}.wgsl"
        assert tilec_main([str(SAMPLES / "gemm.tile"), "--target", "webgpu", "-o", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_wrong_output_kind(tmp_path, capsys):
    assert tilec_main([str(SAMPLES / "softmax.tile"), "--target", "webgpu", "-o", str(tmp_path / "x.cubin")]) == 1
    assert "use -o NAME.wgsl" in capsys.readouterr().err


def test_runtime_imports_without_the_compiler():
    code = ("import sys, tilec.runtime, tilec.runtime.wgsl; "
            "bad = [m for m in ('lark', 'tvm', 'tilec.driver', 'tilec.passes', 'tilec.ir') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ---------------------------------------------------------------- diagnostics (no device)


@pytest.mark.parametrize("dtype,why", [("f64", "no 64-bit floats")])
def test_f64_rejected_at_the_kernel(dtype, why):
    """(fp8 runs: held as f32, rounded after each operation, stored a byte at a time: test_webgpu_narrow_ints.py)"""
    errs = _errors(SAMPLES / "vector_add.tile", {"dtype": dtype})
    assert len(errs) == 1
    assert why in errs[0].message and f"is {dtype}" in errs[0].message
    kernel_line = next(i for i, t in enumerate((SAMPLES / "vector_add.tile").read_text().splitlines(), 1)
                       if t.startswith("kernel "))
    assert errs[0].span is not None and errs[0].span.line == kernel_line


def test_workgroup_storage_limit_and_override():
    errs = _errors(SAMPLES / "gemm.tile", {"dtype": "f32"})  # 128x32 + 32x128 f32 tiles = 32 KiB
    assert "32768 bytes of shared memory" in errs[0].message and "allows 16384" in errs[0].message
    # at the allocation of the largest tile (tests/test_diagnostics.py checks the notes at the others)
    assert "alloc_shared(" in (SAMPLES / "gemm.tile").read_text().splitlines()[errs[0].span.line - 1]
    result = _wgsl(SAMPLES / "gemm.tile", {"dtype": "f32"}, limits={"shared_memory_bytes": 32768})
    assert result.simt.kernels[0].attrs["abi"]["workgroup_storage_bytes"] == 32768


def test_max_workgroup_storage_option(tmp_path):
    out = tmp_path / "g.wgsl"
    args = [str(SAMPLES / "gemm.tile"), "--target", "webgpu", "-D", "dtype=f32", "-o", str(out)]
    assert tilec_main(args) == 1
    assert tilec_main(args + ["--max-workgroup-storage", "32768"]) == 0
    assert json.loads(Path(str(out) + ".json").read_text())["kernels"][0]["shared_bytes"] == 32768


def test_invocations_limit():
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 512), threads=512) as bx:
        for i in Parallel(512):
            if bx * 512 + i < N:
                B[bx * 512 + i] = A[bx * 512 + i]
"""
    errs = _errors(text=text)
    assert "512 threads per block; webgpu allows at most 256" in errs[0].message
    assert (errs[0].span.line, errs[0].span.col) == (3, 34)  # at threads=


def test_dispatch_limit_at_compile_time():
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(70000, threads=64) as bx:
        for i in Parallel(64):
            if bx * 64 + i < N:
                B[bx * 64 + i] = A[bx * 64 + i]
"""
    errs = _errors(text=text)
    assert "70000 blocks along x" in errs[0].message and "65535" in errs[0].message and errs[0].span.line == 2


def test_storage_buffer_limit():
    params = ", ".join(f"A{i}: f32[N]" for i in range(8))
    text = f"""
kernel k({params}, B: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in Parallel(64):
            j = bx * 64 + i
            if j < N:
                B[j] = {' + '.join(f'A{i}[j]' for i in range(8))}
"""
    errs = _errors(text=text)
    assert "9 tensor parameters" in errs[0].message and "at most 8 per shader stage" in errs[0].message
    assert errs[0].span.line == 2
    assert tilec.compile("k.tile", text=text, target="webgpu", limits={"max_storage_buffers": 10}).source


def test_barrier_in_nonuniform_branch():
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 128), threads=128) as bx:
        s = alloc_shared((128,), f32)
        t = alloc_shared((128,), f32)
        copy(A[bx * 128], s)
        if s[0] > 0.0:
            copy(A[bx * 128], t)
            copy(t, B[bx * 128])
"""
    errs = _errors(text=text)
    assert len(errs) == 1
    e = errs[0]
    assert e.span.line == 7 and "non-uniform control flow" in e.message and "reads shared memory ('s')" in e.message
    assert e.notes and e.notes[0].span.line == 8
    tilec.compile("k.tile", text=text, target="sm80")  # CUDA has no such rule


def test_barrier_in_loop_with_nonuniform_trip_count():
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 128), threads=128) as bx:
        s = alloc_shared((128,), f32)
        copy(A[bx * 128], s)
        for it in Serial(cast(s[0], i32)):
            copy(A[bx * 128], s)
            copy(s, B[bx * 128])
"""
    errs = _errors(text=text)
    assert errs and errs[0].span.line == 6 and "loop's trip count reads shared memory" in errs[0].message


FLOAT_ATOMICS = """
kernel colsum(A: f32[M, 64], Acc: out f32[64], Top: out f32[64]):
    with Kernel(ceildiv(M, 32), threads=128) as bx:
        s = alloc_shared((32, 64), f32)
        col = alloc_fragment((64,), f32)
        copy(A[bx * 32, 0], s)
        reduce_sum(s, col, dim=0)
        atomic_add(Acc[0], col)
        reduce_max(s, col, dim=0)
        atomic_max(Top[0], col)
"""


def test_float_atomics_are_compare_exchange_loops(webgpu, tmp_path):
    """WGSL has atomics for i32 and u32 only: an f32 tensor updated atomically is bound as atomic<u32> bits and
    each update retries a compare-exchange; many blocks adding into the same elements give the column sums."""
    result = tilec.compile("colsum.tile", text=FLOAT_ATOMICS, target="webgpu")
    assert "array<atomic<u32>>" in result.source and "atomicCompareExchangeWeak" in result.source
    mod = _module(result, tmp_path, "colsum")
    rng = np.random.default_rng(5)
    for m in (256, 77):
        a = rng.standard_normal((m, 64)).astype(np.float32)
        acc, top = np.zeros(64, np.float32), np.full(64, -1e30, np.float32)
        mod.colsum(a, acc, top)
        np.testing.assert_allclose(acc, a.sum(0), rtol=1e-4, atol=1e-4)
        padded_max = a.max(0) if m % 32 == 0 else np.maximum(a.max(0), 0.0)  # (the last tile's rows past M read 0)
        np.testing.assert_array_equal(top, padded_max)


def test_half_float_atomics_rejected():
    errs = _errors(text=FLOAT_ATOMICS.replace("Acc: out f32[64]", "Acc: out f16[64]"))
    assert errs[0].span.line == 8 and "WGSL atomics exist only for 32-bit words" in errs[0].message


def test_print_is_refused():
    text = """
kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        print(bx, "block")
        for i in Parallel(64):
            if bx * 64 + i < N:
                B[bx * 64 + i] = A[bx * 64 + i]
"""
    errs = _errors(text=text)
    assert len(errs) == 1 and "print cannot run on WebGPU" in errs[0].message and errs[0].span.line == 4


def test_cuda_lowering_unchanged_by_the_target_features():
    """The CUDA targets keep warp shuffles and 16-byte copies; webgpu gets neither."""
    cu = tilec.compile(str(SAMPLES / "softmax.tile"), target="sm80").source
    assert "__shfl_xor_sync" in cu and ("tl::cp_async_cg_16" in cu or "tl::copy16" in cu)


def test_every_kernel_that_compiles_is_valid_wgsl(webgpu):
    """Every sample and IR test that compiles for webgpu gives WGSL that naga accepts; the rest fail with
    diagnostics, never an internal error."""
    files = sorted(set(SAMPLES.glob("*.tile")) | set((ROOT / "tests" / "ir").glob("*.tile")))
    device = webgpu.Device.get().device
    compiled = 0
    for f in files:
        for defines in ({}, {"dtype": "f32"}):
            try:
                result = tilec.compile(str(f), target="webgpu", defines=defines)
            except CompileError:
                continue
            device.create_shader_module(code=result.source)
            compiled += 1
    assert compiled >= 20


def test_f16_needs_shader_f16(webgpu, tmp_path, monkeypatch):
    mod = _module(_wgsl(SAMPLES / "vector_add.tile"), tmp_path, "va16")
    monkeypatch.setattr(webgpu.Device.get(), "features", set())
    a = np.zeros(8, np.float16)
    with pytest.raises(webgpu.LaunchError, match="does not support shader-f16; rebuild it with -D dtype=f32"):
        mod.vector_add(a, a, a.copy())


def test_cli_runs_a_prebuilt_artifact(webgpu, tmp_path, capsys):
    out = tmp_path / "va.wgsl"
    assert tilec_main([str(SAMPLES / "vector_add.tile"), "--target", "webgpu", "-o", str(out)]) == 0
    assert tilec_main(["run", str(out), "--target", "webgpu", "--size", "N=100"]) == 0
    assert "vector_add.C: f16[100]" in capsys.readouterr().out


def test_integer_row_reduction_is_exact(webgpu, tmp_path):
    """Row sums of i32 combine through an i32 scratch (an f32 one would round past 2**24)."""
    text = """
kernel rows(A: i32[M, 64], S: out i32[M], X: out i32[M]):
    with Kernel(ceildiv(M, 4), threads=128) as bx:
        a = alloc_fragment((4, 64), i32)
        s = alloc_fragment((4,), i32)
        x = alloc_fragment((4,), i32)
        copy(A[bx * 4, 0], a)
        reduce_sum(a, s, dim=1)
        reduce_max(a, x, dim=1)
        copy(s, S[bx * 4])
        copy(x, X[bx * 4])
"""
    result = tilec.compile("rows.tile", text=text, target="webgpu")
    mod = _module(result, tmp_path, "rows")
    a = np.random.default_rng(2).integers(-(2**20), 2**20, (10, 64)).astype(np.int32) + (2**20 + 1)
    s, x = np.zeros(10, np.int32), np.zeros(10, np.int32)
    mod.rows(a, s, x)
    np.testing.assert_array_equal(s, a.sum(axis=1))
    np.testing.assert_array_equal(x, a.max(axis=1))


def test_byte_input_tensors_are_read_from_their_words(webgpu, tmp_path):
    """bool, i8 and u8 input tensors (a block mask, quantized weights) are bound as the u32 words holding their
    bytes and each element extracted (sign-extended for i8), at sizes that are not a multiple of 4."""
    text = """
kernel bytes(M: bool[N], Q: i8[N], U: u8[N], Out: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in Parallel(64):
            j = bx * 64 + i
            if j < N:
                Out[j] = if_then_else(M[j], cast(Q[j], f32), 0.5) + cast(U[j], f32) * 1000.0
"""
    result = tilec.compile("bytes.tile", text=text, target="webgpu")
    assert "array<u32>" in result.source and "bitcast<i32>" in result.source
    mod = _module(result, tmp_path, "bytes")
    rng = np.random.default_rng(9)
    for n in (128, 77):
        m = rng.integers(0, 2, n).astype(bool)
        q = rng.integers(-128, 128, n).astype(np.int8)
        u = rng.integers(0, 256, n).astype(np.uint8)
        out = np.zeros(n, np.float32)
        mod.bytes(m, q, u, out)
        np.testing.assert_array_equal(out, np.where(m, q.astype(np.float32), 0.5) + u.astype(np.float32) * 1000)


def test_byte_output_tensors_rejected():
    errs = _errors(text="kernel k(A: out u8[N]):\n    with Kernel(ceildiv(N, 64), threads=64) as bx:\n"
                        "        for i in Parallel(64):\n            A[bx * 64 + i] = 1\n")
    assert "reads a u8 input tensor from its words" in errs[0].message and "cannot write a u8 tensor" in errs[0].message


_BF16_ROUNDING = """
kernel to_bf16(X: f32[N], Y: out bf16[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in Parallel(64):
            j = bx * 64 + i
            if j < N:
                Y[j] = cast(X[j], bf16)

kernel from_bf16(Y: bf16[N], Z: out f32[N]):
    with Kernel(ceildiv(N, 64), threads=64) as bx:
        for i in Parallel(64):
            j = bx * 64 + i
            if j < N:
                Z[j] = cast(Y[j], f32)
"""


def _bf16_rounding_inputs(rng) -> np.ndarray:
    """f32 bit patterns: ties (even and odd kept halves), just above and below a tie, NaNs (quiet, signalling,
    negative), infinities, the largest finite (rounds to inf), zeros, subnormals, then random patterns."""
    special = [0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0xBF818000, 0x7FC00000, 0x7F800001, 0xFFC12345,
               0x7FFFFFFF, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x00000000, 0x80000000,
               0x00008000, 0x00018000, 0x00000001, 0x807FFFFF, 0x0000FFFF]
    bits = np.concatenate([np.array(special, np.uint32), rng.integers(0, 2**32, 1000, dtype=np.uint32)])
    return bits[:1017]  # an odd length, not a multiple of the workgroup: two invocations write halves of a word


def test_bf16_rounding_matches_numpy(webgpu, tmp_path):
    """f32 -> bf16 on the WGSL path rounds like ml_dtypes (numpy's bfloat16): to nearest, ties to even, overflow
    to inf, NaN kept NaN (with its sign); bf16 -> f32 is exact."""
    import ml_dtypes

    result = tilec.compile("bf16_round.tile", text=_BF16_ROUNDING, target="webgpu")
    assert "tl_bf16_bits" in result.source and "atomic<u32>" in result.source
    mod = _module(result, tmp_path, "bf16_round")
    bits = _bf16_rounding_inputs(np.random.default_rng(11))
    x = bits.view(np.float32)
    y = np.zeros(x.size, ml_dtypes.bfloat16)
    mod.to_bf16(x, y)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16)
    got_bits, want_bits = y.view(np.uint16), want.view(np.uint16)
    nan = np.isnan(x)
    assert np.isnan(y.astype(np.float32)[nan]).all()
    assert ((got_bits[nan] >> 15) == (want_bits[nan] >> 15)).all()  # the sign of a NaN is kept
    bad = np.flatnonzero(got_bits[~nan] != want_bits[~nan])
    assert bad.size == 0, [(hex(int(bits[~nan][i])), hex(int(got_bits[~nan][i])), hex(int(want_bits[~nan][i])))
                           for i in bad[:5]]
    assert got_bits[0] == 0x3F80 and got_bits[1] == 0x3F82  # the two ties, to even both ways
    # and back: bf16 patterns (a uint16 array is accepted as the bits) widen exactly
    pats = np.random.default_rng(12).integers(0, 2**16, 999, dtype=np.uint16)
    z = np.zeros(pats.size, np.float32)
    mod.from_bf16(pats, z)
    np.testing.assert_array_equal(z.view(np.uint32), pats.astype(np.uint32) << 16)


def test_bf16_compile_time_rounding_matches_numpy():
    """bf16 constants are rounded when the WGSL is printed, by the same rule."""
    import ml_dtypes

    from tilec.targets.wgsl.codegen import bf16_bits

    bits = _bf16_rounding_inputs(np.random.default_rng(13))
    x = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    got = np.array([bf16_bits(float(v)) for v in x], np.uint16)
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(got[finite], want[finite])
    assert np.isnan(got[~finite].view(ml_dtypes.bfloat16).astype(np.float32)).all()


def test_bf16_shared_memory_counted_as_f32():
    """WGSL holds bf16 shared buffers as f32: a kernel whose bf16 tiles fit 16 KiB at 2 bytes but not at 4 is
    refused at the kernel, saying why and what to do; the f16 build of the same tiles is accepted."""
    errs = _errors(SAMPLES / "gemm.tile", {"dtype": "bf16"})
    assert "needs 32768 bytes of workgroup storage" in errs[0].message and "held as f32" in errs[0].message
    assert "--max-workgroup-storage 32768" in errs[0].message
    _wgsl(SAMPLES / "gemm.tile", {"dtype": "f16"})
    result = _wgsl(SAMPLES / "gemm.tile", {"dtype": "bf16"}, limits={"shared_memory_bytes": 32768})
    assert result.simt.kernels[0].attrs["abi"]["workgroup_storage_bytes"] == 32768
