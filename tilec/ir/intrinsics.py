"""Every intrinsic SIMT IR may call, defined once: its typed parameters and the target capability it needs.

Lowering builds calls through `simt.call(...)` / `simt.value(...)`, which check the parameters against the definition
and record them on the node (`SCall.op`, `SCall.params`); the node's `name` is the intrinsic's printed key
(`load_vec8`, `wgmma_rs:n64:f16:1`), produced and parsed here only. Each dialect (tilec/targets/*/codegen.py)
spells intrinsics from a table keyed by `op` and checks it complete when it is loaded
(`check_spellings` in tilec/targets/registry.py): every intrinsic its targets may receive has a spelling. The SIMT
interpreter registers its semantics per op, and the SIMT IR verifier checks that every call names a defined
intrinsic the target offers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class IntrinsicDef:
    op: str
    params: Mapping[str, type] = field(default_factory=dict)  # compile-time parameters and their types
    feature: str | None = None  # Target capability needed (matrix instruction, async copy or feature); None: all
    statement: bool = True  # an SCall statement (else an expression, S.Intrinsic)
    key: Callable[[dict], str] | None = None  # the printed name for given parameters (default: op)
    pattern: str | None = None  # regex with a group per parameter, matching the printed name
    doc: str = ""

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
_MMA = "mma.sync.m16n8k16"
_MFMA = "mfma.16x16x16"
_WGMMA = "wgmma.m64nNk16"

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
    IntrinsicDef("prof_init", feature="timeline_profile", doc="open this warp's profile record (tilec/ir/profile.py)"),
    IntrinsicDef("prof_mark", {"phase": int, "end": bool}, "timeline_profile",
                 key=lambda p: f"prof_{'end' if p['end'] else 'begin'}{p['phase']}",
                 pattern=r"prof_(?:begin|(?P<end>end))(?P<phase>\d+)", doc="a timestamp at a phase's begin or end"),
    IntrinsicDef("print", {"fmt": str}, key=lambda p: f"print:{p['fmt']}", pattern=r"print:(?P<fmt>.*)",
                 doc="one line of text (printf: the format, then its arguments)"),
    # mma.sync (sm80+)
    IntrinsicDef("ldmatrix", {"count": int, "trans": bool}, _MMA,
                 key=lambda p: f"ldmatrix_x{p['count']}" + ("_trans" if p["trans"] else ""),
                 pattern=r"ldmatrix_x(?P<count>[24])(?P<trans>_trans)?"),
    IntrinsicDef("mma", {"dtype": str}, _MMA, key=lambda p: f"mma_{p['dtype']}", pattern=r"mma_(?P<dtype>f16|bf16)"),
    # AMD MFMA
    IntrinsicDef("mfma", {"dtype": str}, _MFMA,
                 key=lambda p: "mfma_f32_16x16x16f16" if p["dtype"] == "f16" else "mfma_f32_16x16x16bf16_1k",
                 pattern=r"mfma_f32_16x16x16(?P<dtype>f16|bf16)(_1k)?"),
    IntrinsicDef("mfma_fp8", {"dtype": str}, "mfma.16x16x32.fp8",
                 key=lambda p: f"mfma_f32_16x16x32_{p['dtype']}", pattern=r"mfma_f32_16x16x32_(?P<dtype>f8e4m3|f8e5m2)",
                 doc="8 fp8 values of A and B per lane (OCP e4m3/e5m2 in memory, FNUZ in the instruction)"),
    # Hopper: mbarriers, TMA, warp specialization, wgmma
    IntrinsicDef("mbar_init", feature="tma"),
    IntrinsicDef("fence_mbar_init", feature="tma"),
    IntrinsicDef("mbar_expect_tx", feature="tma"),
    IntrinsicDef("mbar_arrive", feature="tma"),
    IntrinsicDef("mbar_arrive_warp", feature="tma"),
    IntrinsicDef("mbar_wait", feature="tma"),
    IntrinsicDef("tma_load", {"rank": int}, "tma", key=lambda p: f"tma_load_{p['rank']}d",
                 pattern=r"tma_load_(?P<rank>\d)d"),
    IntrinsicDef("tma_load_multicast", {"rank": int}, "tma", key=lambda p: f"tma_load_multicast_{p['rank']}d",
                 pattern=r"tma_load_multicast_(?P<rank>\d)d",
                 doc="one box into the same shared offset of every block of the cluster in a mask, completing each "
                     "one's mbarrier at the same offset"),
    IntrinsicDef("mbar_arrive_cluster_warp", feature="tma",
                 doc="lane 0 of the warp arrives on the mbarrier at this offset in every block of the cluster in a "
                     "mask (after __syncwarp)"),
    IntrinsicDef("cluster_sync", feature="tma", doc="barrier.cluster arrive (release) + wait (acquire): every thread "
                                                    "of every block of the cluster"),
    IntrinsicDef("tma_store", {"rank": int}, "tma", key=lambda p: f"tma_store_{p['rank']}d",
                 pattern=r"tma_store_(?P<rank>\d)d"),
    IntrinsicDef("tma_store_commit", feature="tma"),
    IntrinsicDef("tma_store_wait", feature="tma"),
    IntrinsicDef("fence_proxy_async", feature="tma"),
    IntrinsicDef("setmaxnreg_inc", feature="tma"),
    IntrinsicDef("setmaxnreg_dec", feature="tma"),
    IntrinsicDef("named_barrier_sync", feature="tma"),
    IntrinsicDef("named_barrier_arrive", feature="tma"),
    # operands "ss": A and B from shared memory (descriptors), "rs": A from registers
    IntrinsicDef("wgmma", {"operands": str, "n": int, "dtype": str, "b_k_major": int}, _WGMMA,
                 key=lambda p: f"wgmma_{p['operands']}:n{p['n']}:{p['dtype']}:{p['b_k_major']}",
                 pattern=r"wgmma_(?P<operands>rs|ss):n(?P<n>\d+):(?P<dtype>\w+):(?P<b_k_major>[01])"),
    IntrinsicDef("wgmma_fence", feature=_WGMMA),
    IntrinsicDef("wgmma_commit", feature=_WGMMA),
    IntrinsicDef("wgmma_wait", feature=_WGMMA),
    IntrinsicDef("wgmma_fence_regs", feature=_WGMMA),
    # expressions
    IntrinsicDef("shfl_xor", feature="warp_shuffle", statement=False),
    IntrinsicDef("aligned16", feature=_COPY, statement=False),
    IntrinsicDef("aligned", feature=_COPY, statement=False),
    IntrinsicDef("pack_half2", feature=_MMA, statement=False),
    IntrinsicDef("pack_bf162", feature=_MMA, statement=False),
    IntrinsicDef("pack2", feature=_WGMMA, statement=False),
    IntrinsicDef("grid_dim_x", feature="tma", statement=False),
]}
def parse(name: str) -> tuple[str, dict]:
    """(op, params) of a printed intrinsic name; KeyError if no definition matches."""
    d = DEFS.get(name)
    if d is not None and not d.params:
        return d.op, {}
    for d in DEFS.values():
        if d.params:
            params = d.parse(name)
            if params is not None:
                return d.op, params
    raise KeyError(f"no intrinsic is named '{name}'")


def offered(d: IntrinsicDef, target) -> bool:
    """Whether `target` has what intrinsic d needs."""
    f = d.feature
    return (f is None or f in target.matrix_instructions or f in target.async_copy or f in target.features)
