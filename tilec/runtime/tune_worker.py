"""`python -m tilec.runtime.tune_worker FOLDER...`: the GPU half of `tilec tune`, with the runtime only.

Reads a build folder written by `tilec tune --build-dir` (plan.json, one binary per candidate, the check data),
and for each built candidate: runs it on the check inputs and compares with the Tile IR interpreter's outputs
(a wrong kernel is rejected, however fast), then times it at every shape of the plan — warm-up, CUDA events
around each launch, the median; a run whose spread is over 5% of its median is repeated and pooled. Writes
`results.json` beside the plan; `tilec tune --collect FOLDER` turns it into the tuning database.

Arrays live on the GPU through torch when it is installed (fast random data at large shapes); without torch,
numpy arrays are staged once per shape. Several GPUs (`--gpus all|0,1,..`): one worker process per device
(CUDA_VISIBLE_DEVICES) serving a shared queue, failed or hung workers retried elsewhere, each shape's winner
re-timed on every device (tune_pool.py). Imports numpy and tilec.runtime only.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import math
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
    uuid = (ctypes.c_ubyte * 16)()
    if drv.lib.cuDeviceGetUuid(uuid, drv.device) == 0:
        u = bytes(uuid).hex()
        uuid_text = f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"
    else:
        uuid_text = None
    return {"gpu": buf.value.decode(), "uuid": uuid_text, "cuda_driver": version.value, "cc": f"{major}.{minor}",
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


L2_FLUSH_BYTES = 256 << 20


def _l2_flush():
    """With torch, a 256 MB device buffer that time_launches zeroes before each timed launch (None without torch).

    Zeroing it evicts L2 (50 MB on an H200), so a launch is timed reading its operands from device memory, as a
    model's layer reads its weights (and as bench/shape_sweep.py's do_bench times the peers); and it keeps the GPU
    busy while the host prepares the launch, so the events time the kernel, not the host's call overhead (a few
    microseconds, more for a split-K call's workspace and two launches)."""
    torch = _torch()
    if torch is None:
        return None
    return torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")


def time_launches(kernel, args) -> float:
    """Median milliseconds of one launch (CUDA events), after warm-up; repeated when noisy.

    The launches of a round are queued back to back, each between its own pair of events (and after the L2
    flush), and the events are read once the round is done, as triton's do_bench does: reading each pair right
    after its launch would drain the queue every time, so a call whose host time exceeds the flush's (a split-K
    call: a workspace and two launches from Python) would be timed with the GPU idling until its first launch."""
    from .cuda_driver import Driver

    drv = Driver.get()
    # Device tensors (torch): each call is an asynchronous launch on the current stream (the default stream,
    # where the events are recorded). Host arrays would be staged per call: the worker uses torch when it can.
    events: list = []
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
        events = [(drv.event(), drv.event()) for _ in range(iters)]
        flush = _l2_flush()
        for attempt in range(2):
            for s, e in events:
                if flush is not None:
                    flush.zero_()  # GPU work queued ahead of the timed launch: see _l2_flush
                drv.record(s)
                kernel(*args)
                drv.record(e)
            drv.synchronize()
            times.extend(drv.elapsed_ms(s, e) for s, e in events)
            ordered = sorted(times)
            med = ordered[len(ordered) // 2]
            iqr = ordered[3 * len(ordered) // 4] - ordered[len(ordered) // 4]
            if iqr <= NOISY * med or attempt:
                return med
        return med
    finally:
        drv.synchronize()
        for pair in events:
            for ev in pair:
                drv.destroy_event(ev)


def shape_sizes(shape: dict[str, int], rules: dict[str, str]) -> dict[str, int]:
    """A tuned shape with the sizes its rules derive (`P=K`: a size named after another)."""
    sizes = dict(shape)
    for name, rule in rules.items():
        sizes.setdefault(name, sizes[rule] if isinstance(rule, str) else int(rule))
    return sizes


def label(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def run(folder: Path, quiet: bool = False, deadline: float = math.inf) -> dict:
    from .loader import load

    plan = json.loads((folder / "plan.json").read_text())
    torch = _torch()
    arrays = Arrays(torch)
    built = [c for c in plan["candidates"] if c["status"] == "built"]
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
            _release(kernel)  # one candidate's workspace at a time: dozens of split-K workspaces fill the GPU
        if not quiet:
            best = min(((results[str(c["index"])].get("times", {}).get(label(shape), float("inf")), c["index"])
                        for c in built), default=(float("inf"), None))
            print(f"  {label(shape)}: best cand{best[1]} {best[0]:.4f} ms", flush=True)
        del args
    loaded.clear()
    if torch is not None:  # the next folder starts with the GPU's memory free
        gc.collect()
        torch.cuda.empty_cache()
    return results


def _release(kernel) -> None:
    release = getattr(kernel, "release_workspaces", None)  # (tests time plain functions)
    if release is not None:
        release()


class Server:
    """`--serve FOLDER`: one GPU's worker for tune_pool.Pool — JSON requests on stdin, one JSON reply per line on
    stdout (everything else goes to stderr)."""

    ARGS_BYTES = 8 << 30  # random inputs kept per shape across candidates, up to this much device memory

    def __init__(self, folder: Path):
        self.folder = folder
        self.plan = json.loads((folder / "plan.json").read_text())
        self.arrays = Arrays(_torch())
        self.scalars = {a["name"]: a["value"] for a in self.plan["check"]["args"] if a["kind"] == "scalar"}
        self.shapes = {label(s): (i, s) for i, s in enumerate(self.plan["shapes"])}
        self.kernels: dict[int, object] = {}
        self.inputs: dict[str, tuple[list, int]] = {}

    def kernel(self, message: dict):
        index = message["index"]
        if index not in self.kernels:
            from .loader import load

            self.kernels[index] = load(self.folder / message["artifact"]).kernels[self.plan["kernel"]]
        return self.kernels[index]

    def args(self, kernel, shape_label: str) -> list:
        if shape_label not in self.inputs:
            si, shape = self.shapes[shape_label]
            args = self.arrays.random(kernel.entry, shape_sizes(shape, self.plan.get("size_rules", {})),
                                      self.scalars, seed=100 + si)
            nbytes = sum(getattr(a, "nbytes", 0) for a in args)
            while self.inputs and sum(n for _, n in self.inputs.values()) + nbytes > self.ARGS_BYTES:
                self.inputs.pop(next(iter(self.inputs)))
            self.inputs[shape_label] = (args, nbytes)
        return self.inputs[shape_label][0]

    def times(self, kernel, labels) -> dict:
        out: dict = {"times": {}}
        for shape_label in labels:
            try:
                out["times"][shape_label] = time_launches(kernel, self.args(kernel, shape_label))
            except Exception as e:
                out.setdefault("errors", {})[shape_label] = f"{type(e).__name__}: {e}"[:300]
        return out

    def answer(self, message: dict) -> dict:
        op = message.get("op")
        if op == "info":
            return device_info()
        try:
            kernel = self.kernel(message)
            if op == "retime":
                out = self.times(kernel, message["shapes"])
                _release(kernel)
                return out
            result = check(kernel, self.folder, self.plan, self.arrays)
        except Exception as e:  # a launch failure rejects this candidate, not the worker
            return {"check": "error", "error": f"{type(e).__name__}: {e}"[:500]}
        if result["check"] == "ok":
            result.update(self.times(kernel, list(self.shapes)))
        _release(kernel)
        return result

    def serve(self, requests, replies) -> None:
        for line in requests:
            if line.strip():
                replies.write(json.dumps(self.answer(json.loads(line))) + "\n")
                replies.flush()


def device_count() -> int:
    from .cuda_driver import Driver

    drv = Driver.get()
    n = ctypes.c_int()
    drv.check(drv.lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    return n.value


def time_on_gpus(folder: Path, devices: list[str], jobs=None, *, timeout: float | None = None,
                 log=None, worker_command: list[str] | None = None) -> dict:
    """results.json's content for a build folder, its candidates timed across `devices` (one worker process
    each; tune_pool retries a failed candidate elsewhere), each shape's winner re-timed on every device. `jobs`:
    (index, artifact) pairs, possibly produced while this runs (default: the plan's built candidates).
    `worker_command` replaces the worker process (tests)."""
    from . import tune_pool

    if jobs is None:
        plan = json.loads((folder / "plan.json").read_text())
        jobs = [(c["index"], c["artifact"]) for c in plan["candidates"] if c["status"] == "built"]
    artifacts: dict[int, str] = {}

    def messages():
        for index, artifact in jobs:
            artifacts[index] = artifact
            yield index, {"op": "run", "index": index, "artifact": artifact}

    pool = tune_pool.Pool({d: (lambda d=d: tune_pool.ProcessWorker(d, str(folder), worker_command))
                           for d in devices},
                          timeout=timeout or tune_pool.DEFAULT_TIMEOUT, log=log)
    try:
        results = pool.run(messages())  # the workers start with the first candidate (plan.json exists by then)
        info = pool.on_every_device({"op": "info"})
        plan = json.loads((folder / "plan.json").read_text())
        retimed = tune_pool.retime_winners(pool, results, [label(s) for s in plan["shapes"]], artifacts)
    finally:
        pool.close()
    first = info[min(info)] if info else {}
    return {"version": RESULTS_VERSION, **first, "date": time.strftime("%Y-%m-%d"),
            "devices": {d: info[d] for d in sorted(info)}, "retimed": retimed,
            "candidates": {str(i): r for i, r in sorted(results.items())}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilec.runtime.tune_worker",
                                description="Check and time the candidates of `tilec tune --build-dir` folders.")
    p.add_argument("folders", nargs="*", metavar="FOLDER")
    p.add_argument("--gpus", metavar="all|0,1,..", help="the GPUs to spread candidates over, one worker process "
                   "each (default: all visible)")
    p.add_argument("--device-count", type=int, help=argparse.SUPPRESS)  # the old spelling of --gpus 0..N-1
    p.add_argument("--serve", metavar="FOLDER", help=argparse.SUPPRESS)  # one GPU's worker process (tune_pool)
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="a candidate taking longer than this on a worker counts as hung (default 600)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--budget", type=float, default=math.inf, metavar="SECONDS",
                   help="one GPU: stop timing new shapes after this long (what was timed is kept)")
    args = p.parse_args(argv)
    if args.serve:
        Server(Path(args.serve)).serve(sys.stdin, sys.stdout)
        return 0
    if not args.folders:
        p.error("give the build FOLDER(s) to time")
    from .tune_pool import parse_gpus

    try:
        spec = ",".join(map(str, range(args.device_count))) if args.device_count else args.gpus
        devices = parse_gpus(spec, device_count)
    except ValueError as e:
        print(f"tune_worker: {e}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.budget
    failed = 0
    for f in args.folders:
        folder = Path(f)
        if not args.quiet:
            print(f"{folder}:", flush=True)
        try:
            if devices != ["0"]:  # other or several GPUs: worker processes pinned to them
                out = time_on_gpus(folder, devices, timeout=args.timeout,
                                   log=None if args.quiet else lambda m: print(m, file=sys.stderr, flush=True))
            else:
                merged = run(folder, args.quiet, deadline)
                out = {"version": RESULTS_VERSION, **device_info(), "date": time.strftime("%Y-%m-%d"),
                       "candidates": merged}
        except Exception as e:  # one folder's failure (a missing file, a driver error) spares the others
            print(f"{folder}: failed: {type(e).__name__}: {e}", file=sys.stderr)
            failed += 1
            continue
        (folder / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
