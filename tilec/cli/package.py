"""`tilec package FILE... --target T,... -o DIR`: a versioned artifact package (tilec/packaging.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from . import params as p


def command(
    files: Annotated[list[str], typer.Argument(metavar="FILE...", help="The .tile sources.", show_default=False)],
    output: Annotated[str, typer.Option("-o", "--output", metavar="DIR", help="The package directory (created).",
                                        show_default=False)],
    target: Annotated[str, typer.Option("--target", "-t", metavar="T,...", help="CUDA targets, comma-separated: one "
                                        "fatbin of all of them per source (default sm80,sm90).")] = "sm80,sm90",
    size: p.Sizes = None,
    no_ptx: Annotated[bool, typer.Option("--no-ptx", help="Leave out the forward-compatible PTX.")] = False,
    compiler: Annotated[str | None, typer.Option("--compiler", metavar="NAME", help="nvcc or nvrtc (default: nvcc "
                                                 "when on PATH, else NVRTC).", show_default=False)] = None,
    wheel: Annotated[str | None, typer.Option("--wheel", metavar="NAME", help="Also write DIR/NAME-VERSION-py3-none-"
                                              "any.whl: the package as the Python module NAME (NAME.load()).",
                                              show_default=False)] = None,
    wheel_version: Annotated[str, typer.Option("--wheel-version", metavar="V", help="The wheel's version.")] = "1.0",
    defines: p.Defines = None,
    include_dirs: p.Includes = None,
    MD: Annotated[bool, typer.Option("-MD", help="Also write a dependency rule for Make / Ninja: DIR/index.json "  # noqa: N803
                                     "depends on every source and every file it imports (to DIR.d, or -MF's file).")
                  ] = False,
    MF: Annotated[str | None, typer.Option("-MF", metavar="FILE", help="Where -MD writes the rule.",  # noqa: N803
                                           show_default=False)] = None,
    MT: Annotated[list[str] | None, typer.Option("-MT", metavar="TARGET", help="The rule's target instead of "  # noqa: N803
                                                 "DIR/index.json (repeatable).", show_default=False)] = None,
    MP: Annotated[bool, typer.Option("-MP", help="Add an empty rule for each imported file.")] = False,  # noqa: N803
    color: p.Color = "auto",
    no_color: p.NoColor = False,
    debug: p.Debug = False,
) -> None:
    """Build a versioned artifact package for deployment: for each FILE one fatbin of every target (and the
    forward-compatible PTX), its manifest, a check file (inputs at a small ragged shape, every runtime size 37
    unless --size says otherwise, and the reference interpreter's outputs), and DIR/index.json naming per kernel
    its file, architectures, SHA-256, tilec version, toolchain and oldest driver. The same inputs give the same
    bytes. `tilec check-deploy DIR` runs it on a GPU; tilec.runtime.load_package(DIR) loads it.
    """
    from .common import guarded

    p.finish(guarded(p.namespace(**locals()), run))


def run(args) -> int:
    import os
    from pathlib import Path

    from ..packaging import INDEX_NAME, build_package
    from . import outputs
    from .common import parse_defines
    from .run import parse_sizes

    depfile = None
    if args.MD:  # as gcc's: -MF, -MT and -MP change what -MD writes
        depfile = args.MF or f"{args.output.rstrip('/') or args.output}.d"  # beside DIR: not a file of the package
        if args.MF:  # refused before anything is built (DIR.d's folder is made with DIR)
            outputs.check_output(depfile, "-MF", args.files)
    deps: list[str] = []
    index = build_package(args.files, args.target, Path(args.output), defines=parse_defines(args.defines),
                          include_dirs=args.include_dirs, sizes=parse_sizes(args.size), forward_ptx=not args.no_ptx,
                          toolchain=args.compiler, deps=deps)
    if depfile is not None:
        from ..outputs import unique_paths
        from .build import _escape_make, _write, depfile_text

        targets = [t.replace("$", "$$") for t in args.MT or []] or [_escape_make(os.path.join(args.output,
                                                                                             INDEX_NAME))]
        outputs.check_output(depfile, "-MF" if args.MF else "dependency file", deps)
        _write(depfile, depfile_text(targets, unique_paths([*args.files, *deps]), bool(args.MP)).encode(),
               "-MF" if args.MF else "dependency file")
    files = sorted({row["file"] for row in index["kernels"]})
    print(f"{args.output}: {len(index['kernels'])} kernel(s) in {len(files)} artifact(s) for {args.target}")
    if args.wheel:
        from ..package_wheel import write_wheel

        print(write_wheel(Path(args.output), args.wheel, args.wheel_version, index))
    return 0
