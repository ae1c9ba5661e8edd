"""The AscendC back end (ascend910b): generated source, its run on tilec's CPU model of the AscendC API against
the Tile IR interpreter (regular and ragged shapes, f16 and bf16), compile-time refusals at the user's line, and
planted bugs that the model must catch (a removed synchronisation, a wrong fractal layout, an over-capacity
tile, a missing cross-core flag).

Each kernel configuration is compiled once with g++ -fsanitize=address,undefined (runners are cached by source
hash under TILEC_CACHE_DIR); the sizes are runtime arguments, so regular and ragged shapes share one binary.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.cli.main import main as tilec_main
from tilec.diagnostics import CompileError
from tilec.interp.run import random_inputs, run_kernel
from tilec.targets.ascend.model_run import MODEL_DIR, ModelError, build_runner, run_on_model

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the AscendC CPU model needs g++")

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
TOL = {"f16": (1e-2, 1e-2), "bf16": (2e-2, 3e-2), "f32": (1e-4, 1e-4)}


def _compile(sample: str, defines: dict | None = None):
    return tilec.compile(SAMPLES / f"{sample}.tile", defines=defines or {}, target="ascend910b")


def _run(result, sizes: dict[str, int], seed: int = 1, source: str | None = None):
    """(model outputs, interpreter outputs) of the module's first kernel on fresh random inputs."""
    k = tilec.compile(result.module.files[0], defines=dict(result.module.consts)).module.kernels[0]
    program = result.simt[0]
    arrays = random_inputs(k, sizes, seed=seed)
    got = copy.deepcopy(arrays)
    full = {v.name: sizes[v.name] for v in k.size_vars}
    exe = build_runner(source or result.source, program)
    run_on_model(exe, program, {**full, **got}, cores=4)
    run_kernel(k, arrays)
    outs = [p for p in k.params if isinstance(p, tilec.ir.tile.Buffer) and p.is_output]
    return {p.name: got[p.name] for p in outs}, {p.name: arrays[p.name] for p in outs}, outs


def _assert_close(got, want, outs):
    for p in outs:
        rtol, atol = TOL[p.dtype.name]
        a, b = got[p.name].astype(np.float64), want[p.name].astype(np.float64)
        assert np.isfinite(a).all(), f"{p.name}: non-finite values from the model"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=p.name)


VECTOR_CASES = [
    ("vector_add", {"N": 4096}, {"N": 3001}),
    ("softmax", {"M": 8, "N": 1024}, {"M": 37, "N": 700}),
    ("rmsnorm", {"M": 8, "N": 1024}, {"M": 37, "N": 700}),
    ("layernorm", {"M": 8, "N": 1536}, {"M": 29, "N": 1100}),  # 3 column tiles: the running statistics merge
    ("row_sum", {"M": 32, "N": 512}, {"M": 37, "N": 700}),
    ("transpose", {"M": 128, "N": 128}, {"M": 37, "N": 150}),
]


@pytest.fixture(scope="module")
def prebuilt_runners():
    """Compile every configuration's model runner up front, on all cores (each g++ run takes a few seconds);
    the tests then find them in the runner cache."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    configs = [(s, {"dtype": tilec.ir.dtypes.lookup(dt)}) for s, _, _ in VECTOR_CASES for dt in ("f16", "bf16")]
    configs += [("gemm", d) for d, _, _ in GEMM_CASES] + [(s, d) for s, d, _, _ in MIXED_CASES]
    results = [_compile(s, d) for s, d in configs]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(lambda r: build_runner(r.source, r.simt[0]), results))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("sample,regular,ragged", VECTOR_CASES, ids=[c[0] for c in VECTOR_CASES])
def test_vector_samples_on_model(sample, regular, ragged, dtype, prebuilt_runners):
    result = _compile(sample, {"dtype": tilec.ir.dtypes.lookup(dtype)})
    assert result.simt[0].kernel_type == "AIV_ONLY"
    for sizes in (regular, ragged):
        got, want, outs = _run(result, sizes)
        _assert_close(got, want, outs)


GEMM_CASES = [
    ({}, {"M": 256, "N": 256, "K": 64}, {"M": 200, "N": 150, "K": 100}),
    ({"trans_B": True}, {"M": 128, "N": 256, "K": 96}, {"M": 77, "N": 150, "K": 40}),
    ({"dtype": tilec.ir.dtypes.lookup("bf16")}, {"M": 128, "N": 128, "K": 64}, {"M": 130, "N": 33, "K": 17}),
]


@pytest.mark.parametrize("defines,regular,ragged", GEMM_CASES, ids=["f16", "trans_B", "bf16"])
def test_gemm_on_cube_unit(defines, regular, ragged, prebuilt_runners):
    result = _compile("gemm", defines)
    src = result.source
    assert "KERNEL_TYPE_AIC_ONLY" in src and "Mmad(" in src and "LoadData(" in src and "Fixpipe<" in src
    for sizes in (regular, ragged):
        got, want, outs = _run(result, dict(sizes))
        _assert_close(got, want, outs)


MIXED_CASES = [
    ("gemm_bias_relu", {}, {"M": 128, "N": 256, "K": 64}, {"M": 200, "N": 150, "K": 100}),
    ("flash_attention", {}, {"B": 1, "S": 128, "H": 2}, {"B": 2, "S": 100, "H": 2}),
    ("flash_attention", {"causal": True}, {"B": 1, "S": 128, "H": 1}, {"B": 1, "S": 130, "H": 2}),
]


@pytest.mark.parametrize("sample,defines,regular,ragged", MIXED_CASES, ids=["gemm_bias_relu", "fa", "fa_causal"])
def test_mixed_kernels_hand_over_through_cross_core_flags(sample, defines, regular, ragged, prebuilt_runners):
    result = _compile(sample, defines)
    src = result.source
    assert "KERNEL_TYPE_MIX_AIC_1_2" in src and "if ASCEND_IS_AIC {" in src
    assert "CrossCoreSetFlag<2, PIPE_FIX>" in src and "CrossCoreWaitFlag<2, PIPE_MTE2>" in src
    for sizes in (regular, ragged):
        got, want, outs = _run(result, sizes)
        _assert_close(got, want, outs)


def test_cli_outputs(tmp_path, capsys):
    out = tmp_path / "softmax.cpp"
    assert tilec_main([str(SAMPLES / "softmax.tile"), "--target", "ascend910b", "-o", str(out)]) == 0
    text = out.read_text()
    assert 'extern "C" __global__ __aicore__ void softmax(GM_ADDR X_addr, GM_ADDR Y_addr, int64_t M, int64_t N)' in text
    assert "TQue<TPosition::VECIN" in text and "DataCopyPad(" in text and "WholeReduceMax(" in text
    manifest = (tmp_path / "softmax.cpp.json").read_text()
    assert '"kernel_type": "AIV_ONLY"' in manifest and '"UB"' in manifest
    header = tmp_path / "gemm.h"
    assert tilec_main([str(SAMPLES / "gemm.tile"), "--target", "910b", "-o", str(header)]) == 0
    h = header.read_text()
    assert "aclError gemm_launch(aclrtStream stream" in h and "ACL_DEV_ATTR_CUBE_CORE_NUM" in h


def test_kernel_object_without_cann_names_what_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    rc = tilec_main([str(SAMPLES / "gemm.tile"), "--target", "ascend", "-o", str(tmp_path / "gemm.o")])
    err = capsys.readouterr().err
    assert rc == 1 and "ASCEND_HOME_PATH" in err and "bisheng" in err


def test_run_check_cli(capsys):
    rc = tilec_main(["run", str(SAMPLES / "row_sum.tile"), "--target", "ascend910b", "--check", "--size",
                     "M=37,N=300"])
    out = capsys.readouterr().out
    assert rc == 0 and "PASS" in out


def test_emit_ir_after_the_ascend_passes(capsys):
    assert tilec_main([str(SAMPLES / "softmax.tile"), "--target", "ascend910b", "--emit-ir=after:ascend-queues"]) == 0
    assert "kernel softmax" in capsys.readouterr().out
    assert tilec_main([str(SAMPLES / "softmax.tile"), "--target", "ascend910b", "--emit-ir=after:ascend-lower"]) == 0
    before = capsys.readouterr().out
    assert tilec_main([str(SAMPLES / "softmax.tile"), "--target", "ascend910b", "--emit-ir=after:ascend-sync"]) == 0
    after = capsys.readouterr().out
    assert "SetFlag" not in before and "PipeBarrier" not in before
    assert "SetFlag<HardEvent::V_MTE2>" in after and "PipeBarrier<PIPE_V>" in after


def test_api_spelling_table_respells_for_another_cann_version():
    from tilec.targets.ascend.codegen import respell

    src = _compile("row_sum").source
    assert "WholeReduceSum(" in src
    renamed = respell(src, "9")
    assert "ReduceRepeat(" in renamed and "WholeReduceSum" not in renamed


def _line_of(path, text: str) -> int:
    """The 1-based line of `path` that starts with `text` (the samples' headers change length)."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(text))


def test_fp8_is_refused_at_the_users_line(tmp_path, capsys):
    rc = tilec_main([str(SAMPLES / "fp8_gemm.tile"), "--target", "ascend910b", "-o", str(tmp_path / "k.cpp")])
    err = capsys.readouterr().err
    line = _line_of(SAMPLES / "fp8_gemm.tile", "kernel fp8_gemm(")  # the parameter's declaration
    assert rc == 1 and f"fp8_gemm.tile:{line}:" in err and "no fp8" in err and "^" in err


# ---------------------------------------------------------------- planted bugs


def _without(source: str, needle: str, which: int = 0) -> str:
    lines = source.splitlines()
    hits = [i for i, line in enumerate(lines) if needle in line]
    assert len(hits) > which, needle
    del lines[hits[which]]
    return "\n".join(lines) + "\n"


def test_removed_flag_is_a_pipe_hazard():
    result = _compile("softmax")
    bad = _without(result.source, "SetFlag<HardEvent::V_MTE2>")
    with pytest.raises(ModelError, match="pipe hazard.*V_MTE2"):
        _run(result, {"M": 37, "N": 700}, source=bad)


def test_removed_vector_barrier_is_a_pipe_hazard():
    result = _compile("rmsnorm")
    bad = _without(result.source, "PipeBarrier<PIPE_V>();", 3)
    with pytest.raises(ModelError, match="pipe hazard.*PipeBarrier<PIPE_V>"):
        _run(result, {"M": 8, "N": 1024}, source=bad)


def test_removed_queue_event_is_a_pipe_hazard():
    result = _compile("vector_add")
    # The second input's DeQue is the only event between its copy (MTE2) and the vector unit's first read of it
    # (the first input's DeQue orders only what MTE2 had done before it).
    bad = result.source.replace("B_v2 = B_v2_que.DeQue<half>();", "")
    assert bad != result.source
    with pytest.raises(ModelError, match="pipe hazard.*MTE2"):
        _run(result, {"N": 3001}, source=bad)


def test_wrong_fractal_layout_gives_wrong_results():
    result = _compile("gemm")
    bad = result.source.replace("p.ifTranspose = true;", "p.ifTranspose = false;")
    assert bad != result.source
    got, want, outs = _run(result, {"M": 64, "N": 64, "K": 64}, source=bad)
    assert not np.allclose(got["C"].astype(np.float64), want["C"].astype(np.float64), rtol=1e-2, atol=1e-2)


def test_over_capacity_tiles_are_refused_at_the_users_line():
    with pytest.raises(CompileError) as e:
        _compile("gemm", {"block_M": 256, "block_N": 256})
    msg = str(e.value.diagnostics[0].message)
    assert "L0C" in msg and "131072" in msg and "C_local 262144 B" in msg
    assert e.value.diagnostics[0].span.line == _line_of(SAMPLES / "gemm.tile", "            C_local = alloc_fragment(")
    with pytest.raises(CompileError) as e:
        _compile("softmax", {"block_M": 8, "block_N": 2032})
    assert "UB" in e.value.diagnostics[0].message and "188416" in e.value.diagnostics[0].message


def test_missing_cross_core_flag_is_a_reported_deadlock():
    result = _compile("flash_attention")
    bad = _without(result.source, "CrossCoreSetFlag<2, PIPE_FIX>(1);")
    with pytest.raises(ModelError, match="deadlock.*waits for flag 1"):
        _run(result, {"B": 1, "S": 64, "H": 1}, source=bad)


MIXED_KERNEL = r"""
#include "kernel_operator.h"
using namespace AscendC;
// The AIC hands a value to its AIVs through GM and flag 1; each AIV answers through flag 2.
extern "C" __global__ __aicore__ void handover(GM_ADDR buf_addr) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    GlobalTensor<float> buf;
    buf.SetGlobalBuffer((__gm__ float*)buf_addr);
    if ASCEND_IS_AIC {
        buf.SetValue(GetBlockIdx() * 4, 1.0f + GetBlockIdx());
        SET_FLAG
        CrossCoreWaitFlag<2, PIPE_S>(2);
    } else {
        CrossCoreWaitFlag<2, PIPE_S>(1);
        int64_t group = GetBlockIdx() / 2;
        buf.SetValue(group * 4 + 1 + GetSubBlockIdx(), buf.GetValue(group * 4) * 10);
        CrossCoreSetFlag<2, PIPE_S>(2);
    }
}
#include <cstdio>
int main() {
    std::vector<float> buf(16, 0.0f);
    AscendC::model::gm_register(buf.data(), buf.size() * 4, "buf");
    AscendC::model::launch(KERNEL_TYPE_MIX_AIC_1_2, 4, [&] { handover((uint8_t*)buf.data()); });
    for (int g = 0; g < 4; ++g) std::printf("%g %g %g\n", buf[g * 4], buf[g * 4 + 1], buf[g * 4 + 2]);
}
"""


def _build_and_run_cpp(tmp_path, text: str):
    src = tmp_path / "k.cpp"
    src.write_text(text)
    exe = tmp_path / "k"
    cc = subprocess.run(["g++", "-std=c++17", "-O0", "-fsanitize=address,undefined", "-pthread", f"-I{MODEL_DIR}",
                         str(src), "-o", str(exe)], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                          env={"ASAN_OPTIONS": "detect_leaks=0"})


def test_cross_core_flags_hand_over_and_a_missing_one_is_a_reported_deadlock(tmp_path):
    ok = _build_and_run_cpp(tmp_path, MIXED_KERNEL.replace("SET_FLAG", "CrossCoreSetFlag<2, PIPE_S>(1);"))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split("\n")[2].split() == ["3", "30", "30"]
    hung = _build_and_run_cpp(tmp_path, MIXED_KERNEL.replace("SET_FLAG", ""))
    assert hung.returncode == 71 and "deadlock" in hung.stderr and "waits for flag 1" in hung.stderr


def test_model_checks_capacity_and_flooring(tmp_path):
    text = r"""
#include "kernel_operator.h"
using namespace AscendC;
extern "C" __global__ __aicore__ void k(GM_ADDR x_addr) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    GlobalTensor<half> x;
    x.SetGlobalBuffer((__gm__ half*)x_addr);
    TPipe pipe;
    TBuf<TPosition::VECCALC> b;
    pipe.InitBuffer(b, BYTES);
    LocalTensor<half> t = b.Get<half>();
    DataCopy(t, x, 10);
}
int main() {
    std::vector<half> x(64);
    AscendC::model::gm_register(x.data(), 128, "x");
    AscendC::model::launch(KERNEL_TYPE_AIV_ONLY, 1, [&] { k((uint8_t*)x.data()); });
}
"""
    big = _build_and_run_cpp(tmp_path, text.replace("BYTES", "240000"))
    assert big.returncode == 70 and "UB needs 240000 bytes > 188416" in big.stderr
    floored = _build_and_run_cpp(tmp_path, text.replace("BYTES", "1024"))
    assert floored.returncode == 0 and "floors it to 0" in floored.stderr
