"""The shape sweep (issue #26): tilec's default builds against their peers at a few hundred shapes of real model layers.

    python bench/shape_sweep.py build .artifacts/sweep                                 # here: 16 builds, shapes.json
    python3 bench/shape_sweep.py run .artifacts/sweep --results $OUT/shape_sweep.json  # the H200: 899 shapes, ~2.5 min
    python bench/shape_sweep.py report shape_sweep.json                   # here: the table and bench/shape_sweep.png

(With the `run` tool: build into /work/main/.artifacts/sweep, pass `carry: [".artifacts/sweep"]`, and run the second
command from the repository root there; it needs tilec/ and bench/ from the checkout, numpy, torch and triton.)

`build` compiles the artifacts a user gets with no tuning flags for sm90 — the committed tuning databases
(samples/*.tune.json) decide the configurations and the dispatch — for gemm f16 and bf16 (B as [K, N] and trans_B's
[N, K]), fp8_gemm, flash_attention bf16 (head dims 64, 96, 128 and 256, causal or not), softmax, rmsnorm and layernorm
bf16; `-D` names only what selects the problem (dtype, trans_B, dim, causal). One exception: at dim=256 the sm90
default tile (128x128 queries x keys on 256 threads) needs 393 KB of shared memory and the build is refused, so that
build takes the search space's first candidate (64x64 on 128 threads). It writes shapes.json: every shape, its family,
its artifact, and whether the database entry that build reads was tuned at exactly that shape.

`run` needs only numpy, torch, triton and tilec.runtime (the CUDA driver). For each shape it checks tilec's output
against the peer's (outputs poisoned with NaN first; a tolerance by dtype), then times both with
`triton.testing.do_bench` (median; the L2 flushed before each call), three times each in turn (`--repeat N`), and
records ratio = the peer's median time / tilec's (> 1: tilec is faster) and every timing (`tilec_runs_ms`,
`peer_runs_ms`). The peers: cuBLAS (torch.mm), `torch._scaled_mm(use_fast_accum=True)` (on operands zero-padded to
multiples of 16 where K or N is not one: cuBLASLt's fp8 needs it), torch SDPA on cuDNN (flash, then the default
backend where cuDNN refuses a shape), torch's softmax / rms_norm / layer_norm. Shapes run interleaved across families,
so `--budget SECONDS` (stop timing new shapes) still covers every family; the JSON is rewritten as the run goes.
fp8 shapes whose operands needed padding also time `_scaled_mm` with that padding (`peer_with_padding_ms`: what a
user of cuBLAS runs there). `--breakdown N` then profiles the N worst shapes again under torch's profiler: the GPU
kernels of one call, tilec's (the padded launches' copies, split-K's stages, the kernel) and the peer's.
`--variants` also times every tuned variant of a dispatching kernel at each shape (`variants_ms`), so that `report`
gives the dispatch's regret: the chosen variant's time over the fastest one's. `--misaligned` runs only the gemm and
fp8 shapes with rows that are not a multiple of 16 bytes (with TILEC_PADDING=always, then never: the padding
rule's A/B); `--split-k` only the shapes whose dispatch picks a split-K variant (an A/B of its second stage).

`report` prints per family the worst, 10th percentile and median ratio over the correct shapes, separately for the
shapes the tuning databases were tuned on and for the others (read from samples/*.tune.json), the 10 worst shapes and
every wrong or failed one, and draws the ratio against the problem size into bench/shape_sweep.png (matplotlib:
`pip install 'tilec[plot]'`).

`rescore RESULTS DIR` scores another dispatch on a `--variants` run with no GPU: at each shape, the variant the
manifests of the build folder DIR choose (tilec.runtime.dispatch.choose: their tuned shapes and `when=` conditions),
priced at the run's measured time of that variant — its regret and its ratio against the peer, per family, beside
the run's own choice. DIR must carry the same variants as the run (the same database entries): a change of the
dispatch rules alone.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# ---------------------------------------------------------------------------------------------------- the builds
# artifact name -> (sample, -D values). Only problem-selecting consts; no tile configuration.
ATTN_DIMS = (64, 96, 128, 256)
BUILDS: dict[str, tuple[str, dict[str, str]]] = {
    "gemm_f16": ("gemm", {}),
    "gemm_bf16": ("gemm", {"dtype": "bf16"}),
    "gemm_f16_tB": ("gemm", {"trans_B": "True"}),
    "gemm_bf16_tB": ("gemm", {"dtype": "bf16", "trans_B": "True"}),
    "fp8_gemm": ("fp8_gemm", {}),
    **{f"attn_d{d}{'_causal' if c else ''}": ("flash_attention", {"dtype": "bf16", "dim": str(d),
                                                                   **({"causal": "True"} if c else {})})
       for d in ATTN_DIMS for c in (False, True)},
    "softmax": ("softmax", {"dtype": "bf16"}),
    "rmsnorm": ("rmsnorm", {"dtype": "bf16"}),
    "layernorm": ("layernorm", {"dtype": "bf16"}),
}
# builds that need a configuration of their own: none since head dim 256's default fits sm90 (a per-dim default)
CONFIG_OVERRIDES: dict[str, dict[str, str]] = {}

FAMILIES = ["gemm f16", "gemm bf16", "gemm f16 trans_B", "gemm bf16 trans_B", "fp8", "attention",
            "attention causal", "softmax", "rmsnorm", "layernorm"]
GEMM_BUILD = {"gemm f16": "gemm_f16", "gemm bf16": "gemm_bf16", "gemm f16 trans_B": "gemm_f16_tB",
              "gemm bf16 trans_B": "gemm_bf16_tB", "fp8": "fp8_gemm"}
DTYPE = {"gemm f16": "f16", "gemm f16 trans_B": "f16"}  # everything else is bf16 (fp8's output too)
TOL = {"f16": 1e-2, "bf16": 2e-2}

# ---------------------------------------------------------------------------------------------------- the models
# (name, hidden, intermediate, vocabulary, query heads, key/value heads, head dim, gated MLP) from the models'
# published configurations
MODELS = [
    ("gpt2", 768, 3072, 50257, 12, 12, 64, False),
    ("gpt2-xl", 1600, 6400, 50257, 25, 25, 64, False),
    ("llama2-7b", 4096, 11008, 32000, 32, 32, 128, True),
    ("llama2-13b", 5120, 13824, 32000, 40, 40, 128, True),
    ("llama2-70b", 8192, 28672, 32000, 64, 8, 128, True),
    ("llama3-8b", 4096, 14336, 128256, 32, 8, 128, True),
    ("llama3-70b", 8192, 28672, 128256, 64, 8, 128, True),
    ("llama3.2-1b", 2048, 8192, 128256, 32, 8, 64, True),
    ("llama3.2-3b", 3072, 8192, 128256, 24, 8, 128, True),
    ("mistral-7b", 4096, 14336, 32768, 32, 8, 128, True),
    ("qwen2-0.5b", 896, 4864, 151936, 14, 2, 64, True),
    ("qwen2-1.5b", 1536, 8960, 151936, 12, 2, 128, True),
    ("qwen2-7b", 3584, 18944, 152064, 28, 4, 128, True),
    ("qwen2-72b", 8192, 29568, 152064, 64, 8, 128, True),
    ("gemma-2b", 2048, 16384, 256000, 8, 1, 256, True),
    ("gemma-7b", 3072, 24576, 256000, 16, 16, 256, True),
    ("gemma2-9b", 3584, 14336, 256000, 16, 8, 256, True),
    ("phi-2", 2560, 10240, 51200, 32, 32, 80, False),
    ("phi-3-mini", 3072, 8192, 32064, 32, 32, 96, True),
    ("falcon-7b", 4544, 18176, 65024, 71, 1, 64, False),
]
# tokens in a batch (batch x sequence): decode steps to long prefills, odd and prime counts among them
TOKENS = [1, 3, 8, 16, 37, 64, 128, 200, 512, 1000, 2048, 3072, 4093, 8192, 16384]
# shapes named in issue #26 (misaligned rows, an LM head, small and skinny, the aligned anchors) and prime sizes
GEMM_ANCHORS = [(2047, 4099, 4097), (4095, 4095, 4095), (4096, 50257, 4096), (127, 4099, 515), (127, 4099, 512),
                (127, 4096, 515), (1, 4096, 4096), (5120, 3584, 7168), (97, 1001, 3003), (1009, 2003, 4001),
                (8191, 131, 8191), (16384, 1024, 1024)]
MAX_FLOPS = 4e12       # an untuned gemm or attention past this is left out (a few ms a call)
MAX_BYTES = 2.5e9      # operands and result together


def _layers(model) -> list[tuple[str, int, int]]:
    """(layer, N, K) of a model's linear layers: fused QKV, output projection, up (with gate), down, LM head."""
    name, hidden, inter, vocab, heads, kv_heads, head_dim, gated = model
    q = heads * head_dim
    return [("qkv", q + 2 * kv_heads * head_dim, hidden), ("o", hidden, q),
            ("gate_up" if gated else "up", 2 * inter if gated else inter, hidden), ("down", hidden, inter),
            ("lm_head", vocab, hidden)]


def _gemm_fits(m: int, n: int, k: int, elem: int = 2) -> bool:
    return 2 * m * n * k <= MAX_FLOPS and (m * k + n * k) * elem + m * n * 2 <= MAX_BYTES


def tuned_shapes(root: Path = ROOT) -> dict[str, list[dict[str, int]]]:
    """Per artifact of BUILDS, the shapes of the database entry its build reads (empty where none applies)."""
    from tilec.tuning.database import same_consts

    out: dict[str, list[dict[str, int]]] = {}
    for name, (sample, defines) in BUILDS.items():
        path = root / "samples" / f"{sample}.tune.json"
        entries = json.loads(path.read_text())["entries"] if path.is_file() else []
        defs = {**defines, **CONFIG_OVERRIDES.get(name, {})}
        out[name] = []
        for e in entries:
            if (e["source"] == f"{sample}.tile" and e["target"] == "sm90" and not any(d in e["space"] for d in defs)
                    and same_consts(defs, e)):
                out[name] = [s["sizes"] for s in e["shapes"]]
    return out


def _is_tuned(tuned: dict, build: str, sizes: dict) -> bool:
    return any(all(sizes.get(k) == v for k, v in s.items()) for s in tuned.get(build, []))


def generate_shapes(root: Path = ROOT) -> list[dict]:
    """The sweep's shapes, deterministic: each with its family, artifact, sizes, where it comes from, and whether
    the database was tuned at it."""
    tuned = tuned_shapes(root)
    shapes: list[dict] = []
    seen: set = set()

    def add(family: str, build: str, sizes: dict, origin: str) -> None:
        key = (family, tuple(sorted(sizes.items())))
        if key not in seen:
            seen.add(key)
            shapes.append({"family": family, "build": build, "sizes": sizes, "origin": origin,
                           "tuned": _is_tuned(tuned, build, sizes)})

    # gemm and fp8: every model's five layers, each at a token count of its own (rotating through TOKENS, a
    # different phase per family), in two of the four f16/bf16 families and in fp8; the shapes; the tuned
    layer_list = [(m[0], layer, n, k) for m in MODELS for layer, n, k in _layers(m)]
    gemm_families = [f for f in GEMM_BUILD if f != "fp8"]
    for i, (model, layer, n, k) in enumerate(layer_list):
        for j, family in enumerate(gemm_families + ["fp8"]):
            if family != "fp8" and (i + j) % 2:
                continue
            elem = 1 if family == "fp8" else 2
            step = (i * 7 + j * 3) % len(TOKENS)
            m = TOKENS[step]
            while not _gemm_fits(m, n, k, elem):
                step -= 1
                m = TOKENS[step]
            add(family, GEMM_BUILD[family], {"M": m, "N": n, "K": k}, f"{model} {layer}")
    for family, build in GEMM_BUILD.items():
        for m, n, k in GEMM_ANCHORS:
            add(family, build, {"M": m, "N": n, "K": k}, "issue #26 / prime")
        for s in tuned[build]:
            add(family, build, dict(s), "tuned")

    # attention (B, H, S): heads of the models with that head dim; S ragged and round, one batch to 16 sequences
    heads = {64: [12, 32, 71], 96: [32], 128: [32, 40, 28, 64], 256: [8, 16]}
    seqs = [1, 17, 100, 128, 257, 513, 1000, 1024, 2047, 3000, 4096, 4097, 8191, 16384]
    batches = [1, 2, 4, 8, 16]
    for d in ATTN_DIMS:
        for causal in (False, True):
            family = "attention causal" if causal else "attention"
            build = f"attn_d{d}{'_causal' if causal else ''}"
            for i, s in enumerate(seqs):
                h = heads[d][(i + causal) % len(heads[d])]
                b = batches[(i * 3 + d // 32 + causal) % len(batches)]
                while b > 1 and (b * s > 32768 or 4 * b * h * s * s * d / (2 if causal else 1) > MAX_FLOPS):
                    b //= 2
                if 4 * b * h * s * s * d / (2 if causal else 1) > 4 * MAX_FLOPS:
                    h = 8
                if (i + d) % 3 == 0 and d != 96:  # two thirds of the lengths a head dim (all of 96's)
                    continue
                add(family, build, {"B": b, "H": h, "S": s}, f"d{d}")
            for s in tuned[build]:
                if 4 * s["B"] * s["H"] * s["S"] ** 2 * d / (2 if causal else 1) <= 4 * MAX_FLOPS:
                    add(family, build, dict(s), "tuned")

    # rows: normalization over the hidden sizes, softmax over vocabularies and attention-score rows
    hidden = sorted({m[1] for m in MODELS}) + [1000, 4099, 12289]
    vocab = sorted({m[3] for m in MODELS})
    scores = [128, 1000, 1024, 2047, 4096, 8192, 16384]
    for norm in ("softmax", "rmsnorm", "layernorm"):
        lengths = [(n, "hidden") for n in hidden] + (
            [(n, "vocab") for n in vocab] + [(n, "scores") for n in scores] if norm == "softmax" else [])
        # three row counts a hidden size for the norms (two for softmax, which has the vocabularies and scores too),
        # so that shapes no database was tuned at stay most of every family after the norms' 32 tuned shapes (s23)
        for i, (n, what) in enumerate(lengths):
            for j in range(2 if norm == "softmax" else 3):
                m = TOKENS[(i * 5 + j * 7 + len(norm)) % len(TOKENS)]
                if what == "scores":
                    m = [32 * n, 12 * 513, 64][(i + j) % 3]
                while m * n * 2 * 2 > MAX_BYTES:
                    m //= 2
                add(norm, norm, {"M": m, "N": n}, what)
        for s in tuned[norm]:
            add(norm, norm, dict(s), "tuned")
    for i, s in enumerate(shapes):
        s["id"] = i
        s["sample"], s["defines"] = BUILDS[s["build"]][0], {**BUILDS[s["build"]][1],
                                                           **CONFIG_OVERRIDES.get(s["build"], {})}
    return shapes


def interleaved(shapes: list[dict]) -> list[dict]:
    """The shapes in an order that takes one of each family in turn, so a run cut short covers every family."""
    queues = {f: [s for s in shapes if s["family"] == f] for f in FAMILIES}
    out = []
    while any(queues.values()):
        for f in FAMILIES:
            if queues[f]:
                out.append(queues[f].pop(0))
    return out


def work(shape: dict) -> tuple[float, str]:
    """A shape's size for the plot: FLOPs for the gemms and attention (halved when causal), bytes for rows."""
    s, fam = shape["sizes"], shape["family"]
    if "M" in s and "K" in s:
        return 2.0 * s["M"] * s["N"] * s["K"], "FLOP"
    if "S" in s:
        return 4.0 * s["B"] * s["H"] * s["S"] ** 2 * int(shape["defines"]["dim"]) / (2 if "causal" in fam else 1), \
            "FLOP"
    return 4.0 * s["M"] * s["N"], "bytes"


def label(shape: dict) -> str:
    s = shape["sizes"]
    if "K" in s:
        return f"{s['M']}x{s['N']}x{s['K']}"
    if "S" in s:
        return f"B{s['B']} H{s['H']} S{s['S']} D{shape['defines']['dim']}"
    return f"{s['M']}x{s['N']}"


# ---------------------------------------------------------------------------------------------------- build (CPU)
def builds_of(families: list[str] | None) -> list[str]:
    """The artifacts the shapes of these families run (all of them for None)."""
    if not families:
        return list(BUILDS)
    names = []
    for fam in families:
        if fam in GEMM_BUILD:
            names.append(GEMM_BUILD[fam])
        elif fam.startswith("attention"):
            causal = fam.endswith("causal")
            names += [b for b in BUILDS if b.startswith("attn_") and b.endswith("_causal") == causal]
        else:
            names.append(fam)
    return [b for b in BUILDS if b in names]


def build(out: Path, families: list[str] | None = None, toolchain_args: list[str] | None = None,
          compiler: str | None = None, flags: list[str] | None = None) -> None:
    import subprocess

    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    for name in builds_of(families):
        sample, defines = BUILDS[name]
        defs = {**defines, **CONFIG_OVERRIDES.get(name, {})}
        t0 = time.time()
        rc = tilec_main([str(ROOT / "samples" / f"{sample}.tile"), "--target", "sm90", "-o", str(out / f"{name}.cubin"),
                         *[f"-D{k}={v}" for k, v in defs.items()],
                         *[f"-Xcompiler={arg}" for arg in toolchain_args or ()],
                         *(flags or ()), *(["--compiler", compiler] if compiler else [])])
        if rc:
            raise SystemExit(f"build of {name} failed")
        print(f"built {name} ({time.time() - t0:.1f} s)", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True)
    shapes = generate_shapes()
    meta = {"commit": commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else ""),
            "built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "compiler": compiler or "default",
            "flags": list(flags or ())}
    (out / "shapes.json").write_text(json.dumps({"meta": meta, "shapes": shapes}, indent=0))
    tuned = sum(s["tuned"] for s in shapes)
    print(f"{len(shapes)} shapes ({tuned} tuned, {len(shapes) - tuned} not) in {out / 'shapes.json'}")


# ---------------------------------------------------------------------------------------------------- run (GPU)
WARMUP_MS, REP_MS = 3, 12
DEVICE = "cuda"
# timings of each side at a shape, alternating, whose median the ratio takes: one timing of a side wandered by a
# median of 2.8% between runs and by up to 4.6x (a peer's 10 us call at 44 us), so a single pair made the worst
# shapes partly noise (bench/RESULTS.md, s20)
REPEAT = 3


def timed_pair(bench, tilec_call, peer_call, repeat: int = REPEAT) -> tuple[float, float, list[float], list[float]]:
    """tilec's and the peer's median time over `repeat` timings each, taken in turn (tilec, peer, tilec, ...) so that
    a slow stretch of the GPU falls on both sides, and every timing."""
    mine, theirs = [], []
    for _ in range(repeat):
        mine.append(bench(tilec_call))
        theirs.append(bench(peer_call))
    return statistics.median(mine), statistics.median(theirs), mine, theirs


def misaligned_rows(shape: dict) -> bool:
    """A gemm or fp8 shape with a tensor whose rows are not a multiple of 16 bytes (where a TMA kernel pads them or
    runs its fallback): K or N not a multiple of 8 two-byte elements; fp8's K of 16 one-byte elements."""
    sizes = shape["sizes"]
    if shape["family"] == "fp8":
        return sizes["K"] % 16 != 0 or sizes["N"] % 8 != 0
    return shape["family"].startswith("gemm") and (sizes["K"] % 8 != 0 or sizes["N"] % 8 != 0)


def what_runs(kern, args, sizes) -> str:
    """The variant the dispatch picks and whether TMA or the no-TMA twin runs it (a split-K variant: its name);
    "+padded": the TMA kernel on copies of the misaligned tensors with 16-byte rows (tilec/runtime/launch.py)."""
    variant = kern.variant_for(sizes) if hasattr(kern, "variant_for") else kern
    try:
        plan = variant.launch_plan(*args)
        return plan.kernel.name + ("+padded" if getattr(plan, "padding", None) is not None else "")
    except Exception:  # noqa: BLE001  (a sequence of launches has no one plan)
        return variant.name


def run(out: Path, results_path: Path, budget_s: float, only: list[str] | None, breakdown: int = 0,
        variants: bool = False, misaligned: bool = False, split_k: bool = False, repeat: int = REPEAT) -> None:
    import torch
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    import tilec.runtime as rt

    t_start = time.time()
    spec = json.loads((out / "shapes.json").read_text())
    shapes = interleaved([s for s in spec["shapes"] if (not only or s["family"] in only)
                          and (not misaligned or misaligned_rows(s))])
    torch.manual_seed(0)
    dev = DEVICE
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}
    modules: dict = {}

    def kernel(build_name: str):
        if build_name not in modules:
            modules[build_name] = rt.load(out / f"{build_name}.cubin")
        sample = BUILDS[build_name][0]
        return modules[build_name].kernels[sample]  # the public name: it dispatches over the tuned variants

    def bench(fn) -> float:
        return do_bench(fn, warmup=WARMUP_MS, rep=REP_MS, return_mode="median")

    def runs_split_k(shape) -> bool:
        kern = kernel(shape["build"])
        return hasattr(kern, "variant_for") and hasattr(kern.variant_for(dict(shape["sizes"])), "stages")

    if split_k:  # just the shapes whose dispatch picks a sequence of launches (a split-K variant)
        shapes = [s for s in shapes if s["build"] in BUILDS and runs_split_k(s)]

    def rel_max(got, ref) -> float:
        return ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).float().item()

    def gemm_case(shape):
        s, fam = shape["sizes"], shape["family"]
        m, n, k = s["M"], s["N"], s["K"]
        dt = tdt[DTYPE.get(fam, "bf16")]
        a = torch.randn(m, k, device=dev, dtype=dt)
        trans = "trans_B" in fam
        b = torch.randn(n, k, device=dev, dtype=dt) if trans else torch.randn(k, n, device=dev, dtype=dt)
        c = torch.full((m, n), float("nan"), device=dev, dtype=dt)
        ref = torch.empty(m, n, device=dev, dtype=dt)
        bb = b.t() if trans else b
        return (a, b, c), (lambda: torch.mm(a, bb, out=ref)), "cuBLAS", lambda: rel_max(c, ref), DTYPE.get(fam, "bf16")

    def fp8_case(shape):
        s = shape["sizes"]
        m, n, k = s["M"], s["N"], s["K"]
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
        c = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        kp, np_ = -(-k // 16) * 16, -(-n // 16) * 16
        padded = (kp, np_) != (k, n)
        if padded:
            ap = torch.zeros(m, kp, device=dev, dtype=torch.float8_e4m3fn)
            bp = torch.zeros(np_, kp, device=dev, dtype=torch.float8_e4m3fn)
            ap[:, :k], bp[:n, :k] = a, b
        else:
            ap, bp = a, b
        sa, sb = torch.tensor(0.5, device=dev), torch.tensor(0.25, device=dev)
        ref_full = torch.empty(m, np_, device=dev, dtype=torch.bfloat16)

        def peer():
            torch._scaled_mm(ap, bp.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True,
                             out=ref_full)

        if padded:  # what a user of _scaled_mm runs at this shape: the padding too (timed apart, not in the ratio)
            def with_padding():
                pa = F.pad(a.view(torch.uint8), (0, kp - k)).view(torch.float8_e4m3fn)
                pb = F.pad(b.view(torch.uint8), (0, kp - k, 0, np_ - n)).view(torch.float8_e4m3fn)
                torch._scaled_mm(pa, pb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True,
                                 out=ref_full)
            peer.with_padding = with_padding
        return ((a, b, 0.5, 0.25, c), peer, "_scaled_mm" + (" (padded to 16)" if padded else ""),
                lambda: rel_max(c, ref_full[:, :n]), "bf16")

    def attention_case(shape):
        s, d = shape["sizes"], int(shape["defines"]["dim"])
        causal = "causal" in shape["family"]
        q, kk, v = (torch.randn(s["B"], s["S"], s["H"], d, device=dev, dtype=torch.bfloat16) for _ in range(3))
        o = torch.full_like(q, float("nan"))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, kk, v))
        holder = {}
        label_ = None
        for backend, name in ((SDPBackend.CUDNN_ATTENTION, "SDPA cuDNN"), (SDPBackend.FLASH_ATTENTION, "SDPA flash"),
                              (None, "SDPA")):
            def peer(backend=backend):
                if backend is None:
                    holder["o"] = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                    return
                with sdpa_kernel(backend):
                    holder["o"] = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            try:
                peer()
                torch.cuda.synchronize()
                label_ = name
                break
            except RuntimeError:
                continue
        if label_ is None:
            raise RuntimeError("no SDPA backend runs this shape")

        return (q, kk, v, o), peer, label_, lambda: rel_max(o, holder["o"].transpose(1, 2)), "bf16"

    def rows_case(shape):
        s, norm = shape["sizes"], shape["family"]
        m, n = s["M"], s["N"]
        x = (torch.randn(m, n, device=dev) * 2 + torch.rand(m, 1, device=dev) * 4 - 2).to(torch.bfloat16)
        w = torch.randn(n, device=dev).to(torch.bfloat16)
        bias = torch.randn(n, device=dev).to(torch.bfloat16)
        y = torch.full_like(x, float("nan"))
        holder = {}
        if norm == "softmax":
            args = (x, y)

            def peer():
                holder["y"] = torch.softmax(x, dim=-1)
        elif norm == "rmsnorm":
            args = (x, w, y, 1e-6)

            def peer():
                holder["y"] = F.rms_norm(x, (n,), w, 1e-6)
        else:
            args = (x, w, bias, y, 1e-5)

            def peer():
                holder["y"] = F.layer_norm(x, (n,), w, bias, 1e-5)

        def err():  # the worst row's relative error, so that one wrong row among thousands shows
            ref = holder["y"].float()
            return ((y.float() - ref).norm(dim=1) / ref.norm(dim=1).clamp_min(1e-30)).max().item()
        return args, peer, "torch", err, "bf16"

    def case(shape):
        fam = shape["family"]
        if fam == "fp8":
            return fp8_case(shape)
        if fam.startswith("gemm"):
            return gemm_case(shape)
        if fam.startswith("attention"):
            return attention_case(shape)
        return rows_case(shape)

    gpu = torch.cuda.get_device_name()
    print(f"{gpu}, torch {torch.__version__}, triton {triton.__version__}; {len(shapes)} shapes, "
          f"budget {budget_s:.0f} s; built from {spec['meta']['commit']}", flush=True)
    rows = []

    def save(done: bool) -> None:
        meta = {**spec["meta"], "gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "elapsed_s": round(time.time() - t_start, 1),
                "warmup_ms": WARMUP_MS, "rep_ms": REP_MS, "repeat": repeat, "budget_s": budget_s, "complete": done}
        results_path.parent.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=0))

    def kernels_per_call(fn, calls: int = 10) -> list[list]:
        """The GPU kernels one call of fn runs, as [name, microseconds per call], from torch's profiler (CUPTI sees
        the driver-API launches of tilec.runtime too): where a slow call's time goes -- copies, split-K partials,
        the main kernel."""
        from torch.profiler import ProfilerActivity, profile

        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        totals: dict[str, float] = {}
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                totals[ev.name] = totals.get(ev.name, 0.0) + ev.device_time_total / calls
        return [[name[:90], round(us, 2)] for name, us in sorted(totals.items(), key=lambda kv: -kv[1])[:8]]

    def profile_worst(rows: list[dict], count: int) -> None:
        """Each of the `count` worst shapes again under the profiler: tilec's kernels and the peer's, per call."""
        timed = sorted((r for r in rows if "ratio" in r), key=lambda r: r["ratio"])[:count]
        by_id = {s["id"]: s for s in shapes}
        print(f"\nwhere the time goes at the {len(timed)} worst shapes (us per call, GPU kernels):", flush=True)
        for row in timed:
            try:
                args, peer, _, _, _ = case(by_id[row["id"]])
                kern = kernel(row["build"])
                row["tilec_kernels"] = kernels_per_call(lambda: kern(*args))  # noqa: B023
                row["peer_kernels"] = kernels_per_call(peer)
            except Exception as e:  # noqa: BLE001
                row["profile_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            finally:
                args = peer = None
            print(f"{row['ratio']:5.2f}x {row['family']:<18} {label(by_id[row['id']]):<24} {row.get('runs', '')}\n"
                  f"      tilec: {row.get('tilec_kernels', row.get('profile_error'))}\n"
                  f"      peer:  {row.get('peer_kernels')}", flush=True)

    for i, shape in enumerate(shapes):
        row = {k: shape[k] for k in ("id", "family", "build", "sample", "defines", "sizes", "origin", "tuned")}
        rows.append(row)
        if time.time() - t_start > budget_s:
            row["skipped"] = "budget"
            continue
        kern = None
        try:
            args, peer, peer_name, err_of, dt = case(shape)
            kern = kernel(shape["build"])
            row["peer"] = peer_name
            row["runs"] = what_runs(kern, args, dict(shape["sizes"]))
            kern(*args)
            peer()
            torch.cuda.synchronize()
            row["err"] = err_of()
            row["ok"] = bool(row["err"] <= TOL[dt])  # NaN (an unwritten element) compares False
            call = functools.partial(kern, *args)
            row["tilec_ms"], row["peer_ms"], mine, theirs = timed_pair(bench, call, peer, repeat)
            if repeat > 1:
                row["tilec_runs_ms"], row["peer_runs_ms"] = mine, theirs
            row["ratio"] = row["peer_ms"] / row["tilec_ms"]
            if hasattr(peer, "with_padding"):
                row["peer_with_padding_ms"] = bench(peer.with_padding)
            if variants and hasattr(kern, "variants"):  # what each tuned variant takes here: the dispatch's regret
                row["variants_ms"] = {v.name: bench(lambda v=v: v(*args)) for v in kern.variants}  # noqa: B023
        except Exception as e:  # noqa: BLE001  (every failure goes into the table)
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            args = peer = err_of = call = None  # the tensors go back to torch's allocator
            # and so do the workspaces the calls kept (a padded launch's copies, split-K's planes): a kernel keeps its
            # own per stream, each variant too, sized by the largest call so far, and --variants at an LM head or a
            # 16384x28672 gemm left 137 GB kept and 11 shapes out of memory (s14)
            for k in (kern, *getattr(kern, "variants", ())) if kern is not None else ():
                k.release_workspaces()
        status = ("WRONG " if not row.get("ok", True) else "") + row.get("error", "")
        print(f"{i:4d} {shape['family']:<18} {label(shape):<24} {row.get('runs', ''):<26} "
              f"tilec {row.get('tilec_ms', float('nan')):8.4f} ms  {row.get('peer', 'peer')} "
              f"{row.get('peer_ms', float('nan')):8.4f} ms  {row.get('ratio', float('nan')):5.2f}x  "
              f"err {row.get('err', float('nan')):.2g} {status}", flush=True)
        if i % 50 == 49:
            save(False)
    if breakdown:
        profile_worst(rows, breakdown)
    save(True)
    done = sum("ratio" in r for r in rows)
    print(f"\n{done} of {len(rows)} shapes timed, {sum(1 for r in rows if r.get('ok') is False)} wrong, "
          f"{sum('error' in r for r in rows)} failed, {sum('skipped' in r for r in rows)} skipped (budget); "
          f"elapsed {time.time() - t_start:.1f} s -> {results_path}", flush=True)


# ---------------------------------------------------------------------------------------------------- report (CPU)
def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, linear between the closest ranks (numpy's default), of a non-empty list."""
    import numpy as np

    return float(np.percentile(values, q))


def stats(rows: list[dict]) -> dict:
    """Per family (and over all families): shape counts, wrong and failed counts, and the worst, 10th percentile
    and median ratio over the correct shapes, for all of them, the tuned ones and the others."""
    out = {}
    for fam in FAMILIES + ["all"]:
        mine = [r for r in rows if fam == "all" or r["family"] == fam]
        if not mine:
            continue
        entry = {"shapes": len(mine), "wrong": sum(1 for r in mine if r.get("ok") is False),
                 "no_tma": sum(1 for r in mine if str(r.get("runs", "")).endswith("__no_tma")),
                 "failed": sum(1 for r in mine if "error" in r), "skipped": sum(1 for r in mine if "skipped" in r)}
        for part, sel in (("all", mine), ("tuned", [r for r in mine if r["tuned"]]),
                          ("untuned", [r for r in mine if not r["tuned"]])):
            ratios = sorted(r["ratio"] for r in sel if r.get("ok") and "ratio" in r)
            entry[part] = ({"n": len(ratios), "worst": ratios[0], "p10": percentile(ratios, 10),
                            "median": percentile(ratios, 50)} if ratios else {"n": 0})
        out[fam] = entry
    return out


def worst(rows: list[dict], n: int = 10) -> list[dict]:
    return sorted((r for r in rows if r.get("ok") and "ratio" in r), key=lambda r: r["ratio"])[:n]


def regrets(rows: list[dict]) -> dict[str, list[float]]:
    """Per family, at each shape whose variants were all timed: the time of the variant the dispatch ran (the
    variants' own timing of it, so both sides are measured alike) over the fastest variant's."""
    out: dict[str, list[float]] = {}
    for r in rows:
        times = r.get("variants_ms")
        if not times or not r.get("runs"):
            continue
        chosen = _ran_ms(r)
        if chosen is not None:
            out.setdefault(r["family"], []).append(chosen / min(times.values()))
    return out


def _ran_ms(row: dict) -> float | None:
    """The `--variants` time of the variant a shape's public call ran (its "runs": the variant's kernel, its no-TMA
    twin or "+padded"), None where the run did not time it."""
    ran = row["runs"].split("+")[0]
    return next((t for name, t in row["variants_ms"].items() if ran == name or ran.startswith(name + "__")), None)


def rescore(rows: list[dict], build_dir: Path) -> dict[str, dict]:
    """Per family: (regrets, ratios) of the run's own choice and of the choice the manifests in `build_dir` make, at
    the shapes whose variants were all timed (`--variants`), each priced at the measured time of the chosen
    variant. A manifest whose variants the run did not time is an error: its choices cannot be priced."""
    sys.path.insert(0, str(ROOT))
    from tilec.runtime.dispatch import choose

    tables: dict[str, dict] = {}
    out: dict[str, dict] = {}
    for r in rows:
        times = r.get("variants_ms")
        if not times or not r.get("runs") or not r.get("peer_ms"):
            continue
        if r["build"] not in tables:
            manifest = json.loads((build_dir / f"{r['build']}.cubin.json").read_text())
            (tables[r["build"]],) = manifest["dispatch"].values()
        table = tables[r["build"]]
        mine = table["configs"][choose(table, r["sizes"])]["kernel"]
        if mine not in times:
            raise SystemExit(f"{build_dir}/{r['build']}.cubin.json chooses {mine}, which the run did not time "
                             f"(it timed {', '.join(times)}): rescore needs the same variants")
        ran = _ran_ms(r)
        if ran is None:
            continue
        fam = out.setdefault(r["family"], {"run": ([], []), "rescored": ([], [])})
        for key, t in (("run", ran), ("rescored", times[mine])):
            fam[key][0].append(t / min(times.values()))
            fam[key][1].append(r["peer_ms"] / t)
    return out


def rescore_markdown(scored: dict[str, dict]) -> str:
    lines = ["| family | shapes | dispatch | mean regret | shapes over 1.10 | worst / 10th percentile / median ratio |",
             "|---|---|---|---|---|---|"]
    for fam, parts in scored.items():
        for key, (regret, ratio) in parts.items():
            ratio = sorted(ratio)
            mean = 2 ** (sum(math.log2(v) for v in regret) / len(regret))
            lines.append(f"| {fam} | {len(regret)} | {key} | {mean:.3f} | {sum(v > 1.10 for v in regret)} | "
                         f"{ratio[0]:.2f} / {percentile(ratio, 10):.2f} / {percentile(ratio, 50):.2f} |")
    return "\n".join(lines)


def retag_tuned(rows: list[dict], root: Path = ROOT) -> None:
    """Whether each shape is one its build's database entry was tuned at, from the checkout's samples/*.tune.json."""
    tuned = tuned_shapes(root)
    for r in rows:
        r["tuned"] = _is_tuned(tuned, r["build"], r["sizes"])


def markdown(results: dict) -> str:
    rows, meta = results["rows"], results["meta"]
    st = stats(rows)

    def cell(part: dict) -> str:
        return f"{part['worst']:.2f} / {part['p10']:.2f} / {part['median']:.2f} ({part['n']})" if part["n"] else "—"

    lines = [f"{meta.get('gpu', '?')}, built from {meta.get('commit', '?')}, run {meta.get('date', '?')} "
             f"({meta.get('elapsed_s', '?')} s; torch {meta.get('torch', '?')}, triton {meta.get('triton', '?')})",
             "", "ratio = peer time / tilec time (> 1: tilec faster); worst / 10th percentile / median (shapes), "
             "over the shapes whose output matched the peer's", "",
             "| family | shapes | wrong | failed | on a no-TMA twin | all | tuned shapes | untuned shapes |",
             "|---|---|---|---|---|---|---|---|"]
    for fam, e in st.items():
        extra = f" (+{e['skipped']} skipped)" if e["skipped"] else ""
        lines.append(f"| {fam} | {e['shapes']}{extra} | {e['wrong']} | {e['failed']} | {e['no_tma']} | "
                     f"{cell(e['all'])} | {cell(e['tuned'])} | {cell(e['untuned'])} |")
    lines += ["", "The 10 worst shapes:", "",
              "| family | shape | tuned | what runs | tilec ms | peer | peer ms | ratio |",
              "|---|---|---|---|---|---|---|---|"]
    for r in worst(rows):
        lines.append(f"| {r['family']} | {label(r)} | {'yes' if r['tuned'] else 'no'} | {r.get('runs', '')} | "
                     f"{r['tilec_ms']:.4f} | {r['peer']} | {r['peer_ms']:.4f} | {r['ratio']:.2f} |")
    padded = sorted(r["peer_with_padding_ms"] / r["tilec_ms"] for r in rows
                    if r.get("ok") and "peer_with_padding_ms" in r)
    if padded:
        lines += ["", f"fp8 at a K or N that is not a multiple of 16 ({len(padded)} shapes), against what a user of "
                      "_scaled_mm runs there, the operands padded to 16 and then _scaled_mm (the table above times "
                      f"_scaled_mm alone on operands padded beforehand): worst / 10th percentile / median "
                      f"{padded[0]:.2f} / {percentile(padded, 10):.2f} / {percentile(padded, 50):.2f}"]
    regret = regrets(rows)
    if regret:
        lines += ["", "The dispatch's choice against the fastest tuned variant at each shape (`--variants`: every "
                      "variant timed; regret = the chosen one's time / the fastest one's):", "",
                  "| family | shapes | median regret | 90th percentile | worst | shapes over 1.10 |",
                  "|---|---|---|---|---|---|"]
        for fam, values in regret.items():
            values = sorted(values)
            lines.append(f"| {fam} | {len(values)} | {percentile(values, 50):.2f} | {percentile(values, 90):.2f} | "
                         f"{values[-1]:.2f} | {sum(v > 1.10 for v in values)} |")
    bad = [r for r in rows if r.get("ok") is False or "error" in r]
    if bad:
        lines += ["", f"Wrong or failed ({len(bad)}):", ""]
        lines += [f"- {r['family']} {label(r)} ({r.get('runs', '?')}): " +
                  (r.get("error") or f"error {r['err']:.3g} against the peer") for r in bad[:40]]
        lines += [f"- ... and {len(bad) - 40} more"] if len(bad) > 40 else []
    return "\n".join(lines)


def plot(rows: list[dict], path: Path, title: str = "") -> None:
    """Ratio against problem size, one panel per family; the tuned shapes filled, the others hollow."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("the plot needs matplotlib: pip install 'tilec[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fams = [f for f in FAMILIES if any(r["family"] == f for r in rows)]
    cols = 5
    nrows = -(-len(fams) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3.4 * nrows), squeeze=False)
    for ax in axes.flat[len(fams):]:
        ax.set_visible(False)
    for ax, fam in zip(axes.flat, fams, strict=False):
        mine = [r for r in rows if r["family"] == fam and r.get("ok") and "ratio" in r]
        unit = work(mine[0])[1] if mine else ""
        for tuned, style in ((False, {"facecolors": "none", "edgecolors": "tab:blue", "label": "untuned"}),
                             (True, {"color": "tab:red", "label": "tuned"})):
            pts = [(work(r)[0], r["ratio"]) for r in mine if r["tuned"] == tuned]
            if pts:
                ax.scatter(*zip(*pts, strict=True), s=14, **style)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(0.8, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(FixedLocator([0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1, 1.5, 2, 3, 5, 10]))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_title(f"{fam} ({len(mine)})", fontsize=10)
        ax.set_xlabel(unit, fontsize=8)
        ax.set_ylabel("peer time / tilec time", fontsize=8)
        ax.tick_params(labelsize=7)
        if mine:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def report(results_path: Path, plot_path: Path | None, markdown_path: Path | None) -> None:
    results = json.loads(results_path.read_text())
    retag_tuned(results["rows"])
    text = markdown(results)
    print(text)
    if markdown_path:
        markdown_path.write_text(text + "\n")
    if plot_path:
        meta = results["meta"]
        plot(results["rows"], plot_path, f"tilec default builds against their peers, {meta.get('gpu', '?')}, "
                                         f"{meta.get('commit', '?')} (dashed: 0.8x)")
        print(f"\nplot: {plot_path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["build", "run", "report", "rescore"])
    ap.add_argument("path", type=Path, help="build/run: the artifact folder; report, rescore: the results JSON")
    ap.add_argument("build_dir", type=Path, nargs="?", help="rescore: the build folder whose dispatch to score")
    ap.add_argument("--results", type=Path, help="run: where to write the results (default: DIR/results.json)")
    ap.add_argument("--budget", type=float, default=230.0, help="run: stop timing new shapes after this many seconds")
    ap.add_argument("--only", action="append", choices=FAMILIES,
                    help="build: just the artifacts of these families; run: just their shapes (repeatable)")
    ap.add_argument("-Xcompiler", dest="toolchain_args", action="append", metavar="ARG",
                    help="build: pass ARG to the device toolchain (repeatable; an A/B of its flags)")
    ap.add_argument("--compiler", choices=["nvcc", "nvrtc"],
                    help="build: the device toolchain (default: tilec's, nvcc where it is on PATH; a user without a "
                         "CUDA toolkit gets NVRTC, whose SASS differs from nvcc's: an A/B of the two)")
    ap.add_argument("--tilec-flag", dest="flags", action="append", metavar="FLAG",
                    help="build: pass FLAG to every tilec build (repeatable; an A/B of a code-generation switch, "
                         "e.g. --tilec-flag=--simplify-indices)")
    ap.add_argument("--repeat", type=int, default=REPEAT, metavar="N",
                    help=f"run: time each side N times, in turn, and take the medians (default {REPEAT})")
    ap.add_argument("--breakdown", type=int, default=0, metavar="N",
                    help="run: afterwards profile the N worst shapes (the GPU kernels of a call, both sides)")
    ap.add_argument("--variants", action="store_true",
                    help="run: also time every tuned variant of a dispatching kernel at each shape (the dispatch's "
                         "choice against the best of them)")
    ap.add_argument("--misaligned", action="store_true",
                    help="run: just the gemm and fp8 shapes with rows that are not a multiple of 16 bytes (an A/B of "
                         "TILEC_PADDING=always against never)")
    ap.add_argument("--split-k", action="store_true",
                    help="run: just the shapes whose dispatch picks a split-K variant (an A/B of its stages)")
    ap.add_argument("--plot", type=Path, default=ROOT / "bench" / "shape_sweep.png", help="report: the PNG")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--markdown", type=Path, help="report: also write the table here")
    a = ap.parse_args()
    if a.mode == "build":
        build(a.path, a.only, a.toolchain_args, a.compiler, a.flags)
    elif a.mode == "run":
        if a.repeat < 1:
            ap.error("--repeat takes a whole number of 1 or more")
        run(a.path, a.results or a.path / "results.json", a.budget, a.only, a.breakdown, a.variants, a.misaligned,
            a.split_k, a.repeat)
    elif a.mode == "rescore":
        if a.build_dir is None:
            ap.error("rescore needs the build folder: rescore RESULTS DIR")
        print(rescore_markdown(rescore(json.loads(a.path.read_text())["rows"], a.build_dir)))
    else:
        report(a.path, None if a.no_plot else a.plot, a.markdown)


if __name__ == "__main__":
    main()
