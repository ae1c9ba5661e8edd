"""tilec: an ahead-of-time compiler for tile-level GPU kernels.

`tilec.compile` is the one pipeline entry point used by the CLI, the Python API and the tests.
`tilec.load` is the development loop in Python: compile a .tile file through the cache and load it
with tilec.runtime. Importing this package is cheap: the compiler proper is imported on first use,
so that tilec.runtime works where only numpy and the GPU driver are installed.
"""

__version__ = "0.1.0"


def compile(*args, **kwargs):  # noqa: A001  (the natural name for a compiler's entry point)
    from .driver import compile as _compile

    return _compile(*args, **kwargs)


def load(path, target: str = "sm90", defines: dict | None = None, include_dirs=(), kernel: str | None = None,
         compiler: str = "auto", disable=()):
    """A tilec.runtime Module for a .tile file — compiled for `target` through the compile cache (a
    second call with the same source and options is a cache hit) — or for a prebuilt artifact
    (x.cubin, x.ptx, x.fatbin, x.wgsl: exactly tilec.runtime.load).

        mod = tilec.load("softmax.tile", target="sm90", defines={"block_N": 1024})
        y = mod.softmax(x)

    `compiler`: "nvrtc" (in process), "nvcc", or "auto" (NVRTC when its library is installed, else
    nvcc). `disable`: sm90 features to turn off ("tma", "wgmma", "warp_specialize"). The artifact is
    written under the cache directory (tilec/cache.py: TILEC_CACHE_DIR), one folder per option set.
    A source error raises tilec.diagnostics.CompileError, whose message shows the diagnostics."""
    import hashlib
    import json
    from pathlib import Path

    from . import runtime

    path = Path(path)
    if path.suffix != ".tile":
        return runtime.load(path)
    from .cache import default_dir
    from .cli.main import _cmd_compile, _compile_parser
    from .diagnostics import CompileError

    if compiler == "auto":
        from .targets.cuda.nvrtc import _find_lib

        compiler = "nvrtc" if _find_lib() is not None and "," not in target else "nvcc"
    options = [str(path.resolve()), target, sorted((k, str(v)) for k, v in (defines or {}).items()),
               [str(d) for d in include_dirs], kernel, compiler, sorted(disable)]
    folder = hashlib.sha256(json.dumps(options).encode()).hexdigest()[:24]
    suffix = ".wgsl" if target.lower() in ("webgpu", "wgsl") else ".cubin"
    out = default_dir() / "load" / folder / (path.stem + suffix)
    argv = [str(path), "--target", target, "-o", str(out), "--no-color"]
    if suffix == ".cubin":
        argv += ["--compiler", compiler]
    argv += [f"-D{k}={v}" for k, v in (defines or {}).items()]
    for d in include_dirs:
        argv += ["-I", str(d)]
    argv += ["--kernel", kernel] if kernel else []
    argv += [f"--no-{feature.replace('_', '-')}" for feature in disable]
    out.parent.mkdir(parents=True, exist_ok=True)
    args = _compile_parser().parse_args(argv)
    try:
        _cmd_compile(args)  # the command line's own path: cache lookup, compile, atomic writes
    except CompileError as e:
        e.args = (_render(e),)
        raise
    return runtime.load(out)


def _render(error) -> str:
    from .diagnostics import render

    sources = getattr(error, "sources", None)
    return "\n".join(render(d, sources, False) for d in error.diagnostics)


__all__ = ["compile", "load", "__version__"]
