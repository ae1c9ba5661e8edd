"""Row kernels on odd row lengths (issue #26): load_realign against the element-by-element loads, beside torch.

    python bench/perf_next_gpu.py build DIR        # here, no GPU: DIR/{norm}_{dtype}_{realign,plain}.cubin
    python3 bench/perf_next_gpu.py run DIR [--results FILE]   # on the GPU: check, then time, print a table
    compute-sanitizer --tool memcheck python3 bench/perf_next_gpu.py check DIR   # the realign builds, small shapes

`build` compiles softmax, rmsnorm and layernorm for sm90 with their committed databases (what a user gets with no -D)
in bf16, f16 and f32, twice: with `--realign-rows` (`realign`: misaligned rows into fragments by tl::load_realign,
the no-TMA twins' row pipelines by copy_shifted) and as a user gets them (`plain`: element-by-element loads, the
default since the H200 run of 2026-12-02 found realign slower). `run`
needs only numpy, torch, triton and tilec.runtime: it checks every build at odd and ragged row lengths against a
float32 torch reference (outputs poisoned with NaN first; the worst row's relative error), then times both builds
and torch at odd row lengths and at aligned ones (where the two builds run the same path: their difference there is
what the realigned branch's registers cost) with triton.testing.do_bench (median). TB/s counts one read and one
write of X. bench/perf_next_gpu.sh runs this and the misaligned gemm/fp8 table (bench/misaligned_h200.py) in one go.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NORMS = ["softmax", "rmsnorm", "layernorm"]
DTYPES = ["bf16", "f16", "f32"]
VARIANTS = {"realign": ["--realign-rows"], "plain": []}
CHECK = [(37, 1001), (37, 4095), (5, 20001), (1500, 8193), (3, 50257), (37, 50257), (64, 1000)]
CHECK_SMALL = [(3, 1001), (2, 20001), (2, 50257)]  # `check` (under compute-sanitizer): the tensor's end in every path
# odd rows (the vocabulary, odd hidden sizes), then aligned anchors (the same code path in both builds)
TIME = [(4096, 50257), (1024, 50257), (4096, 4095), (4096, 8193), (32768, 4097), (4096, 1001), (64, 50257),
        (4096, 50264), (4096, 4096), (4096, 2048), (32768, 8192), (4096, 1024)]


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for norm in NORMS:
        for dt in DTYPES:
            for variant, flags in VARIANTS.items():
                name = f"{norm}_{dt}_{variant}"
                rc = tilec_main([str(ROOT / "samples" / f"{norm}.tile"), "--target", "sm90", f"-Ddtype={dt}",
                                 *flags, "-o", str(out / f"{name}.cubin")])
                if rc:
                    raise SystemExit(f"build of {name} failed")
                print(f"built {name}", flush=True)


def run(out: Path, results: str | None, check_only: bool = False) -> int:
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    import tilec.runtime as rt

    torch.manual_seed(0)
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    kern = {}
    for norm in NORMS:
        for dt in DTYPES:
            for variant in VARIANTS:
                path = out / f"{norm}_{dt}_{variant}.cubin"
                if path.exists():
                    kern[(norm, dt, variant)] = rt.load(path).kernels[norm]

    def inputs(m, n, dt):
        x = (torch.randn(m, n, device="cuda") * 2 + torch.rand(m, 1, device="cuda") * 4 - 2).to(tdt[dt])
        return x, torch.randn(n, device="cuda").to(tdt[dt]), torch.randn(n, device="cuda").to(tdt[dt])

    def ref(norm, x, w, b):
        n = x.shape[1]
        if norm == "softmax":
            return torch.softmax(x.float(), dim=-1)
        if norm == "rmsnorm":
            return F.rms_norm(x.float(), (n,), w.float(), 1e-6)
        return F.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)

    def peer(norm, x, w, b):
        n = x.shape[1]
        if norm == "softmax":
            return lambda: torch.softmax(x, dim=-1)
        if norm == "rmsnorm":
            return lambda: F.rms_norm(x, (n,), w, 1e-6)
        return lambda: F.layer_norm(x, (n,), w, b, 1e-5)

    def args(norm, x, w, b, y):
        return (x, y) if norm == "softmax" else (x, w, y, 1e-6) if norm == "rmsnorm" else (x, w, b, y, 1e-5)

    rows, bad = [], 0
    for (norm, dt, variant), k in kern.items():
        if check_only and variant != "realign":
            continue
        for m, n in CHECK_SMALL if check_only else CHECK:
            x, w, b = inputs(m, n, dt)
            r = ref(norm, x, w, b)
            y = torch.full_like(x, float("nan"))
            k(*args(norm, x, w, b, y))
            torch.cuda.synchronize()
            err = ((y.float() - r).norm(dim=1) / r.norm(dim=1)).max().item()
            ok = err < (1e-4 if dt == "f32" else 1e-2) and not torch.isnan(y).any().item()
            bad += not ok
            rows.append({"what": "check", "norm": norm, "dtype": dt, "variant": variant, "M": m, "N": n,
                         "rel_err": err, "ok": ok})
            if not ok:
                print(f"WRONG {norm} {dt} {variant} M={m} N={n}: rel err {err}", flush=True)
    print(f"checks: {sum(r['what'] == 'check' for r in rows)} runs, {bad} wrong", flush=True)
    if check_only:
        return 1 if bad else 0

    print("\nTB/s (one read + one write of X); ratio = torch time / tilec time (> 1: tilec faster)")
    print(f"{'kernel':<10} {'dtype':<5} {'shape':<12} {'torch':>7} {'plain':>7} {'realign':>8} "
          f"{'plain/torch':>12} {'realign/torch':>14} {'gain':>6}")
    for dt in DTYPES:
        for m, n in TIME:
            if m * n * (4 if dt == "f32" else 2) > 1 << 31:
                continue
            x, w, b = inputs(m, n, dt)
            y = torch.empty_like(x)
            nbytes = 2 * x.numel() * x.element_size()
            for norm in NORMS:
                line = {"what": "time", "norm": norm, "dtype": dt, "M": m, "N": n,
                        "torch": nbytes / do_bench(peer(norm, x, w, b), warmup=10, rep=60) / 1e9}
                for variant in VARIANTS:
                    k = kern.get((norm, dt, variant))
                    if k is not None:
                        a = args(norm, x, w, b, y)
                        line[variant] = nbytes / do_bench(lambda k=k, a=a: k(*a), warmup=10, rep=60) / 1e9
                rows.append(line)
                p, q, t = line.get("plain", float("nan")), line.get("realign", float("nan")), line["torch"]
                print(f"{norm:<10} {dt:<5} {m}x{n:<7} {t:7.2f} {p:7.2f} {q:8.2f} {p / t:12.2f} {q / t:14.2f} "
                      f"{q / p:6.2f}", flush=True)
            del x, w, b, y
    if results:
        Path(results).write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "run", "check"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--results")
    a = ap.parse_args()
    if a.mode == "build":
        build(a.dir)
    else:
        raise SystemExit(run(a.dir, a.results, check_only=a.mode == "check"))


if __name__ == "__main__":
    main()
