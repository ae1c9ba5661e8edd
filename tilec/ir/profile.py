"""The intra-kernel timeline profiler's instrumentation: phases, and the marks that bracket them in SIMT IR.

A profiled build (`CompileOptions.profile`, `tilec profile`) records, for every warp, a timestamp at the begin and
the end of each phase. Two levels of phases are marked:

  * tile operations, by lower-to-simt (`tile_phase`): the statements a user wrote — loads and stores of tiles,
    gemm, reductions, element-wise Parallel loops, fills, atomics;
  * the waits and issues inside them, here (`instrument`), after lowering: barriers, cp.async and mbarrier
    waits of a pipeline, TMA issue, wgmma issue and wait.

The marks nest (a `gemm_wait` inside a `gemm`); the trace shows both and the summary counts each instant once,
in the innermost phase. A mark is recorded by lane 0 of its warp only, so a mark must sit where lane 0 runs it
(code run by one elected thread is elected as thread 0 of a warp: tilec's lowering always does so).

The device side (tilec/targets/cuda/include/tilec_profile.h) writes one 64-bit word per mark: the tag
(phase * 2 + 1 for a begin, + 2 for an end; 0 means an empty slot) in the top 16 bits and the SM clock
(clock64) in the low 48. `tilec/runtime/profile.py` decodes the buffer; the manifest's `profile` entry of a
kernel (`manifest_entry`) tells it the phase names and the layout.
"""

from __future__ import annotations

from . import simt as S
from . import tile as T

# Phase names, in tag order (a tag's phase is its index here). Appending keeps old buffers decodable.
PHASES = (
    "kernel",  # the whole kernel body, per warp
    "load",  # a tile copied from global memory (into shared memory or registers)
    "store",  # a tile copied to global memory (the epilogue)
    "copy",  # a tile copied between shared memory and registers
    "gemm",  # a gemm tile op (mma.sync or wgmma, operand loads included)
    "reduce",  # reduce_* and cumsum (softmax's max and sum)
    "elementwise",  # a Parallel loop (softmax's exp, scaling, masks)
    "fill",  # fill / clear
    "atomic",  # atomic_* tile ops
    "barrier",  # a block or named barrier
    "pipeline_wait",  # cp.async.wait of a pipelined loop
    "mbar_wait",  # an mbarrier wait: a TMA stage to land, or a stage to be freed (warp-specialized producer)
    "tma_issue",  # issuing TMA loads or stores
    "gemm_issue",  # issuing wgmma.mma_async
    "gemm_wait",  # wgmma.wait_group
)
PHASE = {name: i for i, name in enumerate(PHASES)}
WAIT_PHASES = ("barrier", "pipeline_wait", "mbar_wait", "gemm_wait")  # a warp waiting: the summary's stalls
HEADER_WORDS = 4  # per warp: globaltimer and clock64 at kernel entry, SM id, globaltimer at kernel exit
SYMBOL = "tilec_profile"  # the module's __device__ configuration the runtime writes before a launch

# SIMT intrinsic statements bracketed by `instrument`, by op
_CALL_PHASES = {
    "cp_async_wait": "pipeline_wait", "mbar_wait": "mbar_wait", "named_barrier_sync": "barrier",
    "tma_load": "tma_issue", "tma_store": "tma_issue", "wgmma": "gemm_issue", "wgmma_wait": "gemm_wait",
}


def tile_phase(s: T.Stmt) -> str | None:
    """The phase of a top-level Tile IR statement, or None for statements not timed on their own."""
    if isinstance(s, T.Copy):
        if s.dst.buffer.scope == "global":
            return "store"
        return "load" if s.src.buffer.scope == "global" else "copy"
    if isinstance(s, T.For) and s.kind == "parallel":
        return "elementwise"
    return type(s).phase  # what a tile op declares (tilec/ir/tile.py), None for the others


def mark(phase: str, end: bool) -> S.SCall:
    return S.call(None, "prof_mark", [], phase=PHASE[phase], end=end)


def bracket(phase: str, body: list[S.SStmt]) -> list[S.SStmt]:
    return [mark(phase, False), *body, mark(phase, True)]


def instrument(k: S.SKernel, level: str) -> None:
    """Bracket the waits and issues of a lowered, profiled kernel, and open its recording (prof_init and the
    `kernel` phase, closed at the end of the body). `level` is "full" (lower-to-simt marked the tile ops) or
    "sync" (waits and issues only: fewer marks, less overhead, the rest of the time is "other")."""
    k.body = [S.call(None, "prof_init", []), mark("kernel", False), *_merged(_marked(k.body)), mark("kernel", True)]
    k.attrs["profile"] = manifest_entry(level)


def _marked(body: list[S.SStmt]) -> list[S.SStmt]:
    """body with its waits and issues bracketed; a run of adjacent statements of one phase (the wgmma of one
    gemm step, the TMA boxes of one stage) shares one bracket."""
    out: list[S.SStmt] = []
    run: list[S.SStmt] = []
    run_phase = None
    for s in body:
        if isinstance(s, S.SFor):
            s.body = _marked(s.body)
        elif isinstance(s, S.SIf):
            s.then_body = _marked(s.then_body)
            s.else_body = _marked(s.else_body)
        phase = "barrier" if isinstance(s, S.Barrier) else (
            _CALL_PHASES.get(s.op) if isinstance(s, S.SCall) else None)
        if run and phase != run_phase:
            out.extend(bracket(run_phase, run))
            run = []
        if phase is None:
            out.append(s)
        else:
            run.append(s)
            run_phase = phase
    if run:
        out.extend(bracket(run_phase, run))
    return out


def _merged(body: list[S.SStmt]) -> list[S.SStmt]:
    """Drop an end mark followed at once by a begin mark of the same phase (two adjacent element-wise loops are one
    span): every mark costs time, and the device cannot tell the two spans apart usefully anyway."""
    out: list[S.SStmt] = []
    for s in body:
        if isinstance(s, S.SFor):
            s.body = _merged(s.body)
        elif isinstance(s, S.SIf):
            s.then_body, s.else_body = _merged(s.then_body), _merged(s.else_body)
        if (out and _is_mark(s) and not s.params["end"] and _is_mark(out[-1]) and out[-1].params["end"]
                and out[-1].params["phase"] == s.params["phase"]):
            out.pop()
            continue
        out.append(s)
    return out


def _is_mark(s: S.SStmt) -> bool:
    return isinstance(s, S.SCall) and s.op == "prof_mark"


def manifest_entry(level: str = "full") -> dict:
    """The kernel's `profile` entry in the manifest: what the runtime needs to record and decode."""
    return {"symbol": SYMBOL, "level": level, "phases": list(PHASES), "waits": list(WAIT_PHASES),
            "header_words": HEADER_WORDS, "clock_bits": 48}
