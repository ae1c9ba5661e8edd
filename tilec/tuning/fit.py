"""Fit a kernel's tiles to a target: when the consts that size its buffers (or its threads) make it need more
shared memory, threads or registers (a wgmma accumulator's share of the register file) than a target has, the
largest configuration of those consts that fits.

Which consts size the buffers is found by changing each one: a const whose half changes a shared, fragment or
local buffer's shape (or the kernel's threads) and no tensor's shape is one (`block_N`, `block_H`; not a head
dim that a tensor's type names, not `num_split`, not a dtype).
The search halves the largest of them, one at a time, until every target compiles without a resource error
(each candidate is compiled through the target's passes, which count what tilec adds too: staging copies,
reduction scratch, pipeline stages — the resource query), then doubles each back while it still fits. A
configuration the compiler refuses for another reason (a tile the gemm cannot split) is skipped: that const
keeps its last good value. The command line uses it to say what to change in the error, and `--fit` to build
the configuration it finds (tilec/cli/build.py).
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import CompileError, Diagnostic

RESOURCES = ("shared-memory", "threads", "registers")  # the categories of errors a smaller configuration could fix
MAX_STEPS = 24  # halvings and doublings tried (each a compile through the passes)


@dataclasses.dataclass
class Fit:
    defines: dict[str, int]  # the consts that change, at their new values
    was: dict[str, int]  # the same consts at the values that did not fit
    blocker: str | None = None  # with these values the buffers fit, but the kernel fails for this other reason

    def flags(self) -> str:
        return " ".join(f"-D {n}={v}" for n, v in self.defines.items())

    def changes(self) -> str:
        return ", ".join(f"{n}={v} (was {self.was[n]})" for n, v in self.defines.items())


def resource_errors(e: CompileError) -> list[Diagnostic]:
    return [d for d in e.diagnostics if d.severity == "error" and d.category in RESOURCES]


def find_fit(source: str, options) -> Fit | None:
    """The largest configuration of the buffer-sizing consts with which every target of `options` (a
    tilec.options.CompileOptions) compiles without a resource error, or None (no such const, or none fits)."""
    from ..driver import compile as tilec_compile

    front = options.replace(targets=())
    base = tilec_compile(source, options=front)
    defines = options.defines_dict
    try:
        over = {d.category for t in options.targets for d in _errors(source, options.replace(targets=(t,)))}
    except CompileError:
        return None  # an error that is not about resources: no configuration helps
    if not over:
        return None
    sizing = {n: v for n, v in _int_consts(base.module.consts).items()
              if _sizes(source, front, defines, n, v) & over}
    if not sizing:
        return None
    current = dict(sizing)
    frozen: set[str] = set()
    steps = 0

    blocked: list[tuple[dict[str, int], str]] = []  # configurations whose buffers fit but that fail otherwise

    def verdict(config: dict[str, int]) -> str:  # "fits", "over" (a resource error) or "invalid"
        nonlocal steps
        steps += 1
        try:
            for t in options.targets:
                tilec_compile(source, options=options.replace(targets=(t,), defines=_frozen({**defines, **config})))
        except CompileError as e:
            if resource_errors(e):
                return "over"
            blocked.append((config, e.diagnostics[0].message))
            return "invalid"
        return "fits"

    state = verdict(current)
    while state != "fits" and steps < MAX_STEPS:
        shrinkable = [n for n in current if n not in frozen and current[n] >= 2 and current[n] % 2 == 0]
        if not shrinkable:
            break
        name = max(shrinkable, key=lambda n: (current[n], -list(current).index(n)))
        trial = {**current, name: current[name] // 2}
        outcome = verdict(trial)
        if outcome == "invalid":
            frozen.add(name)
            continue
        current, state = trial, outcome
    if state != "fits":
        if not blocked:
            return None
        config, why = blocked[0]  # the buffers fit there: what else stops the kernel
        changed = {n: v for n, v in config.items() if v != sizing[n]}
        return Fit(changed, {n: sizing[n] for n in changed}, why)
    for name in sorted(current, key=lambda n: current[n]):  # grow back what the others' halvings made room for
        while current[name] < sizing[name] and steps < MAX_STEPS:
            trial = {**current, name: current[name] * 2}
            if verdict(trial) != "fits":
                break
            current = trial
    changed = {n: v for n, v in current.items() if v != sizing[n]}
    return Fit(changed, {n: sizing[n] for n in changed}) if changed else None


def _int_consts(consts: dict[str, object]) -> dict[str, int]:
    return {n: v for n, v in consts.items() if type(v) is int and v >= 2}


def _errors(source: str, options) -> list[Diagnostic]:
    """The resource errors of a compile (none when it compiles); CompileError when it fails for another reason."""
    from ..driver import compile as tilec_compile

    try:
        tilec_compile(source, options=options)
    except CompileError as e:
        if not resource_errors(e):
            raise
        return resource_errors(e)
    return []


def _sizes(source: str, front, defines: dict, name: str, value: int) -> set[str]:
    """What const `name` sizes ("shared-memory" and "registers": a shared or fragment buffer, "threads": the block),
    as halving it shows; nothing when it also sizes the problem (a tensor's fixed dimension, such as a head dim:
    halving it would compute something else)."""
    from ..driver import compile as tilec_compile

    try:
        halved = tilec_compile(source, options=front.replace(defines=_frozen({**defines, name: value // 2}))).module
    except CompileError:
        return set()
    base = tilec_compile(source, options=front.replace(defines=_frozen(defines))).module
    if _signature(halved) != _signature(base):
        return set()
    return {what for what, part in (("shared-memory", _shared_shapes), ("registers", _shared_shapes),
                                    ("threads", _threads))
            if part(halved) != part(base)}


def _shared_shapes(module) -> list:
    from ..ir import tile as T
    from ..ir.visit import walk_stmts

    return [[s.buffer.const_shape for s in walk_stmts(k.body) if isinstance(s, T.Alloc) and s.buffer.scope in (
        "shared", "fragment")] for k in module.kernels]  # (a fragment may be staged through shared memory)


def _threads(module) -> list:
    return [k.threads for k in module.kernels]


def _signature(module) -> list:
    from ..ir.printer import expr_str

    return [[[expr_str(d) for d in getattr(p, "shape", [])] for p in k.params] for k in module.kernels]


def _frozen(defines: dict) -> tuple:
    return tuple(sorted(defines.items()))
