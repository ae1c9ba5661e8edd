"""Startup latency of the `tilec` command line, and whether heavy modules get imported.

    python bench/startup.py [--runs 5]

Measures the median wall time (over --runs subprocess runs, after one warm-up run that fills the
OS file cache and lark's grammar cache) of

    tilec --help                      (standard output a pipe, and a terminal: rich renders the panels either way)
    tilec --version
    tilec samples/gemm.tile --emit-ir          (a tests/ir file if the sample does not exist yet)
    tilec samples/gemm.tile --emit-ir --target sm90   (Tile IR through the target passes)
    tilec samples/vector_add.tile -t sm80 -o x.cu       (a compile-cache hit: the warm-up run fills the cache)
    tilec samples/vector_add.tile -arch=sm_80 -O3 -o x.cu   (the same hit, spelled as for nvcc)
    tilec targets --help              (a typer subcommand: typer, pydantic and rich's help renderer load)

and reports for each which heavy modules were imported (tvm, numpy, lark, ml_dtypes, typer, pydantic, rich),
read from `python -X importtime`. Targets (shared/DESIGN.md, the issues): --help <= 0.2 s, a cache hit <= 0.2 s,
--emit-ir <= 0.8 s, no `import tvm` on --help or the parse-only paths, no typer on --help or a cache hit.
Prints a table; the exit status is 0 even when a target is
missed (this is a measurement, not a test).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("tvm", "numpy", "lark", "ml_dtypes", "typer", "pydantic", "rich")


def sample_file() -> Path:
    candidates = [ROOT / "samples/gemm.tile", ROOT / "tests/ir/tilelang_spellings.tile"]
    for p in candidates + sorted(ROOT.glob("tests/ir/*.tile")):
        if p.exists():
            return p
    raise SystemExit("no .tile file to compile (samples/gemm.tile or tests/ir/*.tile)")


def env() -> dict[str, str]:
    e = dict(os.environ)
    # as an installed tilec runs: from bytecode (the warm-up run writes __pycache__), not recompiled every time
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(args: list[str], tty: bool = False) -> tuple[float, float, int]:
    """Wall time, CPU time (user + system) and exit status of one `python -m tilec ARGS`, its standard output a
    pipe or (tty) a terminal. On a loaded machine the CPU time is the better guide to an idle machine's wall time."""
    cpu0 = _child_cpu()
    if not tty:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "tilec", *args], cwd=ROOT, env=env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0, _child_cpu() - cpu0, proc.returncode
    import pty

    master, slave = pty.openpty()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tilec", *args], cwd=ROOT, env=env(), stdout=slave,
                            stderr=subprocess.DEVNULL)
    os.close(slave)
    while True:  # drain the terminal so that the child never blocks on it
        try:
            if not os.read(master, 65536):
                break
        except OSError:  # EIO: the child closed its end
            break
    rc = proc.wait()
    elapsed = time.perf_counter() - t0
    os.close(master)
    return elapsed, _child_cpu() - cpu0, rc


def imported(args: list[str]) -> tuple[set[str], float]:
    """Top-level packages imported (from -X importtime), and the time spent importing tvm."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tilec", *args], cwd=ROOT, env=env(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    mods: set[str] = set()
    tvm_us = 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line.split("|")
        name = parts[-1].strip()
        top = name.split(".")[0]
        mods.add(top)
        if name == "tvm":
            try:
                tvm_us = int(parts[1].strip())  # cumulative microseconds
            except ValueError:
                pass
    return mods, tvm_us / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    opts = ap.parse_args()
    sample = sample_file().relative_to(ROOT)
    cache_dir = tempfile.mkdtemp(prefix="tilec-startup-")
    os.environ["TILEC_CACHE_DIR"] = cache_dir  # a cache of its own: the first (warm-up) run fills it
    hit = os.path.join(cache_dir, "x.cu")
    cases = [
        ("tilec --help", ["--help"], 0.2),
        ("tilec --help (on a terminal)", ["--help"], 0.2, True),
        ("tilec --version", ["--version"], 0.2),
        (f"tilec {sample} --emit-ir", [str(sample), "--emit-ir", "-o", os.devnull], 0.8),
        (f"tilec {sample} --emit-ir --target sm90", [str(sample), "--emit-ir", "--target", "sm90", "-o", os.devnull],
         None),
        ("tilec samples/vector_add.tile -t sm80 -o x.cu (cache hit)",
         ["samples/vector_add.tile", "-t", "sm80", "-o", hit], 0.2),
        ("tilec samples/vector_add.tile -arch=sm_80 -O3 -o x.cu (hit)",
         ["samples/vector_add.tile", "-arch=sm_80", "-O3", "-o", hit], 0.2),
        ("tilec targets --help (typer)", ["targets", "--help"], None),
    ]
    print(f"python {sys.version.split()[0]}, median of {opts.runs} runs (after a warm-up run)\n")
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs (wall times are only meaningful near idle)\n")
    header = (f"{'command':<58} {'median s':>9} {'min s':>7} {'cpu s':>6} {'target':>7}  {'ok':<4} {'exit':>4}  "
              "imports")
    print(header)
    print("-" * len(header))
    for label, args, target, *tty in cases:
        run_once(args, bool(tty))  # warm-up: file cache, lark's grammar cache, __pycache__
        times, cpus, rcs = zip(*(run_once(args, bool(tty)) for _ in range(opts.runs)), strict=True)
        med = statistics.median(times)
        mods, tvm_s = imported(args)
        heavy = [m for m in HEAVY if m in mods]
        tvm_note = f" (tvm import {tvm_s:.2f} s)" if "tvm" in mods else ""
        verdict = "-" if target is None else ("yes" if med <= target else "NO")
        print(f"{label:<58} {med:>9.3f} {min(times):>7.3f} {statistics.median(cpus):>6.3f} "
              f"{target if target else '-':>7}  {verdict:<4} "
              f"{rcs[-1]:>4}  {', '.join(heavy) or 'none of ' + '/'.join(HEAVY)}{tvm_note}")
    print("\n`tvm` must not appear on the --help, --version and plain --emit-ir rows (DESIGN.md: import it only "
          "inside the passes that need it).")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", "import tvm; print(tvm.__version__)"], capture_output=True, text=True)
    if proc.returncode == 0:
        print(f"For scale: `import tvm` ({proc.stdout.strip()}) alone takes {time.perf_counter() - t0:.2f} s here.")
    else:
        print("tvm is not installed in this environment.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
