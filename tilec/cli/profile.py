"""`tilec profile`: an instrumented build, one recorded launch, a Chrome/Perfetto trace and a summary.

    tilec profile flash_attention.tile --target sm90 --size B=4,S=4096,H=16 -o trace.json
        build the kernel instrumented (tilec/ir/profile.py) and plain, launch the instrumented one on random
        inputs with recording on (a GPU on this machine), write the trace, print the time share of each
        phase per warpgroup and the instrumentation's overhead against the plain build
    tilec profile ... --build-dir D             build only; then on the GPU machine (runtime only):
    python -m tilec.runtime.profile_worker D/KERNEL.prof.cubin --baseline D/KERNEL.cubin --size ...

An instrumented artifact also records itself wherever it is loaded with TILEC_PROFILE=trace.json set.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Literal

import typer

from . import params as p


def command(
    file: p.File,
    target: Annotated[str, typer.Option("--target", "-t", metavar="T", help="A CUDA target.")] = "sm90",
    size: p.Sizes = None,
    defines: p.Defines = None,
    include_dirs: p.Includes = None,
    kernel: Annotated[str | None, typer.Option("--kernel", metavar="NAME", help="The kernel to profile (default: "
                                               "the first).", show_default=False)] = None,
    output: Annotated[str, typer.Option("-o", "--output", metavar="TRACE", help="The trace to write.")]
    = "trace.json",
    level: Annotated[Literal["full", "sync"], typer.Option("--level", help="full: tile ops (loads, gemm, "
                                                           "reductions, element-wise loops...) and waits; sync: "
                                                           "waits and issues only (less overhead).")] = "full",
    capacity: Annotated[int, typer.Option("--capacity", metavar="N", help="Marks recorded per warp.")] = 2048,
    blocks: Annotated[int, typer.Option("--blocks", metavar="N", help="Blocks recorded for the summary, the first "
                                        "in launch order.")] = 256,
    trace_blocks: Annotated[int, typer.Option("--trace-blocks", metavar="N", help="Blocks written to the "
                                              "trace.")] = 16,
    json: Annotated[str | None, typer.Option("--json", metavar="FILE", help="Also write the figures (shares, "
                                             "times, overhead) as JSON.", show_default=False)] = None,
    build_dir: Annotated[str | None, typer.Option("--build-dir", metavar="DIR", help="Build into DIR and stop "
                                                  "(record on a GPU machine later).", show_default=False)] = None,
    compiler: Annotated[Literal["nvcc", "nvrtc", "auto"] | None, typer.Option(
        "--compiler", help="nvcc, or NVRTC in process (default: nvcc when on PATH).", show_default=False)] = None,
    color: p.Color = "auto",
    no_color: p.NoColor = False,
    debug: p.Debug = False,
) -> None:
    """Profile inside a kernel: an instrumented build, one recorded launch, a Chrome/Perfetto trace and the time
    share of each phase per warpgroup.

    Builds the kernel with a timestamp per warp at every phase boundary and plainly, launches the instrumented
    build once on random inputs at --size (a GPU on this machine), writes the trace (-o) and prints the summary
    and the instrumentation's overhead. Without a GPU, --build-dir DIR builds and prints the command for the GPU
    machine (`python -m tilec.runtime.profile_worker`). See docs/profiling.md.
    """
    p.finish(main(p.namespace(**locals())))


def _fail(msg: str, status: int = 2) -> int:
    print(f"tilec profile: error: {msg}", file=sys.stderr)
    return status


def sizes_of(items: list[str]) -> dict[str, int]:
    """--size M=1000,N=512 (repeatable) as a dict, parsed as `tilec run` does; ValueError names a malformed item."""
    from ..diagnostics import CompileError
    from .run import parse_sizes

    try:
        return parse_sizes(items)
    except CompileError as e:
        raise ValueError(e.diagnostics[0].message) from None


def _check_target(name: str) -> None:
    from ..targets.registry import lookup

    target = lookup(name)  # (UnknownTarget is a ValueError)
    if "timeline_profile" not in target.features:
        raise ValueError(f"the timeline profiler records clock64 and %globaltimer: it is available on CUDA targets, "
                         f"not {target.name}")


def build(args, folder: str) -> tuple[Path, Path, str]:
    """(instrumented artifact, plain artifact, kernel name) written into folder, with their manifests."""
    import json

    import tilec

    from .common import compile_options

    _check_target(args.target)
    args.no_cache = False
    # one configuration (the consts' defaults and -D), not a tuning database's variants behind a dispatcher
    opts = compile_options(args, targets=(args.target,), tune_db="")
    stem = Path(args.file).stem
    paths = []
    for profiled in (True, False):
        name = f"{stem}{'.prof' if profiled else ''}.cubin"
        art = tilec.compile(args.file, options=opts, emit="cubin", output_name=name,
                            profile=args.level if profiled else "")
        path = Path(folder) / name
        path.write_bytes(art.data)
        Path(str(path) + ".json").write_bytes(art.manifest)
        paths.append(path)
    kernels = [k["name"] for k in json.loads(Path(str(paths[0]) + ".json").read_text())["kernels"]
               if not k.get("internal")]
    kernel = args.kernel or kernels[0]
    if kernel not in kernels:
        raise ValueError(f"no kernel '{kernel}' (kernels: {', '.join(kernels)})")
    return paths[0], paths[1], kernel


def main(args) -> int:
    from ..diagnostics import CompileError
    from ..errors import UserFacingError

    try:
        sizes_of(args.size)
        _check_target(args.target)
    except ValueError as e:
        return _fail(str(e))
    if not args.build_dir:  # timing here: say that there is no GPU before compiling (seconds) for nothing
        try:
            from ..runtime.cuda_driver import Driver

            Driver.get()
        except Exception as e:
            return _fail(f"no GPU here ({e}); profile in two steps: --build-dir DIR here, then "
                         "`python -m tilec.runtime.profile_worker` on the GPU machine", status=1)
    try:
        sizes = sizes_of(args.size)
        folder = args.build_dir or tempfile.mkdtemp(prefix="tilec-profile-")
        Path(folder).mkdir(parents=True, exist_ok=True)
        profiled, plain, kernel = build(args, folder)
    except CompileError as e:
        from .common import print_diagnostics

        print_diagnostics(e.diagnostics, getattr(e, "sources", None), args)
        return 1
    except (ValueError, OSError, UserFacingError) as e:
        return _fail(str(e))
    worker = [str(profiled), "--baseline", str(plain), "--kernel", kernel, "-o", args.output,
              "--capacity", str(args.capacity), "--blocks", str(args.blocks),
              "--trace-blocks", str(args.trace_blocks),
              *(f"--size={k}={v}" for k, v in sizes.items()), *(["--json", args.json] if args.json else [])]
    if args.build_dir:
        print(f"tilec profile: built {profiled} (instrumented) and {plain}; on the GPU machine run\n"
              f"  python -m tilec.runtime.profile_worker {shlex.join(worker)}", file=sys.stderr)
        return 0
    from ..runtime import profile_worker

    try:
        return profile_worker.main(worker)
    except (KeyError, UserFacingError) as e:
        return _fail(f"{type(e).__name__}: {e}" if isinstance(e, KeyError) else str(e))
