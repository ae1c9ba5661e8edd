"""The registry of compilation targets: names, aliases and what each chip offers.

The passes read a Target to choose instructions (warp size, matrix units, async copies) and to
check resource limits; the back end named by `backend` prints and builds the code.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    name: str  # canonical name: sm90, gfx942, webgpu, ...
    backend: str  # cuda | hip | wgsl | ascendc
    arch: str  # what the toolchain calls it: sm_90a, gfx942, ...
    description: str
    warp_size: int = 32
    max_threads: int = 1024
    shared_memory_bytes: int = 48 * 1024  # per block, dynamic shared memory included
    registers_per_thread: int = 255
    matrix_instructions: tuple[str, ...] = ()
    async_copy: tuple[str, ...] = ()
    # "warp_shuffle": lanes exchange registers (__shfl_xor_sync); without it reductions combine through shared
    # memory. "vector_copy16": 16-byte vector loads/stores through reinterpreted pointers; without it copies go
    # element by element.
    features: frozenset[str] = field(default_factory=frozenset)
    max_storage_buffers: int | None = None  # tensors per kernel (WebGPU: storage buffers per shader stage)
    max_grid: int | None = None  # blocks per grid dimension (WebGPU: workgroups per dispatch dimension)
    # element types the back end cannot hold in a buffer or a value (checked by storage planning, so
    # that no such type reaches a code printer)
    unsupported_dtypes: frozenset[str] = frozenset()

    @property
    def tma_pipelines(self) -> bool:
        """TMA copies with mbarrier pipelines and wgmma (the sm90 path; sm100's tcgen05 path is not here)."""
        return "tma" in self.async_copy and "wgmma.m64nNk16" in self.matrix_instructions

    def with_limits(self, **limits: int) -> Target:
        """This target with some limits overridden (`tilec --max-workgroup-storage`): shared_memory_bytes,
        max_threads, max_storage_buffers, max_grid."""
        import dataclasses

        allowed = {"shared_memory_bytes", "max_threads", "max_storage_buffers", "max_grid"}
        unknown = set(limits) - allowed
        if unknown:
            raise ValueError(f"unknown target limit(s) {', '.join(sorted(unknown))}; known: "
                             f"{', '.join(sorted(allowed))}")
        return dataclasses.replace(self, **limits)


SIMT_FEATURES = frozenset({"warp_shuffle", "vector_copy16"})
FP8 = frozenset({"f8e4m3", "f8e5m2"})  # the HIP back end has no fp8 types yet


def _cuda(name: str, cc: str, desc: str, smem_kb: int, mma: tuple[str, ...], copy: tuple[str, ...]) -> Target:
    return Target(name, "cuda", cc, desc, 32, 1024, smem_kb * 1024, 255, mma, copy, SIMT_FEATURES)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        _cuda("sm80", "sm_80", "NVIDIA Ampere A100", 163, ("mma.sync.m16n8k16",), ("cp.async",)),
        _cuda("sm86", "sm_86", "NVIDIA Ampere RTX 30", 99, ("mma.sync.m16n8k16",), ("cp.async",)),
        _cuda("sm89", "sm_89", "NVIDIA Ada RTX 40 / L40", 99, ("mma.sync.m16n8k16",), ("cp.async",)),
        _cuda("sm90", "sm_90a", "NVIDIA Hopper H100 / H200", 227,
              ("wgmma.m64nNk16", "mma.sync.m16n8k16"), ("tma", "cp.async")),
        _cuda("sm100", "sm_100a", "NVIDIA Blackwell B200", 227,
              ("tcgen05.mma", "mma.sync.m16n8k16"), ("tma", "cp.async")),
        Target("gfx90a", "hip", "gfx90a", "AMD Instinct MI200 (CDNA2)", 64, 1024, 64 * 1024, 512,
               ("mfma.32x32x8", "mfma.16x16x16"), (), SIMT_FEATURES, unsupported_dtypes=FP8),
        Target("gfx942", "hip", "gfx942", "AMD Instinct MI300 (CDNA3)", 64, 1024, 64 * 1024, 512,
               ("mfma.32x32x8", "mfma.16x16x16"), (), SIMT_FEATURES, unsupported_dtypes=FP8),
        Target("ascend910b", "ascendc", "ascend910b", "Huawei Ascend 910B", 1, 1, 192 * 1024, 0,
               ("cube.mmad",), ("datacopy",)),
        # WebGPU's default limits (what every adapter grants): 16 KiB of workgroup storage, 256 invocations,
        # 8 storage buffers per stage, 65535 workgroups per dimension; no subgroups or 16-byte reinterpreting
        # copies in base WGSL (docs/webgpu.md).
        Target("webgpu", "wgsl", "wgsl", "WebGPU (WGSL compute shaders)", 32, 256, 16 * 1024, 0,
               max_storage_buffers=8, max_grid=65535),
    ]
}

ALIASES = {
    "sm_80": "sm80", "sm_86": "sm86", "sm_89": "sm89", "sm_90": "sm90", "sm_90a": "sm90", "sm90a": "sm90",
    "sm_100": "sm100", "sm_100a": "sm100", "sm100a": "sm100", "wgsl": "webgpu", "ascend": "ascend910b",
}


class UnknownTarget(ValueError):
    pass


def lookup(name: str) -> Target:
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in TARGETS:
        raise UnknownTarget(f"unknown target '{name}'; valid targets: {', '.join(TARGETS)}")
    return TARGETS[key]


def backend_available(backend: str) -> bool:
    """Whether tilec has a code generator for this back end (not whether its toolchain is installed)."""
    import importlib.util

    try:
        return importlib.util.find_spec(f"tilec.targets.{backend}.codegen") is not None
    except ModuleNotFoundError:  # the back end's package itself does not exist yet
        return False


def find_toolchains() -> dict[str, str | None]:
    """Each external toolchain tilec can drive, and where it was found (None if not)."""
    found: dict[str, str | None] = {
        "nvcc": shutil.which("nvcc"),
        "hipcc": shutil.which("hipcc"),
        "clang-19": shutil.which("clang-19"),
    }
    try:
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
        locs = list(spec.submodule_search_locations or []) if spec else []
        nvrtc = None
        for loc in locs:
            for sub in ("cu13/lib", "cuda_nvrtc/lib"):
                d = os.path.join(loc, sub)
                if os.path.isdir(d) and any(f.startswith("libnvrtc.so") for f in os.listdir(d)):
                    nvrtc = d
        found["nvrtc"] = nvrtc
    except (ImportError, ValueError):
        found["nvrtc"] = None
    try:
        import importlib.util

        found["wgpu"] = "python package" if importlib.util.find_spec("wgpu") else None
    except (ImportError, ValueError):
        found["wgpu"] = None
    return found
