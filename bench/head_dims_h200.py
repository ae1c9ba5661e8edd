"""Attention at head dims 64, 96, 128 and 256 and row kernels at odd lengths, against torch, before and after a change,
in one GPU run (issue #26: head dim 96 fell back to mma.sync, dim 256's default did not fit sm90).

    python bench/head_dims_h200.py build OUT --before /work/main     # here: the default builds of both trees
    python3 bench/head_dims_h200.py run OUT                          # on the H200 (tilec.runtime, numpy, torch)

`build` compiles every artifact with `python -m tilec` of each tree (`--before`: the tree to compare against; this
checkout is "after"), `-D dtype=bf16 -D dim=D` and no other -D unless a label says so (the samples' tuning databases
apply as in a user's build), into OUT/<tree>_<label>.cubin; `run` times each against SDPA (cuDNN, else flash) and
torch's row ops with triton's do_bench (median), checks every result, and prints one table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# label -> (sample, -D values). "before" builds d256 at 64x64 on 128 threads (its default does not fit sm90).
ATTN_DIMS = (64, 96, 128, 256)
BEFORE = {**{f"attn_d{d}": ("flash_attention", {"dtype": "bf16", "dim": str(d)}) for d in ATTN_DIMS if d != 256},
          "attn_d256": ("flash_attention", {"dtype": "bf16", "dim": "256", "block_M": "64", "block_N": "64",
                                            "threads": "128"}),
          "attn_d96_causal": ("flash_attention", {"dtype": "bf16", "dim": "96", "causal": "True"}),
          "softmax": ("softmax", {"dtype": "bf16"}), "rmsnorm": ("rmsnorm", {"dtype": "bf16"}),
          "layernorm": ("layernorm", {"dtype": "bf16"})}
AFTER = {**{f"attn_d{d}": ("flash_attention", {"dtype": "bf16", "dim": str(d)}) for d in ATTN_DIMS},
         "attn_d96_causal": ("flash_attention", {"dtype": "bf16", "dim": "96", "causal": "True"}),
         "attn_d256_causal": ("flash_attention", {"dtype": "bf16", "dim": "256", "causal": "True"}),
         # other tiles at the two head dims no database covers, to check the defaults against
         "attn_d96_192x128": ("flash_attention", {"dtype": "bf16", "dim": "96", "block_M": "192", "block_N": "128",
                                                  "threads": "384"}),
         "attn_d96_128x64": ("flash_attention", {"dtype": "bf16", "dim": "96", "block_M": "128", "block_N": "64",
                                                 "threads": "256"}),
         "attn_d256_128x32": ("flash_attention", {"dtype": "bf16", "dim": "256", "block_M": "128", "block_N": "32",
                                                  "threads": "256"})}
ATTN_SHAPES = [{"B": 8, "H": 32, "S": 4096}, {"B": 4, "H": 32, "S": 1024}, {"B": 2, "H": 16, "S": 3000}]
ROW_SHAPES = [(4096, 50257), (4096, 50256), (6156, 2047), (6156, 2048), (3072, 12289), (3072, 12288)]


def build(out: Path, before: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for tree, root, builds in (("before", before, BEFORE), ("after", ROOT, AFTER)):
        env = {**os.environ, "PYTHONPATH": str(root), "TILEC_CACHE_DIR": str(out / f".cache_{tree}")}
        for label, (sample, defines) in builds.items():
            t0 = time.time()
            cmd = [sys.executable, "-m", "tilec", str(root / "samples" / f"{sample}.tile"), "--target", "sm90",
                   "-o", str(out / f"{tree}_{label}.cubin"), *[f"-D{k}={v}" for k, v in defines.items()]]
            subprocess.run(cmd, env=env, check=True, cwd=root)
            print(f"built {tree}_{label} ({time.time() - t0:.1f} s)", flush=True)
    commits = {t: subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=r, capture_output=True,
                                 text=True).stdout.strip() for t, r in (("before", before), ("after", ROOT))}
    (out / "builds.json").write_text(json.dumps({"before": BEFORE, "after": AFTER, "commits": commits}))


def run(out: Path) -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    import tilec.runtime as rt

    spec = json.loads((out / "builds.json").read_text())
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}; before {spec['commits']['before']}, after {spec['commits']['after']}")

    def bench(fn) -> float:
        return do_bench(fn, warmup=3, rep=15, return_mode="median")

    def kernel(name: str, sample: str):
        return rt.load(out / f"{name}.cubin").kernels[sample]

    def attention(kern, s: dict, d: int, causal: bool) -> tuple:
        q, k, v = (torch.randn(s["B"], s["S"], s["H"], d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.full_like(q, float("nan"))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            try:
                with sdpa_kernel(backend):
                    ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                break
            except RuntimeError:
                continue

        def peer():
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        kern(q, k, v, o)
        torch.cuda.synchronize()
        err = ((o - ref.transpose(1, 2)).abs().max() / ref.abs().max()).item()
        t, p = bench(lambda: kern(q, k, v, o)), bench(peer)
        flops = 4 * s["B"] * s["H"] * s["S"] * s["S"] * d / (2 if causal else 1)
        return t, p, flops / t / 1e9, err, str(backend).split(".")[-1]

    def row_op(kern, name: str, m: int, n: int) -> tuple:
        x = (torch.randn(m, n, device="cuda") * 2).to(torch.bfloat16)
        w, b = (torch.randn(n, device="cuda").to(torch.bfloat16) for _ in range(2))
        y = torch.full_like(x, float("nan"))
        args, peer = {"softmax": ((x, y), lambda: torch.softmax(x, dim=-1)),
                      "rmsnorm": ((x, w, y, 1e-6), lambda: F.rms_norm(x, (n,), w, 1e-6)),
                      "layernorm": ((x, w, b, y, 1e-5), lambda: F.layer_norm(x, (n,), w, b, 1e-5))}[name]
        kern(*args)
        ref = peer().float()
        err = ((y.float() - ref).norm(dim=1) / ref.norm(dim=1)).max().item()
        t, p = bench(lambda: kern(*args)), bench(peer)
        return t, p, 2 * m * n * 2 / t / 1e6, err, "torch"

    rows = []
    for tree in ("before", "after"):
        for label, (sample, defines) in spec[tree].items():
            if sample == "flash_attention":
                kern = kernel(f"{tree}_{label}", sample)
                for s in ATTN_SHAPES:
                    rows.append((tree, label, f"B{s['B']} H{s['H']} S{s['S']}",
                                 *attention(kern, s, int(defines["dim"]), defines.get("causal") == "True")))
                    print(*rows[-1], flush=True)
            elif tree == "before":  # the row kernels are the same code in both trees: odd against even lengths
                kern = kernel(f"{tree}_{label}", sample)
                for m, n in ROW_SHAPES:
                    rows.append((tree, label, f"{m}x{n}", *row_op(kern, sample, m, n)))
                    print(*rows[-1], flush=True)
    print("\n| tree | build | shape | tilec ms | peer ms | ratio (peer/tilec) | TFLOP/s or GB/s | max rel err | peer |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tree, label, shape, t, p, rate, err, peer_name in rows:
        print(f"| {tree} | {label} | {shape} | {t:.4f} | {p:.4f} | {p / t:.2f} | {rate:.0f} | {err:.1e} "
              f"| {peer_name} |")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        build(Path(sys.argv[2]), Path(sys.argv[sys.argv.index("--before") + 1]))
    elif len(sys.argv) == 3 and sys.argv[1] == "run":
        run(Path(sys.argv[2]))
    else:
        raise SystemExit(__doc__)
