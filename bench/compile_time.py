"""Where a cold compile's time goes: one sample at a time, built to a cubin with NVRTC as a user builds it (no -D,
the sample's tuning database when it has one), with no compile cache.

    python bench/compile_time.py [--target sm90] [--samples gemm,softmax] [--runs 1]

Each compile runs in a fresh Python process (so imports count, as on the command line) and reports, in
seconds, wall time and CPU time (user + system, all threads) of:

    import     importing the compiler (tilec.outputs, the driver, the passes, the CUDA back end)
    front      parsing and building Tile IR, the target-neutral passes, for every tuned variant
    passes     the back end's pipeline (its no-TMA twins included) and code generation, every variant
    nvrtc      NVRTC compiling the generated source (all kernels: one program)
    total      the whole tilec.compile(..., emit="cubin") call plus the imports

and, from NVRTC's own timer (`--time`, a second compile of the same source), how NVRTC's share splits into
its C++ front end, NVVM's optimizer and PTX translation (ptxas). The machine's load average is printed with
the table: on a shared 2-core machine the wall times vary with it, the CPU times much less. A measurement,
not a test: the exit status is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SAMPLES = ["vector_add", "softmax", "rmsnorm", "layernorm", "gemm", "flash_attention", "fp8_gemm"]

# Runs in the child process: times each phase by wrapping the function that does it.
CHILD = r"""
import json, os, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import tilec.outputs, tilec.driver, tilec.passes.lower_to_simt, tilec.targets.cuda.backend  # noqa: E401
import tilec.targets.cuda.codegen, tilec.targets.cuda.nvrtc, tilec.parser.build  # noqa: E401
phases = {"import": [time.perf_counter() - t0, time.process_time() - c0]}

def timed(owner, name, phase):
    inner = getattr(owner, name)
    def wrapper(*a, **k):
        w, c = time.perf_counter(), time.process_time()
        try:
            return inner(*a, **k)
        finally:
            acc = phases.setdefault(phase, [0.0, 0.0])
            acc[0] += time.perf_counter() - w
            acc[1] += time.process_time() - c
    setattr(owner, name, wrapper)

from tilec.targets.cuda.backend import CudaBackend
timed(tilec.driver, "compile", "driver")  # front end + front passes + the back end's passes + code generation
timed(CudaBackend, "lower", "passes")
timed(CudaBackend, "generate", "passes")
timed(tilec.targets.cuda.nvrtc, "build_nvrtc", "nvrtc")
from tilec.options import CompileOptions
sample, target = sys.argv[1], sys.argv[2]
opts = CompileOptions.make((target,), toolchain="nvrtc", use_cache=False)
w, c = time.perf_counter(), time.process_time()
art = tilec.outputs.compile_artifact(sample, options=opts, emit="cubin")
phases["total"] = [time.perf_counter() - t0, time.process_time() - c0]
src = tilec.outputs.compile_artifact(sample, options=opts.replace(toolchain=None), emit="cu")
kernels = len(json.loads(art.manifest)["kernels"])
phases["front"] = [d - b for d, b in zip(phases.pop("driver"), phases["passes"])]
print(json.dumps({"phases": phases, "kernels": kernels, "source": src.data.decode()}))
"""

NVRTC_TIMES = r"""
import ctypes, json, os, sys, tempfile
from tilec.targets.cuda import nvrtc
from tilec.targets.cuda.toolchain import cuda_include_dir
from tilec.targets.registry import lookup
lib = nvrtc.load()
src = sys.stdin.read()
csv = os.path.join(tempfile.mkdtemp(), "t.csv")
flags = [f"-arch={lookup(sys.argv[1]).arch}", "-std=c++17", "--device-as-default-execution-space",
         f"-I{cuda_include_dir()}", f"--time={csv}"]
prog = ctypes.c_void_p()
lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None)
arr = (ctypes.c_char_p * len(flags))(*[f.encode() for f in flags])
lib.nvrtcCompileProgram(prog, len(flags), arr)
lib.nvrtcDestroyProgram(ctypes.byref(prog))
out = {}
for line in open(csv).read().splitlines()[1:]:
    parts = [p.strip() for p in line.split(",")]
    out[parts[1]] = out.get(parts[1], 0) + float(parts[2]) / 1000
print(json.dumps(out))
"""


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["TILEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilec-bench-cache-")
    return e


def measure(sample: str, target: str) -> dict:
    path = ROOT / "samples" / f"{sample}.tile"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), target], capture_output=True, text=True,
                          env=env(), cwd=ROOT)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    out = json.loads(proc.stdout)
    nv = subprocess.run([sys.executable, "-c", NVRTC_TIMES, target], input=out.pop("source"), capture_output=True,
                        text=True, env=env(), cwd=ROOT)
    out["nvrtc_split"] = json.loads(nv.stdout) if nv.returncode == 0 and nv.stdout.strip() else {}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="sm90")
    ap.add_argument("--samples", default=",".join(DEFAULT_SAMPLES))
    ap.add_argument("--runs", type=int, default=1, help="compiles per sample (the fastest is shown)")
    args = ap.parse_args()
    print(f"cold NVRTC compiles for {args.target}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("seconds, wall/cpu; nvrtc split = C++ front end + NVVM optimizer + ptxas (NVRTC's own --time, wall)")
    cols = "".join(f" {c:>11}" for c in ("import", "front", "passes", "nvrtc", "total"))
    head = f"{'sample':<16} {'kern':>4}{cols}  nvrtc split"
    print(head)
    print("-" * len(head))
    for sample in args.samples.split(","):
        results = [measure(sample, args.target) for _ in range(args.runs)]
        ok = [r for r in results if "error" not in r]
        if not ok:
            print(f"{sample:<16} {results[0]['error']}")
            continue
        r = min(ok, key=lambda r: r["phases"]["total"][0])
        p = r["phases"]

        def cell(name: str, p=p) -> str:
            w, c = p.get(name, [0.0, 0.0])
            return f"{w:5.2f}/{c:5.2f}"

        split = r["nvrtc_split"]
        parts = [split.get(k, 0.0) for k in ("CUDA C++ Frontend", "NVVM Optimizer", "PTX Translation")]
        print(f"{sample:<16} {r['kernels']:>4} {cell('import')} {cell('front')} {cell('passes')} {cell('nvrtc')} "
              f"{cell('total')}  {parts[0]:.2f} + {parts[1]:.2f} + {parts[2]:.2f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
