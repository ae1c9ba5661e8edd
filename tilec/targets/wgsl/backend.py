"""The WGSL back end (webgpu): the SIMT pipeline, WebGPU's checks (checks.py) and WGSL (codegen.py). The artifact
is the WGSL source itself (wgpu compiles it when tilec.runtime.wgsl loads it, so there is no toolchain at build
time), or an ES module that embeds it with a launcher for JavaScript's WebGPU (esm.py) and its `.d.ts`, alone or
in an npm package directory (`--emit npm -o DIR`: the module, its types and package.json)."""

from __future__ import annotations

from ..backend import ArtifactInfo, Built, SimtBackend, Unit


class WgslBackend(SimtBackend):
    name = "wgsl"
    output_kinds = {"wgsl": ".wgsl", "esm": ".js", "npm": "/"}
    companions = {"esm": (".d.ts",), "npm": (".d.ts",)}
    directory_kinds = {"npm": (".js", "package.json")}
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
        if kind in ("esm", "npm"):
            from . import esm

            lines = {k.name: k.span.line for k in unit.lowered.kernels if k.span is not None}
            return Built(esm.generate(unit.source, unit.kernels, list(info.launches), lines, info.source_name,
                                      info.output_name).encode(), "none")
        return Built(unit.source.encode(), "none")

    def companion(self, kind: str, suffix: str, manifest: dict) -> bytes:
        from . import esm

        return esm.declarations(manifest).encode()

    def directory_index(self, kind: str, directory: str, modules: list[str]) -> bytes:
        from . import esm

        return esm.package_json(directory, modules).encode()

    def toolchain_identity(self, targets: list, kind: str, options) -> str | None:
        return "none"  # WGSL and the ES module are written by tilec itself

    def manifest_options(self, options):
        return {"limits": options.limits_dict}


BACKEND = WgslBackend()
