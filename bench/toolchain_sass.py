"""How far the binaries of NVRTC (the toolchain of a user with no CUDA toolkit) are from nvcc's (the toolchain of the
builds the sweeps time on the H200): the samples' default sm90 builds made with each, kernel by kernel, registers and
SASS.

    python bench/toolchain_sass.py [--samples gemm,softmax] [--target sm90] [--side NAME=ARGS ...]

Each sample is built by `tilec` as a user builds it (no -D, its tuning database) with `--compiler nvcc`, with
`--compiler nvrtc`, and with each `--side` (a name and tilec arguments, e.g.
`--side "nvrtc one thread=--compiler nvrtc -Xcompiler=--split-compile=1"`), in a fresh compile cache. For every
kernel of nvcc's build it compares each NVRTC side's registers (the manifest's `resources`) and SASS instructions
(cuobjdump -sass, addresses and encodings left out) against nvcc's, and prints per sample and in all: the kernels
whose registers are equal, whose SASS is the same, and the summed difference in instruction count. Needs nvcc on
PATH and cuobjdump (the nvidia-cuda-cuobjdump wheel, a test extra). A measurement, not a test: exit status 0
whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLES = ["gemm", "fp8_gemm", "flash_attention", "softmax", "rmsnorm", "layernorm"]


def sass_by_kernel(cubin: Path) -> dict[str, list[str]]:
    from tilec.inspect.isa import sass_functions

    return {name: [i.text for i in insns] for name, insns in sass_functions(cubin.read_bytes()).items()}


def build(sample: str, target: str, args: list[str], out: Path, cache: Path) -> tuple[dict, dict]:
    """(registers by kernel, SASS by kernel) of one build."""
    cubin = out / f"{sample}.cubin"
    env = {**os.environ, "TILEC_CACHE_DIR": str(cache)}
    subprocess.run([sys.executable, "-m", "tilec", str(ROOT / "samples" / f"{sample}.tile"), "--target", target,
                    "-o", str(cubin), *args], check=True, env=env)
    (resources,) = json.loads(Path(f"{cubin}.json").read_text())["resources"].values()
    return {k: v["registers"] for k, v in resources.items()}, sass_by_kernel(cubin)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", default=",".join(SAMPLES))
    ap.add_argument("--target", default="sm90")
    ap.add_argument("--side", action="append", default=[], metavar="NAME=ARGS",
                    help="another NVRTC side: a name and its tilec arguments")
    a = ap.parse_args()
    sides = {"nvrtc": ["--compiler", "nvrtc"]}
    for side in a.side:
        name, _, args = side.partition("=")
        sides[name] = shlex.split(args)
    totals = {name: [0, 0, 0] for name in sides}
    kernels_in_all = 0
    print(f"{'sample':16} {'kernels':>7}  " + "  ".join(f"{name + ': regs / SASS / |count|':>36}" for name in sides))
    with tempfile.TemporaryDirectory() as tmp:
        for sample in a.samples.split(","):
            builds = {}
            for name, args in [("nvcc", ["--compiler", "nvcc"]), *sides.items()]:
                out = Path(tmp) / name
                out.mkdir(exist_ok=True)
                builds[name] = build(sample, a.target, args, out, Path(tmp) / f"cache-{name}")
            regs_ref, sass_ref = builds["nvcc"]
            cells = []
            for name in sides:
                regs, sass = builds[name]
                equal_regs = sum(regs.get(k) == r for k, r in regs_ref.items())
                same_sass = sum(sass.get(k) == s for k, s in sass_ref.items())
                count_diff = sum(abs(len(sass.get(k, [])) - len(s)) for k, s in sass_ref.items())
                for i, v in enumerate((equal_regs, same_sass, count_diff)):
                    totals[name][i] += v
                cells.append(f"{equal_regs:>14} / {same_sass:>4} / {count_diff:>6}")
            kernels_in_all += len(sass_ref)
            print(f"{sample:16} {len(sass_ref):>7}  " + "  ".join(f"{c:>36}" for c in cells), flush=True)
    print(f"{'all':16} {kernels_in_all:>7}  "
          + "  ".join(f"{f'{t[0]:>14} / {t[1]:>4} / {t[2]:>6}':>36}" for t in totals.values()))


if __name__ == "__main__":
    main()
