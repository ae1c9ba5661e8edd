"""The layers of docs/architecture.md, kept by a test: the order is read from the document's ```layers block (so the
document and the check cannot drift apart), every import of a tilec module (module level and inside functions) is
followed, and no import may go from a lower layer to a higher one, nor may packages import each other in a circle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TILEC = ROOT / "tilec"


def documented_layers(text: str | None = None) -> list[list[str]]:
    """The layers, lowest first, each a list of names: `ir` (a package or module of tilec), `targets/registry` (a
    module inside a package, which then is a layer of its own), `tilec` (the package's own __init__)."""
    text = text if text is not None else (ROOT / "docs" / "architecture.md").read_text()
    m = re.search(r"^[ \t]*```layers\n(.*?)^[ \t]*```", text, re.M | re.S)
    assert m, "docs/architecture.md has no ```layers block"
    flat = " ".join(line.split("#", 1)[0] for line in m.group(1).splitlines())
    return [[n.strip() for n in group.split(",") if n.strip()] for group in flat.split("→")]


def modules() -> dict[str, Path]:
    mods = {}
    for p in TILEC.rglob("*.py"):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = p
    return mods


def imports(mods: dict[str, Path] | None = None) -> dict[str, dict[str, int]]:
    """Module -> {imported tilec module: the line of its first import}, lazy imports inside functions included."""
    mods = mods or modules()
    graph = {}
    for name, p in mods.items():
        package = name.split(".") if p.name == "__init__.py" else name.split(".")[:-1]
        deps: dict[str, int] = {}
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                mod = ".".join(base + (node.module.split(".") if node.module else []))
                for a in node.names:
                    deps.setdefault(f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod, node.lineno)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    deps.setdefault(a.name, node.lineno)
        graph[name] = {d: line for d, line in deps.items() if d in mods and d != name}
    return graph


def package(module: str) -> str:
    """The package a module belongs to, for the circle check: tilec's top-level packages and modules, and inside
    tilec/targets each back end's folder and each module of its own (registry, backend)."""
    parts = module.split(".")
    return ".".join(parts[:3] if len(parts) > 2 and parts[1] == "targets" else parts[:2])


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The index of the layer that names `module` most specifically (`targets/registry` before `targets`)."""
    best, best_len = None, -1
    for i, group in enumerate(layers):
        for n in group:
            dotted = "tilec" if n == "tilec" else "tilec." + n.replace("/", ".")
            if n == "tilec":
                hit = module == "tilec"
            else:
                hit = module == dotted or module.startswith(dotted + ".")
            if hit and len(dotted) > best_len:
                best, best_len = i, len(dotted)
    return best


def upward_imports(layers=None, graph=None) -> list[str]:
    layers = layers or documented_layers()
    graph = graph if graph is not None else imports()
    out = []
    for m, deps in sorted(graph.items()):
        for d, line in sorted(deps.items()):
            a, b = layer_of(m, layers), layer_of(d, layers)
            if a is not None and b is not None and b > a:
                out.append(f"{m}:{line} imports {d} ({' '.join(layers[a])} -> {' '.join(layers[b])})")
    return out


def package_circles(graph=None) -> list[list[str]]:
    """The strongly connected components of more than one package in the package import graph."""
    graph = graph if graph is not None else imports()
    edges: dict[str, set[str]] = {}
    for m, deps in graph.items():
        for d in deps:
            if package(m) != package(d):
                edges.setdefault(package(m), set()).add(package(d))
                edges.setdefault(package(d), set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def strong(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def test_every_module_has_a_documented_layer():
    layers = documented_layers()
    missing = sorted(m for m in modules() if layer_of(m, layers) is None)
    assert not missing, f"modules of no layer in docs/architecture.md's ```layers block: {missing}"


def test_no_import_goes_up_a_layer():
    bad = upward_imports()
    assert not bad, "\n".join(bad)


def test_no_package_imports_itself_through_others():
    assert not package_circles(), package_circles()


def test_the_checks_find_what_they_are_for():
    """The checks fail on a planted upward import and a planted circle (the graph is made up here)."""
    layers = documented_layers("```layers\nir → passes → targets/registry, x # comment\n → targets\n```\n")
    assert layers == [["ir"], ["passes"], ["targets/registry", "x"], ["targets"]]
    assert layer_of("tilec.targets.registry", layers) == 2 and layer_of("tilec.targets.cuda.codegen", layers) == 3
    graph = {"tilec.ir.tile": {"tilec.passes.simplify": 3}, "tilec.passes.simplify": {"tilec.ir.tile": 1},
             "tilec.targets.cuda.codegen": {"tilec.targets.registry": 1},
             "tilec.targets.registry": {"tilec.targets.cuda.link_stub": 7}, "tilec.targets.cuda.link_stub": {}}
    assert upward_imports(layers, graph) == [
        "tilec.ir.tile:3 imports tilec.passes.simplify (ir -> passes)",
        "tilec.targets.registry:7 imports tilec.targets.cuda.link_stub (targets/registry x -> targets)"]
    assert package_circles(graph) == [["tilec.ir", "tilec.passes"], ["tilec.targets.cuda", "tilec.targets.registry"]]


if __name__ == "__main__":  # the counts (python tests/test_layers.py)
    up, circles = upward_imports(), package_circles()
    print("\n".join(up))
    print(f"{len(up)} imports up a layer; {len(circles)} package circles: {circles}")
