#!/usr/bin/env python3
"""Check tilec's AscendC output against CANN's own public sources (which are never copied into this project).

    TILEC_ASC_DEVKIT=/path/asc-devkit      a checkout of github.com/mirror-cann/asc-devkit at v8.5.0 (include/,
                                           impl/, tests/unit/basic_api/ut/{stub,scripts}/)
    TILEC_ASC_TOOLS=/path/asc-tools        github.com/hicann/asc-tools at v8.5.0 (cpudebug/include/)
    TILEC_CANN_RUNTIME=/path/runtime       github.com/hicann/runtime at v8.5.0 (include/external/acl/)
    python scripts/ascend_real_api.py [--typecheck] [--run] [--compilers g++,clang++] [--only NAME,...]

(a) --typecheck: every sample's and every TileLang port's (examples/tilelang) AscendC source compiles against the
    real headers in CANN's CPU-debug mode, as generic, vector-core and cube-core code, with each compiler; every
    launcher header compiles as C11 and C++17 against the real ACL headers.
(b) --run: each kernel is linked with the real headers and run on the host at three sizes, every core of every
    block (AIV-only: each AIV; cube-only: each AIC; mixed: the AIC and both AIVs of each group) in its own
    process, so CANN's own TPipe/TQue/event bookkeeping and its CPU-debug assertions run for real. The intrinsics
    below the API (data movement, vector and cube compute, flags) are stubbed as no-ops, except the few the
    bookkeeping computes with (bit scans, block indices), which this script implements.

Prints a table and exits non-zero when any check fails. Without the environment variables it says what is
missing and exits 2.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENV = {"TILEC_ASC_DEVKIT": "asc-devkit v8.5.0", "TILEC_ASC_TOOLS": "asc-tools v8.5.0",
       "TILEC_CANN_RUNTIME": "runtime v8.5.0"}
DEFINES = ["-DASCENDC_CPU_DEBUG=1", "-D__CCE_KT_TEST__=1", "-D__CCE_AICORE__=220", "-D__NPU_ARCH__=2201",
           "-D__DAV_C220__", "-DTILEC_ASCEND_MODEL"]
VARIANTS = {"generic": [], "vec": ["-D__DAV_C220_VEC__"], "cube": ["-D__DAV_C220_CUBE__"]}
# three sizes per run; batch-like dimensions stay small so that a core's tile loop stays short
SIZES = [{"default": 17, "small": 1}, {"default": 100, "small": 2}, {"default": 300, "small": 3}]
SMALL_DIMS = {"B", "H", "batch", "heads", "BATCH", "HEADS", "G", "E", "num_experts"}
CORES = 3  # blocks per launch: with a tile loop, each core takes every third tile


def sources() -> dict[str, Path]:
    missing = [f"{k} ({v})" for k, v in ENV.items() if not os.environ.get(k)]
    if missing:
        sys.stderr.write("ascend_real_api: set " + ", ".join(missing) + " (docs/ascend.md says where to get them)\n")
        sys.exit(2)
    return {k: Path(os.environ[k]) for k in ENV}


def include_flags(src: dict[str, Path], gen: Path) -> list[str]:
    a = src["TILEC_ASC_DEVKIT"]
    dirs = [a, a / "include", a / "include/basic_api", a / "include/utils", a / "include/c_api", a / "impl",
            a / "impl/c_api", a / "impl/basic_api", src["TILEC_ASC_TOOLS"] / "cpudebug/include",
            a / "tests/unit/basic_api/ut/stub", gen, gen / "kernel_tiling"]
    return [f"-I{d}" for d in dirs]


def generate_tiling_header(src: dict[str, Path], gen: Path) -> None:
    """kernel_tiling.h, made by asc-devkit's own script from its tiling structs (the headers include it)."""
    out = gen / "kernel_tiling" / "kernel_tiling.h"
    if out.exists():
        return
    script = src["TILEC_ASC_DEVKIT"] / "tests/unit/basic_api/ut/scripts/gen_kernel_tiling_data_def.py"
    subprocess.run([sys.executable, str(script), str(src["TILEC_ASC_DEVKIT"] / "include/adv_api"), str(out)],
                   check=True, capture_output=True)


def kernels(only: set[str] | None):
    """(name, compile result or the refusal message) of every sample and TileLang port."""
    import tilec
    from tilec.diagnostics import CompileError

    files = sorted((ROOT / "samples").glob("*.tile")) + sorted((ROOT / "examples/tilelang").glob("*.tile"))
    for f in files:
        name = f.stem if f.parent.name == "samples" else f"tilelang/{f.stem}"
        if only and name not in only:  # a port is named tilelang/STEM
            continue
        try:
            yield name, tilec.compile(f, target="ascend910b")
        except CompileError as e:
            fitted = _fitted(f, e)  # the tiles `tilec --fit` picks where the consts' defaults overflow a memory
            if fitted is not None:
                yield name, fitted
                continue
            d = e.diagnostics[0]
            yield name, f"refused at line {d.span.line if d.span else '?'}: {d.message.splitlines()[0][:110]}"


def _fitted(path: Path, e):
    """The kernel compiled at the configuration `tilec --fit` builds, when `e` is a resource error; else None."""
    import tilec
    from tilec.diagnostics import CompileError
    from tilec.options import CompileOptions
    from tilec.tuning.fit import find_fit, resource_errors

    if not resource_errors(e):
        return None
    fit = find_fit(str(path), CompileOptions.make(("ascend910b",)))
    if fit is None or fit.blocker:
        return None
    try:
        return tilec.compile(path, target="ascend910b", defines=fit.defines)
    except CompileError:
        return None


def run(cmd: list[str], cwd: Path | None = None, timeout: int = 900) -> tuple[bool, str]:
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    return r.returncode == 0, r.stdout + r.stderr


def std_flags(cxx: str) -> list[str]:
    """C++17 for g++. clang stops inside CANN's CPU-debug headers in C++17: a constexpr function returning the
    CPU-debug `half` (impl/basic_api/utils/kernel_utils_struct_norm_sort.h), which C++23 allows (non-literal
    constexpr return types, P2448), and narrowing brace-initialisations in kernel_check.h / kernel_check_func.h,
    which clang makes errors by default and g++ accepts; tilec's own code is C++17 either way."""
    return ["-std=c++2b", "-Wno-c++11-narrowing"] if "clang" in cxx else ["-std=c++17"]


def typecheck(name: str, result, src, gen: Path, work: Path, compilers: list[str]) -> list[str]:
    """The failures of one kernel's source (3 variants x compilers) and launcher header (C11, C++17)."""
    from tilec.targets.ascend.launcher import generate_header

    d = work / name.replace("/", "_")
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.cpp").write_text(result.source)
    (d / "launch.h").write_text(generate_header(result.simt, ""))
    jobs = [([cxx, *std_flags(cxx), "-fsyntax-only", *DEFINES, *flags, *include_flags(src, gen), "kernel.cpp"],
             f"{cxx} {variant}") for cxx in compilers for variant, flags in VARIANTS.items()]
    acl = f"-I{src['TILEC_CANN_RUNTIME'] / 'include/external'}"
    jobs.append((["gcc", "-std=c11", "-fsyntax-only", acl, "-x", "c", "launch.h"], "header C11"))
    jobs.append((["g++", "-std=c++17", "-fsyntax-only", acl, "-x", "c++", "launch.h"], "header C++17"))
    failures = []
    for cmd, what in jobs:
        ok, err = run(cmd, cwd=d)
        if not ok:
            first = next((ln for ln in err.splitlines() if "error" in ln), err[:200])
            failures.append(f"{what}: {first}")
    return failures


# --------------------------------------------------------------------------- (b) the real bookkeeping

DRIVER = r"""
#include "kernel.cpp"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

// A global-memory tensor every core's process shares: BYTES (zeros), or BYTES:PATH, the file PATH (at least BYTES + 64
// bytes) mapped shared, so that every process of every core type reads and writes the same memory.
static uint8_t* gm_tensor(const char* arg) {
    size_t bytes = (size_t)strtoull(arg, nullptr, 10);
    const char* colon = strchr(arg, ':');
    if (!colon)
        return (uint8_t*)mmap(nullptr, bytes + 64, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fd = open(colon + 1, O_RDWR);
    void* p = fd < 0 ? MAP_FAILED : mmap(nullptr, bytes + 64, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) { fprintf(stderr, "cannot map %s\n", colon + 1); exit(2); }
    close(fd);
    return (uint8_t*)p;
}
// tilec's CCE model (--numerics) counts the cores of a mixed group still running, to report a cross-core deadlock.
extern "C" __attribute__((weak)) void tilec_cce_core_state(int64_t block, int core, int state);

// What CANN's CPU-debug library (tikicpulib, not public) would define: the core's identity, and the few
// intrinsics the API's bookkeeping computes with. Every other intrinsic is a no-op stub (stubs.s).
int64_t block_idx = 0, block_num = 1, g_ubBase = 0;
int32_t g_coreType = 0, g_taskRation = 1, sub_block_idx = 0, g_matmulCount = 0;
uint64_t g_tilingKey = 0;
namespace AscendC {
const int MIX_TYPE = 0, AIC_TYPE = 1, AIV_TYPE = 2;
int64_t sff0(uint64_t in) { for (int i = 0; i < 64; ++i) if (!((in >> i) & 1)) return i; return 64; }
uint64_t sbitset0(uint64_t x, int64_t i) { return x & ~(uint64_t(1) << i); }
uint64_t sbitset1(uint64_t x, int64_t i) { return x | (uint64_t(1) << i); }
int64_t get_block_idx() { return block_idx; }
int64_t get_block_num() { return block_num; }
int64_t get_subblockid() { return sub_block_idx; }
}

int main(int argc, char** argv) {
    // argv: core type (aic | aiv), blocks, then per parameter: a byte count (buffer) or a value (scalar)
    const bool aic = argv[1][0] == 'c';
    const int64_t blocks = atoll(argv[2]);
    const int subs = MIXED ? (aic ? 1 : 2) : 1;
    int a = 3;
@ARGS@
    for (int64_t b = 0; b < blocks; ++b) {
        pid_t pids[2];
        for (int s = 0; s < subs; ++s) {  // the AIVs of a group run at once (they may exchange flags with the AIC)
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                setvbuf(stdout, nullptr, _IONBF, 0);  // the library's assertion logs, before its abort
                block_idx = b; block_num = blocks; sub_block_idx = s;
                g_coreType = aic ? AscendC::AIC : AscendC::AIV;
                g_taskRation = MIXED ? 2 : 1;
                if (tilec_cce_core_state) tilec_cce_core_state(b, aic ? 0 : 1 + s, 1);
                @CALL@;
                _exit(0);
            }
            pids[s] = pid;
        }
        int failed = 0;
        for (int s = 0; s < subs; ++s) {
            int status = 0;
            waitpid(pids[s], &status, 0);
            if (tilec_cce_core_state) tilec_cce_core_state(b, aic ? 0 : 1 + s, 3);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "core %s block %lld sub %d failed (status %d)\n", aic ? "AIC" : "AIV",
                        (long long)b, s, status);
                failed = 1;
            }
        }
        if (failed) return 1;
    }
    return 0;
}
"""


def driver_source(program) -> str:
    args, call = [], []
    for ty, name in program.host_params:
        if ty == "uint8_t*":
            args.append(f"    uint8_t* {name} = gm_tensor(argv[a++]);")
        elif ty == "float":
            args.append(f"    const float {name} = strtof(argv[a++], nullptr);")
        else:
            args.append(f"    const {ty} {name} = ({ty})strtoll(argv[a++], nullptr, 10);")
        call.append(name)
    text = DRIVER.replace("@ARGS@", "\n".join(args)).replace("@CALL@", f"{program.name}({', '.join(call)})")
    return text.replace("MIXED", "true" if program.kernel_type == "MIX_AIC_1_2" else "false")


UNDEFINED = re.compile(r"undefined reference to `([^']+)'")


# Data-movement, compute, atomic-mode and cross-core intrinsics (AscendC::v*, copy_*, load_*, mad, create_*,
# set_atomic_*, ffts_*, wait_flag_dev, set_nd_para): with --numerics one that tilec's CCE model does not implement
# must stop the run, not compute nothing.
COMPUTE = re.compile(r"^_ZN7AscendC\d+(v\w*|copy_\w*|load_\w*|mad|create_\w*|set_atomic_\w*|ffts_\w*|wait_flag_dev"
                     r"|set_nd_para)E")


def stub(name: str, strict: bool) -> str:
    if strict and COMPUTE.match(name):
        return (f"    .globl {name}\n    .weak {name}\n{name}:\n    leaq .Ls_{name}(%rip), %rdi\n"
                f"    jmp tilec_cce_unmodelled\n    .section .rodata\n.Ls_{name}:\n    .asciz \"{name}\"\n    .text\n")
    return f"    .globl {name}\n    .weak {name}\n{name}:\n    movl $1, %eax\n    pxor %xmm0, %xmm0\n    ret\n"


def link_with_stubs(objs: list[Path], exe: Path, stubs: Path, strict: bool = False) -> tuple[bool, str]:
    """Link `objs`; every symbol left undefined (an intrinsic of the closed CPU-debug library) becomes a stub that
    returns 1 (the library's checks report success) and zero floats, or, with `strict`, a compute intrinsic's stub
    that stops the run."""
    for _ in range(3):
        extra = [str(stubs)] if stubs.exists() else []
        ok, err = run(["g++", "-no-pie", *map(str, objs), *extra, "-o", str(exe), "-Wl,--no-demangle", "-pthread"])
        if ok:
            return True, ""
        names = sorted(set(UNDEFINED.findall(err)))
        if not names:
            return False, err[-2000:]
        known = stubs.read_text() if stubs.exists() else ""
        body = "".join(stub(n, strict) for n in names if f".globl {n}\n" not in known)
        stubs.write_text((known or "    .section .note.GNU-stack,\"\",@progbits\n    .text\n") + body)
    return False, "could not resolve the library's symbols"


def run_kernel(name: str, result, src, gen: Path, work: Path) -> list[str]:
    """The failures of running one kernel's cores through the real bookkeeping at three sizes."""
    from tilec.interp.run import random_inputs

    d = work / name.replace("/", "_")
    d.mkdir(parents=True, exist_ok=True)
    failures = []
    k = result.module.kernels[0]
    for program in result.simt:
        (d / "kernel.cpp").write_text(result.source)
        (d / "driver.cpp").write_text(driver_source(program))
        cores = {"AIV_ONLY": ["vec"], "AIC_ONLY": ["cube"], "MIX_AIC_1_2": ["cube", "vec"]}[program.kernel_type]
        exes = {}
        for core in cores:
            obj, exe = d / f"{program.name}_{core}.o", d / f"{program.name}_{core}"
            ok, err = run(["g++", "-std=c++17", "-O0", "-fno-pie", *DEFINES, *VARIANTS[core],
                           *include_flags(src, gen), "-c", "driver.cpp", "-o", str(obj)], cwd=d)
            if ok:
                ok, err = link_with_stubs([obj], exe, work / "stubs.s")
            if not ok:
                failures.append(f"{core} build: {next((ln for ln in err.splitlines() if 'error' in ln), err[:300])}")
                continue
            exes[core] = exe
        if failures:
            return failures
        for sizes in SIZES:
            full = {v.name: sizes["small"] if v.name in SMALL_DIMS else sizes["default"] for v in k.size_vars}
            try:
                arrays = random_inputs(k, full, seed=1)
            except ValueError as e:
                failures.append(f"sizes {full}: {e}")
                continue
            argv = []
            for ty, pname in program.host_params:
                if ty == "uint8_t*":
                    if pname == "workspace":
                        argv.append(str(CORES * program.workspace_bytes))
                    else:
                        argv.append(str(getattr(arrays.get(pname), "nbytes", 0)))
                else:
                    argv.append(str(full.get(pname, arrays.get(pname, 0))))
            for core, exe in exes.items():
                ok, err = run([str(exe), "c" if core == "cube" else "v", str(CORES), *argv], timeout=600)
                if not ok:
                    tail = [ln for ln in err.splitlines() if ln.strip()][-3:]
                    failures.append(f"{core} at {full}: {' | '.join(tail)[:400]}")
    return failures


def find_compiler(name: str) -> str | None:
    """`name` on PATH, or its newest versioned spelling (Debian installs clang as clang++-19)."""
    if shutil.which(name):
        return name
    return next((f"{name}-{v}" for v in range(25, 13, -1) if shutil.which(f"{name}-{v}")), None)


CCE_MODEL = ROOT / "tilec/targets/ascend/cce/cce_intrinsics.cpp"
TOL = {"f16": (1e-2, 1e-2), "bf16": (2e-2, 3e-2), "f32": (1e-4, 1e-4)}
CORE_OF = {"AIV_ONLY": ["vec"], "AIC_ONLY": ["cube"], "MIX_AIC_1_2": ["cube", "vec"]}


def cce_object(core: str, src, gen: Path, work: Path) -> tuple[Path | None, str]:
    """tilec's CCE model compiled against the real headers as `core` code (once per run)."""
    obj = work / f"cce_{core}.o"
    with _CCE_LOCK:
        return _build_cce(obj, core, src, gen)


_CCE_LOCK = threading.Lock()


def _build_cce(obj: Path, core: str, src, gen: Path) -> tuple[Path | None, str]:
    if obj.exists():
        return obj, ""
    flags = ["-std=c++17", "-O1", "-fno-pie", *DEFINES, *VARIANTS[core], *include_flags(src, gen)]
    ok, err = run(["g++", *flags, "-c", str(CCE_MODEL), "-o", str(obj) + ".tmp"])
    if not ok:
        return None, f"CCE model build: {err[-600:]}"
    os.replace(str(obj) + ".tmp", obj)
    return obj, ""


def numerics(name: str, result, src, gen: Path, work: Path) -> list[str]:
    """The failures of running a kernel through CANN's API over tilec's CCE model (real numbers, the pipe-hazard
    checker on) at three sizes, each compared with the Tile IR interpreter. Every core of 3 blocks runs in its own
    process, sharing global memory: a mixed kernel's AIC and AIVs run at once and meet at cross-core flags."""
    import copy

    import numpy as np

    import tilec
    from tilec.interp.run import random_inputs, run_kernel

    if len(result.simt) != 1 or len(result.module.kernels) != 1:
        return ["not modelled: a function of several launches"]
    program = result.simt[0]
    # the interpreter runs the front end's kernel (the lowered module holds the back end's own statements)
    k = tilec.compile(result.module.files[0], defines=dict(result.module.consts),
                      kernel=result.module.kernels[0].name).module.kernels[0]
    d = work / (name.replace("/", "_") + "_num")
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.cpp").write_text(result.source)
    (d / "driver.cpp").write_text(driver_source(program))
    exes = {}
    for core in CORE_OF[program.kernel_type]:
        cce, err = cce_object(core, src, gen, work)
        if cce is None:
            return [err]
        flags = ["-std=c++17", "-O1", "-fno-pie", *DEFINES, *VARIANTS[core], *include_flags(src, gen)]
        obj, exe = d / f"driver_{core}.o", d / f"run_{core}"
        ok, err = run(["g++", *flags, "-c", "driver.cpp", "-o", str(obj)], cwd=d)
        if ok:
            ok, err = link_with_stubs([obj, cce], exe, work / f"stubs_strict_{core}.s", strict=True)
        if not ok:
            return [f"{core} build: {next((ln for ln in err.splitlines() if 'error' in ln), err[:300])}"]
        exes[core] = exe
    failures = []
    for sizes in SIZES:
        full = {v.name: sizes["small"] if v.name in SMALL_DIMS else sizes["default"] for v in k.size_vars}
        try:
            arrays = random_inputs(k, full, seed=2)
        except ValueError as e:
            failures.append(f"sizes {full}: {e}")
            continue
        got = copy.deepcopy(arrays)
        argv = []
        for ty, pname in program.host_params:
            if ty == "uint8_t*":
                path = d / f"{pname}.bin"
                if pname == "workspace":
                    nbytes = CORES * program.workspace_bytes
                    path.write_bytes(bytes(nbytes + 64))
                else:
                    nbytes = got[pname].nbytes
                    path.write_bytes(got[pname].tobytes() + bytes(64))
                argv.append(f"{nbytes}:{path}")
            else:
                argv.append(str(full.get(pname, arrays.get(pname, 0))))
        table = d / "xcore.bin"
        table.write_bytes(b"")
        env = {**os.environ, "TILEC_CCE_XCORE": str(table)}
        procs = {core: subprocess.Popen([str(exe), "c" if core == "cube" else "v", str(CORES), *argv], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for core, exe in exes.items()}
        bad = []
        for core, proc in procs.items():
            out, _ = proc.communicate(timeout=900)
            if proc.returncode != 0:
                bad.append(f"{core}: {' | '.join([ln for ln in out.splitlines() if ln.strip()][-2:])[:400]}")
        if bad:
            failures.append(f"at {full}: {'; '.join(bad)}")
            continue
        run_kernel(k, arrays)
        for p in k.params:
            if hasattr(p, "kind") or not p.is_output:
                continue
            ref = arrays[p.name]
            out = np.fromfile(d / f"{p.name}.bin", dtype=ref.dtype, count=ref.size).reshape(ref.shape)
            rtol, atol = TOL.get(p.dtype.name, (0, 0))
            a, b = out.astype(np.float64), ref.astype(np.float64)
            if not np.allclose(a, b, rtol=rtol, atol=atol):
                nbad = int((~np.isclose(a, b, rtol=rtol, atol=atol)).sum())
                failures.append(f"at {full}: {p.name} differs from the interpreter in {nbad} of {a.size} elements")
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--typecheck", action="store_true")
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--numerics", action="store_true", help="vector kernels through CANN's API over tilec's CCE "
                                                           "model, compared with the interpreter")
    ap.add_argument("--compilers", default="g++,clang++")
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    if not (args.typecheck or args.run or args.numerics):
        args.typecheck = args.run = True
    src = sources()
    compilers = [found for c in args.compilers.split(",") if (found := find_compiler(c))]
    key = hashlib.sha256(str(sorted(str(p) for p in src.values())).encode()).hexdigest()[:12]
    gen = Path(tempfile.gettempdir()) / f"tilec-ascend-real-api-{key}"
    generate_tiling_header(src, gen)
    work = Path(tempfile.mkdtemp(prefix="tilec-ascend-real-api-"))
    only = {s for s in args.only.split(",") if s} or None
    todo = list(kernels(only))
    built = [(n, r) for n, r in todo if not isinstance(r, str)]

    def check(item):
        name, result = item
        fails = []
        if args.typecheck:
            fails += typecheck(name, result, src, gen, work, compilers)
        if args.run:
            fails += run_kernel(name, result, src, gen, work)
        if args.numerics:
            fails += numerics(name, result, src, gen, work)
        print(f"  ... {name}: {'PASS' if not fails else 'FAIL'}", flush=True)  # progress: a full run takes long
        return name, fails

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = dict(pool.map(check, built))
    failed = 0
    named = [(f"type-check ({', '.join(compilers)} x 3 variants, header C11/C++17)", args.typecheck),
             ("real bookkeeping at 3 sizes", args.run),
             ("numbers through CANN's API over tilec's CCE model at 3 sizes", args.numerics)]
    checks = " + ".join(x for x, on in named if on)
    print(f"checks: {checks}")
    for name, r in todo:
        if isinstance(r, str):
            print(f"  {name:32} not built: {r}")
            continue
        fails = outcomes[name]
        failed += bool(fails)
        print(f"  {name:32} {'PASS' if not fails else 'FAIL'}")
        for f in fails:
            print(f"      {f}")
    print(f"{len(built) - failed} of {len(built)} built kernels pass; {len(todo) - len(built)} not built "
          f"for ascend910b")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
