"""Launch-time choice among a kernel's tuned configurations (the manifest's "dispatch" table).

An artifact built with a tuning database (tilec/tuning/multi.py) may hold several variants of a kernel
(`gemm__cfg0`, `gemm__cfg1`, ...) and, under "dispatch", the tuned shapes with the variant that serves each. The
public name (`mod.gemm`) is a `DispatchKernel`: at each launch it reads the sizes from the arguments and runs the
variant of the nearest tuned shape, the distance being the sum over the tuned sizes of |log2 a - log2 b| (among the
tuned shapes whose rows were 16-byte aligned as the launch's are or are not, where the table records both kinds:
tilec.manifest.ALIGNED_KEY), among the variants whose condition (a config's "when": its source's tune(...,
when=...)) holds at the launch's sizes; when none holds, among all. A table with a cost model
(tilec/runtime/cost_model.py) runs, near that shape, the variant of least predicted time instead of its winner. The
generated C launcher (tilec/targets/c_launcher/dispatch.py) computes the same choice (tilec.manifest.log2_approx,
condition_holds).

A variant may be a multi-launch kernel (a split-K gemm: its stages and a workspace, tilec/runtime/sequence.py).
Then the public name cannot hand the launch to one variant's plan: the general path picks the variant from the
arguments' shapes (cached per shapes) and runs it, a Launches with the workspace it keeps, and files the call's
launches (every stage's) under the public name in the compiled launcher, which serves the repeated calls.
"""

from __future__ import annotations

import math

from ..manifest import SCALE_KEY, WHEN_KEY, condition_holds, log2_approx, rule_classes_match
from .arrays import ArgumentError
from .cost_model import cost_choice
from .fastlaunch import native_class
from .launch import _MISS, Kernel
from .sequence import Launches


def choose(table: dict, sizes: dict[str, int]) -> int:
    """The index (into table["configs"]) of the variant that serves a launch with these sizes."""
    allowed = [condition_holds(c.get(WHEN_KEY, True), sizes) for c in table["configs"]]
    if not any(allowed):
        allowed = [True] * len(allowed)
    same_class = rule_classes_match(table, sizes)
    if not any(s and allowed[r["config"]] for s, r in zip(same_class, table["rules"], strict=True)):
        same_class = [True] * len(same_class)
    best, best_distance, nearest = 0, math.inf, None
    for rule, usable in zip(table["rules"], same_class, strict=True):
        if not (usable and allowed[rule["config"]]):
            continue
        distance = sum(abs(log2_approx(sizes.get(n, 1)) - log2_approx(rule["at"][n]))
                       for n in table["sizes"] if n in rule["at"])
        if distance < best_distance:
            best, best_distance, nearest = rule["config"], distance, rule
    if nearest is None:
        return allowed.index(True)  # (a variant no tuned shape chose)
    if SCALE_KEY in nearest:
        return cost_choice(table, nearest, best_distance, allowed, sizes, best)
    return best


class DispatchKernel(Kernel):
    """A kernel's public name over its tuned variants. It is a Kernel whose plans are its variants' plans:
    the variant is chosen when a plan is made (once per shape), and the plan carries the variant's own
    argument block, so a launch with a cached plan costs what a plain kernel's launch costs."""

    def __init__(self, module, name: str, table: dict, variants: list):
        super().__init__(module, {**variants[0].entry, "name": name})  # the variants share the signature
        self.table = table
        self.variants = variants
        self._sequences = any(isinstance(v, Launches) for v in variants)
        self._by_shapes: dict[tuple, Kernel] = {}  # with multi-launch variants: the arguments' shapes -> variant

    def __call__(self, *args, stream=None, sync: bool | None = None):
        # Kernel.__call__, inline: a call of it costs a tenth of a whole launch. With multi-launch variants too: the
        # compiled launcher holds a plan per shape, with its variant -- a multi-launch variant's filed by its general
        # path below (all its stages' launches) -- and the Python fast path only those of one-launch variants.
        if stream is None and not sync:
            out = self._fast(args)
            if out is not _MISS:
                return out
        if not self._sequences:
            return self._call(args, stream, sync)
        layout = self._layout()
        if len(args) != layout.nparams:
            args = self._with_outputs(args, layout)
        variant = self._variant_of(layout, args)
        if isinstance(variant, Launches):  # its launches are filed in this name's compiled launcher
            return variant._run(args, stream, sync, self)
        return self._call(args, stream, sync)  # this name's plan is the variant's (_plan), filed for the fast path

    def _variant_of(self, layout, args) -> Kernel:
        shapes = tuple(tuple(args[t.index].shape) for t in layout.tensors)
        variant = self._by_shapes.get(shapes)
        if variant is None:
            if len(self._by_shapes) >= 1024:
                self._by_shapes.clear()
            variant = self._by_shapes[shapes] = self.variant_for(self._sizes_from_shapes(layout, shapes, args))
        return variant

    def workspace_bytes(self, *args) -> int:
        """The bytes of scratch the variant a call with these arguments runs needs (0 for a single launch)."""
        layout = self._layout()
        if len(args) != layout.nparams:
            args = self._with_outputs(args, layout)
        variant = self._variant_of(layout, args)
        return variant.workspace_bytes(*args) if isinstance(variant, Launches) else 0

    def release_workspaces(self) -> None:
        for v in self.variants:
            v.release_workspaces()
        if self._native is not None:  # its plans of padded and multi-launch variants hold their workspaces
            self._native.forget()

    def __repr__(self) -> str:
        names = ", ".join(v.name for v in self.variants)
        return f"<tilec kernel {self.name}, dispatching over {names}>"

    def _make_layout(self):
        layout = super()._make_layout()
        self._fallback = self._direct_stores = None  # each variant launches its own TMA twins
        layout.key_has_pointers = any(v._layout().key_has_pointers for v in self.variants)
        return layout

    def variant_for(self, sizes: dict[str, int]) -> Kernel:
        return self.variants[choose(self.table, sizes)]

    def _plan(self, layout, ptrs, shapes, device: int, args=None):
        variant = self.variant_for(self._sizes_from_shapes(layout, shapes, args))
        if isinstance(variant, Launches):
            raise ArgumentError(f"{self.name} runs {variant.name} for these sizes, a sequence of "
                                f"{len(variant.stages)} launches: ask its stages "
                                f"({', '.join(k.name for k, _ in variant.stages)}) for their plans")
        return variant._plan(variant._layout(), ptrs, shapes, device, args)

    def launch_config(self, sizes: dict[str, int], device: int = 0):
        return self.variant_for(sizes).launch_config(sizes, device)


def add_dispatchers(manifest: dict, kernels: dict, internal: dict) -> None:
    """Put a DispatchKernel under each public name the manifest's dispatch table defines, and move its variants
    from `kernels` (the module's public kernels, by name) to `internal` (reachable as `.variants`)."""
    for name, table in (manifest.get("dispatch") or {}).items():
        variants = [kernels[c["kernel"]] for c in table["configs"] if c["kernel"] in kernels]
        if len(variants) == len(table["configs"]) and variants:
            for v in variants:
                internal[v.name] = kernels.pop(v.name)
            kernels[name] = native_class(DispatchKernel)(variants[0].module, name, table, variants)
