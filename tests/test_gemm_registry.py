"""The gemm implementation registry (tilec/ops/gemm_impl.py): the back ends register their instruction families,
each target gets the right one by predicate, and a registration with a wrong predicate is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
from tilec.ops import gemm_impl
from tilec.targets.registry import TARGETS

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

# target -> the implementations it offers, best first (the registry's answer) and what the gemm sample runs on
EXPECTED = {
    "sm80": (["mma", "fma"], "mma"),
    "sm86": (["mma", "fma"], "mma"),
    "sm90": (["wgmma", "mma", "fma"], "wgmma"),
    "sm100": (["mma", "fma"], "mma"),  # (tcgen05 has no implementation yet)
    "gfx90a": (["mfma", "fma"], "mfma"),
    "gfx942": (["mfma", "fma"], "mfma"),
    "webgpu": (["fma"], "fma"),
}


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_each_target_gets_its_back_ends_implementations(target):
    offered, runs = EXPECTED[target]
    assert [i.name for i in gemm_impl.offered(TARGETS[target])] == offered
    r = tilec.compile(SAMPLES / "gemm.tile", target, plan_only=True)
    assert {g.instruction for k in r.module.kernels for g in k.schedule.gemms.values()} == {runs}


def test_disabled_implementations_are_not_offered():
    assert [i.name for i in gemm_impl.offered(TARGETS["sm90"], disabled=("wgmma",))] == ["mma", "fma"]
    r = tilec.compile(SAMPLES / "gemm.tile", "sm90", plan_only=True, disable=["wgmma", "tma"])
    assert {g.instruction for k in r.module.kernels for g in k.schedule.gemms.values()} == {"mma"}


def test_the_registrations_hold_to_their_back_ends():
    assert gemm_impl.check_registry(TARGETS.values()) == []
    # every registered implementation belongs to a back end that has a target, and the fallback is generic
    assert gemm_impl.fallback().name == "fma" and gemm_impl.fallback().backend is None
    for t in TARGETS.values():
        assert gemm_impl.offered(t)[-1] is gemm_impl.fallback(), t.name


@pytest.fixture
def planted():
    """Registers what a test plants, and puts the real registrations back afterwards."""
    saved = dict(gemm_impl._REGISTRY)
    yield gemm_impl.register_gemm_impl
    gemm_impl._REGISTRY.clear()
    gemm_impl._REGISTRY.update(saved)


def test_a_predicate_that_takes_another_back_ends_target_is_caught(planted):
    from tilec.targets.cuda.gemm_mma import MmaGemm

    planted(MmaGemm(), lambda target: True, rank=20)  # mma.sync on every target: wrong for AMD and WebGPU
    problems = gemm_impl.check_registry(TARGETS.values())
    assert any(p.startswith("mma ") and "gfx942, a hip target" in p for p in problems), problems
    assert any("webgpu, a wgsl target" in p for p in problems), problems
    assert not any("sm80" in p for p in problems), problems  # (where it belongs, nothing is said)


def test_a_predicate_that_takes_a_target_without_the_instruction_is_caught(planted):
    from tilec.targets.cuda.gemm_wgmma import WgmmaGemm

    planted(WgmmaGemm(), lambda target: target.backend == "cuda", rank=10)  # wgmma on sm80 too
    problems = gemm_impl.check_registry(TARGETS.values())
    assert any("wgmma" in p and "sm80" in p and "does not offer" in p for p in problems), problems
    assert not any("sm90" in p for p in problems), problems


def test_a_wrong_predicate_is_also_caught_by_the_simt_verifier(planted):
    """Where the registry check is not run, a compile with verify=True refuses what such an implementation
    emits on a target that does not offer it."""
    from tilec.diagnostics import CompileError
    from tilec.targets.cuda.gemm_mma import MmaGemm

    planted(MmaGemm(), lambda target: target.warp_size == 32, rank=5)  # mma.sync before everything, WebGPU too
    with pytest.raises((AssertionError, CompileError)):
        tilec.compile(SAMPLES / "gemm.tile", "webgpu", verify=True,
                      defines={"block_M": 64, "block_N": 64, "threads": 128})


def test_a_name_registered_twice_by_different_implementations_is_refused(planted):
    from tilec.ops.gemm_fma import FmaGemm
    from tilec.targets.cuda.gemm_mma import MmaGemm

    class Other(FmaGemm):
        name = MmaGemm.name

    with pytest.raises(ValueError, match="registered twice"):
        planted(Other(), lambda target: True, rank=1)
