"""The dispatch's cost model: a tuned kernel's predicted time under each configuration it carries, at any sizes.

The nearest tuned shape alone is a poor guide between tuned shapes: a tile's waves on the multiprocessors are not
smooth in the sizes, and the winner at M = 128 may leave half the machine idle at M = 200. So the build fits, per
configuration, a time of five terms to the times the tuner measured at every tuned shape (`fit_dispatch_costs`):

    time = a * compute + b * traffic + c * footprint + e * waves + d

- compute: for each launch, its waves (its work units -- blocks, or a persistent kernel's tiles -- over the blocks
  the multiprocessors hold at once: by shared memory and threads) times one unit's FLOPs;
- traffic: the entry's "bytes" (every block's loads and stores: tiles read again by other blocks count again);
- footprint: the bytes of its tensors (what must cross DRAM at least once);
- waves: the launches' waves, each a fixed latency besides its FLOPs (the pipeline's first loads before the first
  MMA, the epilogue's stores after the last; a split-K's reduction launch adds its own);
- d: the launches' fixed cost.

The coefficients are non-negative least squares in relative error, the compute term always among them (a fit
free to drop it left a split-K configuration with no cost for K, chosen at long K where it lost 1.2x: docs/tuning.md,
"Between the tuned shapes"); the waves term joins the fit only where the
configuration was timed at WAVES_MIN_SHAPES shapes or more (a few shapes fit five coefficients too closely). Each
term is a formula of the sizes in the manifest's formula language (ceildiv, min, max, // and integers), so the C
launcher evaluates it as the runtime does. The manifest keeps three terms and four coefficients (`COST_KEY`):
the waves term is folded into the compute term, `compute + round(e / a) * waves` (a wave's latency in FLOPs: both
are per wave), or takes its place where a is 0.

At a launch (`cost_choice`), among the configurations allowed there that the nearest tuned shape's measurement
keeps (within BOUND of that shape's best), the dispatch runs the one of least predicted time, each prediction
scaled by its own error at that tuned shape, the more the nearer: prediction * (1 + w * (scale - 1)) with
w = 1 / (1 + distance). At a tuned shape itself (distance 0) that is the measured time; far from every tuned
shape, the model alone. Without a fitted model (an entry without every configuration's times, an unknown GPU)
the table keeps the nearest tuned shape's winner.
"""

from __future__ import annotations

import ast
import itertools
import math
import re

from ..manifest import COST_KEY, ELEM_BYTES, MS_KEY, SCALE_KEY
from .formulas import compile_formulas

BOUND = 2.0  # a configuration more than this much slower than the best at the nearest tuned shape is passed over
WAVES_MIN_SHAPES = 20  # the tuned shapes a configuration's fit needs for its waves term (four per coefficient)
BLOCK_RESERVED_SHARED = 1024  # bytes of shared memory the driver reserves per block (sm80 and later)
MAX_THREADS_PER_SM = 2048
# shared memory a multiprocessor holds, by compute capability (the CUDA programming guide's table)
SHARED_PER_SM = {"7.0": 96 * 1024, "7.5": 64 * 1024, "8.0": 164 * 1024, "8.6": 100 * 1024, "8.7": 164 * 1024,
                 "8.9": 100 * 1024, "9.0": 228 * 1024, "10.0": 228 * 1024, "12.0": 100 * 1024}


_NUM_SMS = re.compile(r"\bnum_sms\b")


def _work(grid: list[str], sms: int) -> str:
    """The blocks' work units: the grid's size, where a persistent kernel's `min(units, num_sms)` counts its units
    (each of its blocks runs several in turn)."""
    dims = []
    for g in grid:
        tree = ast.parse(g, mode="eval").body
        if (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "min"
                and len(tree.args) == 2 and any(isinstance(a, ast.Name) and a.id == "num_sms" for a in tree.args)):
            tree = next(a for a in tree.args if not (isinstance(a, ast.Name) and a.id == "num_sms"))
        dims.append("(" + _NUM_SMS.sub(str(sms), ast.unparse(tree)) + ")")
    return " * ".join(dims)


def cost_terms(public: dict, stages: list[tuple[dict, list[str]]], sms: int, shared_per_sm: int) -> list[str]:
    """The compute, traffic, footprint and waves formulas of one configuration. `public` is the entry a call names
    (a kernel entry, or a multi-launch kernel's "launches" entry: its params, bytes); `stages` the (kernel entry,
    grid) of each launch."""
    compute, waves = [], []
    for entry, grid in stages:
        resident = max(1, min(shared_per_sm // (entry.get("shared_bytes", 0) + BLOCK_RESERVED_SHARED),
                              MAX_THREADS_PER_SM // max(1, entry.get("threads", 1))))
        units = _work(grid, sms)
        compute.append(f"ceildiv({units}, {sms * resident}) * (({entry['flops']}) // max({units}, 1))")
        waves.append(f"ceildiv({units}, {sms * resident})")
    footprint = [f"{ELEM_BYTES[p['dtype']]} * " + " * ".join(f"({d})" for d in p["shape"] or [1])
                 for p in public["params"] if p.get("kind") == "tensor"]
    return [" + ".join(compute) or "0", f"({public['bytes']})", " + ".join(footprint) or "0",
            " + ".join(waves) or "0"]


def packed(terms: list[str], coef: list[float]) -> dict:
    """The manifest's COST_KEY record of a fit over `terms` (compute, traffic, footprint, waves) with `coef` (theirs
    and the constant): three terms and four coefficients, the waves term folded into the compute term as that many
    FLOPs a wave (both are per wave), or in its place where compute's coefficient is 0."""
    (compute, traffic, footprint, waves), (a, b, c, e, d) = terms, coef
    if e > 0 and a > 0 and round(e / a) > 0:
        compute = f"{compute} + {round(e / a)} * ({waves})"
    elif e > 0 and a == 0:
        compute, a = waves, e
    return {"terms": [compute, traffic, footprint], "coef": [a, b, c, d]}


def _solve(rows: list[list[float]], rhs: list[float]) -> list[float] | None:
    """Least squares through the normal equations (a few columns), None where they are singular."""
    n = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(n)] + [sum(r[i] * y for r, y in zip(rows, rhs, strict=True))]
         for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(a[i][col]))
        if abs(a[pivot][col]) < 1e-12:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for i in range(n):
            if i != col:
                f = a[i][col] / a[col][col]
                a[i] = [x - f * y for x, y in zip(a[i], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]


def fit(features: list[list[float]], times: list[float]) -> list[float]:
    """Non-negative coefficients of `features` (rows of term values plus 1) that best give `times`, in relative
    error: every subset of the columns that keeps the first (compute) solved, the best whose coefficients are all
    non-negative."""
    width = len(features[0])
    norm = [max(abs(f[i]) for f in features) or 1.0 for i in range(width)]  # columns of like size
    rows = [[f[i] / norm[i] / t for i in range(width)] for f, t in zip(features, times, strict=True)]
    best, best_error = [0.0] * width, math.inf
    for mask in itertools.product((0, 1), repeat=width):
        cols = [i for i in range(width) if mask[i]]
        if 0 not in cols:
            continue
        solved = _solve([[r[i] for i in cols] for r in rows], [1.0] * len(rows))
        if solved is None or any(c < 0 for c in solved):
            continue
        coef = [0.0] * width
        for i, c in zip(cols, solved, strict=True):
            coef[i] = c
        error = sum((sum(c * x for c, x in zip(coef, r, strict=True)) - 1.0) ** 2 for r in rows)
        if error < best_error:
            best, best_error = coef, error
    return [c / n for c, n in zip(best, norm, strict=True)]


_compiled: dict[tuple, object] = {}


def predicted(cost: dict, sizes: dict[str, int]) -> float:
    """A configuration's predicted time (ms) at these sizes, from its COST_KEY record."""
    names = tuple(sorted(sizes))
    key = (tuple(cost["terms"]), names)
    terms = _compiled.get(key)
    if terms is None:
        terms = _compiled[key] = compile_formulas(cost["terms"], list(names))
    values = terms(*(sizes[n] for n in names))
    a, b, c, d = cost["coef"]
    return a * float(values[0]) + b * float(values[1]) + c * float(values[2]) + d


def fit_dispatch_costs(table: dict, kernels: dict[str, dict], launches: dict[str, dict], sms: int,
                       shared_per_sm: int) -> None:
    """Give a dispatch table whose rules carry every configuration's measured times (MS_KEY) its cost model: each
    config's COST_KEY {terms, coef} and each rule's SCALE_KEY (the measured time over the predicted one, None
    where the configuration was not timed or is more than BOUND slower than that shape's best)."""
    configs = table["configs"]
    for ci, c in enumerate(configs):
        name = c["kernel"]
        if name in launches:
            public = launches[name]
            stages = [(kernels[s["kernel"]], s["grid"]) for s in public["stages"]]
        else:
            public = kernels[name]
            stages = [(public, public["grid"])]
        terms = cost_terms(public, stages, sms, shared_per_sm)
        at = [(r["at"], r[MS_KEY][ci]) for r in table["rules"] if r[MS_KEY][ci]]
        names = sorted(at[0][0]) if at else []
        width = 4 if len(at) >= WAVES_MIN_SHAPES else 3  # (fewer shapes: no waves term)
        values = compile_formulas(terms[:width], names)
        rows = [[float(v) for v in values(*(sizes[n] for n in names))] + [1.0] for sizes, _ in at]
        coef = fit(rows, [ms for _, ms in at]) if rows else [0.0] * (width + 1)
        c[COST_KEY] = packed(terms, coef if width == 4 else coef[:3] + [0.0, coef[3]])
    for r in table["rules"]:
        timed = [ms for ms in r[MS_KEY] if ms]
        best = min(timed, default=None)
        scale = []
        for c, ms in zip(configs, r[MS_KEY], strict=True):
            p = predicted(c[COST_KEY], r["at"]) if ms and ms <= BOUND * best else 0.0
            scale.append(ms / p if p > 0 else None)
        r[SCALE_KEY] = scale


def cost_choice(table: dict, rule: dict, distance: float, allowed: list[bool], sizes: dict[str, int],
                fallback: int) -> int:
    """The configuration the cost model picks at `sizes`, the nearest tuned shape being `rule` at `distance`
    (`fallback`, that rule's winner, when none qualifies)."""
    blend = 1.0 / (1.0 + distance)
    pick, low = fallback, math.inf
    for ci, scale in enumerate(rule[SCALE_KEY]):
        if scale is None or not allowed[ci]:
            continue
        p = predicted(table["configs"][ci][COST_KEY], sizes) * (1.0 + blend * (scale - 1.0))
        if p < low:
            pick, low = ci, p
    return pick
