#!/usr/bin/env bash
# Install what the tests need into .venv and run them. Used by the README and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
command -v nvcc >/dev/null || echo "note: nvcc not on PATH; CUDA build tests will skip (or fail with TILEC_REQUIRE_TOOLCHAINS=1)"
.venv/bin/ruff check tilec tests bench
exec .venv/bin/python -m pytest -q "$@"
