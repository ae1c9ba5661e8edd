#!/usr/bin/env bash
# Prepare .artifacts/NAME/ for bench/docs_gpu_commands.sh on a GPU machine whose Python lacks tilec's dependencies
# (the H200 image: Python 3.12, numpy, torch, nvcc 13; no typer, lark, rich or pydantic): this checkout's tilec in
# src/, the pure-Python dependencies in site/, the compiled ones (pydantic_core, ml_dtypes) for PYTHON_VERSION in
# site312/, all downloaded with pip (`pip download --python-version`, no dependencies resolved: the versions of
# this machine's tilec environment, so that both ends run the same code), and the script beside them.
#
#   bench/docs_gpu_prepare.sh NAME [PYTHON_VERSION]     # default 3.12; PYTHON: the Python whose pip to use
#
# EXTRA="numpy ..." adds packages to site312/ (compiled) for a Python that lacks them (the H200 image has numpy; a
# check of the folder on this machine's Python 3.11 needs it: `EXTRA=numpy bench/docs_gpu_prepare.sh x 3.11`).
#
# Then, in one device call from the repository root (see the script's header for STEPS and DRY):
#   OUT=... bash .artifacts/NAME/docs_gpu_commands.sh
# Not included: apache-tvm (tens of MB; without it the compiles there skip partition-boundaries and
# simplify-indices, as tilec does wherever TVM is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${1:?usage: bench/docs_gpu_prepare.sh NAME [PYTHON_VERSION]}
PYV=${2:-3.12}
PY=${PYTHON:-.venv/bin/python}
A=.artifacts/$NAME
rm -rf "$A"
mkdir -p "$A/src" "$A/site" "$A/site312" "$A/wheels"
cp -r tilec "$A/src/"
find "$A/src" -name __pycache__ -prune -exec rm -rf {} +
cp bench/docs_gpu_commands.sh "$A/"
version() { "$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
PURE="lark typer rich pydantic annotated-types annotated-doc typing-inspection typing_extensions shellingham
      markdown-it-py mdurl pygments"
BINARY="pydantic_core ml_dtypes ${EXTRA:-}"
for p in $PURE $BINARY; do
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYV" -d "$A/wheels" "$p==$(version "$p")"
done
unpack() { "$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$1" "$2"; }
for w in "$A"/wheels/*.whl; do
    case "$(basename "$w")" in
        pydantic_core-*|ml_dtypes-*|numpy-*) unpack "$w" "$A/site312" ;;
        *) unpack "$w" "$A/site" ;;
    esac
done
rm -rf "$A/wheels"
echo "docs_gpu_prepare: $A ($(du -sh "$A" | cut -f1)): src/ (tilec $(git rev-parse --short HEAD)), site/, site312/ (Python $PYV)"
