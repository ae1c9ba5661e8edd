"""NVRTC in process: cubins and PTX with no nvcc (`--compiler nvrtc`, or by default when the pip wheel
nvidia-cuda-nvrtc is installed; the CUDA back end, backend.py, decides).

NVRTC ships no host headers: tilec's device header needs only cuda_fp16.h / cuda_bf16.h, found in the CUDA
toolkit's include directory or, without a toolkit, in the pip wheel nvidia-cuda-runtime's
(toolchain.cuda_include_dir).

With TILEC_NVRTC_SPLIT=1 (opt-in), a cubin of several kernels is built split when a ptxas of NVRTC's own build
is found (the pip wheel nvidia-cuda-nvcc's, or the CUDA toolkit's): NVRTC compiles each kernel's program to
PTX, the programs in threads, and ptxas assembles the merged module once, as a whole program (split.py says
why not device linking). NVVM's time becomes the slowest kernel's instead of the sum. Opt-in because the SASS
is the whole program's for most builds but not all: NVVM may number a kernel's virtual registers differently
when the kernel is alone (samples/fp8_gemm.tile with its tuning database: two of its four kernels get the same
registers and instruction count in another order; bench/RESULTS.md). Without the variable or such a ptxas, or
when the modules cannot be merged, NVRTC compiles the whole program as one.
"""


from __future__ import annotations

import ctypes
import os
import re
import subprocess
import threading
from pathlib import Path

from ...diagnostics import CompileError, Diagnostic
from .locate import cuda_include_dir, nvrtc_lib, ptxas_path
from .toolchain import BuildOptions, BuildResult, parse_ptxas_usage_by_arch, ptxas_args, release, toolchain_diagnostics

_libs: dict = {}  # path -> the loaded library
_lock = threading.Lock()  # builds of several targets run in threads (ctypes releases the GIL in NVRTC)


find_lib = nvrtc_lib  # libnvrtc from the pip wheel nvidia-cuda-nvrtc, or None
find_ptxas = ptxas_path  # ptxas for the split build, or None
SPLIT_ENV = "TILEC_NVRTC_SPLIT"  # "1": the split build (backend.py puts it in the toolchain's identity, the cache key)

# ptxas compiles the program's kernels in this many threads (its --split-compile): the same SASS for every kernel
# as one thread gives (checked with cuobjdump for every sample on sm80 and sm90), about as much CPU, and on two
# idle cores gemm sm90's tuned build (8 kernels) in 3.6 s instead of 4.6 s. A fixed number, not the machine's
# cores: the cubin records ptxas's options, so its bytes depend on it (and stay the same from machine to machine).
PTXAS_THREADS = 2

# NVVM optimizes the program's kernels in as many threads as the machine has cores, as nvcc does (toolchain.py's
# SPLIT_COMPILE). The SASS is the same at any thread count above one (gemm sm90's tuned build at 0, 2, 4 and 8) and
# the cubin records the option as written; against NVRTC's one-thread build, the registers are those of the nvcc
# builds that the sweeps time at 72 of the samples' 86 sm90 kernels (68) and the SASS the same at 14 (2), and gemm
# sm90's tuned build takes 18.6 s instead of 25.7 on two cores (bench/toolchain_sass.py, bench/RESULTS.md s24). A
# user's own --split-compile (-Xcompiler) replaces it; NVRTC before 12.4 gets none.
NVVM_SPLIT_COMPILE = "--split-compile=0"


def load():
    """The NVRTC library find_lib names now (TILEC_NVRTC may name another CUDA version's: each is loaded once)."""
    with _lock:
        path = find_lib()
        if path is None:
            raise CompileError([Diagnostic("error", "NVRTC not found: pip install 'nvidia-cuda-nvrtc==13.0.*'")])
        lib = _libs.get(path)
        if lib is None:
            for b in sorted(path.parent.glob("libnvrtc-builtins.so*")):
                if ".alt." not in b.name:
                    ctypes.CDLL(str(b), mode=ctypes.RTLD_GLOBAL)
            lib = _libs[path] = ctypes.CDLL(str(path))
    return lib


def version() -> str:
    lib = load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"nvrtc {major.value}.{minor.value}"


def build_nvrtc(source: str, stem: str, opts: BuildOptions) -> BuildResult:
    if opts.kind == "fatbin" or len(opts.archs) != 1:
        raise CompileError([Diagnostic("error", "NVRTC builds one architecture to .cubin or .ptx at a time "
                                                "(a fatbin packs them with nvFatbin: this is a tilec bug)")])
    arch = opts.archs[0]
    cc = arch.removeprefix("sm_")
    flags = ["-std=c++17", "--device-as-default-execution-space"]
    inc = cuda_include_dir()
    if inc:
        flags.append(f"-I{inc}")
    if opts.lineinfo:
        flags.append("-lineinfo")
    if opts.debug:
        flags.append("-G")
    if not any("split-compile" in a for a in opts.extra) and release(version()) >= (12, 4):
        flags.append(NVVM_SPLIT_COMPILE)
    ptx_flags = [f"-arch=compute_{cc}", *flags]
    user = ptxas_args(opts)
    split_flags = [] if any("split-compile" in a for a in user) else [f"--split-compile={PTXAS_THREADS}"]
    assembler = ["-v", *split_flags, *user]  # ptxas's resource report in the log (registers, spills), the user's
    if opts.kind == "ptx":
        flags = ptx_flags + opts.extra
    else:
        flags = [f"-arch=sm_{cc}", *flags, *[f"--ptxas-options={arg}" for arg in assembler], *opts.extra]
    programs, ptxas = _split_plan(source, opts)
    if opts.dryrun:
        # NVRTC is a library that tilec calls: there is no command line to run, so say what the call is
        if programs:
            command = [f"{IN_PROCESS} nvrtcCompileProgram({stem}.cu's {len(programs)} kernels, one program each, in "
                       f"threads; options: {' '.join(ptx_flags)})",
                       f"{ptxas} -arch=sm_{cc} {' '.join(assembler)} {stem}.ptx -o {stem}.cubin  # the merged PTX"]
            return BuildResult(b"", command, {}, version())
        return BuildResult(b"", [_nvrtc_call(stem, flags)], {}, version())
    if opts.keep_dir:
        _keep(opts.keep_dir, f"{stem}.cu", source.encode())
    built = _split_build(programs, ptxas, stem, ptx_flags, [f"-arch=sm_{cc}", *assembler], opts) if programs \
        else None
    if built is not None:
        data, log, ver, commands = built
    else:
        commands = [_nvrtc_call(stem, flags)]
        data, log, ver = _nvrtc_cached(source, stem, flags, opts, opts.kind)
        if opts.keep_dir and opts.kind != "ptx":
            # what nvcc --keep leaves besides the cubin: the PTX (a second NVRTC run: NVRTC hands out PTX only
            # when asked for PTX) and the assembler's report
            ptx, _ = _compile(source, stem, ptx_flags + opts.extra, "ptx")
            _keep(opts.keep_dir, f"{stem}.ptx", ptx)
    if opts.keep_dir:
        _keep(opts.keep_dir, f"{stem}.{opts.kind}", data)
        _keep(opts.keep_dir, f"{stem}.log", log.encode())
    by_arch = parse_ptxas_usage_by_arch(log)
    usage = next(iter(by_arch.values()), {})
    return BuildResult(data, commands, usage, ver, by_arch)


IN_PROCESS = "# NVRTC, in process (no command to run):"


def _nvrtc_call(stem: str, flags: list[str]) -> str:
    """The compile as --dryrun and the manifest's "commands" show it: NVRTC's call and its options."""
    return f"{IN_PROCESS} nvrtcCompileProgram({stem}.cu, {' '.join(flags)})"


def _keep(keep_dir: str, name: str, data: bytes) -> None:
    """--keep: one of NVRTC's intermediates, in the folder the command line named (checked there: a folder)."""
    path = Path(keep_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _nvrtc_cached(source: str, stem: str, flags: list[str], opts: BuildOptions, kind: str) -> tuple[bytes, str, str]:
    """NVRTC on one program through the program cache: (binary, log, NVRTC's version)."""
    key = program_key(source, stem, flags, opts, kind) if opts.cache else None
    found = _cached(key) if key is not None else None
    if found is not None:
        return found
    data, log = _compile(source, stem, flags, kind)
    ver = version()
    if key is not None:
        _store(key, data, log, ver)
    return data, log, ver


# ---------------------------------------------------------------------------- the split build


def _split_plan(source: str, opts: BuildOptions) -> tuple[list[str] | None, Path | None]:
    """The kernels' own programs and the ptxas to assemble them, or (None, None) for one NVRTC program: not
    asked for (TILEC_NVRTC_SPLIT), PTX
    output (no ptxas), one kernel, line info or -G (each module's file table and debug strings would have to be
    renumbered to merge), flags of the user's for NVRTC (they may mean something to NVVM or ptxas that the split
    build would not pass on), or no ptxas."""
    if os.environ.get(SPLIT_ENV) != "1" or opts.kind != "cubin" or opts.lineinfo or opts.debug or opts.extra:
        return None, None
    from .split import kernel_programs

    programs = kernel_programs(source)
    ptxas = find_ptxas() if programs else None
    return (programs, ptxas) if ptxas is not None else (None, None)


_ptxas_ids: dict[str, tuple[str, str] | None] = {}


def _ptxas_identity(ptxas: Path) -> tuple[str, str] | None:
    """(build id, version) of a ptxas from `ptxas --version` ("compiler.36424714", "13.0.88"), once per file."""
    from ...cache import executable_fingerprint

    key = executable_fingerprint(str(ptxas))
    if key not in _ptxas_ids:
        try:
            out = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        build, ver = re.search(r"compiler\.(\d+)", out), re.search(r"V(\d+\.\d+\.\d+)", out)
        _ptxas_ids[key] = (build.group(1), ver.group(1)) if build and ver else None
    return _ptxas_ids[key]


def _split_build(programs: list[str], ptxas: Path, stem: str, ptx_flags: list[str], ptxas_flags: list[str],
                 opts: BuildOptions) -> tuple[bytes, str, str, list[str]] | None:
    """NVRTC on each kernel's program to PTX (concurrently: NVRTC takes no global lock, and ctypes releases the
    GIL), then ptxas on the merged module: (cubin, log, toolchain, commands), or None when this ptxas is not of
    NVRTC's build (its SASS would differ) or the modules do not merge. Each program's PTX and the cubin are
    kept in the program cache, so that a changed kernel recompiles only its own program through NVVM."""
    from concurrent.futures import ThreadPoolExecutor

    from .split import MergeRefused, merge_ptx

    ident = _ptxas_identity(ptxas)
    if ident is None or not ident[1].startswith(version().removeprefix("nvrtc ") + "."):
        return None  # (the build ids are compared below, once NVRTC's PTX names its own)
    with ThreadPoolExecutor(min(len(programs), os.cpu_count() or 1)) as pool:
        # the longest programs first (a no-TMA twin takes NVVM about twice its kernel's time), so that fewer
        # threads than programs end together; the results in the kernels' order whatever order the threads
        # finish in, so that the merged module is reproducible
        started = {i: pool.submit(_nvrtc_cached, programs[i], stem, ptx_flags, opts, "ptx")
                   for i in sorted(range(len(programs)), key=lambda i: -len(programs[i]))}
        results = [started[i].result() for i in range(len(programs))]
    modules = [data.decode() for data, _, _ in results]
    nvrtc_build = re.search(r"Compiler Build ID: CL-(\d+)", modules[0])
    if nvrtc_build is None or nvrtc_build.group(1) != ident[0]:
        return None
    try:
        merged = merge_ptx(modules)
    except MergeRefused:
        return None
    flags = ptxas_flags
    toolchain = f"{results[0][2]} + ptxas {ident[1]}"
    commands = [f"nvrtc {' '.join(ptx_flags)} (each of the {len(programs)} kernels' programs, in threads)",
                f"{ptxas} {' '.join(flags)} {stem}.ptx -o {stem}.cubin"]
    key = _assembly_key(merged, ptxas, flags) if opts.cache else None
    found = _cached(key) if key is not None else None
    if found is not None:
        data, log, _ = found
    else:
        data, log = _assemble(merged, ptxas, flags, stem, opts.keep_dir)
        if key is not None:
            _store(key, data, log, toolchain)
    return data, "".join(log for _, log, _ in results) + log, toolchain, commands


def _assemble(ptx: str, ptxas: Path, flags: list[str], stem: str, keep_dir: str | None) -> tuple[bytes, str]:
    """ptxas on one PTX module, as a whole program: the cubin and ptxas's report."""
    import shutil
    import tempfile

    work = Path(keep_dir) if keep_dir else Path(tempfile.mkdtemp(prefix="tilec-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        src, out = work / f"{stem}.ptx", work / f"{stem}.cubin"
        src.write_text(ptx)
        proc = subprocess.run([str(ptxas), *flags, str(src), "-o", str(out)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(toolchain_diagnostics(proc.stderr + proc.stdout, src, ptx))
        return out.read_bytes(), proc.stdout + proc.stderr
    finally:
        if not keep_dir:
            shutil.rmtree(work, ignore_errors=True)


def _compile(source: str, stem: str, flags: list[str], kind: str) -> tuple[bytes, str]:
    """NVRTC on one program: its binary (PTX or a cubin) and its log; CompileError with NVRTC's errors."""
    lib = load()
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{stem}.cu".encode(), 0, None, None)
    try:
        arr = (ctypes.c_char_p * len(flags))(*[f.encode() for f in flags])
        rc = lib.nvrtcCompileProgram(prog, len(flags), arr)
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        text = log.value.decode(errors="replace")
        if rc != 0:
            raise CompileError(toolchain_diagnostics(text, Path(f"{stem}.cu"), source))
        get_size, get = (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX) if kind == "ptx" else (
            lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
        get_size(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        get(prog, buf)
        data = buf.raw[: n.value]
        return (data.rstrip(b"\0") if kind == "ptx" else data), text
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


# ---------------------------------------------------------------------------- the program cache
#
# What NVRTC made of one program is kept in the compile cache's section "programs" (tilec/cache.py), keyed by
# what determines it: the program's text, the flags, NVRTC's files and the CUDA headers the program includes,
# and the program's name where it is recorded in the binary (line info, -G, or flags of the user's). tilec's
# own sources and the .tile file are not in the key: a compile whose generated program is unchanged (another
# output kind or name of the same code, a rebuilt artifact, a tilec edit that leaves the code alone) is served
# from there without loading NVRTC. The entry's checksums catch a damaged one, which is then compiled again.

PROGRAM_FORMAT = "tilec-nvrtc-program 1"  # bump when what _compile returns for a program changes (it is not in the key)
_HEADERS = ("cuda_fp16.h", "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h", "cuda_fp8.hpp")


def program_key(source: str, stem: str, flags: list[str], opts: BuildOptions, kind: str) -> str | None:
    """The program cache's key for NVRTC on `source` with `flags` (None without NVRTC)."""
    import hashlib
    import json

    from ...cache import executable_fingerprint, sha256_bytes

    lib = find_lib()
    if lib is None:
        return None
    libs = [lib, *sorted(b for b in lib.parent.glob("libnvrtc-builtins.so*") if ".alt." not in b.name)]
    inc = cuda_include_dir()
    headers = [executable_fingerprint(str(Path(inc) / h)) for h in _HEADERS if (Path(inc) / h).is_file()] \
        if inc else []
    named = opts.lineinfo or opts.debug or bool(opts.extra)  # the program's name is in the binary then
    key = {"format": PROGRAM_FORMAT, "kind": kind, "flags": flags, "source_sha256": sha256_bytes(source.encode()),
           "nvrtc": [executable_fingerprint(str(p)) for p in libs], "headers": headers,
           "name": f"{stem}.cu" if named else None}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _assembly_key(ptx: str, ptxas: Path, flags: list[str]) -> str:
    """The program cache's key for ptxas on a merged module: the module's text, the flags, ptxas's file."""
    import hashlib
    import json

    from ...cache import executable_fingerprint, sha256_bytes

    key = {"format": PROGRAM_FORMAT, "kind": "ptxas", "flags": flags, "ptx_sha256": sha256_bytes(ptx.encode()),
           "ptxas": executable_fingerprint(str(ptxas))}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _cached(key: str) -> tuple[bytes, str, str] | None:
    from ...cache import Cache

    entry = Cache(section="programs").lookup(key, require=("binary", "log"),
                                             check_info=lambda info: isinstance(info.get("toolchain"), str))
    if entry is None:
        return None
    return entry.outputs["binary"], entry.outputs["log"].decode(errors="replace"), entry.meta["info"]["toolchain"]


def _store(key: str, data: bytes, log: str, toolchain: str) -> None:
    from ...cache import Cache

    Cache(section="programs").store(key, [], [], {"binary": data, "log": log.encode()}, {"toolchain": toolchain})
