#!/usr/bin/env bash
# Generate the examples' launcher headers and objects on a machine with tilec (no GPU needed), for
# examples/run_on_gpu.sh on a GPU machine that has a C++ toolchain but not tilec's Python
# dependencies. Runs the examples' own builds (the CMake one and the Make one) up to the headers
# and copies them to DIR (default .artifacts/examples):
#
#   DIR/cmake/example_gemm/gemm.h, DIR/cmake/example_softmax/softmax.h   (TILEC_PREBUILT_DIR for CMake)
#   DIR/make/gemm.o, DIR/make/softmax.o                                   (TILEC_PREBUILT_DIR for Make)
#
# Usage: examples/prebuild.sh [DIR]     (TILEC=command overrides `tilec`; default: tilec on PATH,
#                                        else python -m tilec from this checkout, with PYTHON or
#                                        .venv's Python)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$repo/.artifacts/examples}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tilec=${TILEC:-}
if [ -z "$tilec" ]; then
  if command -v tilec >/dev/null; then
    tilec=$(command -v tilec)
  else
    py=
    for cand in ${PYTHON:-} "$repo/.venv/bin/python" "${VIRTUAL_ENV:-/nonexistent}/bin/python" python3; do
      if PYTHONPATH="$repo" "$cand" -c "import tilec.driver" 2>/dev/null; then py=$(command -v "$cand"); break; fi
    done
    [ -n "$py" ] || { echo "prebuild.sh: no Python with tilec's dependencies (set PYTHON or TILEC)" >&2; exit 2; }
    tilec=$work/tilec
    printf '#!/bin/sh\nPYTHONPATH="%s" exec "%s" -m tilec "$@"\n' "$repo" "$py" > "$tilec"
    chmod +x "$tilec"
  fi
fi
gen="Unix Makefiles"
command -v ninja >/dev/null && gen=Ninja

cmake -S "$repo/examples/cmake" -B "$work/cmake" -G "$gen" -DTilec_DIR="$repo/tilec/cmake" \
      -DTILEC_EXECUTABLE="$tilec" >/dev/null
cmake --build "$work/cmake" --target example_gemm_tilec example_softmax_tilec
make -C "$repo/examples/make" objects BUILD="$work/make" TILEC="$tilec"

rm -rf "$out"
mkdir -p "$out/cmake" "$out/make"
cp -r "$work/cmake/tilec/." "$out/cmake/"
cp "$work/make/"*.o "$work/make/"*.o.json "$out/make/"
echo "prebuilt headers and objects in $out:"
(cd "$out" && find . -name '*.h' -o -name '*.o' | sort)
