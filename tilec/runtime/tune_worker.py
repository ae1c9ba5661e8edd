"""`python -m tilec.runtime.tune_worker FOLDER...`: the GPU half of `tilec tune`, with the runtime only.

Reads a build folder written by `tilec tune --build-dir` (plan.json, one binary per candidate, the check data),
and for each built candidate: runs it on the check inputs and compares with the Tile IR interpreter's outputs
(a wrong kernel is rejected, however fast), then times it at every shape of the plan — warm-up, CUDA events
around each launch, the median; a run whose spread is over 5% of its median is repeated and pooled. Writes
`results.json` beside the plan; `tilec tune --collect FOLDER` turns it into the tuning database.

Arrays live on the GPU through torch when it is installed (fast random data at large shapes); without torch,
numpy arrays are staged once per shape. Several GPUs: one worker process per device (CUDA_VISIBLE_DEVICES),
each timing a share of the candidates; `--device-count 1` keeps one. Imports numpy and tilec.runtime only.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS_VERSION = 1
NOISY = 0.05  # a timing whose interquartile range exceeds this fraction of its median is repeated
TARGET_MS = 40.0  # time spent timing one candidate at one shape (about; at least MIN_ITERS launches)
MIN_ITERS, MAX_ITERS = 5, 200
TOLERANCE = {"f16": 1e-2, "bf16": 4e-2, "f32": 1e-4, "f64": 1e-8, "f8e4m3": 0.15, "f8e5m2": 0.3}
_RAW = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64, "f8e4m3": np.uint8,
        "f8e5m2": np.uint8, "i8": np.int8, "u8": np.uint8, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _torch_dtype(torch, name: str):
    from .arrays import TORCH_NAMES

    return getattr(torch, TORCH_NAMES[name])


def device_info() -> dict:
    from .cuda_driver import Driver

    drv = Driver.get()
    buf = ctypes.create_string_buffer(256)
    drv.lib.cuDeviceGetName(buf, 256, drv.device)
    version = ctypes.c_int()
    drv.lib.cuDriverGetVersion(ctypes.byref(version))
    major, minor = drv.compute_capability()
    return {"gpu": buf.value.decode(), "cuda_driver": version.value, "cc": f"{major}.{minor}",
            "sms": drv.multiprocessor_count()}


class Arrays:
    """Kernel arguments: from the check files, or random at a shape (on the GPU with torch)."""

    def __init__(self, torch):
        self.torch = torch

    def from_check(self, folder: Path, arg: dict):
        if arg["kind"] == "scalar":
            return arg["value"], None
        raw = np.frombuffer((folder / arg["file"]).read_bytes(), dtype=_RAW[arg["dtype"]]).reshape(arg["shape"])
        expected = None
        if arg.get("output"):
            expected = np.frombuffer((folder / arg["expected"]).read_bytes(), dtype=_RAW[arg["dtype"]])
            expected = self.as_float(expected.reshape(arg["shape"]), arg["dtype"])
        return self.upload(raw, arg["dtype"]), expected

    def upload(self, raw: np.ndarray, dtype: str):
        if self.torch is None:
            return raw.view(_host_dtype(dtype)).copy()
        t = self.torch.from_numpy(raw.copy()).cuda()
        return t.view(_torch_dtype(self.torch, dtype)) if dtype in ("bf16", "f8e4m3", "f8e5m2") else t

    def as_float(self, a, dtype: str) -> np.ndarray:
        """An array (raw bytes from a file, a torch tensor or a numpy array) as float64 numpy."""
        if isinstance(a, np.ndarray) and a.dtype in (np.uint16, np.uint8) and dtype.startswith(("bf16", "f8")):
            if dtype == "bf16":
                return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            if self.torch is not None:
                t = self.torch.from_numpy(a.copy()).view(_torch_dtype(self.torch, dtype))
                return t.float().numpy().astype(np.float64)
            return a.view(_host_dtype(dtype)).astype(np.float64)
        if self.torch is not None and isinstance(a, self.torch.Tensor):
            return a.float().cpu().numpy().astype(np.float64)
        return np.asarray(a).astype(np.float64)

    def random(self, entry: dict, sizes: dict[str, int], scalars: dict[str, object], seed: int) -> list:
        out = []
        for i, p in enumerate(entry["params"]):
            if p["kind"] == "scalar":
                out.append(scalars.get(p["name"], 1.0))
                continue
            shape = [d if isinstance(d, int) else sizes[d] for d in p["shape"]]
            if self.torch is not None:
                g = self.torch.Generator(device="cuda").manual_seed(seed + i)
                dt = _torch_dtype(self.torch, p["dtype"])
                if dt.is_floating_point:
                    t = self.torch.randn(shape, device="cuda", generator=g, dtype=self.torch.float32)
                    out.append(t.to(dt))
                else:
                    out.append(self.torch.randint(-8, 8, shape, device="cuda", generator=g).to(dt))
            else:
                rng = np.random.default_rng(seed + i)
                out.append(rng.standard_normal(shape, dtype=np.float32).astype(_host_dtype(p["dtype"])))
        return out


def _host_dtype(name: str):
    from .arrays import NP_NAMES as _NP_NAMES

    if name in ("bf16", "f8e4m3", "f8e5m2"):
        import ml_dtypes

        return getattr(ml_dtypes, _NP_NAMES[name])
    return np.dtype(_NP_NAMES[name])


def check(kernel, folder: Path, plan: dict, arrays: Arrays) -> dict:
    """Run the candidate on the check inputs; compare every output with the interpreter's."""
    args, expected = [], []
    for a in plan["check"]["args"]:
        value, exp = arrays.from_check(folder, a)
        args.append(value)
        expected.append((a, exp))
    kernel(*args)
    worst, ok = 0.0, True
    for (a, exp), value in zip(expected, args, strict=True):
        if exp is None:
            continue
        got = arrays.as_float(value, a["dtype"])
        # the error relative to the output's magnitude: rounding in the output dtype, not a wrong tile
        scale = max(float(np.max(np.abs(exp))), 1e-6) if exp.size else 1.0
        err = float(np.max(np.abs(got - exp))) / scale if exp.size else 0.0
        if not np.all(np.isfinite(got)):
            err = float("inf")
        worst = max(worst, err)
        ok &= err <= TOLERANCE.get(a["dtype"], 1e-2)
    return {"check": "ok" if ok else "wrong", "max_rel_err": worst}


def time_launches(kernel, args) -> float:
    """Median milliseconds of one launch (CUDA events), after warm-up; repeated when noisy."""
    from .cuda_driver import Driver

    drv = Driver.get()
    # Device tensors (torch): each call is an asynchronous launch on the current stream (the default stream,
    # where the events are recorded). Host arrays would be staged per call: the worker uses torch when it can.
    try:
        start = time.perf_counter()
        kernel(*args)
        drv.synchronize()
        first_ms = (time.perf_counter() - start) * 1e3
        warm = max(2, min(20, int(10.0 / max(first_ms, 1e-3))))
        for _ in range(warm):
            kernel(*args)
        drv.synchronize()
        iters = max(MIN_ITERS, min(MAX_ITERS, int(TARGET_MS / max(first_ms, 1e-3))))
        times: list[float] = []
        s, e = drv.event(), drv.event()
        for attempt in range(2):
            for _ in range(iters):
                drv.record(s)
                kernel(*args)
                drv.record(e)
                times.append(drv.elapsed_ms(s, e))
            ordered = sorted(times)
            med = ordered[len(ordered) // 2]
            iqr = ordered[3 * len(ordered) // 4] - ordered[len(ordered) // 4]
            if iqr <= NOISY * med or attempt:
                return med
        return med
    finally:
        drv.synchronize()


def shape_sizes(shape: dict[str, int], rules: dict[str, str]) -> dict[str, int]:
    """A tuned shape with the sizes its rules derive (`B_rows=K`: a size named after another)."""
    sizes = dict(shape)
    for name, rule in rules.items():
        sizes.setdefault(name, sizes[rule] if isinstance(rule, str) else int(rule))
    return sizes


def label(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def run(folder: Path, shard: tuple[int, int] = (0, 1), quiet: bool = False, deadline: float = math.inf) -> dict:
    from .loader import load

    plan = json.loads((folder / "plan.json").read_text())
    torch = _torch()
    arrays = Arrays(torch)
    built = [c for c in plan["candidates"] if c["status"] == "built"][shard[0]::shard[1]]
    scalars = {a["name"]: a["value"] for a in plan["check"]["args"] if a["kind"] == "scalar"}
    results: dict[str, dict] = {}
    loaded = {}
    for c in built:
        try:
            mod = load(folder / c["artifact"])
            kernel = mod.kernels[plan["kernel"]]
            results[str(c["index"])] = check(kernel, folder, plan, arrays)
            loaded[c["index"]] = kernel
        except Exception as e:  # a launch failure rejects this candidate, not the run
            results[str(c["index"])] = {"check": "error", "error": f"{type(e).__name__}: {e}"[:500]}
        if not quiet:
            r = results[str(c["index"])]
            print(f"  check cand{c['index']}: {r['check']} {r.get('max_rel_err', r.get('error', ''))}", flush=True)
    for si, shape in enumerate(plan["shapes"]):
        if time.monotonic() > deadline:  # out of time: the shapes left are not timed (collect skips them)
            if not quiet:
                print(f"  {label(shape)}: skipped (--budget spent)", flush=True)
            continue
        sizes = shape_sizes(shape, plan.get("size_rules", {}))
        args = None
        for c in built:
            r = results[str(c["index"])]
            if r["check"] != "ok":
                continue
            kernel = loaded[c["index"]]
            if args is None:
                args = arrays.random(kernel.entry, sizes, scalars, seed=100 + si)
            try:
                r.setdefault("times", {})[label(shape)] = time_launches(kernel, args)
            except Exception as e:
                r.setdefault("errors", {})[label(shape)] = f"{type(e).__name__}: {e}"[:300]
        if not quiet:
            best = min(((results[str(c["index"])].get("times", {}).get(label(shape), float("inf")), c["index"])
                        for c in built), default=(float("inf"), None))
            print(f"  {label(shape)}: best cand{best[1]} {best[0]:.4f} ms", flush=True)
        del args
    return results


def device_count() -> int:
    from .cuda_driver import Driver

    drv = Driver.get()
    n = ctypes.c_int()
    drv.check(drv.lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    return n.value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilec.runtime.tune_worker",
                                description="Check and time the candidates of `tilec tune --build-dir` folders.")
    p.add_argument("folders", nargs="+", metavar="FOLDER")
    p.add_argument("--device-count", type=int, help="GPUs to spread candidates over (default: all visible)")
    p.add_argument("--shard", help=argparse.SUPPRESS)  # I/N: this process times every N-th candidate from I
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--budget", type=float, default=math.inf, metavar="SECONDS",
                   help="stop timing new shapes after this long (what was timed is kept)")
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.budget
    failed = 0
    for f in args.folders:
        folder = Path(f)
        if args.shard:
            i, n = (int(x) for x in args.shard.split("/"))
            out = run(folder, (i, n), args.quiet, deadline)
            (folder / f"results.shard{i}.json").write_text(json.dumps(out))
            continue
        if not args.quiet:
            print(f"{folder}:", flush=True)
        n = args.device_count or device_count()
        if n > 1:
            left = max(1.0, deadline - time.monotonic()) if math.isfinite(deadline) else math.inf
            procs = [subprocess.Popen([sys.executable, "-m", "tilec.runtime.tune_worker", str(folder), "--shard",
                                       f"{i}/{n}", "--quiet", "--budget", str(left)],
                                      env={**os.environ, "CUDA_VISIBLE_DEVICES": str(i)})
                     for i in range(n)]
            if any(pr.wait() for pr in procs):
                print(f"{folder}: a worker failed", file=sys.stderr)
                return 1
            merged: dict = {}
            for i in range(n):
                shard_file = folder / f"results.shard{i}.json"
                merged.update(json.loads(shard_file.read_text()))
                shard_file.unlink()
        else:
            try:
                merged = run(folder, (0, 1), args.quiet, deadline)
            except Exception as e:  # one folder's failure (a missing file, a driver error) spares the others
                print(f"{folder}: failed: {type(e).__name__}: {e}", file=sys.stderr)
                failed += 1
                continue
        out = {"version": RESULTS_VERSION, **device_info(), "date": time.strftime("%Y-%m-%d"), "candidates": merged}
        (folder / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
