"""`tilec FILE --target T -o OUT`: compile to source, PTX, cubin or fatbin, plus a manifest."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..diagnostics import CompileError, Diagnostic

KINDS = {".cu": "cu", ".ptx": "ptx", ".cubin": "cubin", ".fatbin": "fatbin", ".h": "header"}


def output_kind(output: str | None, emit: str | None) -> str:
    if emit:
        if emit not in KINDS.values():
            raise CompileError([Diagnostic("error", f"--emit {emit}: expected one of {', '.join(KINDS.values())}")])
        return emit
    if output is None:
        return "cubin"
    suffix = Path(output).suffix
    if suffix not in KINDS:
        raise CompileError([Diagnostic("error", f"cannot tell what to emit from '{output}'; use a suffix "
                                                f"({', '.join(KINDS)}) or --emit")])
    return KINDS[suffix]


def run_build(args, defines: dict[str, object]) -> int:
    from .. import compile as tilec_compile
    from ..artifacts import dumps, manifest
    from ..targets.registry import UnknownTarget, lookup

    names = [t for t in (args.target or "sm90").split(",") if t]
    try:
        targets = [lookup(t) for t in names]
    except UnknownTarget as e:
        raise CompileError([Diagnostic("error", str(e))]) from None
    kind = output_kind(args.output, args.emit)
    if kind == "header":
        raise CompileError([Diagnostic("error", "the C launcher header (--emit header) is not implemented yet")])
    if len(targets) > 1 and kind != "fatbin":
        raise CompileError([Diagnostic("error", f"several targets ({', '.join(names)}) need a fatbin output (-o "
                                                "x.fatbin)")])
    backends = {t.backend for t in targets}
    if backends != {"cuda"}:
        # compile anyway, so that the diagnostics about the source and the back end are precise
        tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel,
                      target=targets[0].name)
    results = [tilec_compile(args.file, defines=defines, include_dirs=args.include_dirs, kernel=args.kernel,
                             target=t.name) for t in targets]
    from .main import _print_diagnostics

    _print_diagnostics(results[0].diagnostics, results[0].sources, args)
    stem = Path(args.file).stem
    output = args.output or f"{stem}.{'cu' if kind == 'cu' else kind}"
    source = _combined_source(results) if len(results) > 1 else results[0].source
    archs = [t.arch for t in targets]
    options = {"defines": defines, "kernel": args.kernel, "targets": names, "kind": kind,
               "lineinfo": args.lineinfo, "G": args.G}
    if kind == "cu":
        _write(output, source.encode())
        _write(args.manifest or output + ".json", dumps(manifest(results[0], kind, archs, "none", options,
                                                                 os.path.basename(output))).encode())
        return 0
    from ..targets.cuda.toolchain import BuildOptions, build

    opts = BuildOptions(kind, archs, lineinfo=args.lineinfo, debug=args.G, keep_dir=args.keep,
                        dryrun=args.dryrun, resource_usage=args.resource_usage, compiler=args.compiler)
    built = build(source, stem, opts)
    if args.dryrun:
        for cmd in built.commands:
            print(cmd)
        return 0
    _write(output, built.binary)
    _write(args.manifest or output + ".json",
           dumps(manifest(results[0], kind, archs, built.toolchain, options, os.path.basename(output))).encode())
    if args.resource_usage:
        print(f"{'kernel':<24} {'registers':>9} {'shared B':>9} {'stack B':>8} {'spill st':>9} {'spill ld':>9}")
        for k in results[0].simt.kernels:
            u = built.resource_usage.get(k.name, {})
            print(f"{k.name:<24} {u.get('registers', '?'):>9} {k.shared_bytes:>9} {u.get('stack_bytes', '?'):>8} "
                  f"{u.get('spill_stores', '?'):>9} {u.get('spill_loads', '?'):>9}")
    return 0


def _combined_source(results) -> str:
    """One .cu for several architectures: each target's kernels under its own __CUDA_ARCH__."""
    first = results[0]
    for r in results[1:]:
        for a, b in zip(first.simt.kernels, r.simt.kernels, strict=True):
            if (a.threads, a.shared_bytes) != (b.threads, b.shared_bytes):
                raise CompileError([Diagnostic("error", f"kernel '{a.name}' launches differently on "
                                                        f"{first.target.name} and {r.target.name}; build one "
                                                        "binary per target")])
    header, _, _ = first.source.partition('extern "C"')
    parts = [header]
    for i, r in enumerate(results):
        cc = int(r.target.arch.removeprefix("sm_").rstrip("a")) * 10
        nxt = int(results[i + 1].target.arch.removeprefix("sm_").rstrip("a")) * 10 if i + 1 < len(results) else None
        cond = f"__CUDA_ARCH__ >= {cc}" + (f" && __CUDA_ARCH__ < {nxt}" if nxt else "")
        body = 'extern "C"' + r.source.partition('extern "C"')[2]
        parts.append(f"#if {cond}\n{body}\n#endif\n")
    return "\n".join(parts)


def _write(path: str, data: bytes) -> None:
    """Write atomically: a reader (or a parallel build) never sees a half-written file."""
    if path == "-":
        sys.stdout.buffer.write(data)
        return
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
