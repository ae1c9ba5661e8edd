"""A multi-launch kernel (one function, alloc_global scratch, two launches) on the GPU (`pytest -m gpu tests/gpu`):
through tilec.runtime on torch tensors (the workspace from torch's allocator on the current stream, the stages
launched asynchronously, on an explicit stream too), and through the generated C header (NAME_launch with its
stream-ordered workspace, NAME_launch_with_workspace), against the interpreter's results.

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
        args = _tensors(torch, data, entry)
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


def _tensors(torch, data, entry):
    return [torch.from_numpy(np.array(data[f"in_{p['name']}"]).view(np.uint16))
            .view(torch.bfloat16 if p["dtype"] == "bf16" else torch.float16).cuda() for p in entry["meta"]["params"]]


def test_the_c_header_launches_the_stages(tmp_path):
    """The header (sm80 + sm90 images) compiled into a shared library with gcc against the toolkit's cuda.h and
    called through ctypes on torch tensors, with its own workspace and with the caller's."""
    import ctypes
    import shutil
    import subprocess

    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    cases = _cases()
    if not cases or not (ARTIFACTS / f"{cases[0]['name']}.h").is_file():
        pytest.skip(f"no prebuilt artifacts in {ARTIFACTS}; run `python bench/gpu_suite.py build {ARTIFACTS}`")
    nvcc, gcc = shutil.which("nvcc"), shutil.which("gcc")
    if nvcc is None or gcc is None:
        pytest.skip("needs gcc and the CUDA toolkit's cuda.h")
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_suite

    inc = Path(nvcc).resolve().parent.parent / "include"
    params = "CUdeviceptr q, CUdeviceptr k, CUdeviceptr v, CUdeviceptr o, int b, int h, int sk, int hk"
    names = "q, k, v, o, b, h, sk, hk"
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    u64 = ctypes.c_uint64
    for entry in cases:
        (tmp_path / "wrap.c").write_text(
            f'#include "{entry["name"]}.h"\n'
            f"CUresult w_launch(CUstream s, {params}) {{ return gqa_decode_launch(s, {names}); }}\n"
            f"CUresult w_with(CUstream s, CUdeviceptr ws, {params}) {{\n"
            f"  return gqa_decode_launch_with_workspace(s, ws, {names});\n}}\n"
            "CUresult w_bytes(int b, int h, int sk, int hk, size_t* n) {\n"
            "  return gqa_decode_workspace_bytes(b, h, sk, hk, n);\n}\n")
        lib_path = tmp_path / f"{entry['case']}.so"
        subprocess.run([gcc, "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC", f"-I{inc}", f"-I{ARTIFACTS}",
                        str(tmp_path / "wrap.c"), "-o", str(lib_path), "-lcuda", "-lpthread"], check=True)
        lib = ctypes.CDLL(str(lib_path))
        data = np.load(ARTIFACTS / f"{entry['case']}.npz")
        ts = _tensors(torch, data, entry)
        want = gpu_suite._typed(data["out_Output"], entry["dtype"]).astype(np.float32)
        rtol, atol = gpu_suite.TOL[entry["dtype"]]
        s = entry["sizes"]
        sizes = [s["batch"], s["heads"], s["seqlen_kv"], s["heads_kv"]]
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        n = ctypes.c_size_t()
        assert lib.w_bytes(*sizes, ctypes.byref(n)) == 0 and n.value > 0
        ws = torch.empty(n.value, dtype=torch.uint8, device="cuda")
        ptrs = [u64(t.data_ptr()) for t in ts]
        for own_workspace in (True, False):
            ts[-1].fill_(float("nan"))
            rc = (lib.w_launch(stream, *ptrs, *sizes) if own_workspace
                  else lib.w_with(stream, u64(ws.data_ptr()), *ptrs, *sizes))
            assert rc == 0
            torch.cuda.synchronize()
            np.testing.assert_allclose(ts[-1].float().cpu().numpy(), want, rtol=rtol, atol=atol,
                                       err_msg=entry["case"])
