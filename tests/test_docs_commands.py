"""Docs that cannot go stale: every shell command in README.md, examples/README.md and docs/*.md (the lines of
```console blocks that start with `$ `, and the command lines of plain and bash blocks) is accounted for here,
and every Python snippet of README.md too:

- RUN_HERE: run by this file, as the docs write it (from a scratch folder where `samples/` is the checkout's and
  `tilec` is this checkout), with what the docs claim of its output checked;
- FAILS_AS_DOCUMENTED: run here too, for the error the docs show: its exit status and message;
- RUN_ELSEWHERE: run by the named test (of another file, or a test of this one that checks more than the output:
  the zsh completion, the CUDA 12 build, the link of an object, and the long ones under `pytest -m slow` with their
  fast twin named);
- RUN_ON_GPU: commands that need an NVIDIA GPU, run by this file under `pytest -m gpu` (after the commands that make
  their inputs, in a folder whose samples/ is a copy: tuning writes databases beside the source);
- RUN_LONG: long commands (large nvcc builds, a large interpreter run), run under `pytest -m slow`; by default
  their fast twin runs (the same configuration's CUDA source, or a smaller run);
- SYNOPSES: usage lines with placeholders (FILE, [options]), not commands;
- NOT_YET_RUN: the debt, named one by one: commands no test runs yet.

test_every_documented_command_is_accounted_for fails when a doc gains a command that none of these lists holds
(run it, or say where it is run), and when a listed command has left the docs (the lists stay true)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "examples/README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
COMMAND_START = re.compile(r"^(mkdir|tilec|python3?|\./|\.venv/|make|cmake|examples/|scripts/|g\+\+|source|\. )")


def _strip_comment(line: str) -> str:
    """`tilec x.tile -o y   # what it does` -> the command (a `#` after two spaces starts the docs' comments)."""
    return re.split(r"\s{2,}#", line)[0].strip()


def documented_commands() -> dict[str, list[str]]:
    """command -> the docs that show it."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        for lang, body in FENCE.findall((ROOT / doc).read_text()):
            if lang == "python":
                continue
            for line in body.splitlines():
                if lang == "console":
                    cmd = line[2:] if line.startswith("$ ") else None
                elif lang in ("", "bash", "sh", "shell"):
                    cmd = line if COMMAND_START.match(line) else None
                else:
                    cmd = None
                if cmd:
                    found.setdefault(_strip_comment(cmd), []).append(doc)
    return found


def readme_python_snippets() -> list[str]:
    return [body for lang, body in FENCE.findall((ROOT / "README.md").read_text()) if lang == "python"]


# ---------------------------------------------------------------------------------------------- the ledger

# command -> (what it needs, what its output must contain: strings in stdout+stderr, "" for nothing claimed)
RUN_HERE: dict[str, tuple[tuple[str, ...], str | tuple[str, ...]]] = {
    "tilec tune --show samples/gemm.tune.json --kernel gemm":
        ((), ("-D dtype=bf16 (NVIDIA H200, 58 shapes): 10 configurations (at most 10)",
              "-D trans_B=True (NVIDIA H200, 58 shapes): 10 configurations (at most 10)")),
    "tilec tune --show samples/gemm.tune.json --kernel gemm --max-configs 10": ((), "(at most 10)"),
    "tilec samples/flash_attention.tile --emit-ir": ((), "kernel flash_attention"),
    "tilec samples/gemm.tile --emit-ir=after:lower-to-simt --target sm90": ((), "gemm"),
    "tilec samples/gemm.tile --target sm90 -o gemm.cu": ((), ""),
    "tilec samples/gemm.tile --target sm90 -o gemm.cubin --compiler nvrtc": (("cuda",), ""),
    "tilec samples/gemm.tile --target sm90 -o gemm.cubin --resource-usage -D block_K=64": (("cuda",), "registers"),
    "tilec samples/gemm.tile -arch=sm_90a -c -o gemm.o": (("cuda", "cc"), ""),
    "tilec samples/gemm.tile --target sm80 -o gemm.cubin -R": (("cuda",), "remark: no remarks for sm80"),
    "tilec samples/gemm.tile --target sm80 -D dtype=f32 -o g.cubin -R":
        (("cuda",), ("samples/gemm.tile:77:1: warning: kernel 'gemm' spills",
                     "samples/gemm.tile:92:17: remark: gemm runs on scalar multiply-adds, not tensor cores",
                     "samples/gemm.tile:83:13: remark: shared tile 'B_s': its reads by load (lowered from line 92) "
                     "have bank conflicts")),
    "tilec run samples/softmax.tile --device cpu --size M=100,N=1000": ((), "Y"),
    "tilec run samples/softmax.tile --target ascend910b --check --size M=37,N=1000": ((), "PASS"),  # (ragged, cheap)
    # a function of two launches, end to end through its header's gqa_decode_launch (docs/ascend.md)
    "tilec run examples/tilelang/gqa_decode_splitkv.tile --target ascend910b --check -Dnum_split=3 "
    "--size batch=2,heads=4,heads_kv=1,seqlen_kv=70":
        ((), ("gqa_decode.Output: f16[2, 4, 64]", "gqa_decode_launch, 2 launches (MIX_AIC_1_2, AIV_ONLY), 6400 bytes "
                                                  "of scratch", "check Output against the interpreter: PASS")),
    "tilec run samples/softmax.tile --target webgpu --check": (("webgpu",), "PASS"),
    "tilec targets": ((), "sm90"),
    "tilec --help": ((), "--target"),
    "tilec --cmake-dir": ((), "cmake"),
    "tilec cache stats": ((), ""),
    "tilec samples/softmax.tile --target webgpu -o softmax.wgsl": ((), ""),
    "tilec samples/softmax.tile --target ascend910b -o softmax.cpp": ((), ""),
    "tilec samples/gemm.tile --target gfx90a -o gemm.hip": ((), ""),
    "tilec samples/gemm.tile --target webgpu -D dtype=f32 -D block_M=64 -D block_N=64 -D block_K=16 -o gemm.wgsl":
        ((), ""),
    "tilec samples/gemm.tile --target sm90 --emit-ir=after:pipeline-planning": ((), "gemm"),
    "tilec samples/gemm.tile --target sm90 -o gemm.cu --no-warp-specialize": ((), ""),
    "mkdir -p build && tilec samples/gemm_bias_relu.tile -o build/gbr.h -MD -MP && cat build/gbr.h.d":
        (("cuda",), "samples/common/epilogue.tile:"),
    # docs/cli.md's `gemm.tile` is the sample (the scratch folder links it)
    "tilec gemm.tile --emit-ir": ((), "kernel gemm"),
    "tilec gemm.tile -o gemm.cu -D block_M=64": ((), ""),
    "tilec gemm.tile -t sm80 --dryrun -O2 -Xptxas -warn-spills":
        (("nvcc",), ("-gencode=arch=compute_80,code=sm_80 -Xptxas -v -Xptxas -O2 -Xptxas -warn-spills",)),
    "tilec run gemm.tile --size M=200,N=130 --size K=64 -D block_M=64":
        ((), "kernel gemm:\n  C: f16[200, 130]  min -33.5  max 33.25  mean 0.0902567  sum 2346.67\n"),
    "tilec samples/gemm.tile    --target ascend910b -o gemm.h": ((), ""),
    # CANN's bisheng compiles the kernel object; no machine of ours has CANN (it skips with that reason here)
    "tilec samples/gemm.tile    --target ascend910b -o gemm.o": (("bisheng",), ""),
    # the default gemm for sm80 and sm90 in every output docs/cli.md and deploy.md show: two compiles, shared
    "tilec gemm.tile -o gemm.cubin": (("cuda",), ""),
    "tilec gemm.tile --target sm90 -o gemm.cubin": (("cuda",), ""),
    "tilec gemm.tile -t sm80,sm90 -o gemm.fatbin": (("cuda",), ""),
    "tilec gemm.tile -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a -o gemm.fatbin":
        (("cuda",), ""),
    "tilec gemm.tile -t sm80,sm90 -o gemm.h -MD -MP": (("cuda",), ""),
    "tilec gemm.tile -t sm80,sm90 -o gemm.h": (("cuda",), ""),
    "tilec gemm.tile --target sm80,sm90 -o gemm.h": (("cuda",), ""),
    "tilec gemm.tile -o gemm.h -MD -MP": (("cuda",), ""),
    "tilec gemm.tile --target sm80,sm90 -o gemm.o": (("cuda", "cc"), ""),
    "tilec gemm.tile --target sm80,sm90 -c -o gemm.o": (("cuda", "cc"), ""),
    "source <(tilec --completion bash)": ((), ""),
    "tilec --completion bash > ~/.local/share/bash-completion/completions/tilec": ((), ""),
    "tilec --completion fish > ~/.config/fish/completions/tilec.fish": ((), ""),
    # docs/webgpu.md: the ES module and the npm-shaped package (source generation only: cheap)
    "tilec samples/softmax.tile --target webgpu -o softmax.js": ((), ""),
    "tilec samples/softmax.tile --target webgpu --emit npm -o kernels": ((), ""),
    "tilec samples/gemm.tile --target webgpu -D dtype=f32 -D block_M=64 -D block_N=64 -D block_K=16 --emit npm -o "
    "kernels": ((), ""),
    # docs/amd.md: code objects, assembly, resources and the linkable object (clang-19 and hipcc, a few seconds each)
    "tilec samples/gemm.tile --target gfx942 -o gemm.hsaco": (("gfx942",), ""),
    "tilec samples/gemm.tile --target gfx90a -o gemm.s": (("gfx90a",), ""),
    "tilec samples/gemm.tile --target gfx942 -o gemm.hsaco --resource-usage":
        (("gfx942",), ("VGPRs  AGPRs  SGPRs   LDS B scratch B", "\ngemm  ")),
    "tilec samples/gemm.tile --target gfx90a,gfx942 -c -o gemm.o": (("gfx90a", "gfx942", "cc"), ""),
    "tilec layout samples/gemm.tile --target sm80 -o gemm.svg":
        ((), ("gemm: fragment C_local: mma_m16n8[128x128, warps 2x2]\ngemm: shared A_s: swizzled[128x32]\n",
              "gemm: gemm: mma m16n8k16, warps 2x2\nwrote gemm.svg (6 views)\n")),
    "tilec run samples/softmax.tile --target webgpu --check --size M=37,N=1000":
        (("webgpu",), ("softmax.Y: f16[37, 1000]",
                       "check Y against the interpreter: PASS (0 of 37000 elements outside")),
    "tilec gemm.tile -arch=sm_80 -O3 -o gemm.cubin": (("cuda",), ""),
    # docs/deploy.md's softmax.tile is the sample (the scratch folder links it)
    "tilec softmax.tile --target sm80,sm90 -o softmax.fatbin --no-ptx": (("cuda",), ""),
}

# command -> (its exit status, what the docs show of its output: "" for nothing)
FAILS_AS_DOCUMENTED: dict[str, tuple[int, str]] = {
    "tilec gemm.tile --targte sm90": (2, "tilec: error: unknown option '--targte'; did you mean --target?\n"
                                         "(`tilec --help` shows the usage)\n"),
    "tilec gemm.tile -t sm80,sm90 -o gemm.cubin": (1, "tilec: error: several targets (sm80, sm90) need a fatbin, "
                                                      "header or object output (-o x.fatbin, -o x.h, -o x.o)\n"),
    "tilec gemm.tile --emit-ir=after:layout": (1, "tilec: error: --emit-ir=after:layout: expected `after:PASS` or "
                                                  "`all`; passes: build, specialize, check-tile-ops, check-threads\n"),
    # grep finds none of the lazily imported modules: it prints nothing (and so exits 1)
    "python -X importtime -m tilec --help 2>&1 | grep -E \"lark|numpy|tvm\"": (1, ""),
}

# command -> the test (tests/FILE::FUNCTION) that runs it
RUN_ELSEWHERE: dict[str, str] = {
    "./scripts/test.sh": "CI: .ci/run runs it",
    "python -m pytest tests/test_passes_ir.py -k rasterization": "tests/test_passes_ir.py::test_pass_ir",
    "tilec samples/gemm.tile --target sm80,sm90 -o gemm.fatbin":
        "tests/test_backends.py::test_fatbin_of_architectures_that_launch_differently",
    "tilec samples/gemm.tile -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a -o gemm.fatbin":
        "tests/test_cli_nvcc.py::test_two_gencodes_make_one_fatbin_with_both",
    "cmake -S examples/cmake -B build -DTilec_DIR=\"$(tilec --cmake-dir)\" && cmake --build build && "
    "build/tilec_example": "tests/test_deploy_build.py::test_examples_build_with_cmake_and_make",
    "tilec layout samples/gemm.tile --target sm90 -o gemm.svg":
        "tests/test_docs_commands.py::test_readme_layout_plot_is_a_summary_under_a_megabyte",
    "make -C examples/make && examples/make/build/tilec_example":
        "tests/test_deploy_build.py::test_examples_build_with_cmake_and_make",
    **dict.fromkeys([  # docs/tuning.md's recipe for a model's own shapes, fp8 (the worker's results stood in)
        "cp samples/fp8_gemm.tune.json my_fp8.tune.json",
        "tilec tune samples/fp8_gemm.tile --target sm90 --shapes llm-gemm --shapes square-gemm \\",
        "python -m tilec.runtime.tune_worker tune/my_fp8",
        "tilec tune --collect tune/my_fp8 --db my_fp8.tune.json",
        "tilec samples/fp8_gemm.tile --target sm90 --tune-db my_fp8.tune.json -o fp8_gemm.cubin",
    ], "tests/test_shape_sweep.py::test_the_documented_recipe_for_your_own_shapes"),
    "examples/web/build.sh": "tests/test_web_page.py::test_page_runs_both_kernels_and_matches_the_reference",
    "cd examples/web && python3 -m http.server":
        "tests/test_web_page.py::test_page_runs_both_kernels_and_matches_the_reference",
    "tilec package samples/*.tile --target sm80,sm90 -o pkg/":
        "tests/test_deploy_package.py::test_a_package_is_reproducible_and_indexed",
    "tilec package samples/*.tile --target sm80,sm90 -o pkg/ --wheel my_kernels --wheel-version 1.2":
        "tests/test_deploy_package.py::test_a_package_is_reproducible_and_indexed",
    "tilec package samples/gemm_bias_relu.tile --target sm80,sm90 -o build/pkg -MD -MP && cat build/pkg.d":
        "tests/test_deploy_package.py::test_the_package_command_writes_a_dependency_rule",
    "tilec softmax.tile --target sm80,sm90 -o softmax.fatbin":
        "tests/test_deploy_compat.py::test_fatbins_carry_the_oldest_generic_targets_ptx",
    "tilec softmax.tile --target sm90 -o softmax.h":
        "tests/test_deploy_compat.py::test_headers_carry_ptx_of_the_generic_path",
    "python -m tilec.runtime.fastlaunch": "tests/test_fastlaunch.py::test_the_documented_command_names_the_extension",
    "TILEC_NVRTC=12 tilec gemm.tile --target sm80,sm90 --compiler nvrtc -o gemm.h":
        "tests/test_docs_commands.py::test_cuda12_nvrtc_builds_for_cuda12_drivers",
    "tilec --completion zsh > \"${fpath[1]}/_tilec\"":
        "tests/test_docs_commands.py::test_zsh_completion_is_installed_where_the_docs_say",
    "g++ main.cpp gemm.o -o app -lcuda -lpthread": "tests/test_docs_commands.py::test_the_object_links_into_a_program",
    "python -m tilec.run_pass rasterization tests/passes/rasterization/grouped_order.ir --target sm80 | python "
    "tests/filecheck.py tests/passes/rasterization/grouped_order.ir":
        "tests/test_docs_commands.py::test_the_pass_ir_pipe_of_architecture_md_runs",
    # the package index: the test builds with CUDA 12's NVRTC wherever that wheel is installed (skips naming it)
    "pip install 'tilec[cuda12]'": "tests/test_docs_commands.py::test_cuda12_nvrtc_builds_for_cuda12_drivers",
    # slow (a venv and pip install from the package index): tests/test_objects.py's no-nvcc first command is its twin
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/tilec samples/gemm.tile --target sm90 -o "
    "gemm.cubin": "tests/test_docs_commands.py::test_readme_install_line_in_a_fresh_clone",
    # slow (minutes of NVRTC compiles); its twin: tests/test_tuning.py::
    # test_build_folder_then_collect_then_build_with_the_database (the same --build-dir on a small tune() space)
    "tilec tune samples/softmax.tile --target sm90 --shapes rows --build-dir tune/":
        "tests/test_docs_commands.py::test_readme_tune_build_folder",
    # slow (50 s of nvcc, clang-19 and disassembly): tests/test_resource_baseline.py's in-process comparison is the twin
    **dict.fromkeys(["python scripts/resource_baseline.py", "python scripts/resource_baseline.py --update"],
                    "tests/test_docs_commands.py::test_resource_baseline_commands"),
    "python scripts/cli_fuzz.py --seconds 3600 --seed 3027 --toolchains --slow-fraction 0.05 --exec-fraction 0.05 "
    "--report 120 --summary bench/cli_fuzz/summary-3027.txt":
        "tests/test_cli_fuzz.py::test_fuzzed_command_lines_find_nothing",
}

WRITE_REF_PY = """cat > ref.py <<'EOF'
import numpy as np


def softmax(X, *sizes):
    x = X.astype(np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(X.dtype)
EOF"""
BUILD_GEMM_BF16 = ("tilec tune samples/gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm "
                   "--build-dir tune/gemm_bf16")
BF16_RECIPE = [
    "cp samples/gemm.tune.json my_model.tune.json",
    "tilec tune samples/gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm --shapes square-gemm \\",
    "python -m tilec.runtime.tune_worker tune/my_gemm",
    "tilec tune --collect tune/my_gemm --db my_model.tune.json",
    "tilec samples/gemm.tile --target sm90 -D dtype=bf16 --tune-db my_model.tune.json -o gemm.cubin",
]

# command -> (the commands run before it, to make its inputs, what its output must contain): they need an NVIDIA GPU, so
# they run under `pytest -m gpu` (test_documented_gpu_command_runs) on a machine with one and tilec installed
RUN_ON_GPU: dict[str, tuple[tuple[str, ...], str | tuple[str, ...]]] = {
    "tilec run samples/vector_add.tile --target sm90 --check --size N=100000":
        ((), ("vector_add.C: f16[100000]", "check C against the interpreter: PASS (0 of 100000 elements outside")),
    "tilec bench samples/softmax.tile --target sm90 --size M=32768,N=8192 -D dtype=bf16": ((), "M=32768,N=8192"),
    "tilec profile samples/flash_attention.tile --target sm90 --size B=4,S=4096,H=16 -o fa.json":
        ((), "flash_attention: grid 32x16x4, 384 threads"),
    "tilec tune samples/softmax.tile --target sm90 --shapes rows --gpus all": ((), ""),
    "tilec check-deploy pkg/": (("tilec package samples/*.tile --target sm80,sm90 -o pkg/",), ""),
    "python -m tilec.deploy_check pkg/": (("tilec package samples/*.tile --target sm80,sm90 -o pkg/",), ""),
    # the examples' launchers made where tilec is (no GPU needed), then built and run where the GPU is (on the H200:
    # bench/RESULTS.md, "Documented GPU commands")
    "examples/prebuild.sh": ((), "prebuilt headers and objects in"),
    "examples/run_on_gpu.sh .artifacts/examples": (("examples/prebuild.sh",), "== both examples: PASS"),
    "tilec profile samples/flash_attention.tile --target sm90 --size B=1,S=4096,H=16 --build-dir prof/": ((), ""),
    # docs/cli.md: a prebuilt cubin checked against a Python function (the cubin and the function made first)
    "tilec run softmax.cubin --device cuda --check --reference ref.py:softmax --rtol 1e-3 --atol 1e-3 --size "
    "M=64,N=1000": (("tilec softmax.tile --target sm90 -o softmax.cubin", WRITE_REF_PY),
                    ("softmax.Y: f16[64, 1000]", "check Y against --reference: PASS (0 of 64000 elements outside "
                                                 "rtol 0.001, atol 0.001")),
    # docs/tuning.md: tuning here (its database goes beside the source: the GPU scratch's samples/ is a copy)
    "tilec tune samples/gemm.tile --target sm90 -D dtype=bf16 --shapes llm-gemm --size M=1000,N=1000,K=1000":
        ((), ""),
    # docs/tuning.md, the GPU on another machine: the build (its `...` written out), the worker, the collect
    "python -m tilec.runtime.tune_worker tune/gemm_bf16": ((BUILD_GEMM_BF16,), ""),
    "tilec tune --collect tune/gemm_bf16": ((BUILD_GEMM_BF16, "python -m tilec.runtime.tune_worker tune/gemm_bf16"),
                                            ""),
    # docs/tuning.md, the samples' databases: ten tuning builds (minutes of CPU), the worker, the collect
    "python bench/tune_samples.py build .artifacts/tune": ((), ""),
    "python3 -m tilec.runtime.tune_worker --budget 300 .artifacts/tune/*":
        (("python bench/tune_samples.py build .artifacts/tune",), ""),
    "python bench/tune_samples.py collect .artifacts/tune":
        (("python bench/tune_samples.py build .artifacts/tune",
          "python3 -m tilec.runtime.tune_worker --budget 300 .artifacts/tune/*"), ""),
    # docs/tuning.md, your own model's shapes in bf16 (the build's continuation lines joined: _full); the fp8
    # recipe's steps run without a GPU in tests/test_shape_sweep.py, the worker's results stood in
    **{step: (tuple(BF16_RECIPE[:i]), "") for i, step in enumerate(BF16_RECIPE)},
}

# command -> (what it needs, what its output must contain, the command run by default in its place): long runs
# (nvcc builds of large sm90/sm80 configurations: 10 s of CPU or more each; the interpreter on a 1000 x 1000 gemm,
# 18 s; Ascend's model on flash attention, 13 s: CPU times of 2026-12-02), run under `pytest -m slow`
# (test_documented_long_command_runs). By default their fast twin runs instead: the same command writing CUDA source
# (`-o X.cu`: the same front end, -D values, schedule and lowering, no ptxas), or a smaller run of RUN_HERE (the
# same subcommand and target).
RUN_LONG: dict[str, tuple[tuple[str, ...], str | tuple[str, ...], str]] = {
    "tilec samples/gemm.tile --target sm90 -o gemm.cubin -Dblock_N=256 -Dblock_K=64 -Dthreads=256 -Dnum_stages=4":
        (("cuda",), "", "tilec samples/gemm.tile --target sm90 -o gemm.cu -Dblock_N=256 -Dblock_K=64 -Dthreads=256 "
                        "-Dnum_stages=4"),
    "tilec samples/gemm.tile --target sm90 -o gemm.cubin -Dcluster_m=2 -Rpass=cluster":
        (("cuda",), "remark", "tilec samples/gemm.tile --target sm90 -o gemm.cu -Dcluster_m=2"),
    "tilec samples/gemm.tile --target sm90 -o gemm.cubin -Dcluster_n=2":
        (("cuda",), "", "tilec samples/gemm.tile --target sm90 -o gemm.cu -Dcluster_n=2"),
    "tilec samples/gemm.tile --target sm80 -D block_M=256 -D block_N=256 -o g.cubin":
        (("cuda",), ("samples/gemm.tile:", "warning: kernel 'gemm' spills"),
         "tilec samples/gemm.tile --target sm80 -D block_M=256 -D block_N=256 -o g.cu"),
    "tilec samples/gemm.tile --target sm90 -D dtype=bf16 -o gemm.cubin":
        (("cuda",), "", "tilec samples/gemm.tile --target sm90 -D dtype=bf16 -o gemm.cu"),
    "tilec run gemm.tile --size M=1000,N=1000,K=512":
        ((), "C: f16[1000, 1000]", "tilec run gemm.tile --size M=200,N=130 --size K=64 -D block_M=64"),
    "tilec run samples/flash_attention.tile --target ascend910b --check --size B=2,S=100,H=2":
        ((), "PASS", "tilec run samples/softmax.tile --target ascend910b --check --size M=37,N=1000"),
    # docs/reliability.md's 65-minute fuzzing run (a finding is saved into the checkout's tests/fuzz_corpus/, as the
    # doc says); its twin: the same seed and settings for 5 s, saving nothing
    "python scripts/fuzz.py --seconds 3900 --seed 2026 --differential 5 --save --report 300":
        ((), ("tilec fuzz: seed 2026", "output            ok  rejected  internal malformed      slow      hang"),
         "python scripts/fuzz.py --seconds 5 --seed 2026 --differential 5 --report 300"),
}

# usage lines: placeholders (FILE, DIR, OUT, ...), an option group after a space (`tilec FILE [-o OUT]`); not a
# shell pipe or a pip extra (`tilec[cuda12]`), which real commands have
SYNOPSIS = re.compile(r"\s\[|\bFILE\b|\.\.\.|\bDIR\b|\bOUT\b|stats\|clear")

# Not run by any test yet (issue #29's remaining work): none. (Each command above that needs what this machine lacks
# -- an NVIDIA GPU, CANN's bisheng, CUDA 12's NVRTC, zsh, a package index -- is marked or skips naming what it needs.)
NOT_YET_RUN: set[str] = set()


def test_every_documented_command_is_accounted_for():
    documented = documented_commands()
    run = set(RUN_HERE) | set(FAILS_AS_DOCUMENTED) | set(RUN_ELSEWHERE) | set(RUN_ON_GPU) | set(RUN_LONG)
    listed = run | NOT_YET_RUN
    assert not NOT_YET_RUN & run
    unaccounted = sorted(f"{docs[0]}: {cmd}" for cmd, docs in documented.items()
                         if cmd not in listed and not SYNOPSIS.search(cmd))
    assert not unaccounted, "commands in the docs that no test runs (run them here, or list them):\n" + \
        "\n".join(unaccounted)
    gone = sorted(listed - set(documented))
    assert not gone, "listed commands that the docs no longer show:\n" + "\n".join(gone)
    for cmd, where in RUN_ELSEWHERE.items():
        if where.startswith("tests/"):
            path, function = where.split("::")
            assert f"def {function}(" in (ROOT / path).read_text(), f"{cmd}: {where} does not exist"


# ---------------------------------------------------------------------------------------------- running them


def _needs(what: str) -> None:
    from tilec.targets.cuda.locate import nvrtc_lib

    # "cuda": a CUDA device compiler (nvcc, or NVRTC from pip); "nvcc": nvcc itself (a documented nvcc command line)
    found = {"cuda": shutil.which("nvcc") or nvrtc_lib(), "nvcc": shutil.which("nvcc"),
             "cc": shutil.which("cc") or shutil.which("gcc")}
    if what in ("gfx90a", "gfx942"):  # hipcc (gfx90a) and clang-19 (gfx942): the AMD toolchains
        from tilec.targets.hip.toolchain import find_compiler

        found[what] = find_compiler(what)
    if what == "bisheng":  # CANN's compiler, for Ascend's kernel objects (CANN is not installable on our machines)
        from tilec.targets.ascend.toolchain import find_cann

        found[what] = find_cann()[1]
    if what == "webgpu":
        try:
            import wgpu  # noqa: F401

            found[what] = True
        except ImportError:
            found[what] = None
    if not found[what]:
        # CANN cannot be installed by the test command (no public package), so it is never required
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1" and what != "bisheng":
            pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
        pytest.skip(f"{what} not found")


def _scratch(d: Path, copy_samples: bool = False):
    """A folder as a reader's checkout: samples/ (linked, or copied where a command writes a tuning database beside
    the source; gemm.tile too, docs/cli.md's example), copies of scripts/, bench/tune_samples.py and the resource
    baseline (the scripts write beside themselves: here, not into the checkout), a `tilec` and a `python` on PATH
    that run this checkout (PYTHONPATH's folders after it: a CUDA 12 NVRTC wheel installed with --target, say), a
    home with the folders shell completion goes into; one compile cache per folder, so the commands share their
    compiles."""
    if copy_samples:
        shutil.copytree(ROOT / "samples", d / "samples")
    else:
        (d / "samples").symlink_to(ROOT / "samples")
    (d / "gemm.tile").symlink_to(ROOT / "samples" / "gemm.tile")
    (d / "softmax.tile").symlink_to(ROOT / "samples" / "softmax.tile")  # docs/deploy.md's
    (d / "examples").symlink_to(ROOT / "examples")  # examples/prebuild.sh and run_on_gpu.sh, as the docs run them
    shutil.copytree(ROOT / "scripts", d / "scripts")
    (d / "bench").mkdir()
    shutil.copy(ROOT / "bench" / "tune_samples.py", d / "bench")
    (d / "tests" / "baselines").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "baselines" / "resources.json", d / "tests" / "baselines")
    (d / "bin").mkdir()
    for name, run in (("tilec", "-m tilec "), ("python", ""), ("python3", "")):
        shim = d / "bin" / name
        shim.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
                        f'{run}"$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    for folder in (".local/share/bash-completion/completions", ".config/fish/completions", ".zfunc"):
        (d / "home" / folder).mkdir(parents=True)
    env = dict(os.environ, PATH=f"{d / 'bin'}{os.pathsep}{os.environ['PATH']}", TILEC_CACHE_DIR=str(d / "cache"),
               NO_COLOR="1", HOME=str(d / "home"))
    return d, env


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return _scratch(tmp_path_factory.mktemp("docs"))


@pytest.fixture(scope="module")
def gpu_scratch(tmp_path_factory):
    """The GPU commands' folder: its samples/ a copy (`tilec tune` and tune_samples.py collect write databases
    there)."""
    return _scratch(tmp_path_factory.mktemp("docs_gpu"), copy_samples=True)


def _full(command: str) -> str:
    """A documented command as the shell runs it: a line ending in `\\` joined with its continuation lines."""
    if not command.endswith("\\"):
        return command
    for doc in DOCS:
        lines = (ROOT / doc).read_text().splitlines()
        for i, line in enumerate(lines):
            if line == f"$ {command}":
                parts = [command[:-1].strip()]
                while lines[i].endswith("\\"):
                    i += 1
                    parts.append(lines[i].rstrip("\\").strip())
                return " ".join(parts)
    raise AssertionError(f"{command}: not in the docs")


@pytest.mark.parametrize("command", sorted(RUN_HERE))
def test_documented_command_runs(scratch, command):
    marks, claimed = RUN_HERE[command]
    for what in marks:
        _needs(what)
    cwd, env = scratch
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"$ {command}\n{output}"
    assert "Traceback" not in output
    for text in (claimed,) if isinstance(claimed, str) else claimed:
        assert text in output, f"$ {command}: expected {text!r} in its output:\n{output}"


@pytest.mark.gpu
@pytest.mark.parametrize("command", sorted(RUN_ON_GPU))
def test_documented_gpu_command_runs(gpu_scratch, command):
    before, claimed = RUN_ON_GPU[command]
    cwd, env = gpu_scratch
    for step in (*before, command):
        proc = subprocess.run(["bash", "-c", _full(step)], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=1800)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0 and "Traceback" not in output, f"$ {step}\n{output}"
    for text in (claimed,) if isinstance(claimed, str) else claimed:
        assert text in output, f"$ {command}: expected {text!r} in its output:\n{output}"


def _run_documented(scratch, command: str, claimed: str | tuple[str, ...], timeout: int = 1200) -> None:
    cwd, env = scratch
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"$ {command}\n{output}"
    assert "Traceback" not in output
    for text in (claimed,) if isinstance(claimed, str) else claimed:
        assert text in output, f"$ {command}: expected {text!r} in its output:\n{output}"


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(RUN_LONG))
def test_documented_long_command_runs(scratch, command):
    marks, claimed, _fast = RUN_LONG[command]
    for what in marks:
        _needs(what)
    _run_documented(scratch, command, claimed, timeout=7200)  # the fuzzing run: 65 minutes


@pytest.mark.parametrize("command", sorted(RUN_LONG))
def test_documented_long_command_has_a_fast_twin(scratch, command):
    """What runs by default in a long command's place: its fast twin (CUDA source of the same configuration, or a
    smaller run that RUN_HERE has), differing from it only where RUN_LONG's comment says."""
    fast = RUN_LONG[command][2]
    if fast in RUN_HERE:  # run by test_documented_command_runs: the same subcommand and target on a smaller input
        assert fast.split()[:2] == command.split()[:2] and fast.split("--size")[0].split("--target")[1:] == \
            command.split("--size")[0].split("--target")[1:]
        return
    if command.startswith("python scripts/fuzz.py"):  # a shorter run of the same seed and settings, saving nothing
        assert fast == re.sub(r"--seconds \d+", "--seconds 5", command).replace(" --save", ""), fast
        _run_documented(scratch, fast, RUN_LONG[command][1])
        return
    assert fast == command.replace(" -Rpass=cluster", "").replace(".cubin", ".cu"), fast
    _run_documented(scratch, fast, "")


@pytest.mark.parametrize("command", sorted(FAILS_AS_DOCUMENTED))
def test_documented_error_is_as_shown(scratch, command):
    status, shown = FAILS_AS_DOCUMENTED[command]
    cwd, env = scratch
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert (proc.returncode, proc.stdout + proc.stderr) == (status, shown), f"$ {command}"


def test_shell_completion_scripts_are_installed_where_the_docs_say(scratch):
    cwd, env = scratch
    home = Path(env["HOME"])
    for command in [c for c in RUN_HERE if "--completion" in c and ">" in c]:
        subprocess.run(["bash", "-c", command], cwd=cwd, env=env, check=True, timeout=600)
    assert "complete" in (home / ".local/share/bash-completion/completions/tilec").read_text()
    assert "complete -c tilec" in (home / ".config/fish/completions/tilec.fish").read_text()


def test_readme_layout_plot_is_a_summary_under_a_megabyte(scratch):
    """The README's `tilec layout` line: a summary of each view (the first warpgroup's elements, a tile's first
    rows), each cut view saying so, under 1 MB (the full plot is 16.7 MB)."""
    cwd, env = scratch
    command = "tilec layout samples/gemm.tile --target sm90 -o gemm.svg"
    proc = subprocess.run(command.split(), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    svg = (cwd / "gemm.svg").read_text()
    assert len(svg.encode()) < 1 << 20
    assert "summary: the elements of warpgroup 0, rows 0-31 and columns 0-31 of 128x256" in svg
    assert svg.count("--full draws every element") == 4  # the fragment, both shared tiles, the wgmma operand


def python_snippets(doc: str) -> list[str]:
    return [body for lang, body in FENCE.findall((ROOT / doc).read_text()) if lang == "python"]


def test_the_interpreter_snippet_of_deploy_md_runs(scratch):
    """docs/deploy.md's `tilec.load(..., target="cpu")` snippet, as written. (The other Python snippets of the docs
    are not run by a test yet: README's two need a GPU; language.md's are .tile code.)"""
    (snippet,) = [s for s in python_snippets("docs/deploy.md") if 'target="cpu"' in s]
    cwd, env = scratch
    code = snippet + "\nimport numpy as np\nassert y.shape == (7, 333) and np.allclose(y.sum(axis=-1), 1, atol=1e-4)\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=dict(env, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cuda12_nvrtc_builds_for_cuda12_drivers(scratch, monkeypatch):
    """docs/deploy.md's CUDA 12 line, as written, where CUDA 12's NVRTC is (`pip install 'tilec[cuda12]'`, or the
    wheel nvidia-cuda-nvrtc-cu12 installed with --target into a folder on PYTHONPATH): the header and manifest say
    the CUDA 12 release that built them, the same in each."""
    from tilec.targets.cuda.locate import nvrtc_lib

    monkeypatch.setenv("TILEC_NVRTC", "12")
    if nvrtc_lib() is None:
        pytest.skip("CUDA 12's NVRTC (the wheel nvidia-cuda-nvrtc-cu12: pip install 'tilec[cuda12]') not found")
    command = next(c for c in RUN_ELSEWHERE if c.startswith("TILEC_NVRTC=12 "))
    d, env = scratch
    cwd = d / "cuda12"
    cwd.mkdir()
    (cwd / "gemm.tile").symlink_to(ROOT / "samples" / "gemm.tile")
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    manifest = json.loads((cwd / "gemm.h.json").read_text())
    minor = re.fullmatch(r"nvrtc 12\.(\d+)", manifest["toolchain"])
    assert minor, manifest["toolchain"]
    assert manifest["driver_api_version"] == 12000 + 10 * int(minor[1])
    assert f"needs a CUDA 12.x driver or newer (its PTX: CUDA 12.{minor[1]} or newer)" in (cwd / "gemm.h").read_text()


def test_zsh_completion_is_installed_where_the_docs_say(scratch):
    """docs/cli.md's zsh line, run by zsh with a directory of the user's first in $fpath: the script parses, and
    compinit then knows tilec's completion function."""
    zsh = shutil.which("zsh")
    if not zsh:  # scripts/test.sh installs it
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("zsh is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
        pytest.skip("zsh not found")
    command = next(c for c in RUN_ELSEWHERE if "--completion zsh" in c)
    cwd, env = scratch
    home = Path(env["HOME"])
    subprocess.run([zsh, "-f", "-c", f'fpath=("$HOME/.zfunc" $fpath); {command}'], cwd=cwd, env=env, check=True,
                   timeout=600)
    script = home / ".zfunc" / "_tilec"
    assert script.read_text().startswith("#compdef tilec\n")
    subprocess.run([zsh, "-n", str(script)], check=True, timeout=60)
    proc = subprocess.run([zsh, "-f", "-c", 'fpath=("$HOME/.zfunc" $fpath); autoload -Uz compinit; '
                           'compinit -u -d "$HOME/.zcompdump"; print -r -- "$_comps[tilec]"'],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "_tilec", proc.stdout + proc.stderr


def test_the_object_links_into_a_program(scratch):
    """docs/deploy.md's `g++ main.cpp gemm.o -o app -lcuda -lpthread`, after the documented `-c -o gemm.o`: a C++
    program declaring the manifest's prototypes in `extern "C"` (as the doc shows) links, with the driver stub that
    `tilec --cuda-stub` writes standing in for libcuda.so and cuda.h (on the compiler's search paths)."""
    for what in ("cuda", "cc"):
        _needs(what)
    if not shutil.which("g++"):
        pytest.skip("g++ not found")
    d, env = scratch
    cwd = d / "link"
    cwd.mkdir()
    (cwd / "gemm.tile").symlink_to(ROOT / "samples" / "gemm.tile")
    run = dict(cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    for step in ("tilec gemm.tile --target sm80,sm90 -c -o gemm.o", "tilec --cuda-stub stub"):
        proc = subprocess.run(["bash", "-c", step], **run)
        assert proc.returncode == 0, f"$ {step}\n{proc.stdout}{proc.stderr}"
    prototypes = json.loads((cwd / "gemm.o.json").read_text())["object"]["prototypes"]
    assert any(p.startswith("CUresult gemm_launch(CUstream stream, CUdeviceptr A,") for p in prototypes), prototypes
    names = [re.search(r"(\w+)\(", p)[1] for p in prototypes]
    (cwd / "main.cpp").write_text(
        "#include <cuda.h>\n\nextern \"C\" {\n" + "\n".join(prototypes) + "\n}\n\nint main() {\n"
        "    void *volatile used[] = {" + ", ".join(f"(void *)&{n}" for n in names) + "};\n"
        "    return used[0] == nullptr;\n}\n")
    command = next(c for c in RUN_ELSEWHERE if c.startswith("g++ main.cpp"))
    stub = str(cwd / "stub")
    proc = subprocess.run(["bash", "-c", command], **{**run, "env": dict(env, CPATH=stub, LIBRARY_PATH=stub)})
    assert proc.returncode == 0, f"$ {command}\n{proc.stdout}{proc.stderr}"
    assert (cwd / "app").stat().st_mode & stat.S_IXUSR


@pytest.mark.slow
def test_readme_install_line_in_a_fresh_clone(tmp_path):
    """The README's install line, as written, in a fresh clone of this checkout's commit (needs the package index:
    pip installs tilec's dependencies into the new venv). Its fast twin, by default:
    tests/test_objects.py::test_readme_first_command_works_without_nvcc."""
    command = next(c for c in RUN_ELSEWHERE if c.startswith("python3 -m venv .venv"))
    clone = tmp_path / "tilec"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=600)
    # as a user has it: no PYTHONPATH, the samples' tuning databases (the suite turns them off), no CUDA toolkit
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TILEC_TUNE_DB")}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not (Path(d) / "nvcc").exists())
    env["TILEC_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, f"$ {command}\n{proc.stdout[-4000:]}{proc.stderr[-4000:]}"
    assert (clone / "gemm.cubin").stat().st_size > 0 and (clone / "gemm.cubin.json").is_file()
    assert json.loads((clone / "gemm.cubin.json").read_text())["toolchain"].startswith("nvrtc ")
    # the README: after pip's lines the compile says nothing (s19's databases made a no-TMA twin spill; s20's don't)
    ours = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith(("tilec", "samples/"))]
    assert not ours, "\n".join(ours)


@pytest.mark.slow
def test_resource_baseline_commands(scratch):
    """docs/inspect.md's two resource-baseline commands, as written, from the scratch folder's copy of the script
    (so `--update` rewrites the copy's baseline, not the checkout's): the comparison prints the doc's line, the
    update rewrites the baseline with every case, and the comparison still matches after it. Its fast twin, by
    default: tests/test_resource_baseline.py::test_samples_match_the_baseline (the same comparison in-process)."""
    for what in ("cuda", "gfx942"):
        _needs(what)
    cwd, env = scratch
    baseline = cwd / "tests" / "baselines" / "resources.json"
    committed = (ROOT / "tests" / "baselines" / "resources.json").read_text()
    for command in ("python scripts/resource_baseline.py", "python scripts/resource_baseline.py --update",
                    "python scripts/resource_baseline.py"):
        proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, f"$ {command}\n{proc.stdout}{proc.stderr}"
        if command.endswith("--update"):
            assert f"wrote {baseline} ({len(json.loads(committed))} cases)" in proc.stdout, proc.stdout
        else:
            assert f"{len(json.loads(committed))} cases match the baseline" in proc.stdout, proc.stdout
    assert set(json.loads(baseline.read_text())) == set(json.loads(committed))
    assert (ROOT / "tests" / "baselines" / "resources.json").read_text() == committed


@pytest.mark.slow
def test_readme_tune_build_folder(scratch):
    """The README's `tilec tune ... --build-dir tune/`, as written: it compiles softmax's candidates for the `rows`
    shapes (through NVRTC: 136 of 520 built, 3 min of CPU on 2026-12-02) into tune/ and writes nothing beside the
    source; plan.json names each built candidate's binary, there for the GPU machine's worker."""
    _needs("cuda")
    command = next(c for c in RUN_ELSEWHERE if c.startswith("tilec tune samples/softmax.tile"))
    cwd, env = scratch
    before = sorted(p.name for p in (ROOT / "samples").iterdir())
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "on the GPU machine run `python -m tilec.runtime.tune_worker tune/`, then `tilec tune --collect tune/`" \
        in proc.stdout + proc.stderr
    plan = json.loads((cwd / "tune" / "plan.json").read_text())
    built = [c for c in plan["candidates"] if c["status"] == "built"]
    assert built and all((cwd / "tune" / c["artifact"]).is_file() for c in built)
    assert sorted(p.name for p in (ROOT / "samples").iterdir()) == before


def _documented_tune_commands() -> list[str]:
    """Every documented `tilec tune` that builds or times (not --collect or --show), its continuation lines joined,
    from the ledgers and the GPU commands' preparatory commands (their arguments can be checked here)."""
    ledger = [*RUN_HERE, *RUN_ELSEWHERE, *RUN_ON_GPU, *RUN_LONG,
              *(c for before, _ in RUN_ON_GPU.values() for c in before)]
    cmds = {_full(part.strip()) for c in ledger for part in c.split("&&")}
    return sorted(c for c in cmds if c.startswith("tilec tune ") and "--collect" not in c and "--show" not in c)


@pytest.mark.parametrize("command", _documented_tune_commands())
def test_documented_tune_command_takes_its_arguments(command, tmp_path, monkeypatch, capsys):
    """The documented tuning commands that need a GPU (or minutes of compiles) run here as far as their plan: the
    kernel, its -D values, the shapes and --size-rule are checked against the source and the check data written,
    with the search space emptied (nothing compiled, nothing timed). A stale argument -- a size the kernel lost, a
    named shape set that is gone -- fails here and not first on the GPU machine."""
    import shlex

    from tilec.cli.main import main
    from tilec.tuning import plan

    words = shlex.split(command)[2:]
    if "--gpus" in words:  # timing on this host's GPUs: build only
        i = words.index("--gpus")
        del words[i:i + 2]
    if "--build-dir" in words:
        i = words.index("--build-dir")
        del words[i:i + 2]
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(plan, "configurations", lambda axes: [])
    rc = main(["tune", *words, "--build-dir", str(tmp_path / "tune")])
    assert rc == 0, f"$ {command}\n{capsys.readouterr().err}"
    assert json.loads((tmp_path / "tune" / "plan.json").read_text())["candidates"] == []


BAD_TILE = """\
kernel gemm(A: f16[M, K], B: f16[K, N], C: out f16[M, N]):
    with Kernel(ceildiv(N, 128), ceildiv(M, 128), threads=128) as (bx, by):
        A_s = alloc_shared((128, 32), f16)
        B_s = alloc_shared((64, 128), f16)
        acc = alloc_fragment((128, 128), f32)
        for k in Pipelined(ceildiv(K, 32), num_stages=3):
            gemm(A_s, B_s, acc)
        copy(acc, C[by * 128, bx * 128])
"""


def test_readme_error_example_is_what_tilec_prints(tmp_path, capsys):
    """The README's "Errors look like clang's" block, printed as shown (exit status 1, nothing written) for the
    bad.tile it describes."""
    from tilec.cli.main import main

    readme = (ROOT / "README.md").read_text()
    shown = readme.split("Errors look like clang's", 1)[1].split("```\n", 2)[1]
    (tmp_path / "bad.tile").write_text(BAD_TILE)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["bad.tile", "-o", "bad.cu", "--color=never"]) == 1
    finally:
        os.chdir(cwd)
    assert capsys.readouterr().err == shown and not (tmp_path / "bad.cu").exists()


def test_the_pass_ir_pipe_of_architecture_md_runs():
    """docs/architecture.md's pass check, the shell pipe as written, from the checkout's root (its paths are the
    checkout's): the pass's output passes filecheck's CHECK lines (exit 0)."""
    command = next(c for c in RUN_ELSEWHERE if c.startswith("python -m tilec.run_pass "))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # `python` as the docs write it: this interpreter, on both sides of the pipe
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command.replace("python ", f"{sys.executable} ")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
