"""`tilec tune`: search a kernel's tune() space for the fastest configuration per shape, into a tuning database.

    tilec tune gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm
        compile, check and time here (a GPU on this machine), then write gemm.tune.json beside the source
    tilec tune gemm.tile ... --build-dir D      compile only; then on the GPU machine (runtime only):
    python -m tilec.runtime.tune_worker D      check and time; then here:
    tilec tune --collect D                      write the database
    tilec tune --show gemm.tune.json            the configurations each entry's build carries, and its routes
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Literal

import typer

from . import params as p
from .progress import Progress as _Progress


def command(
    file: Annotated[str | None, typer.Argument(metavar="FILE", help="The .tile source (its consts declared with "
                                               "tune()).", show_default=False)] = None,
    target: Annotated[str, typer.Option("--target", "-t", metavar="T", help="The target to tune for.")] = "sm90",
    size: Annotated[list[str] | None, typer.Option("--size", metavar="M=..,N=..", help="A shape to time at "
                                                   "(repeatable).", show_default=False)] = None,
    shapes: Annotated[list[str] | None, typer.Option("--shapes", metavar="SET", help="A named shape set: llm-gemm, "
                                                     "square-gemm, rows, attention (repeatable).",
                                                     show_default=False)] = None,
    size_rule: Annotated[list[str] | None, typer.Option("--size-rule", metavar="NAME=OTHER", help="A runtime size "
                                                        "the shapes leave out, taken from another.",
                                                        show_default=False)] = None,
    defines: Annotated[list[str] | None, typer.Option("-D", "--define-macro", metavar="NAME=VALUE", help="Fix a "
                                                      "const (the database entry is for these values).",
                                                      show_default=False)] = None,
    include_dirs: p.Includes = None,
    kernel: Annotated[str | None, typer.Option("--kernel", metavar="NAME", help="The kernel to tune (default: the "
                                               "first).", show_default=False)] = None,
    compiler: Annotated[Literal["nvcc", "nvrtc", "auto"], typer.Option("--compiler", help="The toolchain that "
                                                                       "builds the candidates (nvrtc: fast).")]
    = "nvrtc",
    jobs: Annotated[int, typer.Option("--jobs", "-j", metavar="N", help="Compile processes (default: the CPUs).",
                                      show_default=False)] = 0,
    check_on_cpu: Annotated[bool, typer.Option("--check-on-cpu", help="Also run each candidate's lowered code in "
                                               "the SIMT interpreter at the check shape before building it (slow; "
                                               "rejects a wrong lowering with no GPU).")] = False,
    gpus: Annotated[str | None, typer.Option("--gpus", metavar="all|0,1,..", help="The GPUs of this host to time "
                                             "on, one worker process each (default: all).", show_default=False)] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", metavar="ADDRESS", help="Compile and time on a Ray "
                                                "cluster (`auto`, or the head's host:port; needs tilec[cluster]).",
                                                show_default=False)] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", metavar="SECONDS", help="A candidate taking longer "
                                                  "than this on a GPU worker counts as hung: the worker is "
                                                  "restarted and the candidate retried (default 600).",
                                                  show_default=False)] = None,
    build_dir: Annotated[str | None, typer.Option("--build-dir", metavar="DIR", help="Compile into DIR and stop "
                                                  "(time elsewhere, then --collect).", show_default=False)] = None,
    collect: Annotated[str | None, typer.Option("--collect", metavar="DIR", help="Write the database from a timed "
                                                "build folder.", show_default=False)] = None,
    show: Annotated[str | None, typer.Option("--show", metavar="DB", help="Print the configurations a build of "
                                             "each entry of DB carries and which one runs each tuned shape, from "
                                             "the stored times (nothing is timed or written).",
                                             show_default=False)] = None,
    max_configs: Annotated[int | None, typer.Option("--max-configs", metavar="N", help="The configurations a "
                                                    "build of the entry may carry (stored in the entry; default 4; "
                                                    "each one is compiled into the artifact). With --show: the "
                                                    "limit to preview.", show_default=False)] = None,
    extend: Annotated[bool, typer.Option("--extend", help="Add the tuned shapes to the database's entry for this "
                                         "source, kernel, target and -D values (tuned on the same GPU) instead of "
                                         "replacing it; a shape tuned again takes its new times.")] = False,
    db: Annotated[str | None, typer.Option("--db", metavar="FILE", help="The database to write (default: <source "
                                           "stem>.tune.json beside the source).", show_default=False)] = None,
    quiet: p.Quiet = False,
    color: p.Color = "auto",
    no_color: p.NoColor = False,
) -> None:
    """Search a kernel's tune() space for the fastest configuration per shape, into a tuning database.

    Compile, check and time here (a GPU on this machine), then write FILE's .tune.json; or --build-dir D to compile
    only, `python -m tilec.runtime.tune_worker D` on the GPU machine, and `tilec tune --collect D` here.
    See docs/tuning.md.
    """
    args = p.namespace(**locals())
    args.jobs = args.jobs or os.cpu_count() or 1
    p.finish(main(args))


def _fail(msg: str, status: int = 2) -> int:
    print(f"tilec tune: error: {msg}", file=sys.stderr)
    return status


def _summary(plan) -> str:
    counts: dict[str, int] = {}
    for c in plan.candidates:
        counts[c.status] = counts.get(c.status, 0) + 1
    lines = [f"{len(plan.candidates)} candidates: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))]
    # one line per distinct reason, not per candidate: a search space prunes hundreds for the same one
    by_reason: dict[tuple[str, str], list[int]] = {}
    for c in plan.candidates:
        if c.status != "built":
            by_reason.setdefault((c.status, c.reason), []).append(c.index)
    for (status, reason), indices in by_reason.items():
        named = ", ".join(f"cand{i}" for i in indices[:3]) + (f" and {len(indices) - 3} more" if len(indices) > 3
                                                                else "")
        lines.append(f"  {len(indices)} {status} ({named}): {reason}")
    return "\n".join(lines)


def _collect(folder: str, db_path: str | None, quiet: bool, max_configs: int | None = None,
             extend: bool = False) -> int:
    import json

    from ..tuning.database import collect, merge, same_entry

    entry = collect(folder)
    if max_configs is not None:
        entry["max_configs"] = max_configs
    src = json.loads((Path(folder) / "plan.json").read_text()).get("source_path")
    path = db_path or (str(Path(src).with_name(Path(src).stem + ".tune.json")) if src else None)
    if path is None:
        return _fail("--collect: say where the database goes with --db FILE")
    db = merge(path, entry, extend=extend)
    if not quiet:
        total = next(e for e in db["entries"] if same_entry(e, entry))["shapes"]
        kept = f", {len(total)} with the entry's others" if len(total) != len(entry["shapes"]) else ""
        print(f"tilec tune: wrote {path} ({entry['kernel']} on {entry['target']}, {entry['gpu']}, "
              f"{len(entry['shapes'])} shapes{kept})")
        for s in entry["shapes"]:
            w = s["winner"]
            cfg = " ".join(f"{k}={v}" for k, v in w["config"].items())
            print(f"  {','.join(f'{k}={v}' for k, v in s['sizes'].items())}: {w['ms']:.4f} ms  {cfg}")
    return 0


def _describe(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def _show(path: str, kernel: str | None, max_configs: int | None) -> int:
    """Print, per entry of the database at `path`, the configurations `select` keeps and each tuned shape's: the
    stored (tuner-measured) time of the one it runs against the shape's best. Computed, not timed."""
    from ..tuning.database import config_key, load, max_configs_of, select, stored_times

    db = load(path)
    entries = [e for e in db["entries"] if kernel is None or e["kernel"] == kernel]
    if not entries:
        return _fail(f"{path}: no entry" + (f" for kernel {kernel}" if kernel else ""))
    for e in entries:
        limit = max_configs if max_configs is not None else max_configs_of(e)
        configs, per_shape = select(e, max_configs=limit)
        defines = " ".join(f"-D {k}={v}" for k, v in e["defines"].items())
        print(f"{e['source']} {e['kernel']} {e['target']} {defines}".rstrip() + f" ({e.get('gpu')}, "
              f"{len(e['shapes'])} shapes): {len(configs)} configurations (at most {limit})")
        for i, c in enumerate(configs):
            print(f"  cfg{i}: {_describe(c)}")
        _, times = stored_times(e)
        for si, (s, ci) in enumerate(zip(e["shapes"], per_shape, strict=True)):
            ms = times[config_key(configs[ci])].get(si)
            best = s["winner"]["ms"]
            at = ",".join(f"{k}={v}" for k, v in s["sizes"].items())
            stored = f"{ms:.5f} ms stored, {ms / best:.2f}x its best {best:.5f}" if ms is not None else \
                f"not timed there (best {best:.5f} ms)"
            print(f"  {at}: cfg{ci}, {stored}")
    return 0


def main(args) -> int:
    from ..diagnostics import CompileError
    from ..errors import UserFacingError
    from ..tuning.database import DatabaseError
    from ..tuning.shapes import ShapeError

    try:
        if args.max_configs is not None and args.max_configs < 1:
            return _fail(f"--max-configs {args.max_configs}: expected a whole number >= 1")
        if args.show:
            return _show(args.show, args.kernel, args.max_configs)
        if args.collect:
            return _collect(args.collect, args.db, args.quiet, args.max_configs, args.extend)
        if not args.file:
            return _fail("give the .tile FILE to tune (or --collect DIR, or --show DB)")
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
        return _fail(f"no GPU here ({e}); tune in two steps: --build-dir DIR here, the worker on the GPU machine",
                     status=1)  # an error, not a bad command line: 1, as tilec run and tilec bench
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
    return _collect(folder, args.db, args.quiet, args.max_configs, args.extend)
