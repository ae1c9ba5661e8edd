"""Where the CUDA back end's tools are, without running or loading any of them: NVIDIA's pip wheels (NVRTC,
nvFatbin, the runtime's headers), the CUDA toolkit's include folder, the host C compiler.

Standard library only and cheap: the compile cache's key (CudaBackend.toolchain_identity) and the choice of
toolchain ask these on every compile, cache hits included, before anything heavy is imported.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def wheel_files(pattern: str) -> list[Path]:
    """Files of NVIDIA's pip wheels (the `nvidia` namespace package: nvidia/cu13/lib/libnvrtc.so.13, ...) that
    match `pattern`, relative to the namespace's folders, sorted; [] without the wheels."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    locs = list(spec.submodule_search_locations or []) if spec else []
    return [c for loc in locs for c in sorted(Path(loc).glob(pattern))]


def nvrtc_lib() -> Path | None:
    """libnvrtc from the pip wheel nvidia-cuda-nvrtc, or None. TILEC_NVRTC chooses another: a CUDA major version
    ("12": the wheel nvidia-cuda-nvrtc-cu12's libnvrtc.so.12, for artifacts that load on CUDA 12 drivers) or the path
    of a libnvrtc."""
    chosen = os.environ.get("TILEC_NVRTC", "")
    if chosen and not chosen.isdigit():
        return Path(chosen) if Path(chosen).is_file() else None
    for cand in wheel_files("*/lib/libnvrtc.so*"):
        if ".alt." not in cand.name and "builtins" not in cand.name and (
                not chosen or cand.name.endswith(f".so.{chosen}")):
            return cand
    return None


def nvfatbin_lib() -> Path | None:
    """libnvfatbin from the pip wheel nvidia-nvfatbin, or None."""
    found = wheel_files("*/lib/libnvfatbin.so*")
    return found[0] if found else None


def ptxas_path() -> Path | None:
    """ptxas, for NVRTC's split build (nvrtc.py): the pip wheel nvidia-cuda-nvcc's (the same release as the
    NVRTC wheel), else the CUDA toolkit's (beside nvcc, on PATH, /usr/local/cuda, CUDA_HOME); None without."""
    found = [p for p in wheel_files("*/bin/ptxas") if os.access(p, os.X_OK)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        found.append(Path(nvcc).resolve().parent / "ptxas")
    on_path = shutil.which("ptxas")
    found += [Path(on_path)] if on_path else []
    found += [Path("/usr/local/cuda/bin/ptxas"), Path(os.environ.get("CUDA_HOME", "/nonexistent")) / "bin" / "ptxas"]
    return next((p for p in found if p.is_file() and os.access(p, os.X_OK)), None)


def include_candidates() -> list[Path]:
    """The CUDA toolkit's include folder (beside nvcc, /usr/local/cuda, CUDA_HOME), then the pip wheel
    nvidia-cuda-runtime's (cuda.h, cuda_fp16.h and cuda_bf16.h without a toolkit)."""
    nvcc = shutil.which("nvcc")
    candidates = []
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    candidates += [Path("/usr/local/cuda/include"), Path(os.environ.get("CUDA_HOME", "/nonexistent")) / "include"]
    return candidates + [p.parent for p in wheel_files("*/include/cuda_fp16.h")]


def cuda_include_dir() -> str | None:
    """A folder with cuda_fp16.h and cuda_bf16.h (what NVRTC needs for tilec's half-precision helpers)."""
    for c in include_candidates():
        if (c / "cuda_fp16.h").is_file() and (c / "cuda_bf16.h").is_file():
            return str(c)
    return None


def driver_include_dir() -> str | None:
    """A folder with cuda.h (the driver API the C launcher calls), from the toolkit or the pip wheel."""
    for c in include_candidates():
        if (c / "cuda.h").is_file():
            return str(c)
    return None
