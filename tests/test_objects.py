"""Linkable host objects (`tilec k.tile -o k.o`, emit kind "object") and builds with no CUDA toolkit (NVRTC and
nvFatbin from their pip wheels, chosen when nvcc is not on PATH).

The object is checked as a linker sees it (nm: the exported launchers, the local image symbols; the cubin's
bytes inside; a C program linked against it and a driver stub). Running a linked program needs a GPU:
examples/run_on_gpu.sh runs examples/make's, which links gemm.o and softmax.o (docs/deploy.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_deploy import _require, cuda_include_dir, driver_stub

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def _tilec(args: list[str], cache: Path, path: str | None = None, cwd: Path | None = None):
    env = dict(os.environ, TILEC_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get(
        "PYTHONPATH", ""))
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "tilec", *args], capture_output=True, text=True, env=env, cwd=cwd)


def _nm(path: Path) -> dict[str, str]:
    """symbol -> nm's type letter (T: exported code, r: local read-only data, U: undefined)."""
    out = subprocess.run([_require(shutil.which("nm"), "nm"), str(path)], capture_output=True, text=True,
                         check=True).stdout
    return {parts[-1]: parts[-2] for parts in (line.split() for line in out.splitlines()) if len(parts) >= 2}


@pytest.fixture(scope="module")
def toolchain_for_objects():
    _require(shutil.which("nvcc") or _nvrtc_installed(), "nvcc or NVRTC")
    _require(shutil.which("cc"), "cc")
    return _require(cuda_include_dir(), "cuda.h")


def _nvrtc_installed() -> bool:
    from tilec.targets.cuda import nvrtc

    return nvrtc.find_lib() is not None


def test_object_exports_the_launchers_and_embeds_each_targets_cubin(toolchain_for_objects, tmp_path):
    cache = tmp_path / "cache"
    obj = tmp_path / "va.o"
    r = _tilec([str(SAMPLES / "vector_add.tile"), "--target", "sm80,sm90", "-o", str(obj)], cache)
    assert r.returncode == 0, r.stderr
    syms = _nm(obj)
    assert syms["vector_add_launch"] == "T" and syms["vector_add_check_device"] == "T"
    images = sorted(s for s in syms if s.endswith(("_image0", "_image1", "_image2")))  # + the forward PTX
    assert len(images) == 3 and all(syms[s] == "r" for s in images)  # local: several objects link together
    assert syms["cuLaunchKernel"] == "U" and syms["cuModuleLoadData"] == "U"
    m = json.loads((tmp_path / "va.o.json").read_text())
    assert m["kind"] == "object"
    assert m["object"]["prototypes"] == [
        "CUresult vector_add_launch(CUstream stream, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, int N);",
        "CUresult vector_add_check_device(CUdevice dev, char* message, size_t message_size);"]
    assert [im["arch"] for im in m["object"]["images"]] == ["sm_80", "sm_90a", "compute_80"]
    # the sm90 cubin, built alone with the same toolchain, is inside the object byte for byte
    cubin = tmp_path / "va.cubin"
    r = _tilec([str(SAMPLES / "vector_add.tile"), "--target", "sm90", "-o", str(cubin)], cache)
    assert r.returncode == 0, r.stderr
    assert cubin.read_bytes() in obj.read_bytes()
    # deterministic: the same object again without the cache
    again = tmp_path / "again" / "va.o"
    again.parent.mkdir()
    r = _tilec([str(SAMPLES / "vector_add.tile"), "--target", "sm80,sm90", "-o", str(again), "--no-cache"], cache)
    assert r.returncode == 0, r.stderr
    assert again.read_bytes() == obj.read_bytes()


def test_objects_link_into_a_c_program(toolchain_for_objects, tmp_path):
    """Two kernel objects and a C program, linked with -lcuda (a stub here) as nvcc objects are."""
    cache = tmp_path / "cache"
    for name, target in (("vector_add", "sm90"), ("softmax", "sm80,sm90")):
        r = _tilec([str(SAMPLES / f"{name}.tile"), "--target", target, "-o", str(tmp_path / f"{name}.o")], cache)
        assert r.returncode == 0, r.stderr
    protos = [p for n in ("vector_add", "softmax") for p in json.loads(
        (tmp_path / f"{n}.o.json").read_text())["object"]["prototypes"]]
    (tmp_path / "main.c").write_text("#include <cuda.h>\n#include <stddef.h>\n" + "\n".join(protos) + "\n"
                                     "int main(void) { char m[64];\n"
                                     "  return (int)vector_add_launch(0, 0, 0, 0, 4) + (int)softmax_launch(0, 0, 0, "
                                     "2, 2) + (int)vector_add_check_device(0, m, sizeof m); }\n")
    stubs = driver_stub(tmp_path / "stubs")
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", f"-I{toolchain_for_objects}", "main.c", "vector_add.o",
                    "softmax.o", "-o", "prog", f"-L{stubs}", "-lcuda", "-lpthread"], cwd=tmp_path, check=True)
    assert (tmp_path / "prog").is_file()


def test_tuned_kernel_object_exports_its_dispatcher(toolchain_for_objects, tmp_path):
    """A kernel with tuned configurations (samples/gemm.tune.json): each variant's launcher and the public one
    that picks among them by shape, as the header has."""
    obj = tmp_path / "gemm.o"
    r = _tilec([str(SAMPLES / "gemm.tile"), "--target", "sm90", "-o", str(obj), "--tune-db",
                str(SAMPLES / "gemm.tune.json")], tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "gemm.o.json").read_text())
    variants = len(m["dispatch"]["gemm"]["configs"])
    syms = _nm(obj)
    assert syms["gemm_launch"] == "T"
    assert all(syms[f"gemm__cfg{i}_launch"] == "T" for i in range(variants))
    assert "gemm_launch" in m["object"]["functions"]


# ================================================================ no CUDA toolkit: NVRTC and nvFatbin from pip


@pytest.fixture(scope="module")
def path_without_nvcc(tmp_path_factory):
    """PATH with every directory holding nvcc left out (as on a machine where only `pip install` ran)."""
    from tilec.targets.cuda import nvfatbin, nvrtc

    _require(nvrtc.find_lib(), "NVRTC (pip install nvidia-cuda-nvrtc)")
    _require(nvfatbin.find_lib(), "nvFatbin (pip install nvidia-nvfatbin)")
    _require(cuda_include_dir_for_nvrtc(), "cuda_fp16.h (pip install nvidia-cuda-runtime)")
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvcc").exists()]
    return os.pathsep.join(dirs)


def cuda_include_dir_for_nvrtc():
    from tilec.targets.cuda.toolchain import cuda_include_dir as find

    return find()


def test_readme_first_command_works_without_nvcc(path_without_nvcc, tmp_path):
    """The README's set-up command and the tour's fatbin, with nvcc hidden: NVRTC builds the cubins, nvFatbin
    packs the fatbin, `tilec targets` says so."""
    cache = tmp_path / "cache"
    r = _tilec(["targets"], cache, path_without_nvcc)
    assert r.returncode == 0, r.stderr
    assert "nvcc      not found" in r.stdout
    assert "  cubin    NVRTC (in process)" in r.stdout and "  fatbin   NVRTC + nvFatbin" in r.stdout

    r = _tilec([str(SAMPLES / "gemm.tile"), "--target", "sm90", "-o", "gemm.cubin"], cache, path_without_nvcc,
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cubin = (tmp_path / "gemm.cubin").read_bytes()
    assert cubin[:4] == b"\x7fELF" and b"gemm" in cubin
    assert json.loads((tmp_path / "gemm.cubin.json").read_text())["toolchain"].startswith("nvrtc ")

    r = _tilec([str(SAMPLES / "gemm.tile"), "--target", "sm80,sm90", "-o", "gemm.fatbin"], cache, path_without_nvcc,
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "gemm.fatbin.json").read_text())
    assert m["toolchain"].startswith("nvrtc ") and "nvfatbin" in m["toolchain"]
    assert m["driver_api_version"] >= 13000
    fatbin = (tmp_path / "gemm.fatbin").read_bytes()
    assert fatbin[:4] == bytes.fromhex("50ed55ba")  # the fatbin container's magic, little-endian 0xba55ed50
    cuobjdump = _cuobjdump()
    if cuobjdump is not None:
        listing = subprocess.run([cuobjdump, "-lelf", str(tmp_path / "gemm.fatbin")], capture_output=True,
                                 text=True, check=True).stdout
        assert "sm_80" in listing and "sm_90a" in listing


def _cuobjdump() -> str | None:
    from tilec.targets.cuda.toolchain import wheel_files

    found = shutil.which("cuobjdump") or next((str(p) for p in wheel_files("*/bin/cuobjdump")), None)
    return found


def test_nvrtc_finds_half_precision_headers_in_the_pip_wheel(monkeypatch):
    """Without a toolkit, cuda_fp16.h comes from nvidia-cuda-runtime's wheel: a bf16 kernel builds with it."""
    from tilec.targets.cuda import locate, nvrtc, toolchain

    wheel = [p.parent for p in toolchain.wheel_files("*/include/cuda_fp16.h")]
    _require(wheel, "nvidia-cuda-runtime's headers")
    _require(nvrtc.find_lib(), "NVRTC")
    monkeypatch.setattr(locate, "include_candidates", lambda: wheel)
    assert toolchain.cuda_include_dir() == str(wheel[0])
    import tilec
    from tilec.options import CompileOptions

    options = CompileOptions.make(("sm90",), defines={"dtype": "bf16"}, toolchain="nvrtc", use_cache=False)
    art = tilec.compile(str(SAMPLES / "softmax.tile"), options=options, emit="cubin")
    assert art.data[:4] == b"\x7fELF"


def test_hip_object_links_against_the_hip_runtime(tmp_path):
    """An AMD object: one code object per target behind a C `K_launch` over the HIP module API, linked with
    -lamdhip64. Without an AMD GPU the linked program gets HIP's error code back, and does not crash."""
    from tilec.targets.hip.backend import _hip_include_dir
    from tilec.targets.hip.toolchain import find_compiler

    _require(find_compiler("gfx90a") and find_compiler("gfx942"), "hipcc / clang-19 for gfx90a and gfx942")
    inc = _require(_hip_include_dir(), "hip/hip_runtime_api.h")
    _require(shutil.which("cc"), "cc")
    obj = tmp_path / "softmax.o"
    r = _tilec([str(SAMPLES / "softmax.tile"), "--target", "gfx90a,gfx942", "-o", str(obj)], tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    syms = _nm(obj)
    assert syms["softmax_launch"] == "T" and syms["hipModuleLaunchKernel"] == "U"
    assert len([s for s in syms if s.endswith(("_image0", "_image1")) and syms[s] == "r"]) == 2
    m = json.loads((tmp_path / "softmax.o.json").read_text())
    assert m["object"]["prototypes"] == [
        "hipError_t softmax_launch(hipStream_t stream, hipDeviceptr_t X, hipDeviceptr_t Y, int M, int N);",
        "hipError_t softmax_check_sizes(int M, int N, char* message, size_t message_size);"]
    (tmp_path / "main.c").write_text("#define __HIP_PLATFORM_AMD__\n#include <hip/hip_runtime_api.h>\n"
                                     + m["object"]["prototypes"][0] + "\n"
                                     "int main(void) { return softmax_launch(0, 0, 0, 4, 4) == hipSuccess; }\n")
    link = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", f"-I{inc}", "main.c", "softmax.o", "-o", "prog",
                           "-lamdhip64", "-lpthread"], cwd=tmp_path, capture_output=True, text=True)
    if link.returncode != 0 and "amdhip64" in link.stderr:
        pytest.skip("libamdhip64 not installed")
    assert link.returncode == 0, link.stderr
    run = subprocess.run(["./prog"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode in (0, 1)  # 0: HIP returned an error (no AMD device here), 1: launched; else a crash
