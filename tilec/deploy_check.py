"""`tilec check-deploy PACKAGE`, also `python -m tilec.deploy_check PACKAGE` where only tilec.runtime, numpy and the
CUDA driver are installed: every kernel of a package (tilec/packaging.py) loaded on this GPU and driver, run on the
inputs recorded when the package was built and compared with the outputs recorded then (tilec.testing.compare).
It sits above tilec.runtime and tilec.testing, and imports no compiler.
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

from .runtime.package import PackageError, read_index


def check_deploy(package: str | os.PathLike, device: int = 0, no_jit: bool | None = None) -> dict:
    """Load every artifact of the package on this GPU and driver, run each kernel on the inputs recorded in its
    check file and compare with the recorded reference outputs (tolerances by dtype). The report: GPU, driver,
    and per kernel the artifact, the image chosen (how, why, load seconds), ok, the error if any."""
    from .runtime.cuda_driver import Driver
    from .runtime.loader import load
    from .runtime.module import describe_gpu
    from .testing.compare import compare

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
    from .runtime.arrays import NP_NAMES

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


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tilec.deploy_check",
                                 description="Check a tilec package on this GPU and driver (tilec check-deploy).")
    ap.add_argument("package")
    ap.add_argument("--report", help="write the JSON report here (default: PACKAGE/check-deploy.json)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--no-jit", action="store_true", help="refuse PTX images (as TILEC_NO_JIT=1)")
    args = ap.parse_args(argv)
    return run_check(args.package, args.report, args.device, True if args.no_jit else None)



if __name__ == "__main__":
    sys.exit(main())
