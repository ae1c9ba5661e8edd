"""NVRTC in process (`--compiler nvrtc`): about as fast as the C++ front end allows, no nvcc.

NVRTC ships no host headers: tilec's device header needs only cuda_fp16.h / cuda_bf16.h, found in
the CUDA toolkit's include directory when one is installed.
"""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

from ...diagnostics import CompileError, Diagnostic
from .toolchain import BuildOptions, BuildResult, cuda_include_dir, ptxas_args, toolchain_diagnostics

_lib = None


def find_lib() -> Path | None:
    spec = importlib.util.find_spec("nvidia")
    for loc in list(spec.submodule_search_locations or []) if spec else []:
        for cand in sorted(Path(loc).glob("*/lib/libnvrtc.so*")):
            if ".alt." not in cand.name and "builtins" not in cand.name:
                return cand
    return None


def load():
    global _lib
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
        raise CompileError([Diagnostic("error", "--compiler nvrtc builds one architecture to .cubin or .ptx; "
                                                "use nvcc for a fatbin")])
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
    if opts.kind != "ptx":
        flags += [f"--ptxas-options={arg}" for arg in ptxas_args(opts)]
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
        return BuildResult(data, ["nvrtc " + " ".join(flags)], {}, version())
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
