"""Loading an artifact: its manifest checked, its binary loaded per GPU on first use.

`load("x.cubin")` reads `x.cubin.json` beside it, refuses a manifest format it does not know, and
returns a Module whose kernels are attributes (`mod.gemm`, a tilec.runtime.launch.Kernel). The
binary is loaded into a GPU's primary context by the first launch there, after checking that the
driver is new enough for the toolchain that built it and that the GPU's architecture fits.
"""

from __future__ import annotations

import os

from ..errors import UserFacingError
from ..manifest import launch_entries
from .arrays import ArgumentError
from .dispatch import add_dispatchers
from .launch import Kernel
from .sequence import Launches
from .tensor_maps import (  # noqa: F401  (re-exported: tilec/targets/cuda/launcher.py and tests use them)
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

__all__ = ["Module", "Kernel", "ArgumentError", "ArchitectureMismatch", "DriverTooOld", "ManifestError"]


class ArchitectureMismatch(UserFacingError, RuntimeError):
    pass


class DriverTooOld(UserFacingError, RuntimeError):
    """The installed CUDA driver is older than the toolkit that built the binary."""


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
    def __init__(self, image: bytes, manifest: dict, name: str = "<memory>"):
        self.image = image
        self.manifest = manifest
        self.name = name
        self._modules: dict[int, object] = {}  # device ordinal -> CUmodule
        # internal entries (a TMA kernel's fallback) are launched by their public kernel, never by name
        self.kernels = {k["name"]: Kernel(self, k) for k in manifest["kernels"] if not k.get(INTERNAL_KEY)}
        self._internal = {k["name"]: Kernel(self, k) for k in manifest["kernels"] if k.get(INTERNAL_KEY)}
        for entry in launch_entries(manifest):  # a multi-launch kernel: its stages in order (sequence.py)
            self.kernels[entry["name"]] = Launches(self, entry, self._internal)
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
            self._check_driver(drv.driver_version())
            self._check_arch(drv.compute_capability())
            mod = self._modules[device] = drv.load_module(self.image)
        return mod

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

    def _check_arch(self, capability: tuple[int, int]) -> None:
        major, minor = capability
        have = major * 10 + minor
        kind = self.manifest.get("kind")
        ok = False
        for arch in self.manifest.get("archs", []):
            cc = int(arch.removeprefix("sm_").rstrip("a"))
            if kind == "ptx":
                ok |= have >= cc
            elif arch.endswith("a"):
                ok |= have == cc
            else:
                ok |= have // 10 == cc // 10 and have >= cc
        if not ok:
            raise ArchitectureMismatch(
                f"{self.name} was built for {', '.join(self.manifest.get('archs', []))} ({kind}); this GPU is "
                f"sm_{have}. Rebuild with --target for this GPU, or emit PTX.")
