"""The CI check of scripts/resource_baseline.py: registers, spills, shared memory and main-loop instruction mix of
the samples on sm80, sm90 and gfx942 stay within tolerance of tests/baselines/resources.json (no GPU needed)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("resource_baseline", ROOT / "scripts" / "resource_baseline.py")
rb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rb)


def _case(registers=100, spills=0, mma=8, loads=20, toolchain="nvcc 13.0.88"):
    loop = {"mma": mma, "shared_load": loads, "instructions": 300}
    return {"toolchain": toolchain, "kernels": {"gemm": {"registers": registers, "spill_stores": spills,
                                                         "shared_bytes": 49152, "loop": loop}}}


def test_compare_flags_changes_beyond_tolerance_only():
    base = {"gemm@sm80": _case()}
    assert rb.compare(base, {"gemm@sm80": _case(registers=104, loads=21)}) == ([], [])
    changes, _ = rb.compare(base, {"gemm@sm80": _case(registers=120, spills=64, mma=0)})
    assert changes == ["gemm@sm80 gemm: main loop mma 8 -> 0 (-8; tolerance 0)",
                       "gemm@sm80 gemm: registers 100 -> 120 (+20; tolerance 8)",
                       "gemm@sm80 gemm: spill_stores 0 -> 64 (+64; tolerance 0)"]
    changes, skipped = rb.compare(base, {"gemm@sm80": _case(registers=200, toolchain="nvcc 13.1.0"),
                                         "softmax@sm80": _case()})
    assert skipped == ["gemm@sm80: built with nvcc 13.1.0, the baseline with nvcc 13.0.88"]
    assert changes == ["softmax@sm80: not in the baseline (run scripts/resource_baseline.py --update)"]


def _tools_missing() -> list[str]:
    from tilec.inspect import isa

    need = {"nvcc": shutil.which("nvcc"), "cuobjdump": isa.cuobjdump(), "clang-19": shutil.which("clang-19"),
            "llvm-objdump": isa.llvm_objdump(), "llvm-readelf": shutil.which("llvm-readelf-19")
            or shutil.which("llvm-readelf")}
    return [name for name, path in need.items() if not path]


def test_samples_match_the_baseline():
    missing = _tools_missing()
    if missing:
        if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"{', '.join(missing)} required (TILEC_REQUIRE_TOOLCHAINS=1)")
        pytest.skip(f"{', '.join(missing)} not found")
    baseline = json.loads(rb.BASELINE.read_text())
    assert set(baseline) == {f"{s}@{t}" for s, t in rb.CASES}
    changes, skipped = rb.compare(baseline, rb.measure_all())
    assert not changes, ("resources changed beyond tolerance (if intended: python scripts/resource_baseline.py "
                         "--update, and commit tests/baselines/resources.json):\n  " + "\n  ".join(changes))
    if len(skipped) == len(baseline):
        pytest.skip("no case comparable with this toolchain: " + "; ".join(skipped))
