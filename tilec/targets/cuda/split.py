"""One cubin from the kernels of a program compiled apart: NVRTC's NVVM runs on each kernel's own program (in
threads: NVRTC compiles concurrently), the PTX modules are merged into one, and ptxas assembles that module as a
whole program, once (nvrtc.py drives it; issue #14).

Why this shape, and not device linking: NVVM gives each kernel the very PTX it gets in the whole program, and
ptxas on the merged module gives the very SASS NVRTC's own ptxas gives (tests/test_split_build.py compares them
function by function). Relocatable code linked by nvJitLink does not: ptxas in relocatable mode ignores
`setmaxnreg` (the producer warpgroup's register split) and addresses the dynamic shared memory through a
relocation, and nvJitLink's link-time optimization re-optimizes the kernels (the no-TMA twins' SASS changes).

Standard library only; nothing here runs a tool.
"""

from __future__ import annotations

import re

_KERNEL = 'extern "C" __global__'  # how codegen.py begins a kernel; its body ends at the first "}" in column 0
_ENTRY = re.compile(r"\.entry\s")
_FUNC = re.compile(r"\.func\s+(?:\([^)]*\)\s*)?([\w$]+)")
_VAR = re.compile(r"([\w$]+)\s*(?:\[[^\]]*\])*\s*(?:=|;)")


class MergeRefused(Exception):
    """The modules cannot be merged into one (two differing definitions of one name): build the whole program."""


def kernel_programs(source: str) -> list[str] | None:
    """A program for each kernel of the generated program: the whole text with the other kernels' lines
    blanked, so that every line keeps its number (NVRTC's messages name the lines of the whole program). None
    when the program has fewer than two kernels."""
    lines = source.split("\n")
    spans = []
    i = 0
    while i < len(lines):
        if lines[i].startswith(_KERNEL):
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            spans.append((i, j + 1))
            i = j + 1
        else:
            i += 1
    if len(spans) < 2:
        return None
    programs = []
    for a, b in spans:
        own = list(lines)
        for c, d in spans:
            if (c, d) != (a, b):
                own[c:d] = [""] * (d - c)
        programs.append("\n".join(own))
    return programs


def _items(ptx: str) -> tuple[list[str], list[str]]:
    """A PTX module as its header directives (.version, .target, .address_size) and its top-level items
    (declarations, .func and .entry definitions), comments at the top level dropped."""
    header, items, current, depth = [], [], [], 0
    for line in ptx.split("\n"):
        stripped = line.strip()
        if depth == 0 and not current:
            if not stripped or stripped.startswith("//"):
                continue
            if stripped.startswith((".version", ".target", ".address_size")):
                header.append(stripped)
                continue
        current.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and (stripped.endswith(";") or stripped.endswith("}")):
            items.append("\n".join(current))
            current = []
    if current:
        items.append("\n".join(current))
    return header, items


def merge_ptx(modules: list[str]) -> str:
    """One PTX module holding every module's entries, in the modules' order, and each shared declaration or
    device function once. Raises MergeRefused where two modules define one name differently."""
    header = None
    decls: dict[str, str] = {}  # name (or the text itself, unnamed) -> text, in first-seen order
    entries = []
    for ptx in modules:
        head, items = _items(ptx)
        if any(item.lstrip().startswith((".file", ".section")) for item in items):
            raise MergeRefused("debug information (file tables, debug sections) is not merged")
        if header is None:
            header = head
        elif head != header:
            raise MergeRefused(f"PTX headers differ: {head} / {header}")
        for item in items:
            first = item.split("\n")[0]
            if _ENTRY.search(first):
                entries.append(item)
                continue
            m = _FUNC.search(first) or (None if "(" in first or "{" in first else _VAR.search(first))
            key = m.group(1) if m else item
            if key in decls and decls[key] != item:
                raise MergeRefused(f"two definitions of {key}")
            decls.setdefault(key, item)
    return "\n".join([*(header or []), "", *decls.values(), "", *entries, ""])
