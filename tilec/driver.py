"""The compilation pipeline: source text → Tile IR → passes → (back end) → artifacts.

`compile()` is the single entry point; the CLI, the Python API and the tests all go through it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .diagnostics import CompileError, Diagnostic, Reporter, SourceManager
from .ir import tile as T
from .ir.printer import module_str
from .passes import check_tile_ops, specialize

Pass = Callable[[T.Module, Reporter], T.Module]

# Target-neutral passes, in order; back ends append their own after these.
FRONT_PASSES: list[tuple[str, Pass]] = [
    (specialize.NAME, specialize.run),
    (check_tile_ops.NAME, check_tile_ops.run),
]


def _target_passes():
    from .passes import (
        layout_inference,
        lower_to_simt,
        pipeline_planning,
        rasterization,
        simplify,
        storage_planning,
    )

    tile_passes = [
        (rasterization.NAME, rasterization.run),
        (layout_inference.NAME, layout_inference.run),
        (pipeline_planning.NAME, pipeline_planning.run),
    ]
    simt_passes = [
        (lower_to_simt.NAME, lower_to_simt.run),
        (simplify.NAME, simplify.run),
        (storage_planning.NAME, storage_planning.run),
    ]
    return tile_passes, simt_passes


DISABLEABLE = frozenset({"tma", "wgmma", "warp_specialize"})
RECURSION_LIMIT = 20_000

TARGET_PASS_NAMES = [
    "rasterization",
    "layout-inference",
    "pipeline-planning",
    "lower-to-simt",
    "simplify",
    "storage-planning",
]


def pass_names(with_target: bool = False) -> list[str]:
    names = ["build"] + [n for n, _ in FRONT_PASSES]
    return names + TARGET_PASS_NAMES if with_target else names


@dataclass
class CompileResult:
    module: T.Module
    sources: SourceManager
    diagnostics: list[Diagnostic]
    ir_after: dict[str, str] = field(default_factory=dict)  # pass name -> printed IR (when asked)
    target: object | None = None  # tilec.targets.registry.Target
    simt: object | None = None  # tilec.ir.simt.SModule, when a target was given
    source: str | None = None  # generated target source (CUDA C++, ...)

    def ir(self) -> str:
        if self.simt is not None:
            from .ir.simt_printer import simt_module_str

            return simt_module_str(self.simt)
        return module_str(self.module)


def compile(
    source: str | Path,
    *,
    text: str | None = None,
    defines: dict[str, object] | None = None,
    include_dirs: list[str] | None = None,
    kernel: str | None = None,
    dump_after: set[str] | None = None,
    verify: bool = False,
    target: str | None = None,
    limits: dict[str, int] | None = None,
    disable: set[str] | None = None,
) -> CompileResult:
    """Compile a .tile file (or `text`, reported under the name `source`) to checked Tile IR.

    Raises CompileError carrying every diagnostic on failure; the diagnostics can be rendered
    with tilec.diagnostics.render using the CompileError's `sources`. `limits` overrides the target's
    resource limits (Target.with_limits: shared_memory_bytes, max_threads, max_storage_buffers, max_grid),
    as `--max-workgroup-storage` does for a WebGPU device that grants more than the default.
    `disable` turns target features off for every kernel: "tma", "wgmma", "warp_specialize" (Hopper).
    """
    import sys

    # The parser bounds every tree at MAX_DEPTH (250) levels; the passes and copy.deepcopy recurse
    # several Python frames a level, more than the default limit of 1000 allows at that depth.
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    from .parser.build import build_module, read_source

    path = str(source)
    sources = SourceManager()
    rep = Reporter()
    try:
        if text is None:
            text = read_source(path)
        module = build_module(path, text, sources, list(include_dirs or []), dict(defines or {}), rep)
        if kernel is not None:
            chosen = [k for k in module.kernels if k.name == kernel]
            if not chosen:
                names = ", ".join(k.name for k in module.kernels)
                raise CompileError([Diagnostic("error", f"no kernel named '{kernel}' (kernels: {names})")])
            module.kernels = chosen
        dumps: dict[str, str] = {}
        want = dump_after or set()
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
        unknown = set(disable or ()) - DISABLEABLE
        if unknown:
            raise CompileError([Diagnostic("error", f"unknown feature(s) to disable: {', '.join(sorted(unknown))} "
                                                    f"(known: {', '.join(sorted(DISABLEABLE))})")])
        for k in module.kernels:
            k.attrs["disabled"] = frozenset(disable or ())
        result = CompileResult(module, sources, rep.diagnostics, dumps)
        if target is not None:
            _compile_for_target(result, target, rep, want, limits)
    except CompileError as e:
        e.sources = sources  # type: ignore[attr-defined]
        if not any(d.severity == "error" for d in e.diagnostics):
            e.diagnostics.extend(d for d in rep.diagnostics if d not in e.diagnostics)
        raise
    return result


def _compile_for_target(result: CompileResult, target_name: str, rep: Reporter, want: set[str],
                        limits: dict[str, int] | None = None) -> None:
    from . import __version__
    from .targets.registry import UnknownTarget, backend_available, lookup

    try:
        target = lookup(target_name)
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
    result.target = target
    _check_target_fit(result.module, target)
    tile_passes, simt_passes = _target_passes()
    module = result.module
    pristine = copy.deepcopy(module) if target.tma_pipelines else None
    simt = _run_target_passes(module, rep, target, tile_passes, simt_passes, want, result.ir_after)
    if pristine is not None:
        _add_fallbacks(result, simt, pristine, rep, target, tile_passes, simt_passes)
    result.simt = simt
    import importlib

    codegen = importlib.import_module(f"tilec.targets.{target.backend}.codegen")
    if hasattr(codegen, "check"):  # what the back end's language refuses, reported at the user's lines
        codegen.check(simt, rep, target)
    result.source = codegen.generate(
        simt, f"tilec {__version__} for {target.name} from {result.module.files[0]}"
    )


# Shared memory declared beyond this multiple of the target's limit (and beyond the floor) is refused before the target
# passes: lowering does work in proportion to tile sizes, and storage planning would refuse it anyway
# (nearer the limit, it does, with the exact layout's figures).
FAR_OVER_SHARED = 4
FAR_OVER_SHARED_FLOOR = 512 * 1024


def _check_target_fit(module: T.Module, target) -> None:
    """Before the target passes do any work: element types the back end cannot hold, and shared
    memory declared far beyond what the target has."""
    import math

    from .ir.dtype_use import unsupported
    from .ir.visit import walk_stmts

    errors = [Diagnostic("error", f"{name} is not supported on {target.name} yet ({where} of kernel '{k.name}')",
                         k.span)
              for k in module.kernels for name, where in unsupported([*k.params, *k.body],
                                                                     target.unsupported_dtypes)]
    for k in module.kernels:
        shared = [s.buffer for s in walk_stmts(k.body) if isinstance(s, T.Alloc) and s.buffer.scope == "shared"]
        sizes = [(b.name, math.prod(b.const_shape or (0,)) * b.dtype.bytes) for b in shared]
        total = sum(n for _, n in sizes)
        if total > max(FAR_OVER_SHARED * target.shared_memory_bytes, FAR_OVER_SHARED_FLOOR):
            detail = ", ".join(f"{name} {n} B" for name, n in sizes)
            errors.append(Diagnostic("error", f"kernel '{k.name}' declares {total} bytes of shared memory ({detail}); "
                                              f"{target.name} allows {target.shared_memory_bytes} bytes per block — "
                                              "use smaller tiles", k.span))
    if errors:
        raise CompileError(errors)


def _run_target_passes(module, rep, target, tile_passes, simt_passes, want, ir_after):
    from .ir.simt_printer import simt_module_str

    for name, run in tile_passes:
        module = run(module, rep, target)
        if name in want:
            ir_after[name] = module_str(module)
    simt = module
    for name, run in simt_passes:
        simt = run(simt, rep, target)
        if name in want:
            ir_after[name] = simt_module_str(simt)
    return simt


FALLBACK_SUFFIX = "__no_tma"


def _add_fallbacks(result, simt, pristine, rep, target, tile_passes, simt_passes) -> None:
    """A kernel that takes TMA tensor maps works only when every tensor's base address and row pitch are
    multiples of 16 bytes; for other launches (a ragged f16 K of 100) the host launches a twin compiled
    without TMA. The twins follow the user's kernels in the module, marked internal."""
    needing = {sk.name for sk in simt.kernels if sk.attrs.get("tensor_maps")}
    if not needing:
        return
    pristine.kernels = [k for k in pristine.kernels if k.name in needing]
    for k in pristine.kernels:
        k.attrs["disabled"] = frozenset(k.attrs.get("disabled", ())) | {"tma"}
        k.name += FALLBACK_SUFFIX
        k.attrs["internal"] = True
    twins = _run_target_passes(pristine, rep, target, tile_passes, simt_passes, set(), {})
    for sk in simt.kernels:
        if sk.name in needing:
            sk.attrs["fallback"] = sk.name + FALLBACK_SUFFIX
    for sk in twins.kernels:
        sk.attrs["internal"] = True
    result.module.kernels.extend(pristine.kernels)
    simt.kernels.extend(twins.kernels)


def _verify(module: T.Module, after: str) -> None:
    from .ir.verify import VerifyError, verify

    try:
        verify(module)
    except VerifyError as e:
        raise AssertionError(f"IR verification failed after {after}: {e}") from e
