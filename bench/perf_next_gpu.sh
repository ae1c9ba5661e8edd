#!/bin/bash
# Issue #26's next GPU check in one device call: row kernels on odd row lengths (load_realign against the
# element-by-element loads, both beside torch), then the misaligned gemm / fp8 odd-K table (bench/misaligned_h200.py:
# the worst misaligned shapes of bench/RESULTS.md, fp8 against torch._scaled_mm(use_fast_accum=True)).
#
#   bash bench/perf_next_gpu.sh build [DIR]     # here, no GPU (DIR defaults to .artifacts/perf_next)
#   bash bench/perf_next_gpu.sh run [DIR]       # there: needs numpy, torch, triton and the driver; no compiler
#
# The device call (run tool): carry [".artifacts/perf_next"], command `OUT=$OUT bash bench/perf_next_gpu.sh run`.
# Results go to $OUT (rows.json, rows.log, misaligned.log, memcheck.log) when OUT is set. The gemm sanitizer runs,
# if wanted after it: compute-sanitizer --tool memcheck|racecheck python3 bench/misaligned_h200.py check DIR/mis pad
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?build or run}
dir=${2:-.artifacts/perf_next}
PY=${PYTHON:-python3}   # here: PYTHON=/work/main/.venv/bin/python PYTHONPATH=$PWD
case "$mode" in
  build)
    "$PY" bench/perf_next_gpu.py build "$dir/rows"
    "$PY" bench/misaligned_h200.py build "$dir/mis" pad
    ;;
  run)
    out=${OUT:-$dir/results}
    mkdir -p "$out"
    rc=0
    "$PY" bench/perf_next_gpu.py run "$dir/rows" --results "$out/rows.json" 2>&1 | tee "$out/rows.log" || rc=1
    "$PY" bench/misaligned_h200.py run "$dir/mis" 2>&1 | tee "$out/misaligned.log" || rc=1
    if command -v compute-sanitizer > /dev/null; then   # load_realign and the twins' realigned copies: memcheck
      compute-sanitizer --tool memcheck --error-exitcode 1 "$PY" bench/perf_next_gpu.py check "$dir/rows" 2>&1 \
        | tail -n 20 | tee "$out/memcheck.log" || rc=1
    fi
    exit $rc
    ;;
  *) echo "usage: $0 build|run [DIR]" >&2; exit 2 ;;
esac
