"""The compilation pipeline: source text → Tile IR → passes → (back end) → artifacts.

`compile()` is the single entry point; the CLI, the Python API and the tests all go through it.
"""

from __future__ import annotations

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


def pass_names() -> list[str]:
    return ["build"] + [n for n, _ in FRONT_PASSES]


@dataclass
class CompileResult:
    module: T.Module
    sources: SourceManager
    diagnostics: list[Diagnostic]
    ir_after: dict[str, str] = field(default_factory=dict)  # pass name -> printed IR (when asked)

    def ir(self) -> str:
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
) -> CompileResult:
    """Compile a .tile file (or `text`, reported under the name `source`) to checked Tile IR.

    Raises CompileError carrying every diagnostic on failure; the diagnostics can be rendered
    with tilec.diagnostics.render using the CompileError's `sources`.
    """
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
    except CompileError as e:
        e.sources = sources  # type: ignore[attr-defined]
        if not any(d.severity == "error" for d in e.diagnostics):
            e.diagnostics.extend(d for d in rep.diagnostics if d not in e.diagnostics)
        raise
    return CompileResult(module, sources, rep.diagnostics, dumps)


def _verify(module: T.Module, after: str) -> None:
    from .ir.verify import VerifyError, verify

    try:
        verify(module)
    except VerifyError as e:
        raise AssertionError(f"IR verification failed after {after}: {e}") from e
