"""issue #31 on the H200, one batch (built here by the commands in bench/RESULTS.md, "Deploy anywhere"):
PTX-only artifacts (JIT time), the no-JIT switch, a CUDA 12.8-built artifact,
check-deploy of packages of every sample (sm80+sm90, and sm80 only: every kernel through the PTX JIT)."""
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tilec.runtime as rt  # noqa: E402

OUT = os.environ.get("OUT", ".")
results = {}
rng = np.random.default_rng(7)


def want(section: int) -> bool:
    """Sections to run: argv's numbers (`run_gpu.py 3 6`), else all."""
    return len(sys.argv) < 2 or str(section) in sys.argv[1:]


def record(name, **kw):
    results[name] = kw
    print(name, json.dumps(kw), flush=True)


def run_vector_add(mod, n=100003):
    a, b = (rng.standard_normal(n).astype(np.float16) for _ in range(2))
    c = mod.vector_add(a, b)
    return float(np.max(np.abs(c.astype(np.float32) - (a + b).astype(np.float32))))


def run_gemm(mod, m=200, n=136, k=72):
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    mod.gemm(a, b, c)  # (C's N is no input's size: C is passed)
    want = a.astype(np.float32) @ b.astype(np.float32)
    return float(np.max(np.abs(c.astype(np.float32) - want)) / max(1.0, float(np.max(np.abs(want)))))


def run_softmax(mod, m=77, n=1000):
    x = rng.standard_normal((m, n)).astype(np.float16)
    y = mod.softmax(x)
    e = np.exp(x.astype(np.float32) - x.astype(np.float32).max(1, keepdims=True))
    return float(np.max(np.abs(y.astype(np.float32) - e / e.sum(1, keepdims=True))))


RUN = {"vector_add": run_vector_add, "gemm": run_gemm, "softmax": run_softmax}
# 1. PTX-only on this GPU (sm_80 cubin + compute_80 PTX: the cubin does not run on 9.0) and a .ptx file
if want(1):
    for name in ("vector_add80.fatbin", "gemm80.fatbin", "softmax80.fatbin", "vector_add80.ptx"):
        try:
            mod = rt.load(f"ptx/{name}", no_jit=False)
            info = mod.image_report()
            again = rt.load(f"ptx/{name}", no_jit=False).image_report()  # the driver's compute cache has it now
            kernel = name.split("80")[0]
            err = RUN[kernel](mod)
            record(f"ptx-only {name}", image=info.image, how=info.how, first_load_s=round(info.load_seconds, 4),
                   second_load_s=round(again.load_seconds, 4), max_err=err, ok=err < 2e-2)
        except Exception as e:  # noqa: BLE001
            record(f"ptx-only {name}", ok=False, error=f"{type(e).__name__}: {e}")
    # the JIT without the driver's cache: a fresh process with CUDA_CACHE_DISABLE=1
    code = ("import sys; sys.path.insert(0, '.'); import tilec.runtime as rt; import time; t = time.perf_counter(); "
            "m = rt.load('ptx/gemm80.fatbin'); i = m.image_report(); print(i.image, i.how, round(i.load_seconds, 4))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, CUDA_CACHE_DISABLE="1"))
    record("gemm80 JIT with CUDA_CACHE_DISABLE=1", out=p.stdout.strip(), err=p.stderr.strip()[-300:])
# 2. the no-JIT switch
if want(2):
    for how, kw, env in (("no_jit=True", {"no_jit": True}, {}), ("TILEC_NO_JIT=1", {}, {"TILEC_NO_JIT": "1"})):
        os.environ.update(env)
        try:
            rt.load("ptx/vector_add80.fatbin", **kw).vector_add(np.ones(10, np.float16), np.ones(10, np.float16))
            record(f"no-jit {how}", ok=False, error="ran: nothing refused")
        except rt.JitRefused as e:
            record(f"no-jit {how}", ok=True, message=str(e))
        os.environ.pop("TILEC_NO_JIT", None)
# 3. the C launcher: sm80 header (PTX on this GPU), and TILEC_NO_JIT
if want(3):
    for env in ({}, {"TILEC_NO_JIT": "1"}):
        p = subprocess.run(["c/va80_prog", "100003"], capture_output=True, text=True, env=dict(os.environ, **env))
        record(f"C header va80.h {env}", rc=p.returncode, out=p.stdout.strip(), err=p.stderr.strip()[-200:])
# 4. built with NVRTC 12.8 (CUDA 12 drivers)
if want(4):
    for name, kernel in (("v12/vector_add12.fatbin", "vector_add"), ("v12/gemm12.fatbin", "gemm")):
        try:
            mod = rt.load(name)
            info = mod.image_report()
            err = RUN[kernel](mod)
            record(f"nvrtc12 {name}", toolchain=mod.manifest["toolchain"],
                   oldest_driver=mod.manifest["driver_api_version"], image=info.image, how=info.how, max_err=err,
                   ok=err < 2e-2)
        except Exception as e:  # noqa: BLE001
            record(f"nvrtc12 {name}", ok=False, error=f"{type(e).__name__}: {e}")
# 5. check-deploy of packages of every sample
if want(5):
    for pkg in ("pkg", "pkg80"):
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "tilec.deploy_check", pkg, "--report",
                            f"{OUT}/check-deploy-{pkg}.json"], capture_output=True, text=True)
        print(p.stdout, p.stderr[-2000:], flush=True)
        record(f"check-deploy {pkg}", rc=p.returncode, seconds=round(time.perf_counter() - t, 1))
# 6. a background module switching from its fallback, not inside a CUDA graph capture
def background_switch():
    import threading

    import torch

    from tilec.runtime.background import BackgroundModule

    gate = threading.Event()
    fallback_mod = rt.load("launch/vector_add.cubin")  # sm_90a cubin

    def build():  # the "specialized" module: another artifact of the same kernel (the PTX one, JIT-compiled)
        assert gate.wait(60)
        return rt.load("ptx/vector_add80.fatbin")

    t = time.perf_counter()
    bm = BackgroundModule(build, lambda: fallback_mod, "vector_add")
    made_ms = (time.perf_counter() - t) * 1e3
    a, b = (torch.randn(100003, dtype=torch.float16, device="cuda") for _ in range(2))
    c = torch.empty_like(a)
    bm.vector_add(a, b, c)
    first = bm.serving
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        bm.vector_add(a, b, c)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gate.set()
        bm.wait(60)  # the specialized module is ready while the capture runs
        bm.vector_add(a, b, c)
        during = bm.serving
    errs = []
    for _ in range(2):
        a.copy_(torch.randn_like(a))
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        errs.append(float((c.float() - (a + b).float()).abs().max()))  # torch's own f16 sum: exact
    c.fill_(float("nan"))
    bm.vector_add(a, b, c)  # after the capture: switches, on the caller's stream, without a sync
    after = bm.serving
    torch.cuda.synchronize()
    errs.append(float((c.float() - (a + b).float()).abs().max()))
    ok = first == "fallback" and during == "fallback" and after == "specialized" and max(errs) == 0
    record("background switch under graph capture", construct_ms=round(made_ms, 3), first=first,
           during_capture=during, after_capture=after, max_errs=errs, ok=ok)


if want(6):
    try:
        background_switch()
    except Exception as e:  # noqa: BLE001
        record("background switch under graph capture", ok=False, error=f"{type(e).__name__}: {e}")
with open(f"{OUT}/deploy_gpu.json", "w") as f:
    json.dump(results, f, indent=1)
