"""Artifact packages on the deployment side: `load_package` (the kernels of a package, each from the artifact that
suits this GPU and driver) and `check_deploy` (every kernel of a package run on this GPU against the results
recorded when the package was built: tilec/packaging.py). numpy and the CUDA driver only, no compiler:

    python -m tilec.runtime.check_deploy PACKAGE [--report report.json] [--no-jit]

(check_deploy.py), which `tilec check-deploy PACKAGE` runs too.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from ..errors import UserFacingError
from ..manifest import choose_image

INDEX_NAME = "index.json"
READ_FORMATS = (1,)
_RANK = {"exact": 0, "same_major": 1, "jit": 2}  # the better image first


class PackageError(UserFacingError, RuntimeError):
    pass


def read_index(package: str | os.PathLike) -> dict:
    path = Path(package) / INDEX_NAME
    try:
        index = json.loads(path.read_text())
    except FileNotFoundError:
        raise PackageError(f"{package}: not a tilec package (no {INDEX_NAME}; build one with tilec package)") from None
    except ValueError as e:
        raise PackageError(f"{path}: not a tilec package index ({e})") from None
    if index.get("package_format") not in READ_FORMATS:
        raise PackageError(f"{path}: package format {index.get('package_format')!r} is not one this tilec.runtime "
                           f"reads ({', '.join(map(str, READ_FORMATS))})")
    return index


class Package:
    """The kernels of a package as attributes (`pkg.softmax(x)`), each loaded from the artifact picked for GPU
    `device`: among the package's artifacts holding it, one the driver can load, with the best image for this GPU
    (built for exactly it, else a cubin of its major version, else PTX)."""

    def __init__(self, package, device: int = 0, no_jit: bool | None = None):
        from .cuda_driver import Driver

        self.path = Path(package)
        self.index = read_index(package)
        drv = Driver.get(device)
        major, minor = drv.compute_capability()
        self.device_cc, self.driver = major * 10 + minor, drv.driver_version()
        self.no_jit = no_jit
        self.chosen: dict[str, dict] = {}  # kernel -> its index row
        for row in self.index["kernels"]:
            rank = self._rank(row)
            if rank is not None and (row["kernel"] not in self.chosen or rank < self._rank(self.chosen[row["kernel"]])):
                self.chosen[row["kernel"]] = row
        self._modules: dict[str, object] = {}

    def _rank(self, row: dict):
        if self.driver < int(row.get("oldest_driver") or 0):
            return None
        manifest = json.loads((self.path / row["manifest"]).read_text())
        choice = choose_image(manifest, self.device_cc)
        return None if choice is None else _RANK[choice.how]

    def module(self, kernel: str):
        """The tilec.runtime Module holding `kernel`, loaded for this GPU."""
        row = self.chosen.get(kernel)
        if row is None:
            known = sorted({r["kernel"] for r in self.index["kernels"]})
            if kernel in known:
                raise PackageError(f"{self.path}: no artifact of kernel '{kernel}' loads on this GPU "
                                   f"(sm_{self.device_cc}, CUDA driver {self.driver // 1000}."
                                   f"{self.driver % 1000 // 10})")
            raise PackageError(f"{self.path} has no kernel '{kernel}' (kernels: {', '.join(known)})")
        mod = self._modules.get(row["file"])
        if mod is None:
            from .loader import load

            mod = self._modules[row["file"]] = load(self.path / row["file"], self.path / row["manifest"],
                                                    no_jit=self.no_jit)
        return mod

    def __getattr__(self, kernel: str):
        if kernel.startswith("_") or "chosen" not in self.__dict__:
            raise AttributeError(kernel)
        return getattr(self.module(kernel), kernel)

    def __dir__(self):
        return [*super().__dir__(), *self.__dict__.get("chosen", {})]


def load_package(package: str | os.PathLike, device: int = 0, no_jit: bool | None = None) -> Package:
    """The kernels of a package built by `tilec package`, for GPU `device` (see Package)."""
    return Package(package, device, no_jit)


# ---------------------------------------------------------------- the deployment check


def check_deploy(package: str | os.PathLike, device: int = 0, no_jit: bool | None = None) -> dict:
    """Load every artifact of the package on this GPU and driver, run each kernel on the inputs recorded in its
    check file and compare with the recorded reference outputs (tolerances by dtype). The report: GPU, driver,
    and per kernel the artifact, the image chosen (how, why, load seconds), ok, the error if any."""
    from ..testing.compare import compare
    from .cuda_driver import Driver
    from .loader import load
    from .module import describe_gpu

    path = Path(package)
    index = read_index(path)
    drv = Driver.get(device)
    version = drv.driver_version()
    report = {"package": str(path), "package_tilec_version": index.get("tilec_version"),
              "gpu": describe_gpu(drv, device), "driver": f"{version // 1000}.{version % 1000 // 10}",
              "driver_version": version, "kernels": []}
    modules: dict[str, object] = {}
    checks: dict[str, dict] = {}
    for row in index["kernels"]:
        item = {"kernel": row["kernel"], "file": row["file"], "ok": False, "error": None}
        report["kernels"].append(item)
        try:
            _verify_sha(path, row)
            if row["file"] not in modules:
                modules[row["file"]] = load(path / row["file"], path / row["manifest"], no_jit=no_jit)
            mod = modules[row["file"]]
            loaded = mod.image_report(device)
            item.update(image=loaded.image, how=loaded.how, why=loaded.why, load_seconds=round(loaded.load_seconds, 4))
            if row["check"] not in checks:
                checks[row["check"]] = _read_check(path / row["check"])
            recorded = checks[row["check"]].get(row["kernel"])
            if recorded is None:
                raise PackageError(f"{row['check']} records no run of kernel '{row['kernel']}'")
            args, expected = recorded
            start = time.perf_counter()
            getattr(mod, row["kernel"])(*args)  # numpy arguments: synchronous, outputs written in place
            item["run_seconds"] = round(time.perf_counter() - start, 4)
            failures = []
            for name, (position, want) in expected.items():
                c = compare(args[position], want, name=f"{row['kernel']}.{name}")
                item.setdefault("max_abs_err", {})[name] = float(c.max_abs)
                if not c.ok:
                    failures.append(f"{name}: {c.verdict().splitlines()[0]}")
            item["ok"] = not failures
            item["error"] = "; ".join(failures) or None
        except Exception as e:  # noqa: BLE001 -- the report says what failed for every kernel, whatever broke
            item["error"] = f"{type(e).__name__}: {e}"
    report["passed"] = sum(k["ok"] for k in report["kernels"])
    report["failed"] = len(report["kernels"]) - report["passed"]
    return report


def _verify_sha(path: Path, row: dict) -> None:
    import hashlib

    got = hashlib.sha256((path / row["file"]).read_bytes()).hexdigest()
    if got != row["sha256"]:
        raise PackageError(f"{row['file']}: its SHA-256 is {got}, the index says {row['sha256']} (a damaged or "
                           "replaced file)")


def _read_check(path: Path) -> dict:
    """kernel -> (its arguments in signature order: numpy arrays and scalars, outputs zeroed; {output name:
    (position, expected array)}) from a check file (tilec/packaging.py)."""
    from .arrays import NP_NAMES

    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read("checks.json"))

        def array(name: str, dtype: str) -> np.ndarray:
            if dtype in ("bf16", "f8e4m3", "f8e5m2"):
                import ml_dtypes  # noqa: F401  (registers numpy's bfloat16 and float8 dtypes)
            bits = np.load(io.BytesIO(z.read(name)), allow_pickle=False)
            want = np.dtype(NP_NAMES[dtype])
            return bits if bits.dtype == want else bits.view(want)

        out = {}
        for kernel, run in meta.items():
            args, expected = [], {}
            for p in run["params"]:
                if p["kind"] == "scalar":
                    args.append(p["value"])
                    continue
                args.append(array(f"{kernel}/{p['name']}.npy", p["dtype"]))
                if p["output"]:
                    expected[p["name"]] = (len(args) - 1, array(f"{kernel}/{p['name']}.expected.npy", p["dtype"]))
            out[kernel] = (args, expected)
    return out


def run_check(package: str, report_path: str | None, device: int = 0, no_jit: bool | None = None) -> int:
    """check_deploy, a line per kernel on stdout, the JSON report written; 0 when every kernel passed."""
    try:
        report = check_deploy(package, device, no_jit)
    except PackageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{report['gpu']}, CUDA driver {report['driver']}")
    for k in report["kernels"]:
        image = f"{k.get('image', '?')} ({k.get('how', '?')}, load {k.get('load_seconds', 0):.3f} s)"
        print(f"{'ok  ' if k['ok'] else 'FAIL'} {k['kernel']:<24} {k['file']:<28} {image}"
              + (f"  {k['error']}" if k["error"] else ""))
    print(f"{report['passed']} passed, {report['failed']} failed")
    target = Path(report_path) if report_path else Path(package) / "check-deploy.json"
    target.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(f"report: {target}")
    return 0 if report["failed"] == 0 and report["kernels"] else 1

