"""tilec_add_package() (tilec/cmake/TilecPackage.cmake): the `tilec package` command CMake runs, rebuilding when a
source changes, installing the package directory, and the prebuilt-package path -- with a stand-in tilec that
records its command line and writes a package (the real command is tested in test_deploy_package.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CMAKE_DIR = ROOT / "tilec" / "cmake"

FAKE = r'''
import json, sys
from pathlib import Path
args = sys.argv[1:]
with open(Path(__file__).with_name("calls.log"), "a") as f:
    f.write(json.dumps(args) + "\n")
assert args[0] == "package"
out = Path(args[args.index("-o") + 1])
out.mkdir(parents=True, exist_ok=True)
stems = [Path(a).stem for a in args[1:args.index("-o")]]
for s in stems:
    (out / f"{s}.fatbin").write_bytes(b"fatbin " + s.encode())
(out / "index.json").write_text(json.dumps({"kernels": [{"kernel": s, "file": f"{s}.fatbin"} for s in stems]}))
if "-MD" in args:  # the rule `tilec package -MD` writes: index.json depends on the sources and what they import
    sources = args[1:args.index("-o")]
    rule = f"{out}/index.json: " + " ".join([*sources, str(Path(sources[0]).parent / "common" / "epi.tile")])
    Path(args[args.index("-MF") + 1]).write_text(rule + "\n")
if "--wheel" in args:
    name, version = args[args.index("--wheel") + 1], args[args.index("--wheel-version") + 1]
    (out / f"{name}-{version}-py3-none-any.whl").write_bytes(b"wheel")
'''

PROJECT = """
cmake_minimum_required(VERSION 3.20)
project(pkg_test NONE)
find_package(Tilec CONFIG REQUIRED)
tilec_add_package(kernels SOURCES k/softmax.tile k/gemm.tile TARGETS sm80 sm90 DEFINES block_M=64
                  INCLUDE_DIRS k/common SIZES M=40 N=24 WHEEL my_kernels WHEEL_VERSION 2.0
                  DESTINATION share/app/kernels)
get_target_property(_dir kernels TILEC_PACKAGE_DIR)
message(STATUS "package dir: ${_dir}")
"""


@pytest.fixture
def project(tmp_path):
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed")
    src = tmp_path / "src"
    (src / "k" / "common").mkdir(parents=True)
    for n in ("softmax", "gemm"):
        (src / "k" / f"{n}.tile").write_text(f"# {n}\n")
    (src / "k" / "common" / "epi.tile").write_text("# imported\n")
    (src / "CMakeLists.txt").write_text(PROJECT)
    fake = tmp_path / "fake_tilec.py"
    fake.write_text(FAKE)
    return tmp_path, src, fake


def _cmake(*args, cwd=None):
    r = subprocess.run(["cmake", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _calls(tmp):
    log = tmp / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_package_is_built_rebuilt_and_installed(project):
    tmp, src, fake = project
    build = tmp / "build"
    out = _cmake("-S", src, "-B", build, "-G", "Ninja", f"-DTilec_DIR={CMAKE_DIR}",
                 f"-DTILEC_EXECUTABLE={sys.executable};{fake}")
    assert f"package dir: {build}/tilec/kernels" in out
    _cmake("--build", build)
    (call,) = _calls(tmp)
    assert call == ["package", str(src / "k/softmax.tile"), str(src / "k/gemm.tile"), "-o",
                    str(build / "tilec/kernels"), "--target", "sm80,sm90", "-D", "block_M=64", "-I",
                    str(src / "k/common"), "--size", "M=40,N=24", "--wheel", "my_kernels", "--wheel-version", "2.0",
                    "-MD", "-MF", str(build / "tilec/kernels.d")]
    _cmake("--build", build)
    assert len(_calls(tmp)) == 1  # up to date
    time.sleep(1.1)
    os.utime(src / "k" / "gemm.tile")
    _cmake("--build", build)
    assert len(_calls(tmp)) == 2  # a source changed: packaged again
    time.sleep(1.1)
    os.utime(src / "k" / "common" / "epi.tile")
    _cmake("--build", build)
    assert len(_calls(tmp)) == 3  # a file a source imports changed (the depfile): packaged again
    _cmake("--build", build)
    assert len(_calls(tmp)) == 3
    prefix = tmp / "prefix"
    _cmake("--install", build, "--prefix", prefix)
    installed = sorted(p.name for p in (prefix / "share/app/kernels").iterdir())
    assert installed == ["gemm.fatbin", "index.json", "my_kernels-2.0-py3-none-any.whl", "softmax.fatbin"]


def test_a_prebuilt_package_is_copied_without_tilec(project):
    tmp, src, fake = project
    pre = tmp / "prebuilt" / "kernels"
    pre.mkdir(parents=True)
    (pre / "index.json").write_text("{}")
    (pre / "softmax.fatbin").write_bytes(b"prebuilt")
    build = tmp / "build"
    _cmake("-S", src, "-B", build, "-G", "Ninja", f"-DTilec_DIR={CMAKE_DIR}",
           f"-DTILEC_PREBUILT_DIR={tmp / 'prebuilt'}")
    _cmake("--build", build)
    assert _calls(tmp) == [] and (build / "tilec/kernels/softmax.fatbin").read_bytes() == b"prebuilt"
    bad = subprocess.run(["cmake", "-S", str(src), "-B", str(tmp / "b2"), "-G", "Ninja", f"-DTilec_DIR={CMAKE_DIR}",
                          f"-DTILEC_PREBUILT_DIR={tmp / 'nowhere'}"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "TILEC_PREBUILT_DIR has no kernels/index.json" in bad.stderr
