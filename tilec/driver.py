"""The compilation pipeline: source text → Tile IR → passes → (back end) → artifacts.

`compile()` compiles one source for one target into IR and generated source; `tilec.compile` (tilec/__init__.py)
is the public entry that also writes artifacts through the compile cache (tilec/outputs.py) and calls this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .diagnostics import CompileError, Diagnostic, Reporter, SourceManager
from .ir import tile as T
from .ir.printer import module_str
from .options import DISABLEABLE, CompileOptions, DefineText
from .parser import tune as tune_space
from .passes import check_threads, check_tile_ops, specialize

Pass = Callable[[T.Module, Reporter], T.Module]

# Target-neutral passes, in order; a back end's pipeline (tilec.targets.backend) follows them.
FRONT_PASSES: list[tuple[str, Pass]] = [
    (specialize.NAME, specialize.run),
    (check_tile_ops.NAME, check_tile_ops.run),
    (check_threads.NAME, check_threads.run),
]
RECURSION_LIMIT = 20_000


def pass_names(target: str | None = None, with_target: bool = False) -> list[str]:
    """What `--emit-ir=after:PASS` accepts: build, the target-neutral passes, and with a target (or
    `with_target`: every back end's) the passes of its back end's pipeline."""
    from .targets.registry import BACKENDS, UnknownTarget, get_backend, lookup

    names = ["build"] + [n for n, _ in FRONT_PASSES]
    if target is not None:
        try:
            t = lookup(target.split(",")[0])
        except UnknownTarget:  # compiling reports it
            return names
        backends = [get_backend(t.backend)] if t.backend in BACKENDS else []
        targets = [t] * len(backends)
    elif with_target:
        backends = [get_backend(b) for b in BACKENDS]
        targets = [None] * len(backends)
    else:
        return names
    for backend, t in zip(backends, targets, strict=True):
        names += [step.name for step in backend.pipeline(t) if step.name not in names]
    return names


def define_value(value):
    """A define's value as the builder binds it: -D text (options.DefineText) read as an int, float, bool or
    dtype name, or else kept as a string; any other value as given."""
    from .ir.dtypes import lookup

    if not isinstance(value, DefineText):
        return value
    t = value.strip()
    if t in ("True", "true", "False", "false"):
        return t in ("True", "true")
    dt = lookup(t)
    if dt is not None:
        return dt
    for conv in (lambda x: int(x, 0), float):
        try:
            return conv(t)
        except ValueError:
            pass
    return str(t)


def define_values(opts: CompileOptions) -> dict[str, object]:
    return {k: define_value(v) for k, v in opts.defines}


@dataclass
class CompileResult:
    module: T.Module
    sources: SourceManager
    diagnostics: list[Diagnostic]
    ir_after: dict[str, str] = field(default_factory=dict)  # pass name -> printed IR (when asked)
    target: object | None = None  # tilec.targets.registry.Target
    simt: object | None = None  # what the back end's pipeline produced (SIMT back ends: tilec.ir.simt.SModule)
    source: str | None = None  # generated target source (CUDA C++, ...)
    options: CompileOptions | None = None  # what it was compiled with
    backend: object | None = None  # tilec.targets.backend.Backend, when a target was given
    remarks: list[Diagnostic] = field(default_factory=list)  # why the compiler chose what it chose (-R)
    # when this build's configuration is worth launching: its tune() consts' when= conditions, folded (True when
    # they have none; a tuned artifact's dispatch table keeps it, tilec.manifest.WHEN_KEY)
    launch_when: object = True

    def ir(self) -> str:
        """The final IR as text: what the back end's last pass produced, printed as that pass prints it (SIMT IR
        for the SIMT back ends), or the checked Tile IR without a target."""
        if self.simt is not None:
            return self.backend.pipeline(self.target)[-1].prints(self.simt)
        return module_str(self.module)


def _launch_condition(context, module):
    """The tune() consts' when= conditions of this build (tilec.parser.tune.when_of), each checked to read only the
    runtime sizes of the source's public kernels."""
    from .manifest import condition_names

    sizes = {v.name for k in module.kernels if k.stage_of is None for v in k.size_vars}
    sizes |= {v.name for seq in module.launches for v in seq.size_vars}
    for axis in context.axes:
        unknown = sorted(condition_names(axis.when) - sizes)
        if unknown:
            raise CompileError([Diagnostic("error", f"when= reads {', '.join(repr(n) for n in unknown)}, which is "
                                                    f"neither a const nor a runtime size of the kernel (its sizes: "
                                                    f"{', '.join(sorted(sizes)) or 'none'})", axis.when_span)])
    return tune_space.when_of(context.axes)


def compile(source: str | Path, options: CompileOptions | None = None, *, text: str | None = None) -> CompileResult:
    """Compile a .tile file (or `text`, reported under the name `source`) to checked Tile IR and, with a
    target, through its back end's pipeline to generated source. The one compile entry: tilec.compile (which
    turns its keywords into the options), the command line, the tuner and tilec.outputs call it.

    `options` (tilec.options.CompileOptions) says everything else. Only the first target is compiled here
    (tilec.outputs builds several into one artifact). Raises CompileError carrying every diagnostic on failure;
    the diagnostics can be rendered with tilec.diagnostics.render using the CompileError's `sources`.
    Of the options, these matter here: `limits` overrides the target's resource limits (Target.with_limits:
    shared_memory_bytes, max_threads, max_storage_buffers, max_grid), as `--max-workgroup-storage` does for a WebGPU
    device that grants more than the default; `disable` turns target features off for every kernel: "tma",
    "wgmma", "warp_specialize"; `schedule` pins parts of every kernel's schedule before the planners run (a
    tilec.ir.schedule.ScheduleRequest or its plain dict form: {"gemms": {7: {"instruction": "mma"}}, "loops":
    {"k": {"stages": 2}}}), a pin a kernel cannot honour being an error at its line; `plan_only` stops after the
    back end's planning passes: the module's kernels carry their schedules (tilec.ir.schedule.resources prices
    them) and nothing is lowered; `profile` makes an instrumented build (tilec/ir/profile.py; CUDA targets): "full"
    (or True) times tile ops and waits, "sync" only the waits and issues (barriers, pipeline waits, TMA and wgmma
    issue and wait); `dump_after` keeps the printed IR after those passes (`result.ir_after`); `verify` runs the
    IR verifiers after every pass.
    """
    import sys

    # The parser bounds every tree at MAX_DEPTH (250) levels; the passes and copy.deepcopy recurse
    # several Python frames a level, more than the default limit of 1000 allows at that depth.
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    from .parser.build import build_module, read_source

    opts = options or CompileOptions()
    target_name = opts.target
    path = str(source)
    sources = SourceManager()
    rep = Reporter()
    try:
        if text is None:
            text = read_source(path)
        with tune_space.building(tune_keys(target_name)) as tune_context:  # tune() consts: this target's default
            module = build_module(path, text, sources, list(opts.include_dirs), define_values(opts), rep)
            tune_space.rename_kernels(module.kernels, module.launches)
            launch_when = _launch_condition(tune_context, module)
        rep.diagnostics[:] = _select_warnings(rep.diagnostics, opts)
        if opts.kernel is not None:
            chosen = [k for k in module.kernels if opts.kernel in (k.name, k.stage_of)]
            if not chosen:
                names = ", ".join([k.name for k in module.kernels if k.stage_of is None]
                                  + [s.name for s in module.launches])
                raise CompileError([Diagnostic("error", f"no kernel named '{opts.kernel}' (kernels: {names})")])
            module.kernels = chosen
            module.launches = [s for s in module.launches if s.name == opts.kernel]
        dumps: dict[str, str] = {}
        want = set(opts.dump_after)
        verify = opts.verify
        if "build" in want:
            dumps["build"] = module_str(module)
        if verify:
            _verify(module, "build")
        for name, run in FRONT_PASSES:
            module = run(module, rep)
            if verify:
                _verify(module, name)
            if name in want:
                dumps[name] = module_str(module)
        unknown = opts.disable - DISABLEABLE
        if unknown:
            raise CompileError([Diagnostic("error", f"unknown feature(s) to disable: {', '.join(sorted(unknown))} "
                                                    f"(known: {', '.join(sorted(DISABLEABLE))})")])
        from .ir.schedule import ScheduleRequest, pin

        try:
            request = ScheduleRequest.parse(opts.schedule)
        except ValueError as e:
            raise CompileError([Diagnostic("error", f"schedule: {e}")]) from None
        for k in module.kernels:
            k.attrs["disabled"] = (opts.disable | (frozenset() if opts.simplify_indices else {"simplify_indices"})
                                   | (frozenset() if opts.realign_rows else {"realign"}))
            pin(k, request)
        result = CompileResult(module, sources, rep.diagnostics, dumps, options=opts, remarks=rep.remarks,
                               launch_when=launch_when)
        if target_name is not None:
            _compile_for_target(result, opts, rep, want, opts.plan_only, verify)
    except CompileError as e:
        e.sources = sources  # type: ignore[attr-defined]
        if not any(d.severity == "error" for d in e.diagnostics):
            e.diagnostics.extend(d for d in rep.diagnostics if d not in e.diagnostics)
        e.diagnostics[:] = _select_warnings(e.diagnostics, opts)
        raise
    return result


def _select_warnings(diagnostics: list[Diagnostic], opts: CompileOptions) -> list[Diagnostic]:
    """Keep the warnings of the categories turned on (-Wconversion), each once (an inlined def or a loop body
    built again would repeat them)."""
    seen = set()
    kept = []
    for d in diagnostics:
        if d.severity == "warning" and d.category:
            key = (d.message, d.span)
            if (d.category == "conversion" and not opts.warn_conversion) or key in seen:
                continue
            seen.add(key)
        kept.append(d)
    return kept


def tune_keys(target: str | None) -> tuple[str, ...]:
    """The keys a `tune()` const's per-target defaults are looked up by: the target's name, then its back end's."""
    from .targets.registry import UnknownTarget, lookup

    if target is None:
        return ()
    try:
        t = lookup(target)
    except UnknownTarget:  # reported when the target is compiled for
        return (target,)
    return (t.name, t.backend)


def lookup_target(name: str, limits: dict[str, int] | None = None):
    """The Target called `name` (limits overridden) and its Backend; CompileError when there is none."""
    from .targets.registry import UnknownTarget, backend_available, get_backend, lookup

    try:
        target = lookup(name)
        if limits:
            target = target.with_limits(**limits)
    except (UnknownTarget, ValueError) as e:
        raise CompileError([Diagnostic("error", str(e))]) from None
    if not backend_available(target.backend):
        raise CompileError(
            [
                Diagnostic(
                    "error",
                    f"target '{target.name}' ({target.description}) needs the {target.backend} back end, which this "
                    "tilec does not have yet; the source is valid (use --emit-ir to see its Tile IR)",
                )
            ]
        )
    return target, get_backend(target.backend)


def _compile_for_target(result: CompileResult, opts: CompileOptions, rep: Reporter, want: set[str],
                        plan_only: bool = False, verify: bool = False) -> None:
    from .version import __version__

    target, backend = lookup_target(opts.target, opts.limits_dict)
    result.target, result.backend = target, backend
    backend.parse_options(opts)  # an option no back end has, or of the wrong type, is an error before any work
    fit = _target_fit_errors(result.module, target)
    if opts.profile:  # an instrumented build (tilec/ir/profile.py): lower-to-simt reads the kernels' attrs
        level = "full" if opts.profile is True else opts.profile
        if level not in PROFILE_LEVELS:
            raise CompileError([Diagnostic("error", f"unknown profile level '{level}' (known: "
                                                    f"{', '.join(PROFILE_LEVELS)})")])
        if "timeline_profile" not in target.features:
            raise CompileError([Diagnostic("error", f"the timeline profiler records clock64 and %globaltimer: it is "
                                                    f"available on CUDA targets, not {target.name}")])
        for k in result.module.kernels:
            k.attrs["profile"] = level
    if plan_only:  # the schedule, priced before lowering (tilec.ir.schedule.resources)
        if fit:
            raise CompileError(fit)
        result.module = backend.plan(result.module, rep, target, result.ir_after, want)
        return
    # Report every error of the kernel in one run: what does not fit the target, what the passes and the
    # lowering refuse, what the back end's language refuses. Only a stage that cannot go on stops early.
    # (The passes stop at their own errors, so the types the target lacks join them only here.)
    try:
        lowered = backend.lower(result.module, rep, target, result.ir_after, want, verify)
        result.simt = lowered
        backend.check(lowered, rep, target)  # what the back end's language refuses, reported at the user's lines
    except CompileError as e:
        e.diagnostics[:0] = fit
        raise
    except Exception:
        if fit:  # a later stage tripped over a type the target lacks: report that instead
            raise CompileError(fit + list(rep.diagnostics)) from None
        raise
    if fit:
        raise CompileError(fit + list(rep.diagnostics))
    result.source = backend.generate(lowered, target, f"tilec {__version__} for {target.name} from "
                                                      f"{comment_safe(result.module.files[0])}")


def comment_safe(name: str) -> str:
    """A file name as it may appear in a generated line comment: printable ASCII, everything else (a line break
    that would end the comment and inject code, a backslash that would continue it) escaped as Python does."""
    return "".join(ch if " " <= ch <= "~" and ch != "\\" else ascii(ch)[1:-1] for ch in name)


PROFILE_LEVELS = ("full", "sync")  # CompileOptions.profile (tilec/ir/profile.py)

# Shared memory declared beyond this multiple of the target's limit (and beyond the floor) is refused before the target
# passes: lowering does work in proportion to tile sizes, and storage planning would refuse it anyway
# (nearer the limit, it does, with the exact layout's figures).
FAR_OVER_SHARED = 4
FAR_OVER_SHARED_FLOOR = 512 * 1024


def _target_fit_errors(module: T.Module, target) -> list[Diagnostic]:
    """Before the target passes do any work: element types the back end cannot hold (returned, so that the
    passes' errors join them), and shared memory declared far beyond what the target has (raised at once,
    with the others: the passes would work in proportion to it)."""
    import math

    from .ir.dtype_use import unsupported
    from .ir.visit import walk_stmts

    errors = [Diagnostic("error", f"{name} is not supported on {target.name} yet ({where} of kernel '{k.name}')",
                         k.span)
              for k in module.kernels for name, where in unsupported([*k.params, *k.body],
                                                                     target.unsupported_dtypes)]
    for k in module.kernels:
        allocs = [s for s in walk_stmts(k.body) if isinstance(s, T.Alloc) and s.buffer.scope == "shared"]
        sizes = [(s.buffer.name, math.prod(s.buffer.const_shape or (0,)) * s.buffer.dtype.bytes, s.span)
                 for s in allocs]
        total = sum(n for _, n, _ in sizes)
        if total > max(FAR_OVER_SHARED * target.shared_memory_bytes, FAR_OVER_SHARED_FLOOR):
            detail = ", ".join(f"{name} {n} B" for name, n, _ in sizes)
            largest = max(sizes, key=lambda x: x[1])  # its allocation is where the error points: shrink it first
            notes = [Diagnostic("note", f"'{name}' takes {n} bytes", span)
                     for name, n, span in sizes if span is not None and span is not largest[2]]
            errors.append(Diagnostic("error", f"kernel '{k.name}' declares {total} bytes of shared memory ({detail}); "
                                              f"{target.name} allows {target.shared_memory_bytes} bytes per block — "
                                              "use smaller tiles", largest[2] or k.span, notes,
                                              category="shared-memory"))
            raise CompileError(errors)
    return errors


def _verify(module: T.Module, after: str) -> None:
    from .ir.verify import VerifyError, verify

    try:
        verify(module)
    except VerifyError as e:
        raise AssertionError(f"IR verification failed after {after}: {e}") from e
