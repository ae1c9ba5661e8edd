"""What softmax at odd row lengths could run at: a hand-written peeled-vector kernel beside tilec's build and torch.

    python bench/odd_rows_trial.py build DIR     # here: tilec's default softmax bf16 build (the committed database)
    python3 bench/odd_rows_trial.py run DIR      # on the GPU (torch, cupy, triton): every kernel at each shape

A bf16 row of an odd length (a vocabulary of 50257) starts at any element of its 16-byte chunk, so tilec's row
kernels load and store it element by element (their vector path needs every row aligned; `--realign-rows`' funnel
shifts lost, bench/RESULTS.md s10 and s35). The kernel here peels each row instead: the few elements before the
row's first 16-byte boundary and after its last one go element by element, the rest as aligned 16-byte vectors in
both passes (Y's rows have X's misalignment, as both tensors start aligned). A row's max and sum do not depend on
where an element sits, so the peel costs nothing but the scalar ends. One block a row (a grid-stride loop over the
rows when there are more than the grid), online max and sum a thread, one block reduction, then the output. If it
runs well ahead of tilec's build at the odd shapes, a peeled schedule is worth building into the row kernels'
lowering; the aligned shape beside them says what the peel itself costs. Every output is checked against torch in
float32 (max abs error under 2e-3).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = [(4096, 50257), (200, 50257), (8, 50257), (37, 32001), (1000, 12289), (6156, 2047), (4000, 2049),
          (16384, 4099), (4096, 50264), (4096, 8192)]

PEELED = r"""
#define LOG2E 1.4426950408889634f
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float bf16_to_f32(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }

__device__ __forceinline__ unsigned short f32_to_bf16(float f) {  // round to nearest even (no NaN inputs here)
    unsigned u = __float_as_uint(f);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// merge (m2, s2) into (m, s): s is the sum of exp2(v - m) over the values seen, m their max (-inf: none yet)
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    if (mn == NEG_INF) return;
    s = s * exp2f(m - mn) + s2 * exp2f(m2 - mn);
    m = mn;
}

__device__ __forceinline__ void add_vector(float& m, float& s, uint4 q) {
    unsigned w[4] = {q.x, q.y, q.z, q.w};
    float v[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[2 * i] = __uint_as_float(w[i] << 16) * LOG2E;
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u) * LOG2E;
    }
    float lm = v[0];
#pragma unroll
    for (int i = 1; i < 8; ++i) lm = fmaxf(lm, v[i]);
    if (lm == NEG_INF) return;
    float mn = fmaxf(m, lm), ls = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) ls += exp2f(v[i] - mn);
    s = s * exp2f(m - mn) + ls;
    m = mn;
}

__device__ __forceinline__ uint4 normalize_vector(uint4 q, float m, float inv) {
    unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float lo = exp2f(__uint_as_float(w[i] << 16) * LOG2E - m) * inv;
        float hi = exp2f(__uint_as_float(w[i] & 0xffff0000u) * LOG2E - m) * inv;
        w[i] = (unsigned)f32_to_bf16(lo) | ((unsigned)f32_to_bf16(hi) << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

extern "C" __global__ void __launch_bounds__(THREADS) softmax_peeled(
        const unsigned short* __restrict__ X, unsigned short* __restrict__ Y, int M, int N) {
    __shared__ float red_m[THREADS / 32], red_s[THREADS / 32];
    for (int row = blockIdx.x; row < M; row += gridDim.x) {
        const unsigned short* x = X + (unsigned long long)row * N;
        unsigned short* y = Y + (unsigned long long)row * N;
        int head = min((int)((16 - ((unsigned long long)x & 15)) & 15) >> 1, N);
        int nvec = (N - head) >> 3;
        int tail = head + nvec * 8;
        const uint4* xv = reinterpret_cast<const uint4*>(x + head);
        float m = NEG_INF, s = 0.f;
        int v = threadIdx.x;
        for (; v + 3 * THREADS < nvec; v += 4 * THREADS) {  // four vectors in flight a thread
            uint4 a = xv[v], b = xv[v + THREADS], c = xv[v + 2 * THREADS], d = xv[v + 3 * THREADS];
            add_vector(m, s, a); add_vector(m, s, b); add_vector(m, s, c); add_vector(m, s, d);
        }
        for (; v < nvec; v += THREADS) add_vector(m, s, xv[v]);
        for (int j = threadIdx.x; j < head; j += THREADS) merge(m, s, bf16_to_f32(x[j]) * LOG2E, 1.f);
        for (int j = tail + threadIdx.x; j < N; j += THREADS) merge(m, s, bf16_to_f32(x[j]) * LOG2E, 1.f);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            merge(m, s, m2, s2);
        }
        if ((threadIdx.x & 31) == 0) { red_m[threadIdx.x >> 5] = m; red_s[threadIdx.x >> 5] = s; }
        __syncthreads();
        m = red_m[0]; s = red_s[0];
        for (int w = 1; w < THREADS / 32; ++w) merge(m, s, red_m[w], red_s[w]);
        __syncthreads();  // red_* are rewritten by the next row
        float inv = 1.f / s;
        uint4* yv = reinterpret_cast<uint4*>(y + head);
        v = threadIdx.x;
        for (; v + 3 * THREADS < nvec; v += 4 * THREADS) {
            uint4 a = xv[v], b = xv[v + THREADS], c = xv[v + 2 * THREADS], d = xv[v + 3 * THREADS];
            yv[v] = normalize_vector(a, m, inv); yv[v + THREADS] = normalize_vector(b, m, inv);
            yv[v + 2 * THREADS] = normalize_vector(c, m, inv); yv[v + 3 * THREADS] = normalize_vector(d, m, inv);
        }
        for (; v < nvec; v += THREADS) yv[v] = normalize_vector(xv[v], m, inv);
        for (int j = threadIdx.x; j < head; j += THREADS)
            y[j] = f32_to_bf16(exp2f(bf16_to_f32(x[j]) * LOG2E - m) * inv);
        for (int j = tail + threadIdx.x; j < N; j += THREADS)
            y[j] = f32_to_bf16(exp2f(bf16_to_f32(x[j]) * LOG2E - m) * inv);
    }
}
"""

# name -> (threads a block, blocks a multiprocessor at most: the grid is min(M, that x the multiprocessors))
PEELED_VARIANTS = {"peeled256": (256, 8), "peeled512": (512, 4), "peeled1024": (1024, 2)}


def build(out: Path) -> int:
    from tilec.cli.main import main as tilec_main

    out.mkdir(parents=True, exist_ok=True)
    (out / "peeled.cu").write_text(PEELED)
    return tilec_main([str(ROOT / "samples" / "softmax.tile"), "--target", "sm90", "-Ddtype=bf16",
                       "-o", str(out / "softmax.cubin")])


def peeled_launch(kernel, threads: int, grid: int, x, m: int, n: int):
    """A call that binds the output y and returns the launch (cupy views made once, not per launch)."""
    import cupy
    import torch

    cx = cupy.from_dlpack(x.view(torch.int16))

    def bind(y):
        args = (cx, cupy.from_dlpack(y.view(torch.int16)), cupy.int32(m), cupy.int32(n))
        return lambda: kernel((grid,), (threads,), args)
    return bind


def run(out: Path) -> int:
    import cupy
    import torch
    from triton.testing import do_bench

    import tilec.runtime as rt

    tilec_mod = rt.load(out / "softmax.cubin")
    source = (out / "peeled.cu").read_text()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernels = {name: (cupy.RawKernel(f"#define THREADS {t}\n" + source, "softmax_peeled"), t, t_blocks)
               for name, (t, t_blocks) in PEELED_VARIANTS.items()}
    names = ["tilec", *kernels, "torch"]
    print(f"{'M':>6} {'N':>6}  " + "  ".join(f"{n:>11}" for n in names) + "   (us)", flush=True)
    bad = 0
    for m, n in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(m * 7 + n)
        x = (torch.randn(m, n, device="cuda", generator=g) * 3).to(torch.bfloat16)
        want = torch.softmax(x.float(), dim=1)
        # each entry binds an output y and returns the launch to time
        calls = {"tilec": lambda y, x=x: (lambda: tilec_mod.softmax(x, y))}
        for name, (kernel, threads, per_sm) in kernels.items():
            calls[name] = peeled_launch(kernel, threads, min(m, per_sm * sms), x, m, n)
        cells = []
        for call in calls.values():
            y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            launch = call(y)
            launch()
            torch.cuda.synchronize()
            ok = (y.float() - want).abs().max().item() <= 2e-3
            bad += not ok
            us = do_bench(launch, warmup=10, rep=60, return_mode="median") * 1000
            cells.append(f"{us:8.1f}{'' if ok else ' BAD'}")
        peer = do_bench(lambda x=x: torch.softmax(x, dim=1), warmup=10, rep=60, return_mode="median") * 1000
        cells.append(f"{peer:8.1f}")
        print(f"{m:6} {n:6}  " + "  ".join(f"{c:>11}" for c in cells), flush=True)
    print("all correct" if not bad else f"{bad} WRONG")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run"):
        raise SystemExit(__doc__)
    sys.exit(build(Path(sys.argv[2])) if sys.argv[1] == "build" else run(Path(sys.argv[2])))
