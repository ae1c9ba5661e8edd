"""Where a cold compile's time goes: each sample built to a cubin with NVRTC as a user builds it (no -D, the
sample's tuning database when it has one), in a fresh Python process, with an empty compile cache.

    python bench/compile_time.py [--targets sm90,sm80] [--samples gemm,softmax] [--runs 3] [--no-tune-db]

Each run reports, in seconds, wall time and CPU time (user + system) of its phases; the table shows each
phase's minimum over the runs, and the total's minimum and median (on a shared machine the wall times vary
with the load, the CPU times much less):

    import   importing the compiler (tilec.outputs, the driver, the passes, the CUDA back end)
    front    parsing and building Tile IR, the target-neutral passes (every tuned variant)
    passes   the back end's pipeline, the no-TMA twins included, without TVM's import
    tvm      importing apache-tvm and making the analyzers (partition-boundaries, tilec/ir/arith.py)
    codegen  printing CUDA C++
    nvrtc    the device toolchain: NVRTC on the generated program, or with the opt-in split build
             (TILEC_NVRTC_SPLIT=1 in the environment, which the children inherit, and a ptxas of NVRTC's build:
             tilec/targets/cuda/nvrtc.py) NVRTC on each kernel's program in threads + ptxas once
    total    the whole process up to the artifact (the interpreter's own start-up not included)

and, from NVRTC's own timer (`--time`, a second compile of the whole program as one), how NVRTC's share splits into
its C++ front end (the device header, cuda_fp16.h, ...), NVVM's optimizer and ptxas. The load average is
printed with the table. A measurement, not a test: the exit status is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("import", "front", "passes", "tvm", "codegen", "nvrtc", "total")

# Runs in the child process: times each phase by wrapping the function that does it. A phase's time excludes the
# wrapped phases it calls (passes excludes tvm; front excludes passes and codegen), so the phases add up. CPU time
# is the process's and its children's (NVRTC's ptxas runs in threads of its own, the split build's ptxas in a child
# process; one target is built at a time here).
CHILD = r"""
import json, os, sys, threading, time
def cpu():  # this process's threads and its finished children (the split build's ptxas)
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
t0, c0 = time.perf_counter(), cpu()
import tilec.outputs, tilec.driver, tilec.passes.lower_to_simt, tilec.targets.cuda.backend  # noqa: E401
import tilec.targets.cuda.codegen, tilec.targets.cuda.nvrtc, tilec.parser.build, tilec.ir.arith  # noqa: E401
phases = {"import": [time.perf_counter() - t0, cpu() - c0]}
local = threading.local()

def timed(owner, name, phase):
    inner = getattr(owner, name)
    def wrapper(*a, **k):
        stack = local.__dict__.setdefault("stack", [])
        w, c = time.perf_counter(), cpu()
        stack.append([0.0, 0.0])
        try:
            return inner(*a, **k)
        finally:
            dw, dc = time.perf_counter() - w, cpu() - c
            nested = stack.pop()
            acc = phases.setdefault(phase, [0.0, 0.0])
            acc[0] += dw - nested[0]
            acc[1] += dc - nested[1]
            if stack:
                stack[-1][0] += dw
                stack[-1][1] += dc
    setattr(owner, name, wrapper)

from tilec.targets.cuda.backend import CudaBackend
timed(tilec.driver, "compile", "front")  # what of the driver's compile is not the back end's
timed(CudaBackend, "lower", "passes")
timed(CudaBackend, "generate", "codegen")
timed(tilec.ir.arith, "_import_tvm", "tvm")
timed(tilec.ir.arith.Arith, "__init__", "tvm")
timed(tilec.targets.cuda.nvrtc, "build_nvrtc", "nvrtc")
from tilec.options import CompileOptions
sample, target, db = sys.argv[1], sys.argv[2], sys.argv[3]
opts = CompileOptions.make((target,), toolchain="nvrtc", use_cache=False, tune_db=None if db == "-" else db)
art = tilec.compile(sample, options=opts, emit="cubin")
phases["total"] = [time.perf_counter() - t0, cpu() - c0]
src = tilec.compile(sample, options=opts.replace(toolchain=None), emit="cu")
kernels = len(json.loads(art.manifest)["kernels"])
print(json.dumps({"phases": phases, "kernels": kernels, "source": src.data.decode()}))
"""

NVRTC_TIMES = r"""
import ctypes, json, os, sys, tempfile
from tilec.targets.cuda import nvrtc
from tilec.targets.cuda.locate import cuda_include_dir
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


def measure(sample: str, target: str, db: str) -> dict:
    path = ROOT / "samples" / f"{sample}.tile"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), target, db], capture_output=True, text=True,
                          env=env(), cwd=ROOT)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"error": next((ln for ln in lines if "error:" in ln), lines[-1] if lines else "failed")}
    return json.loads(proc.stdout)


def nvrtc_split(source: str, target: str) -> dict:
    nv = subprocess.run([sys.executable, "-c", NVRTC_TIMES, target], input=source, capture_output=True,
                        text=True, env=env(), cwd=ROOT)
    return json.loads(nv.stdout) if nv.returncode == 0 and nv.stdout.strip() else {}


def default_samples() -> list[str]:
    return sorted(p.stem for p in (ROOT / "samples").glob("*.tile"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", "--target", default="sm90,sm80")
    ap.add_argument("--samples", default=",".join(default_samples()))
    ap.add_argument("--runs", type=int, default=3, help="cold compiles per sample and target")
    ap.add_argument("--no-tune-db", action="store_true", help="build without the tuning databases (one config)")
    args = ap.parse_args()
    db = "" if args.no_tune_db else "-"
    print(f"cold NVRTC compiles to a cubin, {'no tuning database' if args.no_tune_db else 'tuning databases'}, "
          f"{args.runs} runs each; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("seconds: each phase's minimum over the runs as wall/cpu; total: min and median, wall/cpu;")
    print("nvrtc split = C++ front end + NVVM optimizer + ptxas (NVRTC's own --time, wall, one compile)")
    cols = "".join(f" {c:>11}" for c in PHASES[:-1])
    head = f"{'sample':<16} {'target':<6} {'kern':>4}{cols} {'total min':>11} {'total med':>11}  nvrtc split"
    print(head)
    print("-" * len(head))
    for target in args.targets.split(","):
        for sample in args.samples.split(","):
            results = [measure(sample, target, db) for _ in range(args.runs)]
            ok = [r for r in results if "error" not in r]
            if not ok:
                print(f"{sample:<16} {target:<6} {results[0]['error'][:100]}")
                continue

            def best(name: str, i: int, ok=ok) -> float:
                return min(r["phases"].get(name, [0.0, 0.0])[i] for r in ok)

            def med(name: str, i: int, ok=ok) -> float:
                return statistics.median(r["phases"][name][i] for r in ok)

            cells = " ".join(f"{best(p, 0):5.2f}/{best(p, 1):5.2f}" for p in PHASES)
            split = nvrtc_split(ok[0]["source"], target)
            parts = [split.get(k, 0.0) for k in ("CUDA C++ Frontend", "NVVM Optimizer", "PTX Translation")]
            total = f"{med('total', 0):5.2f}/{med('total', 1):5.2f}"
            print(f"{sample:<16} {target:<6} {ok[0]['kernels']:>4} {cells} {total}"
                  f"  {parts[0]:.2f} + {parts[1]:.2f} + {parts[2]:.2f}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
