"""Persistent ping-pong on sm90 (Kernel(..., pingpong=True), docs/hopper.md#persistent-ping-pong): what the planner
grants and refuses, the protocol in the generated code (turns, per-warpgroup barriers and staging, setmaxnreg), the
kernels run in the SIMT model against the Tile IR interpreter (regular and ragged shapes, odd tile counts per block,
blocks whose second warpgroup has no tile), protocol bugs planted in the lowered code that the model catches, and the
SASS nvcc makes of it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from test_cuda_backend import _require, _sass
from test_hopper import _functions
from test_simt_interp import check

import tilec
from tilec.cli.main import main as tilec_main
from tilec.diagnostics import CompileError
from tilec.ir import simt as S
from tilec.ir import tile as T
from tilec.ir.schedule import resources
from tilec.simt.interp import SimtInterpreterError

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.tile"
# one consumer warpgroup's tile (64x256, 4 stages); ping-pong runs two of them
PINGPONG = {"block_M": 64, "block_N": 256, "block_K": 64, "threads": 128, "num_stages": 4, "persistent": True,
            "pingpong": True}


def _gemm_sizes(defines: dict, sizes: dict) -> dict:
    return dict(sizes)


def _main(source: str) -> str:
    return source[:source.index("__no_tma(")]


# ---------------------------------------------------------------- planning


def test_pingpong_is_a_schedule_field_printed_and_priced():
    r = tilec.compile(GEMM, target="sm90", defines=PINGPONG, dump_after={"pipeline-planning"})
    k = r.module.kernels[0]
    assert k.schedule.persistent and k.schedule.pingpong
    assert "persistent: yes, ping-pong: 2 consumer warpgroups take alternate tiles" in r.ir_after["pipeline-planning"]
    assert resources(k).threads == 2 * 128 + 128
    assert r.simt.kernels[0].threads == 384
    plain = tilec.compile(GEMM, target="sm90", defines={**PINGPONG, "pingpong": False}).module.kernels[0]
    assert not plain.schedule.pingpong and resources(plain).threads == 128 + 128
    # pinned from Python (the tuner's handle)
    pinned = tilec.compile(GEMM, target="sm90", defines={**PINGPONG, "pingpong": False}, schedule={"pingpong": True})
    assert pinned.module.kernels[0].schedule.pingpong


def _unconstrained(**defines) -> str:
    """gemm.tile without its pingpong const's where= (to reach the planner's own refusals)."""
    text = GEMM.read_text()
    assert ", where=not pingpong or (persistent and threads == 128)" in text
    return text.replace(", where=not pingpong or (persistent and threads == 128)", "")


@pytest.mark.parametrize("defines,target,why", [
    ({**PINGPONG, "persistent": False}, "sm90", "it applies to a persistent kernel"),
    ({**PINGPONG, "block_M": 128, "threads": 256}, "sm90", "one consumer warpgroup (threads=128), not threads=256"),
    (PINGPONG, "sm80", "it applies to a persistent kernel"),
])
def test_pingpong_that_cannot_be_granted_is_a_warning(defines, target, why):
    r = tilec.compile("gemm.tile", text=_unconstrained(), target=target, defines=defines)
    assert not r.module.kernels[0].schedule.pingpong
    warnings = [d.message for d in r.diagnostics if d.severity == "warning" and "pingpong" in d.message]
    assert len(warnings) == 1 and why in warnings[0], warnings


def test_pinned_pingpong_that_cannot_be_granted_is_an_error():
    with pytest.raises(CompileError, match="cannot be: it needs a kernel written for one consumer warpgroup"):
        tilec.compile(GEMM, target="sm90", defines={**PINGPONG, "threads": 256, "block_M": 128, "pingpong": False},
                      schedule={"pingpong": True})


def test_a_schedule_request_names_pingpong_as_a_bool():
    from tilec.ir.schedule import ScheduleRequest

    assert ScheduleRequest.parse({"pingpong": True}).pingpong is True
    with pytest.raises(ValueError, match="pingpong must be true or false"):
        ScheduleRequest.parse({"pingpong": "yes"})


def test_the_interpreter_gives_the_same_result_with_and_without_pingpong():
    """pingpong is a schedule: the semantics (the Tile IR interpreter, `tilec run --target cpu`) ignore it."""
    import numpy as np

    from tilec.interp import random_inputs, run_kernel

    sizes = _gemm_sizes(PINGPONG, {"M": 200, "N": 264, "K": 136})
    outs = []
    for on in (True, False):
        k = tilec.compile(GEMM, defines={**PINGPONG, "pingpong": on}).module.kernels[0]
        args = random_inputs(k, sizes, 3)
        run_kernel(k, args)
        outs.append(args["C"])
    assert np.array_equal(outs[0], outs[1], equal_nan=True) and not np.isnan(outs[0]).any()


def test_tune_axis_keeps_to_its_where():
    with pytest.raises(CompileError, match="where="):
        tilec.compile(GEMM, target="sm90", defines={"pingpong": True})  # the sm90 default tile has threads=256


# ---------------------------------------------------------------- the protocol in the generated code


def test_warpgroups_take_turns_and_keep_their_own_barriers_and_staging():
    main = _main(tilec.compile(GEMM, target="sm90", defines=PINGPONG).source)
    body = main[main.index("__launch_bounds__(384, 1)"):]
    wg = "tl_warpgroup"
    assert "tl::setmaxnreg_dec<40>();" in body and "tl::setmaxnreg_inc<232>();" in body
    # the warpgroups' tiles: every other one of the block's sequence, from the warpgroup's index
    assert f"tl::ceildiv(tl_block_tiles - {wg}, 2)" in body
    assert "int tl_seq = tl_warpgroup + tl_seq_t * 2;" in body
    turn = body.index(f"tl::named_barrier(8 + {wg}, 256);")
    loop = body.index("for (int k = 0; k < k_count; ++k)")
    handoff = body.index(f"tl::named_barrier_arrive(8 + (1 - {wg}), 256);")
    wait_all = body.index("tl::wgmma_wait<0>();")
    assert turn < loop < handoff < wait_all  # the turn is handed on once the tile's wgmma are issued
    assert "if (tl_seq > 0) {\n        tl::named_barrier(8 + " in body  # the block's first tile waits for nobody
    assert "if (tl_seq + 1 < tl_block_tiles) {\n        tl::named_barrier_arrive(" in body  # its last has no taker
    # a tile's k-step j is pipeline iteration seq * trips + j, in both warpgroups and the producer
    assert "int k_stage = (tl_seq * k_count + k) % 4;" in body
    # each warpgroup's own block barrier and half of the staging tile
    assert f"tl::named_barrier(6 + {wg}, 128);" in body and "tl::named_barrier(1, " not in body
    assert f"&tl_store_tile[{wg} * 16384 + 4096]" in body
    assert "int(threadIdx.x) % 128 == 0" in body  # each warpgroup's thread 0 issues its TMA stores
    assert body.count("tl::named_barrier(") == 3


def test_default_build_has_no_pingpong():
    main = _main(tilec.compile(GEMM, target="sm90").source)
    assert "tl_seq" not in main and "named_barrier(6" not in main and "named_barrier(8" not in main


# ---------------------------------------------------------------- executed in the SIMT model

RUN_CASES = [
    # 15 tiles on 3 modelled multiprocessors: 5 a block (odd: warpgroup 0 takes 3, warpgroup 1 two), ragged M and N,
    # 6 k-steps on 4 stages (the phases wrap within a tile and across the warpgroups' tiles)
    ({**PINGPONG, "block_N": 128}, {"M": 300, "N": 264, "K": 328}),
    # 64x256, bf16, B stored [N, K]: 8 tiles on 3 blocks (3, 3, 2)
    ({**PINGPONG, "dtype": "bf16", "trans_B": True}, {"M": 200, "N": 264, "K": 136}),
    # 128x128 (two m64 slices a warpgroup), a regular shape: 4 tiles on 3 blocks, two of whose second warpgroup has
    # no tile at all
    ({**PINGPONG, "block_M": 128, "block_N": 128, "dtype": "bf16"}, {"M": 256, "N": 256, "K": 192}),
]


@pytest.mark.parametrize("defines,sizes", RUN_CASES, ids=["ragged-odd", "bf16-trans_B", "128x128-regular"])
def test_pingpong_gemm_runs_in_the_simt_model(defines, sizes):
    r = tilec.compile(GEMM, target="sm90", defines=defines)
    assert r.module.kernels[0].schedule.pingpong
    check("gemm", defines, _gemm_sizes(defines, sizes), "sm90", result=r)


def test_pingpong_fp8_gemm_runs_in_the_simt_model():
    defines = {"block_M": 128, "block_N": 128, "block_K": 128, "threads": 128, "num_stages": 3, "pingpong": True}
    r = tilec.compile(ROOT / "samples" / "fp8_gemm.tile", target="sm90", defines=defines)
    assert r.module.kernels[0].schedule.pingpong and r.simt.kernels[0].threads == 384
    check("fp8_gemm", defines, {"M": 300, "N": 264, "K": 160}, "sm90", result=r)  # 9 tiles, 3 a block


def _walk(body):
    for st in body:
        yield st
        for f in ("body", "then_body", "else_body"):
            yield from _walk(getattr(st, f, []))


def _calls(body, name):
    return [st for st in _walk(body) if isinstance(st, S.SCall) and st.name == name]


def _no_handoff(body):
    """The turn is never handed on: the other warpgroup waits forever."""
    for st in _walk(body):
        if isinstance(st, S.SIf) and _calls(st.then_body, "named_barrier_arrive"):
            st.then_body = []


def _unguarded_handoff(body):
    """The turn is handed on after the block's last tile too: an arrival nobody waits for."""
    for st in _walk(body):
        for f in ("body", "then_body", "else_body"):
            items = getattr(st, f, [])
            for i, x in enumerate(items):
                if isinstance(x, S.SIf) and _calls(x.then_body, "named_barrier_arrive"):
                    items[i] = x.then_body[0]


def _early_release(body):
    """Each stage is released as soon as its wgmma is issued, not once it has completed (one iteration later)."""
    loop = next(st for st in _walk(body) if isinstance(st, S.SFor) and st.var.name == "k")
    stage = next(x.var for x in loop.body if isinstance(x, S.Declare) and x.var.name == "k_stage")
    for i, x in enumerate(loop.body):
        if isinstance(x, S.SIf) and _calls(x.then_body, "mbar_arrive_warp"):
            arrive = _calls(x.then_body, "mbar_arrive_warp")[0]
            addr = arrive.args[0]
            first_empty = addr.index.a  # empty[0] + the stage released
            arrive.args = [S.AddrOf(addr.dtype, None, addr.buffer, T.Binary(first_empty.dtype, None, "+", first_empty,
                                                                             stage))]
            loop.body[i] = arrive


@pytest.mark.parametrize("plant,message", [
    (_no_handoff, "named barrier 8 never completes"),
    (_unguarded_handoff, "arrival\\(s\\) nobody completed when the block exits"),
    (_early_release, "written by a TMA load nobody waited for"),
])
def test_simt_model_catches_planted_protocol_bugs(plant, message):
    defines, sizes = RUN_CASES[0]
    r = tilec.compile(GEMM, target="sm90", defines=defines)
    check("gemm", defines, _gemm_sizes(defines, sizes), "sm90", result=r)  # as lowered: right
    r = tilec.compile(GEMM, target="sm90", defines=defines)
    plant(r.simt.kernels[0].body)
    with pytest.raises(SimtInterpreterError, match=message):
        check("gemm", defines, _gemm_sizes(defines, sizes), "sm90", result=r)


# ---------------------------------------------------------------- SASS (nvcc)


def _loops(sass: str) -> list[list[str]]:
    """The instructions of each loop of one function's SASS (a backward branch and what it jumps over)."""
    ins = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    at = {a: i for i, (a, _) in enumerate(ins)}
    loops = []
    for i, (a, text) in enumerate(ins):
        m = re.search(r"BRA (0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in at:
            loops.append([t for _, t in ins[at[int(m.group(1), 16)]:i + 1]])
    return loops


@pytest.mark.parametrize("sample,flags,mma", [
    ("gemm", [f"-D{k}={v}" for k, v in PINGPONG.items()], "HGMMA"),
    ("fp8_gemm", ["-Dblock_M=128", "-Dblock_N=128", "-Dblock_K=128", "-Dthreads=128", "-Dnum_stages=3",
                  "-Dpingpong=True"], "QGMMA"),
])
def test_pingpong_sass(tmp_path, sample, flags, mma):
    _require(shutil.which("nvcc"), "nvcc")
    path = tmp_path / f"{sample}.cubin"
    assert tilec_main([str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "-o", str(path), *flags]) == 0
    main = _functions(_sass(path))[sample]
    for instr in (mma, "UTMALDG", "UTMASTG", "SYNCS", "BAR.ARV", "BAR.SYNC", "USETMAXREG"):
        assert instr in main, f"no {instr} in the ping-pong kernel's SASS"
    k_loop = min((lp for lp in _loops(main) if any(mma in t for t in lp)), key=len)
    assert not any("LDL" in t or "STL" in t for t in k_loop), "local-memory traffic in the main loop"
