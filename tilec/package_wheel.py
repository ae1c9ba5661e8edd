"""`tilec package ... --wheel NAME`: the package directory as a Python wheel (docs/deploy.md#artifact-packages).

The wheel `NAME-VERSION-py3-none-any.whl` holds one importable package, NAME, whose `kernels/` folder is the
package directory (artifacts, manifests, check files, index.json) and whose `load(no_jit=None)` returns
`tilec.runtime.load_package` of it; it requires tilec (the runtime: numpy and the driver, no compiler). So a fleet
installs kernels as it installs any dependency (`pip install NAME-VERSION-py3-none-any.whl`) and writes

    import NAME
    pkg = NAME.load()            # the artifact that suits this GPU and driver, per kernel
    y = pkg.softmax(x)

The wheel is reproducible byte for byte: entries in sorted order, fixed timestamps and permissions, and a RECORD
of every file's SHA-256.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

from .diagnostics import CompileError, Diagnostic

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([abc]|rc)?[0-9]*(\.post[0-9]+)?(\.dev[0-9]+)?$")

_INIT = '''"""Kernels packaged by `tilec package` (tilec {tilec_version}) for {targets}: {kernels}.

    import {name}
    pkg = {name}.load()      # per kernel, the artifact that suits this GPU and driver (tilec.runtime.load_package)
"""

from pathlib import Path

KERNELS = Path(__file__).with_name("kernels")  # the package directory: artifacts, manifests, index.json


def load(no_jit=None):
    import tilec.runtime

    return tilec.runtime.load_package(KERNELS, no_jit=no_jit)
'''


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(package_dir: Path, name: str, version: str, index: dict) -> Path:
    """Write `package_dir/NAME-VERSION-py3-none-any.whl` from the package's files (its top-level files but wheels)."""
    if not _NAME.match(name):
        raise CompileError([Diagnostic("error", f"tilec package --wheel {name}: the name must be a Python identifier "
                                                "(letters, digits, _), the module the wheel installs")])
    if not _VERSION.match(version):
        raise CompileError([Diagnostic("error", f"tilec package --wheel-version {version}: not a version "
                                                "(e.g. 1.0, 2.3.1, 1.0rc1)")])
    from .version import __version__

    files = sorted(p for p in package_dir.iterdir()
                   if p.is_file() and not p.name.endswith(".whl") and not p.name.startswith("."))
    kernels = ", ".join(sorted({row["kernel"] for row in index["kernels"]})) or "none"
    init = _INIT.format(name=name, tilec_version=__version__, targets=", ".join(index["targets"]), kernels=kernels)
    dist_info = f"{name}-{version}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                f"Summary: tilec kernels ({kernels}) for {', '.join(index['targets'])}\n"
                f"Requires-Dist: tilec>={__version__}\n")
    wheel = f"Wheel-Version: 1.0\nGenerator: tilec {__version__}\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries = [(f"{name}/__init__.py", init.encode())]
    entries += [(f"{name}/kernels/{p.name}", p.read_bytes()) for p in files]
    entries += [(f"{dist_info}/METADATA", metadata.encode()), (f"{dist_info}/WHEEL", wheel.encode())]
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in entries) + f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode()))
    out = package_dir / f"{name}-{version}-py3-none-any.whl"
    temporary = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in entries:
            info = zipfile.ZipInfo(path, _ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    temporary.replace(out)
    return out
