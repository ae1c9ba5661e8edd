"""Launch-time choice among a kernel's tuned configurations (the manifest's "dispatch" table).

An artifact built with a tuning database (tilec/tuning/multi.py) may hold several variants of a kernel
(`gemm__cfg0`, `gemm__cfg1`, ...) and, under "dispatch", the tuned shapes with the variant that serves each. The
public name (`mod.gemm`) is a `DispatchKernel`: at each launch it reads the sizes from the arguments and runs the
variant of the nearest tuned shape, the distance being the sum over the tuned sizes of |log2 a - log2 b|. The
generated C launcher (tilec/targets/cuda/launcher.py) computes the same choice.
"""

from __future__ import annotations

import math


def log2_approx(x: int) -> float:
    """log2 of a size, linear between powers of two: what the C launcher computes too (no libm), so that both
    pick the same variant."""
    x = float(max(x, 1))
    e = 0
    while x >= 2.0:
        x /= 2.0
        e += 1
    return e + (x - 1.0)


def choose(table: dict, sizes: dict[str, int]) -> int:
    """The index (into table["configs"]) of the variant that serves a launch with these sizes."""
    best, best_distance = 0, math.inf
    for rule in table["rules"]:
        distance = sum(abs(log2_approx(sizes.get(n, 1)) - log2_approx(rule["at"][n]))
                       for n in table["sizes"] if n in rule["at"])
        if distance < best_distance:
            best, best_distance = rule["config"], distance
    return best


class DispatchKernel:
    """A kernel's public name over its tuned variants: launches (and plans, and benchmarks) the chosen one."""

    def __init__(self, name: str, table: dict, variants: list):
        self.name = name
        self.table = table
        self.variants = variants
        self.entry = variants[0].entry  # the variants share the signature
        self._chosen: dict[tuple, object] = {}  # the arguments' shapes (and scalars) -> the variant that serves them

    def __repr__(self) -> str:
        names = ", ".join(v.name for v in self.variants)
        return f"<tilec kernel {self.name}, dispatching over {names}>"

    def sizes_of(self, args) -> dict[str, int]:
        return self.variants[0].sizes_of(args)

    def pick(self, args):
        # The choice depends on the sizes only, which the shapes (and integer scalars) give: remembered per key,
        # so that a launch pays a dictionary look-up, not the size formulas (tilec.runtime's launch budget).
        key = tuple(getattr(a, "shape", a) for a in args)
        variant = self._chosen.get(key)
        if variant is None:
            variant = self.variants[choose(self.table, self.sizes_of(args))]
            if len(self._chosen) >= 256:
                self._chosen.clear()
            self._chosen[key] = variant
        return variant

    def __call__(self, *args, stream=None, sync: bool | None = None):
        return self.pick(args)(*args, stream=stream, sync=sync)

    def launch_plan(self, *args, stream=None):
        return self.pick(args).launch_plan(*args, stream=stream)

    def launch_config(self, sizes: dict[str, int]):
        return self.variants[choose(self.table, sizes)].launch_config(sizes)

    def bench(self, *args, **kw) -> dict:
        return self.pick(args).bench(*args, **kw)


def add_dispatchers(manifest: dict, kernels: dict, internal: dict) -> None:
    """Put a DispatchKernel under each public name the manifest's dispatch table defines, and move its variants
    from `kernels` (the module's public kernels, by name) to `internal` (reachable as `.variants`)."""
    for name, table in (manifest.get("dispatch") or {}).items():
        variants = [kernels[c["kernel"]] for c in table["configs"] if c["kernel"] in kernels]
        if len(variants) == len(table["configs"]) and variants:
            for v in variants:
                internal[v.name] = kernels.pop(v.name)
            kernels[name] = DispatchKernel(name, table, variants)
