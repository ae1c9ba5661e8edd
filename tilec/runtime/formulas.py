"""Evaluate the manifest's size formulas (integers, names, + - * // %, ceildiv/min/max) safely."""

from __future__ import annotations

import ast

_FUNCS = {"ceildiv": lambda a, b: -(-a // b), "min": min, "max": max}


def evaluate(text: str, sizes: dict[str, int]) -> int:
    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in sizes:
                raise KeyError(f"formula '{text}' needs the size {n.id}")
            return sizes[n.id]
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b}
            if type(n.op) in ops:
                return ops[type(n.op)]()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _FUNCS:
            return _FUNCS[n.func.id](*[ev(a) for a in n.args])
        raise ValueError(f"not a size formula: {text}")

    return ev(ast.parse(text, mode="eval"))
