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
    lib = load()
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
        flags += [f"--ptxas-options={arg}" for arg in ["-v", *ptxas_args(opts)]]
    flags += opts.extra
    if opts.dryrun:
        return BuildResult(b"", ["nvrtc " + " ".join(flags)], {}, version())
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{stem}.cu".encode(), 0, None, None)
    try:
        arr = (ctypes.c_char_p * len(flags))(*[f.encode() for f in flags])
        rc = lib.nvrtcCompileProgram(prog, len(flags), arr)
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        if rc != 0:
            text = log.value.decode(errors="replace").replace(f"{stem}.cu(", f"{stem}.cu(")
            raise CompileError(toolchain_diagnostics(text, Path(f"{stem}.cu"), source))
        get_size, get = (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX) if opts.kind == "ptx" else (
            lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
        get_size(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        get(prog, buf)
        data = buf.raw[: n.value]
        if opts.kind == "ptx":
            data = data.rstrip(b"\0")
        by_arch = parse_ptxas_usage_by_arch(log.value.decode(errors="replace"))
        usage = next(iter(by_arch.values()), {})
        return BuildResult(data, ["nvrtc " + " ".join(flags)], usage, version(), by_arch)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
