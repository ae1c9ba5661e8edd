#!/usr/bin/env bash
# Compile the demo's kernels into ES modules beside index.html, or into the folder given (f32: every WebGPU device
# runs it, with shader-f16 or without). Then serve the folder (python3 -m http.server) and open
# http://localhost:8000/ in a browser with WebGPU. TILEC names the compiler (default: tilec).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE}
TILEC=${TILEC:-tilec}
$TILEC "$HERE/../../samples/softmax.tile" --target webgpu -D dtype=f32 -o "$OUT/softmax.js"
$TILEC "$HERE/../../samples/gemm.tile" --target webgpu -D dtype=f32 -D block_M=64 -D block_N=64 -D block_K=16 \
    -o "$OUT/gemm.js"
