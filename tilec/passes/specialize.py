"""specialize — bind compile-time constants and fold.

Assumes: a Module straight from the builder (constants, -D overrides included, are already
substituted as literals).
Guarantees: every expression is folded (constant subexpressions evaluated, x*1, x+0 removed);
`if` statements on compile-time conditions are replaced by the branch taken; every non-global
buffer (a view of a shared buffer too) has a compile-time shape of at most MAX_ONCHIP_BYTES (larger fits
no target, and the
passes after this one unroll work in proportion to tile sizes); Parallel and Unroll extents are
compile-time integers; loops with a zero extent are removed; a shared buffer that no statement
uses is removed (a const `if` that drops a buffer's only uses leaves it no memory); a kernel has at most
MAX_THREADS_PER_BLOCK threads and a Pipelined loop at most MAX_PIPELINE_STAGES stages (later passes
do work in proportion to both, so they are bounded here, before any of it).
"""

from __future__ import annotations

import dataclasses
import math

from ..diagnostics import Reporter
from ..ir import tile as T
from ..ir.fold import as_int, fold, fold_node
from ..ir.visit import rewrite_body, sub_exprs, walk_stmts

NAME = "specialize"

# No GPU has more on-chip memory per block than this (shared memory tops out at 227 KiB, registers
# at 255 x 4 bytes x 1024 threads); target passes check the real limits.
MAX_ONCHIP_BYTES = 4 << 20
# No GPU launches more threads per block (CUDA and HIP: 1024; WebGPU's default limit is lower and
# checked by its target), and no shared memory holds more pipeline stages of even one byte per stage
# than fit the passes' budget; targets check their real limits.
MAX_THREADS_PER_BLOCK = 1024
MAX_PIPELINE_STAGES = 64
# A Parallel loop's points are a tile's elements spread over the block's threads (and the interpreter holds an
# index array per point): more than the largest on-chip tile of bytes is no kernel's tile; 2**31 points took
# minutes and gigabytes before anything else was checked.
MAX_PARALLEL_POINTS = MAX_ONCHIP_BYTES


def _prune(s: T.Stmt) -> list[T.Stmt] | None:
    if isinstance(s, T.If) and isinstance(s.cond, T.Const):
        return s.then_body if s.cond.value else s.else_body
    if isinstance(s, T.For) and any(as_int(e) == 0 for e in s.extents):
        return []
    return None


def _buffers_used(body: list[T.Stmt]) -> set[T.Buffer]:
    """The buffers any statement other than their Alloc names: in a region, as a store's target, in a
    load (of any expression, region bounds included), or as any other operand (annotate_layout)."""
    used: set[T.Buffer] = set()

    def note(v) -> None:
        if isinstance(v, T.Buffer):
            used.add(v)
        elif isinstance(v, T.Region):
            used.add(v.buffer)
            for e in (*v.starts, *v.extents):
                note(e)
        elif isinstance(v, T.Expr):
            used.update(x.buffer for x in sub_exprs(v) if isinstance(x, T.Load))
        elif isinstance(v, list | tuple):
            for x in v:
                note(x)

    for st in walk_stmts(body):
        if isinstance(st, T.Alloc):
            continue
        for f in dataclasses.fields(st):
            if f.name not in ("body", "then_body", "else_body"):
                note(getattr(st, f.name))
    return used


def _drop_unused_shared(body: list[T.Stmt]) -> list[T.Stmt]:
    used = _buffers_used(body)
    for st in walk_stmts(body):  # a buffer used through a view of it is used
        if isinstance(st, T.Alloc) and st.buffer in used:
            b = st.buffer
            while b.view_of is not None:
                b = b.view_of
                used.add(b)
    if all(st.buffer in used for st in walk_stmts(body) if isinstance(st, T.Alloc) and st.buffer.scope == "shared"):
        return body

    def drop(st: T.Stmt) -> list[T.Stmt] | None:
        if isinstance(st, T.Alloc) and st.buffer.scope == "shared" and st.buffer not in used:
            return []
        return None

    return rewrite_body(body, lambda e: e, drop)


def run(module: T.Module, rep: Reporter) -> T.Module:
    for k in module.kernels:
        if k.threads > MAX_THREADS_PER_BLOCK:
            rep.error(f"kernel '{k.name}' has threads={k.threads}; no GPU runs more than {MAX_THREADS_PER_BLOCK} "
                      "threads per block", k.threads_span or k.span)
            continue
        k.grid = [fold(g) for g in k.grid]
        k.body = rewrite_body(k.body, fold_node, _prune)
        for s in walk_stmts(k.body):
            if isinstance(s, T.Alloc) and s.buffer.scope == "global":
                pass  # a view of a tensor (sized by the runtime sizes; the builder checked it against its storage)
            elif isinstance(s, T.Alloc):
                if s.buffer.const_shape is None:
                    rep.error(f"the shape of {s.buffer.scope} buffer '{s.buffer.name}' must be known at compile time",
                              s.span)
                elif any(d <= 0 for d in s.buffer.const_shape):
                    rep.error(f"buffer '{s.buffer.name}' has a non-positive dimension {list(s.buffer.const_shape)}",
                              s.span)
                elif math.prod(s.buffer.const_shape) * s.buffer.dtype.bytes > MAX_ONCHIP_BYTES:
                    size = math.prod(s.buffer.const_shape) * s.buffer.dtype.bytes
                    rep.error(f"{s.buffer.scope} buffer '{s.buffer.name}' {list(s.buffer.const_shape)} of "
                              f"{s.buffer.dtype} is {size} bytes; no target has more than {MAX_ONCHIP_BYTES >> 20} "
                              "MiB of on-chip memory per block", s.span)
            elif isinstance(s, T.For) and s.kind == "pipelined" and s.num_stages > MAX_PIPELINE_STAGES:
                rep.error(f"num_stages={s.num_stages}: at most {MAX_PIPELINE_STAGES} pipeline stages (each holds "
                          "its own copy of the loop's shared tiles)", s.span)
            elif isinstance(s, T.For) and s.kind in ("parallel", "unroll"):
                for e in s.extents:
                    if as_int(e) is None:
                        rep.error(f"the extent of a {s.kind.capitalize()} loop must be a compile-time integer",
                                  e.span or s.span)
                    elif as_int(e) < 0:
                        rep.error("a loop extent cannot be negative", e.span or s.span)
                points = math.prod(as_int(e) or 0 for e in s.extents)
                if s.kind == "parallel" and points > MAX_PARALLEL_POINTS:
                    rep.error(f"a Parallel loop of {points} points; at most {MAX_PARALLEL_POINTS} (the elements of a "
                              f"{MAX_ONCHIP_BYTES >> 20} MiB on-chip tile): use a serial loop over tiles", s.span)
        k.body = _drop_unused_shared(k.body)  # after the checks above: an unused buffer is still checked
    rep.check()
    return module
