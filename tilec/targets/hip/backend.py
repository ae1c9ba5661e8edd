"""The HIP back end (gfx90a, gfx942): the SIMT pipeline, HIP C++ (codegen.py), code objects and assembly through
hipcc or clang-19 (toolchain.py), and linkable host objects (`-c -o k.o`: a C launcher over the HIP module API
with one code object per target, launcher.py, compiled by cc). tilec.runtime has no HIP loader yet, so `tilec
run` cannot run its artifacts."""

from __future__ import annotations

from ..backend import ArtifactInfo, Built, SimtBackend, Unit


class HipBackend(SimtBackend):
    name = "hip"
    output_kinds = {"hip": ".hip", "hsaco": ".hsaco", "asm": ".s", "object": ".o"}
    default_kind = "hsaco"
    source_kind = "hip"
    multi_target_kinds = frozenset({"object"})
    driver_api = ""
    codegen = "tilec.targets.hip.codegen"

    def toolchain_identity(self, targets, kind, options):
        from ...cache import executable_fingerprint
        from .toolchain import find_compiler

        if kind == "hip":
            return "none"
        found = [find_compiler(t.arch) for t in targets]
        if None in found:
            return None
        parts = [f"{kind} {executable_fingerprint(path)}" for kind, path in found]
        if kind == "object":
            from ..c_launcher.objects import host_compiler

            cc = host_compiler()
            if cc is None or _hip_include_dir() is None:
                return None
            parts.append(executable_fingerprint(cc))
        return "\n".join(parts)

    def kind_toolchains(self) -> dict[str, str]:
        from .toolchain import find_compiler

        def what(arch: str) -> str:
            found = find_compiler(arch)
            return found[1] if found else "none found (hipcc or clang-19)"

        both = f"gfx90a: {what('gfx90a')}, gfx942: {what('gfx942')}"
        return {"hip": "none (the generated source)", "hsaco": both, "asm": both,
                "object": f"{both}, then cc with hip_runtime_api.h" if _hip_include_dir() else
                "none (needs hip/hip_runtime_api.h)"}

    def operand_tables(self, family):
        from ..backend import OperandTable
        from . import mfma_layouts as ML

        if family != "mfma":
            return []
        return [OperandTable(f"v_mfma_f32_16x16x16 {op} (one wave)", 16, 16, ML.WAVE, ML.ELEMS, fn,
                             1 if op == "C" else 2, 16)
                for op, fn in (("A", ML.mfma_16x16x16_a), ("B", ML.mfma_16x16x16_b), ("C", ML.mfma_16x16x16_c))]

    def build(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        if kind == "object":
            return _build_object(units, options, info)
        (unit,) = units
        if kind == "hip":
            return Built(unit.source.encode(), "none")
        from .toolchain import build, resource_usage

        built = build(unit.source, info.stem, unit.target.arch, kind, options.opt_level, options.toolchain_args)
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


def _hip_include_dir() -> str | None:
    """Where hip/hip_runtime_api.h is (ROCm's include folder, or the system's)."""
    import os

    for d in (os.environ.get("ROCM_PATH", "/opt/rocm") + "/include", "/usr/include"):
        if os.path.isfile(os.path.join(d, "hip", "hip_runtime_api.h")):
            return d
    return None


def _build_object(units: list[Unit], options, info: ArtifactInfo) -> Built:
    """One code object per target (in threads), embedded in a C launcher (launcher.py) compiled by cc."""
    import shutil
    import tempfile
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from ...diagnostics import CompileError, Diagnostic
    from ...version import __version__
    from ..c_launcher.header import LauncherError
    from ..c_launcher.objects import compile_c, incbin
    from .launcher import generate_object_source
    from .toolchain import build

    def one(u: Unit):
        return build(u.source, f"{info.stem}.{u.target.name}", u.target.arch, "hsaco")

    with ThreadPoolExecutor(max(1, min(len(units), 2))) as pool:
        builts = list(pool.map(one, units))
    commands = [" ".join(c) for b in builts for c in b.commands]
    inc = _hip_include_dir()
    if inc is None:
        raise CompileError([Diagnostic("error", "-c for an AMD target needs hip/hip_runtime_api.h (ROCm, or Debian's "
                                                "libamdhip64-dev) to compile the launcher")])
    work = Path(tempfile.mkdtemp(prefix="tilec-obj-"))
    try:
        images = [(u.target.arch, b.data, u.kernels) for u, b in zip(units, builts, strict=True)]
        try:
            text, exported, protos = generate_object_source(
                info.output_name, images, source_name=info.source_name, tilec_version=__version__,
                toolchain=builts[0].toolchain, prefix=options.header_prefix, embed=incbin(work),
                launches=list(info.launches), dispatch=info.dispatch)
        except LauncherError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        data, full, compiler = compile_c(text, work, info.output_name, [inc])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = {"prefix": options.header_prefix, "functions": exported, "prototypes": protos,
              "images": [{"target": u.target.name, "arch": u.target.arch, "bytes": len(b.data)}
                         for u, b in zip(units, builts, strict=True)]}
    return Built(data, f"{builts[0].toolchain}; {compiler}", commands + [full], {"object": record})
