"""The HIP back end (gfx90a, gfx942): the SIMT pipeline, HIP C++ (codegen.py), code objects and assembly through
hipcc or clang-19 (toolchain.py). tilec.runtime has no HIP loader yet, so `tilec run` cannot run its artifacts."""

from __future__ import annotations

from ..backend import ArtifactInfo, Built, SimtBackend, Unit


class HipBackend(SimtBackend):
    name = "hip"
    output_kinds = {"hip": ".hip", "hsaco": ".hsaco", "asm": ".s"}
    default_kind = "hsaco"
    source_kind = "hip"
    driver_api = ""
    codegen = "tilec.targets.hip.codegen"

    def toolchain_identity(self, targets, kind, options):
        from ...cache import executable_fingerprint
        from .toolchain import find_compiler

        if kind == "hip":
            return "none"
        found = find_compiler(targets[0].arch)
        return None if found is None else f"{found[0]} {executable_fingerprint(found[1])}"

    def build(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        (unit,) = units
        if kind == "hip":
            return Built(unit.source.encode(), "none")
        from .toolchain import build, resource_usage

        built = build(unit.source, info.stem, unit.target.arch, kind, options.opt_level, options.toolchain_args)
        report = ""
        if kind == "hsaco" and options.resource_usage:
            report = f"{'kernel':<24} {'VGPRs':>6} {'AGPRs':>6} {'SGPRs':>6} {'LDS B':>7} {'scratch B':>9}\n"
            for name, u in resource_usage(built.data).items():
                report += (f"{name:<24} {u.get('vgpr', 0):>6} {u.get('agpr', 0):>6} {u.get('sgpr', 0):>6} "
                           f"{u.get('lds', 0):>7} {u.get('scratch', 0):>9}\n")
        return Built(built.data, built.toolchain, [" ".join(c) for c in built.commands], {}, report)


BACKEND = HipBackend()
