#!/usr/bin/env bash
# A session's GPU checks, built here and run on the lent H200 in a few device calls (how session s10 ran them; see
# bench/RESULTS.md, "2026-12-02 (s10, lead)").
#
#   bash bench/gpu_session.sh build [DIR]      # here, no GPU: DIR (default .artifacts/session) gets call1/ call2/ call3/
#   bash bench/gpu_session.sh ab DIR BASE      # here: DIR/ab.tar.xz, the A/B of commit BASE against this checkout
#   bash bench/gpu_session.sh run DIR/callN    # there, from the repository root: everything that folder holds
#
# Each callN folder stays under the device's 64 MiB of carried files (with the working tree's ~7 MB), and `run`
# returns one file, $OUT/callN.tgz (the device returns at most 8 files), with every log and JSON result:
#   call1: the GPU suite's first half, the row kernels' realign A/B and the misaligned gemm table (perf_next), the
#          launch overhead, the shape sweep                                                        (~250 s there)
#   call2: the GPU suite's second half, the TileLang ports, the named-barrier test                  (~100 s there)
#   call3: the documented GPU commands (bench/docs_gpu_commands.sh, both groups; STEPS= picks)      (~600 s: two calls)
# A callN folder may also hold ab.tar.xz: folders built by `bench/shape_sweep.py build` (each with its shapes.json),
# whose sweeps of the seven wgmma families `run` takes in turn, twice (an A/B: name them so that they sort in the
# order to compare), and optionally sched/ from `bench/attention_schedule_ab.py build`      (~95 s a sweep, ~90 s sched)
# `ab DIR BASE` builds one: base/ from a git worktree of BASE (its own compiler and databases), head/ from this
# checkout (committed or not), sched/ from both; about 20 minutes on 2 cores, 2 MB of .tar.xz.
# The device tool's call for folder N: carry [".artifacts/session/callN"], command
# `bash bench/gpu_session.sh run .artifacts/session/callN` (call3: prefix `STEPS="..." MORE=1`, see that script).
# Issue the next call within the machine's 30 s warm window, or it starts cold again.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?build or run}
PY=${PYTHON:-python3}

split_suite() {  # the suite folder in two halves by kernel name, each a .tgz (its npz inputs are most of its 130 MB)
    "$PY" - "$1" "$2" "$3" <<'EOF'
import io, json, sys, tarfile
from pathlib import Path
src, a, b = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
index = json.loads((src / "index.json").read_text())
names = list(dict.fromkeys(e["name"] for e in index))
files = {n: [f for f in src.iterdir() if f.name.startswith(n + ".")] for n in names}
total = sum(f.stat().st_size for fs in files.values() for f in fs)
half, acc = {}, 0
for n in names:
    half[n] = a if acc < total / 2 else b
    acc += sum(f.stat().st_size for f in files[n])
for out in (a, b):
    with tarfile.open(out, "w:gz") as tar:
        sub = [e for e in index if half[e["name"]] == out]
        data = json.dumps(sub, indent=1).encode()
        info = tarfile.TarInfo("suite/index.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for n in {e["name"] for e in sub}:
            for f in files[n]:
                tar.add(f, arcname=f"suite/{f.name}")
    print(f"{out}: {sum(1 for e in index if half[e['name']] == out)} cases, {out.stat().st_size >> 20} MiB")
EOF
}

case "$mode" in
  build)
    dir=${2:-.artifacts/session}
    PY=${PYTHON:-.venv/bin/python}
    export PYTHONPATH=$PWD
    rm -rf "$dir"; mkdir -p "$dir/call1" "$dir/call2" "$dir/work"
    "$PY" bench/gpu_suite.py build "$dir/work/suite"
    split_suite "$dir/work/suite" "$dir/call1/suite.tgz" "$dir/call2/suite.tgz"
    PYTHON=$PY bash bench/perf_next_gpu.sh build "$dir/call1/perf_next"
    "$PY" bench/launch_overhead.py build "$dir/call1/launch"
    "$PY" bench/shape_sweep.py build "$dir/call1/sweep"
    "$PY" bench/ports_gpu.py build "$dir/call2/ports"
    PYTHON=$PY bash bench/docs_gpu_prepare.sh session_docs && rm -rf "$dir/call3" && mv .artifacts/session_docs "$dir/call3"
    rm -rf "$dir/work"
    du -sh "$dir"/call*
    ;;
  ab)
    dir=${2:?the call folder to write}; base=${3:?the commit to compare against}
    PY=${PYTHON:-$PWD/.venv/bin/python}
    families=(--only "gemm f16" --only "gemm bf16" --only "gemm f16 trans_B" --only "gemm bf16 trans_B" --only fp8
              --only attention --only "attention causal")
    work=$(mktemp -d); tree=$work/base_tree
    git worktree add --detach "$tree" "$base" >/dev/null
    trap 'git worktree remove --force "$tree"; rm -rf "$work"' EXIT
    mkdir -p "$work/ab"
    # each tree's own compiler builds its folder: run from that tree, so that its tilec is the one imported
    (cd "$tree" && PYTHONPATH=$tree TILEC_CACHE_DIR=$work/cache_base "$PY" bench/shape_sweep.py build "$work/ab/base" "${families[@]}")
    PYTHONPATH=$PWD TILEC_CACHE_DIR=$work/cache_head "$PY" bench/shape_sweep.py build "$work/ab/head" "${families[@]}"
    PYTHONPATH=$PWD "$PY" bench/attention_schedule_ab.py build "$work/ab/sched" --before "$tree"
    rm -rf "$work/ab/sched"/.cache_*
    mkdir -p "$dir"
    tar -cJf "$dir/ab.tar.xz" -C "$work/ab" base head sched
    du -h "$dir/ab.tar.xz"
    echo "carry [\"$dir\"], command: bash bench/gpu_session.sh run $dir"
    ;;
  run)
    c=${2:?the callN folder}
    o=$(mktemp -d)/$(basename "$c")
    mkdir -p "$o"
    export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD  # attention_schedule_ab.py imports tilec.runtime from this checkout
    trap 'tar -czf "${OUT:-.}/$(basename "$c").tgz" -C "$(dirname "$o")" "$(basename "$o")"' EXIT
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$o/gpu.txt"
    t0=$SECONDS
    step() {  # name, limit (s), command: its output in $o/name.log, its status and time printed
        local rc=0
        timeout "$2" bash -c "$3" > "$o/$1.log" 2>&1 || rc=$?
        echo "$1 rc=$rc $((SECONDS - t0)) s"; tail -n 3 "$o/$1.log"
    }
    if [ -f "$c/suite.tgz" ]; then
        tar -xzf "$c/suite.tgz" -C "$c"
        step suite 200 "$PY bench/gpu_suite.py run $c/suite --results $o/suite.json"
    fi
    if [ -d "$c/ports" ]; then step ports 200 "$PY bench/ports_gpu.py run $c/ports"; fi
    if [ -d "$c/ports" ]; then
        step barrier 150 "$PY -m pytest --noconftest -q -p no:cacheprovider -m gpu -k nvidia_gpu tests/test_hip_named_barrier.py"
    fi
    if [ -d "$c/perf_next" ]; then mkdir -p "$o/pn"; step perf_next 230 "OUT=$o/pn bash bench/perf_next_gpu.sh run $c/perf_next"; fi
    if [ -d "$c/launch" ]; then step launch 90 "OUT=$o $PY bench/launch_overhead.py run $c/launch"; fi
    if [ -d "$c/sweep" ]; then step sweep 120 "$PY bench/shape_sweep.py run $c/sweep --results $o/sweep.json"; fi
    if [ -f "$c/ab.tar.xz" ]; then
        mkdir -p "$c/ab" && tar -xJf "$c/ab.tar.xz" -C "$c/ab"
        families=(--only "gemm f16" --only "gemm bf16" --only "gemm f16 trans_B" --only "gemm bf16 trans_B" --only fp8
                  --only attention --only "attention causal")
        for i in 1 2; do
            for b in $(cd "$c/ab" && ls -d */ | tr -d / | sort); do
                [ -f "$c/ab/$b/shapes.json" ] || continue
                step "sweep_${b}_$i" 200 "$PY bench/shape_sweep.py run $c/ab/$b --results $o/sweep_${b}_$i.json $(printf '%q ' "${families[@]}")"
            done
        done
        if [ -d "$c/ab/sched" ]; then step sched 200 "$PY bench/attention_schedule_ab.py run $c/ab/sched"; fi
    fi
    if [ -f "$c/docs_gpu_commands.sh" ]; then
        mkdir -p "$o/docs"; step docs $((590 - SECONDS + t0)) "OUT=$o/docs bash $c/docs_gpu_commands.sh"
    fi
    ;;
  *) echo "usage: $0 build [DIR] | ab DIR BASE | run DIR/callN" >&2; exit 2 ;;
esac
