"""The GPU suite as pytest (`pytest -m gpu tests/gpu`), on a machine with an NVIDIA GPU.

The artifacts are built where the compiler is (`python bench/gpu_suite.py build .artifacts/suite`)
and carried to the GPU machine, which needs only numpy, ml_dtypes and the CUDA driver.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TILEC_GPU_ARTIFACTS", ROOT / ".artifacts" / "suite"))

pytestmark = pytest.mark.gpu


def test_every_case_matches_the_interpreter():
    if not (ARTIFACTS / "index.json").is_file():
        pytest.skip(f"no prebuilt artifacts in {ARTIFACTS}; run `python bench/gpu_suite.py build {ARTIFACTS}`")
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_suite

    assert gpu_suite.run(ARTIFACTS, None, ["sm90", "sm80"], None) == 0
