"""`tilec` — nvcc-style command line.

Kept import-light: `tilec --help` must answer in well under 0.3 s, so the compiler, numpy and
every toolchain are imported only by the command that needs them. argparse (not typer) because
nvcc's single-dash long flags (-MD, -lineinfo) and attached values (-DNAME=1, -Ipath) need
precise control over parsing.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__

SUBCOMMANDS = ("targets", "run")

USAGE = """tilec FILE [-o OUT] [--target T] [-D NAME=VALUE]... [-I DIR]... [--emit-ir[=after:PASS]] [--kernel NAME]
       tilec run FILE --device cpu [--size M=1000,N=...] [-D NAME=VALUE]...
       tilec targets
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
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override a `const` (repeatable)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="add a directory to the `import` search path (repeatable)")
    p.add_argument("--kernel", metavar="NAME", help="compile only this kernel (default: all)")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks for internal errors")
    p.add_argument("--no-color", action="store_true", help="plain diagnostics even on a terminal")


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilec run", description="Run a kernel on random inputs.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--device", default="cpu", help="cpu: the reference interpreter (default)")
    p.add_argument("--target", help="target to build for when --device is a GPU")
    p.add_argument("--size", action="append", default=[], metavar="M=1000,N=...",
                   help="runtime sizes (default 256 each)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    _common(p)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("--version", "-V"):
        print(f"tilec {__version__}")
        return 0
    if argv and argv[0] == "targets":
        return _cmd_targets()
    if argv and argv[0] == "run":
        args = _run_parser().parse_args(_split_attached(argv[1:]))
        return _guarded(args, _cmd_run)
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
        _print_diagnostics(e.diagnostics, getattr(e, "sources", None), args)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # an internal compiler error: say so in one line unless --debug
        if args.debug:
            raise
        print(f"tilec: internal compiler error: {type(e).__name__}: {e} (rerun with --debug for a traceback)",
              file=sys.stderr)
        return 3


def _print_diagnostics(diags, sources, args) -> None:
    from ..diagnostics import render

    color = sys.stderr.isatty() and not args.no_color and not os.environ.get("NO_COLOR")
    for d in diags:
        print(render(d, sources, color), file=sys.stderr)


def _parse_defines(items: list[str]) -> dict[str, object]:
    from ..diagnostics import CompileError, Diagnostic
    from ..parser.build import parse_define

    out: dict[str, object] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not name.isidentifier():
            raise CompileError([Diagnostic("error", f"-D {item}: expected NAME=VALUE")])
        out[name] = parse_define(value) if eq else 1
    return out


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


def _cmd_compile(args) -> int:
    from ..diagnostics import CompileError, Diagnostic

    if args.emit_ir is not None:
        return _emit_ir(args)
    from ..targets.registry import UnknownTarget, backend_available, lookup

    try:
        target = lookup(args.target or "sm90")
    except UnknownTarget as e:
        raise CompileError([Diagnostic("error", str(e))]) from None
    if not backend_available(target.backend):
        # Still check the source, so the user learns about errors in it.
        from .. import compile as tilec_compile

        result = tilec_compile(args.file, defines=_parse_defines(args.defines), include_dirs=args.include_dirs,
                               kernel=args.kernel)
        _print_diagnostics(result.diagnostics, result.sources, args)
        raise CompileError([Diagnostic(
            "error", f"target '{target.name}' ({target.description}) needs the {target.backend} back end, "
            "which this tilec does not have yet; the source was checked and is valid (use --emit-ir to see it)")])
    raise CompileError([Diagnostic("error", f"back end {target.backend} is not wired into the driver")])


def _emit_ir(args) -> int:
    from .. import compile as tilec_compile
    from ..diagnostics import CompileError, Diagnostic
    from ..driver import pass_names

    mode = args.emit_ir
    names = pass_names()
    if mode == "final":
        want: set[str] = set()
    elif mode == "all":
        want = set(names)
    elif mode.startswith("after:") and mode[6:] in names:
        want = {mode[6:]}
    else:
        raise CompileError([Diagnostic("error", f"--emit-ir={mode}: expected `after:PASS` or `all`; passes: "
                                                f"{', '.join(names)}")])
    result = tilec_compile(args.file, defines=_parse_defines(args.defines), include_dirs=args.include_dirs,
                           kernel=args.kernel, dump_after=want, verify=args.verify_ir)
    _print_diagnostics(result.diagnostics, result.sources, args)
    if mode == "final":
        text = result.ir()
    else:
        text = "".join(f"// ----- IR after {n}\n{result.ir_after[n]}" for n in names if n in result.ir_after)
    if args.output and args.output != "-":
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


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
    return sizes


def _cmd_run(args) -> int:
    from .. import compile as tilec_compile
    from ..diagnostics import CompileError, Diagnostic

    if args.device != "cpu":
        raise CompileError([Diagnostic("error", f"--device {args.device}: only the `cpu` device (the reference "
                                                "interpreter) is available in this build")])
    result = tilec_compile(args.file, defines=_parse_defines(args.defines), include_dirs=args.include_dirs,
                           kernel=args.kernel)
    _print_diagnostics(result.diagnostics, result.sources, args)
    from ..interp.run import random_inputs, run_kernel, summarize

    sizes = _parse_sizes(args.size)
    for k in result.module.kernels:
        arrays = random_inputs(k, sizes, seed=args.seed)
        run_kernel(k, arrays)
        print(summarize(k, arrays))
    return 0
