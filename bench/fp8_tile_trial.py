"""fp8 at a narrow N (issue #26): would fp8_gemm.tile's space gain from N tiles of 144 or 72?

    python bench/fp8_tile_trial.py build DIR       # here: the default build and single-configuration sm90 builds
    python3 bench/fp8_tile_trial.py run DIR        # on the GPU: each build at each shape beside torch._scaled_mm

At 8191x131x8191 the default build runs 128x128 tiles, two of them across N where 131 columns need 144 (the second
tile computes 3 columns of 128), and `_scaled_mm` (on operands zero-padded to multiples of 16 beforehand) runs nvjet
with a 72-wide tile. The builds here take one tile each by -D (no database: one configuration), so their times say
what a 144- or 72-wide tile would give at the shapes whose N sits just above a multiple of 128 or 64, before any
change to the sample's space (which needs the fp8 entry tuned again in full on an H200). `run` checks each build
against torch (output poisoned with NaN first; relative error under 2e-2) and times it with
`triton.testing.do_bench` (median; the L2 flushed before each call), as bench/misaligned_h200.py does; the copies
of padded launches included (what a user runs).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# name -> -D values over the sample's sm90 default (128, 256, 128, 256, 4); "default" is the committed database's build
BUILDS = {
    "default": [],
    "128x128": ["-Dblock_N=128"],
    "128x144": ["-Dblock_N=144"],
    "64x144": ["-Dblock_M=64", "-Dblock_N=144", "-Dthreads=128", "-Dnum_stages=6"],
    "128x72": ["-Dblock_N=72", "-Dnum_stages=6"],
}
SHAPES = [(8191, 131, 8191), (8192, 136, 8192), (16384, 144, 4096), (4096, 72, 4096), (130, 72, 4099),
          (8192, 255, 8191), (2048, 136, 8192)]


def build(out: Path) -> int:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for name, defines in BUILDS.items():
        if tilec_main([str(ROOT / "samples" / "fp8_gemm.tile"), "--target", "sm90", *defines,
                       "-o", str(out / f"{name}.cubin")]):
            print(f"build of {name} failed", file=sys.stderr)
            return 1
    return 0


def run(out: Path) -> int:
    import torch
    from triton.testing import do_bench

    import tilec.runtime as rt

    mods = {name: rt.load(out / f"{name}.cubin") for name in BUILDS}
    one = torch.ones((), device="cuda", dtype=torch.float32)
    bad = 0
    print(f"{'M':>6} {'N':>5} {'K':>6}  " + "  ".join(f"{n:>16}" for n in BUILDS) + "  _scaled_mm us (padded)")
    for m, n, k in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(m + 3 * n + 7 * k)
        a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda", generator=g) * 0.5).to(torch.float8_e4m3fn)
        want = a.float() @ b.float().t()
        cells = []
        for mod in mods.values():
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            args = (a, b, 1.0, 1.0, c)
            mod.fp8_gemm(*args)
            torch.cuda.synchronize()
            err = ((c.float() - want).abs().max() / want.abs().max()).item()
            ok = err <= 2e-2
            bad += not ok
            us = do_bench(lambda mod=mod, args=args: mod.fp8_gemm(*args), warmup=10, rep=60, return_mode="median")
            cells.append(f"{us * 1000:10.1f} us{'' if ok else ' WRONG'}")

        def pad16(x):
            rows, cols = x.shape
            return torch.nn.functional.pad(x.view(torch.uint8), (0, -cols % 16, 0, -rows % 16)).view(x.dtype)

        ap, bp = pad16(a), pad16(b)
        peer = do_bench(lambda ap=ap, bp=bp: torch._scaled_mm(ap, bp.t(), scale_a=one, scale_b=one,
                                                              out_dtype=torch.bfloat16, use_fast_accum=True),
                        warmup=10, rep=60, return_mode="median")
        print(f"{m:6} {n:5} {k:6}  " + "  ".join(f"{c:>16}" for c in cells) + f"  {peer * 1000:10.1f}", flush=True)
    print("all correct" if not bad else f"{bad} WRONG")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run"):
        raise SystemExit(__doc__)
    sys.exit(build(Path(sys.argv[2])) if sys.argv[1] == "build" else run(Path(sys.argv[2])))
