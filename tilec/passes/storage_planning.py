"""storage-planning — shared-memory offsets and the per-block limit.

Assumes: an SModule from lower-to-simt (and simplify).
Guarantees: every shared SBuffer has a byte `offset` into the kernel's dynamic shared memory,
aligned to 128 bytes (what 16-byte copies and ldmatrix need), buffers in a TMA 128-byte swizzle
pattern first so they start on 1024-byte boundaries (their sizes are multiples of 1024 bytes);
`shared_bytes` is the total;
a kernel needing more than the target allows is refused with an error that lists each buffer
and its size; so is a block of more threads than the target runs, and (CUDA, HIP) a block that is
not a whole number of warps; no element type the target cannot hold (Target.unsupported_dtypes)
reaches code generation.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic, Reporter
from ..ir import simt as S
from ..ir.dtype_use import unsupported
from ..targets.registry import Target

NAME = "storage-planning"
ALIGN = 128


def run(module: S.SModule, rep: Reporter, target: Target) -> S.SModule:
    for k in module.kernels:
        if target.unsupported_dtypes:  # what lowering introduced (the driver checked the Tile IR already)
            for name, where in unsupported([*k.params, *k.shared, *k.body], target.unsupported_dtypes):
                rep.diagnostics.append(Diagnostic(
                    "error", f"{name} is not supported on {target.name} yet ({where} of kernel '{k.name}')", k.span))
        if k.threads > target.max_threads:
            rep.diagnostics.append(Diagnostic(
                "error", f"kernel '{k.name}' asks for {k.threads} threads per block; {target.name} allows at most "
                f"{target.max_threads}", k.threads_span or k.span, category="threads"))
        elif k.threads % target.warp_size and "warp_shuffle" in target.features:  # the block runs as warps
            # The lowered reductions (lane shuffles) and copies assume whole warps: a partial last
            # warp reads past the block or races (the SIMT interpreter shows it), so it is refused.
            unit = "warp" if target.warp_size == 32 else "wavefront"
            rep.diagnostics.append(Diagnostic(
                "error", f"kernel '{k.name}' has {k.threads} threads, not a whole number of {target.warp_size}-lane "
                f"{unit}s: tilec's lowering needs whole {unit}s (use a multiple of {target.warp_size})",
                k.threads_span or k.span))
        offset = 0
        for b in sorted(k.shared, key=lambda b: -b.align):  # the most aligned first: least padding
            if b.alias_of is not None:
                continue
            offset = -(-offset // b.align) * b.align
            b.offset = offset
            offset += -(-(b.size or 0) * b.dtype.bytes // ALIGN) * ALIGN
        for b in k.shared:
            if b.alias_of is not None:
                b.offset = b.alias_of.offset
        k.shared_bytes = offset
        if offset > target.shared_memory_bytes:
            placed = [b for b in k.shared if b.alias_of is None]
            detail = ", ".join(f"{b.origin or b.name} {_bytes(b)} B" for b in placed)
            hint = f" ({target.shared_memory_hint})" if target.shared_memory_hint else ""
            rep.diagnostics.append(Diagnostic(
                "error",
                f"kernel '{k.name}' needs {offset} bytes of shared memory ({detail}); {target.name} allows "
                f"{target.shared_memory_bytes} bytes per block — use smaller tiles or fewer pipeline stages{hint}",
                *_at_allocations(placed, k.span), category="shared-memory"))  # (tuning/fit.py finds tiles that fit)
    rep.check()
    return module


def _bytes(b: S.SBuffer) -> int:
    return (b.size or 0) * b.dtype.bytes


def _at_allocations(placed: list[S.SBuffer], kernel_span) -> tuple:
    """(span, notes) of a shared-memory overflow: at the allocation of the largest buffer (the one to shrink
    first), with a note at each other allocation of the source; buffers the lowering made have no
    allocation to point at."""
    located = [b for b in placed if b.span is not None]
    if not located:
        return kernel_span, []
    largest = max(located, key=_bytes)
    notes = [Diagnostic("note", f"'{b.origin or b.name}' takes {_bytes(b)} bytes", b.span)
             for b in located if b is not largest]
    return largest.span, notes
