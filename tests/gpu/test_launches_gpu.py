"""A multi-launch kernel (one function, alloc_global scratch, two launches) on the GPU through torch
(`pytest -m gpu tests/gpu`): the workspace from torch's allocator on the current stream, the stages launched
asynchronously, on an explicit stream too, and the results against the interpreter's.

The artifacts are bench/gpu_suite.py's (`python bench/gpu_suite.py build .artifacts/suite`, on the machine with
the compiler); its run mode checks the numpy path of the same kernel.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TILEC_GPU_ARTIFACTS", ROOT / ".artifacts" / "suite"))

pytestmark = pytest.mark.gpu


def _cases():
    if not (ARTIFACTS / "index.json").is_file():
        return []
    return [e for e in json.loads((ARTIFACTS / "index.json").read_text()) if e["sample"].endswith("gqa_decode_splitkv")]


@pytest.mark.parametrize("target", ["sm90", "sm80"])
def test_the_stages_run_in_order_on_torch_streams(target):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    cases = _cases()
    if not cases:
        pytest.skip(f"no prebuilt artifacts in {ARTIFACTS}; run `python bench/gpu_suite.py build {ARTIFACTS}`")
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_suite

    import tilec.runtime as rt

    kind = {"sm90": "cubin", "sm80": "ptx"}[target]
    for entry in cases:
        mod = rt.load(ARTIFACTS / f"{entry['name']}.{target}.{kind}")
        kernel = mod.gqa_decode
        data = np.load(ARTIFACTS / f"{entry['case']}.npz")
        args = [torch.from_numpy(np.array(gpu_suite._typed(data[f"in_{p['name']}"], p["dtype"]).view(np.uint16)))
                .view(torch.bfloat16 if p["dtype"] == "bf16" else torch.float16).cuda()
                for p in entry["meta"]["params"]]
        want = gpu_suite._typed(data["out_Output"], entry["dtype"]).astype(np.float32)
        rtol, atol = gpu_suite.TOL[entry["dtype"]]
        out = args[-1]
        out.fill_(float("nan"))
        torch.cuda.synchronize()
        for _ in range(20):  # asynchronous: the workspace of each call is torch's, freed stream-ordered
            kernel(*args)
        torch.cuda.synchronize()
        np.testing.assert_allclose(out.float().cpu().numpy(), want, rtol=rtol, atol=atol, err_msg=entry["case"])
        side = torch.cuda.Stream()
        out.fill_(float("nan"))
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            kernel(*args)
        torch.cuda.current_stream().wait_stream(side)
        got = kernel(*args[:-1])  # the output left out: allocated like Q
        torch.cuda.synchronize()
        np.testing.assert_allclose(out.float().cpu().numpy(), want, rtol=rtol, atol=atol, err_msg=entry["case"])
        np.testing.assert_allclose(got.float().cpu().numpy(), want, rtol=rtol, atol=atol, err_msg=entry["case"])
