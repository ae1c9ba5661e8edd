"""The copy mechanisms of Pipelined loops, peers registered by the back ends and chosen by predicate.

A mechanism is how a Pipelined loop's producer copies (global -> shared tiles of later iterations) overlap the
compute: `sync` (none: load, barrier, compute; generic, every target), `cp.async` (asynchronous copies, stages
in flight), `registers` (the next tiles loaded into registers during the compute, then stored to a second
shared buffer: AMD), `tma` (sm90: TMA boxes completing on mbarriers, possibly from a producer warpgroup). The
classes of the generic ones are here; each back end registers those its targets have, with a predicate, from its
`instructions` module (Target.implementations: tilec/targets/cuda/instructions.py registers cp.async and TMA,
tilec/targets/hip/instructions.py registers registers). pipeline-planning tries the mechanisms a target's
predicates take, best (lowest rank) first, and takes the first that can run the loop; it, lower-to-simt and the
schedule's resource count ask the mechanism (`named(plan.mechanism)`) what it does instead of testing names.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass

from . import tile as T
from .intrinsics import lookup as intrinsic
from .intrinsics import offered as intrinsic_offered


@dataclass(frozen=True)
class PlanContext:
    """What a mechanism may look at to decide whether it runs a loop."""

    target: object
    sched: object  # the kernel's KernelSchedule (layouts known)
    shared_bytes: dict[int, int]  # shared buffer uid -> its bytes in its layout
    threads: int | None


class CopyMechanism:
    """One way of overlapping a Pipelined loop's copies with its compute. Subclasses set what applies."""

    name: str = ""  # the schedule's name (LoopSchedule.mechanism, a ScheduleRequest's "mechanism")
    label: str = ""  # how remarks name it
    issues_ahead: bool = True  # the copies of later iterations are issued during the compute (False: sync)
    fixed_stages: int | None = None  # the stages it always uses (register staging: 2), whatever the loop asks
    stages_aligned: bool = False  # each stage of a tile starts where a TMA box may land (SharedLayout.stage_size)
    mbarriers: bool = False  # completion tracked by mbarriers (the schedule's resources count them)
    producer_warpgroup: bool = False  # a producer warpgroup may issue the copies (warp specialization, clusters)
    once_per_loop_run: bool = False  # its state counts one run of the loop (not for a loop an outer loop reruns)
    register_staged: bool = False  # lower-to-simt stages the next tiles through registers (pipelined_registers)
    intrinsics: tuple[str, ...] = ()  # intrinsics its lowering always emits (check_registry: the target offers them)

    def copy_ok(self, p: T.Copy, ctx: PlanContext) -> bool:
        """Whether this mechanism can issue producer copy p."""
        return True

    def stages_for(self, producers: list[T.Copy], stages: int, ctx: PlanContext) -> int | None:
        """The stages this mechanism runs the loop with (its producers, `stages` asked for), or None: it cannot."""
        if stages < 2 or not all(self.copy_ok(p, ctx) for p in producers):
            return None
        return self.fixed_stages or stages

    def remark_plan(self, loop: T.For, plan, asked: int, ctx: PlanContext, disabled, rep) -> None:
        """Remarks of a target that has this mechanism about a loop's plan (TMA: how, or why not)."""


class Sync(CopyMechanism):
    """No overlap: load, barrier, compute, barrier (the generic fallback)."""

    name = "sync"
    label = "synchronous copies"
    issues_ahead = False

    def stages_for(self, producers, stages, ctx) -> int | None:
        return 1


class CpAsync(CopyMechanism):
    """Asynchronous global -> shared copies in commit groups, `stages - 1` in flight (lower-to-simt's pipelined)."""

    name = "cp.async"
    label = "cp.async"
    intrinsics = ("cp_async16", "cp_async_commit", "cp_async_wait")


# Register staging holds a thread's share of every prefetched tile in registers, and lowering
# unrolls one load per element: beyond this many elements a thread (a block of a few threads
# loading whole tiles) it costs minutes of compile time for code that spills; the loop is plain.
MAX_STAGED_PER_THREAD = 512


class RegisterStaged(CopyMechanism):
    """Register-staged double buffering (lower-to-simt's pipelined_registers): no asynchronous copies; the next
    iteration's tiles are loaded into registers before this iteration's compute and stored to the other of two
    shared buffers after it (one barrier per iteration) -- where the second buffers fit in the target's shared
    memory and the staged tiles come to at most MAX_STAGED_PER_THREAD elements a thread."""

    name = "registers"
    label = "register staging"
    fixed_stages = 2
    register_staged = True

    def copy_ok(self, p: T.Copy, ctx: PlanContext) -> bool:
        return register_stageable(p, ctx.target)

    def stages_for(self, producers, stages, ctx) -> int | None:
        if super().stages_for(producers, stages, ctx) is None:
            return None
        extra = sum(ctx.shared_bytes.get(p.dst.buffer.uid, 0) for p in producers)
        staged = sum(math.prod(p.dst.buffer.const_shape or (0,)) for p in producers)
        fits = sum(ctx.shared_bytes.values()) + extra <= ctx.target.shared_memory_bytes
        return 2 if fits and staged <= MAX_STAGED_PER_THREAD * (ctx.threads or 1) else None


def register_stageable(p: T.Copy, target) -> bool:
    """A global -> shared copy that can go through registers 16 bytes at a time (what register-staged
    double buffering needs; lower-to-simt's staged_copy): one 16- or 32-bit element type, at most 2-D,
    the source's inner dimension contiguous, chunk-aligned and, where known, a multiple of a chunk."""
    from .fold import as_int, multiple_of

    src, dst = p.src, p.dst
    sext = [e for e in src.const_extents if e != 1] or [1]
    if ("vector_copy16" not in target.features or src.buffer.dtype != dst.buffer.dtype
            or src.buffer.scope != "global" or dst.buffer.scope != "shared" or len(sext) > 2):
        return False
    vec = 16 // src.buffer.dtype.bytes
    contiguous = src.const_extents[-1] != 1 or all(e == 1 for e in src.const_extents)
    if sext[-1] % vec or not contiguous or not multiple_of(src.starts[-1], vec):
        return False
    inner = as_int(src.buffer.shape[-1])
    return inner is None or inner % vec == 0


@dataclass(frozen=True)
class Registration:
    mechanism: CopyMechanism
    predicate: Callable[[object], bool]  # Target -> whether it may run there
    rank: int  # lower first


_REGISTRY: dict[str, Registration] = {}
_LOADED: set[str] = set()


def register_mechanism(m: CopyMechanism, predicate: Callable[[object], bool], rank: int) -> CopyMechanism:
    """Add a mechanism (one line in the back end's instructions module)."""
    prev = _REGISTRY.get(m.name)
    if prev is not None and type(prev.mechanism) is not type(m):
        raise ValueError(f"copy mechanism '{m.name}' registered twice")
    _REGISTRY[m.name] = Registration(m, predicate, rank)
    return m


def load(target) -> None:
    """Import the module that registers the target's back end's mechanisms (Target.implementations)."""
    module = getattr(target, "implementations", None)
    if module and module not in _LOADED:
        importlib.import_module(module)
        _LOADED.add(module)


def offered(target, disabled=()) -> list[CopyMechanism]:
    """The mechanisms the target's predicates take, best first, less the disabled ones."""
    load(target)
    regs = sorted(_REGISTRY.values(), key=lambda r: (r.rank, r.mechanism.name))
    return [r.mechanism for r in regs if r.mechanism.name not in disabled and r.predicate(target)]


def get(name: str) -> CopyMechanism | None:
    reg = _REGISTRY.get(name)
    return reg.mechanism if reg is not None else None


def check_registry(targets) -> list[str]:
    """Registrations whose predicate takes a target that does not offer an intrinsic the mechanism emits."""
    problems = []
    for t in targets:
        load(t)
    for t in targets:
        for r in _REGISTRY.values():
            missing = [op for op in r.mechanism.intrinsics if not intrinsic_offered(intrinsic(op), t)]
            if r.predicate(t) and missing:
                problems.append(f"copy mechanism {r.mechanism.name} is offered on {t.name}, which does not offer "
                                f"{', '.join(missing)}")
    return problems


def named(name: str) -> CopyMechanism:
    """The registered mechanism of a schedule's mechanism name (KeyError when none registered it)."""
    return _REGISTRY[name].mechanism


FALLBACK = register_mechanism(Sync(), lambda target: True, rank=1000)
