"""`tilec bench FILE|ARTIFACT`: time every kernel on the GPU (gpu.py: CUDA events, median after warm-up) and
report TFLOP/s, GB/s and the fraction of the roofline."""

from __future__ import annotations

from typing import Annotated

import typer

from . import params as p


def command(
    file: Annotated[str, typer.Argument(metavar="FILE", help="A .tile file (built for --target) or a built "
                                        "artifact with its manifest.",
                                        show_default=False)],
    target: p.Target = None,
    size: p.Sizes = None,
    warmup: Annotated[int, typer.Option("--warmup", metavar="N", help="Untimed launches first.")] = 10,
    iters: Annotated[int, typer.Option("--iters", metavar="N", help="Timed launches (the median is reported).")] = 100,
    seed: p.Seed = 0,
    defines: p.Defines = None,
    include_dirs: p.Includes = None,
    kernel: p.Kernel = None,
    no_tma: p.NoTma = False,
    no_wgmma: p.NoWgmma = False,
    no_warp_specialize: p.NoWarpSpecialize = False,
    color: p.Color = "auto",
    no_color: p.NoColor = False,
    quiet: p.Quiet = False,
    debug: p.Debug = False,
) -> None:
    """Time each kernel of FILE on the GPU (CUDA events, the median after warm-up) on random inputs of --size."""
    from .common import guarded

    p.finish(guarded(p.namespace(**locals()), run))


def run(args) -> int:
    from .gpu import cmd_bench
    from .run import check_run_numbers, parse_sizes

    check_run_numbers(args)
    return cmd_bench(args, parse_sizes(args.size))
