"""The CANN toolchain adapter: AscendC kernel objects through bisheng, found from ASCEND_HOME_PATH (or
ASCEND_TOOLKIT_HOME, or bisheng on PATH). Without CANN, a clear error naming what is missing.

Each kernel is compiled for the core type it runs on, as CANN's own build does (asc-devkit's
cmake/asc/legacy_modules/bisheng_intf.cmake): vector-only code for `dav-c220-vec`, cube-only code for
`dav-c220-cube`, and a mixed kernel twice, once per core type, its entry renamed `NAME_mix_aic` / `NAME_mix_aiv`
(the names CANN's launch stubs look up), the two objects joined by ld.lld -r. These command lines are written from
CANN's sources and tested with a stand-in compiler; no bisheng has run them here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ...errors import UserFacingError

CORE_ARCH = {"vec": "dav-c220-vec", "cube": "dav-c220-cube"}
# which core builds a kernel type needs, and the suffix its entry takes in each
BUILDS = {"AIV_ONLY": [("vec", "")], "AIC_ONLY": [("cube", "")],
          "MIX_AIC_1_2": [("cube", "_mix_aic"), ("vec", "_mix_aiv")]}


class ToolchainError(UserFacingError):
    pass


def find_cann() -> tuple[Path | None, str | None]:
    """(CANN home, bisheng path) or Nones."""
    home = os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME")
    if home:
        cand = Path(home) / "compiler" / "ccec_compiler" / "bin" / "bisheng"
        if cand.exists():
            return Path(home), str(cand)
    found = shutil.which("bisheng")
    return (Path(home) if home else None), found


def build_commands(bisheng: str, home: Path, src: Path, out: Path, kernels: list[tuple[str, str]]) -> list[list[str]]:
    """The commands that build `src` into `out`: one compile per core type the kernels (name, kernel type) need,
    then, for more than one object, a relocatable link."""
    tik = home / "compiler" / "tikcpp"
    includes = [tik / "tikcfw", tik / "tikcfw" / "impl", tik / "tikcfw" / "interface", home / "include"]
    cores: dict[str, list[str]] = {}  # core -> the -D renames of its build
    for name, kernel_type in kernels:
        for core, suffix in BUILDS[kernel_type]:
            cores.setdefault(core, [])
            if suffix:
                cores[core].append(f"-D{name}={name}{suffix}")
    objects = [out] if len(cores) == 1 else [out.with_name(f"{out.stem}_{core}.o") for core in cores]
    cmds = []
    for (core, renames), obj in zip(cores.items(), objects, strict=True):
        cmds.append([bisheng, "-O2", "-std=c++17", "-xcce", f"--cce-aicore-arch={CORE_ARCH[core]}",
                     "--cce-aicore-only", "--cce-auto-sync=off", *renames, *[f"-I{p}" for p in includes],
                     "-c", str(src), "-o", str(obj)])
    if len(objects) > 1:
        cmds.append([str(Path(bisheng).with_name("ld.lld")), "-r", *map(str, objects), "-o", str(out)])
    return cmds


def compile_object(source: str, name: str, kernels: list[tuple[str, str]]) -> bytes:
    home, bisheng = find_cann()
    if bisheng is None or home is None:
        raise ToolchainError(
            "building an AscendC kernel object (-o NAME.o) needs CANN's bisheng compiler: set ASCEND_HOME_PATH to "
            f"the CANN toolkit (now {'unset' if home is None else home}; bisheng "
            f"{'not found' if bisheng is None else 'at ' + bisheng}). -o NAME.cpp writes the AscendC source, and "
            "`tilec run FILE --target ascend910b --check` runs it on tilec's CPU model of the API")
    with tempfile.TemporaryDirectory(prefix="tilec-bisheng-") as tmp:
        src = Path(tmp, f"{name}.cpp")
        src.write_text(source)
        out = Path(tmp, f"{name}.o")
        for cmd in build_commands(bisheng, home, src, out, kernels):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise ToolchainError(f"{Path(cmd[0]).name} failed ({' '.join(cmd)}):\n{r.stderr[-4000:]}")
        return out.read_bytes()
