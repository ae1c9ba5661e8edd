"""The dispatch's cost model (tilec/runtime/cost_model.py): the build's fit, the runtime's choice between tuned
shapes, and the C launcher's choice against the runtime's."""

from __future__ import annotations

import itertools
import json
import math
import shutil
import subprocess

import pytest

from tilec.runtime.cost_model import WAVES_MIN_SHAPES, cost_terms, fit, fit_dispatch_costs, packed, predicted
from tilec.runtime.dispatch import choose

SMS, SHARED = 132, 228 * 1024
TILES = {"big": (128, 256, 200_000), "small": (64, 64, 90_000)}  # block_M, block_N, shared bytes
# the planted truth: each tile's ms per unit of the model's terms (compute, traffic, footprint, waves), and a fixed
# cost
TRUTH = {"big": [1.0e-10, 3.0e-11, 8.0e-11, 0.0, 0.006], "small": [2.6e-10, 2.0e-11, 9.0e-11, 0.0, 0.005]}
WAVE_TRUTH = {"big": [1.0e-10, 3.0e-11, 8.0e-11, 0.002, 0.006], "small": [2.6e-10, 2.0e-11, 9.0e-11, 0.0015, 0.005]}


def _entry(name: str, tile: str) -> dict:
    bm, bn, shared = TILES[tile]
    blocks = f"ceildiv(N, {bn}) * ceildiv(M, {bm})"
    return {"name": name, "sizes": ["M", "N", "K"], "threads": 256, "shared_bytes": shared,
            "grid": [f"ceildiv(N, {bn})", f"ceildiv(M, {bm})", "1"],
            "flops": f"{2 * bm * bn * 64} * ceildiv(K, 64) * {blocks}",
            "bytes": f"{2 * 64 * (bm + bn)} * ceildiv(K, 64) * {blocks} + {2 * bm * bn} * {blocks}",
            "params": [{"name": "A", "kind": "tensor", "dtype": "f16", "shape": ["M", "K"], "output": False},
                       {"name": "B", "kind": "tensor", "dtype": "f16", "shape": ["K", "N"], "output": False},
                       {"name": "C", "kind": "tensor", "dtype": "f16", "shape": ["M", "N"], "output": True}]}


ENTRIES = {"k__cfg0": _entry("k__cfg0", "big"), "k__cfg1": _entry("k__cfg1", "small")}
TILE_OF = {"k__cfg0": "big", "k__cfg1": "small"}


def _true_ms(kernel: str, sizes: dict, truth: dict = TRUTH) -> float:
    e = ENTRIES[kernel]
    return predicted(packed(cost_terms(e, [(e, e["grid"])], SMS, SHARED), truth[TILE_OF[kernel]]), sizes)


def _table(shapes: list[dict], when: dict | None = None, truth: dict = TRUTH) -> dict:
    """A dispatch table as tilec/tuning/multi.py writes it, its rules' times the planted truth's, then fitted."""
    configs = [{"kernel": k, **({"when": when[k]} if when and k in when else {})} for k in ENTRIES]
    rules = []
    for s in shapes:
        ms = [_true_ms(c["kernel"], s, truth) for c in configs]
        rules.append({"at": s, "config": min(range(len(ms)), key=ms.__getitem__), "ms": ms})
    table = {"sizes": ["K", "M", "N"], "configs": configs, "rules": rules}
    fit_dispatch_costs(table, ENTRIES, {}, SMS, SHARED)
    return table


TUNED = [{"M": m, "N": n, "K": k} for m, n, k in ((64, 4096, 4096), (8192, 4096, 4096), (1024, 1024, 1024),
                                                   (128, 11008, 4096), (4096, 768, 768), (512, 4096, 14336))]


def test_the_fit_recovers_a_planted_model():
    table = _table(TUNED + [{"M": m, "N": n, "K": k} for m, n, k in itertools.product((256, 2048), (512, 8192),
                                                                                     (512, 8192))])
    for c in table["configs"]:
        for sizes in ({"M": 3000, "N": 1000, "K": 7000}, {"M": 17, "N": 50000, "K": 300}):
            assert predicted(c["cost"], sizes) == pytest.approx(_true_ms(c["kernel"], sizes), rel=1e-6)
    scales = [s for r in table["rules"] for s in r["scale"]]
    # measured over predicted is 1 wherever a tile serves (None: more than BOUND slower than the shape's best)
    assert all(s is None or s == pytest.approx(1.0) for s in scales) and scales.count(None) < len(scales) / 2


def test_the_fit_recovers_a_planted_latency_per_wave():
    """A fixed time per wave (a block's pipeline fill and epilogue) besides its FLOPs: with enough tuned shapes the
    fit finds it, and the manifest's three terms carry it folded into the compute term (as FLOPs a wave)."""
    truth = WAVE_TRUTH
    shapes = TUNED + [{"M": m, "N": n, "K": k} for m, n, k in itertools.product((256, 2048, 6000), (512, 8192),
                                                                                (512, 3000, 8192))]
    assert len(shapes) >= WAVES_MIN_SHAPES
    table = _table(shapes, truth=truth)
    for c in table["configs"]:
        assert len(c["cost"]["terms"]) == 3 and len(c["cost"]["coef"]) == 4  # the manifest's format, as before
        for sizes in ({"M": 3000, "N": 1000, "K": 7000}, {"M": 17, "N": 50000, "K": 300}, {"M": 9000, "N": 9000,
                                                                                            "K": 64}):
            assert predicted(c["cost"], sizes) == pytest.approx(_true_ms(c["kernel"], sizes, truth), rel=1e-6)
    # with fewer shapes than that the fit leaves the waves term out (five coefficients from a handful of shapes)
    few = _table(TUNED, truth=truth)
    assert all("+" not in c["cost"]["terms"][0] for c in few["configs"])


def test_the_waves_term_takes_compute_s_place_where_compute_is_not_fitted():
    terms = ["C", "T", "F", "W"]
    assert packed(terms, [0.0, 2.0, 3.0, 4.0, 5.0]) == {"terms": ["W", "T", "F"], "coef": [4.0, 2.0, 3.0, 5.0]}
    assert packed(terms, [1e-10, 2.0, 3.0, 0.0, 5.0]) == {"terms": ["C", "T", "F"], "coef": [1e-10, 2.0, 3.0, 5.0]}
    assert packed(terms, [1e-10, 2.0, 3.0, 2e-3, 5.0])["terms"][0] == "C + 20000000 * (W)"


def test_the_fit_keeps_coefficients_non_negative():
    # times that fall as the one term grows: an unconstrained fit would give it a negative coefficient
    coef = fit([[x, 1.0] for x in (1.0, 2.0, 3.0, 4.0)], [4.0, 3.9, 3.8, 3.7])
    assert min(coef) >= 0


def test_the_fit_keeps_the_compute_term():
    # a configuration timed only where its fixed cost hides the work (a split-K at short K): free to drop the
    # compute term, the fit gave the work no cost, and the dispatch then chose it at long K, where it lost 1.2x (s21)
    # (here times even fall a little as the work grows: the constant alone fits best, and was the old fit)
    coef = fit([[x, 1.0] for x in (1.0, 2.0, 3.0, 4.0)], [10.0, 9.9, 9.9, 9.8])
    assert coef[0] > 0


def test_between_tuned_shapes_the_model_picks_the_faster_tile():
    """Six tuned shapes; at the shapes between them the nearest one's winner is often the slower tile (the waves
    of a 128x256 tile are not smooth in M), the cost model's pick the faster one everywhere."""
    table = _table(TUNED)
    nearest_only = json.loads(json.dumps(table))
    for r in nearest_only["rules"]:
        del r["scale"]
    grid = [{"M": m, "N": n, "K": k} for m in (1, 33, 200, 640, 1500, 3000, 5000, 12000)
            for n in (768, 2560, 4096, 11008) for k in (512, 4096, 14336)]
    fastest = [min(range(2), key=lambda i, s=s: _true_ms(f"k__cfg{i}", s)) for s in grid]
    assert [choose(table, s) for s in grid] == fastest
    wrong = sum(choose(nearest_only, s) != f for s, f in zip(grid, fastest, strict=True))
    assert wrong >= 5, wrong  # (the planted case is one the nearest rule gets wrong)
    assert all(choose(table, s) == r["config"] for s, r in zip(TUNED, table["rules"], strict=True))


def test_a_config_far_slower_at_the_nearest_shape_is_not_extrapolated_to():
    table = _table(TUNED)
    rule = next(r for r in table["rules"] if r["at"]["M"] == 8192)
    near = [{"M": m, "N": 4096, "K": 4096} for m in (6000, 8192, 12000)]
    rule["scale"][1] = 0.1  # a small tile measured ten times faster than its prediction there: it wins near there
    assert {choose(table, s) for s in near} == {1}
    rule["scale"][1] = None  # as where it was more than BOUND slower than the shape's best: never extrapolated to
    assert {choose(table, s) for s in near} == {0}


def test_c_dispatcher_runs_the_cost_model_as_the_runtime_does(tmp_path):
    """K_config in C against tilec.runtime.dispatch.choose over a grid of sizes, with a when= condition on one
    configuration (so both its guard and the model's pass over it)."""
    from tilec.targets.c_launcher.dispatch import dispatchers
    from tilec.targets.c_launcher.header import CUDA_API, FORMULA_HELPERS_C

    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("a C compiler is needed")
    # (at N = 100 with M over 6000 neither condition holds: then every configuration may run, as in choose)
    more = [{"M": m, "N": n, "K": k} for m, n, k in itertools.product((300, 3000, 7000), (700, 9000),
                                                                       (700, 5000, 9000))]
    table = _table(TUNED + more + [{"M": 300, "N": 9000, "K": 700}], truth=WAVE_TRUTH,
                   when={"k__cfg1": ["<=", "M", 6000], "k__cfg0": [">=", "N", 200]})
    assert all("+" in c["cost"]["terms"][0] for c in table["configs"])  # (the waves term folded in)
    code, _ = dispatchers({"k": table}, [ENTRIES["k__cfg0"]], CUDA_API, "", False)
    assert "the cost model" in code
    config_fn = code[:code.index("/* k_launch:")]
    grid = list(itertools.product([1, 17, 64, 100, 500, 2048, 5999, 6001, 9000], [100, 768, 4096, 11008, 50257],
                                  [64, 1000, 4096, 30000]))
    points = ", ".join(f"{{{m}, {n}, {k}}}" for m, n, k in grid)
    main = ("int main(void) {\n  static const int at[][3] = {" + points + "};\n"
            "  for (unsigned i = 0; i < sizeof at / sizeof at[0]; i++)\n"
            "    printf(\"%d\\n\", k_config(at[i][2], at[i][0], at[i][1]));\n"
            "  return 0;\n}\n")
    (tmp_path / "c.c").write_text("#include <stdio.h>\n#include <stdint.h>\n" + FORMULA_HELPERS_C
                                  + config_fn.replace("static inline int k_config", "static int k_config") + main)
    subprocess.run([gcc, "-std=c11", "-Wall", "-Wextra", "-Werror", "c.c", "-o", "c"], cwd=tmp_path, check=True)
    got = subprocess.run([str(tmp_path / "c")], capture_output=True, text=True, check=True).stdout.split()
    want = [str(choose(table, {"M": m, "N": n, "K": k})) for m, n, k in grid]
    assert got == want
    assert len(set(want)) == 2


def test_a_tuned_build_carries_the_fitted_model(monkeypatch):
    """tilec.compile of a tuned sample: the dispatch table's configs carry their terms and coefficients, its rules
    the measured times and scales, and the fitted model predicts the tuner's times near where they were measured."""
    from conftest import ROOT

    import tilec
    from tilec.tuning import database

    monkeypatch.delenv("TILEC_TUNE_DB", raising=False)  # conftest turns the samples' databases off
    m = json.loads(tilec.compile(str(ROOT / "samples" / "flash_attention.tile"), "sm90", emit="cu",
                                 defines={"dtype": "bf16"}).manifest)
    (table,) = m["dispatch"].values()
    assert all(len(c["cost"]["coef"]) == 4 and min(c["cost"]["coef"]) >= 0 for c in table["configs"])
    assert all(len(r["ms"]) == len(r["scale"]) == len(table["configs"]) for r in table["rules"])
    errors = [abs(math.log(s)) for r in table["rules"] for s in r["scale"] if s is not None]
    assert sorted(errors)[len(errors) // 2] < 0.25, errors  # the model's median error at the tuned shapes
    entry = next(e for e in database.load(ROOT / "samples" / "flash_attention.tune.json")["entries"]
                 if e["defines"] == {"dtype": "bf16"} and e["target"] == "sm90")
    assert m["tuning"]["sms"] == entry["sms"] == 132


@pytest.mark.parametrize("causal", [False, True])
def test_work_formulas_read_only_the_sizes_even_where_a_trip_count_reads_the_block(causal):
    """A causal mask's loop runs to the block's own diagonal tile, a grid-stride loop from the block's first row: the
    entry's flops and bytes are counted at the grid's middle block, so they read only the sizes (the model's terms
    could not be evaluated otherwise) and total what the whole grid does."""
    from conftest import ROOT

    import tilec
    from tilec.runtime.formulas import evaluate

    m = json.loads(tilec.compile(str(ROOT / "samples" / "flash_attention.tile"), "sm90", emit="cu",
                                 defines={"dtype": "bf16", "causal": causal, "dim": 128}).manifest)
    entry = m["kernels"][0]
    batch, heads, seq = 2, 16, 4096
    flops = evaluate(entry["flops"], {"B": batch, "H": heads, "S": seq})
    attention = 4 * batch * heads * seq * seq * 128 / (2 if causal else 1)  # QK^T and PV
    assert attention <= flops <= 1.05 * attention
    rows = json.loads(tilec.compile(str(ROOT / "samples" / "softmax.tile"), "sm90", emit="cu",
                                    defines={"dtype": "bf16"}).manifest)["kernels"][0]  # grid-stride over rows
    read = 2 * 4096 * 50257
    assert read <= evaluate(rows["bytes"], {"M": 4096, "N": 50257}) <= 3 * read


def test_an_entry_may_keep_the_nearest_shape_dispatch(tmp_path, monkeypatch):
    """`"dispatch": "nearest"` in a database entry (the row kernels': the model scored worse than the nearest shape
    over their sweep) builds a table without the model; a re-tune keeps it; another value is an error naming it."""
    from conftest import ROOT

    import tilec
    from tilec.tuning import database

    monkeypatch.delenv("TILEC_TUNE_DB", raising=False)
    entry = next(e for e in database.load(ROOT / "samples" / "flash_attention.tune.json")["entries"]
                 if e["defines"] == {"dtype": "bf16"} and e["target"] == "sm90")
    src = tmp_path / "flash_attention.tile"
    src.write_text((ROOT / "samples" / "flash_attention.tile").read_text())
    db = tmp_path / "flash_attention.tune.json"

    def table(dispatch):
        database.save(db, {"tilec_tune_db": 1, "entries": [{**entry, "dispatch": dispatch}]})
        m = json.loads(tilec.compile(str(src), "sm90", emit="cu", defines={"dtype": "bf16"}).manifest)
        return m["dispatch"]["flash_attention"]

    assert all("scale" in r for r in table("cost")["rules"])
    nearest = table("nearest")
    assert not any("scale" in r or "ms" in r for r in nearest["rules"])
    assert not any("cost" in c for c in nearest["configs"])
    database.merge(db, {k: v for k, v in entry.items() if k != "dispatch"})  # a re-tune of the entry
    assert database.load(db)["entries"][0]["dispatch"] == "nearest"
    with pytest.raises(Exception, match="dispatch is 'nearst'"):
        table("nearst")
