"""Loading an artifact: its manifest checked, its binary loaded per GPU on first use.

`load("x.cubin")` reads `x.cubin.json` beside it, refuses a manifest format it does not know, and
returns a Module whose kernels are attributes (`mod.gemm`, a tilec.runtime.launch.Kernel). The
binary is loaded into a GPU's primary context by the first launch there, after checking that the
driver is new enough for the toolchain that built it and that the GPU's architecture fits.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..errors import UserFacingError
from ..manifest import HELPERS_KEY, PAD_HELPER, choose_image, launch_entries
from .arrays import ArgumentError
from .dispatch import add_dispatchers
from .fastlaunch import native_class
from .launch import Kernel
from .nojit import no_jit_requested  # noqa: F401  (its home was here: tilec.runtime.module.no_jit_requested)
from .sequence import Launches
from .tensor_maps import (  # noqa: F401  (re-exported: tilec/targets/c_launcher/header.py and tests use them)
    ELEM_BYTES,
    FALLBACK_KEY,
    INTERNAL_KEY,
    TENSOR_MAPS_KEY,
    TMA_DTYPES,
    ManifestError,
    NoTma,
    TensorMapArgs,
    TensorMapSpec,
    fallback_entry,
    tensor_map_args,
    tensor_map_specs,
)

# The manifest formats this runtime reads (tilec.artifacts.MANIFEST_VERSION writes them; a test
# keeps the two in step). A newer tilec may write a format this runtime cannot launch correctly.
SUPPORTED_MANIFEST_VERSIONS = (1,)

__all__ = ["Module", "Kernel", "ArgumentError", "ArchitectureMismatch", "DriverTooOld", "JitRefused", "ManifestError",
           "LoadedImage", "no_jit_requested"]


class ArchitectureMismatch(UserFacingError, RuntimeError):
    pass


class DriverTooOld(UserFacingError, RuntimeError):
    """The installed CUDA driver is older than the toolkit that built the binary."""


class JitRefused(UserFacingError, RuntimeError):
    """Under the no-JIT guarantee (TILEC_NO_JIT=1, or no_jit=True), something would have compiled: the driver a
    PTX image, or tilec.load a kernel missing from the compile cache."""


def describe_gpu(drv, device: int) -> str:
    """GPU 0 (NVIDIA H200, sm_90), for messages."""
    major, minor = drv.compute_capability()
    try:
        name = drv.name()
    except Exception:  # noqa: BLE001 -- a name is only for the message
        name = "?"
    return f"GPU {device} ({name}, sm_{major}{minor})"


@dataclass(frozen=True)
class LoadedImage:
    """The image of an artifact loaded on one GPU: which (sm_90a, compute_80), how it runs there ("exact",
    "same_major" or "jit": tilec.manifest.ImageChoice), why, and the seconds cuModuleLoadData took (for PTX, the
    driver's JIT compile, unless its compute cache had it)."""

    image: str
    how: str
    why: str
    load_seconds: float


def check_manifest(meta, where: str) -> None:
    """ManifestError unless `meta` is a manifest of a format this runtime reads."""
    if not isinstance(meta, dict) or not isinstance(meta.get("kernels"), list):
        raise ManifestError(f"{where}: not a tilec manifest (no \"kernels\" list)")
    version = meta.get("manifest_version")
    if version not in SUPPORTED_MANIFEST_VERSIONS:
        known = ", ".join(map(str, SUPPORTED_MANIFEST_VERSIONS))
        if isinstance(version, int) and version > max(SUPPORTED_MANIFEST_VERSIONS):
            raise ManifestError(f"{where}: manifest format {version} is newer than this tilec.runtime reads "
                                f"({known}); upgrade tilec on this machine, or build the artifact with the tilec "
                                "installed here")
        raise ManifestError(f"{where}: manifest format {version!r} is not one this tilec.runtime reads ({known})")


class Module:
    def __init__(self, image: bytes, manifest: dict, name: str = "<memory>", no_jit: bool | None = None):
        self.image = image
        self.manifest = manifest
        self.name = name
        self.no_jit = no_jit_requested(no_jit)
        self._modules: dict[int, object] = {}  # device ordinal -> CUmodule
        self._pad_functions: dict[tuple, int | None] = {}  # (device ordinal, helper) -> its CUfunction
        self.loaded: dict[int, LoadedImage] = {}  # device ordinal -> the image loaded there
        # internal entries (a TMA kernel's fallback) are launched by their public kernel, never by name
        public = native_class(Kernel)  # Kernel, or under it the compiled launcher's call (fastlaunch.py)
        self.kernels = {k["name"]: public(self, k) for k in manifest["kernels"] if not k.get(INTERNAL_KEY)}
        self._internal = {k["name"]: Kernel(self, k) for k in manifest["kernels"] if k.get(INTERNAL_KEY)}
        for entry in launch_entries(manifest):  # a multi-launch kernel: its stages in order (sequence.py)
            self.kernels[entry["name"]] = native_class(Launches)(self, entry, self._internal)
        # a tuned kernel's name over its variants, some of which may be multi-launch kernels
        add_dispatchers(manifest, self.kernels, self._internal)
        if os.environ.get("TILEC_PROFILE") and any("profile" in k for k in manifest["kernels"]):
            from .profile import install  # a profiled build: every call records (tilec/runtime/profile.py)

            install(self, os.environ["TILEC_PROFILE"])

    def __getattr__(self, item: str) -> Kernel:
        kernels = self.__dict__.get("kernels", {})
        if item in kernels:
            return kernels[item]
        raise AttributeError(f"{self.name} has no kernel '{item}' (kernels: {', '.join(kernels)})")

    def __dir__(self):
        return [*super().__dir__(), *self.__dict__.get("kernels", {})]

    def cuda_module(self, device: int = 0):
        """The CUmodule on GPU `device`, loaded on first use after the driver and architecture checks."""
        mod = self._modules.get(device)
        if mod is None:
            from .cuda_driver import Driver

            drv = Driver.get(device)
            have = drv.driver_version()
            self._check_driver(have)
            choice = self._choose_image(drv, device)
            self._check_ptx_driver(choice, have)
            start = time.perf_counter()
            mod = drv.load_module(self.image)
            self.loaded[device] = LoadedImage(choice.image, choice.how, choice.why, time.perf_counter() - start)
            self._modules[device] = mod
        return mod

    def pad_function(self, device: int = 0, name: str = PAD_HELPER):
        """The module's pitched copy for padded TMA launches (`tilec_pad_rows`, which tilec builds into every
        module with a TMA kernel; `tilec_pad_batch`, several of them in one launch) on GPU `device`, or None in
        an artifact without it."""
        key = (device, name)
        if key not in self._pad_functions:
            fn = None
            if name in self.manifest.get(HELPERS_KEY, ()):  # (not in an artifact built before it was)
                from .cuda_driver import Driver

                fn = Driver.get(device).function(self.cuda_module(device), name)
            self._pad_functions[key] = getattr(fn, "value", fn)
        return self._pad_functions[key]

    def image_report(self, device: int = 0) -> LoadedImage:
        """Which image runs on GPU `device`, how and why, and how long loading it took (loading it now if no
        launch has)."""
        self.cuda_module(device)
        return self.loaded[device]

    def _check_driver(self, have: int) -> None:
        """The driver must support the CUDA major version of the toolkit that built the binary (CUDA's
        minor-version compatibility): the rule the C launcher header applies too."""
        built = int(self.manifest.get("driver_api_version") or 0)
        need = built // 1000 * 1000
        if have < need:
            raise DriverTooOld(f"{self.name} was built with CUDA {built // 1000}.{built % 1000 // 10} "
                               f"({self.manifest.get('toolchain', '?')}), which needs a CUDA {built // 1000}.x driver "
                               f"or newer; this driver supports CUDA {have // 1000}.{have % 1000 // 10}. Update the "
                               "driver, or build with an older CUDA toolkit")

    def _check_ptx_driver(self, choice, have: int) -> None:
        """A PTX image needs a driver of at least the CUDA version that wrote it (its PTX ISA), minor included."""
        built = int(self.manifest.get("driver_api_version") or 0)
        if choice.how == "jit" and have < built:
            v = f"{built // 1000}.{built % 1000 // 10}"
            raise DriverTooOld(f"{self.name}: the only image that runs on this GPU is the {choice.image} PTX, built "
                               f"with CUDA {v} ({self.manifest.get('toolchain', '?')}), which the driver can "
                               f"JIT-compile only if it supports CUDA {v} or newer; this driver supports CUDA "
                               f"{have // 1000}.{have % 1000 // 10}. Update the driver, or build a cubin for this GPU")

    def _choose_image(self, drv, device: int):
        """The image the driver will load on this GPU (tilec.manifest.choose_image): ArchitectureMismatch when none
        runs there, JitRefused when it is PTX under the no-JIT guarantee."""
        major, minor = drv.compute_capability()
        have = major * 10 + minor
        choice = choose_image(self.manifest, have)
        kind = self.manifest.get("kind")
        archs = list(self.manifest.get("archs", []))
        if self.manifest.get("ptx"):
            archs.append(self.manifest["ptx"]["arch"])
        if choice is None:
            raise ArchitectureMismatch(
                f"{self.name} was built for {', '.join(archs)} ({kind}); this GPU is "
                f"sm_{have}. Rebuild with --target for this GPU, or emit PTX.")
        if choice.how == "jit" and self.no_jit:
            kernels = ", ".join(self.kernels) or "?"
            raise JitRefused(
                f"{self.name}: kernel(s) {kernels}: the no-JIT guarantee is on (TILEC_NO_JIT or no_jit=True), and the "
                f"only image that runs on {describe_gpu(drv, device)} is the {choice.image} PTX, which the driver "
                f"would JIT-compile; missing: a cubin for sm_{have} (build with tilec --target sm{have}, or add it to "
                f"the fatbin's targets; built for {', '.join(archs)})")
        return choice
