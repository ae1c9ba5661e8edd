"""`tilec layout FILE --target T [--buffer NAME] -o out.svg|png|pdf`: plot the layouts the compiler inferred.

Thin glue: the parser here, the work in tilec/inspect (layout.py builds the views, svg.py / raster.py draw them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import params as p

FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}


def command(
    file: p.File,
    target: p.Target = None,
    buffer: Annotated[str | None, typer.Option("--buffer", metavar="NAME", help="Plot only this fragment or "
                                               "shared tile.", show_default=False)] = None,
    output: Annotated[str | None, typer.Option("-o", "--output", metavar="OUT", help="out.svg (no dependency), "
                                               "out.png or out.pdf (matplotlib: pip install 'tilec[plot]'); "
                                               "default FILE's stem + .layout.svg.", show_default=False)] = None,
    size: Annotated[list[str] | None, typer.Option("--size", metavar="M=1000,N=...", help="Runtime sizes of the "
                                                   "traced block's launch (default 256 each, halved together "
                                                   "until the inputs fit in 64 MiB).", show_default=False)] = None,
    full: Annotated[bool, typer.Option("--full", help="Draw every element of every view (default: a summary of "
                                       "each, its first warp or first rows, where the pattern repeats).")] = False,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Do not run the kernel's first block to find bank "
                                           "conflicts (plot the layouts only).")] = False,
    defines: p.Defines = None,
    include_dirs: p.Includes = None,
    kernel: p.Kernel = None,
    no_tma: p.NoTma = False,
    no_wgmma: p.NoWgmma = False,
    no_warp_specialize: p.NoWarpSpecialize = False,
    color: p.Color = "auto",
    no_color: p.NoColor = False,
    debug: p.Debug = False,
) -> None:
    """Plot which thread and register holds each element of a kernel's fragments, and each shared tile's swizzled
    addresses and banks with the bank conflicts of the accesses the lowered code makes.

    The operand layouts of the matrix instructions the gemms use are drawn too. SVG needs nothing; PNG and PDF
    need matplotlib. See docs/inspect.md.
    """
    from .common import guarded
    from .run import parse_sizes

    p.finish(guarded(p.namespace(**locals()), lambda args: cmd_layout(args, parse_sizes)))


def cmd_layout(args, parse_sizes) -> int:
    from ..diagnostics import CompileError, Diagnostic
    from ..inspect.layout import kernel_views
    from ..targets.registry import DEFAULT_TARGET
    from .common import compile_options
    from .outputs import check_input, check_outputs, write_output

    check_input(args.file)
    output = args.output or f"{Path(args.file).stem}.layout.svg"
    fmt = FORMATS.get(Path(output).suffix.lower())
    if fmt is None:
        raise CompileError([Diagnostic("error", f"-o {output}: the plot is written as .svg, .png or .pdf")])
    check_outputs([(output, "-o")], [args.file])
    options = compile_options(args, targets=(args.target or DEFAULT_TARGET,), toolchain=None)
    report = kernel_views(args.file, options, args.buffer, parse_sizes(args.size), not args.no_trace)
    title = f"{Path(args.file).name} for {options.target}"
    if not args.full:
        from ..inspect.views import summary

        report.views = [summary(v) for v in report.views]
    if fmt == "svg":
        from ..inspect.svg import render

        write_output(output, render(report.views, title).encode(), "-o")
    else:
        import os
        import tempfile

        from ..inspect.raster import render as render_raster

        fd, tmp = tempfile.mkstemp(suffix=f".{fmt}")
        os.close(fd)
        try:
            render_raster(report.views, tmp, fmt, title)
            write_output(output, Path(tmp).read_bytes(), "-o")
        finally:
            os.unlink(tmp)
    print(report.summary, end="")
    print(f"wrote {output} ({len(report.views)} view{'s' if len(report.views) != 1 else ''})")
    return 0
