"""Attention's block schedule before and after a change, at fixed tiles, beside SDPA, in one GPU run (issue #26: causal
attention ran 0.78-0.84 of cuDNN where the same head dim without the mask ran 0.88-1.00).

    python bench/attention_schedule_ab.py build OUT --before TREE    # here: both trees' builds
    python3 bench/attention_schedule_ab.py run OUT                    # on the GPU (tilec.runtime, numpy, torch)

`build` compiles each label of BUILDS with `python -m tilec` of each tree (`--before`: the tree to compare against, a
git worktree of the older commit; this checkout is "after"), bf16, the tile fixed by -D so that both trees run the
same tile whatever their databases say; labels marked `after_only` use a const the older tree lacks (`persistent`).
`run` times every build at every shape with triton's do_bench (median; the L2 flushed before each call), before and
after in turn at each shape and the whole pass twice, checks each result against SDPA and prints one table: the
better of the two passes per build, after's time over before's, and the peer's time over each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TILE_64 = {"block_M": "64", "block_N": "64", "threads": "128"}
TILE_128 = {"block_M": "128", "block_N": "128", "threads": "256"}
# label -> (-D values, after_only)
BUILDS = {
    "d128_causal_64x64": ({"dim": "128", "causal": "True", **TILE_64}, False),
    "d128_causal_128x128": ({"dim": "128", "causal": "True", **TILE_128}, False),
    "d128_causal_128x128_persistent": ({"dim": "128", "causal": "True", **TILE_128, "persistent": "True"}, True),
    "d128_128x128": ({"dim": "128", **TILE_128}, False),
    "d128_128x128_persistent": ({"dim": "128", **TILE_128, "persistent": "True"}, True),
    "d64_causal_64x64": ({"dim": "64", "causal": "True", **TILE_64}, False),
    "d64_causal_128x128": ({"dim": "64", "causal": "True", **TILE_128}, False),
}
# the issue's anchors and the sweep's worst causal shapes (bench/RESULTS.md, s27)
SHAPES = {
    "causal": [{"B": 4, "H": 32, "S": 4096}, {"B": 2, "H": 16, "S": 3000}, {"B": 16, "H": 40, "S": 2047},
               {"B": 8, "H": 64, "S": 1000}, {"B": 2, "H": 40, "S": 8191}, {"B": 8, "H": 32, "S": 1024}],
    "full": [{"B": 4, "H": 32, "S": 4096}, {"B": 8, "H": 32, "S": 2047}, {"B": 4, "H": 28, "S": 1000}],
}


def build(out: Path, before: Path) -> None:
    out = out.resolve()  # the compiles run in each tree's own folder
    out.mkdir(parents=True, exist_ok=True)
    for tree, root in (("before", before), ("after", ROOT)):
        env = {**os.environ, "PYTHONPATH": str(root), "TILEC_CACHE_DIR": str(out / f".cache_{tree}")}
        for label, (defines, after_only) in BUILDS.items():
            if after_only and tree == "before":
                continue
            t0 = time.time()
            cmd = [sys.executable, "-m", "tilec", str(root / "samples" / "flash_attention.tile"), "--target", "sm90",
                   "-o", str(out / f"{tree}_{label}.cubin"), "-Ddtype=bf16",
                   *[f"-D{k}={v}" for k, v in defines.items()]]
            subprocess.run(cmd, env=env, check=True, cwd=root)
            print(f"built {tree}_{label} ({time.time() - t0:.1f} s)", flush=True)
    commits = {t: subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=r, capture_output=True,
                                 text=True).stdout.strip() for t, r in (("before", before), ("after", ROOT))}
    (out / "builds.json").write_text(json.dumps({"builds": BUILDS, "shapes": SHAPES, "commits": commits}))


def run(out: Path, passes: int = 2) -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    import tilec.runtime as rt

    spec = json.loads((out / "builds.json").read_text())
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}; before {spec['commits']['before']}, after {spec['commits']['after']}")
    kernels = {p.stem: rt.load(p).kernels["flash_attention"] for p in sorted(out.glob("*.cubin"))}
    times: dict[tuple, list[float]] = {}
    errors: dict[tuple, float] = {}
    peers: dict[tuple, list[float]] = {}
    def bench(fn) -> float:
        return do_bench(fn, warmup=3, rep=15, return_mode="median")

    def measure(label: str, d: int, causal: bool, s: dict) -> None:
        q, k, v = (torch.randn(s["B"], s["S"], s["H"], d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        shape = (label, f"B{s['B']} H{s['H']} S{s['S']}")
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
            ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
            peers.setdefault(shape, []).append(bench(
                lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)))
        for tree in ("before", "after"):
            kern = kernels.get(f"{tree}_{label}")
            if kern is None:
                continue
            o = torch.full_like(q, float("nan"))
            kern(q, k, v, o)
            torch.cuda.synchronize()
            errors[(tree, *shape)] = ((o - ref).abs().max() / ref.abs().max()).item()
            times.setdefault((tree, *shape), []).append(bench(lambda kern=kern, o=o: kern(q, k, v, o)))
        print(shape, {t: round(min(times.get((t, *shape), [0])), 4) for t in ("before", "after")}, flush=True)

    for _ in range(passes):
        for label, (defines, _after_only) in spec["builds"].items():
            causal = defines.get("causal") == "True"
            for s in spec["shapes"]["causal" if causal else "full"]:
                measure(label, int(defines["dim"]), causal, s)
    print("\n| build | shape | before ms | after ms | after / before | peer ms | peer / before | peer / after | "
          "max rel err |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (label, shape), peer in peers.items():
        b, a = (min(times[(t, label, shape)]) if (t, label, shape) in times else None for t in ("before", "after"))
        p = min(peer)
        err = max(errors.get((t, label, shape), 0.0) for t in ("before", "after"))

        def cell(x, fmt=".4f"):
            return "-" if x is None else format(x, fmt)
        print(f"| {label} | {shape} | {cell(b)} | {cell(a)} | {cell(a / b if a and b else None, '.3f')} | {p:.4f} "
              f"| {cell(p / b if b else None, '.2f')} | {cell(p / a if a else None, '.2f')} | {err:.1e} |")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "build" and "--before" in sys.argv:
        build(Path(sys.argv[2]), Path(sys.argv[sys.argv.index("--before") + 1]))
    elif len(sys.argv) == 3 and sys.argv[1] == "run":
        run(Path(sys.argv[2]))
    else:
        raise SystemExit(__doc__)
