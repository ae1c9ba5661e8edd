"""Gemm at shapes whose rows are not 16-byte aligned (odd K or N: an LM head's vocabulary of 50257, 4095³, ...),
small and skinny shapes, and the aligned anchor, on the H200: tilec's default builds (what a user runs: the
samples with their committed tuning databases) beside cuBLAS (torch.matmul) and torch._scaled_mm in the same run.

    python bench/misaligned_h200.py build OUT LABEL [TILEC FLAG...]  # here, no GPU: OUT/LABEL/*.cubin (+ manifests)
    python3 bench/misaligned_h200.py run OUT          # on the H200: every OUT/LABEL side by side, checked, timed
    python3 bench/misaligned_h200.py check OUT LABEL  # one ragged misaligned launch a build (for compute-sanitizer)
    python3 bench/misaligned_h200.py breakdown OUT    # on the H200: each build's GPU kernels a call, misaligned shapes
    python bench/misaligned_h200.py twin OUT LABEL    # OUT/LABEL_twin: LABEL's cubins, manifests without "tma_only"
    python bench/misaligned_h200.py copyin OUT LABEL  # OUT/LABEL_copyin: manifests without "written_in_full"

Flags after LABEL go to every `tilec` build of it (e.g. `--simplify-indices`, docs/cli.md). `twin` makes a build
whose launches with misaligned rows run the no-TMA twin (as before tilec.runtime padded such tensors into
16-byte-pitched workspaces for the TMA kernel), so both run side by side from the same cubins.
`copyin` makes one whose padded launches copy a misaligned C into the workspace before the kernel as well as out
after it (as before the manifests said which outputs the kernel writes in full): the A/B of that copy.

Build one LABEL per commit to compare (e.g. `before` from the parent commit's checkout, `after` from this one);
`run` checks every build at every shape against torch (max |C - torch| / max |torch|, C poisoned with NaN first)
and times it with triton.testing.do_bench (median), cuBLAS the same way. With a TMA kernel, a tensor whose rows are
not 16-byte aligned runs the no-TMA twin (tilec.runtime picks it per launch). fp8 at an odd K has no
torch._scaled_mm (it wants every size a multiple of 16): its peer is _scaled_mm with M, N and K padded with zeros to
multiples of 16 (use_fast_accum=True; the padding is not timed).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (family, dtype, M, N, K): gemm NN, gemm_t (trans_B), fp8 (trans_B by definition)
SHAPES = [
    ("gemm", "f16", 4096, 50257, 4096), ("gemm", "bf16", 4096, 50257, 4096),
    ("gemm", "f16", 4095, 4095, 4095), ("gemm", "f16", 2047, 4099, 4097),
    ("gemm", "f16", 127, 4099, 515), ("gemm", "f16", 127, 4099, 512), ("gemm", "f16", 127, 4096, 515),
    ("gemm_t", "f16", 4096, 50257, 4096), ("gemm_t", "f16", 4095, 4095, 4095),
    ("fp8", "e4m3", 4096, 4096, 4095), ("fp8", "e4m3", 2047, 4099, 4097),
    ("gemm", "f16", 97, 1001, 3003), ("gemm", "bf16", 97, 1001, 3003), ("gemm_t", "bf16", 97, 1001, 3003),
    ("gemm_t", "f16", 2047, 4099, 4097), ("fp8", "e4m3", 97, 1001, 3003), ("fp8", "e4m3", 8191, 131, 8191),
    ("fp8", "e4m3", 1009, 2003, 4001), ("fp8", "e4m3", 4095, 4095, 4095), ("fp8", "e4m3", 1000, 1000, 1000),
    ("gemm", "f16", 1, 4096, 4096), ("gemm", "f16", 16, 4096, 4096), ("gemm", "f16", 128, 4096, 11008),
    ("gemm", "f16", 1000, 1000, 1000), ("gemm", "f16", 4096, 4096, 4096), ("fp8", "e4m3", 4096, 4096, 4096),
    ("fp8", "e4m3", 2048, 50257, 768), ("fp8", "e4m3", 4096, 50257, 4096),  # only C misaligned (a vocabulary)
]
# small ragged shapes: checked only
CHECKS = [("gemm", "f16", 1, 7, 9), ("gemm", "bf16", 33, 65, 17), ("gemm", "f16", 257, 1001, 333),
          ("gemm", "bf16", 130, 515, 4099), ("gemm_t", "f16", 257, 1001, 333), ("gemm_t", "bf16", 3, 4099, 515),
          ("fp8", "e4m3", 257, 1001, 333), ("fp8", "e4m3", 130, 72, 4099)]
BUILDS = {"gemm_f16": ("gemm.tile", []), "gemm_bf16": ("gemm.tile", ["-Ddtype=bf16"]),
          "gemm_t_f16": ("gemm.tile", ["-Dtrans_B=True"]),
          "gemm_t_bf16": ("gemm.tile", ["-Dtrans_B=True", "-Ddtype=bf16"]), "fp8": ("fp8_gemm.tile", [])}
TOL = {"f16": 1e-2, "bf16": 4e-2, "e4m3": 2e-2}


def build(out: Path, flags: list[str] = ()) -> None:
    import tilec
    from tilec.cli.main import main as tilec_main

    samples = Path(tilec.__file__).resolve().parent.parent / "samples"
    out.mkdir(parents=True, exist_ok=True)
    for name, (src, defines) in BUILDS.items():
        if tilec_main([str(samples / src), "--target", "sm90", *defines, *flags, "-o", str(out / f"{name}.cubin")]):
            raise SystemExit(f"build of {name} failed")


def _artifact(family: str, dt: str) -> str:
    return "fp8" if family == "fp8" else f"{family}_{dt}"


def _inputs(family: str, dt: str, m: int, n: int, k: int):
    import torch

    g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    if family == "fp8":
        a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda", generator=g) * 0.5).to(torch.float8_e4m3fn)
        return a, b
    tdt = torch.float16 if dt == "f16" else torch.bfloat16
    a = torch.randn(m, k, device="cuda", generator=g).to(tdt)
    b = torch.randn(*((n, k) if family == "gemm_t" else (k, n)), device="cuda", generator=g).to(tdt)
    return a, b


def _call(mod, family: str, a, b, c):
    if family == "fp8":
        return lambda: mod.fp8_gemm(a, b, 1.0, 1.0, c)
    return lambda: mod.gemm(a, b, c)


def _peer(family: str, a, b):
    import torch

    if family == "fp8":  # _scaled_mm wants every dimension a multiple of 16: zeros padded on
        def pad16(x):
            r, k = x.shape
            return torch.nn.functional.pad(x.view(torch.uint8), (0, -k % 16, 0, -r % 16)).view(torch.float8_e4m3fn)

        a, b = pad16(a), pad16(b)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        bt = b.t()
        return lambda: torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
    if family == "gemm_t":
        return lambda: torch.matmul(a, b.t())
    return lambda: torch.matmul(a, b)


def run(out: Path) -> int:
    import torch
    from triton.testing import do_bench

    import tilec.runtime as rt

    labels = sorted(p.name for p in out.iterdir() if p.is_dir())
    mods = {lab: {name: rt.load(out / lab / f"{name}.cubin") for name in BUILDS} for lab in labels}
    bad = 0

    def result(family, dt, m, n, k, time: bool):
        nonlocal bad
        a, b = _inputs(family, dt, m, n, k)
        odt = torch.bfloat16 if family == "fp8" else a.dtype
        want = (a.float() @ (b.float().t() if family in ("gemm_t", "fp8") else b.float()))
        row = []
        for lab in labels:
            c = torch.full((m, n), float("nan"), device="cuda", dtype=odt)
            fn = _call(mods[lab][_artifact(family, dt)], family, a, b, c)
            fn()
            torch.cuda.synchronize()
            err = ((c.float() - want).abs().max() / want.abs().max()).item()
            ok = err <= TOL[dt]  # (a NaN left in C fails too)
            bad += not ok
            ms = do_bench(fn, warmup=10, rep=60, return_mode="median") if time else None
            row.append((lab, err, ok, ms))
        peer = do_bench(_peer(family, a, b), warmup=10, rep=60, return_mode="median") if time else None
        return row, peer

    print(f"{'family':6} {'dt':5} {'M':>5} {'N':>6} {'K':>6}  " +
          "  ".join(f"{lab + ' TFLOP/s':>16} {'ratio':>6}" for lab in labels) + f"  {'peer TFLOP/s':>12}  rel err")
    for family, dt, m, n, k in SHAPES:
        row, peer = result(family, dt, m, n, k, True)
        fl = 2 * m * n * k / 1e9
        cells = "  ".join(f"{fl / ms:16.1f} {peer / ms:6.2f}" for _, _, _, ms in row)
        errs = " ".join(f"{err:.1e}{'' if ok else ' WRONG'}" for _, err, ok, _ in row)
        print(f"{family:6} {dt:5} {m:5} {n:6} {k:6}  {cells}  {fl / peer:12.1f}  {errs}", flush=True)
    for family, dt, m, n, k in CHECKS:
        row, _ = result(family, dt, m, n, k, False)
        errs = " ".join(f"{lab} {err:.1e}{'' if ok else ' WRONG'}" for lab, err, ok, _ in row)
        print(f"check {family:6} {dt:5} {m:5} {n:6} {k:6}  {errs}", flush=True)
    print("all correct" if not bad else f"{bad} WRONG")
    return 1 if bad else 0


def breakdown(out: Path) -> int:
    """Where a call's time goes at each misaligned shape of SHAPES, for every OUT/LABEL: the GPU kernels of ten calls
    under torch's profiler (CUPTI sees tilec.runtime's driver-API launches too), microseconds a call -- the padded
    launches' copies (tilec_pad_batch), split-K's stages, the kernel."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import tilec.runtime as rt

    labels = sorted(p.name for p in out.iterdir() if p.is_dir())
    mods = {lab: {name: rt.load(out / lab / f"{name}.cubin") for name in BUILDS} for lab in labels}
    for family, dt, m, n, k in SHAPES:
        element = 1 if family == "fp8" else 2
        if all(size * element % 16 == 0 for size in (n, k)):  # rows of A, B and C all 16-byte multiples: no copy
            continue
        a, b = _inputs(family, dt, m, n, k)
        c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16 if family == "fp8" else a.dtype)
        for lab in labels:
            fn = _call(mods[lab][_artifact(family, dt)], family, a, b, c)
            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    fn()
                torch.cuda.synchronize()
            totals: dict[str, float] = {}
            for ev in prof.events():
                if ev.device_type == torch.autograd.DeviceType.CUDA:
                    totals[ev.name] = totals.get(ev.name, 0.0) + ev.device_time_total / 10
            kernels = ", ".join(f"{name[:40]} {us:.1f}" for name, us in sorted(totals.items(), key=lambda kv: -kv[1]))
            print(f"{family:6} {dt:5} {m:5} {n:6} {k:6}  {lab:8} {sum(totals.values()):7.1f} us: {kernels}", flush=True)
    return 0


def check_once(out: Path, label: str) -> int:
    """One ragged misaligned launch of each build (for compute-sanitizer memcheck / racecheck)."""
    import torch

    import tilec.runtime as rt

    mods = {name: rt.load(out / label / f"{name}.cubin") for name in BUILDS}
    side = torch.cuda.Stream()
    # small ones (the fallback), and ones the runtime pads (tilec_pad_rows in, the TMA kernel, out): on the current
    # stream, on another one (a workspace for the call), and with the output left out (not copied in)
    for family, dt, m, n, k in [("gemm", "f16", 130, 515, 333), ("gemm", "bf16", 257, 1001, 99),
                                ("gemm_t", "f16", 130, 515, 333), ("fp8", "e4m3", 130, 72, 4099),
                                ("gemm", "f16", 1009, 2003, 4001), ("gemm_t", "bf16", 1009, 2003, 4001),
                                ("fp8", "e4m3", 1000, 1000, 1000), ("fp8", "e4m3", 1009, 2003, 4001)]:
        a, b = _inputs(family, dt, m, n, k)
        c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16 if family == "fp8" else a.dtype)
        mod = mods[_artifact(family, dt)]
        kern = mod.kernels["fp8_gemm" if family == "fp8" else "gemm"]
        args = (a, b, 1.0, 1.0, c) if family == "fp8" else (a, b, c)
        variant = kern.variant_for({"M": m, "N": n, "K": k}) if hasattr(kern, "variant_for") else kern
        try:
            plan = variant.launch_plan(*args)
            runs = plan.kernel.name + (" (padded)" if plan.padding is not None else "")
        except Exception:  # noqa: BLE001  (a split-K variant: a sequence of launches)
            runs = variant.name
        _call(mod, family, a, b, c)()
        with torch.cuda.stream(side):
            kern(*args, stream=side)
        side.synchronize()
        fresh = kern(a, b, 1.0, 1.0) if family == "fp8" else kern(a, b)
        torch.cuda.synchronize()
        same = bool(torch.equal(fresh, c))
        print(f"{family} {dt} {m}x{n}x{k}: {runs}; output left out gives the same bits: {same}", flush=True)
        if not same:
            return 1
    print("launched")
    return 0


def without_key(out: Path, label: str, key: str, suffix: str) -> None:
    """OUT/LABEL_SUFFIX: LABEL's builds with every kernel entry's `key` left out of the manifests."""
    import json
    import shutil

    dst = out / f"{label}_{suffix}"
    dst.mkdir(parents=True, exist_ok=True)
    for f in (out / label).iterdir():
        if f.suffix == ".json":
            m = json.loads(f.read_text())
            for e in m["kernels"]:
                e.pop(key, None)
            (dst / f.name).write_text(json.dumps(m))
        else:
            shutil.copy(f, dst / f.name)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("build", "run", "check", "twin", "copyin", "breakdown"):
        raise SystemExit(__doc__)
    folder = Path(sys.argv[2])
    if sys.argv[1] == "build":
        build(folder / sys.argv[3], sys.argv[4:])
    elif sys.argv[1] == "twin":  # misaligned rows run the no-TMA twin
        without_key(folder, sys.argv[3], "tma_only", "twin")
    elif sys.argv[1] == "copyin":  # misaligned outputs copied into the workspace too
        without_key(folder, sys.argv[3], "written_in_full", "copyin")
    elif sys.argv[1] == "check":
        sys.exit(check_once(folder, sys.argv[3]))
    elif sys.argv[1] == "breakdown":
        sys.exit(breakdown(folder))
    else:
        sys.exit(run(folder))
