"""The subcommands: `tilec NAME ...` runs the typer function `command` of the module tilec/cli/NAME.py (app.py; a
dash in NAME is an underscore in the module's name);
the line beside each is its entry in `tilec --help`. Adding one: its module and one line here."""

SUBCOMMANDS = {
    "run": "Run a kernel on random inputs: the reference interpreter, a GPU, or a back end's CPU model.",
    "bench": "Time a kernel on the GPU: milliseconds, TFLOP/s, GB/s and the fraction of the roofline.",
    "tune": "Search a kernel's tune() space for the fastest configuration per shape (docs/tuning.md).",
    "targets": "List the targets, their back ends and the toolchains found.",
    "cache": "Inspect (stats) or empty (clear) the compile cache.",
    "layout": "Plot a kernel's fragment and shared-tile layouts, with bank conflicts (docs/inspect.md).",
    "package": "Build a versioned artifact package: targets x kernels, an index, recorded checks (docs/deploy.md).",
    "check-deploy": "Run every kernel of a package on this GPU and driver against its recorded results; a JSON report.",
    "profile": "Profile inside a kernel: a timeline per warp, a Perfetto trace, phase shares (docs/profiling.md).",
}
