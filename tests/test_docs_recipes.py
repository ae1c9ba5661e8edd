"""docs/architecture.md's three recipes (add a target, add a tile op, add an instruction) name files, modules,
functions and classes a contributor is sent to: every one of them must exist, so that following a recipe never
starts at a name the code no longer has (the recipes were re-walked for issue 32)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TILEC = ROOT / "tilec"
DOC = ROOT / "docs" / "architecture.md"
RECIPES = ("Recipe: add a target", "Recipe: add a tile op", "Recipe: add an instruction")
# receivers of the lowering context, the reporter, the interpreter's block and the like: their members are listed
# by the dataclasses the recipes name (GemmContext, CopyContext), not definitions of their own
_RECEIVERS = {"cx", "rep", "block", "run", "self", "s", "e", "r", "b", "q", "result", "art", "opts", "options", "k"}


def recipe_text(title: str, text: str | None = None) -> str:
    text = text if text is not None else DOC.read_text()
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/architecture.md has no section '## {title}'"
    return m.group(1)


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text) + re.findall(r"\]\((\.\./[^)#\s]+)", text)


def resolve_path(p: str) -> Path | None:
    """The file a recipe names: as written from the repository root, or under tilec/, tilec/targets/ or tilec/ir/
    (the recipes shorten `tilec/targets/cuda/x.py` to `cuda/x.py` where the folder is clear)."""
    p = p.removeprefix("../")
    for base in ("", "tilec/", "tilec/targets/", "tilec/ir/"):
        if (ROOT / base / p).exists():
            return ROOT / base / p
    return None


@cache
def definitions() -> dict[str, set[str]]:
    """name -> the modules (file stems) of tilec that define it: functions, classes, methods, assignments."""
    out: dict[str, set[str]] = {}
    pat = re.compile(r"^\s*(?:def|class)\s+(\w+)|^\s*(\w+)\s*(?::[^=\n]*)?=(?!=)"
                     r"|^\s+(\w+)\s*:\s*[\w\[\].| ]+\s*(?:#|$)", re.M)
    for f in TILEC.rglob("*.py"):
        for m in pat.finditer(f.read_text()):
            out.setdefault(m.group(1) or m.group(2) or m.group(3), set()).add(f.stem)
    return out


def missing_names(text: str) -> list[str]:
    """The paths and Python names in `text`'s code spans that do not exist: a path (with a folder: from the root or
    shortened, see resolve_path; a bare file name: anywhere in tilec/), a dotted name whose head is a module or
    class of tilec (`gemm_impl.check_registry`, `TileReader.stmt`), a call shape (`check_kind(...)`), a CamelCase
    class or a private table (`_WRITTEN_FIELDS`)."""
    defs = definitions()
    files = {f.name for f in TILEC.rglob("*") if f.is_file()}
    modules = {f.stem for f in TILEC.rglob("*.py")} | {p.name for p in TILEC.rglob("*") if p.is_dir()} | {"tilec"}
    bad = []
    for span in code_spans(text):
        span = span.strip()
        if "<" in span or "..." in span:
            continue  # a template (`tilec/targets/<name>/`) or an elision
        if re.fullmatch(r"[\w./-]+\.(?:py|h|md|tile|ir|lark)|[\w./-]+/", span):
            if "/" in span.rstrip("/") or span.endswith("/"):
                if resolve_path(span) is None:
                    bad.append(f"file {span}")
            elif span not in files:
                bad.append(f"file {span}")
            continue
        head = re.match(r"[A-Za-z_][\w.]*", span)
        if head is None:
            continue
        name = head.group(0).rstrip(".")
        call = span[len(name):].startswith("(")
        parts = name.split(".")
        if len(parts) > 1:
            if parts[0] in _RECEIVERS or not (parts[0] in modules or parts[0][:1].isupper() and parts[0] in defs):
                continue
            if parts[0] == "tilec":
                parts = parts[1:]
            owner, leaf = (parts[-2] if len(parts) > 1 else None), parts[-1]
            if leaf in modules:
                continue
            exported = [p for p in TILEC.rglob(f"{owner}/__init__.py") if re.search(rf"\b{leaf}\b", p.read_text())]
            if leaf not in defs or owner in modules and owner not in defs[leaf] and not exported:
                bad.append(f"name {name}")
        elif (call and "_" in name or re.fullmatch(r"_?[A-Z][a-z]+[A-Z]\w*|_[A-Z][A-Z_]+", name)) \
                and name not in defs:
            bad.append(f"name {name}")  # a function (a call shape), a CamelCase class or a private table
    return bad


def test_every_file_and_name_the_recipes_give_exists():
    bad = {title: missing_names(recipe_text(title)) for title in RECIPES}
    assert not any(bad.values()), bad


def test_the_check_finds_what_it_is_for():
    """A planted missing file, a renamed function and a class that does not exist are reported; what exists is
    not."""
    text = ("Edit `tilec/ir/no_such.py` and `cuda/gemm_mma.py`, call `gemm_impl.check_registry` and "
            "`intrinsics.call(span, op)`, subclass `GemmImpl` and `NoSuchContext`; `cx.emit` is the context's.")
    assert missing_names(text) == ["file tilec/ir/no_such.py", "name intrinsics.call", "name NoSuchContext"]
