"""tilec: an ahead-of-time compiler for tile-level GPU kernels.

`tilec.compile` is the one entry point used by the CLI, the Python API, the tests and the tuner.
`tilec.load` is the development loop in Python: compile a .tile file through the compile cache and
load it with tilec.runtime. Importing this package is cheap: the compiler proper is imported on first
use, so that tilec.runtime works where only numpy and the GPU driver are installed.
"""

from .version import __version__


def compile(source, target=None, options=None, *, emit=None, output_name=None, text=None, **kwargs):  # noqa: A001
    """Compile a .tile file (or `text`, reported under the name `source`).

    `options` is a tilec.options.CompileOptions; `target` and the keywords (its fields: defines, include_dirs,
    kernel, limits, disable, schedule, plan_only, profile, dump_after, verify, ...; or a back end's own options:
    lineinfo, ptxas_args, ...) override its fields. Everything becomes one CompileOptions before compiling.

    Without `emit`: to checked Tile IR and, with a target, through its back end to generated source; returns a
    tilec.driver.CompileResult (see tilec.driver.compile).

    With `emit` (an output kind of the target's back end: "cubin", "fatbin", "header", "hsaco", "wgsl", ...):
    the artifact and its manifest, through the compile cache; returns a tilec.outputs.Artifact
    (see tilec.outputs.compile_artifact: the plain build, which tilec.tuning.multi.compile_artifact gives the
    variants of a tuning database; `on_compiled` and `cached_only` are passed on). `output_name` is the artifact's
    file name, which the manifest records.

    `options` is a tilec.options.CompileOptions; `target` and the keywords override its fields.
    """
    from .options import resolve

    if emit is not None:
        from .tuning.multi import compile_artifact

        run = {k: kwargs.pop(k) for k in ("on_compiled", "cached_only") if k in kwargs}
        return compile_artifact(source, resolve(target, options, **kwargs), emit=emit, output_name=output_name,
                                text=text, **run)
    from .driver import compile as _compile

    return _compile(source, resolve(target, options, **kwargs), text=text)


def load(path, target: str = "sm90", defines: dict | None = None, include_dirs=(), kernel: str | None = None,
         compiler: str = "auto", disable=(), no_jit: bool | None = None, background: bool = False, fallback=None,
         tune_db: str | None = None):
    """A tilec.runtime Module for a .tile file — compiled for `target` through the compile cache (a
    second call with the same source and options is a cache hit) — or for a prebuilt artifact
    (x.cubin, x.ptx, x.fatbin, x.wgsl: exactly tilec.runtime.load).

        mod = tilec.load("softmax.tile", target="sm90", defines={"block_N": 1024})
        y = mod.softmax(x)

    `target="cpu"`: the reference interpreter runs the checked kernels (numpy arrays, no GPU, no
    toolchain; tilec/interp/module.py), called the same way: `y = mod.softmax(x)`.

    `compiler`: "nvrtc" (in process), "nvcc", or "auto" (NVRTC when its library is installed, else
    nvcc). `disable`: sm90 features to turn off ("tma", "wgmma", "warp_specialize"). The artifact is
    written under the cache directory (tilec/cache.py: TILEC_CACHE_DIR), one folder per option set.
    A source error raises tilec.diagnostics.CompileError, whose message shows the diagnostics.

    `no_jit` (default: the environment's TILEC_NO_JIT): the no-JIT guarantee -- nothing compiles, neither tilec
    (a cache miss raises tilec.runtime.JitRefused, naming the kernels, the GPU and the missing artifact) nor the
    driver (a PTX image raises it too).

    `background=True` returns at once a module whose calls run a fallback until the specialized build, compiling in
    a thread, is ready, then the specialized module (on the caller's stream, without a sync; never inside a CUDA
    graph capture): tilec.runtime.background. The fallback is `fallback` (an artifact's path, or a loaded module of
    the same kernels), else the kernels' generic configuration -- the build without the tuning database, compiled
    beside the specialized one, when a database applies (else the first call waits for the build). `tune_db`: the
    tuning database ("" for none; default: the file's own, tilec/tuning/database.py)."""
    from pathlib import Path

    path = Path(path)
    if path.suffix != ".tile":
        from . import runtime

        return runtime.load(path, no_jit=no_jit)
    if target == "cpu":
        return _load_interpreted(path, defines, include_dirs, kernel)
    option_args = dict(defines=dict(defines or {}), include_dirs=[str(d) for d in include_dirs], kernel=kernel,
                       disable=disable, toolchain=compiler, tune_db=tune_db)
    if background:
        from .runtime.nojit import no_jit_requested

        if no_jit_requested(no_jit):
            raise ValueError("tilec.load(background=True) compiles, which the no-JIT guarantee (TILEC_NO_JIT or "
                             "no_jit=True) forbids: load a prebuilt artifact instead")
        return _background(path, target, option_args, kernel, fallback)
    return _load_compiled(path, target, _options(target, option_args), kernel, no_jit)


def _options(target: str, option_args: dict):
    """tilec.load's CompileOptions."""
    from .options import CompileOptions, DefineText

    defines = {k: DefineText(str(v)) for k, v in option_args["defines"].items()}
    return CompileOptions.make(target, **{**option_args, "defines": defines})


def _background(path, target: str, option_args: dict, kernel, fallback):
    """tilec.load(background=True): the specialized build in a thread, and its fallback (see load). The caller
    waits for nothing but two threads' start: the options are made, and the runtime and the compiler imported, in
    the threads (an error in the options is raised by the calls and wait(), as a compile error is)."""
    import os
    import threading

    from .runtime.background import BackgroundModule

    made: dict = {}
    lock = threading.Lock()

    def options():  # once, by whichever thread needs them first
        with lock:
            if "options" not in made:
                made["options"] = _options(target, option_args)
            return made["options"]

    def build():
        return _load_compiled(path, target, options(), kernel, False)

    if fallback is None:
        def make_fallback():
            from .tuning.multi import plan_for

            if plan_for(path, options()) is None:  # no tuning database: the generic build is the specialized one
                raise LookupError(f"{path}: no generic configuration apart from the specialized build")
            return _load_compiled(path, target, options().replace(tune_db=""), kernel, False)
    elif isinstance(fallback, (str, os.PathLike)):
        def make_fallback():
            from . import runtime

            return runtime.load(fallback)
    else:
        def make_fallback():
            return fallback
    return BackgroundModule(build, make_fallback, str(path))


def _load_compiled(path, target: str, options, kernel, no_jit):
    """The Module of `path` compiled with `options` through the compile cache (tilec.load)."""
    import hashlib
    import json
    import os
    from pathlib import Path

    from . import runtime
    from .cache import default_dir
    from .diagnostics import CompileError
    from .outputs import NotCached
    from .runtime.nojit import no_jit_requested

    try:
        from .driver import lookup_target

        _, backend = lookup_target(target.split(",")[0])
        kind = backend.run_kind  # what tilec.runtime loads for this back end (a cubin, WGSL, ...)
        if not kind:
            from .diagnostics import Diagnostic

            raise CompileError([Diagnostic("error", f"tilec.runtime cannot load {backend.name} artifacts yet")])
        artifact = compile(path, options=options, emit=kind, cached_only=no_jit_requested(no_jit))
    except NotCached:
        raise runtime.JitRefused(_cache_miss_message(path, target, kernel)) from None
    except CompileError as e:
        e.args = (_render(e),)
        raise
    folder = hashlib.sha256(json.dumps([str(path.resolve()), repr(options)]).encode()).hexdigest()[:24]
    out = default_dir() / "load" / folder / f"{path.stem}{backend.output_kinds[kind]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    for target_path, data in ((out, artifact.data), (Path(f"{out}.json"), artifact.manifest)):
        temporary = target_path.with_name(f".{target_path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(data)
        os.replace(temporary, target_path)  # atomic: a concurrent load sees the old file or the new one
    return runtime.load(out, no_jit=no_jit)


def _cache_miss_message(path, target: str, kernel: str | None) -> str:
    """JitRefused's message for a tilec.load that would compile: the kernels, the GPU, what is missing."""
    import re

    try:
        names = [kernel] if kernel else re.findall(r"^\s*kernel\s+(\w+)", path.read_text(), re.M)
    except OSError:
        names = []
    try:
        from .runtime.cuda_driver import Driver
        from .runtime.module import describe_gpu

        gpu = describe_gpu(Driver.get(0), 0)
    except Exception:  # noqa: BLE001 -- no driver here: the message says so rather than failing another way
        gpu = "GPU 0 (not queried: no CUDA driver)"
    return (f"{path}: kernel(s) {', '.join(names) or '?'}: the no-JIT guarantee is on (TILEC_NO_JIT or no_jit=True), "
            f"and the compile cache holds no {target} build of this source with these options, for {gpu}; missing: "
            f"the compiled artifact (build it ahead of time: tilec {path.name} --target {target} -o "
            f"{path.stem}.cubin, then load that file; or run tilec.load once without the guarantee to fill the "
            "cache)")


def _load_interpreted(path, defines, include_dirs, kernel):
    from .diagnostics import CompileError
    from .driver import compile as _compile
    from .interp.module import InterpModule
    from .options import CompileOptions, DefineText

    try:
        result = _compile(path, CompileOptions.make(defines={k: DefineText(str(v)) for k, v in (defines or {}).items()},
                                                    include_dirs=[str(d) for d in include_dirs], kernel=kernel))
    except CompileError as e:
        e.args = (_render(e),)
        raise
    return InterpModule(result.module, str(path))


def _render(error) -> str:
    from .diagnostics import render

    sources = getattr(error, "sources", None)
    return "\n".join(render(d, sources, False) for d in error.diagnostics)


__all__ = ["compile", "load", "__version__"]
