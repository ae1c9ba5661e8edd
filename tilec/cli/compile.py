"""`tilec FILE [options]`: parse the command line (its option table is compile_flags.py) and run it: a build
(build.py), `-M` dependencies or `--emit-ir`.

Import-light: a compile-cache hit goes from here to tilec.compile without importing typer, rich, the parser, the
passes, numpy or any toolchain.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

from . import nvcc
from .common import compile_options, guarded, print_diagnostics
from .compile_flags import COMPILE_FLAGS
from .flags import UsageError, parse


def _split_commas(items: list[str]) -> list[str]:
    """-Xptxas / -Xcompiler values: nvcc splits each at commas (`-Xptxas -v,-O3`)."""
    return [part for item in items for part in item.split(",") if part]


def namespace(argv: list[str]) -> SimpleNamespace:
    """The compile command line as the attributes the build reads (UsageError for a bad one)."""
    args = SimpleNamespace(**parse(COMPILE_FLAGS, argv))
    args.target = nvcc.targets(args.target, args.arch, args.code, args.gencode)
    args.ptxas_args = _split_commas(args.ptxas_args)
    args.toolchain_args = _split_commas(args.toolchain_args)
    if args.compile_object:
        if args.emit not in (None, "object"):
            raise UsageError(f"-c writes an object; it cannot be combined with --emit {args.emit}")
        args.emit = "object"
    return args


def main(argv: list[str]) -> int:
    args = namespace(argv)
    if args.help:
        from .help import print_compile_help

        print_compile_help(args, COMPILE_FLAGS)
        return 0
    if args.cmake_dir:
        from .build import cmake_dir

        print(cmake_dir())
        return 0
    if args.cuda_stub:
        return guarded(args, _write_cuda_stub)
    if args.completion:
        from .completion import script

        sys.stdout.write(script(args.completion))
        return 0
    if args.file is None:
        raise UsageError("no input FILE (a .tile source; `tilec targets` lists the targets)")
    return guarded(args, run)


def _write_cuda_stub(args) -> int:
    from ..targets.registry import write_link_stub

    print(write_link_stub(args.cuda_stub))
    return 0


def check_inputs(args) -> None:
    """What the command line names as input, checked before any work (tilec.cli.outputs): FILE a
    regular file, a non-empty --target list, and a warning for each -I that is no directory."""
    from .outputs import check_input, include_dir_warnings, parse_targets

    check_input(args.file)
    if getattr(args, "target", None) is not None:
        parse_targets(args.target)
    print_diagnostics(include_dir_warnings(args.include_dirs), None, args)


def run(args) -> int:
    check_inputs(args)
    if args.emit_ir is not None:
        return _emit_ir(args)
    if args.ptxas_args:
        _require_assembler(args, "-Xptxas")
    from .build import run_build

    return run_build(args)


def _require_assembler(args, flag: str) -> None:
    """-Xptxas goes to the back end's assembler (ptxas for the CUDA targets): refuse it where there is none, rather
    than ignore it."""
    from ..diagnostics import CompileError, Diagnostic
    from ..targets.registry import DEFAULT_TARGET, UnknownTarget, backend_available, get_backend, lookup

    try:
        target = lookup((args.target or DEFAULT_TARGET).split(",")[0])
    except UnknownTarget:
        return  # the build reports the target
    if backend_available(target.backend) and not get_backend(target.backend).assembler:
        raise CompileError([Diagnostic("error", f"{flag}: the {target.name} target has no ptxas step (only the CUDA "
                                                "targets do)")])


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
    result = tilec_compile(args.file, options=compile_options(args, dump_after=want, verify=args.verify_ir))
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
