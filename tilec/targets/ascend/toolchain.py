"""The CANN toolchain adapter: AscendC kernel objects through bisheng, found from ASCEND_HOME_PATH (or
ASCEND_TOOLKIT_HOME, or bisheng on PATH). Without CANN, a clear error naming what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ...errors import UserFacingError

ARCH = "dav-c220-cube"  # 910B; mixed kernels also build for dav-c220-vec


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


def compile_object(source: str, name: str) -> bytes:
    home, bisheng = find_cann()
    if bisheng is None or home is None:
        raise ToolchainError(
            "building an AscendC kernel object (-o NAME.o) needs CANN's bisheng compiler: set ASCEND_HOME_PATH to "
            f"the CANN toolkit (now {'unset' if home is None else home}; bisheng "
            f"{'not found' if bisheng is None else 'at ' + bisheng}). -o NAME.cpp writes the AscendC source, and "
            "`tilec run FILE --target ascend910b --check` runs it on tilec's CPU model of the API")
    tik = home / "compiler" / "tikcpp"
    includes = [tik / "tikcfw", tik / "tikcfw" / "impl", tik / "tikcfw" / "interface", home / "include"]
    with tempfile.TemporaryDirectory(prefix="tilec-bisheng-") as tmp:
        src = Path(tmp, f"{name}.cpp")
        src.write_text(source)
        out = Path(tmp, f"{name}.o")
        cmd = [bisheng, "-O2", "-std=c++17", "-xcce", f"--cce-aicore-arch={ARCH}", "--cce-auto-sync=off",
               *[f"-I{p}" for p in includes], "-c", str(src), "-o", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise ToolchainError(f"bisheng failed ({' '.join(cmd)}):\n{r.stderr[-4000:]}")
        return out.read_bytes()
