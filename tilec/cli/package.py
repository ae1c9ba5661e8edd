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
    from pathlib import Path

    from ..packaging import build_package
    from .common import parse_defines
    from .run import parse_sizes

    index = build_package(args.files, args.target, Path(args.output), defines=parse_defines(args.defines),
                          include_dirs=args.include_dirs, sizes=parse_sizes(args.size), forward_ptx=not args.no_ptx,
                          toolchain=args.compiler)
    files = sorted({row["file"] for row in index["kernels"]})
    print(f"{args.output}: {len(index['kernels'])} kernel(s) in {len(files)} artifact(s) for {args.target}")
    if args.wheel:
        from ..package_wheel import write_wheel

        print(write_wheel(Path(args.output), args.wheel, args.wheel_version, index))
    return 0
