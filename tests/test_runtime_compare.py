"""tilec.testing.assert_close / check_kernel, `tilec run --check --rtol --atol --reference`, and
tilec.load (compile through the cache, load with tilec.runtime)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilec.testing import DEFAULT_TOLERANCE, MismatchError, assert_close, check_kernel, compare

ROOT = Path(__file__).resolve().parent.parent


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- assert_close


def test_close_arrays_pass_and_report():
    x = _rand(64, 33)
    c = assert_close(x + 1e-6, x)
    assert c.ok and c.mismatches == 0 and c.total == 64 * 33 and c.max_abs < 2e-6
    assert c.rtol == DEFAULT_TOLERANCE["f32"][0]


def test_a_mismatch_reports_ratio_and_worst_elements_with_indices():
    want = _rand(10, 20)
    got = want.copy()
    got[3, 7] += 5.0
    got[9, 0] -= 0.5
    got[0, 19] = np.nan
    with pytest.raises(MismatchError) as e:
        assert_close(got, want, rtol=1e-3, atol=1e-3, name="Y")
    msg = str(e.value)
    assert msg.startswith("Y: FAIL (3 of 200 elements outside rtol 0.001, atol 0.001: 1.500%")
    lines = msg.splitlines()
    assert lines[1].startswith("  at [0, 19]: got nan")  # NaN is the worst error
    assert lines[2].startswith(f"  at [3, 7]: got {got[3, 7]:.6g}, expected {want[3, 7]:.6g} (|err| 5)")
    assert lines[3].startswith("  at [9, 0]:")
    assert e.value.comparison.mismatches == 3


def test_max_mismatch_ratio_allows_a_few_outliers():
    want = _rand(100, 100)
    got = want.copy()
    got.flat[::1000] += 1.0  # 10 of 10000
    assert_close(got, want, rtol=0, atol=1e-6, max_mismatch_ratio=1e-3)
    with pytest.raises(MismatchError, match="10 of 10000 .*at most 0.050% allowed"):
        assert_close(got, want, rtol=0, atol=1e-6, max_mismatch_ratio=5e-4)


def test_nan_and_infinities_match_only_themselves():
    assert_close(np.array([np.nan, np.inf, -np.inf, 1.0]), np.array([np.nan, np.inf, -np.inf, 1.0]), rtol=0, atol=0)
    for got in ([1.0, np.inf, -np.inf, 1.0], [np.nan, -np.inf, -np.inf, 1.0], [np.nan, np.inf, -np.inf, np.inf]):
        with pytest.raises(MismatchError, match="1 of 4"):
            assert_close(np.array(got), np.array([np.nan, np.inf, -np.inf, 1.0]), rtol=0.5, atol=0.5)


def test_shapes_must_agree_and_expected_may_be_a_callable():
    with pytest.raises(MismatchError, match=r"shape \[2, 3\] differs from the expected \[3, 2\]"):
        assert_close(np.zeros((2, 3)), np.zeros((3, 2)))
    x = _rand(5)
    assert assert_close(x, lambda: x * 1.0).ok


def test_tolerances_default_by_dtype():
    x = _rand(1000).astype(np.float16)
    off = (x.astype(np.float32) * 1.004).astype(np.float16)  # ~0.4%: inside f16's 1e-2, outside f32's 1e-4
    assert compare(off, x).ok
    assert not compare(off.astype(np.float32), x.astype(np.float32)).ok
    assert compare(np.array([3], np.int32), np.array([4], np.int32)).mismatches == 1  # integers: exact


def test_torch_tensors_including_bf16():
    torch = pytest.importorskip("torch")
    x = torch.randn(40, 50)
    assert_close(x.to(torch.bfloat16), x)  # bf16 defaults: rtol 2e-2, atol 3e-2
    with pytest.raises(MismatchError, match="bf16|FAIL"):
        assert_close(x.to(torch.bfloat16) + 1, x)


class _Kernel:
    """What check_kernel needs of a kernel: a manifest entry and a call returning the outputs."""

    entry = {"name": "axpy", "params": [{"name": "X", "kind": "tensor", "output": False},
                                        {"name": "a", "kind": "scalar"},
                                        {"name": "Y", "kind": "tensor", "output": True}]}
    name = "axpy"

    def __call__(self, x, a):
        return (x * a).astype(np.float32)


def test_check_kernel_compares_with_a_python_reference():
    x = _rand(30, 40)
    (c,) = check_kernel(_Kernel(), lambda x, a: x * a, x, 3.0)
    assert c.ok and c.name == "axpy.Y"
    with pytest.raises(MismatchError, match="axpy.Y: FAIL"):
        check_kernel(_Kernel(), lambda x, a: x * a + 1, x, 3.0)
    with pytest.raises(MismatchError, match="returned 2 value"):
        check_kernel(_Kernel(), lambda x, a: (x, x), x, 3.0)


# ---------------------------------------------------------------- tilec run --check (WebGPU on lavapipe)


def _webgpu_available() -> bool:
    try:
        from tilec.runtime.wgsl import Device

        Device.get()
        return True
    except Exception:
        return False


def _tilec(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tilec", *args], capture_output=True, text=True, cwd=cwd or ROOT)


@pytest.fixture(scope="module")
def webgpu():
    if not _webgpu_available():
        pytest.skip("no WebGPU adapter (wgpu + lavapipe)")


def test_run_check_with_tolerances(webgpu):
    base = ["run", "samples/softmax.tile", "--target", "webgpu", "--size", "M=7,N=300", "-D", "dtype=f32", "--check"]
    ok = _tilec(*base)
    assert ok.returncode == 0 and "check Y against the interpreter: PASS" in ok.stdout, ok.stdout + ok.stderr
    assert "rtol 0.0001, atol 0.0001" in ok.stdout  # f32's defaults
    strict = _tilec(*base, "--rtol", "0", "--atol", "1e-12")
    assert strict.returncode == 1 and "check Y against the interpreter: FAIL" in strict.stdout, strict.stdout
    assert "rtol 0, atol 1e-12" in strict.stdout and "  at [" in strict.stdout


def test_run_check_against_a_python_reference(webgpu, tmp_path):
    ref = tmp_path / "ref.py"
    ref.write_text("import numpy as np\n"
                   "def softmax(x):\n"
                   "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
                   "    return e / e.sum(axis=-1, keepdims=True)\n"
                   "def wrong(x):\n"
                   "    return x\n")
    base = ["run", "samples/softmax.tile", "--target", "webgpu", "--size", "M=5,N=200", "-D", "dtype=f32", "--check"]
    ok = _tilec(*base, "--reference", f"{ref}:softmax")
    assert ok.returncode == 0 and "check Y against --reference: PASS" in ok.stdout, ok.stdout + ok.stderr
    bad = _tilec(*base, "--reference", f"{ref}:wrong")
    assert bad.returncode == 1 and "check Y against --reference: FAIL (" in bad.stdout
    missing = _tilec(*base, "--reference", f"{ref}:nothing")
    assert missing.returncode == 1 and "error: --reference" in missing.stderr and "Traceback" not in missing.stderr


# ---------------------------------------------------------------- tilec.load


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_load_compiles_through_the_cache(cache):
    if shutil.which("nvcc") is None:
        from tilec.targets.cuda.locate import nvrtc_lib

        if nvrtc_lib() is None:
            pytest.skip("neither nvcc nor NVRTC")
    import tilec
    import tilec.runtime as rt

    mod = tilec.load(ROOT / "samples/softmax.tile", target="sm90", defines={"dtype": "bf16", "block_N": 256})
    assert isinstance(mod, rt.Module) and list(mod.kernels) == ["softmax"]
    assert mod.manifest["options"]["defines"] == {"dtype": "bf16", "block_N": 256}
    assert mod.softmax.entry["params"][0]["dtype"] == "bf16"
    (artifact,) = (cache / "load").glob("*/softmax.cubin")
    from tilec.cache import Cache

    before = Cache().stats()
    again = tilec.load(ROOT / "samples/softmax.tile", target="sm90", defines={"dtype": "bf16", "block_N": 256})
    assert again.image == mod.image and again.manifest == mod.manifest
    after = Cache().stats()
    assert after["hits"] == before["hits"] + 1 and after["entries"] == before["entries"]
    assert json.loads((cache / "load").joinpath(artifact.parent.name, "softmax.cubin.json").read_text())["kernels"]
    # a prebuilt artifact: exactly tilec.runtime.load
    assert tilec.load(artifact).manifest == rt.load(artifact).manifest


def test_load_reports_source_errors(cache, tmp_path):
    import tilec
    from tilec.diagnostics import CompileError

    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(A: f16[N]):\n    with Kernel(1, threads=32) as bx:\n        foo(A)\n")
    with pytest.raises(CompileError) as e:
        tilec.load(bad, target="sm90")
    assert f"{bad}:3:9: error:" in str(e.value) and "foo(A)" in str(e.value)


# ---------------------------------------------------------------- the C launcher: asynchronous and capturable


def test_the_c_launcher_takes_a_stream_and_never_synchronizes(tmp_path):
    import os

    if shutil.which("nvcc") is None:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("nvcc is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
        pytest.skip("nvcc not found")
    from tilec.cli.main import main as tilec_main

    out = tmp_path / "gemm.h"
    assert tilec_main([str(ROOT / "samples/gemm.tile"), "--target", "sm90", "-o", str(out)]) == 0
    text = out.read_text()
    assert "CUresult gemm_launch(CUstream stream," in text
    assert "cuLaunchKernel(" in text and "stream" in text[text.index("cuLaunchKernel("):][:200]
    # nothing that waits for the GPU: the launch is asynchronous, and so can be captured into a CUDA graph
    for waiting in ("Synchronize", "cuStreamQuery", "cuEventQuery", "cuMemcpy", "cuMemAlloc"):
        assert waiting not in text, waiting
