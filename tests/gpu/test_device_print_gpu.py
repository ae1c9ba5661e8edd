"""Device print and the timeline profiler on the GPU (`pytest -m gpu tests/gpu`): bench/devprint_gpu.py's checks.

The kernels are built where the compiler is (`python bench/devprint_gpu.py build .artifacts/devprint`, which
also writes the interpreter's print of the same inputs) and carried to the GPU machine (numpy + tilec.runtime).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TILEC_DEVPRINT_ARTIFACTS", ROOT / ".artifacts" / "devprint"))

pytestmark = pytest.mark.gpu


def _bench():
    if not (ARTIFACTS / "printing.cubin").is_file():
        pytest.skip(f"no prebuilt kernels in {ARTIFACTS}; run `python bench/devprint_gpu.py build {ARTIFACTS}`")
    try:
        from tilec.runtime.cuda_driver import Driver

        Driver.get()
    except Exception as e:  # noqa: BLE001  (no driver, no device: this machine has no GPU)
        pytest.skip(f"no CUDA GPU ({e})")
    sys.path.insert(0, str(ROOT / "bench"))
    import devprint_gpu

    return devprint_gpu


def test_device_print_of_a_shared_tile_matches_the_interpreter(tmp_path, monkeypatch):
    bench = _bench()
    monkeypatch.setenv("OUT", str(tmp_path))
    result = bench.check_print(ARTIFACTS)
    assert result["child_rc"] == 0, result["stderr_tail"]
    assert result["shared_tile_lines"] > 0 and result["lines_printed"] == result["lines_expected"]
    assert result["shared_tile_and_scalar_identical"] and result["all_within_f32_rounding"], result["problems"]


def test_profile_records_a_trace(tmp_path):
    _bench()
    from tilec.runtime.loader import load
    from tilec.runtime.profile import record
    from tilec.runtime.profile_worker import random_args

    prof = next((ARTIFACTS / "gemm.full").glob("*.prof.cubin"))
    kernel = load(str(prof)).gemm
    sizes = {"M": 300, "N": 520, "K": 200}
    tl = record(kernel, *random_args(kernel, sizes), max_blocks=None)
    assert tl.blocks_recorded == 3 * 3 and tl.clock_source == "measured" and 0.5 < tl.clock_ghz < 3.0
    shares = tl.shares()
    assert {"gemm_issue", "mbar_wait"} <= {p for s in shares.values() for p, v in s.items() if v > 0}
    trace = tl.chrome_trace()
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    assert any(e["ph"] == "X" and e["name"] == "gemm_issue" for e in json.loads(path.read_text())["traceEvents"])
