"""Building CUDA sources with nvcc, ahead of time (nvrtc.py builds in process with the same options and
results; the CUDA back end, backend.py, picks one).

Errors from nvcc/ptxas/NVRTC are reported against the generated .cu file with the offending
generated line quoted, so that a back-end bug is visible as such.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ...diagnostics import CompileError, Diagnostic
from .locate import cuda_include_dir, driver_include_dir, wheel_files  # noqa: F401 (imported from here too)


@dataclass
class BuildOptions:
    kind: str  # cubin | ptx | fatbin
    archs: list[str]  # sm_80, sm_90a, ...
    ptx_archs: list[str] = field(default_factory=list)  # a fatbin's PTX images too: sm_80 -> compute_80 PTX
    lineinfo: bool = False
    debug: bool = False
    keep_dir: str | None = None
    dryrun: bool = False
    resource_usage: bool = False
    opt_level: int | None = None  # ptxas -O (PTX output has no ptxas step)
    ptxas_args: list[str] = field(default_factory=list)  # -Xptxas, as written
    extra: list[str] = field(default_factory=list)  # appended to the command (--toolchain-args)
    cache: bool = False  # NVRTC: serve and keep its result in the compile cache's "programs" (nvrtc.py)


@dataclass
class BuildResult:
    binary: bytes
    commands: list[str]
    resource_usage: dict[str, dict[str, int]]  # kernel -> usage, for the first architecture
    toolchain: str
    usage_by_arch: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # arch -> kernel -> usage


def nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+\.\d+), V([\d.]+)", out)
    return f"nvcc {m.group(2)}" if m else "nvcc"


# nvcc optimizes and assembles a program's kernels in as many threads as the machine has cores. The SASS is the same
# for any thread count (cuobjdump of gemm sm90's tuned build at 0, 2, 4 and 8), the cubin records the option as
# written ("0", so its bytes do not depend on the machine), and the H200 timed the 558 gemm and fp8 shapes of the
# sweep at a median of 1.000x the one-thread build's speed (bench/RESULTS.md, s15): gemm sm90's tuned build took
# 8.3 s instead of 12.2 s on two cores. A user's own --split-compile (-Xcompiler) replaces it.
SPLIT_COMPILE = "--split-compile=0"


def release(version: str | None) -> tuple[int, int]:
    """(major, minor) of an nvcc_version() or nvrtc.version() string ("nvcc 13.0.48", "nvrtc 13.0"), (0, 0) when
    unknown."""
    m = re.match(r"(?:nvcc|nvrtc) (\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _gencode(arch: str, kind: str) -> list[str]:
    cc = arch.removeprefix("sm_")
    if kind == "ptx":
        return [f"-arch=compute_{cc}"]
    return [f"-gencode=arch=compute_{cc},code=sm_{cc}"]


def ptxas_args(opts: BuildOptions) -> list[str]:
    """What ptxas is given besides the toolchain's own flags: -O (when set), then -Xptxas's arguments."""
    return ([f"-O{opts.opt_level}"] if opts.opt_level is not None else []) + list(opts.ptxas_args)


def build(source: str, stem: str, opts: BuildOptions) -> BuildResult:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise CompileError([Diagnostic("error", "nvcc not found on PATH; install the CUDA toolkit, or use "
                                                "--compiler nvrtc, or emit CUDA source with -o file.cu")])
    work = Path(opts.keep_dir) if opts.keep_dir else Path(tempfile.mkdtemp(prefix="tilec-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        cu = work / f"{stem}.cu"
        cu.write_text(source)
        out = work / f"{stem}.{opts.kind}"
        cmd = [nvcc, f"-{opts.kind}", "-o", str(out), str(cu), "-std=c++17", "-diag-suppress=177,20044"]
        for arch in opts.archs:
            cmd += _gencode(arch, opts.kind)
        for arch in opts.ptx_archs:
            cc = arch.removeprefix("sm_")
            cmd.append(f"-gencode=arch=compute_{cc},code=compute_{cc}")
        if opts.lineinfo:
            cmd.append("-lineinfo")
        if opts.debug:
            cmd.append("-G")
        if opts.kind != "ptx":  # ptxas's resource report: registers, spills, shared memory (no effect on the binary)
            cmd += ["-Xptxas", "-v"]
        if opts.kind != "ptx":
            for arg in ptxas_args(opts):
                cmd += ["-Xptxas", arg]
        if opts.keep_dir:
            cmd += ["--keep", f"--keep-dir={work}"]
        version = nvcc_version()
        if not any("split-compile" in a for a in opts.extra) and release(version) >= (12, 0):
            cmd.append(SPLIT_COMPILE)
        cmd += opts.extra
        shown = " ".join(cmd)
        if opts.dryrun:
            return BuildResult(b"", [shown], {}, version or "nvcc")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(toolchain_diagnostics(proc.stderr + proc.stdout, cu, source))
        by_arch = parse_ptxas_usage_by_arch(proc.stderr + proc.stdout)
        usage = next(iter(by_arch.values()), {})
        return BuildResult(out.read_bytes(), [shown], usage, version or "nvcc", by_arch)
    finally:
        if not opts.keep_dir:
            shutil.rmtree(work, ignore_errors=True)


_ERR = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?P<sev>error|warning)[^:]*: (?P<msg>.*)$")
_PTXAS = re.compile(r"^ptxas (?P<sev>error|fatal)\s*:\s*(?P<msg>.*)$")


# ptxas's C7602: an instruction needs more registers at once than the block's threads leave each of them (tilec
# refuses the certain cases before the build: cuda/codegen.py's check)
_REGISTER_HINT = ("\n  a block of T threads leaves each thread at most 65536 / T registers (255 at most), and a wgmma"
                  " holds its whole accumulator in them: use fewer threads a block or a smaller tile")


def toolchain_diagnostics(output: str, cu: Path, source: str) -> list[Diagnostic]:
    from ...diagnostics import Span

    lines = source.splitlines()
    diags: list[Diagnostic] = []
    for raw in output.splitlines():
        m = _ERR.match(raw.strip())
        if m and m.group("sev") == "error":
            n = int(m.group("line"))
            text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
            diags.append(Diagnostic("error", f"nvcc: {m.group('msg')} (in generated code; this is a tilec bug)\n"
                                             f"  {text}", Span(str(cu), n, 1)))
        elif _PTXAS.match(raw.strip()):
            msg = _PTXAS.match(raw.strip()).group("msg")
            hint = _REGISTER_HINT if "Insufficient registers" in msg else ""
            diags.append(Diagnostic("error", f"ptxas: {msg} (generated code in {cu}){hint}"))
    if not diags:
        tail = "\n".join(output.strip().splitlines()[-15:])
        diags.append(Diagnostic("error", f"the CUDA toolchain failed on the generated code ({cu}):\n{tail}"))
    return diags


_USAGE_FN = re.compile(r"Compiling entry function '(?P<name>[^']+)'(?: for '(?P<arch>[^']+)')?")
_USAGE_REGS = re.compile(r"Used (?P<regs>\d+) registers")
_USAGE_SPILL = re.compile(
    r"(?P<frame>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads")
_USAGE_SMEM = re.compile(r"(?P<smem>\d+) bytes smem")


def parse_ptxas_usage(output: str) -> dict[str, dict[str, int]]:
    """ptxas -v's report (nvcc or NVRTC) per kernel, of the first architecture it compiled."""
    return next(iter(parse_ptxas_usage_by_arch(output).values()), {})


def parse_ptxas_usage_by_arch(output: str) -> dict[str, dict[str, dict[str, int]]]:
    """ptxas -v's report: arch ("sm_90a"; "" when it does not say) -> kernel -> registers, stack_bytes,
    spill_stores, spill_loads, static_smem_bytes."""
    by_arch: dict[str, dict[str, dict[str, int]]] = {}
    current = None
    for line in output.splitlines():
        if m := _USAGE_FN.search(line):
            usage = by_arch.setdefault(m.group("arch") or "", {})
            current = usage.setdefault(m.group("name"), {"registers": 0, "stack_bytes": 0, "spill_stores": 0,
                                                         "spill_loads": 0, "static_smem_bytes": 0})
        elif current is not None:
            if m := _USAGE_SPILL.search(line):
                current.update(stack_bytes=int(m.group("frame")), spill_stores=int(m.group("st")),
                               spill_loads=int(m.group("ld")))
            if m := _USAGE_REGS.search(line):
                current["registers"] = int(m.group("regs"))
            if m := _USAGE_SMEM.search(line):
                current["static_smem_bytes"] = int(m.group("smem"))
    return by_arch

