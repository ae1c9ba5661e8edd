"""Building a C launcher into a relocatable host object (`-c`), shared by the back ends whose launcher is C (CUDA's
tilec/targets/cuda/objects.py, HIP's hip/backend.py): the host C compiler ($CC, else cc), the images assembled in
with `.incbin` rather than written as C initializers (the compiler then parses the launcher alone, whatever the
images' size), and the compile itself, whose failure on generated text is a tilec bug."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from ...diagnostics import CompileError, Diagnostic

C_FLAGS = ["-std=c11", "-O2", "-fPIC"]


def host_compiler_command() -> list[str]:
    """$CC split into words (default `cc`)."""
    return shlex.split(os.environ.get("CC", "")) or ["cc"]


def host_compiler() -> str | None:
    """The host C compiler: the first word of $CC, else cc, resolved on PATH; None when there is none."""
    return shutil.which(host_compiler_command()[0])


def compiler_command() -> list[str]:
    words = host_compiler_command()
    found = host_compiler()
    if found is None:
        raise CompileError([Diagnostic("error", f"-c needs a C compiler to build the launcher object: "
                                                f"'{words[0]}' not found (install gcc or clang, or set CC)")])
    return [found, *words[1:]]


def compiler_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    first = out.splitlines()[0].strip() if out.strip() else os.path.basename(cmd[0])
    return first


def incbin(work: Path):
    """embed() for launcher.generate_header: each image written to a file in `work` and assembled into .rodata
    under a local symbol, declared to C with its size (so `sizeof` works as for an array)."""
    def embed(name: str, data: bytes) -> str:
        path = work / f"{name}.bin"
        path.write_bytes(data)
        if any(c in str(path) for c in '"\\\n'):
            raise CompileError([Diagnostic("error", f"cannot embed '{path}' with .incbin (quote in the path); set "
                                                    "TMPDIR to a plain directory")])
        return (f'__asm__(".pushsection .rodata\\n.balign 64\\n{name}:\\n.incbin \\"{path}\\"\\n.popsection");\n'
                f'extern const unsigned char {name}[{len(data)}] __attribute__((visibility("hidden")));')
    return embed


def compile_c(text: str, work: Path, output_name: str, include_dirs: list[str], cmd: list[str] | None = None):
    """(object bytes, the command, the compiler's version) of C source `text`, compiled in `work`."""
    cmd = cmd or compiler_command()
    stem = re.sub(r"[^\w.-]", "_", Path(output_name).stem) or "kernels"
    c_file, o_file = work / f"{stem}.c", work / f"{stem}.o"
    c_file.write_text(text)
    full = [*cmd, *C_FLAGS, *(f"-I{d}" for d in include_dirs), "-c", str(c_file), "-o", str(o_file)]
    proc = subprocess.run(full, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr + proc.stdout).strip().splitlines()[-15:])
        raise CompileError([Diagnostic("error", f"the C compiler failed on the generated launcher (this is a "
                                                f"tilec bug):\n{tail}")])
    return o_file.read_bytes(), " ".join(full), compiler_version(cmd)
