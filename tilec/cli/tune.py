"""`tilec tune`: search a kernel's tune() space for the fastest configuration per shape, into a tuning database.

    tilec tune gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm --size-rule B_rows=K --size-rule B_cols=N
        compile, check and time here (a GPU on this machine), then write gemm.tune.json beside the source
    tilec tune gemm.tile ... --build-dir D      compile only; then on the GPU machine (runtime only):
    python -m tilec.runtime.tune_worker D      check and time; then here:
    tilec tune --collect D                      write the database
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
                                                        "the shapes leave out, taken from another (gemm: B_rows=K, "
                                                        "B_cols=N).", show_default=False)] = None,
    defines: Annotated[list[str] | None, typer.Option("-D", "--define-macro", metavar="NAME=VALUE", help="Fix a "
                                                      "const (the database entry is for these values).",
                                                      show_default=False)] = None,
    include_dirs: p.Includes = None,
    kernel: Annotated[str | None, typer.Option("--kernel", metavar="NAME", help="The kernel to tune (default: the "
                                               "first).", show_default=False)] = None,
    compiler: Annotated[Literal["nvcc", "nvrtc"], typer.Option("--compiler", help="The toolchain that builds the "
                                                               "candidates (nvrtc: fast).")] = "nvrtc",
    jobs: Annotated[int, typer.Option("--jobs", "-j", metavar="N", help="Compile processes (default: the CPUs).",
                                      show_default=False)] = 0,
    check_on_cpu: Annotated[bool, typer.Option("--check-on-cpu", help="Also run each candidate's lowered code in "
                                               "the SIMT interpreter at the check shape before building it (slow; "
                                               "rejects a wrong lowering with no GPU).")] = False,
    build_dir: Annotated[str | None, typer.Option("--build-dir", metavar="DIR", help="Compile into DIR and stop "
                                                  "(time elsewhere, then --collect).", show_default=False)] = None,
    collect: Annotated[str | None, typer.Option("--collect", metavar="DIR", help="Write the database from a timed "
                                                "build folder.", show_default=False)] = None,
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


def main(args) -> int:
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
    progress = _Progress(args.quiet)
    try:
        plan = tune_plan.prepare(args.file, opts, shapes, folder, size_rules=rules, jobs=args.jobs,
                                 progress=progress, check_on_cpu=args.check_on_cpu)
    finally:
        progress.close()
    if not args.quiet:
        print(_summary(plan), file=sys.stderr)
    if args.build_dir:
        if not args.quiet:
            print(f"tilec tune: built {folder}; on the GPU machine run `python -m tilec.runtime.tune_worker "
                  f"{folder}`, then `tilec tune --collect {folder}`", file=sys.stderr)
        return 0
    try:
        from ..runtime.cuda_driver import Driver

        Driver.get()
    except Exception as e:
        return _fail(f"no GPU here ({e}); tune in two steps: --build-dir DIR here, the worker on the GPU machine")
    from ..runtime import tune_worker

    rc = tune_worker.main([folder] + (["--quiet"] if args.quiet else []))
    if rc:
        return rc
    return _collect(folder, args.db, args.quiet)
