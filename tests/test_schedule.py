"""The typed schedule (tilec/ir/schedule.py): stable ids, what the planners record, pinning parts of it through
tilec.compile(schedule=...), and pricing it before lowering (plan_only + resources)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
from tilec.diagnostics import CompileError
from tilec.ir import tile as T
from tilec.ir.schedule import ScheduleRequest, resources
from tilec.ir.visit import walk_stmts

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.tile"


def _gemm_line() -> int:
    lines = GEMM.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith("gemm("))


def test_ops_and_buffers_have_unique_stable_ids():
    a = tilec.compile(GEMM).module.kernels[0]  # (target passes may add statements of their own: uid 0)
    b = tilec.compile(GEMM).module.kernels[0]
    ids = [s.uid for s in walk_stmts(a.body)] + [s.buffer.uid for s in walk_stmts(a.body) if isinstance(s, T.Alloc)]
    assert 0 not in ids and len(ids) == len(set(ids))
    assert [s.uid for s in walk_stmts(a.body)] == [s.uid for s in walk_stmts(b.body)]
    gemm = next(s.uid for s in walk_stmts(a.body) if isinstance(s, T.Gemm))
    assert set(tilec.compile(GEMM, target="sm80").module.kernels[0].schedule.gemms) == {gemm}


@pytest.mark.parametrize("target, instruction", [("sm90", "wgmma m64n"), ("sm80", "mma m16n8k16"),
                                                 ("gfx942", "mfma m16n16k16"), ("webgpu", "fma")])
def test_the_printed_schedule_names_the_instruction(target, instruction):
    r = tilec.compile(GEMM, target=target, defines={"block_N": 64} if target == "webgpu" else {},
                      dump_after={"pipeline-planning"}, plan_only=True)
    text = r.ir_after["pipeline-planning"]
    assert f"gemm #{next(iter(r.module.kernels[0].schedule.gemms))} (line {_gemm_line()}): {instruction}" in text
    assert r.simt is None and r.source is None  # plan_only: nothing lowered


def test_pinning_the_instruction_and_stages_changes_the_code():
    r = tilec.compile(GEMM, target="sm90", schedule={"gemms": {"*": {"instruction": "mma"}},
                                                     "loops": {"k": {"stages": 2, "mechanism": "cp.async"}}})
    k = r.module.kernels[0]
    (g,) = k.schedule.gemms.values()
    (plan,) = k.schedule.loops.values()
    assert (g.instruction, plan.stages, plan.mechanism) == ("mma", 2, "cp.async")
    kernel_code = r.source[r.source.index("__global__"):]
    assert "tl::mma_f16" in kernel_code and "wgmma" not in kernel_code
    assert "pipeline over k: 2 stages, cp.async" in r.source


def test_pinning_warps_and_switching_off_warp_specialization():
    r = tilec.compile(GEMM, target="sm80", schedule={"gemms": {"*": {"warps": [4, 1]}}})
    (g,) = r.module.kernels[0].schedule.gemms.values()
    assert g.warps == (4, 1)
    r = tilec.compile(GEMM, target="sm90", schedule=ScheduleRequest(loops={"k": _loop(warp_specialized=False)}),
                      defines={"block_N": 128, "block_K": 32, "threads": 128})  # one consumer warpgroup
    (plan,) = r.module.kernels[0].schedule.loops.values()
    assert plan.mechanism == "tma" and not plan.warp_specialized and r.simt.kernels[0].threads == 128


def _loop(**kw):
    from tilec.ir.schedule import LoopRequest

    return LoopRequest(**kw)


@pytest.mark.parametrize("request_, message", [
    ({"gemms": {"*": {"instruction": "wgmma"}}}, "asks for 'wgmma' for this gemm"),
    ({"gemms": {"*": {"warps": [3, 1]}}}, "3x1 warp partition"),
    ({"loops": {"k": {"mechanism": "tma"}}}, "copy mechanism 'tma'"),
])
def test_a_pin_the_kernel_cannot_honour_is_an_error_at_its_line(request_, message):
    with pytest.raises(CompileError) as e:
        tilec.compile(GEMM, target="sm80", schedule=request_)
    (d,) = [d for d in e.value.diagnostics if d.severity == "error"]
    assert message in d.message and d.span is not None


def test_a_malformed_schedule_is_a_diagnostic():
    for bad, needle in [({"gemm": {}}, "unknown schedule part"), ({"loops": {"k": {"stages": 0}}}, "positive"),
                        ({"gemms": {1: {"instruction": "tensorcore"}}}, "unknown instruction"),
                        ({"loops": {"k": {"depth": 2}}}, "loop k")]:
        with pytest.raises(CompileError, match=needle):
            tilec.compile(GEMM, target="sm80", schedule=bad)


def test_gfx942_pinned_to_a_plain_loop_has_no_register_staging():
    r = tilec.compile(GEMM, target="gfx942", schedule={"loops": {"k": {"mechanism": "sync"}}})
    (plan,) = r.module.kernels[0].schedule.loops.values()
    assert (plan.stages, plan.mechanism) == (1, "sync")
    assert "staged in registers" not in r.source
    r = tilec.compile(GEMM, target="gfx942")
    assert "next tiles staged in registers" in r.source


@pytest.mark.parametrize("target, defines", [("sm80", {}), ("sm90", {}), ("gfx942", {}),
                                             ("sm90", {"block_N": 256, "block_K": 64, "threads": 256,
                                                       "num_stages": 4})])
def test_resources_before_lowering_match_what_lowering_allocates(target, defines):
    planned = tilec.compile(GEMM, target=target, defines=defines, plan_only=True).module.kernels[0]
    res = resources(planned)
    sk = tilec.compile(GEMM, target=target, defines=defines).simt.kernels[0]
    assert res.shared_bytes == sk.shared_bytes, (str(res), sk.shared_bytes)
    assert res.threads == sk.threads
    assert res.registers > 0 and "registers/thread" in str(res)


def test_resources_needs_a_schedule():
    k = tilec.compile(GEMM).module.kernels[0]
    with pytest.raises(ValueError, match="no schedule"):
        resources(k)


def test_a_shared_buffer_whose_uses_a_const_if_drops_takes_no_memory(tmp_path):
    """specialize removes shared allocations no statement uses once const `if`s are resolved (flash_attention's
    row_s exists only where row_stats_in_shared is set), so they take no shared memory elsewhere."""
    src = tmp_path / "k.tile"
    src.write_text('''const staged = False

kernel k(A: f32[N], B: out f32[N]):
    with Kernel(ceildiv(N, 128), threads=128) as bx:
        t = alloc_fragment((128,), f32)
        s = alloc_shared((128,), f32)
        copy(A[bx * 128], t)
        if staged:
            copy(t, s)
            copy(s, t)
        copy(t, B[bx * 128])
''')
    plain = tilec.compile(src, "sm80")
    assert [b.name for b in plain.simt.kernels[0].shared] == [] and plain.simt.kernels[0].shared_bytes == 0
    staged = tilec.compile(src, "sm80", defines={"staged": True})
    assert [b.name for b in staged.simt.kernels[0].shared] == ["s"]
