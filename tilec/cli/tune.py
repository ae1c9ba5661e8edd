"""`tilec tune`: search a kernel's tune() space for the fastest configuration per shape, into a tuning database.

    tilec tune gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm --size-rule B_rows=K --size-rule B_cols=N
        compile, check and time here (a GPU on this machine), then write gemm.tune.json beside the source
    tilec tune gemm.tile ... --build-dir D      compile only; then on the GPU machine (runtime only):
    python -m tilec.runtime.tune_worker D      check and time; then here:
    tilec tune --collect D                      write the database
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilec tune", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See docs/tuning.md.")
    p.add_argument("file", nargs="?", metavar="FILE", help="the .tile source (its consts declared with tune())")
    p.add_argument("--target", "-t", metavar="T", default="sm90", help="the target to tune for (default sm90)")
    p.add_argument("--size", action="append", default=[], metavar="M=..,N=..",
                   help="a shape to time at (repeatable)")
    p.add_argument("--shapes", action="append", default=[], metavar="SET",
                   help="a named shape set: llm-gemm, square-gemm, rows, attention (repeatable)")
    p.add_argument("--size-rule", action="append", default=[], metavar="NAME=OTHER",
                   help="a runtime size the shapes leave out, taken from another (gemm: B_rows=K, B_cols=N)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="fix a const (the database entry is for these values)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")
    p.add_argument("--kernel", metavar="NAME", help="the kernel to tune (default: the first)")
    p.add_argument("--compiler", choices=["nvcc", "nvrtc"], default="nvrtc",
                   help="the toolchain that builds the candidates (default nvrtc: fast)")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, help="compile processes")
    p.add_argument("--check-on-cpu", action="store_true",
                   help="also run each candidate's lowered code in the SIMT interpreter at the check shape before "
                        "building it (slow; rejects a wrong lowering with no GPU)")
    p.add_argument("--gpus", metavar="all|0,1,..", help="the GPUs of this host to time on, one worker process each "
                   "(default: all)")
    p.add_argument("--cluster", metavar="ADDRESS", help="compile and time on a Ray cluster (`auto`, or the head's "
                   "host:port; needs tilec[cluster])")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="a candidate taking longer than this on a GPU "
                   "worker counts as hung: the worker is restarted and the candidate retried (default 600)")
    p.add_argument("--build-dir", metavar="DIR", help="compile into DIR and stop (time elsewhere, then --collect)")
    p.add_argument("--collect", metavar="DIR", help="write the database from a timed build folder")
    p.add_argument("--db", metavar="FILE", help="the database to write (default: <source stem>.tune.json beside "
                   "the source)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--no-color", action="store_true")
    return p


class _Progress:
    """A rich progress bar on a terminal (rich imported only then), plain lines elsewhere, nothing when quiet."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.bar = None
        self.tasks: dict[str, object] = {}
        if not quiet and sys.stderr.isatty():
            try:
                from rich.progress import Progress
            except ImportError:
                return
            self.bar = Progress(transient=False)
            self.bar.start()

    def __call__(self, what: str, done: int, total: int) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            if what not in self.tasks:
                self.tasks[what] = self.bar.add_task(what, total=total)
            self.bar.update(self.tasks[what], completed=done)
        elif done == total:
            print(f"tilec tune: {what}: {done}/{total}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _fail(msg: str) -> int:
    print(f"tilec tune: error: {msg}", file=sys.stderr)
    return 2


def _summary(plan) -> str:
    counts: dict[str, int] = {}
    for c in plan.candidates:
        counts[c.status] = counts.get(c.status, 0) + 1
    lines = [f"{len(plan.candidates)} candidates: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))]
    for c in plan.candidates:
        if c.status != "built":
            lines.append(f"  cand{c.index} {c.status}: {c.reason}")
    return "\n".join(lines)


def _collect(folder: str, db_path: str | None, quiet: bool) -> int:
    import json

    from ..tuning.database import collect, merge

    entry = collect(folder)
    src = json.loads((Path(folder) / "plan.json").read_text()).get("source_path")
    path = db_path or (str(Path(src).with_name(Path(src).stem + ".tune.json")) if src else None)
    if path is None:
        return _fail("--collect: say where the database goes with --db FILE")
    merge(path, entry)
    if not quiet:
        print(f"tilec tune: wrote {path} ({entry['kernel']} on {entry['target']}, {entry['gpu']}, "
              f"{len(entry['shapes'])} shapes)")
        for s in entry["shapes"]:
            w = s["winner"]
            cfg = " ".join(f"{k}={v}" for k, v in w["config"].items())
            print(f"  {','.join(f'{k}={v}' for k, v in s['sizes'].items())}: {w['ms']:.4f} ms  {cfg}")
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from ..diagnostics import CompileError
    from ..errors import UserFacingError
    from ..tuning.database import DatabaseError
    from ..tuning.shapes import ShapeError

    try:
        if args.collect:
            return _collect(args.collect, args.db, args.quiet)
        if not args.file:
            return _fail("give the .tile FILE to tune (or --collect DIR)")
        return _tune(args)
    except CompileError as e:
        from .common import print_diagnostics

        print_diagnostics(e.diagnostics, getattr(e, "sources", None), args)
        return 1
    except (ShapeError, DatabaseError, ValueError, OSError, UserFacingError) as e:
        return _fail(str(e))


def _tune(args) -> int:
    from ..tuning import plan as tune_plan
    from ..tuning.shapes import resolve
    from .common import compile_options

    shapes = resolve(args.size, args.shapes)
    if not shapes:
        return _fail("give the shapes to tune at: --size M=..,N=.. or --shapes SET")
    rules = {}
    for item in args.size_rule:
        name, eq, other = item.partition("=")
        if not eq:
            return _fail(f"--size-rule {item}: expected NAME=OTHER")
        rules[name] = int(other) if other.isdigit() else other
    args.no_cache = False
    opts = compile_options(args, targets=(args.target,), tune_db="")
    folder = args.build_dir or tempfile.mkdtemp(prefix="tilec-tune-")
    if args.cluster:
        from ..tuning import cluster

        results = cluster.tune(args.cluster, args.file, opts, shapes, folder, size_rules=rules,
                               log=None if args.quiet else _log)
        return _write_results(folder, results, args)
    if args.build_dir:
        progress = _Progress(args.quiet)
        try:
            plan = tune_plan.prepare(args.file, opts, shapes, folder, size_rules=rules, jobs=args.jobs,
                                     progress=progress, check_on_cpu=args.check_on_cpu)
        finally:
            progress.close()
        if not args.quiet:
            print(_summary(plan), file=sys.stderr)
            print(f"tilec tune: built {folder}; on the GPU machine run `python -m tilec.runtime.tune_worker "
                  f"{folder}`, then `tilec tune --collect {folder}`", file=sys.stderr)
        return 0
    from ..runtime import tune_pool, tune_worker

    try:
        devices = tune_pool.parse_gpus(args.gpus, tune_worker.device_count)
    except ValueError as e:
        return _fail(str(e))
    except Exception as e:
        return _fail(f"no GPU here ({e}); tune in two steps: --build-dir DIR here, the worker on the GPU machine")
    results = _compile_while_timing(args, opts, shapes, rules, folder, devices)
    return _write_results(folder, results, args)


def _log(message: str) -> None:
    print(f"tilec tune: {message}", file=sys.stderr, flush=True)


def _compile_while_timing(args, opts, shapes, rules, folder: str, devices: list[str]) -> dict:
    """Candidates go to the GPU workers as they compile (compiling on the CPUs, timing on the GPUs at once)."""
    import queue
    import threading

    from ..runtime import tune_worker
    from ..tuning import plan as tune_plan

    built: queue.Queue = queue.Queue()
    outcome: dict = {}
    progress = _Progress(args.quiet)

    def compile_all() -> None:
        try:
            outcome["plan"] = tune_plan.prepare(args.file, opts, shapes, folder, size_rules=rules, jobs=args.jobs,
                                                progress=progress, check_on_cpu=args.check_on_cpu,
                                                on_built=lambda c: built.put((c.index, c.artifact)))
        except BaseException as e:
            outcome["error"] = e
        finally:
            built.put(None)

    compiler = threading.Thread(target=compile_all, daemon=True)
    compiler.start()
    try:
        results = tune_worker.time_on_gpus(Path(folder), devices, iter(built.get, None), timeout=args.timeout,
                                           log=None if args.quiet else _log)
    finally:
        compiler.join()
        progress.close()
    if "error" in outcome:
        raise outcome["error"]
    if not args.quiet:
        print(_summary(outcome["plan"]), file=sys.stderr)
    return results


def _write_results(folder: str, results: dict, args) -> int:
    import json

    (Path(folder) / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return _collect(folder, args.db, args.quiet)
