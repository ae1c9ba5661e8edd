"""The WGSL back end (webgpu): the SIMT pipeline, WebGPU's checks (checks.py) and WGSL (codegen.py). The artifact
is the WGSL source itself: wgpu compiles it when tilec.runtime.wgsl loads it, so there is no toolchain at build
time."""

from __future__ import annotations

from ..backend import ArtifactInfo, Built, SimtBackend, Unit


class WgslBackend(SimtBackend):
    name = "wgsl"
    output_kinds = {"wgsl": ".wgsl"}
    default_kind = "wgsl"
    source_kind = "wgsl"
    run_kind = "wgsl"
    loader = "wgsl"
    driver_api = "WebGPU (createShaderModule, createComputePipeline, dispatchWorkgroups)"
    codegen = "tilec.targets.wgsl.codegen"

    def lower(self, module, rep, target, dumps: dict[str, str], want: set[str], verify: bool = False):
        from .checks import bind_views

        lowered = super().lower(module, rep, target, dumps, want, verify)
        if lowered is not None:
            for k in lowered.kernels:
                bind_views(k)
        return lowered

    def build(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        (unit,) = units
        return Built(unit.source.encode(), "none")

    def manifest_options(self, options):
        return {"limits": options.limits_dict}

    def runtime_errors(self):
        from ...runtime.module import ArgumentError
        from ...runtime.wgsl import LaunchError, ShaderError, WebGPUUnavailable

        return (WebGPUUnavailable, ShaderError, LaunchError, ArgumentError)

    def device_note(self):
        from ...runtime.wgsl import Device

        return f"(WebGPU adapter: {Device.get().name})"


BACKEND = WgslBackend()
