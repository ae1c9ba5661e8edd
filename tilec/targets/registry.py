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
    backend: str  # cuda | hip | wgsl | ascend
    arch: str  # what the toolchain calls it: sm_90a, gfx942, ...
    description: str
    warp_size: int = 32
    max_threads: int = 1024
    shared_memory_bytes: int = 48 * 1024  # per block, dynamic shared memory included
    matrix_instructions: tuple[str, ...] = ()
    async_copy: tuple[str, ...] = ()
    # "warp_shuffle": lanes exchange registers (__shfl_xor_sync) and a block runs as warps of warp_size lanes;
    # without it reductions combine through shared memory. "vector_copy16": 16-byte vector loads/stores through
    # reinterpreted pointers; without it copies go element by element. "vector_fragment_copy": a block-row
    # fragment moves to and from memory a vector at a time, converting its type on the way (the device
    # header's load_cvt/store_cvt). "register_double_buffer": with no asynchronous copy, a Pipelined loop may
    # load its next tiles into registers during the compute and store them to a second shared buffer.
    # "realigned_row_loads": a fragment reads a global row that is not aligned to its vector a vector at a time,
    # from the two aligned vectors that cover it (the device header's load_realign).
    features: frozenset[str] = field(default_factory=frozenset)
    max_storage_buffers: int | None = None  # tensors per kernel (WebGPU: storage buffers per shader stage)
    max_grid: int | None = None  # blocks per grid dimension (WebGPU: workgroups per dispatch dimension)
    # Added to the error that refuses a kernel over the shared-memory limit: how to raise the limit, if one can.
    shared_memory_hint: str = ""
    # "module:Class" of the LoweringExtension (tilec/passes/lowering_extension.py) that adds this target's
    # own machinery to lower-to-simt (sm90: TMA pipelines, wgmma, warp specialization); None for none.
    lowering_extension: str | None = None
    # "named_barriers": bar.sync id, count (a barrier among some warps of the block, T.sync_threads(id, count)).
    # "lds_named_barriers": no hardware named barriers, but T.sync_threads(id, count) runs as a software barrier
    # on two words of shared memory per id (an arrival counter and a generation the waiting threads spin on).
    # element types the back end cannot hold in a buffer or a value (checked by storage planning, so
    # that no such type reaches a code printer)
    unsupported_dtypes: frozenset[str] = frozenset()
    # (feature, why this target lacks it): the reason an error gives when a kernel needs a feature the target has not
    missing_feature_reasons: tuple[tuple[str, str], ...] = ()

    def why_missing(self, feature: str) -> str:
        """Why this target lacks `feature`, in words for an error message."""
        return dict(self.missing_feature_reasons).get(feature, f"{self.name} has no {feature.replace('_', ' ')}")

    @property
    def implementations(self) -> str | None:
        """The module that registers this target's back end's instruction implementations (IMPLEMENTATIONS)."""
        return IMPLEMENTATIONS.get(self.backend)

    @property
    def tma_pipelines(self) -> bool:
        """TMA copies with mbarrier pipelines and wgmma (the sm90 path; sm100's tcgen05 path is not here)."""
        return "tma" in self.async_copy and "wgmma.m64nNk16" in self.matrix_instructions

    def with_limits(self, **limits: int) -> Target:
        """This target with some limits overridden (`tilec --max-workgroup-storage`): shared_memory_bytes,
        max_threads, max_storage_buffers, max_grid."""
        import dataclasses

        from ..options import LIMITS as allowed

        unknown = set(limits) - allowed
        if unknown:
            raise ValueError(f"unknown target limit(s) {', '.join(sorted(unknown))}; known: "
                             f"{', '.join(sorted(allowed))}")
        return dataclasses.replace(self, **limits)


SIMT_FEATURES = frozenset({"warp_shuffle", "vector_copy16"})
# timeline_profile: clock64, globaltimer
# device_fence: a device-scope acquire-release fence, which all blocks of a launch observe (T.fence_global)
CUDA_FEATURES = SIMT_FEATURES | {"vector_fragment_copy", "realigned_row_loads", "timeline_profile", "named_barriers",
                                 "device_fence"}
# AMD GPUs have no named barriers (s_barrier waits for the whole workgroup): T.sync_threads(id, count) runs as a
# software barrier in LDS there (tilec/targets/hip/include/tilec_hip_named_barrier.h)
HIP_FEATURES = SIMT_FEATURES | {"register_double_buffer", "lds_named_barriers", "device_fence"}
HOPPER_LOWERING = "tilec.targets.cuda.hopper_lowering:HopperLowering"
FP8 = frozenset({"f8e4m3", "f8e5m2"})  # CDNA2 has no 8-bit float instructions


def _cuda(name: str, cc: str, desc: str, smem_kb: int, mma: tuple[str, ...], copy: tuple[str, ...],
          lowering_extension: str | None = None) -> Target:
    return Target(name, "cuda", cc, desc, 32, 1024, smem_kb * 1024, mma, copy, CUDA_FEATURES,
                  lowering_extension=lowering_extension)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        _cuda("sm80", "sm_80", "NVIDIA Ampere A100", 163, ("mma.sync.m16n8k16",), ("cp.async",)),
        _cuda("sm86", "sm_86", "NVIDIA Ampere RTX 30", 99, ("mma.sync.m16n8k16",), ("cp.async",)),
        _cuda("sm89", "sm_89", "NVIDIA Ada RTX 40 / L40", 99, ("mma.sync.m16n8k16",), ("cp.async",)),
        _cuda("sm90", "sm_90a", "NVIDIA Hopper H100 / H200", 227,
              ("wgmma.m64nNk16", "mma.sync.m16n8k16"), ("tma", "cp.async"), HOPPER_LOWERING),
        _cuda("sm100", "sm_100a", "NVIDIA Blackwell B200", 227,
              ("tcgen05.mma", "mma.sync.m16n8k16"), ("tma", "cp.async")),
        Target("gfx90a", "hip", "gfx90a", "AMD Instinct MI200 (CDNA2)", 64, 1024, 64 * 1024,
               ("mfma.32x32x8", "mfma.16x16x16"), (), HIP_FEATURES, unsupported_dtypes=FP8),
        Target("gfx942", "hip", "gfx942", "AMD Instinct MI300 (CDNA3)", 64, 1024, 64 * 1024,
               ("mfma.32x32x8", "mfma.16x16x16", "mfma.16x16x32.fp8"), (), HIP_FEATURES),
        # Its "shared memory" is the vector core's UB: 192 KB, of which CANN's library keeps the top 8 KB
        # (TMP_UB_OFFSET) for itself, so 184 KB usable, as the back end's capacity pass counts (ascend/chip.py).
        Target("ascend910b", "ascend", "ascend910b", "Huawei Ascend 910B", 1, 1, 184 * 1024,
               ("cube.mmad",), ("datacopy",)),
        # WebGPU's default limits (what every adapter grants): 16 KiB of workgroup storage, 256 invocations,
        # 8 storage buffers per stage, 65535 workgroups per dimension; no subgroups or 16-byte reinterpreting
        # copies in base WGSL (docs/webgpu.md).
        Target("webgpu", "wgsl", "wgsl", "WebGPU (WGSL compute shaders)", 32, 256, 16 * 1024,
               max_storage_buffers=8, max_grid=65535,
               shared_memory_hint="or --max-workgroup-storage BYTES for a device that grants more than WebGPU's "
                                  "default",
               missing_feature_reasons=(("named_barriers", "WGSL has only workgroupBarrier(), which every "
                                         "invocation of the workgroup must reach in uniform control flow"),
                                        ("device_fence", "WGSL's barriers and atomics order memory within a "
                                         "workgroup only, so no workgroup can rely on another's writes during "
                                         "a dispatch"))),
    ]
}

DEFAULT_TARGET = "sm90"  # what a build targets when no --target is given

ALIASES = {
    "sm_80": "sm80", "sm_86": "sm86", "sm_89": "sm89", "sm_90": "sm90", "sm_90a": "sm90", "sm90a": "sm90",
    "sm_100": "sm100", "sm_100a": "sm100", "sm100a": "sm100", "wgsl": "webgpu", "ascend": "ascend910b",
    "910b": "ascend910b",
}


class UnknownTarget(ValueError):
    pass


def lookup(name: str) -> Target:
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in TARGETS:
        raise UnknownTarget(f"unknown target '{name}'; valid targets: {', '.join(TARGETS)}")
    return TARGETS[key]


# Back-end name -> the module whose BACKEND is its tilec.targets.backend.Backend object. A new back end is a
# folder tilec/targets/<name>/ with a backend.py, plus its line here.
BACKENDS = {
    "cuda": "tilec.targets.cuda.backend",
    "wgsl": "tilec.targets.wgsl.backend",
    "hip": "tilec.targets.hip.backend",
    "ascend": "tilec.targets.ascend.backend",
}


# Back-end name -> the module that registers its instruction implementations (gemm families) with
# tilec/ops/gemm_impl.py when imported; the generic registry imports it, by this name, when one of the back end's
# targets first asks. A back end without one runs the generic implementations (scalar FMA).
IMPLEMENTATIONS = {
    "cuda": "tilec.targets.cuda.instructions",
    "hip": "tilec.targets.hip.instructions",
}


def backend_available(backend: str) -> bool:
    """Whether tilec has this back end (not whether its toolchain is installed)."""
    return backend in BACKENDS


def get_backend(backend: str):
    """The Backend object of a back end (tilec.targets.backend.Backend); KeyError when tilec has none."""
    import importlib

    return importlib.import_module(BACKENDS[backend]).BACKEND


def write_link_stub(directory: str):
    """`tilec --cuda-stub DIR`: the CUDA driver's header and link stub, for linking launchers on a machine without
    a driver: the CUDA back end's (tilec/targets/cuda/link_stub.py), reached through BACKENDS like every back end,
    so that this module imports none."""
    return get_backend("cuda").write_link_stub(directory)


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
        for name, lib in (("nvrtc", "libnvrtc.so"), ("nvfatbin", "libnvfatbin.so")):
            found[name] = None
            for loc in locs:
                for sub in ("cu13/lib", "cuda_nvrtc/lib"):
                    d = os.path.join(loc, sub)
                    if os.path.isdir(d) and any(f.startswith(lib) for f in os.listdir(d)):
                        found[name] = d
    except (ImportError, ValueError):
        found["nvrtc"] = found["nvfatbin"] = None
    try:
        import importlib.util

        found["wgpu"] = "python package" if importlib.util.find_spec("wgpu") else None
    except (ImportError, ValueError):
        found["wgpu"] = None
    return found


def check_spellings(dialect: str, spelled, backend: str) -> None:
    """Raise when a dialect's code generator lacks the spelling of an intrinsic (tilec/ir/intrinsics.py) that
    one of its back end's targets may receive -- checked when the code generator is loaded."""
    from ..ir.intrinsics import all_defs, offered

    targets = [t for t in TARGETS.values() if t.backend == backend]
    needed = {d.op for d in all_defs() if any(offered(d, t) for t in targets)}
    missing = needed - set(spelled)
    if missing:
        raise ImportError(f"the {dialect} code generator has no spelling for intrinsic(s) "
                          f"{', '.join(sorted(missing))}, which its targets may receive")
