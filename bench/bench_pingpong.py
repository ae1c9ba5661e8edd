"""Persistent ping-pong on sm90 (docs/hopper.md, "Persistent ping-pong"): the gemm and the fp8 gemm as plain
(non-persistent) kernels, persistent, and persistent ping-pong (two consumer warpgroups on alternate tiles), against
cuBLAS (torch.matmul) and torch._scaled_mm, timed in the same process.

    python bench/bench_pingpong.py build OUT     # here: compile the variants (no GPU needed)
    python bench/bench_pingpong.py run OUT       # on the H200: check against torch, then time, print a table
    python bench/bench_pingpong.py check OUT     # one ragged launch of each ping-pong variant (for compute-sanitizer)

`run` needs torch, numpy, cuda-bindings and tilec/runtime only. Correctness: max |C - torch| / max |torch| at
regular and ragged shapes (odd tile counts per block, K = 100 where the no-TMA twin runs), C poisoned with NaN
first. Timing: CUDA events around each launch after a warm-up, the median of REPEATS launches, every variant and
the vendor kernel timed back to back per shape, the whole round twice (the run-to-run spread).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PP = ["persistent=True", "pingpong=True"]
# (label, sample, defines): the sm90 default tile (two warpgroups sharing a 128x256 tile), the same persistent, and
# ping-pong with one warpgroup's tile of 64x256 or 128x128 (each a consumer warpgroup's own)
GEMM = [
    ("128x256 plain", ["block_M=128", "block_N=256", "block_K=64", "threads=256", "num_stages=4"]),
    ("128x256 persist", ["block_M=128", "block_N=256", "block_K=64", "threads=256", "num_stages=4",
                         "persistent=True"]),
    ("pp 64x256", ["block_M=64", "block_N=256", "block_K=64", "threads=128", "num_stages=4", *PP]),
    ("pp 128x128", ["block_M=128", "block_N=128", "block_K=64", "threads=128", "num_stages=4", *PP]),
]
FP8 = [
    ("128x256 plain", ["block_M=128", "block_N=256", "block_K=128", "threads=256", "num_stages=4"]),
    ("pp 64x256", ["block_M=64", "block_N=256", "block_K=128", "threads=128", "num_stages=4", "pingpong=True"]),
    ("pp 128x128", ["block_M=128", "block_N=128", "block_K=128", "threads=128", "num_stages=4", "pingpong=True"]),
]
# (M, N, K): square, a ragged-in-tiles shape, and an LLM MLP projection (16384 tokens, 4096 -> 14336)
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (5120, 3584, 7168), (16384, 14336, 4096)]
CHECKS = [(1024, 1024, 512), (300, 264, 136), (1000, 1000, 1000), (392, 520, 328), (300, 200, 100)]
REPEATS = 50
DTYPES = ("f16", "bf16")


def _name(kind: str, dt: str, i: int) -> str:
    return f"{kind}_{dt}_{i}.cubin"


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    jobs = [("gemm", dt, i, [f"-Ddtype={dt}", *[f"-D{d}" for d in defs]])
            for dt in DTYPES for i, (_, defs) in enumerate(GEMM)]
    jobs += [("fp8_gemm", "e4m3", i, [f"-D{d}" for d in defs]) for i, (_, defs) in enumerate(FP8)]
    for sample, dt, i, flags in jobs:
        path = out / _name(sample, dt, i)
        if tilec_main([str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "-o", str(path),
                       "--resource-usage", *flags]):
            raise SystemExit(f"build of {path.name} failed")
    print(f"built {len(jobs)} kernels into {out}")


def _kernels(out: Path):
    import tilec.runtime as rt

    gemm = {(dt, i): rt.load(out / _name("gemm", dt, i)).gemm for dt in DTYPES for i in range(len(GEMM))}
    fp8 = {i: rt.load(out / _name("fp8_gemm", "e4m3", i)).fp8_gemm for i in range(len(FP8))}
    return gemm, fp8


def _time(fn) -> float:
    """Median milliseconds of REPEATS launches, each between two CUDA events, after a warm-up."""
    import torch

    for _ in range(5):
        fn()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def _fp8_inputs(m: int, n: int, k: int):
    import torch

    a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)  # [N, K]: K-major, as _scaled_mm wants
    return a, b, 0.5, 0.25


def _scaled_mm(a, b, sa: float, sb: float):
    import torch

    return torch._scaled_mm(a, b.t(), scale_a=torch.tensor(sa, device="cuda"),
                            scale_b=torch.tensor(sb, device="cuda"), out_dtype=torch.bfloat16)


def _err(c, ref) -> float:
    return ((c.float() - ref).abs().max() / ref.abs().max()).item()


def correctness(gemm, fp8) -> int:
    import torch

    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}
    bad = 0
    for m, n, k in CHECKS:
        for dt in DTYPES:
            a = torch.randn(m, k, dtype=tdt[dt], device="cuda")
            b = torch.randn(k, n, dtype=tdt[dt], device="cuda")
            ref = a.float() @ b.float()
            for i, (label, _) in enumerate(GEMM):
                c = torch.full((m, n), float("nan"), dtype=tdt[dt], device="cuda")
                gemm[(dt, i)](a, b, c)
                err = _err(c, ref)
                ok = err < 1e-2 and not torch.isnan(c).any().item()
                bad += not ok
                print(f"  {dt:<4} {m}x{n}x{k:<6} {label:<16} {err:.2e} {'ok' if ok else 'FAIL'}")
        a8, b8, sa, sb = _fp8_inputs(m, n, k)
        ref = (a8.float() @ b8.float().t()) * (sa * sb)
        for i, (label, _) in enumerate(FP8):
            c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            fp8[i](a8, b8, sa, sb, c)
            err = _err(c, ref)
            ok = err < 1e-2 and not torch.isnan(c).any().item()
            bad += not ok
            print(f"  e4m3 {m}x{n}x{k:<6} {label:<16} {err:.2e} {'ok' if ok else 'FAIL'}")
    return bad


def timing(gemm, fp8) -> int:
    import torch

    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}
    bad = 0
    print(f"\nTFLOP/s (median of {REPEATS} launches, CUDA events), two rounds")
    for kind, labels, vendor in (("gemm", GEMM, "cuBLAS"), ("fp8", FP8, "_scaled_mm")):
        print(f"\n{'':<5} {'shape':<20} {vendor:>11}" + "".join(f"{label:>17}" for label, _ in labels))
        for dt in (DTYPES if kind == "gemm" else ("e4m3",)):
            for m, n, k in SHAPES:
                flops = 2 * m * n * k
                if kind == "gemm":
                    a = torch.randn(m, k, dtype=tdt[dt], device="cuda")
                    b = torch.randn(k, n, dtype=tdt[dt], device="cuda")
                    c = torch.empty(m, n, dtype=tdt[dt], device="cuda")
                    ref = torch.matmul(a, b).float()
                    runs = [lambda a=a, b=b: torch.matmul(a, b)]
                    runs += [lambda f=gemm[(dt, i)], a=a, b=b, c=c: f(a, b, c) for i in range(len(labels))]
                else:
                    a, b, sa, sb = _fp8_inputs(m, n, k)
                    c = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
                    ref = _scaled_mm(a, b, sa, sb).float()
                    ta, tb = torch.tensor(sa, device="cuda"), torch.tensor(sb, device="cuda")
                    runs = [lambda a=a, b=b, ta=ta, tb=tb: torch._scaled_mm(a, b.t(), scale_a=ta, scale_b=tb,
                                                                            out_dtype=torch.bfloat16)]
                    runs += [lambda f=fp8[i], a=a, b=b, c=c, sa=sa, sb=sb: f(a, b, sa, sb, c)
                             for i in range(len(labels))]
                for round_ in range(2):
                    tf = [flops / _time(run) / 1e9 for run in runs]
                    print(f"{dt:<5} {f'{m}x{n}x{k}':<20} {tf[0]:11.1f}" + "".join(f"{x:17.1f}" for x in tf[1:])
                          + ("" if round_ == 0 else "   (again)"))
                for i in range(len(labels)):  # the timed launches computed the right thing too
                    c.fill_(float("nan"))
                    runs[1 + i]()
                    if not _err(c, ref) < 1e-2:
                        bad += 1
                        print(f"  FAIL: {labels[i][0]} at {m}x{n}x{k}: {_err(c, ref):.2e}")
    return bad


def check(out: Path) -> None:
    """One ragged launch of each ping-pong variant, for compute-sanitizer (memcheck, racecheck, synccheck)."""
    import torch

    gemm, fp8 = _kernels(out)
    for (dt, i), f in gemm.items():
        if GEMM[i][0].startswith("pp"):
            t = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
            a, b = torch.randn(392, 328, dtype=t, device="cuda"), torch.randn(328, 520, dtype=t, device="cuda")
            c = torch.empty(392, 520, dtype=t, device="cuda")
            f(a, b, c)
            torch.cuda.synchronize()
            print(f"{dt} {GEMM[i][0]}: {_err(c, a.float() @ b.float()):.2e}")
    for i, f in fp8.items():
        if FP8[i][0].startswith("pp"):
            a, b, sa, sb = _fp8_inputs(392, 520, 328)
            c = torch.empty(392, 520, dtype=torch.bfloat16, device="cuda")
            f(a, b, sa, sb, c)
            torch.cuda.synchronize()
            print(f"e4m3 {FP8[i][0]}: {_err(c, (a.float() @ b.float().t()) * (sa * sb)):.2e}")


def run(out: Path) -> None:
    import torch

    print(torch.cuda.get_device_name())
    gemm, fp8 = _kernels(out)
    bad = correctness(gemm, fp8)
    bad += timing(gemm, fp8)
    print(f"\ncorrectness failures: {bad}")
    if bad:
        raise SystemExit(1)


if __name__ == "__main__":
    cmd, folder = sys.argv[1], Path(sys.argv[2])
    {"build": build, "run": run, "check": check}[cmd](folder)
