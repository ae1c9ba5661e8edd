"""tilec: an ahead-of-time compiler for tile-level GPU kernels.

`tilec.compile` is the one entry point used by the CLI, the Python API, the tests and the tuner.
Importing this package is cheap: the compiler proper is imported on first use, so that
tilec.runtime works where only numpy and the GPU driver are installed.
"""

from .version import __version__


def compile(source, target=None, options=None, *, emit=None, output_name=None, **kwargs):  # noqa: A001
    """Compile a .tile file.

    Without `emit`: to checked Tile IR and, with a target, through its back end to generated source; returns a
    tilec.driver.CompileResult (keywords: text, dump_after, verify, defines, include_dirs, kernel, limits,
    disable; see tilec.driver.compile).

    With `emit` (an output kind of the target's back end: "cubin", "fatbin", "header", "hsaco", "wgsl", ...):
    the artifact and its manifest, through the compile cache; returns a tilec.outputs.Artifact
    (see tilec.outputs.compile_artifact). `output_name` is the artifact's file name, which the manifest records.

    `options` is a tilec.options.CompileOptions; `target` and the keywords override its fields.
    """
    if emit is not None:
        from .outputs import compile_artifact

        return compile_artifact(source, target, options, emit=emit, output_name=output_name, **kwargs)
    from .driver import compile as _compile

    return _compile(source, target, options, **kwargs)


__all__ = ["compile", "__version__"]
