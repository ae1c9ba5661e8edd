"""Every intrinsic SIMT IR may call, defined once: its typed parameters and the target capability it needs.

The intrinsics every SIMT back end may receive (copies, vector loads, atomics, printf, the profiler's marks, warp
shuffles) and the cp.async family the generic lowering emits (tilec/ir/copy_mechanisms.py `CpAsync`) are defined
here; an instruction family of one back end defines its own in the back end's folder
(tilec/targets/<backend>/intrinsics.py: mma.sync, ldmatrix, wgmma, TMA and mbarriers for CUDA, MFMA for HIP),
calling `define`. Every such module is imported on the first lookup (found by its place, `_load`), so a lookup
without a target (the SIMT IR reader, a call built by name) finds them; nothing here names a back end.

Lowering builds calls through `simt.call(...)` / `simt.value(...)`, which check the parameters against the definition
and record them on the node (`SCall.op`, `SCall.params`); the node's `name` is the intrinsic's printed key
(`load_vec8`, `wgmma_rs:n64:f16:1`), produced and parsed here only. Each dialect (tilec/targets/*/codegen.py)
spells intrinsics from a table keyed by `op` and checks it complete when it is loaded
(`check_spellings` in tilec/targets/registry.py): every intrinsic its targets may receive has a spelling. A
definition's `semantics` names the function ("module:function") that the SIMT interpreter (tilec/simt/interp.py)
runs for it, imported when the interpreter first meets the intrinsic (the generic intrinsics' semantics are the
interpreter's own); the SIMT IR verifier checks that every call names a defined intrinsic the target offers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from . import dtypes as D


@dataclass(frozen=True)
class IntrinsicDef:
    op: str
    params: Mapping[str, type] = field(default_factory=dict)  # compile-time parameters and their types
    feature: str | None = None  # Target capability needed (matrix instruction, async copy or feature); None: all
    statement: bool = True  # an SCall statement (else an expression, S.Intrinsic)
    key: Callable[[dict], str] | None = None  # the printed name for given parameters (default: op)
    pattern: str | None = None  # regex with a group per parameter, matching the printed name
    doc: str = ""
    semantics: str | None = None  # "module:function" the SIMT interpreter runs (None: the interpreter's own)
    value_type: D.DType | None = None  # an expression intrinsic's type (None: its first argument's)

    def name(self, params: dict) -> str:
        return self.key(params) if self.key else self.op

    def parse(self, name: str) -> dict | None:
        if self.pattern is None:
            return {} if name == self.op else None
        m = re.fullmatch(self.pattern, name)
        if m is None:
            return None
        out = {}
        for k, ty in self.params.items():
            raw = m.group(k)
            out[k] = (raw is not None and raw != "") if ty is bool else ty(raw)
        return out

    def check(self, params: dict) -> None:
        if set(params) != set(self.params):
            raise TypeError(f"intrinsic {self.op} takes parameters {sorted(self.params)}, got {sorted(params)}")
        for k, ty in self.params.items():
            if not isinstance(params[k], ty):
                raise TypeError(f"intrinsic {self.op}: parameter {k} must be {ty.__name__}, got {params[k]!r}")


_COPY = "vector_copy16"

DEFS: dict[str, IntrinsicDef] = {d.op: d for d in [
    # copies
    IntrinsicDef("copy16", feature=_COPY, doc="16 bytes shared/global <- global/shared"),
    IntrinsicDef("copy16_or_zero", feature=_COPY, doc="16 bytes, or zeros where the predicate is false"),
    IntrinsicDef("copy16_realign", feature="cp.async",
                 doc="16 bytes of shared memory <- the n elements at a global address of any element alignment, zeros "
                     "after them; reads stay below the tensor's end (the fourth argument)"),
    IntrinsicDef("copy_shifted", {"chunks": int}, "cp.async", key=lambda p: f"copy_shifted{p['chunks']}",
                 pattern=r"copy_shifted(?P<chunks>\d+)",
                 doc="`chunks` 16-byte chunks of shared memory (one address each) <- consecutive bytes at a global "
                     "address of any element alignment, all inside the tensor with 16 bytes more after them"),
    IntrinsicDef("load_realign", {"n": int}, "cp.async", key=lambda p: f"load_realign{p['n']}",
                 pattern=r"load_realign(?P<n>\d+)",
                 doc="n elements into registers (converted) from a global row not aligned to n elements: the "
                     "arguments are the registers, the aligned unit of n elements holding the first, the shift "
                     "(elements into it), how many to read (zeros after them) and the tensor's end"),
    IntrinsicDef("cp_async16", feature="cp.async", doc="asynchronous 16-byte global -> shared copy"),
    IntrinsicDef("cp_async_commit", feature="cp.async"),
    IntrinsicDef("cp_async_wait", feature="cp.async", doc="wait until at most N groups are in flight"),
    IntrinsicDef("load_vec", {"n": int}, _COPY, key=lambda p: f"load_vec{p['n']}", pattern=r"load_vec(?P<n>\d+)",
                 doc="n elements into registers, converting the type, zero where the predicate is false"),
    IntrinsicDef("store_vec", {"n": int}, _COPY, key=lambda p: f"store_vec{p['n']}",
                 pattern=r"store_vec(?P<n>\d+)"),
    IntrinsicDef("atomic", {"kind": str}, key=lambda p: f"atomic_{p['kind']}",
                 pattern=r"atomic_(?P<kind>add|max|min)"),
    IntrinsicDef("atomic_prev", {"kind": str}, key=lambda p: f"atomic_{p['kind']}_prev",
                 pattern=r"atomic_(?P<kind>add|max|min)_prev",
                 doc="an atomic update whose first argument, a register, receives the element's previous value"),
    IntrinsicDef("fence_device", feature="device_fence",
                 doc="this thread's earlier global-memory writes are visible to every block before its later ones"),
    IntrinsicDef("prof_init", feature="timeline_profile", doc="open this warp's profile record (tilec/ir/profile.py)"),
    IntrinsicDef("prof_mark", {"phase": int, "end": bool}, "timeline_profile",
                 key=lambda p: f"prof_{'end' if p['end'] else 'begin'}{p['phase']}",
                 pattern=r"prof_(?:begin|(?P<end>end))(?P<phase>\d+)", doc="a timestamp at a phase's begin or end"),
    IntrinsicDef("print", {"fmt": str}, key=lambda p: f"print:{p['fmt']}", pattern=r"print:(?P<fmt>.*)",
                 doc="one line of text (printf: the format, then its arguments)"),
    # expressions
    IntrinsicDef("shfl_xor", feature="warp_shuffle", statement=False),
    IntrinsicDef("aligned16", feature=_COPY, statement=False, value_type=D.BOOL),
    IntrinsicDef("aligned", feature=_COPY, statement=False, value_type=D.BOOL),
]}

_loaded = False


def define(*defs: IntrinsicDef) -> None:
    """Add a back end's intrinsics (tilec/targets/<backend>/intrinsics.py); an op defined twice is an error."""
    for d in defs:
        if d.op in DEFS and DEFS[d.op] is not d:
            raise ValueError(f"intrinsic {d.op} is defined twice")
        DEFS[d.op] = d


def _load() -> None:
    """Import every back end's intrinsics module (tilec/targets/<backend>/intrinsics.py, found by its place: a back
    end with intrinsics of its own needs no line anywhere else); each calls `define`."""
    global _loaded
    if not _loaded:
        _loaded = True
        import importlib.util
        import pkgutil

        targets = importlib.import_module(__name__.rsplit(".", 2)[0] + ".targets")
        for sub in pkgutil.iter_modules(targets.__path__):
            name = f"{targets.__name__}.{sub.name}.intrinsics"
            if sub.ispkg and importlib.util.find_spec(name) is not None:
                importlib.import_module(name)


def get(op: str) -> IntrinsicDef | None:
    """The definition of intrinsic `op` (a back end's included), or None."""
    _load()
    return DEFS.get(op)


def lookup(op: str) -> IntrinsicDef:
    """The definition of intrinsic `op`; KeyError when there is none."""
    d = get(op)
    if d is None:
        raise KeyError(f"no intrinsic '{op}' is defined")
    return d


def all_defs() -> Iterator[IntrinsicDef]:
    """Every definition, the back ends' included."""
    _load()
    return iter(list(DEFS.values()))


def parse(name: str) -> tuple[str, dict]:
    """(op, params) of a printed intrinsic name; KeyError if no definition matches."""
    d = get(name)
    if d is not None and not d.params:
        return d.op, {}
    for d in all_defs():
        if d.params:
            params = d.parse(name)
            if params is not None:
                return d.op, params
    raise KeyError(f"no intrinsic is named '{name}'")


def offered(d: IntrinsicDef, target) -> bool:
    """Whether `target` has what intrinsic d needs."""
    f = d.feature
    return (f is None or f in target.matrix_instructions or f in target.async_copy or f in target.features)
