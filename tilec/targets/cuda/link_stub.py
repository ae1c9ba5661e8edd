"""`tilec --cuda-stub DIR`: a folder to compile and link a C/C++ program that calls the CUDA driver on a machine
with neither a GPU driver nor a CUDA toolkit (a CI builder): cuda.h (copied from the toolkit or the pip wheel
nvidia-cuda-runtime) and a stub libcuda.so.

The stub defines every CUresult function cuda.h declares (under the versioned names its macros select) as
returning CUDA_ERROR_STUB_LIBRARY, and carries the soname libcuda.so.1, as NVIDIA's own stub does: a program
linked against it loads the real driver when it runs. Neither the pip wheels nor every toolkit ship one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ...errors import UserFacingError
from .locate import driver_include_dir

# Defined in the stub, so that a second run can tell its own stub from a real driver it must not replace.
MARKER = "tilec_cuda_link_stub"
CUDA_ERROR_STUB_LIBRARY = 34


class StubError(UserFacingError):
    """Why the stub could not be made (no cuda.h, no C compiler, a real libcuda.so in the way)."""


def _c_compiler() -> str:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    raise StubError("no C compiler found (set CC, or install gcc): the stub library is compiled from C")


def _driver_functions(cc: str, include_dir: str) -> list[str]:
    """The names cuda.h binds its CUresult functions to (cuMemAlloc_v2 for cuMemAlloc, ...)."""
    proc = subprocess.run([cc, "-E", "-P", f"-I{include_dir}", "-x", "c", "-"], input="#include <cuda.h>\n",
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise StubError(f"could not preprocess cuda.h with {cc}: {proc.stderr.strip()}")
    return sorted(set(re.findall(r"^\s*(?:extern\s+)?CUresult\s+(?:CUDAAPI\s+)?(cu\w+)\s*\(", proc.stdout, re.M)))


def _is_ours(library: Path) -> bool:
    return MARKER.encode() in library.read_bytes()


def write_cuda_stub(directory: str | Path) -> Path:
    """Write DIR/cuda.h and DIR/libcuda.so (creating DIR); return DIR. Never replaces a libcuda.so or a cuda.h
    that is not this function's own output (a real driver, a toolkit's header)."""
    out = Path(directory)
    include_dir = driver_include_dir()
    if include_dir is None:
        raise StubError("cuda.h was not found (neither a CUDA toolkit nor the pip wheel nvidia-cuda-runtime)")
    library, header = out / "libcuda.so", out / "cuda.h"
    source_header = Path(include_dir) / "cuda.h"
    if library.exists() and not _is_ours(library):
        raise StubError(f"{library} exists and is not a tilec stub: refusing to replace it")
    if header.exists() and header.resolve() != source_header.resolve() and \
            header.read_bytes() != source_header.read_bytes():
        raise StubError(f"{header} exists and differs from {source_header}: refusing to replace it")
    cc = _c_compiler()
    names = _driver_functions(cc, include_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tilec-stub-") as tmp:
        src = Path(tmp) / "stub.c"
        src.write_text(f"int {MARKER} = 1;\n" +
                       "".join(f"int {n}(void) {{ return {CUDA_ERROR_STUB_LIBRARY}; }}\n" for n in names))
        built = Path(tmp) / "libcuda.so"
        proc = subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(built), str(src)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise StubError(f"{cc} could not build the stub library: {proc.stderr.strip()}")
        os.replace(shutil.copy(built, out / ".libcuda.so.tmp"), library)
    if header.resolve() != source_header.resolve():
        shutil.copyfile(source_header, header)
    return out
