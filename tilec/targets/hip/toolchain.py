"""Building HIP source into AMD code objects: Debian's hipcc (clang-15) or clang-19.

The generated source includes only tilec_hip.h (no HIP headers, no device library), so both compilers run
with `-nogpuinc -nogpulib`. hipcc is tried first where it supports the architecture (clang-15 knows gfx90a but
not gfx942); clang-19 builds gfx942 (and gfx90a when hipcc is missing). Outputs: `hsaco` (an ELF code object,
`--no-gpu-bundle-output`), `asm` (the AMDGPU assembly, with the kernel descriptor and metadata).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ...diagnostics import CompileError, Diagnostic

HIPCC_ARCHS = {"gfx90a"}  # what Debian's hipcc (clang-15) can target
CLANG_NAMES = ("clang-19", "clang")
CLANG_ARCHS = {"gfx90a", "gfx942"}


@dataclass
class HipBuild:
    data: bytes
    toolchain: str
    commands: list[list[str]] = field(default_factory=list)


def find_compiler(arch: str, printf: bool = False) -> tuple[str, str] | None:
    """(kind, path) of a compiler that can build `arch`: ("hipcc", ...) or ("clang", ...). A source that calls
    printf needs clang 19 (-mprintf-kind=buffered, which clang-15's hipcc lacks)."""
    hipcc = shutil.which("hipcc")
    if hipcc and arch in HIPCC_ARCHS and not printf:
        return "hipcc", hipcc
    for name in CLANG_NAMES:
        path = shutil.which(name)
        if path and arch in CLANG_ARCHS and _clang_major(path) >= 19:
            return "clang", path
    return None


def _clang_major(path: str) -> int:
    m = re.search(r"clang-(\d+)$", path)
    if m:
        return int(m.group(1))
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    m = re.search(r"clang version (\d+)", out)
    return int(m.group(1)) if m else 0


def command(kind: str, path: str, arch: str, src: str, out: str, emit: str, cuid: str | None = None,
            printf: bool = False, opt_level: int | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    level = 3 if opt_level is None else opt_level
    common = ["-x", "hip", "-std=c++17", f"--offload-arch={arch}", "-nogpuinc", "-nogpulib", f"-O{level}",
              "--cuda-device-only", "--no-gpu-bundle-output", "-Wno-pragma-once-outside-header"]
    if printf:  # tilec_hip_printf.h: the buffered printf needs no device library
        common.append("-mprintf-kind=buffered")
    # clang names a `__hip_cuid_` symbol after the compilation unit, by default from the input's
    # (temporary, random) path: an explicit id keeps the code object byte-identical across builds
    ident = [f"-cuid={cuid}"] if cuid else []
    return [path, *common, *ident, *extra, "-S" if emit == "asm" else "-c", src, "-o", out]


def compilation_unit_id(source: str, arch: str, emit: str) -> str:
    """A -cuid from the content alone: the same source, arch and output kind give the same id."""
    return hashlib.sha256(f"{arch}\0{emit}\0{source}".encode()).hexdigest()[:16]


def build(source: str, stem: str, arch: str, emit: str, opt_level: int | None = None,
          extra: tuple[str, ...] = ()) -> HipBuild:
    """Compile `source` for `arch` to a code object (emit="hsaco") or assembly (emit="asm"); `opt_level` is -O
    (default 3), `extra` the user's --toolchain-args."""
    printf = "tilec_hip_printf.h" in source
    found = find_compiler(arch, printf)
    if found is None:
        need = "hipcc (apt-get install hipcc) or clang-19" if arch in HIPCC_ARCHS else "clang-19 (apt-get install " \
            "clang-19 lld-19)"
        raise CompileError([Diagnostic("error", f"no compiler for {arch}: install {need}")])
    kind, path = found
    env = dict(os.environ, HIP_PLATFORM="amd")
    with tempfile.TemporaryDirectory(prefix="tilec-hip-") as tmp:
        src = os.path.join(tmp, f"{stem}.hip")
        out = os.path.join(tmp, f"{stem}.{'s' if emit == 'asm' else 'hsaco'}")
        Path(src).write_text(source)
        cmd = command(kind, path, arch, src, out, emit, compilation_unit_id(source, arch, emit), printf, opt_level,
                      extra)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0 or not os.path.exists(out):
            raise CompileError([Diagnostic("error", f"{os.path.basename(path)} failed on the generated HIP (a tilec "
                                           f"bug; please report it):\n{proc.stderr[-4000:]}")])
        data = Path(out).read_bytes()
    return HipBuild(data, f"{os.path.basename(path)} {_version(path)}", [cmd])


def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                             env=dict(os.environ, HIP_PLATFORM="amd")).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"clang version ([\w.\-]+)", out) or re.search(r"HIP version: ([\w.\-]+)", out)
    return m.group(1) if m else "unknown"


def resource_usage(code_object: bytes) -> dict[str, dict[str, int]]:
    """Per kernel: vgpr, agpr, sgpr, lds (bytes), scratch (bytes per lane), spills; from the AMDGPU metadata note."""
    readelf = shutil.which("llvm-readelf-19") or shutil.which("llvm-readelf") or shutil.which("llvm-readelf-15")
    if readelf is None:
        raise CompileError([Diagnostic("error", "--resource-usage on AMD needs llvm-readelf (apt-get install "
                                                "llvm-19)")])
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
        f.write(code_object)
        f.flush()
        text = subprocess.run([readelf, "--notes", f.name], capture_output=True, text=True).stdout
    return parse_notes(text)


_KEYS = {".vgpr_count": "vgpr", ".agpr_count": "agpr", ".sgpr_count": "sgpr", ".group_segment_fixed_size": "lds",
         ".private_segment_fixed_size": "scratch", ".vgpr_spill_count": "vgpr_spill",
         ".sgpr_spill_count": "sgpr_spill"}


def parse_notes(text: str) -> dict[str, dict[str, int]]:
    kernels: dict[str, dict[str, int]] = {}
    cur: dict[str, int] = {}
    level: int | None = None  # indentation of the dash that starts each kernel's map
    inside = False
    for line in text.splitlines():
        if "amdhsa.kernels:" in line:
            inside = True
            continue
        m = re.match(r"(\s*)(-\s+)?(\.[a-z_]+):\s+(\S+)", line)
        if not inside or not m:
            continue
        indent, dash, key, value = m.groups()
        if dash and (level is None or len(indent) == level):
            level = len(indent)
            cur = {}
        if key == ".name" and level is not None and len(indent) == level + 2:
            kernels[value] = cur
        elif key in _KEYS and value.isdigit():
            cur[_KEYS[key]] = int(value)
    return kernels
