"""`tilec FILE --target T -o OUT`: compile to source, PTX, cubin, fatbin or a C launcher header,
plus a manifest; dependency files (-M -MD -MMD -MF -MT -MP) and the compile cache.

Import-light at module level: `before_compile` runs ahead of the compiler, and a cache hit
writes the outputs without importing the parser, the passes, numpy or any toolchain.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

from ..diagnostics import CompileError, Diagnostic
from . import outputs

KINDS = {".cu": "cu", ".ptx": "ptx", ".cubin": "cubin", ".fatbin": "fatbin", ".h": "header", ".wgsl": "wgsl",
         ".hip": "hip", ".hsaco": "hsaco", ".s": "asm"}


def output_kind(output: str | None, emit: str | None) -> str:
    if emit:
        if emit not in KINDS.values():
            raise CompileError([Diagnostic("error", f"--emit {emit}: expected one of {', '.join(KINDS.values())}")])
        outputs.check_emit_matches_output(output, emit, KINDS)
        return emit
    if output is None:
        return "cubin"
    suffix = Path(output).suffix
    if suffix not in KINDS:
        raise CompileError([Diagnostic("error", f"cannot tell what to emit from '{output}'; use a suffix "
                                                f"({', '.join(KINDS)}) or --emit")])
    return KINDS[suffix]


def default_output(file: str, kind: str) -> str:
    suffix = {"cu": "cu", "header": "h", "asm": "s"}.get(kind, kind)
    return f"{Path(file).stem}.{suffix}"


def _disabled(args) -> set[str]:
    """Target features turned off on the command line (--no-tma, --no-wgmma, --no-warp-specialize)."""
    return set(_opt(args, "disable") or ())


def _opt(args, name: str, default=None):
    """Options added after tilec.cli.gpu's _BuildArgs was written are read with a default."""
    return getattr(args, name, default)


# ---------------------------------------------------------------------------- dependency files


def _escape_make(path: str) -> str:
    return path.replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")


def depfile_text(targets: list[str], deps: list[str], phony: bool) -> str:
    """A Make rule with gcc's conventions: `targets: main dep...`, continuation lines, and with
    `phony` (-MP) an empty rule for each dependency but the first, so that deleting an imported
    file does not break the build."""
    items = [_escape_make(d) for d in deps]
    text = " ".join(_escape_make(t) for t in targets) + ":"
    for d in items:
        text += f" \\\n  {d}"
    text += "\n"
    if phony:
        for d in items[1:]:
            text += f"\n{d}:\n"
    return text


def _dep_targets(args, output: str) -> list[str]:
    return list(_opt(args, "MT") or []) or [output]


def planned_outputs(args, output: str) -> dict[str, tuple[str, str]]:
    """{"artifact" | "manifest" | "depfile": (path, the flag that names it)} for every file this
    compile writes: no manifest when the artifact goes to a stream without --manifest, a
    dependency file only with -MD (beside a stream output -- `-`, /dev/null -- only where named)."""
    planned = {"artifact": (output, "-o" if args.output else "output")}
    beside = not outputs.is_stream(output)  # no x.json next to standard output or /dev/null
    if args.manifest or beside:
        planned["manifest"] = (args.manifest or output + ".json", "--manifest" if args.manifest else "manifest")
    if (_opt(args, "MD") or _opt(args, "MMD")) and (_opt(args, "MF") or beside):
        planned["depfile"] = (_opt(args, "MF") or f"{output}.d", "-MF" if _opt(args, "MF") else "dependency file")
    return planned


def print_dependencies(args, defines: dict[str, object]) -> int:
    """-M: the rule naming FILE and everything it imports, to standard output (or -MF); no build."""
    from .. import compile as tilec_compile
    from .main import _print_diagnostics

    result = tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel)
    _print_diagnostics(result.diagnostics, result.sources, args)
    kind = output_kind(args.output, args.emit)
    output = args.output or default_output(args.file, kind)
    text = depfile_text(_dep_targets(args, output), _unique(result.module.files), bool(_opt(args, "MP")))
    if _opt(args, "MF"):
        outputs.check_output(args.MF, "-MF", result.module.files, main_file=args.file)
        _write(args.MF, text.encode(), "-MF")
    else:
        sys.stdout.write(text)
    return 0


def _unique(paths: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for p in paths:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


# ---------------------------------------------------------------------------- the compile cache

_IMPORT = re.compile(r'^[ \t]*import[ \t]+"([^"\n]+)"', re.M)


def _absent_candidates(files: list[str], include_dirs: list[str]) -> list[str]:
    """For each import in the compiled files, the candidate paths searched *before* the one that
    was found (the importing file's directory, then each -I directory). They did not exist at
    compile time; if one appears later, the import would resolve to it, so the entry is stale."""
    found = {os.path.abspath(f) for f in files}
    absent = []
    for f in files:
        try:
            text = Path(f).read_text(errors="replace")
        except OSError:
            continue
        for rel in _IMPORT.findall(text):
            for c in [Path(f).parent / rel] + [Path(d) / rel for d in include_dirs]:
                if os.path.abspath(c) in found:
                    break
                if not c.exists():
                    absent.append(str(c))
    return absent


def _toolchain_identity(args, kind: str) -> str | None:
    """Identity of the toolchain that would build this output, or None when there is none (the
    compile then reports it) -- cheaply: paths, sizes and mtimes, no subprocess."""
    import shutil

    from ..cache import executable_fingerprint

    if kind == "cu":
        return "none"
    if kind in ("hip", "hsaco", "asm"):
        return None  # AMD builds are not cached yet
    parts = [f"CUDA_HOME={os.environ.get('CUDA_HOME', '')}"]
    nvcc = shutil.which("nvcc")
    if _opt(args, "compiler", "nvcc") == "nvrtc":
        from ..targets.cuda.nvrtc import _find_lib

        lib = _find_lib()
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


# Options that do not change what is written (where it goes and how it is reported are handled
# apart): everything else on the command line is part of the cache key, including options added
# later by other back ends.
_NOT_IN_KEY = {"output", "manifest", "M", "MD", "MMD", "MF", "MT", "MP", "no_cache", "debug", "no_color",
               "cache_key", "file", "include_dirs", "emit"}


def cache_key(args) -> str | None:
    """key1 of the cache (see tilec.cache), or None when this compile does not use the cache:
    --no-cache, --dryrun, --keep, --resource-usage, a target other than CUDA, no toolchain."""
    if _opt(args, "no_cache") or _opt(args, "dryrun") or _opt(args, "keep") or _opt(args, "resource_usage"):
        return None
    from .. import __version__
    from ..cache import sha256_bytes, tilec_fingerprint
    from ..targets.registry import lookup

    try:
        kind = output_kind(args.output, args.emit)
        if any(lookup(t).backend != "cuda" for t in (args.target or "sm90").split(",") if t):
            return None
        text = Path(args.file).read_bytes()
    except Exception:  # the compiler reports whatever is wrong
        return None
    tool = _toolchain_identity(args, kind)
    if tool is None:
        return None
    output = args.output or default_output(args.file, kind)
    options = {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_IN_KEY}
    key = {
        "tilec": __version__,
        "tilec_sources": tilec_fingerprint(),
        "toolchain": tool,
        "file": args.file,
        "file_abs": os.path.abspath(args.file),
        "file_sha256": sha256_bytes(text),
        "include_dirs": list(args.include_dirs),
        "include_dirs_abs": [os.path.abspath(d) for d in args.include_dirs],
        "kind": kind,
        "output_name": os.path.basename(output),
        "options": options,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def before_compile(args) -> int | None:
    """Run by the command line before the compiler is imported: -M, then the cache lookup. Returns
    an exit status when it has done the whole job (a cache hit), None to go on compiling."""
    outputs.check_input(args.file)
    if _opt(args, "M"):
        from .main import _parse_defines

        return print_dependencies(args, _parse_defines(args.defines))
    try:
        kind = output_kind(args.output, args.emit)
    except CompileError:
        return None  # reported by the build, after what is wrong with the source or the target
    # refuse what the paths alone show (an output over FILE, a directory, a missing directory)
    # before any work; the imports are checked once they are known
    planned = planned_outputs(args, args.output or default_output(args.file, kind))
    outputs.check_outputs(list(planned.values()), [args.file])
    key = cache_key(args)
    args.cache_key = key
    if key is None:
        return None
    from ..cache import Cache

    entry = Cache().lookup(key, require=("artifact", "manifest"), check_info=_usable_info)
    if entry is None:
        return None
    deps, warnings = entry.meta["info"]["deps"], entry.meta["info"].get("warnings", "")
    output = args.output or default_output(args.file, kind)
    if warnings:
        sys.stderr.write(warnings)
    _write_outputs(args, output, entry.outputs["artifact"], entry.outputs["manifest"], deps)
    return 0


def _usable_info(info: dict) -> bool:
    """What _finish records beside the outputs, in the types a hit needs (else the entry is rebuilt)."""
    deps = info.get("deps")
    return (isinstance(deps, list) and all(isinstance(d, str) for d in deps)
            and isinstance(info.get("warnings", ""), str))


def _write_outputs(args, output: str, artifact: bytes, manifest: bytes, deps: list[str]) -> None:
    """Write the artifact, its manifest and the dependency file, after checking all of them
    against the files the compile read (tilec.cli.outputs): nothing is written if one is refused."""
    planned = planned_outputs(args, output)
    outputs.check_outputs(list(planned.values()), [args.file, *deps], main_file=args.file)
    contents = {"artifact": artifact, "manifest": manifest}
    if "depfile" in planned:
        contents["depfile"] = depfile_text(_dep_targets(args, output), deps, bool(_opt(args, "MP"))).encode()
    for role, (path, flag) in planned.items():
        _write(path, contents[role], flag)


# ---------------------------------------------------------------------------- building


def _driver_api_version(toolchain: str) -> int:
    """The CUDA version (1000*major + 10*minor) of the toolkit that built a binary: the driver must
    support at least that major version to load it."""
    m = re.search(r"(\d+)\.(\d+)", toolchain)
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10 if m else 0


def run_build(args, defines: dict[str, object]) -> int:
    from .. import compile as tilec_compile
    from ..artifacts import dumps
    from ..targets.registry import UnknownTarget, lookup

    names = outputs.parse_targets(args.target)
    try:
        targets = [lookup(t) for t in names]
    except UnknownTarget as e:
        raise CompileError([Diagnostic("error", str(e))]) from None
    kind = output_kind(args.output, args.emit)
    if _opt(args, "keep"):
        outputs.check_keep_dir(args.keep)
    if len(targets) > 1 and kind not in ("fatbin", "header"):
        raise CompileError([Diagnostic("error", f"several targets ({', '.join(names)}) need a fatbin or header "
                                                "output (-o x.fatbin, -o x.h)")])
    backends = {t.backend for t in targets}
    if backends == {"wgsl"} or kind == "wgsl":
        return _build_wgsl(args, defines, targets, names)
    if backends == {"hip"} or kind in ("hip", "hsaco", "asm"):
        return _build_hip(args, defines, targets, names, kind)
    if backends != {"cuda"}:
        # compile anyway, so that the diagnostics about the source and the back end are precise
        tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel,
                      disable=_disabled(args), target=targets[0].name)
    results = [tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel,
                             disable=_disabled(args), target=t.name) for t in targets]
    from ..diagnostics import render
    from .main import _print_diagnostics

    _print_diagnostics(results[0].diagnostics, results[0].sources, args)
    warnings = "".join(render(d, results[0].sources, False) + "\n" for d in results[0].diagnostics)
    stem = Path(args.file).stem
    output = args.output or default_output(args.file, kind)
    archs = [t.arch for t in targets]
    options = {"defines": defines, "kernel": args.kernel, "targets": names, "kind": kind,
               "lineinfo": args.lineinfo, "G": args.G}
    deps = _unique(results[0].module.files)
    if kind == "cu":
        source = _combined_source(results) if len(results) > 1 else results[0].source
        m = _manifest(results[0], kind, archs, "none", options, output)
        return _finish(args, output, source.encode(), dumps(m).encode(), deps, warnings, results[0].sources)
    from ..targets.cuda.toolchain import BuildOptions, build

    def opts_for(kind_: str, archs_: list[str]) -> BuildOptions:
        return BuildOptions(kind_, archs_, lineinfo=args.lineinfo, debug=args.G, keep_dir=args.keep,
                            dryrun=args.dryrun, resource_usage=args.resource_usage, compiler=args.compiler)

    if kind == "header":
        return _build_header(args, results, output, options, deps, warnings, opts_for, stem)
    source = _combined_source(results) if len(results) > 1 else results[0].source
    built = build(source, stem, opts_for(kind, archs))
    if args.dryrun:
        for cmd in built.commands:
            print(cmd)
        return 0
    m = _manifest(results[0], kind, archs, built.toolchain, options, output)
    m["driver_api_version"] = _driver_api_version(built.toolchain)
    if args.resource_usage:
        print(f"{'kernel':<24} {'registers':>9} {'shared B':>9} {'stack B':>8} {'spill st':>9} {'spill ld':>9}")
        for k in results[0].simt.kernels:
            u = built.resource_usage.get(k.name, {})
            print(f"{k.name:<24} {u.get('registers', '?'):>9} {k.shared_bytes:>9} {u.get('stack_bytes', '?'):>8} "
                  f"{u.get('spill_stores', '?'):>9} {u.get('spill_loads', '?'):>9}")
    return _finish(args, output, built.binary, dumps(m).encode(), deps, warnings, results[0].sources)


def _build_hip(args, defines: dict[str, object], targets, names: list[str], kind: str) -> int:
    """AMD (gfx90a, gfx942): HIP source, or a code object / assembly through hipcc or clang-19."""
    from .. import compile as tilec_compile
    from ..diagnostics import render
    from .main import _print_diagnostics

    if len(targets) != 1 or targets[0].backend != "hip":
        raise CompileError([Diagnostic("error", "-o x.hip / x.hsaco / x.s (--emit hip|hsaco|asm) is an AMD output: "
                                                "use one of --target gfx90a, gfx942")])
    if kind not in ("hip", "hsaco", "asm"):
        raise CompileError([Diagnostic("error", f"the {targets[0].name} target emits hip, hsaco or asm, not {kind}: "
                                                "use -o NAME.hsaco (or .hip, .s)")])
    result = tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel,
                           disable=_disabled(args), target=targets[0].name)
    _print_diagnostics(result.diagnostics, result.sources, args)
    warnings = "".join(render(d, result.sources, False) + "\n" for d in result.diagnostics)
    output = args.output or default_output(args.file, kind)
    options = {"defines": defines, "kernel": args.kernel, "targets": names, "kind": kind}
    toolchain = "none"
    artifact = result.source.encode()
    if kind != "hip":
        from ..targets.hip.toolchain import build, resource_usage

        built = build(result.source, Path(args.file).stem, targets[0].arch, kind)
        artifact, toolchain = built.data, built.toolchain
        if kind == "hsaco" and _opt(args, "resource_usage"):
            print(f"{'kernel':<24} {'VGPRs':>6} {'AGPRs':>6} {'SGPRs':>6} {'LDS B':>7} {'scratch B':>9}")
            for name, u in resource_usage(artifact).items():
                print(f"{name:<24} {u.get('vgpr', 0):>6} {u.get('agpr', 0):>6} {u.get('sgpr', 0):>6} "
                      f"{u.get('lds', 0):>7} {u.get('scratch', 0):>9}")
    m = _manifest(result, kind, [targets[0].arch], toolchain, options, output)
    return _finish(args, output, artifact, dumps_manifest(m), _unique(result.module.files), warnings, result.sources)


def dumps_manifest(m: dict) -> bytes:
    from ..artifacts import dumps

    return dumps(m).encode()


def _build_wgsl(args, defines: dict[str, object], targets, names: list[str]) -> int:
    """WebGPU: the artifact is the WGSL source itself (wgpu compiles it when it loads), plus the manifest."""
    from .. import compile as tilec_compile
    from ..artifacts import dumps, manifest
    from ..diagnostics import render
    from .main import _print_diagnostics

    if len(targets) != 1 or targets[0].backend != "wgsl":
        raise CompileError([Diagnostic("error", "-o x.wgsl (--emit wgsl) is WebGPU's output: use --target webgpu "
                                                "alone")])
    if args.emit not in (None, "wgsl") or (args.output and Path(args.output).suffix != ".wgsl"):
        raise CompileError([Diagnostic("error", "the webgpu target emits WGSL source: use -o NAME.wgsl")])
    limits = {}
    if _opt(args, "max_workgroup_storage") is not None:
        limits["shared_memory_bytes"] = args.max_workgroup_storage
    result = tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel,
                           disable=_disabled(args), target=targets[0].name, limits=limits or None)
    _print_diagnostics(result.diagnostics, result.sources, args)
    warnings = "".join(render(d, result.sources, False) + "\n" for d in result.diagnostics)
    output = args.output or default_output(args.file, "wgsl")
    options = {"defines": defines, "kernel": args.kernel, "targets": names, "kind": "wgsl", "limits": limits}
    m = manifest(result, "wgsl", [targets[0].arch], "none", options, os.path.basename(output))
    return _finish(args, output, result.source.encode(), dumps(m).encode(), _unique(result.module.files), warnings)


def _manifest(result, kind: str, archs: list[str], toolchain: str, options: dict, output: str) -> dict:
    """tilec.artifacts.manifest, plus the options the artifact was built with (so that a deployed
    artifact says which -D values and targets it carries)."""
    from ..artifacts import manifest

    m = manifest(result, kind, archs, toolchain, options, os.path.basename(output))
    m["options"] = {k: ({n: v if isinstance(v, (bool, int, float, str)) else str(v) for n, v in v.items()}
                        if k == "defines" else v) for k, v in options.items()}
    return m


def _build_header(args, results, output, options, deps, warnings, opts_for, stem) -> int:
    """One cubin per target, embedded in a C launcher header (tilec.targets.cuda.launcher)."""
    from concurrent.futures import ThreadPoolExecutor

    from ..artifacts import dumps, kernel_entry
    from ..cache import sha256_bytes
    from ..ir.cost import kernel_costs
    from ..targets.cuda.launcher import Image, LauncherError, generate_header
    from ..targets.cuda.toolchain import build

    def one(r):
        return build(r.source, f"{stem}.{r.target.name}", opts_for("cubin", [r.target.arch]))

    if len(results) > 1:
        with ThreadPoolExecutor(min(len(results), os.cpu_count() or 1)) as pool:
            builts = list(pool.map(one, results))
    else:
        builts = [one(results[0])]
    if args.dryrun:
        for b in builts:
            for cmd in b.commands:
                print(cmd)
        return 0
    toolchain = builts[0].toolchain
    images = []
    for r, b in zip(results, builts, strict=True):
        entries = [kernel_entry(k, sk, kernel_costs(k)) for k, sk in zip(r.module.kernels, r.simt.kernels,
                                                                           strict=True)]
        images.append(Image(r.target.name, r.target.arch, b.binary, entries))
    m = _manifest(results[0], "header", [r.target.arch for r in results], toolchain, options, output)
    m["driver_api_version"] = _driver_api_version(toolchain)
    prefix = _opt(args, "header_prefix") or ""
    m["header"] = {
        "prefix": prefix,
        "functions": [f"{prefix}{k['name']}_{f}" for k in images[0].kernels if not k.get("internal")
                      for f in ("launch", "check_device")],
        "images": [{"target": im.target, "arch": im.arch, "bytes": len(im.data), "sha256": sha256_bytes(im.data),
                    "kernels": [{"name": e["name"], "grid": e["grid"], "threads": e["threads"],
                                 "shared_bytes": e["shared_bytes"]} for e in im.kernels]} for im in images],
    }
    try:
        text = generate_header(os.path.basename(output), images, source_name=os.path.basename(args.file),
                               tilec_version=m["tilec_version"], toolchain=toolchain,
                               driver_api_version=m["driver_api_version"], source_hash=m["source_hash"], prefix=prefix)
    except LauncherError as e:
        raise CompileError([Diagnostic("error", str(e))]) from None
    return _finish(args, output, text.encode(), dumps(m).encode(), deps, warnings, results[0].sources)


def _finish(args, output: str, artifact: bytes, manifest_bytes: bytes, deps: list[str], warnings: str,
            sources=None) -> int:
    """Write the outputs (and the depfile), and store them in the cache when this compile has a
    key. `sources` (the compile's SourceManager) lets the cache record the inputs exactly as the
    compiler read them: a file edited during the compile is not cached under its new contents."""
    _write_outputs(args, output, artifact, manifest_bytes, deps)
    key = _opt(args, "cache_key")
    if key:
        from ..cache import Cache

        digests = _dep_digests(deps, sources)
        if digests is not None:
            Cache().store(key, deps, _absent_candidates(deps, list(args.include_dirs)),
                          {"artifact": artifact, "manifest": manifest_bytes}, {"deps": deps, "warnings": warnings},
                          digests=digests)
    return 0


def _dep_digests(deps: list[str], sources) -> dict[str, str] | None:
    """SHA-256 of each input file, or None when one is unreadable or no longer what the compiler read."""
    from ..cache import sha256_bytes

    out = {}
    for d in deps:
        try:
            data = Path(d).read_bytes()
        except OSError:
            return None
        seen = sources.text(d) if sources is not None else None
        if seen is not None and data.decode("utf-8", "replace") != seen:
            return None
        out[d] = sha256_bytes(data)
    return out


def _combined_source(results) -> str:
    """One .cu for several architectures: each target's kernels under its own __CUDA_ARCH__."""
    first = results[0]
    for r in results[1:]:
        for a, b in zip(first.simt.kernels, r.simt.kernels, strict=True):
            if (a.threads, a.shared_bytes) != (b.threads, b.shared_bytes):
                raise CompileError([Diagnostic("error", f"kernel '{a.name}' launches differently on "
                                                        f"{first.target.name} and {r.target.name}; build one "
                                                        "binary per target (or a header: -o x.h)")])
    header, _, _ = first.source.partition('extern "C"')
    parts = [header]
    for i, r in enumerate(results):
        cc = int(r.target.arch.removeprefix("sm_").rstrip("a")) * 10
        nxt = int(results[i + 1].target.arch.removeprefix("sm_").rstrip("a")) * 10 if i + 1 < len(results) else None
        cond = f"__CUDA_ARCH__ >= {cc}" + (f" && __CUDA_ARCH__ < {nxt}" if nxt else "")
        body = 'extern "C"' + r.source.partition('extern "C"')[2]
        parts.append(f"#if {cond}\n{body}\n#endif\n")
    return "\n".join(parts)


def _write(path: str, data: bytes, flag: str = "-o") -> None:
    """Write atomically (tilec.cli.outputs): a reader (or a parallel build) never sees a half-written file."""
    outputs.write_output(path, data, flag)


# ---------------------------------------------------------------------------- tilec cache, --cmake-dir


def cmake_dir() -> str:
    """The CMake package (TilecConfig.cmake) and the Make include (tilec.mk), shipped in the wheel."""
    return str(Path(__file__).resolve().parent.parent / "cmake")


def cmd_cache(argv: list[str]) -> int:
    """`tilec cache stats` / `tilec cache clear`."""
    import argparse

    from ..cache import Cache

    p = argparse.ArgumentParser(prog="tilec cache", description="Inspect or empty the compile cache "
                                "(TILEC_CACHE_DIR, default $XDG_CACHE_HOME/tilec or ~/.cache/tilec).")
    p.add_argument("action", choices=["stats", "clear"])
    args = p.parse_args(argv)
    cache = Cache()
    if args.action == "clear":
        n = cache.clear()
        print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {cache.root}")
        return 0
    st = cache.stats()
    lookups = st["hits"] + st["misses"]
    rate = f" ({100.0 * st['hits'] / lookups:.0f}% hits)" if lookups else ""
    print(f"cache directory   {st['dir']}")
    print(f"entries           {st['entries']}")
    print(f"size              {st['bytes']} bytes ({st['bytes'] / 2**20:.1f} MiB)")
    print(f"hits              {st['hits']}{rate}")
    print(f"misses            {st['misses']}")
    print(f"partial writes    {st['partial_writes']} (left by interrupted compiles; never read)")
    return 0
