#!/usr/bin/env bash
# Build and run both examples (examples/cmake and examples/make) on a machine with an NVIDIA GPU.
# Each prints PASS when gemm and softmax, launched through their tilec launchers (the CMake example's
# headers, the Make example's linked objects), match the CPU.
#
#   examples/run_on_gpu.sh                # tilec installed here: the builds generate the launchers
#   examples/run_on_gpu.sh PREBUILT_DIR   # no tilec here: use launchers from examples/prebuild.sh
#
# Needs make, a C++17 compiler, cmake (3.20+; without it only examples/make runs) and the CUDA
# toolkit's cuda.h (CUDA_HOME, default /usr/local/cuda); ninja is used when present. Build trees go to BUILD_DIR (default a temporary
# directory).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
pre=${1:-}
[ -n "$pre" ] && pre=$(realpath "$pre")
if [ -z "$pre" ] && ! command -v "${TILEC:-tilec}" >/dev/null; then
  echo "run_on_gpu.sh: tilec is not installed here; generate the launchers elsewhere with" >&2
  echo "  examples/prebuild.sh DIR   and run   examples/run_on_gpu.sh DIR" >&2
  exit 2
fi
if [ -z "${CUDA_HOME:-}" ]; then
  CUDA_HOME=/usr/local/cuda
  if [ ! -f "$CUDA_HOME/include/cuda.h" ] && command -v nvcc >/dev/null; then
    CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  fi
fi
export CUDA_HOME
work=${BUILD_DIR:-$(mktemp -d)}
gen="Unix Makefiles"
command -v ninja >/dev/null && gen=Ninja
# Link against the toolkit's driver stub when it has one; the real driver is loaded at run time.
stub=
for d in "$CUDA_HOME/lib64/stubs" "$CUDA_HOME/lib/stubs" "$CUDA_HOME/targets/$(uname -m)-linux/lib/stubs"; do
  if [ -f "$d/libcuda.so" ]; then stub=$d; break; fi
done

ran="examples/make"
if command -v cmake >/dev/null; then
  echo "== examples/cmake ($gen)"
  cmake -S "$repo/examples/cmake" -B "$work/cmake" -G "$gen" -DTilec_DIR="$repo/tilec/cmake" \
        -DCUDAToolkit_ROOT="$CUDA_HOME" ${pre:+-DTILEC_PREBUILT_DIR="$pre/cmake"} \
        ${TILEC:+-DTILEC_EXECUTABLE="$TILEC"} >/dev/null
  cmake --build "$work/cmake"
  "$work/cmake/tilec_example"
  ran="both examples"
else
  echo "== examples/cmake: skipped (no cmake on this machine)"
fi

echo "== examples/make"
make -C "$repo/examples/make" BUILD="$work/make" CUDA_HOME="$CUDA_HOME" ${stub:+CUDA_LIBDIR="$stub"} \
     ${pre:+TILEC_PREBUILT_DIR="$pre/make"} ${TILEC:+TILEC="$TILEC"}
"$work/make/tilec_example"
echo "== $ran: PASS"
