"""`tilec` — nvcc-style command line.

Kept import-light: `tilec --help` must answer in well under 0.3 s, so the compiler, numpy and
every toolchain are imported only by the command that needs them. argparse (not typer) because
nvcc's single-dash long flags (-MD, -lineinfo) and attached values (-DNAME=1, -Ipath) need
precise control over parsing.
"""

from __future__ import annotations

import argparse
import sys

from ..version import __version__
from .common import compile_options, parse_defines, print_diagnostics

SUBCOMMANDS = ("targets", "run", "bench", "cache", "tune")

USAGE = """tilec FILE [-o OUT] [--target T] [-D NAME=VALUE]... [-I DIR]... [--emit-ir[=after:PASS]] [--kernel NAME]
       tilec run FILE [--device cpu|cuda] [--target T] [--check [--rtol R] [--atol A]] [--size M=1000,N=...]
       tilec bench FILE|ARTIFACT [--target T] [--size M=1000,N=...]
       tilec tune FILE --target T --size M=..,N=.. | --shapes SET [--build-dir D] | tilec tune --collect D
       tilec targets
       tilec cache stats|clear
       tilec --cmake-dir
       tilec --version"""


def _compile_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tilec",
        usage=USAGE,
        description="Compile tile-level GPU kernels (.tile) to CUDA, HIP, WGSL or AscendC.",
        epilog="Subcommands: `tilec run FILE --device cpu` runs a kernel in the reference interpreter; "
        "`tilec targets` lists targets and toolchains. See docs/cli.md.",
    )
    p.add_argument("file", metavar="FILE", help="the .tile source file")
    p.add_argument("-o", "--output", metavar="OUT", help="output file (its suffix picks what to emit)")
    p.add_argument("--target", "-t", metavar="T", help="target: sm80 sm86 sm89 sm90 sm100 gfx90a gfx942 "
                   "ascend910b webgpu (default sm90)")
    _common(p)
    p.add_argument("--emit-ir", nargs="?", const="final", metavar="after:PASS",
                   help="print the Tile IR (after all passes, or `after:PASS`, or `all`) and stop")
    p.add_argument("--verify-ir", action="store_true", help="run the IR verifier after every pass")
    p.add_argument("--emit", metavar="KIND",
                   help="what to write: cu ptx cubin fatbin header wgsl hip hsaco asm (default: from -o's suffix)")
    p.add_argument("--header-prefix", metavar="PREFIX", default="",
                   help="--emit header: name the launchers PREFIXkernel_launch (default: kernel_launch)")
    p.add_argument("-M", dest="M", action="store_true", help="print the dependency rule (FILE and its imports), stop")
    p.add_argument("-MD", dest="MD", action="store_true", help="also write the dependency rule to OUT.d (or -MF)")
    p.add_argument("-MMD", dest="MMD", action="store_true", help="same as -MD (tilec has no system headers)")
    p.add_argument("-MF", dest="MF", metavar="FILE", help="the file -M / -MD write the rule to")
    p.add_argument("-MT", dest="MT", action="append", metavar="TARGET", help="the rule's target (default OUT; "
                   "repeatable)")
    p.add_argument("-MP", dest="MP", action="store_true", help="add an empty rule for each imported file")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the compile cache")
    p.add_argument("--tune-db", metavar="FILE", help="the tuning database (default: $TILEC_TUNE_DB, else "
                   "FILE's stem + .tune.json beside it; '' for none); see docs/tuning.md")
    p.add_argument("--manifest", metavar="PATH", help="where to write the manifest (default OUT.json)")
    p.add_argument("--compiler", choices=["nvcc", "nvrtc"], default="nvcc",
                   help="nvcc (ahead of time) or NVRTC in process (fast; one architecture)")
    p.add_argument("--resource-usage", action="store_true", help="print registers, shared memory, spills per kernel")
    p.add_argument("--keep", metavar="DIR", nargs="?", const=".", help="keep intermediate files (in DIR)")
    p.add_argument("-lineinfo", "--lineinfo", dest="lineinfo", action="store_true", help="line info for profilers")
    p.add_argument("-G", dest="G", action="store_true", help="device debug information (slow code)")
    p.add_argument("--dryrun", action="store_true", help="print the toolchain commands without running them")
    p.add_argument("--max-workgroup-storage", type=int, metavar="BYTES",
                   help="webgpu: workgroup memory the device grants (default 16384, WebGPU's guaranteed minimum)")
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override a `const` (repeatable)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="add a directory to the `import` search path (repeatable)")
    p.add_argument("--kernel", metavar="NAME", help="compile only this kernel (default: all)")
    p.add_argument("--no-tma", dest="disable", action="append_const", const="tma",
                   help="sm90: load pipelined tiles with cp.async instead of TMA + mbarriers")
    p.add_argument("--no-wgmma", dest="disable", action="append_const", const="wgmma",
                   help="sm90: use mma.sync instead of warpgroup wgmma")
    p.add_argument("--no-warp-specialize", dest="disable", action="append_const", const="warp_specialize",
                   help="sm90: no producer warpgroup; the compute threads issue the TMA copies")
    p.add_argument("--no-partition", dest="disable", action="append_const", const="partition",
                   help="no unguarded fast path for interior tiles (every tile takes the bounds-guarded code)")
    p.add_argument("--no-simplify-indices", dest="disable", action="append_const", const="simplify_indices",
                   help="print index arithmetic as lowering built it (no simplification by TVM's analyzer)")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks for internal errors")
    p.add_argument("--no-color", action="store_true", help="plain diagnostics even on a terminal")


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilec run", description="Run a kernel on random inputs.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--device", default=None, choices=["cpu", "cuda"],
                   help="cpu: the reference interpreter (default without --target); cuda: the GPU")
    p.add_argument("--target", help="target to build for on the GPU (default sm90); implies --device cuda")
    p.add_argument("--check", action="store_true", help="compare the GPU's outputs with the interpreter's")
    p.add_argument("--rtol", type=float, metavar="R", help="--check: relative tolerance (default by dtype)")
    p.add_argument("--atol", type=float, metavar="A", help="--check: absolute tolerance (default by dtype)")
    p.add_argument("--reference", metavar="MODULE:FUNCTION", help="--check against this Python function (given "
                   "the kernel's inputs as numpy arrays, returning its outputs) instead of the interpreter")
    p.add_argument("--size", action="append", default=[], metavar="M=1000,N=...",
                   help="runtime sizes (default 256 each)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    _common(p)
    return p


def _bench_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilec bench", description="Time a kernel on the GPU (CUDA events, median "
                                "after warm-up) and report TFLOP/s, GB/s and the fraction of the roofline.")
    p.add_argument("file", metavar="FILE", help="a .tile file (compiled for --target) or a built artifact")
    p.add_argument("--target", help="target to build for (default sm90)")
    p.add_argument("--size", action="append", default=[], metavar="M=1000,N=...",
                   help="runtime sizes (default 256 each)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    _common(p)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("--version", "-V"):
        print(f"tilec {__version__}")
        return 0
    if argv and argv[0] == "--cmake-dir":
        from .build import cmake_dir

        print(cmake_dir())
        return 0
    if argv and argv[0] == "cache":
        from .build import cmd_cache

        return cmd_cache(argv[1:])
    if argv and argv[0] == "tune":  # tilec/cli/tune.py
        from .tune import main as tune_main

        return tune_main(argv[1:])
    if argv and argv[0] == "targets":
        return _guarded(argparse.Namespace(debug="--debug" in argv, no_color=True), lambda _: _cmd_targets())
    if argv and argv[0] == "run":
        args = _run_parser().parse_args(_split_attached(argv[1:]))
        return _guarded(args, _cmd_run)
    if argv and argv[0] == "bench":
        args = _bench_parser().parse_args(_split_attached(argv[1:]))
        return _guarded(args, _cmd_bench)
    args = _compile_parser().parse_args(_split_attached(argv))
    return _guarded(args, _cmd_compile)


def _split_attached(argv: list[str]) -> list[str]:
    """nvcc and gcc accept -DNAME=1 and -Ipath; argparse wants them split."""
    out = []
    for a in argv:
        if len(a) > 2 and a[:2] in ("-D", "-I") and not a.startswith("--"):
            out += [a[:2], a[2:]]
        else:
            out.append(a)
    return out


def _guarded(args, fn) -> int:
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
        if args.debug:
            raise
        print(f"tilec: internal compiler error: {type(e).__name__}: {e} (rerun with --debug for a traceback)",
              file=sys.stderr)
        return 3


def _cmd_targets() -> int:
    from ..targets.registry import TARGETS, backend_available, find_toolchains

    tools = find_toolchains()
    print("targets:")
    for t in TARGETS.values():
        status = "back end available" if backend_available(t.backend) else "no back end yet"
        print(f"  {t.name:<11} {t.arch:<10} {t.description:<30} [{t.backend}: {status}]")
    print("toolchains:")
    for name, where in tools.items():
        print(f"  {name:<9} {where or 'not found'}")
    return 0


def _check_inputs(args) -> None:
    """What the command line names as input, checked before any work (tilec.cli.outputs): FILE a
    regular file, a non-empty --target list, and a warning for each -I that is no directory."""
    from .outputs import check_input, include_dir_warnings, parse_targets

    check_input(args.file)
    if getattr(args, "target", None) is not None:
        parse_targets(args.target)
    print_diagnostics(include_dir_warnings(args.include_dirs), None, args)


def _cmd_compile(args) -> int:
    _check_inputs(args)
    if args.emit_ir is not None:
        return _emit_ir(args)
    from .build import run_build

    return run_build(args)


def _emit_ir(args) -> int:
    from .. import compile as tilec_compile
    from ..diagnostics import CompileError, Diagnostic
    from ..driver import pass_names
    from .build import output_kinds
    from .outputs import check_ir_output, check_outputs, write_output

    check_ir_output(args.output, output_kinds())
    if args.output:
        check_outputs([(args.output, "-o")], [args.file])
    mode = args.emit_ir
    names = pass_names(args.target)
    if mode == "final":
        want: set[str] = set()
    elif mode == "all":
        want = set(names)
    elif mode.startswith("after:") and mode[6:] in names:
        want = {mode[6:]}
    else:
        raise CompileError([Diagnostic("error", f"--emit-ir={mode}: expected `after:PASS` or `all`; passes: "
                                                f"{', '.join(names)}")])
    result = tilec_compile(args.file, options=compile_options(args), dump_after=want, verify=args.verify_ir)
    print_diagnostics(result.diagnostics, result.sources, args)
    if mode == "final":
        text = result.ir()
    else:
        text = "".join(f"// ----- IR after {n}\n{result.ir_after[n]}" for n in names if n in result.ir_after)
    if args.output and args.output != "-":
        check_outputs([(args.output, "-o")], [args.file, *result.module.files], main_file=args.file)
        write_output(args.output, text.encode(), "-o")
    else:
        sys.stdout.write(text)
    return 0


MAX_RUNTIME_SIZE = 2**31 - 1
# `tilec run --device cpu` allocates every argument in host memory before running the interpreter:
# refuse sizes whose arrays together exceed this, rather than fail inside numpy.
RUN_MAX_BYTES = 4 << 30


def _argument_bytes(kernel, sizes: dict[str, int]) -> int:
    import math

    from ..interp.run import shape_of
    from ..ir import tile as T

    return sum(math.prod(shape_of(p, sizes)) * max(p.dtype.bytes, 1) for p in kernel.params
               if isinstance(p, T.Buffer))


def _parse_sizes(items: list[str]) -> dict[str, int]:
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


def _cmd_run(args) -> int:
    from .. import compile as tilec_compile
    from ..diagnostics import CompileError, Diagnostic

    _check_inputs(args)
    if args.device is None and args.target:
        from .gpu import _backend

        backend = _backend(args)
        if backend is not None and not backend.run_kind and backend.host_model:  # no runtime: its CPU model
            from .model import cmd_run_model

            return cmd_run_model(args, backend, _parse_sizes(args.size))
    if args.device == "cuda" or (args.device is None and args.target):
        from .gpu import cmd_run_gpu

        return cmd_run_gpu(args, _parse_sizes(args.size))
    if args.check:
        raise CompileError([Diagnostic("error", "--check compares a GPU run with the interpreter; give --target")])
    result = tilec_compile(args.file, defines=parse_defines(args.defines), include_dirs=args.include_dirs,
                           kernel=args.kernel)
    print_diagnostics(result.diagnostics, result.sources, args)
    from ..interp.run import random_inputs, run_kernel, summarize

    sizes = _parse_sizes(args.size)
    from ..interp import InterpreterError

    for k in result.module.kernels:
        need = _argument_bytes(k, sizes)
        if need > RUN_MAX_BYTES:
            raise CompileError([Diagnostic("error", f"kernel '{k.name}': these --size values need {need / 2**30:.1f} "
                                                    f"GiB of arguments; the interpreter allows "
                                                    f"{RUN_MAX_BYTES >> 30} GiB (use smaller sizes)")])
        try:
            arrays = random_inputs(k, sizes, seed=args.seed)
            run_kernel(k, arrays)
        except InterpreterError as e:
            err = CompileError([Diagnostic("error", f"while running kernel '{k.name}': {e.message}", e.span)])
            err.sources = result.sources  # type: ignore[attr-defined]
            raise err from None
        except ValueError as e:  # an unknown --size name
            raise CompileError([Diagnostic("error", str(e))]) from None
        print(summarize(k, arrays))
    return 0


def _cmd_bench(args) -> int:
    from .gpu import cmd_bench

    return cmd_bench(args, _parse_sizes(args.size))
