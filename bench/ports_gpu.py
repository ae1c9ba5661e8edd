"""The TileLang ports (examples/tilelang/) on the GPU: build here (no GPU), run on the H200 (no compiler).

    python bench/ports_gpu.py build .artifacts/ports     # compile every port for sm90 (cubin) and sm80 (PTX),
                                                         # store fresh inputs and the numpy reference's outputs
    python3 bench/ports_gpu.py run .artifacts/ports      # on the GPU machine: launch, compare, print a table
                                                         # (each binary in a process of its own)

Each case of scripts/tilelang_ports.py is built with the configuration its tests run (`Case.defines`, the small
tiles its inputs and reference were written for, plus the target's own `Case.defines_for`), at its regular and
ragged shapes, on the inputs its own input function makes (random
normal ones otherwise). `run` launches every kernel of the case in order through tilec.runtime on numpy arrays
(the synchronous staging path) and compares each output with the numpy reference within the case's tolerance
(at least the f16 one: the GPU's reduction order differs from numpy's). It needs numpy, ml_dtypes and
tilec.runtime only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (label, target, artifact kind): sm80 as PTX so that the Ampere-class lowering runs on a Hopper GPU too
TARGETS = [("sm90", "sm90", "cubin"), ("sm80", "sm80", "ptx")]
MIN_TOL = (1e-2, 1e-2)


def _case_units(case, module):
    from tilec.interp.run import public_kernels

    units = {k.name: k for k in public_kernels(module)}
    return [units[n] for n in (case.kernels or [public_kernels(module)[0].name])]


def _raw(a: np.ndarray) -> np.ndarray:
    """The array's bytes as unsigned integers of its width: npz keeps no ml_dtypes type (bf16, fp8)."""
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "V" or a.dtype.name.startswith(("bfloat", "float8")) else a


def _typed(a: np.ndarray, name: str) -> np.ndarray:
    import ml_dtypes

    return a.view(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) and a.dtype.name != name else a


def build(out: Path) -> None:
    import ml_dtypes  # noqa: F401

    import tilec
    from tilec.diagnostics import CompileError
    from tilec.interp.run import random_inputs

    sys.path.insert(0, str(ROOT / "scripts"))
    from tilelang_ports import CASES, EXPECTED_TARGETS

    sys.path.insert(0, str(ROOT / "bench" / "constructs"))
    from cases import CASES as CONSTRUCTS  # issue #30's constructs, checked the same way

    out.mkdir(parents=True, exist_ok=True)
    index = []
    for case in CASES + CONSTRUCTS:
        path = case.folder / case.file
        for label, target, kind in TARGETS:
            if (case.name, target) in EXPECTED_TARGETS:
                continue
            defines = {**case.defines, **case.defines_for(target)}
            try:
                art = tilec.compile(path, target, defines=defines, emit=kind)
            except CompileError as e:
                print(f"skip {case.name} {label}: {e.diagnostics[0].message}")
                continue
            binary = f"{case.name}.{label}.{kind}"
            (out / binary).write_bytes(art.data)
            (out / f"{binary}.json").write_bytes(art.manifest)
            module = tilec.compile(path, defines=defines).module
            for shape, sizes in case.sizes.items():
                rng = np.random.default_rng(abs(hash((case.name, label, shape))) % 2**32)
                args = case.inputs(sizes, rng) if case.inputs else None
                calls = []
                for unit in _case_units(case, module):
                    if args is None:
                        args = random_inputs(unit, {s.name: sizes[s.name] for s in unit.size_vars},
                                             seed=int(rng.integers(1 << 30)))
                    else:
                        missing = [p.name for p in unit.params if p.name not in args]
                        if missing:
                            usizes = {s.name: sizes[s.name] for s in unit.size_vars if s.name in sizes}
                            extra = random_inputs(unit, usizes)
                            args.update({n: extra[n] for n in missing})
                    calls.append({"kernel": unit.name, "params": [p.name for p in unit.params]})
                inputs = {n: np.array(a, copy=True) for n, a in args.items() if isinstance(a, np.ndarray)}
                scalars = {n: (a.item() if isinstance(a, np.generic) else a) for n, a in args.items()
                           if not isinstance(a, np.ndarray)}
                expected = {n: np.asarray(v, np.float32) for n, v in case.reference(args, sizes).items()}
                name = f"{case.name}.{label}.{shape}"
                np.savez(out / f"{name}.in.npz", **{n: _raw(a) for n, a in inputs.items()})
                np.savez(out / f"{name}.want.npz", **expected)
                index.append({"name": name, "binary": binary, "calls": calls, "scalars": scalars,
                              "dtypes": {n: a.dtype.name for n, a in inputs.items()},
                              "rtol": max(case.rtol, MIN_TOL[0]), "atol": max(case.atol, MIN_TOL[1]),
                              "unordered_rows": list(case.unordered_rows)})
            print(f"built {binary}")
    (out / "index.json").write_text(json.dumps(index, indent=1))


def run_isolated(folder: Path, only: str | None) -> int:
    """run() for each binary in a process of its own: a kernel that faults leaves its CUDA context unusable, and the
    other binaries' results must still come."""
    import subprocess

    index = json.loads((folder / "index.json").read_text())
    if only:
        index = [e for e in index if any(e["name"].startswith(p) for p in only.split(","))]
    groups: dict[str, list[str]] = {}
    for e in index:
        groups.setdefault(e["binary"], []).append(e["name"])
    passed = failed = 0
    for binary, names in groups.items():
        proc = subprocess.run([sys.executable, __file__, "run", str(folder), "--inline", "--only", ",".join(names)],
                              capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip() and " passed, " not in ln]
        print("\n".join(lines), flush=True)
        ok = sum(ln.rstrip().endswith(" ok") for ln in lines)
        passed += ok
        failed += len(names) - ok
        if len(lines) < len(names):
            print(f"{binary}: the process ended early (rc {proc.returncode}): {proc.stderr.strip()[-300:]}")
    print(f"\n{passed} passed, {failed} failed")
    return 1 if failed else 0


def run(folder: Path, only: str | None) -> int:
    import ml_dtypes  # noqa: F401

    import tilec.runtime as rt

    index = json.loads((folder / "index.json").read_text())
    if only:
        index = [e for e in index if any(e["name"].startswith(p) for p in only.split(","))]
    modules: dict[str, object] = {}
    failures = 0
    for e in index:
        try:
            mod = modules.get(e["binary"]) or modules.setdefault(e["binary"], rt.load(folder / e["binary"]))
            with np.load(folder / f"{e['name']}.in.npz") as z:
                args = {n: _typed(z[n], e["dtypes"][n]) for n in z.files}
            args.update(e["scalars"])
            for call in e["calls"]:
                getattr(mod, call["kernel"])(*[args[p] for p in call["params"]])
            worst, bad = 0.0, []
            with np.load(folder / f"{e['name']}.want.npz") as z:
                for n in z.files:
                    got = np.asarray(args[n]).astype(np.float32)
                    want = z[n]
                    if got.shape != want.shape:
                        bad.append(f"{n} (shape {got.shape}, expected {want.shape})")
                        continue
                    if n in e.get("unordered_rows", ()):  # a set per row, in the order the atomics ran
                        got, want = np.sort(got, axis=-1), np.sort(want, axis=-1)
                    finite = np.isfinite(want)
                    err = np.abs(got[finite] - want[finite])
                    worst = max(worst, float(err.max()) if err.size else 0.0)
                    if not np.all(np.isclose(got, want, rtol=e["rtol"], atol=e["atol"], equal_nan=True)):
                        bad.append(n)
            status = "FAIL " + ",".join(bad) if bad else "ok"
        except Exception as exc:  # a load or launch error is this case's failure, reported in the table
            status, worst = f"FAIL {type(exc).__name__}: {exc}", float("nan")
        failures += status != "ok"
        print(f"{e['name']:<48} max|err| {worst:<10.3g} {status}", flush=True)
    print(f"\n{len(index) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "run"])
    ap.add_argument("dir")
    ap.add_argument("--only", help="comma-separated case-name prefixes (run)")
    ap.add_argument("--inline", action="store_true", help="run every case in this process (default: a process per "
                    "binary, so that a faulting kernel cannot fail the others)")
    a = ap.parse_args()
    if a.mode == "build":
        build(Path(a.dir))
        return 0
    return (run if a.inline else run_isolated)(Path(a.dir), a.only)


if __name__ == "__main__":
    raise SystemExit(main())
