"""bench/shape_sweep.py without a GPU: the shapes it generates, the report's statistics on a results file made up
here, and the plot (the sweep itself runs on the H200: bench/RESULTS.md)."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sweep():
    spec = importlib.util.spec_from_file_location("shape_sweep", ROOT / "bench" / "shape_sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def shapes(sweep):
    return sweep.generate_shapes()


def test_the_sweep_covers_every_family_with_mostly_untuned_shapes(sweep, shapes):
    assert len(shapes) >= 300
    by_family = {f: [s for s in shapes if s["family"] == f] for f in sweep.FAMILIES}
    assert all(len(v) >= 20 for v in by_family.values()), {f: len(v) for f, v in by_family.items()}
    tuned = sum(s["tuned"] for s in shapes)
    # the databases' own shapes are there (all of them: 322 of 874 once bf16 trans_B got an entry of its own, s17;
    # 389 of 971 with fp8's odd-K shapes, s31), but most are shapes they never saw (issue #26), in every family
    assert 0 < tuned < 0.5 * len(shapes)
    for f in sweep.FAMILIES:
        assert any(s["tuned"] for s in by_family[f]), f
        assert sum(not s["tuned"] for s in by_family[f]) > len(by_family[f]) / 2, f


def test_the_sweep_has_ragged_decode_and_long_shapes(sweep, shapes):
    gemms = [s["sizes"] for s in shapes if "K" in s["sizes"]]
    assert {1, 16384} <= {g["M"] for g in gemms}
    assert any(g["N"] == 50257 for g in gemms)  # GPT-2's vocabulary
    assert any(g["K"] % 8 for g in gemms) and any(g["N"] % 2 for g in gemms)  # rows no TMA tensor map takes
    assert sum(1 for s in shapes if s["family"] == "gemm bf16 trans_B" and s["sizes"]["K"] % 8) >= 3
    attn = [s for s in shapes if "S" in s["sizes"]]
    assert {s["defines"]["dim"] for s in attn} == {"64", "96", "128", "256"}
    assert any(s["sizes"]["S"] % 64 for s in attn) and max(s["sizes"]["S"] for s in attn) == 16384
    rows = [s["sizes"]["N"] for s in shapes if s["family"] in ("softmax", "rmsnorm", "layernorm")]
    assert any(n % 2 for n in rows)
    # data stays within what the H200's run is planned for
    for s in shapes:
        w, unit = sweep.work(s)
        assert w <= (8e12 if s["tuned"] else 4 * sweep.MAX_FLOPS) if unit == "FLOP" else w <= sweep.MAX_BYTES


def test_the_generated_shapes_are_deterministic_and_distinct(sweep, shapes):
    assert sweep.generate_shapes() == shapes
    keys = [(s["family"], tuple(sorted(s["sizes"].items()))) for s in shapes]
    assert len(set(keys)) == len(keys)
    order = sweep.interleaved(shapes)
    assert sorted(s["id"] for s in order) == list(range(len(shapes)))
    assert {s["family"] for s in order[:len(sweep.FAMILIES)]} == set(sweep.FAMILIES)  # a cut run has them all


def _results(sweep, shapes):
    """A results file as `run` writes it: gemm f16 at ratios 0.1, 0.2, ..., one wrong shape and one failure."""
    gemm = [s for s in shapes if s["family"] == "gemm f16"]
    untuned = [s for s in gemm if not s["tuned"]][:10]
    tuned = [s for s in gemm if s["tuned"]][:2]
    rows = []
    for i, s in enumerate(untuned):
        rows.append({**s, "ok": True, "err": 0.0, "tilec_ms": 1.0, "peer_ms": 0.1 * (i + 1), "ratio": 0.1 * (i + 1),
                     "peer": "cuBLAS", "runs": "gemm__cfg0__no_tma" if i < 3 else "gemm__cfg0"})
    for s in tuned:
        rows.append({**s, "ok": True, "err": 0.0, "tilec_ms": 1.0, "peer_ms": 2.0, "ratio": 2.0, "peer": "cuBLAS",
                     "runs": "gemm__cfg1"})
    rmsnorm = [s for s in shapes if s["family"] == "rmsnorm"][:2]
    rows.append({**rmsnorm[0], "ok": False, "err": math.nan, "tilec_ms": 0.5, "peer_ms": 0.1, "ratio": 0.2,
                 "peer": "torch", "runs": "rmsnorm__cfg0"})
    rows.append({**rmsnorm[1], "error": "CudaError: launch failed"})
    return {"meta": {"gpu": "Test GPU", "commit": "abc1234", "date": "2026-12-02"}, "rows": rows}


def test_report_statistics(sweep, shapes):
    results = _results(sweep, shapes)
    st = sweep.stats(results["rows"])
    g = st["gemm f16"]
    assert g["shapes"] == 12 and g["wrong"] == 0 and g["failed"] == 0 and g["no_tma"] == 3
    assert g["untuned"]["n"] == 10 and g["untuned"]["worst"] == pytest.approx(0.1)
    assert g["untuned"]["p10"] == pytest.approx(0.19)  # numpy's linear rank: 0.1 + 0.9 * (0.2 - 0.1)
    assert g["untuned"]["median"] == pytest.approx(0.55)
    assert g["tuned"] == {"n": 2, "worst": 2.0, "p10": 2.0, "median": 2.0}
    assert g["all"]["n"] == 12 and g["all"]["median"] == pytest.approx(0.65)
    r = st["rmsnorm"]  # the wrong shape's ratio is not counted; the failure is counted as one
    assert r["wrong"] == 1 and r["failed"] == 1 and r["all"] == {"n": 0}
    assert st["all"]["shapes"] == 14 and st["all"]["all"]["n"] == 12
    worst = sweep.worst(results["rows"])
    assert [w["ratio"] for w in worst] == pytest.approx([0.1 * (i + 1) for i in range(10)])
    text = sweep.markdown(results)
    assert "| gemm f16 | 12 | 0 | 0 | 3 | 0.10 / 0.21 / 0.65 (12) | 2.00 / 2.00 / 2.00 (2) |" in text
    assert "Wrong or failed (2)" in text and "CudaError: launch failed" in text and "error nan" in text


def test_each_side_is_timed_in_turn_and_its_median_taken(sweep):
    """run's timing (timed_pair): tilec and the peer alternate, so a slow stretch falls on both, and the median of
    each side's timings ignores one outlier -- a peer timed once at 4.6x its time (s20's sweep) no longer makes a shape
    look 4.6x better, nor a slow tilec timing a shape look worse."""
    order, clock = [], iter([1.0, 10.0, 46.0, 10.0, 1.1, 9.0, 0.9, 11.0, 1.0, 10.0])

    def bench(fn):
        order.append(fn())
        return next(clock)  # the clock of the enclosing scope, at the time of the call

    got = sweep.timed_pair(bench, lambda: "tilec", lambda: "peer", repeat=5)
    assert order == ["tilec", "peer"] * 5
    assert got == (1.0, 10.0, [1.0, 46.0, 1.1, 0.9, 1.0], [10.0, 10.0, 9.0, 11.0, 10.0])
    clock = iter([2.0, 3.0])
    assert sweep.timed_pair(bench, lambda: "tilec", lambda: "peer", repeat=1) == (2.0, 3.0, [2.0], [3.0])


def test_report_gives_the_dispatchs_regret_and_fp8_with_its_padding(sweep, shapes):
    """With every variant timed (`run --variants`): the chosen variant's time over the fastest one's, per family;
    and fp8 at padded sizes against _scaled_mm with its padding timed."""
    results = _results(sweep, shapes)
    gemm = [r for r in results["rows"] if r["family"] == "gemm f16"]
    gemm[0]["variants_ms"] = {"gemm__cfg0": 2.0, "gemm__cfg1": 1.0}  # ran cfg0 (its twin): regret 2
    gemm[4]["variants_ms"] = {"gemm__cfg0": 1.0, "gemm__cfg1": 1.05}  # ran cfg0, the fastest: regret 1
    gemm[11]["variants_ms"] = {"gemm__cfg0": 1.0, "gemm__cfg1": 1.2}  # ran cfg1: 1.2
    assert {f: sorted(v) for f, v in sweep.regrets(results["rows"]).items()} == {"gemm f16": [1.0, 1.2, 2.0]}
    fp8 = next(s for s in shapes if s["family"] == "fp8")
    results["rows"].append({**fp8, "ok": True, "err": 0.0, "tilec_ms": 1.0, "peer_ms": 0.5, "ratio": 0.5,
                            "peer": "_scaled_mm (padded to 16)", "runs": "fp8_gemm__cfg0+padded",
                            "peer_with_padding_ms": 0.8})
    text = sweep.markdown(results)
    assert "| gemm f16 | 3 | 1.20 | 1.84 | 2.00 | 2 |" in text
    assert "(1 shapes)" in text and "0.80 / 0.80 / 0.80" in text


def test_rescore_prices_another_dispatch_at_the_measured_variant_times(sweep, tmp_path):
    """rescore: the choice of a build folder's manifests (here a `when=` that passes over cfg1 for long rows), each
    shape priced at the run's time of the variant it picks; a manifest choosing a variant the run did not time is
    refused."""
    table = {"sizes": ["M", "N"], "configs": [{"kernel": "k__cfg0"}, {"kernel": "k__cfg1", "when": ["<=", "N", 1024]}],
             "rules": [{"at": {"M": 64, "N": 4096}, "config": 1}, {"at": {"M": 4096, "N": 65536}, "config": 0}]}
    (tmp_path / "k.cubin.json").write_text(json.dumps({"dispatch": {"k": table}}))
    rows = [{"family": "softmax", "build": "k", "sizes": {"M": 37, "N": 51200}, "runs": "k__cfg1", "peer_ms": 0.02,
             "variants_ms": {"k__cfg0": 0.02, "k__cfg1": 0.08}},
            {"family": "softmax", "build": "k", "sizes": {"M": 64, "N": 512}, "runs": "k__cfg1", "peer_ms": 0.01,
             "variants_ms": {"k__cfg0": 0.02, "k__cfg1": 0.01}},
            {"family": "softmax", "build": "k", "sizes": {"M": 8, "N": 64}, "runs": "k__cfg1", "peer_ms": 0.01}]
    scored = sweep.rescore(rows, tmp_path)["softmax"]
    assert scored["run"] == ([4.0, 1.0], [0.25, 1.0])
    assert scored["rescored"] == ([1.0, 1.0], [1.0, 1.0])  # the long rows go to cfg0, the short ones keep cfg1
    text = sweep.rescore_markdown(sweep.rescore(rows, tmp_path))
    assert "| softmax | 2 | run | 2.000 | 1 | 0.25 / 0.33 / 0.62 |" in text  # percentiles interpolate
    assert "| softmax | 2 | rescored | 1.000 | 0 | 1.00 / 1.00 / 1.00 |" in text
    table["configs"][0]["kernel"] = "k__cfg9"
    (tmp_path / "k.cubin.json").write_text(json.dumps({"dispatch": {"k": table}}))
    with pytest.raises(SystemExit, match="rescore needs the same variants"):
        sweep.rescore(rows, tmp_path)


def test_report_reads_the_databases_for_what_was_tuned(sweep, shapes, tmp_path):
    """`report` decides tuned or not from samples/*.tune.json, not from the results file."""
    results = _results(sweep, shapes)
    for r in results["rows"]:
        r["tuned"] = not r["tuned"]
    sweep.retag_tuned(results["rows"])
    assert sum(r["tuned"] for r in results["rows"]) == 2


def test_report_writes_table_and_plot(sweep, shapes, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results(sweep, shapes)))
    png, md = tmp_path / "sweep.png", tmp_path / "sweep.md"
    sweep.report(path, png, md)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "The 10 worst shapes" in md.read_text() and "Test GPU" in capsys.readouterr().out


def _doc_commands(after: str) -> list[str]:
    """The `$ ` commands of the first console block after `after` in docs/tuning.md, continuation lines joined."""
    text = (ROOT / "docs" / "tuning.md").read_text()
    block = text[text.index(after):].split("```console\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.startswith("$ "):
            commands.append(line[2:].split("  #")[0].strip())
    return commands


def test_the_documented_recipe_for_your_own_shapes(tmp_path):
    """docs/tuning.md's fp8 commands for a model's own shapes, as written (in a copy of samples/): build the
    candidates, the worker's results stood in by a file, collect into the user's database, build with it."""
    import os
    import shlex
    import shutil
    import subprocess
    import sys

    from tilec.targets.cuda.nvrtc import find_lib
    from tilec.tuning.shapes import label

    if find_lib() is None:
        pytest.skip("NVRTC is not installed")
    (tmp_path / "samples").mkdir()
    for name in ("fp8_gemm.tile", "fp8_gemm.tune.json"):
        shutil.copy(ROOT / "samples" / name, tmp_path / "samples" / name)
    commands = _doc_commands("The fp8 gemm takes the same steps")
    assert [c.split()[:2] for c in commands] == [
        ["cp", "samples/fp8_gemm.tune.json"], ["tilec", "tune"], ["python", "-m"], ["tilec", "tune"],
        ["tilec", "samples/fp8_gemm.tile"]]
    env = {k: v for k, v in os.environ.items() if k != "TILEC_TUNE_DB"}
    env.update(PYTHONPATH=str(ROOT), NO_COLOR="1")
    mine = [{"M": 1, "N": 6144, "K": 4096}, {"M": 2048, "N": 128256, "K": 4096}]
    for command in commands:
        argv = shlex.split(command)
        if argv[0] == "cp":
            shutil.copy(tmp_path / argv[1], tmp_path / argv[2])
            continue
        if argv[0] == "python":  # the GPU machine's step: the worker's results.json, written as it would
            folder = tmp_path / argv[-1]
            plan = json.loads((folder / "plan.json").read_text())
            # the user's shapes and the standard sets' 19 (4096^3 is in both)
            assert all(s in plan["shapes"] for s in mine) and len(plan["shapes"]) == 19 + len(mine)
            built = [c for c in plan["candidates"] if c["status"] == "built"]
            winner = built[-1]  # fastest at the user's shapes, slowest at the others
            times = {str(c["index"]): {"check": "ok", "times": {
                label(s): (1.0 if (c is winner) == (s in mine) else 2.0 + c["index"]) for s in plan["shapes"]}}
                for c in built}
            (folder / "results.json").write_text(json.dumps({"version": 1, "gpu": "test GPU", "cuda_driver": 13000,
                                                             "cc": "9.0", "date": "2026-12-02", "candidates": times}))
            continue
        r = subprocess.run([sys.executable, "-m", "tilec", *argv[1:]], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, (command, r.stderr)
    db = json.loads((tmp_path / "my_fp8.tune.json").read_text())
    assert len(db["entries"]) == 1 and db["entries"][0]["gpu"] == "test GPU"
    manifest = json.loads((tmp_path / "fp8_gemm.cubin.json").read_text())
    table = manifest["dispatch"]["fp8_gemm"]
    for s in mine:
        (rule,) = [r for r in table["rules"] if r["at"] == s]
        assert table["configs"][rule["config"]]["consts"] == {**winner["config"]}


def test_misaligned_picks_the_shapes_with_rows_not_a_multiple_of_16_bytes(sweep, shapes):
    def shape(family, M, N, K):
        return {"family": family, "sizes": {"M": M, "N": N, "K": K}}

    assert sweep.misaligned_rows(shape("gemm f16", 7, 64, 4099))
    assert sweep.misaligned_rows(shape("gemm bf16", 7, 50257, 64))
    assert not sweep.misaligned_rows(shape("gemm f16 trans_B", 1, 4096, 4096))  # M is no row's width
    assert sweep.misaligned_rows(shape("fp8", 64, 64, 4104))  # fp8's K: 16 one-byte elements
    assert not sweep.misaligned_rows(shape("fp8", 64, 4104, 4096))  # N: the bf16 output's rows, 8 elements
    assert not sweep.misaligned_rows({"family": "softmax", "sizes": {"M": 3, "N": 1001}})
    picked = [s for s in shapes if sweep.misaligned_rows(s)]
    assert 40 <= len(picked) < len(shapes) / 10


def test_build_passes_the_toolchain_choice_to_every_compile(sweep, tmp_path, monkeypatch):
    # an NVRTC build beside the default one is how the sweep times what a user without a CUDA toolkit runs
    import tilec.cli.main

    calls = []
    monkeypatch.setattr(tilec.cli.main, "main", lambda argv: calls.append(argv) or 0)
    sweep.build(tmp_path, ["softmax", "rmsnorm"], compiler="nvrtc")
    assert len(calls) == 2 and all(argv[-2:] == ["--compiler", "nvrtc"] for argv in calls)
    assert json.loads((tmp_path / "shapes.json").read_text())["meta"]["compiler"] == "nvrtc"
    calls.clear()
    sweep.build(tmp_path, ["softmax"])
    assert "--compiler" not in calls[0]
    # a code-generation switch beside the default build (--tilec-flag): the A/B of --simplify-indices
    calls.clear()
    sweep.build(tmp_path, ["softmax"], flags=["--simplify-indices"])
    assert "--simplify-indices" in calls[0]
    assert json.loads((tmp_path / "shapes.json").read_text())["meta"]["flags"] == ["--simplify-indices"]
