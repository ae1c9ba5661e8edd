"""Evaluate the manifest's size formulas (integers, names, + - * // %, ceildiv/min/max) safely.

`evaluate` walks one formula; `compile_formulas` checks formulas with the same rules once and
turns them into one Python function, so that a launch computes its grid without parsing anything.
"""

from __future__ import annotations

import ast

_FUNCS = {"ceildiv": lambda a, b: -(-a // b), "min": min, "max": max}
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


def _check(text: str, names) -> ast.Expression:
    """Parse a formula and refuse anything but integers, the given names, + - * // % and
    ceildiv/min/max calls (KeyError for an unknown name, ValueError for anything else)."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"not a size formula: {text}") from None

    def walk(n: ast.AST) -> None:
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return
        if isinstance(n, ast.Name):
            if n.id not in names:
                raise KeyError(f"formula '{text}' needs the size {n.id}")
            return
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            walk(n.left)
            walk(n.right)
            return
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _FUNCS and not n.keywords
                and len(n.args) >= (2 if n.func.id == "ceildiv" else 1)):
            for a in n.args:
                walk(a)
            return
        raise ValueError(f"not a size formula: {text}")

    walk(tree.body)
    return tree


def evaluate(text: str, sizes: dict[str, int]) -> int:
    tree = _check(text, sizes)
    return eval(compile(tree, "<formula>", "eval"), {"__builtins__": {}, **_FUNCS}, dict(sizes))  # checked above


def compile_formulas(texts: list[str], names: list[str]):
    """One function of the sizes, in `names` order, returning every formula's value as a tuple.
    Every formula is checked first (as in `evaluate`), so the generated code holds only integers,
    those names, arithmetic and the three helper calls."""
    for t in texts:
        _check(t, names)
    params = [f"_{i}" for i in range(len(names))]  # positional, so that no size name can clash
    renamed = [_rename(t, dict(zip(names, params, strict=True))) for t in texts]
    src = f"lambda {', '.join(params)}: ({', '.join(renamed)}{',' if len(renamed) == 1 else ''})"
    return eval(src, {"__builtins__": {}, **_FUNCS})  # built from checked formulas only


def _rename(text: str, mapping: dict[str, str]) -> str:
    tree = ast.parse(text, mode="eval")
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in mapping:
            n.id = mapping[n.id]
    return f"({ast.unparse(tree)})"


def complete_sizes(kernel: str, names: list[str], checks: list[dict], given: dict[str, int],
                   default: int) -> dict[str, int]:
    """The sizes of a run from the ones the user gave: with none given, every size is `default`; otherwise each
    size left out must follow from the others through a contract `SIZE == formula` (a launch check), and a
    size nothing determines is refused (ValueError) rather than guessed."""
    if not given:
        return {n: default for n in names}
    sizes = dict(given)  # (a name that is no size of the kernel is the caller's to refuse)
    progress = True
    while progress:
        progress = False
        for c in checks:
            if c.get("op") != "==":
                continue
            for side, other in ((c["lhs"], c["rhs"]), (c["rhs"], c["lhs"])):
                name = side.strip("()")
                if name in names and name not in sizes:
                    try:
                        sizes[name] = evaluate(other, sizes)
                        progress = True
                    except KeyError:
                        pass
    missing = [n for n in names if n not in sizes]
    if missing:
        raise ValueError(f"kernel '{kernel}': --size gives {', '.join(sorted(given))} but not "
                         f"{', '.join(missing)}, which nothing in the kernel determines; give every size (or no "
                         f"--size at all, for {default} each)")
    return sizes
