"""Timing tilec tune's candidates on every GPU of a host: one worker process per device, a shared queue.

Each device gets a worker process pinned to it with CUDA_VISIBLE_DEVICES (`python -m tilec.runtime.tune_worker
--serve FOLDER`), spoken to in JSON lines: `{"op": "run", "index": N, "artifact": "candN.cubin"}` checks the
candidate against the interpreter's outputs and times it at every shape of the plan; `{"op": "retime", ...}` times
it again at some shapes; `{"op": "info"}` names the device. Candidates reach the queue as they are compiled
(`Pool.run` takes any iterable, consumed while the GPUs work), and each is timed on one device.

A worker that dies or does not answer within the timeout is killed and restarted (a few times, then its device is
dropped); the candidate it held goes back to the queue for another device (or the same one, when no other is
left), up to `max_attempts` tries, after which it is recorded as an error — a broken candidate cannot stall the
run. Once every candidate is timed, `retime` runs the winners on every device, so that what ships is measured on
each GPU it will run on and the devices' own noise does not decide between candidates.

Workers are anything with `request(message, timeout) -> reply`, `close()` (and raise `WorkerFailed`): tests drive
the pool with in-process stand-ins and a fake timer. Standard library only; the worker processes import the
runtime.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

DEFAULT_TIMEOUT = 600.0  # seconds one candidate may take on a worker (check + every shape) before it counts as hung
MAX_ATTEMPTS = 3  # tries of one candidate before it is recorded as an error
MAX_RESTARTS = 2  # restarts of one device's worker before that device is dropped


class WorkerFailed(Exception):
    """A worker died, hung or answered nonsense: the request it held is retried elsewhere."""


class ProcessWorker:
    """A tune_worker process serving one GPU over stdin/stdout (its progress goes to stderr)."""

    def __init__(self, device: str, folder: str, command: list[str] | None = None, env: dict | None = None):
        self.device = device
        self.command = command or [sys.executable, "-m", "tilec.runtime.tune_worker", "--serve", str(folder)]
        self.env = {**os.environ, **(env or {}), "CUDA_VISIBLE_DEVICES": device}
        self.proc: subprocess.Popen | None = None
        self.replies: queue.Queue = queue.Queue()

    def _start(self) -> None:
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env,
                                     text=True, bufsize=1)
        replies = self.replies = queue.Queue()  # a new queue: a dead process's late lines cannot be mistaken
        proc = self.proc

        def read() -> None:
            for line in proc.stdout:
                replies.put(line)
            replies.put(None)  # end of output: the process is gone

        threading.Thread(target=read, daemon=True).start()

    def request(self, message: dict, timeout: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except OSError as e:
            self.kill()
            raise WorkerFailed(f"GPU {self.device}: the worker is gone ({e})") from None
        try:
            line = self.replies.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise WorkerFailed(f"GPU {self.device}: no answer in {timeout:g} s (killed)") from None
        if line is None:
            code = self.proc.wait()
            self.proc = None
            raise WorkerFailed(f"GPU {self.device}: the worker exited with code {code}")
        try:
            return json.loads(line)
        except ValueError:
            self.kill()
            raise WorkerFailed(f"GPU {self.device}: unreadable answer {line[:200]!r}") from None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()  # end of requests: the worker exits by itself
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


@dataclass
class _Job:
    index: int
    message: dict
    attempts: int = 0
    failed_on: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)


class Pool:
    """Candidates timed across devices. `factories` maps a device id to what makes its worker."""

    def __init__(self, factories: dict[str, Callable[[], object]], *, timeout: float = DEFAULT_TIMEOUT,
                 max_attempts: int = MAX_ATTEMPTS, max_restarts: int = MAX_RESTARTS,
                 log: Callable[[str], None] | None = None):
        if not factories:
            raise ValueError("no GPU to time on")
        self.factories = factories
        self.timeout, self.max_attempts, self.max_restarts = timeout, max_attempts, max_restarts
        self.log = log or (lambda msg: None)
        self.workers = {d: make() for d, make in factories.items()}
        self.restarts = dict.fromkeys(factories, 0)
        self.dead: set[str] = set()
        self.cond = threading.Condition()

    # ------------------------------------------------------------ one request, with restarts

    def _ask(self, device: str, message: dict) -> dict:
        """The worker's reply; WorkerFailed after restarting it (or dropping its device when out of restarts)."""
        try:
            return self.workers[device].request(message, self.timeout)
        except WorkerFailed as e:
            with self.cond:
                self.restarts[device] += 1
                if self.restarts[device] > self.max_restarts:
                    self.dead.add(device)
                    self.log(f"GPU {device}: dropped after {self.max_restarts} restarts ({e})")
                else:
                    self.log(f"{e}; restarting its worker")
                    self.workers[device] = self.factories[device]()
                self.cond.notify_all()
            raise

    # ------------------------------------------------------------ every candidate, once

    def run(self, jobs: Iterable[tuple[int, dict]]) -> dict[int, dict]:
        """Each (index, message) answered by one device: index -> reply, plus "device". `jobs` may block (a
        compiler producing candidates): it is read on a thread of its own while the devices work."""
        pending: deque[_Job] = deque()
        results: dict[int, dict] = {}
        state = {"feeding": True, "in_flight": 0, "error": None}

        def feed() -> None:
            try:
                for index, message in jobs:
                    with self.cond:
                        pending.append(_Job(index, message))
                        self.cond.notify_all()
            except BaseException as e:  # the producer's failure ends the run, reported by run()
                state["error"] = e
            finally:
                with self.cond:
                    state["feeding"] = False
                    self.cond.notify_all()

        def take(device: str) -> _Job | None:
            """The next job this device should run; None when the run is over for it."""
            with self.cond:
                while True:
                    if device in self.dead:
                        return None
                    live = [d for d in self.factories if d not in self.dead]
                    for job in pending:
                        # a job that failed here goes elsewhere while some live device has not failed it
                        if device not in job.failed_on or all(d in job.failed_on for d in live):
                            pending.remove(job)
                            state["in_flight"] += 1
                            return job
                    if not state["feeding"] and not pending and state["in_flight"] == 0:
                        return None
                    self.cond.wait(0.5)

        def serve(device: str) -> None:
            while (job := take(device)) is not None:
                try:
                    reply = self._ask(device, job.message)
                except WorkerFailed as e:
                    with self.cond:
                        job.attempts += 1
                        job.failed_on.add(device)
                        job.errors.append(str(e))
                        if job.attempts >= self.max_attempts:
                            results[job.index] = {"check": "error", "error": "; ".join(job.errors)[:500],
                                                  "attempts": job.attempts}
                        else:
                            pending.appendleft(job)
                        state["in_flight"] -= 1
                        self.cond.notify_all()
                    continue
                with self.cond:
                    results[job.index] = {**reply, "device": device, "attempts": job.attempts + 1}
                    state["in_flight"] -= 1
                    self.cond.notify_all()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        threads = [threading.Thread(target=serve, args=(d,), daemon=True) for d in self.factories]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self.cond:  # every device dropped: what is left cannot be timed
            for job in pending:
                results[job.index] = {"check": "error", "error": "no GPU worker left: " + "; ".join(job.errors),
                                      "attempts": job.attempts}
        feeder.join(timeout=0 if self.dead == set(self.factories) else None)
        if state["error"] is not None:
            raise state["error"]
        return results

    # ------------------------------------------------------------ the winners, on every device

    def on_every_device(self, message: dict) -> dict[str, dict]:
        """The same request on every live device, in parallel: device -> reply (failures left out)."""
        replies: dict[str, dict] = {}

        def ask(device: str) -> None:
            try:
                replies[device] = self._ask(device, message)
            except WorkerFailed:
                pass

        threads = [threading.Thread(target=ask, args=(d,)) for d in self.factories if d not in self.dead]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return replies

    def close(self) -> None:
        for w in self.workers.values():
            w.close()


def winners(results: dict[int, dict], labels: list[str]) -> dict[str, int]:
    """Per shape label, the candidate index with the shortest time among those whose check passed."""
    best: dict[str, tuple[float, int]] = {}
    for index, r in results.items():
        if r.get("check") != "ok":
            continue
        for label, ms in r.get("times", {}).items():
            if label in labels and (label not in best or (ms, index) < best[label]):
                best[label] = (ms, index)
    return {label: index for label, (ms, index) in best.items()}


def retime_winners(pool: Pool, results: dict[int, dict], labels: list[str], artifact_of: dict[int, str]) -> dict:
    """Time each shape's winner again on every device: {label: {"index": i, "ms": {device: ms}}}."""
    out: dict[str, dict] = {}
    by_index: dict[int, list[str]] = {}
    for label, index in winners(results, labels).items():
        by_index.setdefault(index, []).append(label)
    for index, shape_labels in sorted(by_index.items()):
        replies = pool.on_every_device({"op": "retime", "index": index, "artifact": artifact_of[index],
                                        "shapes": shape_labels})
        for label in shape_labels:
            out[label] = {"index": index, "ms": {d: r["times"][label] for d, r in sorted(replies.items())
                                                 if label in r.get("times", {})}}
    return out


def parse_gpus(spec: str | None, count: Callable[[], int]) -> list[str]:
    """Device ids from `--gpus`: "all" (every visible GPU; `count` asks the driver), or "0,1,3"."""
    if spec is None or spec == "all":
        return [str(i) for i in range(count())]
    ids = [s.strip() for s in spec.split(",") if s.strip()]
    if not ids or not all(s.isdigit() for s in ids):
        raise ValueError(f"--gpus {spec}: expected 'all' or device numbers such as 0,1")
    if len(set(ids)) != len(ids):
        raise ValueError(f"--gpus {spec}: a device is listed twice")
    return ids
