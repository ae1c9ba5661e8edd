#!/usr/bin/env bash
# The loader warpgroup's and the realigned stores' A/B on the H200 in one device call (--loader-warpgroup and
# --realign-stores, docs/hopper.md "The loader warpgroup" and "The direct-stores twin"): misaligned gemm and fp8
# shapes on the padded TMA launch, the cp.async twin, the loader twin and the direct-stores twins with realigned
# stores, side by side with cuBLAS and _scaled_mm; the sweep's misaligned shapes with the loader build, padded against
# the twin; the loader twin (with realigned stores) under compute-sanitizer's memcheck and racecheck.
#
#   bash bench/loader_ab.sh build [DIR]      # here, no GPU (about 10 min on two cores): DIR, default .artifacts/loader_ab
#   bash bench/loader_ab.sh run DIR.tar.xz   # there, from the repository root: every step's log in $OUT/loader_ab.tgz
#
# DIR holds mis/{base,loader,stores,loader_stores} (bench/misaligned_h200.py builds without a flag, with
# --loader-warpgroup, with --realign-stores, with both) and sweep/ (bench/shape_sweep.py builds of the fp8, gemm f16
# and gemm bf16 trans_B families with --loader-warpgroup), about 50 MB, and DIR.tar.xz, the same in about 2 MB: the
# device's 64 MiB of carried files count the repository's own 16 MB too, so the archive is what travels. `run`
# unpacks it, then makes the `_twin` copies of base, loader and loader_stores there (manifests without "tma_only":
# every misaligned launch runs the twin). The device tool's call: carry [DIR.tar.xz], command
# `bash bench/loader_ab.sh run DIR.tar.xz`.
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
    "$PY" bench/misaligned_h200.py build "$dir/mis" stores --realign-stores
    "$PY" bench/misaligned_h200.py build "$dir/mis" loader_stores --loader-warpgroup --realign-stores
    "$PY" bench/shape_sweep.py build "$dir/sweep" --only fp8 --only "gemm f16" --only "gemm bf16 trans_B" \
        --tilec-flag=--loader-warpgroup
    tar -C "$(dirname "$dir")" -cf - "$(basename "$dir")" | xz -T0 -6 > "$dir.tar.xz"
    du -sh "$dir" "$dir.tar.xz"
    ;;
  run)
    dir=${2:?the build folder or its .tar.xz}
    if [[ $dir == *.tar.xz ]]; then tar -xJf "$dir" -C "$(dirname "$dir")"; dir=${dir%.tar.xz}; fi
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
    # the twin builds are made here, not carried (copies of the cubins); the loader builds' own launches pad as the
    # base and stores builds' do, so only their twins are timed
    for label in base loader loader_stores; do "$PY" bench/misaligned_h200.py twin "$dir/mis" "$label"; done
    rm -rf "$dir/mis/loader" "$dir/mis/loader_stores"
    step misaligned 260 "$PY bench/misaligned_h200.py run $dir/mis"
    step sweep 140 "$PY bench/shape_sweep.py run $dir/sweep --misaligned --results $o/sweep_misaligned.json"
    step memcheck 50 "compute-sanitizer --tool memcheck --error-exitcode 1 $PY bench/misaligned_h200.py check $dir/mis loader_stores_twin"
    step racecheck 70 "compute-sanitizer --tool racecheck --error-exitcode 1 $PY bench/misaligned_h200.py check $dir/mis loader_stores_twin"
    step memcheck_stores 40 "compute-sanitizer --tool memcheck --error-exitcode 1 $PY bench/misaligned_h200.py check $dir/mis stores"
    ;;
  *) echo "usage: $0 build [DIR] | run DIR" >&2; exit 2 ;;
esac
