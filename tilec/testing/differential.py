"""Differential checks: one kernel's outputs from the Tile IR interpreter against another execution of it (the
SIMT model of a target's lowering, WebGPU, the AscendC model), on the same inputs.

Outputs start as NaN, so an element the other execution fails to write is a mismatch -- except the outputs a kernel
accumulates into (an atomic update, or a read of the output before or while writing it, as mha_bwd's dQ): those
start from the same finite random values in both, since NaN + x is NaN on both sides and would hide any error.

Tolerance, from the output's dtype and the reduction length L (the largest runtime size, a bound on any sum's
length): both executions round the same inputs the same way and differ only in the order of f32 accumulation, by
at most about sqrt(L) f32 ulps of a sum of L products of unit-normal values (of magnitude sqrt(L)), and then by the
rounding of that sum to the output dtype: two ulps of the output dtype relative, and that times sqrt(L) absolute
(cancellation makes the relative error of a small sum large). A wrong layout, predicate or missing element gives
errors of order one.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from ..ir import tile as T
from ..ir.visit import sub_exprs, walk_stmts

# machine epsilon of each float dtype (2**-mantissa bits)
EPS = {"f16": 2.0**-10, "bf16": 2.0**-7, "f32": 2.0**-23, "f64": 2.0**-52, "f8e4m3": 2.0**-3, "f8e5m2": 2.0**-2}


def accumulated_outputs(kernel: T.Kernel) -> set[str]:
    """The outputs `kernel` updates in place: targets of atomics, and outputs it reads."""
    from ..ir.threads import stmt_exprs
    from ..ops.registry import op_module, reads

    outputs = {p: p.name for p in kernel.params if isinstance(p, T.Buffer) and p.is_output}
    found = set()
    for s in walk_stmts(kernel.body):
        if isinstance(s, T.Atomic) and s.dst.buffer in outputs:
            found.add(outputs[s.dst.buffer])
        if op_module(s) is not None:
            found |= {outputs[r.buffer] for r in reads(s) if r.buffer in outputs}
        for e in stmt_exprs(s):
            found |= {outputs[x.buffer] for x in sub_exprs(e) if isinstance(x, T.Load) and x.buffer in outputs}
    return found


def prepare_outputs(kernel: T.Kernel, args: dict, seed: int = 0) -> dict:
    """`args` with the float outputs set to NaN, and the accumulated ones to finite random values (in place)."""
    from ..interp.run import random_array

    rng = np.random.default_rng(seed)
    accumulated = accumulated_outputs(kernel)
    for p in kernel.params:
        if not (isinstance(p, T.Buffer) and p.is_output and isinstance(args.get(p.name), np.ndarray)):
            continue
        if p.name in accumulated:
            args[p.name][...] = random_array(p.dtype, args[p.name].shape, rng)
        elif p.dtype.is_float:
            args[p.name][...] = np.nan
    return args


def tolerance(dtype: str, reduction: int) -> tuple[float, float]:
    """(rtol, atol) for an output of `dtype` from sums of at most `reduction` terms (module docstring)."""
    if dtype not in EPS:
        return 0.0, 0.0  # integers and bools: exact
    spread = math.sqrt(max(reduction, 1))
    rtol = max(2 * EPS[dtype], 4 * EPS["f32"] * spread)
    return rtol, rtol * spread


def mismatches(kernel: T.Kernel, got: dict, want: dict, sizes: dict[str, int]) -> list[str]:
    """One line per output that differs beyond its tolerance (empty when all agree)."""
    reduction = max(sizes.values(), default=1)
    out = []
    for p in kernel.params:
        if not (isinstance(p, T.Buffer) and p.is_output):
            continue
        g, w = np.asarray(got[p.name]).astype(np.float64), np.asarray(want[p.name]).astype(np.float64)
        rtol, atol = tolerance(p.dtype.name, reduction)
        # (an element the interpreter leaves NaN -- unwritten by an in-place kernel, or NaN by its arithmetic --
        # must be NaN in the other execution too)
        bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            first = np.argwhere(bad)[0].tolist()
            out.append(f"{p.name} differs in {int(bad.sum())} of {bad.size} elements (first at {first}: "
                       f"{g[tuple(first)]:.6g} "
                       f"against {w[tuple(first)]:.6g}; rtol {rtol:.2g}, atol {atol:.2g}), "
                       f"{int(np.isnan(g).sum())} unwritten")
    return out


def simt_against_interpreter(kernel: T.Kernel, lowered, sizes: dict[str, int], seed: int = 0,
                             warp_size: int = 32) -> tuple[list[str], collections.Counter]:
    """Run the SIMT kernel `lowered` (a lowering of Tile IR `kernel`) in the SIMT model and `kernel` in the
    interpreter on the same fresh random inputs (outputs as prepare_outputs leaves them); the mismatches and how many
    lanes ran each intrinsic statement, by op. The model's own findings (races, out-of-bounds accesses, deadlocks)
    raise SimtInterpreterError."""
    from ..interp import random_inputs, run_kernel
    from ..simt.interp import run_simt

    sizes = {n: v for n, v in sizes.items() if n in {s.name for s in kernel.size_vars}}
    args = prepare_outputs(kernel, random_inputs(kernel, sizes, seed), seed)
    want = {n: np.array(a, copy=True) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    run_kernel(kernel, want)
    counts: collections.Counter = collections.Counter()
    run_simt(lowered, args, sizes, warp_size=warp_size, op_counts=counts)
    return mismatches(kernel, args, want, sizes), counts
