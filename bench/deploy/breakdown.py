"""Where the host time of a tilec launch goes (issue #31), on the GPU machine, in one process.

    python3 bench/deploy/breakdown.py LAUNCH_DIR        # LAUNCH_DIR: `bench/launch_overhead.py build`'s cubins

Prints (and writes to $OUT/breakdown.json) nanoseconds per call of:
  - the driver alone, from C with no Python (bench/deploy/launch_floor.c, compiled here with `cc`): a trivial driver
    call, cuLaunchKernel of an empty kernel on the legacy default stream and on other streams, kernelParams against
    a packed buffer, cuLaunchKernelEx with a preset configuration, longer loops;
  - the same kernel's launch through the compiled launcher, taken apart: the public call `k(*args)` (which enters
    C at once: fastlaunch.native_class), the same through the Kernel class's Python __call__, the launcher's
    `fast(args)` called directly, the launcher with the driver call left out (`overhead`), calling a
    C function of one argument from Python (`noop`), the driver call with this kernel's arguments issued from C in
    a loop (`time_launch`), and the launcher's pieces measured in C (`parts`: reading the tensors through torch's
    DLPack exchange table, the current-stream query, an output's allocation);
  - what the Python (ctypes) path and the alternatives for allocating an output cost: `data_ptr()`,
    `__cuda_array_interface__`, torch's raw current stream, `torch.empty`, `torch.empty_like`, `new_empty`;
  - cupy arrays and a __cuda_array_interface__ object through the public call, when cupy is installed.
Host times are the best of several loops of back-to-back calls, synchronized between loops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def loop_ns(fn, calls: int = 100, repeats: int = 30) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter_ns()
        torch.cuda.synchronize()
        best = min(best, (t1 - t0) / calls)
    return round(best, 1)


def best_of(fn, repeats: int = 30) -> float:
    import torch

    best = float("inf")
    for _ in range(repeats):
        v = fn()
        torch.cuda.synchronize()
        if v >= 0:
            best = min(best, v)
    return round(best, 1)


def driver_floor() -> dict:
    exe = Path(tempfile.gettempdir()) / "tilec_launch_floor"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-std=c11", str(HERE / "launch_floor.c"), "-o", str(exe), "-ldl"], check=True)
    r = subprocess.run([str(exe), "100", "30"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def main() -> int:
    launch_dir = Path(sys.argv[1])
    out: dict = {"floor": driver_floor()}
    print(json.dumps(out["floor"], indent=1), flush=True)

    import torch

    import tilec.runtime as rt
    from tilec.runtime import fastlaunch

    ext = fastlaunch.extension()
    out["launcher"] = fastlaunch.status()
    dev = "cuda"
    va = rt.load(launch_dir / "vector_add.cubin").vector_add
    gemm = rt.load(launch_dir / "gemm.cubin").gemm
    VA, VB = (torch.randn(4096, dtype=torch.float16, device=dev) for _ in range(2))
    VC = torch.empty_like(VA)
    A, B = (torch.randn(256, 256, dtype=torch.bfloat16, device=dev) for _ in range(2))
    C = torch.empty(256, 256, dtype=torch.bfloat16, device=dev)
    for name, k, args, inputs in (("vector_add f16 4096", va, (VA, VB, VC), (VA, VB)),
                                  ("gemm bf16 256^3 (TMA)", gemm, (A, B, C), (A, B))):
        k(*args), k(*inputs)
        torch.cuda.synchronize()
        row: dict = {"public_call_ns": loop_ns(lambda k=k, args=args: k(*args)),
                     "allocating_call_ns": loop_ns(lambda k=k, inputs=inputs: k(*inputs))}
        native = getattr(k, "_native", None)
        if native is not None:
            fast = native.fast
            row["launcher_fast_direct_ns"] = loop_ns(lambda fast=fast, args=args: fast(args))
            py_call = getattr(type(k), "_python_call", None)  # the Kernel class's Python __call__ (a frame more)
            if py_call is not None:
                row["through_python_call_ns"] = loop_ns(lambda k=k, args=args, py_call=py_call: py_call(k, *args))
            row["launcher_without_driver_ns"] = best_of(lambda native=native, args=args: native.overhead(args, 1000))
            row["allocating_without_driver_ns"] = best_of(
                lambda native=native, inputs=inputs: native.overhead(inputs, 1000))
            row["driver_call_from_C_ns"] = best_of(lambda native=native, args=args: native.time_launch(args, 100))
            row["python_to_C_call_ns"] = loop_ns(lambda args=args: ext.noop(args), calls=1000)
            row["parts"] = native.parts(args, 1000)
            row["stats"] = native.stats()
        out[name] = row
        print(name, json.dumps(row), flush=True)

    raw_stream = torch._C._cuda_getCurrentRawStream
    shape = (4096,)
    cuda0 = torch.device("cuda", 0)
    py = {
        "data_ptr()": loop_ns(VA.data_ptr, calls=1000),
        "__cuda_array_interface__": loop_ns(lambda: VA.__cuda_array_interface__, calls=1000),
        "torch._C._cuda_getCurrentRawStream(0)": loop_ns(lambda: raw_stream(0), calls=1000),
        "torch.cuda.current_stream()": loop_ns(torch.cuda.current_stream, calls=1000),
        "torch.empty(4096, dtype, device='cuda')": loop_ns(
            lambda: torch.empty(shape, dtype=torch.float16, device="cuda"), calls=1000),
        "torch.empty(4096, dtype, device=torch.device)": loop_ns(
            lambda: torch.empty(shape, dtype=torch.float16, device=cuda0), calls=1000),
        "torch.empty_like(a)": loop_ns(lambda: torch.empty_like(VA), calls=1000),
        "a.new_empty(shape)": loop_ns(lambda: VA.new_empty(shape), calls=1000),
        "torch.add(a, b, out=c)": loop_ns(lambda: torch.add(VA, VB, out=VC)),
        "torch.add(a, b)": loop_ns(lambda: torch.add(VA, VB)),
    }
    out["python"] = py
    print(json.dumps(py, indent=1), flush=True)

    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is not None:
        ca, cb = (cp.asarray(VA.cpu().numpy()) for _ in range(2))
        cc_ = cp.empty_like(ca)

        class Cai:  # a bare __cuda_array_interface__ exporter over a torch tensor
            def __init__(self, t):
                self.__cuda_array_interface__ = t.__cuda_array_interface__

        xa, xb, xc = Cai(VA), Cai(VB), Cai(VC)
        hits = va._native.stats()["hits"] if va._native is not None else 0
        va(ca, cb, cc_)
        va(xa, xb, xc)
        torch.cuda.synchronize()
        cupy_row = {
            "cupy public call ns": loop_ns(lambda: va(ca, cb, cc_)),
            "cupy allocating call ns": loop_ns(lambda: va(ca, cb)),
            "__cuda_array_interface__ object public call ns": loop_ns(lambda: va(xa, xb, xc)),
            "cupy a.__cuda_array_interface__ ns": loop_ns(lambda: ca.__cuda_array_interface__, calls=1000),
            "cupy a.data.ptr ns": loop_ns(lambda: ca.data.ptr, calls=1000),
            "cupy get_current_stream().ptr ns": loop_ns(lambda: cp.cuda.get_current_stream().ptr, calls=1000),
            "cupy.empty ns": loop_ns(lambda: cp.empty(shape, dtype=cp.float16), calls=1000),
            "compiled launcher hits during these calls": (va._native.stats()["hits"] - hits
                                                          if va._native is not None else None),
            "stats": va._native.stats() if va._native is not None else None,
        }
        # results: preallocated, allocating (cupy.empty from C), the interface object, on a side cupy stream
        want = (ca.astype(cp.float32) + cb.astype(cp.float32)).astype(cp.float16)
        cc_.fill(0)
        va(ca, cb, cc_)
        got_alloc = va(ca, cb)
        xc_t = torch.zeros_like(VC)
        va(Cai(VA), Cai(VB), Cai(xc_t))
        side = cp.cuda.Stream(non_blocking=True)
        with side:
            cs = cp.empty_like(ca)
            va(ca, cb, cs)
        side.synchronize()
        cp.cuda.runtime.deviceSynchronize()
        torch.cuda.synchronize()
        cupy_row["results"] = {
            "cupy preallocated max err": float(cp.abs(cc_.astype(cp.float32) - want.astype(cp.float32)).max()),
            "cupy allocating max err": float(cp.abs(got_alloc.astype(cp.float32) - want.astype(cp.float32)).max()),
            "cupy allocating type": type(got_alloc).__name__,
            "cupy on a side stream max err": float(cp.abs(cs.astype(cp.float32) - want.astype(cp.float32)).max()),
            "interface object max err": float((xc_t.float() - (VA.float() + VB.float()).half().float()).abs().max()),
        }
        out["cupy"] = cupy_row
        print(json.dumps(cupy_row, indent=1), flush=True)
    out["gpu"] = torch.cuda.get_device_name()
    out["torch"] = torch.__version__
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], f"breakdown{os.environ.get('BREAKDOWN_TAG', '')}.json").write_text(
            json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
