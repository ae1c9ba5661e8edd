"""The TileLang ports in examples/tilelang/: their numpy references and test shapes (read by
tests/test_examples_tilelang.py), and the example x target table of docs/tilelang_ports.md.

    python scripts/tilelang_ports.py            # build every port for every target, rewrite the table
    python scripts/tilelang_ports.py --check    # fail if the table in the docs is out of date

"Builds" means the target's toolchain produced a binary here (nvcc cubin, hipcc code object, WGSL
validated by naga); "runs" means it was also executed and matched the interpreter (WebGPU under
wgpu/lavapipe on this machine). A target that refuses a port says why, in the compiler's words.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "tilelang"
DOC = ROOT / "docs" / "tilelang_ports.md"
TARGETS = ["sm80", "sm90", "gfx942", "webgpu", "ascend910b"]


@dataclasses.dataclass
class Case:
    name: str  # the file's stem
    reference: Callable[[dict, dict], dict]  # (arguments after the run, sizes) -> expected outputs
    sizes: dict[str, dict[str, int]]  # "regular" and "ragged" runtime sizes
    defines: dict[str, object] = dataclasses.field(default_factory=dict)  # small tiles for the interpreter
    build_defines: dict[str, object] = dataclasses.field(default_factory=dict)  # for the target builds
    webgpu_defines: dict[str, object] = dataclasses.field(default_factory=dict)  # smaller tiles (16 KB of shared)
    gfx942_defines: dict[str, object] = dataclasses.field(default_factory=dict)  # smaller tiles (64 KB of LDS)
    kernels: list[str] | None = None  # run in this order (default: the file's first kernel)
    fit_targets: tuple[str, ...] = ()  # built with --fit there (the consts' defaults overflow the target)
    folder: Path = EXAMPLES  # where the .tile file is (bench/constructs/ holds issue #30's construct cases)
    inputs: Callable[[dict, np.random.Generator], dict] | None = None  # default: random normal inputs
    rtol: float = 1e-5
    atol: float = 1e-5
    tilelang: str = ""  # the example it was ported from
    source: str | None = None  # the .tile file's stem when several cases share one file
    random_inputs_ok: bool = True  # `tilec run --check` may use random inputs (False: they must be structured)
    # WebGPU limits above the spec's defaults that the port is built with (tilec --max-storage-buffers N: most
    # desktop adapters grant them, and the runtime requests them)
    webgpu_limits: dict[str, int] = dataclasses.field(default_factory=dict)
    # outputs whose last axis holds a set, in the order the kernel's atomics ran: a GPU run is compared sorted
    unordered_rows: tuple[str, ...] = ()

    def limits_for(self, target: str) -> dict[str, int]:
        return self.webgpu_limits if target == "webgpu" else {}

    def limit_flags(self, target: str) -> list[str]:
        return [f"--{k.replace('_', '-')}={v}" for k, v in self.limits_for(target).items()]

    @property
    def kernel(self) -> str | None:
        """The one kernel of the file this case builds (None: all of them)."""
        return self.kernels[0] if self.kernels and len(self.kernels) == 1 else None

    def defines_for(self, target: str) -> dict[str, object]:
        per_target = {"webgpu": self.webgpu_defines, "gfx942": self.gfx942_defines}.get(target, {})
        defines = {**self.build_defines, **per_target}
        if target in self.fit_targets:  # what `tilec --fit` builds (tilec/tuning/fit.py)
            from tilec.options import CompileOptions
            from tilec.tuning.fit import find_fit

            fit = find_fit(str(self.folder / self.file), CompileOptions.make((target,), defines=defines,
                                                                          kernel=self.kernel))
            defines.update(fit.defines if fit else {})
        return defines

    @property
    def file(self) -> str:
        return f"{self.source or self.name}.tile"


def f32(a):
    return np.asarray(a).astype(np.float32)


def round_to(a, dtype: str):
    import ml_dtypes

    return np.asarray(a, np.float32).astype(getattr(ml_dtypes, dtype) if dtype in ("bfloat16", "float8_e4m3fn")
                                            else dtype).astype(np.float32)


# ------------------------------------------------------------------ references


def ref_add(a, s):
    return {"C": f32(a["A"]) + f32(a["B"])}


def ref_matmul(a, s):
    return {"C": round_to(f32(a["A"]) @ f32(a["B"]), "float16")}


def ref_matmul_f32(a, s):
    return {"C": f32(a["A"]) @ f32(a["B"])}


def ref_gemv(a, s):
    return {"C": round_to(f32(a["B"]) @ f32(a["A"]), "float16")}


def window_logits(sizes, rng):
    """Rows of logits with windows [ks, ke) inside the row (some empty at the start, one reaching the end)."""
    m, n = sizes["M"], sizes["S"]
    ks = rng.integers(0, n, m).astype(np.int32)
    ke = np.minimum(ks + rng.integers(1, n, m), n).astype(np.int32)
    ke[0] = n
    logits = rng.standard_normal((m, n)).astype(np.float32)
    return {"Logits": logits, "Logits_in": logits.copy(), "CuSeqLenKS": ks, "CuSeqLenKE": ke}


def ref_clean_logits(a, s):
    out = a["Logits_in"].copy()
    cols = np.arange(out.shape[1])[None, :]
    ks, ke = a["CuSeqLenKS"].astype(np.int64)[:, None], a["CuSeqLenKE"].astype(np.int64)[:, None]
    out[(cols < ks) | (cols >= ke)] = -np.inf
    rows = np.arange(out.shape[0])
    out[rows, ks[:, 0]] = np.inf
    out[rows, np.maximum(ke[:, 0] - 1, 0)] = np.inf
    return {"Logits": out}


def ref_rms_norm(a, s):
    x = f32(a["A"])
    return {"B": x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-12)}


def ref_softmax(a, s):
    x = f32(a["X"])
    e = np.exp(x - x.max(1, keepdims=True))
    return {"Y": round_to(e / e.sum(1, keepdims=True), "float16")}


def ref_cast_fp8(a, s):
    x = f32(a["X"])
    m, n = x.shape
    groups = -(-n // 128)
    padded = np.zeros((m, groups * 128), np.float32)
    padded[:, :n] = x
    g = padded.reshape(m, groups, 128)
    scale = np.maximum(np.abs(g).max(-1), 1e-4) / 448.0
    q = np.clip(g / scale[..., None], -448.0, 448.0).reshape(m, -1)[:, :n]
    return {"X_fp8": round_to(q, "float8_e4m3fn"), "X_amax": scale}


def ref_topk(a, s):
    x = f32(a["logits"])
    order = np.argsort(-x, axis=1, kind="stable")[:, :4]
    return {"topk_gates": np.take_along_axis(x, order, 1), "topk_indices": order.astype(np.int32)}


def distinct_logits(sizes, rng):
    m = sizes["M"]
    return {"logits": np.stack([rng.permutation(64) for _ in range(m)]).astype(np.float32) / 8.0,
            "topk_gates": np.zeros((m, 4), np.float32), "topk_indices": np.zeros((m, 4), np.int32)}


def ref_topk_selector(a, s):
    """The indices of each row's topk largest values in its window, in the kernel's order when they are the
    right set (the kernel's order is the order its atomics ran in), else numpy's."""
    x, got = f32(a["input"]), np.asarray(a["index"])
    want = np.zeros_like(got)
    for b in range(x.shape[0]):
        lo, hi = int(a["starts"][b]), int(a["ends"][b])
        top = lo + np.argsort(-x[b, lo:hi], kind="stable")[:got.shape[1]]
        want[b] = got[b] if sorted(got[b].tolist()) == sorted(top.tolist()) else top
    return {"index": want}


def topk_windows(sizes, rng, topk=64):
    """Rows of distinct values (no ties, so the topk set is one), each with a window [starts, ends) of at least
    topk values."""
    b, n = sizes["batch"], sizes["seq_len"]
    x = np.stack([rng.permutation(n) for _ in range(b)]).astype(np.float32)
    x = (x - n / 2) / (n / 8)  # (both signs, so both halves of the order-preserving image are used)
    starts = rng.integers(0, (n - topk) // 4 + 1, b).astype(np.int32)
    ends = np.array([rng.integers(st + topk, n + 1) for st in starts], np.int32)
    return {"input": x, "index": np.zeros((b, topk), np.int32), "starts": starts, "ends": ends}


def ref_chunk_cumsum(a, s, block=16):
    g = f32(a["G"])
    b, n, h = g.shape
    out = np.zeros_like(g)
    for start in range(0, n, block):
        out[:, start:start + block] = np.cumsum(g[:, start:start + block], axis=1)
    return {"G_new": out}


def _attention(q, k, v, causal_offset=None):
    """softmax(q k^T / sqrt(d)) v over the last two axes; causal_offset: query i sees keys <= i + offset."""
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    if causal_offset is not None:
        qi = np.arange(q.shape[-2])[:, None]
        ki = np.arange(k.shape[-2])[None, :]
        s = np.where(ki <= qi + causal_offset, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("...qk,...kd->...qd", p / p.sum(-1, keepdims=True), v)


def ref_mha_bhsd(a, s, causal=False):
    q, k, v = f32(a["Q"]), f32(a["K"]), f32(a["V"])
    offset = k.shape[2] - q.shape[2] if causal else None
    return {"Output": round_to(_attention(q, k, v, offset), "float16")}


def ref_gqa_bshd(a, s, groups=4, causal=True):
    q, k, v = (f32(a[n]).transpose(0, 2, 1, 3) for n in ("Q", "K", "V"))  # -> [b, h, s, d]
    k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    o = _attention(q, k, v, 0 if causal else None)
    return {"Output": round_to(o.transpose(0, 2, 1, 3), "float16")}


def ref_blocksparse(a, s, bm=32, bn=32, bk=16):
    x, w, mask = f32(a["A"]), f32(a["B"]), a["BlockMask"]
    m, kdim = x.shape
    n = w.shape[1]
    c = np.zeros((m, n), np.float32)
    for i in range(mask.shape[0]):
        for j in range(mask.shape[1]):
            for t in range(mask.shape[2]):
                if mask[i, j, t]:
                    c[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += (
                        x[i * bm:(i + 1) * bm, t * bk:(t + 1) * bk] @ w[t * bk:(t + 1) * bk, j * bn:(j + 1) * bn])
    return {"C": round_to(c, "float16")}


def ref_conv(a, s, stride=1, pad=1, dil=1):
    x, w = f32(a["data"]), f32(a["kernel_"])
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    xp = np.zeros((n, h + 2 * pad, wd + 2 * pad, c), np.float32)
    xp[:, pad:pad + h, pad:pad + wd] = x
    out = np.zeros((n, oh, ow, f), np.float32)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i * dil:i * dil + stride * oh:stride, j * dil:j * dil + stride * ow:stride]
            out += patch @ w[i, j]
    return {"out_": round_to(out, "float16")}


def grouped_inputs(sizes, rng, block_m=32):
    g, k, n = sizes["G"], sizes["K"], sizes["N"]
    rows = [int(r) for r in rng.integers(1, 50, g)]
    offsets = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int32)
    tiles = [-(-r // block_m) for r in rows]
    padded = (np.concatenate([[0], np.cumsum(tiles)[:-1]]) * block_m).astype(np.int32)
    total = sum(rows)
    return {"A": rng.standard_normal((total, k)).astype(np.float16),
            "B": rng.standard_normal((g, k, n)).astype(np.float16),
            "C": np.zeros((total, n), np.float16), "batch_sizes": np.array(rows, np.int32),
            "batch_offsets": offsets, "batch_padded_offsets": padded, "total_m_blocks": int(sum(tiles))}


def ref_grouped(a, s):
    x, w = f32(a["A"]), f32(a["B"])
    out = np.concatenate([x[o:o + r] @ w[i] for i, (o, r) in enumerate(zip(a["batch_offsets"], a["batch_sizes"],
                                                                           strict=True))])
    return {"C": round_to(out, "float16")}


def ref_linear_attn(a, s, chunk=16):
    q, k, v = (f32(a[n]).transpose(0, 2, 1, 3) for n in ("Q", "K", "V"))  # [b, h, s, d]
    q = round_to(q / np.sqrt(q.shape[-1]), "float16")
    seq = q.shape[2]
    scores = np.einsum("bhqd,bhkd->bhqk", q, k)
    scores = np.where(np.arange(seq)[:, None] >= np.arange(seq)[None, :], scores, 0)
    o = np.einsum("bhqk,bhkd->bhqd", scores, v)
    state = np.einsum("bhsk,bhsv->bhkv", k, v)
    return {"O": o.transpose(0, 2, 1, 3), "final_state": state}


def layernorm_fwd_ref(x, gamma, beta, eps=1e-5):
    mean = x.mean(1)
    rstd = 1 / np.sqrt((x * x).mean(1) - mean * mean + eps)
    return (x - mean[:, None]) * rstd[:, None] * gamma + beta, mean, rstd


def ref_layernorm_fwd(a, s):
    y, mean, rstd = layernorm_fwd_ref(f32(a["X"]), f32(a["gamma"]), f32(a["beta"]))
    return {"Y": round_to(y, "bfloat16"), "Mean": mean, "Rstd": rstd}


def layernorm_bwd_inputs(sizes, rng, d=64):
    import ml_dtypes

    n = sizes["N"]
    x = rng.standard_normal((n, d)).astype(ml_dtypes.bfloat16)
    _, mean, rstd = layernorm_fwd_ref(f32(x), 0, 0)
    return {"DY": rng.standard_normal((n, d)).astype(ml_dtypes.bfloat16), "X": x,
            "gamma": rng.standard_normal(d).astype(ml_dtypes.bfloat16), "Mean": mean.astype(np.float32),
            "Rstd": rstd.astype(np.float32), "DX": np.zeros((n, d), ml_dtypes.bfloat16),
            "DGamma": np.zeros(d, np.float32), "DBeta": np.zeros(d, np.float32)}


def ref_layernorm_bwd(a, s):
    dy, x, g = f32(a["DY"]), f32(a["X"]), f32(a["gamma"])
    x_hat = (x - a["Mean"][:, None]) * a["Rstd"][:, None]
    dx_hat = dy * g
    c1 = (dx_hat * x_hat).mean(1, keepdims=True)
    c2 = dx_hat.mean(1, keepdims=True)
    dx = a["Rstd"][:, None] * (dx_hat - c2 - x_hat * c1)
    return {"DX": round_to(dx, "bfloat16"), "DGamma": (dy * x_hat).sum(0), "DBeta": dy.sum(0)}


def ref_gqa_decode(a, s, groups=4):
    q = f32(a["Q"])[:, :, None, :]  # [b, h, 1, d]
    k, v = (np.repeat(f32(a[n]).transpose(0, 2, 1, 3), groups, axis=1) for n in ("K", "V"))
    return {"Output": round_to(_attention(q, k, v)[:, :, 0], "float16")}


def dequant_inputs(sizes, rng):
    n, k = sizes["N"], sizes["K"]
    return {"A": rng.standard_normal(k).astype(np.float16),
            "B": rng.integers(0, 256, (n, -(-k // 2))).astype(np.uint8),
            "Scale": rng.uniform(0.01, 0.1, n).astype(np.float16), "C": np.zeros(n, np.float16)}


def ref_dequant_gemv(a, s):
    b = a["B"].astype(np.int32)
    w = np.stack([b & 15, b >> 4], axis=-1).reshape(b.shape[0], -1)[:, :s["K"]]
    w = np.where(w >= 8, w - 16, w).astype(np.float32) * f32(a["Scale"])[:, None]
    return {"C": round_to(w @ f32(a["A"]), "float16")}


def dequant_fp4_inputs(sizes, rng):
    m, n, k = sizes["M"], sizes["N"], sizes["K"]
    return {"A": rng.standard_normal((m, k)).astype(np.float16),
            "B": rng.integers(0, 256, (n, -(-k // 2))).astype(np.uint8), "Ct": np.zeros((n, m), np.float16)}


def ref_dequant_gemm_fp4(a, s):
    b = a["B"]
    f4 = np.stack([b & 15, b >> 4], axis=-1).reshape(b.shape[0], -1)[:, :s["K"]].astype(np.uint16)
    bits = ((f4 >> 3) << 15) | ((((f4 & 6) >> 1) + 14) << 10) | ((f4 & 1) << 9)  # s1e2m1 -> f16's bits
    return {"Ct": round_to(bits.view(np.float16).astype(np.float32) @ f32(a["A"]).T, "float16")}


def ref_gemm_fp8(a, s):
    return {"C": f32(a["A"]) @ f32(a["B"]).T}


def _attention_parts(q, k, v, causal):
    d = q.shape[-1]
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d)
    if causal:
        n = q.shape[-2]
        s = np.where(np.arange(n)[None, :] <= np.arange(n)[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(-1, keepdims=True)
    lse2 = (np.log(total) + m)[..., 0] / np.log(2)  # base-2 log-sum-exp of the scores
    return p / total, lse2


def attention_bwd_inputs(sizes, rng, causal=False):
    shape = (sizes["batch"], sizes["heads"], sizes["seq_len"], 64)
    q, k, v, do = (rng.standard_normal(shape).astype(np.float16) for _ in range(4))
    p, lse = _attention_parts(f32(q), f32(k), f32(v), causal)
    o = (p @ f32(v)).astype(np.float16)
    zeros32 = np.zeros(shape, np.float32)
    return {"Q": q, "K": k, "V": v, "dO": do, "O": o, "lse": lse.astype(np.float32),
            "Delta": np.zeros(shape[:3], np.float32), "dQ": zeros32, "dK": np.zeros(shape, np.float16),
            "dV": np.zeros(shape, np.float16), "dQ_out": np.zeros(shape, np.float16)}


def ref_attention_bwd(a, s, causal=False):
    q, k, v, do = (f32(a[n]) for n in ("Q", "K", "V", "dO"))
    p, _ = _attention_parts(q, k, v, causal)
    delta = (f32(a["O"]) * do).sum(-1)
    dv = np.swapaxes(p, -1, -2) @ do
    ds = p * (do @ np.swapaxes(v, -1, -2) - delta[..., None]) / np.sqrt(q.shape[-1])
    return {"Delta": delta, "dV": round_to(dv, "float16"), "dK": round_to(np.swapaxes(ds, -1, -2) @ q, "float16"),
            "dQ_out": round_to(ds @ k, "float16")}


def blocksparse_attn_inputs(sizes, rng, bm=32, bn=32):
    b, h, n = sizes["batch"], sizes["heads"], sizes["seq_len"]
    shape = (b, h, n, 64)
    mask = rng.random((b, h, -(-n // bm), -(-n // bn))) < 0.5
    mask[..., 0] = True  # every query block attends at least its first key block
    return {"Q": rng.standard_normal(shape).astype(np.float16), "K": rng.standard_normal(shape).astype(np.float16),
            "V": rng.standard_normal(shape).astype(np.float16), "BlockSparseMask": mask,
            "Output": np.zeros(shape, np.float16)}


def ref_blocksparse_attn(a, s, bm=32, bn=32):
    q, k, v = f32(a["Q"]), f32(a["K"]), f32(a["V"])
    n = q.shape[2]
    keep = np.repeat(np.repeat(a["BlockSparseMask"], bm, axis=2), bn, axis=3)[:, :, :n, :n]
    sc = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(64)
    sc = np.where(keep, sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    return {"Output": round_to((p / p.sum(-1, keepdims=True)) @ v, "float16")}


def ref_mla_decode(a, s):
    q, q_pe, kv, k_pe = (f32(a[n]) for n in ("Q", "Q_pe", "KV", "K_pe"))
    kv, k_pe = kv[:, :, 0], k_pe[:, :, 0]  # [b, s, d]
    scores = (np.einsum("bhd,bsd->bhs", q, kv) + np.einsum("bhd,bsd->bhs", q_pe, k_pe)) / np.sqrt(
        q.shape[-1] + q_pe.shape[-1])
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return {"Output": round_to(np.einsum("bhs,bsd->bhd", p / p.sum(-1, keepdims=True), kv), "float16")}


def semi_sparse_inputs(sizes, rng, meta_bits=16):
    """A_sparse and E as TileLang's compress() makes them from a random 2:4 sparse A (two values kept in each
    group of four along K; their two 2-bit positions packed low group first into E's integers), and B."""
    m, k, n = sizes["M"], sizes["K"], sizes["N"]
    pos = np.sort(np.argsort(rng.random((m, k // 4, 4)), axis=-1)[..., :2], axis=-1)  # two of each four
    kept = rng.standard_normal((m, k // 4, 2)).astype(np.float16)
    codes = (pos[..., 0] | pos[..., 1] << 2).astype(np.int64)  # 4 bits per group
    per_word = meta_bits // 4
    words = (codes.reshape(m, -1, per_word) << (4 * np.arange(per_word))).sum(-1)
    return {"A_sparse": kept.reshape(m, k // 2), "E": words.astype(np.uint16).view(np.int16),
            "B": rng.standard_normal((k, n)).astype(np.float16), "C": np.zeros((m, n), np.float32),
            "_positions": pos}


def ref_gemm_sp(a, s):
    m, k = s["M"], s["K"]
    codes = a["E"].view(np.uint16).astype(np.int64)
    codes = (codes[..., None] >> (4 * np.arange(4))) & 15  # [m, k // 16, 4]: the groups' codes
    codes = codes.reshape(m, k // 4)
    dense = np.zeros((m, k // 4, 4), np.float32)
    kept = f32(a["A_sparse"]).reshape(m, k // 4, 2)
    rows, groups = np.indices((m, k // 4))
    dense[rows, groups, codes & 3] = kept[..., 0]
    dense[rows, groups, (codes >> 2) & 3] = kept[..., 1]
    return {"C": dense.reshape(m, k) @ f32(a["B"])}


def ref_mha_bshd(a, s, causal=False):
    q, k, v = (f32(a[n]).transpose(0, 2, 1, 3) for n in ("Q", "K", "V"))  # -> [b, h, s, d]
    return {"Output": round_to(_attention(q, k, v, 0 if causal else None).transpose(0, 2, 1, 3), "float16")}


def ref_retention(a, s):
    q, k, v = (f32(a[n]).transpose(0, 2, 1, 3) for n in ("Q", "K", "V"))  # [b, h, s, d]
    heads, seq, dk = q.shape[1], q.shape[2], q.shape[3]
    bk = -(-dk // a["O"].shape[0])  # the kernel's BK
    decay = 1 - 2.0 ** (-5.0 - np.arange(heads))
    t = np.arange(seq)
    weight = np.where(t[:, None] >= t[None, :], decay[:, None, None] ** (t[:, None] - t[None, :]), 0.0)
    parts = []
    for lo in range(0, dk, bk):  # one partial output per DK block, as the kernel writes them
        scores = np.einsum("bhqd,bhkd->bhqk", q[..., lo:lo + bk], k[..., lo:lo + bk]) * dk ** -0.5
        parts.append(np.einsum("bhqk,bhkd->bhqd", scores * weight[None], v).transpose(0, 2, 1, 3))
    return {"O": np.stack(parts)}


def group_cast_inputs(sizes, rng):
    import ml_dtypes

    groups, n = sizes["BG"], sizes["N"]
    rows = rng.integers(1, sizes["M_max"] + 1, groups).astype(np.int32)
    rows[0] = sizes["M_max"]  # one group fills its slice
    return {"X": rng.standard_normal((int(rows.sum()), n)).astype(ml_dtypes.bfloat16), "batch_sizes": rows,
            "X_fp8": np.zeros((groups, sizes["M_max"], n), ml_dtypes.float8_e4m3fn),
            "X_amax": np.zeros((groups, sizes["M_max"], -(-n // 128)), np.float32)}


def ref_group_cast(a, s):
    x, rows = f32(a["X"]), a["batch_sizes"]
    groups, m_max, n = len(rows), s["M_max"], x.shape[1]
    q = np.zeros((groups, m_max, n), np.float32)
    amax = np.zeros((groups, m_max, -(-n // 128)), np.float32)
    start = 0
    for g, r in enumerate(rows):
        got = ref_cast_fp8({"X": x[start:start + r]}, {})
        q[g, :r], amax[g, :r] = got["X_fp8"], got["X_amax"]
        start += r
    return {"X_fp8": q, "X_amax": amax}


SMALL_ATTENTION = {"block_M": 16, "block_N": 32}  # WebGPU's 16 KB of workgroup memory

CASES: list[Case] = [
    Case("elementwise_add", ref_add, {"regular": {"M": 64, "N": 64}, "ragged": {"M": 45, "N": 37}},
         tilelang="elementwise/example_elementwise_add.py"),
    Case("gemm", ref_matmul, {"regular": {"M": 64, "N": 64, "K": 64}, "ragged": {"M": 50, "N": 37, "K": 45}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16}, rtol=2e-3, atol=2e-3,
         tilelang="gemm/example_gemm.py"),
    Case("gemm_splitk", ref_matmul_f32, {"regular": {"M": 64, "N": 64, "K": 128},
                                         "ragged": {"M": 33, "N": 47, "K": 90}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16, "split_k": 3}, rtol=1e-3, atol=1e-3,
         fit_targets=("ascend910b",), tilelang="gemm_splitk/example_tilelang_gemm_splitk.py"),
    Case("gemv", ref_gemv, {"regular": {"N": 128, "K": 128}, "ragged": {"N": 70, "K": 99}},
         defines={"block_N": 32, "block_K": 32}, rtol=2e-3, atol=2e-3, tilelang="gemv/example_gemv.py"),
    Case("gemv_threads", ref_gemv, {"regular": {"N": 128, "K": 128}, "ragged": {"N": 70, "K": 99}},
         defines={"BLOCK_N": 64, "BLOCK_K": 32}, webgpu_defines={"BLOCK_K": 32}, rtol=2e-3, atol=2e-3,
         tilelang="gemv/example_gemv.py"),
    Case("gemv_splitk_threads", ref_gemv, {"regular": {"N": 8, "K": 256}, "ragged": {"N": 10, "K": 300}},
         rtol=2e-3, atol=2e-3, tilelang="gemv/example_gemv.py"),
    Case("clean_logits", ref_clean_logits, {"regular": {"M": 4, "S": 512}, "ragged": {"M": 5, "S": 700}},
         defines={"block_K": 256}, inputs=window_logits, random_inputs_ok=False,
         tilelang="dsa_hisa/clean_and_maintain_logits.py"),
    Case("rms_norm", ref_rms_norm, {"regular": {"M": 8, "N": 256}, "ragged": {"M": 5, "N": 300}},
         defines={"blk_k": 64}, rtol=1e-4, atol=1e-5, tilelang="norm/rms_norm.py"),
    Case("online_softmax", ref_softmax, {"regular": {"M": 4, "N": 256}, "ragged": {"M": 3, "N": 300}},
         defines={"BLOCK_N": 128}, rtol=5e-3, atol=1e-3, tilelang="online_softmax/online_softmax.py"),
    Case("per_token_cast_to_fp8", ref_cast_fp8, {"regular": {"M": 32, "N": 256}, "ragged": {"M": 19, "N": 200}},
         rtol=0.07, atol=1e-5, tilelang="cast/example_per_token_cast_to_fp8.py"),
    Case("topk", ref_topk, {"regular": {"M": 32}, "ragged": {"M": 21}}, inputs=distinct_logits, random_inputs_ok=False,
         tilelang="topk/example_topk.py"),
    Case("chunk_cumsum", ref_chunk_cumsum, {"regular": {"B": 2, "S": 64, "H": 3}, "ragged": {"B": 1, "S": 37, "H": 2}},
         defines={"block_S": 16}, rtol=1e-3, atol=1e-3, tilelang="gdn/example_cumsum.py"),
    Case("mha_fwd_bhsd", ref_mha_bhsd, {"regular": {"batch": 1, "heads": 2, "seq_q": 64, "seq_kv": 64},
                                         "ragged": {"batch": 2, "heads": 1, "seq_q": 37, "seq_kv": 45}},
         defines={"block_M": 32, "block_N": 32}, rtol=1e-2, atol=1e-2, webgpu_defines=SMALL_ATTENTION,
         tilelang="flash_attention/example_mha_fwd_bhsd.py"),
    Case("mha_fwd_bhsd_causal", lambda a, s: ref_mha_bhsd(a, s, causal=True),
         {"regular": {"batch": 1, "heads": 2, "seq_q": 64, "seq_kv": 64},
          "ragged": {"batch": 1, "heads": 2, "seq_q": 29, "seq_kv": 50}},
         defines={"block_M": 32, "block_N": 32, "is_causal": True}, build_defines={"is_causal": True},
         webgpu_defines=SMALL_ATTENTION,
         rtol=1e-2, atol=1e-2, tilelang="flash_attention/example_mha_fwd_bhsd.py (is_causal)",
         source="mha_fwd_bhsd"),
    Case("gqa_fwd_bshd", ref_gqa_bshd, {"regular": {"batch": 1, "seq_len": 64, "heads": 4, "head_kv": 1},
                                        "ragged": {"batch": 1, "seq_len": 45, "heads": 4, "head_kv": 1}},
         defines={"block_M": 32, "block_N": 32}, rtol=1e-2, atol=1e-2, webgpu_defines=SMALL_ATTENTION,
         tilelang="flash_attention/example_gqa_fwd_bshd.py"),
    Case("blocksparse_gemm", ref_blocksparse, {"regular": {"M": 64, "N": 64, "K": 64},
                                               "ragged": {"M": 50, "N": 40, "K": 70}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16}, rtol=2e-3, atol=2e-3,
         webgpu_defines={"block_M": 64, "block_N": 64, "block_K": 16},
         tilelang="blocksparse_gemm/example_blocksparse_gemm.py"),
    Case("convolution", ref_conv, {"regular": {"N": 2, "H": 8, "W": 8, "C": 16, "F": 32},
                                   "ragged": {"N": 1, "H": 7, "W": 5, "C": 6, "F": 10}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16}, rtol=2e-3, atol=2e-3,
         tilelang="convolution/example_convolution.py"),
    Case("grouped_gemm", ref_grouped, {"regular": {"G": 3, "K": 64, "N": 64}, "ragged": {"G": 4, "K": 40, "N": 37}},
         inputs=grouped_inputs, random_inputs_ok=False, defines={"block_M": 32, "block_N": 32, "block_K": 16},
         rtol=2e-3, atol=2e-3,
         tilelang="grouped_gemm/example_grouped_gemm_fwd.py"),
    Case("linear_attn_fwd", ref_linear_attn, {"regular": {"B": 1, "S": 32, "H": 2, "DK": 32, "DV": 32},
                                              "ragged": {"B": 1, "S": 27, "H": 1, "DK": 24, "DV": 40}},
         defines={"chunk_size": 16, "BK": 16, "BV": 16}, rtol=2e-2, atol=2e-2,
         webgpu_defines={"chunk_size": 32, "BK": 32, "BV": 32}, fit_targets=("ascend910b",),
         tilelang="linear_attention/example_linear_attn_fwd.py"),
    Case("layernorm_fwd", ref_layernorm_fwd, {"regular": {"N": 8}, "ragged": {"N": 5}}, source="layernorm",
         kernels=["layernorm_fwd"], defines={"D": 64}, rtol=1e-2, atol=2e-2, tilelang="norm/layernorm.py (forward)"),
    Case("layernorm_bwd", ref_layernorm_bwd, {"regular": {"N": 16}, "ragged": {"N": 11}}, source="layernorm",
         kernels=["layernorm_bwd"], inputs=layernorm_bwd_inputs, random_inputs_ok=False,
         defines={"D": 64, "bwd_blk_m": 8},
         rtol=1e-2, atol=2e-2, tilelang="norm/layernorm.py (backward)"),
    Case("gqa_decode_splitkv", ref_gqa_decode, {"regular": {"batch": 1, "heads": 8, "heads_kv": 2, "seqlen_kv": 128},
                                                "ragged": {"batch": 2, "heads": 4, "heads_kv": 1, "seqlen_kv": 70}},
         kernels=["gqa_decode"], defines={"num_split": 3},
         rtol=1e-2, atol=1e-2, webgpu_defines={"block_N": 32},
         tilelang="flash_decoding/example_gqa_decode.py"),
    Case("dequant_gemv_int4", ref_dequant_gemv, {"regular": {"N": 64, "K": 128}, "ragged": {"N": 45, "K": 77}},
         inputs=dequant_inputs, defines={"block_N": 32, "block_K": 32}, rtol=1e-2, atol=1e-2,
         webgpu_defines={"block_N": 32, "block_K": 64}, fit_targets=("ascend910b",),
         tilelang="dequantize_gemm/example_dequant_gemv_fp16xint4.py"),
    Case("dequant_gemm_fp4", ref_dequant_gemm_fp4, {"regular": {"M": 64, "N": 64, "K": 64},
                                                    "ragged": {"M": 50, "N": 37, "K": 75}},
         inputs=dequant_fp4_inputs, defines={"block_M": 32, "block_N": 32, "block_K": 32, "threads": 128},
         gfx942_defines={"block_M": 64, "block_N": 64}, rtol=1e-2, atol=2e-2,
         webgpu_defines={"block_M": 32, "block_N": 32, "block_K": 32, "threads": 128}, fit_targets=("ascend910b",),
         tilelang="dequantize_gemm/example_dequant_gemm_fp4_hopper.py"),
    Case("gemm_fp8", ref_gemm_fp8, {"regular": {"M": 64, "N": 64, "K": 64}, "ragged": {"M": 40, "N": 33, "K": 50}},
         defines={"block_M": 32, "block_N": 32, "block_K": 32}, rtol=1e-4, atol=1e-3,
         gfx942_defines={"threads": 256},  # (128 threads spill registers on gfx942: docs/amd.md)
         webgpu_defines={"block_M": 32, "block_N": 32, "block_K": 32},  # (f8 shared tiles held as f32 there)
         tilelang="gemm_fp8/example_tilelang_gemm_fp8.py"),
    Case("gemm_dynamic", ref_matmul, {"regular": {"M": 64, "N": 64, "K": 64}, "ragged": {"M": 27, "N": 70, "K": 41}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16}, rtol=2e-3, atol=2e-3,
         tilelang="dynamic_shape/example_dynamic.py"),
    Case("mha_bwd_bhsd", ref_attention_bwd, {"regular": {"batch": 1, "heads": 2, "seq_len": 64},
                                             "ragged": {"batch": 1, "heads": 1, "seq_len": 45}},
         inputs=attention_bwd_inputs, random_inputs_ok=False,
         kernels=["flash_bwd_prep", "flash_bwd", "flash_bwd_post"], rtol=2e-2, atol=2e-2,
         webgpu_defines={"block_M": 16, "block_N": 16}, webgpu_limits={"max_storage_buffers": 9},
         tilelang="flash_attention/example_mha_bwd_bhsd.py"),
    Case("mha_bwd_bhsd_causal", lambda a, s: ref_attention_bwd(a, s, causal=True),
         {"regular": {"batch": 1, "heads": 1, "seq_len": 64}, "ragged": {"batch": 1, "heads": 1, "seq_len": 45}},
         inputs=lambda sizes, rng: attention_bwd_inputs(sizes, rng, causal=True), random_inputs_ok=False,
         kernels=["flash_bwd_prep", "flash_bwd", "flash_bwd_post"], defines={"is_causal": True},
         build_defines={"is_causal": True}, rtol=2e-2, atol=2e-2, source="mha_bwd_bhsd",
         webgpu_defines={"block_M": 16, "block_N": 16}, webgpu_limits={"max_storage_buffers": 9},
         tilelang="flash_attention/example_mha_bwd_bhsd.py (is_causal)"),
    Case("blocksparse_attn", ref_blocksparse_attn, {"regular": {"batch": 1, "heads": 2, "seq_len": 96},
                                                    "ragged": {"batch": 1, "heads": 1, "seq_len": 75}},
         inputs=blocksparse_attn_inputs, random_inputs_ok=False, defines={"block_M": 32, "block_N": 32},
         rtol=1e-2, atol=1e-2, webgpu_defines=SMALL_ATTENTION,
         tilelang="blocksparse_attention/example_tilelang_block_sparse_attn.py"),
    Case("mla_decode", ref_mla_decode, {"regular": {"batch": 1, "heads": 16, "seqlen_kv": 64},
                                        "ragged": {"batch": 2, "heads": 16, "seqlen_kv": 45}},
         defines={"dim": 64, "pe_dim": 16, "block_H": 16, "block_N": 64, "threads": 128}, rtol=1e-2, atol=1e-2,
         webgpu_defines={"dim": 64, "pe_dim": 16, "block_H": 16, "block_N": 16, "threads": 128},
         gfx942_defines={"block_H": 16, "block_N": 32}, fit_targets=("ascend910b",),
         tilelang="deepseek_mla/example_mla_decode.py"),
    # issue #30's ports
    Case("warp_specialize_gemm", ref_matmul, {"regular": {"M": 64, "N": 64, "K": 64},
                                              "ragged": {"M": 50, "N": 37, "K": 45}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16}, rtol=2e-3, atol=2e-3,
         webgpu_defines={"block_M": 64, "block_N": 64, "block_K": 32},
         tilelang="warp_specialize/example_warp_specialize_gemm_copy_1_gemm_0.py"),
    Case("warp_specialize_gemm_copy_0_gemm_1", ref_matmul, {"regular": {"M": 64, "N": 64, "K": 64},
                                                            "ragged": {"M": 50, "N": 37, "K": 45}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16}, rtol=2e-3, atol=2e-3,
         webgpu_defines={"block_M": 64, "block_N": 64, "block_K": 32},
         tilelang="warp_specialize/example_warp_specialize_gemm_copy_0_gemm_1.py"),
    Case("gemm_sp", ref_gemm_sp, {"regular": {"M": 64, "N": 64, "K": 128}, "ragged": {"M": 45, "N": 37, "K": 192}},
         inputs=semi_sparse_inputs, random_inputs_ok=False, defines={"block_M": 32, "block_N": 32, "block_K": 64},
         rtol=2e-3, atol=2e-3, fit_targets=("gfx942", "webgpu", "ascend910b"), tilelang="gemm_sp/example_gemm_sp.py"),
    Case("gemm_persistent", ref_matmul, {"regular": {"M": 64, "N": 64, "K": 64}, "ragged": {"M": 70, "N": 45, "K": 37}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16, "threads": 128, "sm_num": 3, "group_size": 2},
         rtol=2e-3, atol=2e-3, fit_targets=("sm80", "gfx942", "ascend910b"),
         webgpu_defines={"block_M": 32, "block_N": 64, "block_K": 32, "threads": 128},
         tilelang="gemm/example_gemm_persistent.py"),
    Case("gemm_splitk_atomic", ref_matmul_f32, {"regular": {"M": 64, "N": 64, "K": 64},
                                                "ragged": {"M": 33, "N": 47, "K": 96}},
         defines={"block_M": 32, "block_N": 32, "block_K": 16, "split_k": 2}, rtol=1e-3, atol=1e-3,
         tilelang="gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py"),
    Case("mha_fwd_bshd", ref_mha_bshd, {"regular": {"batch": 1, "seq_len": 64, "heads": 2},
                                        "ragged": {"batch": 2, "seq_len": 45, "heads": 1}},
         defines={"block_M": 32, "block_N": 32}, rtol=1e-2, atol=1e-2, webgpu_defines=SMALL_ATTENTION,
         tilelang="flash_attention/example_mha_fwd_bshd.py"),
    Case("mha_fwd_bshd_causal", lambda a, s: ref_mha_bshd(a, s, causal=True),
         {"regular": {"batch": 1, "seq_len": 64, "heads": 2}, "ragged": {"batch": 1, "seq_len": 45, "heads": 2}},
         defines={"block_M": 32, "block_N": 32, "is_causal": True}, build_defines={"is_causal": True},
         webgpu_defines=SMALL_ATTENTION, rtol=1e-2, atol=1e-2, source="mha_fwd_bshd",
         tilelang="flash_attention/example_mha_fwd_bshd.py (is_causal)"),
    Case("retention_fwd", ref_retention, {"regular": {"B": 1, "S": 64, "H": 2, "DV": 64},
                                          "ragged": {"B": 2, "S": 45, "H": 2, "DV": 40}},
         defines={"chunk_size": 16, "BK": 32, "BV": 32}, rtol=2e-2, atol=2e-2,
         webgpu_defines={"chunk_size": 32, "BK": 32, "BV": 32}, fit_targets=("ascend910b",),
         tilelang="linear_attention/example_retention_fwd.py"),
    Case("group_per_split_token_cast_to_fp8", ref_group_cast, {"regular": {"BG": 3, "M_max": 16, "N": 256},
                                                               "ragged": {"BG": 2, "M_max": 13, "N": 200}},
         inputs=group_cast_inputs, random_inputs_ok=False, rtol=0.07, atol=1e-5,
         tilelang="cast/example_group_per_split_token_cast_to_fp8.py"),
    Case("topk_selector", ref_topk_selector, {"regular": {"batch": 2, "seq_len": 8192},
                                              "ragged": {"batch": 3, "seq_len": 5000}},
         defines={"topk": 64}, inputs=topk_windows, random_inputs_ok=False, rtol=0, atol=0,
         tilelang="deepseek_v32/topk_selector.py", unordered_rows=("index",)),
]

# (port, target) -> the start of the error that target gives, where it refuses the port.
ASCEND_NO_THREADS = "the AscendC back end has no SIMT threads"
ASCEND_NO_FP8 = "the Ascend 910B has no fp8 types"
EXPECTED_TARGETS: dict[tuple[str, str], str] = {
    # ascend910b (docs/ascend.md): no SIMT threads, no fp8, and
    # the lowering's own limits
    ("gemv_threads", "ascend910b"): ASCEND_NO_THREADS,
    ("gemv_splitk_threads", "ascend910b"): ASCEND_NO_THREADS,
    ("clean_logits", "ascend910b"): ASCEND_NO_THREADS,
    ("per_token_cast_to_fp8", "ascend910b"): ASCEND_NO_FP8,
    ("gemm_fp8", "ascend910b"): ASCEND_NO_FP8,
    ("group_per_split_token_cast_to_fp8", "ascend910b"): ASCEND_NO_FP8,
    ("convolution", "ascend910b"): "T.im2col has no AscendC lowering",
    ("topk_selector", "ascend910b"): ASCEND_NO_THREADS,
    # named barriers (T.sync_threads(id, count)): CUDA's bar.sync, a software barrier in LDS on AMD; none in WGSL
    # (and 1024 threads are over WebGPU's 256)
    ("topk_selector", "webgpu"): "WGSL has only workgroupBarrier()",
}


def main() -> int:  # pragma: no cover - run by hand (and by CI's table check)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if docs/tilelang_ports.md is out of date")
    args = ap.parse_args()
    table = build_table()
    text = render(table)
    if args.check:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC} is out of date: run python scripts/tilelang_ports.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


def build_table() -> dict[tuple[str, str], str]:
    import tempfile

    import tilec
    from tilec.diagnostics import CompileError

    out: dict[tuple[str, str], str] = {}
    suffix = {"sm80": ".cubin", "sm90": ".cubin", "gfx942": ".hsaco", "webgpu": ".wgsl", "ascend910b": ".cpp"}
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            for target in TARGETS:
                try:
                    tilec.compile(EXAMPLES / case.file, target=target, defines=case.defines_for(target),
                                  kernel=case.kernel, limits=case.limits_for(target))
                except CompileError as e:
                    out[case.name, target] = "no: " + e.diagnostics[0].message
                    continue
                dest = Path(tmp) / f"{case.name}.{target}{suffix[target]}"
                out[case.name, target] = _build(case, target, dest)
    return out


def _build(case: Case, target: str, dest: Path) -> str:
    import subprocess

    defines = [f"-D{k}={v}" for k, v in case.defines_for(target).items()]
    kernel = ["--kernel", case.kernel] if case.kernel else []
    fit = ["--fit"] if target in case.fit_targets else []
    cmd = [sys.executable, "-m", "tilec", str(EXAMPLES / case.file), "--target", target, "-o", str(dest),
           *[d for k, d in zip(case.defines_for(target), defines, strict=True) if not fit or k in case.build_defines],
           *kernel, *fit, *case.limit_flags(target)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        first = (r.stderr.strip().splitlines() or ["?"])[0]
        return f"no (toolchain): {first}"
    if case.limit_flags(target):
        return f"builds ({' '.join(case.limit_flags(target))})"
    if fit:
        chosen = ", ".join(f"{k}={v}" for k, v in case.defines_for(target).items() if k not in case.build_defines)
        return f"builds (--fit: {chosen})"
    if target != "webgpu" or not case.random_inputs_ok:
        return "builds"
    import tilec
    from tilec.interp.run import public_kernels

    kernels = public_kernels(tilec.compile(EXAMPLES / case.file, defines=case.defines_for(target)).module)
    for k in kernels:  # each kernel of the case on its own runtime sizes
        if k.name not in (case.kernels or [kernels[0].name]):
            continue
        own = {v.name for v in k.size_vars}
        sizes = ",".join(f"{n}={v}" for n, v in case.sizes["ragged"].items() if n in own)
        r = subprocess.run([sys.executable, "-m", "tilec", "run", str(EXAMPLES / case.file), "--target", "webgpu",
                            "--check", "--size", sizes, *defines, "--kernel", k.name], capture_output=True, text=True,
                           cwd=ROOT)
        if r.returncode != 0 or "FAIL" in r.stdout:
            return "builds; run under lavapipe FAILED: " + ((r.stderr or r.stdout).strip().splitlines() or ["?"])[-1]
    return "runs (lavapipe, matches the interpreter)"


def render(table: dict[tuple[str, str], str]) -> str:
    lines = [
        "# TileLang examples ported to tilec",
        "",
        "Generated by `python scripts/tilelang_ports.py` (do not edit by hand; `--check` verifies it).",
        "Every port lives in [examples/tilelang/](../examples/tilelang/) and is checked against numpy through",
        "the interpreter at a regular and a ragged shape, and its sm80 and gfx942 lowerings are executed lane by",
        "lane by the SIMT model (`tests/test_examples_tilelang.py`). A cell says `builds` when the target's",
        "toolchain (nvcc, hipcc, naga) produced a binary from the port's configuration (WebGPU: with the",
        "smaller tiles its 16 KB of workgroup memory needs, where listed in the script), `runs` when it was also",
        "executed under wgpu/lavapipe at the ragged shape and matched the interpreter, or else the first error",
        "the compiler gives for that target (the reason, and what to write instead). ascend910b: `builds` means",
        "AscendC source generated (no bisheng here); the ports run on tilec's CPU model of the AscendC API",
        "against numpy in tests/test_ascend_ports.py and through CANN's own API in scripts/ascend_real_api.py",
        "(docs/ascend.md).",
        "WebGPU ports whose inputs must be structured, or which need more than WebGPU's default limits (the",
        "flags in the cell, which the runtime requests), say `builds` here and run under lavapipe against numpy",
        "in `tests/test_examples_tilelang.py::test_port_runs_on_lavapipe`.",
        "",
        "| port | TileLang example | " + " | ".join(TARGETS) + " |",
        "|---|---|" + "---|" * len(TARGETS),
    ]
    for case in CASES:
        cells = [table[case.name, t].replace("|", "\\|") for t in TARGETS]
        lines.append(f"| [{case.name}](../examples/tilelang/{case.file}) | `{case.tilelang}` | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
