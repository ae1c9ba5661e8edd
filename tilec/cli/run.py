"""`tilec run FILE`: run every kernel on random inputs — in the reference interpreter (`--device cpu`, the default
without --target), on the GPU (`--target T`, through gpu.py), or on a back end's CPU model of its device (model.py)
— and with `--check` compare the outputs with the interpreter's (or `--reference`'s)."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from . import params as p

MAX_RUNTIME_SIZE = 2**31 - 1
# `tilec run --device cpu` allocates every argument in host memory before running the interpreter:
# refuse sizes whose arrays together exceed this, rather than fail inside numpy.
RUN_MAX_BYTES = 4 << 30


def command(
    file: p.File,
    device: Annotated[Literal["cpu", "cuda"] | None, typer.Option(
        "--device", help="cpu: the reference interpreter (default without --target); cuda: the GPU.",
        show_default=False)] = None,
    target: p.Target = None,
    check: Annotated[bool, typer.Option("--check", help="Compare the outputs with the interpreter's.")] = False,
    rtol: Annotated[float | None, typer.Option("--rtol", metavar="R", help="--check: relative tolerance (default "
                                               "by dtype).", show_default=False)] = None,
    atol: Annotated[float | None, typer.Option("--atol", metavar="A", help="--check: absolute tolerance (default "
                                               "by dtype).", show_default=False)] = None,
    reference: Annotated[str | None, typer.Option(
        "--reference", metavar="MODULE:FUNCTION", help="--check against this Python function (given the kernel's "
        "inputs as numpy arrays, returning its outputs) instead of the interpreter.", show_default=False)] = None,
    size: p.Sizes = None,
    seed: p.Seed = 0,
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
    """Run a kernel on random inputs and print a summary of each output.

    Without --target (or with --device cpu) the reference interpreter runs the checked Tile IR; with --target T
    the kernel is built for T and runs on its device (--check compares with the interpreter); a target whose
    device is out of reach but has a CPU model (ascend910b) runs on the model. FILE may also be a built artifact
    (x.cubin, x.wgsl with its manifest).
    """
    from .common import guarded

    p.finish(guarded(p.namespace(**locals()), run))


def run(args) -> int:
    from .. import compile as tilec_compile
    from ..diagnostics import CompileError, Diagnostic
    from .compile import check_inputs

    check_inputs(args)
    check_run_numbers(args)
    if args.device is None and args.target:
        from .gpu import _backend

        backend = _backend(args)
        if backend is not None and not backend.run_kind and backend.host_model:  # no runtime: its CPU model
            from .model import cmd_run_model

            return cmd_run_model(args, backend, parse_sizes(args.size))
    if args.device == "cuda" or (args.device is None and args.target):
        from .gpu import cmd_run_gpu

        return cmd_run_gpu(args, parse_sizes(args.size))
    if args.check:
        raise CompileError([Diagnostic("error", "--check compares a GPU run with the interpreter; give --target")])
    from .common import parse_defines, print_diagnostics

    result = tilec_compile(args.file, defines=parse_defines(args.defines), include_dirs=args.include_dirs,
                           kernel=args.kernel)
    print_diagnostics(result.diagnostics, result.sources, args)
    from ..interp import InterpreterError
    from ..interp.run import public_kernels, random_inputs, run_any, summarize
    from .sizes import run_sizes

    sizes = parse_sizes(args.size)
    for k in public_kernels(result.module):
        try:
            need = _argument_bytes(k, run_sizes(k, sizes))
        except ValueError as e:
            raise CompileError([Diagnostic("error", str(e))]) from None
        if need > RUN_MAX_BYTES:
            raise CompileError([Diagnostic("error", f"kernel '{k.name}': these --size values need {need / 2**30:.1f} "
                                                    f"GiB of arguments; the interpreter allows "
                                                    f"{RUN_MAX_BYTES >> 30} GiB (use smaller sizes)")])
        try:
            arrays = random_inputs(k, run_sizes(k, sizes), seed=args.seed)
            run_any(result.module, k, arrays)
        except InterpreterError as e:
            err = CompileError([Diagnostic("error", f"while running kernel '{k.name}': {e.message}", e.span)])
            err.sources = result.sources  # type: ignore[attr-defined]
            raise err from None
        except ValueError as e:  # an unknown --size name
            raise CompileError([Diagnostic("error", str(e))]) from None
        print(summarize(k, arrays))
    return 0


def check_run_numbers(args) -> None:
    """--seed, --rtol and --atol as numbers a run can use, refused by name (numpy's own message named none)."""
    import math

    from ..diagnostics import CompileError, Diagnostic

    if not 0 <= args.seed < 2**64:
        raise CompileError([Diagnostic("error", f"--seed {args.seed}: the seed is an integer from 0 to 2**64-1")])
    for flag in ("rtol", "atol"):
        value = getattr(args, flag, None)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise CompileError([Diagnostic("error", f"--{flag} {value}: a tolerance is a finite number >= 0")])


def _argument_bytes(kernel, sizes: dict[str, int]) -> int:
    import math

    from ..interp.run import shape_of
    from ..ir import tile as T

    buffers = [*kernel.params, *getattr(kernel, "scratch", [])]  # (a multi-launch kernel's scratch too)
    return sum(math.prod(shape_of(p, sizes)) * max(p.dtype.bytes, 1) for p in buffers if isinstance(p, T.Buffer))


def parse_sizes(items: list[str]) -> dict[str, int]:
    """--size M=1000,N=7 (repeatable) as {name: size}; a CompileError for a malformed or out-of-range one."""
    from ..diagnostics import CompileError, Diagnostic

    sizes: dict[str, int] = {}
    for item in items:
        for part in item.split(","):
            if not part.strip():
                continue
            name, eq, value = part.partition("=")
            try:
                sizes[name.strip()] = int(value)
                if not eq or sizes[name.strip()] < 0:
                    raise ValueError
            except ValueError:
                raise CompileError([Diagnostic("error", f"--size {part}: expected NAME=INTEGER (>= 0)")]) from None
            if sizes[name.strip()] > MAX_RUNTIME_SIZE:  # kernels take their sizes as 32-bit integers
                raise CompileError([Diagnostic("error", f"--size {part}: a runtime size is at most "
                                                        f"{MAX_RUNTIME_SIZE}")])
    return sizes
