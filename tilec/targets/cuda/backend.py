"""The CUDA back end (sm80 … sm100): the SIMT pipeline, CUDA C++ (codegen.py), nvcc or NVRTC (+ nvFatbin), C
launcher headers and linkable host objects (the shared C launcher, tilec/targets/c_launcher/).

Which toolchain builds a binary (`_device_toolchain`): `--compiler nvcc|nvrtc` when said; "auto" (tilec.compile's
default) takes NVRTC for one target's cubin or PTX when its pip wheel is installed; otherwise, and when nothing
is said (the command line's default), nvcc when it is on PATH, else NVRTC, with nvFatbin packing a fatbin's
cubins -- so that `pip install tilec` alone builds cubins and fatbins on a machine with no CUDA toolkit.

Beyond the shared SIMT passes it owns the no-TMA twins: on a target with TMA pipelines, every kernel whose
lowering took TMA tensor maps is compiled once more with "tma" disabled, as NAME__no_tma, which the runtime
or the C launcher launch when a tensor is not TMA-addressable (docs/hopper.md, docs/deploy.md); and a kernel that
stores with TMA a tensor whose rows can be misaligned while its loaded tensors' are not (fp8_gemm's C) once more with
"tma_store" disabled, as NAME__direct_stores, launched when only such a stored tensor is not TMA-addressable.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from ..backend import ArtifactInfo, Built, SimtBackend, Unit, run_steps

FALLBACK_SUFFIX = "__no_tma"
DIRECT_STORES_SUFFIX = "__direct_stores"


@dataclass(frozen=True)
class CudaOptions:
    """What a CUDA build reads, parsed once per artifact from the CompileOptions (CudaBackend.parse_options): the
    CUDA back end's own options, which travel in CompileOptions.backend_options, and the shared fields it uses."""

    # the CUDA back end's own
    lineinfo: bool = False  # line information for profilers (-lineinfo)
    device_debug: bool = False  # device debug information (nvcc -G)
    ptxas_args: tuple[str, ...] = ()  # -Xptxas: passed to ptxas as written
    # Fatbins, headers and objects also carry PTX of the generic path (the oldest non-arch-specific target's,
    # else sm80's), which the driver JIT-compiles on a GPU newer than every cubin; --no-ptx leaves it out.
    forward_ptx: bool = True
    # shared (tilec.options.CompileOptions)
    toolchain: str | None = None  # nvcc | nvrtc | auto | None (see _device_toolchain)
    opt_level: int | None = None
    toolchain_args: tuple[str, ...] = ()
    header_prefix: str = ""
    keep_dir: str | None = None
    dryrun: bool = False
    resource_usage: bool = False
    cacheable: bool = True

    @classmethod
    def parse(cls, shared: dict, own: dict) -> CudaOptions:
        """The record from the shared fields and the back end's own options; TypeError naming a value of the
        wrong type."""
        for name in ("lineinfo", "device_debug", "forward_ptx"):
            if name in own and not isinstance(own[name], bool):
                raise TypeError(f"{name} must be true or false, not {own[name]!r}")
        args = own.get("ptxas_args", ())
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise TypeError(f"ptxas_args must be a list of strings, not {args!r}")
        return cls(**{**shared, **own, "ptxas_args": tuple(args)})


class CudaBackend(SimtBackend):
    """The CUDA back end. Its stages, top to bottom:

    1. `pipeline(target)`: the shared SIMT passes (simt_pipeline), from checked Tile IR to SIMT IR;
    2. `lower`: that pipeline, then on a target with TMA pipelines the no-TMA twins (_add_no_tma_twins) and the
       direct-stores twins (_add_direct_store_twins);
    3. `generate`: CUDA C++ (codegen.py), the source (kind "cu"; several targets: _combined_source);
    4. `build`, with the options parsed once into a CudaOptions (`parse_options`):
       cu -> ptx | cubin     nvcc (toolchain.py) or NVRTC (nvrtc.py), as _device_toolchain says;
       cu -> fatbin          nvcc over the combined source, or NVRTC per target packed by nvFatbin (_nvrtc_fatbin),
                             with the generic path's PTX (forward_ptx_target);
       cu -> header          a cubin per target (and the PTX) embedded in a C launcher (launcher.py);
       cu -> object          that launcher compiled by the host C compiler (objects.py).
    """

    name = "cuda"
    options_record = CudaOptions
    output_kinds = {"cu": ".cu", "ptx": ".ptx", "cubin": ".cubin", "fatbin": ".fatbin", "header": ".h",
                    "object": ".o"}
    assembler = "ptxas"
    default_kind = "cubin"
    source_kind = "cu"
    multi_target_kinds = frozenset({"fatbin", "header", "object"})
    run_kind = "cubin"
    loader = "cuda"
    driver_api = "CUDA driver API (cuModuleLoadData, cuLaunchKernel)"
    codegen = "tilec.targets.cuda.codegen"

    def variant_headers(self) -> tuple[str, tuple[str, ...]]:
        from .codegen import CLUSTER_HEADER, HEADER, PAD_HEADER

        # the cluster header: clustered variants alone; the padded-row copy: TMA variants alone, and defined once
        return HEADER.read_text(), (CLUSTER_HEADER.read_text(), PAD_HEADER.read_text())

    def lower(self, module, rep, target, dumps, want, verify=False):
        import copy

        pristine = copy.deepcopy(module) if target.tma_pipelines else None
        steps = self.pipeline(target)
        lowered = run_steps(steps, module, rep, target, dumps, want, verify)
        if pristine is not None:
            stores_alone = _stores_misaligned_alone(module, lowered)
            for_stores = copy.deepcopy(pristine) if stores_alone else None  # (before the no-TMA twins take it)
            _add_no_tma_twins(module, lowered, pristine, rep, target, steps)
            if stores_alone:
                _add_direct_store_twins(module, lowered, for_stores, stores_alone, rep, target, steps)
        return lowered

    def forward_ptx_target(self, targets, kind, options):
        """The generic path's PTX for fatbins, headers and objects: the oldest target that is not
        architecture-specific (sm80, sm86, sm89: mma.sync, cp.async), else sm80, compiled for it alone."""
        options = self.parse_options(options)
        if kind not in self.multi_target_kinds or not options.forward_ptx:
            return None
        generic = [t for t in targets if not t.arch.endswith(("a", "f"))]
        return min(generic, key=lambda t: _cc(t.arch)).name if generic else "sm80"

    def toolchain_identity(self, targets, kind, options):
        from ...cache import executable_fingerprint

        options = self.parse_options(options)
        if kind == "cu":
            return "none"
        parts = [f"CUDA_HOME={os.environ.get('CUDA_HOME', '')}"]
        per_target = kind in ("header", "object")  # one cubin per target, each built alone
        tool = _device_toolchain(options, "cubin" if per_target else kind, 1 if per_target else len(targets))
        if tool == "nvrtc":
            from .locate import cuda_include_dir, nvfatbin_lib, nvrtc_lib, ptxas_path

            libs = [nvrtc_lib()] + ([nvfatbin_lib()] if kind == "fatbin" else [])
            if None in libs:
                return None
            parts += [executable_fingerprint(str(lib)) for lib in libs]
            parts.append(f"include={cuda_include_dir()}")  # NVRTC reads cuda_fp16.h from there
            if kind != "ptx" and os.environ.get("TILEC_NVRTC_SPLIT") == "1":  # the split build (nvrtc.py)
                ptxas = ptxas_path()
                parts.append(f"split ptxas={executable_fingerprint(str(ptxas)) if ptxas else None}")
        else:
            nvcc = shutil.which("nvcc")
            if nvcc is None:
                return None
            parts.append(executable_fingerprint(nvcc))
        if kind == "object":
            from ..c_launcher.objects import host_compiler
            from .locate import driver_include_dir

            cc = host_compiler()
            if cc is None:
                return None
            parts += [executable_fingerprint(cc), f"cuda.h={driver_include_dir()}"]
        return "\n".join(parts)

    def kind_toolchains(self) -> dict[str, str]:
        from ..c_launcher.objects import host_compiler
        from .locate import nvfatbin_lib, nvrtc_lib

        found = {"nvcc": shutil.which("nvcc") is not None, "nvrtc": nvrtc_lib() is not None,
                 "nvfatbin": nvfatbin_lib() is not None}
        options = _Unsaid()

        def what(kind: str, n: int) -> str:
            tool = _device_toolchain(options, kind, n)
            if not found[tool]:
                return "none found (install the CUDA toolkit, or pip install nvidia-cuda-nvrtc nvidia-nvfatbin)"
            if tool == "nvrtc" and kind == "fatbin":
                return "NVRTC + nvFatbin" if found["nvfatbin"] else "none found (pip install nvidia-nvfatbin)"
            return "NVRTC (in process)" if tool == "nvrtc" else "nvcc"

        cubin = what("cubin", 1)
        cc = host_compiler()
        return {"cu": "none (the generated source)", "ptx": what("ptx", 1), "cubin": cubin,
                "fatbin": what("fatbin", 2), "header": f"{cubin} per target",
                "object": f"{cubin} per target, then {cc or 'no C compiler found (set CC)'}"}

    def helper_functions(self, kernels: list[dict]) -> list[str]:
        from ...manifest import PAD_BATCH_HELPER, PAD_HELPER

        # as codegen.generate emits them (tilec_pad.h)
        return [PAD_HELPER, PAD_BATCH_HELPER] if any(k.get("tensor_maps") for k in kernels) else []

    def manifest_options(self, options):
        options = self.parse_options(options)
        return {"lineinfo": options.lineinfo, "G": options.device_debug}

    def write_link_stub(self, directory: str):
        """`tilec --cuda-stub DIR` (tilec.targets.registry.write_link_stub): link_stub.py."""
        from .link_stub import write_cuda_stub

        return write_cuda_stub(directory)

    def operand_tables(self, family):
        from ..backend import OperandTable
        from . import mma_layouts as L

        if family != "mma":
            return []  # (wgmma's accumulator is the Tile IR layout WgmmaTiled; its A and B come from shared memory)
        return [OperandTable(f"mma.sync.m16n8k16 {op} (one warp)", lay.rows, lay.cols, L.WARP_SIZE, lay.elems_per_lane,
                             lay.coord, lay.elems_per_reg, 4)
                for op, lay in (("A", L.MMA_M16N8K16_A), ("B", L.MMA_M16N8K16_B), ("C", L.MMA_M16N8K16_C))]

    def build(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        options = self.parse_options(options)
        if kind == "cu":
            return Built(_combined_source(units).encode() if len(units) > 1 else units[0].source.encode(), "none")
        if kind in ("header", "object"):
            return self._build_launcher(units, kind, options, info)
        archs = [u.target.arch for u in units]
        ptx = info.forward_ptx if kind == "fatbin" else None
        with_ptx = units + ([ptx] if ptx is not None and ptx not in units else [])  # every code the fatbin holds
        if kind == "fatbin" and _device_toolchain(options, kind, len(units)) == "nvrtc":
            built = _nvrtc_fatbin(units, info.stem, options, ptx)
        else:
            source = _combined_source(with_ptx) if len(with_ptx) > 1 else units[0].source
            built = _toolchain_build(source, info.stem, options, kind, archs,
                                     [ptx.target.arch] if ptx is not None else [])
        extra = {"driver_api_version": _driver_api_version(built.toolchain)}
        resources, warnings = _resources(units, built.usage_by_arch)
        if resources:
            extra["resources"] = resources
        if ptx is not None:
            extra["ptx"] = _ptx_record(ptx)
        if len(with_ptx) > 1 and _launches_differ(with_ptx):
            # one image per architecture in the fatbin; the runtime picks the entries of the one it loads
            extra["arch_kernels"] = {u.target.arch: u.kernels for u in with_ptx}
        report = _usage_table(units[0].kernels, built.resource_usage) if options.resource_usage else ""
        return Built(built.binary, built.toolchain, built.commands, extra, report, warnings)

    def _build_launcher(self, units: list[Unit], kind: str, options, info: ArtifactInfo) -> Built:
        """One cubin per target, embedded in the C launcher (c_launcher/header.py): the header's text, or (kind
        "object") that text compiled by the host C compiler into a relocatable object exporting the launch functions
        (objects.py)."""
        from ...cache import sha256_bytes
        from ...diagnostics import CompileError, Diagnostic
        from ...version import __version__
        from ..c_launcher.dispatch import dispatchers
        from ..c_launcher.header import CUDA_API, Image, LauncherError, generate_header

        ptx = info.forward_ptx
        jobs = [(u, "cubin") for u in units] + ([(ptx, "ptx")] if ptx is not None else [])
        builts = _per_target(jobs, lambda job: _toolchain_build(job[0].source, _job_stem(info.stem, *job), options,
                                                                 job[1], [job[0].target.arch]))
        ptx_built = builts.pop() if ptx is not None else None
        commands = [c for b in builts + ([ptx_built] if ptx_built else []) for c in b.commands]
        toolchain = builts[0].toolchain
        if options.dryrun:
            return Built(b"", toolchain, commands + (["cc -c (the C launcher)"] if kind == "object" else []))
        images = [Image(u.target.name, u.target.arch, b.binary, u.kernels) for u, b in zip(units, builts, strict=True)]
        if ptx_built is not None:  # NUL-terminated: cuModuleLoadData reads PTX as a C string
            images.append(Image(ptx.target.name, _ptx_record(ptx)["arch"], ptx_built.binary + b"\0", ptx.kernels))
        api = _driver_api_version(toolchain)
        resources, warnings = {}, []
        for u, b in zip(units, builts, strict=True):
            r, w = _resources([u], b.usage_by_arch)
            resources.update(r)
            warnings += w
        prefix = options.header_prefix
        functions = [f"{prefix}{k['name']}_{f}" for k in images[0].kernels if not k.get("internal")
                     for f in ("launch", "check_device")]
        functions += [f"{prefix}{seq['name']}_{f}" for seq in info.launches  # multi-launch kernels
                      for f in ("launch", "launch_with_workspace", "workspace_bytes", "check_device")]
        header_info = {
            "prefix": prefix,
            "functions": functions,
            "images": [{"target": im.target, "arch": im.arch, "bytes": len(im.data), "sha256": sha256_bytes(im.data),
                        "kernels": [{"name": e["name"], "grid": e["grid"], "threads": e["threads"],
                                     "shared_bytes": e["shared_bytes"]} for e in im.kernels]} for im in images],
        }
        name = info.output_name
        try:
            if kind == "header":
                text = generate_header(name, images, source_name=info.source_name, tilec_version=__version__,
                                       toolchain=toolchain, driver_api_version=api, source_hash=info.source_hash,
                                       prefix=prefix, launches=list(info.launches),
                                       tail=dispatchers(info.dispatch, [*images[0].kernels, *info.launches], CUDA_API,
                                                        prefix, check_device=True)[0])
                extra = {"driver_api_version": api, "header": header_info}
                if resources:
                    extra["resources"] = resources
                return Built(text.encode(), toolchain, commands, extra, diagnostics=warnings)
            from .objects import build_object

            obj = build_object(images, info, toolchain=toolchain, driver_api_version=api, prefix=prefix,
                               exported=functions)
        except LauncherError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        header_info["functions"] = obj.exported
        header_info["prototypes"] = obj.prototypes
        extra = {"driver_api_version": api, "object": header_info}
        if resources:
            extra["resources"] = resources
        return Built(obj.data, f"{toolchain}; {obj.compiler}", commands + obj.commands, extra, diagnostics=warnings)


BACKEND = CudaBackend()


class _Unsaid:
    """Options with nothing said about the toolchain (what the command line passes by default)."""

    toolchain = None


def _device_toolchain(options, kind: str, ntargets: int) -> str:
    """"nvcc" or "nvrtc" (a fatbin of several targets: NVRTC per target, packed by nvFatbin): what
    CompileOptions.toolchain says; "auto" takes NVRTC for one target's cubin or PTX when it is installed;
    otherwise nvcc when it is on PATH, else NVRTC when its wheels are installed (else nvcc, which then says that
    it is missing)."""
    if options.toolchain in ("nvcc", "nvrtc"):
        return options.toolchain
    from .locate import nvfatbin_lib, nvrtc_lib

    installed = nvrtc_lib() is not None and (kind != "fatbin" or nvfatbin_lib() is not None)
    if options.toolchain == "auto" and kind in ("cubin", "ptx") and ntargets == 1 and installed:
        return "nvrtc"
    if shutil.which("nvcc") is not None:
        return "nvcc"
    return "nvrtc" if installed else "nvcc"


def _per_target(units: list, build):
    """build(unit) for each unit (or job), in threads when there are several (nvcc runs as a process; NVRTC releases
    the GIL)."""
    if len(units) == 1:
        return [build(units[0])]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(len(units), os.cpu_count() or 1)) as pool:
        return list(pool.map(build, units))


def _toolchain_build(source: str, stem: str, options, kind: str, archs: list[str], ptx_archs: list[str] = ()):
    """nvcc (toolchain.py) or NVRTC in process (nvrtc.py), as _device_toolchain decides; `ptx_archs`: a fatbin's
    PTX images (nvcc only: an NVRTC fatbin is packed by _nvrtc_fatbin)."""
    from .toolchain import BuildOptions

    opts = BuildOptions(kind, archs, ptx_archs=list(ptx_archs), lineinfo=options.lineinfo, debug=options.device_debug,
                        keep_dir=options.keep_dir, dryrun=options.dryrun, resource_usage=options.resource_usage,
                        opt_level=options.opt_level, ptxas_args=list(options.ptxas_args),
                        extra=list(options.toolchain_args), cache=options.cacheable)
    if _device_toolchain(options, kind, len(archs)) == "nvrtc":
        from .nvrtc import build_nvrtc

        return build_nvrtc(source, stem, opts)
    from .toolchain import build

    return build(source, stem, opts)


def _nvrtc_fatbin(units: list[Unit], stem: str, options, ptx: Unit | None = None):
    """A fatbin without nvcc: each target's own source built to a cubin by NVRTC, the cubins packed by nvFatbin
    (one image per architecture, as nvcc's -gencode list gives), and `ptx`'s source built to PTX beside them."""
    from . import nvfatbin
    from .toolchain import BuildResult

    jobs = [(u, "cubin") for u in units] + ([(ptx, "ptx")] if ptx is not None else [])
    builts = _per_target(jobs, lambda job: _toolchain_build(job[0].source, _job_stem(stem, *job), options, job[1],
                                                             [job[0].target.arch]))
    ptx_built = builts.pop() if ptx is not None else None
    packed = [f"{stem}.{u.target.name}.cubin as {u.target.arch}" for u in units]
    if ptx is not None:
        packed.append(f"{_job_stem(stem, ptx, 'ptx')}.ptx as {_ptx_record(ptx)['arch']}")
    commands = [c for b in builts + ([ptx_built] if ptx_built else []) for c in b.commands] + [
        "nvFatbin (in process): " + ", ".join(packed)]
    toolchain = f"{builts[0].toolchain} + {nvfatbin.version()}"
    if options.dryrun:
        return BuildResult(b"", commands, {}, toolchain)
    data = nvfatbin.fatbin([(u.target.arch, b.binary) for u, b in zip(units, builts, strict=True)], stem,
                           [(ptx.target.arch, ptx_built.binary)] if ptx is not None else [])
    usage = {k: v for b in builts for k, v in b.resource_usage.items()}
    by_arch = {u.target.arch: b.usage_by_arch.get(u.target.arch) or b.resource_usage
               for u, b in zip(units, builts, strict=True)}
    return BuildResult(data, commands, usage, toolchain, by_arch)


def _job_stem(stem: str, unit: Unit, kind: str) -> str:
    """The file stem of one toolchain job of a multi-target build: the target's name, and "generic" for the PTX of
    the forward-compatible path (whose target may have a cubin job too: --keep writes both into one folder)."""
    return f"{stem}.{unit.target.name}" + (".generic" if kind == "ptx" else "")


def _ptx_record(ptx: Unit) -> dict:
    """The manifest's "ptx": the PTX image's virtual architecture (compute_80) and the target it was generated for,
    whose entries (arch_kernels' under its arch, when launches differ) launch it."""
    return {"arch": "compute_" + ptx.target.arch.removeprefix("sm_"), "target": ptx.target.name,
            "kernels_arch": ptx.target.arch}


def _driver_api_version(toolchain: str) -> int:
    """The CUDA version (1000*major + 10*minor) of the toolkit that built a binary: the driver must support at
    least that major version to load it."""
    m = re.search(r"(\d+)\.(\d+)", toolchain)
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10 if m else 0


def _resources(units: list[Unit], usage_by_arch: dict[str, dict[str, dict[str, int]]]):
    """The manifest's "resources" (arch -> kernel -> registers, spill_stores, spill_loads, stack_bytes,
    static_shared_bytes, shared_bytes) from ptxas's report, and a warning at each kernel that spills."""
    from ...diagnostics import Diagnostic

    resources: dict[str, dict[str, dict[str, int]]] = {}
    warnings = []
    for u in units:
        arch = u.target.arch
        usage = usage_by_arch.get(arch) or (usage_by_arch.get("") if len(units) == 1 else None) or {}
        spans = {sk.name: sk.span for sk in getattr(u.lowered, "kernels", [])}
        entries = {k["name"]: k for k in u.kernels}
        stores_twin_of = {k["direct_stores"]: k["name"] for k in u.kernels if k.get("direct_stores")}
        twin_of = {k["fallback"]: k["name"] for k in u.kernels
                   if k.get("fallback") and k["name"] not in stores_twin_of}
        per_kernel = {}
        for name, use in usage.items():
            per_kernel[name] = {"registers": use["registers"], "spill_stores": use["spill_stores"],
                                "spill_loads": use["spill_loads"], "stack_bytes": use["stack_bytes"],
                                "static_shared_bytes": use["static_smem_bytes"],
                                "shared_bytes": entries[name]["shared_bytes"] if name in entries else 0}
            if use["spill_stores"] or use["spill_loads"]:
                st, ld = use["spill_stores"], use["spill_loads"]
                warnings.append(Diagnostic(
                    "warning", f"kernel '{name}' spills {st} bytes of registers to local memory on {arch} ({st} bytes "
                               f"spill stores, {ld} bytes spill loads, {use['registers']} registers); fewer fragment "
                               "elements per thread (smaller tiles, more threads) avoid it" +
                               (f"; it is the no-TMA twin of '{twin_of[name]}', launched only when a tensor's base "
                                "address or row pitch is not a multiple of 16 bytes" if name in twin_of else
                                f"; it is the direct-stores twin of '{stores_twin_of[name]}', launched only when an "
                                "output's base address or row pitch is not a multiple of 16 bytes"
                                if name in stores_twin_of else ""),
                    spans.get(name)))
        if per_kernel:
            resources[arch] = per_kernel
    return resources, warnings


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


def _tma_stored(sk) -> set[str]:
    """The tensors a lowered kernel stores with TMA (its tma_store calls' maps)."""
    from ...ir import simt as S

    names = [v.name for v in sk.attrs.get("tensor_map_params") or []]
    maps = sk.attrs.get("tensor_maps") or []
    return {maps[names.index(st.args[0].name)]["tensor"] for st in S.walk_simt(sk.body)
            if isinstance(st, S.SCall) and st.op == "tma_store"}


def _stores_alone_can_misalign(kernel, maps: list[dict], stored: set[str]) -> bool:
    """Whether a launch may find every tensor the kernel loads with TMA addressable but one it stores not: a stored
    tensor whose rows are not a multiple of 16 bytes only where a loaded one's are not either (gemm's C[M, N] and
    B[K, N]: one N, as many bytes an element) never is."""
    from ...ir import tile as T

    def row(name: str):
        b = next((p for p in kernel.params if isinstance(p, T.Buffer) and p.name == name), None)
        if b is None or not b.shape:
            return None
        last = b.shape[-1]
        key = (("size", last.name) if isinstance(last, T.Var) else ("const", last.value) if isinstance(last, T.Const)
               else None)
        return None if key is None else (key, b.dtype.bytes)

    if any(m.get("view") is not None for m in maps):
        return True
    loaded = [row(m["tensor"]) for m in maps if m["tensor"] not in stored]
    for name in stored:
        mine = row(name)
        if mine is not None and mine[0][0] == "const" and mine[0][1] * mine[1] % 16 == 0:
            continue  # rows of a fixed multiple of 16 bytes
        if mine is None or not any(r is not None and r[0] == mine[0] and r[1] <= mine[1] for r in loaded):
            return True
    return False


def _stores_misaligned_alone(module, lowered) -> dict[str, set[str]]:
    """The lowered kernels whose TMA-stored tensors' rows can be misaligned alone (_stores_alone_can_misalign), each
    with those tensors."""
    tile_kernels = {k.name: k for k in module.kernels}
    wanted = {}
    for sk in lowered.kernels:
        stored = _tma_stored(sk) if sk.attrs.get("tensor_maps") else set()
        tk = tile_kernels.get(sk.name)
        if stored and tk is not None and _stores_alone_can_misalign(tk, sk.attrs["tensor_maps"], stored):
            wanted[sk.name] = stored
    return wanted


def _add_direct_store_twins(module, lowered, pristine, wanted: dict[str, set[str]], rep, target, steps) -> None:
    """A kernel that loads and stores with TMA needs every tensor TMA-addressable; where only a stored one is not
    (fp8_gemm's C at an odd N: its loads' rows are K long), the host launches a twin compiled with "tma_store"
    disabled, NAME__direct_stores, whose loads stay TMA's and whose threads store the accumulator with guarded
    stores -- no padded copy of the output, no cp.async loads. Built for the kernels `wanted`
    (_stores_misaligned_alone), after their no-TMA twins: a twin whose loads TMA cannot address either falls back to
    its kernel's no-TMA twin."""
    twins = _compile_twins(pristine, set(wanted), {"tma_store"}, DIRECT_STORES_SUFFIX, rep, target, steps)
    fallback_of = {}
    for sk in lowered.kernels:
        if sk.name in wanted:
            sk.attrs["direct_stores"] = sk.name + DIRECT_STORES_SUFFIX
            fallback_of[sk.attrs["direct_stores"]] = sk.attrs["fallback"]
            rep.remark("tma", f"kernel '{sk.name}' stores {', '.join(sorted(wanted[sk.name]))} with TMA; its "
                              f"twin '{sk.name}{DIRECT_STORES_SUFFIX}' (TMA loads, the threads' stores) is compiled "
                              "too, and the runtime and the C launcher launch it instead when only a stored tensor's "
                              "base address or row pitch is not a multiple of 16 bytes", sk.span)
    for sk in twins.kernels:
        sk.attrs["fallback"] = fallback_of[sk.name]
    module.kernels.extend(pristine.kernels)
    lowered.kernels.extend(twins.kernels)


def _compile_twins(pristine, names: set[str], disable: set[str], suffix: str, rep, target, steps):
    """The kernels `names` of the pristine module compiled again with `disable` turned off, as NAME + suffix, marked
    internal (the lowered module; `pristine` keeps their Tile IR)."""
    pristine.kernels = [k for k in pristine.kernels if k.name in names]
    for k in pristine.kernels:
        k.attrs["disabled"] = frozenset(k.attrs.get("disabled", ())) | disable
        k.name += suffix
        k.attrs["internal"] = True
    twins = run_steps(steps, pristine, rep, target, {}, set())
    for sk in twins.kernels:
        sk.attrs["internal"] = True
    return twins


def _add_no_tma_twins(module, lowered, pristine, rep, target, steps) -> None:
    """A kernel that takes TMA tensor maps works only when every tensor's base address and row pitch are
    multiples of 16 bytes; for other launches (a ragged f16 K of 100) the host launches a twin compiled
    without TMA. The twins follow the user's kernels in both modules, marked internal."""
    needing = {sk.name for sk in lowered.kernels if sk.attrs.get("tensor_maps")}
    if not needing:
        return
    twins = _compile_twins(pristine, needing, {"tma", "partition"}, FALLBACK_SUFFIX, rep, target, steps)
    for sk in lowered.kernels:
        if sk.name in needing:
            sk.attrs["fallback"] = sk.name + FALLBACK_SUFFIX
            rep.remark("tma", f"kernel '{sk.name}' takes TMA tensor maps; its twin '{sk.name}{FALLBACK_SUFFIX}' "
                              "(cp.async, no TMA) is compiled too, and the runtime and the C launcher launch it "
                              "instead when a tensor's base address or row pitch is not a multiple of 16 bytes",
                       sk.span)
    module.kernels.extend(pristine.kernels)
    lowered.kernels.extend(twins.kernels)
