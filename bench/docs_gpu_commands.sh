#!/usr/bin/env bash
# The documented commands that need an NVIDIA GPU (tests/test_docs_commands.py RUN_ON_GPU and the GPU ones of
# NOT_YET_RUN), run as the docs write them from a scratch folder whose `tilec` runs this folder's copy of tilec.
# For a GPU machine without tilec's dependencies: `bench/docs_gpu_prepare.sh NAME` makes .artifacts/NAME/ (tilec in
# src/, typer, lark, rich, pydantic and their pure-Python dependencies in site/, cp312 wheels of pydantic_core and
# ml_dtypes unpacked in site312/: the H200 image's Python is 3.12, and this script); run
# `bash .artifacts/NAME/docs_gpu_commands.sh` from the repository root with $OUT set. Results of 2026-12-02:
# bench/RESULTS.md, "Documented GPU commands" (the first group) and the s10 lead section (the second group).
#
# STEPS="name ..." runs only the named steps (the last word of each `step` line); DRY=1 prints the steps that would
# run, with their time limits and the sum of them, and runs nothing (no GPU needed: check a selection here first).
# One device call runs at most 10 minutes, so keep a selection's sum under about 560 s. MORE=1 runs the second group
# only (the first passed on the H200); in three calls, for example:
#   MORE=1 STEPS="run_reference tune_gemm_bf16 tune_split"   MORE=1 STEPS=tune_my_model   MORE=1 STEPS=tune_samples
A=$(cd "$(dirname "$0")" && pwd); REPO=$(pwd)
S=$(mktemp -d); cd "$S"; ln -s "$REPO/samples" samples; ln -s "$REPO/samples/gemm.tile" gemm.tile
mkdir bin; printf '#!/bin/sh\nPYTHONPATH="%s/src:%s/site312:%s/site" exec python3 -m tilec "$@"\n' "$A" "$A" "$A" > bin/tilec; chmod +x bin/tilec
export PATH=$S/bin:$PATH PYTHONPATH=$A/src:$A/site312:$A/site NO_COLOR=1 TILEC_CACHE_DIR=$S/cache
OUT=${OUT:-$S/out}; mkdir -p "$OUT"; LIMITS=0
if [ "${DRY:-}" != 1 ]; then
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
  python3 -c "import sys, numpy; print(sys.version.split()[0], numpy.__version__)"
fi
step() { if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $3 "* ]]; then return 0; fi
  if [ "${DRY:-}" = 1 ]; then LIMITS=$((LIMITS + $1)); printf 'would run\t%s\t%d s\t%s\n' "$3" "$1" "$2"; return 0; fi
  local t0=$(date +%s%N); timeout "$1" bash -c "$2" > "$OUT/out.$3.txt" 2>&1; local rc=$?
  printf '%s\t%d\t%.1f s\t%s\n' "$3" "$rc" "$(awk -v a=$t0 -v b=$(date +%s%N) 'BEGIN{print (b-a)/1e9}')" "$2" | tee -a $OUT/summary.txt; tail -4 "$OUT/out.$3.txt"; }
if [ "${MORE:-}" != 1 ]; then
step 60 "tilec run samples/vector_add.tile --target sm90 --check --size N=100000" run_vector_add
step 60 "tilec bench samples/softmax.tile --target sm90 --size M=32768,N=8192 -D dtype=bf16" bench_softmax
step 60 "tilec profile samples/flash_attention.tile --target sm90 --size B=4,S=4096,H=16 -o fa.json" profile_fa
step 60 "tilec profile samples/flash_attention.tile --target sm90 --size B=1,S=4096,H=16 --build-dir prof/" profile_build_dir
: # (ran in the first call: PASS) if [ -d "$A/examples" ]; then step 60 "$REPO/examples/run_on_gpu.sh $A/examples" run_on_gpu_examples; else step 60 "$REPO/examples/run_on_gpu.sh" run_on_gpu_examples_tilec_there; fi
step 90 "tilec package samples/*.tile --target sm80,sm90 -o pkg/ && tilec check-deploy pkg/ && python3 -m tilec.deploy_check pkg/" check_deploy
step 60 "tilec tune samples/softmax.tile --target sm90 --shapes rows --gpus all" tune_softmax
fi
# The GPU commands added to tests/test_docs_commands.py RUN_ON_GPU on 2026-12-02 (s8-docs; all ran on the H200 in s10,
# tune_samples after its worker stopped keeping every split-K candidate's workspace):
# `MORE=1 bash .artifacts/NAME/docs_gpu_commands.sh`. Tuning writes databases into samples/: here a copy.
if [ "${MORE:-}" = 1 ]; then
  rm samples && cp -r "$REPO/samples" samples && mkdir -p bench && cp "$REPO/bench/tune_samples.py" bench/
  command -v python > /dev/null || ln -s "$(command -v python3)" bin/python
  printf 'import numpy as np\n\n\ndef softmax(X, *sizes):\n    x = X.astype(np.float32)\n    e = np.exp(x - x.max(axis=-1, keepdims=True))\n    return (e / e.sum(axis=-1, keepdims=True)).astype(X.dtype)\n' > ref.py
  ln -s samples/softmax.tile softmax.tile
  step 60 "tilec softmax.tile --target sm90 -o softmax.cubin && tilec run softmax.cubin --device cuda --check --reference ref.py:softmax --rtol 1e-3 --atol 1e-3 --size M=64,N=1000" run_reference
  step 240 "tilec tune samples/gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm --size M=1000,N=1000,K=1000" tune_gemm_bf16
  step 240 "tilec tune samples/gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm --build-dir tune/gemm_bf16 && python -m tilec.runtime.tune_worker tune/gemm_bf16 && tilec tune --collect tune/gemm_bf16" tune_split
  step 560 "python bench/tune_samples.py build .artifacts/tune && python3 -m tilec.runtime.tune_worker --budget 300 .artifacts/tune/* && python bench/tune_samples.py collect .artifacts/tune" tune_samples
  step 560 "cp samples/gemm.tune.json my_model.tune.json && tilec tune samples/gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm --shapes square-gemm --size M=1,N=6144,K=4096 --size M=1,N=28672,K=4096 --size M=1,N=4096,K=14336 --size M=1,N=128256,K=4096 --size M=2048,N=6144,K=4096 --size M=2048,N=28672,K=4096 --size M=2048,N=4096,K=14336 --size M=2048,N=128256,K=4096 --build-dir tune/my_gemm && python -m tilec.runtime.tune_worker tune/my_gemm && tilec tune --collect tune/my_gemm --db my_model.tune.json && tilec samples/gemm.tile --target sm90 -D dtype=bf16 --tune-db my_model.tune.json -o gemm.cubin" tune_my_model
  # what the tuning steps measured is worth keeping: the databases they wrote (a device run's scratch is lost)
  [ "${DRY:-}" = 1 ] || tar -czf "$OUT/tuned_databases.tgz" samples/*.tune.json $(ls my_model.tune.json 2>/dev/null) \
      $(ls .artifacts/tune/*/results.json tune/*/results.json 2>/dev/null)
fi
[ "${DRY:-}" != 1 ] || echo "DRY: the time limits of these steps add up to $LIMITS s"
