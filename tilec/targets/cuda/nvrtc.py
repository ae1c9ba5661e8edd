"""NVRTC in process: cubins and PTX with no nvcc (`--compiler nvrtc`, or by default when the pip wheel
nvidia-cuda-nvrtc is installed; the CUDA back end, backend.py, decides).

NVRTC ships no host headers: tilec's device header needs only cuda_fp16.h / cuda_bf16.h, found in the CUDA
toolkit's include directory or, without a toolkit, in the pip wheel nvidia-cuda-runtime's
(toolchain.cuda_include_dir).
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

from ...diagnostics import CompileError, Diagnostic
from .locate import cuda_include_dir, nvrtc_lib
from .toolchain import BuildOptions, BuildResult, parse_ptxas_usage_by_arch, ptxas_args, toolchain_diagnostics

_lib = None
_lock = threading.Lock()  # builds of several targets run in threads (ctypes releases the GIL in NVRTC)


find_lib = nvrtc_lib  # libnvrtc from the pip wheel nvidia-cuda-nvrtc, or None

# ptxas compiles the program's kernels in this many threads (its --split-compile): the same SASS for every kernel
# as one thread gives (checked with cuobjdump for every sample on sm80 and sm90), about as much CPU, and on two
# idle cores gemm sm90's tuned build (8 kernels) in 3.6 s instead of 4.6 s. A fixed number, not the machine's
# cores: the cubin records ptxas's options, so its bytes depend on it (and stay the same from machine to machine).
PTXAS_THREADS = 2


def load():
    global _lib
    with _lock:
        if _lib is None:
            path = find_lib()
            if path is None:
                raise CompileError([Diagnostic("error", "NVRTC not found: pip install 'nvidia-cuda-nvrtc==13.0.*'")])
            for b in sorted(path.parent.glob("libnvrtc-builtins.so*")):
                if ".alt." not in b.name:
                    ctypes.CDLL(str(b), mode=ctypes.RTLD_GLOBAL)
            _lib = ctypes.CDLL(str(path))
    return _lib


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
    arch_flag = f"-arch={'compute' if opts.kind == 'ptx' else 'sm'}_{cc}"
    flags = [arch_flag, "-std=c++17", "--device-as-default-execution-space"]
    inc = cuda_include_dir()
    if inc:
        flags.append(f"-I{inc}")
    if opts.lineinfo:
        flags.append("-lineinfo")
    if opts.debug:
        flags.append("-G")
    if opts.kind != "ptx":  # ptxas's resource report in the program log (registers, spills), then the user's
        user = ptxas_args(opts)
        split = [] if any("split-compile" in a for a in user) else [f"--split-compile={PTXAS_THREADS}"]
        flags += [f"--ptxas-options={arg}" for arg in ["-v", *split, *user]]
    flags += opts.extra
    command = "nvrtc " + " ".join(flags)
    if opts.dryrun:
        return BuildResult(b"", [command], {}, version())
    key = program_key(source, stem, flags, opts) if opts.cache else None
    found = _cached(key) if key is not None else None
    if found is not None:
        data, log, ver = found
    else:
        data, log = _compile(source, stem, flags, opts.kind)
        ver = version()
        if key is not None:
            _store(key, data, log, ver)
    by_arch = parse_ptxas_usage_by_arch(log)
    usage = next(iter(by_arch.values()), {})
    return BuildResult(data, [command], usage, ver, by_arch)


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


def program_key(source: str, stem: str, flags: list[str], opts: BuildOptions) -> str | None:
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
    key = {"format": PROGRAM_FORMAT, "kind": opts.kind, "flags": flags, "source_sha256": sha256_bytes(source.encode()),
           "nvrtc": [executable_fingerprint(str(p)) for p in libs], "headers": headers,
           "name": f"{stem}.cu" if named else None}
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
