"""Ahead-of-time deployment: the C launcher header, the compile cache, dependency files,
deterministic outputs, versioned manifests.

The launcher's logic (image choice by compute capability, grids from the size formulas with floor
division, the dynamic shared-memory attribute, one module load per context under concurrent
launches, errors instead of exits) is checked on the CPU against a mock CUDA driver written in C;
real headers from the samples are compiled as C11 and C++17 and linked against a driver stub
(tests/test_deploy_build.py builds the examples and the CMake / Make integrations).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilec.cli.main import main as tilec_main

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def _require(tool: str | None, what: str) -> str:
    if tool:
        return tool
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
    pytest.skip(f"{what} not found")


def cuda_include_dir() -> str | None:
    from tilec.targets.cuda.toolchain import cuda_include_dir as find

    inc = find()
    return inc if inc and (Path(inc) / "cuda.h").is_file() else None


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILEC_CACHE_DIR", str(d))
    return d


@pytest.fixture(scope="module")
def nvcc():
    return _require(shutil.which("nvcc"), "nvcc")


@pytest.fixture(scope="module")
def gcc():
    return _require(shutil.which("gcc"), "gcc")


@pytest.fixture(scope="module")
def cuda_h():
    return _require(cuda_include_dir(), "the CUDA toolkit's cuda.h")


def _env(cache: Path, **extra) -> dict:
    env = dict(os.environ)
    env["TILEC_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _tilec(args: list[str], cache: Path, cwd: Path = ROOT, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilec", *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(cache), **kw)


# ================================================================ the launcher, on a mock driver

MOCK_DRIVER = r"""
/* A fake CUDA driver: enough of the API for a tilec launcher header, logging what it is asked. */
#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mock_loads = 0, mock_quiet = 0;
static uintptr_t mock_ctx = 1;
void mock_set_context(uintptr_t c) { mock_ctx = c; }
typedef struct { char tag[32]; } mock_module;
typedef struct { char name[64]; char tag[32]; } mock_function;

static int env_int(const char* name, int dflt) { const char* v = getenv(name); return v ? atoi(v) : dflt; }
CUresult cuCtxGetCurrent(CUcontext* c) { *c = (CUcontext)mock_ctx; return CUDA_SUCCESS; }
CUresult cuCtxGetId(CUcontext c, unsigned long long* id) { *id = 1000 + (unsigned long long)(uintptr_t)c;
                                                           return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice* d) { *d = 0; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* v) { *v = env_int("MOCK_DRIVER", 13000); return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  int cc = env_int("MOCK_CC", 90);
  (void)d;
  if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *v = cc / 10;
  else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *v = cc % 10;
  else return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice d) { (void)d; snprintf(name, (size_t)len, "Mock GPU");
                                                             return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult rc, const char** s) { (void)rc; *s = "MOCK"; return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  const char* s = (const char*)image;
  mock_module* mm;
  if (strncmp(s, "TILECMOCK ", 10) != 0) return CUDA_ERROR_INVALID_IMAGE;
  if (((uintptr_t)image) % 64 != 0) return CUDA_ERROR_INVALID_IMAGE; /* the header aligns images */
  mm = (mock_module*)calloc(1, sizeof *mm);
  snprintf(mm->tag, sizeof mm->tag, "%s", s + 10);
  ++mock_loads;
  *m = (CUmodule)mm;
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule m) { free(m); return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  mock_function* mf;
  if (strcmp(name, "scale") != 0 && strcmp(name, "second") != 0) return CUDA_ERROR_NOT_FOUND;
  mf = (mock_function*)calloc(1, sizeof *mf);
  snprintf(mf->name, sizeof mf->name, "%s", name);
  snprintf(mf->tag, sizeof mf->tag, "%s", ((mock_module*)m)->tag);
  *f = (CUfunction)mf;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  mock_function* mf = (mock_function*)f;
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && !mock_quiet)
    printf("attr %s %s %d\n", mf->name, mf->tag, v);
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void** p, void** extra) {
  mock_function* mf = (mock_function*)f;
  (void)s; (void)extra;
  if (mock_quiet) return CUDA_SUCCESS;
  printf("launch %s %s grid %u %u %u block %u %u %u shared %u args", mf->name, mf->tag, gx, gy, gz, bx, by, bz,
         shared);
  if (strcmp(mf->name, "scale") == 0)
    printf(" %llu %g %llu %d %d %d %d\n", *(unsigned long long*)p[0], *(float*)p[1], *(unsigned long long*)p[2],
           (int)*(bool*)p[3], *(int*)p[4], *(int*)p[5], *(int*)p[6]);
  else
    printf(" %llu %d\n", *(unsigned long long*)p[0], *(int*)p[1]);
  return CUDA_SUCCESS;
}
"""

MOCK_MAIN = r"""
#include "mock.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
extern int mock_loads, mock_quiet;
void mock_set_context(uintptr_t c);
#ifdef __cplusplus
}
#endif

static void* hammer(void* arg) {
  int i;
  (void)arg;
  for (i = 0; i < 200; ++i)
    if (scale_launch(0, 1, 2.0f, 3, true, 64, 64, 64) != CUDA_SUCCESS) abort();
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "grid") == 0) {
    printf("rc %d\n", (int)scale_launch(0, 11, 0.5f, 22, true, atoi(argv[2]), atoi(argv[3]), atoi(argv[4])));
  } else if (strcmp(mode, "second") == 0) {
    printf("rc %d\n", (int)second_launch((CUstream)0, 7, atoi(argv[2])));
  } else if (strcmp(mode, "threads") == 0) {
    pthread_t t[8];
    int i;
    mock_quiet = 1;
    for (i = 0; i < 8; ++i) pthread_create(&t[i], NULL, hammer, NULL);
    for (i = 0; i < 8; ++i) pthread_join(t[i], NULL);
    printf("loads %d\n", mock_loads);
  } else if (strcmp(mode, "contexts") == 0) {
    mock_quiet = 1;
    scale_launch(0, 1, 1.0f, 2, false, 8, 8, 8);
    mock_set_context(2);
    scale_launch(0, 1, 1.0f, 2, false, 8, 8, 8);
    second_launch(0, 1, 8);
    mock_set_context(1);
    scale_launch(0, 1, 1.0f, 2, false, 8, 8, 8);
    printf("loads %d\n", mock_loads);
  } else if (strcmp(mode, "check") == 0) {
    char msg[256];
    CUresult rc = scale_check_device(0, msg, sizeof msg);
    printf("rc %d\nmsg %s\n", (int)rc, msg);
    printf("launch-rc %d\n", (int)scale_launch(0, 1, 1.0f, 2, false, 8, 8, 8));
  } else if (strcmp(mode, "noctx") == 0) {
    mock_set_context(0);
    printf("rc %d\n", (int)scale_launch(0, 1, 1.0f, 2, false, 8, 8, 8));
  }
  return 0;
}
"""


def _mock_images():
    from tilec.targets.c_launcher.header import Image

    def scale(threads, shared):
        return {"name": "scale", "params": [
            {"name": "X", "kind": "tensor", "dtype": "f16", "output": False, "shape": ["M", "N"]},
            {"name": "alpha", "kind": "scalar", "dtype": "f32"},
            {"name": "Y", "kind": "tensor", "dtype": "f16", "output": True, "shape": ["M", "N"]},
            {"name": "flag", "kind": "scalar", "dtype": "bool"}],
            "sizes": ["M", "N", "K"],
            "grid": ["ceildiv(N, 128)", "(((M - 100) // 64) + 3)", "(min(K, 3) + (K % 4))"],
            "threads": threads, "shared_bytes": shared}

    second = {"name": "second", "params": [{"name": "A", "kind": "tensor", "dtype": "i32", "output": True,
                                             "shape": ["N"]}],
              "sizes": ["N"], "grid": ["ceildiv(N, 32)"], "threads": 32, "shared_bytes": 0}
    return [Image("sm80", "sm_80", b"TILECMOCK sm_80\0", [scale(128, 1024), second]),
            Image("sm90", "sm_90a", b"TILECMOCK sm_90a\0", [scale(256, 65536), second]),
            Image("sm80", "compute_80", b"TILECMOCK compute_80\0", [scale(128, 1024), second])]


@pytest.fixture(scope="module")
def mock_programs(tmp_path_factory, gcc, cuda_h):
    """The mock-driver program, built as C11 and as C++17."""
    from tilec.targets.c_launcher.header import generate_header

    d = tmp_path_factory.mktemp("mock")
    (d / "mock.h").write_text(generate_header("mock.h", _mock_images(), source_name="mock.tile",
                                              tilec_version="0", toolchain="nvcc 13.1.80", driver_api_version=13010,
                                              source_hash="0" * 64))
    (d / "driver.c").write_text(MOCK_DRIVER)
    (d / "main.c").write_text(MOCK_MAIN)
    flags = ["-Wall", "-Wextra", "-Werror", f"-I{cuda_h}", f"-I{d}"]
    subprocess.run([gcc, "-std=c11", "-pedantic", *flags, "-c", "driver.c", "-o", "driver.o"], cwd=d, check=True)
    out = {}
    subprocess.run([gcc, "-std=c11", "-pedantic", *flags, "main.c", "driver.o", "-o", "prog_c", "-lpthread"], cwd=d,
                   check=True)
    out["c"] = d / "prog_c"
    gxx = shutil.which("g++")
    if gxx:
        shutil.copy(d / "main.c", d / "main.cpp")
        subprocess.run([gxx, "-std=c++17", "-pedantic", *flags, "main.cpp", "driver.o", "-o", "prog_cpp",
                        "-lpthread"], cwd=d, check=True)
        out["c++"] = d / "prog_cpp"
    return out


def _mock(prog: Path, *args, cc: int = 90, driver: int = 13000, no_jit: bool = False) -> str:
    env = dict(os.environ, MOCK_CC=str(cc), MOCK_DRIVER=str(driver))
    env.pop("TILEC_NO_JIT", None)
    if no_jit:
        env["TILEC_NO_JIT"] = "1"
    proc = subprocess.run([str(prog), *map(str, args)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("lang", ["c", "c++"])
def test_launcher_grid_matches_the_manifest_formulas(mock_programs, lang):
    from tilec.runtime.formulas import evaluate

    if lang not in mock_programs:
        pytest.skip("g++ not found")
    prog = mock_programs[lang]
    grid = _mock_images()[1].kernels[0]["grid"]
    for m, n, k in [(1, 1, 1), (100, 129, 7), (5000, 128, 0), (37, 1000, 3), (64, 257, 12)]:
        out = _mock(prog, "grid", m, n, k)
        want = [evaluate(g, {"M": m, "N": n, "K": k}) for g in grid]
        if min(want) <= 0:
            assert "launch" not in out and "rc 0" in out  # an empty grid launches nothing
            continue
        # sm_90a image: 256 threads and 64 KB of dynamic shared memory, whose limit is raised first
        assert "attr scale sm_90a 65536" in out
        assert f"launch scale sm_90a grid {want[0]} {want[1]} {want[2]} block 256 1 1 shared 65536 " \
               f"args 11 0.5 22 1 {m} {n} {k}" in out, out
        assert out.strip().endswith("rc 0")
    # M = 1: (1 - 100) // 64 is -2 with floor division (C's truncation would say -1)
    assert "grid 1 1 4 " in _mock(prog, "grid", 1, 1, 2)
    out = _mock(prog, "grid", -1, 5, 5)
    assert out == "rc 1\n"  # CUDA_ERROR_INVALID_VALUE, nothing launched


def test_launcher_picks_the_image_for_the_device(mock_programs):
    """Exact image, else a cubin of the same major, else PTX (unless TILEC_NO_JIT), as tilec.runtime picks."""
    prog = mock_programs["c"]
    out = _mock(prog, "grid", 300, 300, 3, cc=86)  # an sm_80 cubin runs on sm_86 (before the PTX)
    assert "launch scale sm_80 grid 3 6 " in out and "block 128 1 1 shared 1024" in out and "attr" not in out
    assert "launch scale sm_90a" in _mock(prog, "grid", 300, 300, 3, cc=90)
    assert "launch second sm_80 grid 4 1 1 block 32 1 1 shared 0 args 7 100" in _mock(prog, "second", 100, cc=80)
    out = _mock(prog, "check", cc=75)  # sm_90a runs only on 9.0, sm_80 only on 8.x, compute_80 on 8.0 and newer
    assert "rc 209\n" in out and "launch-rc 209" in out  # CUDA_ERROR_NO_BINARY_FOR_GPU
    assert "mock.h: built for sm_80, sm_90a, compute_80; device 0 (Mock GPU) is sm_75" in out
    for cc in (100, 120):  # newer than every cubin: the driver JIT-compiles the PTX
        out = _mock(prog, "check", cc=cc, driver=13010)
        assert "rc 0\n" in out and f"(Mock GPU, sm_{cc}) runs the compute_80 image" in out
        assert "the driver JIT-compiles the PTX" in out
        assert "launch scale compute_80 grid 1 " in _mock(prog, "grid", 8, 8, 8, cc=cc, driver=13010)
        out = _mock(prog, "check", cc=cc)  # a 13.0 driver loads 13.1's cubins, but not its PTX (PTX ISA 9.1)
        assert "rc 222\n" in out and "launch-rc 222" in out
        assert "is the compute_80 PTX, built with CUDA 13.1, which the driver can JIT-compile only if it supports " \
               "CUDA 13.1 or newer; this driver supports CUDA 13.0" in out
        out = _mock(prog, "check", cc=cc, no_jit=True)
        assert "rc 209\n" in out and "launch-rc 209" in out
        assert f"TILEC_NO_JIT is set, and the only image that runs on device 0 (Mock GPU, sm_{cc}) is PTX" in out
        assert f"missing: a cubin for sm_{cc}" in out
    out = _mock(prog, "check", cc=86)
    assert "rc 0\n" in out and "runs the sm_80 image" in out and "later GPUs of its major version" in out
    out = _mock(prog, "check", cc=90, no_jit=True)  # the guarantee changes nothing where a cubin runs
    assert "rc 0\n" in out and "runs the sm_90a image" in out and "built for exactly this GPU" in out
    out = _mock(prog, "check", cc=90, driver=12080)
    assert "rc 222\n" in out and "launch-rc 222" in out and "needs a CUDA 13.x driver" in out


def test_launcher_loads_once_per_context_under_concurrency(mock_programs):
    for prog in mock_programs.values():
        assert _mock(prog, "threads").strip() == "loads 1"  # 8 threads x 200 launches, one module load
        assert _mock(prog, "contexts").strip() == "loads 2"  # one per context, reused when switching back
        assert _mock(prog, "noctx").strip() == "rc 201"  # CUDA_ERROR_INVALID_CONTEXT, not a crash


def test_launcher_refuses_what_it_cannot_launch():
    from tilec.targets.c_launcher.header import LauncherError, generate_header

    images = _mock_images()
    images[0].kernels[0]["tensor_maps"] = [{"param": "X"}]  # malformed (TMA kernels: tests/test_tensor_maps.py)
    with pytest.raises(LauncherError, match="kernel 'scale': tensor map 0 names no tensor"):
        generate_header("x.h", images, source_name="x.tile", tilec_version="0", toolchain="nvcc 13.0",
                        driver_api_version=13000, source_hash="")


# ================================================================ real headers: C and C++, linked


def driver_stub(directory: Path) -> Path:
    """A directory with libcuda.so (and cuda.h) to link against on this machine without a driver: what
    `tilec --cuda-stub` writes."""
    from tilec.targets.cuda.link_stub import write_cuda_stub

    _require(shutil.which("gcc") or shutil.which("cc"), "a C compiler")
    return write_cuda_stub(directory)


@pytest.fixture(scope="module")
def sample_headers(nvcc, tmp_path_factory):
    """Every sample as a one-target header, plus gemm for sm80 and sm90 (one shared cache)."""
    from concurrent.futures import ThreadPoolExecutor

    d = tmp_path_factory.mktemp("headers")
    cache = d / "cache"
    jobs = [(s, "sm90", d / f"{s.stem}.h") for s in sorted(SAMPLES.glob("*.tile")) if s.stem != "gemm"]
    jobs.append((SAMPLES / "gemm.tile", "sm80,sm90", d / "gemm.h"))

    def one(job):
        src, target, out = job
        return _tilec([str(src), "--target", target, "-o", str(out)], cache)

    with ThreadPoolExecutor(2) as pool:
        for proc in pool.map(one, jobs):
            assert proc.returncode == 0, proc.stderr
    return d


def test_sample_headers_compile_as_c_and_cpp_and_link(sample_headers, gcc, cuda_h, tmp_path):
    gxx = _require(shutil.which("g++"), "g++")
    stubs = driver_stub(tmp_path / "stubs")
    headers = sorted(p.name for p in sample_headers.glob("*.h"))
    assert len(headers) == len(list(SAMPLES.glob("*.tile")))
    includes = "".join(f'#include "{h}"\n' for h in headers)
    # every header twice (include guards), several in one translation unit (no clashes), and in two
    # translation units of one program (everything is static)
    (tmp_path / "a.c").write_text(includes + includes + "int use_a(void) { return (int)gemm_launch(0, 0, 0, 0, 1, 1, "
                                  "1); }\n")
    (tmp_path / "main.c").write_text(includes + "int use_a(void);\nint main(void) { char m[128];\n"
                                     "  return (int)softmax_launch(0, 0, 0, 8, 8) + (int)gemm_check_device(0, m, "
                                     "sizeof m) + use_a(); }\n")
    (tmp_path / "main.cpp").write_text(includes + "int main() { return (int)vector_add_launch(nullptr, 0, 0, 0, 4) "
                                       "+ (int)rmsnorm_launch(nullptr, 0, 0, 0, 1e-5f, 4, 4); }\n")
    inc = [f"-I{cuda_h}", f"-I{sample_headers}"]
    warn = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
    subprocess.run([gcc, "-std=c11", *warn, *inc, "a.c", "main.c", "-o", "prog_c", f"-L{stubs}", "-lcuda",
                    "-lpthread"], cwd=tmp_path, check=True)
    subprocess.run([gxx, "-std=c++17", *warn, *inc, "main.cpp", "-o", "prog_cpp", f"-L{stubs}", "-lcuda"],
                   cwd=tmp_path, check=True)
    needed = subprocess.run(["readelf", "-d", "prog_c"], cwd=tmp_path, capture_output=True, text=True).stdout \
        if shutil.which("readelf") else "libcuda.so.1"
    assert "libcuda.so.1" in needed  # the real driver is what runs


def test_header_manifest_is_versioned(sample_headers):
    m = json.loads((sample_headers / "gemm.h.json").read_text())
    assert m["kind"] == "header" and m["archs"] == ["sm_80", "sm_90a"]
    assert m["driver_api_version"] >= 12000 and m["toolchain"].startswith("nvcc")
    assert m["tilec_version"] and len(m["source_hash"]) == 64
    assert m["header"]["functions"] == ["gemm_launch", "gemm_check_device"]
    assert [i["arch"] for i in m["header"]["images"]] == ["sm_80", "sm_90a", "compute_80"]  # + forward PTX
    text = (sample_headers / "gemm.h").read_text()
    assert "#include <cuda.h>" in text and "cuda_runtime" not in text
    assert "CUresult gemm_launch(CUstream stream, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, int M, int K, " \
           "int N)" in text
    assert "Built for sm_80, sm_90a, compute_80 with nvcc" in text


def test_header_prefix(nvcc, cache_dir, tmp_path):
    out = tmp_path / "va.h"
    assert tilec_main([str(SAMPLES / "vector_add.tile"), "-t", "sm80", "-o", str(out), "--header-prefix",
                       "fp16_"]) == 0
    text = out.read_text()
    assert "static inline CUresult fp16_vector_add_launch(CUstream stream" in text
    assert "fp16_vector_add_check_device" in text


# ================================================================ determinism


def test_outputs_are_byte_identical(nvcc, tmp_path):
    """Same input and options, no cache: the same cubin, manifest and header, byte for byte."""
    runs = []
    for i in range(2):
        d = tmp_path / f"run{i}"
        d.mkdir()
        for args in (["-t", "sm80", "-o", str(d / "k.cubin")], ["-t", "sm90", "-o", str(d / "k.h")],
                     ["-t", "sm80", "-o", str(d / "k.cu")]):
            assert tilec_main([str(SAMPLES / "gemm_bias_relu.tile"), "--no-cache", *args]) == 0
        runs.append({p.name: p.read_bytes() for p in sorted(d.iterdir())})
    assert sorted(runs[0]) == ["k.cu", "k.cu.json", "k.cubin", "k.cubin.json", "k.h", "k.h.json"]
    for name in runs[0]:
        assert runs[0][name] == runs[1][name], f"{name} differs between two identical compiles"


# ================================================================ dependency files


def _project(tmp_path: Path) -> Path:
    """main.tile imports lib/common.tile (found through -I) which imports helpers.tile beside it."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helpers.tile").write_text("def twice(x):\n    return x + x\n")
    (tmp_path / "lib" / "common.tile").write_text('import "helpers.tile"\n\nconst scale = 3\n')
    (tmp_path / "my dir").mkdir()
    (tmp_path / "main.tile").write_text(
        'import "common.tile"\n\n'
        "kernel k(A: f32[N], B: out f32[N]):\n"
        "    with Kernel(ceildiv(N, 128), threads=128) as bx:\n"
        "        for i in Parallel(128):\n"
        "            if bx * 128 + i < N:\n"
        "                B[bx * 128 + i] = twice(A[bx * 128 + i]) * scale\n")
    return tmp_path


def test_M_prints_the_rule_and_stops(tmp_path, cache_dir, capsys):
    p = _project(tmp_path)
    assert tilec_main([str(p / "main.tile"), "-I", str(p / "lib"), "-M", "-o", str(p / "k.cubin")]) == 0
    out = capsys.readouterr().out
    assert out == (f"{p}/k.cubin: \\\n  {p}/main.tile \\\n  {p}/lib/common.tile \\\n  {p}/lib/helpers.tile\n")
    assert not (p / "k.cubin").exists() and not (p / "k.cubin.d").exists()
    # default target: the default output; -MP adds an empty rule per import; -MF writes a file
    assert tilec_main([str(p / "main.tile"), "-I", str(p / "lib"), "-M", "-MP", "-MF", str(p / "deps.d")]) == 0
    text = (p / "deps.d").read_text()
    assert text.startswith("main.cubin: \\\n")
    assert text.endswith(f"\n{p}/lib/common.tile:\n\n{p}/lib/helpers.tile:\n")
    assert f"\n{p}/main.tile:" not in text


def test_MD_writes_the_depfile_and_keeps_compiling(tmp_path, cache_dir):
    p = _project(tmp_path)
    out = p / "my dir" / "k.cu"
    assert tilec_main([str(p / "main.tile"), "-I", str(p / "lib"), "-o", str(out), "-MD", "-MP"]) == 0
    assert "__global__" in out.read_text()
    d = (p / "my dir" / "k.cu.d").read_text()
    assert d.startswith(f"{p}/my\\ dir/k.cu: \\\n  {p}/main.tile \\\n")  # spaces escaped as Make wants them
    assert f"{p}/lib/helpers.tile:\n" in d
    # -MMD is -MD (tilec has no system headers); -MF and several -MT
    assert tilec_main([str(p / "main.tile"), "-I", str(p / "lib"), "-o", str(out), "-MMD", "-MF",
                       str(p / "x.d"), "-MT", "first", "-MT", "second$"]) == 0
    assert (p / "x.d").read_text().startswith("first second$$: \\\n")
    # a cache hit writes the same depfile
    (p / "x.d").unlink()
    assert tilec_main([str(p / "main.tile"), "-I", str(p / "lib"), "-o", str(out), "-MMD", "-MF",
                       str(p / "x.d"), "-MT", "first", "-MT", "second$"]) == 0
    assert (p / "x.d").read_text().startswith("first second$$: \\\n")
    assert _stats()["hits"] == 2  # the -M options are not part of the key


def test_relative_paths_stay_relative(tmp_path, cache_dir):
    p = _project(tmp_path)
    proc = _tilec(["main.tile", "-I", "lib", "-o", "k.cu", "-MD"], cache_dir, cwd=p)
    assert proc.returncode == 0, proc.stderr
    assert (p / "k.cu.d").read_text() == "k.cu: \\\n  main.tile \\\n  lib/common.tile \\\n  lib/helpers.tile\n"


# ================================================================ the compile cache


def _stats() -> dict:
    from tilec.cache import Cache

    return Cache().stats()


def test_cache_hits_misses_and_invalidation(tmp_path, cache_dir, capsys):
    p = _project(tmp_path)
    args = [str(p / "main.tile"), "-I", str(p / "lib"), "-o", str(p / "k.cu"), "-D", "nosuch=1"]
    assert tilec_main(args) == 0
    first = (p / "k.cu").read_bytes(), (p / "k.cu.json").read_bytes()
    assert "-D nosuch matches no const" in capsys.readouterr().err
    (p / "k.cu").unlink()
    assert tilec_main(args) == 0
    assert ((p / "k.cu").read_bytes(), (p / "k.cu.json").read_bytes()) == first
    assert "-D nosuch matches no const" in capsys.readouterr().err  # warnings are replayed on a hit
    assert (_stats()["hits"], _stats()["misses"]) == (1, 1)
    # an imported file changes: miss, and the new output
    (p / "lib" / "common.tile").write_text('import "helpers.tile"\n\nconst scale = 5\n')
    assert tilec_main(args) == 0
    assert (p / "k.cu").read_bytes() != first[0] and _stats()["misses"] == 2
    # a file appears earlier on an import's search path (next to main.tile, before -I lib): miss
    (p / "common.tile").write_text("const scale = 7\ndef twice(x):\n    return x\n")
    assert tilec_main(args) == 0
    assert _stats()["misses"] == 3 and "* 7" in (p / "k.cu").read_text().replace("7.0f", "7")
    (p / "common.tile").unlink()
    assert tilec_main(args) == 0  # back to the earlier inputs: that entry is still there
    assert _stats()["hits"] == 2
    # options are part of the key; --no-cache neither reads nor writes
    assert tilec_main(args + ["-D", "scale=2"]) == 0 and _stats()["misses"] == 4
    n = _stats()["entries"]
    assert tilec_main(args + ["--no-cache"]) == 0
    assert _stats()["entries"] == n and _stats()["hits"] + _stats()["misses"] == 6
    # tilec cache stats / clear
    assert tilec_main(["cache", "stats"]) == 0
    out = capsys.readouterr().out
    assert f"entries           {n}" in out and str(cache_dir) in out
    assert tilec_main(["cache", "clear"]) == 0
    assert _stats()["entries"] == 0 and not any((cache_dir / "v1").glob("entries/*/*/*"))


def test_cache_default_dir_follows_xdg(monkeypatch, tmp_path):
    from tilec.cache import default_dir

    monkeypatch.delenv("TILEC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_dir() == tmp_path / "tilec"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_dir() == Path.home() / ".cache" / "tilec"


HEAVY = ("lark", "numpy", "tilec.parser", "tilec.passes", "tilec.driver", "tilec.ir", "tilec.interp",
         "tilec.targets.cuda.toolchain", "tilec.artifacts")


def test_cache_hit_imports_nothing_heavy(nvcc, tmp_path):
    """A cache hit answers without the compiler, numpy or a toolchain (its time is measured by bench/startup.py,
    not asserted here: a loaded CI machine would make a timed test flaky)."""
    cache = tmp_path / "cache"
    out = tmp_path / "g.h"
    args = [str(SAMPLES / "gemm_bias_relu.tile"), "-t", "sm80", "-o", str(out), "-MD"]
    proc = _tilec(args, cache)
    assert proc.returncode == 0, proc.stderr
    probe = ("import sys, time\n"
             "t = time.perf_counter()\n"
             "from tilec.cli.main import main\n"
             f"rc = main({args!r})\n"
             f"heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))\n"
             "print(rc, heavy)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(cache))
    assert proc.stdout.strip() == "0 []", proc.stdout + proc.stderr


CONCURRENT_WORKER = r"""
import os, sys, time
from tilec.cli.main import main
src, outdir, start, reverse = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
while time.time() < start:
    time.sleep(0.005)
jobs = list(range(16))
for i in (reversed(jobs) if reverse else jobs):
    rc = main([src, "-D", f"scale={i + 1}", "-t", "sm80", "-o", os.path.join(outdir, f"k{i}.cu")])
    if rc != 0:
        sys.exit(rc)
"""


def test_concurrent_compiles_share_the_cache_safely(tmp_path):
    """8 processes compile the same 16 kernels at once: every output is right, the cache ends with
    exactly 16 complete entries."""
    src = tmp_path / "k.tile"
    src.write_text("const scale = 1\n\nkernel k(A: f32[N], B: out f32[N]):\n"
                   "    with Kernel(ceildiv(N, 256), threads=256) as bx:\n"
                   "        for i in Parallel(256):\n"
                   "            if bx * 256 + i < N:\n"
                   "                B[bx * 256 + i] = A[bx * 256 + i] * scale\n")
    ref = tmp_path / "ref"
    ref.mkdir()
    for i in range(16):
        assert tilec_main([str(src), "-D", f"scale={i + 1}", "-t", "sm80", "--no-cache",
                           "-o", str(ref / f"k{i}.cu")]) == 0
    cache = tmp_path / "cache"
    start = time.time() + 1.5
    procs = []
    for w in range(8):
        d = tmp_path / f"w{w}"
        d.mkdir()
        procs.append(subprocess.Popen([sys.executable, "-c", CONCURRENT_WORKER, str(src), str(d), str(start),
                                       str(w % 2)], env=_env(cache), stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    for w in range(8):
        for i in range(16):
            for suffix in (".cu", ".cu.json"):
                got = (tmp_path / f"w{w}" / f"k{i}{suffix}").read_bytes()
                want = (ref / f"k{i}{suffix}").read_bytes()
                if suffix == ".cu":
                    assert got == want, f"worker {w}, kernel {i}"
                else:
                    assert json.loads(got)["source_hash"] == json.loads(want)["source_hash"]
    from tilec.cache import Cache

    st = Cache(cache).stats()
    assert st["entries"] == 16 and st["partial_writes"] == 0
    assert st["hits"] + st["misses"] == 8 * 16
    print(f"8 x 16 compiles: {st['hits']} hits, {st['misses']} misses")


KILLED_WORKER = r"""
import os, sys, time
import tilec.cache as cache
real_open, real_write_atomic = open, cache.write_atomic
def slow_write_atomic(path, data, tmpdir=None):
    if tmpdir is None:  # an output file, not a cache entry
        return real_write_atomic(path, data, tmpdir)
    tmp = os.path.join(os.fspath(tmpdir), "partial.tmp")
    with real_open(tmp, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        real_open(sys.argv[2], "w").close()   # tell the test: half of the entry is on disk
        time.sleep(600)                      # ... and be killed here
        f.write(data[len(data) // 2:])
    os.replace(tmp, path)
cache.write_atomic = slow_write_atomic
from tilec.cli.main import main
sys.exit(main([sys.argv[1], "-t", "sm80", "-o", sys.argv[3]]))
"""


def test_a_compile_killed_mid_write_leaves_no_broken_entry(tmp_path):
    p = _project(tmp_path)
    (p / "main.tile").write_text((p / "main.tile").read_text().replace('import "common.tile"', 'import '
                                                                       '"lib/common.tile"'))
    cache = tmp_path / "cache"
    marker = tmp_path / "half-written"
    out = tmp_path / "k.cu"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, str(p / "main.tile"), str(marker), str(out)],
                            env=_env(cache))
    try:
        deadline = time.time() + 120
        while not marker.exists():
            assert proc.poll() is None and time.time() < deadline, "the worker never reached the cache write"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    from tilec.cache import Cache

    st = Cache(cache).stats()
    assert st["entries"] == 0 and st["partial_writes"] == 1  # the half entry is not an entry
    # the next compile misses, builds, and leaves a complete entry; the one after hits
    for _ in range(2):
        r = _tilec([str(p / "main.tile"), "-t", "sm80", "-o", str(out)], cache)
        assert r.returncode == 0, r.stderr
        assert "__global__" in out.read_text()
    st = Cache(cache).stats()
    assert (st["entries"], st["hits"], st["misses"]) == (1, 1, 2)  # the killed compile's miss counts too


def test_a_damaged_entry_is_a_miss_and_is_removed(tmp_path, cache_dir):
    p = _project(tmp_path)
    args = [str(p / "main.tile"), "-I", str(p / "lib"), "-o", str(p / "k.cu")]
    assert tilec_main(args) == 0
    good = (p / "k.cu").read_bytes()
    [entry] = list((cache_dir / "v1" / "entries").glob("*/*/*.entry"))
    data = entry.read_bytes()
    entry.write_bytes(data[:-100] + bytes(100))  # same size, wrong bytes (a torn write)
    (p / "k.cu").unlink()
    assert tilec_main(args) == 0
    assert (p / "k.cu").read_bytes() == good and _stats()["misses"] == 2
    # rewritten whole by the miss: the same outputs and metadata (but its creation second, which may have moved on)
    from tilec.cache import decode_entry

    before, after = decode_entry(data, entry), decode_entry(entry.read_bytes(), entry)
    assert after.outputs == before.outputs
    assert {**after.meta, "created": 0} == {**before.meta, "created": 0}


def test_cmake_dir(capsys):
    assert tilec_main(["--cmake-dir"]) == 0
    d = Path(capsys.readouterr().out.strip())
    assert (d / "TilecConfig.cmake").is_file() and (d / "TilecFunctions.cmake").is_file()
    assert (d / "tilec.mk").is_file()
    import tilec

    assert f'set(PACKAGE_VERSION "{tilec.__version__}")' in (d / "TilecConfigVersion.cmake").read_text()


def test_an_input_edited_during_the_compile_is_not_cached(tmp_path):
    """The cache records the inputs as the compiler read them: a file changed since is not stored
    under its new contents (which would serve stale output later)."""
    from tilec.diagnostics import SourceManager
    from tilec.outputs import dep_digests as _dep_digests

    f = tmp_path / "k.tile"
    f.write_text("const a = 1\n")
    seen = SourceManager()
    seen.add(str(f), "const a = 1\n")
    assert _dep_digests([str(f)], seen) is not None
    f.write_text("const a = 2\n")  # edited after the compiler read it
    assert _dep_digests([str(f)], seen) is None
