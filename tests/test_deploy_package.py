"""Artifact packages (issue #31, docs/deploy.md#artifact-packages): `tilec package` (an index, recorded checks,
byte-for-byte reproducible), tilec.runtime.load_package and `tilec check-deploy`, without a GPU: a fake driver
with a memory that runs vector_add (tests/fake_cuda.py records launches; this one also computes them)."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_cuda import FakeDriver, install

import tilec.runtime as rt
from tilec.deploy_check import check_deploy
from tilec.runtime.package import load_package

ROOT = Path(__file__).resolve().parent.parent


def _toolchain_or_skip():
    from tilec.targets.cuda.locate import nvfatbin_lib, nvrtc_lib

    if shutil.which("nvcc") is None and (nvrtc_lib() is None or nvfatbin_lib() is None):
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("no CUDA toolchain (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip("no CUDA toolchain (nvcc, or the NVRTC and nvFatbin wheels)")


def _tilec(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "tilec", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """vector_add packaged twice (the second time without the compile cache), with its wheel: the same bytes."""
    _toolchain_or_skip()
    d = tmp_path_factory.mktemp("pkg")
    cache = d / "cache"
    for name in ("a", "b"):
        env_cache = {"TILEC_CACHE_DIR": str(cache / name)}
        r = subprocess.run([sys.executable, "-m", "tilec", "package", str(ROOT / "samples" / "vector_add.tile"),
                            "--target", "sm80,sm90", "--size", "N=1000", "-o", str(d / name), "--wheel", "va_kernels",
                            "--wheel-version", "0.3"], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=str(ROOT), **env_cache), timeout=600)
        assert r.returncode == 0, r.stderr
    return d


def test_a_package_is_reproducible_and_indexed(package):
    a, b = package / "a", package / "b"
    names = sorted(p.name for p in a.iterdir())
    assert names == ["index.json", "va_kernels-0.3-py3-none-any.whl", "vector_add.check.zip", "vector_add.fatbin",
                     "vector_add.fatbin.json"]  # the wheel too: reproducible like the rest
    assert names == sorted(p.name for p in b.iterdir())
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n
    index = json.loads((a / "index.json").read_text())
    (row,) = index["kernels"]
    import hashlib

    assert row["kernel"] == "vector_add" and row["file"] == "vector_add.fatbin"
    assert row["sha256"] == hashlib.sha256((a / "vector_add.fatbin").read_bytes()).hexdigest()
    assert row["archs"] == ["sm_80", "sm_90a"] and row["ptx"] == "compute_80"
    assert row["oldest_driver"] == json.loads((a / "vector_add.fatbin.json").read_text())["driver_api_version"] \
        // 1000 * 1000
    assert row["tilec_version"] == index["tilec_version"] and row["toolchain"]


class ComputingFake(FakeDriver):
    """FakeDriver with a device memory, whose launches of vector_add compute C = A + B (f16)."""

    def __init__(self, capability):
        super().__init__(capability=capability)
        self.memory: dict[int, bytearray] = {}

    def alloc(self, nbytes):
        ptr = super().alloc(nbytes)
        self.memory[ptr] = bytearray(max(nbytes, 1))
        return ptr

    def htod(self, ptr, host, nbytes):
        self.memory[ptr][:nbytes] = ctypes.string_at(host, nbytes)

    def dtoh(self, host, ptr, nbytes):
        ctypes.memmove(host, bytes(self.memory[ptr][:nbytes]), nbytes)

    def raw_launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        super().raw_launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
        a, b, c, n = self.launches[-1].args
        dt = np.float16 if self.entries[fn]["params"][0]["dtype"] == "f16" else np.float32
        x, y = (np.frombuffer(bytes(self.memory[p]), dt, n) for p in (a, b))
        self.memory[c][:n * np.dtype(dt).itemsize] = (x + y).astype(dt).tobytes()
        return 0


def _fake(monkeypatch, package_dir, capability):
    fake = install(monkeypatch, ComputingFake(capability))
    fake.entries["vector_add"] = json.loads((package_dir / "vector_add.fatbin.json").read_text())["kernels"][0]
    return fake


@pytest.mark.parametrize("cc, image, how", [((9, 0), "sm_90a", "exact"), ((8, 6), "sm_80", "same_major"),
                                            ((12, 0), "compute_80", "jit")])
def test_check_deploy_runs_every_kernel_against_the_recorded_results(package, monkeypatch, cc, image, how):
    _fake(monkeypatch, package / "a", cc)
    monkeypatch.delenv("TILEC_NO_JIT", raising=False)
    report = check_deploy(package / "a")
    (k,) = report["kernels"]
    assert report["gpu"] == f"GPU 0 (Fake GPU, sm_{cc[0]}{cc[1]})" and report["driver"] == "13.0"
    assert (k["image"], k["how"], k["ok"], k["error"]) == (image, how, True, None), k
    assert report["passed"] == 1 and report["failed"] == 0


def test_check_deploy_reports_wrong_results_refused_jit_and_damaged_files(package, monkeypatch, tmp_path):
    fake = install(monkeypatch, FakeDriver(capability=(9, 0)))  # launches compute nothing: C stays zero
    fake.entries["vector_add"] = json.loads((package / "a" / "vector_add.fatbin.json").read_text())["kernels"][0]
    (k,) = check_deploy(package / "a")["kernels"]
    assert not k["ok"] and k["error"].startswith("C: FAIL (")

    _fake(monkeypatch, package / "a", (12, 0))
    (k,) = check_deploy(package / "a", no_jit=True)["kernels"]
    assert not k["ok"] and k["error"].startswith("JitRefused") and "missing: a cubin for sm_120" in k["error"]

    damaged = tmp_path / "damaged"
    shutil.copytree(package / "a", damaged)
    data = bytearray((damaged / "vector_add.fatbin").read_bytes())
    data[-1] ^= 1
    (damaged / "vector_add.fatbin").write_bytes(bytes(data))
    (k,) = check_deploy(damaged)["kernels"]
    assert not k["ok"] and "SHA-256" in k["error"]


def test_the_command_line_writes_the_report_and_its_exit_status_says(package, monkeypatch, tmp_path, capsys):
    from tilec.deploy_check import main

    _fake(monkeypatch, package / "a", (9, 0))
    out = tmp_path / "report.json"
    assert main([str(package / "a"), "--report", str(out)]) == 0
    assert json.loads(out.read_text())["kernels"][0]["ok"]
    assert "1 passed, 0 failed" in capsys.readouterr().out
    r = _tilec("check-deploy", tmp_path)  # not a package: a clear error, no traceback
    assert r.returncode == 1 and "not a tilec package (no index.json" in r.stderr and "Traceback" not in r.stderr


def test_load_package_picks_by_device(package, monkeypatch):
    _fake(monkeypatch, package / "a", (9, 0))
    pkg = load_package(package / "a")
    x, y = (np.random.default_rng(1).standard_normal(300).astype(np.float16) for _ in range(2))
    np.testing.assert_array_equal(pkg.vector_add(x, y), x + y)
    assert pkg.module("vector_add").image_report().image == "sm_90a"
    with pytest.raises(rt.package.PackageError, match="has no kernel 'nope'"):
        pkg.module("nope")


def test_the_package_command_writes_a_dependency_rule(tmp_path):
    """-MD: DIR.d says DIR/index.json depends on each source and what it imports (the rule CMake's DEPFILE and Make
    read), -MP adds empty rules for the imports, -MF / -MT move and rename it; without -MD, no rule."""
    _toolchain_or_skip()
    src = tmp_path / "src"
    (src / "common").mkdir(parents=True)
    (src / "common" / "ops.tile").write_text("def twice(x):\n    return x + x\n")
    (src / "double it.tile").write_text('import "common/ops.tile"\n\nconst dtype = f32\n\n'
                                        "kernel double_it(A: dtype[N], C: out dtype[N]):\n"
                                        "    with Kernel(ceildiv(N, 256), threads=256) as bx:\n"
                                        "        for i in Parallel(256):\n"
                                        "            if bx * 256 + i < N:\n"
                                        "                C[bx * 256 + i] = twice(A[bx * 256 + i])\n")
    (tmp_path / "samples").mkdir()
    shutil.copy(ROOT / "samples" / "vector_add.tile", tmp_path / "samples")
    r = _tilec("package", "src/double it.tile", "samples/vector_add.tile", "--target", "sm80", "-o", "out/pkg", "-MD",
               "-MP", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rule = (tmp_path / "out" / "pkg.d").read_text()
    assert rule == ("out/pkg/index.json: \\\n  src/double\\ it.tile \\\n  samples/vector_add.tile \\\n"
                    "  src/common/ops.tile\n\nsamples/vector_add.tile:\n\nsrc/common/ops.tile:\n")
    assert sorted(p.name for p in (tmp_path / "out" / "pkg").iterdir()) == [
        "double it.check.zip", "double it.fatbin", "double it.fatbin.json", "index.json", "vector_add.check.zip",
        "vector_add.fatbin", "vector_add.fatbin.json"]  # the rule is not a file of the package
    r = _tilec("package", "src/double it.tile", "--target", "sm80", "-o", "out/q", "-MD", "-MF", "q.deps", "-MT",
               "stamp", "-MT", "$(Q)", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "q.deps").read_text() == "stamp $$(Q): \\\n  src/double\\ it.tile \\\n  src/common/ops.tile\n"
    assert not (tmp_path / "out" / "q.d").exists()
    r = _tilec("package", "src/double it.tile", "--target", "sm80", "-o", "out/r", cwd=tmp_path)
    assert r.returncode == 0 and not (tmp_path / "out" / "r.d").exists()
    r = _tilec("package", "src/double it.tile", "--target", "sm80", "-o", "out/s", "-MD", "-MF",
               "src/common/ops.tile", cwd=tmp_path)
    assert r.returncode != 0 and "ops.tile" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "src" / "common" / "ops.tile").read_text().startswith("def twice")
