"""nvcc's ways of naming the GPU, read as tilec targets: `-arch`, `-code` and `-gencode`.

    -arch=sm_90 | -arch sm_90 | --gpu-architecture=sm_90a | -arch=compute_90   -> sm_90 (tilec's sm90)
    -arch=compute_80 -code=sm_80,sm_86                                           -> sm_80, sm_86
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a    -> sm_80, sm_90a (one fatbin)

tilec builds machine code for each real architecture named (`sm_XX`); `-code` and `-gencode`'s `code=` list them,
and without them `-arch` names the one (a virtual `compute_XX` meaning its real twin). A `code=compute_XX`
entry (PTX embedded for the driver to compile) is refused: `-o x.ptx` writes PTX. The names go to the target
registry, which accepts nvcc's spellings (`sm_90a` is sm90) and reports unknown ones.
"""

from __future__ import annotations

import re

from .flags import UsageError

_GENCODE = re.compile(r"^arch=(?P<arch>[^,]+),code=(?P<code>.+)$")
_ARCH = re.compile(r"^(sm|compute)_(\d+[a-z]?)$")


def _real(name: str, flag: str) -> str:
    """`sm_XX` for an nvcc architecture name (`compute_XX` becomes its real twin)."""
    m = _ARCH.match(name.strip())
    if not m:
        raise UsageError(f"{flag} {name!r}: expected an architecture such as sm_90 or compute_90 (tilec builds for "
                         "named architectures; `tilec targets` lists them)")
    return f"sm_{m.group(2)}"


def _code_list(text: str, flag: str) -> list[str]:
    """sm_XX names of a `-code` value or a `-gencode` code= list: `sm_80,sm_86`, `[sm_80,sm_86]`, `"sm_80"`."""
    names = [n.strip() for n in text.strip().strip("[]\"'").split(",") if n.strip()]
    if not names:
        raise UsageError(f"{flag}: empty code list")
    for n in names:
        if n.startswith("compute_"):
            raise UsageError(f"{flag} code={n}: tilec embeds machine code only (sm_XX); write PTX with -o x.ptx")
    return [_real(n, flag) for n in names]


def targets(target: str | None, arch: str | None, code: str | None, gencode: list[str]) -> str | None:
    """The comma-separated target list of a command line: --target's names, then those of -arch/-code, then
    those of each -gencode, by their registry names and without duplicates; --target as written when no nvcc
    spelling is given (None when nothing is)."""
    names: list[str] = [t.strip() for t in target.split(",")] if target is not None else []
    if code is not None:
        if arch is not None:
            _real(arch, "-arch")  # checked, but -code names what is built
        names += _code_list(code, "-code")
    elif arch is not None:
        names.append(_real(arch, "-arch"))
    for spec in gencode:
        m = _GENCODE.match(spec.replace(" ", ""))
        if not m:
            raise UsageError(f"-gencode {spec!r}: expected arch=compute_XX,code=sm_XX")
        _real(m.group("arch"), "-gencode arch")
        names += _code_list(m.group("code"), "-gencode")
    if arch is None and code is None and not gencode:
        return target
    return ",".join(dict.fromkeys(_canonical(n) for n in names))


def _canonical(name: str) -> str:
    """The registry's name of a target (sm_90a -> sm90), so that `-t sm80 -arch=sm_80` builds sm80 once; an
    unknown name as written (the build reports it)."""
    from ..targets.registry import UnknownTarget, lookup

    try:
        return lookup(name).name
    except UnknownTarget:
        return name
