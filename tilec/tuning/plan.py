"""`tilec tune`'s first half, on the build machine: enumerate a source's search space, prune it with the compiler's
resource query, compile the survivors in parallel processes and write a build folder that a runtime-only worker
(tilec.runtime.tune_worker) checks and times on the GPU.

The folder holds `plan.json` (what was tuned: source hash, kernel, target, fixed -D values, the shapes, every
candidate with its configuration and fate), one binary and manifest per built candidate (`cand<N>.cubin[.json]`)
and the correctness check: inputs at a small ragged shape and the Tile IR interpreter's outputs for them
(`check/<param>.bin`, raw bytes), so that a fast wrong kernel is rejected before it is timed.

Pruning: each candidate is lowered through the target's pipeline first; storage planning refuses what exceeds
the target's shared memory and the builder refuses what breaks a `where=` constraint, so only candidates that
fit reach the toolchain (a refused candidate costs a lowering, not a binary).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from ..options import CompileOptions
from ..parser import tune as tune_space

PLAN_VERSION = 1
PLAN_FILE = "plan.json"
CHECK_DIR = "check"


def jsonable(value):
    """A const's value as JSON (a dtype by its name); `define_value` reads it back."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(getattr(value, "name", value))


@dataclass
class Candidate:
    index: int
    config: dict[str, object]  # tuned name -> value (JSON)
    status: str = "pending"  # built | pruned | failed
    reason: str = ""
    artifact: str | None = None
    shared_bytes: int | None = None
    threads: int | None = None
    when: object = True  # the configuration's when= condition over the sizes (CompileResult.launch_when)


@dataclass
class Plan:
    source: str
    source_hash: str
    kernel: str
    target: str
    defines: dict[str, object]  # the fixed -D values (JSON)
    space: list[str]  # every tuned name, in declaration order
    default: dict[str, object]  # the target's default configuration
    shapes: list[dict[str, int]]
    size_rules: dict[str, object] = field(default_factory=dict)  # sizes a shape leaves out: NAME -> size name | int
    source_path: str = ""  # where the source was (the database goes beside it)
    source_consts: dict[str, object] = field(default_factory=dict)  # the untuned consts with no -D (JSON)
    check: dict = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["version"] = PLAN_VERSION
        d["candidates"] = [c.__dict__ for c in self.candidates]
        return d

    @classmethod
    def load(cls, folder: str | os.PathLike) -> Plan:
        d = json.loads((Path(folder) / PLAN_FILE).read_text())
        if d.pop("version", None) != PLAN_VERSION:
            raise ValueError(f"{folder}: not a tilec tune build folder of version {PLAN_VERSION}")
        d["candidates"] = [Candidate(**c) for c in d["candidates"]]
        return cls(**d)


def file_hash(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def discover(source: str, opts: CompileOptions):
    """The `tune()` axes of `source` (from a target-neutral front-end build), the target's default configuration
    and the checked Tile IR module."""
    from ..driver import compile as compile_ir
    from ..driver import tune_keys

    ctx = tune_space.TuneContext()
    with tune_space.building((), ctx):
        result = compile_ir(source, opts.replace(targets=()))
    keys = tune_keys(opts.target)
    default = {}
    for axis in ctx.axes:
        pick = next((axis.per_target[k] for k in keys if k in axis.per_target), axis.candidates[0])
        default.update(zip(axis.names, pick, strict=True))
    return ctx.axes, default, result


def source_consts(source: str, opts: CompileOptions, tuned: set[str]) -> dict[str, object]:
    """The values the source gives its untuned consts (no -D): a database entry records them, so that a build
    whose -D repeats a default (`-D causal=False`) finds the entry tuned without it."""
    from ..driver import compile as compile_ir

    module = compile_ir(source, opts.replace(targets=(), defines=())).module
    return {k: jsonable(v) for k, v in module.consts.items() if k not in tuned}


def configurations(axes) -> list[dict[str, object]]:
    """Every combination of the axes' candidates, as name -> value."""
    out = []
    for combo in itertools.product(*(axis.candidates for axis in axes)):
        config: dict[str, object] = {}
        for axis, values in zip(axes, combo, strict=True):
            config.update(zip(axis.names, values, strict=True))
        out.append(config)
    return out


# The largest output error the check accepts, relative to the output's magnitude (tilec.runtime.tune_worker's too)
TOLERANCE = {"f16": 1e-2, "bf16": 4e-2, "f32": 1e-4, "f64": 1e-8, "f8e4m3": 0.15, "f8e5m2": 0.3}


def cpu_check(result, folder: Path, check: dict) -> str | None:
    """Run a candidate's lowered kernel (SIMT IR; a multi-launch candidate's stages in order) lane by lane in the
    SIMT interpreter on the check inputs and compare with the Tile IR interpreter's outputs: None when they agree,
    else why not. For a machine without the GPU: CUDA lowerings (sm80-class and sm90's TMA/wgmma model) and HIP's
    run there."""
    import numpy as np

    from ..interp.tile_interp import storage_dtype
    from ..ir.dtypes import lookup
    from ..simt.interp import SimtInterpreterError, run_simt_sequence

    args, expected = {}, {}
    for a in check["args"]:
        if a["kind"] == "scalar":
            args[a["name"]] = a["value"]
            continue
        dtype = storage_dtype(lookup(a["dtype"]))
        arr = np.frombuffer((folder / a["file"]).read_bytes(), dtype=dtype).reshape(a["shape"]).copy()
        if a.get("output"):
            expected[a["name"]] = (a["dtype"], np.frombuffer((folder / a["expected"]).read_bytes(), dtype=dtype)
                                   .reshape(a["shape"]).astype(np.float64))
            # the output starts as it did for the interpreter (an accumulating kernel reads it); the random inputs
            # make an unwritten element differ from the expected value
        args[a["name"]] = arr
    try:
        run_simt_sequence(result, args, check["sizes"])
    except SimtInterpreterError as e:
        return f"the SIMT interpreter: {str(e).splitlines()[0]}"
    for name, (dt, want) in expected.items():
        got = args[name].astype(np.float64)
        scale = max(float(np.max(np.abs(want))), 1e-6) if want.size else 1.0
        err = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
        if not np.all(np.isfinite(got)) or err > TOLERANCE.get(dt, 1e-2):
            return f"'{name}' differs from the interpreter's at {check['sizes']} (relative error {err:.3g})"
    return None


def _build_one(args) -> dict:
    """In a worker process: lower (the resource query), optionally check the lowering on the CPU, and, if it fits
    and is right, build one candidate's binary."""
    source, opts, index, config, folder, emit, check = args
    from ..artifacts import kernel_entries
    from ..diagnostics import CompileError
    from ..driver import compile as compile_ir
    from ..outputs import compile_artifact

    name = f"cand{index}.{emit}"
    resources: dict = {}
    opts = opts.replace(defines=tuple(sorted({**dict(opts.defines), **config}.items())))

    def compiled(result):
        entries = kernel_entries(result)
        resources["shared_bytes"] = max(e["shared_bytes"] for e in entries)
        resources["threads"] = max(e["threads"] for e in entries)
        resources["lowered"] = True
        if result.launch_when is not True:
            resources["when"] = result.launch_when

    if check is not None:
        try:
            lowered = compile_ir(source, opts)
        except CompileError as e:
            first = next((d.message for d in e.diagnostics if d.severity == "error"), str(e))
            return {"status": "pruned", "reason": first.splitlines()[0]}
        why = cpu_check(lowered, Path(folder), check)
        if why is not None:
            return {"status": "wrong", "reason": why}
        compiled(lowered)

    try:
        art = compile_artifact(source, options=opts, emit=emit, output_name=name,
                               on_compiled=None if resources.get("lowered") else compiled)
        if not resources.get("lowered"):
            # served by the compile cache, which calls no on_compiled: without this the candidate's when= condition
            # was lost, and the database let a configuration serve tuned shapes where it may not run (s32's softmax)
            compiled(compile_ir(source, opts))
    except CompileError as e:
        first = next((d.message for d in e.diagnostics if d.severity == "error"), str(e))
        status = "failed" if resources.get("lowered") else "pruned"
        return {"status": status, "reason": first.splitlines()[0], **resources}
    (Path(folder) / name).write_bytes(art.data)
    (Path(folder) / f"{name}.json").write_bytes(art.manifest)
    return {"status": "built", "artifact": name, **{k: v for k, v in resources.items() if k != "lowered"}}


def local_build(jobs: int | None) -> Callable[[list], Iterator[tuple[int, dict]]]:
    """Compile work items in `jobs` local processes, yielding (position, outcome) in the order they finish."""

    def build(work: list) -> Iterator[tuple[int, dict]]:
        n = jobs or os.cpu_count() or 1
        if n == 1 or len(work) == 1:
            for position, item in enumerate(work):
                yield position, _build_one(item)
            return
        with ProcessPoolExecutor(n) as pool:
            futures = {pool.submit(_build_one, item): position for position, item in enumerate(work)}
            for future in as_completed(futures):
                yield futures[future], future.result()

    return build


def check_sizes(kernel, shapes: list[dict[str, int]], rules: dict[str, object]) -> dict[str, int]:
    """A small ragged shape for the correctness check: each runtime size below its smallest tuned value, odd where
    it is large (so that no dimension is a multiple of a tile), and tiny for batch-like sizes."""
    ragged = [97, 75, 70, 45, 33]
    out: dict[str, int] = {}
    for i, v in enumerate(kernel.size_vars):
        if v.name in rules:
            continue
        tuned = min((s[v.name] for s in shapes if v.name in s), default=ragged[i % len(ragged)])
        out[v.name] = min(tuned, 2) if tuned < 16 else min(tuned, ragged[i % len(ragged)])
    for name, rule in rules.items():
        out[name] = out[rule] if isinstance(rule, str) else int(rule)
    return out


def write_check(folder: Path, module, kernel, sizes: dict[str, int], seed: int = 1) -> dict:
    """Run the Tile IR interpreter on random inputs at `sizes` (a multi-launch kernel: all its launches, on fresh
    scratch); write inputs and expected outputs as raw bytes."""
    import numpy as np

    from ..interp.run import random_inputs, run_any
    from ..ir import tile as T

    args = random_inputs(kernel, sizes, seed=seed)
    inputs = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    run_any(module, kernel, args)
    (folder / CHECK_DIR).mkdir(exist_ok=True)
    described = []
    for p in kernel.params:
        if isinstance(p, T.Var):
            described.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name, "value": args[p.name]})
            continue
        arr = inputs[p.name]
        entry = {"name": p.name, "kind": "tensor", "dtype": p.dtype.name, "shape": list(arr.shape),
                 "output": bool(p.is_output), "file": f"{CHECK_DIR}/{p.name}.bin"}
        (folder / entry["file"]).write_bytes(np.ascontiguousarray(arr).tobytes())
        if p.is_output:
            entry["expected"] = f"{CHECK_DIR}/{p.name}.expected.bin"
            (folder / entry["expected"]).write_bytes(np.ascontiguousarray(args[p.name]).tobytes())
        described.append(entry)
    return {"sizes": sizes, "args": described}


def prepare(source: str, opts: CompileOptions, shapes: list[dict[str, int]], folder: str | os.PathLike, *,
            size_rules: dict[str, object] | None = None, emit: str = "cubin", jobs: int | None = None,
            check_on_cpu: bool = False,
            progress: Callable[[str, int, int], None] | None = None,
            on_built: Callable[[Candidate], None] | None = None,
            build: Callable[[list], Iterable[tuple[int, dict]]] | None = None) -> Plan:
    """Write the build folder for tuning `source` (the options' target, -D values and kernel) at `shapes`.

    plan.json is written before the first candidate compiles (its candidates pending) and again at the end, so
    that GPU workers can start on each candidate as `on_built` hands it over. `build` compiles the work items
    and yields (position, outcome) as each finishes — local processes by default (a Ray cluster:
    tilec/tuning/cluster.py)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    axes, default, checked = discover(source, opts)
    if not axes:
        raise ValueError(f"{source} declares no search space: write a const as tune(...) (docs/tuning.md)")
    from ..interp.run import public_kernels

    kernel = public_kernels(checked.module)[0]  # a Kernel, or the Launches of a multi-launch function
    if checked.module.launches:
        from ..driver import compile as compile_ir

        # a back end that cannot run launch sequences (AscendC) refuses the default here, at the function's line
        compile_ir(source, opts.replace(targets=opts.targets[:1],
                                        defines=tuple(sorted({**dict(opts.defines), **default}.items()))))
    tuned = [n for axis in axes for n in axis.names]
    fixed = {k: jsonable(v) for k, v in opts.defines if k not in tuned}
    default = {k: jsonable(v) for k, v in default.items()}
    rules = dict(size_rules or {})
    known = {v.name for v in kernel.size_vars}
    for name, rule in rules.items():
        if name not in known or (isinstance(rule, str) and rule not in known):
            raise ValueError(f"--size-rule {name}={rule}: kernel '{kernel.name}' has the sizes {', '.join(known)}")
    for s in shapes:
        missing = known - set(s) - set(rules)
        if missing:
            raise ValueError(f"shape {s} leaves out {', '.join(sorted(missing))} (give them, or --size-rule "
                             "NAME=OTHER)")
    plan = Plan(os.path.basename(source), file_hash(source), kernel.name, opts.target, fixed, tuned, default,
                shapes, rules, os.path.abspath(source))
    configs = configurations(axes)
    plan.source_consts = source_consts(source, opts, set(tuned))
    plan.candidates = [Candidate(i, {k: jsonable(v) for k, v in c.items()}) for i, c in enumerate(configs)]
    base = opts.replace(defines=tuple(sorted((k, v) for k, v in opts.defines if k not in tuned)),
                        kernel=opts.kernel or kernel.name)
    if progress:
        progress("check", 0, 1)
    plan.check = write_check(folder, checked.module, kernel, check_sizes(kernel, shapes, rules))
    if progress:
        progress("check", 1, 1)
    cpu = plan.check if check_on_cpu else None
    work = [(source, base, c.index, c.config, str(folder), emit, cpu) for c in plan.candidates]
    (folder / PLAN_FILE).write_text(json.dumps(plan.to_json(), indent=1) + "\n")
    if progress:
        progress("compile", 0, len(work))
    for done, (position, outcome) in enumerate((build or local_build(jobs))(work), 1):
        c = plan.candidates[position]
        c.__dict__.update(outcome)
        if progress:
            progress("compile", done, len(work))
        if on_built is not None and c.status == "built":
            on_built(c)
    (folder / PLAN_FILE).write_text(json.dumps(plan.to_json(), indent=1) + "\n")
    return plan
