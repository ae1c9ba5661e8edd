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

    def operand_tables(self, family):
        from ..backend import OperandTable
        from . import mfma_layouts as ML

        if family != "mfma":
            return []
        return [OperandTable(f"v_mfma_f32_16x16x16 {op} (one wave)", 16, 16, ML.WAVE, ML.ELEMS, fn,
                             1 if op == "C" else 2, 16)
                for op, fn in (("A", ML.mfma_16x16x16_a), ("B", ML.mfma_16x16x16_b), ("C", ML.mfma_16x16x16_c))]

    def build(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        (unit,) = units
        if kind == "hip":
            return Built(unit.source.encode(), "none")
        from .toolchain import build, resource_usage

        built = build(unit.source, info.stem, unit.target.arch, kind)
        extra, warnings = _resources(unit, built.data) if kind == "hsaco" else ({}, [])
        report = ""
        if kind == "hsaco" and options.resource_usage:
            report = f"{'kernel':<24} {'VGPRs':>6} {'AGPRs':>6} {'SGPRs':>6} {'LDS B':>7} {'scratch B':>9}\n"
            for name, u in resource_usage(built.data).items():
                report += (f"{name:<24} {u.get('vgpr', 0):>6} {u.get('agpr', 0):>6} {u.get('sgpr', 0):>6} "
                           f"{u.get('lds', 0):>7} {u.get('scratch', 0):>9}\n")
        return Built(built.data, built.toolchain, [" ".join(c) for c in built.commands], extra, report, warnings)


def _resources(unit: Unit, code_object: bytes):
    """The manifest's "resources" (arch -> kernel -> vgpr, agpr, sgpr, lds, scratch, vgpr_spill, sgpr_spill) from the
    code object's metadata, and a warning at each kernel that spills VGPRs; nothing without llvm-readelf."""
    import shutil

    from ...diagnostics import Diagnostic
    from .toolchain import resource_usage

    if not any(shutil.which(t) for t in ("llvm-readelf-19", "llvm-readelf", "llvm-readelf-15")):
        return {}, []
    usage = resource_usage(code_object)
    spans = {sk.name: sk.span for sk in getattr(unit.lowered, "kernels", [])}
    warnings = []
    for name, u in usage.items():
        # VGPR spills go to scratch memory; SGPR spills land in VGPR lanes (no memory traffic): only the first warn
        if u.get("vgpr_spill", 0):
            warnings.append(Diagnostic(
                "warning", f"kernel '{name}' spills {u['vgpr_spill']} VGPRs to scratch memory on {unit.target.arch} "
                           f"({u.get('scratch', 0)} bytes of scratch per lane); fewer fragment elements per thread "
                           "avoid it", spans.get(name)))
    return ({"resources": {unit.target.arch: usage}} if usage else {}), warnings


BACKEND = HipBackend()
