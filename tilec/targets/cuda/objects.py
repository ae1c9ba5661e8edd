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

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...diagnostics import CompileError, Diagnostic
from ..c_launcher.objects import compile_c, compiler_command, incbin
from .locate import driver_include_dir


@dataclass
class ObjectBuild:
    data: bytes  # the object file
    exported: list[str]  # the functions it defines with external linkage
    prototypes: list[str]  # their C prototypes
    commands: list[str]  # the compiler command (what --dryrun shows)
    compiler: str  # the host compiler, with its version


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
    cmd = compiler_command()
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
