"""The machine code of a built kernel: its main loop and that loop's instruction mix, from SASS or the AMD ISA.

Assumes: a cubin (read with cuobjdump -sass, from the nvidia-cuda-cuobjdump wheel or the CUDA toolkit) or an AMD
code object (read with llvm-objdump -d, llvm 19 or newer).
Guarantees, per kernel: the instructions of its *main loop* -- of the loops (a backward branch and its target),
the one holding the most matrix instructions (HMMA, HGMMA, v_mfma), the innermost of those that tie (with none,
the shortest loop) -- counted by class (MIX_CLASSES), plus the loop's length. The classes are coarse on purpose:
a baseline of them (scripts/resource_baseline.py) notices a lost tensor-core path, an extra shared-memory round
trip or spill traffic in the loop, not the scheduler's reshuffles.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# class -> opcode prefixes (SASS: the mnemonic before the first '.'; AMD: the whole mnemonic's start)
SASS_CLASSES = {
    "mma": ("HMMA", "HGMMA", "IMMA", "QGMMA"),
    "shared_load": ("LDS", "LDSM"),
    "shared_store": ("STS",),
    "global_load": ("LDG", "LDGSTS", "UTMALDG", "UBLKCP"),
    "global_store": ("STG", "UTMASTG"),
    "sync": ("BAR", "SYNCS", "DEPBAR", "LDGDEPBAR", "WARPSYNC", "WARPGROUP"),
    "spill": ("LDL", "STL"),
    "fp32": ("FFMA", "FADD", "FMUL", "FMNMX"),
}
AMD_CLASSES = {
    "mma": ("v_mfma",),
    "shared_load": ("ds_read", "ds_load"),
    "shared_store": ("ds_write", "ds_store"),
    "global_load": ("global_load", "buffer_load"),
    "global_store": ("global_store", "buffer_store"),
    "sync": ("s_barrier", "s_waitcnt"),
    "spill": ("scratch_", "buffer_store_dword off", "v_writelane", "v_readlane"),
    "fp32": ("v_fma_f32", "v_fmac_f32", "v_add_f32", "v_mul_f32", "v_max_f32", "v_pk_fma_f32"),
}
MIX_CLASSES = tuple(SASS_CLASSES)


@dataclass
class Instruction:
    address: int
    opcode: str  # SASS: "HMMA.16816.F32"; AMD: "v_mfma_f32_16x16x16_f16"
    branch_to: int | None  # the target of a branch
    text: str = ""  # SASS: the whole instruction as cuobjdump prints it, its predicate and operands included


def cuobjdump() -> str | None:
    """cuobjdump from the nvidia-cuda-cuobjdump wheel, else the toolkit's on PATH."""
    try:
        import nvidia

        for loc in nvidia.__path__:
            for cand in sorted(Path(loc).glob("*/bin/cuobjdump")):
                return str(cand)
    except ImportError:
        pass
    return shutil.which("cuobjdump")


def llvm_objdump() -> str | None:
    for name in ("llvm-objdump-19", "llvm-objdump-20", "llvm-objdump"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _run(tool: str, args: list[str], data: bytes, suffix: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=suffix) as f:
        f.write(data)
        f.flush()
        proc = subprocess.run([tool, *args, f.name], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(tool).name} failed: {proc.stderr.strip()[:400]}")
    return proc.stdout


_SASS_FN = re.compile(r"^\s*Function : (\S+)")
_SASS_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+((?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*));")


def sass_functions(cubin: bytes) -> dict[str, list[Instruction]]:
    """kernel -> its SASS instructions (cuobjdump -sass)."""
    tool = cuobjdump()
    if tool is None:
        raise RuntimeError("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    out: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for line in _run(tool, ["-sass"], cubin, ".cubin").splitlines():
        if m := _SASS_FN.match(line):
            current = out.setdefault(m.group(1), [])
        elif current is not None and (m := _SASS_INSN.match(line)):
            op, operands = m.group(3), m.group(4)
            target = None
            if op.split(".")[0] in ("BRA", "BRX", "JMP"):
                t = re.search(r"0x([0-9a-f]+)\s*$", operands.strip())
                target = int(t.group(1), 16) if t else None
            current.append(Instruction(int(m.group(1), 16), op, target, m.group(2).strip()))
    return out


_AMD_FN = re.compile(r"^([0-9a-f]+) <([^>]+)>:")
_AMD_INSN = re.compile(r"^\s+([a-z_][a-z0-9_]*)\b(.*?)//\s*([0-9A-F]+):")
_AMD_TARGET = re.compile(r"<([^>+]+)\+0x([0-9a-f]+)>")


def amd_functions(code_object: bytes) -> dict[str, list[Instruction]]:
    """kernel -> its AMD ISA instructions (llvm-objdump -d)."""
    tool = llvm_objdump()
    if tool is None:
        raise RuntimeError("llvm-objdump not found (apt-get install llvm-19)")
    out: dict[str, list[Instruction]] = {}
    bases: dict[str, int] = {}
    current: list[Instruction] | None = None
    for line in _run(tool, ["-d"], code_object, ".hsaco").splitlines():
        if m := _AMD_FN.match(line):
            name = m.group(2)
            bases[name] = int(m.group(1), 16)
            current = out.setdefault(name, [])
        elif current is not None and (m := _AMD_INSN.match(line)):
            op, rest = m.group(1), m.group(2) + line[m.end():]
            target = None
            if op.startswith("s_branch") or op.startswith("s_cbranch"):
                t = _AMD_TARGET.search(rest)
                if t and t.group(1) in bases:
                    target = bases[t.group(1)] + int(t.group(2), 16)
            current.append(Instruction(int(m.group(3), 16), op, target))
    return out


def classify(opcode: str, amd: bool) -> str | None:
    classes = AMD_CLASSES if amd else SASS_CLASSES
    head = opcode if amd else opcode.split(".")[0]
    for cls, prefixes in classes.items():
        if any(head.startswith(p) if amd else head == p for p in prefixes):
            return cls
    return None


def main_loop(instructions: list[Instruction], amd: bool) -> list[Instruction]:
    """The instructions of the kernel's main loop (see the module docstring); [] when it has no loop."""
    loops = [(i.branch_to, i.address) for i in instructions if i.branch_to is not None and i.branch_to <= i.address]
    best: list[Instruction] = []
    best_key = (-1, -1)
    for lo, hi in loops:
        body = [i for i in instructions if lo <= i.address <= hi]
        key = (sum(classify(i.opcode, amd) == "mma" for i in body), -len(body))
        if key > best_key:
            best, best_key = body, key
    return best


def loop_mix(instructions: list[Instruction], amd: bool) -> dict[str, int]:
    """The main loop's instruction count per class, and its length ("instructions")."""
    body = main_loop(instructions, amd)
    mix = {cls: 0 for cls in MIX_CLASSES}
    for i in body:
        cls = classify(i.opcode, amd)
        if cls is not None:
            mix[cls] += 1
    mix["instructions"] = len(body)
    return mix
