"""Split rows (softmax.tile's split_n) at a few long rows, before softmax is tuned again with them.

    python bench/softmax_split_trial.py build DIR      # here: the committed build and single-configuration sm90 builds
    python3 bench/softmax_split_trial.py run DIR       # on the GPU: each build at each shape beside torch.softmax
    python3 bench/softmax_split_trial.py check DIR     # the same outputs, untimed (for compute-sanitizer)

A decode batch's logits (1 to a few hundred rows of a 32k-256k vocabulary) leave most multiprocessors idle with a
block a row. The split builds cut each row into split_n slices (two launches: each slice's log-sum-exp, then the
output), one configuration each by -D, so their times say what the split gives at each slice count apart from the
database's choice. `default` is the committed database's bf16 build. `run` checks
every output against torch in float32 (output poisoned with NaN first; max abs error under 2e-3) and times it with
`triton.testing.do_bench` (median; the L2 flushed before each call); a cell is `-` where the build's launch
condition (M <= 1024 and at least split_n column tiles in a row) leaves the shape out.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ONE_ROW = ["-Dblock_M=1", "-Dblock_N=8192", "-Drow_grid=0"]
# name -> (-D values, column tile): threads x tile_elems elements a column tile
BUILDS = {
    "default": ([], 0),
    "split4": ([*ONE_ROW, "-Dthreads=256", "-Dtile_elems=8", "-Dsplit_n=4"], 2048),
    "split8": ([*ONE_ROW, "-Dthreads=256", "-Dtile_elems=8", "-Dsplit_n=8"], 2048),
    "split16": ([*ONE_ROW, "-Dthreads=256", "-Dtile_elems=4", "-Dsplit_n=16"], 1024),
    "split32": ([*ONE_ROW, "-Dthreads=256", "-Dtile_elems=4", "-Dsplit_n=32"], 1024),
    # odd rows (N = 50257) load and store element by element by default; --realign-rows loads them a vector at a time
    "default_realign": (["--realign-rows"], 0),
    "split8_realign": ([*ONE_ROW, "-Dthreads=256", "-Dtile_elems=8", "-Dsplit_n=8", "--realign-rows"], 2048),
}
SHAPES = [(1, 65536), (8, 65024), (8, 152064), (37, 51200), (64, 32768), (200, 50257), (200, 32768), (200, 128256),
          (512, 32000), (1000, 32768), (1024, 65536), (8, 50257), (37, 32001), (4096, 50257)]


def build(out: Path) -> int:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for name, (defines, _) in BUILDS.items():
        if tilec_main([str(ROOT / "samples" / "softmax.tile"), "--target", "sm90", "-Ddtype=bf16", *defines,
                       "-o", str(out / f"{name}.cubin")]):
            print(f"build of {name} failed", file=sys.stderr)
            return 1
    return 0


def run(out: Path, timed: bool = True) -> int:
    import torch
    from triton.testing import do_bench

    import tilec.runtime as rt

    mods = {name: rt.load(out / f"{name}.cubin") for name in BUILDS}
    bad = 0
    print(f"{'M':>5} {'N':>7}  " + "  ".join(f"{n:>15}" for n in BUILDS) + "   torch us")
    for m, n in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(m + 3 * n)
        x = (torch.randn(m, n, device="cuda", generator=g) * 4).to(torch.bfloat16)
        want = torch.softmax(x.float(), dim=1)
        cells = []
        for name, mod in mods.items():
            tile = BUILDS[name][1]
            split = int(name[5:].split("_")[0]) if name.startswith("split") else 1
            if tile and not (m <= 1024 and n > (split - 1) * tile):
                cells.append("-")
                continue
            y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            mod.softmax(x, y)
            torch.cuda.synchronize()
            ok = (y.float() - want).abs().max().item() <= 2e-3
            bad += not ok
            if not timed:
                cells.append("ok" if ok else "WRONG")
                continue
            us = do_bench(lambda mod=mod, x=x, y=y: mod.softmax(x, y), warmup=10, rep=60, return_mode="median")
            cells.append(f"{us * 1000:8.1f} us{'' if ok else ' WRONG'}")
        peer = do_bench(lambda x=x: torch.softmax(x, dim=1), warmup=10, rep=60, return_mode="median") if timed else 0
        print(f"{m:5} {n:7}  " + "  ".join(f"{c:>15}" for c in cells) + f"  {peer * 1000:8.1f}", flush=True)
    print("all correct" if not bad else f"{bad} WRONG")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run", "check"):
        raise SystemExit(__doc__)
    mode, folder = sys.argv[1], Path(sys.argv[2])
    sys.exit(build(folder) if mode == "build" else run(folder, timed=mode == "run"))
