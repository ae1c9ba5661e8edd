"""Search spaces in the source (`tune()`), target-aware defaults, the tuning database and its selection, launch-time
dispatch, and `tilec tune`'s build / collect halves (the GPU half is exercised with a stand-in kernel here and on
the H200 for real: bench/RESULTS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError, render
from tilec.options import CompileOptions

ROOT = Path(__file__).resolve().parent.parent

SPACE = """
const dtype = f16
const (block_M, block_N) = tune((4, 128), (2, 256), (8, 64), sm90=(2, 256), webgpu=(8, 64))
const threads = tune(128, 64, where=threads <= block_N)

kernel scale(X: dtype[M, N], Y: out dtype[M, N]):
    with Kernel(ceildiv(M, block_M), threads=threads) as bx:
        for i, j in Parallel(block_M, block_N):
            if bx * block_M + i < M and j < N:
                Y[bx * block_M + i, j] = X[bx * block_M + i, j] * 2.0
"""


@pytest.fixture(autouse=True)
def _databases_beside_sources(monkeypatch):
    monkeypatch.delenv("TILEC_TUNE_DB", raising=False)  # conftest turns them off for the other tests


def _write(tmp_path: Path, text: str = SPACE, name: str = "k.tile") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _consts(path, target=None, **defines):
    return tilec.compile(str(path), target, defines=defines).module.consts


def _error_text(exc: CompileError) -> str:
    return "\n".join(render(d, exc.sources, False) for d in exc.diagnostics)


def test_tune_consts_take_the_targets_default(tmp_path):
    p = _write(tmp_path)
    assert (_consts(p)["block_M"], _consts(p)["block_N"]) == (4, 128)  # no target: the first candidate
    assert (_consts(p, "sm80")["block_M"], _consts(p, "sm80")["block_N"]) == (4, 128)
    assert (_consts(p, "sm90")["block_M"], _consts(p, "sm90")["block_N"]) == (2, 256)
    assert (_consts(p, "webgpu")["block_M"], _consts(p, "webgpu")["block_N"]) == (8, 64)  # by back end name too


def test_define_overrides_and_partial_tuple_takes_the_first_candidate(tmp_path):
    p = _write(tmp_path)
    c = _consts(p, "sm90", block_M=16)
    assert (c["block_M"], c["block_N"]) == (16, 128)  # not sm90's 256: a partial -D means the same everywhere
    c = _consts(p, "sm90", block_M=1, block_N=32, threads=32)
    assert (c["block_M"], c["block_N"], c["threads"]) == (1, 32, 32)


def test_where_constraint_is_checked_at_the_users_line(tmp_path):
    p = _write(tmp_path)
    with pytest.raises(CompileError) as e:
        _consts(p, block_N=32, threads=128)
    text = _error_text(e.value)
    assert "k.tile:4:" in text and "break this const's constraint" in text and "threads=128" in text


@pytest.mark.parametrize("line, message", [
    ("const (a, b) = tune((1, 2), (3,))", "needs 2 values, got 1"),
    ("const (a, b) = 3", "takes a tune(...) of tuples"),
    ("const a = tune()", "at least one candidate"),
])
def test_bad_spaces_are_diagnostics(tmp_path, line, message):
    p = _write(tmp_path, SPACE.replace("const dtype = f16", f"const dtype = f16\n{line}"))
    with pytest.raises(CompileError) as e:
        tilec.compile(str(p))
    assert message in _error_text(e.value)


def test_every_sample_declares_a_space_and_builds_its_default_for_each_target():
    from tilec.tuning.plan import discover

    for sample in ("gemm", "flash_attention", "fp8_gemm", "softmax", "rmsnorm", "layernorm", "gemm_bias_relu"):
        axes, default, _ = discover(str(ROOT / "samples" / f"{sample}.tile"), CompileOptions.make("sm90"))
        assert axes, sample
        assert default  # sm90's default configuration
    gemm = tilec.compile(str(ROOT / "samples/gemm.tile"), "sm90").module.consts
    assert (gemm["block_N"], gemm["block_K"], gemm["threads"], gemm["num_stages"]) == (256, 64, 256, 4)
    # WebGPU: gemm_bias_relu's and flash_attention's defaults fit the 16 KB of workgroup memory (they did not before
    # the space); tests/test_wgsl.py runs attention's
    tilec.compile(str(ROOT / "samples/gemm_bias_relu.tile"), "webgpu")
    attention = tilec.compile(str(ROOT / "samples/flash_attention.tile"), "webgpu")
    assert (attention.module.consts["block_M"], attention.module.consts["block_N"]) == (16, 32)
    hopper = tilec.compile(str(ROOT / "samples/flash_attention.tile"), "sm90")
    assert hopper.module.consts["row_stats_in_shared"] is False


def test_configurations_are_the_product_of_the_axes(tmp_path):
    from tilec.tuning.plan import configurations, discover

    axes, default, _ = discover(str(_write(tmp_path)), CompileOptions.make("sm90"))
    configs = configurations(axes)
    assert len(configs) == 3 * 2
    assert {"block_M": 2, "block_N": 256, "threads": 64} in configs
    assert default == {"block_M": 2, "block_N": 256, "threads": 128}


def _entry(**extra) -> dict:
    a = {"block_M": 4, "block_N": 128, "threads": 128}
    b = {"block_M": 2, "block_N": 256, "threads": 64}
    c = {"block_M": 8, "block_N": 64, "threads": 64}
    shapes = [
        {"sizes": {"M": 4096, "N": 128}, "winner": {"config": a, "ms": 1.0}, "runner_ups": [{"config": b, "ms": 2.0}]},
        {"sizes": {"M": 8, "N": 4096}, "winner": {"config": b, "ms": 1.0},
         "runner_ups": [{"config": c, "ms": 1.01}, {"config": a, "ms": 3.0}]},
        {"sizes": {"M": 8, "N": 8192}, "winner": {"config": c, "ms": 1.0}, "runner_ups": [{"config": b, "ms": 1.02}]},
    ]
    e = {"source": "k.tile", "kernel": "scale", "target": "sm90", "defines": {}, "source_consts": {"dtype": "f16"},
         "space": list(a),
         "default": b, "gpu": "test GPU", "shapes": shapes}
    e.update(extra)
    return e


def test_select_keeps_few_configurations_and_maps_every_shape():
    from tilec.tuning.database import select

    configs, per_shape = select(_entry())
    # b serves the last two shapes within 3%, a the first: two configurations suffice; then the swap step trades b
    # for c, which serves those two a little better (1.01 + 1.0 against 1.0 + 1.02)
    assert len(configs) == 2
    assert [configs[i] for i in per_shape] == [{"block_M": 4, "block_N": 128, "threads": 128},
                                               {"block_M": 8, "block_N": 64, "threads": 64},
                                               {"block_M": 8, "block_N": 64, "threads": 64}]
    one, _ = select(_entry(), max_configs=1)
    assert len(one) == 1


def test_select_charges_configurations_missing_from_a_shapes_fastest():
    """With more candidates than a shape lists (its winner and runner-ups), each shape's list leaves most out, and
    no few configurations appear in every list; one absent from a shape's list costs a fixed slowdown there
    instead of ruling it out, so the three winners are still selected."""
    from tilec.tuning.database import select

    winners = [{"block_N": 512}, {"block_N": 768}, {"block_N": 1024}]
    shapes = []
    for i in range(6):
        other = {"block_N": 64 + i}  # listed for this shape only (and sorting before every winner)
        shapes.append({"sizes": {"M": 2 ** (10 + i)}, "winner": {"config": winners[i // 2], "ms": 1.0},
                       "runner_ups": [{"config": other, "ms": 1.2}]})
    configs, per_shape = select({"shapes": shapes})
    assert sorted(configs, key=lambda c: c["block_N"]) == winners
    assert [configs[i] for i in per_shape] == [winners[i // 2] for i in range(6)]


def test_select_weighs_every_measured_time_where_the_entry_has_them():
    """An entry written from a full results file lists every checked candidate's time at every shape (`timed`,
    `all_ms`). A configuration left out of a shape's five fastest is then charged what it measured there: here x
    serves three long-row shapes best and is 10x slower at the short-row one, where the 4x guess made it the one
    configuration to keep (the row samples' dispatch: softmax 4096x128 went to a one-row-per-block config, 4.2x)."""
    from tilec.tuning.database import select

    x, y = {"block_N": 8192}, {"block_N": 128}
    timed = [x, y]
    all_ms = [[10.0, 1.0], [1.0, 3.0], [1.0, 3.0], [1.0, 3.0]]
    shapes = []
    for si, ms in enumerate(all_ms):
        ranked = sorted(zip(ms, range(2), strict=True))
        rows = [{"config": timed[i], "ms": t} for t, i in ranked]
        # the short rows list only their winner; the long rows list both
        shapes.append({"sizes": {"N": 128 * 4 ** si}, "winner": rows[0], "runner_ups": rows[1:] if si else [],
                       "all_ms": ms})
    guessed, _ = select({"shapes": [{k: v for k, v in s.items() if k != "all_ms"} for s in shapes]}, max_configs=1)
    assert guessed == [x]  # 4x charged at the short rows (4 + 1 + 1 + 1 against y's 1 + 3 + 3 + 3): x looks best
    measured, _ = select({"timed": timed, "shapes": shapes}, max_configs=1)
    assert measured == [y]  # measured: x costs 10 + 3, y 1 + 9
    both, per_shape = select({"timed": timed, "shapes": shapes}, max_configs=2)
    assert [both[i] for i in per_shape] == [y, x, x, x]


def _far_shapes(rows: list[list[float]], configs: list[dict]) -> dict:
    """An entry whose shapes lie far apart (no tuned neighbours: every weight 1), rows[s][c] = config c's time at
    shape s."""
    shapes = []
    for si, ms in enumerate(rows):
        ranked = sorted(zip(ms, range(len(configs)), strict=True))
        shapes.append({"sizes": {"M": 4 ** (4 * si), "N": 64}, "winner": {"config": configs[ranked[0][1]],
                       "ms": ranked[0][0]}, "runner_ups": [], "all_ms": ms})
    return {"timed": configs, "shapes": shapes}


def test_select_swaps_out_an_early_compromise():
    """The greedy order picks first the configuration that serves every shape fairly (c: 1.1x at all three); the
    best pair is two specialists (a and b: every shape at its best). A swap after the greedy picks finds it; the
    greedy picks alone kept c (with a), leaving the third shape 10% slow."""
    from tilec.tuning.database import select

    a, b, c = {"block_N": 1}, {"block_N": 2}, {"block_N": 3}
    entry = _far_shapes([[1.0, 1.5, 1.1], [1.0, 1.5, 1.1], [1.5, 1.0, 1.1]], [a, b, c])
    configs, per_shape = select(entry, max_configs=2)
    assert sorted(configs, key=lambda x: x["block_N"]) == [a, b]
    assert [configs[i] for i in per_shape] == [a, a, b]


def test_select_weighs_a_lone_shape_against_a_family_of_close_ones():
    """Three decode shapes (M = 1, 2, 4 at one N x K) sit within a factor 4 of each other; a square shape sits
    alone. With one configuration, p serves the family at its best and the lone shape 1.3x slow; q serves the
    family 1.12x slow and the lone shape at its best. Unweighted, the family's three votes pick p (3.0 + 1.3
    against 3.36 + 1.0); weighted, the family counts as one shape, as the dispatch sends every launch near it to
    the same configuration, and q is kept: the worst shape is 1.12x, not 1.3x."""
    from tilec.tuning.database import select, shape_weights

    p, q = {"block_M": 64}, {"block_M": 16}
    sizes = [{"M": 1, "N": 4096, "K": 4096}, {"M": 2, "N": 4096, "K": 4096}, {"M": 4, "N": 4096, "K": 4096},
             {"M": 1000, "N": 1000, "K": 1000}]
    rows = [[1.0, 1.12]] * 3 + [[1.3, 1.0]]
    shapes = [{"sizes": sz, "winner": {"config": p if ms[0] < ms[1] else q, "ms": min(ms)}, "runner_ups": [],
               "all_ms": ms} for sz, ms in zip(sizes, rows, strict=True)]
    assert shape_weights(shapes) == pytest.approx([1 / 3] * 3 + [1.0])
    configs, _ = select({"timed": [p, q], "shapes": shapes}, max_configs=1)
    assert configs == [q]
    both, per_shape = select({"timed": [p, q], "shapes": shapes}, max_configs=2)
    assert [both[i] for i in per_shape] == [p, p, p, q]


def test_select_reads_the_entrys_configuration_limit():
    """Five shapes, each with its own winner (every other configuration 2x slower there): the default limit keeps
    four, an entry's "max_configs" raises or lowers it, and a bad one is an error naming the entry."""
    from tilec.tuning.database import MAX_CONFIGS, DatabaseError, max_configs_of, select

    configs = [{"block_N": 64 * (i + 1)} for i in range(5)]
    entry = _far_shapes([[1.0 if c == s else 2.0 for c in range(5)] for s in range(5)], configs)
    assert MAX_CONFIGS == 4 and len(select(entry)[0]) == 4
    chosen, per_shape = select({**entry, "max_configs": 5})
    assert len(chosen) == 5 and [chosen[i] for i in per_shape] == configs
    assert len(select({**entry, "max_configs": 2})[0]) == 2
    assert len(select({**entry, "max_configs": 2}, max_configs=3)[0]) == 3  # an explicit limit wins
    for bad in (0, "six", 2.5, True):
        with pytest.raises(DatabaseError, match="max_configs"):
            max_configs_of({**entry, "kernel": "gemm", "max_configs": bad})


def test_committed_gemm_entries_route_the_issue_shapes_to_their_winners():
    """samples/gemm.tune.json's f16 and bf16 entries carry ten configurations, and the selection runs each of issue
    #26's decode and skinny shapes and the aligned big ones on its tuned winner (its stored time within 2% of the
    shape's best; 3% since s20, below), 1000x1000x1000 and 2048x2048x2048 within 5% of it, and no tuned shape more than
    10% off its best. With four, greedily, 1x4096x4096 ran 64x128 split 4 (1.2x its best), 128x4096x11008 too (1.3x) and
    1000x1000x1000 64x256 (1.2x); with six after the mid-batch shapes joined (s14), 1x4096x4096 and 4x4096x4096 ran
    split-K at 1.2x; with eight after the 128x192 tile joined (s17), 256x4096x14336 ran at 1.17x. (The f16 entry's
    32x1536x1536, a 10 us shape, stays at 1.097x with up to twelve: hence 10%, not s14's 8%. Since the deep 64-row tiles
    joined (s18) the selection keeps one GEMV tile fewer: M = 1 and 4 at 4096x4096 run within 8% of their best (f16
    1x4096x4096 1.079x, about 1.4 us of a 19 us call), every other tuned shape within 1.06x. Since the 6-stage 128x128
    tile joined (s20), bf16 16384x4096x4096 runs the persistent 128x192 at 1.023x the persistent 128x256 that won it:
    3%, not 2%, for the big ones, inside the tuner's own run-to-run spread, 0.89-1.15x between s18's and s20's best
    times at the same shapes.)"""
    from tilec.tuning.database import load, max_configs_of, select

    db = load(ROOT / "samples" / "gemm.tune.json")
    exact = [(1, 4096, 4096), (4, 4096, 4096), (128, 4096, 11008), (128, 4096, 4096), (4096, 4096, 4096),
             (8192, 8192, 8192), (16384, 4096, 4096)]
    entries = [e for e in db["entries"] if e["kernel"] == "gemm" and "trans_B" not in e["defines"]]
    assert len(entries) == 2
    for e in entries:
        assert max_configs_of(e) == 10
        configs, per_shape = select(e)
        assert len(configs) == 10
        for s, ci in zip(e["shapes"], per_shape, strict=True):
            z = s["sizes"]
            ms = s["all_ms"][e["timed"].index(configs[ci])]
            if (z["M"], z["N"], z["K"]) in exact:
                assert ms <= (1.08 if z["M"] <= 4 else 1.03) * s["winner"]["ms"], (e["defines"], z)
            if (z["M"], z["N"], z["K"]) in ((1000, 1000, 1000), (2048, 2048, 2048)):
                assert ms <= 1.05 * s["winner"]["ms"], (e["defines"], z)
            assert ms <= 1.10 * s["winner"]["ms"], (e["defines"], z)  # no shape more than 10% off its best


def test_merge_keeps_the_entrys_configuration_limit(tmp_path):
    from tilec.tuning.database import load, merge

    path = tmp_path / "k.tune.json"
    merge(path, {**_entry(), "max_configs": 6})
    merge(path, _entry())  # a re-tune of the same source, kernel, target and -D values
    (e,) = load(path)["entries"]
    assert e["max_configs"] == 6
    merge(path, {**_entry(), "max_configs": 2})
    assert load(path)["entries"][0]["max_configs"] == 2


def _timed_entry(timed: list[dict], shapes: dict[tuple, list[float]], **extra) -> dict:
    """An entry as `collect` writes it: every timed configuration's time at each shape (all_ms)."""
    rows = []
    for (m, n), all_ms in shapes.items():
        ranked = sorted(zip(all_ms, range(len(timed)), strict=True))
        rows.append({"sizes": {"M": m, "N": n}, "winner": {"config": timed[ranked[0][1]], "ms": ranked[0][0]},
                     "runner_ups": [{"config": timed[i], "ms": ms} for ms, i in ranked[1:3]], "all_ms": all_ms})
    return {**_entry(), "source_hash": "h1", "timed": timed, "shapes": rows, **extra}


def test_extend_adds_shapes_and_spreads_their_times_over_both_timed_lists(tmp_path):
    from tilec.tuning.database import load, merge, select, stored_times

    a, b, c = ({"block_M": m, "block_N": 128, "threads": 128} for m in (1, 2, 4))
    path = tmp_path / "k.tune.json"
    merge(path, _timed_entry([a, b], {(4096, 128): [1.0, 2.0], (8, 4096): [3.0, 1.5]}, max_configs=6))
    # tuned later at two more shapes, one of them again, with a third configuration that now builds
    merge(path, _timed_entry([b, c], {(8, 4096): [1.4, 1.2], (256, 768): [2.0, 0.5]}), extend=True)
    (e,) = load(path)["entries"]
    assert e["max_configs"] == 6
    assert e["timed"] == [a, b, c]
    by_size = {(s["sizes"]["M"], s["sizes"]["N"]): s["all_ms"] for s in e["shapes"]}
    assert by_size == {(4096, 128): [1.0, 2.0, None], (8, 4096): [None, 1.4, 1.2], (256, 768): [None, 2.0, 0.5]}
    configs, times = stored_times(e)
    assert times[next(k for k, v in configs.items() if v == c)] == {1: 1.2, 2: 0.5}
    chosen, per_shape = select(e)
    assert [chosen[i] for i in per_shape] == [a, c, c]
    # without --extend the entry is replaced: the old shape is gone
    merge(path, _timed_entry([b, c], {(256, 768): [2.0, 0.5]}))
    assert [s["sizes"] for s in load(path)["entries"][0]["shapes"]] == [{"M": 256, "N": 768}]


def test_select_serves_no_shape_with_a_configuration_whose_condition_is_false_there():
    from tilec.tuning.database import config_key, select

    a, b, c = ({"block_M": m, "block_N": 128, "threads": 128} for m in (1, 2, 4))
    # c is fastest everywhere, but its when= (N >= 1024) rules it out at the first shape, where b is then the best
    entry = _timed_entry([a, b, c], {(4096, 128): [3.0, 2.0, 1.0], (8, 4096): [3.0, 2.5, 1.0]},
                         conditions={config_key(c): [">=", "N", 1024]})
    chosen, per_shape = select(entry)
    assert [chosen[i] for i in per_shape] == [b, c]
    del entry["conditions"]
    chosen, per_shape = select(entry)
    assert [chosen[i] for i in per_shape] == [c, c]


def test_the_tuner_records_each_candidates_condition(tmp_path):
    """tilec tune's build keeps each candidate's folded when= (plan.json), and collect stores it in the entry."""
    from tilec.tuning.database import collect, config_key
    from tilec.tuning.plan import prepare

    src = _write(tmp_path, WHEN_SPACE)
    folder = tmp_path / "b"
    plan = prepare(str(src), CompileOptions.make("sm90"), [{"M": 4096, "N": 128}], folder, emit="cu", jobs=1)
    built = [c for c in plan.candidates if c.status == "built"]
    assert {c.config["block_M"]: c.when for c in built}[8] == [
        "or", ["and", [">=", "N", 128], ["==", ["%", "M", 8], 0]], [">", "M", 100000]]
    times = {str(c.index): {"check": "ok", "times": {"M=4096,N=128": 1.0 + c.index}} for c in built}
    (folder / "results.json").write_text(json.dumps({"version": 1, "gpu": "test GPU", "candidates": times}))
    entry = collect(folder)
    assert entry["conditions"] == {config_key(c.config): c.when for c in built}


@pytest.mark.parametrize("field", ["source_hash", "gpu"])
def test_extend_refuses_times_that_do_not_compare(tmp_path, field):
    from tilec.tuning.database import DatabaseError, merge

    a = {"block_M": 1, "block_N": 128, "threads": 128}
    path = tmp_path / "k.tune.json"
    merge(path, _timed_entry([a], {(4096, 128): [1.0]}))
    with pytest.raises(DatabaseError, match="tune all its shapes again"):
        merge(path, _timed_entry([a], {(8, 128): [1.0]}, **{field: "other"}), extend=True)


def test_tune_samples_missing_builds_only_the_shapes_an_entry_lacks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tune_samples", ROOT / "bench" / "tune_samples.py")
    tune_samples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tune_samples)
    from tilec.tuning.shapes import NAMED

    entry_sizes = [s["sizes"] for e in json.loads((ROOT / "samples" / "softmax.tune.json").read_text())["entries"]
                   if e["defines"] == {"dtype": "bf16"} for s in e["shapes"]]
    lacking = tune_samples.missing_shapes("softmax", ["dtype=bf16"], ["--shapes", "rows", "--size", "M=3,N=5"], "sm90")
    want = [s for s in [{"M": 3, "N": 5}, *NAMED["rows"]] if s not in entry_sizes]
    assert lacking == [arg for s in want for arg in ("--size", f"M={s['M']},N={s['N']}")]
    assert tune_samples.missing_shapes("softmax", ["dtype=f32"], ["--shapes", "rows"], "sm90") is None  # no entry


def test_collect_stores_the_configuration_limit(tmp_path, monkeypatch):
    from tilec.cli import tune as tune_cli
    from tilec.tuning import database

    monkeypatch.setattr(database, "collect", lambda folder: _entry())
    (tmp_path / "plan.json").write_text("{}")
    path = tmp_path / "k.tune.json"
    assert tune_cli._collect(str(tmp_path), str(path), True, 6) == 0
    assert database.load(path)["entries"][0]["max_configs"] == 6
    assert tune_cli._collect(str(tmp_path), str(path), True) == 0  # collected again without it: kept
    assert database.load(path)["entries"][0]["max_configs"] == 6


def test_tune_show_prints_the_selection_and_rejects_a_bad_limit(tmp_path):
    db = _db(tmp_path, {**_entry(), "timed": None})
    r = _tilec("tune", "--show", str(db))
    assert r.returncode == 0, r.stderr
    assert "2 configurations (at most 4)" in r.stdout and "M=4096,N=128: cfg1, 1.00000 ms stored, 1.00x" in r.stdout
    r = _tilec("tune", "--show", str(db), "--max-configs", "1")
    assert r.returncode == 0 and "1 configurations (at most 1)" in r.stdout
    assert "M=4096,N=128: cfg0, 2.00000 ms stored, 2.00x its best 1.00000" in r.stdout
    r = _tilec("tune", "--show", str(db), "--max-configs", "0")
    assert r.returncode == 2 and "--max-configs 0" in r.stderr and "Traceback" not in r.stderr
    db.write_text(json.dumps({"tilec_tune_db": 1, "entries": [{**_entry(), "max_configs": "six"}]}))
    r = _tilec("tune", "--show", str(db))
    assert r.returncode == 2 and "max_configs is 'six'" in r.stderr and "Traceback" not in r.stderr


def test_merged_source_keeps_the_cluster_header_at_file_scope(tmp_path):
    """A clustered variant's source carries tilec_cluster.h after the device header; merged with a variant
    without clusters, it goes once to file scope (inside the variant's namespace, its `namespace tl` hid the
    device header's `tl`, and nvcc failed on every `tl::` of that variant: gemm's 64x128 on a (2, 1) cluster)."""
    from tilec.outputs import merged_source
    from tilec.targets.cuda.codegen import CLUSTER_HEADER, HEADER
    from tilec.targets.cuda.toolchain import nvcc_version

    head, cluster = HEADER.read_text(), CLUSTER_HEADER.read_text()
    tail = "#define TL_INF __int_as_float(0x7f800000)\n"
    plain = "\n".join(["// k", head, tail, 'extern "C" __global__ void k__cfg0(float* x) { x[0] = 1.0f; }'])
    clustered = "\n".join(["// k", head, cluster, tail, 'extern "C" __global__ void k__cfg1(float* x) {\n'
                            "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n  tl::cluster_sync();\n#endif\n"
                            "  x[0] = tl::ceildiv(3, 2);\n}"])
    for sources, names in (([plain, clustered], ["k__cfg0", "k__cfg1"]), ([clustered, plain], ["k__cfg1", "k__cfg0"])):
        text = merged_source(sources, names, (head, (cluster,)))
        assert text.count(cluster) == 1 and text.count(head) == 1
        assert text.index(head) < text.index(cluster) < text.index("namespace tilec_variant1")
        assert "k__cfg0" in text and "k__cfg1" in text
    if nvcc_version() is None:
        return
    cu = tmp_path / "m.cu"
    cu.write_text(merged_source([plain, clustered], ["k__cfg0", "k__cfg1"], (head, (cluster,))))
    r = subprocess.run(["nvcc", "-arch=sm_90a", "--ptx", str(cu), "-o", str(tmp_path / "m.ptx")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def _db(tmp_path, entry=None) -> Path:
    path = tmp_path / "k.tune.json"
    path.write_text(json.dumps({"tilec_tune_db": 1, "entries": [entry or _entry()]}))
    return path


def test_database_entry_applies_only_to_its_target_and_defines(tmp_path):
    from tilec.tuning.database import entry_for

    src = _write(tmp_path)
    _db(tmp_path)  # found beside the source
    assert entry_for(src, CompileOptions.make("sm90")) is not None
    assert entry_for(src, CompileOptions.make("sm80")) is None
    # no bf16 entry: the f16 one serves it (the same tiles, the same tensor-core rate); f32 has no such twin
    assert entry_for(src, CompileOptions.make("sm90", defines={"dtype": "bf16"})) is not None
    assert entry_for(src, CompileOptions.make("sm90", defines={"dtype": "f32"})) is None
    assert entry_for(src, CompileOptions.make("sm90", defines={"dtype": "f16"})) is not None  # the default again
    assert entry_for(src, CompileOptions.make("sm90", defines={"block_M": 4})) is None  # explicit config wins
    assert entry_for(src, CompileOptions.make("sm90", tune_db="")) is None
    os.environ["TILEC_TUNE_DB"] = ""  # set and empty: none
    try:
        assert entry_for(src, CompileOptions.make("sm90")) is None
    finally:
        del os.environ["TILEC_TUNE_DB"]


def test_database_prefers_the_exact_entry_to_its_f16_bf16_twin(tmp_path):
    from tilec.tuning.database import entry_for

    src = _write(tmp_path)
    f16, bf16 = _entry(gpu="f16 entry"), _entry(gpu="bf16 entry", defines={"dtype": "bf16"})
    for order in ([f16, bf16], [bf16, f16]):
        (tmp_path / "k.tune.json").write_text(json.dumps({"tilec_tune_db": 1, "entries": order}))
        assert entry_for(src, CompileOptions.make("sm90", defines={"dtype": "bf16"}))["gpu"] == "bf16 entry"
        assert entry_for(src, CompileOptions.make("sm90"))["gpu"] == "f16 entry"
    (tmp_path / "k.tune.json").write_text(json.dumps({"tilec_tune_db": 1, "entries": [bf16]}))
    assert entry_for(src, CompileOptions.make("sm90"))["gpu"] == "bf16 entry"  # and the other way round


def test_artifact_carries_the_tuned_configurations_and_dispatch(tmp_path):
    src = _write(tmp_path)
    _db(tmp_path)
    art = tilec.compile(str(src), "sm90", emit="cu")
    m = json.loads(art.manifest)
    names = [k["name"] for k in m["kernels"]]
    assert names == ["scale__cfg0", "scale__cfg1"]
    table = m["dispatch"]["scale"]
    assert [c["kernel"] for c in table["configs"]] == names
    assert [r["config"] for r in table["rules"]] == [1, 0, 0]  # the one serving two shapes came first
    from tilec.runtime.module import Module

    mod = Module(b"", m)  # the runtime's view: one public kernel over the variants
    assert list(mod.kernels) == ["scale"] and [v.name for v in mod.scale.variants] == names
    text = art.data.decode()
    assert text.count("tilec_cuda.h --") == 1  # one device header for both variants
    assert "scale__cfg0(" in text and "scale__cfg1(" in text
    # without the database (or with an explicit configuration): one kernel, as before
    plain = json.loads(tilec.compile(str(src), "sm90", emit="cu", options=CompileOptions(tune_db="")).manifest)
    assert [k["name"] for k in plain["kernels"]] == ["scale"] and "dispatch" not in plain


def test_database_change_is_a_cache_miss(tmp_path):
    src = _write(tmp_path)
    db = _db(tmp_path)
    first = tilec.compile(str(src), "sm90", emit="cu")
    assert not first.from_cache
    assert tilec.compile(str(src), "sm90", emit="cu").from_cache
    e = _entry()
    e["shapes"] = e["shapes"][:1]
    db.write_text(json.dumps({"tilec_tune_db": 1, "entries": [e]}))
    again = tilec.compile(str(src), "sm90", emit="cu")
    assert not again.from_cache
    assert [k["name"] for k in json.loads(again.manifest)["kernels"]] == ["scale"]  # one configuration left


def test_merged_source_builds_with_the_toolchain(tmp_path):
    from tilec.targets.cuda.toolchain import nvcc_version

    if nvcc_version() is None:
        pytest.skip("nvcc is not installed")
    src = _write(tmp_path)
    _db(tmp_path)
    art = tilec.compile(str(src), "sm90", emit="cubin")
    assert b"scale__cfg1" in art.data


WHEN_SPACE = SPACE.replace("webgpu=(8, 64))", "webgpu=(8, 64),\n"
                           "                           when=N >= 2 * block_N and M % block_M == 0 or M > 100000)")


def test_when_conditions_reach_the_dispatch_table_with_the_consts_folded(tmp_path):
    src = _write(tmp_path, WHEN_SPACE)
    _db(tmp_path)
    table = json.loads(tilec.compile(str(src), "sm90", emit="cu").manifest)["dispatch"]["scale"]
    assert [(c["consts"]["block_M"], c["when"]) for c in table["configs"]] == [
        (8, ["or", ["and", [">=", "N", 128], ["==", ["%", "M", 8], 0]], [">", "M", 100000]]),
        (4, ["or", ["and", [">=", "N", 256], ["==", ["%", "M", 4], 0]], [">", "M", 100000]])]
    # folded to a constant: true leaves the config unconditional, and a plain build ignores when= altogether
    always = _write(tmp_path, SPACE.replace("webgpu=(8, 64))", "webgpu=(8, 64), when=block_M > 0 or N > 1)"))
    assert all("when" not in c for c in json.loads(tilec.compile(str(always), "sm90", emit="cu").manifest)
               ["dispatch"]["scale"]["configs"])
    assert tilec.compile(str(src), "sm90", emit="cu", options=CompileOptions(tune_db="")).manifest


def test_a_cached_candidate_keeps_its_when_condition(tmp_path, monkeypatch):
    """A tune build whose candidates come from the compile cache records each one's when= condition and resources
    as a fresh build does. The cache calls no on_compiled hook, and until s32 such a plan lost every condition: the
    database then let a configuration serve tuned shapes where it may not run (softmax's block of four 1024-wide
    rows at 3001-long rows), and the build's dispatch skipped those shapes' rules."""
    from tilec.tuning.database import collect
    from tilec.tuning.plan import local_build, prepare

    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    src = _write(tmp_path, WHEN_SPACE)
    opts = CompileOptions(targets=("sm90",))
    shapes = [{"M": 64, "N": 100}, {"M": 4096, "N": 512}]
    plans = [prepare(str(src), opts, shapes, tmp_path / name, emit="cu", build=local_build(1))
             for name in ("fresh", "cached")]
    fresh, cached = ([c for c in plan.to_json()["candidates"] if c["status"] == "built"] for plan in plans)
    assert [c["when"] for c in cached] == [c["when"] for c in fresh] and all(c["when"] is not True for c in fresh)
    assert [(c["shared_bytes"], c["threads"]) for c in cached] == [(c["shared_bytes"], c["threads"]) for c in fresh]
    assert all(c["threads"] for c in cached)
    times = {str(c["index"]): {"check": "ok", "times": {"M=64,N=100": 1.0, "M=4096,N=512": 1.0}} for c in cached}
    (tmp_path / "cached" / "results.json").write_text(json.dumps({"version": 1, "gpu": "test GPU",
                                                                  "candidates": times}))
    assert len(collect(tmp_path / "cached")["conditions"]) == len(cached)


@pytest.mark.parametrize("when, message, at", [
    ("Q > 1", "when= reads 'Q', which is neither a const nor a runtime size of the kernel (its sizes: M, N)", "Q"),
    ("N > 1.5", "when= takes integers", "1.5"),
    ("dtype == 1", "'dtype' is not an integer const or a runtime size", "dtype =="),
])
def test_when_errors_point_at_the_condition(tmp_path, when, message, at):
    text = SPACE.replace("webgpu=(8, 64))", f"webgpu=(8, 64), when={when})")
    src = _write(tmp_path, text)
    with pytest.raises(CompileError) as e:
        tilec.compile(str(src), "sm90", emit="cu", options=CompileOptions(tune_db=""))
    line = text.splitlines()[2]
    shown = _error_text(e.value)
    assert message in shown and f"k.tile:3:{line.index(at, line.index('when=')) + 1}: error:" in shown, shown


def test_dispatch_passes_over_variants_whose_condition_is_false():
    from tilec.manifest import condition_value
    from tilec.runtime.dispatch import choose

    table = {"sizes": ["M", "N"],
             "configs": [{"kernel": "k__cfg0", "when": [">=", "N", 128]},
                         {"kernel": "k__cfg1", "when": ["and", [">=", "N", 256], ["==", ["%", "M", 4], 0]]},
                         {"kernel": "k__cfg2"}],
             "rules": [{"at": {"M": 4096, "N": 128}, "config": 1}, {"at": {"M": 8, "N": 4096}, "config": 0}]}
    assert choose(table, {"M": 4096, "N": 300}) == 1  # nearest, and its condition holds
    assert choose(table, {"M": 4094, "N": 300}) == 0  # M % 4 != 0: the next nearest rule's variant
    assert choose(table, {"M": 4096, "N": 100}) == 2  # no rule's variant may run: the first variant that may
    table["configs"][2]["when"] = False
    assert choose(table, {"M": 4096, "N": 100}) == 1  # none may run: the nearest of all
    # // and % round toward minus infinity (as the source's), and a zero divisor makes the value 0
    assert [condition_value([op, a, b], {}) for op, a, b in [("//", -7, 2), ("%", -7, 2), ("//", 7, 0)]] == [-4, 1, 0]


@pytest.mark.parametrize("classes", [False, True], ids=["one_class", "aligned_and_odd_rows"])
def test_c_dispatcher_chooses_as_the_runtime_does_under_conditions(tmp_path, classes):
    """The generated K_config against tilec.runtime.dispatch.choose at every size of a grid around the tuned
    shapes and the conditions' edges (floor division and modulo of negative values included); with the rules in
    two alignment classes too (odd and even N among them and the grid)."""
    import itertools
    import shutil

    from tilec.runtime.dispatch import choose
    from tilec.targets.c_launcher.dispatch import dispatchers
    from tilec.targets.c_launcher.header import CUDA_API

    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("a C compiler is needed")
    table = {"sizes": ["M", "N"],
             "configs": [{"kernel": "k__cfg0", "when": [">=", "N", ["*", 2, ["//", ["neg", "M"], -3]]]},
                         {"kernel": "k__cfg1", "when": ["or", ["==", ["%", ["-", 5, "M"], 4], 1],
                                                        ["not", ["<", "N", 300]]]},
                         {"kernel": "k__cfg2", "when": ["!=", ["//", "N", ["-", "M", 7]], 0]}],
             "rules": [{"at": {"M": 4096, "N": 128}, "config": 1}, {"at": {"M": 8, "N": 4096}, "config": 0},
                       {"at": {"M": 100, "N": 100}, "config": 2}]}
    if classes:
        table["rules"] += [{"at": {"M": 6, "N": 4099}, "config": 2}, {"at": {"M": 4093, "N": 127}, "config": 0}]
        table["aligned"] = ["==", ["%", ["*", "N", 2], 16], 0]
        for r in table["rules"]:
            r["aligned"] = r["at"]["N"] * 2 % 16 == 0
    entry = {"name": "k__cfg0", "sizes": ["M", "N"],
             "params": [{"name": "X", "kind": "tensor", "dtype": "f32"}]}
    code, _ = dispatchers({"k": table}, [entry], CUDA_API, "", False)
    config_fn = code[:code.index("/* k_launch:")]
    grid = list(itertools.product([1, 3, 6, 7, 8, 9, 100, 101, 4093, 4096], [1, 99, 127, 128, 255, 256, 299, 300,
                                                                           4096, 5000]))
    points = ", ".join(f"{{{m}, {n}}}" for m, n in grid)
    main = ("int main(void) {\n  static const int at[][2] = {" + points + "};\n"
            "  for (unsigned i = 0; i < sizeof at / sizeof at[0]; i++)\n"
            "    printf(\"%d\\n\", k_config(at[i][0], at[i][1]));\n"
            "  return 0;\n}\n")
    (tmp_path / "c.c").write_text("#include <stdio.h>\n" + config_fn.replace("static inline int k_config",
                                                                            "static int k_config") + main)
    subprocess.run([gcc, "-std=c11", "-Wall", "-Wextra", "-Werror", "c.c", "-o", "c"], cwd=tmp_path, check=True)
    got = subprocess.run([str(tmp_path / "c")], capture_output=True, text=True, check=True).stdout.split()
    want = [str(choose(table, {"M": m, "N": n})) for m, n in grid]
    assert got == want
    assert len(set(want)) == 3  # every variant is chosen somewhere on the grid


def test_dispatch_serves_odd_rows_from_the_odd_tuned_shapes():
    """A table whose tuned shapes have rows of both alignments serves a launch from those of its own, unless none
    of them may run there; the build gives a table that key only when its shapes have both (a row sample's
    database has odd row lengths, gemm's none)."""
    from tilec.manifest import condition_holds, rows_aligned_condition
    from tilec.outputs import _mark_row_alignment
    from tilec.runtime.dispatch import choose

    params = [{"name": "X", "kind": "tensor", "dtype": "bf16", "shape": ["M", "N"]},
              {"name": "W", "kind": "tensor", "dtype": "f32", "shape": ["N"]},
              {"name": "eps", "kind": "scalar", "dtype": "f32"}]
    tree = rows_aligned_condition(params)
    assert [condition_holds(tree, {"N": n}) for n in (4096, 4100, 4099, 4104)] == [True, False, False, True]
    assert rows_aligned_condition([{"kind": "tensor", "dtype": "f8e4m3", "shape": ["K", 24]}]) is False
    assert condition_holds(rows_aligned_condition([{"kind": "tensor", "dtype": "f8e4m3", "shape": ["M", "K"]}]),
                           {"K": 48})

    def records(at):
        return {"dispatch": {"k": {"sizes": ["M", "N"], "configs": [{"kernel": f"k__cfg{i}"} for i in range(3)],
                                   "rules": [{"at": a, "config": i} for i, a in enumerate(at)]}}}

    kernels = [{"name": "k__cfg0", "params": params}]
    one_class = records([{"M": 4096, "N": 2048}, {"M": 64, "N": 4096}])
    _mark_row_alignment(one_class, kernels)
    assert "aligned" not in one_class["dispatch"]["k"]
    rec = records([{"M": 4096, "N": 2048}, {"M": 64, "N": 4096}, {"M": 4096, "N": 50257}])
    _mark_row_alignment(rec, kernels)
    table = rec["dispatch"]["k"]
    assert table["aligned"] == tree and [r["aligned"] for r in table["rules"]] == [True, True, False]
    assert choose(table, {"M": 6156, "N": 2048}) == 0
    assert choose(table, {"M": 6156, "N": 2047}) == 2  # nearer to (4096, 2048), but of the other class
    assert choose(table, {"M": 64, "N": 4099}) == 2
    table["configs"][2]["when"] = ["<=", "N", 8192]  # the odd shape's variant may not run: the nearest of all
    assert choose(table, {"M": 6156, "N": 50001}) == 0
    assert choose(table, {"M": 6156, "N": 2047}) == 2


def test_committed_row_entries_give_odd_launches_their_own_class(tmp_path, monkeypatch):
    """rmsnorm's committed entry was tuned at odd row lengths (3001, 6001, 7001, 50257, 100003) and aligned ones:
    its build's dispatch table has the alignment condition, and an odd launch near an aligned tuned shape runs an
    odd shape's winner (s31: the sweep's odd rmsnorm rows went from 2.04 to 2.27 of torch's speed). gemm's entries
    have aligned rows only, so their tables stay as they were."""
    from tilec.runtime.dispatch import choose

    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    rows = json.loads(tilec.compile(str(ROOT / "samples" / "rmsnorm.tile"), "sm90", emit="cu",
                                    options=CompileOptions(defines=(("dtype", "bf16"),))).manifest)
    table = rows["dispatch"]["rmsnorm"]
    assert table["aligned"] == ["==", ["%", ["*", "N", 2], 16], 0]
    odd = [r for r in table["rules"] if not r["aligned"]]
    assert {r["at"]["N"] for r in odd} == {3001, 6001, 7001, 50257, 100003}
    assert all(r["aligned"] == (r["at"]["N"] % 8 == 0) for r in table["rules"])
    assert choose(table, {"M": 1500, "N": 3001}) == next(r["config"] for r in odd if r["at"]["N"] == 3001)
    assert choose(table, {"M": 12000, "N": 5003}) in {r["config"] for r in odd}  # 12000 x 5000 is an aligned one
    gemm = json.loads(tilec.compile(str(ROOT / "samples" / "gemm.tile"), "sm90", emit="cu").manifest)
    assert "aligned" not in gemm["dispatch"]["gemm"]


def test_dispatch_picks_the_nearest_tuned_shape(monkeypatch):
    """The public name launches the variant of the nearest tuned shape, each with its own grid and argument
    block, choosing once per shape (the plan cache), through the same launch path as a plain kernel."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_cuda import FakeDriver, install

    from tilec.runtime.dispatch import DispatchKernel, choose
    from tilec.runtime.module import Module

    table = {"sizes": ["M", "N"], "configs": [{"kernel": "k__cfg0"}, {"kernel": "k__cfg1"}],
             "rules": [{"at": {"M": 4096, "N": 128}, "config": 0}, {"at": {"M": 8, "N": 4096}, "config": 1}]}
    assert choose(table, {"M": 3000, "N": 100}) == 0
    assert choose(table, {"M": 1, "N": 5000}) == 1

    def variant(name, block_n):
        return {"name": name, "sizes": ["M", "N"], "threads": 128, "shared_bytes": 0,
                "grid": [f"ceildiv(N, {block_n})", "M", "1"],
                "params": [{"name": "X", "kind": "tensor", "dtype": "f32", "shape": ["M", "N"], "output": False},
                           {"name": "alpha", "kind": "scalar", "dtype": "f32"},
                           {"name": "Y", "kind": "tensor", "dtype": "f32", "shape": ["M", "N"], "output": True}]}

    manifest = {"manifest_version": 1, "kind": "cubin", "archs": ["sm_90a"], "driver_api_version": 13000,
                "kernels": [variant("k__cfg0", 128), variant("k__cfg1", 256)], "dispatch": {"k": table}}
    fake = install(monkeypatch, FakeDriver())
    mod = Module(b"\0", manifest)
    fake.watch(mod)
    assert list(mod.kernels) == ["k"] and isinstance(mod.k, DispatchKernel)

    class Dev:
        def __init__(self, ptr, shape):
            self.shape = shape
            self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": "<f4",
                                             "strides": None, "version": 3}

    mod.k(Dev(0x1000, (16, 4000)), 2.0, Dev(0x2000, (16, 4000)))
    mod.k(Dev(0x3000, (3000, 100)), 3.0, Dev(0x4000, (3000, 100)))
    mod.k(Dev(0x5000, (16, 4000)), 4.0, Dev(0x6000, (16, 4000)))  # the first shape again: its cached plan
    assert [(x.fn, x.grid, x.args) for x in fake.launches] == [
        ("k__cfg1", (16, 16, 1), [0x1000, 2.0, 0x2000, 16, 4000]),
        ("k__cfg0", (1, 3000, 1), [0x3000, 3.0, 0x4000, 3000, 100]),
        ("k__cfg1", (16, 16, 1), [0x5000, 4.0, 0x6000, 16, 4000])]
    assert len(mod.k._arguments.plans) == 2
    assert mod.k.launch_config({"M": 1, "N": 5000}) == ((20, 1, 1), 128)


def test_worker_check_rejects_a_wrong_kernel(tmp_path):
    """The worker's correctness check against the interpreter's outputs, with numpy arrays and stand-in kernels."""
    from tilec.runtime import tune_worker
    from tilec.tuning.plan import write_check

    src = _write(tmp_path)
    module = tilec.compile(str(src)).module
    check = write_check(tmp_path, module, module.kernels[0], {"M": 7, "N": 100})
    plan = {"check": check}
    expected = np.frombuffer((tmp_path / check["args"][1]["expected"]).read_bytes(), np.float16).reshape(7, 100)
    x = np.frombuffer((tmp_path / check["args"][0]["file"]).read_bytes(), np.float16).reshape(7, 100)
    assert np.allclose(expected.astype(np.float32), 2 * x.astype(np.float32))  # the interpreter ran

    def right(X, Y):
        Y[...] = X * np.float16(2)

    def wrong(X, Y):
        Y[...] = X * np.float16(2)
        Y[3, 99] += np.float16(1)

    arrays = tune_worker.Arrays(None)
    assert tune_worker.check(right, tmp_path, plan, arrays)["check"] == "ok"
    assert tune_worker.check(wrong, tmp_path, plan, arrays)["check"] == "wrong"


def _tilec(*args, cwd=ROOT):
    env = {k: v for k, v in os.environ.items() if k != "TILEC_TUNE_DB"}
    env.update(PYTHONPATH=str(ROOT), NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "tilec", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_tune_cli_help_and_errors(tmp_path):
    r = _tilec("tune", "--help")
    assert r.returncode == 0 and "--build-dir" in r.stdout and "--collect" in r.stdout
    src = _write(tmp_path)
    r = _tilec("tune", str(src), "--size", "M=abc")
    assert r.returncode == 2 and "not an integer" in r.stderr and "Traceback" not in r.stderr
    r = _tilec("tune", str(src), "--size", "M=100", "--build-dir", str(tmp_path / "b"))
    assert r.returncode == 2 and "leaves out N" in r.stderr and "Traceback" not in r.stderr
    r = _tilec("tune", "--collect", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_build_folder_then_collect_then_build_with_the_database(tmp_path):
    """`tilec tune --build-dir` prunes and compiles (through NVRTC), the worker's results come back (written here
    as the worker would), --collect writes the database beside the source, and a plain build then reads it."""
    from tilec.targets.cuda.nvrtc import find_lib

    if find_lib() is None:
        pytest.skip("NVRTC is not installed")
    src = _write(tmp_path)
    folder = tmp_path / "b"
    r = _tilec("tune", str(src), "--target", "sm90", "--size", "M=4096,N=128", "--size", "M=8,N=8192",
               "--build-dir", str(folder), "-j", "1")
    assert r.returncode == 0, r.stderr
    plan = json.loads((folder / "plan.json").read_text())
    statuses = [c["status"] for c in plan["candidates"]]
    assert statuses.count("pruned") == 1  # block_N=64 with 128 threads breaks where=
    built = [c for c in plan["candidates"] if c["status"] == "built"]
    assert all((folder / c["artifact"]).is_file() for c in built)
    # what the worker would write on the GPU: a time per candidate and shape
    times = {str(c["index"]): {"check": "ok", "times": {"M=4096,N=128": 1.0 + c["index"],
                                                        "M=8,N=8192": 9.0 - c["index"]}} for c in built}
    (folder / "results.json").write_text(json.dumps({"version": 1, "gpu": "test GPU", "cuda_driver": 13000,
                                                     "cc": "9.0", "date": "2026-12-01", "candidates": times}))
    r = _tilec("tune", "--collect", str(folder))
    assert r.returncode == 0, r.stderr
    db = json.loads((tmp_path / "k.tune.json").read_text())
    (entry,) = db["entries"]
    assert entry["gpu"] == "test GPU" and entry["target"] == "sm90" and len(entry["shapes"]) == 2
    assert entry["shapes"][0]["winner"]["config"] == built[0]["config"]
    r = _tilec(str(src), "--target", "sm90", "--emit", "cu", "-o", str(tmp_path / "k.cu"))
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "k.cu.json").read_text())
    assert "dispatch" in m and m["tuning"]["gpu"] == "test GPU"
    # a later run at one more shape (its folder as the worker leaves it), added with --extend: three shapes
    plan["shapes"] = [{"M": 256, "N": 768}]
    (folder / "plan.json").write_text(json.dumps(plan))
    times = {str(c["index"]): {"check": "ok", "times": {"M=256,N=768": 2.0 + c["index"]}} for c in built}
    (folder / "results.json").write_text(json.dumps({"version": 1, "gpu": "test GPU", "cuda_driver": 13000,
                                                     "cc": "9.0", "date": "2026-12-02", "candidates": times}))
    r = _tilec("tune", "--collect", str(folder), "--extend")
    assert r.returncode == 0, r.stderr
    assert "1 shapes, 3 with the entry's others" in r.stdout
    (entry,) = json.loads((tmp_path / "k.tune.json").read_text())["entries"]
    assert [s["sizes"] for s in entry["shapes"]] == [{"M": 4096, "N": 128}, {"M": 8, "N": 8192}, {"M": 256, "N": 768}]


def test_c_launcher_dispatches_over_the_variants(tmp_path):
    import shutil

    from tilec.targets.cuda.toolchain import cuda_include_dir, nvcc_version

    if nvcc_version() is None or shutil.which("gcc") is None or cuda_include_dir() is None:
        pytest.skip("nvcc, gcc and cuda.h are needed")
    src = _write(tmp_path)
    _db(tmp_path)
    header = tmp_path / "k.h"
    art = tilec.compile(str(src), "sm90", emit="header", output_name="k.h")
    header.write_bytes(art.data)
    text = art.data.decode()
    assert "static inline CUresult scale_launch(" in text
    assert "case 1: return scale__cfg1_launch(" in text
    main = tmp_path / "main.c"
    assert "case 1: return scale__cfg1_check_sizes(" in text  # the chosen variant's size checks
    main.write_text('#include "k.h"\nint main(void) { char m[64]; scale_check_device(0, m, sizeof m);\n'
                    '  if (scale_check_sizes(7, 100, m, sizeof m) != CUDA_SUCCESS) return 2;\n'
                    '  return scale_launch(0, 0, 0, 7, 100) == CUDA_SUCCESS; }\n')
    r = subprocess.run(["gcc", "-std=c11", "-fsyntax-only", "-I", cuda_include_dir(), "-I", str(tmp_path), str(main)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_progress_uses_rich_on_a_terminal_only(monkeypatch, capsys):
    import types

    from tilec.cli.tune import _Progress

    calls = []

    class FakeProgress:
        def __init__(self, **kw):
            calls.append("init")

        def start(self):
            calls.append("start")

        def add_task(self, what, total):
            calls.append(("task", what, total))
            return what

        def update(self, task, completed):
            calls.append(("update", task, completed))

        def stop(self):
            calls.append("stop")

    rich = types.ModuleType("rich")
    rich_progress = types.ModuleType("rich.progress")
    rich_progress.Progress = FakeProgress
    monkeypatch.setitem(sys.modules, "rich", rich)
    monkeypatch.setitem(sys.modules, "rich.progress", rich_progress)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    p = _Progress(quiet=False)
    p("compile", 1, 3)
    p.close()
    assert calls == ["init", "start", ("task", "compile", 3), ("update", "compile", 1), "stop"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    p = _Progress(quiet=False)
    p("compile", 3, 3)
    assert "compile: 3/3" in capsys.readouterr().err
    q = _Progress(quiet=True)
    q("compile", 3, 3)
    assert capsys.readouterr().err == ""


def test_check_on_cpu_rejects_a_wrong_lowering_before_building(tmp_path):
    """--check-on-cpu: each candidate's SIMT IR runs in the SIMT interpreter at the check shape; a configuration
    whose output differs from the Tile IR interpreter's (here: the kernel scales by block_N / 128) is rejected."""
    from tilec.tuning.plan import prepare

    src = _write(tmp_path, SPACE.replace("* 2.0", "* f32(block_N) / 64.0"))
    plan = prepare(str(src), CompileOptions.make("sm80"), [{"M": 4096, "N": 128}], tmp_path / "b", emit="cu",
                   jobs=1, check_on_cpu=True)
    by_status = {}
    for c in plan.candidates:
        by_status.setdefault(c.status, []).append(c.config["block_N"])
    assert sorted(by_status["built"]) == [128, 128]  # the reference's block_N, at both thread counts
    assert sorted(by_status["wrong"]) == [64, 256, 256]  # the pruned one (64 with 128 threads) never ran
    assert by_status["pruned"] == [64]
    assert all("differs from the interpreter" in c.reason for c in plan.candidates if c.status == "wrong")


@pytest.mark.parametrize("split_k", [1, 3, 4])
def test_splitk_gemm_matches_numpy_at_a_ragged_shape(split_k):
    from tilec.interp.run import run_kernel

    kernel = tilec.compile(str(ROOT / "samples/gemm_splitk.tile"),
                           defines={"split_k": split_k, "block_M": 64, "block_N": 64, "block_K": 32}).module.kernels[0]
    rng = np.random.default_rng(5)
    m, n, k = 70, 45, 200  # 7 K tiles: split 3 ways leaves the last block one tile, 4 ways a short share
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(np.float32)  # C += A @ B
    args = run_kernel(kernel, {"A": a, "B": b, "C": c.copy()})
    want = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(args["C"], want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_splitk_lowering_passes_the_simt_interpreter(tmp_path, target):
    from tilec.tuning.plan import cpu_check, write_check

    path = str(ROOT / "samples/gemm_splitk.tile")
    config = {"split_k": 3, "block_M": 64, "block_N": 128, "block_K": 64, "threads": 128, "num_stages": 4}
    module = tilec.compile(path, defines=config).module
    check = write_check(tmp_path, module, module.kernels[0], {"M": 70, "N": 45, "K": 400})
    assert cpu_check(tilec.compile(path, target, defines=config), tmp_path, check) is None


def test_worker_names_torch_dtypes():
    """The worker's torch arrays (bf16 and fp8 are uploaded as raw bits, then viewed as the torch dtype) use the
    runtime's name table; a stand-in torch module stands for the real one, which this machine may lack."""
    import types

    from tilec.runtime import tune_worker

    fake = types.SimpleNamespace(bfloat16="bf16 dtype", float8_e4m3fn="e4m3 dtype", float16="f16 dtype")
    assert tune_worker._torch_dtype(fake, "bf16") == "bf16 dtype"
    assert tune_worker._torch_dtype(fake, "f8e4m3") == "e4m3 dtype"
    assert tune_worker._torch_dtype(fake, "f16") == "f16 dtype"


# ---------------------------------------------------------------- split-K in gemm.tile (two launches, a workspace)

GEMM = ROOT / "samples" / "gemm.tile"
SPLIT_TILE = {"block_M": 64, "block_N": 128, "block_K": 64, "threads": 128, "num_stages": 4}


@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize(("split_k", "m", "n", "k"), [(2, 128, 256, 512), (4, 70, 200, 333), (4, 64, 128, 100),
                                                       (8, 1, 200, 1000), (8, 13, 130, 333)])
def test_split_k_gemm_matches_numpy(split_k, m, n, k, trans_B):
    """Regular and ragged shapes: K = 333 is 6 tiles of 64, so 4 shares of 2 leave the last one past K; K = 100 gives
    two shares nothing at all (their workspace planes hold zeros, which the sum must still read); decode rows (M = 1,
    13) with 8 shares, K = 1000's 16 tiles two a share, K = 333's 6 leaving two shares empty."""
    from tilec.interp.run import public_kernels, run_any

    front = tilec.compile(str(GEMM), defines={**SPLIT_TILE, "split_k": split_k, "trans_B": trans_B}).module
    (unit,) = public_kernels(front)
    assert [st.kernel for st in unit.stages] == ["gemm__stage0", "gemm__stage1"]
    assert [b.name for b in unit.scratch] == ["Partial"]
    rng = np.random.default_rng(split_k + m)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k) if trans_B else (k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(np.float16)  # overwritten, not accumulated into
    run_any(front, unit, {"A": a, "B": b, "C": c})
    want = a.astype(np.float64) @ (b.T if trans_B else b).astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=1e-2, atol=2e-2 * np.sqrt(k))


def test_split_k_one_is_the_single_launch_gemm():
    from tilec.interp.run import public_kernels
    from tilec.ir import tile as T

    (unit,) = public_kernels(tilec.compile(str(GEMM), defines={**SPLIT_TILE, "split_k": 1}).module)
    assert isinstance(unit, T.Kernel) and unit.name == "gemm"


@pytest.mark.parametrize(("target", "split_k", "trans_B", "sizes"), [
    ("sm80", 4, False, {"M": 70, "N": 200, "K": 333}),
    ("sm90", 4, False, {"M": 70, "N": 45, "K": 333}),
    ("sm90", 8, False, {"M": 3, "N": 45, "K": 333}),
    ("sm90", 4, True, {"M": 5, "N": 45, "K": 333})])
def test_split_k_gemm_lowering_passes_the_simt_interpreter(tmp_path, target, split_k, trans_B, sizes):
    """Both stages lowered (sm90: stage 0 warp-specialized with TMA loads, ragged K read as zeros), run lane by lane
    against the interpreter's result for the whole sequence; decode shapes (M = 3, 5) with 8 shares (two past K) and
    with B stored [N, K] (the split-K configuration of the f16 trans_B database entry)."""
    from tilec.interp.run import public_kernels
    from tilec.tuning.plan import cpu_check, write_check

    config = {**SPLIT_TILE, "split_k": split_k, "trans_B": trans_B}
    module = tilec.compile(str(GEMM), defines=config).module
    check = write_check(tmp_path, module, public_kernels(module)[0],
                        dict(sizes))
    lowered = tilec.compile(str(GEMM), target, defines=config)
    if target == "sm90":
        stage0 = next(k for k in lowered.simt.kernels if k.name == "gemm__stage0")
        assert stage0.attrs.get("tensor_maps") and stage0.threads == 128 + 128  # the producer warpgroup added
    assert cpu_check(lowered, tmp_path, check) is None


FP8 = ROOT / "samples" / "fp8_gemm.tile"
FP8_SPLIT_TILE = {"block_M": 64, "block_N": 128, "block_K": 128, "threads": 128, "num_stages": 4}


@pytest.mark.parametrize(("split_k", "m", "n", "k"), [(2, 64, 128, 512), (4, 13, 200, 700), (8, 1, 130, 1000)])
def test_split_k_fp8_gemm_matches_numpy(split_k, m, n, k):
    """fp8_gemm's split-K: the shares' planes summed and scaled by scale_a * scale_b in the second launch; ragged
    and decode shapes (K = 700: 6 tiles of 128, so 4 shares of 2 leave the last one empty)."""
    import ml_dtypes

    from tilec.interp.run import public_kernels, run_any

    front = tilec.compile(str(FP8), defines={**FP8_SPLIT_TILE, "split_k": split_k}).module
    (unit,) = public_kernels(front)
    assert [st.kernel for st in unit.stages] == ["fp8_gemm__stage0", "fp8_gemm__stage1"]
    rng = np.random.default_rng(split_k + m)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    c = rng.standard_normal((m, n)).astype(ml_dtypes.bfloat16)  # overwritten
    run_any(front, unit, {"A": a, "B": b, "scale_a": 0.5, "scale_b": 0.25, "C": c})
    want = 0.125 * a.astype(np.float64) @ b.astype(np.float64).T
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-2, atol=2e-2 * np.sqrt(k))


@pytest.mark.parametrize(("defines", "sizes"), [
    ({**FP8_SPLIT_TILE, "split_k": 4}, {"M": 5, "N": 130, "K": 700}),
    ({"block_M": 64, "block_N": 256, "block_K": 128, "threads": 128, "num_stages": 4}, {"M": 70, "N": 300, "K": 260})])
def test_fp8_gemm_64_row_tiles_pass_the_simt_interpreter(tmp_path, defines, sizes):
    """fp8_gemm's 64-row sm90 tiles (one consumer warpgroup: split-K with 4 shares, decode rows; and 64 x 256)
    lowered and run lane by lane against the interpreter, ragged in every size."""
    from tilec.interp.run import public_kernels
    from tilec.tuning.plan import cpu_check, write_check

    module = tilec.compile(str(FP8), defines=defines).module
    check = write_check(tmp_path, module, public_kernels(module)[0], dict(sizes))
    lowered = tilec.compile(str(FP8), "sm90", defines=defines)
    assert any(k.attrs.get("tensor_maps") for k in lowered.simt.kernels)
    assert cpu_check(lowered, tmp_path, check) is None


# ------------------------------------------------------------ split rows in softmax.tile (two launches, a workspace)

SOFTMAX = ROOT / "samples" / "softmax.tile"
SPLIT_ROWS = {"block_M": 1, "block_N": 8192, "threads": 256, "row_grid": 0}


def _softmax_reference(x):
    e = np.exp(x.astype(np.float64) - x.astype(np.float64).max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize(("split_n", "tile_elems", "m", "n", "scale"), [
    (4, 8, 3, 9000, 8), (8, 4, 2, 5001, 8), (16, 8, 1, 40000, 8), (32, 4, 5, 1000, 8), (4, 8, 1, 2048, 8),
    (4, 8, 2, 16384, 1), (4, 8, 1, 15000, 1), (8, 4, 3, 5001, 1)])
def test_split_rows_softmax_matches_numpy(split_n, tile_elems, m, n, scale):
    """Each row cut into split_n slices of whole column tiles: regular (1 x 2048 is one tile, so three slices are
    empty; 16384 is four full slices of two tiles), ragged (N = 9000: five tiles of 2048, two slices of two, the last
    of one, the fourth empty; 15000: the last slice's second tile partial), odd rows (5001) and more slices than tiles
    (32 slices of a 1000-long row's one tile). An empty slice's log-sum-exp is -inf, which the combine must weigh as
    zero. A scale of 8 makes the rows' maxima far apart; at 1 every slice's share of the row's sum counts."""
    from tilec.interp.run import public_kernels, run_any

    front = tilec.compile(str(SOFTMAX), defines={**SPLIT_ROWS, "split_n": split_n, "tile_elems": tile_elems}).module
    (unit,) = public_kernels(front)
    assert [st.kernel for st in unit.stages] == ["softmax__stage0", "softmax__stage1"]
    assert [b.name for b in unit.scratch] == ["Lse"]
    rng = np.random.default_rng(split_n + n)
    x = (rng.standard_normal((m, n)) * scale).astype(np.float16)
    y = rng.standard_normal((m, n)).astype(np.float16)  # overwritten
    run_any(front, unit, {"X": x, "Y": y})
    np.testing.assert_allclose(y.astype(np.float64), _softmax_reference(x), rtol=1e-2, atol=1e-4)


@pytest.mark.parametrize("split_n", [1, 4])
def test_softmax_with_masked_logits(split_n):
    """Masked logits (-inf): a column tile of nothing but -inf at the start of the row and at the start of a slice
    (2048-wide tiles; slices of two tiles at split_n = 4), and scattered ones. The running max starts at -inf, so
    the first tile's exp(x - max) must not become -inf - -inf = NaN, which would leave the row NaN (one launch) or
    drop the slice from the row's sum (split rows)."""
    from tilec.interp.run import public_kernels, run_any

    front = tilec.compile(str(SOFTMAX), defines={**SPLIT_ROWS, "split_n": split_n, "tile_elems": 8}).module
    (unit,) = public_kernels(front)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 16384)).astype(np.float16)
    x[0, :2048] = -np.inf            # the row's first tile
    x[1, 4096:6144] = -np.inf        # slice 1's first tile
    x[2, rng.random(16384) < 0.9] = -np.inf  # 90% masked, as after top-p
    y = rng.standard_normal(x.shape).astype(np.float16)
    run_any(front, unit, {"X": x, "Y": y})
    np.testing.assert_allclose(y.astype(np.float64), _softmax_reference(x), rtol=1e-2, atol=1e-4)


def test_split_rows_one_is_the_single_launch_softmax():
    from tilec.interp.run import public_kernels
    from tilec.ir import tile as T

    (unit,) = public_kernels(tilec.compile(str(SOFTMAX), defines={**SPLIT_ROWS, "split_n": 1}).module)
    assert isinstance(unit, T.Kernel) and unit.name == "softmax"


@pytest.mark.parametrize(("target", "split_n", "tile_elems", "sizes"), [
    ("sm90", 4, 8, {"M": 2, "N": 5001}), ("sm90", 16, 4, {"M": 1, "N": 20000}), ("sm80", 8, 8, {"M": 3, "N": 9000})])
def test_split_rows_softmax_lowering_passes_the_simt_interpreter(tmp_path, target, split_n, tile_elems, sizes):
    """Both launches lowered and run lane by lane against the interpreter's result for the whole sequence, bf16,
    at odd rows (5001: every row starts at another element of its 16-byte chunk) and with empty slices."""
    from tilec.interp.run import public_kernels
    from tilec.tuning.plan import cpu_check, write_check

    config = {**SPLIT_ROWS, "split_n": split_n, "tile_elems": tile_elems, "dtype": "bf16"}
    module = tilec.compile(str(SOFTMAX), defines=config).module
    check = write_check(tmp_path, module, public_kernels(module)[0], dict(sizes))
    lowered = tilec.compile(str(SOFTMAX), target, defines=config)
    assert [k.name for k in lowered.simt.kernels] == ["softmax__stage0", "softmax__stage1"]
    assert cpu_check(lowered, tmp_path, check) is None


@pytest.mark.parametrize("defines", [
    {"block_M": 4, "block_N": 1024, "threads": 128, "row_grid": 0},   # several rows a block
    {"block_M": 1, "block_N": 8192, "threads": 256, "row_grid": 132},  # the persistent grid
    {"block_M": 1, "block_N": 16384, "threads": 512, "row_grid": 0}])  # another held-row width (one is enough)
def test_split_rows_only_with_one_row_8192_wide_blocks(defines):
    """where= keeps split rows to one-row, non-persistent 8192-wide blocks: a -D outside that is refused."""
    from tilec.diagnostics import CompileError

    with pytest.raises(CompileError, match="split_n=4 break"):
        tilec.compile(str(SOFTMAX), defines={**defines, "split_n": 4})


GEMV_TILES = {32: {"block_M": 16, "block_N": 32, "block_K": 256, "threads": 128, "num_stages": 4},
              64: {"block_M": 16, "block_N": 64, "block_K": 128, "threads": 128, "num_stages": 4}}


def _gemv_check(tmp_path, config, sizes, dtype):
    """The check data of gemm at `sizes` (the Tile IR interpreter's output), the interpreter itself held to numpy."""
    from tilec.interp.run import public_kernels
    from tilec.tuning.plan import write_check

    module = tilec.compile(str(GEMM), defines=config).module
    check = write_check(tmp_path, module, public_kernels(module)[0], dict(sizes))
    raw = {a["name"]: a for a in check["args"]}
    store = np.float16 if dtype == "f16" else np.uint16

    def read(name, key="file"):
        x = np.frombuffer((tmp_path / raw[name][key]).read_bytes(), store).reshape(raw[name]["shape"])
        return x.astype(np.float64) if dtype == "f16" else (x.astype(np.uint32) << 16).view(np.float32).astype(
            np.float64)

    b = read("B")
    want = read("A") @ (b.T if config["trans_B"] else b)
    np.testing.assert_allclose(read("C", "expected"), want, rtol=2e-2, atol=2e-2 * np.sqrt(sizes["K"]))
    return check


@pytest.mark.parametrize(("tile", "split_k", "dtype", "trans_B", "sizes"), [
    (32, 1, "f16", False, {"M": 1, "N": 45, "K": 517}),
    (32, 2, "bf16", False, {"M": 3, "N": 77, "K": 333}),
    (64, 1, "bf16", True, {"M": 17, "N": 45, "K": 301}),
    (64, 4, "f16", True, {"M": 3, "N": 71, "K": 517}),
    (64, 1, "f16", False, {"M": 17, "N": 130, "K": 129})])
def test_gemv_tiles_lowering_passes_the_simt_interpreter(tmp_path, tile, split_k, dtype, trans_B, sizes):
    """The 16-row GEMV tiles (the decode schedule, mma.sync on sm90 with cp.async loads) lowered for sm90 and run lane
    by lane against the interpreter (itself checked against numpy) at ragged decode shapes: M = 1, 3 and 17 (a
    second row of tiles, 15 rows of it past M), odd N and K (the last K tile partly past K), one launch and split-K,
    f16 and bf16, B as [K, N] and [N, K]."""
    from tilec.tuning.plan import cpu_check

    config = {**GEMV_TILES[tile], "split_k": split_k, "dtype": dtype, "trans_B": trans_B}
    check = _gemv_check(tmp_path, config, sizes, dtype)
    lowered = tilec.compile(str(GEMM), "sm90", defines=config)
    assert cpu_check(lowered, tmp_path, check) is None


def test_gemv_tile_check_catches_a_planted_bug(tmp_path):
    """The same check fails a GEMV tile whose K loop stops one tile early (the kernel lowered from the edited source,
    the expected output from the sample's own)."""
    from tilec.tuning.plan import cpu_check

    config = {**GEMV_TILES[32], "split_k": 1, "dtype": "f16", "trans_B": False}
    check = _gemv_check(tmp_path, config, {"M": 3, "N": 45, "K": 517}, "f16")
    src = GEMM.read_text()
    planted = "for k in Pipelined(ceildiv(K, block_K) - 1, num_stages=num_stages):"
    bugged = src.replace("for k in Pipelined(ceildiv(K, block_K), num_stages=num_stages):", planted, 1)
    assert planted in bugged
    (tmp_path / "gemm.tile").write_text(bugged)
    lowered = tilec.compile(str(tmp_path / "gemm.tile"), "sm90", defines=config)
    assert "differs from the interpreter" in (cpu_check(lowered, tmp_path, check) or "")


def test_split_k_with_another_tile_breaks_where():
    with pytest.raises(CompileError) as e:
        tilec.compile(str(GEMM), "sm90", defines={"split_k": 2, "persistent": True, **SPLIT_TILE})
    assert "break this const's constraint (where=)" in _error_text(e.value)


def test_gemm_search_space_keeps_split_k_small():
    """Every combination of gemm's axes that its where= constraints let through (what `tilec tune` builds): split_k
    > 1 only with the two 128-wide tiles, not persistent, no cluster, and those are the two-launch candidates."""
    from tilec.diagnostics import CompileError as Refused
    from tilec.interp.run import public_kernels
    from tilec.ir import tile as T
    from tilec.tuning.plan import configurations, discover

    axes, default, _ = discover(str(GEMM), CompileOptions.make("sm90"))
    assert default["split_k"] == 1
    allowed, sequences = 0, []
    for config in configurations(axes):
        try:
            module = tilec.compile(str(GEMM), defines=config).module
        except Refused:
            continue
        allowed += 1
        if isinstance(public_kernels(module)[0], T.Launches):
            sequences.append(config)
    assert len(configurations(axes)) == 13 * 2 * 2 * 3 * 5  # tiles, persistent, pingpong, clusters, split_k
    # 11 wide tiles x 4 (3 clusters, or persistent) + 6 ping-pong candidates (persistent, threads=128) + 16 split-K on
    # the four 128-wide, 64-deep tiles, and the two 16-row GEMV tiles: never persistent or clustered, each with
    # split_k 1, 2, 3, 4, 8
    assert allowed == 44 + 6 + 16 + 10 and len(sequences) == 24
    assert sorted((c["block_M"], c["block_N"], c["num_stages"], c["split_k"]) for c in sequences) == sorted(
        (m, n, st, s) for m, n, st in ((64, 128, 4), (64, 128, 8), (128, 128, 4), (128, 128, 6), (16, 32, 4),
                                       (16, 64, 4)) for s in (2, 3, 4, 8))
    assert all(not c["persistent"] and c["cluster_m"] * c["cluster_n"] == 1 for c in sequences)


def _split_k_db(folder: Path, target: str) -> Path:
    """gemm.tile beside a database whose table routes a big square shape to a one-launch tile and a small-M, long-K
    shape to split-K."""
    tile = (128, 256, 64, 256, 4) if target == "sm90" else (128, 128, 32, 128, 3)
    big = {**dict(zip(["block_M", "block_N", "block_K", "threads", "num_stages"], tile, strict=True)),
           "persistent": False, "cluster_m": 1, "cluster_n": 1, "split_k": 1}
    split = {**SPLIT_TILE, "persistent": False, "cluster_m": 1, "cluster_n": 1, "split_k": 4}
    shapes = [{"sizes": {"M": 4096, "N": 4096, "K": 4096}, "winner": {"config": big, "ms": 1.0},
               "runner_ups": [{"config": split, "ms": 2.0}]},
              {"sizes": {"M": 128, "N": 4096, "K": 11008}, "winner": {"config": split, "ms": 1.0},
               "runner_ups": [{"config": big, "ms": 2.0}]}]
    entry = {"source": "gemm.tile", "kernel": "gemm", "target": target, "defines": {},
             "source_consts": {"dtype": "f16", "accum_dtype": "f32", "trans_B": False}, "space": list(big),
             "default": big, "gpu": "test GPU", "shapes": shapes}
    src = folder / "gemm.tile"
    src.write_text(GEMM.read_text())
    (folder / "gemm.tune.json").write_text(json.dumps({"tilec_tune_db": 1, "entries": [entry]}))
    return src


def test_dispatch_artifact_routes_long_k_shapes_to_split_k(tmp_path, monkeypatch):
    """The manifest points config 1 at its launches entry (stages gemm__cfg1__stage0/1 and their no-TMA twin);
    tilec.runtime's public gemm runs the variant's stages in one workspace for the split-K shape and the one-launch
    variant for the other (fake driver)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_cuda import FakeDriver, install

    from tilec.runtime.dispatch import choose
    from tilec.runtime.module import Module

    src = _split_k_db(tmp_path, "sm90")
    m = json.loads(tilec.compile(str(src), "sm90", emit="cu").manifest)
    assert [k["name"] for k in m["kernels"]] == ["gemm__cfg0", "gemm__cfg0__no_tma", "gemm__cfg1__stage0",
                                                 "gemm__cfg1__stage1", "gemm__cfg1__stage0__no_tma"]
    table = m["dispatch"]["gemm"]
    assert [c["kernel"] for c in table["configs"]] == ["gemm__cfg0", "gemm__cfg1"]
    assert [c.get("launches", False) for c in table["configs"]] == [False, True]
    (seq,) = m["launches"]
    assert seq["name"] == "gemm__cfg1" and [b["name"] for b in seq["scratch"]] == ["Partial"]
    assert [st["kernel"] for st in seq["stages"]] == ["gemm__cfg1__stage0", "gemm__cfg1__stage1"]
    assert choose(table, {"M": 128, "N": 4096, "K": 11008}) == 1 and choose(table, {"M": 64, "N": 8192,
                                                                                  "K": 16384}) == 1
    assert choose(table, {"M": 4096, "N": 4096, "K": 4096}) == 0 and choose(table, {"M": 2048, "N": 8192,
                                                                                  "K": 2048}) == 0

    fake = install(monkeypatch, FakeDriver({k["name"]: k for k in m["kernels"]}, capability=(9, 0)))
    mod = Module(b"\0", m)
    assert list(mod.kernels) == ["gemm"] and [type(v).__name__ for v in mod.gemm.variants] == ["Kernel", "Launches"]

    def dev(ptr, shape):
        return type("Dev", (), {"shape": shape, "__cuda_array_interface__": {
            "data": (ptr, False), "shape": shape, "typestr": "<f2", "strides": None, "version": 3}})()

    a, b, c = dev(0x10000, (128, 11008)), dev(0x20000, (11008, 4096)), dev(0x30000, (128, 4096))
    assert mod.gemm.workspace_bytes(a, b, c) == 4 * 128 * 4096 * 4
    mod.gemm(a, b, c)
    assert [ln.fn for ln in fake.launches] == ["gemm__cfg1__stage0", "gemm__cfg1__stage1"]
    assert fake.launches[0].grid == (4096 // 128, 128 // 64, 4) and [n for _, n in fake.allocs] == [8388608]
    fake.launches.clear()
    a, b, c = dev(0x10000, (4096, 4096)), dev(0x20000, (4096, 4096)), dev(0x30000, (4096, 4096))
    assert mod.gemm.workspace_bytes(a, b, c) == 0
    mod.gemm(a, b, c)
    assert [ln.fn for ln in fake.launches] == ["gemm__cfg0"] and len(fake.allocs) == 1
    # the public name's fast path (the compiled launcher on a GPU) is asked first, for every shape; the one-launch
    # variant's plan is filed under the public name (its own layout's key), so that later calls find it there
    from tilec.runtime.launch import _MISS

    asked = []
    mod.gemm._fast = lambda args: asked.append(len(args)) or _MISS
    fake.launches.clear()
    mod.gemm(a, b, c)
    mod.gemm(dev(0x10000, (128, 11008)), dev(0x20000, (11008, 4096)), dev(0x30000, (128, 4096)))
    assert asked == [3, 3] and [ln.fn for ln in fake.launches] == ["gemm__cfg0", "gemm__cfg1__stage0",
                                                                   "gemm__cfg1__stage1"]
    assert [key[:3] for key in mod.gemm._layout().plans] == [((4096, 4096), (4096, 4096), (4096, 4096))]


MOCK_GEMM_MAIN = r"""
#include "g.h"
#include <stdlib.h>

int main(int argc, char** argv) {
  int m = atoi(argv[2]), n = atoi(argv[3]), k = atoi(argv[4]);
  size_t bytes = 1;
  (void)argc;
  printf("config %d\n", gemm_config(k, m, n));
  CUresult rc = gemm_workspace_bytes(m, k, n, &bytes);
  printf("rc %d bytes %zu\n", (int)rc, bytes);
  if (argv[1][0] == 'l')
    printf("rc %d\n", (int)gemm_launch((CUstream)5, 4096, 8192, 12288, m, k, n));
  else
    printf("rc %d\n", (int)gemm_launch_with_workspace((CUstream)6, (CUdeviceptr)0x200000, 4096, 8192, 12288, m, k,
                                                      n));
  return 0;
}
"""


def test_c_header_dispatches_to_the_split_k_variant(tmp_path):
    """sm80's header over mock images, against a recording driver: gemm_config picks as tilec.runtime does,
    gemm_workspace_bytes sizes the chosen variant's workspace (0 for one launch), gemm_launch allocates it
    stream-ordered around the split-K stages, gemm_launch_with_workspace takes the caller's."""
    import shutil

    sys.path.insert(0, str(ROOT / "tests"))
    from test_launches import MOCK_DRIVER

    from tilec.targets.c_launcher.dispatch import dispatchers
    from tilec.targets.c_launcher.header import CUDA_API, Image, generate_header
    from tilec.targets.cuda.locate import driver_include_dir

    gcc, inc = shutil.which("gcc"), driver_include_dir()
    if gcc is None or inc is None:
        pytest.skip("gcc and cuda.h are needed")
    src = _split_k_db(tmp_path, "sm80")
    m = json.loads(tilec.compile(str(src), "sm80", emit="cu").manifest)
    header = generate_header("g.h", [Image("sm80", "sm_80", b"TILECMOCK\0", m["kernels"])], source_name="gemm.tile",
                             tilec_version="0", toolchain="mock", driver_api_version=13000, source_hash="0" * 64,
                             launches=m["launches"],
                             tail=dispatchers(m["dispatch"], [*m["kernels"], *m["launches"]], CUDA_API, "", True)[0])
    (tmp_path / "g.h").write_text(header)
    launch = ('CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,\n'
              '    unsigned bz, unsigned shared, CUstream s, void** p, void** extra) {\n'
              '  (void)by; (void)bz; (void)shared; (void)extra; (void)p;\n'
              '  printf("launch %s grid %u %u %u block %u stream %llu\\n", ((mock_function*)f)->name, gx, gy, gz, bx,\n'
              '         (unsigned long long)(uintptr_t)s);\n  return CUDA_SUCCESS;\n}\n')
    (tmp_path / "driver.c").write_text(MOCK_DRIVER.split("CUresult cuLaunchKernel")[0] + launch)
    (tmp_path / "main.c").write_text(MOCK_GEMM_MAIN)
    flags = ["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", f"-I{inc}", f"-I{tmp_path}"]
    subprocess.run([gcc, *flags, "main.c", "driver.c", "-o", "prog", "-lpthread"], cwd=tmp_path, check=True)

    def run(*args) -> list[str]:
        out = subprocess.run([str(tmp_path / "prog"), *map(str, args)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    ws = 4 * 128 * 4096 * 4
    assert run("l", 128, 4096, 11008) == [
        "config 1", f"rc 0 bytes {ws}", f"alloc {ws} stream 5",
        "launch gemm__cfg1__stage0 grid 32 2 4 block 128 stream 5",
        "launch gemm__cfg1__stage1 grid 16 32 1 block 128 stream 5", f"free {0x100000} stream 5", "rc 0"]
    assert run("x", 100, 4000, 9000)[2:] == ["launch gemm__cfg1__stage0 grid 32 2 4 block 128 stream 6",
                                             "launch gemm__cfg1__stage1 grid 16 25 1 block 128 stream 6", "rc 0"]
    assert run("l", 4096, 4096, 4096) == ["config 0", "rc 0 bytes 0",
                                          "launch gemm__cfg0 grid 32 32 1 block 128 stream 5", "rc 0"]


@pytest.mark.parametrize("target", ["sm80", "gfx942"])
@pytest.mark.parametrize("sequence_first", [False, True])
def test_the_dispatcher_takes_the_first_variants_parameters_from_data(tmp_path, target, sequence_first):
    """The dispatcher's K_launch is generated from the dispatch table and the first variant's entry, not read back
    from the launcher's text: its parameters are those the launcher gives that variant's launch function, whether the
    variant is one kernel or a multi-launch kernel (taken with the table's configs swapped), for CUDA's header and
    HIP's object source."""
    import re

    from tilec.targets.c_launcher.dispatch import dispatchers
    from tilec.targets.c_launcher.header import CUDA_API, Image, generate_header
    from tilec.targets.hip.launcher import HIP_API, generate_object_source

    m = json.loads(tilec.compile(str(_split_k_db(tmp_path, target)), target,
                                 emit="cu" if target == "sm80" else "hip").manifest)
    table = m["dispatch"]["gemm"]
    if sequence_first:
        table["configs"].reverse()
        for r in table["rules"]:
            r["config"] = 1 - r["config"]
    head = table["configs"][0]
    assert bool(head.get("launches")) == sequence_first
    entries = [*m["kernels"], *m["launches"]]
    api = CUDA_API if target == "sm80" else HIP_API
    tail, functions = dispatchers(m["dispatch"], entries, api, "p_", check_device=target == "sm80")
    launch = next(f for f in functions if f.name == "p_gemm_launch")
    if target == "sm80":
        text = generate_header("g.h", [Image("sm80", "sm_80", b"TILECMOCK\0", m["kernels"])], source_name="gemm.tile",
                               tilec_version="0", toolchain="mock", driver_api_version=13000, source_hash="0" * 64,
                               prefix="p_", launches=m["launches"], tail=tail)
        first = re.search(rf"^static inline CUresult p_{head['kernel']}_launch\(([^)]*)\)", text, re.M).group(1)
        assert text.index(tail.lstrip("\n")) < text.rindex("#endif /* TILEC_")  # inside the include guard
        assert [f.name for f in functions][-1] == "p_gemm_check_device"
    else:
        text, exported, protos = generate_object_source(
            "g.o", [("gfx942", b"MOCK", m["kernels"])], source_name="gemm.tile", tilec_version="0", toolchain="mock",
            prefix="p_", embed=lambda name, data: f"static const unsigned char {name}[1] = {{0}};",
            launches=m["launches"], dispatch=m["dispatch"])
        first = next(p for p in protos if p.startswith(f"hipError_t p_{head['kernel']}_launch("))
        first = first[first.index("(") + 1:-2]
        assert exported[-4:] == ["p_gemm_config", "p_gemm_launch", "p_gemm_workspace_bytes",
                                 "p_gemm_launch_with_workspace"] and text.endswith(tail)
    assert ", ".join(launch.params) == first
    assert f"case 0: return p_{head['kernel']}_launch(" in tail


def test_sm90_header_with_a_split_k_variant_compiles_with_nvcc(tmp_path):
    """The real artifact: NVRTC or nvcc builds both variants' kernels, and the header -- gemm_launch dispatching to
    gemm__cfg1_launch, the split-K variant's stream-ordered sequence -- compiles as C++ with nvcc."""
    import shutil

    from tilec.targets.cuda.toolchain import cuda_include_dir, nvcc_version

    if nvcc_version() is None or shutil.which("nvcc") is None or cuda_include_dir() is None:
        pytest.skip("nvcc and cuda.h are needed")
    src = _split_k_db(tmp_path, "sm90")
    art = tilec.compile(str(src), "sm90", emit="header", output_name="g.h")
    text = art.data.decode()
    assert "case 1: return gemm__cfg1_launch(stream, A, B, C, M, K, N);" in text
    assert "case 1: return gemm__cfg1_workspace_bytes(M, K, N, bytes);" in text
    assert "static inline CUresult gemm_launch_with_workspace(CUstream stream, CUdeviceptr workspace, " in text
    (tmp_path / "g.h").write_bytes(art.data)
    (tmp_path / "main.cpp").write_text(
        '#include "g.h"\nint main() { size_t b = 0; char m[64]; gemm_check_device(0, m, sizeof m);\n'
        '  gemm_workspace_bytes(128, 11008, 4096, &b);\n'
        '  return gemm_launch(0, 0, 0, 0, 128, 11008, 4096) == CUDA_SUCCESS; }\n')
    r = subprocess.run(["nvcc", "-x", "c++", "-c", "-I", cuda_include_dir(), "-I", str(tmp_path),
                        str(tmp_path / "main.cpp"), "-o", str(tmp_path / "main.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_hip_object_exports_the_dispatcher_over_a_split_k_variant(tmp_path):
    """gfx942's -c object: gemm_launch, gemm_config, gemm_workspace_bytes and gemm_launch_with_workspace beside the
    variants' launchers, with HIP's types; a C program linked against it sizes the split-K variant's workspace."""
    import shutil

    from tilec.targets.hip.backend import _hip_include_dir
    from tilec.targets.hip.toolchain import find_compiler

    if find_compiler("gfx942") is None or _hip_include_dir() is None or shutil.which("cc") is None:
        pytest.skip("needs hipcc / clang for gfx942, hip/hip_runtime_api.h and cc")
    src = _split_k_db(tmp_path, "gfx942")
    obj = tilec.compile(str(src), "gfx942", emit="object", output_name="g.o", use_cache=False)
    info = json.loads(obj.manifest)["object"]
    assert info["functions"][-4:] == ["gemm_config", "gemm_launch", "gemm_workspace_bytes",
                                      "gemm_launch_with_workspace"]
    assert "gemm__cfg1_launch_with_workspace" in info["functions"]
    assert ("hipError_t gemm_launch_with_workspace(hipStream_t stream, hipDeviceptr_t workspace, hipDeviceptr_t A, "
            "hipDeviceptr_t B, hipDeviceptr_t C, int M, int K, int N);") in info["prototypes"]
    (tmp_path / "g.o").write_bytes(obj.data)
    (tmp_path / "main.c").write_text(
        "#define __HIP_PLATFORM_AMD__\n#include <hip/hip_runtime_api.h>\n#include <stdio.h>\n"
        + "\n".join(info["prototypes"]) + "\nint main(void) {\n  size_t a = 1, b = 1;\n"
        "  hipError_t r1 = gemm_workspace_bytes(128, 11008, 4096, &a);\n"
        "  hipError_t r2 = gemm_workspace_bytes(4096, 4096, 4096, &b);\n"
        "  printf(\"%d %d %d %zu %zu\\n\", gemm_config(11008, 128, 4096), (int)r1, (int)r2, a, b);\n  return 0;\n}\n")
    link = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", f"-I{_hip_include_dir()}", "main.c", "g.o", "-o",
                           "prog", "-lamdhip64", "-lpthread"], cwd=tmp_path, capture_output=True, text=True)
    if link.returncode != 0 and "amdhip64" in link.stderr:
        pytest.skip("libamdhip64 not installed")
    assert link.returncode == 0, link.stderr
    run = subprocess.run(["./prog"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["1", "0", "0", str(4 * 128 * 4096 * 4), "0"]


def test_tune_worker_flushes_l2_ahead_of_each_timed_launch(monkeypatch):
    """The worker times a launch with L2 flushed and the GPU busy with the flush while the host launches, so a small
    shape's time is the kernel's, not the host's call overhead; a round's launches are queued back to back and the
    events read after it (reading each pair at once drained the queue, and a split-K call's host time was timed)."""
    from tilec.runtime import cuda_driver, tune_worker

    log = []

    class Drv:
        def synchronize(self):
            log.append("sync")

        def event(self):
            return object()

        def destroy_event(self, ev):
            log.append("destroy")

        def record(self, ev, stream=0):
            log.append("record")

        def elapsed_ms(self, start, end):
            log.append("read")
            return 0.25

    class Flush:
        def zero_(self):
            log.append("flush")

    monkeypatch.setattr(cuda_driver.Driver, "get", staticmethod(lambda: Drv()))
    monkeypatch.setattr(tune_worker, "_l2_flush", lambda: Flush())
    assert tune_worker.time_launches(lambda *args: log.append("launch"), []) == 0.25
    first = log.index("flush")
    round_ = log[first:log.index("sync", first)]  # the first round: nothing drains the queue inside it
    assert len(round_) >= 4 * tune_worker.MIN_ITERS and len(round_) % 4 == 0
    assert all(round_[i:i + 4] == ["flush", "record", "launch", "record"] for i in range(0, len(round_), 4))
    reads = log[first + len(round_) + 1:]
    assert reads[:len(round_) // 4] == ["read"] * (len(round_) // 4)  # every pair read after the sync
    assert log.count("destroy") == 2 * (len(round_) // 4)  # and every event destroyed


def test_tune_worker_keeps_one_candidates_workspace_at_a_time(tmp_path, monkeypatch):
    """A split-K candidate keeps its workspace (the largest asked for) between calls; the worker holds every
    candidate of a folder, so without a release after each timing dozens of workspaces of the largest shape filled
    the H200's 140 GB (`python bench/tune_samples.py ...` on 2026-12-02: OutOfMemoryError from the fourth gemm
    folder on)."""
    from tilec.runtime import loader, tune_worker

    holding: set[int] = set()
    most = []

    class Candidate:
        def __init__(self, index):
            self.index = index
            self.entry = {"params": []}

        def __call__(self, *args):
            holding.add(self.index)  # the first call allocates the workspace and keeps it
            most.append(len(holding))

        def release_workspaces(self):
            holding.discard(self.index)

    monkeypatch.setattr(loader, "load", lambda path: type("M", (), {"kernels": {"k": Candidate(int(path.stem))}}))
    monkeypatch.setattr(tune_worker, "check", lambda kernel, *a: {"check": "ok", "max_rel_err": 0.0})
    monkeypatch.setattr(tune_worker, "time_launches", lambda kernel, args: (kernel(*args), 0.5)[1])
    plan = {"kernel": "k", "check": {"args": []}, "shapes": [{"M": 64}, {"M": 4096}, {"M": 16384}],
            "candidates": [{"index": i, "status": "built", "artifact": f"{i}.cubin"} for i in range(6)]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    results = tune_worker.run(tmp_path, quiet=True)
    assert all(r["times"] == {"M=64": 0.5, "M=4096": 0.5, "M=16384": 0.5} for r in results.values())
    assert len(most) == 18 and max(most) == 1 and not holding


def test_a_multi_launch_kernel_gives_its_workspaces_back(monkeypatch):
    """Launches.release_workspaces frees the driver workspaces it kept per (device, stream), after the stream's
    launches, and drops the torch ones and the views filed for the fast path."""
    from tilec.runtime import cuda_driver
    from tilec.runtime.sequence import Launches

    log = []

    class Drv:
        def synchronize(self, handle):
            log.append(("sync", handle))

        def free(self, ptr):
            log.append(("free", ptr))

    monkeypatch.setattr(cuda_driver.Driver, "get", staticmethod(lambda device=0: Drv()))
    seq = Launches.__new__(Launches)
    seq._workspace_lock = __import__("threading").Lock()
    seq._workspaces = {(0, 7): (0x1000, 4096), (0, 9): (0x9000, 64)}
    seq._kept = {(0, 7): object()}
    seq._zeroed, seq._kept_zeroed = {(0, 7): (0x5000, 8)}, {(0, 9): object()}  # counters' own buffers
    seq._fast_views = {("shape", 7): []}
    seq._native, seq.stages = None, []
    seq.release_workspaces()
    assert log == [("sync", 7), ("free", 0x1000), ("sync", 9), ("free", 0x9000), ("sync", 7), ("free", 0x5000)]
    assert not seq._workspaces and not seq._kept and not seq._fast_views and not seq._zeroed and not seq._kept_zeroed
    seq.release_workspaces()  # nothing left: nothing freed twice
    assert len(log) == 6
