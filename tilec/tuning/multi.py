"""One artifact that picks its configuration per shape: the build side of a tuning database entry.

When a database entry applies to a compile (tilec.tuning.database.entry_for), `plan_for` selects the few
configurations that win across its shapes. With one, the artifact is simply that configuration. With several,
each is compiled as its own kernel (`gemm__cfg0`, `gemm__cfg1`, ...; the back end must accept several kernels in
one source: CUDA and HIP), and the manifest gains a dispatch table that tilec.runtime (tilec/runtime/dispatch.py)
and the generated C launcher evaluate at launch: the public name runs the configuration of the tuned shape
nearest to the launch's sizes (distance: the sum over the tuned sizes of |log2 a - log2 b|).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import database

MULTI_BACKENDS = ("cuda", "hip")  # back ends whose generated sources can be merged into one translation unit


def suffix(i: int) -> str:
    return f"__cfg{i}"


@dataclass
class DispatchPlan:
    entry: dict
    configs: list[dict]
    per_shape: list[int]

    def variants(self, opts, backend_name: str) -> list[tuple[object, str]]:
        """(options, kernel-name suffix) of each kernel variant the artifact holds."""
        def with_config(config):
            return opts.replace(defines=tuple(sorted({**dict(opts.defines), **config}.items())))

        if len(self.configs) == 1 or backend_name not in MULTI_BACKENDS:
            return [(with_config(self.configs[0]), "")]
        return [(with_config(c), suffix(i)) for i, c in enumerate(self.configs)]

    def manifest(self, kernel: str, variants: int) -> dict:
        """The manifest's "tuning" record and, with several variants, the "dispatch" table."""
        e = self.entry
        out: dict = {"tuning": {"gpu": e.get("gpu"), "date": e.get("date"), "source_hash": e.get("source_hash"),
                                "shapes": len(e["shapes"]), "configs": self.configs[:variants]}}
        if variants > 1:
            names = sorted({n for s in e["shapes"] for n in s["sizes"]})
            out["dispatch"] = {kernel: {
                "sizes": names,
                "configs": [{"kernel": kernel + suffix(i), "consts": c} for i, c in enumerate(self.configs)],
                "rules": [{"at": s["sizes"], "config": ci} for s, ci in zip(e["shapes"], self.per_shape,
                                                                             strict=True)],
            }}
        return out


def plan_for(source, opts) -> DispatchPlan | None:
    """The configurations a build of `source` with `opts` carries, from the tuning database; None without one."""
    entry = database.entry_for(source, opts)
    if entry is None or not entry.get("shapes"):
        return None
    configs, per_shape = database.select(entry)
    return DispatchPlan(entry, configs, per_shape)


def compile_variant(compile_ir, source, target: str, opts, kernel_suffix: str, text):
    """One variant's CompileResult: `compile_ir` (tilec.driver.compile) with its kernels renamed."""
    from .space import TuneContext, building

    with building((), TuneContext(kernel_suffix=kernel_suffix)):
        return compile_ir(source, target, opts, text=text)


def merged_source(sources: list[str], kernels: list[str]) -> str:
    """One translation unit from the sources of several variants of a kernel: the first whole, then of each
    other what follows the text it shares with the first (the device header and common helpers) up to the
    first line that names its own kernel."""
    if len(sources) == 1:
        return sources[0]
    first = sources[0].split("\n")
    parts = [sources[0]]
    for text, name in zip(sources[1:], kernels[1:], strict=True):
        lines = text.split("\n")
        shared = 0
        while shared < min(len(first), len(lines)) and first[shared] == lines[shared] and name not in lines[shared]:
            shared += 1
        # back up to a blank line so that a declaration the two share only in part is repeated whole
        while shared > 0 and lines[shared - 1].strip():
            shared -= 1
        parts.append("\n".join(lines[shared:]))
    return "\n".join(parts)
