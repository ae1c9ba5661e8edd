"""The AscendC CPU model follows CANN's real resource rules (asc-devkit 8.5: TQueBind, TPipe, kernel_event.h),
and the back end keeps within them: hardware event ids from one pool of 8 per HardEvent, taken by EnQue and
FreeTensor and given back by DeQue and AllocTensor; the cube core's TPipe holding M_MTE1 ids 0-2;
FetchEventID returning the lowest free id; UB usable up to TMP_UB_OFFSET (184 KB), L1 to 512 KB - 128 B; the
structs' real defaults. Each rule has a planted bug that must fail (in the style of test_simt_interp.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import tilec
from tilec.targets.ascend.model_run import MODEL_DIR, ModelError

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the AscendC CPU model needs g++")

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

KERNEL = r"""
#include "kernel_operator.h"
#include <cstdio>
using namespace AscendC;
extern "C" __global__ __aicore__ void k(GM_ADDR x_addr) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE);
    GlobalTensor<float> x;
    x.SetGlobalBuffer((__gm__ float*)x_addr);
    TPipe pipe;
    BODY
}
int main() {
    std::vector<float> x(64, 1.0f);
    AscendC::model::gm_register(x.data(), x.size() * 4, "x");
    AscendC::model::launch(KERNEL_TYPE, 1, [&] { k((uint8_t*)x.data()); });
}
"""


def _run_cpp(tmp_path, body: str, kernel_type: str = "KERNEL_TYPE_AIV_ONLY"):
    src = tmp_path / "k.cpp"
    src.write_text(KERNEL.replace("KERNEL_TYPE", kernel_type).replace("BODY", body))
    exe = tmp_path / "k"
    cc = subprocess.run(["g++", "-std=c++17", "-O0", "-pthread", f"-I{MODEL_DIR}", str(src), "-o", str(exe)],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)


def _enqueue_all(pos: str, n: int) -> str:
    """A queue of n buffers, every one allocated and enqueued (each holds an EnQue event id)."""
    return (f"TQue<TPosition::{pos}, 1> q; pipe.InitBuffer(q, {n}, 256);\n"
            f"for (int i = 0; i < {n}; ++i) {{ LocalTensor<float> t = q.AllocTensor<float>(); q.EnQue(t); }}")


def test_enqueue_takes_an_event_id_from_a_pool_of_eight(tmp_path):
    assert _run_cpp(tmp_path, _enqueue_all("VECIN", 8)).returncode == 0
    r = _run_cpp(tmp_path, _enqueue_all("VECIN", 9))
    assert r.returncode == 70 and "TQue<VECIN>::EnQue" in r.stderr and "8 MTE2_V event ids" in r.stderr


def _cycle_all(pos: str, n: int) -> str:
    """Every buffer of a queue used once: allocated, enqueued, dequeued, freed (each then holds a FreeTensor id)."""
    return (f"TQue<TPosition::{pos}, 1> q; pipe.InitBuffer(q, {n}, 512);\n"
            f"for (int i = 0; i < {n}; ++i) {{ LocalTensor<half> t = q.AllocTensor<half>(); q.EnQue(t); "
            "t = q.DeQue<half>(); q.FreeTensor(t); }")


def test_freed_buffers_keep_their_id_and_the_cube_pipe_holds_three_m_mte1_ids(tmp_path):
    # 5 L0A buffers fit next to the TPipe's M_MTE1 ids 0, 1, 2; a sixth finds the pool empty at its FreeTensor
    assert _run_cpp(tmp_path, _cycle_all("A2", 5), "KERNEL_TYPE_AIC_ONLY").returncode == 0
    r = _run_cpp(tmp_path, _cycle_all("A2", 6), "KERNEL_TYPE_AIC_ONLY")
    assert r.returncode == 70 and "TQue<A2>::FreeTensor" in r.stderr and "M_MTE1" in r.stderr
    # A2 and B2 share the pool: 3 + 3 buffers is as many as 6 of one
    shared = (_cycle_all("A2", 3) + "\n" + _cycle_all("B2", 3).replace(" q;", " q2;").replace("(q,", "(q2,")
              .replace("q.", "q2."))
    r = _run_cpp(tmp_path, shared, "KERNEL_TYPE_AIC_ONLY")
    assert r.returncode == 70 and "TQue<B2>::FreeTensor" in r.stderr
    # the vector core reserves nothing: 8 VECIN buffers cycle
    assert _run_cpp(tmp_path, _cycle_all("VECIN", 8)).returncode == 0


def test_allocating_a_buffer_again_gives_its_free_event_back(tmp_path):
    # one buffer cycled 20 times holds one id at a time (AllocTensor waits for and releases it)
    body = ("TQue<TPosition::A2, 1> q; pipe.InitBuffer(q, 1, 512);\n"
            "for (int i = 0; i < 20; ++i) { LocalTensor<half> t = q.AllocTensor<half>(); q.EnQue(t); "
            "t = q.DeQue<half>(); q.FreeTensor(t); }")
    assert _run_cpp(tmp_path, body, "KERNEL_TYPE_AIC_ONLY").returncode == 0


def test_fetch_event_id_returns_the_lowest_free_id(tmp_path):
    body = ("TQue<TPosition::VECIN, 1> q; pipe.InitBuffer(q, 3, 256);\n"
            "LocalTensor<float> a = q.AllocTensor<float>(); q.EnQue(a);\n"
            "LocalTensor<float> b = q.AllocTensor<float>(); q.EnQue(b);\n"
            "int before = GetTPipePtr()->FetchEventID(HardEvent::MTE2_V);\n"
            "a = q.DeQue<float>();\n"
            "int after = GetTPipePtr()->FetchEventID(HardEvent::MTE2_V);\n"
            "event_t mine = pipe.AllocEventID<HardEvent::MTE2_V>();\n"
            "int cube = GetTPipePtr()->FetchEventID(HardEvent::M_MTE1);\n"
            "std::printf(\"%d %d %d %d\\n\", before, after, int(mine), cube);")
    r = _run_cpp(tmp_path, body)
    assert r.returncode == 0, r.stderr
    # ids 0, 1 taken by the two EnQues; DeQue gives 0 back; AllocEventID takes it; M_MTE1 is untouched on an AIV
    assert r.stdout.split() == ["2", "0", "0", "0"]
    r = _run_cpp(tmp_path, "std::printf(\"%d\\n\", int(GetTPipePtr()->FetchEventID(HardEvent::M_MTE1)));",
                 "KERNEL_TYPE_AIC_ONLY")
    assert r.stdout.split() == ["3"]  # the cube core's TPipe holds 0, 1, 2


def test_ub_ends_at_tmp_ub_offset_and_l1_128_bytes_short(tmp_path):
    ub = "TBuf<TPosition::VECCALC> b; pipe.InitBuffer(b, BYTES);"
    assert _run_cpp(tmp_path, ub.replace("BYTES", str(184 * 1024))).returncode == 0
    r = _run_cpp(tmp_path, ub.replace("BYTES", str(184 * 1024 + 32)))
    assert r.returncode == 70 and f"UB needs {184 * 1024 + 32} bytes > {184 * 1024}" in r.stderr
    l1 = "TQue<TPosition::A1, 1> q; pipe.InitBuffer(q, 1, BYTES);"
    assert _run_cpp(tmp_path, l1.replace("BYTES", str(512 * 1024 - 128)), "KERNEL_TYPE_AIC_ONLY").returncode == 0
    r = _run_cpp(tmp_path, l1.replace("BYTES", str(512 * 1024)), "KERNEL_TYPE_AIC_ONLY")
    assert r.returncode == 70 and "L1 needs 524288 bytes > 524160" in r.stderr


def test_struct_defaults_are_cann_s(tmp_path):
    body = ("Nd2NzParams n; InitConstValueParams<half> z; MmadParams m; DataCopyExtParams d;\n"
            "std::printf(\"%d %d %d %d %d\\n\", n.ndNum, n.dstNzNStride, z.repeatTimes, int(m.cmatrixInitVal), "
            "d.blockCount);")
    r = _run_cpp(tmp_path, body)
    assert r.stdout.split() == ["0", "0", "0", "1", "1"]


def test_flash_attention_single_buffers_its_l0_queues_to_fit_the_event_pool():
    from tests.test_ascend import _assert_close, _run

    result = tilec.compile(SAMPLES / "flash_attention.tile", target="ascend910b")
    for l0 in ("Q_s_l0_que", "K_s_l0_que", "acc_s_cast_l1_l0_que", "V_s_l0_que"):
        assert f"pipe.InitBuffer({l0}, 1," in result.source
    sizes = {"B": 1, "S": 100, "H": 1}
    _assert_close(*_run(result, sizes))
    # planted: the double-buffered L0 queues of before need 8 M_MTE1 ids next to the TPipe's 3: CANN aborts
    bad = result.source
    for l0 in ("Q_s_l0_que", "K_s_l0_que", "acc_s_cast_l1_l0_que", "V_s_l0_que"):
        bad = bad.replace(f"pipe.InitBuffer({l0}, 1,", f"pipe.InitBuffer({l0}, 2,")
    with pytest.raises(ModelError, match="every one of the 8 M_MTE1 event ids is held"):
        _run(result, sizes, source=bad)


THREE_GEMMS = """\
kernel three_gemms(A: f16[M, K], A2: f16[M, K], A3: f16[M, K], B: f16[K, N], D: f16[K, N], E: f16[K, N],
                   C: out f16[M, N]):
    with Kernel(ceildiv(N, 32), ceildiv(M, 32), threads=128) as (bx, by):
        A_s = alloc_shared((32, 32), f16)
        A2_s = alloc_shared((32, 32), f16)
        A3_s = alloc_shared((32, 32), f16)
        B_s = alloc_shared((32, 32), f16)
        D_s = alloc_shared((32, 32), f16)
        E_s = alloc_shared((32, 32), f16)
        C_local = alloc_fragment((32, 32), f32)
        clear(C_local)
        for k in Pipelined(ceildiv(K, 32), num_stages=1):
            copy(A[by * 32, k * 32], A_s)
            copy(A2[by * 32, k * 32], A2_s)
            copy(A3[by * 32, k * 32], A3_s)
            copy(B[k * 32, bx * 32], B_s)
            copy(D[k * 32, bx * 32], D_s)
            copy(E[k * 32, bx * 32], E_s)
            gemm(A_s, B_s, C_local)
            gemm(A2_s, D_s, C_local)
            gemm(A3_s, E_s, C_local)
        copy(C_local, C[by * 32, bx * 32])
"""


def test_l0_queues_beyond_the_event_pool_are_lowered_to_fit(tmp_path):
    """Six L0 operands would need 6 M_MTE1 ids where the cube's TPipe leaves 5: the lowering shares one L0A and one
    L0B queue among them (single-buffered), so CANN's pool never runs dry (passes/event_ids.py still refuses, at
    the first operand's line, queues that do not fit after single-buffering)."""
    path = tmp_path / "three_gemms.tile"
    path.write_text(THREE_GEMMS)
    source = tilec.compile(path, target="ascend910b").source
    assert "pipe.InitBuffer(l0a_half_que, 1," in source and "pipe.InitBuffer(l0b_half_que, 1," in source
    assert "A_s_l0_que" not in source
    # two of the three gemms keep their own queues (4 single-buffered L0 queues)
    head, body = THREE_GEMMS.split("\n", 1)
    two = head.replace(" A3: f16[M, K],", "").replace(" E: f16[K, N],", "") + "\n" + "\n".join(
        line for line in body.splitlines() if "A3" not in line and "E_s" not in line)
    path.write_text(two)
    assert "pipe.InitBuffer(A_s_l0_que, 1," in tilec.compile(path, target="ascend910b").source
