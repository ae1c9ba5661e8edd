#!/usr/bin/env bash
# The loader warpgroup's A/B on the H200 in one device call (--loader-warpgroup, docs/hopper.md "The loader
# warpgroup"): misaligned gemm and fp8 shapes on the padded TMA launch, the cp.async twin and the loader twin, side by
# side with cuBLAS and _scaled_mm; the sweep's misaligned shapes with the loader build, padded against the twin; the
# loader twin under compute-sanitizer's memcheck and racecheck.
#
#   bash bench/loader_ab.sh build [DIR]   # here, no GPU (about 10 min on two cores): DIR, default .artifacts/loader_ab
#   bash bench/loader_ab.sh run DIR       # there, from the repository root: every step's log in $OUT/loader_ab.tgz
#
# DIR holds mis/{base,loader} (bench/misaligned_h200.py builds without and with the flag) and their `_twin` copies
# (manifests without "tma_only": every misaligned launch runs the twin), and sweep/ (bench/shape_sweep.py builds of
# the fp8, gemm f16 and gemm bf16 trans_B families with the flag), about 40 MB: under the device's 64 MiB of carried
# files. The device tool's call: carry [DIR], command `bash bench/loader_ab.sh run DIR`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?build or run}

case "$mode" in
  build)
    dir=${2:-.artifacts/loader_ab}
    PY=${PYTHON:-.venv/bin/python}
    rm -rf "$dir"; mkdir -p "$dir"
    "$PY" bench/misaligned_h200.py build "$dir/mis" base
    "$PY" bench/misaligned_h200.py build "$dir/mis" loader --loader-warpgroup
    for label in base loader; do "$PY" bench/misaligned_h200.py twin "$dir/mis" "$label"; done
    "$PY" bench/shape_sweep.py build "$dir/sweep" --only fp8 --only "gemm f16" --only "gemm bf16 trans_B" \
        --tilec-flag=--loader-warpgroup
    du -sh "$dir"
    ;;
  run)
    dir=${2:?the build folder}
    PY=${PYTHON:-python3}
    o=$(mktemp -d)/loader_ab
    mkdir -p "$o"
    export PYTHONUNBUFFERED=1
    trap 'tar -czf "${OUT:-.}/loader_ab.tgz" -C "$(dirname "$o")" loader_ab' EXIT
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$o/gpu.txt"
    git rev-parse --short HEAD > "$o/commit.txt" 2>/dev/null || true
    t0=$SECONDS
    step() {  # name, limit (s), command: its output in $o/name.log, its status and time printed
        local rc=0
        timeout "$2" bash -c "$3" > "$o/$1.log" 2>&1 || rc=$?
        echo "$1 rc=$rc $((SECONDS - t0)) s"; tail -n 3 "$o/$1.log"
    }
    step misaligned 240 "$PY bench/misaligned_h200.py run $dir/mis"
    step sweep 180 "$PY bench/shape_sweep.py run $dir/sweep --misaligned --results $o/sweep_misaligned.json"
    step memcheck 60 "compute-sanitizer --tool memcheck --error-exitcode 1 $PY bench/misaligned_h200.py check $dir/mis loader_twin"
    step racecheck 90 "compute-sanitizer --tool racecheck --error-exitcode 1 $PY bench/misaligned_h200.py check $dir/mis loader_twin"
    ;;
  *) echo "usage: $0 build [DIR] | run DIR" >&2; exit 2 ;;
esac
