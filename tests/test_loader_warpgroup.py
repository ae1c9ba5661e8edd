"""sm90's loader warpgroup (--loader-warpgroup): where TMA cannot load a gemm pipeline's tiles (the no-TMA twin that
misaligned rows run), the producer warpgroup's threads copy them, each tile by its own two warps -- 16 bytes a thread,
rows that are not 16-byte aligned realigned out of the aligned chunks that cover them -- fence their stores into the
async proxy and arrive on the tile's mbarrier, one arrival a warp; first they prefetch the next iteration's tiles into
L2. The consumers run the TMA pipeline's loop unchanged.

The SIMT model runs the twins against the Tile IR interpreter at ragged, misaligned shapes (f16 NN, bf16 trans_B on
two consumer warpgroups, fp8's 1-byte rows), and at aligned ones (the plain 16-byte copies); it holds a consumer at
its tile's barrier until the warps that copy it have arrived, reports a wgmma that reads stores no fence and arrival
published, and a prefetch outside its tensor: planted bugs of each kind fail here.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import tilec
from tilec.simt.interp import SimtInterpreterError
from tilec.testing.differential import simt_against_interpreter

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SMALL = {"block_M": 64, "block_N": 64, "block_K": 32, "threads": 128, "num_stages": 3}


@functools.cache
def _compiled(sample: str, defines: tuple, target: str | None, loader: bool = True):
    return tilec.compile(str(SAMPLES / f"{sample}.tile"), target=target, defines=dict(defines), verify=True,
                         loader_warpgroup=loader)


def _twin(sample: str, defines: dict, loader: bool = True):
    lowered = _compiled(sample, tuple(sorted(defines.items())), "sm90", loader)
    return next(k for k in lowered.simt.kernels if k.name.endswith("__no_tma")), lowered


def _run(sample: str, defines: dict, sizes: dict[str, int], seed: int = 0) -> dict:
    """The twin in the SIMT model against the Tile IR interpreter; how many lane-instructions realigned."""
    tk = _compiled(sample, tuple(sorted(defines.items())), None).module.kernels[0]
    sk, _ = _twin(sample, defines)
    wrong, counts = simt_against_interpreter(tk, sk, sizes, seed)
    assert not wrong, f"{sk.name} at {sizes}: " + "; ".join(wrong)
    return {op: counts[op] for op in ("copy_shifted", "copy16_realign")}


def _model_reports(match: str, sizes: dict[str, int]) -> None:
    """A bug the caller planted (monkeypatched into the lowering) is reported by the SIMT model at these sizes."""
    _compiled.cache_clear()
    try:
        with pytest.raises(SimtInterpreterError, match=match):
            _run("gemm", SMALL, sizes)
    finally:
        _compiled.cache_clear()


def _source_of(kernel: str, source: str) -> str:
    start = source.index(f"{kernel}(")
    end = source.find("__global__", start)
    return source[start:end if end > 0 else len(source)]


@pytest.mark.parametrize("sample,defines,sizes", [
    # NN f16: odd K (A's rows) and odd N (B's rows), every row at another offset in its 16-byte chunk
    ("gemm", SMALL, {"M": 70, "N": 101, "K": 77}),
    # trans_B bf16 on two consumer warpgroups (setmaxnreg shares the registers): odd K misaligns both operands
    ("gemm", {**SMALL, "dtype": "bf16", "trans_B": True, "block_M": 128, "threads": 256},
     {"M": 130, "N": 70, "K": 99}),
    # fp8: 1-byte elements, any of 16 offsets
    ("fp8_gemm", {"block_M": 64, "block_N": 64, "block_K": 64, "threads": 128, "num_stages": 2},
     {"M": 70, "N": 72, "K": 141}),
    # eleven k-steps round three stages: the barriers' phases wrap three times
    ("gemm", SMALL, {"M": 64, "N": 72, "K": 333}),
], ids=["nn_f16", "trans_b_bf16_two_warpgroups", "fp8_odd_k", "many_rounds"])
def test_the_loader_realigns_misaligned_rows(sample, defines, sizes):
    counts = _run(sample, defines, sizes)
    assert counts["copy_shifted"] > 0 and counts["copy16_realign"] > 0, counts


def test_aligned_rows_take_plain_16_byte_copies():
    counts = _run("gemm", SMALL, {"M": 64, "N": 128, "K": 96})
    assert counts == {"copy_shifted": 0, "copy16_realign": 0}


def test_the_twin_is_warp_specialized_with_a_loader():
    """The twin's producer warpgroup loads (its threads, no tensor maps): two warps copy A and two B, so that both
    tiles' loads are in flight together; each pair fences its stores into the async proxy and arrives on its tile's
    full barrier (two arrivals a phase). The block has the consumers' threads and the producer's 128."""
    sk, lowered = _twin("gemm", SMALL)
    twin = _source_of(sk.name, lowered.source)
    assert "threads 128.. load the tiles" in twin
    assert "tl::tma_load" not in twin and "TensorMap" not in twin and "cp_async" not in twin
    assert twin.count("tl::mbar_init(&tl_mbar[0], 2);") == 1
    producer = twin[twin.index("load the tiles"):twin.index("} else {\n    int by_swizzled")]
    a_warps = producer.index("if (int(threadIdx.x) % 128 < 64) {")
    b_warps = producer.index("if (int(threadIdx.x) % 128 >= 64 && int(threadIdx.x) % 128 < 128) {")
    parts = ((a_warps, b_warps, "A_s", "k_slot"), (b_warps, len(producer), "B_s", "3 + k_slot"))
    for start, end, operand, full in parts:
        part = producer[start:end]
        fence = part.index("tl::fence_proxy_async();")
        arrival = part.index(f"tl::mbar_arrive_warp(&tl_mbar[{full}]);")
        assert part.rindex(f"tl::copy16_realign(&{operand}") < fence < arrival
    assert sk.threads == 256 and not sk.attrs.get("tensor_maps")


@pytest.mark.parametrize("realign_stores", [False, True], ids=["element-stores", "realign-stores"])
def test_the_twin_stores_its_output_through_a_staging_tile(realign_stores):
    """After the loader's pipeline its tiles are dead, so the accumulator leaves as the direct-stores twin's does
    (stmatrix into a staging tile, then row by row, or with --realign-stores 16 aligned bytes at a time), not in
    scattered 2-byte stores from the registers: checked at an odd N, every output row at another offset."""
    lowered = tilec.compile(str(SAMPLES / "gemm.tile"), target="sm90", defines=SMALL, verify=True,
                            loader_warpgroup=True, realign_stores=realign_stores)
    sk = next(k for k in lowered.simt.kernels if k.name.endswith("__no_tma"))
    twin = _source_of(sk.name, lowered.source)
    assert "store C_local through shared memory and the threads' stores" in twin and "tl::stmatrix_x4" in twin
    assert ("tl::store_realign<8>" in twin) == realign_stores
    tk = _compiled("gemm", tuple(sorted(SMALL.items())), None).module.kernels[0]
    wrong, _ = simt_against_interpreter(tk, sk, {"M": 70, "N": 101, "K": 77}, seed=1)
    assert not wrong, "; ".join(wrong)


def test_a_loader_keeps_its_registers():
    """With two consumer warpgroups the TMA kernel gives its producer's registers to the consumers (setmaxnreg 40 /
    232); a loader's threads need as many as the consumers, and ptxas refuses a setmaxnreg.dec above the kernel's own
    count (at most 168 for 384 threads), so its twin keeps the launch's even share."""
    defines = {**SMALL, "block_M": 128, "threads": 256}
    sk, lowered = _twin("gemm", defines)
    assert "setmaxnreg" not in _source_of(sk.name, lowered.source)
    assert "tl::setmaxnreg_dec<40>();" in _source_of("gemm", lowered.source)


def test_off_by_default():
    """Without --loader-warpgroup the twin keeps its cp.async pipeline in the consumers' threads."""
    sk, lowered = _twin("gemm", SMALL, loader=False)
    twin = _source_of(sk.name, lowered.source)
    assert "load the tiles" not in twin and "tl::cp_async" in twin


def test_the_kernel_itself_keeps_tma():
    _, lowered = _twin("gemm", SMALL)
    kernel = _source_of("gemm", lowered.source)
    assert "threads 128.. issue TMA" in kernel and "tl::tma_load_2d" in kernel


def test_a_missing_arrival_deadlocks_in_the_model(monkeypatch):
    """The model holds the consumers until every producer warp has arrived: a full barrier that expects one arrival
    more than the warps that copy its tile make never completes, and the consumers' wait is reported."""
    from tilec.targets.cuda import hopper_lowering

    monkeypatch.setattr(hopper_lowering, "PRODUCER_WARPS", 5)
    _model_reports("never completes", {"M": 64, "N": 64, "K": 96})


def test_a_missing_proxy_fence_is_caught(monkeypatch):
    """Without fence.proxy.async the loader's stores are not published by its arrival, and the wgmma that reads them
    is reported (on the H200 it could read stale bytes)."""
    from tilec.ir import simt as S
    from tilec.targets.cuda.hopper_lowering import HopperLowering

    original = HopperLowering.load_by_threads

    def unfenced(self, *args):
        emit = self.cx.emit
        self.cx.emit = lambda st: None if isinstance(st, S.SCall) and st.op == "fence_proxy_async" else emit(st)
        try:
            original(self, *args)
        finally:
            self.cx.emit = emit

    monkeypatch.setattr(HopperLowering, "load_by_threads", unfenced)
    _model_reports("wgmma reads shared", {"M": 64, "N": 64, "K": 96})


def test_the_next_stage_is_prefetched_into_l2():
    """Before waiting for a stage to be free, each tile's warps prefetch the next iteration's tile into L2 (its
    synchronous loads then find it there); not past the last iteration."""
    sk, lowered = _twin("gemm", SMALL)
    producer = _source_of(sk.name, lowered.source)
    producer = producer[producer.index("load the tiles"):producer.index("} else {\n    int by_swizzled")]
    prefetch = producer.index("tl::prefetch_l2(&A[")
    assert producer.index("k_load + 1 < k_count_2") < prefetch < producer.index("tl::prefetch_l2(&B[")
    assert prefetch < producer.index("tl::mbar_wait(") < producer.index("tl::copy_shifted(&A[")


def test_an_unguarded_prefetch_is_caught(monkeypatch):
    """The model checks that every prefetched address lies inside its tensor: without the bounds guard, a ragged
    tile's rows past M are reported."""
    from tilec.targets.cuda.hopper_lowering import HopperLowering

    original = HopperLowering.prefetch_tile

    def unguarded(self, p, copy_cx):
        self.cx.bounds = lambda region, idx: None
        try:
            original(self, p, copy_cx)
        finally:
            del self.cx.bounds

    monkeypatch.setattr(HopperLowering, "prefetch_tile", unguarded)
    _model_reports("out-of-bounds prefetch", {"M": 70, "N": 101, "K": 77})


def test_a_persistent_kernel_keeps_the_cp_async_twin():
    """The loader is for a twin whose loop pipeline-planning can warp-specialize as a gemm pipeline on an ordinary
    grid; a persistent kernel's twin is re-planned with cp.async (its consumers load their stages as before)."""
    sk, lowered = _twin("gemm", {**SMALL, "persistent": True})
    twin = _source_of(sk.name, lowered.source)
    assert "load the tiles" not in twin and "tl::cp_async" in twin
    assert sk.threads == 128


def test_the_manifest_launches_the_twin_with_its_producer_warpgroup():
    """The runtime and the C launcher take a fallback's block from its own manifest entry: the loader twin's is the
    consumers' threads and the producer's 128, its shared memory the TMA kernel's stages and barriers."""
    from tilec.artifacts import kernel_entries

    _, lowered = _twin("gemm", SMALL)
    entries = {e["name"]: e for e in kernel_entries(lowered)}
    assert entries["gemm"]["fallback"] == "gemm__no_tma"
    assert entries["gemm__no_tma"]["threads"] == 256 == entries["gemm"]["threads"]
    assert entries["gemm__no_tma"]["shared_bytes"] == entries["gemm"]["shared_bytes"]
