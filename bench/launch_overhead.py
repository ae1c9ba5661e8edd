"""tilec.runtime in a PyTorch program: host time per call, streams, CUDA graphs, torch.compile.

    python bench/launch_overhead.py build .artifacts/launch     # here: compile the kernels (no GPU)
    python3 bench/launch_overhead.py run .artifacts/launch      # on the GPU: checks and a table

`run` needs torch, triton, numpy and tilec.runtime (no compiler). For each kernel — vector_add, a bf16 gemm
and an fp8 gemm with TMA tensor maps, flash attention, softmax — it measures the host time of the public call
`kernel(*tensors)` with preallocated outputs (also of a padded split-K gemm and a padded fp8 gemm, whose launches the
compiled launcher replays) and of the allocating form (outputs left out: `C =
kernel(A, B)`) (a loop of asynchronous calls, synchronized after the loop; the best of several repetitions, per
call) beside the same kernel launched with a raw cuLaunchKernel through ctypes on the runtime's packed
arguments (the floor of any ctypes launcher), cuLaunchKernel called from C in a loop (the floor of any
launcher; with the compiled launcher only), a 4-tensor Triton kernel launch and a small torch op. Which
launcher served (compiled, tilec/runtime/fastlaunch.c, or ctypes; TILEC_NATIVE_LAUNCH=0 forces ctypes) is
printed per kernel. Problems are small, so the GPU keeps up and the loop measures the host. Then it checks
what a PyTorch user relies on: results against torch references; a kernel launched while a side stream is
current waits for that stream's producer (and an explicit stream= works); torch.cuda.graph capture and replay
of tilec kernels (new inputs, replayed results); torch.compile(fullgraph=True) of functions calling tilec ops;
numpy arguments. It prints a table last and writes the numbers to $OUT/launch_overhead.json when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNELS = {  # artifact name: (sample, -D overrides)
    "vector_add": ("vector_add", []),
    "gemm": ("gemm", ["dtype=bf16"]),
    "fp8_gemm": ("fp8_gemm", []),
    "attention": ("flash_attention", ["dtype=bf16", "dim=64"]),
    "softmax": ("softmax", ["dtype=bf16"]),
}


def build(out: Path) -> None:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for name, (sample, defines) in KERNELS.items():
        rc = tilec_main([str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "-o", str(out / f"{name}.cubin"),
                         *[f"-D{d}" for d in defines]])
        if rc:
            raise SystemExit(f"build of {name} failed")
    print(f"built {', '.join(KERNELS)} in {out}")


# ---------------------------------------------------------------- on the GPU


def host_us(fn, calls: int = 100, repeats: int = 30) -> float:
    """Host microseconds per call of `fn` in a loop of asynchronous calls: the best repetition (a
    short loop, synchronized between repetitions, so that the launch queue never fills up)."""
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
        best = min(best, (t1 - t0) / calls / 1e3)
    return best


def raw_launcher(kernel, args):
    """cuLaunchKernel through ctypes — the runtime's own foreign function, its pointer arguments ready —
    on the runtime's argument block, packed by one public call: all that is left of a launch once the
    Python around it is gone."""
    import torch

    from tilec.runtime.cuda_driver import Driver

    kernel(*args)
    plan = kernel.launch_plan(*args)  # a tuned kernel's plan is its chosen variant's, with that variant's block
    drv = Driver.get(0)
    fn, (gx, gy, gz), threads, shared = drv.pointer_arg(plan.fn), plan.grid, plan.threads, plan.shared
    stream = drv.pointer_arg(torch.cuda.current_stream().cuda_stream)
    params = drv.pointer_arg(plan.layout.params_address)
    if plan.cluster is not None:  # a clustered variant (gemm's 64x128 on a (2, 1) cluster): cuLaunchKernelEx
        launch_cluster, handle, address = drv.launch_cluster, torch.cuda.current_stream().cuda_stream, \
            plan.layout.params_address
        return lambda: launch_cluster(plan.fn, plan.grid, threads, shared, handle, address, plan.cluster)
    launch = drv.raw_launch
    return lambda: launch(fn, gx, gy, gz, threads, 1, 1, shared, stream, params, None)


def run(out: Path) -> int:
    import torch
    import torch.nn.functional as F

    import tilec.runtime as rt
    import tilec.torch
    from tilec.testing import assert_close

    torch.manual_seed(0)
    dev = "cuda"
    mods = {name: rt.load(out / f"{name}.cubin") for name in KERNELS}
    vector_add = mods["vector_add"].vector_add
    gemm, fp8, attn, softmax = (mods["gemm"].gemm, mods["fp8_gemm"].fp8_gemm, mods["attention"].flash_attention,
                                mods["softmax"].softmax)
    results: dict = {"timing": [], "checks": []}
    failures = 0

    def check(name: str, fn) -> None:
        nonlocal failures
        try:
            detail = fn() or ""
            ok = True
        except Exception as e:  # every check reports, whatever broke
            ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        failures += not ok
        results["checks"].append({"check": name, "ok": ok, "detail": detail})
        print(f"{'ok  ' if ok else 'FAIL'} {name}  {detail}", flush=True)

    # ---- inputs (small problems: the GPU keeps up with the host)
    M = N = K = 256
    A = torch.randn(M, K, dtype=torch.bfloat16, device=dev)
    B = torch.randn(K, N, dtype=torch.bfloat16, device=dev)
    C = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
    A8 = torch.randn(M, K, device=dev).to(torch.float8_e4m3fn)
    B8 = torch.randn(N, K, device=dev).to(torch.float8_e4m3fn)
    C8 = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
    Bq, S, H, D = 1, 256, 4, 64
    Q, Kt, V = (torch.randn(Bq, S, H, D, dtype=torch.bfloat16, device=dev) for _ in range(3))
    O = torch.empty_like(Q)
    X = torch.randn(512, 1000, dtype=torch.bfloat16, device=dev)
    Y = torch.empty_like(X)
    VA, VB = (torch.randn(4096, dtype=torch.float16, device=dev) for _ in range(2))
    VC = torch.empty_like(VA)

    def ref_attention(q, k, v):
        o = F.scaled_dot_product_attention(q.transpose(1, 2).float(), k.transpose(1, 2).float(),
                                           v.transpose(1, 2).float())
        return o.transpose(1, 2)

    cases = [  # (label, kernel, arguments, reference, the arguments of the allocating form or None)
        ("vector_add f16 4096", vector_add, (VA, VB, VC), lambda: VA.float() + VB.float(), (VA, VB)),
        ("gemm bf16 256^3 (TMA)", gemm, (A, B, C), lambda: (A.float() @ B.float()), (A, B)),
        ("fp8 gemm 256^3 (TMA)", fp8, (A8, B8, 0.5, 0.25, C8),
         lambda: (A8.float() @ B8.float().T) * 0.125, (A8, B8, 0.5, 0.25)),
        ("attention 1x256x4x64", attn, (Q, Kt, V, O), lambda: ref_attention(Q, Kt, V), (Q, Kt, V)),
        ("softmax 512x1000", softmax, (X, Y), lambda: torch.softmax(X.float(), dim=-1), (X,)),
    ]

    # ---- correctness of each kernel through the public call
    for label, kernel, args, ref, _ in cases:
        def correct(kernel=kernel, args=args, ref=ref, label=label):
            out_ = kernel(*args)
            torch.cuda.synchronize()
            c = assert_close(out_, ref(), rtol=3e-2, atol=3e-2, max_mismatch_ratio=1e-3 if "fp8" in label else 0)
            return f"max |err| {c.max_abs:.3g}"
        check(f"{label}: result", correct)

    # ---- padded and multi-launch calls (odd K: rows not a multiple of 16 bytes): the first call goes through Python,
    # which files its launches (copies, stages) in the compiled launcher; a repeated call runs them from C. Each is
    # checked against torch on the call C serves, into an output poisoned first.
    A97, B97 = (torch.randn(*s, dtype=torch.bfloat16, device=dev) for s in ((97, 3003), (3003, 1001)))
    C97 = torch.empty(97, 1001, dtype=torch.bfloat16, device=dev)
    A127 = torch.randn(127, 515, device=dev).to(torch.float8_e4m3fn)
    B127 = torch.randn(4099, 515, device=dev).to(torch.float8_e4m3fn)
    C127 = torch.empty(127, 4099, dtype=torch.bfloat16, device=dev)
    sequences = [  # (label, kernel, arguments, reference)
        ("gemm bf16 97x1001x3003", gemm, (A97, B97, C97), lambda: A97.float() @ B97.float()),
        ("fp8 gemm 127x4099x515", fp8, (A127, B127, 0.5, 0.25, C127),
         lambda: (A127.float() @ B127.float().T) * 0.125),
    ]
    for label, kernel, args, ref in sequences:
        def from_c(kernel=kernel, args=args, ref=ref):
            out_ = [a for a in args if isinstance(a, torch.Tensor)][-1]
            kernel(*args)  # the Python path: launches, and files them
            torch.cuda.synchronize()
            hits = kernel._native.stats()["hits"] if getattr(kernel, "_native", None) is not None else None
            out_.fill_(float("nan"))
            kernel(*args)
            torch.cuda.synchronize()
            served = "?" if hits is None else "C" if kernel._native.stats()["hits"] == hits + 1 else "Python"
            c = assert_close(out_, ref(), rtol=3e-2, atol=3e-2, max_mismatch_ratio=1e-3)
            assert served == "C", f"the repeated call was served by {served}"
            return f"served by {served}, max |err| {c.max_abs:.3g}"
        check(f"{label}: padded / multi-launch call from the compiled launcher", from_c)

    # ---- which launcher serves the calls: the compiled one (tilec/runtime/fastlaunch.c) or ctypes
    from tilec.runtime import fastlaunch

    native = fastlaunch.status()
    launchers = {label: ("compiled" if getattr(kernel, "_native", None) is not None else "ctypes")
                 for label, kernel, *_ in cases}
    results["launcher"] = {"native": native, "per_kernel": launchers}
    print(f"launcher: {'compiled ' + str(native['path']) if native['native'] else 'ctypes (' + native['why'] + ')'}")

    # ---- host time per call
    a4 = [torch.randn(4096, device=dev) for _ in range(4)]
    triton_call = _triton_launch(a4)
    table = []
    torch_us = host_us(lambda: torch.add(a4[0], a4[1], out=a4[3]))
    for label, kernel, args, _, inputs in cases:
        public = host_us(lambda kernel=kernel, args=args: kernel(*args))
        allocating = host_us(lambda kernel=kernel, inputs=inputs: kernel(*inputs)) if inputs else float("nan")
        raw = host_us(raw_launcher(kernel, args))
        floor = _driver_floor_us(kernel, args)
        table.append((label, public, raw, allocating, floor))
        results["timing"].append({"kernel": label, "public_us": public, "allocating_us": allocating,
                                  "raw_cuLaunchKernel_us": raw, "cuLaunchKernel_from_C_us": floor})
    for label, kernel, args, _ in sequences:
        public = host_us(lambda kernel=kernel, args=args: kernel(*args))
        table.append((label, public, float("nan"), float("nan"), float("nan")))
        launchers[label] = "compiled" if getattr(kernel, "_native", None) is not None else "ctypes"
        results["timing"].append({"kernel": label, "public_us": public, "padded_or_multi_launch": True})
    results["launcher"]["stats"] = {label: kernel._native.stats() for label, kernel, *_ in cases
                                    if getattr(kernel, "_native", None) is not None}
    print(f"compiled launcher hits/misses: {results['launcher']['stats']}")
    triton_us = host_us(triton_call) if triton_call else float("nan")
    results["timing"].append({"kernel": "triton 4-tensor kernel", "us": triton_us})
    results["timing"].append({"kernel": "torch.add(out=)", "us": torch_us})
    check("host time per call <= 10 us (every one-launch kernel)",
          lambda: _at_most(max(row[1] for row in table[:len(cases)]), 10.0))

    # ---- streams
    def side_stream_ordering():
        s = torch.cuda.Stream()
        src = torch.randn(4096, 1000, dtype=torch.bfloat16, device=dev)
        x = torch.zeros_like(src)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time before the producer writes x
            x.copy_(src)
            y = softmax(x)  # must run on s, after the copy
        s.synchronize()
        assert_close(y, torch.softmax(src.float(), dim=-1), rtol=3e-2, atol=3e-2)
        return "softmax on the current side stream saw its producer's data"
    check("side-stream producer ordered before the kernel", side_stream_ordering)

    def explicit_stream():
        s = torch.cuda.Stream()
        src = torch.randn(4096, 1000, dtype=torch.bfloat16, device=dev)
        x = torch.zeros_like(src)
        y = torch.empty_like(src)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)
            x.copy_(src)
        softmax(x, y, stream=s)  # the current stream is the default one; stream= wins
        s.synchronize()
        assert_close(y, torch.softmax(src.float(), dim=-1), rtol=3e-2, atol=3e-2)
        return "stream=torch.cuda.Stream"
    check("explicit stream= argument", explicit_stream)

    def no_sync_by_default():
        x = torch.randn(8192, 4000, dtype=torch.bfloat16, device=dev)
        y = torch.empty_like(x)
        softmax(x, y)
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)  # ~25 ms queued ahead of the kernel on the current stream
        t0 = time.perf_counter()
        softmax(x, y)
        dt = time.perf_counter() - t0
        torch.cuda.synchronize()
        assert dt < 5e-3, f"the call took {dt * 1e3:.1f} ms: it waited for the GPU"
        return f"call returned after {dt * 1e6:.0f} us with ~25 ms of GPU work queued"
    check("asynchronous: the call does not wait for the GPU", no_sync_by_default)

    def new_thread():
        import threading

        x = torch.randn(512, 1000, dtype=torch.bfloat16, device=dev)
        got = {}

        def work():  # a thread torch has not used: no CUDA context is current on it
            try:
                got["y"] = softmax(x, stream=0)
                torch.cuda.synchronize()
            except Exception as e:
                got["error"] = e

        t = threading.Thread(target=work)
        t.start()
        t.join()
        if "error" in got:
            raise got["error"]
        assert_close(got["y"], torch.softmax(x.float(), dim=-1), rtol=3e-2, atol=3e-2)
        return "launched from a fresh thread"
    check("launch from a thread with no current context", new_thread)

    # ---- CUDA graphs
    def graph_capture():
        x = torch.randn(512, 1000, dtype=torch.bfloat16, device=dev)
        y = torch.empty_like(x)
        a, b = torch.randn(M, K, dtype=torch.bfloat16, device=dev), torch.randn(K, N, dtype=torch.bfloat16, device=dev)
        c = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up on a side stream, as torch.cuda.graph asks
            softmax(x, y)
            gemm(a, b, c)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            softmax(x, y)
            gemm(a, b, c)
        for _ in range(3):  # new inputs each time: only a captured kernel can produce these results
            x.copy_(torch.randn_like(x))
            a.copy_(torch.randn_like(a))
            y.fill_(float("nan"))
            c.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            assert_close(y, torch.softmax(x.float(), dim=-1), rtol=3e-2, atol=3e-2)
            assert_close(c, a.float() @ b.float(), rtol=3e-2, atol=3e-2)
        return "softmax + TMA gemm captured, 3 replays on new inputs"
    check("torch.cuda.graph capture and replay", graph_capture)

    def first_call_under_capture():
        fresh = rt.load(out / "softmax.cubin").softmax  # module not loaded yet: loads during capture
        x = torch.randn(64, 1000, dtype=torch.bfloat16, device=dev)
        y = torch.empty_like(x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fresh(x, y)
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        assert_close(y, torch.softmax(x.float(), dim=-1), rtol=3e-2, atol=3e-2)
        return "module loaded while capturing"
    check("first call of a kernel inside a capture", first_call_under_capture)

    # ---- torch.compile
    def compiled():
        ops = tilec.torch.register(mods["softmax"], prefix="bench_")
        attn_op = tilec.torch.op(attn, "bench_attention")
        gemm_op = tilec.torch.op(gemm, "bench_gemm")  # B gives N: a functional op, C allocated

        @torch.compile(fullgraph=True)
        def block(x, q, k, v, a, b):
            y = ops.softmax(x * 2.0)
            o = attn_op(q, k, v)
            c = gemm_op(a, b)
            return y + 1, o, c

        x = torch.randn(512, 1000, dtype=torch.bfloat16, device=dev)
        y, o, c2 = block(x, Q, Kt, V, A, B)
        torch.cuda.synchronize()
        assert_close(y, torch.softmax((x * 2.0).float(), dim=-1) + 1, rtol=3e-2, atol=3e-2)
        assert_close(o, ref_attention(Q, Kt, V), rtol=3e-2, atol=3e-2)
        assert_close(c2, A.float() @ B.float(), rtol=3e-2, atol=3e-2)
        return "softmax, attention, gemm (functional)"
    check("torch.compile(fullgraph=True) with tilec ops", compiled)

    def outputs_allocated():
        y = softmax(X)
        torch.cuda.synchronize()
        assert y.shape == X.shape and y.dtype == X.dtype and y.device == X.device
        assert_close(y, torch.softmax(X.float(), dim=-1), rtol=3e-2, atol=3e-2)
        return "y = softmax(x)"
    check("outputs left out are allocated", outputs_allocated)

    def numpy_path():
        import numpy as np

        x = np.random.default_rng(0).standard_normal((100, 300)).astype(np.float32)
        m = rt.load(out / "softmax.cubin")  # bf16 kernel: numpy needs ml_dtypes for bf16
        import ml_dtypes

        xb = x.astype(ml_dtypes.bfloat16)
        y = m.softmax(xb)
        assert_close(y, torch.softmax(torch.from_numpy(xb.astype(np.float32)), dim=-1), rtol=3e-2, atol=3e-2)
        return "numpy bf16 in, numpy out (synchronous)"
    check("numpy host arrays", numpy_path)

    # ---- the table
    print()
    print(f"{'host time per call (us)':<28} {'tilec call':>11} {'allocating':>11} {'raw cuLaunchKernel':>19} "
          f"{'from C':>7}")
    for label, public, raw, allocating, floor in table:
        print(f"{label:<28} {public:>11.2f} {allocating:>11.2f} {raw:>19.2f} {floor:>7.2f}  ({launchers[label]})")
    print(f"{'triton 4-tensor kernel':<28} {triton_us:>11.2f}")
    print(f"{'torch.add(out=)':<28} {torch_us:>11.2f}")
    print(f"checks: {len(results['checks']) - failures} passed, {failures} failed")
    results["gpu"] = torch.cuda.get_device_name()
    results["torch"] = torch.__version__
    if os.environ.get("OUT"):
        tag = os.environ.get("LAUNCH_OVERHEAD_TAG", "")
        Path(os.environ["OUT"], f"launch_overhead{tag}.json").write_text(json.dumps(results, indent=1))
    return 1 if failures else 0


def _driver_floor_us(kernel, args) -> float:
    """cuLaunchKernel alone, called from C in a loop with the compiled launcher's own arguments (no Python, no
    ctypes): the floor under any launcher on this host. NaN without the compiled launcher."""
    import torch

    native = getattr(kernel, "_native", None)
    if native is None:
        return float("nan")
    best = float("inf")
    for _ in range(30):
        ns = native.time_launch(tuple(args), 100)
        torch.cuda.synchronize()
        if ns < 0:
            return float("nan")
        best = min(best, ns / 1e3)
    return best


def _at_most(value: float, limit: float) -> str:
    assert value <= limit, f"slowest call {value:.2f} us > {limit} us"
    return f"slowest {value:.2f} us"


def _triton_launch(tensors):
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def add3(a, b, c, d, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(d + i, tl.load(a + i, mask=m) + tl.load(b + i, mask=m) + tl.load(c + i, mask=m), mask=m)

    a, b, c, d = tensors
    n = a.numel()
    grid = (triton.cdiv(n, 1024),)
    return lambda: add3[grid](a, b, c, d, n, BLOCK=1024)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["build", "run"])
    ap.add_argument("dir", type=Path)
    args = ap.parse_args()
    if args.mode == "build":
        build(args.dir)
        return 0
    return run(args.dir)


if __name__ == "__main__":
    sys.exit(main())
