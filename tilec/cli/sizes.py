"""The sizes a `tilec run` launches with (shared by the interpreter, GPU and CPU-model paths)."""

from __future__ import annotations


def run_sizes(kernel, sizes: dict[str, int]) -> dict[str, int]:
    """The sizes a run of `kernel` (Tile IR) takes: those given, and those its contracts derive from them
    (ValueError for one left to guess)."""
    from ..interp.run import DEFAULT_SIZE
    from ..runtime.formulas import complete_sizes

    checks = getattr(kernel, "attrs", {}).get("launch_checks", [])
    return complete_sizes(kernel.name, [v.name for v in kernel.size_vars], checks, sizes, DEFAULT_SIZE)
