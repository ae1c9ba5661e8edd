"""Search spaces declared in the source: `const NAME = tune(...)` and `const (A, B) = tune((a1, b1), (a2, b2))`.

    const block_N = tune(128, 256)                                  # an axis; the default is the first value
    const (block_M, block_N, threads) = tune((128, 128, 128), (128, 256, 256), sm90=(128, 256, 256))
    const num_stages = tune(2, 3, 4, where=num_stages * block_N <= 1024)
    const split_k = tune(1, 2, 4, when=split_k == 1 or K >= 512 * split_k)

The positional arguments are the candidates (a tuple for a tuple of names: values that go together). A keyword
named after a target (`sm90`, `webgpu`, `gfx942`) or a back end (`cuda`, `hip`, `webgpu`) gives that target's
default, most specific first; it joins the candidates. `where=` is a constraint over this const and the consts
before it: the tuner skips the candidates that break it; a default that breaks it gives way to the next candidate
(the target's first, then the source's order); -D values that break it are an error. `when=` is a condition over
the consts and the kernel's runtime sizes under which a configuration is worth launching: an artifact carrying
several tuned configurations (tilec/tuning/multi.py) passes over one whose condition is false at a launch's sizes.
The build folds the consts in (`fold_when`) and the manifest's dispatch table keeps what is left, a condition tree
over size names (tilec.manifest.condition_holds).

Without a tuning database a build binds each name to its target's default; `-D NAME=VALUE` (which the tuner
and a database's configurations use too) overrides. The builder (tilec/parser/build.py) calls `bind_const`;
the driver says which target the build is for with `building(keys)`, and the tuner (tilec/tuning/) reads the
axes a build met from the context it passes. A part of the language, so it lives with the parser; the standard
library and tilec.manifest's condition operators only (the driver imports it at start-up).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..manifest import CONDITION_BINARY

TUNE = "tune"


@dataclass
class Axis:
    """One `tune(...)` const: its names, candidate values (one tuple per candidate, in the source's order), the
    per-target defaults and whether it has a constraint."""

    names: tuple[str, ...]
    candidates: list[tuple]
    per_target: dict[str, tuple]
    has_where: bool
    chosen: tuple  # what this build bound
    when: object = True  # the `when=` condition with this build's consts in: True, False or a tree over sizes
    when_span: object = None


@dataclass
class TuneContext:
    """What a build needs to know to bind `tune()` consts, and what it met. `target_keys` are the target's
    name and its back end's (most specific first); empty for a target-neutral build."""

    target_keys: tuple[str, ...] = ()
    axes: list[Axis] = field(default_factory=list)
    kernel_suffix: str = ""  # appended to every kernel's name: a tuned configuration's variant (tuning.multi)


_CONTEXT: contextvars.ContextVar[TuneContext | None] = contextvars.ContextVar("tilec_tune_context", default=None)


@contextlib.contextmanager
def building(target_keys: tuple[str, ...] = (), context: TuneContext | None = None) -> Iterator[TuneContext]:
    """Bind `tune()` consts for the target named by `target_keys` during this block (a build, in the driver)."""
    ctx = context or _CONTEXT.get() or TuneContext()  # a tuner's context, set around the compile, is kept
    ctx.target_keys = tuple(target_keys)
    token = _CONTEXT.set(ctx)
    try:
        yield ctx
    finally:
        _CONTEXT.reset(token)


def rename_kernels(kernels, launches=()) -> None:
    """Give the kernels of a build their variant's name (the driver's hook, right after the build). A multi-launch
    function (tilec.ir.tile.Launches) takes the suffix as a whole and its stages keep theirs after it
    (gemm__cfg3, its stages gemm__cfg3__stage0, gemm__cfg3__stage1), so that each variant's stages are told apart
    from the others' by the public name's variant."""
    ctx = _CONTEXT.get()
    if ctx is None or not ctx.kernel_suffix:
        return
    sfx = ctx.kernel_suffix
    renamed = {}
    for k in kernels:
        of = k.stage_of
        new = of + sfx + k.name[len(of):] if of else k.name + sfx
        renamed[k.name] = new
        k.name = new
        if of:
            k.attrs["stage_of"] = of + sfx
    for seq in launches:
        seq.name += sfx
        for st in seq.stages:
            st.kernel = renamed[st.kernel]


# The builder hands this module nodes of tilec/parser/ast.py; they are recognised by class name, so that the driver
# importing this module at start-up does not import the AST's module.


def is_tune_call(node) -> bool:
    func = getattr(node, "func", None)
    return type(node).__name__ == "CallExpr" and type(func).__name__ == "Name" and func.id == TUNE


def bind_const(builder, decl, scope) -> None:
    """Bind the names of a `tune()` const declaration (the builder's hook)."""
    names = decl.names or (decl.name,)
    for n in names:
        builder.check_redefinition(n, decl.span, scope)
    if not is_tune_call(decl.value):
        raise builder.fail(f"a const of several names ({', '.join(names)}) takes a tune(...) of tuples", decl.span)
    call = decl.value
    if not call.args:
        raise builder.fail("tune() needs at least one candidate value", call.span)

    def candidate(node) -> tuple:
        items = node.items if type(node).__name__ == "TupleExpr" and len(names) > 1 else [node]
        if len(items) != len(names):
            raise builder.fail(f"a candidate for ({', '.join(names)}) needs {len(names)} values, got {len(items)}",
                               node.span)
        return tuple(builder.const_value(i, scope) for i in items)

    candidates = [candidate(a) for a in call.args]
    per_target: dict[str, tuple] = {}
    where = when = None
    for kw in call.kwargs:
        if kw.name == "where":
            where = kw.value
        elif kw.name == "when":
            when = kw.value
        else:
            per_target[kw.name] = candidate(kw.value)
            if per_target[kw.name] not in candidates:
                candidates.append(per_target[kw.name])
    ctx = _CONTEXT.get()
    keys = ctx.target_keys if ctx is not None else ()
    overridden = [n for n in names if n in builder.defines]
    # A partial -D of a tuple takes the rest from the first candidate, so that it means the same on every target.
    preferred = [] if overridden else [per_target[k] for k in keys if k in per_target]
    order = list(dict.fromkeys(preferred + candidates)) if not overridden else [candidates[0]]
    for chosen in order:  # the default: the first in this order that the constraint allows
        values = dict(zip(names, chosen, strict=True))
        for n in overridden:
            values[n] = builder.defines[n]
            builder.used_defines.add(n)
        for n in names:
            scope.bind(n, ("const", values[n]))
            builder.consts[n] = values[n]
        if where is None or builder.const_value(where, scope):
            break
    else:
        shown = ", ".join(f"{n}={_show(v)}" for n, v in values.items())
        why = "the -D values" if overridden else "no candidate (the last tried:"
        tail = "" if overridden else ")"
        raise builder.fail(f"{why} {shown}{tail} break this const's constraint (where=)", where.span)
    if ctx is not None:
        ctx.axes.append(Axis(names, candidates, per_target, where is not None, tuple(values[n] for n in names),
                             True if when is None else _as_condition(fold_when(builder, when, scope)),
                             None if when is None else when.span))


def fold_when(builder, node, scope):
    """A `when=` condition with the consts' values in: a bool or an int where it folds, else a tree whose leaves
    are ints and runtime size names (checked against the kernel's sizes when the dispatch table is written) and
    whose nodes are [op, operand, ...] lists (the manifest's form, tilec.manifest.condition_holds)."""
    kind = type(node).__name__
    if kind == "Number":
        if isinstance(node.value, int):
            return node.value
        raise builder.fail("when= takes integers: the runtime sizes are whole numbers", node.span)
    if kind == "Name":
        if node.id in ("True", "False"):
            return node.id == "True"
        bound = scope.lookup(node.id)
        if bound is None:
            return node.id  # a runtime size
        if isinstance(bound, tuple) and bound[0] == "const" and isinstance(bound[1], int):
            return bound[1]
        raise builder.fail(f"'{node.id}' is not an integer const or a runtime size; when= compares the consts with "
                           "the kernel's sizes", node.span)
    if kind in ("BinOp", "CompareOp") and node.op in CONDITION_BINARY:
        left, right = fold_when(builder, node.left, scope), fold_when(builder, node.right, scope)
        if isinstance(left, int) and isinstance(right, int):
            if node.op in ("//", "%") and right == 0:
                raise builder.fail("division by zero in when=", node.span)
            return CONDITION_BINARY[node.op](left, right)
        return [node.op, left, right]
    if kind == "UnaryOp" and node.op in ("not", "-"):
        operand = fold_when(builder, node.operand, scope)
        if isinstance(operand, int):
            return (not operand) if node.op == "not" else -operand
        return ["neg" if node.op == "-" else "not", operand]
    if kind in ("BoolOp", "BinOp") and node.op in ("and", "or"):
        deciding = node.op == "or"  # the value that decides an `or` (True) or an `and` (False)
        rest = []
        for v in getattr(node, "values", None) or [node.left, node.right]:
            folded = fold_when(builder, v, scope)
            if isinstance(folded, int):
                if bool(folded) == deciding:
                    return deciding
                continue
            rest.append(folded)
        if not rest:
            return not deciding
        return rest[0] if len(rest) == 1 else [node.op, *rest]
    raise builder.fail("when= takes integer arithmetic (+ - * // %), comparisons and and/or/not over the consts and "
                       "the kernel's runtime sizes", node.span)


def _as_condition(folded):
    return bool(folded) if isinstance(folded, int) else folded


def when_of(axes: list[Axis]):
    """The condition under which a build of these axes is worth launching: True, or a tree (`fold_when`)."""
    parts = [a.when for a in axes if a.when is not True]
    if any(p is False for p in parts):
        return False
    return True if not parts else parts[0] if len(parts) == 1 else ["and", *parts]


def _show(value) -> str:
    return str(getattr(value, "name", value))
