"""`tilec k.tile -c -o k.o` (kind "object"): the C launcher and its device images in a relocatable host object,
linked into a program like an nvcc object (`cc main.o k.o -lcuda`).

The object is the C launcher header's text (tilec/targets/c_launcher/header.py) compiled by the host C compiler
(`$CC`, else `cc`) as C11 with -fPIC (so that it links into executables and shared libraries alike), with the
launch functions of the kernels -- `K_launch`, `K_check_device` and a tuned kernel's dispatcher -- given external
linkage (C names, no mangling: a C++ program declares them `extern "C"`; their prototypes are in the manifest's
"object" record) and everything else kept `static`. The images (one cubin per target) are not C array
initializers but the cubin files assembled in with `.incbin`: the compiler then parses about 0.1 s of
launcher whatever the images' size, where a 1 MB cubin written as a C initializer costs it about 2 s. The
symbols holding them are local (`nm` lists them as `r ..._imageN`).

Needs cuda.h (the CUDA toolkit's, or the pip wheel nvidia-cuda-runtime's) and an ELF assembler (Linux).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...diagnostics import CompileError, Diagnostic
from .locate import driver_include_dir, host_compiler, host_compiler_command

C_FLAGS = ["-std=c11", "-O2", "-fPIC"]


@dataclass
class ObjectBuild:
    data: bytes  # the object file
    exported: list[str]  # the functions it defines with external linkage
    prototypes: list[str]  # their C prototypes
    commands: list[str]  # the compiler command (what --dryrun shows)
    compiler: str  # the host compiler, with its version


def _compiler_command() -> list[str]:
    words = host_compiler_command()
    found = host_compiler()
    if found is None:
        raise CompileError([Diagnostic("error", f"-c needs a C compiler to build the launcher object: "
                                                f"'{words[0]}' not found (install gcc or clang, or set CC)")])
    return [found, *words[1:]]


def _compiler_version(cmd: list[str]) -> str:
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
    cmd = cmd or _compiler_command()
    stem = re.sub(r"[^\w.-]", "_", Path(output_name).stem) or "kernels"
    c_file, o_file = work / f"{stem}.c", work / f"{stem}.o"
    c_file.write_text(text)
    full = [*cmd, *C_FLAGS, *(f"-I{d}" for d in include_dirs), "-c", str(c_file), "-o", str(o_file)]
    proc = subprocess.run(full, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr + proc.stdout).strip().splitlines()[-15:])
        raise CompileError([Diagnostic("error", f"the C compiler failed on the generated launcher (this is a "
                                                f"tilec bug):\n{tail}")])
    return o_file.read_bytes(), " ".join(full), _compiler_version(cmd)


def build_object(images, info, *, toolchain: str, driver_api_version: int, prefix: str,
                 exported: list[str]) -> ObjectBuild:
    """The object for `images` (c_launcher.header.Image); `exported`: the launch functions every kernel has (a tuned
    kernel's dispatchers, info.dispatch, are exported too)."""
    from ...version import __version__
    from ..c_launcher.dispatch import dispatchers
    from ..c_launcher.header import CUDA_API, generate_header

    inc = driver_include_dir()
    if inc is None:
        raise CompileError([Diagnostic("error", "-c needs cuda.h to compile the launcher: install the CUDA toolkit, "
                                                "or pip install 'nvidia-cuda-runtime==13.0.*'")])
    cmd = _compiler_command()
    tail, tuned = dispatchers(info.dispatch, [*images[0].kernels, *info.launches], CUDA_API, prefix, check_device=True)
    work = Path(tempfile.mkdtemp(prefix="tilec-obj-"))
    try:
        text = generate_header(info.output_name, images, source_name=info.source_name, tilec_version=__version__,
                               toolchain=toolchain, driver_api_version=driver_api_version,
                               source_hash=info.source_hash, prefix=prefix, embed=incbin(work),
                               launches=list(info.launches), tail=tail)
        public = list(exported) + [f.name for f in tuned if f.result == CUDA_API.result]
        prototypes = []
        for name in public:
            m = re.search(r"^static inline CUresult " + re.escape(name) + r"\(([^)]*)\)", text, re.M)
            if m is None:  # a tilec bug: every exported name is a definition of the launcher
                raise CompileError([Diagnostic("error", f"the launcher defines no function '{name}' (tilec bug)")])
            prototypes.append(f"CUresult {name}({m.group(1)});")
            text = text[:m.start()] + f"CUresult {name}(" + text[m.end() - len(m.group(1)) - 1:]
        data, full, compiler = compile_c(text, work, info.output_name, [inc], cmd)
        return ObjectBuild(data, public, prototypes, [full], compiler)
    finally:
        shutil.rmtree(work, ignore_errors=True)
