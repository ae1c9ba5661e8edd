"""The tuning database: a versioned JSON file of what `tilec tune` measured, and how a build reads it.

    {"tilec_tune_db": 1, "entries": [{
        "source": "gemm.tile", "source_hash": ..., "kernel": "gemm", "target": "sm90", "defines": {"dtype": "bf16"},
        "space": ["block_M", ...], "default": {...}, "gpu": "NVIDIA H200", "cuda_driver": 13000, "cc": "9.0",
        "sms": 132, "date": ..., "tilec": ..., "candidates": {"built": 14, "pruned": 0, "wrong": 0},
        "shapes": [{"sizes": {"M": 4096, ...}, "winner": {"config": {...}, "ms": 0.21},
                    "runner_ups": [{"config": {...}, "ms": 0.22}, ...],
                    "all_ms": [0.21, 0.35, ...]}], "timed": [{...}, ...],
        "max_configs": 6, "conditions": {...}, "dispatch": "nearest"}]}   (all_ms[i]: timed[i]'s time; max_configs
        optional, MAX_CONFIGS without it; conditions: config_key -> the configuration's when= condition, where it has
        one; dispatch optional, "cost" without it: dispatch_rule_of)

An entry is one (source file, kernel, target, fixed -D values) tuned on one GPU. A build finds the database given
by `--tune-db` (CompileOptions.tune_db), else $TILEC_TUNE_DB, else `<source stem>.tune.json` beside the source;
it uses the entry of its source, kernel, target and -D values (without one, the entry whose -D values differ only
in f16 against bf16), unless a -D sets one of the tuned names (an explicit configuration wins). `select` picks the
few configurations that win across the tuned shapes and the dispatch rules. Standard library only: the cache key
reads the entry on the cache-hit path.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

from ..errors import UserFacingError

DB_VERSION = 1
ENV = "TILEC_TUNE_DB"
SUFFIX = ".tune.json"
MAX_CONFIGS = 4  # configurations one artifact carries at most
SLACK = 0.03  # a shape is served well enough by a configuration within 3% of its best
RUNNER_UPS = 4


class DatabaseError(UserFacingError, ValueError):
    """A database the build cannot use (unreadable, or an entry's field out of range): the user's to fix."""


def load(path: str | os.PathLike) -> dict:
    try:
        db = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise DatabaseError(f"{path}: cannot read the tuning database: {e}") from None
    if not isinstance(db, dict) or db.get("tilec_tune_db") != DB_VERSION:
        raise DatabaseError(f"{path}: not a tilec tuning database of version {DB_VERSION}")
    return db


def save(path: str | os.PathLike, db: dict) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(db, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def same_entry(a: dict, b: dict) -> bool:
    return all(a.get(k) == b.get(k) for k in ("source", "kernel", "target", "defines"))


def merge(path: str | os.PathLike, entry: dict, extend: bool = False) -> dict:
    """Add `entry` to the database at `path` (created if absent), replacing the entry it supersedes; with `extend`,
    adding its shapes to that entry's instead (`extended`)."""
    db = load(path) if Path(path).is_file() else {"tilec_tune_db": DB_VERSION, "entries": []}
    old = [e for e in db["entries"] if same_entry(e, entry)]
    if extend and old:
        entry = extended(old[0], entry)
    for kept in ("max_configs", "dispatch"):  # a re-tune keeps the entry's configuration limit and dispatch rule
        if old and kept in old[0] and kept not in entry:
            entry = {**entry, kept: old[0][kept]}
    db["entries"] = [e for e in db["entries"] if not same_entry(e, entry)] + [entry]
    db["entries"].sort(key=lambda e: (e["source"], e["kernel"], e["target"], json.dumps(e["defines"],
                                                                                         sort_keys=True)))
    save(path, db)
    return db


def extended(old: dict, new: dict) -> dict:
    """`new` (an entry of the same source, kernel, target and -D values, tuned at more shapes) with `old`'s shapes
    kept: a shape in both takes `new`'s times, and `timed` becomes the union of both entries' timed configurations,
    each shape's `all_ms` spread over it (None where a configuration was not timed there). Both must come from the
    same source text on the same GPU, or their times do not compare."""
    for key, what in (("source_hash", "source"), ("gpu", "GPU")):
        if old.get(key) != new.get(key):
            raise DatabaseError(f"cannot add shapes to the {old['kernel']} entry: it was tuned with another {what} "
                                f"({old.get(key)} against {new.get(key)}); tune all its shapes again")
    timed = list(old.get("timed") or [])
    index = {config_key(c): i for i, c in enumerate(timed)}
    for c in new.get("timed") or []:
        if config_key(c) not in index:
            index[config_key(c)] = len(timed)
            timed.append(c)

    def spread(shape: dict, own: list[dict] | None) -> dict:
        if own is None or "all_ms" not in shape:
            return shape
        all_ms: list[float | None] = [None] * len(timed)
        for c, ms in zip(own, shape["all_ms"], strict=True):
            all_ms[index[config_key(c)]] = ms
        return {**shape, "all_ms": all_ms}

    retuned = {tuple(sorted(s["sizes"].items())) for s in new["shapes"]}
    kept = [spread(s, old.get("timed")) for s in old["shapes"] if tuple(sorted(s["sizes"].items())) not in retuned]
    shapes = kept + [spread(s, new.get("timed")) for s in new["shapes"]]
    out = {**new, "shapes": shapes}
    if timed:
        out["timed"] = timed
    conditions = {**old.get("conditions", {}), **new.get("conditions", {})}
    if conditions:
        out["conditions"] = conditions
    return out


def collect(folder: str | os.PathLike) -> dict:
    """The database entry of a build folder whose results the worker wrote."""
    from ..version import __version__

    folder = Path(folder)
    plan = json.loads((folder / "plan.json").read_text())
    try:
        results = json.loads((folder / "results.json").read_text())
    except OSError:
        raise DatabaseError(f"{folder}: no results.json; run `python -m tilec.runtime.tune_worker {folder}` on "
                            "the GPU machine first") from None
    by_index = {c["index"]: c for c in plan["candidates"]}
    timed = results["candidates"]
    counts = {"built": 0, "pruned": 0, "failed": 0, "wrong": 0}
    for c in plan["candidates"]:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    counts["wrong"] = sum(1 for r in timed.values() if r["check"] != "ok")
    shapes = []
    # every checked candidate's time at every shape, so that `select` weighs a configuration at the shapes where it
    # was not among the fastest by what it measured there, not by a guess
    timed_ok = sorted(int(i) for i, r in timed.items() if r["check"] == "ok")
    for shape in plan["shapes"]:
        label = ",".join(f"{k}={v}" for k, v in shape.items())
        ranked = sorted((r["times"][label], int(i)) for i, r in timed.items()
                        if r["check"] == "ok" and label in r.get("times", {}))
        if not ranked:
            continue
        all_ms = [round(timed[str(i)]["times"][label], 5) if label in timed[str(i)].get("times", {}) else None
                  for i in timed_ok]
        row = [{"config": by_index[i]["config"], "ms": round(ms, 5)} for ms, i in ranked[:1 + RUNNER_UPS]]
        for r, (_, i) in zip(row, ranked, strict=False):
            if "device" in timed[str(i)]:
                r["device"] = timed[str(i)]["device"]  # the GPU it was timed on
        again = (results.get("retimed") or {}).get(label)
        if again and again["index"] == ranked[0][1]:  # the winner, timed again on every GPU of the host
            row[0]["ms_per_device"] = {d: round(ms, 5) for d, ms in again["ms"].items()}
        shapes.append({"sizes": shape, "winner": row[0], "runner_ups": row[1:], "all_ms": all_ms})
    conditions = {config_key(by_index[i]["config"]): by_index[i]["when"] for i in timed_ok
                  if by_index[i].get("when", True) is not True}
    return {"source": plan["source"], "source_hash": plan["source_hash"], "kernel": plan["kernel"],
            "target": plan["target"], "defines": plan["defines"], "source_consts": plan.get("source_consts", {}),
            "space": plan["space"], "default": plan["default"],
            "size_rules": plan.get("size_rules", {}), "gpu": results.get("gpu"),
            "cuda_driver": results.get("cuda_driver"), "cc": results.get("cc"), "date": results.get("date"),
            **({"sms": results["sms"]} if results.get("sms") else {}),
            **({"devices": results["devices"]} if results.get("devices") else {}),
            "tilec": __version__, "candidates": counts, "timed": [by_index[i]["config"] for i in timed_ok],
            "shapes": shapes, **({"conditions": conditions} if conditions else {})}


def find(source: str | os.PathLike, explicit: str | None = None) -> Path | None:
    """The database a build of `source` reads: `explicit`, $TILEC_TUNE_DB, or the project file beside it."""
    if explicit:
        return Path(explicit)
    if ENV in os.environ:  # set and empty: no database at all
        return Path(os.environ[ENV]) if os.environ[ENV] else None
    beside = Path(source).with_name(Path(source).stem + SUFFIX)
    return beside if beside.is_file() else None


def build_input(source, opts) -> list[str]:
    """The tuning database a build of `source` reads ([] when none is there), for its dependency file: deleting or
    re-tuning the database changes the build."""
    explicit = getattr(opts, "tune_db", None)
    if explicit == "" or not opts.targets:
        return []
    path = find(source, explicit)
    return [str(path)] if path is not None and path.is_file() else []


def _text(value) -> str | None:
    """A const's value as text for comparing -D values (`True`/`true` alike); None for none."""
    if value is None:
        return None
    t = str(getattr(value, "name", value))
    return t.lower() if t.lower() in ("true", "false") else t


# element types whose kernels tune alike: the same width, the same tensor-core rate and the same legal tiles, so that
# an entry tuned for one serves a build of the other when that build has no entry of its own
_TUNE_ALIKE = {"f16": "16-bit float", "bf16": "16-bit float"}


def same_consts(defines: dict, entry: dict, alike: bool = False) -> bool:
    """Whether a compile's -D values give the consts the entry was tuned with: a -D equal to the source's
    default (`-D causal=False`) is the same build as none. `alike`: f16 and bf16 count as the same value."""
    base = entry.get("source_consts", {})
    for k in set(defines) | set(entry["defines"]):
        want = _text(entry["defines"][k]) if k in entry["defines"] else _text(base.get(k))
        have = _text(defines[k]) if k in defines else _text(base.get(k))
        if alike and want in _TUNE_ALIKE and have in _TUNE_ALIKE:
            want, have = _TUNE_ALIKE[want], _TUNE_ALIKE[have]
        if want != have:
            return False
    return True


def entry_for(source, opts) -> dict | None:
    """The database entry that applies to this compile, or None. DatabaseError for an unreadable database that
    was asked for explicitly."""
    explicit = getattr(opts, "tune_db", None)
    if explicit == "":  # --tune-db '' (or none): the target defaults, whatever file lies beside the source
        return None
    path = find(source, explicit)
    if path is None or not opts.targets:
        return None
    if not path.is_file():
        if explicit:
            raise DatabaseError(f"--tune-db {path}: no such file")
        return None
    db = load(path)
    from ..targets.registry import UnknownTarget, lookup

    try:
        target = lookup(opts.targets[0]).name
    except UnknownTarget:
        return None
    defines = dict(opts.defines)
    name = Path(source).name
    candidates = [e for e in db["entries"]
                  if e["source"] == name and e["target"] == target and len(opts.targets) == 1
                  and (opts.kernel is None or e["kernel"] == opts.kernel)
                  and not any(n in defines for n in e["space"])]  # an explicit -D configuration wins
    # the entry of these very consts; else one tuned for the twin element type (bf16 for f16 and back): its
    # configurations are as legal and nearly as fast, and far better than the target's one default
    for alike in (False, True):
        for e in candidates:
            if same_consts(defines, e, alike):
                return e
    return None


def digest(entry: dict | None) -> str | None:
    """What the compile cache's key records of the database: the applying entry's hash (None for none)."""
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest() if entry else None


def config_key(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


DISPATCH_RULES = ("cost", "nearest")  # an entry's "dispatch": the cost model between tuned shapes (the default)


def dispatch_rule_of(entry: dict) -> str:
    """How a build of `entry` dispatches between its tuned shapes: "cost" (tilec/runtime/cost_model.py: the
    default) or "nearest" (the nearest tuned shape's winner, for kernels the model predicts poorly)."""
    rule = entry.get("dispatch", "cost")
    if rule not in DISPATCH_RULES:
        raise DatabaseError(f"the {entry.get('kernel', '?')} entry's dispatch is {rule!r}: expected one of "
                            f"{', '.join(map(repr, DISPATCH_RULES))}")
    return rule


def max_configs_of(entry: dict) -> int:
    """How many configurations a build of `entry` may carry: its "max_configs" field, else MAX_CONFIGS. Each one
    is compiled into the artifact as its own kernel, so the build's compile time grows with it."""
    limit = entry.get("max_configs", MAX_CONFIGS)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise DatabaseError(f"the {entry.get('kernel', '?')} entry's max_configs is {limit!r}: expected a whole "
                            "number >= 1")
    return limit


NEIGHBOUR_DISTANCE = 2.0  # tuned shapes this close (sum of |log2 a - log2 b| over the sizes) count as neighbours


def shape_weights(shapes: list[dict]) -> list[float]:
    """Each tuned shape's weight in `select`: 1 / (the tuned shapes within NEIGHBOUR_DISTANCE of it, itself
    included). The dispatch runs every launch on the configuration of its nearest tuned shape, so a shape with no
    tuned neighbours (a lone 1000x1000x1000 among the llm-gemm families) stands for every launch around it, while a
    family of close shapes (M = 1, 4, 16 at one N x K) shares its neighbourhood. Unweighted, a configuration that
    helps several shapes of one family a little outweighs the one that a lone shape needs."""

    def log2(v) -> float:
        return math.log2(v) if isinstance(v, (int, float)) and v > 0 else 0.0

    logs = [{k: log2(v) for k, v in s["sizes"].items()} for s in shapes]

    def distance(a: dict, b: dict) -> float:
        return sum(abs(a[k] - b.get(k, 0.0)) for k in a) + sum(abs(b[k]) for k in b if k not in a)

    return [1.0 / sum(1 for b in logs if distance(a, b) <= NEIGHBOUR_DISTANCE) for a in logs]


def stored_times(entry: dict) -> tuple[dict[str, dict], dict[str, dict[int, float]]]:
    """Every configuration the entry has a time for (by its key) and its stored times by shape index: the winners,
    the runner-ups and, where the entry keeps them, every timed configuration's times (`all_ms`)."""
    times: dict[str, dict[int, float]] = {}
    configs: dict[str, dict] = {}
    timed = entry.get("timed")
    for si, s in enumerate(entry["shapes"]):
        measured = [{"config": c, "ms": ms} for c, ms in zip(timed, s["all_ms"], strict=True) if ms is not None] \
            if timed is not None and "all_ms" in s else []
        for r in [s["winner"], *s["runner_ups"], *measured]:
            k = config_key(r["config"])
            configs[k] = r["config"]
            times.setdefault(k, {})[si] = r["ms"]
    return configs, times


def may_run(condition, sizes: dict[str, int]) -> bool:
    """Whether a configuration with this when= condition (tilec.manifest's tree) may serve a shape of these sizes; a
    condition that reads a size the shape leaves out does not rule it out."""
    from ..manifest import ManifestError, condition_holds

    try:
        return condition_holds(condition, sizes)
    except ManifestError:
        return True


def select(entry: dict, max_configs: int | None = None, slack: float = SLACK) -> tuple[list[dict], list[int]]:
    """The configurations an artifact carries (at most `max_configs`, by default the entry's limit,
    `max_configs_of`) and, per tuned shape, the index of the one it runs.

    The objective is the weighted sum over the tuned shapes of the slowdown (time / the shape's best) of the
    fastest chosen configuration there, each shape weighted by `shape_weights`. It is relative, so a 10 ms shape
    counts no more than a 0.01 ms one, and weighted, so a lone shape is not outvoted by a family of close ones.
    The configurations are picked greedily (each added one cuts the objective the most; stopping once every shape
    is within `slack` of its best), then improved by swaps: a chosen configuration is replaced by another while
    that lowers the objective. The greedy order alone keeps early compromises: a configuration picked first for
    serving many shapes fairly stays even after later picks serve those shapes better, and the slot it holds is
    the one a lone shape's winner needed (gemm's 64x128 split 4 against 1000x1000x1000's 64x128 on a (2, 1)
    cluster)."""
    if max_configs is None:
        max_configs = max_configs_of(entry)
    configs, times = stored_times(entry)
    conditions = entry.get("conditions") or {}
    for c, tree in conditions.items():  # a configuration whose when= is false at a shape cannot serve it there
        if c in times:
            times[c] = {si: ms for si, ms in times[c].items() if may_run(tree, entry["shapes"][si]["sizes"])}
    best = [min((t[si] for t in times.values() if si in t), default=s["winner"]["ms"])
            for si, s in enumerate(entry["shapes"])]
    n = len(best)
    weight = shape_weights(entry["shapes"])
    missing = 4.0  # the slowdown charged where a configuration was not timed at a shape (an entry without "all_ms")
    slow = {c: [missing if times[c].get(si) is None else times[c][si] / best[si] for si in range(n)]
            for c in configs}

    def cost(chosen: list[str]) -> float:
        return sum(w * min((slow[c][si] for c in chosen), default=missing) for si, w in enumerate(weight))

    chosen: list[str] = []
    while len(chosen) < max_configs:
        if chosen and all(min(times[c].get(si, float("inf")) for c in chosen) <= best[si] * (1 + slack)
                          for si in range(n)):
            break
        best_now = [min((slow[c][si] for c in chosen), default=math.inf) for si in range(n)]
        scored = [(sum(w * min(b, t) for w, b, t in zip(weight, best_now, slow[c], strict=True)), c)
                  for c in configs if c not in chosen]
        if not scored:
            break
        total, pick = min(scored)
        if chosen and total >= cost(chosen):
            break
        chosen.append(pick)
    current = cost(chosen)
    others = sorted(configs)
    for _ in range(4 * max_configs):  # each round takes the best single swap; a few rounds settle it
        swaps = []
        for i in range(len(chosen)):
            rest = [min((slow[c][si] for c in chosen[:i] + chosen[i + 1:]), default=math.inf) for si in range(n)]
            swaps += [(sum(w * min(r, t) for w, r, t in zip(weight, rest, slow[c], strict=True)), i, c)
                      for c in others if c not in chosen]
        if not swaps:
            break
        total, i, c = min(swaps)
        if total >= current - 1e-9:
            break
        chosen[i], current = c, total
    per_shape = [min(range(len(chosen)), key=lambda i: times[chosen[i]].get(si, float("inf"))) for si in range(n)]
    return [configs[c] for c in chosen], per_shape
