"""What every `tilec` command shares: printing diagnostics and reading -D values (import-light)."""

from __future__ import annotations

import os
import sys


def print_diagnostics(diags, sources, args) -> None:
    from ..diagnostics import render

    color = sys.stderr.isatty() and not args.no_color and not os.environ.get("NO_COLOR")
    for d in diags:
        print(render(d, sources, color), file=sys.stderr)


def parse_defines(items: list[str]) -> dict[str, object]:
    """-D NAME=VALUE items as a defines dict. The values stay text (DefineText): the compiler reads them, so
    that a cache hit does not import it."""
    from ..diagnostics import CompileError, Diagnostic
    from ..options import DefineText

    out: dict[str, object] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not name.isidentifier():
            raise CompileError([Diagnostic("error", f"-D {item}: expected NAME=VALUE")])
        out[name] = DefineText(value) if eq else 1
    return out


def compile_options(args, **extra):
    """The tilec.options.CompileOptions of a command line (the namespace goes no further than here)."""
    from ..options import CompileOptions

    limits = {}
    if getattr(args, "max_workgroup_storage", None) is not None:
        limits["shared_memory_bytes"] = args.max_workgroup_storage
    fields = dict(
        defines=parse_defines(args.defines), include_dirs=args.include_dirs, kernel=args.kernel,
        disable=getattr(args, "disable", None) or (), limits=limits,
        toolchain=getattr(args, "compiler", None), lineinfo=bool(getattr(args, "lineinfo", False)),
        device_debug=bool(getattr(args, "G", False)), header_prefix=getattr(args, "header_prefix", None) or "",
        keep_dir=getattr(args, "keep", None), dryrun=bool(getattr(args, "dryrun", False)),
        resource_usage=bool(getattr(args, "resource_usage", False)), use_cache=not getattr(args, "no_cache", False),
        tune_db=getattr(args, "tune_db", None), remarks=bool(getattr(args, "remarks", False)),
        werror=bool(getattr(args, "Werror", False)))
    targets = extra.pop("targets", getattr(args, "target", None) or ())
    fields.update(extra)
    return CompileOptions.make(targets, **fields)
