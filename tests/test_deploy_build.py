"""Build-system integration: the CMake package (tilec_add_kernel with DEPFILE, Makefile and Ninja
generators), the Make pattern rule (tilec.mk, -MD -MP), and the two examples, built as CI builds
them: against a CUDA driver stub, on a machine without a GPU. Running the examples needs a GPU
(examples/run_on_gpu.sh)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_deploy import _require, cuda_include_dir, driver_stub

ROOT = Path(__file__).resolve().parent.parent


def _ninja() -> str | None:
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja

        cand = Path(ninja.BIN_DIR) / "ninja"
        return str(cand) if cand.is_file() else None
    except ImportError:
        return None


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Toolchains, a `tilec` command that runs this checkout, a driver stub and a shared cache."""
    cmake = _require(shutil.which("cmake"), "cmake")
    from tilec.targets.cuda.locate import nvrtc_lib

    _require(shutil.which("nvcc") or nvrtc_lib(), "nvcc or NVRTC")  # tilec builds the cubins with either
    _require(shutil.which("g++"), "g++")
    inc = _require(cuda_include_dir(), "the CUDA toolkit's cuda.h")
    d = tmp_path_factory.mktemp("deploy")
    tilec = d / "bin" / "tilec"
    tilec.parent.mkdir()
    tilec.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m tilec "$@"\n')
    tilec.chmod(tilec.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    environ = dict(os.environ, TILEC_CACHE_DIR=str(d / "cache"))
    return {"cmake": cmake, "tilec": str(tilec), "stubs": driver_stub(d / "stubs"), "inc": inc,
            "cuda_home": str(Path(inc).parent), "env": environ, "dir": d}


def _run(cmd: list[str], env: dict, cwd: Path | None = None) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def _configure(env: dict, src: Path, build: Path, generator: str, *defs: str) -> None:
    cmd = [env["cmake"], "-S", str(src), "-B", str(build), "-G", generator, f"-DTilec_DIR={ROOT / 'tilec' / 'cmake'}",
           f"-DCUDA_cuda_driver_LIBRARY={env['stubs'] / 'libcuda.so'}", *defs]
    if generator == "Ninja":
        cmd.append(f"-DCMAKE_MAKE_PROGRAM={_ninja()}")
    _run(cmd, env["env"])


def _touch(path: Path) -> None:
    time.sleep(0.05)  # Ninja and GNU Make compare nanosecond mtimes
    path.touch()


# ================================================================ CMake: tilec_add_kernel + DEPFILE

CMAKE_PROJECT = """
cmake_minimum_required(VERSION 3.20)
project(deps LANGUAGES C)
find_package(Tilec 0.1 CONFIG REQUIRED)
tilec_add_kernel(ka SOURCES a.tile TARGETS sm80 INCLUDE_DIRS lib)
tilec_add_kernel(kb SOURCES b.tile TARGETS sm80 INCLUDE_DIRS lib DEFINES scale=3)
tilec_add_kernel(kc SOURCES c.tile TARGETS sm80)
add_executable(app main.c)
target_link_libraries(app PRIVATE ka kb kc)
"""


def _kernel(name: str, expr: str, imports: str = "") -> str:
    return (f"{imports}kernel {name}(A: f32[N], B: out f32[N]):\n"
            "    with Kernel(ceildiv(N, 128), threads=128) as bx:\n"
            "        for i in Parallel(128):\n"
            "            if bx * 128 + i < N:\n"
            f"                B[bx * 128 + i] = {expr}\n")


def _deps_project(d: Path) -> Path:
    (d / "lib").mkdir(parents=True)
    (d / "lib" / "helpers.tile").write_text("def twice(x):\n    return x + x\n")
    (d / "lib" / "common.tile").write_text('import "helpers.tile"\n\nconst scale = 2\n')
    (d / "a.tile").write_text(_kernel("ka", "twice(A[bx * 128 + i])", 'import "common.tile"\n\n'))
    (d / "b.tile").write_text(_kernel("kb", "A[bx * 128 + i] * scale", 'import "common.tile"\n\n'))
    (d / "c.tile").write_text(_kernel("kc", "A[bx * 128 + i] + 1.0"))
    (d / "main.c").write_text('#include "a.h"\n#include "b.h"\n#include "c.h"\n'
                              "int main(void) { return (int)ka_launch(0, 0, 0, 1) + (int)kb_launch(0, 0, 0, 1) + "
                              "(int)kc_launch(0, 0, 0, 1); }\n")
    (d / "CMakeLists.txt").write_text(CMAKE_PROJECT)
    return d


def _regenerated(output: str) -> set[str]:
    """Which headers the build regenerated, from tilec_add_kernel's COMMENT lines."""
    return {k for k in ("ka/a.h", "kb/b.h", "kc/c.h") if f"-> {k} " in output}


@pytest.mark.parametrize("generator", ["Ninja", "Unix Makefiles"])
def test_cmake_rebuilds_exactly_the_kernels_that_import_a_touched_file(env, tmp_path, generator):
    if generator == "Ninja" and not _ninja():
        _require(None, "ninja (pip install ninja)")
    if generator == "Unix Makefiles" and not shutil.which("make"):
        _require(None, "make")
    src = _deps_project(tmp_path / "src")
    build = tmp_path / "build"
    _configure(env, src, build, generator, f"-DTILEC_EXECUTABLE={env['tilec']}")
    build_cmd = [env["cmake"], "--build", str(build)]
    out = _run(build_cmd, env["env"])
    assert _regenerated(out) == {"ka/a.h", "kb/b.h", "kc/c.h"}
    assert (build / "app").is_file()
    assert _regenerated(_run(build_cmd, env["env"])) == set()  # up to date

    _touch(src / "lib" / "helpers.tile")  # imported by common.tile, imported by a.tile and b.tile
    assert _regenerated(_run(build_cmd, env["env"])) == {"ka/a.h", "kb/b.h"}
    assert _regenerated(_run(build_cmd, env["env"])) == set()
    _touch(src / "c.tile")
    assert _regenerated(_run(build_cmd, env["env"])) == {"kc/c.h"}
    before = (build / "tilec" / "kb" / "b.h").read_bytes()
    (src / "lib" / "common.tile").write_text('import "helpers.tile"\n\nconst scale = 4\n')
    assert _regenerated(_run(build_cmd, env["env"])) == {"ka/a.h", "kb/b.h"}
    assert (build / "tilec" / "kb" / "b.h").read_bytes() != before  # the new import was compiled in
    assert _regenerated(_run(build_cmd, env["env"])) == set()


# ================================================================ Make: tilec.mk with -MD -MP

MAKEFILE = """
TILEC_SRC_DIR   := src
TILEC_BUILD_DIR := out
TILEC_TARGETS   := sm80
TILEC_FLAGS     := -I src/lib --emit cu
include {mk}
all: out/a.h out/c.h
.PHONY: all
"""


def test_make_pattern_rule_with_auto_dependencies(env, tmp_path):
    _require(shutil.which("make"), "make")
    src = _deps_project(tmp_path / "src")
    (tmp_path / "Makefile").write_text(MAKEFILE.format(mk=ROOT / "tilec" / "cmake" / "tilec.mk"))
    make = ["make", "-C", str(tmp_path), f"TILEC={env['tilec']}"]

    def rebuilt(output: str) -> set[str]:
        return {n for n in ("a", "c") if f"src/{n}.tile -o out/{n}.h" in output}

    assert rebuilt(_run(make, env["env"])) == {"a", "c"}
    assert (tmp_path / "out" / "a.h.d").read_text().endswith("\nsrc/lib/common.tile:\n\nsrc/lib/helpers.tile:\n")
    assert rebuilt(_run(make, env["env"])) == set()
    _touch(src / "lib" / "helpers.tile")
    assert rebuilt(_run(make, env["env"])) == {"a"}
    # -MP: an import that disappears (and is no longer imported) does not break the build
    (src / "lib" / "helpers.tile").unlink()
    (src / "lib" / "common.tile").write_text("const scale = 2\ndef twice(x):\n    return x + x\n")
    assert rebuilt(_run(make, env["env"])) == {"a"}


# ================================================================ the examples


def test_examples_build_with_cmake_and_make(env, tmp_path):
    """examples/cmake (headers) and examples/make (objects) configure and build from a clean tree (linked against
    the driver stub), and again from pre-generated headers and objects with no tilec at all."""
    ninja = _ninja()
    generator = "Ninja" if ninja else "Unix Makefiles"
    build = tmp_path / "cmake"
    # as on a machine with neither a GPU driver nor a CUDA toolkit: tilec_add_kernel links against the stub
    # `tilec --cuda-stub` writes (a driver found here would be linked instead)
    cmd = [env["cmake"], "-S", str(ROOT / "examples" / "cmake"), "-B", str(build), "-G", generator,
           f"-DTilec_DIR={ROOT / 'tilec' / 'cmake'}", f"-DTILEC_EXECUTABLE={env['tilec']}",
           "-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE"] + ([f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else [])
    configured = _run(cmd, env["env"])
    _run([env["cmake"], "--build", str(build)], env["env"])
    assert (build / "tilec_example").is_file()
    if "linking against the stub" in configured:
        assert (build / "tilec-cuda-stub" / "libcuda.so").is_file()
    assert sorted(p.name for p in (build / "tilec").glob("*/*.h")) == ["gemm.h", "softmax.h"]
    header = (build / "tilec" / "example_gemm" / "gemm.h").read_text()
    assert "sm_80: grid" in header and "sm_90a: grid" in header  # the Hopper build has its own launch config
    assert "tilec_encode_tensor_map_" in header  # and takes TMA tensor maps

    # prebuilt headers, no tilec on PATH and none named: what examples/run_on_gpu.sh does on the GPU box
    bare = dict(env["env"], PATH=os.pathsep.join(p for p in env["env"]["PATH"].split(os.pathsep)
                                                   if not (Path(p) / "tilec").exists()))
    build2 = tmp_path / "cmake-prebuilt"
    _run([env["cmake"], "-S", str(ROOT / "examples" / "cmake"), "-B", str(build2), "-G", generator,
          f"-DTilec_DIR={ROOT / 'tilec' / 'cmake'}", f"-DTILEC_PREBUILT_DIR={build / 'tilec'}",
          f"-DCUDA_cuda_driver_LIBRARY={env['stubs'] / 'libcuda.so'}"]
         + ([f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []), bare)
    _run([env["cmake"], "--build", str(build2)], bare)
    assert (build2 / "tilec_example").is_file()
    assert (build2 / "tilec" / "example_gemm" / "gemm.h").read_bytes() == \
        (build / "tilec" / "example_gemm" / "gemm.h").read_bytes()

    if not shutil.which("make"):
        return
    mk = tmp_path / "make"
    # no toolkit, no driver named: tilec.mk links against `tilec --cuda-stub`'s folder when the linker finds no
    # libcuda.so
    common = [f"BUILD={mk}", "CUDA_HOME=/nonexistent"]
    _run(["make", "-C", str(ROOT / "examples" / "make"), f"TILEC={env['tilec']}", *common], env["env"])
    assert (mk / "tilec_example").is_file() and (mk / "gemm.o.d").is_file()
    linker_finds_libcuda = "/" in subprocess.run(["cc", "-print-file-name=libcuda.so"], capture_output=True,
                                                 text=True).stdout
    assert (mk / "cuda-stub" / "libcuda.so").is_file() != linker_finds_libcuda
    # the Make example links the launchers as objects (tilec -c), with the same kernels and options as the CMake
    # example's headers
    assert '"num_stages": 4' in (mk / "gemm.o.json").read_text()
    assert '"num_stages": 4' in (build / "tilec" / "example_gemm" / "gemm.h.json").read_text()
    up_to_date = subprocess.run(["make", "-q", "-C", str(ROOT / "examples" / "make"), f"TILEC={env['tilec']}",
                                 *common], env=env["env"], capture_output=True)
    assert up_to_date.returncode == 0
    mk2 = tmp_path / "make-prebuilt"
    _run(["make", "-C", str(ROOT / "examples" / "make"), "TILEC=/nonexistent/tilec", f"TILEC_PREBUILT_DIR={mk}",
          f"BUILD={mk2}", f"CUDA_HOME={env['cuda_home']}", f"CUDA_LIBDIR={env['stubs']}"], bare)
    assert (mk2 / "tilec_example").is_file()


def test_cuda_stub_links_and_never_replaces_a_real_driver(env, tmp_path):
    """`tilec --cuda-stub DIR`: cuda.h and a libcuda.so (soname libcuda.so.1) that a driver-API program links
    against; run again, it refreshes its own output; a libcuda.so it did not write is never replaced."""
    stub = tmp_path / "stub"
    for _ in range(2):
        assert _run([env["tilec"], "--cuda-stub", str(stub)], env["env"]).strip() == str(stub)
    (tmp_path / "main.c").write_text("#include <cuda.h>\nint main(void) { CUdeviceptr p;\n"
                                     "  return cuInit(0) + cuMemAlloc(&p, 16) + cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, "
                                     "0, 0, 0, 0); }\n")
    _run(["cc", str(tmp_path / "main.c"), f"-I{stub}", f"-L{stub}", "-lcuda", "-o", str(tmp_path / "prog")], env["env"])
    assert "libcuda.so.1" in subprocess.run(["readelf", "-d", str(tmp_path / "prog")], capture_output=True,
                                            text=True).stdout
    real = tmp_path / "driver"
    real.mkdir()
    (real / "libcuda.so").write_bytes(b"\x7fELF not ours")
    proc = subprocess.run([env["tilec"], "--cuda-stub", str(real)], capture_output=True, text=True, env=env["env"])
    assert proc.returncode == 1 and proc.stderr.startswith("tilec: error: ") and "refusing" in proc.stderr
    assert (real / "libcuda.so").read_bytes() == b"\x7fELF not ours"
