"""tilec.runtime in a PyTorch program on the GPU (`pytest -m gpu tests/gpu`): bench/launch_overhead.py's
checks — results, host time per call, stream ordering, CUDA graph capture and replay, torch.compile.

The kernels are built where the compiler is (`python bench/launch_overhead.py build .artifacts/launch`)
and carried to the GPU machine, which needs torch, triton, numpy and ml_dtypes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TILEC_LAUNCH_ARTIFACTS", ROOT / ".artifacts" / "launch"))

pytestmark = pytest.mark.gpu


def test_runtime_in_a_pytorch_program():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    if not (ARTIFACTS / "softmax.cubin").is_file():
        pytest.skip(f"no prebuilt kernels in {ARTIFACTS}; run `python bench/launch_overhead.py build {ARTIFACTS}`")
    sys.path.insert(0, str(ROOT / "bench"))
    import launch_overhead

    assert launch_overhead.run(ARTIFACTS) == 0
