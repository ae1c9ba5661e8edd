"""nvFatbin in process: several architectures' cubins in one fatbin, with no CUDA toolkit (pip install
nvidia-nvfatbin). The CUDA back end uses it for `-o x.fatbin` when nvcc is not installed: NVRTC (nvrtc.py)
builds each target's cubin from that target's own source, and nvFatbin packs them, one image per
architecture, as nvcc's `-fatbin -gencode arch=compute_XX,code=sm_XX ...` does.
"""

from __future__ import annotations

import ctypes
import threading

from ...diagnostics import CompileError, Diagnostic
from .locate import nvfatbin_lib

_lib = None
_lock = threading.Lock()


find_lib = nvfatbin_lib  # libnvfatbin from the pip wheel nvidia-nvfatbin, or None


def load():
    global _lib
    with _lock:
        if _lib is None:
            path = find_lib()
            if path is None:
                raise CompileError([Diagnostic("error", "nvFatbin not found: pip install 'nvidia-nvfatbin==13.0.*' "
                                                        "(or install the CUDA toolkit's nvcc)")])
            lib = ctypes.CDLL(str(path))
            lib.nvFatbinGetErrorString.restype = ctypes.c_char_p
            _lib = lib
    return _lib


def version() -> str:
    lib = load()
    major, minor = ctypes.c_uint(), ctypes.c_uint()
    lib.nvFatbinVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"nvfatbin {major.value}.{minor.value}"


def _check(lib, rc: int, what: str) -> None:
    if rc != 0:
        text = (lib.nvFatbinGetErrorString(rc) or b"?").decode(errors="replace")
        raise CompileError([Diagnostic("error", f"nvFatbin: {what} failed: {text} (this is a tilec bug)")])


def fatbin(images: list[tuple[str, bytes]], stem: str, ptx: list[tuple[str, bytes]] = ()) -> bytes:
    """One fatbin holding each (arch, cubin): arch as tilec's targets name it (sm_80, sm_90a); and each (arch, PTX
    text) of `ptx` as that virtual architecture's PTX (sm_80 -> compute_80)."""
    lib = load()
    handle = ctypes.c_void_p()
    _check(lib, lib.nvFatbinCreate(ctypes.byref(handle), None, ctypes.c_size_t(0)), "nvFatbinCreate")
    try:
        for arch, cubin in images:
            number = arch.removeprefix("sm_").encode()  # nvFatbin takes the XX of sm_XX (90a)
            _check(lib, lib.nvFatbinAddCubin(handle, cubin, ctypes.c_size_t(len(cubin)), number,
                                             f"{stem}.{arch}".encode()), f"adding the {arch} cubin")
        for arch, text in ptx:
            number = arch.removeprefix("sm_").encode()
            code = text.rstrip(b"\0") + b"\0"  # nvFatbin reads the PTX as a C string
            _check(lib, lib.nvFatbinAddPTX(handle, code, ctypes.c_size_t(len(code)), number,
                                           f"{stem}.compute_{number.decode()}".encode(), None),
                   f"adding the compute_{number.decode()} PTX")
        size = ctypes.c_size_t()
        _check(lib, lib.nvFatbinSize(handle, ctypes.byref(size)), "nvFatbinSize")
        buf = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvFatbinGet(handle, buf), "nvFatbinGet")
        return buf.raw[: size.value]
    finally:
        lib.nvFatbinDestroy(ctypes.byref(handle))
