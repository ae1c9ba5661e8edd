"""Compile options: one frozen, hashable value that says everything a compile depends on besides its input files.

The command line, the Python API, the tests and the tuner all describe a compile with a `CompileOptions`;
`key()` is the part of the compile cache's key that comes from the options. Standard library only: the
command line builds one before deciding whether the compiler needs importing at all (a cache hit does not).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# Target features and optimisations a user may turn off (the CLI's --no-tma, --no-wgmma, --no-warp-specialize,
# --no-partition; simplify-indices and realign are off unless CompileOptions.simplify_indices / realign_rows ask;
# tma_store keeps TMA loads but stores the accumulator with the threads: the CUDA back end's direct-stores twin).
DISABLEABLE = frozenset({"tma", "tma_store", "wgmma", "warp_specialize", "simplify_indices", "partition",
                        "realign"})

# Target limits a user may override (Target.with_limits; the CLI's --max-workgroup-storage).
LIMITS = frozenset({"shared_memory_bytes", "max_threads", "max_storage_buffers", "max_grid"})


class DefineText(str):
    """A -D value as written on the command line. The compiler reads it (tilec.driver.define_value) as an int,
    float, bool, dtype name or else a string; keeping the text here lets the command line make a cache key
    without importing the compiler."""


def _frozen_items(value) -> tuple:
    """A mapping (or an iterable of pairs) as a sorted tuple of pairs, so that equal options hash equal."""
    items = value.items() if isinstance(value, dict) else value
    return tuple(sorted((str(k), v) for k, v in items))


@dataclass(frozen=True)
class CompileOptions:
    """What to compile for and how. Build one with `CompileOptions.make(...)`, which accepts dicts, lists and
    sets and freezes them; `replace(...)` derives a variant (the tuner's handle).

    The fields are what every back end shares. A back end's own settings (CUDA's lineinfo, device_debug,
    ptxas_args, forward_ptx) travel in `backend_options`, which that back end parses into its own frozen record
    (tilec.targets.backend.Backend.parse_options); `make` and `replace` take them as keywords like the fields."""

    targets: tuple[str, ...] = ()  # target names as the user spelled them; several for a fatbin or a header
    defines: tuple[tuple[str, object], ...] = ()  # -D NAME=VALUE, sorted by name
    include_dirs: tuple[str, ...] = ()  # -I, in search order
    kernel: str | None = None  # compile only this kernel
    disable: frozenset[str] = frozenset()  # target features turned off (DISABLEABLE)
    limits: tuple[tuple[str, int], ...] = ()  # target limits overridden (LIMITS)
    toolchain: str | None = None  # the back end's compiler when it has several (CUDA: nvcc | nvrtc)
    opt_level: int | None = None  # -O0..-O3 for the device toolchain (ptxas, hipcc/clang); None: its default
    toolchain_args: tuple[str, ...] = ()  # -Xcompiler / --toolchain-args: appended to the device toolchain's command
    header_prefix: str = ""  # --emit header: prefix of the launcher functions
    # A back end's own settings, (name, value) sorted by name: what Backend.parse_options reads into the back end's
    # record (the CUDA back end's CudaOptions), where a name no back end has is an error.
    backend_options: tuple[tuple[str, object], ...] = ()
    tune_db: str | None = None  # the tuning database (tilec.tuning.database.find); "" for none
    profile: str = ""  # an instrumented build (tilec/ir/profile.py): "full" (tile ops and waits) or "sync" (waits)
    # --simplify-indices: TVM's index simplification (passes/simplify_indices.py). Off by default: on the H200 it
    # made sm90 gemms 4-6% slower (bench/RESULTS.md), so it is the user's to try.
    simplify_indices: bool = False
    # --realign-rows: misaligned rows into fragments by load_realign, and the row kernels' no-TMA twins' pipelines by
    # copy_shifted. Off by default: on the H200 it made bf16 rows of 50257 up to 2.6x slower and never faster by
    # more than noise (bench/RESULTS.md, 2026-12-02 s10); gemm's twin realigns its pipelines regardless.
    realign_rows: bool = False
    # How the build runs, not what it produces: any of these turns the compile cache off.
    keep_dir: str | None = None  # keep the toolchain's intermediate files here
    dryrun: bool = False  # print the toolchain's commands instead of running them
    resource_usage: bool = False  # report registers, shared memory and spills per kernel
    use_cache: bool = True  # --no-cache: neither read nor write the compile cache
    remarks: bool = False  # -R: also the remarks that need the kernel run (bank conflicts of shared accesses)
    werror: bool = False  # -Werror: every warning (ptxas spills included) is an error
    warn_conversion: bool = False  # -Wconversion: warn at implicit conversions that may change a value (as clang: off)
    # What the IR form of a compile (no artifact) is asked for; never part of an artifact's cache key.
    dump_after: frozenset[str] = frozenset()  # passes whose printed IR the result keeps (--emit-ir=after:PASS)
    verify: bool = False  # run the IR verifiers after every pass (--verify-ir)
    plan_only: bool = False  # stop after the back end's planning passes: the schedules made, nothing lowered
    # Parts of every kernel's schedule pinned before the planners run: a tilec.ir.schedule.ScheduleRequest or its
    # plain dict form ({"gemms": {7: {"instruction": "mma"}}, "loops": {"k": {"stages": 2}}}). Not hashed (a dict).
    schedule: object = dataclasses.field(default=None, hash=False)
    _RUN_ONLY = ("keep_dir", "dryrun", "resource_usage", "use_cache", "dump_after", "verify", "plan_only")

    @classmethod
    def make(cls, targets=(), *, defines=None, include_dirs=(), disable=(), limits=None, toolchain_args=(),
             dump_after=(), backend_options=(), **rest) -> CompileOptions:
        """Options from plain values; a keyword that is not a field is a back end's own option (backend_options)."""
        if isinstance(targets, str):
            targets = tuple(t for t in targets.split(",") if t.strip())
        own = {k: rest.pop(k) for k in [k for k in rest if k not in _FIELDS]}
        return cls(targets=tuple(targets), defines=_frozen_items(defines or {}), include_dirs=tuple(include_dirs),
                   disable=frozenset(disable or ()), limits=_frozen_items(limits or {}),
                   toolchain_args=tuple(toolchain_args), dump_after=frozenset(dump_after or ()),
                   backend_options=_backend_items({**dict(backend_options), **own}), **rest)

    def replace(self, **changes) -> CompileOptions:
        """A variant with `changes`: fields, or a back end's own options (laid over backend_options)."""
        own = {k: changes.pop(k) for k in [k for k in changes if k not in _FIELDS]}
        if own:
            changes["backend_options"] = _backend_items({**dict(changes.get("backend_options",
                                                                             self.backend_options)), **own})
        return dataclasses.replace(self, **changes)

    def backend_option(self, name: str, default=None):
        """One of a back end's own options (backend_options), or `default` when not given."""
        return dict(self.backend_options).get(name, default)

    @property
    def target(self) -> str | None:
        """The first (or only) target."""
        return self.targets[0] if self.targets else None

    @property
    def defines_dict(self) -> dict[str, object]:
        return dict(self.defines)

    @property
    def limits_dict(self) -> dict[str, int]:
        return dict(self.limits)

    @property
    def cacheable(self) -> bool:
        """Whether a compile with these options may be served from (and stored in) the cache."""
        return self.use_cache and not (self.dryrun or self.keep_dir or self.resource_usage)

    def key(self) -> dict:
        """The options as plain data for the cache key: every field that can change what is written."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name in self._RUN_ONLY:
                continue
            value = getattr(self, f.name)
            if f.name == "defines":
                value = [[k, str(v), type(v).__name__] for k, v in value]
            elif f.name == "backend_options":
                value = [[k, list(v) if isinstance(v, tuple) else v] for k, v in value]
            elif f.name == "schedule":
                value = None if value is None else repr(value)
            elif isinstance(value, (tuple, frozenset)):
                value = sorted(value) if isinstance(value, frozenset) else list(value)
            out[f.name] = value
        return out


def _backend_items(values: dict) -> tuple[tuple[str, object], ...]:
    """A back end's own options as a sorted tuple, lists made tuples (so that equal options hash equal)."""
    return tuple(sorted((str(k), tuple(v) if isinstance(v, list) else v) for k, v in values.items()))


_FIELDS = frozenset(f.name for f in dataclasses.fields(CompileOptions))


def resolve(target=None, options: CompileOptions | None = None, **overrides) -> CompileOptions:
    """The options of a `tilec.compile(source, target, options, defines=..., ...)` call: `options` (or the
    defaults), with `target` and every keyword that is not None laid over it (a back end's own option too)."""
    opts = options or CompileOptions()
    changes = {k: v for k, v in overrides.items() if v is not None}
    if target is not None:
        changes["targets"] = target
    if not changes:
        return opts
    if isinstance(changes.get("targets"), str):
        changes["targets"] = tuple(t for t in changes["targets"].split(",") if t.strip())
    frozen = {"defines": _frozen_items, "limits": _frozen_items, "disable": frozenset, "dump_after": frozenset,
              "include_dirs": tuple, "targets": tuple, "toolchain_args": tuple}
    for name, freeze in frozen.items():
        if name in changes:
            changes[name] = freeze(changes[name] or ())
    return opts.replace(**changes)
