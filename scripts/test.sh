#!/usr/bin/env bash
# Install what the tests need into .venv and run them. Used by the README and by .ci/run.
# Installs: pip packages into .venv (tilec with its [test] extras); with apt-get, only when missing (sudo when not
# root): mesa-vulkan-drivers (WebGPU tests on lavapipe), hipcc, clang-19, lld-19, llvm-19 (AMD build tests),
# chromium (WebGPU ES-module tests in a browser) and zsh (the zsh completion test); with
# npm, deno into ~/.cache/tilec-deno (WebGPU ES-module tests).
# Each install is announced on standard output before it runs.
# The tests run on TILEC_TEST_WORKERS processes (pytest-xdist, default 2: the 2 cores CI has; 0 runs them in this
# process), a test file's tests on one worker (--dist loadfile: a file's module fixtures, built once, are shared by
# its tests); PYTEST ARGS come after, so `-n 0` there wins.
# `./scripts/test.sh --without-nvcc [PYTEST ARGS]`: after the same installs, run the tests whose behaviour differs
# without a CUDA toolkit (WITHOUT_NVCC below, or the tests named) with nvcc hidden from PATH (tests/conftest.py), as
# on the machine the README's set-up describes: tilec builds with NVRTC and nvFatbin. .ci/run runs both.
set -euo pipefail
cd "$(dirname "$0")/.."
WITHOUT_NVCC=(tests/test_runtime_compare.py::test_load_compiles_through_the_cache
              tests/test_deploy_build.py::test_examples_build_with_cmake_and_make
              tests/test_deploy_build.py::test_cuda_stub_links_and_never_replaces_a_real_driver
              tests/test_objects.py::test_readme_first_command_works_without_nvcc
              tests/test_objects.py::test_objects_link_into_a_c_program
              tests/test_cli_nvcc.py::test_nvcc_flags_do_what_nvcc_does_under_nvrtc
              tests/test_backends.py::test_fatbin_of_architectures_that_launch_differently)
without_nvcc=0
if [ "${1:-}" = "--without-nvcc" ]; then without_nvcc=1; shift; fi
PY=${PYTHON:-python3}
WORKERS=${TILEC_TEST_WORKERS:-2}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
echo "test.sh: installing tilec and its test extras into .venv with pip (pyproject.toml's [test])"
.venv/bin/python -m pip install -q -e '.[test]'
# The WebGPU tests run WGSL through wgpu on Mesa's lavapipe (a Vulkan driver on the CPU): Debian's
# mesa-vulkan-drivers, installed only when its ICD file is missing.
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    echo "test.sh: installing mesa-vulkan-drivers with apt-get (lavapipe, a Vulkan driver on the CPU: the WebGPU tests run WGSL on it)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    if command -v apt-get >/dev/null && { $SUDO apt-get update -q >/dev/null &&
            DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q mesa-vulkan-drivers >/dev/null; }; then
        :
    else
        echo "note: could not install mesa-vulkan-drivers (lavapipe); WebGPU tests will skip (or fail with TILEC_REQUIRE_TOOLCHAINS=1)"
    fi
fi
# The AMD tests build code objects with Debian's hipcc (clang-15: gfx90a) and clang-19 (gfx942), and read them with
# llvm-objdump/llvm-readelf from llvm-19; installed only when missing.
if ! command -v hipcc >/dev/null || ! command -v clang-19 >/dev/null || ! command -v llvm-objdump-19 >/dev/null; then
    echo "test.sh: installing hipcc clang-19 lld-19 llvm-19 with apt-get (the AMD tests build gfx90a/gfx942 code objects and read them)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    if command -v apt-get >/dev/null && { $SUDO apt-get update -q >/dev/null &&
            DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q hipcc clang-19 lld-19 llvm-19 >/dev/null; }; then
        :
    else
        echo "note: could not install hipcc/clang-19; AMD build tests will skip (or fail with TILEC_REQUIRE_TOOLCHAINS=1)"
    fi
fi
# The WebGPU ES-module tests also run the JavaScript in headless Chromium (Dawn, on SwiftShader without a GPU): Debian's
# chromium, installed only when missing.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null && ! command -v google-chrome >/dev/null; then
    echo "test.sh: installing chromium with apt-get (the WebGPU ES-module tests run the generated JavaScript in headless Chromium)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    if command -v apt-get >/dev/null && { $SUDO apt-get update -q >/dev/null &&
            DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium >/dev/null; }; then
        :
    else
        echo "note: could not install chromium; the Chromium WebGPU tests will skip (or fail with TILEC_REQUIRE_TOOLCHAINS=1)"
    fi
fi
# docs/cli.md's zsh completion line is run by zsh (tests/test_docs_commands.py): Debian's zsh, installed only when missing.
if ! command -v zsh >/dev/null; then
    echo "test.sh: installing zsh with apt-get (the test of docs/cli.md's zsh completion line runs it)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    if command -v apt-get >/dev/null && { $SUDO apt-get update -q >/dev/null &&
            DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q zsh >/dev/null; }; then
        :
    else
        echo "note: could not install zsh; the zsh completion test will skip"
    fi
fi
# The WebGPU ES-module tests run the JavaScript that `tilec --target webgpu -o k.js` writes under Deno (navigator.gpu
# over wgpu, on lavapipe): the npm registry's deno package, installed by scripts/install_deno.sh into
# ~/.cache/tilec-deno (outside the repository) only when missing.
DENO_DIR=${TILEC_DENO_DIR:-$HOME/.cache/tilec-deno}
if ! command -v deno >/dev/null && [ ! -x "$DENO_DIR/node_modules/.bin/deno" ]; then
    echo "test.sh: installing deno with npm into $DENO_DIR (scripts/install_deno.sh: the WebGPU ES-module tests run under it)"
    if command -v npm >/dev/null && scripts/install_deno.sh >/dev/null; then
        :
    else
        echo "note: could not install deno (it needs npm); the WebGPU ES-module tests will skip (or fail with TILEC_REQUIRE_TOOLCHAINS=1)"
    fi
fi
if [ "$without_nvcc" = 1 ]; then
    echo "test.sh: the tests whose behaviour differs without nvcc, with nvcc hidden from PATH (NVRTC builds)"
    [ "$#" -gt 0 ] || set -- "${WITHOUT_NVCC[@]}"
    TILEC_TEST_WITHOUT_NVCC=1 exec .venv/bin/python -m pytest -q -n "$WORKERS" --dist loadfile "$@"
fi
command -v nvcc >/dev/null || echo "note: nvcc not on PATH; tests of nvcc itself skip (or fail with TILEC_REQUIRE_TOOLCHAINS=1)"
.venv/bin/ruff check tilec tests bench
exec .venv/bin/python -m pytest -q -n "$WORKERS" --dist loadfile --durations=15 "$@"
