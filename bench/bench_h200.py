"""tilec against torch (cuBLAS, SDPA flash/cuDNN, eager norms) and Triton, side by side in one run.

    python bench/bench_h200.py build .artifacts/bench    # here: compile the kernels (no GPU needed)
    python bench/bench_h200.py run .artifacts/bench      # on the H200: time everything, print ratios

Times are medians of triton.testing.do_bench (CUDA events, warm-up first). TFLOP/s for attention
count 4·B·H·S²·D (halved when causal); memory-bound rows count one read and one write of the
tensor. Each tilec row also reports the fraction of the roofline implied by the FLOPs and bytes
the compiler counts for the kernel (989 TFLOP/s dense f16/bf16, 4.8 TB/s HBM3e on an H200).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PEAK_TFLOPS = 989.0
PEAK_GBPS = 4800.0

GEMMS = [(dt, n) for dt in ("f16", "bf16") for n in (4096, 8192)]
ATTN = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 8192, 64, False), (4, 32, 8192, 64, True),
        (2, 16, 16384, 128, False), (2, 16, 16384, 128, True)]
# tilec configurations per problem: (label, -D overrides). "default build" is the sample with no -D: on sm90 it
# reads the committed tuning database (samples/<name>.tune.json, docs/tuning.md) and carries the configurations
# that won there, dispatching per shape; the other rows are hand-picked Hopper configurations.
DEFAULT = "tilec default build"
# GEMM shapes of LLM layers and a ragged one, timed for the default build against cuBLAS (M, N, K)
LLM_GEMMS = [(128, 4096, 4096), (4096, 4096, 4096), (4096, 11008, 4096), (4096, 4096, 11008),
             (16384, 28672, 8192), (1000, 1000, 1000), (5120, 3584, 7168)]
GEMM_CONFIGS = [(DEFAULT, []), ("tilec 128x256x64 ws", ["block_N=256", "block_K=64", "threads=256", "num_stages=4"]),
                ("tilec 128x256x64 ws persistent", ["block_N=256", "block_K=64", "threads=256", "num_stages=3",
                                                    "persistent=True"])]
# thread-block clusters (sm90): the 128x256x64 warp-specialized kernel without a cluster, with two blocks along M
# sharing B's tile (cluster_m=2) and along N sharing A's (cluster_n=2), each block loading half of the shared tile
# and multicasting it; timed against cuBLAS at these shapes (M, N, K)
CLUSTER_CONFIGS = [("tilec 128x256x64 ws", ["block_N=256", "block_K=64", "threads=256", "num_stages=4"]),
                   ("tilec 128x256x64 ws 2x1", ["block_N=256", "block_K=64", "threads=256", "num_stages=4",
                                                "cluster_m=2"]),
                   ("tilec 128x256x64 ws 1x2", ["block_N=256", "block_K=64", "threads=256", "num_stages=4",
                                                "cluster_n=2"])]
CLUSTER_GEMMS = [(4096, 4096, 4096), (8192, 8192, 8192), (5120, 3584, 7168)]
FP8_CONFIGS = [(DEFAULT, []), ("tilec 128x256x128 ws", ["block_N=256", "threads=256", "num_stages=4"])]
ATTN_CONFIGS = {64: [(DEFAULT, []), ("tilec 128x128 ws", ["block_M=128", "block_N=128", "threads=256"]),
                     ("tilec 192x128 ws", ["block_M=192", "block_N=128", "threads=384"])],
                128: [(DEFAULT, []), ("tilec 128x128 ws", ["block_M=128", "block_N=128", "threads=256"]),
                      ("tilec 128x64 ws", ["block_M=128", "threads=256"])]}
NORMS = ["softmax", "rmsnorm", "layernorm"]
ROWS, COLS = 32768, 8192


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)

    def tc(sample: str, name: str, *defs: str) -> None:
        rc = tilec_main([str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "-o", str(out / f"{name}.cubin"),
                         "--resource-usage", *[f"-D{d}" for d in defs]])
        if rc:
            raise SystemExit(f"build of {name} failed")

    for dt in ("f16", "bf16"):
        for i, (_, defs) in enumerate(GEMM_CONFIGS):
            tc("gemm", f"gemm_{dt}_{i}", f"dtype={dt}", *defs)
        for i, (_, defs) in enumerate(CLUSTER_CONFIGS):
            tc("gemm", f"gemm_cluster_{dt}_{i}", f"dtype={dt}", *defs)
    for i, (_, defs) in enumerate(FP8_CONFIGS):
        tc("fp8_gemm", f"fp8_gemm_{i}", *defs)
    for d in (64, 128):
        for causal in (False, True):
            for i, (_, defs) in enumerate(ATTN_CONFIGS[d]):
                tc("flash_attention", f"attn_d{d}_{'causal' if causal else 'full'}_{i}", "dtype=bf16", f"dim={d}",
                   f"causal={causal}", *defs)
    for n in NORMS:
        tc(n, n, "dtype=bf16")


def run(out: Path, results_path: str | None) -> None:
    import torch
    import torch.nn.functional as F
    import triton
    import triton.language as tl
    from triton.testing import do_bench

    import tilec.runtime as rt

    torch.manual_seed(0)
    dev = "cuda"
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}
    rows = []

    def tilec_time(kernel, args) -> float:
        return do_bench(lambda: kernel(*args), warmup=25, rep=200)  # the public call: asynchronous

    def report(group, shape, name, ms, flops=None, nbytes=None, roofline=None):
        row = {"group": group, "shape": shape, "impl": name, "ms": ms}
        if flops:
            row["tflops"] = flops / ms / 1e9
        if nbytes:
            row["tbps"] = nbytes / ms / 1e9
        if roofline is not None:
            row["roofline"] = roofline
        rows.append(row)
        extra = f" {row['tflops']:8.1f} TFLOP/s" if flops else ""
        extra += f" {row['tbps']:6.2f} TB/s" if nbytes else ""
        extra += f"  roofline {roofline:5.1%}" if roofline is not None else ""
        print(f"{group:<10} {shape:<28} {name:<16} {ms:9.3f} ms{extra}", flush=True)

    # ---- copy bandwidth (the memory ceiling)
    src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src))
    report("copy", "1 GiB", "torch copy", ms, nbytes=2 * src.numel())

    # ---- GEMM
    @triton.jit
    def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        npm, npn = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = pid // (G * npn)
        first = group * G
        gs = min(npm - first, G)
        pm = first + (pid % (G * npn)) % gs
        pn = (pid % (G * npn)) // gs
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            x = tl.load(a + rm[:, None] * K + (k * BK + rk)[None, :])
            y = tl.load(b + (k * BK + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(x, y)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty))

    def triton_mm(a, b, c, cfg):
        bm, bn, bk, w, s = cfg
        grid = (triton.cdiv(a.shape[0], bm) * triton.cdiv(b.shape[1], bn),)
        return lambda: matmul_kernel[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], bm, bn, bk, 8,
                                           num_warps=w, num_stages=s)

    for dt, n in GEMMS:
        a = torch.randn(n, n, dtype=tdt[dt], device=dev)
        b = torch.randn(n, n, dtype=tdt[dt], device=dev)
        c = torch.empty(n, n, dtype=tdt[dt], device=dev)
        flops = 2 * n**3
        shape = f"{dt} {n}^3"
        ms_torch = do_bench(lambda: torch.matmul(a, b))  # noqa: B023
        report("gemm", shape, "torch (cuBLAS)", ms_torch, flops)
        best = min(do_bench(triton_mm(a, b, c, cfg)) for cfg in
                   [(128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 32, 4, 4)])
        report("gemm", shape, "triton", best, flops)
        ref = torch.matmul(a, b)
        for i, (label, _) in enumerate(GEMM_CONFIGS):
            c.zero_()
            k = rt.load(out / f"gemm_{dt}_{i}.cubin").gemm
            ms = tilec_time(k, (a, b, c))
            err = (c.float() - ref.float()).abs().max().item()
            report("gemm", shape, label, ms, flops, roofline=flops / ms / 1e9 / PEAK_TFLOPS)
            rows[-1]["max_abs_err_vs_torch"] = err

    for dt in ("f16", "bf16"):  # the default build across LLM layer shapes (its dispatch picks the variant)
        k = rt.load(out / f"gemm_{dt}_0.cubin").gemm
        for m, n, kk in LLM_GEMMS:
            a = torch.randn(m, kk, dtype=tdt[dt], device=dev)
            b = torch.randn(kk, n, dtype=tdt[dt], device=dev)
            c = torch.empty(m, n, dtype=tdt[dt], device=dev)
            flops, shape = 2 * m * n * kk, f"{dt} {m}x{n}x{kk}"
            report("gemm", shape, "torch (cuBLAS)", do_bench(lambda: torch.matmul(a, b)), flops)  # noqa: B023
            ms = tilec_time(k, (a, b, c))
            report("gemm", shape, DEFAULT, ms, flops, roofline=flops / ms / 1e9 / PEAK_TFLOPS)
            rows[-1]["max_abs_err_vs_torch"] = (c.float() - torch.matmul(a, b).float()).abs().max().item()

    for dt in ("f16", "bf16"):  # thread-block clusters with TMA multicast against the same kernel without
        kernels = [rt.load(out / f"gemm_cluster_{dt}_{i}.cubin").gemm for i in range(len(CLUSTER_CONFIGS))]
        for m, n, kk in CLUSTER_GEMMS:
            a = torch.randn(m, kk, dtype=tdt[dt], device=dev)
            b = torch.randn(kk, n, dtype=tdt[dt], device=dev)
            c = torch.empty(m, n, dtype=tdt[dt], device=dev)
            flops, shape = 2 * m * n * kk, f"{dt} {m}x{n}x{kk}"
            ref = torch.matmul(a, b)
            report("cluster", shape, "torch (cuBLAS)", do_bench(lambda: torch.matmul(a, b)), flops)  # noqa: B023
            for (label, _), k in zip(CLUSTER_CONFIGS, kernels, strict=True):
                c.zero_()
                ms = tilec_time(k, (a, b, c))
                report("cluster", shape, label, ms, flops, roofline=flops / ms / 1e9 / PEAK_TFLOPS)
                rows[-1]["max_abs_err_vs_torch"] = (c.float() - ref.float()).abs().max().item()

    # ---- fp8 gemm (e4m3 x e4m3 -> f32 -> bf16, per-tensor scales) against torch._scaled_mm
    n = 8192
    a8 = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
    b8 = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)  # [N, K]: K-major, as _scaled_mm wants
    sa, sb = torch.tensor(0.5, device=dev), torch.tensor(0.25, device=dev)
    c8 = torch.empty(n, n, dtype=torch.bfloat16, device=dev)
    shape = f"e4m3 {n}^3"
    try:
        ms = do_bench(lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16))
        report("fp8 gemm", shape, "torch._scaled_mm", ms, 2 * n**3)
        ref8 = torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16).float()
    except (RuntimeError, AttributeError) as e:
        print(f"torch._scaled_mm unavailable: {e}")
        ref8 = ((a8.float() @ b8.float().t()) * 0.125)
    for i, (label, _) in enumerate(FP8_CONFIGS):
        c8.zero_()
        k = rt.load(out / f"fp8_gemm_{i}.cubin").fp8_gemm
        ms = tilec_time(k, (a8, b8, 0.5, 0.25, c8))
        report("fp8 gemm", shape, label, ms, 2 * n**3, roofline=2 * n**3 / ms / 1e9 / (2 * PEAK_TFLOPS))
        rows[-1]["max_abs_err_vs_torch"] = (c8.float() - ref8).abs().max().item() / ref8.abs().max().item()

    # ---- attention
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for b_, h, s, d, causal in ATTN:
        q, kk, v = (torch.randn(b_, s, h, d, dtype=torch.bfloat16, device=dev) for _ in range(3))
        o = torch.empty_like(q)
        flops = 4 * b_ * h * s * s * d // (2 if causal else 1)
        shape = f"B{b_} H{h} S{s} D{d}{' causal' if causal else ''}"
        qt, kt, vt = (x.transpose(1, 2) for x in (q, kk, v))
        backends = ((SDPBackend.FLASH_ATTENTION, "torch flash"), (SDPBackend.CUDNN_ATTENTION, "torch cuDNN"))
        for backend, label in backends:
            try:
                with sdpa_kernel(backend):
                    ms = do_bench(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal))  # noqa: B023
                report("attention", shape, label, ms, flops)
            except RuntimeError as e:
                print(f"{label} unavailable: {e}")
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
        for i, (label, _) in enumerate(ATTN_CONFIGS[d]):
            o.zero_()
            mod = rt.load(out / f"attn_d{d}_{'causal' if causal else 'full'}_{i}.cubin")
            ms = tilec_time(mod.flash_attention, (q, kk, v, o))
            err = (o.float() - ref.float()).abs().max().item()
            report("attention", shape, label, ms, flops, roofline=flops / ms / 1e9 / PEAK_TFLOPS)
            rows[-1]["max_abs_err_vs_torch"] = err

    # ---- memory-bound rows
    x = torch.randn(ROWS, COLS, dtype=torch.bfloat16, device=dev)
    w = torch.randn(COLS, dtype=torch.bfloat16, device=dev)
    bias = torch.randn(COLS, dtype=torch.bfloat16, device=dev)
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * 2
    shape = f"bf16 {ROWS}x{COLS}"
    peers = {
        "softmax": (lambda: torch.softmax(x, dim=-1), (x, y)),
        "rmsnorm": (lambda: F.rms_norm(x, (COLS,), w, 1e-6), (x, w, y, 1e-6)),
        "layernorm": (lambda: F.layer_norm(x, (COLS,), w, bias, 1e-5), (x, w, bias, y, 1e-5)),
    }
    for name in NORMS:
        fn, args = peers[name]
        report(name, shape, "torch", do_bench(fn), nbytes=nbytes)
        for variant, label in ((name, DEFAULT),):
            mod = rt.load(out / f"{variant}.cubin")
            kern = mod.kernels[name]  # the public name: it dispatches over the tuned variants
            ms = tilec_time(kern, args)
            ref = fn().float()
            err = (y.float() - ref).abs().max().item()
            report(name, shape, label, ms, nbytes=nbytes, roofline=nbytes / ms / 1e6 / PEAK_GBPS)
            rows[-1]["max_abs_err_vs_torch"] = err

    print("\nratios (tilec time / peer time inverted: >1 means tilec is faster)")
    for group, shape in dict.fromkeys((r["group"], r["shape"]) for r in rows):
        mine = [r for r in rows if (r["group"], r["shape"]) == (group, shape) and r["impl"].startswith("tilec")]
        if not mine:
            continue
        best = min(mine, key=lambda r: r["ms"])
        t = best["ms"]
        peers_ = [r for r in rows if (r["group"], r["shape"]) == (group, shape) and not r["impl"].startswith("tilec")]
        ratios = "  ".join(f"vs {p['impl']}: {p['ms'] / t:5.2f}x" for p in peers_)
        print(f"{group:<10} {shape:<28} {best['impl']:<20} {ratios}   "
              f"(max|err| vs torch {best.get('max_abs_err_vs_torch', 0):.3g})")
        default = next((r for r in mine if r["impl"] == DEFAULT), None)
        if default is not None and default is not best:
            ratios = "  ".join(f"vs {p['impl']}: {p['ms'] / default['ms']:5.2f}x" for p in peers_)
            print(f"{'':<10} {'':<28} {DEFAULT:<20} {ratios}")
    if results_path:
        Path(results_path).write_text(json.dumps(rows, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "run"])
    ap.add_argument("dir")
    ap.add_argument("--results")
    a = ap.parse_args()
    if a.mode == "build":
        build(Path(a.dir))
    else:
        run(Path(a.dir), a.results)


if __name__ == "__main__":
    main()
