"""Zeroed scratch (`alloc_global(shape, i32, zeroed=True)`) in the C launchers: a launches entry whose zeroed
scratch tensors lie first in the workspace and whose "zeroed_bytes" sizes them makes NAME_launch_with_workspace
(and so NAME_launch and a tuned dispatcher's) clear those bytes on the launch's stream before the first stage, on
every call -- the CUDA header with cuMemsetD8Async, the HIP object with hipMemsetD8Async. An entry without the key
gives the launchers of before. The entries are rowsum's (test_launches.SPLIT) with its counter Cnt made zeroed."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess

import pytest
from test_launches import MOCK_DRIVER, SPLIT, _cuda_h, _gcc

import tilec
from tilec.artifacts import kernel_entries, launch_entries
from tilec.targets.c_launcher.header import Image, formula_to_c, generate_header
from tilec.targets.hip.launcher import generate_object_source

# Cnt (4 * ceildiv(M, 64) bytes) first, cleared; P after it at the next 256-byte boundary.
CNT_BYTES = "(4 * ceildiv(M, 64))"
ZEROED_BYTES = f"(ceildiv({CNT_BYTES}, 256) * 256)"


def _zeroed(seq: dict) -> dict:
    """`seq` (rowsum's launches entry) as the manifest gives it when Cnt is declared zeroed=True."""
    seq = copy.deepcopy(seq)
    by_name = {b["name"]: b for b in seq["scratch"]}
    cnt, p = by_name["Cnt"], by_name["P"]
    assert cnt["bytes"] == CNT_BYTES
    seq["scratch"] = [{**cnt, "offset": "0", "zeroed": True}, {**p, "offset": ZEROED_BYTES}]
    seq["workspace_bytes"] = f"({ZEROED_BYTES} + (ceildiv({p['bytes']}, 256) * 256))"
    seq["zeroed_bytes"] = ZEROED_BYTES
    return seq


@pytest.fixture(scope="module")
def rowsum(tmp_path_factory):
    """{target: (stage kernel entries, rowsum's launches entry)} for sm80 and gfx942."""
    d = tmp_path_factory.mktemp("zeroed")
    (d / "k.tile").write_text(SPLIT)
    out = {}
    for target in ("sm80", "gfx942"):
        result = tilec.compile(d / "k.tile", target=target)
        entries = kernel_entries(result)
        (seq,) = launch_entries(result.module, entries)
        out[target] = entries, seq
    return out


def _header(entries: list[dict], seq: dict) -> str:
    return generate_header("rowsum.h", [Image("sm80", "sm_80", b"TILECMOCK\0", entries)], source_name="k.tile",
                           tilec_version="0", toolchain="mock", driver_api_version=13000, source_hash="0" * 64,
                           launches=[seq])


def _hip_source(entries: list[dict], seq: dict) -> tuple[str, list[str]]:
    text, _, protos = generate_object_source("rowsum.o", [("gfx942", b"\0", entries)], source_name="k.tile",
                                             tilec_version="0", toolchain="mock", prefix="",
                                             embed=lambda n, d: f"static const unsigned char {n}[] = {{0}};",
                                             launches=[seq])
    return text, protos


def _function(text: str, proto_start: str) -> str:
    """The body of the function defined as `proto_start(...) {` (after its prototype in a banner, if any)."""
    at = text.index(" {\n", text.rindex(proto_start))
    return text[at:text.index("\n}\n", at)]


@pytest.mark.parametrize("target, memset", [("sm80", "cuMemsetD8Async"), ("hip", "hipMemsetD8Async")])
def test_the_zeroed_bytes_are_cleared_before_the_first_stage(rowsum, target, memset):
    entries, seq = rowsum["gfx942" if target == "hip" else "sm80"]
    zeroed = _zeroed(seq)
    if target == "hip":
        text = _hip_source(entries, zeroed)[0]
        body = _function(text, "hipError_t rowsum_launch_with_workspace(")
    else:
        text = _header(entries, zeroed)
        body = _function(text, "static inline CUresult rowsum_launch_with_workspace(")
    size = formula_to_c(ZEROED_BYTES, {"M": "tilec_s_M", "N": "tilec_s_N"})
    assert f"  const size_t tilec_zeroed = (size_t)({size});" in body
    call = f"    tilec_rc = {memset}(workspace, 0, tilec_zeroed, stream);"
    assert body.count(memset) == 1 and call in body
    assert body.index("% 256u != 0) return") < body.index(call)  # the workspace is checked first
    assert body.index(call) < body.index("_rowsum__stage0_launch(stream") < body.index("_rowsum__stage1_launch(stream")
    ok = "hipSuccess" if target == "hip" else "CUDA_SUCCESS"
    assert body[body.index(call):].splitlines()[1] == f"    if (tilec_rc != {ok}) return tilec_rc;"
    assert "Its zeroed scratch tensors (Cnt) lie first" in text
    assert text.count(memset) == 3  # the call and two lines of the function's comment; nowhere else


def test_an_entry_without_zeroed_bytes_gives_no_memset(rowsum):
    """The source of an entry without "zeroed_bytes" is that of the launchers before the key existed: no memset;
    the zeroed entry's differs from the same layout without the key by the memset and its comment only."""
    for target in ("sm80", "gfx942"):
        entries, seq = rowsum[target]
        make = (lambda s, e=entries: _hip_source(e, s)[0]) if target == "gfx942" else \
            (lambda s, e=entries: _header(e, s))
        plain = make(seq)
        assert "Memset" not in plain and "tilec_zeroed" not in plain and "zeroed" not in plain
        zeroed = _zeroed(seq)
        unzeroed = copy.deepcopy(zeroed)
        del unzeroed["zeroed_bytes"]
        del unzeroed["scratch"][0]["zeroed"]
        same_layout = make(unzeroed)
        assert "Memset" not in same_layout
        extra = [ln for ln in make(zeroed).splitlines() if ln not in same_layout.splitlines()]
        # the workspace_bytes doc (", zeroed"), two lines of doc, the Returns line, the memset's four lines
        assert len(extra) == 8 and sum("tilec_zeroed" in ln for ln in extra) == 3, extra
        assert "the scratch tensors Cnt i32[ceildiv(M, 64)] at byte 0, zeroed; P f32[M, 2] at byte" in extra[0]


# ---------------------------------------------------------------- compiled against recording drivers

MEMSET_CUDA = r"""
CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
  printf("memset %llu %u %zu stream %llu\n", (unsigned long long)p, (unsigned)v, n,
         (unsigned long long)(uintptr_t)s);
  return getenv("MOCK_MEMSET_FAILS") ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}
"""

MAIN_CUDA = r"""
#include "rowsum.h"
#include <stdlib.h>

int main(int argc, char** argv) {
  int m = atoi(argv[2]), n = atoi(argv[3]);
  (void)argc;
  if (argv[1][0] == 'l')
    printf("rc %d\n", (int)rowsum_launch((CUstream)5, 4096, 0.5f, 8192, m, n));
  else
    printf("rc %d\n", (int)rowsum_launch_with_workspace((CUstream)6, (CUdeviceptr)atoll(argv[4]), 4096, 0.5f, 8192,
                                                        m, n));
  return 0;
}
"""


def _run(prog, *args, fail=False) -> list[str]:
    env = {**os.environ, **({"MOCK_MEMSET_FAILS": "1"} if fail else {})}
    out = subprocess.run([str(prog), *map(str, args)], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.fixture(scope="module")
def cuda_program(rowsum, tmp_path_factory):
    gcc, inc = _gcc(), _cuda_h()
    d = tmp_path_factory.mktemp("zeroed_cuda")
    (d / "rowsum.h").write_text(_header(rowsum["sm80"][0], _zeroed(rowsum["sm80"][1])))
    (d / "driver.c").write_text(MOCK_DRIVER + MEMSET_CUDA)
    (d / "main.c").write_text(MAIN_CUDA)
    flags = ["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", f"-I{inc}", f"-I{d}"]
    subprocess.run([gcc, *flags, "main.c", "driver.c", "-o", "prog", "-lpthread"], cwd=d, check=True)
    return d / "prog"


def test_the_cuda_header_clears_the_stream_ordered_workspace(cuda_program):
    ws = 0x100000
    assert _run(cuda_program, "l", 100, 7) == [
        f"alloc {256 + 1024} stream 5", f"memset {ws} 0 256 stream 5",
        f"launch rowsum__stage0 grid 2 2 1 block 64 stream 5 args 4096 {ws + 256} {ws} 100 7",
        f"launch rowsum__stage1 grid 2 1 1 block 64 stream 5 args 0.5 8192 {ws + 256} {ws} 100",
        f"free {ws} stream 5", "rc 0"]
    # 300 rows: 5 counters (20 bytes) round to 256, all of them cleared; again on the next call
    assert _run(cuda_program, "x", 300, 7, 0x200000)[0] == f"memset {0x200000} 0 256 stream 6"
    assert _run(cuda_program, "x", 300, 7, 0x200000)[0] == f"memset {0x200000} 0 256 stream 6"


def test_the_cuda_header_returns_a_failed_memset_before_any_stage(cuda_program):
    ws = 0x100000
    assert _run(cuda_program, "l", 100, 7, fail=True) == [
        f"alloc {256 + 1024} stream 5", f"memset {ws} 0 256 stream 5", f"free {ws} stream 5", "rc 2"]
    assert _run(cuda_program, "x", 100, 7, 0x200000, fail=True) == [f"memset {0x200000} 0 256 stream 6", "rc 2"]
    assert _run(cuda_program, "x", 100, 7, 0x200010) == ["rc 1"]  # misaligned: refused before clearing
    assert _run(cuda_program, "l", 0, 7) == ["alloc 1 stream 5", f"free {ws} stream 5", "rc 0"]  # nothing to clear


MOCK_HIP = r"""
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char name[64]; } mock_function;
hipError_t hipGetDevice(int* d) { *d = 0; return hipSuccess; }
hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int d) {
  (void)d;
  memset(prop, 0, sizeof *prop);
  snprintf(prop->gcnArchName, sizeof prop->gcnArchName, "gfx942:sramecc+:xnack-");
  return hipSuccess;
}
hipError_t hipModuleLoadData(hipModule_t* m, const void* image) { (void)image; *m = (hipModule_t)1; return hipSuccess; }
hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name) {
  mock_function* mf = (mock_function*)calloc(1, sizeof *mf);
  (void)m;
  snprintf(mf->name, sizeof mf->name, "%s", name);
  *f = (hipFunction_t)mf;
  return hipSuccess;
}
hipError_t hipMallocAsync(void** p, size_t bytes, hipStream_t s) {
  *p = (void*)0x100000;
  printf("alloc %zu stream %llu\n", bytes, (unsigned long long)(uintptr_t)s);
  return hipSuccess;
}
hipError_t hipFreeAsync(void* p, hipStream_t s) {
  printf("free %llu stream %llu\n", (unsigned long long)(uintptr_t)p, (unsigned long long)(uintptr_t)s);
  return hipSuccess;
}
hipError_t hipMemsetD8Async(hipDeviceptr_t p, unsigned char v, size_t n, hipStream_t s) {
  printf("memset %llu %u %zu stream %llu\n", (unsigned long long)(uintptr_t)p, (unsigned)v, n,
         (unsigned long long)(uintptr_t)s);
  return getenv("MOCK_MEMSET_FAILS") ? hipErrorOutOfMemory : hipSuccess;
}
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, hipStream_t s, void** p, void** extra) {
  (void)p; (void)by; (void)bz; (void)shared; (void)extra;
  printf("launch %s grid %u %u %u block %u stream %llu\n", ((mock_function*)f)->name, gx, gy, gz, bx,
         (unsigned long long)(uintptr_t)s);
  return hipSuccess;
}
"""


def test_the_hip_object_clears_the_workspace_before_the_first_stage(rowsum, tmp_path):
    from tilec.targets.hip.backend import _hip_include_dir

    cc, inc = shutil.which("cc"), _hip_include_dir()
    if cc is None or inc is None:
        pytest.skip("needs cc and hip/hip_runtime_api.h")
    text, protos = _hip_source(rowsum["gfx942"][0], _zeroed(rowsum["gfx942"][1]))
    (tmp_path / "rowsum.c").write_text(text)
    (tmp_path / "hip.c").write_text(MOCK_HIP)
    (tmp_path / "main.c").write_text(
        "#define __HIP_PLATFORM_AMD__ 1\n#include <hip/hip_runtime_api.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        + "\n".join(protos) + "\nint main(int argc, char** argv) {\n  (void)argc;\n"
        "  if (argv[1][0] == 'l') printf(\"rc %d\\n\", (int)rowsum_launch((hipStream_t)5, (hipDeviceptr_t)4096, 0.5f, "
        "(hipDeviceptr_t)8192, 100, 7));\n"
        "  else printf(\"rc %d\\n\", (int)rowsum_launch_with_workspace((hipStream_t)6, (hipDeviceptr_t)0x200000, "
        "(hipDeviceptr_t)4096, 0.5f, (hipDeviceptr_t)8192, 100, 7));\n  return 0;\n}\n")
    flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{inc}"]
    subprocess.run([cc, *flags, "main.c", "rowsum.c", "hip.c", "-o", "prog", "-lpthread"], cwd=tmp_path, check=True)
    ws = 0x100000
    assert _run(tmp_path / "prog", "l") == [
        f"alloc {256 + 1024} stream 5", f"memset {ws} 0 256 stream 5",
        "launch rowsum__stage0 grid 2 2 1 block 64 stream 5", "launch rowsum__stage1 grid 2 1 1 block 64 stream 5",
        f"free {ws} stream 5", "rc 0"]
    out = _run(tmp_path / "prog", "x", fail=True)
    assert out[0] == f"memset {0x200000} 0 256 stream 6" and out[1].startswith("rc ") and out[1] != "rc 0"
    assert len(out) == 2
