"""Which buffers and variables a Tile IR kernel touches, and which buffers it writes.

A generic walk over the statements' and expressions' fields (so a new tile op is covered without a line here:
what it writes is the fields its class declares in `written_fields`, tilec/ir/tile.py). The builder splits a
multi-launch kernel function with it: each stage kernel takes the parameters and scratch tensors it uses, a
scratch tensor is a stage's output when the stage writes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from . import tile as T
from .visit import walk_stmts


def _nodes(value) -> Iterator[object]:
    """Every Buffer, Var, Load and Region reachable from value (through dataclass fields and lists)."""
    if isinstance(value, list | tuple):
        for v in value:
            yield from _nodes(v)
        return
    if isinstance(value, T.Buffer):
        yield value
        for d in value.shape:
            yield from _nodes(d)
        if value.view_of is not None:  # a view uses the memory of the buffer it views
            yield from _nodes(value.view_of)
        return
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return
    yield value
    for f in dataclasses.fields(value):
        if f.name not in ("span", "dtype"):
            yield from _nodes(getattr(value, f.name))


def used(kernel: T.Kernel) -> tuple[set[T.Buffer], set[T.Var]]:
    """(the buffers, the variables) that the kernel's grid and body refer to."""
    bufs: set[T.Buffer] = set()
    names: set[T.Var] = set()
    for n in _nodes([kernel.grid, kernel.body]):
        if isinstance(n, T.Buffer):
            bufs.add(n)
        elif isinstance(n, T.Var):
            names.add(n)
    return bufs, names


def written(kernel: T.Kernel) -> set[T.Buffer]:
    """The buffers some statement of the kernel writes (a write through a view writes its storage too)."""
    out: set[int] = set()
    for s in walk_stmts(kernel.body):
        for name in type(s).written_fields:  # what the statement declares it writes (tilec/ir/tile.py)
            target = getattr(s, name)
            buf = target if isinstance(target, T.Buffer) else target.buffer
            out.update((buf, buf.storage))
    return out


def first_use(kernel: T.Kernel, buf: T.Buffer):
    """The span of the kernel's first reference to buf: the element read or region, else its statement (None
    when nothing refers to it)."""
    for s in walk_stmts(kernel.body):
        own = [getattr(s, f.name) for f in dataclasses.fields(s) if f.name not in ("body", "then_body", "else_body")]
        for n in _nodes(own):
            if isinstance(n, T.Load | T.Region) and n.buffer is buf:
                return n.span or s.span
        if any(n is buf for n in _nodes(own)):
            return s.span
    return None

