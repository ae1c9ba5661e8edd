"""tilec tune across GPUs without GPUs: the worker pool with stand-in devices and a fake timer (each candidate timed
once, retries after a killed or hung worker, a device dropped, results merged into one database entry with the
winners re-timed on every device), worker processes speaking the real protocol, and a local Ray cluster with fake
GPU resources (`tilec tune --cluster`)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from tilec.runtime import tune_pool
from tilec.runtime.tune_pool import Pool, ProcessWorker, WorkerFailed, parse_gpus
from tilec.runtime.tune_worker import time_on_gpus

FAKE_WORKER = [sys.executable, str(Path(__file__).with_name("fake_tune_worker.py"))]


class FakeWorker:
    """In-process stand-in: answers with a fake time, or fails on the candidates it is told to."""

    def __init__(self, device: str, log: list, fail_on=(), fail_always=False, delay=0.002):
        self.device, self.log, self.delay = device, log, delay
        self.fail_on, self.fail_always = set(fail_on), fail_always

    def request(self, message: dict, timeout: float) -> dict:
        time.sleep(self.delay)
        index = message.get("index")
        self.log.append((self.device, message["op"], index))
        if self.fail_always or index in self.fail_on:
            raise WorkerFailed(f"GPU {self.device}: killed on candidate {index}")
        return {"check": "ok", "times": {label: 1.0 + index for label in message.get("shapes", ["M=1"])}}

    def close(self) -> None:
        self.log.append((self.device, "close", None))


def _pool(log, behaviour: dict[str, dict], **kw) -> Pool:
    return Pool({d: (lambda d=d: FakeWorker(d, log, **behaviour.get(d, {}))) for d in ("0", "1")}, **kw)


def _jobs(n):
    return [(i, {"op": "run", "index": i}) for i in range(n)]


def test_each_candidate_is_timed_once_and_both_devices_work():
    log: list = []
    results = _pool(log, {}).run(_jobs(20))
    assert sorted(results) == list(range(20))
    runs = [(d, i) for d, op, i in log if op == "run"]
    assert sorted(i for _, i in runs) == list(range(20))  # no candidate twice
    assert {d for d, _ in runs} == {"0", "1"}
    assert all(results[i]["device"] == d for d, i in runs)


def test_a_killed_workers_candidate_is_retried_on_another_device():
    log: list = []
    pool = _pool(log, {"0": {"fail_on": {3}}})  # GPU 0's worker dies whenever it gets candidate 3
    results = pool.run(_jobs(8))
    assert results[3]["check"] == "ok" and results[3]["device"] == "1"
    tried = [d for d, op, i in log if op == "run" and i == 3]
    assert tried in (["1"], ["0", "1"]) and results[3]["attempts"] == len(tried)
    assert pool.restarts["0"] == tried.count("0") and pool.dead == set()


def test_a_killed_workers_candidate_is_retried_on_its_device_when_it_is_the_only_one():
    log: list = []
    once = {"failed": False}

    class DiesOnce(FakeWorker):
        def request(self, message, timeout):
            if message["index"] == 3 and not once["failed"]:
                once["failed"] = True
                raise WorkerFailed("GPU 0: the worker exited with code -9")
            return super().request(message, timeout)

    pool = Pool({"0": lambda: DiesOnce("0", log)})
    results = pool.run(_jobs(5))
    assert results[3] == {"check": "ok", "times": {"M=1": 4.0}, "device": "0", "attempts": 2}
    assert pool.restarts["0"] == 1 and len(results) == 5


def test_a_device_that_keeps_failing_is_dropped_and_the_other_finishes():
    log: list = []
    pool = _pool(log, {"0": {"fail_always": True}}, max_restarts=1, max_attempts=5)
    results = pool.run(_jobs(6))
    assert pool.dead == {"0"}
    assert all(r["check"] == "ok" and r["device"] == "1" for r in results.values())
    assert len(results) == 6


def test_a_candidate_that_breaks_every_worker_is_recorded_as_an_error():
    log: list = []
    pool = _pool(log, {"0": {"fail_on": {2}}, "1": {"fail_on": {2}}}, max_attempts=3, max_restarts=5)
    results = pool.run(_jobs(5))
    assert results[2]["check"] == "error" and "killed on candidate 2" in results[2]["error"]
    assert results[2]["attempts"] == 3
    assert all(results[i]["check"] == "ok" for i in (0, 1, 3, 4))


def test_when_every_device_is_gone_the_rest_are_errors():
    log: list = []
    pool = _pool(log, {"0": {"fail_always": True}, "1": {"fail_always": True}}, max_restarts=0, max_attempts=9)
    results = pool.run(_jobs(4))
    assert pool.dead == {"0", "1"}
    assert sorted(results) == [0, 1, 2, 3] and all(r["check"] == "error" for r in results.values())


def test_candidates_are_timed_while_the_compiler_produces_them():
    log: list = []
    produced = threading.Event()
    seen_before_the_end = []

    class Watching(FakeWorker):
        def request(self, message, timeout):
            seen_before_the_end.append(not produced.is_set())
            return super().request(message, timeout)

    def slow_compiler():
        for i in range(4):
            time.sleep(0.1)
            yield i, {"op": "run", "index": i}
        produced.set()

    results = Pool({"0": lambda: Watching("0", log)}).run(slow_compiler())
    assert sorted(results) == [0, 1, 2, 3]
    assert seen_before_the_end[0]  # the first candidate was timed before the last was compiled


def test_winners_and_their_retiming_on_every_device():
    results = {0: {"check": "ok", "times": {"a": 2.0, "b": 1.0}}, 1: {"check": "ok", "times": {"a": 1.5, "b": 3.0}},
               2: {"check": "wrong", "times": {"a": 0.1, "b": 0.1}}}  # a wrong kernel never wins
    assert tune_pool.winners(results, ["a", "b"]) == {"a": 1, "b": 0}
    log: list = []
    retimed = tune_pool.retime_winners(_pool(log, {}), results, ["a", "b"], {0: "cand0", 1: "cand1"})
    assert retimed["a"]["index"] == 1 and set(retimed["a"]["ms"]) == {"0", "1"}
    assert sorted((d, i) for d, op, i in log if op == "retime") == [("0", 0), ("0", 1), ("1", 0), ("1", 1)]


@pytest.mark.parametrize("spec, ids", [("all", ["0", "1", "2"]), (None, ["0", "1", "2"]), ("0,2", ["0", "2"]),
                                       ("1", ["1"])])
def test_gpus_option(spec, ids):
    assert parse_gpus(spec, lambda: 3) == ids


@pytest.mark.parametrize("spec", ["", "x", "0,0", "1;2"])
def test_gpus_option_refuses_nonsense(spec):
    with pytest.raises(ValueError, match="--gpus"):
        parse_gpus(spec, lambda: 2)


# ---------------------------------------------------------------- worker processes (the real protocol)


def _folder(tmp_path, ncand=6) -> Path:
    plan = {"version": 1, "source": "k.tile", "source_hash": "0" * 64, "kernel": "k", "target": "sm90",
            "defines": {}, "space": ["block"], "default": {"block": 64}, "size_rules": {},
            "shapes": [{"M": 100}, {"M": 4096}, {"M": 7}], "check": {"args": []},
            "candidates": [{"index": i, "config": {"block": 32 << i}, "status": "built", "artifact": f"cand{i}.cubin"}
                           for i in range(ncand)]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return tmp_path


def test_a_hung_worker_is_killed_and_reported(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    monkeypatch.setenv("FAKE_HANG_ON", "1")
    w = ProcessWorker("0", str(folder), FAKE_WORKER + [str(folder)])
    assert w.request({"op": "run", "index": 0}, timeout=30)["check"] == "ok"
    proc = w.proc
    with pytest.raises(WorkerFailed, match="no answer in 0.5 s"):
        w.request({"op": "run", "index": 1}, timeout=0.5)
    assert proc.poll() is not None and w.proc is None  # killed
    assert w.request({"op": "run", "index": 2}, timeout=30)["check"] == "ok"  # a fresh process
    w.close()


def test_a_worker_that_exits_is_reported(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    monkeypatch.setenv("FAKE_DIE_ON", "4")
    w = ProcessWorker("1", str(folder), FAKE_WORKER + [str(folder)])
    with pytest.raises(WorkerFailed, match="exited with code 3"):
        w.request({"op": "run", "index": 4}, timeout=30)
    assert w.request({"op": "run", "index": 4}, timeout=30)["check"] == "ok"  # it dies only once
    w.close()


def _entry(folder: Path, results: dict) -> dict:
    from tilec.tuning.database import collect

    (folder / "results.json").write_text(json.dumps(results))
    return collect(folder)


def test_one_and_two_gpus_pick_the_same_winners_and_merge_into_one_entry(tmp_path, monkeypatch):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one, two = _folder(tmp_path / "one"), _folder(tmp_path / "two")
    single = time_on_gpus(one, ["0"], worker_command=FAKE_WORKER + [str(one)])
    monkeypatch.setenv("FAKE_DIE_ON", "2")  # one worker dies on candidate 2: retried, nothing lost
    double = time_on_gpus(two, ["0", "1"], worker_command=FAKE_WORKER + [str(two)])
    assert len(double["candidates"]) == 6 and all(r["check"] == "ok" for r in double["candidates"].values())
    assert double["candidates"]["2"]["attempts"] == 2
    assert {r["device"] for r in double["candidates"].values()} == {"0", "1"}
    assert set(double["devices"]) == {"0", "1"} and double["devices"]["1"]["uuid"] == "GPU-fake-1"
    e1, e2 = _entry(one, single), _entry(two, double)
    assert [s["winner"]["config"] for s in e1["shapes"]] == [s["winner"]["config"] for s in e2["shapes"]]
    for s in e2["shapes"]:
        assert set(s["winner"]["ms_per_device"]) == {"0", "1"}  # the winner, re-timed on both GPUs
        assert s["winner"]["device"] in ("0", "1")
    assert set(e2["devices"]) == {"0", "1"} and e2["gpu"] == "Fake GPU"


# ---------------------------------------------------------------- a Ray cluster with fake GPUs

SOURCE = """
const (block_M, block_N) = tune((4, 128), (2, 256), (8, 64))

kernel scale(X: f32[M, N], Y: out f32[M, N]):
    with Kernel(ceildiv(M, block_M), threads=64) as bx:
        for i, j in Parallel(block_M, block_N):
            if bx * block_M + i < M and j < N:
                Y[bx * block_M + i, j] = X[bx * block_M + i, j] * 2.0
"""


def ray_timer(folder: Path, message: dict) -> dict:
    """The fake GPU of the Ray test: a time from the configuration; candidate 1's first try kills its worker."""

    plan = json.loads((folder / "plan.json").read_text())
    index = message["index"]
    marker = Path(os.environ["TILEC_TEST_MARKERS"]) / f"died.{index}"
    if index == 1 and message["op"] == "run" and not marker.exists():
        marker.write_text("x")
        os._exit(1)  # the worker process dies: Ray runs the task again
    config = plan["candidates"][index]["config"]
    labels = message.get("shapes") or [",".join(f"{k}={v}" for k, v in s.items()) for s in plan["shapes"]]
    times = {label: config["block_M"] * 0.1 + (0.5 if "M=7" in label and config["block_M"] == 2 else 1.0)
             for label in labels}
    return {"check": "ok", "times": times} if message["op"] == "run" else {"times": times}


def test_tune_on_a_local_ray_cluster_with_fake_gpus(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    from tilec.options import CompileOptions
    from tilec.tuning import cluster

    src = tmp_path / "k.tile"
    src.write_text(SOURCE)
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("TILEC_TEST_MARKERS", str(markers))
    monkeypatch.setenv("TILEC_TUNE_DB", "")
    here = Path(__file__).parent
    path = os.pathsep.join([str(here), str(here.parent), os.environ.get("PYTHONPATH", "")])  # this test's timer
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"TILEC_TEST_MARKERS": str(markers), "TILEC_TUNE_DB": "", "PYTHONPATH": path}})
    try:
        results = cluster.tune(None, str(src), CompileOptions.make("sm90"), [{"M": 7, "N": 100}, {"M": 5000, "N": 64}],
                               tmp_path / "build", emit="cu", timer=ray_timer)
    finally:
        ray.shutdown()
    assert (markers / "died.1").exists()  # candidate 1's worker was killed once and Ray retried it
    cands = results["candidates"]
    assert set(cands) == {"0", "1", "2"} and all(r["check"] == "ok" for r in cands.values())
    entry = _entry(tmp_path / "build", results)
    winners = {tuple(s["sizes"].values()): s["winner"]["config"] for s in entry["shapes"]}
    assert winners == {(7, 100): {"block_M": 2, "block_N": 256}, (5000, 64): {"block_M": 2, "block_N": 256}}
    assert all(s["winner"]["ms_per_device"] for s in entry["shapes"])
    assert (tmp_path / "build" / "cand0.cu").is_file()  # the compile tasks' outputs, written by the driver


@pytest.mark.parametrize("name, torch_name", [("bf16", "bfloat16"), ("f8e4m3", "float8_e4m3fn"), ("f32", "float32")])
def test_the_worker_names_torch_dtypes(name, torch_name):
    torch = pytest.importorskip("torch")
    from tilec.runtime import tune_worker

    assert tune_worker._torch_dtype(torch, name) is getattr(torch, torch_name)
