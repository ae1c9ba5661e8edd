"""`tilec tune --cluster ADDRESS`: the same tuning job on a Ray cluster (the optional extra `tilec[cluster]`).

Ray does the scheduling, the retries and the data transfer; this module only says what the tasks are:
- compile tasks (`num_cpus=1`) run the candidate build of tilec/tuning/plan.py anywhere in the cluster and return
  the outcome with the binary's bytes, which the driver writes into the build folder as a local build would;
- timing tasks (`num_gpus=1`) receive the build folder's check data (put in the object store once) and one
  candidate's binary, and run the GPU worker's own check and timing (tilec.runtime.tune_worker.Server) — a
  candidate starts timing as soon as it is compiled; a task whose worker process dies is retried by Ray
  (`max_retries`);
- the winners are timed again by one task per GPU of the cluster (spread over the nodes), each reply naming the
  device it ran on.
The driver merges everything into the results a local run writes (results.json), and `tilec tune` turns that
into the tuning database. Imported only for `--cluster`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

TIMING_RETRIES = 3  # a timing task whose worker process died is run again this many times (Ray's max_retries)


def _ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError("--cluster needs Ray: pip install 'tilec[cluster]'") from None
    return ray


def _folder_files(folder: Path) -> dict[str, bytes]:
    """What a timing task needs of the build folder besides the candidate: the plan and the check data."""
    files = {"plan.json": (folder / "plan.json").read_bytes()}
    for f in sorted((folder / "check").iterdir()):
        files[f"check/{f.name}"] = f.read_bytes()
    return files


def _unpack(files: dict[str, bytes], into: Path) -> None:
    for name, data in files.items():
        path = into / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def compile_candidate(item: tuple) -> tuple[dict, dict[str, bytes]]:
    """A Ray task: one candidate's build (plan._build_one) in a scratch folder; its outcome and files."""
    from .plan import _build_one

    source, opts, index, config, _folder, emit, _check = item
    with tempfile.TemporaryDirectory(prefix="tilec-cand-") as scratch:
        outcome = _build_one((source, opts, index, config, scratch, emit, None))
        files = {f.name: f.read_bytes() for f in Path(scratch).iterdir() if f.is_file()}
    return outcome, files


def _device_name() -> str:
    import ray

    ctx = ray.get_runtime_context()
    return f"{ctx.get_node_id()[:12]}/gpu{','.join(map(str, ray.get_gpu_ids()))}"


def time_candidate(folder_files: dict[str, bytes], artifact_files: dict[str, bytes], message: dict,
                   timer: Callable[[Path, dict], dict] | None = None) -> dict:
    """A Ray task on one GPU: the worker's answer to `message` (run: check and time; retime), naming the device."""
    with tempfile.TemporaryDirectory(prefix="tilec-time-") as scratch:
        folder = Path(scratch)
        _unpack({**folder_files, **artifact_files}, folder)
        if timer is not None:
            reply = timer(folder, message)
        else:
            from ..runtime.tune_worker import Server, device_info

            reply = Server(folder).answer(message)
            reply["gpu_info"] = device_info()
    reply["device"] = _device_name()
    return reply


def tune(address: str | None, source: str, opts, shapes: list[dict[str, int]], folder: str | os.PathLike, *,
         size_rules: dict | None = None, emit: str = "cubin", log: Callable[[str], None] | None = None,
         timer: Callable[[Path, dict], dict] | None = None) -> dict:
    """results.json's content for tuning `source` on the Ray cluster at `address` (None: the one this process
    is already connected to). `timer` stands in for the GPU worker (tests with fake GPUs)."""
    import time

    from ..runtime.tune_pool import winners
    from ..runtime.tune_worker import RESULTS_VERSION
    from . import plan as tune_plan

    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    log = log or (lambda msg: None)
    folder = Path(folder)
    compile_task = ray.remote(num_cpus=1, max_retries=2)(compile_candidate)
    time_task = ray.remote(num_gpus=1, max_retries=TIMING_RETRIES)(time_candidate)
    artifacts: dict[int, dict[str, bytes]] = {}
    timing: dict[int, object] = {}
    shared: dict[str, object] = {}

    def build(work: list):
        refs = {compile_task.remote(item): position for position, item in enumerate(work)}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            position = refs.pop(ready[0])
            outcome, files = ray.get(ready[0])
            for name, data in files.items():
                (folder / name).write_bytes(data)
            if outcome.get("status") == "built":
                artifacts[work[position][2]] = {n: d for n, d in files.items()}
            yield position, outcome

    def start_timing(candidate) -> None:
        if "folder" not in shared:  # the plan and check data exist once the first candidate is built
            shared["folder"] = ray.put(_folder_files(folder))
        message = {"op": "run", "index": candidate.index, "artifact": candidate.artifact}
        timing[candidate.index] = time_task.remote(shared["folder"], artifacts[candidate.index], message, timer)

    plan = tune_plan.prepare(source, opts, shapes, folder, size_rules=size_rules, emit=emit, build=build,
                             on_built=start_timing)
    results: dict[int, dict] = {}
    for index, ref in timing.items():
        try:
            results[index] = ray.get(ref)
        except Exception as e:  # out of retries: the candidate is an error, the run goes on
            results[index] = {"check": "error", "error": f"{type(e).__name__}: {e}"[:500]}
    log(f"timed {len(results)} candidates on the cluster")
    labels = [",".join(f"{k}={v}" for k, v in s.items()) for s in plan.shapes]
    gpus = max(1, int(ray.cluster_resources().get("GPU", 1)))
    retimed: dict[str, dict] = {}
    devices: dict[str, dict] = {}
    by_index: dict[int, list[str]] = {}
    for label, index in winners(results, labels).items():
        by_index.setdefault(index, []).append(label)
    for index, shape_labels in sorted(by_index.items()):
        message = {"op": "retime", "index": index, "artifact": next(c.artifact for c in plan.candidates
                                                                     if c.index == index), "shapes": shape_labels}
        refs = [time_task.options(scheduling_strategy="SPREAD").remote(shared["folder"], artifacts[index], message,
                                                                       timer) for _ in range(gpus)]
        for reply in ray.get(refs):
            devices[reply["device"]] = reply.get("gpu_info", {})
            for label in shape_labels:
                if label in reply.get("times", {}):
                    row = retimed.setdefault(label, {"index": index, "ms": {}})
                    row["ms"][reply["device"]] = reply["times"][label]
    first = next(iter(devices.values()), {})
    return {"version": RESULTS_VERSION, **first, "date": time.strftime("%Y-%m-%d"), "devices": devices,
            "retimed": retimed, "cluster": address or "connected",
            "candidates": {str(i): r for i, r in sorted(results.items())}}
