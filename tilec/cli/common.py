"""What every `tilec` command shares: colour, printing diagnostics, reading -D values, the options of a command
line, and the error handling that turns exceptions into exit statuses (import-light: no typer, no rich)."""

from __future__ import annotations

import os
import sys


def color_wanted(args, stream=None) -> bool:
    """--color=always|never|auto (auto: `stream` is a terminal and NO_COLOR is unset or empty); --no-color is
    --color=never. An explicit --color=always wins over NO_COLOR, as no-color.org allows."""
    mode = "never" if getattr(args, "no_color", False) else (getattr(args, "color", None) or "auto")
    if mode != "auto":
        return mode == "always"
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def print_diagnostics(diags, sources, args) -> None:
    from ..diagnostics import render

    color = color_wanted(args)
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
    if getattr(args, "max_storage_buffers", None) is not None:
        limits["max_storage_buffers"] = args.max_storage_buffers
    fields = dict(
        defines=parse_defines(args.defines), include_dirs=args.include_dirs, kernel=args.kernel,
        disable=getattr(args, "disable", None) or (), limits=limits,
        toolchain=getattr(args, "compiler", None), opt_level=getattr(args, "opt_level", None),
        toolchain_args=getattr(args, "toolchain_args", None) or (),
        header_prefix=getattr(args, "header_prefix", None) or "",
        keep_dir=getattr(args, "keep", None), dryrun=bool(getattr(args, "dryrun", False)),
        resource_usage=bool(getattr(args, "resource_usage", False)), use_cache=not getattr(args, "no_cache", False),
        tune_db=getattr(args, "tune_db", None),
        remarks=bool(getattr(args, "remarks", False) or getattr(args, "remarks_filter", None)),
        werror=bool(getattr(args, "Werror", False)), warn_conversion=bool(getattr(args, "Wconversion", False)),
        simplify_indices=bool(getattr(args, "simplify_indices", False)),
        realign_rows=bool(getattr(args, "realign_rows", False)))
    # a back end's own options (CompileOptions.backend_options), where the command line says something
    if getattr(args, "lineinfo", False):
        fields["lineinfo"] = True
    if getattr(args, "G", False):
        fields["device_debug"] = True
    if getattr(args, "ptxas_args", None):
        fields["ptxas_args"] = tuple(args.ptxas_args)
    if getattr(args, "no_ptx", False):
        fields["forward_ptx"] = False
    targets = extra.pop("targets", getattr(args, "target", None) or ())
    fields.update(extra)
    return CompileOptions.make(targets, **fields)


def guarded(args, fn) -> int:
    """fn(args), with tilec's exit statuses: 1 for errors reported as diagnostics (source, toolchain, files),
    3 for an internal compiler error (its traceback only with --debug), 130 for Ctrl-C."""
    from ..diagnostics import CompileError

    try:
        return fn(args)
    except CompileError as e:
        print_diagnostics(e.diagnostics, getattr(e, "sources", None), args)
        return 1
    except KeyboardInterrupt:
        return 130
    except FileNotFoundError as e:
        print(f"tilec: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except Exception as e:  # an internal compiler error (user-facing errors are handled first)
        from ..errors import UserFacingError

        if isinstance(e, UserFacingError):
            print(f"tilec: error: {e}", file=sys.stderr)
            return 1
        if getattr(args, "debug", False):
            raise
        print(f"tilec: internal compiler error: {type(e).__name__}: {e} (rerun with --debug for a traceback)",
              file=sys.stderr)
        return 3
