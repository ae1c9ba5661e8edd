#!/usr/bin/env bash
# Install Deno, a JavaScript runtime with WebGPU (navigator.gpu over wgpu), from the npm registry into a cache
# outside the repository (~/.cache/tilec-deno, or $TILEC_DENO_DIR): tests/test_webgpu_js.py runs the ES modules of
# `tilec --target webgpu -o k.js` under it. Needs npm; prints the deno binary's path.
set -euo pipefail
DIR=${TILEC_DENO_DIR:-$HOME/.cache/tilec-deno}
DENO=$DIR/node_modules/.bin/deno
if [ ! -x "$DENO" ]; then
    mkdir -p "$DIR"
    npm install --silent --no-audit --no-fund --prefix "$DIR" deno >/dev/null
fi
"$DENO" --version >/dev/null
echo "$DENO"
