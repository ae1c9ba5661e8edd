"""`tilec FILE --target T -o OUT`: write the artifact `tilec.compile(..., emit=KIND)` returns (source, PTX,
cubin, fatbin, C launcher header, code object, WGSL, ...), its manifest and dependency files (-M -MD -MMD -MF
-MT -MP).

Import-light at module level: the compile cache (owned by tilec.compile, tilec/outputs.py) answers a hit
without importing the parser, the passes, numpy or any toolchain, and this module adds nothing heavy.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..diagnostics import CompileError, Diagnostic
from . import outputs
from .common import compile_options, print_diagnostics


def _backends():
    from ..targets.registry import BACKENDS, get_backend

    return [get_backend(b) for b in BACKENDS]


def output_kinds() -> dict[str, str]:
    """File suffix -> output kind, over every back end."""
    return {suffix: kind for b in _backends() for kind, suffix in b.output_kinds.items()}


def output_kind(output: str | None, emit: str | None, target: str | None) -> str:
    """What to write: --emit, else -o's suffix, else the (first) target's back end's default."""
    kinds = output_kinds()
    if emit:
        if emit == "object" and emit not in kinds.values():
            raise CompileError([Diagnostic("error", "-c: this tilec cannot write a relocatable object (.o) for a "
                                                    "GPU target yet")])
        if emit not in kinds.values():
            raise CompileError([Diagnostic("error", f"--emit {emit}: expected one of {', '.join(kinds.values())}")])
        outputs.check_emit_matches_output(output, emit, kinds)
        return emit
    if output is None:
        from ..targets.registry import DEFAULT_TARGET, UnknownTarget, backend_available, get_backend, lookup

        try:
            t = lookup((target or DEFAULT_TARGET).split(",")[0])
        except UnknownTarget:
            return "cubin"  # the compile reports the target
        return get_backend(t.backend).default_kind if backend_available(t.backend) else "cubin"
    suffix = Path(output).suffix
    if suffix not in kinds:
        raise CompileError([Diagnostic("error", f"cannot tell what to emit from '{output}'; use a suffix "
                                                f"({', '.join(kinds)}) or --emit")])
    return kinds[suffix]


def default_output(file: str, kind: str) -> str:
    suffix = next(b.output_kinds[kind] for b in _backends() if kind in b.output_kinds)
    return f"{Path(file).stem}{suffix}"


# ---------------------------------------------------------------------------- dependency files


def _escape_make(path: str) -> str:
    """A file name as Make reads it back: `$`, `#`, `%` (a pattern), spaces and tabs escaped; a newline cannot be
    written in a Make rule at all, so a name holding one is refused rather than turned into a rule of its own."""
    if "\n" in path or "\r" in path:
        raise CompileError([Diagnostic("error", f"cannot write a dependency rule naming {path!r}: Make cannot "
                                                "spell a file name that holds a line break; rename the file")])
    return (path.replace("$", "$$").replace("#", "\\#").replace("%", "\\%")
            .replace(" ", "\\ ").replace("\t", "\\\t"))


def depfile_text(targets: list[str], deps: list[str], phony: bool) -> str:
    """A Make rule with gcc's conventions: `targets: main dep...`, continuation lines, and with
    `phony` (-MP) an empty rule for each dependency but the first, so that deleting an imported
    file does not break the build. `targets` are written as they are (_dep_targets escapes them)."""
    items = [_escape_make(d) for d in deps]
    text = " ".join(targets) + ":"
    for d in items:
        text += f" \\\n  {d}"
    text += "\n"
    if phony:
        for d in items[1:]:
            text += f"\n{d}:\n"
    return text


def _dep_targets(args, output: str) -> list[str]:
    """-MT's targets as given (gcc and nvcc write them so: `-MT "a b"` names two targets), `$` doubled; else the
    output's path, escaped as a file name."""
    return [t.replace("$", "$$") for t in args.MT or []] or [_escape_make(output)]


def _index_backend(kind: str):
    """(back end, index file name) of a package kind."""
    backend = next(b for b in _backends() if kind in b.directory_kinds)
    return backend, backend.directory_kinds[kind][1]


def planned_outputs(args, output: str) -> dict[str, tuple[str, str]]:
    """{"artifact" | "manifest" | "depfile" | "companion:SUFFIX": (path, the flag that names it)} for every file
    this compile writes: no manifest when the artifact goes to a stream without --manifest, a
    dependency file only with -MD (beside a stream output -- `-`, /dev/null -- only where named), a back end's
    companion files (Backend.companions) only beside a file."""
    planned = {"artifact": (output, "-o" if args.output else "output")}
    beside = not outputs.is_stream(output)  # no x.json next to standard output or /dev/null
    if args.manifest or beside:
        planned["manifest"] = (args.manifest or output + ".json", "--manifest" if args.manifest else "manifest")
    if (args.MD or args.MMD) and (args.MF or beside):
        planned["depfile"] = (args.MF or f"{output}.d", "-MF" if args.MF else "dependency file")
    package = getattr(args, "package", None)
    if package:  # a package directory's index (npm: package.json), listing its modules
        planned["index"] = (os.path.join(package[1], _index_backend(package[0])[1]), "package index")
    if beside:  # files the back end writes beside the artifact (an ES module's .d.ts)
        kind = output_kind(args.output, args.emit, args.target)
        for b in _backends():
            for suffix in b.companions.get(kind, ()):
                planned[f"companion:{suffix}"] = (str(Path(output).with_suffix("")) + suffix, f"{suffix} file")
    return planned


def _write_outputs(args, output: str, artifact: bytes, manifest: bytes, deps: list[str]) -> None:
    """Write the artifact, its manifest and the dependency file, after checking all of them
    against the files the compile read (tilec.cli.outputs): nothing is written if one is refused."""
    planned = planned_outputs(args, output)
    outputs.check_outputs(list(planned.values()), [args.file, *deps], main_file=args.file)
    contents = {"artifact": artifact, "manifest": manifest}
    if "index" in planned:
        kind, directory = args.package
        module = os.path.basename(output)
        suffix = Path(module).suffix
        others = [n for n in os.listdir(directory) if n.endswith(suffix) and n != module]
        contents["index"] = _index_backend(kind)[0].directory_index(kind, directory, sorted([*others, module]))
    for role in planned:
        if role.startswith("companion"):  # (a .d.ts beside an ES module): made from the manifest
            kind, suffix = output_kind(args.output, args.emit, args.target), role.split(":", 1)[1]
            backend = next(b for b in _backends() if kind in b.companions)
            contents[role] = backend.companion(kind, suffix, json.loads(manifest))
    if "depfile" in planned:
        contents["depfile"] = depfile_text(_dep_targets(args, output), deps, bool(args.MP)).encode()
    for role, (path, flag) in planned.items():
        _write(path, contents[role], flag)


def print_dependencies(args) -> int:
    """-M: the rule naming FILE and everything it imports, to standard output (or -MF); no build."""
    from .. import compile as tilec_compile
    from ..outputs import unique_paths

    result = tilec_compile(args.file, options=compile_options(args, targets=()))
    print_diagnostics(result.diagnostics, result.sources, args)
    kind = output_kind(args.output, args.emit, args.target)
    output = args.output or default_output(args.file, kind)
    from ..tuning.database import build_input

    options = compile_options(args)
    if not options.targets:
        from ..targets.registry import DEFAULT_TARGET

        options = options.replace(targets=(DEFAULT_TARGET,))
    deps = unique_paths(result.module.files + build_input(args.file, options))
    text = depfile_text(_dep_targets(args, output), deps, bool(args.MP))
    if args.MF:
        outputs.check_output(args.MF, "-MF", result.module.files, main_file=args.file)
        _write(args.MF, text.encode(), "-MF")
    else:
        sys.stdout.write(text)
    return 0


# ---------------------------------------------------------------------------- building


def run_build(args) -> int:
    """Compile FILE to the kind -o / --emit asks for and write it, its manifest and its dependency file."""
    outputs.check_input(args.file)
    if args.M:
        return print_dependencies(args)
    from .. import compile as tilec_compile
    from ..outputs import targets_and_backend
    from ..targets.registry import DEFAULT_TARGET

    options = compile_options(args)
    if not options.targets:
        options = options.replace(targets=(DEFAULT_TARGET,))
    targets_and_backend(args.file, options, None)  # an unknown target, or one without a back end, first
    kind = output_kind(args.output, args.emit, args.target)
    output = args.output or default_output(args.file, kind)
    output = _package_module(args, kind, output)
    if args.keep:
        outputs.check_keep_dir(args.keep)
    # refuse what the paths alone show (an output over FILE, a directory, a missing directory) before any
    # work; the imports are checked once the compile knows them
    outputs.check_outputs(list(planned_outputs(args, output).values()), [args.file])
    spinner = _toolchain_spinner(args, options.targets)

    def compiled(result) -> None:  # the source compiled (not on a cache hit): its warnings, then the toolchain
        print_diagnostics(result.diagnostics, result.sources, args)
        spinner.start()

    try:
        try:
            artifact = tilec_compile(args.file, options=options, emit=kind, output_name=os.path.basename(output),
                                     on_compiled=compiled)
        except CompileError as e:
            options = _fitted(args, options, e)  # (raises e, with what to change, unless --fit found a fit)
            artifact = tilec_compile(args.file, options=options, emit=kind, output_name=os.path.basename(output),
                                     on_compiled=compiled)
    finally:
        spinner.stop()
    if artifact.from_cache and artifact.warnings:
        sys.stderr.write(artifact.warnings)
    elif artifact.toolchain_warnings:
        print_diagnostics(artifact.toolchain_warnings, artifact.result.sources if artifact.result else None, args)
    if getattr(args, "remarks", None) or getattr(args, "remarks_filter", None):
        from .remarks import print_remarks

        print_remarks(artifact.manifest, args)
    if options.dryrun:
        for cmd in artifact.commands or []:
            print(cmd)
        return 0
    if artifact.report:
        sys.stdout.write(artifact.report)
    if {"-v", "--verbose"} & set(getattr(args, "ptxas_args", None) or []):
        sys.stderr.write(ptxas_verbose_report(artifact.manifest))
    _write_outputs(args, output, artifact.data, artifact.manifest, artifact.deps)
    return 0


def _package_module(args, kind: str, output: str) -> str:
    """For a kind written into a package directory (Backend.directory_kinds: --emit npm -o DIR): the directory is
    made (its parent must exist), and the artifact is the module named after FILE inside it."""
    suffix = next((b.directory_kinds[kind][0] for b in _backends() if kind in b.directory_kinds), None)
    if suffix is None:
        return output
    directory = output.rstrip("/") or "/"
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise CompileError([Diagnostic("error", f"--emit {kind} -o '{output}': not a directory (a package "
                                                "directory is made there, or added to)")])
    if not os.path.isdir(os.path.dirname(os.path.abspath(directory))):
        raise CompileError([Diagnostic("error", f"--emit {kind} -o '{output}': directory "
                                                f"'{os.path.dirname(directory) or '.'}' does not exist")])
    os.makedirs(directory, exist_ok=True)
    args.package = (kind, directory)
    return os.path.join(directory, Path(args.file).stem + suffix)


def _fitted(args, options, error: CompileError):
    """After a compile that overflowed a target's shared memory or threads: the largest configuration of the consts
    sizing the buffers that fits (tilec/tuning/fit.py). With --fit, the options that build it (a remark says so);
    without, `error` is raised again with a note naming the consts and their values."""
    from ..tuning.fit import find_fit, resource_errors

    over = resource_errors(error)
    if not over:
        raise error
    fit = find_fit(args.file, options)
    targets = ", ".join(options.targets)
    if fit is None:
        over[0].notes.append(Diagnostic("note", "no smaller configuration of the consts that size the buffers fits "
                                                f"{targets}; change the kernel's tiles by hand"))
        raise error
    if fit.blocker is not None:
        over[0].notes.append(Diagnostic("note", f"with {fit.flags()} the buffers fit {targets}, but then: "
                                                f"{fit.blocker}"))
        raise error
    if not getattr(args, "fit", False):
        over[0].notes.append(Diagnostic("note", f"the consts that size these buffers fit {targets} as {fit.flags()} "
                                                "(the largest such configuration the resource query found); --fit "
                                                "builds it"))
        raise error
    print_diagnostics([Diagnostic("remark", f"--fit: built for {targets} with {fit.changes()}: the consts' own values "
                                            f"need more than the target has ({over[0].message})", over[0].span,
                                  category="fit")], error.sources if hasattr(error, "sources") else None, args)
    return options.replace(defines=tuple(sorted({**options.defines_dict, **fit.defines}.items())))


def _toolchain_spinner(args, targets: tuple[str, ...]):
    """A spinner while the toolchain builds several targets (a fatbin, a header): on a terminal, without --quiet,
    and never for a dry run."""
    from .progress import Spinner

    enabled = len(targets) > 1 and sys.stderr.isatty() and not getattr(args, "quiet", False) and not args.dryrun
    return Spinner(f"building {', '.join(targets)}", enabled)


def _write(path: str, data: bytes, flag: str = "-o") -> None:
    """Write atomically (tilec.cli.outputs): a reader (or a parallel build) never sees a half-written file."""
    outputs.write_output(path, data, flag)


def ptxas_verbose_report(manifest: bytes) -> str:
    """`-Xptxas -v`: ptxas's per-kernel lines (`ptxas info    : Used N registers, ...`), from the manifest's
    "resources", which record ptxas's report whichever toolchain ran it (nvcc, or NVRTC in process, whose log
    tilec reads) and survive a compile-cache hit."""
    import json

    resources = json.loads(manifest or b"{}").get("resources") or {}
    lines = []
    for arch, kernels in resources.items():
        for name, use in kernels.items():
            lines += [f"ptxas info    : Compiling entry function '{name}' for '{arch}'",
                      f"ptxas info    : Function properties for {name}",
                      f"    {use['stack_bytes']} bytes stack frame, {use['spill_stores']} bytes spill stores, "
                      f"{use['spill_loads']} bytes spill loads",
                      f"ptxas info    : Used {use['registers']} registers, {use['static_shared_bytes']} bytes smem"]
    return "".join(line + "\n" for line in lines)


# ---------------------------------------------------------------------------- --cmake-dir


def cmake_dir() -> str:
    """The CMake package (TilecConfig.cmake) and the Make include (tilec.mk), shipped in the wheel."""
    return str(Path(__file__).resolve().parent.parent / "cmake")
