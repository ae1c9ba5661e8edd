"""One artifact that picks its configuration per shape: the build side of a tuning database entry.

When a database entry applies to a compile (tilec.tuning.database.entry_for), `plan_for` selects the few
configurations that win across its shapes. With one, the artifact is simply that configuration. With several,
each is compiled as its own kernel (`gemm__cfg0`, `gemm__cfg1`, ...) and the sources are merged into one C++
translation unit (CUDA and HIP; a WGSL build takes the configuration that alone serves the tuned shapes best).
The manifest gains a dispatch table that tilec.runtime (tilec/runtime/dispatch.py) and the generated C launcher
evaluate at launch: the public name runs the configuration of the tuned shape nearest to the launch's sizes
(distance: the sum over the tuned sizes of |log2 a - log2 b|).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..manifest import MS_KEY
from . import database


def suffix(i: int) -> str:
    return f"__cfg{i}"


@dataclass
class DispatchPlan:
    entry: dict
    configs: list[dict]
    per_shape: list[int]

    def variants(self, opts, source_kind: str) -> list[tuple[object, str]]:
        """(options, kernel-name suffix) of each kernel variant the artifact holds."""
        def with_config(config):
            return opts.replace(defines=tuple(sorted({**dict(opts.defines), **config}.items())))

        from ..outputs import MERGEABLE_SOURCES

        if len(self.configs) == 1 or source_kind not in MERGEABLE_SOURCES:
            return [(with_config(self.configs[0]), "")]
        return [(with_config(c), suffix(i)) for i, c in enumerate(self.configs)]

    def manifest(self, kernel: str, variants: int) -> dict:
        """The manifest's "tuning" record and, with several variants, the "dispatch" table (the build marks the
        configs of multi-launch variants "launches": true, tilec.outputs)."""
        e = self.entry
        out: dict = {"tuning": {"gpu": e.get("gpu"), "date": e.get("date"), "source_hash": e.get("source_hash"),
                                "shapes": len(e["shapes"]), "configs": self.configs[:variants],
                                **{k: e[k] for k in ("cc", "sms") if e.get(k)}}}
        if variants > 1:
            names = sorted({n for s in e["shapes"] for n in s["sizes"]})
            _, times = database.stored_times(e)
            per_config = [times.get(database.config_key(c), {}) for c in self.configs]
            modelled = (database.dispatch_rule_of(e) == "cost" and bool(e.get("timed"))
                        and all("all_ms" in s for s in e["shapes"]))
            out["dispatch"] = {kernel: {
                "sizes": names,
                "configs": [{"kernel": kernel + suffix(i), "consts": c} for i, c in enumerate(self.configs)],
                # every carried configuration's time at each tuned shape, when the entry kept them all: the build
                # fits the dispatch's cost model to them (tilec/runtime/cost_model.py), unless the entry says
                # "dispatch": "nearest"
                "rules": [{"at": s["sizes"], "config": ci,
                           **({MS_KEY: [t.get(si) for t in per_config]} if modelled else {})}
                          for si, (s, ci) in enumerate(zip(e["shapes"], self.per_shape, strict=True))],
            }}
        return out


def plan_for(source, opts, entry: dict | None = None) -> DispatchPlan | None:
    """The configurations a build of `source` with `opts` carries, from the tuning database (or its `entry` for this
    build, when the caller read it); None without one."""
    entry = entry or database.entry_for(source, opts)
    if entry is None or not entry.get("shapes"):
        return None
    configs, per_shape = database.select(entry)
    return DispatchPlan(entry, configs, per_shape)


def variants_for(source, opts, source_kind: str):
    """The Variants (tilec.outputs) a build of `source` with `opts` (resolved: with its targets) carries, for a back
    end whose generated source is of `source_kind`: those of the tuning database's entry, or none."""
    from ..outputs import Variants

    entry = database.entry_for(source, opts)
    key, inputs = database.digest(entry), tuple(database.build_input(source, opts))
    if entry is None:
        return Variants(key=key, inputs=inputs)

    def select() -> Variants:  # on a cache miss alone (the cache key is the entry's digest)
        plan = plan_for(source, opts, entry)
        if plan is None:
            return Variants(key=key, inputs=inputs)
        configs = plan.variants(opts, source_kind)
        return Variants(tuple(configs), key, inputs, plan.manifest(entry["kernel"], len(configs)))

    return Variants(key=key, inputs=inputs, pending=select)


def compile_artifact(source, options=None, *, emit: str, output_name: str | None = None,
                     text: str | None = None, on_compiled=None, cached_only: bool = False):
    """`tilec.compile(..., emit=KIND)`: the plain build of tilec/outputs.py around the tuning database. A build of a
    file that a database entry applies to carries the configurations `plan_for` selects: one, built as the options
    with its -D values, or several, each under its own kernel names, with the manifest's dispatch table (which
    tilec.runtime and the C launcher read). A build of `text` reads no database."""
    from ..options import CompileOptions
    from ..outputs import build_artifact, targets_and_backend, with_default_target

    opts = with_default_target(options or CompileOptions())  # (tilec.compile resolved the keywords)
    targets, backend = targets_and_backend(source, opts, text)
    variants = variants_for(source, opts, backend.source_kind) if text is None else None
    return build_artifact(source, opts, targets, backend, emit, output_name, text, on_compiled, cached_only, variants)
