"""The CUDA back end (sm80 … sm100): the SIMT pipeline, CUDA C++ (codegen.py), nvcc or NVRTC, C launcher headers.

Beyond the shared SIMT passes it owns the no-TMA twins: on a target with TMA pipelines, every kernel whose
lowering took TMA tensor maps is compiled once more with "tma" disabled, as NAME__no_tma, which the runtime
or the C launcher launch when a tensor is not TMA-addressable (docs/hopper.md, docs/deploy.md).
"""

from __future__ import annotations

import os
import re
import shutil

from ..backend import ArtifactInfo, Built, SimtBackend, Unit, run_steps

FALLBACK_SUFFIX = "__no_tma"


class CudaBackend(SimtBackend):
    name = "cuda"
    output_kinds = {"cu": ".cu", "ptx": ".ptx", "cubin": ".cubin", "fatbin": ".fatbin", "header": ".h"}
    assembler = "ptxas"
    default_kind = "cubin"
    source_kind = "cu"
    multi_target_kinds = frozenset({"fatbin", "header"})
    run_kind = "cubin"
    loader = "cuda"
    driver_api = "CUDA driver API (cuModuleLoadData, cuLaunchKernel)"
    codegen = "tilec.targets.cuda.codegen"

    def lower(self, module, rep, target, dumps, want, verify=False):
        import copy

        pristine = copy.deepcopy(module) if target.tma_pipelines else None
        steps = self.pipeline(target)
        lowered = run_steps(steps, module, rep, target, dumps, want, verify)
        if pristine is not None:
            _add_no_tma_twins(module, lowered, pristine, rep, target, steps)
        return lowered

    def toolchain_identity(self, targets, kind, options):
        from ...cache import executable_fingerprint

        if kind == "cu":
            return "none"
        parts = [f"CUDA_HOME={os.environ.get('CUDA_HOME', '')}"]
        nvcc = shutil.which("nvcc")
        if _uses_nvrtc(options, kind, len(targets)):
            from .nvrtc import find_lib

            lib = find_lib()
            if lib is None:
                return None
            parts.append(executable_fingerprint(str(lib)))
            if nvcc:  # NVRTC reads cuda_fp16.h from nvcc's include directory
                parts.append(os.path.realpath(nvcc))
        else:
            if nvcc is None:
                return None
            parts.append(executable_fingerprint(nvcc))
        return "\n".join(parts)

    def manifest_options(self, options):
        return {"lineinfo": options.lineinfo, "G": options.device_debug}

    def build(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        if kind == "cu":
            return Built(_combined_source(units).encode() if len(units) > 1 else units[0].source.encode(), "none")
        if kind == "header":
            return self._build_header(units, options, info)
        source = _combined_source(units) if len(units) > 1 else units[0].source
        built = _toolchain_build(source, info.stem, options, kind, [u.target.arch for u in units])
        extra = {"driver_api_version": _driver_api_version(built.toolchain)}
        if len(units) > 1 and _launches_differ(units):
            # one image per architecture in the fatbin; the runtime picks the entries of the one it loads
            extra["arch_kernels"] = {u.target.arch: u.kernels for u in units}
        report = _usage_table(units[0].kernels, built.resource_usage) if options.resource_usage else ""
        return Built(built.binary, built.toolchain, built.commands, extra, report)

    def _build_header(self, units: list[Unit], options, info: ArtifactInfo) -> Built:
        """One cubin per target, embedded in a C launcher header (launcher.py)."""
        from concurrent.futures import ThreadPoolExecutor

        from ...cache import sha256_bytes
        from ...diagnostics import CompileError, Diagnostic
        from ...version import __version__
        from .launcher import Image, LauncherError, generate_header

        def one(u: Unit):
            return _toolchain_build(u.source, f"{info.stem}.{u.target.name}", options, "cubin", [u.target.arch])

        if len(units) > 1:
            with ThreadPoolExecutor(min(len(units), os.cpu_count() or 1)) as pool:
                builts = list(pool.map(one, units))
        else:
            builts = [one(units[0])]
        commands = [c for b in builts for c in b.commands]
        toolchain = builts[0].toolchain
        if options.dryrun:
            return Built(b"", toolchain, commands)
        images = [Image(u.target.name, u.target.arch, b.binary, u.kernels) for u, b in zip(units, builts, strict=True)]
        api = _driver_api_version(toolchain)
        prefix = options.header_prefix
        header_info = {
            "prefix": prefix,
            "functions": [f"{prefix}{k['name']}_{f}" for k in images[0].kernels if not k.get("internal")
                          for f in ("launch", "check_device")],
            "images": [{"target": im.target, "arch": im.arch, "bytes": len(im.data), "sha256": sha256_bytes(im.data),
                        "kernels": [{"name": e["name"], "grid": e["grid"], "threads": e["threads"],
                                     "shared_bytes": e["shared_bytes"]} for e in im.kernels]} for im in images],
        }
        try:
            text = generate_header(info.output_name, images, source_name=info.source_name,
                                   tilec_version=__version__, toolchain=toolchain, driver_api_version=api,
                                   source_hash=info.source_hash, prefix=prefix)
        except LauncherError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        return Built(text.encode(), toolchain, commands, {"driver_api_version": api, "header": header_info})


BACKEND = CudaBackend()


def _uses_nvrtc(options, kind: str, ntargets: int) -> bool:
    """CompileOptions.toolchain "nvrtc", or "auto" where NVRTC can build the kind (one target's cubin or PTX) and
    its library is installed; nvcc otherwise."""
    if options.toolchain == "nvrtc":
        return True
    if options.toolchain != "auto" or kind not in ("cubin", "ptx") or ntargets != 1:
        return False
    from .nvrtc import find_lib

    return find_lib() is not None


def _toolchain_build(source: str, stem: str, options, kind: str, archs: list[str]):
    """nvcc (toolchain.py) or, with CompileOptions.toolchain "nvrtc", NVRTC in process (nvrtc.py)."""
    from .toolchain import BuildOptions

    opts = BuildOptions(kind, archs, lineinfo=options.lineinfo, debug=options.device_debug,
                        keep_dir=options.keep_dir, dryrun=options.dryrun, resource_usage=options.resource_usage,
                        opt_level=options.opt_level, ptxas_args=list(options.ptxas_args),
                        extra=list(options.toolchain_args))
    if _uses_nvrtc(options, kind, len(archs)):
        from .nvrtc import build_nvrtc

        return build_nvrtc(source, stem, opts)
    from .toolchain import build

    return build(source, stem, opts)


def _driver_api_version(toolchain: str) -> int:
    """The CUDA version (1000*major + 10*minor) of the toolkit that built a binary: the driver must support at
    least that major version to load it."""
    m = re.search(r"(\d+)\.(\d+)", toolchain)
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10 if m else 0


def _usage_table(kernels: list[dict], usage: dict[str, dict[str, int]]) -> str:
    lines = [f"{'kernel':<24} {'registers':>9} {'shared B':>9} {'stack B':>8} {'spill st':>9} {'spill ld':>9}"]
    for k in kernels:
        u = usage.get(k["name"], {})
        lines.append(f"{k['name']:<24} {u.get('registers', '?'):>9} {k['shared_bytes']:>9} "
                     f"{u.get('stack_bytes', '?'):>8} {u.get('spill_stores', '?'):>9} {u.get('spill_loads', '?'):>9}")
    return "\n".join(lines) + "\n"


def _launches_differ(units: list[Unit]) -> bool:
    def shape(u: Unit):
        return [(k["name"], k["grid"], k["threads"], k["shared_bytes"], k.get("tensor_maps"), k.get("fallback"))
                for k in u.kernels]

    return any(shape(u) != shape(units[0]) for u in units[1:])


def _combined_source(units: list[Unit]) -> str:
    """One .cu for several architectures: what every target's source shares (the device header), then each
    target's own helpers and kernels under its own __CUDA_ARCH__ range, so that nvcc compiles for each
    architecture exactly the code generated for it."""
    split = [u.source.split("\n") for u in units]
    # The first line is the banner, which names the target. The shared part is the common prefix after it, cut
    # at a blank line (between two top-level definitions), so that what a host pass sees is whole.
    same = 1
    while all(len(s) > same for s in split) and len({s[same] for s in split}) == 1:
        same += 1
    common = max([i + 1 for i in range(1, same) if not split[0][i].strip()], default=1)
    archs = sorted(units, key=lambda u: _cc(u.target.arch))
    parts = ["\n".join(split[0][:common])]
    for i, u in enumerate(archs):
        cc = _cc(u.target.arch) * 10
        nxt = _cc(archs[i + 1].target.arch) * 10 if i + 1 < len(archs) else None
        cond = f"__CUDA_ARCH__ >= {cc}" + (f" && __CUDA_ARCH__ < {nxt}" if nxt else "")
        own = "\n".join(split[units.index(u)][common:])
        parts.append(f"#if {cond}\n{own}\n#endif\n")
    return "\n".join(parts)


def _cc(arch: str) -> int:
    return int(arch.removeprefix("sm_").rstrip("af"))


def _add_no_tma_twins(module, lowered, pristine, rep, target, steps) -> None:
    """A kernel that takes TMA tensor maps works only when every tensor's base address and row pitch are
    multiples of 16 bytes; for other launches (a ragged f16 K of 100) the host launches a twin compiled
    without TMA. The twins follow the user's kernels in both modules, marked internal."""
    needing = {sk.name for sk in lowered.kernels if sk.attrs.get("tensor_maps")}
    if not needing:
        return
    pristine.kernels = [k for k in pristine.kernels if k.name in needing]
    for k in pristine.kernels:
        k.attrs["disabled"] = frozenset(k.attrs.get("disabled", ())) | {"tma"}
        k.name += FALLBACK_SUFFIX
        k.attrs["internal"] = True
    twins = run_steps(steps, pristine, rep, target, {}, set())
    for sk in lowered.kernels:
        if sk.name in needing:
            sk.attrs["fallback"] = sk.name + FALLBACK_SUFFIX
    for sk in twins.kernels:
        sk.attrs["internal"] = True
    module.kernels.extend(pristine.kernels)
    lowered.kernels.extend(twins.kernels)
