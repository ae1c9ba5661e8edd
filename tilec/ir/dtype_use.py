"""Which element types a kernel uses, and where: for the checks that keep a type a back end cannot
hold (Target.unsupported_dtypes) away from its code printer, on Tile IR before the target passes
and on SIMT IR after lowering. Works on both IRs: it walks any tree of dataclasses."""

from __future__ import annotations

from ..identity import IdentitySet


def dtypes_used(roots: list[object]) -> dict[str, str]:
    """Every element type reachable from `roots` -> how to name its first use: "parameter 'A'"
    (a global tensor), "buffer 'x'" (on-chip), or "a value" (an expression), buffers preferred."""
    found: dict[str, str] = {}
    seen = IdentitySet()  # (nodes of any kind: lists, and dataclasses that compare by value)
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        if node in seen or not hasattr(node, "__dataclass_fields__"):
            continue
        seen.add(node)
        dt = getattr(node, "dtype", None)
        name = getattr(dt, "name", None)
        if isinstance(name, str):
            scope = getattr(node, "scope", None)
            if isinstance(scope, str) and found.get(name, "a value") == "a value":
                label = getattr(node, "origin", "") or getattr(node, "name", "?")
                found[name] = f"parameter '{node.name}'" if scope == "global" else f"buffer '{label}'"
            found.setdefault(name, "a value")
        for f in node.__dataclass_fields__:
            v = getattr(node, f, None)
            if isinstance(v, list | tuple):
                stack.extend(reversed(v))
            elif hasattr(v, "__dataclass_fields__"):
                stack.append(v)
    return found


def unsupported(roots: list[object], refused: frozenset[str]) -> list[tuple[str, str]]:
    """(dtype name, its first use) for each type of `refused` that the roots use."""
    return [(n, where) for n, where in sorted(dtypes_used(roots).items()) if n in refused]
