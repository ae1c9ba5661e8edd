"""The row kernels (softmax, rmsnorm, layernorm) and thin gemm shapes against torch, in one GPU run.

    python bench/rows_h200.py build .artifacts/rows/bench     # here: compile (no GPU needed)
    python bench/rows_h200.py build --default-only .artifacts/rows/bench   # the default builds (database)
    python3 bench/rows_h200.py run .artifacts/rows/bench      # on the H200: check, time, print a table
    python3 bench/rows_h200.py run --rows-only --sweep .artifacts/rows/bench   # rows only, and the sweep
    python3 bench/rows_h200.py run --rows-only --sweep --baseline .artifacts/rows/old .artifacts/rows/new

The fixed configurations are (block_M, block_N, threads, tile_elems, row_grid): row_grid 0 the block-per-row
schedules, > 0 the persistent one (a grid of row_grid blocks looping over the rows, the next rows prefetched into
a second shared stage); a configuration a sample's constraint refuses (too much shared memory for row_grid / 132
blocks a multiprocessor) is skipped at build time. `--sweep` times the default build (and `--baseline`'s) against
torch and a copy at every row length of SWEEP_N and row count of SWEEP_M.

Rows: every artifact (the default build, which dispatches over the tuned configurations, and fixed
configurations of each schedule) is first checked against torch at ragged row lengths from 128 to
65536, 37 and 1500 rows (outputs poisoned with NaN first; the worst row's ‖out − ref‖ / ‖ref‖ against a
float32 torch reference), then timed at the tuning shapes. TB/s counts one read and one write of X (the
weights are not counted).
Gemm: the default gemm build and gemm_splitk (C zeroed, f32 atomics, then cast to bf16: the three
launches a caller needs) against cuBLAS at M=128 and 1000³. Times: triton.testing.do_bench medians.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NORMS = ["softmax", "rmsnorm", "layernorm"]
# Fixed row configurations (block_M, block_N, threads, tile_elems, row_grid): the sm90 default, its 4-element
# register tile, long-row ones, short-row ones; then the persistent schedule with 2, 3 or 4 blocks a multiprocessor,
# a row read back a column tile at a time or held in one register tile. Every candidate of a `tilec tune` build
# folder given to `run` is checked too.
ROW_CONFIGS = [(1, 8192, 256, 8, 0), (1, 8192, 256, 4, 0), (1, 16384, 1024, 8, 0), (1, 65536, 1024, 8, 0),
               (4, 1024, 128, 8, 0), (16, 128, 128, 8, 0),
               (1, 8192, 256, 8, 528), (1, 8192, 256, 8, 396), (1, 8192, 1024, 8, 264), (1, 8192, 512, 16, 264),
               (1, 8192, 256, 32, 264), (1, 16384, 1024, 16, 132), (4, 1024, 128, 8, 528), (16, 128, 128, 8, 528)]
CHECK_LENGTHS = [128, 129, 1000, 4095, 8192, 8193, 16385, 50257, 65536]
# 37 rows: a block each; 1500: the persistent grids (132 to 528 blocks) loop over several row blocks a block.
CHECK_ROWS = [37, 1500]
SHAPES = [(4096, 128), (4096, 1024), (4096, 2048), (4096, 4096), (4096, 8192), (32768, 8192), (4096, 16384),
          (4096, 50257), (1024, 65536), (64, 4096), (32768, 4096)]
# The sweep (issue 14: >= 0.9x torch at every row length and row count); shapes over 2^30 elements are left out.
SWEEP_N = [128, 256, 1000, 1024, 2048, 4096, 8192, 16384, 32768, 50257, 65536]
SWEEP_M = [1, 64, 1024, 4096, 32768, 65536]
GEMM_SHAPES = [(128, 4096, 4096), (128, 11008, 4096), (128, 4096, 11008), (1000, 1000, 1000)]
SPLITK_CONFIGS = [("64x128x64 sk4", ["block_M=64", "block_N=128", "block_K=64", "threads=128", "num_stages=4",
                                     "split_k=4"]),
                  ("64x128x64 sk8", ["block_M=64", "block_N=128", "block_K=64", "threads=128", "num_stages=4",
                                     "split_k=8"]),
                  ("128x128x64 sk4", ["block_M=128", "block_N=128", "block_K=64", "threads=128", "num_stages=4",
                                      "split_k=4"])]


def _label(cfg) -> str:
    return "x".join(map(str, cfg))


def _name(norm: str, cfg) -> str:
    return f"{norm}_{_label(cfg)}"


def build(out: Path, default_only: bool) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)

    def tc(sample: str, name: str, *defs: str, may_refuse: bool = False) -> None:
        rc = tilec_main([str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "-o", str(out / f"{name}.cubin"),
                         *[f"-D{d}" for d in defs]])
        if rc and may_refuse:
            print(f"skipped {name}: the sample refuses this configuration", flush=True)
        elif rc:
            raise SystemExit(f"build of {name} failed")

    if default_only:  # after the tuning database is regenerated: the artifacts a user gets with no -D
        for n in NORMS:
            tc(n, f"{n}_default", "dtype=bf16")
        return
    for n in NORMS:
        for cfg in ROW_CONFIGS:
            tc(n, _name(n, cfg), "dtype=bf16", f"block_M={cfg[0]}", f"block_N={cfg[1]}", f"threads={cfg[2]}",
               f"tile_elems={cfg[3]}", f"row_grid={cfg[4]}", may_refuse=cfg[4] > 0)
    tc("gemm", "gemm_default", "dtype=bf16")
    for i, (_, defs) in enumerate(SPLITK_CONFIGS):
        tc("gemm_splitk", f"gemm_splitk_{i}", "dtype=bf16", *defs)


def run(out: Path, results_path: str | None, tune_dirs: list[Path], rows_only: bool, sweep: bool,
        baseline: Path | None) -> None:
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    import tilec.runtime as rt

    torch.manual_seed(0)
    dev = "cuda"
    rows = []

    def bench(fn) -> float:
        return do_bench(fn, warmup=10, rep=60)

    def peer(norm, x, w, b):
        n = x.shape[1]
        if norm == "softmax":
            return torch.softmax(x.float(), dim=-1)
        if norm == "rmsnorm":
            return F.rms_norm(x.float(), (n,), w.float(), 1e-6)
        return F.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)

    def peer_native(norm, x, w, b):
        n = x.shape[1]
        if norm == "softmax":
            return lambda: torch.softmax(x, dim=-1)
        if norm == "rmsnorm":
            return lambda: F.rms_norm(x, (n,), w, 1e-6)
        return lambda: F.layer_norm(x, (n,), w, b, 1e-5)

    def args(norm, x, w, b, y):
        if norm == "softmax":
            return (x, y)
        if norm == "rmsnorm":
            return (x, w, y, 1e-6)
        return (x, w, b, y, 1e-5)

    def inputs(m, n):
        x = (torch.randn(m, n, device=dev) * 2 + torch.rand(m, 1, device=dev) * 4 - 2).to(torch.bfloat16)
        w = torch.randn(n, device=dev).to(torch.bfloat16)
        b = torch.randn(n, device=dev).to(torch.bfloat16)
        return x, w, b

    def copy_bandwidth() -> float:
        src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        return 2 * src.numel() / bench(lambda: dst.copy_(src)) / 1e9

    tbps = copy_bandwidth()
    print(f"copy 1 GiB: {tbps:.2f} TB/s", flush=True)
    rows.append({"what": "copy", "tbps": tbps})

    artifacts = {}
    for norm in NORMS:
        names = [f"{norm}_default"] + [_name(norm, c) for c in ROW_CONFIGS]
        for name in names:
            path = out / f"{name}.cubin"
            if path.exists():
                artifacts[name] = rt.load(path).kernels[norm]
        if baseline is not None and (baseline / f"{norm}_default.cubin").exists():
            artifacts[f"{norm}_baseline"] = rt.load(baseline / f"{norm}_default.cubin").kernels[norm]

    # every candidate a tuning run built (the configurations a database can select): checked, not timed
    checked = dict(artifacts)
    for folder in tune_dirs:
        norm = folder.name.split("_")[0]
        for path in sorted(folder.glob("cand*.cubin")):
            checked[f"{norm}_tune_{path.stem}"] = rt.load(path).kernels[norm]

    # ---- correctness at ragged row lengths
    bad = 0
    for norm in NORMS:
        for m, n in [(m, n) for m in CHECK_ROWS for n in CHECK_LENGTHS]:
            x, w, b = inputs(m, n)
            ref = peer(norm, x, w, b)
            for name, kern in checked.items():
                if not name.startswith(norm + "_"):
                    continue
                y = torch.full_like(x, float("nan"))
                kern(*args(norm, x, w, b, y))
                torch.cuda.synchronize()
                # the worst row, so that one wrong row among 1500 shows
                err = ((y.float() - ref).norm(dim=1) / ref.norm(dim=1)).max().item()
                ok = err < 1e-2 and not torch.isnan(y).any().item()
                bad += not ok
                rows.append({"what": "check", "artifact": name, "M": m, "N": n, "rel_err": err, "ok": ok})
                if not ok:
                    print(f"WRONG {name} M={m} N={n}: rel err {err}", flush=True)
    print(f"row checks: {sum(1 for r in rows if r['what'] == 'check')} runs, {bad} wrong", flush=True)

    # ---- timing
    table = []
    for m, n in SHAPES:
        x, w, b = inputs(m, n)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * 2
        for norm in NORMS:
            t_peer = bench(peer_native(norm, x, w, b))
            line = {"norm": norm, "M": m, "N": n, "torch": nbytes / t_peer / 1e9}
            for name, kern in artifacts.items():
                if name.startswith(norm + "_"):
                    a = args(norm, x, w, b, y)
                    line[name[len(norm) + 1:]] = nbytes / bench(lambda: kern(*a)) / 1e9  # noqa: B023
            table.append(line)
            rows.append({"what": "time", **line})
        del x, w, b, y
    cols = ["torch", "baseline", "default"] + [_label(c) for c in ROW_CONFIGS]
    cols = [c for c in cols if any(c in line for line in table)]
    print("\nTB/s (one read + one write of X, bf16; row_grid last in a configuration, 0: no persistence)")
    print(f"{'kernel':<10} {'shape':<12} " + " ".join(f"{c:>16}" for c in cols))
    for line in table:
        print(f"{line['norm']:<10} {line['M']}x{line['N']:<7} " +
              " ".join(f"{line.get(c, float('nan')):16.2f}" for c in cols))
    print("\nbest of each shape against torch (ratio of times; >1: tilec faster)")
    for line in table:
        best = max((c for c in cols if c != "torch" and c in line), key=lambda c: line[c], default=None)
        if best is not None:
            print(f"{line['norm']:<10} {line['M']}x{line['N']:<7} {best:>16} {line[best]:6.2f} TB/s "
                  f"{line[best] / line['torch']:5.2f}x torch", flush=True)

    if sweep:
        sweep_rows(artifacts, rows, bench, inputs, args, peer_native, tbps)
    if rows_only:
        if results_path:
            Path(results_path).write_text(json.dumps(rows, indent=1))
        return

    # ---- thin gemm: default build and split-K against cuBLAS
    gpath = out / "gemm_default.cubin"
    if gpath.exists():
        gemm = rt.load(gpath).kernels["gemm"]
        sks = [(label, rt.load(out / f"gemm_splitk_{i}.cubin").kernels["gemm_splitk"])
               for i, (label, _) in enumerate(SPLITK_CONFIGS)]
        print("\ngemm bf16 TFLOP/s")
        for m, n, k in GEMM_SHAPES:
            a = torch.randn(m, k, device=dev).to(torch.bfloat16)
            bb = torch.randn(k, n, device=dev).to(torch.bfloat16)
            c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            c32 = torch.empty(m, n, device=dev, dtype=torch.float32)
            ref = torch.matmul(a, bb).float()
            flops = 2 * m * n * k
            line = {"M": m, "N": n, "K": k, "cuBLAS": flops / bench(lambda: torch.matmul(a, bb)) / 1e9}  # noqa: B023
            c.fill_(float("nan"))
            gemm(a, bb, c)
            torch.cuda.synchronize()
            line["default_err"] = ((c.float() - ref).norm() / ref.norm()).item()
            line["default"] = flops / bench(lambda: gemm(a, bb, c)) / 1e9  # noqa: B023
            for label, sk in sks:
                def splitk(sk=sk, a=a, bb=bb, c=c, c32=c32):
                    c32.zero_()
                    sk(a, bb, c32)
                    c.copy_(c32)
                splitk()
                torch.cuda.synchronize()
                line[label + " err"] = ((c.float() - ref).norm() / ref.norm()).item()
                line[label + " (kernel only)"] = flops / bench(lambda sk=sk, a=a, bb=bb, c32=c32: sk(a, bb, c32)) / 1e9
                line[label + " (zero+kernel+cast)"] = flops / bench(splitk) / 1e9
            rows.append({"what": "gemm", **line})
            print(" ".join(f"{k_}={v:.4g}" if isinstance(v, float) else f"{k_}={v}" for k_, v in line.items()),
                  flush=True)
    if results_path:
        Path(results_path).write_text(json.dumps(rows, indent=1))


def sweep_rows(artifacts, rows, bench, inputs, args, peer_native, copy_tbps) -> None:
    """The default build (and the baseline's) against torch at every (M, N) of the sweep: TB/s and the ratio."""
    import torch

    print(f"\nsweep: TB/s counted (copy {copy_tbps:.2f}), ratio = tilec / torch (>= 0.9 is issue 14's target)")
    worst = {}
    for n in SWEEP_N:
        for m in SWEEP_M:
            if m * n > 1 << 30:
                continue
            x, w, b = inputs(m, n)
            y = torch.empty_like(x)
            nbytes = 2 * x.numel() * 2
            for norm in NORMS:
                line = {"norm": norm, "M": m, "N": n, "torch": nbytes / bench(peer_native(norm, x, w, b)) / 1e9}
                for which in ("default", "baseline"):
                    kern = artifacts.get(f"{norm}_{which}")
                    if kern is not None:
                        a = args(norm, x, w, b, y)
                        line[which] = nbytes / bench(lambda: kern(*a)) / 1e9  # noqa: B023
                        line[which + "_ratio"] = line[which] / line["torch"]
                rows.append({"what": "sweep", **line})
                if "default_ratio" in line and line["default_ratio"] < worst.get(norm, (9e9,))[0]:
                    worst[norm] = (line["default_ratio"], (m, n))
                print(f"{norm:<10} {m:>6}x{n:<6} torch {line['torch']:6.2f}  " +
                      "  ".join(f"{k} {line[k]:6.2f} ({line[k + '_ratio']:4.2f}x)"
                                for k in ("baseline", "default") if k in line), flush=True)
            del x, w, b, y
    for norm, (ratio, shape) in worst.items():
        print(f"worst {norm}: {ratio:.2f}x torch at {shape}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "run"])
    ap.add_argument("dir")
    ap.add_argument("--results")
    ap.add_argument("--default-only", action="store_true", help="build only the default row artifacts")
    ap.add_argument("--check-tuned", action="append", default=[], type=Path,
                    help="a `tilec tune --build-dir` folder whose candidates are checked too (repeatable)")
    ap.add_argument("--rows-only", action="store_true", help="skip the gemm part")
    ap.add_argument("--sweep", action="store_true", help="time the default builds over SWEEP_M x SWEEP_N")
    ap.add_argument("--baseline", type=Path, help="a build folder whose default row artifacts are timed beside")
    a = ap.parse_args()
    if a.mode == "build":
        build(Path(a.dir), a.default_only)
    else:
        run(Path(a.dir), a.results, a.check_tuned, a.rows_only, a.sweep, a.baseline)


if __name__ == "__main__":
    main()
