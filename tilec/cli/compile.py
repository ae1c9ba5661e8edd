"""`tilec FILE [options]`: the compile command's options (one table: tilec/cli/flags.py parses it, help.py shows
it, completion.py completes it) and what it runs: a build (build.py), `-M` dependencies or `--emit-ir`.

Import-light: a compile-cache hit goes from here to tilec.compile without importing typer, rich, the parser, the
passes, numpy or any toolchain.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

from . import nvcc
from .common import compile_options, guarded, print_diagnostics
from .flags import DIAGNOSTICS, HOPPER, OUTPUTS, PREPROCESSING, TARGETS, TOOLCHAIN, Flag, UsageError, parse

SUMMARY = "Compile a .tile file to CUDA, HIP, WGSL or AscendC source, PTX, a cubin, a fatbin, a header..."


def _opt_level(text: str) -> int:
    if text not in ("0", "1", "2", "3"):
        raise ValueError("expected 0, 1, 2 or 3")
    return int(text)


def _nonnegative(text: str) -> int:
    value = int(text)  # ValueError: not an integer
    if value < 0:
        raise ValueError("expected a number of bytes >= 0")
    return value


def _emit_ir_value(word: str) -> bool:
    return word.startswith("after:") or word in ("all", "final")


def _keep_value(word: str) -> bool:
    return not word.startswith("-")  # as argparse did: `--keep g.tile` is refused as a keep directory


COMPILE_FLAGS: list[Flag] = [
    # Targets
    Flag(("--target", "-t"), "target", "Target(s), comma-separated: sm80 sm86 sm89 sm90 sm100 gfx90a gfx942 "
         "ascend910b webgpu (default sm90). Several make one fatbin or header.", TARGETS, "one", "T",
         complete="target"),
    Flag(("-arch", "--gpu-architecture"), "arch", "nvcc's spelling of one target: sm_90, sm_90a, compute_80.",
         TARGETS, "one", "ARCH", complete="target"),
    Flag(("-code", "--gpu-code"), "code", "The real architectures to build, comma-separated (sm_80,sm_86); with "
         "-arch as nvcc.", TARGETS, "one", "CODE"),
    Flag(("-gencode", "--generate-code"), "gencode", "arch=compute_XX,code=sm_XX (repeatable): each adds a target; "
         "several make one fatbin.", TARGETS, "many", "SPEC"),
    Flag(("--max-workgroup-storage",), "max_workgroup_storage", "webgpu: workgroup memory the device grants "
         "(default 16384, WebGPU's guaranteed minimum).", TARGETS, "one", "BYTES", convert=_nonnegative),
    # Outputs
    Flag(("-o", "--output", "--output-file"), "output", "Output file; its suffix picks what to write (.cu .ptx "
         ".cubin .fatbin .h .hip .hsaco .s .wgsl .cpp .o).", OUTPUTS, "one", "OUT", complete="file"),
    Flag(("--emit",), "emit", "What to write, whatever -o's suffix: cu ptx cubin fatbin header object wgsl hip "
         "hsaco asm cpp obj.", OUTPUTS, "one", "KIND"),
    Flag(("-c", "--compile"), "compile_object", "Write a relocatable object (.o) holding the launcher and the "
         "binary, to link like nvcc -c's.", OUTPUTS),
    Flag(("--manifest",), "manifest", "Where to write the manifest (default OUT.json).", OUTPUTS, "one", "PATH",
         complete="file"),
    Flag(("--header-prefix",), "header_prefix", "Headers: name the launchers PREFIXkernel_launch.", OUTPUTS, "one",
         "PREFIX", default=""),
    Flag(("--kernel",), "kernel", "Compile only this kernel (default: all).", OUTPUTS, "one", "NAME"),
    Flag(("--emit-ir",), "emit_ir", "Print the Tile IR (after all passes, after:PASS, or all) and stop.", OUTPUTS,
         "optional", "after:PASS", const="final", accepts=_emit_ir_value),
    Flag(("--verify-ir",), "verify_ir", "Run the IR verifier after every pass.", OUTPUTS),
    # Preprocessing and dependencies
    Flag(("-D", "--define-macro"), "defines", "Override a `const` (repeatable; -DNAME=VALUE too).", PREPROCESSING,
         "many", "NAME=VALUE"),
    Flag(("-I", "--include-path"), "include_dirs", "Add a directory to the `import` search path (repeatable).",
         PREPROCESSING, "many", "DIR", complete="dir"),
    Flag(("-M", "-MM", "--generate-dependencies", "--generate-nonsystem-dependencies"), "M",
         "Print the dependency rule (FILE and its imports) and stop.", PREPROCESSING),
    Flag(("-MD", "--generate-dependencies-with-compile"), "MD", "Also write the dependency rule to OUT.d (or -MF).",
         PREPROCESSING),
    Flag(("-MMD", "--generate-nonsystem-dependencies-with-compile"), "MMD", "Same as -MD (no system headers).",
         PREPROCESSING),
    Flag(("-MF", "--dependency-output"), "MF", "The file -M / -MD write the rule to.", PREPROCESSING, "one", "FILE",
         complete="file"),
    Flag(("-MT", "--dependency-target-name"), "MT", "The rule's target (default OUT; repeatable).", PREPROCESSING,
         "many", "TARGET"),
    Flag(("-MP", "--generate-dependency-targets"), "MP", "Add an empty rule for each imported file.", PREPROCESSING),
    Flag(("--tune-db",), "tune_db", "The tuning database (default $TILEC_TUNE_DB, else FILE's stem + .tune.json; "
         "'' for none).", PREPROCESSING, "one", "FILE", complete="file"),
    # Toolchain
    Flag(("--compiler",), "compiler", "nvcc (ahead of time) or NVRTC in process (fast; one architecture).",
         TOOLCHAIN, "one", "NAME", choices=("nvcc", "nvrtc"), default="nvcc"),
    Flag(("-O", "--optimize"), "opt_level", "Device code optimization level, -O0 to -O3 (ptxas; hipcc/clang).",
         TOOLCHAIN, "one", "LEVEL", convert=_opt_level),
    Flag(("-Xptxas", "--ptxas-options"), "ptxas_args", "Pass options to ptxas (repeatable; comma-separated).",
         TOOLCHAIN, "many", "ARGS"),
    Flag(("-Xcompiler", "--toolchain-args", "--compiler-options"), "toolchain_args", "Pass options to the device "
         "toolchain: nvcc, NVRTC, hipcc or clang (repeatable; comma-separated).", TOOLCHAIN, "many", "ARGS"),
    Flag(("-lineinfo", "--lineinfo", "--generate-line-info"), "lineinfo", "Line information for profilers.",
         TOOLCHAIN),
    Flag(("-G", "--device-debug"), "G", "Device debug information (slow code).", TOOLCHAIN),
    Flag(("-res-usage", "--resource-usage"), "resource_usage", "Print registers, shared memory and spills per "
         "kernel.", TOOLCHAIN),
    Flag(("--keep",), "keep", "Keep the intermediate files (in DIR, default .).", TOOLCHAIN, "optional", "DIR",
         const=".", accepts=_keep_value, complete="dir"),
    Flag(("--keep-dir",), "keep", "Same as --keep DIR.", TOOLCHAIN, "one", "DIR", complete="dir"),
    Flag(("--dryrun", "-dryrun"), "dryrun", "Print the toolchain commands without running them.", TOOLCHAIN),
    Flag(("--no-cache",), "no_cache", "Neither read nor write the compile cache.", TOOLCHAIN),
    # Hopper code generation
    Flag(("--no-tma",), "disable", "sm90: load pipelined tiles with cp.async instead of TMA + mbarriers.", HOPPER,
         "append-const", const="tma"),
    Flag(("--no-wgmma",), "disable", "sm90: use mma.sync instead of warpgroup wgmma.", HOPPER, "append-const",
         const="wgmma"),
    Flag(("--no-warp-specialize",), "disable", "sm90: no producer warpgroup; the compute threads issue the TMA "
         "copies.", HOPPER, "append-const", const="warp_specialize"),
    # Diagnostics and display
    Flag(("--color",), "color", "Colour diagnostics and help: auto (on a terminal, unless NO_COLOR is set), "
         "always, never.", DIAGNOSTICS, "one", "WHEN", choices=("auto", "always", "never"), default="auto"),
    Flag(("--no-color",), "no_color", "Same as --color=never.", DIAGNOSTICS),
    Flag(("-q", "--quiet"), "quiet", "No progress display.", DIAGNOSTICS),
    Flag(("--debug",), "debug", "Show Python tracebacks for internal errors.", DIAGNOSTICS),
    Flag(("--completion",), "completion", "Print the completion script of SHELL (bash, zsh, fish) and stop.",
         DIAGNOSTICS, "one", "SHELL", choices=("bash", "zsh", "fish")),
    Flag(("--cmake-dir",), "cmake_dir", "Print the directory of tilec's CMake package and Make include, and stop.",
         DIAGNOSTICS),
    Flag(("-V", "--version"), "version", "Print tilec's version and stop (anywhere on the line).", DIAGNOSTICS),
    Flag(("-h", "--help"), "help", "Show this help and stop.", DIAGNOSTICS),
]


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

        print_compile_help(args)
        return 0
    if args.cmake_dir:
        from .build import cmake_dir

        print(cmake_dir())
        return 0
    if args.completion:
        from .completion import script

        sys.stdout.write(script(args.completion))
        return 0
    if args.file is None:
        raise UsageError("no input FILE (a .tile source); `tilec --help` shows the usage, `tilec targets` the targets")
    return guarded(args, run)


def _check_inputs(args) -> None:
    """What the command line names as input, checked before any work (tilec.cli.outputs): FILE a
    regular file, a non-empty --target list, and a warning for each -I that is no directory."""
    from .outputs import check_input, include_dir_warnings, parse_targets

    check_input(args.file)
    if getattr(args, "target", None) is not None:
        parse_targets(args.target)
    print_diagnostics(include_dir_warnings(args.include_dirs), None, args)


def run(args) -> int:
    _check_inputs(args)
    if args.emit_ir is not None:
        return _emit_ir(args)
    if args.ptxas_args:
        _require_cuda(args, "-Xptxas")
    from .build import run_build

    return run_build(args)


def _require_cuda(args, flag: str) -> None:
    """ptxas exists for the CUDA targets only: refuse its options elsewhere rather than ignore them."""
    from ..diagnostics import CompileError, Diagnostic
    from ..targets.registry import DEFAULT_TARGET, UnknownTarget, lookup

    try:
        backend = lookup((args.target or DEFAULT_TARGET).split(",")[0]).backend
    except UnknownTarget:
        return  # the build reports the target
    if backend != "cuda":
        raise CompileError([Diagnostic("error", f"{flag}: ptxas builds the CUDA targets only (this is {backend})")])


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
