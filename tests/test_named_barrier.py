"""Named barriers, TileLang's `T.sync_threads(barrier_id, arrive_count)` (issue #30, topk_selector.py): a barrier
among the first threads of the block under an `if` that only they take, which orders their shared-memory
accesses there. Checked in the interpreter against numpy, through the SIMT model on CUDA targets, and refused
at the line with the alternative where the target has no named barriers (WebGPU; AMD GPUs, which have none
either, run a software barrier in LDS)."""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.interp import run_kernel
from tilec.interp.tile_interp import InterpreterError

# The first `active` threads of each block compute an inclusive prefix sum of their block's row in shared memory
# (Hillis-Steele), synchronising among themselves only; the other threads of the block never reach the barriers.
PREFIX = """
const threads = 128
const active = 64

kernel prefix(X: i32[B, active], Y: out i32[B, active]):
    with T.Kernel(B, threads=threads) as bx:
        tx = T.get_thread_binding()
        s = T.alloc_shared([active], i32)
        v = T.alloc_var(i32)
        if tx < active:
            s[tx] = X[bx, tx]
            for i in T.serial(6):
                offset = 1 << i
                T.sync_threads(1, active)
                v = s[tx]
                if tx >= offset:
                    v = v + s[tx - offset]
                T.sync_threads(1, active)
                s[tx] = v
            T.sync_threads(1, active)
            Y[bx, active - 1 - tx] = s[active - 1 - tx]
"""


def compiled(tmp_path, text: str, **kw):
    p = tmp_path / "k.tile"
    p.write_text(text)
    return tilec.compile(p, verify=True, **kw)


def error_of(tmp_path, text: str, **kw) -> str:
    with pytest.raises(CompileError) as e:
        compiled(tmp_path, text, **kw)
    return " | ".join(f"{d.span.line}: {d.message}" if d.span else d.message for d in e.value.diagnostics)


def _args(b: int):
    rng = np.random.default_rng()
    return {"X": rng.integers(-50, 50, (b, 64)).astype(np.int32), "Y": np.zeros((b, 64), np.int32)}


def test_named_barrier_in_the_interpreter(tmp_path):
    args = _args(3)
    run_kernel(compiled(tmp_path, PREFIX).module.kernels[0], args)
    np.testing.assert_array_equal(args["Y"], np.cumsum(args["X"], axis=1))


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx942"])
def test_named_barrier_lowered_to_bar_sync(tmp_path, target):
    """bar.sync 1, 64 in the CUDA source (AMD: the software barrier on LDS words that the kernel zeroes at entry,
    tilec_hip_named_barrier.h, tested on its own in tests/test_hip_named_barrier.py), and the lowering, run lane by
    lane by the SIMT model (which checks that each named barrier is reached by exactly its thread count), matches
    numpy."""
    from tilec.simt.interp import run_simt
    from tilec.targets.registry import lookup

    result = compiled(tmp_path, PREFIX, target=target)
    if target == "gfx942":
        assert result.source.count("tl::named_barrier_lds(tl_named_barrier, 1, 64);") == 3
        assert "bar.sync" not in result.source and "TL_NB_COMPLETES" in result.source
    else:
        assert result.source.count('asm volatile("bar.sync 1, 64;" ::: "memory");') == 3
        assert "named_barrier_lds" not in result.source
    args = _args(2)
    run_simt(result.simt.kernels[0], args, {"B": 2}, warp_size=lookup(target).warp_size)
    np.testing.assert_array_equal(args["Y"], np.cumsum(args["X"], axis=1))


def test_the_simt_model_catches_a_barrier_with_the_wrong_count(tmp_path):
    """A planted lowering bug (the barrier's count off by a warp) is caught by the SIMT model."""
    from tilec.ir import simt as S
    from tilec.simt.interp import SimtInterpreterError, run_simt

    result = compiled(tmp_path, PREFIX, target="sm80")

    def plant(body):
        for s in body:
            if isinstance(s, S.Barrier) and s.index is not None:
                s.threads = 96
            for field in ("body", "then_body", "else_body"):
                plant(getattr(s, field, []))

    plant(result.simt.kernels[0].body)
    with pytest.raises(SimtInterpreterError, match="named barrier 1 of 96 threads reached by 64"):
        run_simt(result.simt.kernels[0], _args(1), {"B": 1})


def test_without_the_barriers_the_shared_race_is_refused(tmp_path):
    racy = PREFIX.replace("                T.sync_threads(1, active)\n                s[tx] = v",
                          "                s[tx] = v")
    assert racy != PREFIX
    assert "this statement writes shared memory that the statement at line 15 reads" in error_of(tmp_path, racy)


def test_ping_pong_halves_need_no_barrier(tmp_path):
    """Under a thread condition, reading one half of a shared buffer and writing the other (`buf[r]`, `buf[r ^ 1]`,
    topk_selector's s_input_idx) is no race."""
    text = """
kernel k(X: i32[128], Y: out i32[128]):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        buf = T.alloc_shared([2, 128], i32)
        buf[0, tx] = X[tx]
        for r in T.serial(3):
            if tx < 100:
                buf[(r % 2) ^ 1, tx] = buf[r % 2, tx] + 1
        Y[tx] = buf[1, tx]
"""
    args = {"X": np.arange(128, dtype=np.int32), "Y": np.zeros(128, np.int32)}
    run_kernel(compiled(tmp_path, text).module.kernels[0], args)
    assert args["Y"][5] == 5 + 3
    racy = text.replace("buf[(r % 2) ^ 1, tx] = buf[r % 2, tx] + 1",
                        "buf[(r % 2) ^ 1, tx] = buf[r % 2, tx] + 1\n                buf[r % 2, tx + 1] = 0")
    assert "writes shared memory that" in error_of(tmp_path, racy)  # another thread's element of the read half
    # the loop inside the condition: its next iteration reads the half this one wrote, with no barrier between
    inside = text.replace("""        for r in T.serial(3):
            if tx < 100:
                buf[(r % 2) ^ 1, tx] = buf[r % 2, tx] + 1""", """        if tx < 100:
            for r in T.serial(3):
                buf[(r % 2) ^ 1, tx] = buf[r % 2, tx + 1] + 1""")
    assert inside != text
    assert "reads shared memory that" in error_of(tmp_path, inside)


def test_a_barrier_the_wrong_threads_reach_fails_in_the_interpreter(tmp_path):
    wrong = PREFIX.replace("if tx < active:", "if tx < active - 32:")
    with pytest.raises(InterpreterError, match="named barrier 1 waits for 64 threads but 32 of the block's 128"):
        run_kernel(compiled(tmp_path, wrong).module.kernels[0], _args(1))


@pytest.mark.parametrize("target,why", [("webgpu", "WGSL has only workgroupBarrier()")])
def test_targets_without_named_barriers_refuse_at_the_line(tmp_path, target, why):
    msg = error_of(tmp_path, PREFIX, target=target)
    assert msg.startswith("14: T.sync_threads(1, 64) is a named barrier among 64 of the block's 128 threads")
    assert why in msg and "move the thread condition" in msg


def test_a_whole_block_named_barrier_is_the_block_barrier_everywhere(tmp_path):
    text = """
kernel k(X: i32[128], Y: out i32[128]):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        s = T.alloc_shared([128], i32)
        s[tx] = X[tx]
        T.sync_threads(2, 128)
        Y[tx] = s[127 - tx]
"""
    for target in ("sm80", "gfx942", "webgpu"):
        source = compiled(tmp_path, text, target=target).source
        assert "bar.sync 2" not in source and "id 2" not in source
    args = {"X": np.arange(128, dtype=np.int32), "Y": np.zeros(128, np.int32)}
    run_kernel(compiled(tmp_path, text).module.kernels[0], args)
    np.testing.assert_array_equal(args["Y"], np.arange(128)[::-1])


@pytest.mark.parametrize("call,msg", [
    ("T.sync_threads(0, 64)", "barrier id 0 is not one of 1..15"),
    ("T.sync_threads(16, 64)", "barrier id 16 is not one of 1..15"),
    ("T.sync_threads(1, 48)", "must be a multiple of 32 (whole warps) between 32 and the block's 128 threads, not 48"),
    ("T.sync_threads(1, 256)", "not 256"),
    ("T.sync_threads(1)", "missing argument(s): arrive_count"),
    ("T.sync_threads(1, tx)", "must be a compile-time integer"),
])
def test_bad_named_barriers_are_located(tmp_path, call, msg):
    text = PREFIX.replace("T.sync_threads(1, active)\n                s[tx] = v", f"{call}\n                s[tx] = v")
    assert msg in error_of(tmp_path, text)


def test_named_barrier_prints_and_reads_back(tmp_path):
    from tilec.ir.printer import module_str
    from tilec.ir.reader import read_module

    text = module_str(compiled(tmp_path, PREFIX).module)
    assert "named_barrier id=1, threads=64" in text
    assert module_str(read_module(text)) == text
