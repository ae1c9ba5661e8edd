"""The compile command's options: one `Flag` per option with every spelling it has (tilec's, nvcc's, gcc's),
grouped in the panels of `tilec --help`. flags.py parses them, help.py shows them, completion.py completes them,
compile.py runs them. Standard library only."""

from __future__ import annotations

from .flags import DIAGNOSTICS, HOPPER, OUTPUTS, PREPROCESSING, TARGETS, TOOLCHAIN, Flag


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
    Flag(("--fit",), "fit", "When the consts that size the buffers overflow a target's shared memory or threads, "
         "build the largest configuration of them that fits (a remark says which).", TARGETS),
    Flag(("--max-workgroup-storage",), "max_workgroup_storage", "webgpu: workgroup memory the device grants "
         "(default 16384, WebGPU's guaranteed minimum).", TARGETS, "one", "BYTES", convert=_nonnegative),
    Flag(("--max-storage-buffers",), "max_storage_buffers", "webgpu: storage buffers per shader stage the device "
         "grants (default 8, WebGPU's guaranteed minimum).", TARGETS, "one", "N", convert=_nonnegative),
    # Outputs
    Flag(("-o", "--output", "--output-file"), "output", "Output file; its suffix picks what to write (.cu .ptx "
         ".cubin .fatbin .h .hip .hsaco .s .wgsl .js .cpp .o).", OUTPUTS, "one", "OUT", complete="file"),
    Flag(("--emit",), "emit", "What to write, whatever -o's suffix: cu ptx cubin fatbin header object wgsl esm npm "
         "hip hsaco asm cpp obj.", OUTPUTS, "one", "KIND"),
    Flag(("-c", "--compile"), "compile_object", "Write a relocatable object (.o) holding the launcher and the "
         "binary, to link like nvcc -c's.", OUTPUTS),
    Flag(("--manifest",), "manifest", "Where to write the manifest (default OUT.json).", OUTPUTS, "one", "PATH",
         complete="file"),
    Flag(("--header-prefix",), "header_prefix", "Headers: name the launchers PREFIXkernel_launch.", OUTPUTS, "one",
         "PREFIX", default=""),
    Flag(("--no-ptx",), "no_ptx", "Fatbins, headers, objects: leave out the forward-compatible PTX (compute_80) "
         "that lets newer GPUs JIT-compile the kernels.", OUTPUTS),
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
    Flag(("--compiler",), "compiler", "nvcc, or NVRTC in process (+ nvFatbin for a fatbin); default: nvcc when on "
         "PATH, else NVRTC; auto: NVRTC for a cubin when installed.", TOOLCHAIN, "one", "NAME",
         choices=("nvcc", "nvrtc", "auto")),
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
    Flag(("--no-partition",), "disable", "No interior/boundary split: every tile keeps its bounds guards "
         "(partition-boundaries off).", TOOLCHAIN, "append-const", const="partition"),
    Flag(("--realign-rows",), "realign_rows", "Rows not aligned to a vector (odd row lengths) load a vector at a "
         "time in fragment loads (load_realign) and the row kernels' no-TMA twins (off by default: slower on the "
         "H200, docs/tuning.md).", TOOLCHAIN),
    Flag(("--no-realign",), "disable", "Odd-length rows load element by element (the default; accepted for "
         "older scripts).", TOOLCHAIN, "append-const", const="realign"),
    Flag(("--simplify-indices",), "simplify_indices", "Simplify the lowered index arithmetic with TVM's analyzer "
         "(simplify-indices; off by default: slower sm90 gemms on the H200).", TOOLCHAIN),
    Flag(("--no-simplify-indices",), "disable", "Emit index arithmetic as lowered (the default).", TOOLCHAIN,
         "append-const", const="simplify_indices"),
    Flag(("--no-warp-specialize",), "disable", "sm90: no producer warpgroup; the compute threads issue the TMA "
         "copies.", HOPPER, "append-const", const="warp_specialize"),
    # Diagnostics and display
    Flag(("--color",), "color", "Colour diagnostics and help: auto (on a terminal, unless NO_COLOR is set), "
         "always, never.", DIAGNOSTICS, "one", "WHEN", choices=("auto", "always", "never"), default="auto"),
    Flag(("--no-color",), "no_color", "Same as --color=never.", DIAGNOSTICS),
    Flag(("-R", "--remarks"), "remarks", "Print remarks on the compiler's choices: a gemm off the tensor cores and "
         "why, TMA use and twins, reduced pipeline stages, bank conflicts (docs/inspect.md).", DIAGNOSTICS),
    Flag(("-Rpass", "--remarks-filter"), "remarks_filter", "Print only the remarks whose category matches REGEX "
         "(tensor-cores, tma, pipeline, bank-conflicts).", DIAGNOSTICS, "one", "REGEX"),
    Flag(("-Werror",), "Werror", "Make every warning (ptxas spills included) an error.", DIAGNOSTICS),
    Flag(("-Wconversion",), "Wconversion", "Warn at implicit conversions that may change a value: an operand "
         "converted for an operator (f16 + i32), an assignment or a copy to a narrower type (f32 to f16, i32 to "
         "i8). Off by default, as in clang.", DIAGNOSTICS),
    Flag(("-Wno-conversion",), "Wconversion", "Turn -Wconversion off again (the last one given wins).", DIAGNOSTICS,
         const=False),
    Flag(("-q", "--quiet"), "quiet", "No progress display.", DIAGNOSTICS),
    Flag(("--debug",), "debug", "Show Python tracebacks for internal errors.", DIAGNOSTICS),
    Flag(("--completion",), "completion", "Print the completion script of SHELL (bash, zsh, fish) and stop.",
         DIAGNOSTICS, "one", "SHELL", choices=("bash", "zsh", "fish")),
    Flag(("--cmake-dir",), "cmake_dir", "Print the directory of tilec's CMake package and Make include, and stop.",
         DIAGNOSTICS),
    Flag(("--cuda-stub",), "cuda_stub", "Write cuda.h and a stub libcuda.so into DIR, print DIR and stop: for "
         "linking programs on a machine without a GPU driver (docs/deploy.md).", DIAGNOSTICS, "one", "DIR"),
    Flag(("-V", "--version"), "version", "Print tilec's version and stop (anywhere on the line).", DIAGNOSTICS),
    Flag(("-h", "--help"), "help", "Show this help and stop.", DIAGNOSTICS),
]
